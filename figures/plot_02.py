"""02_paged_attention 的图：块表——几条序列的逻辑块各自映射到块池里的哪个物理块。

运行：python figures/plot_02.py [--out DIR]     （约 1 秒；make all 会调用它）
数据和配置全部来自 lecture07/02_paged_attention.py 的 demo1_block_table() 返回的 dict（同一次 prefill + 解码）；
GIF 的每一帧是演示 1 每走一步给块池拍的快照（d["frames"]，lecture07/pool_pictures.py），--step 时终端上放的也是它。

版面：上面一排是各条序列的逻辑块（从左到右 A、B、C…），下面一排是块池；每支箭头从它所属的逻辑块的
下边出发，落在物理块的上边——箭头只走两排之间的空白，不穿过任何格子。
"""
import os
import sys

import figlib  # 最先：它装好 quiet_endings（用错了 Python、Ctrl-C 只打一行），再 import 别的
from matplotlib.patches import FancyArrowPatch, Rectangle
from figlib import SLIDE, plt, save_png
from lab_common.frames import save_gif

FIGURES = ("02_block_table.png", "02_block_table_steps.gif")   # GIF：块表一步一步长出来（演示 1 的每一步）
SEQ_COLORS = ("tab:blue", "tab:orange", "tab:green", "tab:purple", "tab:brown", "tab:olive")
W, H = SLIDE                 # 一页 16:9 幻灯片（数据坐标 = 英寸）
TOP, POOL = 4.6, 1.5         # 逻辑块一排、块池一排的下沿 y
ROW_H = 0.9                  # 两排格子的高度


def _light(color):
    """同一颜色的浅色版（格子的底色）。"""
    from matplotlib.colors import to_rgb
    return tuple(0.45 * c + 0.55 for c in to_rgb(color))


def _fit(texts, room, pt):
    """从长到短挑第一个放得下 room 英寸宽的标签（估算：汉字约 1 个字号宽，其余半个）；都放不下返回 ""。"""
    for t in texts:
        width = sum(1.0 if ord(ch) > 0x2E80 else 0.55 for ch in t) * pt / 72
        if width <= room * 0.95:
            return t
    return ""


def compute():
    r = figlib.quiet(figlib.load_script("02_paged_attention").demo1_block_table)
    prompts = "、".join(f"{n} {p}" for n, p in r["prompts"].items())
    config = (f"块大小 {r['block_size']}、块池 {r['n_pool']} 块；输入长度 {prompts}，依次 prefill 后一起解码 "
              f"{r['n_decode']} 步（TINY 模型，种子 {r['seeds'][0]}/{r['seeds'][1]}）")
    return dict(tables=r["tables"], lengths=r["lengths"], block_size=r["block_size"], n_blocks=r["n_pool"],
                events=r["events"], config=config, frames=r["frames"])


def finding(tables):
    """标题：挑第一条物理块不相邻的序列说"逻辑上连续、物理上分散"；都相邻时照实说。"""
    for n, t in tables.items():
        if t and t != list(range(t[0], t[0] + len(t))):
            logical = "、".join(str(i) for i in range(len(t)))
            return f"{n} 的逻辑块 {logical} 落在物理块 {'、'.join(map(str, t))}：逻辑上连续，物理上分散"
    return "这次每条序列的物理块恰好相邻；块表允许它们落在块池的任何地方"


def plot_block_table(tables, lengths, block_size, n_blocks, events, out, config):
    """上：每条序列的逻辑块（格子 = token 位置，涂色的已写入）；下：块池；箭头 = 块表的一项。"""
    fig = plt.figure(figsize=SLIDE)
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, W)
    ax.set_ylim(0, H)
    ax.axis("off")
    colors = {n: SEQ_COLORS[k % len(SEQ_COLORS)] for k, n in enumerate(tables)}
    owner = {b: (n, i) for n, t in tables.items() for i, b in enumerate(t)}
    when = {b: step for step, _, new in events for b in new}          # 物理块 → 在哪一步分配的
    # 上排：序列一组一组从左到右；每个逻辑块一样宽，空隙跟着块宽缩放（块多时也排得下）
    n_logical = sum(len(t) for t in tables.values())
    lw = min(1.6, (W - 0.4) / (1.15 * n_logical + 0.6 * (len(tables) - 1)))
    gap_blk, gap_seq = 0.15 * lw, 0.6 * lw
    x, centers = 0.2, {}
    for n, table in tables.items():
        x_start = x
        for i, b in enumerate(table):
            used = min(block_size, lengths[n] - i * block_size)
            if block_size <= 16 and lw / block_size >= 0.08:          # 小块：一格一个 token 位置
                cw = lw / block_size
                for c in range(block_size):
                    ax.add_patch(Rectangle((x + c * cw, TOP), cw, ROW_H, edgecolor="0.35", lw=0.8,
                                           facecolor=_light(colors[n]) if c < used else "white"))
            else:                                                     # 大块或很窄：按写入的比例涂色
                ax.add_patch(Rectangle((x, TOP), lw * used / block_size, ROW_H, facecolor=_light(colors[n]), lw=0))
                ax.add_patch(Rectangle((x, TOP), lw, ROW_H, fill=False, edgecolor="0.35"))
            label = _fit([f"逻辑块 {i}", str(i)], lw, 12)
            if label:
                ax.text(x + lw / 2, TOP + ROW_H + 0.12, label, ha="center", va="bottom", fontsize=16)
            centers[b] = x + lw / 2
            x += lw + gap_blk
        mid, room = (x_start + x - gap_blk) / 2, x - gap_blk - x_start + gap_seq
        name = _fit([f"序列 {n}（长度 {lengths[n]}）", f"{n}（{lengths[n]}）", n], room, 14)
        ax.text(mid, TOP + ROW_H + 0.55, name, ha="center", va="bottom", fontsize=16, color=colors[n])
        table_text = _fit(["块表 [" + " ".join(map(str, table)) + "]"], room, 13)
        if table_text:
            ax.text(mid, TOP + ROW_H + 1.0, table_text, ha="center", va="bottom", fontsize=16, family=plt.rcParams["font.monospace"])   # 具体的字体名：matplotlib 3.10 对 "monospace" 不逐字回退
        x += gap_seq - gap_blk
    # 下排：块池，物理块 0 … n_blocks-1 从左到右铺满
    left = 1.4                                                        # 左边留给"块池"两个字
    pw = (W - left - 0.2) / n_blocks
    for b in range(n_blocks):
        px = left + b * pw
        seq = owner.get(b)
        face = "0.92"
        if seq:
            face = _light(colors[seq[0]])
        ax.add_patch(Rectangle((px + 0.05, POOL), pw - 0.1, ROW_H, facecolor=face, edgecolor="0.3"))
        number = _fit([str(b)], pw, 14)
        if number:
            ax.text(px + pw / 2, POOL + ROW_H / 2, number, ha="center", va="center", fontsize=16)
        if n_blocks <= 16:
            note = "空闲"
            if seq:
                note = f"{seq[0]} 的 {seq[1]}\n{when.get(b, '')}"
            ax.text(px + pw / 2, POOL - 0.12, note, ha="center", va="top", fontsize=16,
                    color="0.25" if seq else "0.55")
        if seq:                                                       # 箭头：逻辑块的下沿 → 物理块的上沿
            ax.add_patch(FancyArrowPatch((centers[b], TOP), (px + pw / 2, POOL + ROW_H), arrowstyle="-|>",
                                         mutation_scale=16, color=colors[seq[0]], lw=1.6, shrinkA=0, shrinkB=0))
    ax.text(0.2, POOL + ROW_H / 2, "块池\n物理块号", fontsize=16, va="center", color="0.3")
    fig.text(0.5, 0.975, "\n".join(figlib.wrap(f"块表：{finding(tables)}", figlib.TITLE_PT)), ha="center", va="top",
             fontsize=figlib.TITLE_PT)
    figlib.caption(fig, config + "。涂色的格子 = 已写入 K/V 的 token 位置，只有最后一块可能没写满；块池下面：属于哪条序列"
                        "的第几个逻辑块、在哪一步分配。")
    return save_png(fig, out)


def build(out_dir):
    d = compute()
    return [plot_block_table(d["tables"], d["lengths"], d["block_size"], d["n_blocks"], d["events"],
                             os.path.join(out_dir, FIGURES[0]), d["config"]),
            save_gif(d["frames"], os.path.join(out_dir, FIGURES[1]))]


def main(argv=None):
    return figlib.main(argv, __doc__, build)


if __name__ == "__main__":
    sys.exit(main())
