"""集群里的 KV：网卡排队与热点块复制、以 KV 为中心的调度（仿 Mooncake 的 Conductor）。

两个离散事件模拟。请求按到达顺序处理；每个资源（一块网卡、一个 prefill 实例）是一个 FIFO 队列，
记住它"什么时候空下来"（free_at）就够了：开始时刻 = max(到达, free_at)，free_at += 服务时间。

- nic_fetch()：KVCache 池里每个块住在算出它的那台节点上；请求命中的前缀 KV 要从持有者的
  出口网卡拉过来。热点块可以复制到 k 台节点，请求从网卡最闲的副本拉（本机有副本就不走网络）。
- run_prefill()：M 个 prefill 实例，各有本地前缀缓存（LRU），一次做一个 prefill；
  调度器（random / load-balancing / local cache-aware / global cache-aware）决定每个请求去哪台。
  run_schedulers() 把几个调度器分给几个进程同时跑（互不相干，lab_common.workers.run_jobs）。

prefill 时间只有一个公式：kv_store.tiers.prefill_time（FAST'25 式 1 + 按层流水），04、05 和这里共用。
集群的配置：MODEL 在 NODE 上做 prefill，命中的 KV 从本机 DRAM（LOCAL_DRAM）读。

    >>> round(prefill_time(MODEL, 8192, hit_tokens(0, 8192), LOCAL_DRAM, NODE), 3)   # 从头算 8K token
    0.764

输入是 trace 的几列（不是 Request 对象）：arrival（到达秒数）、input_len（输入 token 数）、
blocks（每个请求的块 id 序列）。trace_columns() 从列式的 Trace（kv_store.traces）一次取出这三列。
"""
import math

import numpy as np

from lab_common.console import fail
from lab_common.workers import run_jobs
from kv_store.eviction import LRUCache, NoEviction
from kv_store.prefix_match import match_prefix, usable_hit_tokens
from kv_store.traces import CHUNK, BlockLists, columns, first_request
from kv_store.tiers import A800_X8, LLAMA3_70B, TIERS, prefill_time
from kv_store.trace_file import BLOCK_SIZE  # Mooncake trace 的块大小：512 token

MODEL, NODE = LLAMA3_70B, A800_X8                          # 每台 prefill 节点：8×A800 张量并行（FAST'25 表 1）
LOCAL_DRAM, RDMA = TIERS[1], TIERS[2]                      # 命中的 KV 从本机 DRAM 读；跨节点经 RDMA 拉
NIC_GB_PER_S = RDMA.gb_per_s       # 一台节点全部网卡合计 800 Gbps = 100 GB/s（FAST'25 表 1），模型里是一个 FIFO 队列
BLOCK_BYTES = BLOCK_SIZE * MODEL.kv_bytes_per_token()      # 一块 KV：512 × 320 KiB = 160 MiB（≈ 168 MB）
SCHEDULERS = ("random", "load_balancing", "local_cache", "global_cache")


def trace_columns(trace):
    """kv_store.traces 的列式 Trace → (arrival 列表, input_len 列表, blocks)：模拟要反复走好几遍的三列。
    前两列一次转成 Python 列表（逐个元素取 numpy 数组很慢）；blocks 是 Trace.block_lists()：
    像块 id 列表的列表一样 for / len / 下标，但每次遍历才按段转换，12 万个请求也不占几百 MB。

    >>> from kv_store.traces import Trace
    >>> from kv_store.trace_file import Request
    >>> arrival, n_in, blocks = trace_columns(Trace.from_requests([Request(0.5, 600, 1, (7, 8)), Request(1.0, 100, 2, (9,))]))
    >>> arrival, n_in, list(blocks)
    ([0.5, 1.0], [600, 100], [[7, 8], [9]])
    """
    return trace.arrival.tolist(), trace.input_len.tolist(), trace.block_lists()


def hit_tokens(hit_blocks, n_input):
    """命中 hit_blocks 块（每块 BLOCK_SIZE 个 token）→ 用得上的 token 数（kv_store.prefix_match.usable_hit_tokens）。

    >>> hit_tokens(2, 2000), hit_tokens(2, 1024)
    (1024, 1023)
    """
    return int(usable_hit_tokens(hit_blocks, n_input, BLOCK_SIZE))


# =============================================================================
def pool_hits(blocks, homes):
    """集群的 KVCache 池按无限容量：每个请求从第一块起有几块已经在池里（kv_store.prefix_match.match_prefix 数）。

    容量无限就不淘汰：一块从第一次出现的那个请求算出来起，就一直在池里。所以请求 i 的一块在池里
    ⟺ 它第一次出现的请求号 < i，池就是 range(i)（和任何策略——LRU、LFU……——在容量 None 时一样）；
    不用把几百万个块 id 放进集合。homes：block_homes(blocks)。返回 (n_requests,)。

    >>> bl = [[1, 2], [1, 2, 3], [4], [2, 1]]
    >>> pool_hits(bl, block_homes(bl)).tolist()      # 最后一个：块 2、1 都在请求 0 就算过了
    [0, 2, 0, 2]
    """
    dense, first, _ = homes
    first_seen = BlockLists(first[dense], columns(blocks)[1])     # 每次访问：这一块第一次出现在第几个请求
    return np.array([match_prefix(f, range(i)) for i, f in enumerate(first_seen)], dtype=np.int32)


def block_homes(blocks):
    """(dense, first, counts)：每次访问的块（编号 0..D-1）、每块第一次出现的请求号、每块被访问的次数。

    块第一次出现时一定没命中，就在那个请求执行的节点上算出来、存在那里：它的"家"只取决于 first。
    blocks：Trace.block_lists()（或块 id 列表的列表）。
    """
    dense, first = first_request(*columns(blocks))
    return dense, first, np.bincount(dense, minlength=len(first))


def hit_accesses(blocks, hit_blocks, homes, hot):
    """命中的那些块访问（按 trace 里的顺序）：(请求号, 这一块第一次出现的请求号, 是不是热点块)，三个数组。

    homes：block_homes() 的结果；hot：每块（dense 编号）是不是热点块的 bool 数组。
    """
    offsets = columns(blocks)[1]
    dense, first, _ = homes
    hits = np.asarray(hit_blocks, dtype=np.int64)
    parts = []
    for a in range(0, len(hits), CHUNK):                       # 分段：几百万次访问，临时数组也只有几 MB
        b = min(len(hits), a + CHUNK)
        req = np.repeat(np.arange(a, b), np.diff(offsets[a:b + 1]))
        at = np.flatnonzero(np.arange(offsets[a], offsets[b]) - offsets[req] < hits[req])
        d = dense[at + offsets[a]]
        parts.append((req[at].astype(np.int32), first[d].astype(np.int32), hot[d]))
    parts.append((np.zeros(0, np.int32), np.zeros(0, np.int32), np.zeros(0, bool)))
    return tuple(np.concatenate(col) for col in zip(*parts))


def fetch_plan(accesses, n_requests, n_nodes):
    """请求按轮询分给 n_nodes 台 prefill 节点（请求 i 去 i mod n_nodes）；块存在第一次算出它的节点上
    （它的"家"，Mooncake 的 KVCache 池），命中的块要从家里拉。

    accesses：hit_accesses() 的结果。同一个请求里同一个家、同样冷热的块合成一次传输（一组），
    组按它在请求里第一次出现的顺序排。返回 dict：home、nb（块数）、hot 是每组的列表，
    请求 i 的组是 start[i]:start[i + 1]。
    """
    req, first, hot = accesses
    home, nb, is_hot, g_req = [], [], [], []
    cuts = np.searchsorted(req, np.arange(0, n_requests + CHUNK, CHUNK))
    for lo, hi in zip(cuts[:-1], cuts[1:]):                   # 分段分组：每段只排几万个键
        key = (req[lo:hi].astype(np.int64) * n_nodes + first[lo:hi] % n_nodes) * 2 + hot[lo:hi]
        keys, first_at, count = np.unique(key, return_index=True, return_counts=True)
        order = np.argsort(first_at, kind="stable")             # 按第一次出现的顺序（请求号也就从小到大）
        keys = keys[order]
        home += ((keys // 2) % n_nodes).tolist()
        nb += count[order].tolist()
        is_hot += (keys % 2 == 1).tolist()
        g_req.append(keys // (2 * n_nodes))
    start = np.searchsorted(np.concatenate(g_req + [np.zeros(0, np.int64)]), np.arange(n_requests + 1))
    return dict(home=home, nb=nb, hot=is_hot, start=start.tolist())


def nic_fetch(arrival, plan, n_nodes, k, rate_scale, nic_gb_per_s=NIC_GB_PER_S):
    """每个请求把命中的 KV 块经 RDMA 拉到执行节点；每台节点的出口网卡（合计带宽）是一个 FIFO 队列。

    plan：fetch_plan() 的结果；k：每个热点块的副本数（1 = 不复制）。家在 h 的热点块，副本在
    (h + j·n_nodes/k) mod n_nodes，j = 0..k−1；请求从网卡最早空下来的副本拉，本机有副本就不走网络。
    一个请求从同一台节点拉的块（不管冷热）合成一次传输：k = 1 时结果和热点块怎么选无关。
    请求到达时刻 = arrival / rate_scale（请求率放大 rate_scale 倍）。
    返回 dict：每个请求的排队等待（秒，它的几次传输里等得最久的）、每块网卡的忙碌时间（秒）、
    时间跨度（秒）、走网络的块数。
    """
    per_block = BLOCK_BYTES / (nic_gb_per_s * 1e9)
    step = max(1, n_nodes // k)
    replicas = [[(h + j * step) % n_nodes for j in range(k)] for h in range(n_nodes)]   # 家在 h 的热点块的副本
    free_at = [0.0] * n_nodes
    busy = [0.0] * n_nodes
    wait = [0.0] * len(arrival)                     # 没有命中、或全在本机的请求不等
    sent = 0
    homes, nbs, hots, groups = plan["home"], plan["nb"], plan["hot"], plan["start"]
    free_time = free_at.__getitem__
    for i, t0 in enumerate(arrival):
        dst = i % n_nodes
        pulls = {}                                  # 源节点 → 块数：同一个源的几组合成一次传输（按第一次出现的顺序）
        for g in range(groups[i], groups[i + 1]):
            src = homes[g]
            if k > 1 and hots[g]:                   # 热点块：本机有副本就用本机的，否则从网卡最早空下来的副本拉
                reps = replicas[src]
                if dst in reps:
                    src = dst
                else:
                    src = min(reps, key=free_time)
            if src != dst:                          # 本机的 DRAM 里就有，不走网络
                pulls[src] = pulls.get(src, 0) + nbs[g]
        if not pulls:
            continue
        t, w = t0 / rate_scale, 0.0
        for src, nb in pulls.items():
            start = free_at[src]                    # 网卡空下来才开始（FIFO）
            if start < t:
                start = t
            dur = nb * per_block
            free_at[src] = start + dur
            busy[src] += dur
            if start - t > w:                       # 这个请求等得最久的那次传输
                w = start - t
            sent += nb
        wait[i] = w
    wait = np.array(wait)
    span = max(max(free_at), arrival[-1] / rate_scale) - arrival[0] / rate_scale
    return dict(wait=wait, busy=np.array(busy), span=span, blocks_sent=sent)


# =============================================================================
def run_prefill(arrival, input_len, blocks, scheduler, n_nodes, capacity, rate_scale, seed=0,
                rdma_gb_per_s=NIC_GB_PER_S):
    """M = n_nodes 个 prefill 实例（各一台 8×A800），各有容量 capacity 块的本地 LRU 前缀缓存。

    每个实例一次做一个 prefill（FIFO，不做 batching）。服务时间 = 从别的节点拉 KV 的时间（只有
    global_cache 会拉）+ kv_store.tiers.prefill_time(输入, 命中)。TTFT = 完成时刻 − 到达时刻。调度器：

    - random：随机挑一台；
    - load_balancing：排队最短（最早空下来）的那台，不看缓存；
    - local_cache：估计 TTFT = 排队 + 用本地命中算 prefill，取最小（只看本机缓存）；
    - global_cache（Conductor）：还考虑把别的节点上更长的前缀经 RDMA 拉过来：
      估计 TTFT = 排队 + 传输缺的那几块 + 用更长的命中算 prefill，和不拉的方案比，取最小。
      只能拉请求到达时已经算完的块（done_prefix）：一个块要等算出它的那个 prefill 做完，才在那台的 DRAM 里。

    返回 dict：每个请求的 TTFT、命中块数、拉取的块数、去了哪台、服务时间（拉 KV + prefill，秒）。
    """
    if scheduler not in SCHEDULERS:
        raise ValueError(f"未知的调度器 {scheduler!r}；可选：{', '.join(SCHEDULERS)}")
    caches = [LRUCache(capacity) for _ in range(n_nodes)]
    ready = [{} for _ in range(n_nodes)]     # 每台：块 → 它在这台算完（存进 DRAM）的时刻；只有算完的块能被别人拉走
    free_at = [0.0] * n_nodes
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, n_nodes, len(arrival)).tolist()
    per_block = BLOCK_BYTES / (rdma_gb_per_s * 1e9)
    pull = scheduler == "global_cache"
    ttft, service, hits, pulled, where = [], [], [], [], []     # 逐个追加，最后再变成数组（快）
    for i, (t0, n_in, bl) in enumerate(zip(arrival, input_len, blocks)):
        t = t0 / rate_scale
        xfer = 0
        if scheduler == "random":
            j = picks[i]
            h = have = caches[j].match(bl)
            pf_h = prefill_time(MODEL, n_in, hit_tokens(h, n_in), LOCAL_DRAM, NODE)
        elif scheduler == "load_balancing":
            j = free_at.index(min(free_at))                       # 最早空下来的（并列取编号小的）
            h = have = caches[j].match(bl)
            pf_h = prefill_time(MODEL, n_in, hit_tokens(h, n_in), LOCAL_DRAM, NODE)
        else:
            # 本机的命中可以包括还在这台排队的请求要算的块：排到这个请求时它们一定算完了（FIFO）。
            # 从别台拉的只能是现在（t）已经算完的块：还没算出来的 KV 拉不到。
            local = [c.match(bl) for c in caches]
            best_h = 0
            if pull:
                best_h = done_prefix(ready, local, bl, t)
            pf = {hh: prefill_time(MODEL, n_in, hit_tokens(hh, n_in), LOCAL_DRAM, NODE)
                  for hh in set(local) | {best_h}}                              # 不同的命中数只算一次
            best = None
            for jj, hj in enumerate(local):                       # 每台两个方案：用本机的命中；拉更长的前缀
                q = max(0.0, free_at[jj] - t)
                est = q + pf[hj]
                if best is None or est < best:
                    best, h, xfer, j = est, hj, 0, jj
                if best_h > hj:
                    est = q + (best_h - hj) * per_block + pf[best_h]
                    if est < best:
                        best, h, xfer, j = est, best_h, best_h - hj, jj
            pf_h, have = pf[h], local[j]
        start = max(t, free_at[j])
        free_at[j] = start + xfer * per_block + pf_h
        caches[j].insert(bl)
        if pull:                          # 只有 global_cache 从别台拉，要知道块什么时候算完
            done = ready[j]
            for b in bl[have:]:           # 这台原来没有（或排队中不会有）的块：这个请求做完才在这台
                done[b] = free_at[j]
            if len(done) > 4 * len(caches[j]):     # 被淘汰的块再也拉不走：丢掉它们的记录（长 trace 才不占几百 MB）
                ready[j] = {b: done[b] for b in caches[j].entries}   # 缓存里的块进来时都记下了时刻
        ttft.append(free_at[j] - t)
        service.append(xfer * per_block + pf_h)
        hits.append(h)
        pulled.append(xfer)
        where.append(j)
    ttft, service = np.array(ttft, dtype=float), np.array(service, dtype=float)
    hits, pulled, where = (np.array(x, dtype=np.int64) for x in (hits, pulled, where))
    return dict(ttft=ttft, hits=hits, pulled=pulled, where=where, service=service)


def done_prefix(ready, local, bl, t):
    """别的节点上在时刻 t 已经算完、能拉过来的最长前缀（块数）：节点 jj 缓存里有前 local[jj] 块，
    其中从第一块起连续、ready[jj][块] ≤ t 的那几块。按 local 从大到小试，够不上当前最好的就停。

    >>> done_prefix([{1: 0.5, 2: 3.0}, {1: 0.2}], [2, 1], [1, 2], t=1.0)   # 节点 0 的块 2 到 3.0 s 才算完
    1
    """
    best = 0
    for jj in sorted(range(len(local)), key=local.__getitem__, reverse=True):   # 并列的保持编号顺序
        if local[jj] <= best:
            break
        done, n = ready[jj], 0
        for b in bl[:local[jj]]:
            if done.get(b, math.inf) > t:
                break
            n += 1
        best = max(best, n)
    return best


def run_schedulers(arrival, input_len, blocks, schedulers, n_nodes, capacity, rate_scale, seed=0,
                   rdma_gb_per_s=NIC_GB_PER_S, workers=None):
    """{调度器: run_prefill(..., 调度器, ...) 的结果}：各调度器互不相干，交给 lab_common.workers.run_jobs
    同时跑（workers 个进程，None：本机的核数，最多 4 个；1：在本进程里一个一个跑）。

    >>> from kv_store.traces import Trace
    >>> from kv_store.trace_file import Request
    >>> arrival, n_in, blocks = trace_columns(Trace.from_requests([Request(0.0, 1024, 1, (1, 2)), Request(1.0, 1024, 1, (1, 2))]))
    >>> r = run_schedulers(arrival, n_in, blocks, ("random", "global_cache"), 2, 10, 1.0)
    >>> r["global_cache"]["hits"].tolist()             # 第二个请求去了有这两块的那台
    [0, 2]
    """
    slow_first = sorted(schedulers, key=lambda s: s.endswith("_cache"), reverse=True)   # 看缓存的两种最慢：先派
    jobs = [(run_prefill, (arrival, input_len, blocks, s, n_nodes, capacity, rate_scale, seed, rdma_gb_per_s))
            for s in slow_first]
    try:
        done = dict(zip(slow_first, run_jobs(jobs, workers)))
        return {s: done[s] for s in schedulers}
    except NoEviction as e:           # 改过的 LRUCache.evict() 一块也没删：和 kv_store.replay.sweep 一样一行拒绝，退出码 2
        fail(*e.args)
