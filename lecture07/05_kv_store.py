"""CS349E · 第 7 讲 · 05_kv_store.py —— 分层的 KV 存储与以 KV 为中心的调度（仿 Mooncake）

【问题】前缀缓存大到 HBM 放不下，就要放到 CPU 内存、SSD、别的机器上。从哪一层读 KV 比重算快？
热门的前缀只存在一台机器上，会不会挤爆它的网卡？请求该发给排队最短的节点，还是缓存命中最多的？
prefill 和 decode 分开放时，把 KV 送过去的时间藏得住吗？

【运行】python lecture07/05_kv_store.py                  （约 3 秒，2 核笔记本，不需要 GPU）
        python lecture07/05_kv_store.py --demo 3 --step   （只跑演示 3：先想，回车再看）
        python lecture07/05_kv_store.py --trace 文件.jsonl （演示 2、3 换成一个 Mooncake 格式的 trace）
        python lecture07/05_kv_store.py --mine            （用你在 exercises/ex5_lru.py 里写的 LRUCache）

【试一试】
  1. PREFIX = 4096：前缀短了一半，SSD 还比重算快吗？"没盖住"的时间怎样变？（--demo 1）
  2. NET_NODES = (16, 32, 64, 128, 256)：集群再大一倍，热点块要复制几份才不超载？（--demo 2）
  3. SCHED_CAPACITY = 600（每台只留约 0.1 TB DRAM）：看缓存的调度还赢多少？（--demo 3）
  4. PD_NIC_GBPS = 100：网卡只有八分之一时，前缀命中 95% 的请求还藏得住 KV 的发送吗？（--demo 4）
  5. 在 kv_store/policies.py 里让 LRUCache.evict 淘汰最新的一块（last=True）：演示 3 的命中和 TTFT 怎样变？
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import math  # noqa: E402
import signal  # noqa: E402
from concurrent.futures import ProcessPoolExecutor  # noqa: E402
from dataclasses import replace  # noqa: E402
from functools import wraps  # noqa: E402

from lab_common import show  # noqa: E402
from kv_store.cluster import (BLOCK_BYTES, LOCAL_DRAM, MODEL, NODE, SCHEDULERS, first_seen, nic_queue,  # noqa: E402
                              pull_groups, schedule)
from kv_store.policies import hit_blocks, usable_tokens  # noqa: E402
from kv_store.tiers import (EQ1_A, EQ1_B, TIERS, Node, layer_overlap, load_time, prefill_compute_time,  # noqa: E402
                            prefill_time, trace_prefill_time)
from kv_store.trace import load_trace, make_trace  # noqa: E402

# --mine：用你在 exercises/ 里写的（见 exercises/README.md）；不加就用讲义的实现
if "--mine" in sys.argv[1:]:
    from exercises.ex5_lru import LRUCache
else:
    from kv_store.policies import LRUCache

# ---- 学生可以改的设置 ----
TRACE_SEED = 0                  # 合成 trace 的随机种子（--trace 给了文件就不用）
PREFIX = 8192                   # 演示 1：命中的前缀有多少 token
SUFFIX = 1024                   # 演示 1：前缀之后还要新算的 token 数（和读前缀按层流水）
NET_NODES = (16, 32, 64, 128)   # 演示 2：集群的节点数（每台网卡合计 800 Gbps）
NET_GPU_UTIL = 0.8              # 演示 2：请求率按"GPU 忙到 80%"放大（节点越多，请求越多）
HOT_SHARE = 0.04                # 演示 2：被至少 4% 的请求用到的块算热点块
REPLICAS = (1, 2, 4, 8, 16)     # 演示 2：热点块的副本数 k（1 = 不复制）
SCHED_NODES = 8                 # 演示 3：prefill 节点数（每台 8×A800）
SCHED_CAPACITY = 6_000          # 演示 3：每台本地缓存的块数（6,000 × 160 MiB ≈ 1 TB DRAM，约 300 万 token）
SCHED_LOAD = 1.08               # 演示 3：请求率调到"不用缓存时要集群 108% 的算力"：没有缓存就跟不上
SCHED_SEED = 0                  # 演示 3：随机调度的种子
PD_LENS = (1024, 8192, 32768, 131072)   # 演示 4：prompt 长度（token）
PD_NIC_GBPS = 800               # 演示 4：prefill 节点发 KV 的网卡合计（Gbps）
PD_HIT = 0.95                   # 演示 4：前缀命中的比例（FAST'25 §5.4.3 图 14 用 0% 和 95%）

# ---- 论文和数据手册的数字（只用来对照）----
H800_X8 = Node("8×H800", n_gpus=8, tflops_per_gpu=989, hbm_gb_per_gpu=80)   # H100/H800 SXM 数据手册：BF16 稠密 989 TFLOPS
PAPER_PREFIX, PAPER_MIN_BW = 8192, [6, 19]   # FAST'25 §2.2：8,192 token 前缀，8×A800 至少 6、8×H800 至少 19 GB/s
PAPER_FIG5 = dict(random=19.65, load_balancing=5.27, local_cache=3.58, global_cache=3.07)   # 秒，FAST'25 §4.2 图 5


def ms(seconds):
    return show.num(seconds * 1e3, 1)


def min_bandwidth(node, n=PAPER_PREFIX):
    """FAST'25 式 (2)：读 n 个 token 的 KV 不比重算慢，要多少带宽（GB/s）= KV 字节 / 按峰值算力重算的秒数。"""
    return n * MODEL.kv_bytes_per_token() / prefill_compute_time(MODEL, n, 0, replace(node, mfu=1.0)) / 1e9


def demo_load_or_recompute():
    """前缀的 KV 不在显存（HBM）里：从哪一级存储读比重算快？读和算逐层重叠以后，还多花多少时间？"""
    recompute = prefill_compute_time(MODEL, PREFIX, 0, NODE)
    compute = prefill_compute_time(MODEL, PREFIX + SUFFIX, PREFIX, NODE)      # 只算后面 SUFFIX 个新 token
    rows = [[t.name, f"{t.gb_per_s:,g}", ms(load_time(MODEL, PREFIX, t)),
             ms(prefill_time(MODEL, PREFIX + SUFFIX, PREFIX, t, NODE) - compute), t.source] for t in TIERS]
    rows.append(["重算（式 1）", "-", ms(recompute), "-", f"FAST'25 式 1；{show.pct(NODE.mfu)} 峰值是假设"])
    a800, h800 = show.num(min_bandwidth(NODE), 2), show.num(min_bandwidth(H800_X8), 2)
    caption = (f"{MODEL.name}、{NODE.name}，读 {PREFIX:,} 个 token 的 KV。式 1：Mooncake FAST'25 的 prefill 计算量 l(an²d + bnd²)，注意力项和线性层项的"
               f"系数 a = {EQ1_A}、b = {EQ1_B} 取自它的表 1。远端 DRAM 经 RDMA（网卡直接读别的机器的内存）：100 GB/s = 一台节点全部网卡"
               f"合计 800 Gbps ÷ 8。没盖住：读前缀与算 {SUFFIX:,} 个新 token 逐层流水（Mooncake arXiv v3 §5.2），比只算"
               f"（{ms(compute)} ms）多出的时间。读比重算快要的最低带宽（FAST'25 式 2 = KV 字节 ÷ 按峰值算力重算的时间，"
               f"{PAPER_PREFIX:,} token）：{NODE.name} {a800}、{H800_X8.name} {h800} GB/s；FAST'25 §2.2："
               f"{PAPER_MIN_BW[0]}、{PAPER_MIN_BW[1]} GB/s。")
    show.table(["存储级", "带宽 GB/s", "读 ms", "没盖住 ms", "出处"], rows, caption)
    tiers, rec, slow = rows[:-1], rows[-1][2], max(rows[:-1], key=lambda r: show.value(r[2]))
    show.claim(f"读 {PREFIX:,} token 的 KV，{len(tiers)} 级存储都比重算（{rec} ms）快：最慢的{slow[0]}也只要 {slow[2]} ms。",
               all(show.value(r[2]) < show.value(rec) for r in tiers),
               f"重算 {rec} ms；读：" + "、".join(f"{r[0]} {r[2]} ms" for r in tiers))
    show.claim(f"GPU 越快，读 KV 要的带宽越高：{NODE.name} 至少 {a800}、{H800_X8.name} 至少 {h800} GB/s，取整就是"
               f" FAST'25 §2.2 的 {PAPER_MIN_BW[0]}、{PAPER_MIN_BW[1]} GB/s。",
               show.value(a800) < show.value(h800) and [round(show.value(x)) for x in (a800, h800)] == PAPER_MIN_BW,
               f"{NODE.name} {a800}、{H800_X8.name} {h800} GB/s，论文 {PAPER_MIN_BW[0]}、{PAPER_MIN_BW[1]} GB/s")
    return dict(rows=rows, caption=caption)


def in_parallel(fn, jobs):
    """[fn(*job) for job in jobs] 用上两个核：前一半在另一个进程里算（它不理 Ctrl-C），后一半同时在这里算。
    不用 with：Ctrl-C 时 with 会等另一个进程算完，这里直接走，由 show.quietly 停下它。"""
    half = len(jobs) // 2
    pool = ProcessPoolExecutor(1, initializer=signal.signal, initargs=(signal.SIGINT, signal.SIG_IGN))
    there = pool.map(fn, *zip(*jobs[:half]), chunksize=max(1, half))
    here = [fn(*job) for job in jobs[half:]]
    there = list(there)
    pool.shutdown()
    return there + here


def demo_hot_blocks(trace, source):
    """热门前缀只存在一台机器上，它的网卡会不会被挤爆？把热点块复制到 k 台以后呢？"""
    hits = hit_blocks(trace, LRUCache(None))            # 集群的 KVCache 池：容量无限，从不淘汰
    first, uses = first_seen(trace)
    need = max(2, math.ceil(HOT_SHARE * len(trace)))    # 只被一个请求用到的块谈不上热
    hot = {b for b, u in uses.items() if u >= need}
    groups, arrival = pull_groups(trace, hits, first, hot), [r.arrival for r in trace]
    span = arrival[-1] - arrival[0]
    busy = trace_prefill_time(MODEL, [r.input_len for r in trace],               # 平均几台一直在做 prefill
                              [usable_tokens(h, r.input_len) for r, h in zip(trace, hits)], LOCAL_DRAM, NODE) / span
    scale = {n: n * NET_GPU_UTIL / busy for n in NET_NODES}          # 请求率放大几倍：GPU 忙到 NET_GPU_UTIL
    cases, big = [(n, k) for n in NET_NODES for k in REPLICAS], NET_NODES[-1]
    out = dict(zip(cases, in_parallel(nic_queue, [(arrival, groups, n, k, scale[n]) for n, k in cases])))
    load = {(n, k): [b / (span / scale[n]) for b in out[(n, k)]["busy"]] for n, k in cases}   # 每块网卡的负载
    rows = [[k] + [show.pct(max(load[(n, k)])) for n in NET_NODES] + [ms(sum(out[(big, k)]["wait"]) / len(trace))]
            for k in REPLICAS]
    rows.append(["全部网卡平均"] + [show.pct(sum(load[(n, 1)]) / n, 1) for n in NET_NODES] + ["-"])
    show.note(f"{source}：{len(trace):,} 个请求、{span / 60:,.1f} 分钟。热点块（被至少 {need:,} 个请求用到）"
              f"{len(hot):,} 块，占块访问的 {show.pct(sum(uses[b] for b in hot) / sum(uses.values()))}。")
    caption = ("格子：最忙那台的网卡负载 = 要发的字节 / (800 Gbps × 时长)，> 100% 即超载；末列：KV 传输在网卡前的平均排队。请求轮流分给"
               f"各台，块存在第一次算出它的那台上，热点块复制到 k 台；请求率随台数放大（相对 trace 原来的；{NET_NODES[0]:,} 台 "
               f"{scale[NET_NODES[0]]:,.1f} 倍…{big:,} 台 {scale[big]:,.1f} 倍），使 GPU 忙到 {show.pct(NET_GPU_UTIL)}。")
    headers = ["副本数 k"] + [f"{n:,} 台" for n in NET_NODES] + [f"{big:,} 台平均排队 ms"]
    show.table(headers, rows, caption)
    k1, k2, avg = rows[0], rows[min(1, len(REPLICAS) - 1)], rows[-1]
    show.claim(f"不复制时，最忙那台的网卡负载随集群变大从 {k1[1]} 升到 {k1[-2]}，全部网卡平均却只有 {avg[-2]}："
               "不是总带宽不够，是流量挤在少数几台上。", k1[1:-1] == sorted(k1[1:-1], key=show.value)
               and show.value(k1[-2]) >= 5 * show.value(avg[-2]) > 0,
               f"最忙的 {'、'.join(k1[1:-1])}，平均 {avg[-2]}")
    show.claim(f"挤的是持有热门前缀的几台：{big:,} 台时热点块存 {k2[0]} 份（k = {k2[0]}），平均排队从 {k1[-1]} ms 降到 {k2[-1]} ms，"
               f"最忙的网卡从 {k1[-2]} 降到 {k2[-2]}。",
               show.value(k2[-1]) < show.value(k1[-1]) and show.value(k2[-2]) < show.value(k1[-2]),
               f"热点块 {len(hot):,} 块；k = {k2[0]}：排队 {k2[-1]} ms、最忙 {k2[-2]}，k = 1：{k1[-1]} ms、{k1[-2]}")
    return dict(headers=headers, rows=rows, caption=caption)


def demo_scheduling(trace, source):
    """一个请求的 prefill 该交给哪台机器：排队最短的，还是缓存命中最多的？"""
    span = trace[-1].arrival - trace[0].arrival
    busy = trace_prefill_time(MODEL, [r.input_len for r in trace], [0] * len(trace), LOCAL_DRAM, NODE) / span
    scale = SCHED_LOAD * SCHED_NODES / busy           # 不用缓存时，要集群 SCHED_LOAD 的算力
    order = ("local_cache", "load_balancing", "global_cache", "random")    # 前一半和后一半差不多一样久
    jobs = [(trace, s, SCHED_NODES, SCHED_CAPACITY, scale, LRUCache, usable_tokens, SCHED_SEED) for s in order]
    res, tokens, rows = dict(zip(order, in_parallel(schedule, jobs))), sum(r.input_len for r in trace), []
    for s in SCHEDULERS:
        r = res[s]
        used = sum(usable_tokens(h, q.input_len) for h, q in zip(r["hits"], trace))
        rows.append([SCHEDULERS[s], show.num(sum(r["ttft"]) / len(trace), 2), show.pct(used / tokens),
                     show.pct(sum(r["service"]) / (SCHED_NODES * span / scale)), show.num(PAPER_FIG5[s], 2)])
    show.note(f"{source}，请求率是 trace 原来的 {scale:,.2f} 倍：不用缓存时要 {SCHED_NODES:,} 台算力的 {show.pct(SCHED_LOAD)}（超载）。每台本地缓存 "
              f"{show.size(SCHED_CAPACITY * BLOCK_BYTES)}（FAST'25 §5.3.1：每台留约 1 TB DRAM 给本地缓存，约 300 万 token）。")
    caption = ("TTFT：从到达到第一个输出 token，含排队和拉 KV；命中：用得上的命中 token / 全部输入 token；平均负载："
               f"要做的 prefill 时间 ÷ {SCHED_NODES:,} 台在 trace 时长里的全部时间（超过 100%：算不过来）。随机：随便挑"
               "一台；负载均衡：最早空下来的那台；本地缓存感知：估计排队 + 用本机缓存算完的时间，挑最早的；全局缓存感知："
               "还考虑从别的节点拉 KV。论文：FAST'25 §4.2 图 5，16 台 8×A800 回放对话 trace。这里是模拟（"
               f"{SCHED_NODES:,} 台、每台一次只做一个 prefill、排队时间精确已知）：只比顺序，不比数值。")
    show.table(["调度", "平均 TTFT s", "命中", "平均负载", "论文 TTFT s"], rows, caption)
    ours, paper = (sorted(rows, key=lambda r: -show.value(r[col])) for col in (1, 4))
    show.claim(f"平均 TTFT 从高到低：{' > '.join(r[0] for r in ours)}，与论文图 5 的顺序相同：看缓存的调度更快，"
               "能从别的节点拉 KV 的全局调度最快。", [r[0] for r in ours] == [r[0] for r in paper]
               and all(show.value(a[1]) > show.value(b[1]) for a, b in zip(ours, ours[1:])),
               f"本实验 {'、'.join(r[0] + ' ' + r[1] for r in ours)} s；论文 {' > '.join(r[0] for r in paper)}")
    lb, glo = rows[1], rows[3]                                        # 负载均衡、全局缓存感知
    show.claim(f"看缓存的调度把请求送回有它前缀的节点：命中从 {lb[2]} 升到 {glo[2]}（负载均衡 → 全局），"
               f"要算的少了，平均负载从 {lb[3]} 降到 {glo[3]}。",
               show.value(glo[2]) > show.value(lb[2]) and show.value(glo[3]) < show.value(lb[3]),
               f"命中 {lb[2]} → {glo[2]}，负载 {lb[3]} → {glo[3]}")
    return dict(rows=rows, caption=caption)


def demo_pd_transfer():
    """prefill 和 decode 分在两台机器上：整个请求的 KV 要经网卡送到 decode 节点，发 KV 的时间能被 prefill 的计算盖住吗？"""
    rows = []
    for n in PD_LENS:
        kv_bits = n * MODEL.kv_bytes_per_token() * 8
        prefill = prefill_time(MODEL, n, 0, LOCAL_DRAM, NODE)
        hit_prefill = prefill_time(MODEL, n, min(round(PD_HIT * n), n - 1), LOCAL_DRAM, NODE)   # 最后一个 token 总要算
        send = kv_bits / (PD_NIC_GBPS * 1e9)
        exposed = layer_overlap(prefill, send, MODEL.n_layers) - prefill    # 算一层、发一层
        rows.append([f"{n:,}", ms(prefill), ms(send), ms(exposed), show.num(kv_bits / prefill / 1e9, 1),
                     show.num(kv_bits / hit_prefill / 1e9, 1)])
    show.note(f"{MODEL.name}、{NODE.name}：prefill（算完整个输入的 KV）和 decode（逐个生成输出）分在两台机器上，"
              f"prefill 节点每算完一层，就把这一层的 KV 经网卡（合计 {PD_NIC_GBPS:,g} Gbps）"
              f"发给 decode 节点（FAST'25 §3.1 第 3 步）。每 token 的 KV {show.size(MODEL.kv_bytes_per_token())}："
              f"{PD_LENS[-1]:,} token 是 {show.size(PD_LENS[-1] * MODEL.kv_bytes_per_token())}"
              "（FAST'25 §5.4.1：128k token 40 GB）。")
    caption = (f"需要：藏得住所需的带宽 = KV / prefill（Gbps）；末列：前缀命中 {show.pct(PD_HIT)} 时（命中的从本机 DRAM "
               "读），要算的少了，要发的 KV 一样多。没盖住：按层流水比 prefill 多出的时间。")
    show.table(["输入 token", "prefill ms", "发 KV ms", "没盖住 ms", "需要 Gbps", f"命中 {show.pct(PD_HIT)} 需要 Gbps"], rows,
               caption)
    last = rows[-1]
    show.claim(f"{last[0]} token 的 KV 经 {PD_NIC_GBPS:,g} Gbps 发完要 {last[2]} ms，prefill 要 {last[1]} ms：每个长度都"
               f"藏得住，没盖住的只有最后一层（{last[3]} ms）。", all(show.value(r[2]) < show.value(r[1]) for r in rows),
               "发 / prefill：" + "、".join(f"{r[0]} token {r[2]} / {r[1]} ms" for r in rows))
    need, need_hit = (max(rows, key=lambda r: show.value(r[col]))[col] for col in (4, 5))
    show.claim(f"前缀命中 {show.pct(PD_HIT)} 时，最吃紧的长度要的带宽从 {need} 升到 {need_hit} Gbps，仍在 "
               f"{PD_NIC_GBPS:,g} Gbps 以内：命中越多，网卡越容易成为瓶颈。",
               show.value(need) < show.value(need_hit) <= PD_NIC_GBPS,
               f"需要 {need} → {need_hit} Gbps，网卡 {PD_NIC_GBPS:,g} Gbps")
    return dict(rows=rows, caption=caption)


DEMOS = [("演示 1：读还是重算——前缀的 KV 从哪一级存储读", demo_load_or_recompute),
         ("演示 2：热门前缀与网卡：集群变大时最忙的网卡", demo_hot_blocks),
         ("演示 3：以 KV 为中心的调度：首个 token 要等多久（TTFT）", demo_scheduling),
         ("演示 4：prefill/decode 分离——把 KV 送到 decode 节点", demo_pd_transfer)]


def check_settings():
    """不合理的设置：一行说清是哪个、值、允许的范围，退出码 2，在任何输出之前。"""
    show.check("TRACE_SEED", TRACE_SEED, show.is_int(TRACE_SEED, 0, 2**32 - 1), " 0 到 2³² − 1 的整数")
    show.check("PREFIX", PREFIX, show.is_int(PREFIX, 1, 1 << 20), " 1 到 1,048,576 的整数（token）")
    show.check("SUFFIX", SUFFIX, show.is_int(SUFFIX, 1, 1 << 20), " 1 到 1,048,576 的整数（最后一个 token 总要算）")
    show.check("NET_NODES", NET_NODES, show.is_ints(NET_NODES, 1, 4096), "从小到大、不重复的 1 到 4,096 的整数")
    show.check("NET_GPU_UTIL", NET_GPU_UTIL, show.is_number(NET_GPU_UTIL, 0.01, 1), " 0.01 到 1 的数")
    show.check("HOT_SHARE", HOT_SHARE, show.is_number(HOT_SHARE, 1e-6, 1), " 0.000001 到 1 的数（请求的比例）")
    show.check("REPLICAS", REPLICAS, show.is_ints(REPLICAS, 1, max(NET_NODES)) and REPLICAS[0] == 1,
               f"从 1（不复制）起、从小到大、不重复、不超过 {max(NET_NODES):,}（最大的集群）的整数")
    show.check("SCHED_NODES", SCHED_NODES, show.is_int(SCHED_NODES, 2, 256), " 2 到 256 的整数（要比调度至少 2 台）")
    show.check("SCHED_CAPACITY", SCHED_CAPACITY, show.is_int(SCHED_CAPACITY, 1, 10**9), " 1 到 10⁹ 的整数（块）")
    show.check("SCHED_LOAD", SCHED_LOAD, show.is_number(SCHED_LOAD, 0.01, 100), " 0.01 到 100 的数")
    show.check("SCHED_SEED", SCHED_SEED, show.is_int(SCHED_SEED, 0, 2**32 - 1), " 0 到 2³² − 1 的整数")
    show.check("PD_LENS", PD_LENS, show.is_ints(PD_LENS, 2, 1 << 20), "从小到大、不重复的 2 到 1,048,576 的整数")
    show.check("PD_NIC_GBPS", PD_NIC_GBPS, show.is_number(PD_NIC_GBPS, 0.1, 1e6), " 0.1 到 1,000,000 的数（Gbps）")
    show.check("PD_HIT", PD_HIT, show.is_number(PD_HIT, 0, 0.999), " 0 到 0.999 的数（命中的比例）")
    try:                                  # 改坏了的 LRUCache.evict：在任何输出之前就一行拒绝
        LRUCache(1).insert([1, 2])
    except RuntimeError as e:             # NotImplementedError（练习还没写完）照常抛出：quietly 指出文件和行
        if isinstance(e, NotImplementedError):
            raise
        show.fail(str(e))


def the_trace(path):
    """(trace, 它的说明)：path 是 None 就生成合成 trace，否则读这个 Mooncake JSONL 文件（坏文件：一行拒绝）。"""
    trace = make_trace(TRACE_SEED) if path is None else load_trace(path)
    source = f"合成 trace（请求记录，仿 Mooncake 的 Tool&Agent 负载，种子 {TRACE_SEED}）"
    if path is not None:
        source = f"文件 {os.path.basename(path)}"
    if trace[-1].arrival <= trace[0].arrival:
        show.fail(f"{source} 的请求都在同一时刻到达：算不出请求率（演示 2、3 要一段时间上的 trace）")
    return trace, source


def main(argv=None):
    p = show.parser(__doc__, DEMOS)
    p.add_argument("--trace", metavar="PATH", help="Mooncake 格式的 JSONL trace（演示 2、3 用它代替合成 trace）")
    args = p.parse_args(argv)
    check_settings()
    demos = list(DEMOS)
    if args.demo in (None, 2, 3):                       # 演示 2、3 用 trace：生成（或读）一次，两个演示共用
        trace, source = the_trace(args.trace)
        for i, (title, fn) in list(enumerate(DEMOS))[1:3]:    # wraps：留着演示的 docstring（它的问题）
            demos[i] = (title, wraps(fn)(lambda fn=fn: fn(trace, source)))
    show.run(demos, args)


if __name__ == "__main__":
    show.quietly(main)
