"""03_sharing_and_cow 的图：并行采样与束搜索时，每个解码步占用的 KV 块数（共享 vs 不共享），下方是每步的写时复制。

运行：python figures/plot_03.py [--out DIR]     （约 3 秒；make all 会调用它）
数据全部来自 lecture07/03_sharing_and_cow.py 的 demo1_savings() 返回的 dict：每一步的 (块池占用的块, 不共享时
要的块, 累计 COW 次数)（"steps"，最大的 n / 宽度；束搜索在 TINY 模型上真的解码，并行采样是块池重放，演示 1
在真模型上核对过它逐步相同）。这里只挑请求、画图，不重算。
GIF 的每一帧是 demo2_cow_step_by_step() 每走一步给块池拍的快照（fork → ref_count 2 → 第一次写 → 写时复制 →
ref_count 1；它返回的 d["frames"]，lecture07/pool_pictures.py），--step 时终端上放的也是它。
"""
import os
import sys

import figlib  # 最先：它装好 quiet_endings（用错了 Python、Ctrl-C 只打一行），再 import 别的
import numpy as np
from figlib import SLIDE, finish, plt, save_png
from lab_common.frames import save_gif

FIGURES = ("03_blocks_over_steps.png", "03_cow_steps.gif")   # GIF：演示 2 的一次写时复制，一步一帧


def compute():
    r = figlib.quiet(figlib.load_script("03_sharing_and_cow").demo1_savings)
    reqs, block_size, w = r["reqs"], r["block_size"], max(r["widths"])
    # 并行采样：提示有满块可共享、最后一块又没写满（会发生写时复制）的请求里，提示最长的那个
    kp = max(range(len(reqs)), key=lambda i: (len(reqs[i][0]) % block_size != 0, len(reqs[i][0])))
    kb = max(range(r["n_beam"]), key=lambda i: int(reqs[i][1][0]))   # 束搜索：演示 1 用的请求里解码步数最多的
    series = {("并行采样", w, kp): r["steps"][("并行采样", kp)], ("束搜索", w, kb): r["steps"][("束搜索", kb)]}
    totals = {kind: r["res"][(kind, w)]["saved"] for kind in ("并行采样", "束搜索")}   # 终端表里那一行
    config = (f"TINY 模型（权重种子 {r['model_seed']}），块大小 {block_size}；每幅画一个请求（并行采样：请求 {kp}，"
              f"输入 {len(reqs[kp][0])} token；束搜索：请求 {kb}，解码 {int(reqs[kb][1][0])} 步）")
    return dict(series=series, totals=totals, config=config, n_requests=r["n_requests"], width=w)


def plot_blocks_over_steps(series, totals, out, config, n_requests, width):
    """每种解码方式一幅：实线 = 共享时块池占用的块，虚线 = 不共享时要的块；下方灰条 = 这一步写时复制了几块。"""
    fig, axes = plt.subplots(2, len(series), figsize=SLIDE, squeeze=False,
                             gridspec_kw=dict(height_ratios=(4, 1)), sharex="col")
    for j, ((kind, w, k), rows) in enumerate(series.items()):
        ax, bar = axes[0, j], axes[1, j]
        rows = np.asarray(rows)
        steps = np.arange(1, len(rows) + 1)
        ax.step(steps, rows[:, 1], where="post", color="tab:red", lw=2, ls="--", label="不共享（每条序列各存一份）")
        ax.step(steps, rows[:, 0], where="post", color="tab:blue", lw=2.5, label="共享（块池实际占用）")
        name = f"{kind} n = {w}"
        if kind == "束搜索":
            name = f"{kind} 宽度 {w}"
        ax.set_title(f"{name}（请求 {k}）")
        ax.set_ylabel("占用的 KV 块")
        ax.set_ylim(0, rows[:, 1].max() * 1.25 + 1)
        ax.grid(True, alpha=0.3)
        ax.legend(loc="upper left")
        new_cow = np.diff(np.concatenate([[0], rows[:, 2]]))
        bar.bar(steps, new_cow, width=1.0, color="0.45")
        bar.set_ylabel("写时复制\n（块）")
        bar.set_xlabel("解码步")
        bar.set_ylim(0, max(1, int(new_cow.max())) * 1.2)
        bar.grid(True, axis="y", alpha=0.3)
    finish(fig, f"共享的块只存一份：束搜索省下 {totals['束搜索']:.1%} 的 KV 块，并行采样省下 {totals['并行采样']:.1%}",
           f"两个百分比：{n_requests} 个请求合计、宽度 / n = {width}（终端表里的那两行）。" + config)
    return save_png(fig, out)


def build(out_dir):
    d = compute()
    cow = figlib.quiet(figlib.load_script("03_sharing_and_cow").demo2_cow_step_by_step)
    return [plot_blocks_over_steps(d["series"], d["totals"], os.path.join(out_dir, FIGURES[0]), d["config"],
                                   d["n_requests"], d["width"]),
            save_gif(cow["frames"], os.path.join(out_dir, FIGURES[1]))]


def main(argv=None):
    return figlib.main(argv, __doc__, build)


if __name__ == "__main__":
    sys.exit(main())
