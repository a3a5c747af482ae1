"""按到达顺序把 trace 喂给缓存，数命中：simulate、hit_ratio、一次算完整张表的 sweep，以及 Belady MIN。

    >>> blocks = [(1, 2), (1, 2, 3), (4,), (1, 2)]
    >>> simulate(blocks, 2, "lru").tolist()       # 每个请求的前缀命中块数；容量 2
    [0, 2, 0, 1]

    （第 3 个请求挤掉了最旧的子块 2，父块 1 还在：第 4 个请求只命中 1 块。）
    >>> simulate(blocks, None, "lfu").tolist()    # 无限容量：任何策略都一样
    [0, 2, 0, 2]

"min"：Belady 的 MIN（离线最优，要预知未来，真实系统做不到），见 min_hits。它数的是逐块命中
（请求的块只要在缓存里就算，不要求从开头连续），这是任何策略前缀命中的上界：
前缀命中 ≤ 同一个缓存的逐块命中 ≤ MIN 的逐块命中。sweep(..., policies=("lru", "min")) 直接可用。
"""
import heapq
import itertools
import os

import numpy as np

from kv_cache_policies import CACHE_POLICIES, check_policy_args, make_cache  # noqa: F401


def infinite_hits(block_lists):
    """无限容量时每个请求的前缀命中块数：任何策略都一样（不淘汰），不用模拟。

    链式哈希下，一个块以前出现过 ⇔ 它之前的整段前缀都出现过，所以前缀命中 = 以前见过的块数。
    """
    seen, hits = set(), np.zeros(len(block_lists), dtype=np.int64)
    for i, blocks in enumerate(block_lists):
        n = 0
        for b in blocks:
            if b not in seen:
                break
            n += 1
        hits[i] = n
        seen.update(blocks)
    return hits


def simulate(block_lists, capacity, policy, per_block=False, prep=None):
    """按到达顺序跑一遍：每个请求先 match 再 insert。返回每个请求的前缀命中块数 (n_requests,)。

    per_block=True：改数逐块命中（count）。policy="min"：Belady 的 MIN，总是逐块命中；
    prep 是 next_use(block_lists) 的结果（sweep 预先算好一次，省得每个容量重算）。
    """
    check_policy_args(capacity, policy, (*CACHE_POLICIES, "min"))
    if policy == "min":
        return min_hits(block_lists, capacity, prep)
    if capacity is None and not per_block:
        return infinite_hits(block_lists)
    cache = make_cache(capacity, policy)
    match, insert = (cache.count if per_block else cache.match), cache.insert
    hits = np.zeros(len(block_lists), dtype=np.int64)
    for i, blocks in enumerate(block_lists):
        hits[i] = match(blocks)
        insert(blocks)
    return hits


def hit_ratio(trace, capacity, policy):
    """命中的块数 / 全部块数（前缀命中）。trace：Request 的列表。"""
    blocks = [r.blocks for r in trace]
    return simulate(blocks, capacity, policy).sum() / max(1, sum(len(b) for b in blocks))


# ---------------------------------------------------------------- Belady 的 MIN：离线最优（上界）
def next_use(block_lists):
    """把全部访问摊平成一列。返回 (ids, starts, nxt)，都是 Python 列表（循环里比 numpy 标量快）：
    ids[p] 第 p 次访问的块；请求 i 的访问是 ids[starts[i]:starts[i+1]]；
    nxt[p] 这块下一次被哪个请求用到（请求号；= len(block_lists) 表示再也不用）。
    用 numpy 算：按块 id 稳定排序，同一块的各次访问按时间挨在一起，后一个就是"下一次"。
    """
    n = len(block_lists)
    lens = np.fromiter(map(len, block_lists), dtype=np.int64, count=n)
    starts = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lens, out=starts[1:])
    ids = np.fromiter(itertools.chain.from_iterable(block_lists), dtype=np.int64, count=int(starts[-1]))
    req = np.repeat(np.arange(n, dtype=np.int64), lens)
    order = np.argsort(ids, kind="stable")
    same = ids[order[1:]] == ids[order[:-1]]
    nxt = np.full(len(ids), n, dtype=np.int64)
    nxt[order[:-1][same]] = req[order[1:][same]]
    return ids.tolist(), starts.tolist(), nxt.tolist()


def min_hits(block_lists, capacity, prep=None):
    """Belady 的 MIN：每个请求数逐块命中，再把这个请求的块放进缓存；超出容量时淘汰"下一次用到最晚"的块
    （再也不用的块直接不留）。这是逐块命中的最优解，所以也是任何策略前缀命中的上界。

    实现：缓存 = {块: 下一次用到它的请求号}，外加一个最大堆（惰性删除：堆里的旧记录和字典对不上就跳过）。
    请求 i 到来时，缓存里的块 b 一定有 cache[b] == i（它的"下一次"就是现在），据此判断命中。
    """
    n = len(block_lists)
    hits = np.zeros(n, dtype=np.int64)
    if capacity is None:                      # 不淘汰：以前见过的块都命中
        seen = set()
        for i, blocks in enumerate(block_lists):
            hits[i] = sum(b in seen for b in blocks)
            seen.update(blocks)
        return hits
    ids, starts, nxt = prep if prep is not None else next_use(block_lists)
    cap = int(capacity)
    cache, heap = {}, []
    get, push, pop = cache.get, heapq.heappush, heapq.heappop
    for i in range(n):
        h = 0
        for p in range(starts[i], starts[i + 1]):
            b = ids[p]
            if get(b) == i:
                h += 1
            nu = nxt[p]
            if nu == i:                       # 同一个请求里重复出现：由最后一次出现来更新
                continue
            if nu == n:
                cache.pop(b, None)            # 再也不用：不留
            else:
                cache[b] = nu
                push(heap, -((nu << 32) | p))   # 键 = (下一次, 位置)，取负变成最大堆
        hits[i] = h
        while len(cache) > cap:
            k = -pop(heap)
            nu, b = k >> 32, ids[k & 0xFFFFFFFF]
            if get(b) == nu:                  # 不是旧记录：它就是下一次用到最晚的块
                del cache[b]
    return hits


# ---------------------------------------------------------------- 一次算完整张表（两个核一起）
_SHARED = None   # fork 出的子进程直接继承这份数据，不用序列化 40 万个块 id
_PREP = None     # MIN 用的 next_use(…)，同样继承


def _run(task):
    return task, simulate(_SHARED, *task, prep=_PREP)


def _cost(task):
    """粗略的相对耗时（先派最慢的，两个核的负载更均衡）：LFU 类容量越大越慢，MIN 容量越小越慢。"""
    c, p = task
    if p == "lru":
        return 1.0
    if p == "min":
        return 1.6 + 10_000 / (c + 10_000)
    return 1.5 + c / 100_000


def sweep(block_lists, capacities, policies, workers=None):
    """{(policy, capacity): 每个请求的命中块数}。各格互相独立，分给多个进程并行算。

    无限容量只算一次（在线策略都相同；"min" 的是逐块命中，单独算）。workers=None：用本机可用的核数（最多 4 个）。
    """
    global _SHARED, _PREP
    for p in policies:
        for c in capacities:
            check_policy_args(c, p, (*CACHE_POLICIES, "min"))
    tasks = [(c, p) for p in policies for c in capacities if c is not None]
    prep = next_use(block_lists) if "min" in policies else None
    out = {}
    if None in capacities:
        inf = infinite_hits(block_lists)
        out.update({(p, None): inf for p in policies if p != "min"})
        if "min" in policies:
            out[("min", None)] = min_hits(block_lists, None, prep)
    if workers is None:
        workers = min(4, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1)
    tasks.sort(key=_cost, reverse=True)
    if workers > 1 and len(tasks) > 1 and "fork" in _start_methods():
        import multiprocessing as mp
        _SHARED, _PREP = block_lists, prep
        try:
            with mp.get_context("fork").Pool(workers) as pool:
                results = pool.map(_run, tasks, chunksize=1)
        finally:
            _SHARED = _PREP = None
    else:
        results = [((c, p), simulate(block_lists, c, p, prep=prep)) for c, p in tasks]
    for (c, p), hits in results:
        out[(p, c)] = hits
    return out


def _start_methods():
    import multiprocessing as mp
    return mp.get_all_start_methods()
