"""一步一帧的 GIF：每一帧是几行带标签的彩色格子（块池、块表、一棵树……）和一句说明。

    from frames import Cell, Row, Frame, save_gif
    f1 = Frame("prefill A", (Row("块池", (Cell("0", "A"), Cell("1"))),), note="A 拿到块 0")
    f2 = Frame("prefill B", (Row("块池", (Cell("0", "A"), Cell("1", "B"))),), note="B 拿到块 1")
    save_gif([f1, f2], "figures/x.gif", legend="A、B：哪条序列的块；灰：空闲")

- Cell(text, group=None, mark=False)：同一个 group 同一种颜色（按第一次出现的顺序取色），None 是灰色（空着）；
  mark=True 加橙色粗框：调用者想让人盯住的格子（它的意思写进 legend）。
- 和上一帧比变了的格子（同一行标签、同一位置，文字或颜色组变了，或是新出现的）自动加红框。
- Row.indent：这一行往右缩进几级（一棵树一行一个节点时，缩进 = 深度）。
每一帧停 seconds 秒，最后一帧停 last_seconds 秒。每一帧底部一行图例：各颜色组的色块和名字、红框，再接 legend。
帧只是数据，由演示返回的数据转成；这里只画。同样的帧 → 同样的字节（Agg 渲染，Pillow 写 GIF，不写时间）。
"""
from typing import NamedTuple

import numpy as np
from PIL import Image

from lab_common import plotting, show

PALETTE = ("#9ecae1", "#fdae6b", "#a1d99b", "#bcbddc", "#d6b48c", "#dbdb8d", "#9edae5", "#f7b6d2")   # 浅色底
EMPTY = "#eeeeee"         # group = None 的格子
DPI = 100                 # 13.33 × 7.5 英寸 → 1333 × 750 像素


class Cell(NamedTuple):
    text: str
    group: object = None      # 颜色组（None = 空着）
    mark: bool = False        # 橙色粗框


class Row(NamedTuple):
    label: str
    cells: tuple
    indent: int = 0


class Frame(NamedTuple):
    title: str
    rows: tuple
    note: str = ""


def changed_cells(prev, frame):
    """frame 里和 prev 相比变了的格子 {(行标签, 第几格)}；prev 为 None（第一帧）时是空集。

    >>> a = Frame("1", (Row("池", (Cell("0", "A"), Cell("·"))),))
    >>> b = Frame("2", (Row("池", (Cell("0", "A"), Cell("1", "B"))), Row("B", (Cell("1", "B"),))))
    >>> sorted(changed_cells(a, b))
    [('B', 0), ('池', 1)]
    """
    if prev is None:
        return set()
    before = {(r.label, i): (c.text, c.group) for r in prev.rows for i, c in enumerate(r.cells)}
    return {(r.label, i) for r in frame.rows for i, c in enumerate(r.cells)
            if before.get((r.label, i)) != (c.text, c.group)}


def colours(frames):
    """颜色组 → 底色：按第一次出现的顺序取 PALETTE，所有帧里同一组颜色相同。"""
    order = {}
    for c in (c for f in frames for r in f.rows for c in r.cells):
        if c.group is not None and c.group not in order:
            order[c.group] = PALETTE[len(order) % len(PALETTE)]
    return order


def draw(fig, frames, i, legend):
    """把第 i 帧画进 fig：上面是标题，中间一行一行的格子，下面是说明，最底下一行图例。
    版面（格宽、行数、字号）由所有帧一起决定：几帧之间格子不动，只有内容在变。"""
    from matplotlib.patches import Rectangle
    fig.clear()
    frame, fill = frames[i], colours(frames)
    prev = None
    if i:
        prev = frames[i - 1]
    changed = changed_cells(prev, frame)
    label_w = max(show.cols(r.label) + 2 * r.indent for f in frames for r in f.rows) + 2     # 单位：半角字符
    cell_w = max(show.cols(c.text) for f in frames for r in f.rows for c in r.cells) + 3
    n_cols = max(len(r.cells) for f in frames for r in f.rows)
    n_rows = max(len(f.rows) for f in frames)
    wide = 0.96 * fig.get_figwidth() * 72                # 格子区有多宽（pt）；一个半角字符约 0.6 个字号宽
    units = max(label_w + n_cols * (cell_w + 1), wide / (0.6 * 20))   # 格子少：照 20 pt 排，靠左；多：整体缩小
    pt = wide / (0.6 * units)
    ax = fig.add_axes((0.02, 0.22, 0.96, 0.62))
    ax.set_xlim(0, units)
    ax.set_ylim(max(n_rows, 4), 0)
    ax.axis("off")
    for k, r in enumerate(frame.rows):
        ax.text(2 * r.indent, k + 0.5, r.label, ha="left", va="center", fontsize=pt)
        for j, c in enumerate(r.cells):
            x = label_w + j * (cell_w + 1)
            edge, lw = "0.4", 1.0
            if (r.label, j) in changed:
                edge, lw = "red", 4.0
            ax.add_patch(Rectangle((x, k + 0.12), cell_w, 0.76, facecolor=fill.get(c.group, EMPTY), edgecolor=edge,
                                   lw=lw))
            if c.mark:                                   # 橙框画在里面一圈：变了的红框也还看得见
                ax.add_patch(Rectangle((x + 0.6, k + 0.24), cell_w - 1.2, 0.52, fill=False, edgecolor="darkorange",
                                       lw=4.0))
            ax.text(x + cell_w / 2, k + 0.5, c.text, ha="center", va="center", fontsize=pt)
    fig.text(0.02, 0.96, f"第 {i + 1}/{len(frames)} 步 · {frame.title}", fontsize=24, va="top")
    fig.text(0.02, 0.2, "\n".join(show.wrap(frame.note, 84)), fontsize=18, va="top")
    x = 0.02
    for group, colour in fill.items():                 # 图例：色块 + 组名，接着红框和调用者的说明
        fig.text(x, 0.03, f" {group} ", fontsize=16, bbox=dict(facecolor=colour, edgecolor="0.4"))
        x += (show.cols(str(group)) + 3) * 16 * 0.6 / 72 / fig.get_figwidth()    # 16 pt 的半角字符约 0.6 × 16 pt 宽
    key = "红框：这一步变了"
    if legend:
        key += "；" + legend
    room = (0.98 - x) * fig.get_figwidth() * 72 / (0.6 * show.cols(key))    # 放得下一行的字号
    fig.text(x, 0.03, key, fontsize=min(16, room))


def save_gif(frames, path, legend="", seconds=3.0, last_seconds=8.0):
    """把 frames 写成循环播放的 GIF：每帧停 seconds 秒，最后一帧停 last_seconds 秒。返回 path。"""
    plt = plotting.setup()                     # 中文字体；同一个版本的 matplotlib 画出同样的像素
    fig = plt.figure(figsize=plotting.SLIDE, dpi=DPI)
    images = []
    for i in range(len(frames)):
        draw(fig, frames, i, legend)
        fig.canvas.draw()
        rgb = np.asarray(fig.canvas.buffer_rgba())[..., :3]
        images.append(Image.fromarray(rgb).convert("P", palette=Image.Palette.ADAPTIVE))
    plt.close(fig)
    durations = [int(seconds * 1000)] * (len(frames) - 1) + [int(last_seconds * 1000)]
    images[0].save(path, save_all=True, append_images=images[1:], duration=durations, loop=0)
    return path
