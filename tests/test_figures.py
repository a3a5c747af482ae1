"""figures/plot_*.py：每个脚本不要显示器、画进临时目录，画出的文件和提交的逐字节相同；没有中文字体时
照样画完（只在 stderr 说一行）。这些测试都不要求装了中文字体。"""
import glob
import os
import pathlib
import subprocess
import sys

import pytest

from conftest import ROOT

FIGURES = os.path.join(ROOT, "figures")
SCRIPTS = sorted(glob.glob(os.path.join(FIGURES, "plot_*.py")))
NO_FONT = ("import os, runpy, sys; from lab_common import plotting; plotting.CJK_FONTS = (); sys.argv = sys.argv[1:]; "
           "sys.path.insert(0, os.path.dirname(sys.argv[0])); runpy.run_path(sys.argv[0], run_name='__main__')")
#          ↑ 假装一个中文字体都没有（GPU 机器上就是这样），再照常跑画图脚本


def draw(args, out):
    """在新的解释器里画图（没有 DISPLAY），返回 (退出码, stderr, {文件名: 字节})。"""
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "MPLBACKEND")}
    env["PYTHONPATH"] = ROOT
    p = subprocess.run([sys.executable, *args, "--out", str(out)], cwd=ROOT, env=env, capture_output=True, text=True,
                       encoding="utf-8", timeout=600)
    files = {}
    if os.path.isdir(out):
        files = {f: (out / f).read_bytes() for f in sorted(os.listdir(out))}
    return p.returncode, p.stderr, files


@pytest.mark.parametrize("script", SCRIPTS, ids=os.path.basename)
def test_plot_is_headless_and_makes_the_committed_figures(script, tmp_path):
    """画进临时目录，文件和 figures/ 里提交的逐字节相同：幻灯片就是现在的代码画的（.ci/run 的 make all 也这样查）。"""
    code, err, drawn = draw([script], tmp_path)
    assert code == 0, err[-2000:]
    prefix = os.path.basename(script)[len("plot_"):-len(".py")] + "_"
    assert drawn and all(f.startswith(prefix) for f in drawn), f"图的文件名要以 {prefix} 开头"
    committed = sorted(f for f in os.listdir(FIGURES) if f.startswith(prefix) and not f.endswith(".py"))
    assert sorted(drawn) == committed
    if "没有中文字体" in err:
        pytest.skip("这台机器没有中文字体：字形不同，不和提交的图逐字节比")
    assert [f for f in drawn if drawn[f] != pathlib.Path(FIGURES, f).read_bytes()] == [], \
        "和提交的图不同：make all 重画，看一眼再提交"


def test_plot_01_without_any_cjk_font(tmp_path):
    code, err, files = draw(["-c", NO_FONT, os.path.join(FIGURES, "plot_01.py")], tmp_path)
    assert code == 0, err[-2000:]
    assert "没有中文字体" in err and sorted(files) == sorted(f for f in os.listdir(FIGURES) if f.startswith("01_"))
