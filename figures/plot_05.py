"""05_kv_store 的图：从各存储层级读 KV 与重算（读更快的最短前缀）；集群变大时最忙那块网卡的负载（复制热点块前后）；
四种调度的平均 TTFT（对照 FAST'25 图 5）；prefill/decode 分离时发 KV 和 prefill 的时间（从多长起藏得住）。

运行：python figures/plot_05.py [--out DIR]     （约 5 秒；make all 会调用它）
数字全部来自 lecture07/05_kv_store.py 的 run() 返回的 dict（演示 1–4）。这里只画图，不重算。
"""
import os
import sys

import figlib  # 最先：它装好 quiet_endings（用错了 Python、Ctrl-C 只打一行），再 import 别的
import numpy as np
from figlib import SLIDE, finish, plt, save_png
from lab_common.say import change, fixed, integer, pct, pct1, times

FIGURES = ("05_load_vs_recompute.png", "05_hot_nic.png", "05_ttft_by_scheduler.png", "05_pd_transfer.png")
TIER_COLORS = {"HBM": "tab:purple", "本机 DRAM": "tab:blue", "远端 DRAM": "tab:green", "SSD": "tab:orange"}
K_COLORS = ("tab:red", "tab:orange", "tab:blue", "tab:green")
NBSP = "\u00a0"          # 数和单位之间不折行


def compute():
    s05 = figlib.load_script("05_kv_store")
    return figlib.quiet(s05.run, [1, 2, 3, 4])


def gbs(x):
    """带宽：和终端一样带千分位：gbs(16312) == '16,312'。"""
    return f"{x:,g}"


def break_even_title(curves):
    """标题：每台机器上哪些层级要前缀够长才比重算快。"""
    parts = []
    for node, c in curves.items():
        slow = [(t, n) for t, n in c["break_even"].items() if n >= 1]
        if slow:
            parts.append(f"{node} 上 " + "、".join(f"{t} 要前缀超过 {integer(n)} token" for t, n in slow))
        else:
            parts.append(f"{node} 上每一层都比重算快")
    return "；".join(parts)


def plot_load_vs_recompute(n, curves, out, config):
    """每台机器一幅：重算时间（黑）与从各层级读的时间（虚线），交点 = 读更快的最短前缀。HBM 快得看不出差别，
    只写在图注里（每幅至多 4 条线）。"""
    fig, axes = plt.subplots(1, len(curves), figsize=SLIDE, squeeze=False, sharey=True)
    n = np.asarray(n, dtype=float)
    skipped = []
    for ax, (node, c) in zip(axes[0], curves.items()):
        ax.loglog(n, np.asarray(c["recompute"]) * 1e3, color="black", lw=3, label="重算（prefill）")
        tiers = [t for t in c["load"] if t != "HBM"] or list(c["load"])
        skipped = [t for t in c["load"] if t not in tiers]
        for tier in tiers[:3]:
            color = TIER_COLORS.get(tier, "tab:gray")
            ax.loglog(n, np.asarray(c["load"][tier]) * 1e3, color=color, lw=2, ls="--",
                      label=f"读：{tier}（{c['bandwidth'][tier]}）")
            ns = c["break_even"][tier]
            if n[0] <= ns <= n[-1]:
                y = float(np.interp(ns, n, c["load"][tier])) * 1e3
                ax.plot([ns], [y], "o", color=color, ms=11, mec="black", zorder=3)
                ax.annotate(f"读更快的最短前缀\n{integer(ns)} token", (ns, y), xytext=(-14, 14), textcoords="offset points",
                            ha="right", va="bottom")        # 点的左上方：两条线都往右上升，那里空着（图例在面板外）
        ax.set_title(node)
        ax.set_xlabel("前缀长度（token，对数刻度）")
        ax.grid(True, which="major", alpha=0.3)
    axes[0][0].set_ylabel("时间（ms，对数刻度）")
    note = "读 = KV 字节 / 带宽（网卡的 Gbps ÷ 8 = GB/s）。虚线在黑线下面：从这一层读比重算快。读 ∝ n，重算 ∝ n² + n：前缀越长越值得读；GPU 越快，要的带宽越高。"
    if skipped:
        c = next(iter(curves.values()))
        note += "".join(f"{t}（{c['bandwidth'][t].replace(' ', NBSP)}）快得多，图里省略。" for t in skipped)
    finish(fig, break_even_title(curves), config + "。" + note, legend=axes[0][0].get_legend_handles_labels())
    return save_png(fig, out)        # 几幅的线和名字一样：一个图例，在面板下面，不遮住线


def plot_hot_nic(d2, out):
    """左：最忙那块网卡的负载随节点数（不复制和几种副本数，100% 处一条参考线）；右：同样几种 k 的平均排队。"""
    nodes, by = d2["nodes"], d2["by"]
    ks = d2["replicas"][:3] + d2["replicas"][3:][-1:]                     # 至多 4 条线：1、2、4 和最大的 k
    fig, (a1, a2) = plt.subplots(1, 2, figsize=SLIDE)
    x = np.arange(len(nodes))
    for k, color in zip(ks, K_COLORS):
        label = f"复制 {k} 份"
        if k == 1:
            label = "不复制"
        loads = [by[(n, k)]["hot_load"] for n in nodes]
        if None not in loads:
            a1.plot(x, np.asarray(loads) * 100, "o-", color=color, lw=2.5, ms=8, label=label)
            for xi, v in zip(x, loads):
                if k == ks[0] or xi == x[-1]:
                    a1.annotate(pct(v), (xi, v * 100), xytext=(0, 8), textcoords="offset points", ha="center", color=color)
        a2.semilogy(x, [max(by[(n, k)]["mean"] * 1e3, 1e-3) for n in nodes], "o-", color=color, lw=2.5, ms=8,
                    label=label)
    a1.axhline(100, color="0.3", lw=1.5, ls=":")
    a1.set_ylim(0, 1.15 * max([100] + [by[(n, k)]["hot_load"] * 100 for n in nodes for k in ks
                                       if by[(n, k)]["hot_load"] is not None]))
    a1.text(x[0], 103, "100% 以上：超载", color="0.3", va="bottom")
    for ax in (a1, a2):
        ax.set_xticks(x, [f"{n:,}" for n in nodes])
        ax.set_xlabel("节点数（请求率跟着节点数放大）")
        ax.grid(True, axis="y", alpha=0.3)
        ax.legend(loc="upper left")
    a1.set_ylabel("最忙那块网卡的负载（%）")
    a1.set_title("最忙的网卡")
    a2.set_ylabel("平均排队（ms，对数坐标）")
    a2.set_title("平均排队")
    n_big, k1 = nodes[-1], by[(nodes[-1], 1)]
    title = f"不复制时最忙网卡的负载{change(by[(nodes[0], 1)]['hot_load'], k1['hot_load'], pct)}"
    if len(ks) > 1 and k1["hot_load"] is not None:
        title += f"；{n_big:,} 台复制 {ks[1]} 份：{change(k1['hot_load'], by[(n_big, ks[1])]['hot_load'], pct)}"
    if k1["hot_load"] is None:
        title = f"全部请求同时到达：{n_big:,} 台不复制时平均排队 {fixed(1, 'ms')(k1['mean'] * 1e3)}"
    note = (f"{d2['source']}，热点块 {d2['n_hot']} 个，每台网卡合计 {d2['nic_gbps']:g}{NBSP}Gbps；{d2['rate_text']}。"
            "负载 = 要发的字节 / (带宽 × trace 时长)。")
    if k1["avg_load"] is not None:
        note += f"{n_big:,} 台不复制时，全部网卡的平均负载 {pct1(k1['avg_load'])}"
        if d2["crowding"] == "hot":                 # 和演示 2 的句子同一个判断（05 的 crowding）
            note += "：不是总带宽不够，是热门前缀所在的那几台被挤爆"
        note += "。"
    finish(fig, title, note)
    return save_png(fig, out)


def plot_ttft(results, names, paper, out, config, paper_cfg="Mooncake FAST'25 图 5"):
    """左：四种调度的平均 TTFT（柱）；右：相对全局缓存感知的倍数，本实验与论文并排。"""
    order = [s for s in ("random", "load_balancing", "local_cache", "global_cache") if s in results]
    order += [s for s in results if s not in order]
    labels = [names.get(s, s) for s in order]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=SLIDE)
    x = np.arange(len(order))
    mean = [results[s]["mean"] for s in order]
    a1.bar(x, mean, color="tab:blue", width=0.6, label="平均 TTFT")
    if all("p90" in results[s] for s in order):
        a1.scatter(x, [results[s]["p90"] for s in order], marker="_", s=900, color="black", lw=3, label="P90",
                   zorder=3)
    for xi, s in zip(x, order):                # 数写在柱和 P90 短线两者中高的那个上面，不和短线叠在一起
        top = max(results[s]["mean"], results[s].get("p90", 0))
        a1.annotate(f"{results[s]['mean']:.2f}{NBSP}s", (xi, top), xytext=(0, 10), textcoords="offset points",
                    ha="center", va="bottom")
    a1.set_ylim(0, max(max(results[s]["mean"], results[s].get("p90", 0)) for s in order) * 1.15)
    a1.set_xticks(x, labels)
    a1.set_ylabel("TTFT（s，含排队和拉 KV）")
    a1.set_title("本实验：平均 TTFT 与 P90")
    a1.legend(loc="upper right")
    a1.grid(True, axis="y", alpha=0.3)

    ref = "global_cache" if "global_cache" in results else order[-1]
    ours = [results[s]["mean"] / results[ref]["mean"] for s in order]
    theirs = [paper[s] / paper[ref] if s in paper and ref in paper else np.nan for s in order]
    w = 0.38
    a2.bar(x - w / 2, ours, w, color="tab:blue", label="本实验")
    a2.bar(x + w / 2, theirs, w, color="tab:gray", label="论文（FAST'25 图 5）")
    for xi, a, b in zip(x, ours, theirs):
        a2.text(xi - w / 2, a, " " + times(a), ha="center", va="bottom", rotation=90)   # 竖着写：两根柱挨着也不叠
        if not np.isnan(b):
            a2.text(xi + w / 2, b, " " + times(b), ha="center", va="bottom", rotation=90)
    a2.set_ylim(0, max(ours + [b for b in theirs if not np.isnan(b)]) * 1.3)
    a2.set_xticks(x, labels)
    a2.set_ylabel(f"平均 TTFT 是{names.get(ref, ref)}的几倍")
    a2.set_title("相对大小：本实验 vs 论文")
    a2.legend(loc="upper right")
    a2.grid(True, axis="y", alpha=0.3)
    best, worst = min(order, key=lambda s: results[s]["mean"]), max(order, key=lambda s: results[s]["mean"])
    src = "、".join(f"{names.get(s, s)} {paper[s]:.2f}{NBSP}s" for s in order if s in paper)
    finish(fig, f"{names.get(best, best)}最快（{results[best]['mean']:.2f}{NBSP}s），{names.get(worst, worst)}最慢"
                f"（{results[worst]['mean']:.2f}{NBSP}s）",
           f"TTFT（time to first token）= 从请求到达到吐出第一个 token。{config}。"
           f"论文的平均 TTFT（{paper_cfg}）：{src}。设置不同，只比顺序和倍数。")
    return save_png(fig, out)


def pd_title(d4):
    """标题：终端表里那几个 prompt 长度上，主网卡和慢网卡各有哪些藏不住（发 KV 比 prefill 还久）。"""
    lens = [c["n"] for c in d4["base"]]
    late = [c["n"] for c in d4["slow"] if c["send"] > c["prefill"]]
    late_main = [c["n"] for c in d4["base"] if c["send"] > c["prefill"]]
    main = f"{gbs(d4['nic_gbps'])}{NBSP}Gbps 时 {'、'.join(map(integer, lens))} token 都藏得住"
    if late_main:
        main = f"{gbs(d4['nic_gbps'])}{NBSP}Gbps 时 {'、'.join(map(integer, late_main))} token 也藏不住"
    if late:
        return f"发 KV：{main}；{gbs(d4['slow_gbps'])}{NBSP}Gbps 时 {'、'.join(map(integer, late))} token 藏不住"
    return f"发 KV：{main}；{gbs(d4['slow_gbps'])}{NBSP}Gbps 时也都藏得住"


def plot_pd_transfer(d4, out, config):
    """两幅：不命中 / 前缀命中。每幅一条 prefill 时间（黑）和主网卡、慢网卡上发整个请求 KV 的时间（彩色）：彩色线在
    黑线下面，发送就藏在 prefill 后面。点只画在终端表里的那几个 prompt 长度上（实心 = 藏得住，叉 = 藏不住），
    所以图上没有终端没印过的数。"""
    curves, hit = d4["curves"], d4["hit"]
    fig, axes = plt.subplots(1, 2, figsize=SLIDE, sharey=True)
    n = np.asarray(curves["n"], dtype=float)
    nics = [(d4["nic_gbps"], "tab:blue", {"prefill": d4["base"], "prefill_hit": d4["hits"]}),
            (d4["slow_gbps"], "tab:red", {"prefill": d4["slow"]})]     # 终端印过的情形：主网卡两种命中，慢网卡不命中
    for ax, key, name in ((axes[0], "prefill", "不命中"), (axes[1], "prefill_hit", f"前缀命中 {hit:.0%}")):
        ax.loglog(n, np.asarray(curves[key]) * 1e3, color="black", lw=3, label=f"prefill（{name}）")
        for gbps, color, cases in nics:
            ax.loglog(n, np.asarray(curves["send"][gbps]) * 1e3, color=color, lw=2,
                      label=f"发整个请求的 KV：{gbs(gbps)}{NBSP}Gbps")
            for c in cases.get(key, []):
                hides = c["send"] <= c["prefill"]
                marker, face = "X", color
                if hides:
                    marker = "o"
                ax.plot([c["n"]], [c["send"] * 1e3], marker, color=face, ms=12, mec="black", zorder=3)
        ax.set_title(name)
        ax.set_xlabel("prompt 长度（token，对数刻度）")
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(loc="upper left")
    axes[0].set_ylabel("时间（ms，对数刻度）")
    finish(fig, pd_title(d4),
           f"{config}。点：终端表里的 prompt 长度，圆 = 藏得住（发 ≤ prefill），叉 = 藏不住。彩色线在黑线下面：发 KV 藏在 "
           "prefill 后面（按层流水，只多出最后一层）；在上面：藏不住，TTFT（首个 token 的延迟）多出差值。"
           "前缀命中时要算的少了，要发的 KV 不变，网络更容易成为瓶颈。")
    return save_png(fig, out)


def build(out_dir):
    r = compute()
    d1, d2, d3, d4 = r[1], r[2], r[3], r[4]
    tiers_cfg = f"{d1['model']}，{d1['mfu']:.0%} 峰值算力，重算按 FAST'25 式 1"
    sched_cfg = (f"{d3['source']}、{d3['nodes']} 台 {d3['node']} prefill 节点、各 {d3['capacity']:,} 块本地 LRU、"
                 f"负载 = 不缓存所需算力的 {d3['load']:.0%}")
    ps = d3["paper_setup"]
    paper_cfg = f"{ps['source']}：{ps['nodes']} 台 {ps['node']} 回放 {ps['trace']}"
    pd_cfg = f"{d4['model']}、{d4['node']}、{d1['mfu']:.0%} 峰值算力；一层算完发一层（按层流水）"
    o = [os.path.join(out_dir, f) for f in FIGURES]
    return [plot_load_vs_recompute(d1["curves"]["n"], d1["curves"]["by_node"], o[0], tiers_cfg),
            plot_hot_nic(d2, o[1]),
            plot_ttft(d3["results"], d3["names"], d3["paper"], o[2], sched_cfg, paper_cfg),
            plot_pd_transfer(d4, o[3], pd_cfg)]


def main(argv=None):
    return figlib.main(argv, __doc__, build)


if __name__ == "__main__":
    sys.exit(main())
