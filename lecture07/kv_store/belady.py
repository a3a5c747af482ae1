"""Belady 的 MIN（离线最优，要预知未来）的逐块命中 min_hits：每次"留到下一次用"是一个区间，超出容量时淘汰
下一次用到最晚的。next_use、max_live、MinPrep 是它的准备工作（min_sweep 给几个容量算一次）。

    >>> min_hits([(1, 2), (1, 2, 3), (4,), (1, 2)], 2).tolist()
    [0, 2, 0, 2]
"""
import functools
import heapq
import itertools
from array import array
from collections import deque

import numpy as np

from kv_store.traces import CHUNK, columns, dense_ids, first_request


def seen_before(trace):
    """每个请求里有几块在更早的请求里出现过（逐块数）：无限容量时 MIN 的命中，也是任何容量下 MIN 命中的上界。

    >>> seen_before([(1, 2), (9, 2), (1, 1)]).tolist()      # 同一请求里的重复不算"以前出现过"
    [0, 1, 2]
    """
    ids, offsets = columns(trace)
    dense, first = first_request(ids, offsets)
    request = np.repeat(np.arange(len(offsets) - 1), np.diff(offsets))
    return np.bincount(request, weights=first[dense] < request, minlength=len(offsets) - 1).astype(np.int32)


def has_repeats(ids, offsets):
    """有没有哪个请求里同一个块出现了不止一次（真实 trace 和合成 trace 都没有；kv_store.trace_file 会报错）。

    >>> has_repeats(np.array([1, 2, 1]), np.array([0, 2, 3])), has_repeats(np.array([1, 2, 1]), np.array([0, 3]))
    (False, True)
    """
    request = np.repeat(np.arange(len(offsets) - 1), np.diff(offsets))
    order = np.lexsort((ids, request))
    same_block, same_request = ids[order][1:] == ids[order][:-1], request[order][1:] == request[order][:-1]
    return bool((same_block & same_request).any())


def _chunks(offsets):
    """把请求按 CHUNK 个一段切开：(a, b, lo, hi, seg)，请求 a..b-1 的块在 [lo, hi)，seg 是每次访问的段内请求号。"""
    n = len(offsets) - 1
    for a in range(0, n, CHUNK):
        b = min(n, a + CHUNK)
        lo, hi = int(offsets[a]), int(offsets[b])
        seg = np.repeat(np.arange(b - a, dtype=np.int64), np.diff(offsets[a:b + 1]))
        yield a, b, lo, hi, seg


def _index_type(n):
    """下标放得进 int32 就用 int32（省一半内存）。"""
    if n < 2 ** 31 - 1:
        return np.int32
    return np.int64


def next_use(trace):
    """nxt (total,)：第 p 次访问的块下一次被哪个请求用到（请求号；= 请求数 表示再也不用）。

    从最后一段往前一段一段算：段内按块 id 稳定排序，同一块的各次访问挨在一起，后一个就是"下一次"；
    段内没有下一次的，查 after[块]（它在后面各段里第一次出现的请求号）。
    """
    ids, offsets = columns(trace)
    n = len(offsets) - 1
    dense, n_ids = dense_ids(ids)
    after = np.full(n_ids, n, dtype=np.int64)
    nxt = np.empty(len(ids), dtype=_index_type(n + 1))      # 请求号放得进 int32 就用 int32（sweep 的每个进程都带着它）
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


def max_live(nxt, offsets):
    """放完每个请求以后，"以后还会用到"的块最多有几个（MIN 的缓存里只放这种块）。

    第 p 次访问（请求 i，下一次在请求 nxt[p]）让这块在请求 i..nxt[p]-1 之后都"活着"。
    """
    n = len(offsets) - 1
    diff = np.zeros(n + 1, dtype=np.int64)
    for a, b, lo, hi, seg in _chunks(offsets):
        req, nu = seg + a, nxt[lo:hi]
        keep = (nu > req) & (nu < n)                 # 再也不用的不留；同一请求里重复出现的，由最后一次负责
        diff += np.bincount(req[keep], minlength=n + 1) - np.bincount(nu[keep], minlength=n + 1)
    return int(np.cumsum(diff)[:n].max(initial=0))


class MinPrep:
    """MIN 的几个容量共用的准备工作（sweep 算一次）：

    nxt      next_use(trace)
    live     max_live(nxt, offsets)：容量 ≥ 它时 MIN 什么都不用淘汰
    seen     每个请求里"以前出现过"的块数（seen_before）= 在这个请求结束的区间数
    repeats  有没有哪个请求里同一块出现了不止一次
    """

    __slots__ = ("nxt", "live", "seen", "repeats")

    def __init__(self, trace, repeats=None):
        ids, offsets = columns(trace)
        self.nxt = next_use(trace)
        self.live = max_live(self.nxt, offsets)
        self.seen = seen_before(trace)
        if repeats is None:
            repeats = has_repeats(ids, offsets)
        self.repeats = repeats


def min_sweep(trace, capacities):
    """[min_hits(trace, c) for c in capacities]，几个容量共用一份 MinPrep（kv_store.replay.sweep 的 MIN 那一格）。

    >>> [h.tolist() for h in min_sweep([(1, 2), (1, 2, 3), (4,), (1, 2)], (None, 1))]
    [[0, 2, 0, 2], [0, 1, 0, 1]]
    """
    prep = MinPrep(trace)
    return [min_hits(trace, c, prep) for c in capacities]


def min_hits(trace, capacity, prep=None):
    """Belady 的 MIN：每个请求数逐块命中，再把这个请求的块放进缓存；超出容量时淘汰"下一次用到最晚"的块
    （再也不用的块直接不留）。这是逐块命中的最优解，所以也是任何策略前缀命中的上界。

    看成区间：第 p 次访问（请求 i，块 x，下一次在请求 nu）如果 nu 存在，就要把 x 从请求 i 留到请求 nu
    （"开一个区间"）；留住了，请求 nu 就命中 x。缓存 = 还没结束、也没被淘汰的区间。超出容量时淘汰 nu 最大的
    （最大堆，键 = -(nu · 2^block_bits + x)；nu 相同的几块谁先走都一样——它们会在同一个请求里一起被用到——
    堆里按块编号排）。于是：
    - 请求 i 的命中 = 在请求 i 结束的区间数（= 块在更早的请求里出现过的访问数，seen_before）
      − 其中被淘汰了的个数（淘汰时记在 evicted[nu] 上）；
    - 堆里 nu ≤ i 的记录是已经结束的区间（旧记录），nu > i 的都还在缓存里：要淘汰时堆顶一定是有效的。
    每次访问只要把新区间的键（numpy 预先算好）压进堆里，不用逐块查缓存。同一请求里有重复的块时
    （只在手写的小例子里）改用逐块的 _min_hits_by_block。prep：MinPrep(trace)（sweep 预先算好）。
    """
    if capacity is None:                      # 不淘汰：以前见过的块都命中
        return seen_before(trace)
    if prep is None:
        prep = MinPrep(trace)
    ids, offsets = columns(trace)
    n = len(offsets) - 1
    nxt, cap = prep.nxt, int(capacity)
    if cap >= prep.live:                      # 有后续访问的块从来没有超过 cap 个：什么都不用淘汰
        return prep.seen.copy()
    if prep.repeats:
        return _min_hits_by_block(trace, cap, nxt)
    dense, n_ids = dense_ids(ids)
    block_bits = max(1, n_ids.bit_length())
    evicted = [0] * (n + 1)                # evicted[j]：本来要留到请求 j、却被淘汰了的区间数
    heap, n_cached = [], 0
    push, pop = functools.partial(heapq.heappush, heap), heapq.heappop
    hits, seen = [], prep.seen.tolist()      # seen[i]：在请求 i 结束的区间数
    for a, b, lo, hi, seg in _chunks(offsets):
        nu = nxt[lo:hi].astype(np.int64)
        opens = nu < n                         # 这次访问开一个区间（没有重复块：nu > 请求号）
        keys = (-((nu[opens] << block_bits) | dense[lo:hi][opens])).tolist()
        cuts = np.zeros(b - a + 1, dtype=np.int64)
        np.cumsum(np.bincount(seg[opens], minlength=b - a), out=cuts[1:])
        cuts = cuts.tolist()
        for i in range(a, b):
            h = seen[i] - evicted[i]
            hits.append(h)
            k0, k1 = cuts[i - a], cuts[i - a + 1]
            n_cached += k1 - k0 - h            # 结束 h 个留住的区间，开 k1 - k0 个新的
            deque(map(push, keys[k0:k1]), 0)
            if n_cached > cap:
                for k in map(pop, itertools.repeat(heap, n_cached - cap)):    # 下一次用到最晚的几块
                    evicted[(-k) >> block_bits] += 1
                n_cached = cap
            if len(heap) > 4 * cap + 4096:    # 旧记录太多：只留还没结束的区间，重新建堆（摊还 O(1)）
                heap[:] = [k for k in heap if (-k) >> block_bits > i]
                heapq.heapify(heap)
    return np.array(hits, dtype=np.int32)


def _min_hits_by_block(trace, cap, nxt):
    """min_hits 的逐块版本（同一请求里可以有重复的块）：cache[块] = 下一次用到它的请求号（一个数组），
    外加一个最大堆（惰性删除：堆里的旧记录和数组对不上就跳过）。请求 i 到来时，缓存里的块 b 一定有
    cache[b] == i（它的"下一次"就是现在），据此判断命中。"""
    ids, offsets = columns(trace)
    n = len(offsets) - 1
    dense, n_ids = dense_ids(ids)
    block_bits = max(1, n_ids.bit_length())
    mask = (1 << block_bits) - 1
    cache = array("q", [-1]) * n_ids      # 块 → 下一次用到它的请求号（-1 = 不在缓存里）
    heap, n_cached = [], 0                 # 键 = -(下一次 · 2^block_bits + 块)：最大堆
    push, pop = heapq.heappush, heapq.heappop
    hits = np.zeros(n, dtype=np.int32)
    for a, b, lo, hi, _seg in _chunks(offsets):
        blk, nx = dense[lo:hi].tolist(), nxt[lo:hi].tolist()
        cuts = (offsets[a:b + 1] - lo).tolist()
        for i in range(a, b):
            h = 0
            for p in range(cuts[i - a], cuts[i - a + 1]):
                x = blk[p]
                if cache[x] == i:
                    h += 1
                nu = nx[p]
                if nu == i:                   # 同一个请求里重复出现：由最后一次出现来更新
                    continue
                if nu == n:                   # 再也不用：不留
                    if cache[x] >= 0:
                        cache[x] = -1
                        n_cached -= 1
                    continue
                if cache[x] < 0:
                    n_cached += 1
                cache[x] = nu
                push(heap, -((nu << block_bits) | x))
            hits[i] = h
            while n_cached > cap:
                k = -pop(heap)
                if cache[k & mask] == k >> block_bits:   # 不是旧记录：它就是下一次用到最晚的块
                    cache[k & mask] = -1
                    n_cached -= 1
            if len(heap) > 4 * cap + 4096:    # 旧记录太多：只留有效的，重新建堆（摊还 O(1)）
                heap = [k for k in heap if cache[-k & mask] == -k >> block_bits]
                heapq.heapify(heap)
    return hits
