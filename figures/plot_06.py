"""06_triton_cow_clone 的图（GPU 加餐），都从保存的 H200 结果（figures/data/triton_cow_clone_h200.json）画：

    06_triton_cow_clone.png         一张幻灯片：gpt2-small 上 A / C / D / E 每步 µs 随 N 的变化
    06_triton_cow_clone_detail.png  每种形状一列：上排整步的 C/D 和只量 kernel 的 C/D、E/D，下排主机多花的 µs

运行：python figures/plot_06.py [--out DIR] [--json PATH]     （约 3 秒；CPU 即可，make all 会调用它）
"""
import argparse
import os
import sys

import figlib
from gpu.saved_results import read_results
from lab_common.show import num, pct

STYLE = {"A": ("tab:red", "o-", "A 每层 index_select + index_copy_"), "C": ("tab:blue", "^-", "C 所有层一次 launch"),
         "D": ("0.35", "D--", "D 同样字节的连续拷贝（上限）"), "E": ("tab:green", "P-", "E vLLM copy_blocks 式"),
         "C_kernel": ("tab:cyan", "v:", "C 只量 kernel"), "E_kernel": ("tab:olive", "x:", "E 只量 kernel")}


def log2_axis(ax, ns):
    ax.set_xscale("log", base=2)
    ax.set_xticks(ns, [num(n) for n in ns])
    ax.minorticks_off()
    ax.grid(True, alpha=0.3)


def plot_slide(data, t):
    """A、C、D、E 每步 µs（对数坐标）：N 小时 C、D 都是一次调用的开销，N 大时贴着显存带宽。"""
    ns, s = data["settings"]["NS"], "gpt2-small"
    fig, ax = figlib.plt.subplots(figsize=figlib.SLIDE)
    for m in "ACDE":
        color, style, label = STYLE[m]
        ax.plot(ns, [t[s, n, m]["us"] for n in ns], style, color=color, label=label, lw=2.5, ms=8)
    ax.set_yscale("log")
    log2_axis(ax, ns)
    ax.set_xlabel("一步克隆的块对数 N（对数刻度）")
    ax.set_ylabel("每步耗时（µs，对数刻度）")
    ax.legend(loc="upper left", frameon=False)
    lo, hi = ns[0], ns[-1]
    cd = t[s, hi, "D"]["us"] / t[s, hi, "C"]["us"]
    return figlib.save(fig, "06_triton_cow_clone",
                       f"{s}：N = {num(lo)} 时 A {num(t[s, lo, 'A']['us'])} µs、C {num(t[s, lo, 'C']['us'], 1)} µs；"
                       f"N = {num(hi)} 时 C 是 D 的 {pct(cd, 1)}",
                       f"{data['meta']['gpu']}，torch {data['meta']['torch']}，triton {data['meta']['triton']}，"
                       f"{data['meta']['date']}；µs/步，各轮中位数的中位数。数据：06_triton_cow_clone.py 的演示 2。")


def plot_detail(data, t):
    """每种形状一列：上排 C/D（整步、只量 kernel）和 E/D（只量 kernel），下排整步比只量 kernel 多的 µs。N 按类别等距排。"""
    ns, shapes = data["settings"]["NS"], list(data["settings"]["SHAPES"])
    fig, axes = figlib.plt.subplots(2, len(shapes), figsize=figlib.SLIDE, squeeze=False, sharex=True)
    x = range(len(ns))
    for j, s in enumerate(shapes):
        top, bottom = axes[0][j], axes[1][j]
        for m in ("C", "C_kernel", "E_kernel"):
            color, style, label = STYLE[m]
            top.plot(x, [100 * t[s, n, "D"]["us"] / t[s, n, m]["us"] for n in ns], style, color=color, lw=2, ms=7,
                     label=label)
        for y in (90, 100):
            top.axhline(y, color="0.5", lw=1, ls="--")
        top.set_ylim(60, 160)
        top.set_title(s)
        top.grid(True, alpha=0.3)
        host = [t[s, n, "C"]["us"] - t[s, n, "C_kernel"]["us"] for n in ns]
        bottom.bar(x, host, color="tab:blue", width=0.6)
        for i, h in zip(x, host):
            bottom.annotate(num(h, 1), (i, h), ha="center", va="bottom")
        bottom.axhline(10, color="0.5", lw=1, ls="--")
        bottom.set_ylim(0, max(12, max(host) * 1.25))
        bottom.set_xticks(x, [num(n) for n in ns])
        bottom.set_xlabel("一步克隆的块对数 N")
    axes[0][0].set_ylabel("C/D、E/D（%）")
    axes[1][0].set_ylabel("主机多花的 µs")
    axes[0][0].legend(loc="upper right", frameon=False)
    host = max(t[s, n, "C"]["us"] - t[s, n, "C_kernel"]["us"] for s in shapes for n in ns)
    return figlib.save(fig, "06_triton_cow_clone_detail", f"每个 N 上整步的 C 比只量 kernel 最多多 {num(host, 1)} µs",
                       "C/D = D 的耗时 / C 的耗时（上排只画 60%–160%，N ≤ 8 时只量 kernel 的点在图外）；只量 kernel：K 次 "
                       "launch 捕获进一个 CUDA graph，块号已在显存；虚线：90%、100%、10 µs。数据：06_triton_cow_clone.py 的"
                       "演示 3。")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default=figlib.FIGURES, help="图的输出目录（默认 figures/）")
    p.add_argument("--json", default=os.path.join(figlib.FIGURES, "data", "triton_cow_clone_h200.json"))
    args = p.parse_args(argv)
    try:
        data, t = read_results(args.json)
    except ValueError as exc:
        print(f"plot_06.py: --json {args.json}：不是 06 保存的完整结果（{exc}）", file=sys.stderr)
        return 2
    try:
        plot_slide(data, t)
        plot_detail(data, t)
    except OSError as exc:
        print(f"plot_06.py: 图写不进 {args.out}（{exc.strerror}）", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
