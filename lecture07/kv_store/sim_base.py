"""kv_store.replay 各算法共用的小工具：trace → 两列数组（columns）、块 id 压成小整数（dense_ids）、按 CHUNK 个请求
分段（_chunks）、前缀命中计数（_prefix_counts）、无限容量的闭式解（infinite_hits），以及 fork 进程池（fork_map）。

    >>> ids, offsets = columns([(1, 2), (1, 2, 3), (4,)])
    >>> ids.tolist(), offsets.tolist()
    ([1, 2, 1, 2, 3, 4], [0, 2, 5, 6])
    >>> infinite_hits([(1, 2), (1, 2, 3), (4,), (1, 2)]).tolist()
    [0, 2, 0, 2]
"""
import itertools
import os

import numpy as np

from kv_store.traces import CHUNK, iter_block_lists


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
    """把块 id 换成 0..D-1 的小整数（访问的模式不变），返回 (新 id, D)。id 本来就不大时原样用。

    同一个 trace 的 id 会被好几处换（sweep 的准备、MIN、04 的统计）：记住最近一次的结果（只读数组），
    同一个数组再来时直接给。大 trace 上换一次要排序几百万个数，内存按 int32 的结果另加一份排好的不同 id。
    """
    if len(ids) == 0:
        return ids, 0
    if ids.min() >= 0 and ids.max() < 4 * len(ids) + 1024:
        return ids, int(ids.max()) + 1
    if _DENSE[0] is ids:
        return _DENSE[1]
    uniq = np.sort(ids)                                      # 排序再去重（比 np.unique 省内存，numpy 2.4 上也快得多）
    keep = np.empty(len(uniq), dtype=bool)
    keep[0] = True
    np.not_equal(uniq[1:], uniq[:-1], out=keep[1:])
    uniq = uniq[keep]
    dense = np.empty(len(ids), dtype=_index_type(len(uniq)))
    for k in range(0, len(ids), _PIECE):                     # 分段查：不建整列的 int64 临时数组
        dense[k:k + _PIECE] = np.searchsorted(uniq, ids[k:k + _PIECE])
    dense.flags.writeable = False
    _DENSE[:] = [ids, (dense, len(uniq))]
    return dense, len(uniq)


_DENSE = [None, None]     # (最近一次的 ids 数组, dense_ids 的结果)
_PIECE = 1 << 18


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
    """(dense, first)：dense 是 dense_ids(ids)[0]；first[d] = 块 d 第一次出现的请求号。同一对数组再来时直接给上次的结果。"""
    if _FIRST[0] is ids and _FIRST[1] is offsets:
        return _FIRST[2]
    dense, n_ids = dense_ids(ids)
    first = np.full(n_ids, len(offsets), dtype=np.int64)
    for a, b, lo, hi, seg in _chunks(offsets):
        np.minimum.at(first, dense[lo:hi], seg + a)
    first.flags.writeable = False
    _FIRST[:] = [ids, offsets, (dense, first)]
    return dense, first


_FIRST = [None, None, None]   # (ids, offsets, first_request 的结果)


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


def has_repeats(ids, offsets):
    """有没有哪个请求里同一个块出现了不止一次（真实 trace 和合成 trace 都没有；kv_store.trace_file 会报错）。"""
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


def _index_type(n):
    """下标放得进 int32 就用 int32（省一半内存）。"""
    if n < 2 ** 31 - 1:
        return np.int32
    return np.int64


def block_lists(ids, offsets):
    """每个请求的块（Python 列表），每次只转换 CHUNK 个请求（iter_block_lists）。"""
    return iter_block_lists(ids, offsets, CHUNK)


# ---------------------------------------------------------------- fork 进程池：sweep、radix_sweep 共用
def fork_map(fn, tasks, workers, wait=True):
    """[fn(t) for t in tasks]：workers > 1、任务不止一个、系统能 fork 时分给 fork 出的 workers 个进程
    （子进程继承调用者先放在模块全局里的数据，不用序列化；tasks 按顺序一个一个派，先派的先算），否则在本进程里逐个算。
    wait=False：马上返回 finish()，调用它才等结果（然后关掉进程池）；调用者可以先做别的事。

    >>> fork_map(abs, [-1, 2, -3], workers=1)
    [1, 2, 3]
    """
    tasks = list(tasks)
    if workers > 1 and len(tasks) > 1 and "fork" in _start_methods():
        import multiprocessing as mp
        pool = mp.get_context("fork").Pool(workers)          # 工作进程在这里 fork，继承调用者的全局数据
        pending = pool.map_async(fn, tasks, chunksize=1)

        def finish():
            try:
                return pending.get()
            finally:
                pool.terminate()
                pool.join()
    else:
        results = [fn(t) for t in tasks]

        def finish():
            return results
    if wait:
        return finish()
    return finish


def n_cores():
    """这个进程能用的核数。"""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _start_methods():
    import multiprocessing as mp
    return mp.get_all_start_methods()


def usable_hit_tokens(hit_blocks, input_len, block_size):
    """命中的前缀里真正用得上的 token 数：最后一个 token 总要重算（才能得到第一个输出），所以最多 输入 − 1 个。
    全讲的"命中"都按这一条算（04 演示 3、4，04b，05；kv_store.cluster.hit_tokens 是它的单个请求版）。

    >>> usable_hit_tokens([2, 2, 1, 0], [2000, 1024, 1, 5], 512).tolist()     # 1 个 token 的请求：一个也用不上
    [1024, 1023, 0, 0]
    """
    tokens = np.minimum(np.asarray(hit_blocks, np.int64) * block_size, np.asarray(input_len, np.int64) - 1)
    return np.maximum(tokens, 0)


def usable_hits(hit_blocks, input_len, block_size):
    """用得上的前缀命中块：装着至少一个用得上的 token 的块（= ceil(usable_hit_tokens / block_size)）。
    模拟器数的是缓存里找到的块；这个数才是前缀命中率的分子。

    >>> usable_hits([2, 2, 1, 3], [2000, 1024, 1, 1025], 512).tolist()   # 1,024 个 token 全命中：第 2 块还有 511 个能用
    [2, 2, 0, 2]
    """
    return -(-usable_hit_tokens(hit_blocks, input_len, block_size) // block_size)
