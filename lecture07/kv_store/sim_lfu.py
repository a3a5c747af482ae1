"""LFU 类策略（LFU、LengthAware 和对照组）的快速前缀命中 lfu_family_hits：次数 ≥ 2 的块永不淘汰，其余的每个
rank 一条先进先出的队列；hot 的块占满缓存以后缓存不再变。TickOrder 是 LFU 类和 LRU 栈距离共用的准备工作。

    >>> lfu_family_hits([(1, 2), (1, 2, 3), (4,), (1, 2)], 2).tolist()    # = simulate(..., 2, "lfu")
    [0, 2, 0, 2]
"""
import itertools
import operator
from collections import OrderedDict, deque

import numpy as np

from kv_store.eviction import MAX_RANK, LFUCache
from kv_store.sim_base import _chunks, _prefix_counts, _tick_order, columns, first_request, has_repeats


class TickOrder:
    """LFU 类的几个格子共用的准备工作（sweep 在 fork 之前算一次）：

    blocks  (total,)  按"碰"的顺序排好的块（dense_ids 的编号）：每个请求从最后一块到第一块
    runs    (n,)      每个请求从最后一块往前、连续几块是整个 trace 里第一次出现（它们一定不在缓存里）
    n_ids, longest    不同的块数、最长的请求有几块
    repeats           有没有哪个请求里同一块出现了不止一次（那样 lfu_family_hits 的前提不成立）
    """

    __slots__ = ("offsets", "blocks", "runs", "n_ids", "longest", "repeats")

    def __init__(self, trace):
        ids, offsets = columns(trace)
        dense, first = first_request(ids, offsets)
        self.offsets, self.n_ids = offsets, len(first)
        self.repeats = has_repeats(ids, offsets)
        self.longest = max(1, int(np.diff(offsets).max(initial=0)))
        dtype = np.int32
        if self.n_ids >= 2 ** 31:
            dtype = np.int64
        self.blocks = np.empty(len(ids), dtype=dtype)
        self.runs = np.diff(offsets)
        for a, b, lo, hi, seg in _chunks(offsets):
            src, pos = _tick_order(offsets, a, b, lo, hi)
            d = dense[lo:hi][src]
            self.blocks[lo:hi] = d
            seen = first[d] < seg + a                    # 这个块在更早的请求里出现过
            run = self.runs[a:b]
            np.minimum.at(run, seg[seen], (run[seg] - 1 - pos)[seen])   # 第一个出现过的块是第几个被碰的


def lfu_family_hits(trace, capacity, cls=LFUCache, order=None):
    """LFU 类策略（键 = (次数, rank(位置), 时刻)，最小的先走）的前缀命中，和逐块模拟 cls 完全相同，但快。

    关键性质：被淘汰的总是"次数 = 1"的块。一个请求放进来以后超出容量的块数 ≤ 它带来的新块数，
    而新块的次数都是 1、比任何次数 ≥ 2 的块都小（要求同一请求里没有重复的块）。所以一块只要在缓存里
    被命中过一次（次数变成 2），就永远留在缓存里（hot），再被访问什么都不用做。其余"次数 = 1"的块（fresh）
    之间按 (rank, 时刻) 淘汰：rank 相同的按放进来的先后排队，所以每个 rank 一条先进先出的队列
    （OrderedDict），淘汰时从 rank 最小的非空队列的队头取。每块的状态：0 不在缓存，-1 hot，q + 1 在第 q 条队列。
    两个捷径（证明见各自的注释）：
    - 请求末尾连续几块第一次出现（链式哈希下就是它新带来的那一段）：一定不在缓存里，成批放进队列；
    - hot 的块数一旦等于容量，缓存就再也不变：剩下的请求用 numpy 一次算完。
    order：TickOrder(trace)（sweep 预先算好，几个格子共用）。
    """
    if order is None:
        order = TickOrder(trace)
    offsets = order.offsets
    rank = np.array([cls.rank(None, min(p, MAX_RANK)) for p in range(order.longest)], dtype=np.int64)
    levels, queue_of_pos = np.unique(rank, return_inverse=True)      # rank 从小到大：第几条队列
    queues = [OrderedDict() for _ in levels]      # 每条队列：fresh 的块，先放进来的在前
    state = [0] * order.n_ids
    n_cached = n_hot = 0
    low = len(queues)                             # 编号比 low 小的队列都是空的
    hits = []
    setitem, none, put_state = operator.setitem, itertools.repeat(None), state.__setitem__
    queue_at = queues.__getitem__
    for a, b, lo, hi, _seg in _chunks(offsets):
        pos = np.repeat(offsets[a + 1:b + 1] - 1, np.diff(offsets[a:b + 1])) - np.arange(lo, hi)
        blk, que = order.blocks[lo:hi].tolist(), queue_of_pos[pos]
        que, que1 = que.tolist(), (que + 1).tolist()
        cuts, runs = (offsets[a:b + 1] - lo).tolist(), order.runs[a:b].tolist()
        for i in range(b - a):
            start, stop = cuts[i], cuts[i + 1]
            last_miss = start - 1                 # 按碰的顺序最后一个不在缓存里的块（= 请求里最靠前的那个）
            k = runs[i]
            if k:                                 # 第一次出现的几块：一定不在缓存里，成批放进各自的队列
                mid = start + k
                xs, qs = blk[start:mid], que[start:mid]
                deque(map(setitem, map(queue_at, qs), xs, none), 0)
                deque(map(put_state, xs, que1[start:mid]), 0)
                n_cached += k
                last_miss = mid - 1
                q = min(qs)
                if q < low:
                    low = q
                start = mid
            for p in range(start, stop):
                x = blk[p]
                st = state[x]
                if st < 0:                        # hot：什么都不用做
                    continue
                if st:                            # fresh 又被访问：次数 1 → 2，升进 hot
                    del queues[st - 1][x]
                    state[x] = -1
                    n_hot += 1
                    continue
                q = que[p]                        # 不在缓存里：放进来
                state[x] = q + 1
                queues[q][x] = None
                n_cached += 1
                last_miss = p
                if q < low:
                    low = q
            hits.append(stop - 1 - last_miss)     # 前缀命中 = 最靠前的不在缓存里的块之前有几块
            if n_cached > capacity:               # 从 rank 最小的非空队列的队头淘汰
                extra = n_cached - capacity
                n_cached = capacity
                od = queues[low]
                while extra:
                    if od:
                        state[od.popitem(False)[0]] = 0
                        extra -= 1
                    else:
                        low += 1
                        od = queues[low]
            if n_hot >= capacity:
                # 缓存里全是 hot 的块：以后每个请求放进来的块次数都是 1，比 hot 的小，请求结束时全被淘汰；
                # 请求开始时缓存里没有 fresh 的块，也就没有块能再升进 hot。缓存从此不变。
                hot = np.array(state) < 0
                return np.concatenate([np.array(hits, dtype=np.int32), _fixed_cache_hits(order, a + i + 1, hot)])
    return np.array(hits, dtype=np.int32)


def _fixed_cache_hits(order, start, cached):
    """缓存从请求 start 起不再变（cached[块] 为真：在缓存里）：之后每个请求从第一块起连续几块在缓存里。"""
    offsets = order.offsets
    out = np.zeros(len(offsets) - 1 - start, dtype=np.int32)
    for a, b, lo, hi, seg in _chunks(offsets[start:]):          # lo、hi 是全局下标，a、b 从 start 数
        miss = np.empty(hi - lo, dtype=np.int64)
        src, _pos = _tick_order(offsets, start + a, start + b, lo, hi)
        miss[src] = ~cached[order.blocks[lo:hi]]                # 换回请求里的顺序
        out[a:b] = _prefix_counts(miss, seg, b - a, 2)[:, 0]
    return out
