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
from lab_common.say import pct1, size

FIGURES = ("06_triton_cow_clone.png", "06_triton_cow_clone_detail.png")
DATA_FILES = ("data/triton_cow_clone_h200.json",)    # = 06 脚本的 DEFAULT_JSON（相对 figures/）
STYLES = {"A": ("tab:red", "o-"), "B": ("tab:orange", "s-"), "C": ("tab:blue", "^-"),
          "C图": ("tab:cyan", "v:"), "D": ("0.35", "D--"), "E": ("tab:green", "P-")}
NAMES = {"A": "A 每层 index_select + index_copy_", "B": "B 每层一次 Triton launch", "C": "C 所有层一次 launch",
         "C图": "C 捕获进 CUDA graph", "D": "D 连续拷贝（上限）",
         "E": "E vLLM copy_blocks 式：grid = (层, 块对)"}
SHORT = {"A": "A 逐层", "B": "B 逐层 Triton", "C": "C 一次 launch", "C图": "C图 CUDA graph", "D": "D 连续拷贝（上限）",
         "E": "E vLLM 式"}           # 细节图的图例：一行放得下（全名在幻灯片那张图和图注里）


def points(res, shape, method, key="us"):
    """[(N, 值)]，按 N 排好。"""
    return sorted((r["N"], r[key]) for r in res if r["shape"] == shape and r["method"] == method)


def us_text(x):
    if x >= 100:
        return f"{x:,.0f} µs"
    return f"{x:.1f} µs"


def log2_axis(ax, ns, label="一步克隆的块对数 N（对数刻度）"):
    ax.set_xscale("log", base=2)
    ax.set_xticks(ns)
    ax.set_xticklabels([f"{n:,}" for n in ns])
    ax.minorticks_off()
    if label:
        ax.set_xlabel(label)
    ax.grid(True, which="major", alpha=0.3)


def c_over_d(res, shape, n, m="C"):
    """m 到 D 的多少：D 的耗时 / m 的耗时（同样的字节数，= 带宽之比）；就是 06 演示 2 表里的 C/D、E/D 那两列。"""
    return dict(points(res, shape, "D"))[n] / dict(points(res, shape, m))[n]


def plot_slide(data, out_png, shape=None):
    """一张幻灯片：shape（默认第一种）上 A、C、D、E 每步 µs 随 N 的变化（对数坐标）。N 小时 C、D 都是一次调用的
    开销（平的），N 大时贴着显存带宽；标出 N 最小和最大时要记住的数（C、E 各到 D 的多少，06 演示 2 的表里都有）。"""
    res = data["results"]
    shape = shape or next(s for s in data["shapes"] if any(r["shape"] == s for r in res))
    pts = {m: points(res, shape, m) for m in ("A", "C", "D", "E")}
    ns = [n for n, _ in pts["C"]]
    lo, hi = ns[0], ns[-1]
    us = {m: dict(p) for m, p in pts.items()}
    by_n = {r["N"]: r for r in res if r["shape"] == shape and r["method"] == "D"}
    cd, ed = c_over_d(res, shape, hi), c_over_d(res, shape, hi, "E")
    fig, ax = figlib.plt.subplots(figsize=figlib.SLIDE)
    for m in ("A", "C", "D", "E"):
        color, style = STYLES[m]
        ax.plot(ns, [us[m][n] for n in ns], style, color=color, label=NAMES[m], lw=2.5, ms=8)
    ax.set_yscale("log")
    log2_axis(ax, ns)
    ax.set_ylabel("每步耗时（µs，对数刻度）")
    ax.annotate(f"N={lo}：C {us_text(us['C'][lo])}，D {us_text(us['D'][lo])}\n一次调用的开销（launch、主机）",
                xy=(lo, us["C"][lo]), xytext=(lo * 1.3, us["C"][lo] * 6), color="tab:blue",
                arrowprops=dict(arrowstyle="->", color="tab:blue"))
    layers = data["shapes"][shape]["n_layers"]
    ax.annotate(f"N={lo}：A {us_text(us['A'][lo])}\n每层上传下标、逐层 launch（{6 * layers} 次调用）",
                xy=(lo, us["A"][lo]), xytext=(lo * 1.3, us["A"][lo] * 5), color="tab:red",
                arrowprops=dict(arrowstyle="->", color="tab:red"))
    ax.annotate(f"N={hi:,}：C {us_text(us['C'][hi])} = D 的 {pct1(cd)}，E 是 {pct1(ed)}\n"
                f"一步搬 {size(by_n[hi]['bytes'], binary=False)}：贴着显存带宽",
                xy=(hi, us["C"][hi]), xytext=(hi * 0.85, min(us["D"].values()) / 8), color="tab:blue", ha="right",
                va="center",
                arrowprops=dict(arrowstyle="->", color="tab:blue"))
    ax.set_ylim(min(us["D"].values()) / 40, max(us["A"].values()) * 200)   # 下面空出来放 N 最大时的那段字，上面放图例
    ax.legend(loc="upper right", frameon=False)
    sh, m = data["shapes"][shape], data["meta"]
    ax.set_title(f"{shape}：{sh['n_layers']} 层 × K/V，每块 {sh['n_heads']}×{sh['block_size']}×{sh['head_dim']}"
                 f" {sh['dtype']}；{m['gpu']}")
    others = [s for s in data["shapes"] if s != shape and points(res, s, "C")]
    note = "µs/步：各轮中位数的中位数；D = 同样字节数的一次连续拷贝，C/D、E/D = D 的耗时 / C、E 的耗时。"
    for s in others:
        hs = points(res, s, "C")[-1][0]
        note += f"{s} 在 N={hs:,} 时 C 是 D 的 {pct1(c_over_d(res, s, hs))}。"
    figlib.finish(fig, f"COW 克隆：N={hi:,} 时一次 launch 的 C 到 D 的 {pct1(cd)}，vLLM 式的 E 到 {pct1(ed)}", note)
    return figlib.save_png(fig, out_png)


def plot_results(data, out_png):
    """细节图：每种形状一列；上排每步 µs（A/C/D/E），下排带宽 GB/s（C、C图、D、E），D 的最高带宽画成上限线，
    标出 N 最大时 C 到 D 的多少。图例只一个（在下面），各面板至多 4 条线。data：06 保存的结果（meta、shapes、results）。"""
    res = data["results"]
    shapes = [s for s in data["shapes"] if any(r["shape"] == s for r in res)]
    fig, axes = figlib.plt.subplots(2, len(shapes), figsize=figlib.SLIDE, squeeze=False, sharex="col")
    handles = {}
    for j, s in enumerate(shapes):
        top, bottom = axes[0][j], axes[1][j]
        for m, ax, key in [(m, top, "us") for m in ("A", "C", "D", "E")] + [(m, bottom, "GBps")
                                                                           for m in ("C", "C图", "D", "E")]:
            pts = points(res, s, m, key)
            if pts:
                color, style = STYLES[m]
                handles[m], = ax.plot([p[0] for p in pts], [p[1] for p in pts], style, color=color, lw=2, ms=6,
                                      label=SHORT[m])
        roof = max(r["GBps"] for r in res if r["shape"] == s and r["method"] == "D")
        bottom.axhline(roof, color="black", lw=1, ls="-.")
        bottom.annotate(f"D 实测最高 {roof / 1e3:.2f} TB/s", xy=(0.98, roof), xycoords=("axes fraction", "data"),
                        xytext=(0, 6), textcoords="offset points", ha="right", va="bottom")
        c = points(res, s, "C", "GBps")
        if c and points(res, s, "D"):
            n_hi, gb = c[-1]
            bottom.annotate(f"N={n_hi:,}：C = D 的 {pct1(c_over_d(res, s, n_hi))}", xy=(n_hi, gb), xytext=(0.97, 0.12),
                            textcoords="axes fraction", ha="right", color="tab:blue",
                            arrowprops=dict(arrowstyle="->", color="tab:blue"))
        sh = data["shapes"][s]
        top.set_title(f"{s}：L={sh['n_layers']} H={sh['n_heads']} D={sh['head_dim']} BS={sh['block_size']} "
                      f"{sh['dtype']}")
        ns = sorted({r["N"] for r in res if r["shape"] == s})
        for ax in (top, bottom):
            ax.set_yscale("log")
        log2_axis(top, ns, label=None)
        log2_axis(bottom, ns)
        bottom.set_ylim(top=roof * 4)
    axes[0][0].set_ylabel("µs/步（对数）")
    axes[1][0].set_ylabel("GB/s（读+写，对数）")
    order = [m for m in ("A", "C", "C图", "D", "E") if m in handles]
    m, s0 = data["meta"], shapes[0]
    lo, hi = points(res, s0, "C")[0][0], points(res, s0, "C")[-1][0]
    us0 = {x: dict(points(res, s0, x)) for x in ("A", "C") if points(res, s0, x)}
    title = f"写时复制的整块克隆（{s0}）"
    if "A" in us0:
        title = (f"{s0}：N={lo} 时逐层的 A {us_text(us0['A'][lo])}，C {us_text(us0['C'][lo])}；"
                 f"N={hi:,} 时 C 到 D 的 {pct1(c_over_d(res, s0, hi))}")
    figlib.finish(fig, title, f"A = 每层 index_select + index_copy_，C = 所有层一次 Triton launch，E = vLLM 的 "
                              f"copy_blocks 式 grid =（层, 块对）。{m['gpu']}，torch {m['torch']}，triton {m['triton']}，"
                              f"{m['date']}。", legend=([handles[x] for x in order], [SHORT[x] for x in order]))
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
        return 1                                # 和 lab_common.endings 一样：写不进是 1，给错的输入才是 2
    print(f"{', '.join(os.path.relpath(p) for p in paths)}（{time.perf_counter() - t0:.1f} s；"
          f"{figlib.font_description(with_path=False)}）")
    return 0


if __name__ == "__main__":
    sys.exit(main())
