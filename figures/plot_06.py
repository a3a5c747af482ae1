"""06_triton_cow_clone 的图（GPU 加餐）：COW 克隆的瓶颈随 N 从 launch 开销移到显存带宽。

    06_triton_cow_clone.png         一张幻灯片：一种形状上 A / C / D / E 每步 µs 随 N 的变化，标出要记住的数
    06_triton_cow_clone_detail.png  细节：每种形状一列，上排每步 µs（A/C/D/E），下排带宽（C、C图、D、E），D 标成上限

运行：python figures/plot_06.py [--json PATH] [--out DIR]     （约 3 秒；CPU 即可，make all 会调用它）
数据是 GPU 上实测、存在 figures/data/triton_cow_clone_h200.json 里的结果（CPU 上重新测不了，make clean
也不删它）；读 JSON 用 06 脚本自己的 load_results（坏文件一行报错、退出码 2）。06 的 --plot-only 调的就是本脚本。
"""
import os
import sys
import time

import figlib
from lab_common.console import ArgParser
from lab_common.say import fixed, pct1, size

FIGURES = ("06_triton_cow_clone.png", "06_triton_cow_clone_detail.png")
DATA_FILES = ("data/triton_cow_clone_h200.json",)    # = 06 脚本的 DEFAULT_JSON（相对 figures/）
STYLES = {"A": ("tab:red", "o-"), "B": ("tab:orange", "s-"), "C": ("tab:blue", "^-"),
          "C图": ("tab:cyan", "v:"), "D": ("0.35", "D--"), "E": ("tab:green", "P-")}
NAMES = {"A": "A 每层 index_select + index_copy_", "B": "B 每层一次 Triton launch", "C": "C 所有层一次 launch",
         "C图": "C 捕获进 CUDA graph", "D": "D 连续拷贝（上限）",
         "E": "E vLLM copy_blocks 式：grid = (层, 块对)"}


def points(res, shape, method, key="us"):
    """[(N, 值)]，按 N 排好。"""
    return sorted((r["N"], r[key]) for r in res if r["shape"] == shape and r["method"] == method)


def us_text(x):
    if x >= 100:
        return f"{x:,.0f} µs"
    return f"{x:.1f} µs"


def log2_axis(ax, ns, label="一步克隆的块对数 N"):
    ax.set_xscale("log", base=2)
    ax.set_xticks(ns)
    ax.set_xticklabels([f"{n:,}" for n in ns])
    ax.set_xlabel(label)
    ax.grid(True, which="both", alpha=0.3)


def plot_slide(data, out_png, shape=None):
    """一张幻灯片：shape（默认第一种）上 A、C、D、E 每步 µs 随 N 的变化（对数坐标）。N 小时 C、D 都是一次调用的
    开销（平的），N 大时贴着显存带宽；标出 N 最小和最大时要记住的数（C、E 各到 D 的多少）。"""
    res = data["results"]
    shape = shape or next(s for s in data["shapes"] if any(r["shape"] == s for r in res))
    pts = {m: points(res, shape, m) for m in ("A", "C", "D", "E")}
    ns = [n for n, _ in pts["C"]]
    lo, hi = ns[0], ns[-1]
    us = {m: dict(p) for m, p in pts.items()}
    by_n = {r["N"]: r for r in res if r["shape"] == shape and r["method"] == "D"}
    c_over_d, e_over_d = us["D"][hi] / us["C"][hi], us["D"][hi] / us["E"][hi]
    fig, ax = figlib.plt.subplots(figsize=(11, 7.2))
    for m in ("A", "C", "D", "E"):
        color, style = STYLES[m]
        ax.plot(ns, [us[m][n] for n in ns], style, color=color, label=NAMES[m], lw=2.2, ms=7)
    ax.set_yscale("log")
    log2_axis(ax, ns)
    ax.set_ylabel("每步耗时 (µs，对数)")
    ax.annotate(f"N={lo}：C {us_text(us['C'][lo])}，D {us_text(us['D'][lo])}\n一次调用的开销（launch、主机）",
                xy=(lo, us["C"][lo]), xytext=(lo * 1.25, us["C"][lo] * 4.5), fontsize=12, color="tab:blue",
                arrowprops=dict(arrowstyle="->", color="tab:blue"))
    layers = data["shapes"][shape]["n_layers"]
    ax.annotate(f"N={lo}：A {us_text(us['A'][lo])}\n每层上传下标、逐层 launch（{6 * layers} 次调用）",
                xy=(lo, us["A"][lo]), xytext=(lo * 1.25, us["A"][lo] * 3.2), fontsize=12, color="tab:red",
                arrowprops=dict(arrowstyle="->", color="tab:red"))
    ax.annotate(f"N={hi:,}：C {us_text(us['C'][hi])} = D 的 {pct1(c_over_d)}，E 是 {pct1(e_over_d)}\n"
                f"一步搬 {size(by_n[hi]['bytes'], binary=False)}：显存带宽",
                xy=(hi, us["C"][hi]), xytext=(hi * 0.9, us["C"][hi] / 40), fontsize=12, color="tab:blue", ha="right",
                arrowprops=dict(arrowstyle="->", color="tab:blue"))
    ax.set_ylim(min(us["D"].values()) / 2, max(us["A"].values()) * 40)
    ax.legend(loc="upper right", fontsize=11, frameon=False)
    sh, m = data["shapes"][shape], data["meta"]
    fig.suptitle(f"COW 克隆：N={hi:,} 时一次 launch 的 C 到 D 的 {pct1(c_over_d)}，vLLM 式的 E 到 {pct1(e_over_d)}",
                 fontsize=15)
    ax.set_title(f"{shape}：{sh['n_layers']} 层 × K/V，每块 {sh['n_heads']}×{sh['block_size']}×{sh['head_dim']}"
                 f" {sh['dtype']}；{m['gpu']}", fontsize=12)
    others = [s for s in data["shapes"] if s != shape and points(res, s, "C")]
    note = "µs/步：各轮中位数的中位数；D = 同样字节数的一次连续拷贝。"
    for s in others:
        hs = points(res, s, "C")[-1][0]
        note += f"{s} 在 N={hs:,} 时 C 是 D 的 {pct1(dict(points(res, s, 'D'))[hs] / dict(points(res, s, 'C'))[hs])}。"
    figlib.caption(fig, note)
    fig.tight_layout(rect=(0, 0.05, 1, 0.95))
    return figlib.save_png(fig, out_png)


def plot_results(data, out_png):
    """细节图：每种形状一列；上排每步 µs（A/C/D/E），下排带宽 GB/s（C、C图、D、E），D 的最高带宽画成上限线，
    标出 N 最大时 C 的位置。data：06 保存的结果（meta、shapes、results）。"""
    res = data["results"]
    shapes = [s for s in data["shapes"] if any(r["shape"] == s for r in res)]
    fig, axes = figlib.plt.subplots(2, len(shapes), figsize=(8 * len(shapes), 11), squeeze=False)
    for j, s in enumerate(shapes):
        top, bottom = axes[0][j], axes[1][j]
        for m, ax, key in [(m, top, "us") for m in ("A", "C", "D", "E")] + [(m, bottom, "GBps")
                                                                           for m in ("C", "C图", "D", "E")]:
            pts = points(res, s, m, key)
            if pts:
                color, style = STYLES[m]
                ax.plot([p[0] for p in pts], [p[1] for p in pts], style, color=color, label=NAMES[m])
        roof = max(r["GBps"] for r in res if r["shape"] == s and r["method"] == "D")
        bottom.axhline(roof, color="black", lw=1, ls="-.")
        bottom.annotate(f"上限：D 实测最高 {roof / 1e3:.2f} TB/s", xy=(0.02, roof), xycoords=("axes fraction", "data"),
                        va="bottom", fontsize=12)
        c = points(res, s, "C", "GBps")
        if c:
            n_hi, gb = c[-1]
            bottom.annotate(f"C：{gb / 1e3:.2f} TB/s = {pct1(gb / roof)}", xy=(n_hi, gb), xytext=(0.42, 0.3),
                            textcoords="axes fraction", fontsize=12, color="tab:blue",
                            arrowprops=dict(arrowstyle="->", color="tab:blue"))
        sh = data["shapes"][s]
        top.set_title(f"{s}：L={sh['n_layers']} H={sh['n_heads']} D={sh['head_dim']} BS={sh['block_size']} "
                      f"{sh['dtype']}")
        top.set_ylabel("每步耗时 (µs)")
        bottom.set_ylabel("带宽 GB/s（读 + 写）")
        ns = sorted({r["N"] for r in res if r["shape"] == s})
        for ax in (top, bottom):
            ax.set_yscale("log")
            log2_axis(ax, ns)
        bottom.set_ylim(top=roof * 2.5)
        top.legend(loc="upper left", fontsize=11, frameon=False)
        bottom.legend(loc="lower right", fontsize=11, frameon=False)
    m, s0 = data["meta"], shapes[0]
    lo = points(res, s0, "C")[0][0]
    slow = [dict(points(res, s0, x))[lo] / dict(points(res, s0, "C"))[lo] for x in ("A", "B")
            if points(res, s0, x)]
    title = "写时复制的整块克隆"
    if slow:
        title += f"：N={lo} 时逐层的 A、B 比 C 慢 {fixed(0)(min(slow))}–{fixed(0)(max(slow))} 倍（{s0}）"
    fig.suptitle(title, fontsize=15)
    figlib.caption(fig, f"{m['gpu']}，torch {m['torch']}，triton {m['triton']}，{m['date']}；"
                        "下排的上限线是 D 实测的最高带宽，箭头指 N 最大时的 C。")
    fig.tight_layout(rect=(0, 0.03, 1, 0.96))
    return figlib.save_png(fig, out_png)


def build(out_dir, json_path=None):
    s06 = figlib.load_script("06_triton_cow_clone")
    data = s06.load_results(json_path or os.path.join(figlib.FIGDIR, DATA_FILES[0]))
    os.makedirs(out_dir, exist_ok=True)
    return [plot_slide(data, os.path.join(out_dir, FIGURES[0])), plot_results(data, os.path.join(out_dir, FIGURES[1]))]


def main(argv=None):
    ap = ArgParser(prog="plot_06.py", description=__doc__.strip().splitlines()[0])
    ap.add_argument("--json", default=None, help="结果 JSON（默认 figures/data/triton_cow_clone_h200.json）")
    ap.add_argument("--out", default=figlib.FIGDIR, help="图的输出目录（默认 figures/）")
    args = ap.parse_args(argv)
    if os.path.exists(args.out) and not os.path.isdir(args.out):
        print(f"plot_06.py: --out {args.out}：是一个文件，不是目录", file=sys.stderr)
        return 2
    figlib.setup_matplotlib()
    figlib.glyph_warnings_as_errors()
    t0 = time.perf_counter()
    try:
        paths = build(args.out, args.json)
    except OSError as exc:                      # 只读的目录、磁盘满：一行说清，不是 traceback
        print(f"plot_06.py: 图写不进 {args.out}（{exc.strerror}）", file=sys.stderr)
        return 2
    print(f"{', '.join(os.path.relpath(p) for p in paths)}（{time.perf_counter() - t0:.1f} s；"
          f"{figlib.font_description(with_path=False)}）")
    return 0


if __name__ == "__main__":
    sys.exit(main())
