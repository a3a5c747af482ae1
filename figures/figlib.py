"""figures/plot_XX.py 共用的小工具：找路径、按文件名加载 lecture07 的脚本、统一的 main()。

每个 plot_XX.py 都是这样的结构：
    FIGURES = ("XX_a.png", "XX_b.png")       # 它生成的图（Makefile 从这里读出目标）
    def compute(): ...                         # 调 lecture07 的函数算出数据（数字不手抄）
    def plot_a(data, out): ...                 # 只画图：小数据也能画（测试就这样用）
        fig, ax = plt.subplots(figsize=SLIDE)  # 一页 16:9 幻灯片；字号用默认的 16 pt，不写更小的
        finish(fig, "标题说结论", "说明：配置、出处")   # 标题里的每个数都是脚本也印出来的数
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

from lab_common.endings import ended_quietly, quiet_endings  # noqa: E402
quiet_endings()  # 最先做（还没 import matplotlib）：Ctrl-C、目录只读都只打一行
from lab_common.script_tools import load_script  # noqa: E402,F401  画图和测试共用同一个加载器
from lab_common.plotting import SLIDE, font_description, glyph_warnings_as_errors, plt, save_png, setup_matplotlib  # noqa: E402,F401
from lab_common.console import wrap_cjk  # noqa: E402


def quiet(fn, *args, **kwargs):
    """调用一个 demo 函数、拿它返回的数字，但不打印它的表格（make all 的输出保持简短）。"""
    with contextlib.redirect_stdout(io.StringIO()):
        return fn(*args, **kwargs)


TITLE_PT = 22      # 标题（结论）的字号；其余文字是 plotting 的默认 16 pt（铺满 13.33 英寸的幻灯片时就是这么大）
_CELL_IN = 0.5 * 16 / 72   # 16 pt 时一个半角字符约多宽（英寸）；汉字占两格（rich 的 cell_len）


def wrap(text, pt=16, width=SLIDE[0]):
    """按图宽 width（英寸，默认一页 16:9 幻灯片）把一段文字折成几行：中文按两格算，英文单词、数字不拆开。"""
    cells = int((width - 0.4) / (_CELL_IN * pt / 16))
    return [line for part in text.split("\n") for line in wrap_cjk(part, cells)]


def caption(fig, text):
    """图下方的说明（配置、出处），按幻灯片宽度折行；返回它占几行（finish 按它给图留出底边）。"""
    lines = wrap(text, width=fig.get_figwidth())
    fig.text(0.015, 0.012, "\n".join(lines), ha="left", va="bottom", color="0.25")
    return len(lines)


def finish(fig, title, note="", legend=None, **layout):
    """一页幻灯片的收尾：上面是结论（标题，22 pt），下面是说明（16 pt），中间留给各个面板（tight_layout）。
    legend=(线, 名字)：几个面板共用的一个图例，一行，放在说明上面（不遮住任何面板里的数据）。"""
    heads = wrap(title, TITLE_PT)
    fig.suptitle("\n".join(heads), fontsize=TITLE_PT, y=0.985, va="top")
    n = caption(fig, note) if note else 0
    bottom = 0.0
    if n:
        bottom = (n * 16 * 1.3 / 72 + 0.12) / SLIDE[1]
    if legend:
        handles, labels = legend
        fig.legend(handles, labels, loc="lower center", ncol=len(labels), frameon=False, bbox_to_anchor=(0.5, bottom),
                   handlelength=1.6, columnspacing=1.2)
        bottom += (16 * 1.3 / 72 + 0.25) / SLIDE[1]        # 一行图例的高度（16 pt）加上下的空
    fig.tight_layout(rect=(0, bottom, 1, 1), **layout)      # tight_layout 自己给 suptitle 留位置


def main(argv, description, build):
    """build(out_dir) → 写出的 PNG 路径列表。打印用的字体和写出的文件；缺字直接报错。
    目录只读、Ctrl-C、管道被关：一行（endings.ended_quietly），不打印 traceback。"""
    return ended_quietly(lambda: _main(argv, description, build), os.path.basename(sys.argv[0] or "figlib"))


def _main(argv, description, build):
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
