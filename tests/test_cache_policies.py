"""缓存策略：手算得出的小例子（同一个检查跑全部注册的策略），LengthAware 的两种读法，S3-FIFO 的例子，
MIN 的手算例子和穷举最优，sweep（一个进程或进程池）= 逐格 simulate；
改了策略类（或注册了新的），04、04b 打印的数字就来自改过的类；evict() 什么也不删时一行拒绝。"""
import contextlib
import io
import itertools
import os
import shutil
import subprocess
import sys
import traceback
from collections import OrderedDict

import numpy as np
import pytest

import kv_store.eviction
from conftest import ROOT
from lab_common.script_tools import load_script
from kv_store.eviction import (CACHE_POLICIES, LENGTHAWARE_DEFINITION, LENGTHAWARE_SOURCE, PAPER_POLICIES,
                               BlockCache, LengthAwareCache, LRUCache, S3FIFOCache, make_cache,
                               policy_name)
from kv_store.replay import hit_ratio, simulate, sweep
from kv_store.belady import min_hits, next_use, seen_before
from policy_oracle import naive_hits
from kv_store.traces import Trace
from kv_store.trace_file import Request

ONLINE = list(CACHE_POLICIES)


def class_hits(trace, capacity, cls):
    """不经过 simulate、直接跑类：cls(capacity)，每个请求先 match 再 insert。"""
    cache, out = cls(capacity), []
    for blocks in getattr(trace, "iter_blocks", lambda: trace)():
        out.append(cache.match(list(blocks)))
        cache.insert(list(blocks))
    return np.array(out, dtype=np.int32)


def test_registry():
    """一个注册表：论文的三种 + 对照 + S3-FIFO；每个都有显示名字和短名字；对照的名字说明它是对照。"""
    assert ONLINE == ["lru", "lfu", "lengthaware", "lengthaware_early", "s3fifo"]
    assert PAPER_POLICIES == ("lru", "lfu", "lengthaware")
    for p, cls in CACHE_POLICIES.items():
        assert issubclass(cls, BlockCache) and cls.NAME != "?" and cls.SHORT != "?"
        assert policy_name(p) == cls.NAME
    assert policy_name("lengthaware") == "LengthAwareCache"
    assert "对照" in policy_name("lengthaware_early") and "对照" in CACHE_POLICIES["lengthaware_early"].SHORT
    assert "MIN" in policy_name("min")


def test_lengthaware_definition_is_the_papers_words():
    """arXiv v3 §4.2 原文（在 PDF 里核对过）：不能改一个字。"""
    assert LENGTHAWARE_DEFINITION == "similar to LFU but prioritizing cache blocks occurring later in requests"
    assert "2407.00079v3" in LENGTHAWARE_SOURCE and "§4.2" in LENGTHAWARE_SOURCE


@pytest.mark.parametrize("policy,after_evict", [("lru", 2), ("lfu", 2), ("lengthaware", 2),
                                                ("lengthaware_early", 0), ("s3fifo", 2)])
def test_one_eviction(policy, after_evict):
    """容量 3，放进 [1,2,3] 再放 [4]：LRU、LFU 淘汰最后一块 3（倒序碰，3 最旧）；LengthAware 次数相同
    比位置，先淘汰靠后的 3；S3-FIFO 的小队列队尾是 3（最先进来）。只有对照组淘汰位置最靠前的块 1，
    于是前缀一块也匹配不上。"""
    c = make_cache(3, policy)
    assert c.match([1, 2, 3]) == 0
    c.insert([1, 2, 3])
    assert c.match([1, 2, 3]) == 3 and c.match([1, 2, 9]) == 2 and c.match([9, 1]) == 0
    c.insert([4])
    assert len(c) == 3 and c.match([1, 2, 3]) == after_evict and c.match([4]) == 1


def test_lengthaware_keeps_chains_whole():
    """两个请求各 3 块、访问次数相同，容量 4：LengthAware 踢掉两条链的尾巴 3 和 9（位置 2），
    留下的是两段完整的前缀；对照组踢掉位置 0 的 1 和 7，两条链都从第一块就断了。"""
    hits = {}
    for p in ("lengthaware", "lengthaware_early"):
        c = make_cache(4, p)
        c.insert([1, 2, 3])
        c.insert([7, 8, 9])
        hits[p] = (c.match([1, 2, 3]), c.match([7, 8, 9]))
    assert hits == {"lengthaware": (2, 2), "lengthaware_early": (0, 0)}


@pytest.mark.parametrize("policy,kept", [("lru", {2, 3}), ("lfu", {1, 3}), ("lengthaware", {1, 3}),
                                         ("lengthaware_early", {1, 3}), ("s3fifo", {1, 3})])
def test_frequency_vs_recency(policy, kept):
    """容量 2：块 1 用了 3 次，然后 2、3 各一次。LRU 淘汰最久没用的 1，LFU 类淘汰次数最少里最旧的 2；
    S3-FIFO：小队列满了，队尾的 1 被访问过 2 次 → 升进主队列，下一个 2 没被再访问 → 踢出。"""
    c = make_cache(2, policy)
    for blocks in ([1], [1], [1], [2], [3]):
        c.insert(blocks)
    assert {b for b in (1, 2, 3) if c.match([b])} == kept


@pytest.mark.parametrize("policy,hits", [("lru", [0, 2, 1, 1]), ("lfu", [0, 2, 1, 0]), ("lengthaware", [0, 2, 1, 0]),
                                         ("lengthaware_early", [0, 2, 1, 0]), ("s3fifo", [0, 2, 1, 1])])
def test_simulate_exact_hits(policy, hits):
    blocks = [[1, 2], [1, 2], [1, 3], [3]]
    assert simulate(blocks, 2, policy).tolist() == hits
    tr = [Request(i, 1024, 1, tuple(b)) for i, b in enumerate(blocks)]
    assert hit_ratio(tr, 2, policy) == sum(hits) / 7
    assert hit_ratio(Trace.from_requests(tr), 2, policy) == sum(hits) / 7


# ---------------------------------------------------------------- S3-FIFO（Yang 等，SOSP'23）
def test_s3fifo_queue_sizes():
    c = S3FIFOCache(100)
    assert (c.small_size, c.main_size, c.ghost_size) == (10.0, 90.0, 90)


def test_s3fifo_filters_one_hit_wonders():
    """容量 10。热块 0 被访问了 3 次，之后 30 个只出现一次的块扫过去：LRU 把块 0 挤掉了；
    S3-FIFO 里块 0 在小队列里攒够 freq，被升进主队列，一次性的块只在小队列里转一圈就走。"""
    for policy, kept in (("lru", False), ("s3fifo", True)):
        c = make_cache(10, policy)
        for blocks in [[0]] * 3 + [[b] for b in range(1, 31)]:
            c.insert(blocks)
        assert (c.match([0]) == 1) == kept
    c = make_cache(10, "s3fifo")
    for blocks in [[0]] * 3 + [[b] for b in range(1, 31)]:
        c.insert(blocks)
    assert list(c.main) == [0] and list(c.small) == list(range(22, 31)) and len(c) == 10
    assert list(c.ghost) == list(range(13, 22))            # 幽灵队列最多记 9 个（= 主队列的大小）


def test_s3fifo_ghost_hit_goes_to_main():
    """被小队列踢出的块还在幽灵队列里时再来：直接进主队列，不再经过小队列。"""
    c = make_cache(10, "s3fifo")
    for b in range(11):
        c.insert([b])                       # 块 0 被踢出，进幽灵队列
    assert 0 in c.ghost and 0 not in c.entries
    c.insert([0])
    assert list(c.main) == [0] and 0 not in c.ghost and c.entries[0] == 0


def test_s3fifo_main_gives_second_chance():
    """主队列里 freq > 0 的块被放回队头、freq 减 1；freq = 0 的才被踢出。"""
    c = S3FIFOCache(10)
    c.main.extend([1, 2])
    c.entries.update({1: 2, 2: 0})
    c._evict_main()                          # 1：freq 2 → 1，放回队头；2：freq 0 → 踢出
    assert list(c.main) == [1] and c.entries == {1: 1}
    c.main.append(3)
    c.entries[3] = 0
    c._evict_main()                          # 1：freq 1 → 0，放回队头；3：freq 0 → 踢出
    assert list(c.main) == [1] and c.entries == {1: 0}


# ---------------------------------------------------------------- 自己写的策略：接口
class FIFOCache(BlockCache):
    """最简单的策略（测试用）：先进先出，命中不改顺序。"""

    NAME = SHORT = "FIFO"

    def __init__(self, capacity):
        super().__init__(capacity, OrderedDict())     # 从旧到新

    def touch(self, block, pos):
        self.entries.setdefault(block, None)

    def evict(self):
        return self.entries.popitem(last=False)[0]    # 最早进来的


def test_a_new_policy_needs_only_touch_and_evict(monkeypatch):
    """接口：写 touch 和 evict，在 CACHE_POLICIES 里登记，simulate / sweep 就认得它。"""
    monkeypatch.setitem(CACHE_POLICIES, "fifo", FIFOCache)
    blocks = [[1, 2], [3], [1, 2]]
    assert simulate(blocks, 2, "fifo").tolist() == [0, 0, 1]   # [3] 进来时踢掉最早进来的 2（倒序放入：2 先进）
    out = sweep(blocks, (None, 2), ("fifo", "min"), workers=1)
    assert out[("fifo", 2)].tolist() == [0, 0, 1] and out[("fifo", None)].tolist() == [0, 0, 2]


@pytest.mark.parametrize("policy", ONLINE)
def test_infinite_capacity_is_policy_free(policy):
    blocks = [[1, 2, 3], [1, 2, 4], [5], [1, 2, 3, 6]]
    assert simulate(blocks, None, policy).tolist() == [0, 2, 0, 3]


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
    nxt = next_use([[5, 6], [7], [5], [6, 5]])
    assert nxt.tolist() == [2, 3, 4, 3, 4, 4]          # 4 = 请求数：再也不用


def test_next_use_across_chunks(monkeypatch):
    """一段一段往前算（段的边界上"下一次"在后面的段里）和一次算完一样。"""
    import kv_store.belady
    rng = np.random.default_rng(1)
    blocks = [list(rng.choice(30, size=int(rng.integers(1, 5)), replace=False)) for _ in range(50)]
    whole, best = next_use(blocks).tolist(), min_hits(blocks, 4).tolist()
    monkeypatch.setattr(kv_store.belady, "CHUNK", 3)
    assert next_use(blocks).tolist() == whole and min_hits(blocks, 4).tolist() == best


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


def test_seen_before_per_block_vs_prefix():
    """[1,2] 之后 [9,2]：块 2 出现过，但第一块 9 没有——逐块命中 1，前缀命中 0。"""
    assert simulate([[1, 2], [9, 2]], None, "lru").tolist() == [0, 0]
    assert seen_before([[1, 2], [9, 2]]).tolist() == [0, 1] == simulate([[1, 2], [9, 2]], None, "min").tolist()
    assert seen_before([[1, 1], [1]]).tolist() == [0, 1]   # 同一请求里的重复不算"以前出现过"


def test_sweep_accepts_trace_and_lists_alike():
    rng = np.random.default_rng(3)
    reqs = [Request(float(i), 512 * 3, 1, tuple(int(x) for x in rng.choice(20, size=3, replace=False)))
            for i in range(60)]
    caps, pols = (None, 4, 9), ONLINE + ["min"]
    a = sweep(Trace.from_requests(reqs), caps, pols, workers=1)
    b = sweep([r.blocks for r in reqs], caps, pols, workers=1)
    assert a.keys() == b.keys() and all(a[k].tolist() == b[k].tolist() for k in a)


@pytest.mark.parametrize("policy", ["lru", "lfu", "lengthaware", "lengthaware_early"])
def test_classes_equal_the_definition_on_synthetic_trace(policy):
    """合成 trace 的前 600 个请求：sweep 算的（04 的表就是它算的）= 照定义逐个扫描的参照实现（tests/policy_oracle.py）。"""
    from kv_store.traces import make_trace
    blocks = [r.blocks for r in make_trace(0)[:600]]
    out = sweep(blocks, (100, 400), (policy,), workers=1)
    for cap in (100, 400):
        assert out[(policy, cap)].tolist() == naive_hits(blocks, cap, policy)


def test_sweep_extra_cells():
    """extra：在表之外单独算几格（例如只在一个容量上的对照行），和单独 simulate 一样。"""
    blocks = [[1, 2], [1, 2, 3], [4], [1, 2], [3, 1]]
    out = sweep(blocks, (None, 2), ("lru",), workers=2, extra=[("lengthaware_early", 2), ("min", None), ("lru", 2)])
    assert set(out) == {("lru", None), ("lru", 2), ("lengthaware_early", 2), ("min", None)}
    assert out[("lengthaware_early", 2)].tolist() == simulate(blocks, 2, "lengthaware_early").tolist()
    assert out[("min", None)].tolist() == simulate(blocks, None, "min").tolist()


# ---------------------------------------------------------------- 改了策略类，算数字的就是改过的类
def test_nothing_inspects_the_classes():
    """没有代码读策略类的源码或比较代码对象来换算法：讲义和 lab_common 里没有 getsource、co_consts、co_names、fingerprint。"""
    hits = []
    for d in ("lecture07", "lab_common"):
        for base, _, files in os.walk(os.path.join(ROOT, d)):
            for f in files:
                if f.endswith(".py"):
                    with open(os.path.join(base, f), encoding="utf-8") as fh:
                        src = fh.read()
                    hits += [f"{f}: {w}" for w in ("getsource", "co_consts", "co_names", "fingerprint") if w in src]
    assert hits == []


class SticksCache(LRUCache):
    """学生写坏的 evict：什么也不删。"""
    NAME = SHORT = "坏的"

    def evict(self):
        return None


@pytest.mark.parametrize("workers", [1, 2])
def test_evict_that_removes_nothing_is_refused_in_one_line(monkeypatch, capsys, workers):
    """evict() 一块也没删：不空转，一行说清是哪个类的 evict，退出码 2（进程池里也一样）。"""
    monkeypatch.setitem(CACHE_POLICIES, "sticks", SticksCache)
    with pytest.raises(SystemExit) as e:
        sweep([[1, 2], [3, 4], [5]], (1, 2), ("sticks",), workers=workers)
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.count("\n") == 1 and err.startswith("SticksCache.evict(): ")


class CrashCache(LRUCache):
    """学生写错的 evict：一运行就抛异常。"""

    def evict(self):
        return self.entries.popitem(last=False)[0] // 0


@pytest.mark.parametrize("workers", [1, 2])
def test_a_crashing_policy_shows_its_own_line_from_the_pool(monkeypatch, workers):
    """学生的类抛了异常：进程池里算也一样抛出同一种异常，traceback 里看得到学生代码出错的那一行（子进程的
    traceback 挂在 __cause__ 上）。"""
    monkeypatch.setitem(CACHE_POLICIES, "crash", CrashCache)
    with pytest.raises(ZeroDivisionError) as e:
        sweep([[1, 2], [3, 4], [5]], (1, 2), ("crash",), workers=workers)
    shown = "".join(traceback.format_exception(e.value))
    assert "in evict" in shown and "// 0" in shown


def newest_first(mp):
    """学生会做的实验：LRUCache.evict 改成淘汰最新的块（popitem(last=True)）。"""
    def evict(self):
        return self.entries.popitem(last=True)[0]

    mp.setattr(LRUCache, "evict", evict)


N_PREFIX = 4_000   # 改过的类要逐块跑：用合成 trace 的前 4,000 个请求（04 和对照的类用同一段），测试才快


def small_trace():
    """04 演示 3 用的合成 trace 的前 N_PREFIX 个请求。"""
    from kv_store.traces import make_trace
    return make_trace(load_script("04_prefix_caching").TRACE_SEED)[:N_PREFIX]


def policies_demo_of_04(policies=None, small=True):
    """本进程里跑 04 --demo 4（small：trace 换成 small_trace()）：返回 (打印的文字, 演示 4（策略 × 容量） 返回的 dict)。"""
    m = load_script("04_prefix_caching")
    got = {}
    with pytest.MonkeyPatch.context() as local:
        fn = m.DEMOS[4]
        local.setitem(m.DEMOS, 4, lambda *a: got.setdefault(4, fn(*a)))
        if small:
            local.setattr(m, "make_trace", lambda seed: small_trace())
        if policies is not None:
            local.setattr(m, "POLICIES", policies)
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            assert m.main(["--demo", "4"]) == 0
    return buf.getvalue(), got[4]


def ratios_of(hits, policy):
    """{容量: 命中率}：04 演示 3 自己的口径（m.hit_table：用得上的前缀命中块 / 全部块访问）。hits：{容量: 每个请求的命中}。"""
    m = load_script("04_prefix_caching")
    table = m.hit_table(small_trace(), {(policy, c): h for c, h in hits.items()}, 512)
    return {c: table[(policy, c)] for c in hits}


def class_ratios(cls, caps, policy="lru"):
    """直接跑类：small_trace() 上每个容量的命中率（04 演示 3 的口径）。"""
    tr = small_trace()
    return ratios_of({c: class_hits(tr, c, cls) for c in caps}, policy)


@pytest.fixture(scope="module")
def newest_demo3():
    """LRUCache 换成淘汰最新的块时：04 --demo 3 打印的文字、返回的 dict，和直接跑改过的类得到的命中率。"""
    with pytest.MonkeyPatch.context() as mp:
        newest_first(mp)
        out, res = policies_demo_of_04()
        want = class_ratios(LRUCache, [c for c in res["capacities"] if c is not None])
    return out, res, want


def test_edited_lru_changes_04s_hit_table(newest_demo3):
    """LRUCache.evict 改成淘汰最新的块：04 的 LRU 一行换成改过的类算出的数，打印的也变了。"""
    out, res, want = newest_demo3
    caps = [c for c in res["capacities"] if c is not None]
    plain = class_ratios(LRUCache, caps)                            # 没改时 04 印的数
    assert all(res["ratio"][("lru", c)] == want[c] for c in caps)
    assert sum(f"{res['ratio'][('lru', c)]:.2f}" != f"{plain[c]:.2f}" for c in caps) >= 2   # 要淘汰的容量里至少两格印出来不一样
    assert all(f"{want[c]:.2f}" in out for c in caps)


def test_edited_lengthaware_changes_the_numbers(monkeypatch):
    """LengthAwareCache.rank 改成"先淘汰靠前的块"：sweep（04 的命中表就是它算的）给出的 LengthAware 一格
    变成对照组的数（它就是这么算的）。合成 trace 的前 3,000 个请求。"""
    from kv_store.traces import make_trace
    tr = make_trace(0)[:3000]
    before = sweep(tr, (None, 500), ("lengthaware",), workers=1)
    monkeypatch.setattr(LengthAwareCache, "rank", lambda self, pos: pos)
    after = sweep(tr, (None, 500), ("lengthaware",), workers=2)
    early = class_hits(tr, 500, kv_store.eviction.LengthAwareEarlyCache)
    assert after[("lengthaware", 500)].tolist() == early.tolist() != before[("lengthaware", 500)].tolist()
    assert after[("lengthaware", None)].tolist() == before[("lengthaware", None)].tolist()   # 无限容量：类跑出来也一样
def test_a_registered_policy_gets_its_row_in_04(monkeypatch):
    """注册一个新策略、加进 04 的 POLICIES：命中率表里多出它的一行，数字就是它自己算出来的。"""
    caps = [c for c in load_script("04_prefix_caching").CAPACITIES if c is not None]
    monkeypatch.setitem(CACHE_POLICIES, "fifo", FIFOCache)
    out, res = policies_demo_of_04(policies=("lru", "fifo"))
    want = class_ratios(FIFOCache, caps, "fifo")
    assert all(res["ratio"][("fifo", c)] == want[c] for c in caps) and "FIFO" in out


def test_edited_lru_changes_04b(monkeypatch):
    """04b 的 LRU 一列（sweep）也来自改过的类。"""
    s04b = load_script("04b_radix_cache")
    blocks = [(1, 2), (1, 2, 3), (4,), (1, 2), (5, 6), (1, 2, 3)]
    before = sweep(blocks, (2, 3), ("lru",), workers=1)
    newest_first(monkeypatch)
    after = sweep(blocks, (2, 3), ("lru",), workers=2)
    assert s04b.sweep is sweep
    for c in (2, 3):
        assert after[("lru", c)].tolist() == class_hits(blocks, c, LRUCache).tolist()
    assert any(after[("lru", c)].tolist() != before[("lru", c)].tolist() for c in (2, 3))


@pytest.mark.test_all
def test_editing_the_source_file_changes_04s_output(tmp_path):
    """真的改文件（学生的做法）：拷一份 lecture07/，把 LRUCache.evict 里的 popitem(last=False) 改成 last=True，
    新解释器里跑 04 --demo 3：打印的和本进程里换掉这个方法时一样，和没改时不一样。"""
    for d in ("lecture07", "lab_common"):
        shutil.copytree(os.path.join(ROOT, d), tmp_path / d, ignore=shutil.ignore_patterns("__pycache__"))
    src = tmp_path / "lecture07" / "kv_store/eviction.py"
    text = src.read_text(encoding="utf-8")
    lru = text[text.index("class LRUCache"):text.index("class LFUCache")]
    assert lru.count("popitem(last=False)") == 1
    src.write_text(text.replace(lru, lru.replace("popitem(last=False)", "popitem(last=True)")), encoding="utf-8")
    proc = subprocess.run([sys.executable, str(tmp_path / "lecture07" / "04_prefix_caching.py"), "--demo", "3"],
                          capture_output=True, text=True, env=dict(os.environ, NO_COLOR="1"), timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    with pytest.MonkeyPatch.context() as mp:
        newest_first(mp)
        edited = policies_demo_of_04(small=False)[0]
    assert proc.stdout == edited != policies_demo_of_04(small=False)[0]
