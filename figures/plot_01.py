"""01_kv_cache_memory 的三张图。每个数都取自演示返回的表（印出来的格子），说明就是那张表的表注：
演示 2 → 01_kv_memory_breakdown，演示 3 → 01_kv_per_token，演示 4 → 01_recompute_vs_swap。

运行：python figures/plot_01.py [--out DIR]      （make all 会调用它；默认写到 figures/）
"""
from matplotlib.ticker import FuncFormatter

import figlib
from lab_common.show import num, value

s01 = figlib.script("01_kv_cache_memory")
plt = figlib.plt
PARTS = ((1, "存着 token", "tab:green"), (3, "预留（将来的 token）", "tab:olive"), (4, "内部碎片", "tab:red"),
         (5, "外部碎片 / 空闲", "0.7"))     # (表里的第几列, 图例, 颜色)


def plot_breakdown(d):
    """演示 2：每个系统一根横条，KV 池被存着 token 的、预留、内部碎片、外部碎片 / 空闲各占多少。"""
    rows = [r for r in d["rows"].values() if r[1] != "-"]      # 从没满载的系统没有占比可画
    fig, ax = plt.subplots(figsize=figlib.SLIDE)
    y = list(range(len(rows)))[::-1]
    left = [0.0] * len(rows)
    for col, label, color in PARTS:
        width = [value(r[col]) * 100 for r in rows]
        ax.barh(y, width, left=left, color=color, edgecolor="white", height=0.6, label=label)
        for yi, x0, w, r in zip(y, left, width, rows):
            if w >= 6:                                          # 太窄的段不写字
                ax.text(x0 + w / 2, yi, r[col], ha="center", va="center", color="white")
        left = [a + b for a, b in zip(left, width)]
    ticks = []
    for r in rows:
        tick = f"{r[0]}\n平均并发 {r[-1]}"
        if r[2] != "-":
            tick += f"\n论文 {r[2]}"
        ticks.append(tick)
    ax.set_yticks(y, ticks)
    ax.set_xlim(0, 100)
    ax.set_xlabel("占 KV 池的比例（%，满载时的时间平均）")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=4, frameon=False)
    mx, pg = d["rows"]["Orca (Max)"], d["rows"]["vLLM"]
    return figlib.save(fig, "01_kv_memory_breakdown", f"KV 池里存着 token 的比例：分页 {pg[1]}，按最大长度预留 {mx[1]}",
                       d["caption"])


def plot_kv_per_token(d):
    """演示 3：左，每种方式每个 token 的 KV（bf16、FP8）；右，每种 GPU 放完权重后能放的 token（KV 按 bf16）。"""
    rows, gpus = list(d["rows"].values()), d["headers"][5:]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=figlib.SLIDE)
    y = list(range(len(rows)))[::-1]
    h = 0.8 / 2
    for k, (col, label, color) in enumerate(((2, "bf16", "tab:blue"), (3, "FP8", "tab:cyan"))):
        yk = [v + h / 2 - k * h for v in y]
        a1.barh(yk, [value(r[col]) for r in rows], height=h, color=color, label=label)
        for yi, r in zip(yk, rows):
            a1.text(value(r[col]), yi, f" {r[col]}", va="center")
    a1.set_yticks(y, [r[0] for r in rows])
    a1.set_xlabel("每个 token 的 KV（KiB）")
    a1.set_xlim(0, max(value(r[2]) for r in rows) * 1.25)
    a1.legend(loc="lower right", frameon=False)
    h = 0.8 / len(gpus)
    for k, (gpu, color) in enumerate(zip(gpus, ("tab:purple", "tab:orange"))):
        yk = [v + 0.4 - h / 2 - k * h for v in y]
        fits = [(yi, r[5 + k]) for yi, r in zip(yk, rows) if r[5 + k] != "-"]    # '-'：放不下权重
        a2.barh([yi for yi, _ in fits], [value(c) / 1e6 for _, c in fits], height=h, color=color, label=gpu)
        for yi, c in fits:
            a2.text(value(c) / 1e6, yi, f" {c}", va="center")
    a2.set_yticks(y, [r[0] for r in rows])
    a2.set_xlabel("放完 fp16 权重后能放的 token（百万）")
    a2.set_xlim(0, max([value(c) for r in rows for c in r[5:] if c != "-"] + [1]) / 1e6 * 1.35)
    a2.legend(loc="lower right", frameon=False)
    mha, mla = d["rows"]["MHA"], d["rows"]["MLA"]
    return figlib.save(fig, "01_kv_per_token", f"MLA 每个 token 存 {mla[2]} KiB，是 MHA（{mha[2]} KiB）的 {mla[4]}",
                       d["caption"])


def plot_recompute_vs_swap(d):
    """演示 4：被抢占的序列，重算与换出再换入（每种带宽一条线）的毫秒数随块大小。"""
    rows, bandwidths = list(d["rows"].values()), d["headers"][3:]
    x = list(range(len(rows)))
    fig, ax = plt.subplots(figsize=figlib.SLIDE)
    ax.plot(x, [value(r[2]) for r in rows], "s-", color="tab:blue", lw=3, label="重算")
    for k, (name, color) in enumerate(zip(bandwidths, ("tab:red", "tab:orange", "tab:purple"))):
        ax.plot(x, [value(r[3 + k]) for r in rows], "o-", color=color, lw=2, label=f"换出再换回，{name.split(' 来回')[0]}")
    for xi, r in zip(x, rows):                  # 第一种带宽的来回时间：在重算线上方的写在点上方，下方的写在点下方
        below = value(r[3]) < value(r[2])
        ax.annotate(r[3], (xi, value(r[3])), textcoords="offset points", xytext=(0, -22 if below else 8), ha="center",
                    color="tab:red")
    ax.annotate(f"{rows[0][2]} ms", (0, value(rows[0][2])), textcoords="offset points", xytext=(0, -22), color="tab:blue")
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: num(v)))
    ax.set_xticks(x, [r[0] for r in rows])
    ax.set_xlabel("块大小（token）")
    ax.set_ylabel("毫秒（对数刻度）")
    ax.legend(loc="upper right", frameon=False)
    first, last = rows[0], rows[-1]
    title = (f"重算 {first[2]} ms，与块大小无关；{bandwidths[0].split(' 来回')[0]} 时换出再换回从块 {first[0]} 的 "
             f"{first[3]} ms 降到块 {last[0]} 的 {last[3]} ms")
    return figlib.save(fig, "01_recompute_vs_swap", title, d["caption"])


if __name__ == "__main__":
    plot_breakdown(figlib.quiet(s01.demo_fragmentation))
    plot_kv_per_token(figlib.quiet(s01.demo_smaller_kv))
    plot_recompute_vs_swap(figlib.quiet(s01.demo_preemption))
