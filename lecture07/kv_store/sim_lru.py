"""LRU 在所有容量下的前缀命中，一遍算完（lru_stack_hits）：栈距离，"前 S 个数里有几个 < A" 用 numpy 的
小波矩阵（_wavelet、_count_less）数。

    >>> lru_stack_hits([(1, 2), (1, 2, 3), (4,), (1, 2)], (2, 3))[2].tolist()    # = simulate(..., 2, "lru")
    [0, 2, 0, 1]
"""
import numpy as np

from kv_store.sim_base import _chunks, _index_type, _prefix_counts, _tick_order
from kv_store.sim_lfu import TickOrder


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
