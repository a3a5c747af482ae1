"""03_sharing_and_cow 的图：并行采样与束搜索时，每个解码步占用的 KV 块数（共享 vs 不共享），标出写时复制。

运行：python figures/plot_03.py [--out DIR]     （约 2 秒；make all 会调用它）
数据来自 lecture07/03_sharing_and_cow.py 的 parallel_sampling 和 beam_search（在 TINY 模型上真的解码）。
它们只返回整段的总和；这里在它们每次调用 paged_step 之后记下块池的状态（record_steps），
并核对逐步的数加起来等于它们返回的总和。
"""
import contextlib
import os
import sys

import numpy as np

import figlib
from figlib import caption, plt, save_png

FIGURES = ("03_blocks_over_steps.png",)


@contextlib.contextmanager
def record_steps(s03):
    """临时包一层 s03.paged_step：每次调用后记下 (块池占用的块, 不共享时要的块, 累计 COW 次数)。"""
    rows, real = [], s03.paged_step

    def recording(params, cfg, seqs, toks):
        out = real(params, cfg, seqs, toks)
        pool = seqs[0].pool
        rows.append((pool.num_used, sum(s03.n_blocks(s.length, pool.block_size) for s in seqs), pool.n_cow))
        return out

    s03.paged_step = recording
    try:
        yield rows
    finally:
        s03.paged_step = real


def compute():
    s03 = figlib.load_script("03_sharing_and_cow")
    cfg = s03.config_like(s03.TINY, max_seq=s03.MAX_PROMPT + s03.MAX_OUTPUT)
    params = s03.init_params(cfg, seed=s03.MODEL_SEED)
    reqs = s03.make_requests(cfg)
    # 并行采样：提示有满块可共享、最后一块又没写满（会发生写时复制）的请求里，提示最长的那个
    kp = max(range(len(reqs)), key=lambda i: (len(reqs[i][0]) % s03.PAGE != 0, len(reqs[i][0])))
    kb = max(range(s03.N_BEAM), key=lambda i: int(reqs[i][1][0]))   # 束搜索：演示 1 用的请求里解码步数最多的
    w = max(s03.WIDTHS)
    series = {}
    prompt, outs = reqs[kp]
    with record_steps(s03) as rows:
        shared, private, cow, _ = s03.parallel_sampling(params, cfg, prompt, outs, w)
    decode = rows[1:]                                     # 第 0 次调用是父序列的 prefill
    assert sum(r[0] for r in decode) == shared and sum(r[1] for r in decode) == private and decode[-1][2] == cow
    series[f"并行采样 n = {w}"] = decode
    cfg_p = (f"并行采样：请求 {kp}，输入 {len(prompt)} token，各样本输出 "
             f"{', '.join(str(int(x)) for x in outs[:w])} 个")
    prompt, outs = reqs[kb]
    with record_steps(s03) as rows:
        shared, private, cow, _ = s03.beam_search(params, cfg, prompt, int(outs[0]), w)
    decode = rows[1:]
    assert sum(r[0] for r in decode) == shared and sum(r[1] for r in decode) == private and decode[-1][2] == cow
    series[f"束搜索 宽度 {w}"] = decode
    config = (f"TINY 模型（种子 {s03.MODEL_SEED}），块大小 {s03.PAGE}；{cfg_p}；"
              f"束搜索：请求 {kb}，输入 {len(prompt)} token，解码 {int(outs[0])} 步")
    paper = "、".join(f"{kind}省 {lo}–{hi}%" for kind, (lo, hi) in s03.VLLM_63.items())
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
