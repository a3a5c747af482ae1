"""02 的图：演示 1 的块表（PNG：逻辑块 → 物理块的箭头）和它一步一步长出来的样子（GIF）。

运行：python figures/plot_02.py [--out DIR]      （make all 调用它）
数都来自 lecture07/02_paged_attention.py 的 demo_block_table() 返回的每一步（块表、长度、ref_count）；这里只排版。
pool_frames 把这样的每一步转成 GIF 的一帧，plot_03 的写时复制 GIF 也用它。
"""
import os

import figlib
from frames import Cell, Frame, Row, save_gif
from matplotlib.patches import FancyArrowPatch, Rectangle

LEGEND = "颜色：这个物理块属于哪条序列，灰：空闲；已写：块里写了几个 token 的 K/V"


def pool_frames(steps, block_size, n_pool, note):
    """每一步 {step, tables, lengths, ref_count, …} → 一帧：物理块一行（颜色 = 属于谁）、每块写了几个位置、
    ref_count，再每条序列一行块表。note(step) → 帧下面的一句说明。"""
    frames = []
    for st in steps:
        owner, used = {}, {}                       # 物理块 → 用它的序列、它写了几个位置（最长的持有者算）
        for name, table in st["tables"].items():
            for i, b in enumerate(table):
                owner.setdefault(b, []).append(name)
                used[b] = max(used.get(b, 0), min(block_size, st["lengths"][name] - i * block_size))
        group = {b: names[0] if len(names) == 1 else "共享" for b, names in owner.items()}
        mark = {b for b in owner if len(owner[b]) > 1 and used[b] < block_size}
        written = [f"{used[b]}/{block_size}" if b in used else "·" for b in range(n_pool)]
        rows = [Row("物理块", tuple(Cell(str(b), group.get(b), b in mark) for b in range(n_pool))),
                Row("已写", tuple(Cell(written[b], group.get(b)) for b in range(n_pool))),
                Row("ref_count", tuple(Cell(str(st["ref_count"][b]), group.get(b)) for b in range(n_pool)))]
        rows += [Row(f"{n} 的块表", tuple(Cell(str(b), group[b]) for b in table)) for n, table in st["tables"].items()]
        frames.append(Frame(st["step"], tuple(rows), note(st)))
    return frames


def plot_block_table(d):
    """上：每条序列的逻辑块（涂色 = 写了的位置）；下：块池；箭头 = 块表的一项。"""
    last, bs, n_pool = d["steps"][-1], d["block_size"], d["n_pool"]
    colours = dict(zip(last["tables"], ("tab:blue", "tab:orange", "tab:green", "tab:purple", "tab:brown", "tab:olive")))
    fig, ax = figlib.plt.subplots(figsize=figlib.SLIDE)
    ax.set_xlim(0, n_pool)
    ax.set_ylim(-0.4, 3.4)
    ax.axis("off")
    x, width = 0.0, n_pool / (sum(len(t) for t in last["tables"].values()) + len(last["tables"]) - 1)
    for name, table in last["tables"].items():
        ax.text(x, 3.1, f"{name}：长度 {last['lengths'][name]}，块表 {table}", color=colours[name], va="bottom")
        for i, b in enumerate(table):
            used = min(bs, last["lengths"][name] - i * bs)
            ax.add_patch(Rectangle((x + 0.05, 2.2), (width - 0.1) * used / bs, 0.7, color=colours[name], alpha=0.45))
            ax.add_patch(Rectangle((x + 0.05, 2.2), width - 0.1, 0.7, fill=False, edgecolor="0.3"))
            ax.text(x + width / 2, 2.55, f"逻辑块 {i}", ha="center", va="center")
            ax.add_patch(FancyArrowPatch((x + width / 2, 2.2), (b + 0.5, 0.7), arrowstyle="-|>", mutation_scale=18,
                                         color=colours[name], lw=1.8))
            x += width
        x += width
    owner = {b: name for name, table in last["tables"].items() for b in table}
    for b in range(n_pool):
        face = "0.92"
        if b in owner:
            face = colours[owner[b]]
        ax.add_patch(Rectangle((b + 0.05, 0), 0.9, 0.7, facecolor=face, alpha=0.45, edgecolor="0.3"))
        ax.text(b + 0.5, 0.35, str(b), ha="center", va="center")
    ax.text(0, -0.3, f"块池：物理块 0–{n_pool - 1}（灰：空闲）", va="center", color="0.3")
    split = [n for n, t in last["tables"].items() if t != list(range(t[0], t[0] + len(t)))]
    name = (split + list(last["tables"]))[0]
    return figlib.save(fig, "02_block_table",
                       title=f"{name} 的逻辑块落在物理块 {last['tables'][name]}：逻辑上连续，物理上分散",
                       note=f"02 演示 1 解码 {len(d['steps']) - len(last['tables'])} 步之后：块大小 {bs}、块池 {n_pool} 块，"
                            "几条序列依次 prefill、再一起解码，谁的最后一块写满了谁才拿下一块，所以块表交错。")


if __name__ == "__main__":
    d = figlib.quiet(figlib.script("02_paged_attention").demo_block_table)
    plot_block_table(d)
    frames = pool_frames(d["steps"], d["block_size"], d["n_pool"], lambda st: f"这一步分配：{st['got']}；空闲 {st['free']} 块")
    print(os.path.relpath(save_gif(frames, figlib.path("02_block_table_steps.gif"), legend=LEGEND), figlib.ROOT))
