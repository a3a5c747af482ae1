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
终端上每行不超过终端的宽度（长标签截成"…"，格子多了折成几段）；GIF 上照旧一行放下整行。
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
MIN_LABEL = 12      # 终端太窄时标签最少留几列（更长的截成"…"）；再放不下就把格子折成几段


def _layout(frames, width, term_width):
    """终端上的版面 (标签列宽, 每段几格)：所有帧共用，几帧之间版面不动。
    一行 = 标签列 + 每格 width 列、格子之间 1 列。放不下 term_width 列时先把标签列收窄（不窄于 MIN_LABEL，
    长标签截成"…"），还放不下就把格子折成几段、每段一样多（整帧一起折：同一段里同一列还是同一个块）。

    >>> f = [Frame("t", (Row("ref_count", tuple(Cell(str(b)) for b in range(12))),))]
    >>> _layout(f, 5, 120), _layout(f, 5, 80)
    ((11, 12), (11, 6))
    >>> _layout([Frame("t", (Row("很长的标签" * 6, (Cell("1"), Cell("2"))),))], 5, 40)
    (29, 2)
    """
    label_w = max(cell_len(r.label) + 2 * r.indent for f in frames for r in f.rows) + 2
    n_cells = max([1] + [len(r.cells) for f in frames for r in f.rows])
    cells_w = n_cells * (width + 1) - 1
    if label_w + cells_w <= term_width:
        return label_w, n_cells
    label_w = max(min(label_w, MIN_LABEL), term_width - cells_w)
    per_band = max(1, (term_width - label_w + 1) // (width + 1))
    bands = -(-n_cells // per_band)
    return label_w, -(-n_cells // bands)


def _label(r, label_w):
    """一行的标签：缩进 + 标签，截到 label_w - 2 列（留 2 列空白），补齐到 label_w 列。"""
    indent = min(2 * r.indent, max(0, label_w - 3))
    text = " " * indent + console.clip(r.label, label_w - 2 - indent)
    return text + " " * (label_w - cell_len(text))


def _pack(items, term_width, gap="   "):
    """几段图例（每段是 Text.assemble 的参数）排成几行，每行不超过 term_width 列。"""
    lines, cur = [], []
    for item in items:
        trial = Text.assemble(*cur, gap, *item) if cur else Text.assemble(*item)
        if cur and cell_len(trial.plain) > term_width:
            lines.append(Text.assemble(*cur))
            cur = list(item)
        else:
            cur = (cur + [gap] if cur else []) + list(item)
    return lines + [Text.assemble(*cur)]


def render(frames, i, groups=None, width=None, term_width=console.DEFAULT_WIDTH):
    """第 i 帧在终端上的样子：rich 的 Text 列表（一行一个），每行不超过 term_width 列（中文算 2 列）：
    标签太长截成"…"，格子太多就折成几段（_layout）；格子本身不截。测试和 play 共用。
    GIF（draw_frame）不用它：图上照旧是完整的标签、一行放下所有格子。"""
    if groups is None:
        groups, width = _groups(frames), _cell_width(frames)
    label_w, per_band = _layout(frames, width, term_width)
    frame, prev = frames[i], None
    if i:
        prev = frames[i - 1]
    changed = changed_cells(prev, frame)
    head = console.wrap_cjk(f"第 {i + 1}/{len(frames)} 步 · {frame.title}", term_width - 2, indent=2)
    lines = [Text(x, style="bold") for x in head]
    n_cells = max([1] + [len(r.cells) for r in frame.rows])
    for start in range(0, n_cells, per_band):
        if start:
            lines.append(Text(""))                     # 段与段之间空一行
        for r in frame.rows:
            if start and len(r.cells) <= start:         # 后面几段只画这一段里还有格子的行
                continue
            line = Text(_label(r, label_w))
            for j in range(start, min(len(r.cells), start + per_band)):
                c = r.cells[j]
                style = "grey50"
                if c.group is not None:
                    style = f"white on {TERM_COLORS[groups[c.group] % len(TERM_COLORS)]}"
                if (r.label, j) in changed:
                    style = "bold black on bright_yellow"
                pad = width - cell_len(c.text)
                text = " " * (pad // 2) + c.text + " " * (pad - pad // 2)
                if c.mark:
                    text = "[" + text[1:-1] + "]"
                if j > start:
                    line.append(" ")
                line.append(text, style=style)
            lines.append(line)
    lines += [Text(x) for x in console.wrap_cjk(frame.note, term_width - 2)]
    key = [[(" 黄 ", "bold black on bright_yellow"), " 这一步变了"]]
    for g, label in frame.legend:
        key.append([(f" {g} ", f"white on {TERM_COLORS[groups[g] % len(TERM_COLORS)]}"), f" {label}"])
    lines += _pack(key, term_width)
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
