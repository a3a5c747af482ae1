"""怎样结束（lab_common.endings.ended_quietly）、出处跟着设置走（lab_common.settings.Source）、trace 的负载参数：
每种情况一个小例子，答案手算得出。"""
import errno
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import LECTURE, ROOT, load_script
from lab_common import endings
from lab_common.settings import Source, changed, missing_setting


def _raise(err):
    def fn():
        raise err
    return fn


def test_ctrl_c_is_130_and_one_line(capsys):
    assert endings.ended_quietly(_raise(KeyboardInterrupt()), "x.py") == 130
    err = capsys.readouterr().err
    assert err.strip() == "x.py: 已中断（Ctrl-C）" and "Traceback" not in err


def test_missing_setting_is_one_line_exit_2(capsys):
    assert endings.ended_quietly(_raise(NameError("name 'BLOCK_SIZE' is not defined", name="BLOCK_SIZE")), "x.py") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "BLOCK_SIZE" in err and err.startswith("x.py: ")
    with pytest.raises(NameError):                          # 代码里的拼写错误（小写名字）照常报
        endings.ended_quietly(_raise(NameError("name 'foo' is not defined", name="foo")), "x.py")
    assert missing_setting(NameError("x", name="Foo")) is None


def test_unwritable_directory_is_one_line_exit_1(capsys):
    for code in (errno.EROFS, errno.EACCES, errno.ENOSPC):
        e = OSError(code, os.strerror(code), "figures/a.png")
        assert endings.ended_quietly(_raise(e), "plot.py") == 1
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "figures/a.png" in err
    with pytest.raises(OSError):                            # 别的 OSError（文件不存在）照常报
        endings.ended_quietly(_raise(OSError(errno.ENOENT, "no", "x")), "x.py")


def test_closed_pipe_ends_quietly():
    """`01 | head -1`：只有 head 的一行，stderr 什么也没有，退出码 0（rich 自己会 exit(1)，这里交给运行器）。"""
    cmd = f"{sys.executable} 01_kv_cache_memory.py --demo 1 | head -1; echo rc=${{PIPESTATUS[0]}}"
    p = subprocess.run(["bash", "-c", cmd], cwd=LECTURE, capture_output=True, text=True, timeout=120)
    assert p.stderr == "" and p.stdout.strip().endswith("rc=0")


def test_missing_package_is_one_line_exit_2(capsys, monkeypatch, tmp_path):
    """用错了 Python（没装 rich）：一行，说缺哪个包、用 .venv 里的 Python；本课自己的模块、包里缺的子模块照常报。"""
    assert endings.ended_quietly(_raise(ModuleNotFoundError("No module named 'rich'", name="rich")), "x.py") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("x.py: 没有装 rich（这个 Python 是 ") and "python" in err
    for name in ("kv_store.eviction", "numpyy", "numpy.linalg._umath_linalg", "torch"):
        with pytest.raises(ModuleNotFoundError):
            endings.ended_quietly(_raise(ModuleNotFoundError(f"No module named {name!r}", name=name)), "x.py")
    monkeypatch.setattr(endings, "ROOT", str(tmp_path))          # 还没有 .venv：先 make demo
    line = endings.missing_package(ModuleNotFoundError("No module named 'numpy'", name="numpy"))
    assert "make demo（建好 .venv），再用 " in line and os.path.join(".venv", "bin", "python") in line


def _site_packages_with_only(tmp_path, names):
    """一个目录，里面只链接着 site-packages 里的这几个包（numpy 连同它的 numpy.libs 等）：配上 python -S，
    新的解释器就只看得见它们。"""
    import importlib.util
    for name in names:
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:
            continue
        site = os.path.dirname(os.path.dirname(spec.origin))
        for entry in os.listdir(site):
            if entry == name or entry.startswith(name + ".") or entry.startswith(name + "-"):
                (tmp_path / entry).symlink_to(os.path.join(site, entry))
    return str(tmp_path)


@pytest.mark.parametrize("script", ["04_prefix_caching", "05_kv_store", "06_triton_cow_clone"])
@pytest.mark.parametrize("visible, missing", [((), "numpy"), (("numpy",), "rich")])
def test_wrong_python_is_one_line_exit_2(script, visible, missing, tmp_path):
    """真的新解释器：python -S（不加载 site-packages），PYTHONPATH 上只有 visible 里的包。"""
    env = dict(os.environ, PYTHONPATH=_site_packages_with_only(tmp_path, visible))
    p = subprocess.run([sys.executable, "-S", f"{script}.py", "--demo", "1"], cwd=LECTURE, env=env,
                       capture_output=True, text=True, timeout=120)
    if script == "06_triton_cow_clone" and missing == "numpy":
        missing = "rich"                       # 06 先 import rich（经 lab_common.console），不碰 numpy
    assert p.returncode == 2 and p.stdout == "" and p.stderr.count("\n") == 1, p.stderr
    assert p.stderr.startswith(f"{script}.py: 没有装 {missing}（") and "Traceback" not in p.stderr
    assert os.path.join(".venv", "bin", "python") in p.stderr


def test_a_figure_without_matplotlib_is_one_line(tmp_path):
    """画图脚本也一样（它们第一个 import figlib）：看得见 numpy、rich（和它要的包），看不见 matplotlib。"""
    env = dict(os.environ, PYTHONPATH=_site_packages_with_only(tmp_path, ("numpy", "rich", "pygments", "markdown_it",
                                                                          "mdurl")))
    p = subprocess.run([sys.executable, "-S", os.path.join(ROOT, "figures", "plot_02.py"), "--out", str(tmp_path)],
                       env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and p.stderr.startswith("plot_02.py: 没有装 matplotlib（") and p.stderr.count("\n") == 1, \
        p.stderr


SCRIPTS = ("01_kv_cache_memory", "02_paged_attention", "03_sharing_and_cow", "04_prefix_caching", "04b_radix_cache",
           "05_kv_store", "06_triton_cow_clone")


@pytest.mark.parametrize("script", SCRIPTS)
def test_ctrl_c_while_importing_numpy_or_rich_is_one_line(script, tmp_path):
    """脚本的头零点几秒（还在 import numpy、rich）按 Ctrl-C：一行、退出码 130。假的 numpy / rich 一 import 就抛
    KeyboardInterrupt（PYTHONPATH 排在 site-packages 前面），时间点就不靠运气。"""
    for name in ("numpy", "rich"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text("raise KeyboardInterrupt\n")
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    p = subprocess.run([sys.executable, f"{script}.py", "--demo", "1"], cwd=LECTURE, env=env, capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 130 and p.stderr.strip().count("\n") == 0 and "Traceback" not in p.stderr, p.stderr


@pytest.mark.parametrize("script", SCRIPTS)
def test_quiet_endings_is_installed_before_any_other_import(script):
    """Python 自己启动、编译脚本的那几十毫秒之后，第一件事就是 quiet_endings()：之前只 import 了 os、sys。"""
    import ast
    with open(os.path.join(LECTURE, f"{script}.py"), encoding="utf-8") as f:
        tree = ast.parse(f.read())
    before = []
    for node in tree.body:
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and getattr(node.value.func, "id", "") == "quiet_endings":
            break
        if isinstance(node, ast.Import):
            before += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            before.append(node.module)
    else:
        pytest.fail("没有调用 quiet_endings()")
    assert before == ["os", "sys", "lab_common.endings"], before


def test_a_renamed_setting_in_a_script_is_one_line():
    with open(os.path.join(LECTURE, "02_paged_attention.py"), encoding="utf-8") as f:
        src = f.read()
    src = src.replace("\nWALK_DECODE = 4 ", "\nWALK_DECODES = 4 ", 1)
    runner = ("import sys, os; p = sys.argv[1]; sys.argv = sys.argv[1:]; sys.path[0] = os.path.dirname(p); "
              "exec(compile(sys.stdin.read(), p, 'exec'), {'__name__': '__main__', '__file__': p})")
    p = subprocess.run([sys.executable, "-c", runner, os.path.join(LECTURE, "02_paged_attention.py"), "--demo", "1"],
                       input=src, capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "WALK_DECODE" in p.stderr and "Traceback" not in p.stderr


def test_source_holds_only_the_papers_value():
    src = Source((19.31, 58.45), "论文图 11(b)", "均值")
    assert src.holds((19.31, 58.45)) and src.holds([19.31, 58.45]) and not src.holds((19.31, 58.4))
    assert src.beside((19.31, 58.45)) == "论文图 11(b) 均值"
    assert src.beside((20, 60)).endswith("论文图 11(b) 是 (19.31, 58.45)") and src.beside((20, 60), own="") == ""
    assert Source(16, "§7.2").holds(16.0) and not Source(16, "§7.2").holds(17)
    assert changed({"A": 1, "B": 2}, {"A": Source(1, "p"), "B": Source(3, "p")}) == ["B"]


def test_scripts_print_the_source_only_while_the_setting_holds(monkeypatch, capsys):
    """03 的长度按 ALPACA_MEAN 抽：还是论文的均值时说图 11(b)；改了就说是你设的，并把论文的值并排。"""
    m = load_script("03_sharing_and_cow")
    assert m.ALPACA_SOURCE.beside(m.ALPACA_MEAN, m.means_text) == "vLLM 论文图 11(b) Alpaca 的均值"
    assert m.ALPACA_SOURCE.beside((30, 60), m.means_text) == "你设的值；vLLM 论文图 11(b) 是 19.31 / 58.45"
    s01 = load_script("01_kv_cache_memory")
    monkeypatch.setattr(s01, "MAX_SEQ", 4096)
    assert s01.main(["--demo", "2"]) == 0
    out = capsys.readouterr().out
    assert "20.4%" not in out and "MAX_SEQ（4,096）" in out                 # 图 2 的数不再并排


@pytest.mark.parametrize("name,value", [("FAMILY_WEIGHTS", (0.5, 0.3, 0.2)), ("MEAN_TURNS", 0.5),
                                        ("TEMPLATES_PER_FAMILY", 0), ("TEMPLATE_EXTRA", (5, 5)), ("P_ONE_SHOT", 1.5)])
def test_workload_settings_are_checked_when_a_trace_is_made(monkeypatch, capsys, name, value):
    from kv_store import traces
    monkeypatch.setattr(traces, name, value)
    with pytest.raises(SystemExit) as e:
        traces.make_trace(seed=12345, n_requests=7)
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.count("\n") == 1 and f"kv_store/traces.py 的 {name}" in err


@pytest.mark.skipif(not hasattr(os, "fork"), reason="进程池只在有 fork 的平台上分进程")
def test_ctrl_c_while_the_pool_computes_is_one_line_and_leaves_no_process():
    """进程池（lab_common.workers.run_jobs）正在算时按 Ctrl-C：一行、退出码 130；还在算的子进程都被收走，
    不会卡住（把几 MB 的参数塞进管道的进程池，关的时候会等一个永远读不完的管道）。"""
    code = ("import sys, time; from lab_common.endings import ended_quietly; from lab_common.workers import run_jobs; "
            "sys.exit(ended_quietly(lambda: run_jobs([(time.sleep, (60,))] * 3, workers=2), 'x.py'))")
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    children = []
    for _ in range(200):                                   # 等两个子进程都起来
        time.sleep(0.05)
        kids = f"/proc/{proc.pid}/task/{proc.pid}/children"
        children = ["?", "?"]                              # 没有 /proc 的系统（macOS）：不等，也不查子进程
        if os.path.exists(kids):
            with open(kids) as f:
                children = f.read().split()
        if len(children) == 2:
            break
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=20)
    assert proc.returncode == 130 and err.strip() == "x.py: 已中断（Ctrl-C）", err
    assert not [c for c in children if c != "?" and os.path.exists(f"/proc/{c}")]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="进程池只在有 fork 的平台上分进程")
def test_prints_inside_a_pooled_job_show_up_once():
    """学生在策略类里加的 print：进程池里算时也印出来，而且主进程 fork 之前没写出的输出不会多印一份。"""
    code = ("from lab_common.workers import run_jobs; print('before'); "
            "run_jobs([(print, ('job 1',)), (print, ('job 2',))], workers=2); print('after')")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}        # 管道输出按块缓冲，和平时一样
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0 and sorted(out.stdout.split("\n")) == ["", "after", "before", "job 1", "job 2"], out
