"""换一个进程、换一种终端，输出都是对的。

- 同一条命令，换一个进程（新的哈希种子）输出也逐字节相同（NO_COLOR=1，管道输出固定 80 列）——而且新进程的
  标准输出是 GBK（中文 Windows 上重定向到文件时就是这样）：编不出的字符（'³'、'−'、'⁹'……）换成
  console.plain_fallback 的写法，不抛 UnicodeEncodeError。
- 脚本打印的每张表，在 60 列的终端上重排时不把任何一个数字拆到两行。

每个 lecture07/0*.py（GPU 脚本除外）：新解释器里以 PYTHONIOENCODING=gbk 跑一遍，和本进程里 main([]) 的输出
按同样的规则编成 GBK 的字节比。本进程的那一遍是 conftest.run_main（整个会话每个脚本只跑一遍，两个 pytest
进程共用），和该脚本的冒烟测试、test_golden 比的是同一遍。
"""
import contextlib
import glob
import io
import os

import pytest
from conftest import LECTURE, REAL_TRACE, TABLES, fresh_env, load_script, run_main, start_fresh
from lab_common import console
from lab_common.console import print_table
from rich.cells import cell_len

SCRIPTS = sorted(os.path.basename(p)[:-3] for p in glob.glob(os.path.join(LECTURE, "0*.py"))
                 if "triton" not in os.path.basename(p))          # 06_triton_cow_clone 要 GPU


def output_here(name):
    """本进程里 main([]) 的输出（conftest.run_main：整个会话只跑一遍；04 的命中表和 04 的测试共用同一份）。"""
    return run_main(name)[0]


def finish_bytes(proc):
    out, err = proc.communicate(timeout=300)
    err = err.decode("gbk", "replace")
    assert proc.returncode == 0 and "Traceback" not in err, err[-2000:]
    return out


@pytest.mark.parametrize("name", SCRIPTS)
def test_same_output_in_a_fresh_process_on_a_gbk_stdout(name):
    proc = start_fresh(name, env=fresh_env(PYTHONIOENCODING="gbk"), text=False)   # 新进程和本进程同时跑
    here = output_here(name)                                                      # 同时本进程跑（或拿缓存）
    fresh = finish_bytes(proc)
    assert here.strip(), f"{name}：没有输出"
    assert max(cell_len(x) for x in here.splitlines()) <= 80          # 管道输出一行也不超过 80 列
    assert fresh == here.encode("gbk", "lab_plain")


@pytest.mark.parametrize("name", SCRIPTS)
def test_tables_keep_every_number_whole_at_60_columns(name, monkeypatch, capsys):
    """每张表按 60 列的终端重排：每个数字（和英文单词）完整地出现在某一行里，表不比终端宽。"""
    output_here(name)
    monkeypatch.setattr(console, "_on_terminal", lambda: True)
    monkeypatch.setenv("COLUMNS", "60")
    monkeypatch.setenv("NO_COLOR", "1")
    assert TABLES[name], f"{name} 没有打印表"
    for headers, rows in TABLES[name]:
        capsys.readouterr()
        print_table(headers, rows)
        lines = capsys.readouterr().out.splitlines()
        assert max(cell_len(x) for x in lines) <= 60, "\n".join(lines)
        whole = {t for x in lines for t in console._TOKEN.findall(x)}          # 每一行里完整的数字和单词
        for row in rows:
            for tok in {t for cell in row for t in console._TOKEN.findall(cell)}:
                assert tok in whole, (tok, "\n".join(lines))


@pytest.mark.real_trace
def test_real_trace_run_is_deterministic():
    """真实 trace 上的演示 3：新进程打印的字节和本进程 main 的一样（本进程的命中表用 04 的测试共享的那一份）。"""
    import helpers_04
    proc = start_fresh("04_prefix_caching", "--trace", REAL_TRACE, "--demo", "3", text=False)
    m = load_script("04_prefix_caching")
    buf = io.StringIO()
    with pytest.MonkeyPatch.context() as mp, contextlib.redirect_stdout(buf):
        helpers_04.share_slow_calls(m, mp, "04_prefix_caching")
        assert m.main(["--trace", REAL_TRACE, "--demo", "3"]) == 0
    assert finish_bytes(proc) == buf.getvalue().encode("utf-8")
