"""一步一帧的图（机制的"动画"）：终端上一帧一屏、回车看下一帧；幻灯片上是一个 GIF。

    from lab_common.frames import Cell, Frame, Row, play, save_gif
    f1 = Frame("prefill A", [Row("块池", [Cell("A0", "A"), Cell("·")])], note="A 拿到块 0")
    f2 = Frame("prefill B", [Row("块池", [Cell("A0", "A"), Cell("B0", "B")])], note="B 拿到块 1")
    play([f1, f2])                         # 只在 --step 且在终端上；别处什么也不做（管道输出逐字节不变）
    save_gif([f1, f2], "figures/x.gif")    # matplotlib 的动画写入器 + Pillow；同样的帧 → 同样的字节

一帧 = 一个小标题、几行带标签的格子、一句说明。帧只是数据：由演示用它真正运行的那个对象（块池、树……）
每走一步拍一张"快照"转成帧，这里只负责画，不知道画的是什么。
- 格子：文字 + 颜色组 group（同一组同一种颜色，例如同一条序列；None = 空着）。mark=True 的格子加框
  （例如"下一步要写的块"）。
- 和上一帧比，变了的格子自动加亮（同一行标签、同一位置，文字或颜色组变了，或是新出现的）：
  终端上黄底，图上粗红框。所以帧里不用写"哪里变了"。
- Row.indent：这一行往右缩进几级（一棵树可以一行一个节点：缩进 = 深度，格子 = 边上的文字）。
- Frame.legend：((组, 说明), …)，印在帧的下面。
所有格子一样宽（最长的文字决定），几帧之间版面不动，只有格子在变。
"""
from dataclasses import dataclass, field

from rich.cells import cell_len
from rich.text import Text

from lab_common import console

GIF_DPI = 100             # 1333 × 750 像素
SECONDS_PER_FRAME = 2.0   # GIF 里每帧停几秒
PALETTE = ("tab:blue", "tab:orange", "tab:green", "tab:purple", "tab:brown", "tab:olive", "tab:cyan", "tab:pink")
TERM_COLORS = ("blue", "dark_orange3", "green4", "purple", "orange4", "dark_khaki", "dark_cyan", "hot_pink3")


@dataclass(frozen=True)
class Cell:
    text: str
    group: object = None      # 颜色组（None = 空着 / 空闲）
    mark: bool = False        # 额外加框：调用者想让全班看的那一格


@dataclass(frozen=True)
class Row:
    label: str
    cells: tuple
    indent: int = 0


@dataclass(frozen=True)
class Frame:
    title: str
    rows: tuple
    note: str = ""
    legend: tuple = field(default=())


def changed_cells(prev, frame):
    """frame 里和 prev 相比变了的格子：{(行标签, 第几格)}。prev 为 None（第一帧）时没有"变了"。

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


def _groups(frames):
    """颜色组按第一次出现的顺序编号：所有帧里同一组颜色相同。"""
    order = {}
    for f in frames:
        for r in f.rows:
            for c in r.cells:
                if c.group is not None and c.group not in order:
                    order[c.group] = len(order)
        for g, _ in f.legend:
            order.setdefault(g, len(order))
    return order


def _cell_width(frames):
    return max([2] + [cell_len(c.text) for f in frames for r in f.rows for c in r.cells]) + 2


# ---------------------------------------------------------------- 终端
def render(frames, i, groups=None, width=None, term_width=console.DEFAULT_WIDTH):
    """第 i 帧在终端上的样子：rich 的 Text 列表（一行一个；说明按 term_width 列折行）。测试和 play 共用。"""
    if groups is None:
        groups, width = _groups(frames), _cell_width(frames)
    label_w = max(cell_len(r.label) + 2 * r.indent for f in frames for r in f.rows) + 2
    frame, prev = frames[i], None
    if i:
        prev = frames[i - 1]
    changed = changed_cells(prev, frame)
    lines = [Text(f"第 {i + 1}/{len(frames)} 步 · {frame.title}", style="bold")]
    for r in frame.rows:
        line = Text(" " * (2 * r.indent) + r.label + " " * (label_w - cell_len(r.label) - 2 * r.indent))
        for j, c in enumerate(r.cells):
            style = "grey50"
            if c.group is not None:
                style = f"white on {TERM_COLORS[groups[c.group] % len(TERM_COLORS)]}"
            if (r.label, j) in changed:
                style = "bold black on bright_yellow"
            pad = width - cell_len(c.text)
            text = " " * (pad // 2) + c.text + " " * (pad - pad // 2)
            if c.mark:
                text = "[" + text[1:-1] + "]"
            line.append(text, style=style)
            line.append(" ")
        lines.append(line)
    lines += [Text(x) for x in console.wrap_cjk(frame.note, term_width - 2)]
    key = [(" 黄 ", "bold black on bright_yellow"), " 这一步变了"]
    for g, label in frame.legend:
        key += ["   ", (f" {g} ", f"white on {TERM_COLORS[groups[g] % len(TERM_COLORS)]}"), f" {label}"]
    lines.append(Text.assemble(*key))
    return lines


def play(frames):
    """--step 且在终端上：一帧一屏（清屏、重画演示的标题），回车看下一帧；最后清屏、重画标题，演示接着印它的表。
    不在终端上（管道、文件、测试）什么也不做。"""
    if not frames or not console.stepping():
        return
    groups, width = _groups(frames), _cell_width(frames)
    c = console._console()
    for i in range(len(frames)):
        console.redraw_title()
        for line in render(frames, i, groups, width, c.width):
            c.print(line, soft_wrap=True, markup=False, highlight=False)
        c.print()
        prompt = "（回车看整张表）"
        if i + 1 < len(frames):
            prompt = f"（回车看下一步 {i + 2}/{len(frames)}）"
        console.wait_enter(prompt)
    console.redraw_title()


# ---------------------------------------------------------------- GIF
def _light(color):
    from matplotlib.colors import to_rgb
    return tuple(0.45 * c + 0.55 for c in to_rgb(color))


def draw_frame(fig, frames, i, groups, width):
    """把第 i 帧画进 fig（一页 16:9 幻灯片，字号 ≥ 16 pt）：上面是小标题，中间一行一行的格子，下面是说明和图例。"""
    import textwrap
    from matplotlib.patches import Rectangle
    fig.clear()
    frame, prev = frames[i], None
    if i:
        prev = frames[i - 1]
    changed = changed_cells(prev, frame)
    n_rows = max(len(f.rows) for f in frames)
    label_w = max(cell_len(r.label) + 2 * r.indent for f in frames for r in f.rows) + 2
    n_cols = max(len(r.cells) for f in frames for r in f.rows)
    units = label_w + n_cols * (width + 1)
    ax = fig.add_axes((0.02, 0.2, 0.96, 0.66))
    ax.set_xlim(0, units)
    ax.set_ylim(n_rows, 0)
    ax.axis("off")
    for k, r in enumerate(frame.rows):
        ax.text(2 * r.indent, k + 0.5, r.label, ha="left", va="center", fontsize=18)
        for j, c in enumerate(r.cells):
            x = label_w + j * (width + 1)
            face, ink = "0.95", "0.45"
            if c.group is not None:
                face, ink = _light(PALETTE[groups[c.group] % len(PALETTE)]), "black"
            edge, lw = "0.35", 1.0
            if c.mark:
                edge, lw = "tab:orange", 4
            if (r.label, j) in changed:
                edge, lw = "red", 5
            ax.add_patch(Rectangle((x, k + 0.12), width, 0.76, facecolor=face, edgecolor=edge, lw=lw))
            ax.text(x + width / 2, k + 0.5, c.text, ha="center", va="center", fontsize=18, color=ink)
    fig.text(0.02, 0.95, f"第 {i + 1}/{len(frames)} 步 · {frame.title}", fontsize=24, va="top")
    note = "\n".join(textwrap.wrap(frame.note, 44))
    fig.text(0.02, 0.17, note, fontsize=18, va="top")
    fig.text(0.98, 0.03, "红框 = 这一步变了", fontsize=16, ha="right", va="bottom", color="0.3")
    for k, (g, label) in enumerate(frame.legend):          # 图例：右上角，一组一行，底色就是这一组的颜色
        fig.text(0.98, 0.95 - 0.06 * k, f"{g}：{label}", fontsize=16, ha="right", va="top",
                 bbox=dict(facecolor=_light(PALETTE[groups[g] % len(PALETTE)]), edgecolor="0.35", pad=4))


def save_gif(frames, path, seconds=SECONDS_PER_FRAME):
    """把 frames 写成一个循环播放的 GIF（每帧停 seconds 秒）。只用 matplotlib 和它自带的 Pillow；
    同样的帧、同样的字体 → 同样的字节（两次 make all 逐字节相同）。返回 path。"""
    import os
    from matplotlib.animation import FuncAnimation, PillowWriter
    from lab_common.plotting import SLIDE, plt, setup_matplotlib      # 只在写 GIF 时才 import matplotlib
    setup_matplotlib()
    groups, width = _groups(frames), _cell_width(frames)
    fig = plt.figure(figsize=SLIDE)
    anim = FuncAnimation(fig, lambda i: draw_frame(fig, frames, i, groups, width), frames=len(frames),
                         init_func=lambda: None, repeat=False)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    anim.save(path, writer=PillowWriter(fps=1 / seconds), dpi=GIF_DPI)
    plt.close(fig)
    return path
