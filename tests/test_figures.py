"""figures/plot_*.py 没有中文字体时照样画完（只在 stderr 说一行）。每张图和提交的逐字节相同、不要显示器，
由 .ci/run 的 make all 查（它在干净的 clone 上重画全部的图，git status 必须干净），这里不再画第二遍。"""
import os
import subprocess
import sys

from conftest import ROOT

FIGURES = os.path.join(ROOT, "figures")
NO_FONT = ("import os, runpy, sys; from lab_common import plotting; plotting.CJK_FONTS = (); sys.argv = sys.argv[1:]; "
           "sys.path.insert(0, os.path.dirname(sys.argv[0])); runpy.run_path(sys.argv[0], run_name='__main__')")
#          ↑ 假装一个中文字体都没有（GPU 机器上就是这样），再照常跑画图脚本


def test_plot_01_without_any_cjk_font(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "MPLBACKEND")}
    env["PYTHONPATH"] = ROOT
    p = subprocess.run([sys.executable, "-c", NO_FONT, os.path.join(FIGURES, "plot_01.py"), "--out", str(tmp_path)],
                       cwd=ROOT, env=env, capture_output=True, text=True, encoding="utf-8", timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "没有中文字体" in p.stderr
    assert sorted(os.listdir(tmp_path)) == sorted(f for f in os.listdir(FIGURES) if f.startswith("01_"))
