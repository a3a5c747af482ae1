"""CS349E · 第 7 讲 · 05_kv_store.py —— 分层的 KV 存储与以 KV 为中心的调度（仿 Mooncake）。

【问题】前缀缓存大到 HBM 放不下，就要放到 CPU 内存、SSD、别的机器上。从哪一层读 KV 比重算快？
热门的前缀只存在一台机器上，会不会挤爆它的网卡？请求该发给排队最短的节点，还是缓存命中最多的？
prefill 和 decode 分开放时，把 KV 送过去的时间藏得住吗？

【运行】python lecture07/05_kv_store.py                （约 4.5 秒，2 核笔记本，不需要 GPU）
        python lecture07/05_kv_store.py --demo 3 --more  （只跑演示 3，印出全部观察和细表；--list 列出演示）
        python lecture07/05_kv_store.py --trace 文件.jsonl （演示 2、3 换成一个 Mooncake 格式的 JSONL trace）

【试一试】改下面"学生可以改的设置"，再跑对应的演示（--demo N）：
  1. 把 PREFIX 改成 4096：前缀短了一半，SSD 还比重算快吗？"没盖住"的时间怎样变？（--demo 1）
  2. 把 NET_NODES 改成 (16, 32, 64, 128, 256)：集群再大一倍，热点块要复制几份才不超载？（--demo 2）
  3. 把 SCHED_CAPACITY 改成 600（每台只留约 0.1 TB DRAM）：本地缓存小了，看缓存的调度还赢多少？（--demo 3）
  4. 把 SCHED_LOAD 改成 0.7：不用缓存也做得完时，随机调度还比负载均衡慢几倍？（--demo 3 --more）
  5. 把 PD_NIC_GBPS 改成 100：网卡只有八分之一时，前缀命中 95% 的请求还藏得住 KV 的发送吗？（--demo 4）
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.realpath(__file__))))  # 仓库根目录：让 lab_common 包可以 import
from lab_common.endings import quiet_endings  # noqa: E402
quiet_endings()  # 最先做（还没 import numpy）：这之后按 Ctrl-C、管道被关都只打一行，不打印 traceback
import math  # noqa: E402
from bisect import bisect_left  # noqa: E402
from dataclasses import replace  # noqa: E402
import numpy as np  # noqa: E402
from lab_common import console  # noqa: E402
from lab_common.console import print_header, print_observations, print_table, print_text, status  # noqa: E402
from lab_common.say import (change, count, fixed, integer, listing, order, pct, pct1, rank, rel_change,  # noqa: E402
                            rel_vs, same, sci, size, span, times, times1, trend, value, vs, words)
from lab_common.script_tools import run_lecture  # noqa: E402
from lab_common.settings import Source, check_setting, is_int, is_number, is_sorted_ints  # noqa: E402
from lab_common.workers import run_jobs  # noqa: E402
from kv_store.prefix_match import usable_hit_tokens, usable_hits  # noqa: E402
from kv_store.cluster import (BLOCK_BYTES, LOCAL_DRAM, NIC_GB_PER_S, RDMA, SCHEDULERS, block_homes, fetch_plan,  # noqa: E402
                        hit_accesses, nic_fetch, pool_hits, run_schedulers, trace_columns)
from kv_store.tiers import (A800_X8, EQ1_A, EQ1_B, LLAMA2_7B, LLAMA3_8B, LLAMA3_70B, TIERS, Node,  # noqa: E402
                        layer_overlap, load_time, prefill_compute_time, prefill_time, trace_prefill_time)
from kv_store.traces import load_trace, make_trace  # noqa: E402
from kv_store.trace_file import BLOCK_SIZE  # noqa: E402  Mooncake trace 的块大小：512 token

# ---- 学生可以改的设置 ----
TRACE_SEED = 0                  # 合成 trace 的随机种子（--trace 给了文件就不用）
SCHED_SEED = 0                  # 演示 3 随机调度的种子
PREFIX = 8192                   # 演示 1：前缀长度（token）；FAST'25 §2.2 的最低带宽按 8,192 算（那一句总按 8,192）
SUFFIX = 1024                   # 演示 1 的流水线：命中前缀之后还要新算的 token 数
PREFIX_LENS = (1024, 8192, 32768, 131072)   # 演示 1（--more）：最低带宽随前缀长度的变化
NET_NODES = (16, 32, 64, 128)   # 演示 2：集群的节点数（每台的网卡合计 800 Gbps）
NET_GPU_UTIL = 0.8              # 演示 2：按"GPU 忙到 80%"调请求率（节点越多，请求越多）
HOT_SHARE = 0.04                # 演示 2：被至少 4% 的请求用到的块算"热点块"
REPLICAS = (1, 2, 4, 8, 16)     # 演示 2：热点块的副本数 k（1 = 不复制）
SCHED_NODES = 8                 # 演示 3：prefill 节点数（每台 8×A800；至多 MAX_SCHED_NODES 台）
SCHED_CAPACITY = 6_000          # 演示 3：每台节点本地缓存的块数（6,000 × 160 MiB ≈ 1.0 TB DRAM ≈ 300 万 token）
SCHED_LOAD = 1.08               # 演示 3：请求率调到"不用前缀缓存时要 108% 的算力"——没有缓存就跟不上
PD_LENS = (1024, 8192, 32768, 131072)   # 演示 4：prompt 长度（token）
PD_NIC_GBPS = 800               # 演示 4：prefill 节点发 KV 的网卡合计（Gbps；FAST'25 表 1 的一台 8×A800）
PD_SLOW_GBPS = 24               # 演示 4：对照的慢网卡（Gbps；FAST'25 §5.4.2 模拟的最低带宽）
PD_HIT = 0.95                   # 演示 4：前缀命中的比例（FAST'25 §5.4.3 图 14 用 0% 和 95%）

# ---- 论文和数据手册的数字（只用来对照，标明出处）----
H800_X8 = Node("8×H800", n_gpus=8, tflops_per_gpu=989, hbm_gb_per_gpu=80)
H800_SOURCE = ("NVIDIA H100 SXM 数据手册：BF16 稠密 989 TFLOPS（表中 1,979 是 2:4 稀疏）；"
               "H800 SXM 的 BF16 张量算力与 H100 SXM 相同，削减的是 NVLink 互连带宽和 FP64 算力")
PAPER_MIN_BW = {"8×A800": 6, "8×H800": 19}      # GB/s，Mooncake FAST'25 §2.2 式 (2)：LLaMA3-70B、8,192 token 前缀
PAPER_PREFIX = 8192                              # 上面两个数用的前缀长度（token）
PAPER_SHAPE = dict(gqa=8, kv="320 KB", source="FAST'25 表 1（gqa = 查询头数 / KV 头数）、§5.3.1")
PAPER_FIG5 = {"global_cache": 3.07, "local_cache": 3.58, "load_balancing": 5.27, "random": 19.65}   # 秒，FAST'25 图 5
PAPER_FIG5_SETUP = dict(nodes=16, node="8×A800", trace="Conversation trace",   # FAST'25 §4.2：图 5 的实验设置
                        source="Mooncake FAST'25 §4.2 图 5")
PAPER_LOCAL_DRAM = dict(tb=1, tokens=3e6, source="Mooncake FAST'25 §5.3.1")   # 本机留约 1 TB DRAM ≈ 300 万 token
SRC_LOCAL_CACHE = Source(6_000, "FAST'25 §5.3.1", "每台约留 1 TB DRAM、存约 300 万 token")   # SCHED_CAPACITY 的论文值
A800_X1 = Node("1×A800", n_gpus=1, tflops_per_gpu=312, hbm_gb_per_gpu=80)    # 一张卡跑小模型
PAPER_PD = dict(n=131_072, kv_gb=40, engine_gbs={"4×200 Gbps": 87, "8×400 Gbps": 190}, min_gbps=100, sweep=(24, 400),
                hit=0.95, prefill_cut=0.92, ttft_cut=0.86, a800_nic_gbps=100,
                source="Mooncake FAST'25 §5.4.1（128K token 的 KV 40 GB；传输引擎实测 87、190 GB/s）、"
                       "§5.4.2（24–400 Gbps，建议至少 100 Gbps）、§5.4.3 图 14（命中 95%：prefill −92%、TTFT −86%）")
SRC_PD_NIC = Source(800, "FAST'25 表 1 的 B_nic")                          # PD_NIC_GBPS 的论文值
SRC_PD_HIT = Source(0.95, "FAST'25 §5.4.3 图 14 的设置")                   # PD_HIT 的论文值
SCHED_NAMES = dict(random="随机", load_balancing="负载均衡", local_cache="本地缓存感知", global_cache="全局缓存感知")
SHORT_TIER = ["HBM", "本机 DRAM", "远端 DRAM", "SSD"]   # 表格里的短名字，顺序同 kv_store.tiers.TIERS
FIG_PREFIX_RANGE = (256, 131_072)   # 演示 1 返回给 figures/plot_05.py 的曲线：前缀长度范围（token）
BURST_S = 1e-3      # 全部请求在 1 ms（trace 时间戳的单位）之内到达：当成同一时刻的突发，算不出请求率
MAX_TOKENS = 1 << 20            # 前缀 / 新算的 token 数的上限：1,048,576（百万 token 级的长上下文）
MAX_NODES = 4096                # 节点数的上限
MAX_SCHED_NODES = 256           # 演示 3 的节点数上限：看缓存的调度每个请求要逐台查缓存，256 台在 2 核笔记本上约 10 秒，512 台要半分钟以上
F1, F2, R3, GBPS = fixed(1), fixed(2), fixed(3), fixed(1, "Gbps")   # 表格和句子共用的格式（lab_common.say）
NIC_GBPS = NIC_GB_PER_S * 8     # 网卡一律用 Gbps 说（内存、读 KV 用 GB/s）：100 GB/s = 800 Gbps


def ms_cell(sec):
    """秒 → 毫秒，一位小数；不到 0.1 ms 留两位有效数字：ms_cell(11.6271) == '11,627.1'，ms_cell(2.62e-5) == '0.026'，ms_cell(3.2e-8) == '0.000032'。"""
    if 0 < abs(sec) < 0.95e-4:                       # 两位有效数字，但不用科学记数法（3.2e-05 → 0.000032）
        v = sec * 1e3
        return f"{v:.{1 - math.floor(math.log10(abs(v)))}f}"
    return F1(sec * 1e3)


def ms(sec):
    """秒 → 句子里的毫秒数（和表格同样的格式）：ms(0.0055) == '5.5 ms'。"""
    return ms_cell(sec) + " ms"


def gbs(x):
    """带宽：gbs(16312) == '16,312'，gbs(6.9) == '6.9'，gbs(1e6) == '1,000,000'。"""
    return f"{x:,.10g}"


def share(x, nd=0):
    """比例、负载：0 和 1 之间的值不印成 "0%"、"100%"（多留一位）；None（突发，算不出负载）印 "-"。
    share(1.514) == '151%'，share(0.004) == '0.4%'，share(0.999) == '99.9%'。"""
    if x is None:
        return "-"
    if 0 < x < 1 and value(pct(x, nd)) in (0, 100):
        return pct(x, nd + 1)
    return pct(x, nd)


def more_table(headers, rows, caption=None):
    """只在 --more 时印的细表（默认只留每个演示的主表）。"""
    if console.SHOW_MORE:
        print_table(headers, rows, caption=caption)


# =============================================================================
def min_bandwidth(n, node, model=None):
    """读 n 个 token 的 KV 不比重算慢所需的最低带宽（GB/s）：KV 字节数 / 重算时间（FAST'25 式 2）。model 默认 LLaMA3-70B。"""
    model = model or LLAMA3_70B
    return n * model.kv_bytes_per_token() / prefill_compute_time(model, n, 0, node) / 1e9


def break_even_len(gb_per_s, node, model=None):
    """前缀至少多长，以 gb_per_s 读（或发）KV 才比重算快？解 n·kv/B = l·(a·n²·d + b·n·d²)/F；< 1 表示任意长度。

    >>> round(break_even_len(6.9, replace(H800_X8, mfu=0.6)))       # 8×H800 上的 SSD
    40944
    """
    model = model or LLAMA3_70B
    d, L = model.d_model, model.n_layers
    return (model.kv_bytes_per_token() * node.flops / (gb_per_s * 1e9 * L) - EQ1_B * d * d) / (EQ1_A * d)


def break_even_cell(n):
    """读更快的最短前缀：< 1 → "任意"（任意长度的前缀都是读更快）。"""
    if n < 1:
        return "任意"
    return integer(n)


def layer_pipeline(load, compute, n_layers):
    """逐层模拟：第 i 层的 KV 读完、第 i−1 层算完，第 i 层才能开始算；读是一层接一层连续进行的。"""
    loaded = done = 0.0
    for _ in range(n_layers):
        loaded += load / n_layers
        done = max(done, loaded) + compute / n_layers
    return done


def demo1_load_or_recompute():
    """一段前缀的 KV：从哪一层读比重算快？最低要多少带宽？读和算重叠以后还剩多少？"""
    model, node, prefix, suffix, lens = LLAMA3_70B, A800_X8, PREFIX, SUFFIX, list(PREFIX_LENS)
    h800, n_in, kv = replace(H800_X8, mfu=node.mfu), prefix + suffix, prefix * model.kv_bytes_per_token()
    print_header(f"演示 1：读还是重算——{model.name}、{prefix:,} token 的前缀、{node.name}")
    rec = {m.name: prefill_compute_time(model, prefix, 0, m) for m in (node, h800)}
    comp, full = prefill_compute_time(model, n_in, prefix, node), prefill_compute_time(model, n_in, 0, node)
    tiers = []
    for short, t in zip(SHORT_TIER, TIERS):
        ld, pipe = load_time(model, prefix, t), prefill_time(model, n_in, prefix, t, node)
        tiers.append(dict(short=short, gbps=t.gb_per_s, bandwidth=t.bandwidth(), source=t.source, load=ld, ratio=ld / rec[node.name],
                          n_star=break_even_len(t.gb_per_s, node), n_star_h800=break_even_len(t.gb_per_s, h800),
                          pipe=pipe, sim=layer_pipeline(ld, comp, model.n_layers), exposed=pipe - comp))
    print_text(f"KV {size(kv)}；{node.name} 重算它要 {ms(rec[node.name])}（算力按峰值的 {pct(node.mfu)}，本实验的假设）。"
               f"流水：命中这 {prefix:,} 个，再算 {suffix:,} 个 token。")
    print_table(["层级", "带宽", "读", "读/重算", "流水", "没盖住"],
                [[r["short"], r["bandwidth"], ms_cell(r["load"]), R3(r["ratio"]), ms_cell(r["pipe"]),
                  ms_cell(r["exposed"])] for r in tiers],
                caption=f"单位 ms；读 = KV 字节 / 带宽（网卡的 Gbps ÷ 8 = GB/s）。流水：逐层读 KV、和算 {suffix:,} 个新 token 重叠（arXiv v3 §5.2）；"
                        f"没盖住 = 流水 − 只算（{ms(comp)}）。")
    worst = max(abs(r["sim"] - r["pipe"]) for r in tiers)
    more_table(["层级", "读/重算 H800", "读更快的最短前缀 H800", "串行", "逐层模拟"],
               [[r["short"], R3(r["load"] / rec[h800.name]), break_even_cell(r["n_star_h800"]), ms_cell(r["load"] + comp),
                 ms_cell(r["sim"])] for r in tiers],
               caption=f"单位 ms。{h800.name} 重算要 {ms(rec[h800.name])}；前缀比“最短前缀”长，读才比重算快（任意 = 任何长度"
                       f"都是读快；{node.name} 上每层都是任意）。串行 = 读完再算；逐层模拟（一层一层走一遍）和流水公式 max(读, "
                       f"算) + min(读, 算) / {model.n_layers} 最大差 {sci(worst)} s。带宽出处："
                       + "；".join(f"{r['short']}——{r['source']}" for r in tiers) + f"。{h800.name}：{H800_SOURCE}。")
    machines, gqa = [replace(node, mfu=1.0), node, replace(H800_X8, mfu=1.0), h800], model.n_heads // model.n_kv_heads
    cols = sorted(set(lens) | {PAPER_PREFIX})          # 论文的 8,192 总在表里
    bw = {(m.name, m.mfu, n): min_bandwidth(n, m) for m in machines for n in cols}
    more_table(["机器", "算力", *(f"{n:,}" for n in cols)],
               [[m.name, pct(m.mfu)] + [F2(bw[(m.name, m.mfu, n)]) for n in cols] for m in machines],
               caption="读比重算快的最低带宽（GB/s）= KV 字节 / 重算时间（FAST'25 §2.2 式 2），列是前缀长度：重算 ∝ "
                       f"n² + n，读只 ∝ n，所以前缀越长门槛越低。GPU 越快门槛越高，{h800.name} 是 {node.name} 的 "
                       f"{times1(bw[(h800.name, 1.0, PAPER_PREFIX)] / bw[(node.name, 1.0, PAPER_PREFIX)])}（峰值算力之比 "
                       f"{times1(H800_X8.tflops_per_gpu / node.tflops_per_gpu)}）。{PAPER_SHAPE['source']}：gqa = "
                       f"{PAPER_SHAPE['gqa']}，每 token 的 KV “{PAPER_SHAPE['kv']}”；换算：{model.n_heads} 个查询头 ÷ "
                       f"{gqa} = {model.n_kv_heads} 个"
                       f" KV 头，2 × {model.n_layers} × {model.d_model // gqa:,} × {model.dtype_bytes} B = "
                       f"{size(model.kv_bytes_per_token())}；{prefix:,} token 共 {size(kv)}（{size(kv, binary=False)}，"
                       "1 GB/s = 10⁹ B/s）。arXiv v3 的 dummy LLaMA2-70B 形状相同。")
    d = dict(model=model.name, node=node.name, h800=h800.name, mfu=node.mfu, prefix=prefix, suffix=suffix,
             prefix_lens=lens, tiers=tiers, min_bw=bw, recompute=rec, compute=comp, full=full, kv=kv,
             a800_100=bw[(node.name, 1.0, PAPER_PREFIX)], h800_100=bw[(h800.name, 1.0, PAPER_PREFIX)],
             a800_60=bw[(node.name, node.mfu, PAPER_PREFIX)], h800_60=bw[(h800.name, h800.mfu, PAPER_PREFIX)],
             flops_ratio=H800_X8.tflops_per_gpu / node.tflops_per_gpu, paper_bw=dict(PAPER_MIN_BW),
             paper_prefix=PAPER_PREFIX, worst_diff=worst, curves=load_vs_recompute_curves(model, (node, h800)))
    print_observations(*observations_1(d))
    return d


def load_vs_recompute_curves(model, nodes):
    """给 figures/plot_05.py 的曲线：前缀长度 n（几何等距）→ 每台机器的重算时间、各层级的读时间（秒）。"""
    n = np.unique(np.geomspace(*FIG_PREFIX_RANGE, 64).astype(int)).tolist()
    return dict(n=n, by_node={node.name: dict(
        recompute=[prefill_compute_time(model, x, 0, node) for x in n],
        load={s: [load_time(model, x, t) for x in n] for s, t in zip(SHORT_TIER, TIERS)},
        break_even={s: break_even_len(t.gb_per_s, node) for s, t in zip(SHORT_TIER, TIERS)},
        gbps={s: t.gb_per_s for s, t in zip(SHORT_TIER, TIERS)},
        bandwidth={s: t.bandwidth() for s, t in zip(SHORT_TIER, TIERS)}) for node in nodes})


def observations_1(d):
    """演示 1 的观察：(默认 2 条, --more 才印的)；每句都按表里印出来的值说话。"""
    t, node, h800, dram, ssd = d["tiers"], d["node"], d["h800"], d["tiers"][1], d["tiers"][3]
    fast, worst = [r["short"] for r in t if order(r["ratio"], 1, R3) < 0], max(t, key=lambda r: r["load"])
    which = f"只有 {listing(fast)} 比重算快"
    if len(fast) == len(t):
        which = f"{len(t)} 个层级都比重算快"
    elif not fast:
        which = "没有一个层级比重算快"
    obs = [f"在 {node} 上读 {d['prefix']:,} token 的 KV：{which}（重算 {ms(d['recompute'][node])}）；最慢的 "
           f"{worst['short']} 读 {ms(worst['load'])}，读/重算 {R3(worst['ratio'])}。"]
    a, h, pa, ph = d["a800_100"], d["h800_100"], d["paper_bw"][node], d["paper_bw"][h800]
    agree = "一致"
    if (integer(a), integer(h)) != (str(pa), str(ph)):
        agree = "不一致"
    obs.append(f"读比重算快的最低带宽（{d['paper_prefix']:,} token、峰值算力）：{node} 要 {F2(a)}、{h800} 要 {F2(h)} "
               f"GB/s，取整与 FAST'25 §2.2 的 {pa}、{ph} GB/s {agree}：GPU 越快，门槛越高。")
    more = [f"按层流水：{vs(dram['short'] + ' 读', dram['load'], '只算', d['compute'], ms, more='长', less='短')}，"
            f"没盖住 {ms(dram['exposed'])}；{vs(ssd['short'] + ' 总共', ssd['pipe'], '全部重算', d['full'], ms, '慢', '快')}。"]
    return obs, more


# =============================================================================
def demo2_hot_blocks(cols, source):
    """热门前缀只存在一台机器上，它的网卡会不会被挤爆？把热点块复制到 k 台以后呢？

    cols = (到达秒数, 输入 token 数, 每个请求的块 id)：trace 的三列（kv_store.cluster.trace_columns）。"""
    arrival, input_len, blocks = cols
    nodes, replicas, util, hot_share = list(NET_NODES), list(REPLICAS), NET_GPU_UTIL, HOT_SHARE
    print_header(f"演示 2：热点块与网络——命中的 KV 从持有它的节点经网卡拉（每台网卡合计 {gbs(NIC_GBPS)} Gbps）")
    span_s = arrival[-1] - arrival[0]
    burst, node_h, by = span_s < BURST_S, None, {}
    with status(f"模拟 {len(nodes)} 种集群 × {len(replicas)} 种副本数的网卡排队…"):
        homes = block_homes(blocks)
        counts = homes[2]
        raw = pool_hits(blocks, homes)                                # 集群的 KVCache 池：按无限容量
        hits = usable_hits(raw, input_len, BLOCK_SIZE)
        n_in = np.array(input_len, dtype=np.int64)
        work = {tier.name: trace_prefill_time(LLAMA3_70B, n_in, usable_hit_tokens(raw, n_in, BLOCK_SIZE), tier, A800_X8)
                for tier in (LOCAL_DRAM, RDMA)}
        need = hot_need(hot_share, len(arrival))
        is_hot = counts >= need                                       # 被至少 need 个请求用到
        accesses = hit_accesses(blocks, hits, homes, is_hot)
        if not burst:
            node_h = work[LOCAL_DRAM.name] / span_s
        cases, jobs = [], []                                          # 每种（节点数, 副本数）一次网卡模拟，互不相干
        for n in nodes:
            scale, plan = 1.0, fetch_plan(accesses, len(arrival), n)
            if not burst:
                scale = n * util / node_h
            for k in replicas:
                cases.append((n, k, scale))
                jobs.append((nic_fetch, (arrival, plan, n, k, scale)))
        for (n, k, scale), res in zip(cases, run_jobs(jobs)):        # 分给几个进程同时算（lab_common.workers）
            w, load = res["wait"], [None, None]
            if not burst:
                load = res["busy"] / (span_s / scale)
                load = [float(load.max()), float(load.mean())]
            by[(n, k)] = dict(scale=scale, hot_load=load[0], avg_load=load[1], mean=float(w.mean()),
                              p99=float(np.percentile(w, 99)), max=float(w.max()), sent=res["blocks_sent"])
    total, sec0, avg_nodes, n_big = int(counts.sum()), fixed(0, "s"), "", nodes[-1]
    if not burst:
        avg_nodes = f"，平均要 {F2(node_h)} 台一直做"
    rate = rate_text(burst, [by[(n, replicas[0])]["scale"] for n in nodes], util)
    print_text(f"{source}：{count(len(arrival), '个请求')}、{fixed(1, '分钟')(span_s / 60)}；请求轮流分给各节点，块存在第一"
               f"次算出它的节点上。热点块（{hot_rule(hot_share, len(arrival))}）：{count(int(is_hot.sum()), '块')}，"
               f"占块访问的 {pct(counts[is_hot].sum() / max(1, total))}。")
    print_table(["副本数", *(f"{n:,} 台" for n in nodes), f"{n_big:,} 台排队"],
                [[integer(k), *(share(by[(n, k)]["hot_load"]) for n in nodes), ms_cell(by[(n_big, k)]["mean"])]
                 for k in replicas],
                caption="单元格：最忙那块网卡的负载 = 要发的字节 / (带宽 × 时长)，> 100% 即超载；末列：平均排队（ms）。"
                        f"热点块复制到 k 台；{rate}。")
    covered = rel_change(work[LOCAL_DRAM.name], work[RDMA.name])
    if value(pct(abs(work[RDMA.name] / work[LOCAL_DRAM.name] - 1))) == 0:
        covered += "：读被计算盖住"
    else:
        covered += "：读没有全被计算盖住"
    more_table(["节点", "k", "倍率", "平均负载", "平均排队", "P99", "最长"],
               [[integer(n), integer(k), F1(r["scale"]), share(r["avg_load"], 1), ms_cell(r["mean"]), ms_cell(r["p99"]),
                 ms_cell(r["max"])] for (n, k), r in by.items()],
               caption="倍率：请求率乘的倍数；平均负载：全部网卡的平均；排队（ms）：每个请求等得最久的那次传输（一个请求从"
                       f"同一台拉的块合成一次传输）。网卡：FAST'25 表 1 的 B_nic = {gbs(NIC_GBPS)} Gbps（{gbs(NIC_GB_PER_S)} "
                       "GB/s）是一台节点全部网卡的合计（§3.2.3：每张 A800 配一块 100/200 Gbps 的网卡），这里当成一个 FIFO 队列。"
                       f"命中按无限容量的池算；全部 prefill 在一台 {A800_X8.name} 上要 {sec0(work[LOCAL_DRAM.name])}{avg_nodes}"
                       f"（命中从本机 DRAM 读），改从远端 DRAM 读{covered}。"
                       "简化：只模拟发送方的网卡，每次传输独占网卡；热点块由整个 trace 事先选出，副本事先放好。")
    d = dict(burst=burst, nodes=nodes, replicas=replicas, by=by, node_hours=node_h, util=util, hot_share=hot_share,
             hot_need=need,
             source=source, nic_gb_per_s=NIC_GB_PER_S, nic_gbps=NIC_GBPS, rate_text=rate,
             n_hot=int(is_hot.sum()), hot_access_share=float(counts[is_hot].sum() / max(1, total)),
             raw_hits=int(raw.sum()), hit_blocks=int(hits.sum()), reuse=total - int(np.count_nonzero(counts)))
    d["crowding"] = crowding(d, [k for k in replicas if k > 1])      # 句子和 figures/plot_05 的图注共用
    print_observations(*observations_2(d))
    return d


def hot_need(hot_share, n_requests):
    """热点块至少要被几个请求用到：HOT_SHARE 的请求（向上取整），且至少 2 个——只用过一次的块谈不上热。

    >>> hot_need(0.04, 23608), hot_need(0.04, 3), hot_need(1e-6, 23608)
    (945, 2, 2)
    """
    return max(2, math.ceil(hot_share * n_requests))


def setting_pct(frac):
    """设置里的比例照原样印成百分数（不舍入成 "< 0.1%"）：setting_pct(0.04) == '4%'，setting_pct(1e-6) == '0.0001%'。"""
    return f"{frac * 100:.6g}%"


def hot_rule(hot_share, n_requests):
    """表头里"热点块"的定义，按实际的门槛说（门槛是 HOT_SHARE 的请求、还是"至少 2 个"）。

    >>> hot_rule(0.04, 23608), hot_rule(0.04, 3)
    ('被至少 945 个请求用到：HOT_SHARE = 4% 的请求', '被至少 2 个请求用到：HOT_SHARE = 4% 的请求不到 2 个，只用过一次的块谈不上热')
    """
    need, p = hot_need(hot_share, n_requests), setting_pct(hot_share)
    if math.ceil(hot_share * n_requests) < 2:
        return f"被至少 2 个请求用到：HOT_SHARE = {p} 的请求不到 2 个，只用过一次的块谈不上热"
    return f"被至少 {integer(need)} 个请求用到：HOT_SHARE = {p} 的请求"


def rate_text(burst, scales, util):
    """演示 2 怎样调请求率，按实际乘的倍数说："按节点数放大 5.4–43.6 倍…" / "缩小…" / 突发时"按原样重放"。"""
    if burst:
        return "全部请求同一时刻到达：按原样重放，算不出负载（-）"
    shown = span(scales, seconds_fmt(scales, 1))
    goal = f"使 GPU 忙到 {pct(util)}"
    if all(order(s, 1, F1) > 0 for s in scales):
        return f"请求率放大 {shown} 倍，{goal}"
    if all(order(s, 1, F1) < 0 for s in scales):
        return f"请求率缩小到 {shown} 倍，{goal}"
    return f"请求率乘以 {shown}，{goal}"


def observations_2(d):
    """演示 2 的观察（默认至多 2 条）：没有网络流量、突发、一种规模、没有热点、不复制，各有自己的说法。"""
    by, nodes, n_big, ks = d["by"], d["nodes"], d["nodes"][-1], [k for k in d["replicas"] if k > 1]
    big = by[(n_big, 1)]
    if not any(r["sent"] for r in by.values()):
        why = next(text for found, text in (          # 第一条成立的理由；块复用 ≠ 前缀命中（[1,2]、[3,2]）
            (d["hit_blocks"], f"命中的 {count(d['hit_blocks'], '块')}都在执行它的那台节点上"),
            (d["raw_hits"], f"命中的 {count(d['raw_hits'], '块')}里没有用得上的 token：最后一个 token 总要重算"),
            (d["reuse"], f"块复用有 {count(d['reuse'], '次')}，但都不接在相同的开头后面，前缀缓存用不上"),
            (True, "没有一个块被第二个请求用到")) if found)
        return [f"没有任何请求要从别的节点拉 KV（{why}）：网卡都空着，排队都是 0。"], []
    wait = f"平均排队 {ms(big['mean'])}、最长 {ms(big['max'])}"
    more = []
    if d["burst"]:
        obs = [f"所有请求同时到达，算不出网卡负载；热点块占块访问的 {pct(d['hot_access_share'])}。"]
    else:
        text = (words("不复制时最忙那块网卡的负载", trend([by[(n, 1)]["hot_load"] for n in sorted({nodes[0], n_big})], share))
                + f"（{span(nodes, integer, ' → ')} 台）")
        avg = f"全部网卡平均 {share(big['avg_load'], 1)}"
        if len(nodes) > 1:                            # 平均只说最大的集群：每种集群各有自己的平均（--more 的细表）
            avg = f"；{n_big:,} 台时{avg}"
        else:
            avg = f"，{avg}"
        obs = [text + avg + crowded(d, ks) + "。"]
        over = [f"{n:,}" for n in nodes if value(share(by[(n, 1)]["hot_load"])) > 100]
        if over:
            more.append(f"不复制时，{listing(over)} 台的最忙网卡超载：要发的比这段时间能发的多。")
        load = share(big["hot_load"])
        wait = f"最忙的网卡负载 {load}，{wait}"
        if value(load) > 100:
            wait = f"最忙的网卡负载 {load}（超载），{wait.split('，', 1)[1]}"
    text = f"{n_big:,} 台不复制时{wait}"
    if not d["n_hot"]:
        text += f"；没有被至少 {integer(d['hot_need'])} 个请求用到的块，没有热点可复制"
    elif not ks:
        text += "；REPLICAS 里没有大于 1 的副本数，比不出复制的效果（试试 (1, 2, 4)）"
    else:
        k2 = by[(n_big, ks[0])]
        text += f"；热点块复制 {integer(ks[0])} 份，平均排队{change(big['mean'], k2['mean'], ms)}"
        if not d["burst"]:
            text += f"、最忙网卡{change(big['hot_load'], k2['hot_load'], share)}"
        more.append(f"复制热点块的代价是多占 DRAM：每个热点块多存 {span([ks[0] - 1, ks[-1] - 1], integer)} 份。")
    return obs + [text + "。"], more


def crowding(d, ks):
    """最忙的网卡（最大的集群、不复制）比平均忙得多时，是不是热点块挤的——按表里印出来的值，返回一种情形：
    None（最忙的不到平均的 5 倍，或全部请求同时到达）；"hot"（有热点块，复制让最忙的那块降下来了）；"stuck"（有热点块，复制了也没降）；
    "no_copies"（有热点块，REPLICAS 里没有 k > 1）；"no_hot"（没有热点块）。ks：大于 1 的副本数。
    演示 2 的句子（crowded）和 figures/plot_05 的图注都按它说。"""
    by, n_big = d["by"], d["nodes"][-1]
    big = by[(n_big, 1)]
    if big["hot_load"] is None:                      # 全部请求同时到达：没有负载可比
        return None
    hot, avg = value(share(big["hot_load"])), value(share(big["avg_load"], 1))
    if not 0 < 5 * avg <= hot:
        return None
    if not d["n_hot"]:
        return "no_hot"
    if not ks:
        return "no_copies"
    if any(order(by[(n_big, k)]["hot_load"], big["hot_load"], share) < 0 for k in ks):
        return "hot"
    return "stuck"


def crowded(d, ks):
    """演示 2 第一条的后半句（crowding 的情形）：是热点块挤的才说"集中在持有热门前缀的几台上"；否则只说倍数和
    看到的事实。最忙的不到平均的 5 倍时不说（返回 ""）。"""
    case = crowding(d, ks)
    if case is None:
        return ""
    big = d["by"][(d["nodes"][-1], 1)]
    times_avg = f"最忙的是平均的 {F1(value(share(big['hot_load'])) / value(share(big['avg_load'], 1)))} 倍"
    return {"hot": f"：流量集中在持有热门前缀的几台上（{times_avg}）",
            "stuck": f"：{times_avg}，但复制热点块也没让它降下来，挤的不是热点块",
            "no_copies": f"：{times_avg}", "no_hot": f"：{times_avg}，但没有热点块"}[case]


# =============================================================================
def demo3_scheduling(cols, source):
    """请求该发给哪台 prefill 节点：排队最短的，还是缓存命中最多的？

    cols：同演示 2。"""
    arrival, input_len, blocks = cols
    nodes, cap, load, seed = SCHED_NODES, SCHED_CAPACITY, SCHED_LOAD, SCHED_SEED
    span_s, cap_bytes = arrival[-1] - arrival[0], cap * BLOCK_BYTES
    burst, no_cache, scale, notes = span_s < BURST_S, None, 1.0, ""
    print_header(f"演示 3：以 KV 为中心的调度——{nodes:,} 台 prefill 节点、各 {cap:,} 块本地 LRU")
    rate = f"{count(len(arrival), '个请求')}同时到达（突发），按原样重放。"
    if len(arrival) == 1:
        rate = "只有 1 个请求。"
    if not burst:
        n_in = np.array(input_len, dtype=np.int64)
        no_cache = trace_prefill_time(LLAMA3_70B, n_in, np.zeros_like(n_in), LOCAL_DRAM, A800_X8) / span_s
        scale = load * nodes / no_cache
        rate = f"请求率 × {times(scale)[:-1]}：不用缓存时要 {nodes:,} 台的 {pct(load)}。"
        notes = (f"不用前缀缓存时平均要 {F2(no_cache)} 台一直做 prefill，请求率乘以 {times(scale)[:-1]} 使它等于 "
                 f"{nodes:,} 台的 {pct(load)}。")
    where = SRC_LOCAL_CACHE.beside(cap, own="")
    if where:
        where = f"，{where}"
    print_text(f"{source}，{rate}本地缓存 {size(cap_bytes)}（{tokens_text(cap * BLOCK_SIZE)}{where}）。比较平均的 "
               "TTFT（time to first token，从到达到第一个输出 token）。")
    total_blocks, res = max(1, sum(len(b) for b in blocks)), {}
    with status(f"模拟 {len(SCHEDULERS)} 种调度、{count(len(arrival), '个请求')}…"):
        for s, r in run_schedulers(arrival, input_len, blocks, SCHEDULERS, nodes, cap, scale, seed=seed).items():
            util = None
            if not burst:
                util = float(r["service"].sum()) / (nodes * span_s / scale)
            res[s] = dict(mean=float(r["ttft"].mean()), p90=float(np.percentile(r["ttft"], 90)),
                          hit=float(usable_hits(r["hits"], input_len, BLOCK_SIZE).sum() / total_blocks), util=util,
                          pulled_share=float(np.mean(r["pulled"] > 0)), pulled=int(r["pulled"].sum()))
    g, pg, ps = res["global_cache"]["mean"], PAPER_FIG5["global_cache"], PAPER_FIG5_SETUP
    sec = seconds_fmt([r["mean"] for r in res.values()] + [r["p90"] for r in res.values()])
    print_table(["调度", "TTFT", "命中", "负载", "×全局", "论文", "论文×"],
                [[SCHED_NAMES[s], sec(r["mean"]), pct(r["hit"]), share(r["util"]),
                  times(r["mean"] / g), F2(PAPER_FIG5[s]), times(PAPER_FIG5[s] / pg)] for s, r in res.items()],
                caption="TTFT：平均秒数，含排队和拉 KV；命中：用得上的前缀命中块 / 全部块；负载 > 100% 即超载。"
                        f"论文：FAST'25 图 5（{ps['nodes']} 台 {ps['node']}，{ps['trace']}）。")
    more_table(["调度", "P90 TTFT", "拉了 KV 的请求", "拉的块"],
               [[SCHED_NAMES[s], sec(r["p90"]), pct(r["pulled_share"]), integer(r["pulled"])] for s, r in res.items()],
               caption=f"×全局：相对全局缓存感知。论文 {ps['source']} 用 {ps['nodes']} 台 {ps['node']}（没说几台做 prefill）回放 "
                       f"{ps['trace']}；本实验 {nodes:,} 台全做 prefill。随机和负载均衡都不看缓存；随机还不看排队，平均 TTFT "
                       f"是负载均衡的 {times1(res['random']['mean'] / res['load_balancing']['mean'])}。本地缓存 {cap:,} 块 × "
                       f"{BLOCK_SIZE} token，在每台自己的 DRAM 里，命中从本机 DRAM 读；全局调度还能把别的节点上已经算完的更长前缀"
                       f"经网卡（{gbs(NIC_GBPS)} Gbps）拉过来。本地缓存超过一台约 {PAPER_LOCAL_DRAM['tb']} TB DRAM 时，真实系统要把"
                       f"多出的放到 SSD 或别的节点，这里都按本机 DRAM 读。{notes}"
                       "本实验是离散事件模拟：每台一次只做一个 prefill、排队时间精确已知、RDMA 传输不排队、传输和计算不重叠；"
                       "论文是真实集群（有 batching 和排队估计误差）。所以只比顺序和相对大小。")
    d = dict(results=res, scale=scale, no_cache_nodes=no_cache, source=source, burst=burst, nodes=nodes,
             capacity=cap, cap_bytes=cap_bytes, load=load, node=A800_X8.name, names=dict(SCHED_NAMES),
             paper=dict(PAPER_FIG5), paper_setup=dict(PAPER_FIG5_SETUP), seconds=sec)
    print_observations(*observations_3(d))
    return d


def seconds_fmt(values, nd=2):
    """一列数的格式（TTFT 的秒数、请求率的倍数）：小数位多到最小的非零值也有两位有效数字（0.0043 印 "0.0043"，
    不印成 "0.00"），至少 nd 位小数。排名和"一样"都按这个格式印出来的值判断，和表格一致。

    >>> seconds_fmt([3.56, 0.38])(0.38), seconds_fmt([0.0043, 0.002])(0.0043), seconds_fmt([0.0012, 5.4], 1)(5.4)
    ('0.38', '0.0043', '5.4000')
    """
    tiny = min((abs(v) for v in values if v), default=1.0)
    return fixed(max(nd, 1 - math.floor(math.log10(tiny))))


def tokens_text(n):
    """token 数：一亿以上说"51.2 亿 token"，一万以上说"307 万 token"，以下照写："5,120 token"。"""
    if n >= 1e8:
        return f"{fixed(1)(n / 1e8)} 亿 token"
    if n >= 1e4:
        return f"{n / 1e4:,.0f} 万 token"
    return f"{integer(n)} token"


def tied_rank(names_values, tied, key=None):
    """从高到低排一排："A > B = C"；tied(a, b) 为真的相邻两个用 "="。key(值)：按什么排（默认按值本身；
    传印出来的值，并列的就保持原来的先后）。

    >>> tied_rank([("甲", 1.0), ("乙", 3.0), ("丙", 2.999)], lambda a, b: abs(a - b) < 0.01)
    '乙 = 丙 > 甲'
    """
    if key is None:
        key = float
    items = sorted(names_values, key=lambda nv: key(nv[1]), reverse=True)
    out = str(items[0][0])
    for (_, prev), (name, v) in zip(items, items[1:]):
        sep = " > "
        if tied(prev, v):
            sep = " = "
        out += sep + str(name)
    return out


def observations_3(d):
    """演示 3 的观察（默认至多 2 条）：一台节点、并列、没有命中、没有拉取、突发、超载，各有自己的说法。"""
    res, names, p, sec = d["results"], d["names"], d["paper"], d["seconds"]
    lb, loc, glo = (res[s] for s in ("load_balancing", "local_cache", "global_cache"))
    if d["nodes"] == 1:
        return [f"只有 1 台节点：四种调度都只能发给它（平均 TTFT 都是 {sec(glo['mean'])} s），要比较调度至少要 2 台。"], []
    g = glo["mean"]

    def vs_global(x):                                 # 表里 ×全局 那一列
        return times(x / g)

    def tied(a, b):                                   # TTFT 和 ×全局 两列都印得一样，才算并列
        return same(a, b, sec) and same(a, b, vs_global)
    ours = tied_rank([(names[s], r["mean"]) for s, r in res.items()], tied,
                     key=lambda x: (value(sec(x)), value(vs_global(x))))
    paper = rank([(names[s], v) for s, v in p.items()], F2)
    agree = f"，论文图 5 是{paper}"
    if ours == paper:
        agree = "，与论文图 5 的顺序一致"
    head = vs("全局", g, "本地", loc["mean"], lambda x: sec(x) + " s")
    if not tied(g, loc["mean"]):
        fmt = sec                                     # TTFT 那列印得不同就按它说，否则按 ×全局 那列
        if same(g, loc["mean"], sec):
            fmt = vs_global
        head = rel_vs("全局", g, "本地", loc["mean"], fmt)
    obs = [f"平均 TTFT {head}，论文"
           f"{rel_change(p['local_cache'], p['global_cache'], less='低', more='高')}；从高到低：{ours}{agree}。"]
    text = f"看缓存的调度把请求送回有它前缀的节点：命中率{change(lb['hit'], glo['hit'], pct)}（负载均衡 → 全局）"
    if same(lb["hit"], glo["hit"], pct):
        text = f"负载均衡和全局缓存感知的命中率都是 {pct(glo['hit'])}：看缓存也没有多命中"
    if not d["burst"]:
        text += f"，负载{change(lb['util'], glo['util'], share)}"
    over = [s for s, r in res.items() if not d["burst"] and value(share(r["util"])) > 100]
    busy = ""
    if over and len(over) == len(res):
        busy = f"：四种调度都超载（负载 {span([res[s]['util'] for s in over], share)}），要做的比这段时间做得完的多"
    elif over:                                        # 不超载的那几种只说负载：96% 时也不超载，但排队可能很长（看 TTFT 那列）
        ok = [s for s in res if s not in over]
        busy = (f"：{listing(names[s] for s in over)}超载，{listing(names[s] for s in ok)}不超载（负载 "
                f"{span([res[s]['util'] for s in ok], share)}）")
    text += busy
    if order(max(r["hit"] for r in res.values()), 0, pct) == 0:
        text = "四种调度的命中率都是 0%：这个 trace 里没有用得上的前缀，看缓存的调度没有缓存可用" + busy.replace("：", "；", 1)
    obs.append(text + "。")
    more = [f"全局调度让 {pct(glo['pulled_share'])} 的请求从别的节点拉了 KV（共 {count(glo['pulled'], '块')}）：既能去空闲的"
            "节点，又用得上别处已经算完的前缀。"]
    if not glo["pulled"]:
        more = ["全局调度一次也没有从别的节点拉 KV：拉过来从不比在本地算快（或要的 KV 还没算完），它和本地缓存感知选得一样。"]
    return obs, more


# =============================================================================
def pd_case(model, node, n, hit, gbps):
    """P/D 分离里的一个请求：prefill 节点算（命中的前缀从本机 DRAM 读），算完一层就把这一层的 KV 发给
    decode 节点。decode 节点要整个请求的 KV（命中的前缀也要）。返回秒、字节和藏得住所需的带宽（Gbps）。"""
    h, kv = int(usable_hit_tokens(round(hit * n), n, 1)), n * model.kv_bytes_per_token()   # 最后一个 token 总要算
    prefill, send = prefill_time(model, n, h, LOCAL_DRAM, node), kv * 8 / (gbps * 1e9)
    total = layer_overlap(prefill, send, model.n_layers)      # 算一层、发一层，流水
    return dict(n=n, hit=h, kv=kv, prefill=prefill, send=send, total=total, exposed=total - prefill,
                sim=layer_pipeline(prefill, send, model.n_layers), need_gbps=kv * 8 / prefill / 1e9,
                hidden=order(send, prefill, ms) <= 0)


def demo4_pd_transfer():
    """prefill 和 decode 分在两台机器上：整个请求的 KV 要经网卡送到 decode 节点，要多久？藏得住吗？"""
    model, node, lens, nic, slow_nic, hit = LLAMA3_70B, A800_X8, list(PD_LENS), PD_NIC_GBPS, PD_SLOW_GBPS, PD_HIT
    print_header(f"演示 4：prefill/decode 分离——把 KV 送到 decode 节点（{model.name}、{node.name}）")
    nic_src = SRC_PD_NIC.beside(nic, own="")
    if nic_src:
        nic_src = f"（{nic_src}）"
    print_text(f"prefill 节点每算完一层，就把这一层的 KV 经网卡发给 decode 节点（FAST'25 §3.1 第 3 步）。网卡合计 {gbs(nic)} "
               f"Gbps{nic_src}。")
    base, hits, slow = ([pd_case(model, node, n, h, g) for n in lens] for h, g in ((0, nic), (hit, nic), (0, slow_nic)))
    hit_src = SRC_PD_HIT.beside(hit, own="")
    if hit_src:
        hit_src = f"（{hit_src}）"
    print_table(["prompt", "KV", "prefill", "发 KV", "发/算", "没盖住", "需要", f"命中 {share(hit)}"],
                [[integer(c["n"]), size(c["kv"]), ms_cell(c["prefill"]), ms_cell(c["send"]), pct1(c["send"] / c["prefill"]),
                  ms_cell(c["exposed"]), F1(c["need_gbps"]), F1(h["need_gbps"])] for c, h in zip(base, hits)],
                caption="单位 ms；发/算 = 发 / prefill；没盖住 = 按层流水比 prefill 多出的时间；需要：藏得住的带宽（Gbps）= "
                        + words(f"KV / prefill，最后一列是前缀命中 {share(hit)}{hit_src}", "时的需要。"))
    small = {m.name: m for m in (LLAMA3_8B, LLAMA2_7B)}
    need = {name: [pd_case(m, A800_X1, n, 0.0, nic)["need_gbps"] for n in lens] for name, m in small.items()}
    need[f"{model.name} ÷ {node.n_gpus}"] = [c["need_gbps"] / node.n_gpus for c in base]     # 摊到每张卡
    (gqa, m_gqa), (mha, m_mha) = small.items()
    nic1, per_gpu = PAPER_PD["a800_nic_gbps"], max(c["need_gbps"] for c in base) / node.n_gpus
    more_table([f"一张 {A800_X1.name[2:]}", "KV/token", *(f"{n:,}" for n in lens), f"{nic1} Gbps 余量"],
               [[name, size((small.get(name) or model).kv_bytes_per_token())] + [F1(x) for x in v] + [times1(nic1 / max(v))]
                for name, v in need.items()],
               caption=f"藏得住所需的最低网卡带宽（Gbps）；余量 = {nic1} Gbps / 最高的需要，不到 1.0× 就藏不住——每张 A800 配一块 "
                       f"{nic1}/200 Gbps 的网卡（FAST'25 §3.2.3）。{gqa} 每 token 的计算是 {model.name} 的 "
                       f"1/{model.prefill_flops(1) / m_gqa.prefill_flops(1):.0f}，KV 却是 {model.name} 的 "
                       f"1/{model.kv_bytes_per_token() / m_gqa.kv_bytes_per_token():g}；{mha} 是 MHA（KV 是 GQA 的 "
                       f"{m_mha.kv_bytes_per_token() // m_gqa.kv_bytes_per_token()} 倍）。")
    ref, ref_hit = (pd_case(model, node, PAPER_PD["n"], h, nic) for h in (0.0, PAPER_PD["hit"]))
    engine = {k: ref["kv"] / (v * 1e9) for k, v in PAPER_PD["engine_gbs"].items()}
    line = {k: ref["kv"] * 8 / (int(k.split("×")[0]) * int(k.split("×")[1].split()[0]) * 1e9) for k in engine}
    worst = max(abs(c["sim"] - c["total"]) for c in base + slow)    # 逐层模拟和流水公式
    more_table([f"{PAPER_PD['n']:,} token", "论文", "本实验"],
               [["KV 大小", f"{PAPER_PD['kv_gb']} GB", f"{size(ref['kv'])}（{size(ref['kv'], binary=False)}）"],
                *[[f"发完（{k}）", f"实测 {PAPER_PD['engine_gbs'][k]} GB/s（{gbs(PAPER_PD['engine_gbs'][k] * 8)} Gbps）", f"{F2(t)} s（线速 {F2(line[k])} s）"]
                  for k, t in engine.items()],
                [f"命中 {pct(PAPER_PD['hit'])}：prefill", f"−{pct(PAPER_PD['prefill_cut'])}",
                 f"−{pct1(1 - ref_hit['prefill'] / ref['prefill'])}"]],
               caption=f"论文：{PAPER_PD['source']}。发完 = KV 字节 / 论文实测的带宽；论文的 TTFT −"
                       f"{pct(PAPER_PD['ttft_cut'])} 含调度、传输和 decode 端加载，这里没有模拟。简化：一次只有一个请求用网卡"
                       f"（不排队），网卡跑满线速；decode 节点怎样收、何时开始解码不在模型里。逐层模拟和流水公式最大差 "
                       f"{sci(worst)} s。")
    d = dict(model=model.name, node=node.name, nic_gbps=nic, slow_gbps=slow_nic, hit=hit, lens=lens, base=base,
             hits=hits, slow=slow, need=need, small=list(small), ref=ref, ref_hit=ref_hit, engine=engine,
             per_gpu=per_gpu, worst_diff=worst, curves=pd_curves(model, node, nic, slow_nic, hit), paper=dict(PAPER_PD))
    print_observations(*observations_4(d))
    return d


def pd_curves(model, node, nic, slow_nic, hit):
    """给 figures/plot_05.py：prompt 长度（几何等距）→ prefill 时间（不命中、命中 hit）和几种网卡上发 KV 的时间（秒）；
    cross / cross_hit：每种网卡从多长的 prompt 起藏得住（不命中的就是演示 1 的"读更快的最短前缀"，带宽 = Gbps / 8）。"""
    n = np.unique(np.geomspace(512, 131_072, 48).astype(int)).tolist()
    nics = sorted({nic, PAPER_PD["min_gbps"], slow_nic}, reverse=True)
    return dict(n=n, prefill=[pd_case(model, node, x, 0.0, nic)["prefill"] for x in n],
                prefill_hit=[pd_case(model, node, x, hit, nic)["prefill"] for x in n],
                send={g: [pd_case(model, node, x, 0.0, g)["send"] for x in n] for g in nics},
                cross={g: break_even_len(g / 8, node, model) for g in nics},
                cross_hit={g: hidden_from(model, node, hit, g) for g in nics})


def hidden_from(model, node, hit, gbps):
    """最短的、发 KV 藏得住（发 ≤ prefill）的 prompt 长度：发/prefill 随长度变小，所以能二分；都藏不住时返回 None。"""
    def hides(n):
        c = pd_case(model, node, n, hit, gbps)
        return c["send"] <= c["prefill"]
    ns = range(2, MAX_TOKENS + 1)             # 一个 token 的 prompt 没有可命中的：从 2 起
    i = bisect_left(ns, True, key=hides)
    if i < len(ns):
        return ns[i]
    return None


def observations_4(d):
    """演示 4 的观察（默认 2 条）：一个长度、都藏得住 / 藏不住、不命中（PD_HIT = 0），各有自己的说法。"""
    base, slow, hits, nic, long_ = d["base"], d["slow"], d["hits"], d["nic_gbps"], d["base"][-1]
    bad, exposed = [integer(c["n"]) for c in base if not c["hidden"]], [c for c in slow if not c["hidden"]]
    text = f"：按层流水藏得住，没盖住的只有最后一层的 {ms(long_['exposed'])}"
    if bad:
        text = f"；{listing(bad)} token 的发送比 prefill 还长，藏不住"
    obs = [f"{long_['n']:,} token 的 KV 有 {size(long_['kv'])}，经 {gbs(nic)} Gbps 发完要 {ms(long_['send'])}，"
           f"prefill 要 {ms(long_['prefill'])}{text}。"]
    need_b, need_h = [c["need_gbps"] for c in base], [c["need_gbps"] for c in hits]
    over = [integer(c["n"]) for c in hits if order(c["need_gbps"], nic, F1) > 0]
    tight_b, tight_h = max(base, key=lambda c: c["need_gbps"]), max(hits, key=lambda c: c["need_gbps"])   # 最吃紧的长度
    tight = f"（最吃紧的 {integer(tight_b['n'])} token）"
    if tight_b["n"] != tight_h["n"]:
        tight = f"（最吃紧的长度从 {integer(tight_b['n'])} 变成 {integer(tight_h['n'])} token）"
    text = f"，{gbs(nic)} Gbps 的余量{tight}{change(nic / max(need_b), nic / max(need_h), times1)}"
    if over:
        text = f"，{gbs(nic)} Gbps 在 {listing(over)} token 时藏不住"
    obs.append(f"前缀命中 {share(d['hit'])}：要算的少了，要发的 KV 没少{text}。")
    if not any(c["hit"] for c in hits):                      # PD_HIT = 0，或 prompt 短得命中取整后是 0 个 token
        why = "（最后一个 token 总要算）"
        if d["hit"] == 0:
            why = ""                                         # 命中 0%：本来就不命中，不是因为最后一个 token
        obs[-1] = f"前缀命中 {share(d['hit'])} 时一个 token 也没命中{why}：最后一列和“需要”相同。"
    more = []
    text = "，每个长度仍藏得住：这个模型算得够久"
    if bad:                                                  # 主网卡有藏不住的：换了网卡才藏得住，不说"仍"
        text = "，每个长度都藏得住：这个模型算得够久"
    if exposed:
        text = (f"，{listing(integer(x['n']) for x in exposed)} token 藏不住：没盖住 "
                f"{span([c['exposed'] for c in exposed], ms_cell)} ms（prefill 的 "
                f"{span([c['exposed'] / c['prefill'] for c in exposed], pct)}）")
    if not same(d["slow_gbps"], nic, gbs):                  # 对照的网卡和主网卡一样：这句就是第一句，不说
        more.append(f"网卡换成 {gbs(d['slow_gbps'])} Gbps（FAST'25 §5.4.2 模拟了 {'–'.join(map(str, d['paper']['sweep']))} "
                    f"Gbps）{text}。")
    return obs, more


# =============================================================================
DEMOS = {1: demo1_load_or_recompute, 2: demo2_hot_blocks, 3: demo3_scheduling, 4: demo4_pd_transfer}
TRACE_DEMOS = (2, 3)            # 这几个演示要请求 trace（合成的只生成一次，作为参数传给它们）


def check_settings():
    """上面"学生可以改的设置"：不合理的值在开始时一行拒绝（说清常量、值、允许的范围），退出码 2。"""
    tokens, tuple_of, top = f"从 1 到 {MAX_TOKENS:,} 的整数（token", "非空、从小到大、不重复的元组，元素是 1 到 ", MAX_NODES
    if is_sorted_ints(NET_NODES, 1, MAX_NODES):   # NET_NODES 先要合理，才谈得上 REPLICAS 的上限
        top = max(NET_NODES)
    for name, ok, allowed in (
            ("TRACE_SEED", is_int(TRACE_SEED, 0), "非负整数"), ("SCHED_SEED", is_int(SCHED_SEED, 0), "非负整数"),
            ("PREFIX", is_int(PREFIX, 1, MAX_TOKENS), tokens + "）"),
            ("SUFFIX", is_int(SUFFIX, 1, MAX_TOKENS), tokens + "；最后一个 token 总要算，所以至少 1）"),
            ("PREFIX_LENS", is_sorted_ints(PREFIX_LENS, 1, MAX_TOKENS), f"{tuple_of}{MAX_TOKENS:,} 的整数（token）"),
            ("PD_LENS", is_sorted_ints(PD_LENS, 1, MAX_TOKENS), f"{tuple_of}{MAX_TOKENS:,} 的整数（token）"),
            ("NET_NODES", is_sorted_ints(NET_NODES, 1, MAX_NODES), f"{tuple_of}{MAX_NODES:,} 的整数（节点数）"),
            ("NET_GPU_UTIL", is_number(NET_GPU_UTIL, 0, 1) and NET_GPU_UTIL > 0, "大于 0、不超过 1 的数（GPU 忙碌的比例）"),
            ("HOT_SHARE", is_number(HOT_SHARE, 0, 1) and HOT_SHARE > 0, "大于 0、不超过 1 的数（请求的比例）"),
            ("REPLICAS", is_sorted_ints(REPLICAS, 1, top) and REPLICAS[0] == 1,
             f"{tuple_of}{top}（NET_NODES 里最大的节点数）的整数，从 1（不复制，作对照）起"),
            ("SCHED_NODES", is_int(SCHED_NODES, 1, MAX_SCHED_NODES),
             f"从 1 到 {MAX_SCHED_NODES:,} 的整数（看缓存的调度每个请求要逐台查缓存：再多，演示 3 要跑半分钟以上）"),
            ("SCHED_CAPACITY", is_int(SCHED_CAPACITY, 1), "正整数（块）"),
            ("SCHED_LOAD", is_number(SCHED_LOAD, 0, 100) and SCHED_LOAD > 0, "大于 0、不超过 100 的数（不用缓存时的算力需求 / 集群算力）"),
            ("PD_NIC_GBPS", is_number(PD_NIC_GBPS, 0, 1e6) and PD_NIC_GBPS > 0, "大于 0、不超过 1,000,000 的数（Gbps）"),
            ("PD_SLOW_GBPS", is_number(PD_SLOW_GBPS, 0, 1e6) and PD_SLOW_GBPS > 0, "大于 0、不超过 1,000,000 的数（Gbps）"),
            ("PD_HIT", is_number(PD_HIT, 0) and PD_HIT < 1, "从 0 到 1（不含 1）的数（命中的比例）")):
        check_setting(name, globals()[name], ok, allowed)


def run(demos=None, trace=None, source=None, step=None):
    """按编号跑演示（默认全部），返回 {编号: 演示返回的 dict}。figures/plot_05.py 也用它拿数字。"""
    check_settings()
    out, cols, todo = {}, None, list(demos or sorted(DEMOS))
    for i, k in enumerate(todo):
        if k in TRACE_DEMOS and trace is None:
            with status("生成合成 trace…"):
                trace, source = make_trace(TRACE_SEED), f"仿 Tool&Agent 的合成 trace（种子 {TRACE_SEED}）"
        if k in TRACE_DEMOS and cols is None:
            cols = trace_columns(trace)          # 只遍历 trace 一次，两个演示共用这三列
        args = ()
        if k in TRACE_DEMOS:
            args = (cols, source)
        out[k] = DEMOS[k](*args)
        if step is not None and i + 1 < len(todo):
            step()
    return out


def main(argv=None):
    def go(todo, args, step):
        trace = source = None
        if args.trace is not None:            # --trace "" 也是一个（不存在的）文件名，不悄悄换成合成 trace
            try:
                trace = load_trace(args.trace)
            except ValueError as e:           # TraceError 是 ValueError："文件:行号: 哪里不对"
                print(e, file=sys.stderr)
                return 2
            source = f"文件 {os.path.basename(args.trace)}（--trace）"
        run(todo, trace, source, step)
        return 0

    return run_lecture(DEMOS, "第 7 讲 · 分层 KV 存储与以 KV 为中心的调度", argv, run=go, prog="05_kv_store.py",
                       add_args=lambda ap: ap.add_argument("--trace", metavar="PATH",
                                                           help="Mooncake 格式的 JSONL trace（演示 2、3 用它代替合成 trace）"))


if __name__ == "__main__":
    sys.exit(main())
