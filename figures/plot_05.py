"""05_kv_store 的四张图，每张一个演示。每个数都取自演示返回的表（印出来的格子），说明就是那张表的表注：
演示 1 → 05_load_vs_recompute，演示 2 → 05_hot_nic，演示 3 → 05_ttft_by_scheduler，演示 4 → 05_pd_transfer。

运行：python figures/plot_05.py [--out DIR]      （make all 会调用它；默认写到 figures/）
"""
import figlib
from lab_common.show import value

s05 = figlib.script("05_kv_store")
plt = figlib.plt


def plot_load_vs_recompute(d):
    """演示 1：从各层读前缀的 KV 要多久，和重算一样长的一根黑条比（对数刻度）。"""
    rows = d["rows"]
    fig, ax = plt.subplots(figsize=figlib.SLIDE)
    y = list(range(len(rows)))[::-1]
    colors = ["tab:purple", "tab:blue", "tab:green", "tab:orange", "black"]
    ax.barh(y, [value(r[2]) for r in rows], color=colors[:len(rows) - 1] + ["black"], height=0.6)
    for yi, r in zip(y, rows):
        ax.text(value(r[2]), yi, f" {r[2]} ms", va="center")
    ax.set_xscale("log")
    ax.set_xlim(min(value(r[2]) for r in rows) / 2, max(value(r[2]) for r in rows) * 8)
    ax.set_yticks(y, [f"{r[0]}\n{r[1]} GB/s" if r[1] != "-" else r[0] for r in rows])
    ax.set_xlabel("毫秒（对数刻度）")
    tiers, rec = rows[:-1], rows[-1]
    slow = max(tiers, key=lambda r: value(r[2]))
    return figlib.save(fig, "05_load_vs_recompute", f"读前缀的 KV 都比重算（{rec[2]} ms）快：最慢的{slow[0]}也只要 "
                       f"{slow[2]} ms", d["caption"])


def plot_hot_nic(d):
    """演示 2：最忙那台的网卡负载随节点数，不复制和复制几份（至多 3 条），加全部网卡的平均；100% 处一条线。"""
    headers, rows = d["headers"], d["rows"]
    nodes = headers[1:-1]
    fig, ax = plt.subplots(figsize=figlib.SLIDE)
    x = list(range(len(nodes)))
    shown = rows[:-1][:2] + rows[:-1][2:][-1:]                   # k = 1、2 和最大的 k
    for r, color in zip(shown, ("tab:red", "tab:orange", "tab:green")):
        ax.plot(x, [value(c) * 100 for c in r[1:-1]], "o-", color=color, lw=3, ms=9, label=f"{headers[0]} = {r[0]}")
        for xi, c in list(zip(x, r[1:-1]))[1:]:                  # 16 台那一列三条线挤在一起：不写
            ax.annotate(c, (xi, value(c) * 100), textcoords="offset points", xytext=(0, 9), ha="center", color=color)
    ax.plot(x, [value(c) * 100 for c in rows[-1][1:-1]], "s--", color="0.4", lw=2, label=rows[-1][0])
    ax.axhline(100, color="0.3", lw=1.5, ls=":")
    ax.set_ylim(0, max([100] + [value(c) * 100 for c in rows[0][1:-1]]) * 1.15)
    ax.set_xticks(x, nodes)
    ax.set_xlabel("集群的节点数（请求率跟着放大）")
    ax.set_ylabel("最忙那台的网卡负载（%）")
    ax.legend(loc="upper left", frameon=False)
    k1, k2 = rows[0], rows[1]
    return figlib.save(fig, "05_hot_nic", f"不复制时最忙的网卡从 {k1[1]} 升到 {k1[-2]}（平均 {rows[-1][-2]}）；"
                       f"热点块存 {k2[0]} 份：{k2[-2]}", d["caption"])


def plot_ttft(d):
    """演示 3：四种调度的平均 TTFT，左本实验、右论文图 5（设置不同：只比顺序）。"""
    rows = d["rows"]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=figlib.SLIDE)
    x = list(range(len(rows)))
    for ax, col, color, title in ((a1, 1, "tab:blue", "本实验（模拟）"), (a2, 4, "0.5", "论文：FAST'25 图 5")):
        ax.bar(x, [value(r[col]) for r in rows], color=color, width=0.6)
        for xi, r in zip(x, rows):
            ax.annotate(f"{r[col]} s", (xi, value(r[col])), textcoords="offset points", xytext=(0, 6), ha="center")
        ax.set_xticks(x, [r[0].replace("缓存感知", "\n缓存感知") for r in rows])
        ax.set_ylim(0, max(value(r[col]) for r in rows) * 1.15)
        ax.set_ylabel("平均 TTFT（s）")
        ax.set_title(title)
    order = " > ".join(r[0] for r in sorted(rows, key=lambda r: -value(r[1])))
    return figlib.save(fig, "05_ttft_by_scheduler", f"平均 TTFT 从高到低：{order}", d["caption"])


def plot_pd_transfer(d):
    """演示 4：每个 prompt 长度一组柱：prefill 和把整个请求的 KV 发到 decode 节点（对数刻度）。"""
    rows = d["rows"]
    fig, ax = plt.subplots(figsize=figlib.SLIDE)
    x = list(range(len(rows)))
    for dx, col, color, label in ((-0.2, 1, "black", "prefill"), (0.2, 2, "tab:blue", "发 KV")):
        ax.bar([xi + dx for xi in x], [value(r[col]) for r in rows], width=0.4, color=color, label=label)
        for xi, r in zip(x, rows):
            ax.annotate(r[col], (xi + dx, value(r[col])), textcoords="offset points", xytext=(0, 5), ha="center")
    ax.set_yscale("log")
    ax.set_ylim(top=max(value(r[1]) for r in rows) * 3)
    ax.set_xticks(x, [f"{r[0]} token" for r in rows])
    ax.set_ylabel("毫秒（对数刻度）")
    ax.legend(loc="upper left", frameon=False)
    last = rows[-1]
    return figlib.save(fig, "05_pd_transfer", f"{last[0]} token：发 KV {last[2]} ms，prefill {last[1]} ms，"
                       f"按层流水只露出 {last[3]} ms", d["caption"])


if __name__ == "__main__":
    trace, source = s05.the_trace(None)
    plot_load_vs_recompute(figlib.quiet(s05.demo_load_or_recompute))
    plot_hot_nic(figlib.quiet(s05.demo_hot_blocks, trace, source))
    plot_ttft(figlib.quiet(s05.demo_scheduling, trace, source))
    plot_pd_transfer(figlib.quiet(s05.demo_pd_transfer))
