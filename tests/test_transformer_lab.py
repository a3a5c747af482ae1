"""第 2 讲的小模型：形状、KV 大小的算术、以及"怎么切着算都逐位相同"。"""
import numpy as np
import pytest
from lab_common.transformer_lab import TINY, KVCache, config_like, forward, init_params

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
