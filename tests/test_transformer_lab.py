"""第 2 讲的小模型：形状、KV 大小的算术、以及"怎么切着算都逐位相同"。"""
import numpy as np
import pytest
from lab_common.transformer_lab import QUERY_BLOCK, TINY, KVCache, attend, config_like, forward, init_params

CFG = config_like(TINY, max_seq=64)
PARAMS = init_params(CFG, seed=0)
TOKS = np.random.default_rng(1).integers(0, CFG.vocab, (2, 40))


def test_config_like_changes_only_given_fields():
    c = config_like(TINY, max_seq=99)
    assert c.max_seq == 99 and c.d_model == TINY.d_model and TINY.max_seq != 99


def test_kv_bytes_per_token_arithmetic():
    # 2 层 × 2 个 KV 头 × 16 维 × 2（K、V）× 8 字节（float64）
    assert TINY.kv_bytes_per_token() == 2 * 2 * 16 * 2 * 8 == 1024
    assert TINY.kv_bytes_per_token(dtype_bytes=2) == 256


def test_init_params_is_deterministic_and_gqa_shaped():
    p2 = init_params(CFG, seed=0)
    assert np.array_equal(PARAMS["embed"], p2["embed"])
    lay = PARAMS["layers"][0]
    assert lay["wq"].shape == (CFG.d_model, CFG.n_heads * CFG.head_dim)
    assert lay["wk"].shape == (CFG.d_model, CFG.n_kv_heads * CFG.head_dim)
    assert not np.array_equal(PARAMS["embed"], init_params(CFG, seed=1)["embed"])


def test_forward_shape_and_cache_length():
    cache = KVCache(CFG, batch=2)
    out = forward(PARAMS, CFG, TOKS[:, :5], cache)
    assert out.shape == (2, 5, CFG.vocab) and cache.length == 5
    assert cache.k.shape == (CFG.n_layers, 2, CFG.n_kv_heads, CFG.max_seq, CFG.head_dim)


@pytest.mark.parametrize("cuts", [[40], [1, 39], [17, 23], [10, 10, 10, 10], [1] * 40])
def test_chunked_forward_is_bit_exact(cuts):
    """整段算、分块算、逐个 token 算：logits 逐位相同（max |diff| == 0.0）。"""
    full = forward(PARAMS, CFG, TOKS)
    cache, outs, s = KVCache(CFG, 2), [], 0
    for n in cuts:
        outs.append(forward(PARAMS, CFG, TOKS[:, s:s + n], cache))
        s += n
    assert np.abs(np.concatenate(outs, axis=1) - full).max() == 0.0


@pytest.mark.parametrize("cuts", [[1, QUERY_BLOCK + 5, 2 * QUERY_BLOCK + 14], [QUERY_BLOCK, QUERY_BLOCK, 20, 40, 3 * QUERY_BLOCK - 160]])
def test_long_prefill_in_query_blocks_is_bit_exact(cuts):
    """比 QUERY_BLOCK 长的 prefill（attend 按查询分块、每块只乘看得见的键）：整段算和分块算逐位相同。"""
    cfg = config_like(TINY, max_seq=4 * QUERY_BLOCK)
    params, toks = init_params(cfg, seed=1), np.random.default_rng(2).integers(0, cfg.vocab, (1, sum(cuts)))
    full = forward(params, cfg, toks)
    cache, outs, s = KVCache(cfg, 1), [], 0
    for n in cuts:
        outs.append(forward(params, cfg, toks[:, s:s + n], cache))
        s += n
    assert np.concatenate(outs, axis=1).tobytes() == full.tobytes()


def test_zero_new_tokens_give_zero_logits_rows():
    """接着缓存算 0 个新 token：返回 0 行 logits，缓存不变（attend 的 T 可以是 0）。"""
    cache = KVCache(CFG, 1)
    forward(PARAMS, CFG, TOKS[:1, :5], cache)
    assert forward(PARAMS, CFG, TOKS[:1, :0], cache).shape == (1, 0, CFG.vocab) and cache.length == 5


def test_batch_does_not_change_a_sequence():
    both = forward(PARAMS, CFG, TOKS)
    one = forward(PARAMS, CFG, TOKS[1:2, :25])
    assert np.abs(both[1, :25] - one[0]).max() == 0.0


def test_causal_future_tokens_do_not_change_the_past():
    a = forward(PARAMS, CFG, TOKS[:1, :30])
    b = forward(PARAMS, CFG, np.concatenate([TOKS[:1, :20], TOKS[1:2, 20:30]], axis=1))
    assert np.abs(a[0, :20] - b[0, :20]).max() == 0.0
    assert np.abs(a[0, 20:] - b[0, 20:]).max() > 0


def test_cache_overflow_is_a_clear_error():
    cache = KVCache(CFG, 1)
    forward(PARAMS, CFG, np.zeros((1, 60), dtype=int), cache)
    with pytest.raises(ValueError, match="max_seq"):
        forward(PARAMS, CFG, np.zeros((1, 5), dtype=int), cache)


def padded_attend(q, k, v, q_pos, pad_to):
    """参照：K/V 整段补零到 pad_to、GQA 把 K/V 复制到每个查询头，再按公式算（attend 只补到批里最长的 L）。"""
    B, H, T, hd = q.shape
    kp, vp = np.zeros((B, k[0].shape[0], pad_to, hd)), np.zeros((B, k[0].shape[0], pad_to, hd))
    for b, (kb, vb) in enumerate(zip(k, v)):
        kp[b, :, :kb.shape[1]], vp[b, :, :vb.shape[1]] = kb, vb
    kp, vp = np.repeat(kp, H // kp.shape[1], axis=1), np.repeat(vp, H // vp.shape[1], axis=1)
    s = np.einsum("bhtd,bhnd->bhtn", q, kp) / np.sqrt(hd)
    s = np.where((np.arange(pad_to) <= q_pos[:, :, None])[:, None], s, -np.inf)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    return np.einsum("bhtn,bhnd->bhtd", p, vp) / p.sum(axis=-1, keepdims=True)


def assert_attend_matches_padding(rng, seed, B, T, pad_to):
    """B 条序列、各 T 个查询，起点随机（缓存里已有 0..pad_to−T 个 token）：attend 与整段补零的公式逐位相同。"""
    Hkv, group, hd = [(2, 2, 16), (1, 4, 8), (4, 1, 16)][seed % 3]
    starts = [int(rng.integers(0, pad_to - T + 1)) for _ in range(B)]
    q = rng.normal(size=(B, Hkv * group, T, hd))
    k = [rng.normal(size=(Hkv, s + T, hd)) for s in starts]
    v = [rng.normal(size=(Hkv, s + T, hd)) for s in starts]
    q_pos = np.stack([np.arange(s, s + T) for s in starts])
    assert attend(q, k, v, q_pos, pad_to).tobytes() == padded_attend(q, k, v, q_pos, pad_to).tobytes()


@pytest.mark.parametrize("seed", range(6))
def test_attend_is_bit_exact_to_padding_everything(seed):
    """K/V 只补到批里最长的 L，结果与整段补零到 max_seq 逐位相同（分子逐个位置累加，分母按 max_seq 求和）。"""
    rng = np.random.default_rng(seed)
    pad_to = int(rng.choice([8, 64, 192, 256]))
    B, T = int(rng.integers(1, 5)), int(rng.integers(1, 9))
    assert_attend_matches_padding(rng, seed, B, T, pad_to)


@pytest.mark.parametrize("seed", range(4))
def test_attend_in_query_blocks_is_bit_exact_to_padding_everything(seed):
    """T > QUERY_BLOCK 个查询（长的 prefill）：按查询分块、每块只乘它看得见的键，结果与一次算完、整段补零的公式逐位相同。"""
    rng = np.random.default_rng(100 + seed)
    B, T = int(rng.integers(1, 4)), int(rng.integers(QUERY_BLOCK + 1, 3 * QUERY_BLOCK))
    pad_to = T + int(rng.integers(0, 2 * QUERY_BLOCK))
    assert_attend_matches_padding(rng, seed, B, T, pad_to)
