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
import gc

import numpy as np

from lab_common.console import fail
from lab_common.workers import run_jobs
from kv_store.belady import min_hits, min_sweep
from kv_store.eviction import CACHE_POLICIES, NoEviction, check_policy_args
from kv_store.traces import BlockLists, columns, iter_block_lists


def simulate(trace, capacity, policy, per_block=False):
    """按到达顺序跑一遍：cache = 策略类(capacity)，每个请求先 match 再 insert。返回每个请求的命中块数 (n_requests,)。

    per_block=True：改数逐块命中（cache.count）。policy="min"：Belady 的 MIN，总是逐块命中。
    policy 也可以直接是一个类（或任何 policy(capacity) 就建出一个有 match、insert 的缓存的东西），
    比如 functools.partial(RadixCache, rule="trim")：04b 这样把基数树和 LRU 放进同一次 sweep。
    """
    check_policy_args(capacity, policy, (*CACHE_POLICIES, "min"))
    if policy == "min":
        return min_hits(trace, capacity)
    cache = CACHE_POLICIES.get(policy, policy)(capacity)      # 名字：查注册表；类：直接用
    look = cache.match                       # 前缀命中
    if per_block:
        look = cache.count                   # 逐块命中
    hits = []
    collecting = gc.isenabled()
    gc.disable()             # 回放只产生不成环的小对象（元组、列表），引用计数就即时回收；循环垃圾回收器却要
    try:                     # 一遍遍扫缓存里几十万个对象（一格多花 25–40% 的时间）：回放期间关掉它
        for blocks in iter_block_lists(*columns(trace)):
            hits.append(look(blocks))
            cache.insert(blocks)
    finally:
        if collecting:
            gc.enable()
    return np.array(hits, dtype=np.int32)


def hit_ratio(trace, capacity, policy):
    """命中的块数 / 全部块数（前缀命中）。trace：Trace 或 Request 的列表。"""
    ids, _ = columns(trace)
    return simulate(trace, capacity, policy).sum() / max(1, len(ids))


def sweep(trace, capacities, policies, extra=(), workers=None):
    """{(policy, capacity): 每个请求的命中块数}：policies × capacities 的每一格，再加上 extra 里单独列出的
    (policy, capacity) 格（比如只在一个容量上算的对照行）。每格 = simulate(trace, capacity, policy)。

    各格互相独立：交给 lab_common.workers.run_jobs 分给 workers 个进程（None：本机的核数，最多 4 个；1：就在
    本进程里逐格算），每格的参数（trace 的两列、容量、策略名）显式传过去；工作进程是 fork 出来的，用的是此刻的
    策略类（你改过的、测试里换过的也一样）。MIN 的几个容量合成一格（belady.min_sweep），共用一份准备工作。
    evict() 一块也没删（NoEviction）：一行拒绝，退出码 2。
    """
    cells = list(dict.fromkeys([(p, c) for p in policies for c in capacities] + [tuple(e) for e in extra]))
    for p, c in cells:
        check_policy_args(c, p, (*CACHE_POLICIES, "min"))
    blocks = BlockLists(*columns(trace))
    bound = tuple(c for p, c in cells if p == "min")
    online = sorted((cell for cell in cells if cell[0] != "min"), key=lambda cell: cell[0] == "lru")   # LRU 最快：最后派
    jobs = [(simulate, (blocks, c, p)) for p, c in online]
    if bound:
        jobs.insert(0, (min_sweep, (blocks, bound)))         # 最大的一格先派
    try:
        results = run_jobs(jobs, workers)
    except NoEviction as e:
        fail(*e.args)
    out = dict(zip(online, results[len(jobs) - len(online):]))
    if bound:
        out.update(zip([("min", c) for c in bound], results[0]))
    return {cell: out[cell] for cell in cells}

