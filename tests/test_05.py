"""05_kv_store 和它的两个模块：tiers（KV 的大小、带宽、FAST'25 式 1 和式 2）、cluster（网卡队列、调度）。
小到能手算的例子给出确切的答案；论文的数（FAST'25 表 1、§2.2）对着论文查；脚本：每个演示都能跑、改坏一个设置
印 ✗ 而不是一句假话、不合理的设置和坏的 trace 文件一行拒绝。"""
import contextlib
import io

import pytest

from conftest import REAL_TRACE, load, needs_real_trace, run
from kv_store import cluster
from lab_common import show
from kv_store.cluster import BLOCK_PULL_S, first_seen, nic_queue, pull_groups, schedule
from kv_store.policies import LRUCache, usable_tokens
from kv_store.tiers import (A800_X8, EQ1_A, EQ1_B, LLAMA2_70B, LLAMA3_70B, TIERS, ModelSpec, Node, Tier,
                            hit_tier, layer_overlap, load_time, prefill_compute_time, prefill_time,
                            trace_prefill_time)
from kv_store.trace import Request, make_trace

TINY = ModelSpec("tiny", n_layers=2, d_model=2, n_heads=1, n_kv_heads=1, n_params=0)   # head_dim 2
ONE_FLOP = Node("1 FLOP/s", n_gpus=1, tflops_per_gpu=1e-12, hbm_gb_per_gpu=1, mfu=1.0)  # 每秒 1 次浮点运算
ONE_BYTE = Tier("1 B/s", 1e-9, "测试")                                                     # 每秒 1 字节


# ---- tiers：公式 ----
def test_kv_bytes_per_token():
    assert LLAMA2_70B.kv_bytes_per_token() == 80 * 8 * 128 * 2 * 2 == 320 * 1024
    assert LLAMA3_70B.kv_bytes_per_token() == LLAMA2_70B.kv_bytes_per_token()
    assert TINY.kv_bytes_per_token() == 2 * 1 * 2 * 2 * 2


def test_eq1_flops_by_hand():
    """FAST'25 式 1：l·(a·n²·d + b·n·d²)，a = 4、b = 22（表 1）。TINY：2·(8n² + 88n)。"""
    assert (EQ1_A, EQ1_B) == (4, 22)
    assert [TINY.prefill_flops(n) for n in (0, 1, 3)] == [0, 192, 672]
    assert prefill_compute_time(TINY, 3, 1, ONE_FLOP) == 672 - 192       # 已有前 1 个 token 的 KV


def test_load_and_overlap_by_hand():
    assert load_time(TINY, 5, ONE_BYTE) == pytest.approx(5 * 16)        # 16 字节 / token，每秒 1 字节
    assert layer_overlap(1.0, 0.5, 2) == layer_overlap(0.5, 1.0, 2) == 1.25
    # 命中 1 个 token：算 480 s，读 16 s，两层流水：480 + 16 / 2
    assert prefill_time(TINY, 3, 1, ONE_BYTE, ONE_FLOP) == pytest.approx(480 + 16 / 2)
    assert prefill_time(TINY, 3, 0, ONE_BYTE, ONE_FLOP) == 672          # 不命中：只有计算


def test_trace_prefill_time_is_the_sum():
    n, h = [1000, 2000, 70_000], [0, 512, 65_536]
    one = [prefill_time(LLAMA3_70B, a, b, TIERS[1]) for a, b in zip(n, h)]
    assert trace_prefill_time(LLAMA3_70B, n, h, TIERS[1]) == one[0] + one[1] + one[2]


def test_hit_tier_is_the_harmonic_mean():
    assert hit_tier(1, TIERS[1], TIERS[2], 2) is TIERS[1]                # 放得下：全从本机读
    both = hit_tier(4, TIERS[1], TIERS[2], 1)                           # 1/4 从 128 GB/s，3/4 从 100 GB/s
    assert both.gb_per_s == pytest.approx(1 / (0.25 / 128 + 0.75 / 100))


def test_fast25_table1_and_eq2():
    """FAST'25 表 1：B_h2d = 128 GB/s、B_nic = 800 Gbps、G = 8 × 312 TFLOPS；§2.2：式 2 的最低带宽，
    8,192 token 前缀，8×A800 要 6 GB/s、8×H800 要 19 GB/s（取整）。"""
    assert (TIERS[1].gb_per_s, TIERS[2].gb_per_s * 8, A800_X8.n_gpus * A800_X8.tflops_per_gpu) == (128, 800, 2496)
    assert TIERS[2].bandwidth(with_gb_per_s=True) == "800 Gbps = 100 GB/s"
    s05 = load("05_kv_store")
    a800, h800 = s05.min_bandwidth(A800_X8), s05.min_bandwidth(s05.H800_X8)
    assert (round(a800), round(h800)) == (6, 19) and (round(a800, 2), round(h800, 2)) == (5.86, 18.57)


# ---- cluster：能手算的小例子 ----
def req(t, blocks, n_in=None):
    return Request(t, n_in or 512 * len(blocks), 1, tuple(blocks))


def test_first_seen_and_groups():
    trace = [req(0, [7, 8]), req(1, [7, 9]), req(2, [7, 8, 9])]
    first, uses = first_seen(trace)
    assert first == {7: 0, 8: 0, 9: 1} and uses == {7: 3, 8: 2, 9: 2}
    assert pull_groups(trace, [0, 1, 1], first, {7}) == [[], [(0, True, 1)], [(0, True, 1)]]
    assert pull_groups(trace[2:], [3], first, set()) == [[(0, False, 2), (1, False, 1)]]


def test_nic_fifo_queue_by_hand():
    """3 台，k = 1：请求 1、2 同时到达，都从节点 0（块的家）各拉 1 块：第二个排在第一个后面。"""
    out = nic_queue([0.0, 0.0, 0.0], [[], [(0, False, 1)], [(0, False, 1)]], 3, 1, 1.0)
    assert out["busy"] == [2 * BLOCK_PULL_S, 0.0, 0.0]
    assert out["wait"] == [0.0, 0.0, BLOCK_PULL_S]
    local = nic_queue([0.0, 0.0], [[], [(1, False, 3)]], 2, 1, 1.0)     # 家就在执行它的节点上：不走网络
    assert local["busy"] == [0.0, 0.0]


def test_replicas_by_hand():
    """4 台、k = 2：家在 0 的热点块，副本在 0 和 2。请求 1 从最早空下来的副本（并列取 0）拉，请求 3 就去 2；
    请求 2 本机有副本，不拉。rate_scale = 2：到达时刻减半。"""
    hot = [(0, True, 1)]
    out = nic_queue([0.0, 2.0, 2.0, 2.0], [[], hot, hot, hot], 4, 2, 2.0)
    assert out["busy"] == [BLOCK_PULL_S, 0.0, BLOCK_PULL_S, 0.0] and out["wait"] == [0.0] * 4
    cold = [(0, False, 1)]                                              # 不热：都挤在家里那块网卡上
    assert nic_queue([0.0] * 4, [[], cold, cold, cold], 4, 2, 1.0)["busy"] == [3 * BLOCK_PULL_S, 0, 0, 0]


def test_schedule_cache_aware_goes_where_the_prefix_is():
    """请求 0 在节点 0 上算完块 1、2；1 s 后同样的请求：看缓存的调度回到节点 0（命中 2 块），负载均衡去了
    先空下来的节点 1（从没用过，不命中）。"""
    trace = [req(0.0, [1, 2]), req(1.0, [1, 2])]
    for s in ("local_cache", "global_cache"):
        assert schedule(trace, s, 2, 10, 1.0, LRUCache, usable_tokens)["hits"] == [0, 2], s
    lb = schedule(trace, "load_balancing", 2, 10, 1.0, LRUCache, usable_tokens)
    assert lb["hits"] == [0, 0] and lb["ttft"] == pytest.approx(lb["service"])    # 都不排队：TTFT = 服务时间
    assert lb["service"][0] == cluster.prefill_time(cluster.MODEL, 1024, 0, cluster.LOCAL_DRAM, cluster.NODE)


def test_global_pulls_only_finished_blocks():
    """100 块（51,200 token）在节点 0 上要算约 8.6 s。1 s 时这些块还没算完：拉不到，只好在节点 0 排队；
    21 s 时节点 0 在忙别的，块早算完了：节点 1 把 100 块经 RDMA 拉过来。"""
    q, other = list(range(100, 200)), list(range(300, 400))
    early = schedule([req(0.0, q), req(1.0, q + [7])], "global_cache", 2, 1000, 1.0, LRUCache, usable_tokens)
    assert early["pulled"] == [0, 0] and early["hits"] == [0, 100]
    late = schedule([req(0.0, q), req(20.0, other), req(21.0, q + [7])], "global_cache", 2, 1000, 1.0, LRUCache,
                    usable_tokens)
    assert late["pulled"] == [0, 0, 100] and late["hits"] == [0, 0, 100]


def test_schedule_uses_the_cache_class_given():
    """容量 0：每块一放进去就被淘汰，哪种调度都没有命中——命中来自传进去的缓存类，而不是别处。"""
    trace = [req(float(i), [1, 2, 3]) for i in range(5)]
    for s in cluster.SCHEDULERS:
        assert schedule(trace, s, 2, 0, 1.0, LRUCache, usable_tokens)["hits"] == [0] * 5


# ---- 脚本 ----
def quietly(fn, *args):
    """(演示印的文字, 它返回的 dict)。先印标题：观察从 1 数起。"""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        show.header(fn.__name__)
        d = fn(*args)
    return out.getvalue(), d


@pytest.fixture(scope="module")
def small():
    return make_trace(seed=0, n_requests=3000, duration_s=600.0), "小 trace"


def test_every_demo_runs(small):
    s05 = load("05_kv_store")
    for fn, args in ((s05.demo_load_or_recompute, ()), (s05.demo_hot_blocks, small),
                     (s05.demo_scheduling, small), (s05.demo_pd_transfer, ())):
        text, d = quietly(fn, *args)
        assert "观察" in text and d["rows"] and d["caption"][:20] in text


def test_a_broken_claim_prints_a_cross():
    s05 = load("05_kv_store")
    s05.PD_NIC_GBPS = 100                                               # 命中 95% 时要 634.4 Gbps：藏不住
    text, _ = quietly(s05.demo_pd_transfer)
    assert "✗ 在这组设置下不成立：需要 32.5 → 634.4 Gbps，网卡 100 Gbps" in text.replace("\n     ", "")


def test_replication_claim_fails_without_hot_blocks(small):
    s05 = load("05_kv_store")
    s05.HOT_SHARE = 1.0                                                 # 没有块被全部请求用到：没有热点块
    text, d = quietly(s05.demo_hot_blocks, *small)
    assert "✗ 在这组设置下不成立：热点块 0 块" in text and d["rows"][0][1:] == d["rows"][1][1:]


@pytest.mark.parametrize("setting, value", [("PD_HIT", 1.0), ("PD_HIT", -0.0), ("REPLICAS", (2, 4)),
                                            ("NET_NODES", (16, 16)), ("SCHED_LOAD", 1e-308), ("PREFIX", True)])
def test_bad_setting_is_one_line(setting, value, capsys):
    s05 = load("05_kv_store")
    setattr(s05, setting, value)
    with pytest.raises(SystemExit) as e:
        s05.check_settings()
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.count("\n") == 1 and setting in err


def test_broken_evict_is_refused_before_any_output(monkeypatch, capsys):
    s05 = load("05_kv_store")
    monkeypatch.setattr(s05.LRUCache, "evict", lambda self: None)
    with pytest.raises(SystemExit) as e:
        s05.main([])
    out, err = capsys.readouterr()
    assert e.value.code == 2 and out == "" and "evict" in err and err.count("\n") == 1


def test_bad_trace_file_is_one_line(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"timestamp": 0, "input_length": 5}\n')
    code, out, err = run("05_kv_store", "--trace", str(bad), "--demo", "2")
    assert code == 2 and out == "" and err.count("\n") == 1 and "bad.jsonl:1" in err


@needs_real_trace
def test_real_trace():
    code, out, err = run("05_kv_store", "--trace", REAL_TRACE, "--demo", "3")
    assert code == 0, err
    assert "文件 mooncake_fast25_synthetic_trace.jsonl，" in out and "✗" not in out     # 顺序也与论文图 5 相同
