"""按到达顺序把 trace 喂给缓存，数命中：simulate（一个容量、一种策略）、hit_ratio、一次算完整张表的 sweep。

跑的就是 kv_store.eviction 里的类：cls(capacity)，然后每个请求先 match（数前缀命中）再 insert。
你改了哪个类，这里算出的每个数就来自改过的类。

    >>> blocks = [(1, 2), (1, 2, 3), (4,), (1, 2)]
    >>> simulate(blocks, 2, "lru").tolist()       # 每个请求的前缀命中块数；容量 2
    [0, 2, 0, 1]

    （第 3 个请求挤掉了最旧的子块 2，父块 1 还在：第 4 个请求只命中 1 块。）
    >>> simulate(blocks, None, "lfu").tolist()    # 无限容量：任何策略都一样
    [0, 2, 0, 2]

"min"：Belady 的 MIN（离线最优，要预知未来，真实系统做不到），见 kv_store.belady.min_hits。它数的是逐块命中
（请求的块只要在缓存里就算，不要求从开头连续），这是任何策略前缀命中的上界：
前缀命中 ≤ 同一个缓存的逐块命中 ≤ MIN 的逐块命中。sweep(..., policies=("lru", "min")) 直接可用。
"""
import contextlib
import io
import multiprocessing
import os
import signal
import sys

import numpy as np

from kv_store.belady import MinPrep, min_hits
from kv_store.eviction import CACHE_POLICIES, check_policy_args
from kv_store.traces import BlockLists, columns, iter_block_lists


def simulate(trace, capacity, policy, per_block=False):
    """按到达顺序跑一遍：cache = 策略类(capacity)，每个请求先 match 再 insert。返回每个请求的命中块数 (n_requests,)。

    per_block=True：改数逐块命中（cache.count）。policy="min"：Belady 的 MIN，总是逐块命中。
    """
    check_policy_args(capacity, policy, (*CACHE_POLICIES, "min"))
    if policy == "min":
        return min_hits(trace, capacity)
    cache = CACHE_POLICIES[policy](capacity)
    look = cache.match                       # 前缀命中
    if per_block:
        look = cache.count                   # 逐块命中
    ids, offsets = columns(trace)
    hits = np.zeros(len(offsets) - 1, dtype=np.int32)
    for i, blocks in enumerate(iter_block_lists(ids, offsets)):
        hits[i] = look(blocks)
        cache.insert(blocks)
    return hits


def hit_ratio(trace, capacity, policy):
    """命中的块数 / 全部块数（前缀命中）。trace：Trace 或 Request 的列表。"""
    ids, _ = columns(trace)
    return simulate(trace, capacity, policy).sum() / max(1, len(ids))


def sweep(trace, capacities, policies, extra=(), workers=None):
    """{(policy, capacity): 每个请求的命中块数}：policies × capacities 的每一格，再加上 extra 里单独列出的
    (policy, capacity) 格（比如只在一个容量上算的对照行）。每格 = simulate(trace, capacity, policy)。

    各格互相独立：分给 workers 个进程（None：本机的核数，最多 4 个；1：就在本进程里逐格算），
    每格的参数（trace 的两列、容量、策略名）显式传过去。MIN 的几个容量合成一格，共用一份准备工作。
    """
    cells = list(dict.fromkeys([(p, c) for p in policies for c in capacities] + [tuple(e) for e in extra]))
    for p, c in cells:
        check_policy_args(c, p, (*CACHE_POLICIES, "min"))
    blocks = columns(trace)
    bound = tuple(c for p, c in cells if p == "min")
    tasks = [(blocks, p, (c,)) for p, c in cells if p != "min"]
    tasks.sort(key=lambda t: t[1] == "lru")          # LRU 的格子最快：放在最后，两个核一起收尾
    if bound:
        tasks.insert(0, (blocks, "min", bound))      # 最大的一格先派
    if workers is None:
        workers = min(4, n_cores())
    out = {}
    for (_, p, caps), hits in zip(tasks, run_cells(tasks, workers)):
        out.update({(p, c): h for c, h in zip(caps, hits)})
    return {cell: out[cell] for cell in cells}


def one_cell(blocks, policy, capacities):
    """sweep 的一格：policy 在每个容量下的命中（MIN 的几个容量共用一份 MinPrep）。blocks = columns(trace)。"""
    trace = BlockLists(*blocks)
    if policy == "min":
        prep = MinPrep(trace)
        return [min_hits(trace, c, prep) for c in capacities]
    return [simulate(trace, c, policy) for c in capacities]


def run_cells(tasks, workers):
    """[one_cell(*t) for t in tasks]。workers > 1 且能 fork 时分给一个 fork 出的进程池（先派的先算）；
    工作进程继承此刻的策略类（测试里换过的也一样），参数显式传过去。"""
    if workers < 2 or len(tasks) < 2 or "fork" not in multiprocessing.get_all_start_methods():
        return [one_cell(*t) for t in tasks]
    pool = multiprocessing.get_context("fork").Pool(min(workers, len(tasks)), initializer=signal.signal,
                                                    initargs=(signal.SIGINT, signal.SIG_IGN))   # Ctrl-C 只给主进程
    try:
        results = pool.starmap(_guarded_cell, tasks, chunksize=1)
    finally:
        pool.terminate()
        pool.join()
    for r in results:
        if isinstance(r, SystemExit):      # 一格一行拒绝了（比如 evict() 什么也没删）：只印第一格的那一行
            print(r.line, end="", file=sys.stderr)
            raise SystemExit(r.code)
    return results


def _guarded_cell(*task):
    """工作进程里的一格。fail() 的 SystemExit 不能就这样抛（进程池会一直等这个工作进程）：连同那一行交回主进程。"""
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            return one_cell(*task)
    except SystemExit as e:
        e.line = err.getvalue()
        return e


def n_cores():
    """这个进程能用的核数。"""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1
