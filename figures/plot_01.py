"""01_kv_cache_memory 的三张图：KV 池里多少真正存着 token（演示 2）、几种注意力每 token 的 KV（演示 3）、
抢占时重算与换出再换入随块大小（演示 4）。

运行：python figures/plot_01.py [--out DIR]     （约 3 秒；make all 会调用它）
数据和配置全部来自 lecture07/01_kv_cache_memory.py 的 demo2_fragmentation()、demo3_smaller_kv()、
demo4_preemption() 返回的 dict（论文数字在它们的 "paper" 里）；这里不重算，也不读脚本里的其他名字。
"""
import os
import sys

import figlib  # 最先：它装好 quiet_endings（用错了 Python、Ctrl-C 只打一行），再 import 别的
from matplotlib.ticker import FuncFormatter
from figlib import SLIDE, finish, plt, save_png
from lab_common.say import fixed, integer, order, pct1, ratio, size

FIGURES = ("01_kv_memory_breakdown.png", "01_kv_per_token.png", "01_recompute_vs_swap.png")
PARTS = (("token 状态", "tab:green"), ("预留（将来的 token）", "tab:olive"),
         ("内部碎片", "tab:red"), ("外部碎片 / 空闲", "0.7"))
R2 = fixed(2)


def compute():
    s01 = figlib.load_script("01_kv_cache_memory")
    sim = s01.simulate_load()
    r = figlib.quiet(s01.demo2_fragmentation, sim)
    config = (f"{r['model']}，KV 池 {r['pool_gib']:g} GiB = {r['pool']:,} 个 token；{r['n_requests']:,} 个请求一开始全部"
              f"排队（种子 {r['seed']}），平均输入 / 输出 {r['mean_prompt']:.0f} / {r['mean_output']:.0f}，"
              f"最长 {r['max_seq']:,}；分页块大小 {r['block_size']}")
    if r["idle"]:                      # 从来没满载的系统没有可画的占比
        config += "；从未满载、没画：" + "、".join(r["idle"])
    measured = [k for k in r["shares"] if k not in r["idle"]]
    return dict(shares={k: [float(x) for x in r["shares"][k]] for k in measured},
                concurrency={k: r["concurrency"][k] for k in measured}, paper=r["paper"], config=config,
                d3=figlib.quiet(s01.demo3_smaller_kv), d4=figlib.quiet(s01.demo4_preemption, sim))


# ---------------------------------------------------------------- 演示 2：KV 池的构成
def breakdown_title(shares):
    """标题说结论：分页时多少存着 token，按最大长度预留时多少（按印出来的值比较）。"""
    pg, mx = shares.get("vLLM"), shares.get("Orca (Max)")
    if pg is None or mx is None:
        return "KV 池里真正存着 token 的比例：连续预留与分页"
    if order(pg[0], mx[0], pct1) > 0:
        return f"分页让 {pct1(pg[0])} 的 KV 池存着 token，按最大长度预留只有 {pct1(mx[0])}"
    return f"分页时 {pct1(pg[0])} 的 KV 池存着 token，按最大长度预留时 {pct1(mx[0])}"


def plot_breakdown(shares, concurrency, paper, out, config):
    """每个系统一根横条：KV 池被 token 状态、预留、内部碎片、外部碎片 / 空闲各占多少；论文的数写在系统名下面。"""
    names = list(shares)
    fig, ax = plt.subplots(figsize=SLIDE)
    y = list(range(len(names)))[::-1]
    left = [0.0] * len(names)
    for j, (label, color) in enumerate(PARTS):
        w = [shares[n][j] * 100 for n in names]
        ax.barh(y, w, left=left, color=color, edgecolor="white", height=0.6, label=label)
        for yi, l0, wi in zip(y, left, w):
            if wi >= 6:
                ax.text(l0 + wi / 2, yi, f"{wi:.1f}%", ha="center", va="center",
                        color="white" if j != 3 else "black")
        left = [a + b for a, b in zip(left, w)]
    ticks = []
    for n in names:
        t = f"{n}\n并发 {concurrency[n]:.1f}"
        if n in paper:
            t += f"\n论文 {paper[n]:.1f}%"
        ticks.append(t)
    ax.set_yticks(y, ticks)
    ax.set_xlim(0, 100)
    ax.set_xlabel("占整个 KV 池的比例（%，满载时的时间平均）")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.17), ncol=4, frameon=False)
    finish(fig, breakdown_title(shares), config + "。论文：vLLM（SOSP'23）图 2 的 token 状态占比，§6.2 实验的平均"
           "（Orca 是作者重写的实现）；这里是合成长度的离散模拟，比较量级和顺序。")
    return save_png(fig, out)


# ---------------------------------------------------------------- 演示 3：每 token 的 KV
def plot_kv_per_token(d3, out):
    """左：每种方式每 token 的 KV（bf16 与 FP8）；右：最后一种 GPU 放完权重后能放的 token（bf16 与 FP8）。"""
    t, g = d3["table"], d3["gpus"][-1]
    names = list(t)
    mha, mla = t["MHA"], t["MLA"]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=SLIDE)
    y = list(range(len(names)))[::-1]
    h = 0.38
    a1.barh([v + h / 2 for v in y], [t[n]["kv"] / 1024 for n in names], height=h, color="tab:blue", label="bf16")
    a1.barh([v - h / 2 for v in y], [t[n]["kv_fp8"] / 1024 for n in names], height=h, color="tab:cyan", label="FP8")
    for v, n in zip(y, names):
        a1.text(t[n]["kv"] / 1024, v + h / 2, f" {size(t[n]['kv'])}（{pct1(t[n]['kv'] / mha['kv'])}）", va="center")
        a1.text(t[n]["kv_fp8"] / 1024, v - h / 2, f" {size(t[n]['kv_fp8'])}", va="center")
    a1.set_yticks(y, names)
    a1.set_xlim(0, mha["kv"] / 1024 * 1.45)
    a1.set_xlabel("每个 token 的 KV（KiB）")
    a1.legend(loc="lower right", frameon=False)
    a1.set_title("每 token 的 KV（括号：占 MHA 的比例）")
    fits = [n for n in names if t[n]["fit"][g] is not None]
    if fits:
        a2.barh([y[names.index(n)] + h / 2 for n in fits], [t[n]["fit"][g] / 1e6 for n in fits], height=h,
                color="tab:blue", label="bf16")
        a2.barh([y[names.index(n)] - h / 2 for n in fits], [t[n]["fit_fp8"][g] / 1e6 for n in fits], height=h,
                color="tab:cyan", label="FP8")
        for n in fits:
            a2.text(t[n]["fit"][g] / 1e6, y[names.index(n)] + h / 2, f" {integer(t[n]['fit'][g])}", va="center")
            a2.text(t[n]["fit_fp8"][g] / 1e6, y[names.index(n)] - h / 2, f" {integer(t[n]['fit_fp8'][g])}",
                    va="center")
        a2.set_xlim(0, max(t[n]["fit_fp8"][g] for n in fits) / 1e6 * 1.4)
        a2.legend(loc="lower right", frameon=False)
    else:
        a2.text(0.5, 0.5, f"{g} 放不下 {d3['base']} 的权重", ha="center", va="center", transform=a2.transAxes)
    a2.set_yticks(y, names)
    a2.set_xlabel(f"一张 {g} 放完权重后能放的 token（百万）")
    a2.set_title(f"一张 {g}（{d3['util']:.0%} 显存）能放多少 token")
    title = f"MLA 每 token 只存 {size(mla['kv'])}，是 MHA 的 {pct1(mla['kv'] / mha['kv'])}"
    if mha["fit"][g] is not None:
        title += f"：一张 {g} 能放的 token {ratio(mla['fit'][g], mha['fit'][g])}"
    finish(fig, title, f"{d3['base']} 的形状（{d3['n_layers']} 层、{d3['n_heads']} 个查询头 × {d3['head_dim']} 维）；"
                 f"{d3['groups']} 组 GQA；MLA 存 d_c + d_h^R = {d3['kv_lora_rank']} + {d3['rope_dim']} 个数"
           f"（DeepSeek-V2）。权重一律按 {d3['base']} 的 fp16 权重算。")
    return save_png(fig, out)


# ---------------------------------------------------------------- 演示 4：重算与换出
def swap_title(d4):
    """标题说结论：按印出来的重算 / 来回，在默认带宽下哪些块重算更快。"""
    bb = d4["by_block"]
    rec = [b for b, r in bb.items() if order(r["ratio"], 1, R2) < 0]
    swap = [b for b, r in bb.items() if order(r["ratio"], 1, R2) > 0]
    where = f"（PCIe {d4['gbps']:g} GB/s 的假设下）"
    if rec and swap and max(rec) < min(swap):
        lo, hi = f"块 ≤ {max(rec)}", f"块 ≥ {min(swap)}"
        if len(rec) == 1:
            lo = f"块 {rec[0]}"
        if len(swap) == 1:
            hi = f"块 {swap[0]}"
        return f"{lo} 时重算更快，{hi} 时换出再换入更快{where}"
    if rec and not swap:
        return f"每个块大小下都是重算更快{where}"
    if swap and not rec:
        return f"每个块大小下都是换出再换入更快{where}"
    return f"重算与换出再换入：谁更快取决于块大小{where}"


def plot_recompute_vs_swap(d4, out):
    """左：来回（三种带宽）与重算的毫秒数随块大小；右：重算 / 来回，1 和论文的 1.2 两条参考线。"""
    bb = d4["by_block"]
    blocks = list(bb)
    x = list(range(len(blocks)))
    gb = [d4["gbps"]] + list(d4["alt_gbps"])
    fig, (a1, a2) = plt.subplots(1, 2, figsize=SLIDE)
    styles = ("tab:red", "tab:orange", "tab:purple")
    a1.plot(x, [r["recompute"] * 1e3 for r in bb.values()], "s-", color="tab:blue", lw=2.5, label="重算")
    for g, c in zip(gb, styles):
        if g == d4["gbps"]:
            trip = [r["round_trip"] * 1e3 for r in bb.values()]
        else:
            trip = [r["round_trip_gbps"][g] * 1e3 for r in bb.values()]
        a1.plot(x, trip, "o-", color=c, lw=2, label=f"换出 + 换入，{g:g} GB/s")
    a1.set_yscale("log")
    a1.yaxis.set_major_formatter(FuncFormatter(lambda v, _: integer(v)))
    a1.set_xticks(x, [str(b) for b in blocks])
    a1.set_xlabel("块大小（token）")
    a1.set_ylabel("毫秒（对数刻度）")
    a1.set_title(f"一条 {integer(d4['swap_len'])} token 的序列被抢占")
    a1.legend(loc="upper right", frameon=False)
    for g, c in zip(gb, styles):
        if g == d4["gbps"]:
            ratios = [r["ratio"] for r in bb.values()]
        else:
            ratios = [r["ratio_gbps"][g] for r in bb.values()]
        a2.plot(x, ratios, "o-", color=c, lw=2, label=f"{g:g} GB/s")
        a2.text(x[-1] + 0.08, ratios[-1], R2(ratios[-1]), va="center", color=c)
    limit = 1 + d4["paper"]["recompute_max"] / 100
    a2.axhline(1, color="0.3", lw=1)
    a2.axhline(limit, color="0.3", lw=1, ls="--")
    a2.text(x[0] - 0.2, 1 - 0.03, "1：两者一样快", color="0.3", va="top")
    a2.text(x[0] - 0.2, limit + 0.03, f"{limit:g}：vLLM §7.3 说重算最多慢 {d4['paper']['recompute_max']}%",
            color="0.3", va="bottom")
    a2.set_xticks(x, [str(b) for b in blocks])
    a2.set_xlim(-0.3, len(x) - 0.4)
    a2.set_xlabel("块大小（token）")
    a2.set_ylabel("重算 / 来回（> 1：换出再换入更快）")
    a2.set_title("PCIe 带宽是假设：换一个值，结论就变")
    a2.legend(loc="upper left", frameon=False)
    finish(fig, swap_title(d4), f"{d4['model']}、一张 {d4['gpu']}；重算 = 式 1 的 FLOPs ÷ ({d4['tflops']:g} TFLOPS × "
           f"{d4['mfu']:g})；来回 = 换出 + 换入：每层 K、V 每块拷一次，每次 {d4['overhead_us']:g} µs + 字节 ÷ 带宽。"
           f"PCIe 带宽（这里 {d4['gbps']:g} GB/s）：{d4['gbps_note']}；单卡独占 PCIe 4.0 ×16 约 25–32 GB/s。")
    return save_png(fig, out)


def build(out_dir):
    d = compute()
    return [plot_breakdown(d["shares"], d["concurrency"], d["paper"], os.path.join(out_dir, FIGURES[0]),
                           d["config"]),
            plot_kv_per_token(d["d3"], os.path.join(out_dir, FIGURES[1])),
            plot_recompute_vs_swap(d["d4"], os.path.join(out_dir, FIGURES[2]))]


def main(argv=None):
    return figlib.main(argv, __doc__, build)


if __name__ == "__main__":
    sys.exit(main())
