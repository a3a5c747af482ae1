"""04_prefix_caching 的图：块的热度、命中率随缓存容量的变化、prefill 的 GPU 时间随缓存容量的变化。

运行：python figures/plot_04.py [--out DIR]     （约 6 秒，2 核；make all 会调用它）
数据全部来自 04 的演示返回的字典：演示 3（块的热度、各策略的命中率、论文表 1 的点）和演示 4
（prefill 的 GPU 时间）。两个演示共用一份 trace 和命中表，只是容量比脚本默认的多几个点，让曲线更密。
"""
import os
import sys

import numpy as np

import figlib
from figlib import caption, plt, save_png

FIGURES = ("04_block_popularity.png", "04_hit_ratio.png", "04_prefill_time.png")
# 画曲线用的容量（块）：04 脚本的 CAPACITIES 全部包含在内，另加几个点让曲线更密；None = 无限
EXTRA_CAPACITIES = (300, 500, 2_000, 5_000, 20_000, 200_000)
COLORS = {"lru": "tab:blue", "lfu": "tab:orange", "lengthaware": "tab:green", "min": "tab:gray"}
MARKERS = {"lru": "o", "lfu": "s", "lengthaware": "^", "min": "D"}


def compute():
    """跑 04 的演示 3、4（不打印），从它们返回的字典里取三张图的数据。"""
    s04 = figlib.load_script("04_prefix_caching")
    finite = sorted({c for c in s04.CAPACITIES if c is not None} | set(EXTRA_CAPACITIES))
    caps = tuple(finite) + (None,)
    data = s04.trace_sweep(s04.read_trace(), capacities=caps)
    d3 = figlib.quiet(s04.demo3_trace, data)
    d4 = figlib.quiet(s04.demo4_compute_saved, data, caps, d3["policies"])
    st = d3["stats"]
    trace_cfg = (f"合成 trace（种子 {d3['seed']}）：{st['n']:,} 个请求、{st['minutes']:.0f} 分钟、"
                 f"{st['total_blocks']:,} 次块访问、块大小 {d3['block_size']} token")
    return dict(
        counts=st["counts"], trace_cfg=trace_cfg, caps=caps,
        ratio={p: [d3["ratio"][(p, c)] for c in caps] for p in d3["policies"]},
        names=d3["names"], paper=d3["paper"],
        paper_src="Mooncake arXiv 2407.00079v3 表 1（arXiv v3 的 trace mooncake_trace.jsonl，不是 FAST'25 的 Tool&Agent）",
        base_hours=d4["base_hours"], hours={p: [d4["hours"][(p, c)] for c in caps] for p in d4["policies"]},
        prefill_cfg=(f"{d4['model']}、{d4['node']} 张量并行、{d4['mfu']:.0%} 峰值算力；"
                     f"命中的 KV 从{d4['tier']}读（{d4['tier_gb_per_s']:g} GB/s），与计算按层重叠（FAST'25 式 1）"),
    )


# ---------------------------------------------------------------- 图 1：块的热度
def plot_block_popularity(counts, out, config):
    """左：按访问次数排名的秩–频图（log–log）；右：每块命中次数（= 访问次数 − 1）的 CDF。"""
    v = np.sort(np.asarray(counts))[::-1]
    hits = v[::-1] - 1                                   # 升序：第一次访问不算命中
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(16, 6.6))
    rank = np.arange(1, len(v) + 1)
    a1.loglog(rank, v, color="tab:blue", lw=2)
    a1.set_xlabel("块的排名（按访问次数从高到低）")
    a1.set_ylabel("访问次数")
    a1.set_title("秩–频：少数块被访问成千上万次")
    a1.annotate(f"最热的块：{v[0]:,} 次", (1, v[0]), xytext=(8, v[0] / 3), fontsize=12,
                arrowprops=dict(arrowstyle="->", color="0.3"))
    a1.grid(True, which="major", alpha=0.3)

    xs = np.unique(hits)
    frac_blocks = np.searchsorted(hits, xs, side="right") / len(hits)
    cum_hits = np.cumsum(hits)
    frac_hits = (cum_hits[np.searchsorted(hits, xs, side="right") - 1] / max(1, cum_hits[-1]))
    a2.step(xs, frac_blocks, where="post", color="tab:blue", lw=2, label="块的比例（命中 ≤ x 次）")
    a2.step(xs, frac_hits, where="post", color="tab:red", lw=2, ls="--",
            label="这些块贡献的命中占全部命中的比例")
    zero = float(np.mean(hits == 0))
    a2.axhline(zero, color="0.5", lw=1, ls=":")
    a2.text(1.5, zero + 0.02, f"{zero:.0%} 的块从没被再次使用", fontsize=12, color="0.25")
    a2.set_xscale("symlog", linthresh=1)
    a2.set_xlim(0, max(2, xs[-1]) * 1.5)
    a2.set_ylim(0, 1.02)
    a2.set_xlabel("每块的命中次数 x（无限容量缓存）")
    a2.set_ylabel("累计比例")
    a2.set_title("命中次数的 CDF（对照 Mooncake arXiv v3 图 6）")
    a2.legend(loc="lower right")
    a2.grid(True, which="major", alpha=0.3)
    fig.suptitle(f"块的热度 —— {config}")
    caption(fig, f"{len(v):,} 个不同的块。论文（Mooncake arXiv v3 §4.2）：arXiv v3 的 trace 里超过 50% 的块没有被再次使用，"
                 "有的块被访问数万次。")
    fig.tight_layout(rect=(0, 0.05, 1, 0.95))
    return save_png(fig, out)


# ---------------------------------------------------------------- 图 2：命中率与容量
def _cap_axis(ax, caps):
    """x 轴：有限容量按对数排开，"无限"放在最右边单独一格。返回每个容量的 x 坐标。"""
    finite = [c for c in caps if c is not None]
    inf_x = max(finite) * 4
    xs = [inf_x if c is None else c for c in caps]
    ax.set_xscale("log")
    ticks = [c for c in finite if c in (300, 1_000, 3_000, 10_000, 30_000, 100_000)] + [inf_x]
    ax.set_xticks(ticks, [f"{c:,}" for c in ticks[:-1]] + ["无限"])
    ax.minorticks_off()
    ax.axvspan(max(finite) * 1.6, inf_x * 1.6, color="0.93", zorder=0)
    return xs, inf_x


def plot_hit_ratio(caps, ratio, names, paper, out, config, paper_src):
    """每种策略的命中率随容量的曲线；论文表 1 的点用空心标记叠在上面。"""
    fig, ax = plt.subplots(figsize=(14, 7.5))
    xs, inf_x = _cap_axis(ax, caps)
    for p, ys in ratio.items():
        ax.plot(xs, ys, MARKERS.get(p, "o") + "-", color=COLORS.get(p), lw=2, ms=6, label=f"本实验 {names[p]}")
        if p in paper:
            pts = sorted((inf_x if c is None else c, v) for c, v in paper[p].items())
            ax.plot([x for x, _ in pts], [y for _, y in pts], MARKERS.get(p, "o"), ls=":", color=COLORS.get(p),
                    mfc="none", ms=11, mew=2, label=f"论文 {names[p]}")
    ax.set_xlabel("缓存容量（块，每块 512 token）")
    ax.set_ylabel("前缀命中率（命中的块 / 全部块）")
    ax.set_ylim(0, max(0.6, max(max(v) for v in ratio.values()) * 1.1))
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(loc="lower right", ncol=2)
    ax.set_title(f"命中率与缓存容量 —— {config}")
    note = "MIN 数的是逐块命中（离线最优），是任何策略前缀命中的上界；" if "min" in ratio else ""
    caption(fig, f"空心标记 = 论文的点：{paper_src}。{note}两边的 trace 不同：比的是曲线的形状和策略的排序。")
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    return save_png(fig, out)


# ---------------------------------------------------------------- 图 3：prefill 的 GPU 时间
def plot_prefill_time(caps, hours, names, base_hours, out, config, trace_cfg):
    """全部请求的 prefill GPU 时间（小时）随缓存容量的变化；水平线是不缓存的时间。"""
    fig, ax = plt.subplots(figsize=(14, 7.5))
    xs, _ = _cap_axis(ax, caps)
    ax.axhline(base_hours, color="tab:red", lw=2, ls="--", label=f"不缓存：{base_hours:.2f} 小时")
    for p, ys in hours.items():
        label = names[p] + ("——下界（逐块命中当作前缀命中）" if p == "min" else "")
        ax.plot(xs, ys, MARKERS.get(p, "o") + "-", color=COLORS.get(p), lw=2, ms=6, label=label)
    inf_h = min(ys[-1] for ys in hours.values())
    ax.annotate(f"无限容量：{inf_h:.2f} 小时（少 {1 - inf_h / base_hours:.0%}）", (xs[-1], inf_h),
                xytext=(xs[-1] / 12, inf_h * 0.7), ha="center", fontsize=12, arrowprops=dict(arrowstyle="->", color="0.3"))
    ax.set_ylim(0, base_hours * 1.1)
    ax.set_xlabel("缓存容量（块，每块 512 token）")
    ax.set_ylabel("prefill 的 GPU 时间（小时）")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(loc="lower left")
    ax.set_title("缓存越大，prefill 越省 —— " + trace_cfg, fontsize=13)
    caption(fig, config)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    return save_png(fig, out)


def build(out_dir):
    d = compute()
    o = [os.path.join(out_dir, f) for f in FIGURES]
    return [plot_block_popularity(d["counts"], o[0], d["trace_cfg"]),
            plot_hit_ratio(d["caps"], d["ratio"], d["names"], d["paper"], o[1], d["trace_cfg"], d["paper_src"]),
            plot_prefill_time(d["caps"], d["hours"], d["names"], d["base_hours"], o[2], d["prefill_cfg"],
                              d["trace_cfg"])]


def main(argv=None):
    return figlib.main(argv, __doc__, build)


if __name__ == "__main__":
    sys.exit(main())
