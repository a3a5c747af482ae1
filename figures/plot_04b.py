"""04b_radix_cache 的图：04 演示 2 的请求放进一棵基数树——节点、每个节点的 token 区间和 ref。

运行：python figures/plot_04b.py [--out DIR]     （约 2 秒；make all 会调用它）
数据全部来自 lecture07/04b_radix_cache.py 的 demo1_tree() 返回的 dict（"tree"：深度优先的 (深度, 起点, 长度, ref)，
和终端里画的是同一棵树）；这里只排版、不重算。GIF 的每一帧是演示 4 的 run_steps() 每走一步给树拍的快照。
"""
import os
import sys

import figlib
from figlib import SLIDE, finish, plt, save_png
from lab_common.say import integer, pct
from lab_common.frames import save_gif

FIGURES = ("04b_radix_tree.png", "04b_radix_steps.gif")   # GIF：演示 4 的每一步（插入、拆开、命中、淘汰）


def compute():
    d = figlib.quiet(figlib.load_script("04b_radix_cache").demo1_tree)
    return dict(tree=d["tree"], n_requests=d["n_requests"], total=d["total_tokens"], stored=d["tree_tokens"],
                splits=d["n_splits"], groups=d["groups"])


def layout(tree):
    """深度优先的 (深度, 起点, 长度, ref) → 每个节点的 (x, y) 和父节点下标（根 = -1）。叶子从左到右等距排开。

    >>> layout([(0, 0, 4, 2), (1, 4, 1, 1), (1, 4, 2, 1)])[0]
    [(0.5, 0), (0.0, -1), (1.0, -1)]
    """
    parent, stack = [], []
    for i, (depth, *_rest) in enumerate(tree):
        del stack[depth:]
        parent.append(stack[-1] if stack else -1)
        stack.append(i)
    kids = {i: [j for j, p in enumerate(parent) if p == i] for i in range(len(tree))}
    pos, next_leaf = {}, [0.0]

    def place(i):
        if not kids[i]:
            pos[i] = (next_leaf[0], -tree[i][0])
            next_leaf[0] += 1.0
            return
        for j in kids[i]:
            place(j)
        xs = [pos[j][0] for j in kids[i]]
        pos[i] = ((min(xs) + max(xs)) / 2, -tree[i][0])

    for i in (i for i, p in enumerate(parent) if p == -1):
        place(i)
    return [pos[i] for i in range(len(tree))], parent


def plot_tree(d, out):
    """一页幻灯片：一个节点一个方框，根画在最上面。共用的节点（ref > 1，深色）写 [起点, 终点) 和 ref，旁边写它是哪段
    前缀；只属于一个请求的叶子（浅色）只写它有几个 token（16 片叶子在 13.33 英寸里排得下 16 pt 的字）。"""
    tree = d["tree"]
    pos, parent = layout(tree)
    n_leaves = sum(1 for i in range(len(tree)) if i not in parent)
    names = {(plen, k): name for name, plen, k in d["groups"] if k > 1}     # 根下哪个节点是哪段共用前缀
    fig, ax = plt.subplots(figsize=SLIDE)
    tops = [i for i, p in enumerate(parent) if p == -1]
    root_x = sum(pos[i][0] for i in tops) / max(1, len(tops))
    ax.plot([root_x], [1], "ks", ms=12)
    ax.annotate("根", (root_x, 1), xytext=(12, 0), textcoords="offset points", va="center")
    for (x, y), p in zip(pos, parent):
        px, py = (root_x, 1)
        if p >= 0:
            px, py = pos[p]
        ax.plot([px, x], [py - 0.2, y + 0.2], color="0.55", lw=1.5, zorder=1)
    for i, ((x, y), (depth, start, length, ref)) in enumerate(zip(pos, tree)):
        face, text_color = "#cfe3f5", "black"
        if ref > 1:
            face, text_color = "tab:blue", "white"
        label = f"{length:,}"                             # 叶子：只写 token 数
        if i in parent:
            label = f"[{start:,}, {start + length:,})"   # 有孩子的节点：它在请求里的 token 区间
        if ref > 1:
            label += f"\nref {ref}"
        ax.text(x, y, label, ha="center", va="center", color=text_color, zorder=3,
                bbox=dict(boxstyle="round,pad=0.3", fc=face, ec="0.3"))
        name = names.get((length, ref)) if depth == 0 else None
        if name:
            ax.annotate(f"{name} 前缀", (x, y), xytext=(-62, 0), textcoords="offset points", ha="right", va="center",
                        color="tab:blue")
    ax.set_xlim(-0.6, n_leaves - 0.4)
    ax.set_ylim(min(y for _, y in pos) - 0.5, 1.4)
    ax.axis("off")
    prefixes = "、".join(f"{name} {plen:,} 个 token（ref {k}）" for name, plen, k in d["groups"] if k > 1)
    finish(fig, f"{d['n_requests']} 个请求共 {integer(d['total'])} 个 token，基数树只存 {integer(d['stored'])} 个"
                f"（{pct(d['stored'] / d['total'])}）",
           f"04 演示 2 的请求按到达顺序插入（SGLang 的 RadixAttention）。深色 = 共用的节点：[起点, 终点) 是它在请求里的 "
           f"token 区间，ref = 用着它的请求数（{prefixes}）；浅色 = 只属于一个请求的叶子，数字 = 它的 token 数。"
           f"拆过 {d['splits']} 次节点：分叉点可以落在任何 token 上，所以节点长短不一。")
    return save_png(fig, out)


def build(out_dir):
    steps = figlib.load_script("04b_radix_cache").run_steps("sglang")     # 和 --step 时终端上放的是同一组帧
    return [plot_tree(compute(), os.path.join(out_dir, FIGURES[0])),
            save_gif(steps["frames"], os.path.join(out_dir, FIGURES[1]))]


def main(argv=None):
    return figlib.main(argv, __doc__, build)


if __name__ == "__main__":
    sys.exit(main())
