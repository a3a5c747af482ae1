"""02_paged_attention 的图：块表——几条序列的逻辑块各自映射到块池里的哪个物理块。

运行：python figures/plot_02.py [--out DIR]     （约 1 秒；make all 会调用它）
数据和配置全部来自 lecture07/02_paged_attention.py 的 demo1_block_table() 返回的 dict（同一次 prefill + 解码）。
"""
import os
import sys

from matplotlib.patches import FancyArrowPatch, Rectangle

import figlib
from figlib import caption, plt, save_png

FIGURES = ("02_block_table.png",)
SEQ_COLORS = ("tab:blue", "tab:orange", "tab:green", "tab:purple", "tab:brown")


def _light(color):
    """同一颜色的浅色版（不透明：压在箭头上面）。"""
    from matplotlib.colors import to_rgb
    return tuple(0.45 * c + 0.55 for c in to_rgb(color))


def compute():
    r = figlib.quiet(figlib.load_script("02_paged_attention").demo1_block_table)
    prompts = "、".join(f"{n} {p}" for n, p in r["prompts"].items())
    config = (f"块大小 {r['block_size']}、块池 {r['n_pool']} 块；输入长度 {prompts}，依次 prefill 后一起解码 "
              f"{r['n_decode']} 步（TINY 模型，种子 {r['seeds'][0]}/{r['seeds'][1]}）")
    return dict(tables=r["tables"], lengths=r["lengths"], block_size=r["block_size"], n_blocks=r["n_pool"],
                events=r["events"], config=config)


def plot_block_table(tables, lengths, block_size, n_blocks, events, out, config):
    """左：每条序列的逻辑块（格子 = token 位置，涂色的已写入）；右：块池；箭头 = 块表的一项。"""
    fig, ax = plt.subplots(figsize=(16, 9))
    ax.set_xlim(0, 19)
    ax.set_ylim(0.4, 10.4)
    ax.axis("off")
    when = {b: step for step, _, new in events for b in new}        # 物理块 → 在哪一步分配的
    owner = {b: (n, i) for n, t in tables.items() for i, b in enumerate(t)}
    # 块池：一列物理块
    ph = min(0.75, 9.6 / n_blocks)
    px, pw = 12.2, 1.6
    py = {b: 9.9 - (b + 1) * ph for b in range(n_blocks)}
    colors = {n: SEQ_COLORS[k % len(SEQ_COLORS)] for k, n in enumerate(tables)}
    ax.text(px + pw / 2, 10.1, "块池（物理块）", ha="center", fontsize=14)
    for b in range(n_blocks):
        seq = owner.get(b)
        ax.add_patch(Rectangle((px, py[b] + 0.06), pw, ph - 0.12, facecolor=_light(colors[seq[0]]) if seq else "0.92",
                               edgecolor="0.3", zorder=3))
        ax.text(px + pw / 2, py[b] + ph / 2, f"物理块 {b}", ha="center", va="center", fontsize=12, zorder=4)
        note = f"{seq[0]} 的逻辑块 {seq[1]}" + (f"（{when[b]}）" if b in when else "") if seq else "空闲"
        ax.text(px + pw + 0.2, py[b] + ph / 2, note, va="center", fontsize=12, color="0.2" if seq else "0.5")
    # 序列：一行逻辑块
    rows = len(tables)
    cw = 0.42                                   # 一个 token 格子的宽度
    for k, (n, table) in enumerate(tables.items()):
        y = 9.0 - k * (9.4 / rows)
        ax.text(0.1, y + 0.45, f"序列 {n}", fontsize=14, color=colors[n])
        ax.text(0.1, y - 0.05, f"长度 {lengths[n]}", fontsize=12)
        ax.text(1.6, y - 1.0, "块表 [" + " ".join(map(str, table)) + "]", fontsize=13, family="monospace")
        for i, b in enumerate(table):
            x0 = 1.6 + i * (block_size * cw + 0.35)
            used = min(block_size, lengths[n] - i * block_size)
            for c in range(block_size):
                ax.add_patch(Rectangle((x0 + c * cw, y - 0.2), cw, 0.8, edgecolor="0.3", zorder=3,
                                       facecolor=_light(colors[n]) if c < used else "white"))
            ax.text(x0 + block_size * cw / 2, y + 0.75, f"逻辑块 {i}", ha="center", fontsize=12)
            ax.text(x0 + block_size * cw / 2, y - 0.45, f"→ {b}", ha="center", va="center", fontsize=12,
                    color=colors[n])
            # 箭头画在格子下面（zorder 小）：从这个逻辑块出发，穿到块池里它的物理块
            ax.add_patch(FancyArrowPatch((x0 + block_size * cw / 2, y + 0.2), (px, py[b] + ph / 2),
                                         arrowstyle="-|>", mutation_scale=14, color=colors[n], lw=1.4,
                                         alpha=0.8, zorder=1, shrinkA=0))
    ax.set_title("块表：逻辑上连续，物理上分散\n" + config, fontsize=14)
    caption(fig, "涂色的格子 = 已写入 K/V 的 token 位置；只有最后一块可能没写满。注意力时按块表把物理块拼回连续的 K/V"
                 "（paged_kv.gather_kv）。")
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    return save_png(fig, out)


def build(out_dir):
    d = compute()
    return [plot_block_table(d["tables"], d["lengths"], d["block_size"], d["n_blocks"], d["events"],
                             os.path.join(out_dir, FIGURES[0]), d["config"])]


def main(argv=None):
    return figlib.main(argv, __doc__, build)


if __name__ == "__main__":
    sys.exit(main())
