"""04_prefix_caching 的图：块的热度、命中率随缓存容量的变化、prefill 的 GPU 时间随缓存容量的变化。

运行：python figures/plot_04.py [--out DIR]     （约 6 秒，2 核；make all 会调用它）
数据全部来自 04 的演示返回的字典：演示 3（块的热度、各策略的命中率、论文表 1 的点）和演示 4
（prefill 的 GPU 时间）。两个演示共用一份 trace 和命中表，只是容量比脚本默认的多几个点，让曲线更密。
每张图的标题说结论（由数据算出），配置放在副标题或脚注里；每个面板至多 4 条线。
"""
import os
import sys

import figlib  # 最先：它装好 quiet_endings（用错了 Python、Ctrl-C 只打一行），再 import 别的
import numpy as np
from figlib import SLIDE, finish, plt, save_png

FIGURES = ("04_block_popularity.png", "04_hit_ratio.png", "04_prefill_time.png")
# 画曲线用的容量（块）就是 04 脚本的 CAPACITIES：图上的每个点都是终端表里的一格，不多画脚本没印的容量
#（多画的点上 LRU 可能低于 LFU，和终端那句"LRU 在每个要淘汰的容量都不低于 LFU"矛盾）
COLORS = {"lru": "tab:blue", "lfu": "tab:orange", "lengthaware": "tab:green", "min": "0.35"}
MARKERS = {"lru": "o", "lfu": "s", "lengthaware": "^", "min": "D"}
THOUSANDS = plt.FuncFormatter(lambda x, _: f"{x:,.0f}")   # 刻度和终端一样用千分位：10,000 而不是 10⁴
HEADLINE_CAP = 10_000       # 命中率图的标题说这个容量（不在数据里时用最小的有限容量）


def compute():
    """跑 04 的演示 3、4（不打印），从它们返回的字典里取三张图的数据。"""
    s04 = figlib.load_script("04_prefix_caching")
    finite = sorted(c for c in s04.CAPACITIES if c is not None)
    caps = tuple(finite) + (None,)
    data = s04.trace_sweep(s04.read_trace(), capacities=caps)
    d3 = figlib.quiet(s04.demo4_policies, data)
    online = tuple(p for p in d3["policies"] if p != "min")
    d4 = figlib.quiet(s04.demo5_compute_saved, data, caps, online)
    st = d3["stats"]
    trace_cfg = (f"合成 trace（种子 {d3['seed']}）：{st['n']:,} 个请求、{st['minutes']:.0f} 分钟、"
                 f"{st['total_blocks']:,} 次块访问、块大小 {d3['block_size']} token")
    return dict(
        counts=st["counts"], trace_cfg=trace_cfg, caps=caps,
        ratio={p: [d3["ratio"][(p, c)] for c in caps] for p in d3["policies"]},
        names=d3["names"], paper=d3["paper"],
        paper_src="Mooncake arXiv 2407.00079v3 表 1（arXiv v3 的 trace mooncake_trace.jsonl，不是 FAST'25 的 Tool&Agent）",
        base_hours=d4["base_hours"], hours={p: [d4["hours"][(p, c)] for c in caps] for p in d4["policies"]},
        prefill_cfg=d4["method"],
    )


# ---------------------------------------------------------------- 图 1：块的热度
def plot_block_popularity(counts, out, config):
    """左：秩–频（log–log）；中：块按命中次数的 CDF；右：最热的一部分块占了多少访问。每个面板一条线。"""
    v = np.sort(np.asarray(counts))[::-1]
    total, n = int(v.sum()), len(v)
    once, top1 = float(np.mean(v == 1)), int(v[:max(1, n // 100)].sum()) / total
    fig, (a1, a2, a3) = plt.subplots(1, 3, figsize=SLIDE)
    rank = np.arange(1, n + 1)
    a1.loglog(rank, v, color="tab:blue", lw=2)
    a1.set(xlabel="块的排名（按访问次数，对数刻度）", ylabel="访问次数（对数刻度）", title="秩–频")
    a1.text(0.97, 0.95, f"最热的块：{v[0]:,} 次", transform=a1.transAxes, ha="right", va="top")
    a1.grid(True, which="major", alpha=0.3)
    for axis in (a1.xaxis, a1.yaxis):
        axis.set_major_formatter(THOUSANDS)

    hits = v[::-1] - 1                                   # 升序：第一次访问不算命中
    xs = np.unique(hits)
    a2.step(xs, np.searchsorted(hits, xs, side="right") / n, where="post", color="tab:blue", lw=2)
    a2.set_xscale("symlog", linthresh=1)
    a2.set_xlim(0, max(2, xs[-1]) * 1.5)
    a2.set_ylim(0, 1.02)
    a2.set_xticks([t for t in (0, 1, 10, 100, 10_000) if t <= max(2, xs[-1]) * 1.5])   # 少几个刻度：标签不挤
    a2.xaxis.set_major_formatter(THOUSANDS)
    a2.set(xlabel="再次用到的次数 x（0–1 线性，之后对数）", ylabel="块的比例（≤ x 次）",
           title="CDF（对照 arXiv v3 图 6）")
    a2.text(0.97, 0.08, f"{once:.0%} 的块只出现一次", transform=a2.transAxes, ha="right", va="bottom")
    a2.grid(True, which="major", alpha=0.3)

    frac_blocks = rank / n
    a3.plot(frac_blocks, np.cumsum(v) / total, color="tab:red", lw=2)
    a3.set_xscale("log")
    a3.set_ylim(0, 1.02)
    a3.set(xlabel="最热的那部分块（对数刻度）", ylabel="它们占全部访问的比例", title="访问集中在少数块上")
    a3.xaxis.set_major_formatter(plt.FuncFormatter(lambda x, _: f"{x * 100:g}%"))
    a3.text(0.03, 0.95, f"最热 1% 的块占 {top1:.0%} 的访问", transform=a3.transAxes, ha="left", va="top")
    a3.grid(True, which="major", alpha=0.3)
    finish(fig, f"{once:.0%} 的块只用过一次，最热 1% 的块却占了 {top1:.0%} 的访问",
           f"{config}；{n:,} 个不同的块。论文（Mooncake arXiv v3 §4.2）：超过 50% 的块没有被再次使用，"
           "有的块被访问数万次。")
    return save_png(fig, out)


# ---------------------------------------------------------------- 图 2：命中率与容量
def _cap_axis(ax, caps):
    """x 轴：有限容量按对数排开，"无限"放在最右边单独一格。返回每个容量的 x 坐标和"无限"的 x。"""
    finite = [c for c in caps if c is not None]
    inf_x = max(finite) * 4
    xs = []
    for c in caps:
        xs.append(c if c is not None else inf_x)
    ax.set_xscale("log")
    ticks = finite + [inf_x]
    labels, last = [], None
    for c in finite:                           # 挨得太近（不到 2.5 倍）的容量只画刻度、不写数，免得标签叠在一起
        if last is None or c >= 2.5 * last:
            labels.append(f"{c:,}")
            last = c
        else:
            labels.append("")
    ax.set_xticks(ticks, labels + ["无限"])
    ax.minorticks_off()
    ax.axvspan(max(finite) * 1.6, inf_x * 1.6, color="0.93", zorder=0)
    return xs, inf_x


def headline_hit(caps, ratio, policy="lru"):
    """标题里的那一格：(容量, 命中率, 无限容量的命中率)。"""
    finite = [c for c in caps if c is not None]
    cap = HEADLINE_CAP
    if cap not in finite:
        cap = min(finite)
    return cap, ratio[policy][list(caps).index(cap)], ratio[policy][list(caps).index(None)]


def plot_hit_ratio(caps, ratio, names, paper, out, config, paper_src):
    """左：本实验的各策略（含 MIN）；右：论文表 1 的点（另一个 trace）。y 轴只框住数据。"""
    fig, (ax, bx) = plt.subplots(1, 2, figsize=SLIDE, sharey=True)
    xs, inf_x = _cap_axis(ax, caps)
    for p, ys in ratio.items():
        ax.plot(xs, ys, MARKERS.get(p, "o") + "-", color=COLORS.get(p), lw=2, ms=6, label=names[p])
    _cap_axis(bx, caps)
    for p, pts in paper.items():
        if p in ratio:
            pts = sorted((c if c is not None else inf_x, v) for c, v in pts.items())
            bx.plot([x for x, _ in pts], [y for _, y in pts], MARKERS.get(p, "o") + "--", color=COLORS.get(p),
                    lw=2, ms=8, mfc="none", mew=2, label=f"论文 {names[p]}")
    vals = [y for ys in ratio.values() for y in ys] + [y for p in paper if p in ratio for y in paper[p].values()]
    lo, hi = min(vals), max(vals)
    pad = max(0.02, (hi - lo) * 0.08)
    y0 = max(0, lo - pad)
    ax.set_ylim(y0, min(1, hi + pad))
    ax.set(xlabel="缓存容量（块，对数刻度）", ylabel=f"前缀命中率（y 轴从 {y0:.2f} 起）", title="本实验（合成 trace）")
    bx.set(xlabel="缓存容量（块，对数刻度）", title="论文 arXiv v3 表 1（另一个 trace）")
    for a in (ax, bx):
        a.grid(True, which="major", alpha=0.3)
    bx.legend(*ax.get_legend_handles_labels(), loc="upper left")   # 一个图例（右边空白处）：右图同色、空心虚线 = 论文
    cap, r, inf = headline_hit(caps, ratio)
    finish(fig, f"容量降到 {cap:,} 块，LRU 仍保住 {r:.2f}（无限容量时 {inf:.2f}）",
           f"{config}；每块 512 token。MIN 数逐块命中（离线最优），是前缀命中率的上界。论文的点：{paper_src}；"
           "两边的 trace 不同：比的是曲线的形状和策略的排序。")
    return save_png(fig, out)


# ---------------------------------------------------------------- 图 3：prefill 的 GPU 时间
def plot_prefill_time(caps, hours, names, base_hours, out, config, trace_cfg):
    """全部请求的 prefill GPU 时间（小时）随缓存容量的变化；虚线是不缓存的时间。在线策略至多 3 条 + 基线。"""
    fig, ax = plt.subplots(figsize=SLIDE)
    xs, _ = _cap_axis(ax, caps)
    ax.axhline(base_hours, color="tab:red", lw=2, ls="--", label=f"不缓存：{base_hours:.2f} 小时")
    shown = [p for p in hours if p != "min"][:3]
    for p in shown:
        ax.plot(xs, hours[p], MARKERS.get(p, "o") + "-", color=COLORS.get(p), lw=2, ms=6, label=names[p])
    best = min(hours[p][-1] for p in shown)
    low = min(min(hours[p]) for p in shown)
    y0 = max(0, low - 0.1 * (base_hours - low))
    ax.set_ylim(y0, base_hours + 0.08 * (base_hours - low))
    ax.set(xlabel="缓存容量（块，每块 512 token，对数刻度）", ylabel=f"prefill 的 GPU 时间（小时，y 轴从 {y0:.1f} 起）")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(loc="upper right", bbox_to_anchor=(0.99, 0.86))          # 基线之下、曲线之上的空白处
    finish(fig, f"无限缓存把 prefill 的 GPU 时间从 {base_hours:.2f} 降到 {best:.2f} 小时（少 {1 - best / base_hours:.0%}）",
           f"{trace_cfg}。{config}")
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
