"""figures/plot_NN.py 共用的：按文件名加载 lecture07 的脚本、静音调用它的演示、存一页幻灯片（--out DIR：写到 DIR）。

    s04 = figlib.script("04_prefix_caching")       # lecture07/04_prefix_caching.py 作为模块
    d = figlib.quiet(s04.demo_hit_ratio)           # 演示返回的数据；它印的表不显示
    fig, ax = figlib.plt.subplots(figsize=figlib.SLIDE)
    figlib.save(fig, "04_hit_ratio", "结论", "配置、出处")   # figures/04_hit_ratio.png 和 .svg；GIF 写到 figlib.path("x.gif")
"""
import argparse
import contextlib
import importlib.util
import io
import os
import sys

FIGURES = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(FIGURES)
LECTURE = os.path.join(ROOT, "lecture07")
sys.path[:0] = [p for p in (ROOT, LECTURE) if p not in sys.path]   # lab_common；脚本 import 的 paged_kv、kv_store

from lab_common import plotting, show  # noqa: E402

plt = plotting.setup()
SLIDE = plotting.SLIDE


def script(name):
    """script("04_prefix_caching") → lecture07/04_prefix_caching.py 作为模块（数字开头的文件名不能 import）。"""
    spec = importlib.util.spec_from_file_location(name, os.path.join(LECTURE, name + ".py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def quiet(fn, *args):
    """调用一个演示、拿它返回的数据，不打印它的表（make all 的输出保持简短）。"""
    with contextlib.redirect_stdout(io.StringIO()):
        return fn(*args)


def path(filename):
    """输出文件的路径：--out DIR 给了就在 DIR 里，否则在 figures/ 里。"""
    parser = argparse.ArgumentParser(description="画这一讲的图")
    parser.add_argument("--out", default=FIGURES, help="图的输出目录（默认 figures/）")
    out = parser.parse_known_args()[0].out
    os.makedirs(out, exist_ok=True)
    return os.path.join(out, filename)


def save(fig, name, title=None, note=None):
    """一页幻灯片的收尾：title（结论，大字）在上，note（配置、出处，按图宽折行）在下；写 name.png 和 name.svg。"""
    fig.suptitle(title or "")
    lines = show.wrap(note, int(fig.get_figwidth() * 9)) if note else []      # 16 pt 时一英寸约 9 个半角字符
    fig.text(0.01, 0.01, "\n".join(lines), ha="left", va="bottom", color="0.3")
    fig.tight_layout(rect=(0, (len(lines) * plotting.FONT_PT * 1.3 / 72 + 0.1) / fig.get_figheight(), 1, 1))
    png, _ = plotting.save(fig, path(name))
    print(os.path.relpath(png, ROOT))
    return png
