"""测试的唯一路径配置：仓库根目录（lab_common 包）、lecture07/（共用模块）、figures/（画图脚本）放进 sys.path；
警告一律当错误（filterwarnings = error）。加载数字开头的脚本用 lab_common.script_tools.load_script。"""
import contextlib
import io
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LECTURE = os.path.join(ROOT, "lecture07")
for _p in (os.path.join(ROOT, "figures"), LECTURE, ROOT):
    if _p not in sys.path:
        sys.path.insert(0, _p)

from lab_common.script_tools import load_script  # noqa: E402,F401  测试文件 from conftest import load_script


def pytest_configure(config):
    config.addinivalue_line("filterwarnings", "error")


# ---------------------------------------------------------------- 两个 pytest 进程（make test 用 -n 2 --dist loadgroup）
@pytest.hookimpl(tryfirst=True)   # 要在 xdist 读 xdist_group 之前加上
def pytest_collection_modifyitems(config, items):
    """同一个测试文件的测试放在同一个进程里（模块级的 fixture 只算一次）；标了 xdist_group 的跟着它的组走。"""
    for item in items:
        if not any(True for _ in item.iter_markers("xdist_group")):
            item.add_marker(pytest.mark.xdist_group(item.module.__name__))


# ---------------------------------------------------------------- 跑一遍脚本：本进程里 / 新的解释器里
_RUNS = {}


def run_main(name):
    """main([]) 在本进程里跑一遍（每个进程每个脚本只跑一次）：返回 (打印的文字, {演示号: 演示返回的 dict})。

    冒烟测试和"换一个进程输出也一样"的测试共用这一遍。
    """
    if name not in _RUNS:
        m = load_script(name)
        got = {}
        with pytest.MonkeyPatch.context() as mp:
            for k, fn in list(m.DEMOS.items()):
                mp.setitem(m.DEMOS, k, lambda *a, fn=fn, k=k: got.setdefault(k, fn(*a)))
            buf = io.StringIO()
            with contextlib.redirect_stdout(buf):
                assert m.main([]) == 0
        _RUNS[name] = (buf.getvalue(), got)
    return _RUNS[name]


def start_fresh(name, *args):
    """在新的 Python 解释器里启动脚本（新的哈希种子；NO_COLOR，管道输出 80 列），返回 Popen。"""
    return subprocess.Popen([sys.executable, os.path.join(LECTURE, name + ".py"), *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=ROOT, env=dict(os.environ, NO_COLOR="1"))


def finish_fresh(proc):
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-2000:]
    return out


def assert_settings_refused(module, cases, argv):
    """cases = ((常量名, 不合理的值), …)：逐个改掉模块里的设置，main(argv) 必须一行拒绝（SystemExit 2），再改回去。"""
    for name, bad in cases:
        old = getattr(module, name)
        setattr(module, name, bad)
        try:
            with pytest.raises(SystemExit) as e:
                module.main(argv)
            assert e.value.code == 2, name
        finally:
            setattr(module, name, old)
