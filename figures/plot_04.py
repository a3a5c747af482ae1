"""04 的三张图：块的热度（演示 3）、命中率与容量（演示 4）、prefill 的 GPU 时间（演示 5）。python figures/plot_04.py
数都取自演示返回的字典（表格不打印），标题里的数就是脚本默认输出里印出的格子。"""
import itertools

import figlib
from lab_common.show import value

plt, SLIDE = figlib.plt, figlib.SLIDE

COLORS = {"LRU": "tab:blue", "LFU": "tab:orange", "LengthAware": "tab:green", "MIN（逐块）": "0.35"}


def finish(fig, title, note, out):
    return figlib.save(fig, out, title, note)


def plot_popularity(d, out):
    """左：块按访问次数排名（log–log）；右：最热的那部分块占了多少访问。"""
    counts, (once, hottest, top) = d["counts"], d["cells"][5:]
    total, rank = sum(counts), range(1, len(counts) + 1)
    fig, (a, b) = plt.subplots(1, 2, figsize=SLIDE)
    a.loglog(rank, counts, color="tab:blue", lw=2)
    a.set(xlabel="块的排名（按访问次数）", ylabel="访问次数", title=f"最热的块：{hottest} 次")
    share = list(itertools.accumulate(c / total for c in counts))        # 最热的前 k 块占的访问比例
    b.semilogx([r / len(counts) * 100 for r in rank], share, color="tab:red", lw=2)
    b.set(xlabel="最热的那部分块（%）", ylabel="它们占全部访问的比例", ylim=(0, 1.02), title=f"{once} 的块只用过一次")
    a.grid(True, alpha=0.3)
    b.grid(True, alpha=0.3)
    return finish(fig, f"{once} 的块只用过一次，最热 1% 的块却占了 {top} 的访问",
                  f"{d['name']}，{total:,} 次块访问。论文（Mooncake arXiv v3 §4.2）：超过 50% 的块没有再被用到，"
                  "有的块被访问数万次。", out)


def plot_hit_ratio(d, out):
    """左：本实验各策略和 MIN 的命中率随容量的变化；右：论文表 1（另一个 trace）。无限容量画在最右边。"""
    caps = d["capacities"]
    finite = [c for c in caps if c is not None]
    xs = [c or max(finite) * 4 for c in caps]
    ticks, last = [], 0                      # 挨得太近（不到 2.5 倍）的容量只画刻度、不写数
    for c in sorted(finite):
        ticks.append("")
        if c >= 2.5 * last:
            ticks[-1], last = f"{c:,}", c
    if None in caps:
        ticks.append("无限")
    fig, axes = plt.subplots(1, 2, figsize=SLIDE, sharey=True)
    for row in d["rows"]:
        ax, name = axes[int(row[0].startswith("论文"))], row[0].replace("论文 ", "")
        pts = sorted((x, value(v)) for x, v in zip(xs, row[1:]) if v != "-")
        ax.plot(*zip(*pts), "o-", color=COLORS.get(name), lw=2, label=name)
    for ax, title in zip(axes, ("本实验（合成 trace）", "论文 arXiv v3 表 1（另一个 trace）")):
        ax.set_xscale("log")
        ax.set_xticks(sorted(xs), ticks)
        ax.minorticks_off()
        ax.set(xlabel="缓存容量（块）", title=title)
        ax.grid(True, alpha=0.3)
        ax.legend(loc="lower right")
    axes[0].set_ylabel("前缀命中率")
    lru = dict(zip(caps, d["rows"][0][1:]))
    return finish(fig, f"容量降到 10,000 块，LRU 仍有 {lru[10_000]}（无限容量时 {lru[None]}）",
                  "每块 512 token。MIN 数逐块命中（离线最优），是上界。两边的 trace 不同：比的是曲线的形状和策略的排序。",
                  out)


def plot_prefill(d, out):
    """不缓存和各容量的 LRU 缓存：全部请求 prefill 的 GPU 时间（小时）。"""
    rows = d["rows"]
    fig, ax = plt.subplots(figsize=SLIDE)
    bars = ax.bar([r[0] for r in rows], [value(r[3]) for r in rows], color=["tab:red"] + ["tab:blue"] * (len(rows) - 1))
    ax.bar_label(bars, [f"{r[3]} 小时（命中 {r[2]}）" for r in rows], padding=4)
    ax.set(ylabel="prefill 的 GPU 时间（小时）", ylim=(0, value(rows[0][3]) * 1.2))
    ax.grid(True, axis="y", alpha=0.3)
    return finish(fig, f"{rows[1][0]}：prefill 的 GPU 时间从 {rows[0][3]} 降到 {rows[1][3]} 小时",
                  "命中：用得上的命中 token / 全部输入 token。LLaMA3-70B、8×A800；FAST'25 式 1，算力按峰值的 60%（本实验的假设）；命中的 KV 从本机 DRAM 读；"
                  "缓存超出本机 1 TB DRAM 的部分放在远端，命中按这个比例从远端 DRAM 读。", out)


def main():
    s04 = figlib.script("04_prefix_caching")
    for name, demo, plot in (("04_block_popularity", s04.demo3_block_heat, plot_popularity),
                             ("04_hit_ratio", s04.demo4_policies, plot_hit_ratio),
                             ("04_prefill_time", s04.demo5_prefill_time, plot_prefill)):
        plot(figlib.quiet(demo), name)


if __name__ == "__main__":
    main()
