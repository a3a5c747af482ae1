"""按到达顺序把 trace 喂给缓存，数命中：simulate（一个容量、一种策略）、hit_ratio、一次算完整张表的 sweep。

simulate 跑的就是 kv_store.eviction 里的类（class_hits）：每个请求先 match 再 insert。

    >>> blocks = [(1, 2), (1, 2, 3), (4,), (1, 2)]
    >>> simulate(blocks, 2, "lru").tolist()       # 每个请求的前缀命中块数；容量 2
    [0, 2, 0, 1]

    （第 3 个请求挤掉了最旧的子块 2，父块 1 还在：第 4 个请求只命中 1 块。）
    >>> simulate(blocks, None, "lfu").tolist()    # 无限容量：任何策略都一样
    [0, 2, 0, 2]

"min"：Belady 的 MIN（离线最优，要预知未来，真实系统做不到），见 kv_store.belady.min_hits。它数的是逐块命中
（请求的块只要在缓存里就算，不要求从开头连续），这是任何策略前缀命中的上界：
前缀命中 ≤ 同一个缓存的逐块命中 ≤ MIN 的逐块命中。sweep(..., policies=("lru", "min")) 直接可用。

快速引擎：类和发布时一字不差（kv_store.sim_guard.fast_engine 比对指纹）时，才换成算得快的等价做法
（每条都和类逐请求比对过，见 tests/test_properties.py）；你改了类或注册了新类，跑的就是你的类：
- 无限容量：闭式解 kv_store.sim_base.infinite_hits；容量不少于 trace 里不同的块数时也一样（从来不用淘汰）；
- LRU：栈算法，一遍算出所有容量（kv_store.sim_lru.lru_stack_hits）；
- LFU 类（LFU、LengthAware 和对照组）：kv_store.sim_lfu.lfu_family_hits；
- sweep：各格分给多个进程（fork），LRU、MIN 的所有容量各合成一格；background=True 在后台算。
"""
from collections.abc import Mapping

import numpy as np

from kv_store.eviction import CACHE_POLICIES, LFUCache, check_policy_args
from kv_store.sim_base import block_lists, columns, fork_map, infinite_hits, n_cores
from kv_store.sim_guard import fast_engine
from kv_store.sim_lfu import TickOrder, lfu_family_hits
from kv_store.sim_lru import lru_stack_hits
from kv_store.belady import MinPrep, min_hits


# ---------------------------------------------------------------- 通用：一个容量、一个策略
def simulate(trace, capacity, policy, per_block=False, prep=None, order=None):
    """按到达顺序跑一遍：每个请求先 match 再 insert。返回每个请求的前缀命中块数 (n_requests,)。

    per_block=True：改数逐块命中（count）。policy="min"：Belady 的 MIN，总是逐块命中；
    prep 是 MinPrep(trace)，order 是 TickOrder(trace)（sweep 预先算好一次，各个格子共用）。
    """
    check_policy_args(capacity, policy, (*CACHE_POLICIES, "min"))
    if policy == "min":
        return min_hits(trace, capacity, prep)
    cls = CACHE_POLICIES[policy]
    engine = fast_engine(cls)
    if engine is None or per_block:
        return class_hits(trace, capacity, cls, per_block)
    return _fast_hits(trace, capacity, cls, engine, order)


def class_hits(trace, capacity, cls, per_block=False):
    """照原样跑策略类 cls：建一个容量 capacity 的缓存，每个请求先 match（per_block：count）再 insert。"""
    cache = cls(capacity)
    match, insert = cache.match, cache.insert
    if per_block:
        match = cache.count
    ids, offsets = columns(trace)
    hits = np.zeros(len(offsets) - 1, dtype=np.int32)
    for i, blocks in enumerate(block_lists(ids, offsets)):
        hits[i] = match(blocks)
        insert(blocks)
    return hits


def _fast_hits(trace, capacity, cls, engine, order=None):
    """快速引擎（engine = fast_engine(cls)，cls 是发布时的类）：结果和 class_hits(trace, capacity, cls) 相同。"""
    if capacity is None:
        return infinite_hits(trace)
    if order is None:
        order = TickOrder(trace)
    if capacity >= order.n_ids:
        # order.n_ids ≥ trace 里不同的块数。缓存里的块都是见过的块，永远不超容量，insert 从不调用 evict——
        # 和无限容量一模一样（LRU、LFU 类的 touch 都会把块放进缓存）。
        return infinite_hits(trace)
    if order.repeats:                         # 同一请求里有重复的块（只在手写的小例子里）：快速引擎的前提不成立
        return class_hits(trace, capacity, cls)
    if engine == "lru":
        return lru_stack_hits(trace, (capacity,), order)[int(capacity)]
    return lfu_family_hits(trace, capacity, cls, order)


def hit_ratio(trace, capacity, policy):
    """命中的块数 / 全部块数（前缀命中）。trace：Trace 或 Request 的列表。"""
    ids, offsets = columns(trace)
    return simulate(trace, capacity, policy).sum() / max(1, len(ids))


# ---------------------------------------------------------------- 一次算完整张表（两个核一起）
_SHARED = None   # fork 出的子进程直接继承这份数据（trace 的两列、TickOrder、各策略的快速引擎），不用序列化


def _run(task):
    p, c = task
    trace, order, engines = _SHARED
    if isinstance(c, tuple) and p == "min":   # MIN 的所有容量：准备工作（MinPrep）在这个工作进程里只做一次
        repeats = None
        if order is not None:
            repeats = order.repeats
        prep = MinPrep(trace, repeats)
        return {cap: min_hits(trace, cap, prep) for cap in c}
    if isinstance(c, tuple):                  # LRU（发布的类）的所有容量：栈算法，一遍算完
        return lru_stack_hits(trace, c, order)
    cls = CACHE_POLICIES[p]
    if engines[p] is None:
        return class_hits(trace, c, cls)
    return _fast_hits(trace, c, cls, engines[p], order)


def _cost(task, engines):
    """粗略的相对耗时：先派最慢的，两个核的负载更均衡（在合成 trace 和 12 万请求的 trace 上量过）。
    跑类本身的格子最慢；LFU 类容量越大越慢（小容量时 hot 的块很快占满缓存，后面不用模拟）；
    位置决定先后的（LengthAware）更慢。"""
    p, c = task
    if isinstance(c, tuple):
        return 4.0
    engine = engines[p]
    if engine is None:
        return 5.0
    if engine == "lru":
        return 1.0
    cost = 2.0 + min(c, 100_000) / 100_000
    if CACHE_POLICIES[p].rank is not LFUCache.rank:
        cost += 0.5
    return cost


def sweep(trace, capacities, policies, workers=None, extra=(), background=False):
    """{(policy, capacity): 每个请求的命中块数}：policies × capacities 的每一格，再加上 extra 里单独列出的
    (policy, capacity) 格（比如只在一个容量上算的对照行）。各格互相独立，分给多个进程并行算。
    每格的结果和 simulate(trace, capacity, policy) 相同（发布的类用快速引擎，其余跑类本身）。

    workers=None：用本机可用的核数（最多 4 个）。
    background=True：工作进程在后台算，马上返回一个 SweepResult（用法和 dict 一样，第一次读它时才等
    算完）；调用者可以先做别的事（04 趁这段时间跑演示 1、2）。
    """
    global _SHARED
    cells = list(dict.fromkeys([(p, c) for p in policies for c in capacities] + [tuple(e) for e in extra]))
    for p, c in cells:
        check_policy_args(c, p, (*CACHE_POLICIES, "min"))
    engines = {p: fast_engine(CACHE_POLICIES[p]) for p, _ in cells if p != "min"}   # 此刻的类：改过就跑类本身
    cols = columns(trace)
    out = {}
    closed = [(p, c) for p, c in cells if c is None and (p == "min" or engines[p] is not None)]
    if closed:                                 # 无限容量的闭式解（MIN 的是逐块命中）
        inf = infinite_hits(_Columns(cols))
        out.update({(p, None): inf for p, c in closed if p != "min"})
        if ("min", None) in closed:
            out[("min", None)] = infinite_hits(_Columns(cols), per_block=True)
    tasks = [(p, c) for p, c in cells if (p, c) not in out]
    order = None
    if any(p != "min" and engines[p] is not None for p, _ in tasks):
        order = TickOrder(_Columns(cols))
    for p in dict.fromkeys(p for p, _ in tasks if p != "min" and engines[p] == "lru"):
        lru = tuple(c for q, c in tasks if q == p)
        if len(lru) > 1 and not order.repeats:    # LRU 是栈算法：所有容量合成一格，一遍算完
            tasks = [t for t in tasks if t[0] != p] + [(p, lru)]
    bound = tuple(c for p, c in tasks if p == "min")
    if bound:                                  # MIN 的几个容量合成一格：共用一份 MinPrep
        tasks = [t for t in tasks if t[0] != "min"] + [("min", bound)]
    if workers is None:
        workers = min(4, n_cores())
    tasks.sort(key=lambda t: _cost(t, engines), reverse=True)
    _SHARED = (_Columns(cols), order, engines)
    try:
        finish = fork_map(_run, tasks, workers, wait=False)     # 工作进程在这里 fork，继承 _SHARED
    finally:
        _SHARED = None
    result = SweepResult(out, tasks, finish)
    if background:
        return result
    return result.dict()


def _collect(out, tasks, results):
    """把各格的结果放进 out：{(policy, capacity): hits}（LRU、MIN 合并的那一格给出 {容量: hits}）。"""
    for (p, c), hits in zip(tasks, results):
        if isinstance(c, tuple):
            out.update({(p, cap): hits[cap] for cap in c})
        else:
            out[(p, c)] = hits


class SweepResult(Mapping):
    """sweep(..., background=True) 的结果：像只读的 dict 一样用；第一次读时等工作进程算完，然后关掉它们。"""

    def __init__(self, done, tasks, finish):
        self._done, self._tasks, self._finish = done, tasks, finish    # finish：fork_map(..., wait=False) 的返回值

    def dict(self):
        """等算完，返回普通的 dict。"""
        if self._finish is not None:
            try:
                results = self._finish()
            finally:
                self._finish = None
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

