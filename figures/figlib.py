"""figures/plot_XX.py 共用的小工具：找路径、按文件名加载 lecture07 的脚本、统一的 main()。

每个 plot_XX.py 都是这样的结构：
    FIGURES = ("XX_a.png", "XX_b.png")       # 它生成的图（Makefile 从这里读出目标）
    def compute(): ...                         # 调 lecture07 的函数算出数据（数字不手抄）
    def plot_a(data, out): ...                 # 只画图：小数据也能画（测试就这样用）
    def main(argv=None): return figlib.main(argv, __doc__, build)

运行：python figures/plot_04.py [--out DIR]      （默认写到 figures/）
"""
import argparse
import contextlib
import io
import os
import sys
import time

FIGDIR = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(FIGDIR)
LECTURE = os.path.join(ROOT, "lecture07")
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)   # python figures/plot_XX.py：让 lab_common 包可以 import

from lab_common.script_tools import load_script  # noqa: E402,F401  画图和测试共用同一个加载器
from lab_common.plotting import font_description, glyph_warnings_as_errors, plt, save_png, setup_matplotlib  # noqa: E402,F401


def quiet(fn, *args, **kwargs):
    """调用一个 demo 函数、拿它返回的数字，但不打印它的表格（make all 的输出保持简短）。"""
    with contextlib.redirect_stdout(io.StringIO()):
        return fn(*args, **kwargs)


def caption(fig, text):
    """图下方的一行说明（配置、出处）。"""
    fig.text(0.5, 0.01, text, ha="center", va="bottom", fontsize=12, color="0.25", wrap=True)


def main(argv, description, build):
    """build(out_dir) → 写出的 PNG 路径列表。打印用的字体和写出的文件；缺字直接报错。"""
    ap = argparse.ArgumentParser(description=(description or "").strip().splitlines()[0])
    ap.add_argument("--out", default=FIGDIR, help="图的输出目录（默认 figures/）")
    args = ap.parse_args(argv)
    setup_matplotlib()
    glyph_warnings_as_errors()
    t0 = time.perf_counter()
    paths = build(args.out)
    rel = ", ".join(os.path.relpath(p) for p in paths)
    print(f"{rel}（{time.perf_counter() - t0:.1f} s；{font_description(with_path=False)}）")
    return 0
