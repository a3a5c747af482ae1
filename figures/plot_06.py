"""06_triton_cow_clone 的图（GPU 加餐）：COW 克隆每步耗时与带宽随 N 的变化，各做法一条线，带 D 的实测上限。

运行：python figures/plot_06.py [--json PATH] [--out DIR]     （约 2 秒；CPU 即可，make all 会调用它）
数据是 GPU 上实测、存在 figures/data/triton_cow_clone_h200.json 里的结果（CPU 上重新测不了，make clean
也不删它）；读 JSON 用 06 脚本自己的 load_results（坏文件一行报错、退出码 2）。06 的 --plot-only 调的就是本脚本。
"""
import os
import sys
import time

import figlib
from lab_common.console import ArgParser

FIGURES = ("06_triton_cow_clone.png",)
DATA_FILES = ("data/triton_cow_clone_h200.json",)    # = 06 脚本的 DEFAULT_JSON（相对 figures/）
STYLES = {"A": ("tab:red", "o-"), "B": ("tab:orange", "s-"), "C": ("tab:blue", "^-"),
          "C图": ("tab:blue", "^:"), "D": ("tab:gray", "D--")}
NAMES = {"A": "A 每层 index_select + index_copy_", "B": "B 每层一次 Triton launch",
         "C": "C 所有层一次 launch", "C图": "C 捕获进 CUDA graph", "D": "D 连续拷贝（带宽上限）"}


def plot_results(data, out_png):
    """data：06 保存的结果（meta、shapes、results）。上排每步 µs，下排 GB/s（读 + 写），每种形状一列。"""
    res = data["results"]
    shapes = [s for s in data["shapes"] if any(r["shape"] == s for r in res)]
    fig, axes = figlib.plt.subplots(2, len(shapes), figsize=(8 * len(shapes), 11), squeeze=False)
    for j, s in enumerate(shapes):
        for m, (color, style) in STYLES.items():
            pts = sorted((r["N"], r["us"], r["GBps"]) for r in res if r["shape"] == s and r["method"] == m)
            if pts:
                axes[0][j].plot([p[0] for p in pts], [p[1] for p in pts], style, color=color, label=NAMES[m])
                axes[1][j].plot([p[0] for p in pts], [p[2] for p in pts], style, color=color, label=NAMES[m])
        roof = max(r["GBps"] for r in res if r["shape"] == s and r["method"] == "D")
        axes[1][j].axhline(roof, color="black", lw=1, ls="-.")
        axes[1][j].annotate(f"D 实测上限 {roof / 1e3:.2f} TB/s", xy=(0.02, roof), xycoords=("axes fraction", "data"),
                            va="bottom", fontsize=12)
        sh = data["shapes"][s]
        axes[0][j].set_title(f"{s}：L={sh['n_layers']} H={sh['n_heads']} D={sh['head_dim']} BS={sh['block_size']} "
                             f"{sh['dtype']}")
        axes[0][j].set_ylabel("每步耗时 (µs)")
        axes[1][j].set_ylabel("带宽 GB/s（读 + 写）")
        ns = sorted({r["N"] for r in res if r["shape"] == s})
        for ax in (axes[0][j], axes[1][j]):
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xticks(ns)
            ax.set_xticklabels([str(n) for n in ns])
            ax.set_xlabel("一步克隆的块对数 N")
            ax.grid(True, which="both", alpha=0.3)
        axes[1][j].set_ylim(top=roof * 2.5)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=3, fontsize=13, frameon=False)
    m = data["meta"]
    fig.suptitle(f"写时复制的整块克隆 — {m['gpu']}，torch {m['torch']}，triton {m['triton']}，{m['date']}", fontsize=15)
    fig.tight_layout(rect=(0, 0.08, 1, 0.96))
    return figlib.save_png(fig, out_png)


def build(out_dir, json_path=None):
    s06 = figlib.load_script("06_triton_cow_clone")
    data = s06.load_results(json_path or os.path.join(figlib.FIGDIR, DATA_FILES[0]))
    os.makedirs(out_dir, exist_ok=True)
    return [plot_results(data, os.path.join(out_dir, FIGURES[0]))]


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
    paths = build(args.out, args.json)
    print(f"{', '.join(os.path.relpath(p) for p in paths)}（{time.perf_counter() - t0:.1f} s；"
          f"{figlib.font_description(with_path=False)}）")
    return 0


if __name__ == "__main__":
    sys.exit(main())
