"""性质测试（hypothesis）：随机的操作序列下，分页 KV 块池和前缀缓存的不变量始终成立；
策略类和照定义写的参照实现（tests/policy_oracle.py）逐请求相同；04 演示 4 整列算和逐个请求算逐位相同。"""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kv_store.belady
import kv_store.traces
from lab_common.script_tools import load_script
from kv_store.eviction import CACHE_POLICIES, make_cache
from kv_store.replay import simulate
from kv_store.belady import _min_hits_by_block, has_repeats, max_live, min_hits, next_use, seen_before
from policy_oracle import RANKS, naive_hits
from kv_store.tiers import prefill_compute_time, prefill_time, trace_prefill_time
from kv_store.traces import Trace
from kv_store.trace_file import Request
from paged_kv import BlockPool, PagedSequence, paged_step
from lab_common.transformer_lab import TINY, config_like, forward, init_params

FAST = settings(max_examples=60, deadline=None)
ONLINE = list(CACHE_POLICIES)

# ---------------------------------------------------------------- 分页 KV：块池与写时复制
CFG = config_like(TINY, vocab=32, d_model=16, n_heads=2, n_kv_heads=1, d_ff=32, n_layers=1, max_seq=128)
PARAMS = init_params(CFG, seed=0)
BS, N_BLOCKS = 4, 256                     # 最多 15 步 × 每步 ≤ 6 个 token：不会用完

OPS = st.lists(st.tuples(st.sampled_from(["new", "append", "fork", "free", "cache", "uncache"]),
                         st.integers(0, 1_000), st.integers(1, 6)), max_size=15)


def check_pool(pool, seqs, cached):
    """free + used = total；ref_count 不为负；每块的 ref_count = 持有它的块表数 + 缓存持有数。"""
    rc = pool.ref_count
    assert pool.num_free + pool.num_used == pool.n_blocks
    assert (rc >= 0).all()
    assert sorted(pool.free_blocks) == sorted(np.flatnonzero(rc == 0).tolist())   # 空闲 ⇔ 没人用
    holders = np.zeros(pool.n_blocks, dtype=np.int64)
    for s in seqs:
        np.add.at(holders, s.blocks, 1)
    np.add.at(holders, cached, 1)
    assert (holders == rc).all()          # 出现在多处的块 ref_count 正好等于持有者个数（> 1）


def step(seq, toks, new):
    """往 seq 写 new 个 token，检查分页算出的 logits 等于从头算。"""
    out = paged_step(PARAMS, CFG, [seq], [np.asarray(new)])[0]
    toks.extend(new)
    ref = forward(PARAMS, CFG, np.asarray(toks)[None])[0, -len(new):]
    assert np.allclose(out, ref, rtol=0, atol=1e-12)


@FAST
@given(ops=OPS, seed=st.integers(0, 2 ** 16))
def test_block_pool_invariants(ops, seed):
    rng = np.random.default_rng(seed)
    pool = BlockPool(CFG, N_BLOCKS, BS)
    seqs, toks, cached = [], [], []       # cached：前缀缓存持有的块（每次持有 = 一次 incref）
    for op, i, n in ops:
        new = rng.integers(0, CFG.vocab, n).tolist()
        if op == "new" or not seqs:
            seqs.append(PagedSequence(pool))
            toks.append([])
            step(seqs[-1], toks[-1], new)
        elif op == "append":
            step(seqs[i % len(seqs)], toks[i % len(seqs)], new)
        elif op == "fork":
            k = i % len(seqs)
            seqs.append(seqs[k].fork())
            toks.append(list(toks[k]))
            step(seqs[-1], toks[-1], new)        # 写进共享的块 → 写时复制
        elif op == "free":
            k = i % len(seqs)
            seqs.pop(k).free()
            toks.pop(k)
        elif op == "cache" and any(s.blocks for s in seqs):
            s = [s for s in seqs if s.blocks][i % sum(bool(s.blocks) for s in seqs)]
            b = s.blocks[i % len(s.blocks)]
            pool.incref(b)
            cached.append(b)
        elif op == "uncache" and cached:
            pool.decref(cached.pop(i % len(cached)))
        check_pool(pool, seqs, cached)
    for s in seqs:
        s.free()
    for b in cached:
        pool.decref(b)
    assert pool.num_free == N_BLOCKS and (pool.ref_count == 0).all()


# ---------------------------------------------------------------- 前缀缓存
def chain_trace(spec):
    """像链式哈希那样生成请求：每个请求 = 之前某个请求的一段前缀 + 若干新块。同一个 id ⇒ 同一段前缀。"""
    reqs, next_id = [], 0
    for parent, keep, n_new in spec:
        base = reqs[parent % len(reqs)] if reqs else ()
        base = base[:keep % (len(base) + 1)]
        reqs.append(base + tuple(range(next_id, next_id + n_new)))
        next_id += n_new
    return reqs


TRACES = st.lists(st.tuples(st.integers(0, 100), st.integers(0, 100), st.integers(1, 5)),
                  min_size=1, max_size=40).map(chain_trace)
RANDOM = st.lists(st.lists(st.integers(0, 15), min_size=1, max_size=6, unique=True).map(tuple),
                  min_size=1, max_size=30)


@FAST
@given(blocks=st.one_of(TRACES, RANDOM), cap=st.integers(1, 12))
def test_cache_size_never_exceeds_capacity(blocks, cap):
    for p in ONLINE:
        c = make_cache(cap, p)
        for b in blocks:
            c.match(b)
            c.insert(b)
            assert len(c) <= cap


@FAST
@given(blocks=st.one_of(TRACES, RANDOM), cap=st.integers(1, 12))
def test_lru_hits_do_not_decrease_with_capacity(blocks, cap):
    """LRU 是栈算法：容量 c 时的缓存 ⊆ 容量 c+1 时的，所以每个请求的命中都不会变少。"""
    small, big = simulate(blocks, cap, "lru"), simulate(blocks, cap + 1, "lru")
    assert (small <= big).all()
    assert (big <= simulate(blocks, None, "lru")).all()


@FAST
@given(blocks=st.one_of(TRACES, RANDOM), cap=st.integers(1, 12))
def test_min_bounds_every_online_policy(blocks, cap):
    best = simulate(blocks, cap, "min").sum()
    for p in ONLINE:
        assert simulate(blocks, cap, p).sum() <= simulate(blocks, cap, p, per_block=True).sum() <= best
    assert best <= simulate(blocks, None, "min").sum()


@FAST
@given(blocks=TRACES, cap=st.integers(1, 12))
def test_lru_prefix_hits_equal_per_block_hits(blocks, cap):
    """LRU 先碰子块再碰父块：父块总比子块新，缓存里总是完整的前缀，所以前缀命中 = 逐块命中。"""
    assert simulate(blocks, cap, "lru").tolist() == simulate(blocks, cap, "lru", per_block=True).tolist()


@FAST
@given(blocks=st.one_of(TRACES, RANDOM))
def test_no_eviction_means_seen_before(blocks):
    """容量大到不淘汰时，每种策略的逐块命中 = 以前出现过的块数（seen_before），前缀命中 = 无限容量的。"""
    big = sum(map(len, blocks))
    for p in ONLINE:
        assert seen_before(blocks).tolist() == simulate(blocks, big, p, per_block=True).tolist()
        assert simulate(blocks, None, p).tolist() == simulate(blocks, big, p).tolist()


def class_sim(blocks, cap, policy):
    """最直白的模拟：每个请求先 match 再 insert（用策略类本身）。"""
    c = make_cache(cap, policy)
    out = []
    for b in blocks:
        out.append(c.match(b))
        c.insert(b)
    return out


@FAST
@given(blocks=st.one_of(TRACES, RANDOM), cap=st.integers(1, 12))
def test_min_shortcut_when_everything_live_fits(blocks, cap):
    """容量 ≥ max_live 时 MIN 什么都不用淘汰：等于无限容量的逐块命中；小于时也不会超过它。"""
    live = max_live(next_use(blocks), columns_offsets(blocks))
    hits = min_hits(blocks, cap)
    if cap >= live:
        assert hits.tolist() == seen_before(blocks).tolist()
    assert (hits <= seen_before(blocks)).all()
    if live > 0:
        assert min_hits(blocks, live).tolist() == seen_before(blocks).tolist()


def columns_offsets(blocks):
    return np.concatenate([[0], np.cumsum([len(b) for b in blocks])])


def test_has_repeats():
    assert not has_repeats(np.array([1, 2, 1]), np.array([0, 2, 3]))
    assert has_repeats(np.array([1, 2, 1]), np.array([0, 3]))


# ---------------------------------------------------------------- 策略类 = 照定义写的参照实现
REPEATS = st.lists(st.lists(st.integers(0, 9), min_size=1, max_size=6).map(tuple), min_size=1, max_size=30)


@FAST
@given(blocks=st.one_of(TRACES, RANDOM, REPEATS), cap=st.one_of(st.integers(1, 40), st.none()))
def test_classes_equal_the_definition(blocks, cap):
    """LRU、LFU、LengthAware 和对照组的类（OrderedDict、惰性删除的堆）和 policy_oracle 的逐个扫描逐请求相同，
    前缀命中和逐块命中都是；simulate 跑的就是这些类。"""
    for p in ["lru", *RANKS]:
        assert class_sim(blocks, cap, p) == naive_hits(blocks, cap, p) == simulate(blocks, cap, p).tolist()
        assert simulate(blocks, cap, p, per_block=True).tolist() == naive_hits(blocks, cap, p, per_block=True)


@FAST
@given(blocks=REPEATS, cap=st.integers(1, 12))
def test_min_with_repeated_blocks_uses_the_block_by_block_version(blocks, cap):
    """同一请求里有重复的块时，MIN 退回逐块的版本。"""
    assert min_hits(blocks, cap).tolist() == _min_hits_by_block(blocks, cap, next_use(blocks)).tolist()


@FAST
@given(blocks=st.one_of(TRACES, RANDOM), cap=st.integers(1, 12))
def test_min_intervals_equal_block_by_block(blocks, cap):
    """MIN 按区间算（命中 = 结束的区间 − 被淘汰的）和逐块查缓存的版本完全相同。"""
    assert min_hits(blocks, cap).tolist() == _min_hits_by_block(blocks, cap, next_use(blocks)).tolist()


@FAST
@given(blocks=st.one_of(TRACES, RANDOM), cap=st.integers(1, 12), chunk=st.integers(1, 4))
def test_results_do_not_depend_on_chunk_boundaries(blocks, cap, chunk):
    """每次只把 CHUNK 个请求转成 Python 列表：段的边界（MIN 的区间跨段）不影响结果。"""
    whole = {p: simulate(blocks, cap, p).tolist() for p in ONLINE + ["min"]}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(kv_store.traces, "CHUNK", chunk)
        mp.setattr(kv_store.belady, "CHUNK", chunk)
        for p in ONLINE + ["min"]:
            assert simulate(blocks, cap, p).tolist() == whole[p]


# ---------------------------------------------------------------- 04 演示 4：整列算 = 逐个请求算
M04 = load_script("04_prefix_caching")


@FAST
@given(rows=st.lists(st.tuples(st.integers(1, 200_000), st.integers(0, 400)), min_size=1, max_size=40),
       block=st.sampled_from([16, 512]))
def test_gpu_hours_by_columns_equals_per_request_loop(rows, block):
    """gpu_hours（kv_store.tiers.trace_prefill_time）用 numpy 整列算，和逐个请求调用 prefill_time、从前往后累加逐位相同；
    不命中时就是逐个请求的 prefill_compute_time 之和。"""
    tr = Trace.from_requests([Request(float(i), n, 1, ()) for i, (n, _) in enumerate(rows)])
    hits = np.array([h for _, h in rows], dtype=np.int32)
    total, hit_tok = 0.0, 0
    for n_in, hb in zip(tr.input_len.tolist(), hits.tolist()):
        n_hit = min(hb * block, n_in - 1)
        total += prefill_time(M04.MODEL, n_in, n_hit, M04.TIERS[M04.TIER_FOR_HITS])
        hit_tok += n_hit
    tier = M04.TIERS[M04.TIER_FOR_HITS]
    assert M04.gpu_hours(tr, hits, tier, block) == (total / 3600, hit_tok / int(tr.input_len.sum()))
    base = 0.0
    for n_in in tr.input_len.tolist():
        base += prefill_compute_time(M04.MODEL, n_in, 0)
    assert M04.gpu_hours(tr, np.zeros(len(tr), np.int64), tier, block)[0] == base / 3600


def test_gpu_hours_beyond_int64_uses_python_integers():
    """输入长到式 (1) 的 FLOPs 超出 int64（这里 400 万 token）：trace_prefill_time 改用 Python 整数逐个算，结果不溢出。"""
    tr = Trace.from_requests([Request(0.0, 4_000_000, 1, ()), Request(1.0, 5_000, 1, ())])
    assert M04.MODEL.prefill_flops(4_000_000) >= 2 ** 63
    hits = np.array([7, 3], dtype=np.int32)
    tier = M04.TIERS[M04.TIER_FOR_HITS]
    want = 0.0
    for n, h in [(4_000_000, 7), (5_000, 3)]:
        want += prefill_time(M04.MODEL, n, min(h * 512, n - 1), tier)
    assert M04.gpu_hours(tr, hits, tier, 512)[0] == want / 3600 > 0
    base = 0.0
    for n in (4_000_000, 5_000):
        base += prefill_compute_time(M04.MODEL, n, 0)
    assert trace_prefill_time(M04.MODEL, tr.input_len, np.zeros(2, np.int64), tier) == base
