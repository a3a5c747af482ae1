"""03_sharing_and_cow 的图：并行采样与束搜索时，每个解码步占用的 KV 块数（共享 vs 不共享），标出写时复制。

运行：python figures/plot_03.py [--out DIR]     （约 3 秒；make all 会调用它）
数据全部来自 lecture07/03_sharing_and_cow.py 的 demo1_savings() 返回的 dict：每一步的 (块池占用的块, 不共享时
要的块, 累计 COW 次数)（"steps"，最大的 n / 宽度；束搜索在 TINY 模型上真的解码，并行采样是块池重放，演示 1
在真模型上核对过它逐步相同）。这里只挑请求、画图，不重算。
"""
import os
import sys

import numpy as np

import figlib
from figlib import caption, plt, save_png

FIGURES = ("03_blocks_over_steps.png",)


def compute():
    r = figlib.quiet(figlib.load_script("03_sharing_and_cow").demo1_savings)
    reqs, block_size, w = r["reqs"], r["block_size"], max(r["widths"])
    # 并行采样：提示有满块可共享、最后一块又没写满（会发生写时复制）的请求里，提示最长的那个
    kp = max(range(len(reqs)), key=lambda i: (len(reqs[i][0]) % block_size != 0, len(reqs[i][0])))
    kb = max(range(r["n_beam"]), key=lambda i: int(reqs[i][1][0]))   # 束搜索：演示 1 用的请求里解码步数最多的
    prompt, outs = reqs[kp]
    series = {f"并行采样 n = {w}": r["steps"][("并行采样", kp)], f"束搜索 宽度 {w}": r["steps"][("束搜索", kb)]}
    cfg_p = (f"并行采样：请求 {kp}，输入 {len(prompt)} token，各样本输出 "
             f"{', '.join(str(int(x)) for x in outs[:w])} 个")
    prompt, outs = reqs[kb]
    config = (f"TINY 模型（种子 {r['model_seed']}），块大小 {block_size}；{cfg_p}；"
              f"束搜索：请求 {kb}，输入 {len(prompt)} token，解码 {int(outs[0])} 步")
    paper = "、".join(f"{kind}省 {lo}–{hi}%" for kind, (lo, hi) in r["paper"].items())
    return dict(series=series, config=config, paper=f"对照 vLLM 论文 §6.3（OPT-13B、Alpaca）：{paper} 的 KV 显存；"
                                                      "这里是随机权重的小模型，每幅一个请求。")


def plot_blocks_over_steps(series, out, config, paper_note):
    """每种解码方式一幅：实线 = 共享时块池占用的块，虚线 = 不共享时要的块；▼ = 这一步发生了写时复制。"""
    fig, axes = plt.subplots(1, len(series), figsize=(8 * len(series), 6.8), squeeze=False)
    for ax, (name, rows) in zip(axes[0], series.items()):
        rows = np.asarray(rows)
        steps = np.arange(1, len(rows) + 1)
        ax.step(steps, rows[:, 1], where="post", color="tab:red", lw=2, ls="--", label="不共享（每条序列各存一份）")
        ax.step(steps, rows[:, 0], where="post", color="tab:blue", lw=2.5, label="共享（块池实际占用）")
        new_cow = np.diff(np.concatenate([[0], rows[:, 2]]))
        hit = new_cow > 0
        if hit.any():
            ax.plot(steps[hit], rows[hit, 0], "v", color="black", ms=9,
                    label=f"这一步有写时复制（共 {int(rows[-1, 2])} 次，最多一步 {int(new_cow.max())} 次）")
        saved = 1 - rows[:, 0].sum() / max(1, rows[:, 1].sum())
        ax.set_title(f"{name}：省下 {saved:.0%}（块·步）")
        ax.set_xlabel("解码步")
        ax.set_ylabel("占用的 KV 块")
        ax.set_ylim(0, rows[:, 1].max() * 1.15 + 1)
        ax.grid(True, alpha=0.3)
        ax.legend(loc="upper left")
    fig.suptitle("共享的块只存一份；写进共享的不满块时才复制一块\n" + config, fontsize=14)
    caption(fig, paper_note)
    fig.tight_layout(rect=(0, 0.05, 1, 0.93))
    return save_png(fig, out)


def build(out_dir):
    d = compute()
    return [plot_blocks_over_steps(d["series"], os.path.join(out_dir, FIGURES[0]), d["config"], d["paper"])]


def main(argv=None):
    return figlib.main(argv, __doc__, build)


if __name__ == "__main__":
    sys.exit(main())
