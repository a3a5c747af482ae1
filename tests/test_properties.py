"""性质测试（hypothesis）：随机的操作序列下，分页 KV 块池和前缀缓存的不变量始终成立。"""
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from kv_cache_policies import CACHE_POLICIES, BlockCache, make_cache
from kv_cache_sim import has_repeats, infinite_hits, lfu_family_hits, max_live, min_hits, next_use, simulate
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
def test_infinite_closed_form_equals_simulation(blocks):
    """无限容量的闭式解 = 容量大到不淘汰时的模拟（前缀命中和逐块命中都是）。"""
    big = sum(map(len, blocks))
    for p in ONLINE:
        assert infinite_hits(blocks).tolist() == simulate(blocks, big, p).tolist()
        assert infinite_hits(blocks, per_block=True).tolist() == simulate(blocks, big, p, per_block=True).tolist()


@FAST
@given(blocks=st.one_of(TRACES, RANDOM), cap=st.integers(1, 12))
def test_fast_insert_equals_touch_and_evict(blocks, cap):
    """LRU、LFU 类把 insert 展开写了（为了快）：和基类的"逐块 touch、再 evict 到不超容量"逐请求相同。"""
    for p in ONLINE:
        fast, slow = make_cache(cap, p), make_cache(cap, p)
        for b in blocks:
            assert fast.match(b) == slow.match(b)
            fast.insert(b)
            BlockCache.insert(slow, b)
            assert set(fast.entries) == set(slow.entries)


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
def test_lfu_family_shortcut_equals_class(blocks, cap):
    """lfu_family_hits（"次数 ≥ 2 的块永不淘汰"）和 LFU / LengthAware / 对照组的类逐请求相同。"""
    for p in ("lfu", "lengthaware", "lengthaware_early"):
        assert lfu_family_hits(blocks, cap, CACHE_POLICIES[p]).tolist() == class_sim(blocks, cap, p)
        assert simulate(blocks, cap, p).tolist() == class_sim(blocks, cap, p)


@FAST
@given(blocks=st.one_of(TRACES, RANDOM), cap=st.integers(1, 12))
def test_min_shortcut_when_everything_live_fits(blocks, cap):
    """容量 ≥ max_live 时 MIN 什么都不用淘汰：等于无限容量的逐块命中；小于时也不会超过它。"""
    live = max_live(next_use(blocks), columns_offsets(blocks))
    hits = min_hits(blocks, cap)
    if cap >= live:
        assert hits.tolist() == infinite_hits(blocks, per_block=True).tolist()
    assert (hits <= infinite_hits(blocks, per_block=True)).all()
    if live > 0:
        assert min_hits(blocks, live).tolist() == infinite_hits(blocks, per_block=True).tolist()


def columns_offsets(blocks):
    return np.concatenate([[0], np.cumsum([len(b) for b in blocks])])


def test_has_repeats():
    assert not has_repeats(np.array([1, 2, 1]), np.array([0, 2, 3]))
    assert has_repeats(np.array([1, 2, 1]), np.array([0, 3]))
