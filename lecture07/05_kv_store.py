"""CS349E · 第 7 讲 · 05_kv_store.py —— 分层的 KV 存储与以 KV 为中心的调度（仿 Mooncake）。

【问题】前缀缓存大到 HBM 放不下，就要放到 CPU 内存、SSD、别的机器上。那么：从哪一层读 KV
比重算划算？热门的前缀只存在一台机器上，会不会把它的网卡挤爆？请求该发给哪台机器——
排队最短的，还是缓存命中最多的？prefill 和 decode 分开放时，把 KV 送过去的时间藏得住吗？

  演示 1：读还是重算——每个存储层级读一段前缀的 KV 要多久、重算要多久；保本的前缀长度和带宽
          （FAST'25：8×A800 至少 6 GB/s、8×H800 至少 19 GB/s）；读和算按层流水重叠。
  演示 2：热点块与网络——所有请求都去一台机器拉同一段热门前缀，那台的网卡（合计 100 GB/s）排起长队；
          把热点块复制到 k 台机器以后，排队时间怎么变（Mooncake arXiv v3 §6.2）。
  演示 3：以 KV 为中心的调度——8 台 prefill 节点各有本地前缀缓存，比较随机、负载均衡、
          只看本地缓存、看全局缓存（Mooncake 的 Conductor）四种调度的平均 TTFT（FAST'25 §4.2 图 5）。
  演示 4：prefill/decode 分离——整个请求的 KV 要从 prefill 节点送到 decode 节点：一层算完发一层，
          什么时候藏得住（长 prompt、快网卡），什么时候藏不住（慢网卡、短 prompt、前缀命中、小模型）。

【运行】python lecture07/05_kv_store.py              （约 3 秒，2 核笔记本，不需要 GPU）
        python lecture07/05_kv_store.py --demo 3     （只跑演示 3）
        python lecture07/05_kv_store.py --trace ../shared/traces/mooncake_fast25_synthetic_trace.jsonl
                                                     （演示 2、3 换成一个 Mooncake 格式的 JSONL trace，
                                                       例如 FAST'25 公开的 Synthetic 负载）
【依赖】numpy、rich；本目录的 kv_physics（模型、层级、prefill 时间）、kv_cluster（集群模拟）、
        kv_trace（合成 / 读入 trace）；lab_common 的 console、settings。

【试一试】改下面"学生可以改的设置"，再跑对应的演示（--demo N）：
  1. 把 PREFIX 改成 4096：前缀短了一半，SSD 还比重算快吗？"露出的读"怎样变？（--demo 1）
  2. 把 NET_NODES 改成 (16, 32, 64, 128, 256)：集群再大一倍，热点块要复制几份才不超载？（--demo 2）
  3. 把 SCHED_CAPACITY 改成 600（每台只留约 0.1 TB DRAM）：本地缓存小了，看缓存的调度还赢多少？（--demo 3）
  4. 把 SCHED_LOAD 改成 0.7：不用缓存也做得完时，随机调度还比负载均衡慢几倍？（--demo 3）
  5. 把 PD_NIC_GBPS 改成 100：网卡只有八分之一时，前缀命中 95% 的请求还藏得住 KV 的发送吗？（--demo 4）
"""
import os
import sys
from dataclasses import replace

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.realpath(__file__))))  # 仓库根目录：让 lab_common 包可以 import
from lab_common.console import ArgParser, fmt_int, print_header, print_observations, print_table, print_text  # noqa: E402
from lab_common.settings import check_setting, is_int, is_number  # noqa: E402
from kv_cluster import (BLOCK_BYTES, LOCAL_DRAM, NIC_GB_PER_S, SCHEDULERS, fetch_plan,  # noqa: E402
                        block_homes, hit_accesses, hit_tokens, nic_fetch, run_prefill, trace_columns)
from kv_trace_io import BLOCK_SIZE  # noqa: E402  Mooncake trace 的块大小：512 token
from kv_trace import load_trace, make_trace  # noqa: E402
from kv_physics import (A800_X8, EQ1_A, EQ1_B, LLAMA2_7B, LLAMA3_8B, LLAMA3_70B, TIERS, Node,  # noqa: E402
                        layer_overlap, load_time, prefill_compute_time, prefill_time)
from kv_cache_sim import simulate  # noqa: E402

# ---- 学生可以改的设置 ----
TRACE_SEED = 0                  # 合成 trace 的随机种子（--trace 给了文件就不用）
SCHED_SEED = 0                  # 演示 3 随机调度的种子
PREFIX = 8192                   # 演示 1：前缀长度（token），FAST'25 的保本带宽就是按 8,192 算的
SUFFIX = 1024                   # 演示 1 的流水线：命中前缀之后还要新算的 token 数
PREFIX_LENS = (1024, 8192, 32768, 131072)   # 演示 1：保本带宽随前缀长度的变化
NET_NODES = (16, 32, 64, 128)   # 演示 2：集群的节点数（每台的网卡合计 800 Gbps）
NET_GPU_UTIL = 0.8              # 演示 2：按"GPU 忙到 80%"放大请求率（节点越多，请求越多）
HOT_SHARE = 0.04                # 演示 2：被至少 4% 的请求用到的块算"热点块"
REPLICAS = (1, 2, 4, 8, 16)     # 演示 2：热点块的副本数 k（1 = 不复制）
SCHED_NODES = 8                 # 演示 3：prefill 节点数（每台 8×A800）
SCHED_CAPACITY = 6_000          # 演示 3：每台节点本地缓存的块数（6,000 × 160 MiB ≈ 1.0 TB DRAM ≈ 300 万 token）
SCHED_LOAD = 1.08               # 演示 3：请求率调到"不用前缀缓存时要 108% 的算力"——没有缓存就跟不上
PD_LENS = (1024, 8192, 32768, 131072)   # 演示 4：prompt 长度（token）
PD_NIC_GBPS = 800               # 演示 4：prefill 节点发 KV 的网卡合计（Gbps；FAST'25 表 1 的一台 8×A800）
PD_SLOW_GBPS = 24               # 演示 4：对照的慢网卡（Gbps；FAST'25 §5.4.2 模拟的最低带宽）
PD_HIT = 0.95                   # 演示 4：前缀命中的比例（FAST'25 §5.4.3 图 14 用 0% 和 95%）

# ---- 论文和数据手册的数字（只用来对照，标明出处）----
H800_X8 = Node("8×H800", n_gpus=8, tflops_per_gpu=989, hbm_gb_per_gpu=80)
H800_SOURCE = ("NVIDIA H100 SXM 数据手册：BF16 稠密 989 TFLOPS（表中 1,979 是 2:4 稀疏）；"
               "H800 SXM 的 BF16 张量算力与 H100 SXM 相同，主要削减的是 NVLink 互连带宽")
PAPER_MIN_BW = {"8×A800": 6, "8×H800": 19}      # GB/s，Mooncake FAST'25 §2.2 式 (2)：LLaMA3-70B、8,192 token 前缀
PAPER_PREFIX = 8192                              # 上面两个数用的前缀长度（token）
PAPER_MIN_BW_SOURCE = "Mooncake FAST'25 §2.2 式 (2)（LLaMA3-70B，8,192 token 前缀）"
PAPER_FIG5 = {"global_cache": 3.07, "local_cache": 3.58, "load_balancing": 5.27, "random": 19.65}   # 秒，FAST'25 图 5
PAPER_FIG5_SETUP = dict(nodes=16, node="8×A800", trace="Conversation trace",   # FAST'25 §4.2：图 5 的实验设置
                        source="Mooncake FAST'25 §4.2 图 5")
PAPER_LOCAL_DRAM = dict(tb=1, tokens=3e6, source="Mooncake FAST'25 §5.3.1")   # 本机留约 1 TB DRAM ≈ 300 万 token
A800_X1 = Node("1×A800", n_gpus=1, tflops_per_gpu=312, hbm_gb_per_gpu=80)    # 一张卡跑小模型
PAPER_PD = dict(n=131_072, kv_gb=40, engine_gbs={"4×200 Gbps": 87, "8×400 Gbps": 190}, min_gbps=100, sweep=(24, 400),
                hit=0.95, prefill_cut=0.92, ttft_cut=0.86, a800_nic_gbps=100,
                source="Mooncake FAST'25 §5.4.1（128K token 的 KV 40 GB；传输引擎实测 87、190 GB/s）、"
                       "§5.4.2（24–400 Gbps，建议至少 100 Gbps）、§5.4.3 图 14（命中 95%：prefill −92%、TTFT −86%）")
MODEL_NOTE = ("FAST'25 表 1 的模型是 LLaMA3-70B；arXiv v3 用的 dummy LLaMA2-70B 形状相同"
              "（80 层、d = 8192、8 个 KV 头），每 token 的 KV 和式 1 的 FLOPs 都一样")
SCHED_NAMES = {"random": "随机", "load_balancing": "负载均衡", "local_cache": "本地缓存感知",
               "global_cache": "全局缓存感知"}
SHORT_TIER = ["HBM", "本机 DRAM", "远端 DRAM", "SSD"]   # 表格里的短名字，顺序同 kv_physics.TIERS
FIG_PREFIX_RANGE = (256, 131_072)   # 演示 1 返回给 figures/plot_05.py 的曲线：前缀长度范围（token）


# =============================================================================
def min_bandwidth(n, node, model=LLAMA3_70B):
    """读 n 个 token 的 KV 不比重算慢所需的最低带宽（GB/s）：KV 字节数 / 重算时间（FAST'25 式 2）。

    = kv_bytes · F / (l·(a·n·d + b·d²))：前缀越长，重算每个 token 越贵（注意力 ∝ n），要求越低。"""
    return n * model.kv_bytes_per_token() / prefill_compute_time(model, n, 0, node) / 1e9


def break_even_len(tier, node, model=LLAMA3_70B):
    """前缀至少多长，从 tier 读才比重算快？解 n·kv/B = l·(a·n²·d + b·n·d²)/F；≤ 0 表示任意长度都划算。"""
    d, L = model.d_model, model.n_layers
    return (model.kv_bytes_per_token() * node.flops / (tier.gb_per_s * 1e9 * L) - EQ1_B * d * d) / (EQ1_A * d)


def layer_pipeline(load, compute, n_layers):
    """逐层模拟：第 i 层的 KV 读完、第 i−1 层算完，第 i 层才能开始算；读是一层接一层连续进行的。"""
    loaded = done = 0.0
    for _ in range(n_layers):
        loaded += load / n_layers
        done = max(done, loaded) + compute / n_layers
    return done


def fmt_bw(x):
    """带宽：fmt_bw(16312) == '16,312'，fmt_bw(6.9) == '6.9'。"""
    if x >= 100:
        return f"{x:,.0f}"
    return f"{x:g}"


def fmt_s(sec):
    """秒 → "11.6 s" 或 "5.5 ms"。"""
    if sec >= 1:
        return f"{sec:.1f} s"
    return f"{sec * 1e3:.1f} ms"


def fmt_tokens(n):
    """前缀长度：1024 的整数倍写成 "8K"，否则千分位：fmt_tokens(8192) == '8K'，fmt_tokens(1000) == '1,000'。"""
    if n % 1024 == 0:
        return f"{n // 1024}K"
    return fmt_int(n)


def fmt_len(n):
    """保本长度：≤ 0 → "任意长度"。"""
    if n <= 0:
        return "任意长度"
    return fmt_int(n)


def demo1_load_or_recompute():
    """一段前缀的 KV：从哪一层读比重算快？最低要多少带宽？读和算重叠以后还剩多少？"""
    model, node, h800 = LLAMA3_70B, A800_X8, replace(H800_X8, mfu=A800_X8.mfu)
    print_header(f"演示 1：读还是重算——{model.name}、{PREFIX:,} token 的前缀、{node.name} 张量并行"
                 f"、{node.mfu:.0%} 峰值算力")
    kv = PREFIX * model.kv_bytes_per_token()
    recompute = {m.name: prefill_compute_time(model, PREFIX, 0, m) for m in (node, h800)}
    print_text(f"{MODEL_NOTE}。{PREFIX:,} token 的 KV = {PREFIX:,} × {model.kv_bytes_per_token() / 1024:g} KiB = "
               f"{kv / 2**30:.2f} GiB（= {kv / 1e9:.2f} GB；带宽按 1 GB/s = 10⁹ B/s）；重算它（FAST'25 式 1）在 "
               f"{node.name} 上要 {recompute[node.name] * 1e3:.0f} ms，在 {h800.name} 上要 "
               f"{recompute[h800.name] * 1e3:.0f} ms。")
    tiers = []
    for i, t in enumerate(TIERS):
        ld = load_time(model, PREFIX, t)
        tiers.append(dict(name=t.name, short=SHORT_TIER[i], gbps=t.gb_per_s, load=ld,
                          ratio_a800=ld / recompute[node.name], ratio_h800=ld / recompute[h800.name],
                          n_star_a800=break_even_len(t, node), n_star_h800=break_even_len(t, h800)))
    print_table(["层级", "GB/s", "读（ms）", "读/重算 A800", "读/重算 H800", "保本长度 A800", "H800"],
                [[r["short"], fmt_bw(r["gbps"]), f"{r['load'] * 1e3:.1f}", f"{r['ratio_a800']:.3f}",
                  f"{r['ratio_h800']:.3f}", fmt_len(r["n_star_a800"]), fmt_len(r["n_star_h800"])] for r in tiers],
                caption="读/重算 < 1：读更快。保本长度：前缀超过这么多 token，从这一层读才比重算快"
                        "（读的时间 ∝ n，重算 ∝ n² + n，所以总有一个交点）。带宽出处：" +
                        "；".join(f"{SHORT_TIER[i]}——{t.source}" for i, t in enumerate(TIERS)) +
                        f"。H800：{H800_SOURCE}。")

    # 保本带宽：100% 峰值算力（论文的算法）和 60%（04 演示 4 的假设）
    machines = [replace(node, mfu=1.0), node, replace(H800_X8, mfu=1.0), h800]
    lens = sorted(set(PREFIX_LENS))
    bw = {(m.name, m.mfu, n): min_bandwidth(n, m) for m in machines for n in set(lens) | {PAPER_PREFIX}}
    rows = []
    for m in machines:
        paper = "-"
        if m.mfu == 1.0:
            paper = PAPER_MIN_BW[m.name]
        rows.append([m.name, f"{m.mfu:.0%}"] + [f"{bw[(m.name, m.mfu, n)]:.1f}" for n in lens] + [paper])
    print_table(["机器", "算力利用", *(fmt_tokens(n) for n in lens), f"论文 {fmt_tokens(PAPER_PREFIX)}"], rows,
                caption="最低带宽（GB/s）= 前缀的 KV 字节数 / 重算它的时间：带宽高于它，读就比重算快。"
                        f"论文列：{PAPER_MIN_BW_SOURCE}，与我们 100% 算力的行同一个算法。")

    # 按层流水：命中 PREFIX 个 token、再算 SUFFIX 个
    n_in = PREFIX + SUFFIX
    comp = prefill_compute_time(model, n_in, PREFIX, node)
    full = prefill_compute_time(model, n_in, 0, node)
    pipe = []
    for i, t in enumerate(TIERS):
        ld = load_time(model, PREFIX, t)
        formula = prefill_time(model, n_in, PREFIX, t, node)
        sim = layer_pipeline(ld, comp, model.n_layers)
        pipe.append(dict(short=SHORT_TIER[i], load=ld, compute=comp, serial=ld + comp, formula=formula, sim=sim,
                         exposed=formula - comp, hidden=ld + comp - formula, full=full))
    print_table(["层级", "读", "算", "串行", "按层流水", "逐层模拟", "露出的读", "全部重算"],
                [[p["short"]] + [f"{p[k] * 1e3:.1f}" for k in
                                 ("load", "compute", "serial", "formula", "sim", "exposed", "full")] for p in pipe],
                caption=f"单位 ms。请求共 {n_in:,} token：前 {PREFIX:,} 个命中（从该层读），后 {SUFFIX:,} 个新算。"
                        f"按层流水 = max(读, 算) + min(读, 算) / {model.n_layers}（kv_physics.prefill_time）；"
                        "逐层模拟 = 第 i 层读完、第 i−1 层算完才算第 i 层，一层一层走一遍；"
                        "露出的读 = 按层流水 − 算：读 KV 让 prefill 多花的时间。")

    d = dict(model=model.name, node=node.name, h800=h800.name, mfu=node.mfu, prefix=PREFIX, prefix_lens=lens,
             tiers=tiers, min_bw=bw, pipeline=pipe, recompute=recompute,
             faster=[r["short"] for r in tiers if r["ratio_a800"] < 1],
             a800_100=bw[(node.name, 1.0, PAPER_PREFIX)], h800_100=bw[(h800.name, 1.0, PAPER_PREFIX)],
             a800_60=bw[(node.name, node.mfu, PAPER_PREFIX)], h800_60=bw[(h800.name, h800.mfu, PAPER_PREFIX)],
             flops_ratio=H800_X8.tflops_per_gpu / node.tflops_per_gpu,
             worst_diff=max(abs(p["sim"] - p["formula"]) for p in pipe),
             curves=load_vs_recompute_curves(model, (node, h800)),
             kv_kib_per_token=model.kv_bytes_per_token() / 1024)
    print_observations(observations1(d))
    return d


def load_vs_recompute_curves(model, nodes):
    """给 figures/plot_05.py 的曲线：前缀长度 n（几何等距）→ 每台机器的重算时间、各层级的读时间（秒）。"""
    n = np.unique(np.geomspace(*FIG_PREFIX_RANGE, 64).astype(int)).tolist()
    curves = {}
    for node in nodes:
        curves[node.name] = dict(
            recompute=[prefill_compute_time(model, x, 0, node) for x in n],
            load={SHORT_TIER[i]: [load_time(model, x, t) for x in n] for i, t in enumerate(TIERS)},
            break_even={SHORT_TIER[i]: break_even_len(t, node) for i, t in enumerate(TIERS)},
            gbps={SHORT_TIER[i]: t.gb_per_s for i, t in enumerate(TIERS)})
    return dict(n=n, by_node=curves)


def observations1(d):
    """演示 1 的观察：每一句都从 d 里的数字拼出来。"""
    node, h800, mfu, tiers, pipe = d["node"], d["h800"], d["mfu"], d["tiers"], d["pipeline"]
    a100, h100, a60, h60 = d["a800_100"], d["h800_100"], d["a800_60"], d["h800_60"]
    obs = []

    faster = d["faster"]
    names = "没有"
    if faster:
        names = "、".join(faster)
    slowest = min(tiers, key=lambda r: r["gbps"])
    obs.append(f"在 {node}、{mfu:.0%} 算力下，读 {d['prefix']:,} token 的 KV 比重算快的层级：{names}"
               f"（共 {len(faster)}/{len(tiers)} 个）。最慢的 {slowest['short']}（{fmt_bw(slowest['gbps'])} GB/s）"
               f"读的时间是重算的 {slowest['ratio_a800']:.0%}。")

    pa, ph = PAPER_MIN_BW["8×A800"], PAPER_MIN_BW["8×H800"]
    agree = "不一致"
    if (round(a100), round(h100)) == (pa, ph):
        agree = "一致"
    obs.append(f"按 100% 峰值算力、论文的 {PAPER_PREFIX:,} token 前缀算，最低带宽 {node} 是 {a100:.2f} GB/s ≈ "
               f"{round(a100)} GB/s、"
               f"{h800} 是 {h100:.2f} GB/s ≈ {round(h100)} GB/s，与论文的 {pa} GB/s、{ph} GB/s {agree}"
               f"：论文的数字对应 100% 算力。按 04 演示 4 的 {mfu:.0%} 算力，重算更慢，"
               f"门槛降到 {a60:.1f} 和 {h60:.1f} GB/s。")

    slow = [r for r in tiers if r["n_star_h800"] > 0]
    text = (f"GPU 越快，对存储带宽的要求越高：{h800} 的门槛是 {node} 的 {h100 / a100:.1f} 倍"
            f"（算力比 {d['flops_ratio']:.1f} 倍）。")
    if slow:
        text += (f"在 {h800} 上 {'、'.join(r['short'] for r in slow)} 要前缀超过 "
                 f"{'、'.join(fmt_int(r['n_star_h800']) for r in slow)} token 才划算。")
    else:
        text += f"在 {h800} 上所有层级对任意长度的前缀都划算。"
    obs.append(text)

    lo, hi = d["prefix_lens"][0], d["prefix_lens"][-1]
    bw_lo, bw_hi = d["min_bw"][(node, mfu, lo)], d["min_bw"][(node, mfu, hi)]
    if lo == hi:
        obs.append(f"PREFIX_LENS 只有一个长度：{node}（{mfu:.0%}）上 {fmt_tokens(lo)} token 的前缀要 {bw_lo:.2f} GB/s；"
                   "多给几个长度，才看得出门槛怎样随前缀长度变化。")
    elif bw_lo > bw_hi:
        obs.append(f"前缀越长门槛越低：{node}（{mfu:.0%}）上 {fmt_tokens(lo)} token 的前缀要 {bw_lo:.1f} GB/s，"
                   f"{fmt_tokens(hi)} token 只要 {bw_hi:.2f} GB/s——重算的注意力随长度平方增长，读 KV 只随长度线性增长。")
    else:
        obs.append(f"{node}（{mfu:.0%}）上 {fmt_tokens(lo)} 前缀要 {bw_lo:.2f} GB/s，{fmt_tokens(hi)} 要 {bw_hi:.2f} GB/s。")

    obs.append(pipeline_sentence(pipe[1], pipe[3], d["worst_diff"]))
    return obs


def pipeline_sentence(dram, ssd, worst_diff):
    """按层流水：本机 DRAM 的读被计算盖住多少；SSD 的读长不长于计算；公式和逐层模拟差多少。"""
    text = f"按层流水：从本机 DRAM 读 {dram['load'] * 1e3:.1f} ms、算 {dram['compute'] * 1e3:.1f} ms，"
    if dram["load"] < dram["compute"]:
        text += f"读被计算盖住了 {dram['hidden'] / dram['load']:.0%}，只露出第一层的 {dram['exposed'] * 1e3:.2f} ms。"
    else:
        text += f"读长于算，露出 {dram['exposed'] * 1e3:.1f} ms。"
    if ssd["load"] > ssd["compute"]:
        text += f"SSD 读 {ssd['load'] * 1e3:.0f} ms 长于计算，反过来是计算被读盖住，"
    else:
        text += f"SSD 读 {ssd['load'] * 1e3:.0f} ms 不长于计算，"
    shorter = "不短于"
    if ssd["formula"] < ssd["full"]:
        shorter = "仍短于"
    text += (f"总时间 {ssd['formula'] * 1e3:.0f} ms，{shorter}全部重算的 {ssd['full'] * 1e3:.0f} ms。"
             f"逐层模拟和公式的最大差 {worst_diff:.1e} s。")
    return text


# =============================================================================
BURST_S = 1e-3      # 全部请求在 1 ms（trace 时间戳的单位）之内到达：当成同一时刻的突发，算不出请求率


def trace_timing(arrival):
    """(时长秒, 是否突发)。突发 = 时长不到 BURST_S（包括只有一个请求）：请求率没有意义，不按负载缩放。"""
    span = arrival[-1] - arrival[0]
    return span, span < BURST_S


def fmt_ms(sec):
    """秒 → 毫秒，千分位一位小数：fmt_ms(11.6271) == '11,627.1'。"""
    return f"{sec * 1e3:,.1f}"


def fmt_pct(x):
    """负载：None（突发，算不出）→ "-"。超过 100% 的含义（超载）写在表的说明里。"""
    if x is None:
        return "-"
    return f"{x:.0%}"


def fmt_scale(x):
    """请求率的倍数：fmt_scale(43.6) == '43.6'；很小的倍数用科学记数，不印成 0.0。"""
    if x >= 0.1:
        return f"{x:.1f}"
    return f"{x:.1e}"


def fmt_duration(sec):
    """trace 时长：≥ 2 分钟按分钟，否则秒或毫秒。"""
    if sec <= 0:
        return "时长 0（同一时刻）"
    if sec >= 120:
        return f"{sec / 60:.0f} 分钟"
    if sec >= 1:
        return f"{sec:.1f} 秒"
    return f"{sec * 1e3:.1f} ms"


def demo2_hot_blocks(cols, source):
    """热门前缀只存在一台机器上，它的网卡会不会被挤爆？把热点块复制到 k 台以后呢？

    cols = (到达秒数, 输入 token 数, 每个请求的块 id)：trace 的三列（kv_cluster.trace_columns）。"""
    arrival, input_len, blocks = cols
    print_header(f"演示 2：热点块与网络——命中的 KV 从持有它的节点经 RDMA 拉取，每台节点的网卡合计 "
                 f"{NIC_GB_PER_S:g} GB/s")
    hits = simulate(blocks, None, "lru").tolist()                 # 集群的 KVCache 池：按无限容量
    span, burst = trace_timing(arrival)
    work = sum(prefill_time(LLAMA3_70B, n, hit_tokens(h, n), LOCAL_DRAM, A800_X8)
               for n, h in zip(input_len, hits))                  # 秒：全部 prefill 在一台节点上的时间
    homes = block_homes(blocks)                                        # 每块的"家"和被访问的次数（数组）
    counts = homes[2]
    is_hot = counts >= max(2, HOT_SHARE * len(arrival))                # 只用过一次的块谈不上热
    total_acc, hot_acc = int(counts.sum()), int(counts[is_hot].sum())
    node_h = None
    if burst:
        rate = (f"全部请求在 {BURST_S * 1e3:g} ms 之内到达，当成同一时刻的突发：算不出请求率，也就不能按 GPU 负载"
                "缩放；按原样重放，所有请求同时到达，排队就是这一阵突发。")
    else:
        node_h = work / span
        rate = (f"按无限容量的 KVCache 池算命中，平均要 {node_h:,.2f} 台 {A800_X8.name} 一直做 prefill。"
                f"节点数为 N 时把请求率乘以 S = N × {NET_GPU_UTIL:.0%} / {node_h:,.2f}，让 GPU 忙到 {NET_GPU_UTIL:.0%}。")
    print_text(f"{source}：{fmt_int(len(arrival))} 个请求、{fmt_duration(span)}。{rate}"
               f"请求轮流分给各节点；块存在第一次算出它的节点上。热点块 = 被至少 {HOT_SHARE:.0%}（且至少 2 个）的请求"
               f"用到的块：{int(is_hot.sum())} 个，占全部块访问的 {hot_acc / total_acc:.0%}。网卡：FAST'25 表 1 的 "
               f"B_nic = {NIC_GB_PER_S * 8:g} Gbps = {NIC_GB_PER_S:g} GB/s 是一台节点全部网卡的合计（§3.2.3：每张 A800 "
               f"配一块 100/200 Gbps 的网卡）；这里把一台节点的全部网卡当成一个 FIFO 队列。")

    def stats(res, scale):
        w = res["wait"]
        out = dict(mean=float(w.mean()), p99=float(np.percentile(w, 99)), max=float(w.max()),
                   hot_load=None, avg_load=None, sent=res["blocks_sent"])
        if not burst:
            offered = res["busy"] / (span / scale)
            out.update(hot_load=float(offered.max()), avg_load=float(offered.mean()))
        return out

    by_n, plans = {}, {}
    accesses = hit_accesses(blocks, hits, homes, is_hot)      # 命中的块要从它的"家"拉：和节点数无关的部分只算一次
    nodes, replicas = sorted(set(NET_NODES)), sorted(set(REPLICAS))
    for n in nodes:
        scale = 1.0
        if not burst:
            scale = n * NET_GPU_UTIL / node_h
        plans[n] = fetch_plan(accesses, len(arrival), n)
        by_n[n] = dict(scale=scale, k1=stats(nic_fetch(arrival, plans[n], n, 1, scale), scale),
                       k4=stats(nic_fetch(arrival, plans[n], n, 4, scale), scale))
    print_table(["节点数", "请求率×", "最忙网卡负载", "平均网卡负载", "平均排队", "P99 排队", "4 副本"],
                [[n, fmt_scale(r["scale"]), fmt_pct(r["k1"]["hot_load"]), avg_load_cell(r["k1"]["avg_load"]),
                  fmt_ms(r["k1"]["mean"]), fmt_ms(r["k1"]["p99"]), fmt_ms(r["k4"]["mean"])] for n, r in by_n.items()],
                caption="不复制（k = 1）。网卡负载 = 要发的字节 / (带宽 × trace 时长)；超过 100% 就是超载：要发的比"
                        "带宽能发的多，队列越排越长。排队：每个请求的几次传输里等得最久的那次，单位 ms；"
                        "4 副本：热点块复制 4 份（k = 4）时的平均排队（ms）。")
    n_big = nodes[-1]
    big = by_n[n_big]
    by_k = {}
    for k in replicas:              # k = 1 和 4 上面已经算过（同一个模拟），不再重复
        if k in (1, 4):
            by_k[k] = big[f"k{k}"]
        else:
            by_k[k] = stats(nic_fetch(arrival, plans[n_big], n_big, k, big["scale"]), big["scale"])
    print_table(["副本数 k", "最忙网卡负载", "平均排队（ms）", "P99 排队（ms）", "最长排队（ms）"],
                [[k, fmt_pct(s["hot_load"]), fmt_ms(s["mean"]), fmt_ms(s["p99"]), fmt_ms(s["max"])]
                 for k, s in by_k.items()],
                caption=f"{n_big} 个节点、请求率 × {fmt_scale(big['scale'])}。热点块复制到 k 台节点，请求从网卡最早"
                        "空下来的副本拉（本机有副本就不走网络）；副本假设事先放好（Conductor 按热度复制）。")
    d = dict(node_hours=node_h, burst=burst, n_hot=int(is_hot.sum()), hot_share=hot_acc / total_acc, by_n=by_n, by_k=by_k,
             nodes=nodes, replicas=replicas, hit_blocks=int(sum(int(h) for h in hits)),
             saturated=[n for n, r in by_n.items() if (r["k1"]["hot_load"] or 0) > 1],
             ok_replicas=[k for k, s in by_k.items() if s["hot_load"] is not None and s["hot_load"] <= 1])
    print_observations(observations2(d))
    return d


def avg_load_cell(x):
    """平均网卡负载保留一位小数（很小）；None → "-"。"""
    if x is None:
        return "-"
    return f"{x:.1%}"


def observations2(d):
    """演示 2 的观察：每一句都从 d 里的数字拼出来（没有网络流量、突发、只有一种规模、正常几种情形）。"""
    by_n, by_k, saturated = d["by_n"], d["by_k"], d["saturated"]
    n_small, n_big = d["nodes"][0], d["nodes"][-1]
    small, big = by_n[n_small]["k1"], by_n[n_big]["k1"]
    simplification = ("简化：只模拟发送方的网卡（接收方、交换机不排队），每次传输独占网卡（不分片、不多路）；"
                      "命中按无限容量的池算；热点块由整个 trace 的访问次数事先选出（真实系统要在线预测热度）。")
    if not any(r["k1"]["sent"] for r in by_n.values()):
        why = "没有一个块被第二个请求用到"
        if d["hit_blocks"]:
            why = f"命中的 {fmt_int(d['hit_blocks'])} 块都在执行它的那台节点上"
        return [f"没有任何请求要从别的节点拉 KV（{why}）：网卡都空着，排队都是 0，复制热点块也没有可省的。",
                simplification]
    obs = []
    if d["burst"]:
        obs.append(f"所有请求同时到达，算不出网卡负载；排队就是这阵突发本身：{n_small} 个节点时平均排队 "
                   f"{fmt_s(small['mean'])}、最长 {fmt_s(small['max'])}，{n_big} 个节点时平均 {fmt_s(big['mean'])}、"
                   f"最长 {fmt_s(big['max'])}。")
    elif n_small == n_big:
        obs.append(f"只有 {n_big} 个节点这一种规模：最忙那块网卡的负载 {big['hot_load']:.0%}，全部网卡平均 "
                   f"{big['avg_load']:.1%}（多给几种 NET_NODES，才看得出负载怎样随规模变）。")
        obs.append(saturation_sentence(saturated, n_big, big, by_n))
    else:
        obs.append(load_growth_sentence(n_small, n_big, small, big, d["n_hot"]))
        obs.append(saturation_sentence(saturated, n_big, big, by_n))
    more = [k for k in d["replicas"] if k > 1]
    if d["n_hot"] and more:
        k2, kb = by_k[more[0]], by_k[more[-1]]
        text = f"把热点块复制 {more[0]} 份，"
        if not d["burst"]:
            text += f"最忙网卡的负载从 {big['hot_load']:.0%} {down_to(k2['hot_load'], big['hot_load'])} {k2['hot_load']:.0%}，"
        text += f"平均排队从 {fmt_s(big['mean'])} {down_to(k2['mean'], big['mean'])} {fmt_s(k2['mean'])}；"
        ok = d["ok_replicas"]
        if not d["burst"] and big["hot_load"] > 1 and ok:
            if all(by_k[k]["hot_load"] <= 1 for k in d["replicas"] if k >= ok[0]):
                text += f"副本数 ≥ {ok[0]} 时不再超载；"
            else:
                text += f"副本数 {ok[0]} 时不再超载；"
        if len(more) > 1:
            text += f"复制 {more[-1]} 份时 {fmt_s(kb['mean'])}。"
        obs.append(text + "副本越多越分散，代价是多占 DRAM。")
    elif d["n_hot"]:
        obs.append("REPLICAS 里没有大于 1 的副本数：只算了不复制的情形，比不出复制的效果"
                   "（试试 REPLICAS = (1, 2, 4)）。")
    else:
        obs.append(f"这个 trace 里没有被至少 {HOT_SHARE:.0%}（且至少 2 个）的请求用到的块，没有热点可复制，"
                   "各副本数的结果相同。")
    obs.append(simplification)
    return obs


def load_growth_sentence(n_small, n_big, small, big, n_hot):
    """最忙的网卡负载随集群规模怎样变，和全部网卡的平均负载比。"""
    text = f"最忙那块网卡的负载：{n_small} 个节点时 {small['hot_load']:.0%}，{n_big} 个节点时 {big['hot_load']:.0%}，"
    if big["hot_load"] > 1.5 * small["hot_load"] and n_hot:
        text += "随集群规模增长——节点越多，来拉同一段热门前缀的请求越多；"
    elif big["hot_load"] > 1.5 * small["hot_load"]:
        text += "随集群规模增长（请求率跟着节点数放大）；"
    else:
        text += "没有随集群规模明显增长；"
    text += f"而全部网卡的平均负载只有 {big['avg_load']:.1%}"
    if big["hot_load"] > 5 * big["avg_load"]:
        return text + "：不是网络总带宽不够，是流量全挤在一台上。"
    return text + "，最忙的和平均的差得不多。"


def saturation_sentence(saturated, n_big, k1, by_n):
    """哪几种规模下最忙的网卡超载、排队有多长；都没超载时给出最长的平均排队。"""
    if not saturated:
        return (f"在这些规模下没有哪块网卡超过 100%，平均排队最多 {fmt_s(max(r['k1']['mean'] for r in by_n.values()))}"
                "（试试加大 NET_NODES 或 NET_GPU_UTIL）。")
    text = f"{'、'.join(map(str, saturated))} 个节点时最忙的网卡超过 100%，超载：要发的比带宽能发的多，队列越排越长"
    if n_big not in saturated:
        return text + "。"
    if saturated == [n_big]:
        text += "："
    else:
        text += f"；{n_big} 个节点时"
    text += f"平均排队 {fmt_s(k1['mean'])}、最长 {fmt_s(k1['max'])}"
    if k1["mean"] >= 1:
        return text + "，TTFT 被网络拖垮。"
    return text + "，排队还不到秒级。"


def down_to(new, old):
    """"降到"（new < old）或"变为"。"""
    if new < old:
        return "降到"
    return "变为"


# =============================================================================
def demo3_scheduling(cols, source):
    """请求该发给哪台 prefill 节点：排队最短的，还是缓存命中最多的？（cols：同演示 2）"""
    arrival, input_len, blocks = cols
    span, burst = trace_timing(arrival)
    work = sum(prefill_time(LLAMA3_70B, n, 0, LOCAL_DRAM, A800_X8) for n in input_len)   # 秒：不用缓存
    print_header(f"演示 3：以 KV 为中心的调度——{SCHED_NODES} 台 prefill 节点，各有 {SCHED_CAPACITY:,} 块的本地"
                 f" LRU 缓存（FAST'25 §4.2 图 5）")
    no_cache, scale = None, 1.0
    if burst:
        rate = (f"全部请求在 {BURST_S * 1e3:g} ms 之内到达，当成同一时刻的突发：算不出请求率，不按负载缩放，"
                "按原样重放。")
    else:
        no_cache = work / span
        scale = SCHED_LOAD * SCHED_NODES / no_cache
        rate = (f"不用前缀缓存时平均要 {no_cache:,.2f} 台 {A800_X8.name} 一直做 prefill；请求率乘以 {fmt_scale(scale)}，"
                f"使它等于 {SCHED_NODES} 台的 {SCHED_LOAD:.0%}")
        if SCHED_LOAD > 1:
            rate += "——不用缓存就超载（要做的比能做的多，队列越排越长），调度得好不好直接决定 TTFT。"
        else:
            rate += "——不用缓存也做得完，缓存和调度省的是排队和计算。"
    print_text(f"{source}：{fmt_int(len(arrival))} 个请求。{rate}每台节点一次做一个 prefill（FIFO），"
               f"命中的 KV 从本机 DRAM 读；全局调度可以把别的节点上更长的前缀经 RDMA（{NIC_GB_PER_S:g} GB/s）拉过来。")
    cap_tokens, cap_bytes = SCHED_CAPACITY * BLOCK_SIZE, SCHED_CAPACITY * BLOCK_BYTES
    print_text(f"本地缓存 {SCHED_CAPACITY:,} 块 × {BLOCK_SIZE} token = {fmt_int(cap_tokens)} token × "
               f"{BLOCK_BYTES / BLOCK_SIZE / 1024:g} KiB = {cap_bytes / 2**40:.2f} TiB（{cap_bytes / 1e12:.2f} TB）"
               f"的 DRAM；{PAPER_LOCAL_DRAM['source']}：本机留约 {PAPER_LOCAL_DRAM['tb']} TB DRAM 做缓存，"
               f"只能存约 {PAPER_LOCAL_DRAM['tokens'] / 1e4:,.0f} 万 token（{LLAMA3_70B.name}）。")
    total_blocks = sum(len(bl) for bl in blocks)
    res = {}
    for s in SCHEDULERS:
        r = run_prefill(arrival, input_len, blocks, s, SCHED_NODES, SCHED_CAPACITY, scale, seed=SCHED_SEED)
        busy = float(r["service"].sum())                 # 拉 KV + prefill 的 GPU 时间（秒）
        util = None
        if not burst:
            util = busy / (SCHED_NODES * span / scale)
        res[s] = dict(mean=float(r["ttft"].mean()), p90=float(np.percentile(r["ttft"], 90)),
                      hit=float(r["hits"].sum() / total_blocks), util=util,
                      pulled_share=float(np.mean(r["pulled"] > 0)), pulled=int(r["pulled"].sum()))
    g = res["global_cache"]["mean"]
    pg = PAPER_FIG5["global_cache"]
    print_table(["调度", "平均 TTFT", "P90", "命中率", "负载", "相对全局", "论文", "论文相对"],
                [[SCHED_NAMES[s], f"{r['mean']:.2f}", f"{r['p90']:.2f}", f"{r['hit']:.0%}", fmt_pct(r["util"]),
                  f"{r['mean'] / g:.2f}×", f"{PAPER_FIG5[s]:.2f}", f"{PAPER_FIG5[s] / pg:.2f}×"]
                 for s, r in res.items()],
                caption="TTFT 单位 s（只算 prefill：排队 + 拉 KV + 计算）；命中率：命中的块 / 全部块；"
                        "负载：全部 prefill 和拉 KV 的 GPU 时间 / (节点数 × trace 时长)，超过 100% 就是超载（要做的比"
                        f"做得完的多，队列越排越长）。论文：{PAPER_FIG5_SETUP['source']} 的平均 TTFT（s），"
                        f"{PAPER_FIG5_SETUP['nodes']} 台 {PAPER_FIG5_SETUP['node']}、{PAPER_FIG5_SETUP['trace']}。")
    order = sorted(SCHEDULERS, key=lambda s: res[s]["mean"])
    expected = ["global_cache", "local_cache", "load_balancing", "random"]
    d = dict(results=res, order=order, scale=scale, no_cache_nodes=no_cache, source=source, burst=burst,
             holds=all(res[a]["mean"] <= res[b]["mean"] for a, b in zip(expected, expected[1:])),
             nodes=SCHED_NODES, capacity=SCHED_CAPACITY, load=SCHED_LOAD, node=A800_X8.name,
             names=dict(SCHED_NAMES), paper=dict(PAPER_FIG5), paper_setup=dict(PAPER_FIG5_SETUP))
    print_observations(observations3(d))
    return d


def observations3(d):
    """演示 3 的观察：每一句都从 d 里的数字拼出来（并列、没有命中、超载各有说法）。"""
    res, order = d["results"], d["order"]
    rnd, lb, loc, glo = (res[s] for s in ("random", "load_balancing", "local_cache", "global_cache"))
    means = [res[s]["mean"] for s in order]
    obs = []
    if d["nodes"] == 1:
        obs.append(f"只有 1 台节点：四种调度都只能把请求发给它，平均 TTFT 都是 {means[0]:.2f} s、命中率都是 "
                   f"{glo['hit']:.0%}；要比较调度，至少要 2 台（试试 SCHED_NODES = 8）。")
        return obs + [setup_sentence(d)]
    if max(means) - min(means) <= 1e-9 * max(means):
        hits = "、".join(f"{res[s]['hit']:.0%}" for s in order)
        obs.append(f"四种调度的平均 TTFT 都是 {means[0]:.2f} s：在这个 trace 上调度方式没有带来差别"
                   f"（命中率 {hits}），比不出论文图 5 的顺序。")
    else:
        obs.append(ranking_sentence(res, order, d["holds"]))
    ratio = round(rnd["mean"] / lb["mean"], 1)
    text = f"随机和负载均衡都不看缓存，命中率只有 {rnd['hit']:.0%} 和 {lb['hit']:.0%}；随机调度还不看排队，TTFT "
    if ratio > 1:
        obs.append(text + f"是负载均衡的 {ratio:.1f} 倍。")
    else:
        obs.append(text + f"和负载均衡差不多（{ratio:.1f} 倍）：在这个 trace 上挑哪台都差不多。")
    if max(r["hit"] for r in res.values()) == 0:
        obs.append("这个 trace 里没有可以命中的前缀（四种调度的命中率都是 0%）：看缓存的调度没有缓存可利用。")
    else:
        rises = "是 "
        if min(loc["hit"], glo["hit"]) > max(rnd["hit"], lb["hit"]):
            rises = "升到 "
        text = (f"看缓存的调度把同一会话的下一轮送回有它前缀的节点，命中率{rises}{loc['hit']:.0%}（本地）和 "
                f"{glo['hit']:.0%}（全局）")
        if not d["burst"]:
            text += (f"，GPU 负载从 {lb['util']:.0%}（负载均衡）变为 {loc['util']:.0%} 和 {glo['util']:.0%}")
            if max(loc["util"], glo["util"]) < lb["util"]:
                text += "：省下的计算就是省下的排队"
        obs.append(text + "。")
    obs.append(global_pull_sentence(glo, loc, d["paper"]))
    over = [d["names"][s] for s, r in res.items() if r["util"] is not None and r["util"] > 1]
    if len(over) == len(res):
        over = ["四种调度"]
    if over:
        obs.append(f"{'、'.join(over)}的 GPU 负载超过 100%，超载：要做的 prefill 比 {d['nodes']} 台在这段时间里"
                   "做得完的多，队列越排越长，TTFT 随时间一直增长（trace 越长越糟），平均 TTFT 取决于 trace 有多长。")
    obs.append(setup_sentence(d))
    return obs


def setup_sentence(d):
    """演示 3 和 FAST'25 图 5 的实验设置差在哪里（所以只比较顺序和相对大小）。"""
    paper = d["paper_setup"]
    same_nodes = "节点数不同"
    if paper["nodes"] == d["nodes"]:
        same_nodes = "节点数相同"
    return (f"实验设置和论文不同：论文在 {paper['nodes']} 台 {paper['node']} 上回放 {paper['trace']}"
            f"（{paper['source']}），本实验是 {d['nodes']} 台 {d['node']}（{same_nodes}），负载是{d['source']}。"
            "所以比较的是顺序和相对大小，绝对值差很多：论文是真实的 Mooncake 集群（有 batching、"
            "真实的排队估计误差）；我们是离散事件模拟、每台一次只做一个 prefill、"
            "排队时间精确已知、RDMA 传输不排队、传输和计算不重叠。")


def ranking_sentence(res, order, holds):
    """"平均 TTFT 从低到高：A < B = C < D（…）。"，再说和论文图 5 的顺序是否一致。"""
    ranking = SCHED_NAMES[order[0]]
    for a, b in zip(order, order[1:]):
        if res[b]["mean"] > res[a]["mean"]:
            ranking += " < " + SCHED_NAMES[b]
        else:
            ranking += " = " + SCHED_NAMES[b]
    means = "、".join(f"{res[s]['mean']:.2f} s" for s in order)
    text = f"平均 TTFT 从低到高：{ranking}（{means}）。"
    if holds and " = " in ranking:
        return text + "没有违背论文图 5 的顺序（全局 ≤ 本地 ≤ 负载均衡 ≤ 随机），但有并列：这个 trace 区分不出它们。"
    if holds:
        return text + "与论文图 5 的顺序（全局 ≤ 本地 ≤ 负载均衡 ≤ 随机）一致。"
    return text + "与论文图 5 的顺序（全局 ≤ 本地 ≤ 负载均衡 ≤ 随机）不一致——我们的模拟在这个负载下不支持论文的结论。"


def global_pull_sentence(glo, loc, paper):
    """全局调度拉了多少 KV、比只看本地快多少（论文：图 5 的 3.07 s 对 3.58 s）。"""
    paper_gain = f"（论文里全局比本地低 {1 - paper['global_cache'] / paper['local_cache']:.0%}）"
    if glo["pulled"] == 0:
        same = "平均 TTFT 也和它不同"
        if glo["mean"] == loc["mean"]:
            same = "平均 TTFT 也和它相同"
        return (f"全局调度一次也没有从别的节点拉 KV：没有哪次拉过来比本地算更快，它的选择和本地缓存感知一样，"
                f"{same}{paper_gain}。")
    lower = "不低"
    if glo["mean"] < loc["mean"]:
        lower = "低"
    return (f"全局调度有 {glo['pulled_share']:.0%} 的请求从别的节点拉了 KV（共 {fmt_int(glo['pulled'])} 块），"
            f"既能去空闲的节点，又不丢掉别处的前缀；平均 TTFT 比只看本地{lower} "
            f"{abs(1 - glo['mean'] / loc['mean']):.0%}（论文 {1 - paper['global_cache'] / paper['local_cache']:.0%}）。")


# =============================================================================
def pd_case(model, node, n, hit, gbps):
    """P/D 分离里的一个请求：prefill 节点算（命中的前缀从本机 DRAM 读），算完一层就把这一层的 KV 发给
    decode 节点。decode 节点要整个请求的 KV（命中的前缀也要）。返回秒、字节和藏得住所需的带宽（Gbps）。"""
    h = min(int(round(hit * n)), n - 1)                      # 最后一个 token 总要算
    prefill = prefill_time(model, n, h, LOCAL_DRAM, node)
    kv = n * model.kv_bytes_per_token()
    send = kv * 8 / (gbps * 1e9)
    total = layer_overlap(prefill, send, model.n_layers)      # 算一层、发一层，流水
    return dict(n=n, hit=h, kv=kv, prefill=prefill, send=send, total=total, exposed=total - prefill,
                sim=layer_pipeline(prefill, send, model.n_layers), need_gbps=kv * 8 / prefill / 1e9,
                hidden=send <= prefill)


def demo4_pd_transfer():
    """prefill 和 decode 分在两台机器上：整个请求的 KV 要经网卡送到 decode 节点，要多久？藏得住吗？"""
    model, node, lens = LLAMA3_70B, A800_X8, sorted(set(PD_LENS))
    print_header(f"演示 4：prefill/decode 分离——把 KV 送到 decode 节点（{model.name}、{node.name}、"
                 f"网卡合计 {PD_NIC_GBPS:g} Gbps）")
    print_text("Mooncake、DistServe、Splitwise 都把 prefill 和 decode 放在不同的机器上：prefill 节点算出整个请求的 "
               "KV，再经网卡送到 decode 节点。Mooncake 一层算完就发这一层（FAST'25 §3 第 3 步、arXiv v3 §5.2），"
               f"发送和后面各层的计算重叠。每 token 的 KV {model.kv_bytes_per_token() / 1024:g} KiB；"
               f"{node.name} 按 {node.mfu:.0%} 峰值算力；网卡合计 {PD_NIC_GBPS:g} Gbps = {PD_NIC_GBPS / 8:g} GB/s。")
    base = [pd_case(model, node, n, 0.0, PD_NIC_GBPS) for n in lens]
    print_table(["prompt", "KV（GiB）", "prefill", "发 KV", "发/prefill", "按层流水", "露出", "算完再发"],
                [[fmt_int(c["n"]), f"{c['kv'] / 2**30:.2f}", fmt_ms(c["prefill"]), fmt_ms(c["send"]),
                  f"{c['send'] / c['prefill']:.1%}", fmt_ms(c["total"]), fmt_ms(c["exposed"]), fmt_ms(c["send"])]
                 for c in base],
                caption=f"单位 ms（KV 除外）。不命中前缀。按层流水 = max(prefill, 发) + min(prefill, 发) / "
                        f"{model.n_layers}（kv_physics.layer_overlap，和演示 1 读 KV 的流水同一个公式）；露出 = 按层流水 − "
                        "prefill：TTFT 因为发 KV 多出来的时间；算完再发：不流水时多出来的时间（= 发 KV）。")
    configs = [(f"{model.name}（{node.name}）", model, node, 0.0),
               (f"同上，前缀命中 {PD_HIT:.0%}", model, node, PD_HIT),
               (f"{LLAMA3_8B.name}（{A800_X1.name}）", LLAMA3_8B, A800_X1, 0.0),
               (f"{LLAMA2_7B.name}（MHA，{A800_X1.name}）", LLAMA2_7B, A800_X1, 0.0)]
    need = {label: [pd_case(m, nd, n, hit, PD_NIC_GBPS)["need_gbps"] for n in lens] for label, m, nd, hit in configs}
    print_table(["配置", "KV/token", *(fmt_tokens(n) for n in lens)],
                [[label, f"{m.kv_bytes_per_token() / 1024:g} KiB"] + [f"{x:,.1f}" for x in need[label]]
                 for label, m, nd, hit in configs],
                caption="藏得住所需的最低网卡带宽（Gbps）= 整个请求的 KV / prefill 时间：网卡比它快，发 KV 就藏在 prefill "
                        f"后面（只露出最后一层）。可用的带宽：一台 8×A800 的网卡合计 800 Gbps（FAST'25 表 1）；每张 A800 配"
                        f"一块 100/200 Gbps 的网卡（§3.2.3）；FAST'25 §5.4.2 建议总带宽至少 {PAPER_PD['min_gbps']} Gbps，"
                        f"模拟的最低是 {PAPER_PD['sweep'][0]} Gbps。")
    slow = [pd_case(model, node, n, 0.0, PD_SLOW_GBPS) for n in lens]
    ref = pd_case(model, node, PAPER_PD["n"], 0.0, PD_NIC_GBPS)
    ref_hit = pd_case(model, node, PAPER_PD["n"], PAPER_PD["hit"], PD_NIC_GBPS)
    engine = {k: ref["kv"] / (v * 1e9) for k, v in PAPER_PD["engine_gbs"].items()}
    print_table([f"量（{fmt_tokens(PAPER_PD['n'])} = {PAPER_PD['n']:,} token）", "论文", "本实验"],
                [["KV 大小", f"{PAPER_PD['kv_gb']} GB", f"{ref['kv'] / 2**30:.1f} GiB（{ref['kv'] / 1e9:.1f} GB）"],
                 *[[f"发完的时间（{k}）", f"实测 {PAPER_PD['engine_gbs'][k]} GB/s", f"按实测 {t:.2f} s，线速 "
                    f"{ref['kv'] / (gbps_of(k) / 8 * 1e9):.2f} s"] for k, t in engine.items()],
                 [f"前缀命中 {PAPER_PD['hit']:.0%}：prefill 少了", f"{PAPER_PD['prefill_cut']:.0%}",
                  f"{1 - ref_hit['prefill'] / ref['prefill']:.1%}"]],
                caption=f"论文：{PAPER_PD['source']}。发完的时间 = KV 字节 / 带宽；本实验的 prefill 按 FAST'25 式 1、"
                        f"{node.mfu:.0%} 峰值算力，命中的 KV 从本机 DRAM 读。")
    d = dict(model=model.name, node=node.name, nic_gbps=PD_NIC_GBPS, slow_gbps=PD_SLOW_GBPS, hit=PD_HIT, lens=lens,
             base=base, slow=slow, need=need, configs=[c[0] for c in configs], ref=ref, ref_hit=ref_hit, engine=engine,
             kv_per_token={c[0]: c[1].kv_bytes_per_token() for c in configs},
             flops_per_token={c[0]: c[1].prefill_flops(1) for c in configs},
             names={c[0]: c[1].name for c in configs},
             worst_diff=max(abs(c["sim"] - c["total"]) for c in base + slow),
             curves=pd_curves(model, node), paper=dict(PAPER_PD))
    print_observations(observations4(d))
    return d


def gbps_of(label):
    """"4×200 Gbps" → 800（一台节点的网卡合计）。"""
    count, each = label.split()[0].split("×")
    return int(count) * int(each)


def pd_curves(model, node):
    """给 figures/plot_05.py：prompt 长度（几何等距）→ prefill 时间（不命中、命中 PD_HIT）和几种网卡上发 KV 的时间（秒）。"""
    n = np.unique(np.geomspace(512, 131_072, 48).astype(int)).tolist()
    nics = sorted({PD_NIC_GBPS, PAPER_PD["min_gbps"], PD_SLOW_GBPS}, reverse=True)
    return dict(n=n, prefill=[pd_case(model, node, x, 0.0, PD_NIC_GBPS)["prefill"] for x in n],
                prefill_hit=[pd_case(model, node, x, PD_HIT, PD_NIC_GBPS)["prefill"] for x in n],
                send={g: [pd_case(model, node, x, 0.0, g)["send"] for x in n] for g in nics})


def observations4(d):
    """演示 4 的观察：每一句都从 d 里的数字拼出来。"""
    base, slow = d["base"], d["slow"]
    short, long_ = base[0], base[-1]
    obs = []
    text = (f"{fmt_int(long_['n'])} token 的 KV 有 {long_['kv'] / 2**30:.1f} GiB，经 {d['nic_gbps']:g} Gbps 发完要 "
            f"{fmt_s(long_['send'])}，prefill 要 {fmt_s(long_['prefill'])}。")
    if all(c["hidden"] for c in base):
        every = "每个长度的"
        if len(base) == 1:
            every = ""
        text += (f"按层流水，{every}发送都藏在 prefill 后面，只露出最后一层：{fmt_int(long_['n'])} token 露出 "
                 f"{fmt_s(long_['exposed'])}（算完再发要多等 {fmt_s(long_['send'])}）。")
    else:
        bad = [fmt_int(c["n"]) for c in base if not c["hidden"]]
        text += f"{'、'.join(bad)} token 的发送比 prefill 还长，藏不住：TTFT 多出 {fmt_s(base[0]['exposed'])} 起。"
    obs.append(text + f"逐层模拟和公式的最大差 {d['worst_diff']:.1e} s。")
    if len(base) > 1 and short["send"] / short["prefill"] > long_["send"] / long_["prefill"]:
        obs.append(f"prompt 越短，发 KV 相对越贵：发/prefill 从 {fmt_int(long_['n'])} token 的 "
                   f"{long_['send'] / long_['prefill']:.1%} 升到 {fmt_int(short['n'])} token 的 "
                   f"{short['send'] / short['prefill']:.1%}——prefill 的注意力随长度平方增长，KV 只随长度线性增长。")
    exposed = [c for c in slow if not c["hidden"]]
    text = f"网卡只有 {d['slow_gbps']:g} Gbps 时"
    if d["slow_gbps"] == d["paper"]["sweep"][0]:
        text += "（FAST'25 §5.4.2 模拟的最低带宽）"
    if exposed:
        text += (f"，{'、'.join(fmt_int(c['n']) for c in exposed)} token 藏不住：最短的露出 "
                 f"{fmt_s(exposed[0]['exposed'])}，是它 prefill 的 {exposed[0]['exposed'] / exposed[0]['prefill']:.0%}")
        if len(exposed) < len(slow):
            text += f"；更长的 prompt 算得久，{'、'.join(fmt_int(c['n']) for c in slow if c['hidden'])} token 仍藏得住"
        obs.append(text + "。")
    else:
        obs.append(text + "，每个长度仍藏得住：这个模型算得够久。")
    obs.append(hit_sentence(d))
    obs.append(small_model_sentence(d))
    p, ref, ref_hit = d["paper"], d["ref"], d["ref_hit"]
    first = next(iter(d["engine"]))
    obs.append(f"和论文对照：{fmt_tokens(p['n'])} token 的 KV 本实验 {ref['kv'] / 2**30:.1f} GiB，论文说 {p['kv_gb']} GB；按论文实测的 "
               f"{p['engine_gbs'][first]} GB/s（{first}）发完要 {d['engine'][first]:.2f} s；命中 {p['hit']:.0%} 时 prefill "
               f"少了 {1 - ref_hit['prefill'] / ref['prefill']:.1%}，论文 {p['prefill_cut']:.0%}（论文的 TTFT 少了 "
               f"{p['ttft_cut']:.0%}，含调度、传输和 decode 端加载，我们没有模拟）。")
    obs.append("简化：一次只有一个请求用网卡（不排队），网卡跑满线速（论文实测 4×200 Gbps 只跑到 87 GB/s）；"
               "decode 节点怎样收、何时开始解码不在模型里。DistServe、Splitwise 也把 prefill 和 decode 分开、在两者之间搬 KV。")
    return obs


def hit_sentence(d):
    """前缀命中时：计算少了，要发的 KV 没少，网络就露了出来。"""
    label = d["configs"][1]
    hit_need, base_need = d["need"][label], d["need"][d["configs"][0]]
    if not d["hit"]:
        return "PD_HIT = 0：不考虑前缀命中，第二行和第一行相同。"
    text = (f"前缀命中 {d['hit']:.0%} 时，prefill 只算没命中的 token，可 decode 节点要整个请求的 KV：藏得住要 "
            f"{fmt_range(hit_need)} Gbps，不命中时只要 {fmt_range(base_need)} Gbps。")
    over = [fmt_int(n) for n, x in zip(d["lens"], hit_need) if x > d["nic_gbps"]]
    if over:
        return text + f"{d['nic_gbps']:g} Gbps 的网卡在 {'、'.join(over)} token 时藏不住：缓存省下了计算，网络就露了出来。"
    margin, base_margin = d["nic_gbps"] / max(hit_need), d["nic_gbps"] / max(base_need)
    text += f"{d['nic_gbps']:g} Gbps 的网卡都还藏得住，余量从 {base_margin:.1f} 倍降到 {margin:.1f} 倍"
    if margin < base_margin:
        return text + "：缓存省下了计算，网络更容易露出来。"
    return text + "。"


def fmt_range(xs):
    """fmt_range([99.5, 634.4]) == '100–634'；只有一个值（或取整后相同）时只写一个。"""
    lo, hi = f"{min(xs):,.0f}", f"{max(xs):,.0f}"
    if lo == hi:
        return lo
    return f"{lo}–{hi}"


def small_model_sentence(d):
    """小模型每个 token 的计算少得多、KV 却没少那么多：摊到每张卡，要的带宽反而更高。"""
    big, gqa, mha = d["configs"][0], d["configs"][2], d["configs"][3]
    f, kv, names = d["flops_per_token"], d["kv_per_token"], d["names"]
    per_gpu = max(d["need"][big]) / A800_X8.n_gpus
    nic = d["paper"]["a800_nic_gbps"]
    text = (f"小模型：{names[gqa]} 每个 token 的计算只有 {names[big]} 的 1/{f[big] / f[gqa]:.0f}，KV 却是它的 "
            f"1/{kv[big] / kv[gqa]:g}；一张 A800 上藏得住要 {max(d['need'][gqa]):,.1f} Gbps，{names[mha]} 是 MHA"
            f"（每 token 的 KV 是 GQA 的 {kv[mha] // kv[gqa]} 倍）要 {max(d['need'][mha]):,.1f} Gbps，"
            f"而 {names[big]} 摊到每张卡只要 {per_gpu:,.1f} Gbps。")
    if max(d["need"][mha]) > nic:
        return text + f"一张 A800 配的 {nic} Gbps 网卡（FAST'25 §3.2.3 的下限）藏不住 MHA 的 {names[mha]}。"
    return text + (f"一张 A800 配的 {nic} Gbps 网卡（FAST'25 §3.2.3 的下限）还藏得住它，余量 "
                   f"{nic / max(d['need'][mha]):.1f} 倍（{names[big]} 是 {nic / per_gpu:.0f} 倍）。")


# =============================================================================
DEMOS = {1: demo1_load_or_recompute, 2: demo2_hot_blocks, 3: demo3_scheduling, 4: demo4_pd_transfer}
TRACE_DEMOS = (2, 3)            # 这几个演示要请求 trace（合成的只生成一次，作为参数传给它们）


MAX_TOKENS = 1 << 20            # 前缀 / 新算的 token 数的上限：1,048,576（百万 token 级的长上下文）
MAX_NODES = 4096                # 节点数的上限


def all_ints(xs, lo, hi):
    """xs 是非空的元组或列表，每个元素都是 [lo, hi] 里的整数。"""
    return isinstance(xs, (tuple, list)) and len(xs) > 0 and all(is_int(x, lo, hi) for x in xs)


def check_settings():
    """上面"学生可以改的设置"：不合理的值在开始时一行拒绝（说清常量、值、允许的范围），退出码 2。"""
    check_setting("TRACE_SEED", TRACE_SEED, is_int(TRACE_SEED, 0), "非负整数")
    check_setting("SCHED_SEED", SCHED_SEED, is_int(SCHED_SEED, 0), "非负整数")
    check_setting("PREFIX", PREFIX, is_int(PREFIX, 1, MAX_TOKENS), f"从 1 到 {MAX_TOKENS:,} 的整数（token）")
    check_setting("SUFFIX", SUFFIX, is_int(SUFFIX, 1, MAX_TOKENS),
                  f"从 1 到 {MAX_TOKENS:,} 的整数（token；最后一个 token 总要算，所以至少 1）")
    check_setting("PREFIX_LENS", PREFIX_LENS, all_ints(PREFIX_LENS, 1, MAX_TOKENS),
                  f"非空的元组，元素是 1 到 {MAX_TOKENS:,} 的整数（token）")
    check_setting("NET_NODES", NET_NODES, all_ints(NET_NODES, 1, MAX_NODES),
                  f"非空的元组，元素是 1 到 {MAX_NODES:,} 的整数（节点数）")
    check_setting("NET_GPU_UTIL", NET_GPU_UTIL, is_number(NET_GPU_UTIL, 0, 1) and NET_GPU_UTIL > 0,
                  "大于 0、不超过 1 的数（GPU 忙碌的比例）")
    check_setting("HOT_SHARE", HOT_SHARE, is_number(HOT_SHARE, 0, 1) and HOT_SHARE > 0,
                  "大于 0、不超过 1 的数（请求的比例）")
    check_setting("REPLICAS", REPLICAS, all_ints(REPLICAS, 1, max(NET_NODES)),
                  f"非空的元组，元素是 1 到 {max(NET_NODES)}（NET_NODES 里最大的节点数）的整数")
    check_setting("SCHED_NODES", SCHED_NODES, is_int(SCHED_NODES, 1, MAX_NODES), f"从 1 到 {MAX_NODES:,} 的整数")
    check_setting("SCHED_CAPACITY", SCHED_CAPACITY, is_int(SCHED_CAPACITY, 1), "正整数（块）")
    check_setting("SCHED_LOAD", SCHED_LOAD, is_number(SCHED_LOAD, 0, 100) and SCHED_LOAD > 0,
                  "大于 0、不超过 100 的数（不用缓存时的算力需求 / 集群算力）")
    check_setting("PD_LENS", PD_LENS, all_ints(PD_LENS, 1, MAX_TOKENS),
                  f"非空的元组，元素是 1 到 {MAX_TOKENS:,} 的整数（token）")
    for name, gbps in (("PD_NIC_GBPS", PD_NIC_GBPS), ("PD_SLOW_GBPS", PD_SLOW_GBPS)):
        check_setting(name, gbps, is_number(gbps, 0, 1e6) and gbps > 0, "大于 0、不超过 1,000,000 的数（Gbps）")
    check_setting("PD_HIT", PD_HIT, is_number(PD_HIT, 0) and PD_HIT < 1, "从 0 到 1（不含 1）的数（命中的比例）")


def run(demos=None, trace=None, source=None):
    """按编号跑演示（默认全部），返回 {编号: 演示返回的 dict}。figures/plot_05.py 也用它拿数字。"""
    check_settings()
    out, cols = {}, None
    for k in demos or sorted(DEMOS):
        if k in TRACE_DEMOS:
            if trace is None:
                trace, source = make_trace(TRACE_SEED), f"仿 Tool&Agent 的合成 trace（种子 {TRACE_SEED}）"
            if cols is None:
                cols = trace_columns(trace)          # 只遍历 trace 一次，两个演示共用这三列
            out[k] = DEMOS[k](cols, source)
        else:
            out[k] = DEMOS[k]()
    return out


def main(argv=None):
    ap = ArgParser(prog="05_kv_store.py", description="第 7 讲 · 分层 KV 存储与以 KV 为中心的调度")
    ap.add_argument("--demo", type=int, choices=sorted(DEMOS), help="只跑某一个演示（默认全跑）")
    ap.add_argument("--trace", metavar="PATH", help="Mooncake 格式的 JSONL trace（演示 2、3 用它代替合成 trace）")
    args = ap.parse_args(argv)
    trace = source = None
    if args.trace is not None:                # --trace "" 也是一个（不存在的）文件名，不悄悄换成合成 trace
        try:
            trace = load_trace(args.trace)
        except ValueError as e:               # TraceError 是 ValueError："文件:行号: 哪里不对"
            print(e, file=sys.stderr)
            return 2
        source = f"文件 {os.path.basename(args.trace)}（--trace）"
    demos = None
    if args.demo:
        demos = [args.demo]
    run(demos, trace, source)
    return 0


if __name__ == "__main__":
    sys.exit(main())
