"""按到达顺序把 trace 喂给缓存，数命中：simulate、hit_ratio、一次算完整张表的 sweep，以及 Belady MIN。

trace 可以是 Trace（kv_trace 的列式存储），也可以是块序列的列表（小例子、测试）：

    >>> blocks = [(1, 2), (1, 2, 3), (4,), (1, 2)]
    >>> simulate(blocks, 2, "lru").tolist()       # 每个请求的前缀命中块数；容量 2
    [0, 2, 0, 1]

    （第 3 个请求挤掉了最旧的子块 2，父块 1 还在：第 4 个请求只命中 1 块。）
    >>> simulate(blocks, None, "lfu").tolist()    # 无限容量：任何策略都一样
    [0, 2, 0, 2]
    >>> lru_hits(blocks, (1, 2)).keys(), lru_hits(blocks, (1, 2))[1].tolist()   # LRU：一遍算出所有容量
    (dict_keys([1, 2]), [0, 1, 0, 0])

"min"：Belady 的 MIN（离线最优，要预知未来，真实系统做不到），见 min_hits。它数的是逐块命中
（请求的块只要在缓存里就算，不要求从开头连续），这是任何策略前缀命中的上界：
前缀命中 ≤ 同一个缓存的逐块命中 ≤ MIN 的逐块命中。sweep(..., policies=("lru", "min")) 直接可用。

内存：几百万次块访问也只在 numpy 数组里；Python 列表每次只转换 CHUNK 个请求。
"""
import heapq
import itertools
import os
from collections import OrderedDict

import numpy as np

from kv_cache_policies import CACHE_POLICIES, check_policy_args, make_cache  # noqa: F401
from kv_trace import CHUNK, iter_block_lists


# ---------------------------------------------------------------- trace → 两列数组
def columns(trace):
    """(hash_ids, offsets)：全部块 id 首尾相接 (total,)，请求 i 的块是 hash_ids[offsets[i]:offsets[i+1]]。

    trace：Trace（直接用它的列），或块序列（或 Request）的列表。
    """
    if hasattr(trace, "hash_ids"):
        return trace.hash_ids, trace.offsets
    seqs = [getattr(x, "blocks", x) for x in trace]
    offsets = np.zeros(len(seqs) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, seqs), dtype=np.int64, count=len(seqs)), out=offsets[1:])
    ids = np.fromiter(itertools.chain.from_iterable(seqs), dtype=np.int64, count=int(offsets[-1]))
    return ids, offsets


def dense_ids(ids):
    """把块 id 换成 0..D-1 的小整数（访问的模式不变），返回 (新 id, D)。id 本来就不大时原样用。"""
    if len(ids) == 0:
        return ids, 0
    if ids.min() >= 0 and ids.max() < 4 * len(ids) + 1024:
        return ids, int(ids.max()) + 1
    uniq, inv = np.unique(ids, return_inverse=True)
    return inv.astype(np.int64), len(uniq)


def _chunks(offsets, chunk=CHUNK):
    """把请求按 chunk 个一段切开：(a, b, lo, hi, seg)，请求 a..b-1 的块在 [lo, hi)，seg 是每次访问的段内请求号。"""
    n = len(offsets) - 1
    for a in range(0, n, chunk):
        b = min(n, a + chunk)
        lo, hi = int(offsets[a]), int(offsets[b])
        seg = np.repeat(np.arange(b - a, dtype=np.int64), np.diff(offsets[a:b + 1]))
        yield a, b, lo, hi, seg


def _prefix_counts(levels, seg, n_seg, n_levels):
    """levels：每次访问的"级别"（0..n_levels-1，越小越容易命中）。返回 (n_seg, n_levels)：
    第 k 列 = 每个请求从第一块起、连续几块的级别 ≤ k（= 级别 ≤ k 才算命中时的前缀命中数）。

    做法：每个请求内求级别的前缀最大值（加上 seg·n_levels，一次 maximum.accumulate 就不会跨请求），
    前缀最大值 ≤ k 的访问恰好是开头连续命中的那几块。
    """
    base = seg * n_levels
    run_max = np.maximum.accumulate(base + levels) - base
    counts = np.bincount(base + run_max, minlength=n_seg * n_levels).reshape(n_seg, n_levels)
    return np.cumsum(counts, axis=1)


# ---------------------------------------------------------------- 无限容量：不用模拟
def first_request(ids, offsets):
    """(dense, first)：dense 是 dense_ids(ids)[0]；first[d] = 块 d 第一次出现的请求号。"""
    dense, n_ids = dense_ids(ids)
    first = np.full(n_ids, len(offsets), dtype=np.int64)
    for a, b, lo, hi, seg in _chunks(offsets):
        np.minimum.at(first, dense[lo:hi], seg + a)
    return dense, first


def infinite_hits(trace, per_block=False):
    """无限容量时每个请求的命中块数：任何策略都一样（不淘汰），不用模拟。

    一块命中 ⇔ 它在更早的请求里出现过。per_block=False 数前缀命中（从第一块起连续几块出现过）；
    链式哈希下一个块出现过 ⇔ 它前面的整段前缀都出现过，两者相等。per_block=True 数出现过的块数（MIN 的口径）。
    """
    ids, offsets = columns(trace)
    dense, first = first_request(ids, offsets)
    hits = np.zeros(len(offsets) - 1, dtype=np.int32)
    for a, b, lo, hi, seg in _chunks(offsets):
        miss = (first[dense[lo:hi]] >= seg + a).astype(np.int64)    # 第一次出现：没命中
        if per_block:
            hits[a:b] = np.bincount(seg, weights=1 - miss, minlength=b - a)
        else:
            hits[a:b] = _prefix_counts(miss, seg, b - a, 2)[:, 0]
    return hits


# ---------------------------------------------------------------- LRU：一遍算出所有容量
def lru_hits(trace, capacities):
    """LRU 在每个容量下每个请求的前缀命中块数：{容量: (n,)}，只走一遍 trace（Mattson 等 1970 的栈算法）。

    LRU 是"栈算法"：容量 c 的缓存 = 按最近使用排好的栈的前 c 个（本实现从尾到头碰块、整个请求放完再淘汰，
    仍然如此）。所以只要知道每次访问时这块在栈里的深度 d，就知道它在哪些容量下命中（d < c）。
    这里不求精确深度，只求它落在哪一"段"：按容量从小到大把栈切成几段（每段一个 OrderedDict，
    从旧到新），块被碰到时移到第 0 段的最新端，上面每一段溢出的最旧一块落进下一段。
    每次访问的代价是它跨过的段数（≤ 容量个数），和容量大小无关。
    """
    caps = sorted({int(c) for c in capacities})
    if not caps:
        return {}
    ids, offsets = columns(trace)
    dense, n_ids = dense_ids(ids)
    m = len(caps)
    sizes = [caps[0]] + [caps[k] - caps[k - 1] for k in range(1, m)]
    new = m + 1                                   # 段号：0..m-1 在某个容量内，m 在所有容量外，m+1 = 从没出现过
    zone = bytearray([new]) * n_ids
    zones = [OrderedDict() for _ in range(m)]
    top = zones[0]
    hits = np.zeros((m, len(offsets) - 1), dtype=np.int32)
    for a, b, lo, hi, seg in _chunks(offsets):
        seen = bytearray(hi - lo)                 # 每次访问时它在哪一段（请求开始时查，先于放入）
        p = 0
        for blocks in iter_block_lists(dense[lo:hi], offsets[a:b + 1] - lo, b - a):
            seen[p:p + len(blocks)] = bytes(map(zone.__getitem__, blocks))
            p += len(blocks)
            for x in reversed(blocks):            # 从尾到头碰：父块最新
                z = zone[x]
                if z == 0:
                    top.move_to_end(x)
                    continue
                if z < m:
                    del zones[z][x]
                top[x] = None
                zone[x] = 0
                k = 0
                while k < m and k < z and len(zones[k]) > sizes[k]:   # 逐段往下挤一块
                    y = zones[k].popitem(last=False)[0]
                    if k + 1 < m:
                        zones[k + 1][y] = None
                    zone[y] = k + 1
                    k += 1
        levels = np.frombuffer(bytes(seen), dtype=np.uint8).astype(np.int64)
        hits[:, a:b] = _prefix_counts(levels, seg, b - a, m + 2)[:, :m].T
    return {c: hits[k] for k, c in enumerate(caps)}


# ---------------------------------------------------------------- 通用：一个容量、一个策略
def simulate(trace, capacity, policy, per_block=False, prep=None):
    """按到达顺序跑一遍：每个请求先 match 再 insert。返回每个请求的前缀命中块数 (n_requests,)。

    per_block=True：改数逐块命中（count）。policy="min"：Belady 的 MIN，总是逐块命中；
    prep 是 next_use(trace) 的结果（sweep 预先算好一次，省得每个容量重算）。
    """
    check_policy_args(capacity, policy, (*CACHE_POLICIES, "min"))
    if policy == "min":
        return min_hits(trace, capacity, prep)
    if capacity is None:
        return infinite_hits(trace, per_block)
    ids, offsets = columns(trace)
    cache = make_cache(capacity, policy)
    match, insert = cache.match, cache.insert
    if per_block:
        match = cache.count
    hits = np.zeros(len(offsets) - 1, dtype=np.int32)
    for i, blocks in enumerate(iter_block_lists(ids, offsets)):
        hits[i] = match(blocks)
        insert(blocks)
    return hits


def hit_ratio(trace, capacity, policy):
    """命中的块数 / 全部块数（前缀命中）。trace：Trace 或 Request 的列表。"""
    ids, offsets = columns(trace)
    return simulate(trace, capacity, policy).sum() / max(1, len(ids))


# ---------------------------------------------------------------- Belady 的 MIN：离线最优（上界）
def next_use(trace):
    """nxt (total,)：第 p 次访问的块下一次被哪个请求用到（请求号；= 请求数 表示再也不用）。

    从最后一段往前一段一段算：段内按块 id 稳定排序，同一块的各次访问挨在一起，后一个就是"下一次"；
    段内没有下一次的，查 after[块]（它在后面各段里第一次出现的请求号）。
    """
    ids, offsets = columns(trace)
    n = len(offsets) - 1
    dense, n_ids = dense_ids(ids)
    after = np.full(n_ids, n, dtype=np.int64)
    nxt = np.empty(len(ids), dtype=np.int64)
    for a, b, lo, hi, seg in reversed(list(_chunks(offsets))):
        d, req = dense[lo:hi], seg + a
        order = np.argsort(d, kind="stable")
        ds, rs = d[order], req[order]
        same = ds[1:] == ds[:-1]
        nx = after[ds]
        nx[:-1][same] = rs[1:][same]
        nxt[lo + order] = nx
        first = np.ones(len(ds), dtype=bool)
        first[1:] = ~same
        after[ds[first]] = rs[first]
    return nxt


def min_hits(trace, capacity, prep=None):
    """Belady 的 MIN：每个请求数逐块命中，再把这个请求的块放进缓存；超出容量时淘汰"下一次用到最晚"的块
    （再也不用的块直接不留）。这是逐块命中的最优解，所以也是任何策略前缀命中的上界。

    实现：缓存 = {块: 下一次用到它的请求号}，外加一个最大堆（惰性删除：堆里的旧记录和字典对不上就跳过）。
    请求 i 到来时，缓存里的块 b 一定有 cache[b] == i（它的"下一次"就是现在），据此判断命中。
    下一次相同的几块谁先走都一样（它们会在同一个请求里一起被用到），堆里按块 id 排。
    """
    if capacity is None:                      # 不淘汰：以前见过的块都命中
        return infinite_hits(trace, per_block=True)
    ids, offsets = columns(trace)
    n = len(offsets) - 1
    dense, _ = dense_ids(ids)
    nxt = prep
    if nxt is None:
        nxt = next_use(trace)
    cap = int(capacity)
    cache, heap = {}, []
    get, push, pop = cache.get, heapq.heappush, heapq.heappop
    hits = np.zeros(n, dtype=np.int32)
    for a, b, lo, hi, _seg in _chunks(offsets):
        blk, nx = dense[lo:hi].tolist(), nxt[lo:hi].tolist()
        cuts = (offsets[a:b + 1] - lo).tolist()
        for i in range(a, b):
            h = 0
            for p in range(cuts[i - a], cuts[i - a + 1]):
                x = blk[p]
                if get(x) == i:
                    h += 1
                nu = nx[p]
                if nu == i:                   # 同一个请求里重复出现：由最后一次出现来更新
                    continue
                if nu == n:
                    cache.pop(x, None)        # 再也不用：不留
                else:
                    cache[x] = nu
                    push(heap, -((nu << 53) | x))   # 键 = (下一次, 块)，取负变成最大堆
            hits[i] = h
            while len(cache) > cap:
                k = -pop(heap)
                nu, x = k >> 53, k & ((1 << 53) - 1)
                if get(x) == nu:              # 不是旧记录：它就是下一次用到最晚的块
                    del cache[x]
    return hits


# ---------------------------------------------------------------- 一次算完整张表（两个核一起）
_SHARED = None   # fork 出的子进程直接继承这份数据（trace 的两列、MIN 用的 next_use），不用序列化


def _run(task):
    p, c = task
    trace, prep = _SHARED
    if p == "lru":
        return list(lru_hits(trace, c).items())
    return [(c, simulate(trace, c, p, prep=prep))]


def _cost(task):
    """粗略的相对耗时（先派最慢的，两个核的负载更均衡）。"""
    p, c = task
    if p == "lru":
        return 3.0
    if p == "min":
        return 1.0
    return 2.0 + c / 100_000


def sweep(trace, capacities, policies, workers=None):
    """{(policy, capacity): 每个请求的命中块数}。各格互相独立，分给多个进程并行算。

    无限容量用闭式解（在线策略都相同；"min" 的是逐块命中）；LRU 的全部有限容量一遍算完（lru_hits）。
    workers=None：用本机可用的核数（最多 4 个）。
    """
    global _SHARED
    for p in policies:
        for c in capacities:
            check_policy_args(c, p, (*CACHE_POLICIES, "min"))
    finite = tuple(sorted({c for c in capacities if c is not None}))
    cols = columns(trace)
    out = {}
    if None in capacities:
        inf = infinite_hits(_Columns(cols))
        out.update({(p, None): inf for p in policies if p != "min"})
        if "min" in policies:
            out[("min", None)] = infinite_hits(_Columns(cols), per_block=True)
    tasks = [(p, c) for p in policies if p != "lru" for c in finite]
    if "lru" in policies and finite:
        tasks.append(("lru", finite))
    prep = None
    if "min" in policies and finite:
        prep = next_use(_Columns(cols))
    if workers is None:
        workers = min(4, _n_cores())
    tasks.sort(key=_cost, reverse=True)
    _SHARED = (_Columns(cols), prep)
    try:
        if workers > 1 and len(tasks) > 1 and "fork" in _start_methods():
            import multiprocessing as mp
            with mp.get_context("fork").Pool(workers) as pool:
                results = pool.map(_run, tasks, chunksize=1)
        else:
            results = [_run(t) for t in tasks]
    finally:
        _SHARED = None
    for (p, _), pairs in zip(tasks, results):
        for c, hits in pairs:
            out[(p, c)] = hits
    return out


class _Columns:
    """两列数组包成一个有 .hash_ids / .offsets 的对象（columns() 认得它）。"""

    __slots__ = ("hash_ids", "offsets")

    def __init__(self, cols):
        self.hash_ids, self.offsets = cols


def _n_cores():
    """这个进程能用的核数。"""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _start_methods():
    import multiprocessing as mp
    return mp.get_all_start_methods()
