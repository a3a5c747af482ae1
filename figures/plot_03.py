"""03 的图：并行采样、束搜索每一步占用的 KV 块，共享与不共享（PNG）；一次写时复制，一步一帧（GIF）。

运行：python figures/plot_03.py [--out DIR]      （make all 调用它）
数都来自 lecture07/03_sharing_and_cow.py 的 demo_savings()、demo_cow() 返回的数据；这里只挑请求、排版。
"""
import os

import figlib
import numpy as np
from frames import save_gif
from plot_02 import pool_frames

LEGEND = "共享：a、b 共用；灰：空闲；橙框：共享又没写满，下次写要先复制"


def plot_blocks_over_steps(d):
    """每种解码方式一列：上面实线 = 共享时块池占用的块，虚线 = 不共享时要的块；下面 = 这一步写时复制了几块。
    每列画省下最多的那个请求（最宽的 n）。"""
    fig, axes = figlib.plt.subplots(2, 2, figsize=figlib.SLIDE, sharex="col", gridspec_kw=dict(height_ratios=(4, 1)))
    for col, kind in enumerate(("并行采样", "束搜索")):
        per_req = d["widest"][(kind, "Alpaca")]      # 每个请求逐步的 (块池占用, 不共享时要的块, 累计 COW)
        k = max(range(len(per_req)), key=lambda i: sum(need - used for used, need, _ in per_req[i]))
        used, need, cow = np.array(per_req[k]).T
        steps = np.arange(1, len(used) + 1)
        top, bottom = axes[0, col], axes[1, col]
        top.step(steps, need, where="post", color="tab:red", lw=2, ls="--", label="不共享（每条序列各存一份）")
        top.step(steps, used, where="post", color="tab:blue", lw=2.5, label="共享（块池实际占用）")
        top.set(title=f"{kind}，n = {d['width']}", ylabel="占用的 KV 块", ylim=(0, need.max() * 1.3 + 1))
        top.legend(loc="upper left")
        top.grid(True, alpha=0.3)
        bottom.bar(steps, np.diff(cow, prepend=0), width=1.0, color="0.45")
        bottom.set(xlabel="解码步", ylabel="COW")
    saved = {(r[1], r[2], r[0]): r[5] for r in d["rows"]}
    w = d["width"]
    return figlib.save(fig, "03_blocks_over_steps",
                       title=f"共享的块只存一份：束搜索省下 {saved[('束搜索', 'Alpaca', w)]} 的 KV 块，并行采样省下 "
                             f"{saved[('并行采样', 'Alpaca', w)]}",
                       note=f"两个百分比：03 演示 1 表里 n = {w} 的两行（全部请求合计，Alpaca 式长度，块 {d['block_size']}）。"
                            "每列画省下最多的一个请求；束搜索在第 2 讲的小模型上真的解码，并行采样在块池里重放。")


if __name__ == "__main__":
    s03 = figlib.script("03_sharing_and_cow")
    plot_blocks_over_steps(figlib.quiet(s03.demo_savings))
    d = figlib.quiet(s03.demo_cow)
    frames = pool_frames(d["steps"], d["block_size"], d["n_pool"],
                         lambda st: f"空闲 {st['free']} 块；写时复制累计 {st['cow']} 次")
    print(os.path.relpath(save_gif(frames, figlib.path("03_cow_steps.gif"), legend=LEGEND), figlib.ROOT))
