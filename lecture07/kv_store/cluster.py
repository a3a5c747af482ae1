"""集群里的 KV：热点块挤网卡（nic_queue），以 KV 为中心的调度（schedule）。两个离散事件模拟。

请求按到达顺序处理。每个资源（一块网卡、一台 prefill 节点）是一个 FIFO 队列，只要记住它"什么时候空下来"
（free_at）：开始 = max(到达, free_at)，free_at = 开始 + 服务时间。

每台节点：LLaMA3-70B 在 8×A800 上做 prefill（FAST'25 表 1），命中的 KV 从本机 DRAM 读，跨节点经 RDMA 拉
（一台节点全部网卡合计 800 Gbps = 100 GB/s，当成一个 FIFO 队列）。prefill 时间只有一个公式：tiers.prefill_time。
"""
import math

import numpy as np

from kv_store.tiers import A800_X8, LLAMA3_70B, TIERS, prefill_time
from kv_store.trace import BLOCK_SIZE

MODEL, NODE = LLAMA3_70B, A800_X8
LOCAL_DRAM, RDMA = TIERS[1], TIERS[2]
BLOCK_BYTES = BLOCK_SIZE * MODEL.kv_bytes_per_token()     # 一块 KV：512 × 320 KiB = 160 MiB
BLOCK_PULL_S = BLOCK_BYTES / (RDMA.gb_per_s * 1e9)        # 经网卡拉一块的秒数（约 1.7 ms）
SCHEDULERS = dict(random="随机", load_balancing="负载均衡", local_cache="本地缓存感知", global_cache="全局缓存感知")


def first_seen(trace):
    """{块: 它第一次出现在第几个请求}，和 {块: 被几个请求用到}。块在第一次出现的请求里算出来，就存在
    执行那个请求的节点上（它的"家"）。

    >>> from kv_store.trace import Request
    >>> first_seen([Request(0, 1024, 1, (7, 8)), Request(1, 1024, 1, (7, 9))])
    ({7: 0, 8: 0, 9: 1}, {7: 2, 8: 1, 9: 1})
    """
    first, uses = {}, {}
    for i, r in enumerate(trace):
        for b in r.blocks:
            first.setdefault(b, i)
            uses[b] = uses.get(b, 0) + 1
    return first, uses


def pull_groups(trace, hits, first, hot):
    """每个请求命中的块按 (家所在的请求号, 是不是热点块) 分组：[(请求号, 热, 块数), ...]。
    hits：每个请求命中的块数（前缀）；hot：热点块的集合。同一组的块在同一台节点上，一次传完。

    >>> from kv_store.trace import Request
    >>> pull_groups([Request(0, 9, 1, (7, 8, 9))], [3], {7: 0, 8: 0, 9: 5}, {7})
    [[(0, True, 1), (0, False, 1), (5, False, 1)]]
    """
    out = []
    for r, h in zip(trace, hits):
        groups = {}
        for b in r.blocks[:h]:
            key = (first[b], b in hot)
            groups[key] = groups.get(key, 0) + 1
        out.append([(i, is_hot, nb) for (i, is_hot), nb in groups.items()])
    return out


def nic_queue(arrival, groups, n_nodes, k, rate_scale):
    """请求 i 在节点 i mod n_nodes 上做，命中的 KV 从块的家（第一次算出它的节点）经网卡拉过来。热点块复制到
    k 台：家在 h 的，副本在 (h + j·n_nodes/k) mod n_nodes；本机有副本就不走网络，否则从网卡最早空下来的
    副本拉。每台的出口网卡是一个 FIFO 队列；一个请求从同一台拉的块合成一次传输。
    请求的到达时刻 = arrival / rate_scale（请求率放大 rate_scale 倍）。
    返回每个请求的排队（秒，它等得最久的那次传输）和每块网卡的忙碌秒数。

    >>> nic_queue([0.0, 0.0], [[], [(0, False, 2)]], 2, 1, 1.0)["busy"] == [2 * BLOCK_PULL_S, 0.0]
    True
    """
    step = max(1, n_nodes // k)
    copies_of = [[(h + j * step) % n_nodes for j in range(k)] for h in range(n_nodes)]   # 家在 h 的热点块的副本
    free_at, busy, wait = [0.0] * n_nodes, [0.0] * n_nodes, []
    for i, (t, request_groups) in enumerate(zip(arrival, groups)):
        if not request_groups:                          # 没有命中：不拉
            wait.append(0.0)
            continue
        t, dst, pulls = t / rate_scale, i % n_nodes, {}
        for home_request, is_hot, nb in request_groups:
            src = home_request % n_nodes
            if is_hot and k > 1:
                copies = copies_of[src]
                src = dst
                if dst not in copies:                   # 本机没有副本：从网卡最早空下来的那台拉
                    src = min(copies, key=free_at.__getitem__)
            if src != dst:                              # 本机 DRAM 里就有：不走网络
                pulls[src] = pulls.get(src, 0) + nb
        w = 0.0
        for src, nb in pulls.items():
            start = free_at[src]                        # 网卡空下来才开始（FIFO）
            if start < t:
                start = t
            free_at[src] = start + nb * BLOCK_PULL_S
            busy[src] += nb * BLOCK_PULL_S
            if start - t > w:                           # 这个请求等得最久的那次传输
                w = start - t
        wait.append(w)
    return dict(wait=wait, busy=busy)


def schedule(trace, scheduler, n_nodes, capacity, rate_scale, cache_class, usable_tokens, seed=0):
    """n_nodes 台 prefill 节点，各有一个容量 capacity 块的本地前缀缓存（cache_class，如 LRUCache）；
    每台一次做一个 prefill（FIFO）。调度器决定每个请求去哪台（FAST'25 §4）：

    - random：随机挑一台；
    - load_balancing：最早空下来的那台，不看缓存；
    - local_cache：估计 TTFT = 排队 + 用本机命中算 prefill，取最小；
    - global_cache（Conductor）：还考虑把别的节点上更长的前缀经 RDMA 拉过来（只能拉已经算完的块）。

    cache_class、usable_tokens 由调用者从 kv_store.policies 传进来：缓存策略，和命中块里用得上几个 token 的规则。
    服务时间 = 拉 KV 的时间 + tiers.prefill_time(输入, 用得上的命中)；TTFT = 完成 − 到达。
    返回每个请求的 TTFT、命中块数、拉的块数、服务时间（秒）。
    """
    caches = [cache_class(capacity) for _ in range(n_nodes)]
    ready = [{} for _ in range(n_nodes)]     # 每台：块 → 它在这台算完的时刻（只有算完的块能被别人拉走）
    free_at = [0.0] * n_nodes
    picks = np.random.default_rng(seed).integers(0, n_nodes, len(trace)).tolist()
    out = dict(ttft=[], hits=[], pulled=[], service=[])
    for i, r in enumerate(trace):
        t = r.arrival / rate_scale
        if scheduler in ("random", "load_balancing"):
            j = picks[i]
            if scheduler == "load_balancing":
                j = free_at.index(min(free_at))         # 最早空下来的（并列取编号小的）
            h = have = caches[j].match(r.blocks)
            pull, pf = 0, prefill_s(r, usable_tokens(h, r.input_len))
        else:
            j, h, have, pull, pf = cache_aware(caches, ready, free_at, r, t, scheduler == "global_cache", usable_tokens)
        free_at[j] = max(t, free_at[j]) + pull * BLOCK_PULL_S + pf
        caches[j].insert(r.blocks)
        if scheduler == "global_cache":
            for b in r.blocks[have:]:                   # 这台原来没有的块：这个请求做完才算完
                ready[j][b] = free_at[j]
        out["ttft"].append(free_at[j] - t)
        out["hits"].append(h)
        out["pulled"].append(pull)
        out["service"].append(pull * BLOCK_PULL_S + pf)
    return out


def cache_aware(caches, ready, free_at, r, t, can_pull, usable_tokens):
    """估计每台的 TTFT = 排队 + (拉 KV) + prefill，取最小的那台（并列取编号小的）。返回
    (节点, 命中块数, 其中本机有的块数, 拉的块数, prefill 秒数)。can_pull（global_cache）：还可以把别的节点上已经算完的更长
    前缀经 RDMA 拉过来，拉缺的那几块。"""
    local = [c.match(r.blocks) for c in caches]         # 每台从第一块起连续命中几块
    remote = 0
    if can_pull:
        remote = done_prefix(ready, local, r.blocks, t)
    pf = {x: prefill_s(r, usable_tokens(x, r.input_len)) for x in set(local) | {remote}}   # 命中 x 块时
    best = (math.inf, 0, 0, 0)                          # (估计的 TTFT, 节点, 命中块数, 拉的块数)
    for x, h in enumerate(local):
        q = max(0.0, free_at[x] - t)                    # 排队
        if q + pf[h] < best[0]:                         # 用本机的命中
            best = (q + pf[h], x, h, 0)
        if remote > h and q + (remote - h) * BLOCK_PULL_S + pf[remote] < best[0]:    # 拉更长的前缀
            best = (q + (remote - h) * BLOCK_PULL_S + pf[remote], x, remote, remote - h)
    _, x, hits, pull = best
    return x, hits, local[x], pull, pf[hits]


def prefill_s(r, hit_tokens):
    """请求 r 的前 hit_tokens 个 token 命中时的 prefill 秒数（命中的 KV 从本机 DRAM 读）。"""
    return prefill_time(MODEL, r.input_len, hit_tokens, LOCAL_DRAM, NODE)


def done_prefix(ready, local, blocks, t):
    """别的节点上在时刻 t 已经算完、能拉过来的最长前缀（块数）：节点 x 缓存里有前 local[x] 块，
    其中从第一块起连续、ready[x][块] ≤ t 的那几块。

    >>> done_prefix([{1: 0.5, 2: 3.0}, {1: 0.2}], [2, 1], [1, 2], t=1.0)   # 节点 0 的块 2 到 3.0 s 才算完
    1
    """
    best = 0
    for x in sorted(range(len(local)), key=local.__getitem__, reverse=True):   # 缓存里前缀最长的节点先试
        if local[x] <= best:
            break                                       # 往后的都够不上已经找到的
        done = 0
        for b in blocks[:local[x]]:
            if ready[x].get(b, t + 1) > t:
                break
            done += 1
        best = max(best, done)
    return best
