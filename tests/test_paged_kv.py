"""lecture07/paged_kv.py 的单元测试：块池、引用计数、写时复制、按需分配、与连续 forward 逐位相同。"""
import numpy as np
import pytest

from paged_kv import BlockPool, OutOfBlocks, PagedSequence, gather_kv, paged_step
from lab_common.transformer_lab import TINY, KVCache, config_like, forward, init_params

CFG = config_like(TINY, max_seq=32)


@pytest.fixture(scope="module")
def params():
    return init_params(CFG, seed=0)


def test_alloc_free_list_fifo_and_counts():
    pool = BlockPool(CFG, n_blocks=3, block_size=4)
    assert pool.num_free == 3 and pool.num_used == 0
    a, b = pool.alloc(), pool.alloc()
    assert (a, b) == (0, 1) and list(pool.ref_count) == [1, 1, 0]
    pool.incref(a)
    pool.decref(a)
    assert pool.ref_count[a] == 1 and pool.num_free == 1
    pool.decref(a)                                   # 降到 0：回到空闲表的末尾
    assert list(pool.free_blocks) == [2, 0] and pool.num_used == 1
    assert pool.alloc() == 2 and pool.alloc() == 0


def test_errors():
    pool = BlockPool(CFG, n_blocks=1, block_size=4)
    with pytest.raises(ValueError):
        pool.incref(0)                               # 空闲块不能 incref
    with pytest.raises(ValueError):
        pool.decref(0)
    pool.alloc()
    with pytest.raises(OutOfBlocks, match="1 个块（每块 4 个 token）都在用"):
        pool.alloc()
    with pytest.raises(ValueError):
        BlockPool(CFG, n_blocks=0, block_size=4)


def test_reserve_allocates_on_demand():
    pool = BlockPool(CFG, n_blocks=8, block_size=4)
    s = PagedSequence(pool)
    blk, off = s.reserve(5)
    assert s.blocks == [0, 1] and list(blk) == [0, 0, 0, 0, 1] and list(off) == [0, 1, 2, 3, 0]
    s.length = 5
    blk, off = s.reserve(3)                          # 还在第 2 块里：不分配
    assert s.blocks == [0, 1] and list(off) == [1, 2, 3]
    s.length = 8
    s.reserve(1)                                     # 第 2 块写满了：再要一块
    assert s.blocks == [0, 1, 2] and pool.num_used == 3
    s.free()
    assert pool.num_used == 0 and s.blocks == [] and s.length == 0


def test_fork_and_copy_on_write(params):
    pool = BlockPool(CFG, n_blocks=8, block_size=4)
    a = PagedSequence(pool)
    paged_step(params, CFG, [a], [np.array([5, 6, 7, 8, 9, 10])])    # 6 个 token：块 1 里有 2 个
    b = a.fork()
    assert b.blocks == a.blocks == [0, 1] and list(pool.ref_count[:2]) == [2, 2]
    old = (pool.k[:, 1].copy(), pool.v[:, 1].copy())
    paged_step(params, CFG, [b], [np.array([3])])                    # 写进共享的不满块 → 写时复制
    assert b.blocks == [0, 2] and a.blocks == [0, 1] and pool.n_cow == 1
    assert list(pool.ref_count[:3]) == [2, 1, 1]
    assert np.array_equal(pool.k[:, 1], old[0]) and np.array_equal(pool.v[:, 1], old[1])   # 旧块没被写
    assert np.array_equal(pool.k[:, 2, :, :2], old[0][:, :, :2])                         # 前缀逐位复制
    assert np.any(pool.k[:, 2, :, 2] != 0)                                                  # 新 token 写在位置 2
    paged_step(params, CFG, [a], [np.array([4])])                    # a 现在独占块 1：原地写，不复制
    assert a.blocks == [0, 1] and pool.n_cow == 1 and pool.num_used == 3
    b.free()
    a.free()
    assert pool.num_used == 0 and not pool.ref_count.any()


def test_full_shared_block_is_not_copied(params):
    pool = BlockPool(CFG, n_blocks=8, block_size=4)
    a = PagedSequence(pool)
    paged_step(params, CFG, [a], [np.arange(8)])                     # 恰好两个满块
    b = a.fork()
    paged_step(params, CFG, [b], [np.array([1])])                    # 写到新块：共享的满块不动
    assert pool.n_cow == 0 and b.blocks[:2] == a.blocks and list(pool.ref_count[:2]) == [2, 2]


@pytest.mark.parametrize("block", [1, 3, 4, 16])
def test_paged_step_equals_forward(params, block):
    rng = np.random.default_rng(block)
    prompts = [rng.integers(0, CFG.vocab, n) for n in (1, 5, 9)]
    pool = BlockPool(CFG, n_blocks=3 * (-(-20 // block)), block_size=block)
    seqs = [PagedSequence(pool) for _ in prompts]
    caches = [KVCache(CFG, 1) for _ in prompts]
    feed, worst = prompts, 0.0
    for _ in range(6):
        outs = paged_step(params, CFG, seqs, feed)
        for o, c, f in zip(outs, caches, feed):
            ref = forward(params, CFG, np.asarray(f)[None], cache=c)[0]
            worst = max(worst, float(np.max(np.abs(o - ref))))
        feed = [[int(np.argmax(o[-1]))] for o in outs]
    assert worst == 0.0
    for s, c in zip(seqs, caches):                                   # 拼回来的 K/V 与连续缓存逐位相同
        for layer in range(CFG.n_layers):
            k, v = gather_kv(pool, layer, np.asarray(s.blocks), s.length)
            assert np.array_equal(k, c.k[layer, 0, :, :s.length])
            assert np.array_equal(v, c.v[layer, 0, :, :s.length])


def test_batched_step_equals_one_sequence_at_a_time(params):
    """paged_step 把新 token 数相同的序列一起过 run_layers：logits、块表、写进块池的 K/V 都与一条一条算逐位相同。

    批里有长度不同的序列、共享块的 fork（写时复制）、和 token 数不同的序列（分成两批）。"""
    rng = np.random.default_rng(3)

    def run(batched):
        pool = BlockPool(CFG, n_blocks=40, block_size=4)
        a, b = PagedSequence(pool), PagedSequence(pool)
        outs = []
        if batched:                                # 同样长的两条提示一批
            outs.append(paged_step(params, CFG, [a, b], rng_toks))
        else:
            outs.append([paged_step(params, CFG, [s], [f])[0] for s, f in zip([a, b], rng_toks)])
        kids = [a.fork(), a.fork(), b.fork()]
        seqs = [a, *kids, b]
        for feed in ([[1], [2], [3], [4], [5]], [[6], [7, 8], [9], [10, 11], [12]], [[13]] * 5):
            if batched:
                outs.append(paged_step(params, CFG, seqs, feed))
            else:
                outs.append([paged_step(params, CFG, [s], [f])[0] for s, f in zip(seqs, feed)])
        return outs, [s.blocks for s in seqs], pool.ref_count.tolist(), pool.k.copy(), pool.v.copy()

    rng_toks = [rng.integers(0, CFG.vocab, 6), rng.integers(0, CFG.vocab, 6)]
    one, many = run(False), run(True)
    for x, y in zip(one[0], many[0]):
        assert all(np.array_equal(p, q) for p, q in zip(x, y))
    assert one[1:3] == many[1:3]
    assert np.array_equal(one[3], many[3]) and np.array_equal(one[4], many[4])
