"""01_kv_cache_memory 的图：KV 显存里有多少真正存着 token（连续预留 vs 分页），对照 vLLM 论文图 2。

运行：python figures/plot_01.py [--out DIR]     （约 2 秒；make all 会调用它）
数据和配置全部来自 lecture07/01_kv_cache_memory.py 的 demo2_fragmentation() 返回的 dict（同一次模拟，
论文数字在它的 "paper" 里）；这里不重算，也不读脚本里的其他名字。
"""
import os
import sys

import figlib
from figlib import caption, plt, save_png

FIGURES = ("01_kv_memory_breakdown.png",)
PARTS = (("token 状态", "tab:green"), ("预留（将来的 token）", "tab:olive"),
         ("内部碎片", "tab:red"), ("外部碎片 / 空闲", "0.7"))


def compute():
    r = figlib.quiet(figlib.load_script("01_kv_cache_memory").demo2_fragmentation)
    config = (f"{r['model']}，KV 池 {r['pool_gib']} GiB = {r['pool']:,} 个 token；{r['n_requests']} 个请求一开始全部排队"
              f"（种子 {r['seed']}），平均输入 / 输出 {r['mean_prompt']:.0f} / {r['mean_output']:.0f}，"
              f"最长 {r['max_seq']}；分页块大小 {r['block_size']}")
    if r["idle"]:                      # 从来没满载的系统没有可画的占比
        config += "；从未满载、没画：" + "、".join(r["idle"])
    measured = [k for k in r["shares"] if k not in r["idle"]]
    return dict(shares={k: [float(x) for x in r["shares"][k]] for k in measured},
                concurrency={k: r["concurrency"][k] for k in measured}, paper=r["paper"], config=config)


def plot_breakdown(shares, concurrency, paper, out, config):
    """每个系统一根横条：KV 池被 token 状态、预留、内部碎片、外部碎片 / 空闲各占多少；◆ 是论文图 2 的 token 状态占比。"""
    names = list(shares)
    fig, ax = plt.subplots(figsize=(14, 6.5))
    y = range(len(names))[::-1]
    left = [0.0] * len(names)
    for j, (label, color) in enumerate(PARTS):
        w = [shares[n][j] * 100 for n in names]
        ax.barh(list(y), w, left=left, color=color, edgecolor="white", height=0.6, label=label)
        for yi, l0, wi in zip(y, left, w):
            if wi >= 6:
                ax.text(l0 + wi / 2, yi, f"{wi:.1f}%", ha="center", va="center", fontsize=12,
                        color="white" if j != 3 else "black")
        left = [a + b for a, b in zip(left, w)]
    have = [n for n in names if n in paper]
    ax.plot([paper[n] for n in have], [list(y)[names.index(n)] for n in have], "D", color="black", ms=10,
            label="论文：token 状态（vLLM 图 2）")
    for n in have:
        ax.annotate(f"论文 {paper[n]:.1f}%", (paper[n], list(y)[names.index(n)] + 0.3), ha="center",
                    va="bottom", fontsize=12)
    ax.set_yticks(list(y), [f"{n}\n并发 {concurrency[n]:.1f}" for n in names])
    ax.set_xlim(0, 100)
    ax.set_xlabel("占整个 KV 池的比例（%，满载时的时间平均）")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=5, frameon=False)
    ax.set_title("KV 显存里真正存着 token 的比例：连续预留 vs 分页\n" + config, fontsize=13)
    caption(fig, "论文：vLLM（SOSP'23）图 2，真实系统、ShareGPT 请求流；这里是合成长度的离散模拟，比较量级和顺序。")
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    return save_png(fig, out)


def build(out_dir):
    d = compute()
    return [plot_breakdown(d["shares"], d["concurrency"], d["paper"], os.path.join(out_dir, FIGURES[0]),
                           d["config"])]


def main(argv=None):
    return figlib.main(argv, __doc__, build)


if __name__ == "__main__":
    sys.exit(main())
