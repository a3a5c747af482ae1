"""05_kv_store 的图：从各存储层级读 KV 与重算的时间（保本长度）；四种调度的平均 TTFT（对照 FAST'25 图 5）；
prefill/decode 分离时发 KV 和 prefill 的时间（什么时候藏得住）。

运行：python figures/plot_05.py [--out DIR]     （约 4 秒；make all 会调用它）
数字全部来自 lecture07/05_kv_store.py 的 run([1, 3, 4]) 返回的 dict：演示 1 的曲线（重算 / 各层级读的时间、
保本长度）和配置；演示 3 的模拟结果、调度器名字、论文的图 5 数字；演示 4 的 prefill / 发 KV 曲线。
这里只画图，不重算。
"""
import os
import sys

import numpy as np

import figlib
from figlib import caption, plt, save_png

FIGURES = ("05_load_vs_recompute.png", "05_ttft_by_scheduler.png", "05_pd_transfer.png")
TIER_COLORS = ("tab:purple", "tab:blue", "tab:green", "tab:orange")


def compute():
    s05 = figlib.load_script("05_kv_store")
    r = figlib.quiet(s05.run, [1, 3, 4])
    d1, d3, d4 = r[1], r[3], r[4]
    tiers_cfg = (f"{d1['model']}（每 token 的 KV {d1['kv_kib_per_token']:g} KiB），"
                 f"{d1['mfu']:.0%} 峰值算力，重算按 FAST'25 式 1")
    sched_cfg = (f"{d3['source']}、{d3['nodes']} 台 {d3['node']} prefill 节点、"
                 f"各 {d3['capacity']:,} 块本地 LRU、负载 = 不缓存所需算力的 {d3['load']:.0%}")
    ps = d3["paper_setup"]
    paper_cfg = f"{ps['source']}：{ps['nodes']} 台 {ps['node']} 回放 {ps['trace']}"
    pd_cfg = (f"{d4['model']}、{d4['node']}、{d1['mfu']:.0%} 峰值算力；一层算完发一层（按层流水），"
              f"前缀命中的 KV 从本机 DRAM 读")
    return dict(n=d1["curves"]["n"], curves=d1["curves"]["by_node"], tiers_cfg=tiers_cfg, results=d3["results"],
                names=d3["names"], paper=d3["paper"], sched_cfg=sched_cfg, paper_cfg=paper_cfg,
                pd=d4["curves"], pd_hit=d4["hit"], pd_cfg=pd_cfg)


def plot_load_vs_recompute(n, curves, out, config):
    """每台机器一幅：重算时间（黑）与从各层级读的时间（彩色），交点 = 保本的前缀长度。"""
    fig, axes = plt.subplots(1, len(curves), figsize=(8 * len(curves), 7), squeeze=False, sharey=True)
    n = np.asarray(n, dtype=float)
    for ax, (node, c) in zip(axes[0], curves.items()):
        ax.loglog(n, np.asarray(c["recompute"]) * 1e3, color="black", lw=3, label="重算（prefill）")
        for k, (tier, ys) in enumerate(c["load"].items()):
            ns = c["break_even"][tier]
            if ns <= 0:
                tag = "任意长度读都更快"
            elif ns > n[-1]:
                tag = f"保本 > {n[-1]:,.0f}"
            else:
                tag = f"保本 {ns:,.0f} token"
            ax.loglog(n, np.asarray(ys) * 1e3, color=TIER_COLORS[k % len(TIER_COLORS)], lw=2, ls="--",
                      label=f"读：{tier}（{c['gbps'][tier]:g} GB/s）— {tag}")
            if n[0] <= ns <= n[-1]:
                y = float(np.interp(ns, n, ys)) * 1e3
                ax.plot([ns], [y], "o", color=TIER_COLORS[k % len(TIER_COLORS)], ms=11, mec="black")
                ax.annotate(f"保本 {ns:,.0f}", (ns, y), xytext=(10, -22), textcoords="offset points", fontsize=12)
        ax.set_title(node)
        ax.set_xlabel("前缀长度（token）")
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(loc="lower right", fontsize=12)
    axes[0][0].set_ylabel("时间（ms）")
    fig.suptitle(f"读 KV 还是重算 —— {config}")
    caption(fig, "虚线低于黑线：从这一层读比重算快。读 ∝ n，重算 ∝ n² + n：前缀越长越值得读；GPU 越快，对存储带宽的要求越高。")
    fig.tight_layout(rect=(0, 0.05, 1, 0.95))
    return save_png(fig, out)


def plot_ttft(results, names, paper, out, config, paper_cfg="Mooncake FAST'25 图 5"):
    """左：四种调度的平均 TTFT（柱）和 P90（横线）；右：相对全局缓存感知的倍数，本实验与论文并排。"""
    order = [s for s in ("random", "load_balancing", "local_cache", "global_cache") if s in results]
    order += [s for s in results if s not in order]
    labels = [names.get(s, s) for s in order]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(16, 7))
    x = np.arange(len(order))
    mean = [results[s]["mean"] for s in order]
    a1.bar(x, mean, color="tab:blue", width=0.6, label="平均 TTFT")
    a1.scatter(x, [results[s]["p90"] for s in order], marker="_", s=900, color="black", lw=3, label="P90", zorder=3)
    for xi, m in zip(x, mean):
        a1.text(xi, m, f"{m:.2f}", ha="center", va="bottom", fontsize=12)
    a1.set_xticks(x, labels)
    a1.set_ylabel("TTFT（秒，只算 prefill：排队 + 拉 KV + 计算）")
    a1.set_title("本实验：平均 TTFT 与 P90")
    a1.legend(loc="upper right")
    a1.grid(True, axis="y", alpha=0.3)

    ref = "global_cache" if "global_cache" in results else order[-1]
    ours = [results[s]["mean"] / results[ref]["mean"] for s in order]
    theirs = [paper[s] / paper[ref] if s in paper and ref in paper else np.nan for s in order]
    w = 0.38
    a2.bar(x - w / 2, ours, w, color="tab:blue", label="本实验")
    a2.bar(x + w / 2, theirs, w, color="tab:gray", label="论文（Mooncake FAST'25 图 5）")
    for xi, a, b in zip(x, ours, theirs):
        a2.text(xi - w / 2, a, f"{a:.2f}×", ha="center", va="bottom", fontsize=12)
        if not np.isnan(b):
            a2.text(xi + w / 2, b, f"{b:.2f}×", ha="center", va="bottom", fontsize=12)
    a2.set_xticks(x, labels)
    a2.set_ylabel(f"平均 TTFT 是{names.get(ref, ref)}的几倍")
    a2.set_title("相对大小：本实验 vs 论文")
    a2.legend(loc="upper right")
    a2.grid(True, axis="y", alpha=0.3)
    fig.suptitle(f"请求发给哪台 prefill 节点 —— {config}", fontsize=14)
    src = "、".join(f"{names.get(s, s)} {paper[s]:.2f} s" for s in order if s in paper)
    caption(fig, f"论文的平均 TTFT（{paper_cfg}）：{src}；设置不同，绝对值不可比，比较的是顺序和倍数。")
    fig.tight_layout(rect=(0, 0.05, 1, 0.95))
    return save_png(fig, out)


def plot_pd_transfer(curves, hit, out, config):
    """prefill 时间（黑：不命中；灰虚线：命中 hit）和几种网卡上发整个请求 KV 的时间（彩色）：发的线在 prefill
    的线下面，发送就藏在 prefill 后面；交点左边（prompt 短）藏不住。"""
    fig, ax = plt.subplots(figsize=(16, 8))
    n = np.asarray(curves["n"], dtype=float)
    ax.loglog(n, np.asarray(curves["prefill"]) * 1e3, color="black", lw=3, label="prefill（不命中）")
    ax.loglog(n, np.asarray(curves["prefill_hit"]) * 1e3, color="0.45", lw=3, ls="--",
              label=f"prefill（前缀命中 {hit:.0%}：只算剩下的 token）")
    colors = ("tab:green", "tab:blue", "tab:red", "tab:purple")
    for k, (gbps, ys) in enumerate(sorted(curves["send"].items(), key=lambda kv: -float(kv[0]))):
        ax.loglog(n, np.asarray(ys) * 1e3, color=colors[k % len(colors)], lw=2,
                  label=f"发整个请求的 KV：网卡合计 {float(gbps):g} Gbps")
    ax.set_xlabel("prompt 长度（token）")
    ax.set_ylabel("时间（ms）")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(loc="upper left", fontsize=12)
    ax.set_title(f"prefill/decode 分离：把 KV 送到 decode 节点 —— {config}")
    caption(fig, "彩色线在 prefill 线下面：发 KV 藏在 prefill 后面（只露出最后一层）；在上面：藏不住，TTFT 多出差值。"
                 "前缀命中时要算的少了（灰线），要发的 KV 不变，网络更容易露出来。")
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    return save_png(fig, out)


def build(out_dir):
    d = compute()
    o = [os.path.join(out_dir, f) for f in FIGURES]
    return [plot_load_vs_recompute(d["n"], d["curves"], o[0], d["tiers_cfg"]),
            plot_ttft(d["results"], d["names"], d["paper"], o[1], d["sched_cfg"], d["paper_cfg"]),
            plot_pd_transfer(d["pd"], d["pd_hit"], o[2], d["pd_cfg"])]


def main(argv=None):
    return figlib.main(argv, __doc__, build)


if __name__ == "__main__":
    sys.exit(main())
