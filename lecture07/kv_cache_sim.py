"""按到达顺序把 trace 喂给缓存，数命中：simulate、hit_ratio、一次算完整张表的 sweep，以及 Belady MIN。

trace 可以是 Trace（kv_trace 的列式存储），也可以是块序列的列表（小例子、测试）：

    >>> blocks = [(1, 2), (1, 2, 3), (4,), (1, 2)]
    >>> simulate(blocks, 2, "lru").tolist()       # 每个请求的前缀命中块数；容量 2
    [0, 2, 0, 1]

    （第 3 个请求挤掉了最旧的子块 2，父块 1 还在：第 4 个请求只命中 1 块。）
    >>> simulate(blocks, None, "lfu").tolist()    # 无限容量：任何策略都一样
    [0, 2, 0, 2]

"min"：Belady 的 MIN（离线最优，要预知未来，真实系统做不到），见 min_hits。它数的是逐块命中
（请求的块只要在缓存里就算，不要求从开头连续），这是任何策略前缀命中的上界：
前缀命中 ≤ 同一个缓存的逐块命中 ≤ MIN 的逐块命中。sweep(..., policies=("lru", "min")) 直接可用。

怎么算得快（每条捷径都和策略类本身逐请求比对过，见 tests/test_properties.py）：
- 无限容量：闭式解 infinite_hits；容量不少于 trace 里不同的块数时也一样（从来不用淘汰）；
- LRU：栈算法，一遍算出所有容量（lru_stack_hits：栈距离，用 numpy 的小波矩阵数）；
- LFU 类（LFU、LengthAware 和对照组）：次数 ≥ 2 的块永不淘汰，其余的每个 rank 一条先进先出的队列
  （lfu_family_hits）；hot 的块占满缓存以后缓存不再变；
- MIN：每次"留到下一次用"是一个区间，淘汰下一次最晚的（min_hits）；
- sweep：各格分给多个进程（fork），LRU、MIN 的所有容量各合成一格；background=True 在后台算。

内存：几百万次块访问也只在 numpy 数组里；Python 列表每次只转换 CHUNK 个请求。
"""
import functools
import heapq
import itertools
import operator
import os
from array import array
from collections import OrderedDict, deque
from collections.abc import Mapping

import numpy as np

from kv_cache_policies import CACHE_POLICIES, MAX_RANK, LFUCache, LRUCache, check_policy_args, make_cache  # noqa: F401
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


def _chunks(offsets):
    """把请求按 CHUNK 个一段切开：(a, b, lo, hi, seg)，请求 a..b-1 的块在 [lo, hi)，seg 是每次访问的段内请求号。"""
    n = len(offsets) - 1
    for a in range(0, n, CHUNK):
        b = min(n, a + CHUNK)
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


# ---------------------------------------------------------------- 通用：一个容量、一个策略
def simulate(trace, capacity, policy, per_block=False, prep=None, order=None):
    """按到达顺序跑一遍：每个请求先 match 再 insert。返回每个请求的前缀命中块数 (n_requests,)。

    per_block=True：改数逐块命中（count）。policy="min"：Belady 的 MIN，总是逐块命中；
    prep 是 MinPrep(trace)，order 是 TickOrder(trace)（sweep 预先算好一次，各个格子共用）。
    """
    check_policy_args(capacity, policy, (*CACHE_POLICIES, "min"))
    if policy == "min":
        return min_hits(trace, capacity, prep)
    if capacity is None:
        return infinite_hits(trace, per_block)
    ids, offsets = columns(trace)
    cls = CACHE_POLICIES[policy]
    if _is_plain_lfu(cls) or cls is LRUCache:
        if order is None:
            order = TickOrder(trace)
        if capacity >= order.n_ids:
            # order.n_ids ≥ trace 里不同的块数。缓存里的块都是见过的块，永远不超容量，insert 从不调用 evict——
            # 和无限容量一模一样（LRU、LFU 类的 touch 都会把块放进缓存）。
            return infinite_hits(trace, per_block)
        if not per_block and not order.repeats:
            if cls is LRUCache:
                return lru_stack_hits(trace, (capacity,), order)[int(capacity)]
            return lfu_family_hits(trace, capacity, cls, order)
    cache = make_cache(capacity, policy)
    match, insert = cache.match, cache.insert
    if per_block:
        match = cache.count
    hits = np.zeros(len(offsets) - 1, dtype=np.int32)
    for i, blocks in enumerate(iter_block_lists(ids, offsets, CHUNK)):
        hits[i] = match(blocks)
        insert(blocks)
    return hits


# ---------------------------------------------------------------- LFU 类：次数 ≥ 2 的块永远不会被淘汰
def _is_plain_lfu(cls):
    """cls 是 LFUCache 或只改了 rank（次数相同时谁先走）的子类：可以用 lfu_family_hits。"""
    return (issubclass(cls, LFUCache) and cls.insert is LFUCache.insert and cls.touch is LFUCache.touch
            and cls.evict is LFUCache.evict)


def has_repeats(ids, offsets):
    """有没有哪个请求里同一个块出现了不止一次（真实 trace 和合成 trace 都没有；kv_trace_io 会报错）。"""
    for a, b, lo, hi, seg in _chunks(offsets):
        x = ids[lo:hi]
        order = np.lexsort((x, seg))
        xs, ss = x[order], seg[order]
        if ((xs[1:] == xs[:-1]) & (ss[1:] == ss[:-1])).any():
            return True
    return False


def _tick_order(offsets, a, b, lo, hi):
    """段内的访问按缓存"碰"它们的顺序排（每个请求从最后一块到第一块）：返回 (src, pos)，
    第 t 次碰的是段内原来的第 src[t] 次访问，它是请求里的第 pos[t] 块。

    >>> [x.tolist() for x in _tick_order(np.array([0, 2, 5]), 0, 2, 0, 5)]
    [[1, 0, 4, 3, 2], [1, 0, 2, 1, 0]]
    """
    lens = np.diff(offsets[a:b + 1])
    pos = np.repeat(offsets[a + 1:b + 1] - 1, lens) - np.arange(lo, hi)
    src = np.repeat(offsets[a:b] - lo, lens) + pos
    return src, pos


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


# ---------------------------------------------------------------- LRU：一遍算出所有容量（栈距离）
def lru_stack_hits(trace, capacities, order=None):
    """LRU 在每个容量下的前缀命中 {容量: (n,)}，和逐请求 match + LRUCache.insert 完全相同，但只算一遍：
    LRU 是栈算法（Mattson 等，1970），容量 c 的缓存 = 最近碰过的 c 个不同的块。

    按碰的顺序（每个请求从最后一块到第一块）给每次"碰"一个时刻 t。请求结束时才淘汰，淘汰的总是最久没碰的，
    所以请求 i 开始时（时刻 S）缓存里恰好是最近碰过的 c 个不同的块：块 x（上一次在时刻 A 被碰）在缓存里
    ⇔ 它的栈距离 d = [A, S) 里碰过的不同块数（含 x）≤ c。一个 d，所有容量都能用：
    - [A, S) 里每个不同的块恰好有一次"在这段里第一次出现"（它上一次被碰的时刻 < A）。所以
      d = #{q < S：prev(q) < A} − A（q < A 的 A 次访问一定满足 prev(q) < q < A，减掉）；
      "前 S 个数里有几个 < A" 由 _count_less 对所有访问一起算（小波矩阵，numpy）；
    - d ≤ S − A（这段一共才碰了 S − A 次）：S − A ≤ 最小的容量时一定命中，不用算。
    前缀命中 = 从第一块起连续几块的 d ≤ c（第一次出现的块 d = ∞）。要求同一请求里没有重复的块。
    """
    if order is None:
        order = TickOrder(trace)
    caps = np.array(sorted(set(int(c) for c in capacities)), dtype=np.int64)
    offsets, n_caps = order.offsets, len(caps)
    prev = _previous_touch(order.blocks, offsets)                  # -1：第一次
    levels = _wavelet(prev + 1)                                    # prev(q) < A ⇔ prev(q) + 1 < A + 1
    out = np.zeros((len(offsets) - 1, n_caps), dtype=np.int32)
    for a, b, lo, hi, seg in _chunks(offsets):                     # 一段一段算，不存整条 trace 的中间结果
        last = prev[lo:hi].astype(np.int64)                        # A（按碰的顺序；段号 seg 和原来一样）
        begin = offsets[a:b][seg]                                  # S：所在请求开始的时刻
        lv = np.full(hi - lo, n_caps, dtype=np.int64)              # 有几个容量 < d（n_caps：哪个容量都不命中）
        seen = last >= 0
        lv[seen & (begin - last <= caps[0])] = 0                   # 一定命中
        ask = seen & (begin - last > caps[0])
        dist = _count_less(levels, begin[ask], last[ask] + 1) - last[ask]
        lv[ask] = np.searchsorted(caps, dist)
        src, _pos = _tick_order(offsets, a, b, lo, hi)
        orig = np.empty_like(lv)
        orig[src] = lv                                             # 换回请求里的顺序
        out[a:b] = _prefix_counts(orig, seg, b - a, n_caps + 1)[:, :n_caps]
    return {int(c): out[:, k].copy() for k, c in enumerate(caps)}


def _previous_touch(blocks, offsets):
    """prev[t]：块 blocks[t] 上一次被碰的时刻（-1：第一次）。一段一段算：段内按块稳定排序，同一块的各次
    相邻，前一个就是"上一次"；段内第一次的查 last[块]（它在前面各段里最后一次被碰的时刻）。

    >>> _previous_touch(np.array([7, 8, 7, 7]), np.array([0, 2, 3, 4])).tolist()
    [-1, -1, 0, 2]
    """
    prev = np.empty(len(blocks), dtype=_index_type(len(blocks)))
    last = np.full(int(blocks.max(initial=-1)) + 1, -1, dtype=prev.dtype)
    for _a, _b, lo, hi, _seg in _chunks(offsets):
        d = blocks[lo:hi]
        order = np.argsort(d, kind="stable")
        ds = d[order]
        first = np.ones(len(ds), dtype=bool)
        first[1:] = ds[1:] != ds[:-1]
        p = np.empty(len(ds), dtype=prev.dtype)
        p[first] = last[ds[first]]
        p[1:][~first[1:]] = order[:-1][~first[1:]] + lo
        prev[lo + order] = p
        final = np.ones(len(ds), dtype=bool)                # 每块在这段里的最后一次
        final[:-1] = first[1:]
        last[ds[final]] = order[final] + lo
    return prev


def _index_type(n):
    """下标放得进 int32 就用 int32（省一半内存）。"""
    if n < 2 ** 31 - 1:
        return np.int32
    return np.int64


_WORD = 64           # _wavelet：每层的位按 64 个一组存成 uint64，外加每组之前有几个 1


def _wavelet(values):
    """小波矩阵（wavelet matrix）：_count_less 用的每一层（values 是非负整数）。

    从最高位起一位一位看：每一层把所有数按这一位稳定地分成 0 在前、1 在后两组，记下这一层每个数的这一位
    （64 个一组存成 uint64，外加每组之前有几个 1）和 0 的个数。每层只占每个数 1.5 位左右。
    """
    n = len(values)
    cur = np.array(values, dtype=_index_type(int(np.max(values, initial=0)) + 1))
    buf = np.empty_like(cur)
    one = np.empty(n, dtype=bool)
    n_words = n // _WORD + 1                                # 多一个字：位置 n 也能查
    levels = []
    for bit in range(int(np.max(cur, initial=0)).bit_length() - 1, -1, -1):
        for k in range(0, n, _SLICE):                       # 分片做：不建整列的临时数组
            np.not_equal(cur[k:k + _SLICE] & (1 << bit), 0, out=one[k:k + _SLICE])
        words = np.zeros(n_words, dtype="<u8")
        packed = np.packbits(one, bitorder="little")
        words.view(np.uint8)[:len(packed)] = packed
        before = np.zeros(n_words, dtype=_index_type(n))   # before[w]：第 w 个字之前有几个 1
        np.cumsum(_popcount(words[:-1]), out=before[1:])
        zeros = n - int(before[-1]) - int(_popcount(words[-1:])[0])
        levels.append((bit, zeros, words, before))
        n0, n1 = 0, zeros                                   # 稳定地分成两组：0 在前，1 在后
        for k in range(0, n, _SLICE):
            o, c = one[k:k + _SLICE], cur[k:k + _SLICE]
            ones = c[o]
            buf[n1:n1 + len(ones)] = ones
            n1 += len(ones)
            zs = c[~o]
            buf[n0:n0 + len(zs)] = zs
            n0 += len(zs)
        cur, buf = buf, cur
    return levels


_SLICE = 1 << 18


def _count_less(levels, ends, bounds):
    """对每个 j：values[:ends[j]] 里有几个数 < bounds[j]（levels = _wavelet(values)）。

    每个询问记着"和 bounds[j] 前面几位都相同的那些数"在这一层的位置区间 [lo, hi)。bounds[j] 这一位是 1 时，
    区间里这一位是 0 的数都更小，计入；然后跟着这一位走到下一层的 0 组或 1 组。每层几次整列的 numpy 运算。
    比 values 的最高位还高的那些位：bounds 在那里有 1，就比所有数都大。

    >>> _count_less(_wavelet(np.array([3, 0, 2, 5, 1])), np.array([5, 3, 0, 5]), np.array([3, 1, 9, 9])).tolist()
    [3, 1, 0, 5]
    """
    hi = np.asarray(ends, dtype=np.int64)
    bounds = np.asarray(bounds, dtype=np.int64)
    lo, res = np.zeros_like(hi), np.zeros_like(hi)
    if levels:
        over = (bounds >> (levels[0][0] + 1)) > 0           # bounds 比所有数都大：前 ends 个全算
    else:
        over = bounds > 0                                    # 所有数都是 0
    for bit, zeros, words, before in levels:
        o_lo, o_hi = _ones_before(words, before, lo), _ones_before(words, before, hi)
        up = ((bounds >> bit) & 1).astype(bool)
        res += np.where(up, (hi - lo) - (o_hi - o_lo), 0)   # 区间里这一位是 0 的：比 bound 小
        lo = np.where(up, zeros + o_lo, lo - o_lo)
        hi = np.where(up, zeros + o_hi, hi - o_hi)
    return np.where(over, np.asarray(ends, dtype=np.int64), res)


def _ones_before(words, before, p):
    """这一层前 p 个位里有几个 1（p 是数组）。"""
    w = p // _WORD
    mask = (np.uint64(1) << (p % _WORD).astype(np.uint64)) - np.uint64(1)
    return before[w] + _popcount(words[w] & mask)


def _popcount(x):
    """uint64 数组每个数里 1 的个数（numpy ≥ 2 有 bitwise_count；1.26 用 _popcount_by_table）。"""
    if hasattr(np, "bitwise_count"):
        return np.bitwise_count(x).astype(np.int64)
    return _popcount_by_table(x)


_POP16 = []          # 0..65535 每个数里 1 的个数（第一次用时才建）


def _popcount_by_table(x):
    """同 _popcount，按 16 位查表。

    >>> _popcount_by_table(np.array([0, 1, 2 ** 64 - 1, 0b1011 << 40], dtype=np.uint64)).tolist()
    [0, 1, 64, 3]
    """
    if not len(_POP16):
        _POP16.append(np.array([bin(i).count("1") for i in range(1 << 16)], dtype=np.int64))
    return _POP16[0][np.ascontiguousarray(x, dtype="<u8").view(np.uint16).reshape(-1, 4)].sum(axis=1)


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
    """MIN 的几个格子共用的准备工作（sweep 在 fork 之前算一次）：

    nxt      next_use(trace)
    live     max_live(nxt, offsets)：容量 ≥ 它时 MIN 什么都不用淘汰
    seen     每个请求里"以前出现过"的块数（infinite_hits 的逐块口径）= 在这个请求结束的区间数
    repeats  有没有哪个请求里同一块出现了不止一次
    """

    __slots__ = ("nxt", "live", "seen", "repeats")

    def __init__(self, trace, repeats=None):
        ids, offsets = columns(trace)
        self.nxt = next_use(trace)
        self.live = max_live(self.nxt, offsets)
        self.seen = infinite_hits(trace, per_block=True)
        if repeats is None:
            repeats = has_repeats(ids, offsets)
        self.repeats = repeats


def min_hits(trace, capacity, prep=None):
    """Belady 的 MIN：每个请求数逐块命中，再把这个请求的块放进缓存；超出容量时淘汰"下一次用到最晚"的块
    （再也不用的块直接不留）。这是逐块命中的最优解，所以也是任何策略前缀命中的上界。

    看成区间：第 p 次访问（请求 i，块 x，下一次在请求 nu）如果 nu 存在，就要把 x 从请求 i 留到请求 nu
    （"开一个区间"）；留住了，请求 nu 就命中 x。缓存 = 还没结束、也没被淘汰的区间。超出容量时淘汰 nu 最大的
    （最大堆，键 = -(nu · 2^block_bits + x)；nu 相同的几块谁先走都一样——它们会在同一个请求里一起被用到——
    堆里按块编号排）。于是：
    - 请求 i 的命中 = 在请求 i 结束的区间数（= 块在更早的请求里出现过的访问数，infinite_hits 的逐块口径）
      − 其中被淘汰了的个数（淘汰时记在 evicted[nu] 上）；
    - 堆里 nu ≤ i 的记录是已经结束的区间（旧记录），nu > i 的都还在缓存里：要淘汰时堆顶一定是有效的。
    每次访问只要把新区间的键（numpy 预先算好）压进堆里，不用逐块查缓存。同一请求里有重复的块时
    （只在手写的小例子里）改用逐块的 _min_hits_by_block。prep：MinPrep(trace)（sweep 预先算好）。
    """
    if capacity is None:                      # 不淘汰：以前见过的块都命中
        return infinite_hits(trace, per_block=True)
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


# ---------------------------------------------------------------- 一次算完整张表（两个核一起）
_SHARED = None   # fork 出的子进程直接继承这份数据（trace 的两列、TickOrder），不用序列化


def _run(task):
    p, c = task
    trace, order = _SHARED
    if not isinstance(c, tuple):
        return simulate(trace, c, p, order=order)
    if p == "lru":                            # LRU 的所有容量：一遍算完
        return lru_stack_hits(trace, c, order)
    repeats = None                            # MIN 的所有容量：准备工作（MinPrep）在这个工作进程里只做一次
    if order is not None:
        repeats = order.repeats
    prep = MinPrep(trace, repeats)
    return {cap: min_hits(trace, cap, prep) for cap in c}


def _cost(task):
    """粗略的相对耗时：先派最慢的，两个核的负载更均衡（在合成 trace 和 12 万请求的 trace 上量过）。
    LFU 类容量越大越慢（小容量时 hot 的块很快占满缓存，后面不用模拟）；位置决定先后的（LengthAware）更慢。"""
    p, c = task
    if isinstance(c, tuple):
        return 4.0
    if p == "lru":
        return 1.0
    cls = CACHE_POLICIES[p]
    if not _is_plain_lfu(cls):
        return 2.5
    cost = 2.0 + min(c, 100_000) / 100_000
    if cls.rank is not LFUCache.rank:
        cost += 0.5
    return cost


def sweep(trace, capacities, policies, workers=None, extra=(), background=False):
    """{(policy, capacity): 每个请求的命中块数}：policies × capacities 的每一格，再加上 extra 里单独列出的
    (policy, capacity) 格（比如只在一个容量上算的对照行）。各格互相独立，分给多个进程并行算。

    无限容量用闭式解（在线策略都相同；"min" 的是逐块命中）。
    workers=None：用本机可用的核数（最多 4 个）。
    background=True：工作进程在后台算，马上返回一个 SweepResult（用法和 dict 一样，第一次读它时才等
    算完）；调用者可以先做别的事（04 趁这段时间跑演示 1、2）。
    """
    global _SHARED
    cells = list(dict.fromkeys([(p, c) for p in policies for c in capacities] + [tuple(e) for e in extra]))
    for p, c in cells:
        check_policy_args(c, p, (*CACHE_POLICIES, "min"))
    cols = columns(trace)
    out = {}
    if any(c is None for _, c in cells):
        inf = infinite_hits(_Columns(cols))
        out.update({(p, None): inf for p, c in cells if c is None and p != "min"})
        if ("min", None) in cells:
            out[("min", None)] = infinite_hits(_Columns(cols), per_block=True)
    tasks = [(p, c) for p, c in cells if c is not None]
    order = None
    if any(p != "min" and (_is_plain_lfu(CACHE_POLICIES[p]) or CACHE_POLICIES[p] is LRUCache) for p, _ in tasks):
        order = TickOrder(_Columns(cols))
    lru = tuple(c for p, c in tasks if p == "lru")
    if len(lru) > 1 and not order.repeats:     # LRU 是栈算法：所有容量合成一格，一遍算完
        tasks = [t for t in tasks if t[0] != "lru"] + [("lru", lru)]
    bound = tuple(c for p, c in tasks if p == "min")
    if bound:                                  # MIN 的几个容量合成一格：共用一份 MinPrep
        tasks = [t for t in tasks if t[0] != "min"] + [("min", bound)]
    if workers is None:
        workers = min(4, _n_cores())
    tasks.sort(key=_cost, reverse=True)
    _SHARED = (_Columns(cols), order)
    try:
        if workers > 1 and len(tasks) > 1 and "fork" in _start_methods():
            import multiprocessing as mp
            pool = mp.get_context("fork").Pool(workers)      # 工作进程在这里 fork，继承 _SHARED
            result = SweepResult(out, tasks, pool.map_async(_run, tasks, chunksize=1), pool)
            if background:
                return result
            return result.dict()
        results = [_run(t) for t in tasks]
    finally:
        _SHARED = None
    _collect(out, tasks, results)
    if background:
        return SweepResult(out, (), None, None)
    return out


def _collect(out, tasks, results):
    """把各格的结果放进 out：{(policy, capacity): hits}（LRU、MIN 合并的那一格给出 {容量: hits}）。"""
    for (p, c), hits in zip(tasks, results):
        if isinstance(c, tuple):
            out.update({(p, cap): hits[cap] for cap in c})
        else:
            out[(p, c)] = hits


class SweepResult(Mapping):
    """sweep(..., background=True) 的结果：像只读的 dict 一样用；第一次读时等工作进程算完，然后关掉它们。"""

    def __init__(self, done, tasks, pending, pool):
        self._done, self._tasks, self._pending, self._pool = done, tasks, pending, pool

    def dict(self):
        """等算完，返回普通的 dict。"""
        if self._pending is not None:
            try:
                results = self._pending.get()
            finally:
                self._pool.terminate()
                self._pool.join()
                self._pending = self._pool = None
            _collect(self._done, self._tasks, results)
        return self._done

    def __getitem__(self, key):
        return self.dict()[key]

    def __iter__(self):
        return iter(self.dict())

    def __len__(self):
        return len(self.dict())


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
