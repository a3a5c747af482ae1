"""paged_kv：块池的账（对照一个逐 token 的朴素孪生）、gather_kv、paged_step 与连续 KVCache 逐位相同、论文的公式。"""
import random

import numpy as np
import pytest

from lab_common.transformer_lab import TINY, KVCache, config_like, forward, init_params
from paged_kv import BlockPool, PagedSequence, gather_kv, kv_bytes_per_token, n_blocks, paged_step


def test_kv_bytes_per_token_formulas():
    assert kv_bytes_per_token("MHA", 40, 40, 128) == 819_200                # OPT-13B：vLLM 论文 §3 的 800 KB
    assert kv_bytes_per_token("GQA", 80, 64, 128, n_kv_heads=8) == 327_680  # LLaMA2-70B：320 KiB
    assert kv_bytes_per_token("MQA", 80, 64, 128) == 40_960
    assert kv_bytes_per_token("MLA", 60, 128, 128, kv_lora_rank=512, rope_dim=64) == 69_120   # DeepSeek-V2
    assert [n_blocks(n, 4) for n in (0, 1, 4, 5, 8, 9)] == [0, 1, 1, 2, 2, 3]


def test_fork_and_copy_on_write_by_hand():
    pool = BlockPool(None, n_blocks=4, block_size=2)
    a = PagedSequence(pool)
    a.reserve(3)
    a.length = 3                                   # 块 0 满、块 1 写了 1 个
    b = a.fork()
    assert b.blocks == [0, 1] and pool.ref_count.tolist() == [2, 2, 0, 0] and pool.n_cow == 0
    blk, off = b.reserve(1)                        # 块 1 没写满又被共享 → 复制成块 2
    assert b.blocks == [0, 2] and (blk.tolist(), off.tolist()) == ([2], [1]) and pool.n_cow == 1
    assert pool.ref_count.tolist() == [2, 1, 1, 0]
    b.length = 4
    blk, off = b.reserve(1)                        # 块 2 写满了：拿新块 3，不复制
    assert b.blocks == [0, 2, 3] and (blk.tolist(), off.tolist()) == ([3], [0]) and pool.n_cow == 1
    a.reserve(1)                                   # a 是块 1 最后的持有者：原地写
    assert a.blocks == [0, 1] and pool.n_cow == 1
    a.free()
    b.free()
    assert pool.ref_count.tolist() == [0, 0, 0, 0] and sorted(pool.free_blocks) == [0, 1, 2, 3]


@pytest.mark.parametrize("block_size", [1, 3, 5, 16])
def test_random_fork_write_free_against_a_token_twin(block_size):
    """随机的 fork / 写 k 个 token / free：每条序列从自己的块读回的，永远等于它自己写过的 token（孪生：一个 list）；
    ref_count = 持有这块的序列数；空闲表 = ref_count 为 0 的块；每次写的块只属于写它的那条序列。"""
    rng = random.Random(block_size)
    store = {}                                     # (块, 偏移) → 写进去的 token：块池的"内容"
    pool = BlockPool(None, 64, block_size, copy_fn=lambda s, d: store.update(
        {(d, j): store[(s, j)] for j in range(block_size) if (s, j) in store}))
    seqs = [(PagedSequence(pool), [])]             # (序列, 孪生)
    for step in range(300):
        op = rng.random()
        if op < 0.2 and len(seqs) < 6:
            s, twin = rng.choice(seqs)
            seqs.append((s.fork(), list(twin)))
        elif op < 0.3 and len(seqs) > 1:
            s, _ = seqs.pop(rng.randrange(len(seqs)))
            s.free()
        else:
            s, twin = rng.choice(seqs)
            if n_blocks(s.length + 4, block_size) - len(s.blocks) + 1 > pool.num_free:
                continue
            k = rng.randint(1, 4)
            toks = [step * 10 + j for j in range(k)]
            for b, o, t in zip(*s.reserve(k), toks):
                assert pool.ref_count[b] == 1      # 写时复制之后，要写的块只有这一条序列在用
                store[(int(b), int(o))] = t
            s.length += k
            twin += toks
        for s, twin in seqs:
            assert [store[(s.blocks[p // block_size], p % block_size)] for p in range(s.length)] == twin
        held = [0] * pool.n_blocks
        for s, _ in seqs:
            for b in s.blocks:
                held[b] += 1
        assert pool.ref_count.tolist() == held
        assert sorted(pool.free_blocks) == [b for b in range(pool.n_blocks) if held[b] == 0]
    assert pool.n_cow > 0 or block_size == 1       # 这个脚本真的走到了写时复制


def test_gather_kv_follows_the_block_table():
    cfg = config_like(TINY, n_layers=1)
    pool = BlockPool(cfg, 5, 3)
    pool.k[:] = np.random.default_rng(0).normal(size=pool.k.shape)
    pool.v[:] = -pool.k
    k, v = gather_kv(pool, 0, np.array([4, 1, 2]), 7)
    want = np.stack([pool.k[0, [4, 1, 2][t // 3], :, t % 3] for t in range(7)], axis=1)
    assert k.shape == (cfg.n_kv_heads, 7, cfg.head_dim) and np.array_equal(k, want) and np.array_equal(v, -want)


@pytest.mark.parametrize("block_size", [1, 3, 16])
def test_paged_step_equals_contiguous_bit_for_bit(block_size):
    """一批长度不同的序列一起 prefill、解码，中途 fork（共享没写满的块、写时复制）：每条的 logits 都和从头连续算的
    逐位相同（max |diff| = 0.0）。"""
    cfg = config_like(TINY, max_seq=48)
    params = init_params(cfg, seed=3)
    rng = np.random.default_rng(4)
    prompts = [list(rng.integers(0, cfg.vocab, n)) for n in (5, 11, 1)]
    pool = BlockPool(cfg, 64, block_size)
    seqs = [PagedSequence(pool) for _ in prompts]
    tokens = [list(p) for p in prompts]
    outs = paged_step(params, cfg, seqs, prompts)
    for step in range(6):
        if step == 2:                              # fork 第 0 条：两条共享它的块，各自往后写
            seqs.append(seqs[0].fork())
            tokens.append(list(tokens[0]))
            outs.append(outs[0])
        new = [[int(np.argmax(o[-1]) + i) % cfg.vocab] for i, o in enumerate(outs)]
        outs = paged_step(params, cfg, seqs, new)
        for t, x, o in zip(tokens, new, outs):
            t += x
            ref = forward(params, cfg, np.array([t]), cache=KVCache(cfg, 1))[0, -1:]
            assert np.array_equal(o, ref)
    assert pool.n_cow == int(block_size > 1)      # fork 时第 0 条长 7：块大小 3、16 时最后一块没写满，复制一次


def test_forward_prefill_decode_and_batch_are_bit_identical():
    """transformer_lab：整段 prefill、逐 token 解码、两条一批，结果逐位相同（paged 和连续版能逐位比较的前提）。"""
    cfg = config_like(TINY, max_seq=80)
    params = init_params(cfg, seed=0)
    toks = np.random.default_rng(1).integers(0, cfg.vocab, (2, 70))
    whole = forward(params, cfg, toks)                          # 一批两条、70 个查询（分块算注意力）
    cache = KVCache(cfg, 1)
    one = np.concatenate([forward(params, cfg, toks[:1, t:t + 1], cache) for t in range(70)], axis=1)
    assert np.array_equal(whole[:1], one)
    assert np.array_equal(whole[1:], forward(params, cfg, toks[1:]))
