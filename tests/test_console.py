"""输出：管道里没有颜色控制符、80 列、中文按 2 列算宽度、观察列表折行；编不出某些字符的终端（GBK、ASCII）、
从符号链接启动的脚本。"""
import doctest
import io
import os
import subprocess
import sys

import pytest

from lab_common import console
from lab_common.console import print_header, print_observations, print_table, wrap_cjk
from conftest import LECTURE, call_main, fresh_env, load_script, run_main, start_fresh
from rich.cells import cell_len

NUMBERED = ["01_kv_cache_memory", "02_paged_attention", "03_sharing_and_cow", "04_prefix_caching", "04b_radix_cache",
            "05_kv_store", "06_triton_cow_clone"]


def test_doctests():
    assert doctest.testmod(console).failed == 0


def test_piped_output_is_plain_and_fits_80_columns(capsys, monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    print_header("演示：一个很长很长的中文标题，" * 4)
    print_table(["策略", "容量（块）", "命中率"], [["LRU", "10,000", "0.46"], ["LengthAwareCache", "1,000", "0.30"]],
                caption="说明文字" * 30)
    print_observations(["这是一条由数字拼出来的观察：LRU 的命中率 0.46 高于 LFU 的 0.39。" * 3])
    out = capsys.readouterr().out
    assert "\x1b[" not in out
    assert max(cell_len(line) for line in out.splitlines()) <= 80
    assert "LengthAwareCache" in out and "0.46" in out


@pytest.mark.parametrize("script", NUMBERED)
def test_help_and_list_fit_80_columns(script, monkeypatch):
    """--help、--list 管道里按 80 列折行（中文算 2 列；argparse 自己按 1 列数）：演示的题目一个字不少。"""
    from lab_common.script_tools import demo_title
    monkeypatch.delenv("COLUMNS", raising=False)
    m = load_script(script)
    titles = ["".join(demo_title(fn).split()) for fn in m.DEMOS.values()]
    for args in (["--help"], ["--list"]):
        rc, out, err = call_main(m, args)
        assert rc == 0 and err == "" and max(cell_len(x) for x in out.splitlines()) <= 80, (args, out)
        assert all(t in "".join(out.split()) for t in titles)


def test_numbers_are_right_aligned(capsys):
    print_table(["a", "b"], [["x", "1"], ["yy", "1,000"]])
    lines = capsys.readouterr().out.splitlines()
    row = next(line for line in lines if line.startswith("x"))
    assert row.rstrip().endswith("    1")


def test_wrap_keeps_ascii_words_whole_and_indents():
    lines = wrap_cjk("  1. " + "前缀缓存 prefix caching 省下了 82% 的计算。" * 4, 40, indent=5)
    assert all(cell_len(x) <= 42 for x in lines)
    assert all(x.startswith("     ") for x in lines[1:])
    assert "prefix" in "".join(lines) and "prefi\n" not in "\n".join(lines)


# ---------------------------------------------------------------- 任何终端
def test_unencodable_characters_become_plain_text(monkeypatch):
    """stdout 是 ASCII / GBK 时，编不出的字符换成看得懂的写法（上标写成 ^），不抛 UnicodeEncodeError。"""
    for enc, want in (("ascii", b"10^9 B/s, -3 us, n^2 x 2"), ("gbk", "10^9 B/s, -3 us, n^2 × 2".encode("gbk"))):
        raw = io.BytesIO()
        stream = io.TextIOWrapper(raw, encoding=enc)
        console.use_plain_fallback(stream)
        monkeypatch.setattr(sys, "stdout", stream)
        print("10⁹ B/s, −3 µs, n² × 2", end="")
        stream.flush()
        assert raw.getvalue() == want


def test_utf8_stdout_is_left_alone():
    stream = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    console.use_plain_fallback(stream)
    assert stream.errors == "strict"


def test_tables_look_the_same_on_any_encoding(monkeypatch):
    """排版不看编码：GBK 的终端上表格线不换成 ASCII，和 UTF-8 的输出只差被换掉的字符。"""
    outs = []
    for enc in ("utf-8", "gbk"):
        raw = io.BytesIO()
        stream = io.TextIOWrapper(raw, encoding=enc)
        console.use_plain_fallback(stream)
        monkeypatch.setattr(sys, "stdout", stream)
        print_table(["层级", "带宽"], [["HBM", "2,039"], ["SSD", "6.9"]], caption="1 GB/s = 10⁹ B/s")
        stream.flush()
        outs.append(raw.getvalue().decode(enc))
    assert outs[1] == outs[0].replace("10⁹", "10^9") and "─" in outs[1]


@pytest.mark.xdist_group("determinism")            # 和 01 的"换进程输出也一样"共用本进程里的那一遍
def test_ascii_stdout_gets_the_same_output_with_plain_replacements():
    proc = start_fresh("01_kv_cache_memory", env=fresh_env(PYTHONIOENCODING="ascii"), text=False)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0 and b"Traceback" not in err, err[-2000:]
    assert out == run_main("01_kv_cache_memory")[0].encode("ascii", "lab_plain")


@pytest.mark.parametrize("script", NUMBERED)
def test_a_script_runs_through_a_symlink(script, tmp_path):
    """ln -s lecture07/0X.py 别处/0X.py 以后照样能跑（找 lab_common 时顺着链接找到真正的文件）。"""
    link = tmp_path / f"{script}.py"
    link.symlink_to(os.path.join(LECTURE, f"{script}.py"))
    p = subprocess.run([sys.executable, str(link), "--help"], capture_output=True, text=True, cwd=tmp_path,
                       env=fresh_env(), timeout=120)
    assert p.returncode == 0 and "--demo" in p.stdout, p.stderr[-2000:]     # import 全部成功，才走到参数解析
