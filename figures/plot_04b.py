"""04b 的图：04 演示 2 的请求放进一棵基数树（PNG），和演示 4 一步一步的树（GIF）。

运行：python figures/plot_04b.py [--out DIR]      （make all 调用它）
数都来自 lecture07/04b_radix_cache.py 的 demo_tree()、demo_steps() 返回的数据；这里只排版、不重算。
"""
import os

import figlib
from frames import Cell, Frame, Row, save_gif

def layout(tree):
    """深度优先的 [(深度, 起点, 长度, ref)] → 每个节点的 x 和父节点下标（根下的节点是 -1）：叶子从左到右等距，
    父节点在孩子们的正中。

    >>> layout([(0, 0, 4, 2), (1, 4, 1, 1), (1, 4, 2, 1)])
    ([0.5, 0, 1], [-1, 0, 0])
    """
    parent, stack = [], []
    for i, (depth, *_) in enumerate(tree):
        del stack[depth:]
        parent.append(stack[-1] if stack else -1)
        stack.append(i)
    x, leaves = [0] * len(tree), 0
    for i in range(len(tree)):
        if i not in parent:
            x[i], leaves = leaves, leaves + 1
    for i in reversed(range(len(tree))):              # 孩子总在父节点后面：倒着走，孩子先排好
        kids = [x[j] for j, p in enumerate(parent) if p == i]
        if kids:
            x[i] = (min(kids) + max(kids)) / 2
    return x, parent


def plot_tree(d):
    """一个节点一个方框，根在最上面：共用的节点（ref > 1，深色）写 [起点, 终点) 和 ref，只属于一个请求的叶子写长度。"""
    tree = d["tree"]
    x, parent = layout(tree)
    fig, ax = figlib.plt.subplots(figsize=figlib.SLIDE)
    root = sum(x[i] for i, p in enumerate(parent) if p < 0) / max(1, parent.count(-1))
    ax.text(root, 1, "根", ha="center", va="center", bbox=dict(boxstyle="round", fc="0.85"))
    for i, (depth, start, length, ref) in enumerate(tree):
        px, py = root, 1
        if parent[i] >= 0:
            px, py = x[parent[i]], -tree[parent[i]][0]
        ax.plot([px, x[i]], [py - 0.2, -depth + 0.2], color="0.55", lw=1.5, zorder=1)
        label, face, color = f"{length}", "#cfe3f5", "black"
        if i in parent:
            label = f"[{start}, {start + length})"
        if ref > 1:
            label, face, color = f"{label}\nref {ref}", "tab:blue", "white"
        ax.text(x[i], -depth, label, ha="center", va="center", color=color, bbox=dict(boxstyle="round", fc=face))
    ax.set_xlim(-0.6, max(x) + 0.6)
    ax.set_ylim(-max(t[0] for t in tree) - 0.6, 1.4)
    ax.axis("off")
    return figlib.save(fig, "04b_radix_tree",
                       title=f"{d['n_requests']} 个请求共 {d['total']:,} 个 token，基数树只存 {d['stored']:,} 个",
                       note=f"04 演示 2 的请求按到达的先后插入（SGLang 的 RadixAttention）。深色：共用的节点，[起点, 终点) "
                            f"是它在请求里的 token 区间，ref 是用着它的请求数；浅色：只属于一个请求的叶子，数字是它的 "
                            f"token 数。拆过 {d['splits']} 次节点：分叉点落在哪个 token 上就在哪里拆，节点长短不一。")


def rows(snapshot, marks):
    """树的一个样子 → 一行一个节点（缩进 = 深度）：长度、时刻两格；要淘汰的叶子加橙框。"""
    return tuple(Row(" ".join(node["words"]), (Cell(f"{len(node['words'])} 个 token", None, node["id"] in marks),
                                               Cell(f"时刻 {node['time']}", None, node["id"] in marks)), node["depth"])
                 for node in snapshot)


def step_frames(d):
    """演示 4 的每一步一帧；淘汰的那一步两帧：先给要删的叶子加框，下一帧它才不见。"""
    frames = []
    for s in d["steps"]:
        title = f"{s['name']}：{s['n']} 个 token，{s['hit']} 个已在树里（用得上 {s['usable']} 个），拆 {s['splits']} 个节点"
        note = f"树里 {s['size']} 个 token（最多 {d['capacity']} 个）。"
        if s["marks"]:
            frames.append(Frame(title, rows(s["before"], s["marks"]), f"超出 {d['capacity']} 个 token：SGLang 的"
                                f"规则从最旧的叶子起，整个叶子节点一起删，橙框的「{'」「'.join(s['evicted'])}」要被淘汰。"))
            note = f"淘汰了「{'」「'.join(s['evicted'])}」：" + note
        frames.append(Frame(title, rows(s["after"], {}), note))
    return frames


if __name__ == "__main__":
    s04b = figlib.script("04b_radix_cache")
    plot_tree(figlib.quiet(s04b.demo_tree))
    gif = save_gif(step_frames(figlib.quiet(s04b.demo_steps)), figlib.path("04b_radix_steps.gif"),
                   legend="时刻：最近一次被 insert 走过；橙框：超出容量，要淘汰的叶子")
    print(os.path.relpath(gif, figlib.ROOT))
