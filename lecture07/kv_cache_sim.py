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
各算法各在一个模块里：kv_sim_lru（栈距离）、kv_sim_lfu（LFU 类）、kv_sim_min（MIN），共用的小工具在 kv_sim_base。
"""
from collections.abc import Mapping

import numpy as np

from kv_cache_policies import CACHE_POLICIES, LFUCache, LRUCache, check_policy_args, make_cache
from kv_sim_base import block_lists, columns, fork_map, infinite_hits, n_cores
from kv_sim_lfu import TickOrder, _is_plain_lfu, lfu_family_hits
from kv_sim_lru import lru_stack_hits
from kv_sim_min import MinPrep, min_hits


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
    for i, blocks in enumerate(block_lists(ids, offsets)):
        hits[i] = match(blocks)
        insert(blocks)
    return hits


def hit_ratio(trace, capacity, policy):
    """命中的块数 / 全部块数（前缀命中）。trace：Trace 或 Request 的列表。"""
    ids, offsets = columns(trace)
    return simulate(trace, capacity, policy).sum() / max(1, len(ids))


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
        workers = min(4, n_cores())
    tasks.sort(key=_cost, reverse=True)
    _SHARED = (_Columns(cols), order)
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

