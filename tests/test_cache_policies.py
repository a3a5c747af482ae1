"""缓存策略：手算得出的小例子（同一个检查跑 LRU / LFU / LengthAware），MIN 的手算例子和穷举最优。"""
import itertools

import numpy as np
import pytest

from kv_cache_policies import CACHE_POLICIES, make_cache
from kv_cache_sim import hit_ratio, infinite_hits, min_hits, next_use, simulate, sweep
from kv_trace import Request

ONLINE = list(CACHE_POLICIES)


@pytest.mark.parametrize("policy,after_evict", [("lru", 2), ("lfu", 2), ("lengthaware", 0)])
def test_one_eviction(policy, after_evict):
    """容量 3，放进 [1,2,3] 再放 [4]：LRU、LFU 淘汰最后一块 3（倒序碰，3 最旧），
    LengthAware 淘汰位置最靠前的块 1（次数相同比位置），于是前缀一块也匹配不上。"""
    c = make_cache(3, policy)
    assert c.match([1, 2, 3]) == 0
    c.insert([1, 2, 3])
    assert c.match([1, 2, 3]) == 3 and c.match([1, 2, 9]) == 2 and c.match([9, 1]) == 0
    c.insert([4])
    assert len(c) == 3 and c.match([1, 2, 3]) == after_evict and c.match([4]) == 1


@pytest.mark.parametrize("policy,kept", [("lru", {2, 3}), ("lfu", {1, 3}), ("lengthaware", {1, 3})])
def test_frequency_vs_recency(policy, kept):
    """容量 2：块 1 用了 3 次，然后 2、3 各一次。LRU 淘汰最久没用的 1，LFU 类淘汰次数最少里最旧的 2。"""
    c = make_cache(2, policy)
    for blocks in ([1], [1], [1], [2], [3]):
        c.insert(blocks)
    assert {b for b in (1, 2, 3) if c.match([b])} == kept


@pytest.mark.parametrize("policy,hits", [("lru", [0, 2, 1, 1]), ("lfu", [0, 2, 1, 0]), ("lengthaware", [0, 2, 1, 0])])
def test_simulate_exact_hits(policy, hits):
    blocks = [[1, 2], [1, 2], [1, 3], [3]]
    assert simulate(blocks, 2, policy).tolist() == hits
    tr = [Request(i, 1024, 1, tuple(b)) for i, b in enumerate(blocks)]
    assert hit_ratio(tr, 2, policy) == sum(hits) / 7


@pytest.mark.parametrize("policy", ONLINE)
def test_infinite_capacity_is_policy_free(policy):
    blocks = [[1, 2, 3], [1, 2, 4], [5], [1, 2, 3, 6]]
    assert simulate(blocks, None, policy).tolist() == [0, 2, 0, 3] == infinite_hits(blocks).tolist()


@pytest.mark.parametrize("policy", ONLINE)
def test_per_block_counts_hits_anywhere(policy):
    c = make_cache(10, policy)
    c.insert([1, 2, 3])
    assert c.match([9, 2, 3]) == 0 and c.count([9, 2, 3]) == 2
    assert simulate([[1, 2], [9, 2]], 10, policy, per_block=True).tolist() == [0, 1]


# ---------------------------------------------------------------- MIN
def test_min_hand_example_capacity_1():
    """容量 1，访问 1,2,1,2,1：MIN 一直留着 1（下一次用得更早），命中 2 次；LRU 一次也不中。"""
    blocks = [[1], [2], [1], [2], [1]]
    assert min_hits(blocks, 1).tolist() == [0, 0, 1, 0, 1]
    assert simulate(blocks, 1, "lru").sum() == 0


def test_min_hand_example_capacity_2():
    """容量 2：[1,2] 之后来了 3，MIN 不留 3（它下一次用到最晚），于是 1、2 都命中；LRU 只中 1。"""
    blocks = [[1, 2], [3], [1], [2], [3]]
    assert min_hits(blocks, 2).tolist() == [0, 0, 1, 1, 0]
    assert simulate(blocks, 2, "lru").tolist() == [0, 0, 1, 0, 0]
    assert simulate(blocks, 2, "min").tolist() == [0, 0, 1, 1, 0]


def test_next_use():
    ids, starts, nxt = next_use([[5, 6], [7], [5], [6, 5]])
    assert ids == [5, 6, 7, 5, 6, 5] and starts == [0, 2, 3, 4, 6]
    assert nxt == [2, 3, 4, 3, 4, 4]          # 4 = 请求数：再也不用


def brute_force_opt(blocks, cap):
    """穷举：每个请求后缓存可以是 (原缓存 ∪ 这个请求的块) 的任意不超过 cap 的子集，求逐块命中的最大和。"""
    best = {frozenset(): 0}
    for b in blocks:
        nxt = {}
        for s, v in best.items():
            v += len(s & set(b))
            pool = sorted(s | set(b))
            for k in range(min(cap, len(pool)) + 1):
                for t in itertools.combinations(pool, k):
                    t = frozenset(t)
                    nxt[t] = max(nxt.get(t, -1), v)
        best = nxt
    return max(best.values())


@pytest.mark.parametrize("seed", range(25))
def test_min_equals_exhaustive_optimum(seed):
    rng = np.random.default_rng(seed)
    blocks = [list(rng.choice(6, size=int(rng.integers(1, 4)), replace=False)) for _ in range(7)]
    for cap in (1, 2, 3):
        assert min_hits(blocks, cap).sum() == brute_force_opt(blocks, cap)


# ---------------------------------------------------------------- sweep 与参数检查
@pytest.mark.parametrize("workers", [1, 2])
def test_sweep_equals_simulate(workers):
    rng = np.random.default_rng(0)
    blocks = [tuple(int(x) for x in rng.choice(40, size=int(rng.integers(1, 8)), replace=False)) for _ in range(200)]
    caps, pols = (None, 5, 20), ONLINE + ["min"]
    out = sweep(blocks, caps, pols, workers=workers)
    assert set(out) == {(p, c) for p in pols for c in caps}
    for (p, c), hits in out.items():
        assert hits.tolist() == simulate(blocks, c, p).tolist()


@pytest.mark.parametrize("capacity", [0, -1, 2.5, "100", -1000])
@pytest.mark.parametrize("policy", ONLINE + ["min"])
def test_impossible_capacity_is_value_error(capacity, policy):
    with pytest.raises(ValueError, match="容量"):
        simulate([[1]], capacity, policy)
    with pytest.raises(ValueError, match="容量"):
        sweep([[1]], (None, capacity), [policy])


@pytest.mark.parametrize("policy", ["LRU", "fifo", "", None])
def test_unknown_policy_is_value_error(policy):
    with pytest.raises(ValueError, match="未知的缓存策略"):
        make_cache(10, policy)
    with pytest.raises(ValueError, match="未知的缓存策略"):
        simulate([[1]], 10, policy)
    with pytest.raises(ValueError, match="未知的缓存策略"):
        sweep([[1]], (10,), ["lru", policy])


def test_min_is_not_an_online_cache():
    with pytest.raises(ValueError, match="未知的缓存策略"):
        make_cache(10, "min")
