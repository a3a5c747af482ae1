"""kv_store/tiers.py 的物理量：KV 大小、FAST'25 式 (1)、prefill 时间的重叠公式、存储层级。手算的小例子。"""
import pytest

from kv_store.tiers import A800_X8, LLAMA2_70B, TIERS, ModelSpec, Node, Tier, prefill_compute_time, prefill_time
from paged_kv import n_blocks

# 手算用的小模型：2 层、d = 4、2 个头（头维度 2）、1 个 KV 头
TINY = ModelSpec("tiny", n_layers=2, d_model=4, n_heads=2, n_kv_heads=1, n_params=0)


def test_llama2_70b_kv_bytes_per_token():
    # 80 层 × 8 个 KV 头 × 128 × 2（K、V）× 2 字节 = 320 KB
    assert LLAMA2_70B.head_dim == 128
    assert LLAMA2_70B.kv_bytes_per_token() == 327_680 == 320 * 1024


def test_tiny_kv_bytes_per_token():
    assert TINY.kv_bytes_per_token() == 2 * 1 * 2 * 2 * 2 == 16


def test_prefill_flops_hand_case():
    # l·(4·n²·d + 22·n·d²)，n = 3：2 × (4·9·4 + 22·3·16) = 2 × (144 + 1056) = 2400
    assert TINY.prefill_flops(3) == 2400
    assert TINY.prefill_flops(1) == 2 * (16 + 352) == 736
    assert TINY.prefill_flops(0) == 0


def test_prefill_flops_llama2_70b_at_8k():
    # n = d = 8192 时两项合成 26·d³
    assert LLAMA2_70B.prefill_flops(8192) == 80 * 26 * 8192 ** 3


def test_node_flops_is_peak_times_mfu():
    assert A800_X8.flops == pytest.approx(8 * 312e12 * 0.6)
    assert Node("x", 2, 100, 80, mfu=1.0).flops == pytest.approx(2e14)


@pytest.mark.parametrize("n", [1, 512, 8192, 100_000])
def test_prefill_compute_time_zero_when_all_cached(n):
    assert prefill_compute_time(LLAMA2_70B, n, n) == 0


def test_prefill_compute_time_is_flops_difference():
    node = Node("hand", 1, 1664e-12, 0, mfu=1.0)          # 每秒 1664 次浮点运算
    assert prefill_compute_time(TINY, 3, 1, node) == pytest.approx((2400 - 736) / 1664)
    assert prefill_compute_time(TINY, 3, 1, node) == pytest.approx(1.0)


@pytest.mark.parametrize("gb_per_s,expected", [
    (4e-9, 4.0 + 1.0 / 2),       # 读 16 B / 4 B/s = 4 s > 算 1 s：4 + 1/2
    (32e-9, 1.0 + 0.5 / 2),      # 读 0.5 s < 算 1 s：1 + 0.5/2
])
def test_prefill_time_overlap_hand_case(gb_per_s, expected):
    node = Node("hand", 1, 1664e-12, 0, mfu=1.0)
    tier = Tier("hand", gb_per_s, "手算")
    assert prefill_time(TINY, 3, 1, tier, node) == pytest.approx(expected)


def test_prefill_time_without_hits_is_compute():
    assert prefill_time(LLAMA2_70B, 8192, 0, TIERS[1]) == prefill_compute_time(LLAMA2_70B, 8192, 0)


def test_tiers_have_sources_and_positive_bandwidth():
    assert len(TIERS) == 4
    for t in TIERS:
        assert isinstance(t.source, str) and t.source.strip()
        assert t.gb_per_s > 0
    assert len({t.name for t in TIERS}) == len(TIERS)
    assert [t.gb_per_s for t in TIERS] == sorted((t.gb_per_s for t in TIERS), reverse=True)   # 越往下越慢


def test_tiers_match_fast25_table1():
    assert TIERS[1].gb_per_s == 128 and TIERS[2].gb_per_s == 100
    assert "FAST'25" in TIERS[1].source and "FAST'25" in TIERS[2].source


def test_n_blocks_rounds_up():
    assert n_blocks(1025, 512) == 3 and n_blocks(1024, 512) == 2 and n_blocks(1, 512) == 1


def test_nic_tier_is_the_node_total():
    """FAST'25 表 1 的 B_nic = 800 Gbps 是一台节点的合计；§3.2.3：每张 A800 配一块 100/200 Gbps 网卡。"""
    assert TIERS[2].gb_per_s * 8 == 800
    assert "合计" in TIERS[2].source and "100/200 Gbps" in TIERS[2].source


def test_hbm_bytes_are_binary():
    """标称 80GB 的 A800 是 80 GiB：整台 8 卡 640 GiB（不是 0.64e12 B）。"""
    assert A800_X8.hbm_bytes == 8 * 80 * 2**30


def test_eq1_constants_from_fast25_table1():
    from kv_store.tiers import EQ1_A, EQ1_B
    assert (EQ1_A, EQ1_B) == (4, 22)


def test_trace_prefill_time_is_the_sum_of_per_request_times():
    """一整个 trace：逐个请求的 prefill_time 从前往后加起来；不命中时就是 prefill_compute_time 之和。"""
    import numpy as np
    from kv_store.tiers import trace_prefill_time
    n, h = np.array([1_000, 8_192, 3]), np.array([0, 4_096, 2])
    want = 0.0
    for a, b in zip(n.tolist(), h.tolist()):
        want += prefill_time(LLAMA2_70B, a, b, TIERS[1])
    assert trace_prefill_time(LLAMA2_70B, n, h, TIERS[1]) == want
    assert trace_prefill_time(LLAMA2_70B, n, 0 * h, TIERS[1]) == sum(prefill_compute_time(LLAMA2_70B, a, 0) for a in n.tolist())
    assert trace_prefill_time(LLAMA2_70B, n[:0], h[:0], TIERS[1]) == 0.0


def test_hit_tier_blends_local_and_remote_by_bytes():
    """放得进本机：就是本机那一层；放不下：超出的按比例从远端读，等效带宽是按字节数的调和平均。"""
    from kv_store.tiers import hit_tier
    assert hit_tier(1e12, TIERS[1], TIERS[2], 1e12) is TIERS[1]
    tier = hit_tier(4e12, TIERS[1], TIERS[2], 1e12)                      # 1/4 从 128 GB/s、3/4 从 100 GB/s
    assert 1 / tier.gb_per_s == pytest.approx(0.25 / 128 + 0.75 / 100)
