"""05_kv_store.py 和 kv_store/cluster.py：每个演示打印的每条结论都在这里检查，再加几个手算的小例子。"""
import ast
import doctest
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest
from conftest import LECTURE, REAL_TRACE, load_script, run_main, share_slow_calls
from rich.cells import cell_len

from lab_common.console import observation_lines
from lab_common.say import integer

import kv_store.cluster
from kv_store.cluster import (BLOCK_BYTES, LOCAL_DRAM, block_homes, fetch_plan, hit_accesses, hit_tokens, nic_fetch,
                        run_prefill, trace_columns)
from kv_store.tiers import A800_X8, LLAMA2_70B, TIERS, load_time, prefill_compute_time, prefill_time
from kv_store.trace_file import Request
from kv_store.traces import Trace

m = load_script("05_kv_store")
SCRIPT = os.path.join(LECTURE, "05_kv_store.py")


def prefill_s(n_in, hit_blocks):
    """集群模拟里一个请求的 prefill 时间：kv_store.tiers.prefill_time，命中的 KV 从本机 DRAM 读。"""
    return prefill_time(LLAMA2_70B, n_in, hit_tokens(hit_blocks, n_in), LOCAL_DRAM, A800_X8)


@pytest.fixture(scope="module")
def simulate_once():
    """本文件里 05 的各次运行：同样参数和设置的集群模拟（nic_fetch、run_schedulers）整个会话只算一遍
    （conftest.share_slow_calls）——--more 只改打印，不改算什么。"""
    with pytest.MonkeyPatch.context() as mp:
        share_slow_calls(m, mp, "05_kv_store")
        yield


@pytest.fixture(scope="module")
def full_run(simulate_once):
    """默认设置跑一遍全部演示（整个文件只跑这一次，和换进程的测试共用）：({演示号: dict}, 打印的文本)。"""
    out, res = run_main("05_kv_store")
    return res, out


@pytest.fixture(scope="module")
def d1(full_run):
    return full_run[0][1]


@pytest.fixture(scope="module")
def d2(full_run):
    return full_run[0][2]


@pytest.fixture(scope="module")
def d3(full_run):
    return full_run[0][3]


@pytest.fixture(scope="module")
def out(full_run):
    return full_run[1]


# ---------------------------------------------------------------- 演示 1
def test_demo1_min_bandwidth_reproduces_paper_at_full_mfu(d1):
    """FAST'25：8×A800 至少 6 GB/s、8×H800 至少 19 GB/s（8,192 token 前缀，对应 100% 算力）。"""
    assert round(d1["a800_100"]) == m.PAPER_MIN_BW["8×A800"] == 6
    assert round(d1["h800_100"]) == m.PAPER_MIN_BW["8×H800"] == 19
    assert d1["a800_100"] == pytest.approx(5.86, abs=0.01) and d1["h800_100"] == pytest.approx(18.57, abs=0.01)


def test_demo1_lower_mfu_lowers_the_threshold(d1):
    assert d1["a800_60"] == pytest.approx(d1["a800_100"] * 0.6)
    assert d1["h800_60"] == pytest.approx(d1["h800_100"] * 0.6)


def test_demo1_faster_gpu_needs_proportionally_more_bandwidth(d1):
    assert d1["h800_100"] / d1["a800_100"] == pytest.approx(989 / 312)


@pytest.mark.parametrize("key", [("8×A800", 1.0), ("8×A800", 0.6), ("8×H800", 1.0), ("8×H800", 0.6)])
def test_demo1_longer_prefix_needs_less_bandwidth(d1, key):
    bw = [d1["min_bw"][(*key, n)] for n in m.PREFIX_LENS]
    assert all(a > b for a, b in zip(bw, bw[1:]))


def test_demo1_every_tier_beats_recompute_on_a800(d1):
    assert all(r["ratio"] < 1 and r["n_star"] < 1 for r in d1["tiers"])
    ssd = min(d1["tiers"], key=lambda r: r["gbps"])
    assert ssd["short"] == "SSD" and 0.5 < ssd["ratio"] < 0.52


def test_demo1_ssd_break_even_on_h800_solves_the_equation(d1):
    slow = [r for r in d1["tiers"] if r["n_star_h800"] >= 1]
    assert [r["short"] for r in slow] == ["SSD"]
    n = slow[0]["n_star_h800"]
    h800 = m.replace(m.H800_X8, mfu=A800_X8.mfu)
    assert load_time(LLAMA2_70B, n, TIERS[3]) == pytest.approx(prefill_compute_time(LLAMA2_70B, n, 0, h800))
    assert 40_000 < n < 42_000


def test_demo1_layer_simulation_equals_formula(d1):
    assert d1["worst_diff"] < 1e-12
    for r in d1["tiers"]:
        assert r["pipe"] < d1["full"]                     # 四个层级都比全部重算快


def test_demo1_dram_load_is_hidden_but_first_layer(d1):
    dram = d1["tiers"][1]
    assert dram["load"] < d1["compute"]
    assert dram["exposed"] == pytest.approx(dram["load"] / LLAMA2_70B.n_layers)


def test_demo1_ssd_load_dominates(d1):
    ssd = d1["tiers"][3]
    assert ssd["load"] > d1["compute"] and ssd["pipe"] < d1["full"]
    assert ssd["pipe"] == pytest.approx(ssd["load"] + d1["compute"] / LLAMA2_70B.n_layers)


# ---------------------------------------------------------------- 演示 2
def test_demo2_hot_nic_load_grows_with_cluster(d2):
    loads = [d2["by"][(n, 1)]["hot_load"] for n in m.NET_NODES]
    assert all(a < b for a, b in zip(loads, loads[1:]))
    big = d2["by"][(m.NET_NODES[-1], 1)]
    assert big["hot_load"] > 5 * big["avg_load"] and big["avg_load"] < 0.05


def test_demo2_only_the_largest_cluster_saturates_without_replication(d2):
    assert [n for n in m.NET_NODES if d2["by"][(n, 1)]["hot_load"] > 1] == [128]
    assert d2["by"][(128, 1)]["mean"] > 1.0                        # 秒级排队


def test_demo2_replication_reduces_queueing(d2):
    by = d2["by"]
    means = [by[(128, k)]["mean"] for k in m.REPLICAS]
    loads = [by[(128, k)]["hot_load"] for k in m.REPLICAS]
    assert means[0] > 100 * means[1] >= 100 * means[-1]
    assert all(a > b for a, b in zip(loads, loads[1:])) and loads[1] <= 1 < loads[0]
    for n in m.NET_NODES:
        assert by[(n, 4)]["mean"] < by[(n, 1)]["mean"] and by[(n, 4)]["hot_load"] < by[(n, 1)]["hot_load"]


def test_demo2_hot_blocks_exist(d2):
    assert d2["n_hot"] == 21 and 0.2 < d2["hot_access_share"] < 0.5
    assert d2["hit_blocks"] <= d2["raw_hits"] and d2["reuse"] > 0


# ---------------------------------------------------------------- 演示 3
def test_demo3_order_matches_paper(d3):
    r = d3["results"]
    assert r["global_cache"]["mean"] <= r["local_cache"]["mean"] <= r["load_balancing"]["mean"] <= r["random"]["mean"]
    assert sorted(m.PAPER_FIG5, key=m.PAPER_FIG5.get) == ["global_cache", "local_cache", "load_balancing", "random"]


def test_demo3_cache_aware_hits_more_and_works_less(d3):
    r = d3["results"]
    blind = max(r["random"]["hit"], r["load_balancing"]["hit"])
    assert min(r["local_cache"]["hit"], r["global_cache"]["hit"]) > blind
    assert max(r["local_cache"]["util"], r["global_cache"]["util"]) < r["load_balancing"]["util"]


def test_demo3_load_without_cache_exceeds_cluster(d3):
    assert d3["no_cache_nodes"] * d3["scale"] == pytest.approx(m.SCHED_LOAD * m.SCHED_NODES)
    assert m.SCHED_LOAD > 1


def test_demo3_global_pulls_and_beats_local(d3):
    r = d3["results"]
    assert r["global_cache"]["pulled"] > 0 and 0 < r["global_cache"]["pulled_share"] < 1
    assert r["global_cache"]["mean"] < r["local_cache"]["mean"]
    for s in ("random", "load_balancing", "local_cache"):
        assert r[s]["pulled"] == 0


def test_demo3_random_is_worse_than_load_balancing(d3):
    r = d3["results"]
    assert r["random"]["mean"] > r["load_balancing"]["mean"]


# ---------------------------------------------------------------- kv_store.cluster：手算的小例子
P = BLOCK_BYTES / 100e9          # 一块经 100 GB/s 网卡的时间


def test_one_prefill_formula_for_04_05_and_the_cluster():
    """prefill 时间只有 kv_store.tiers.prefill_time 一个；FAST'25 式 1 的常数 a = 4、b = 22 只写在 kv_store.tiers 里。"""
    assert not hasattr(kv_store.cluster, "prefill_seconds") and kv_store.cluster.prefill_time is prefill_time
    assert m.prefill_time is prefill_time and m.prefill_compute_time is prefill_compute_time
    homes = set()
    for name in os.listdir(LECTURE) + ["kv_store/" + n for n in os.listdir(os.path.join(LECTURE, "kv_store"))]:
        if name.endswith(".py"):
            with open(os.path.join(LECTURE, name), encoding="utf-8") as f:
                src = f.read()
            if re.search(r"\b4\s*\*\s*n\s*\*\s*n|\b22\s*\*|=\s*4,\s*22\b", src):
                homes.add(name)
    assert homes == {"kv_store/tiers.py"}


def test_no_conditional_expressions_in_05_and_its_modules():
    for name in ("05_kv_store.py", "kv_store/cluster.py", "kv_store/tiers.py"):
        with open(os.path.join(LECTURE, name), encoding="utf-8") as f:
            tree = ast.parse(f.read())
        assert not [n.lineno for n in ast.walk(tree) if isinstance(n, ast.IfExp)], name


def test_observation_functions_fit_on_a_screen():
    with open(SCRIPT, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    obs = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("observations")]
    assert len(obs) == len(m.DEMOS)
    for f in obs:
        assert f.end_lineno - f.lineno + 1 <= 60, f.name


def test_cluster_prefill_time_is_kv_store_prefill_time():
    tr = [Request(0.0, 5000, 1, tuple(range(10)))]
    r = run_prefill(*trace_columns(Trace.from_requests(tr)), "load_balancing", 1, 10, 1.0)
    assert r["ttft"][0] == prefill_time(LLAMA2_70B, 5000, 0, TIERS[1], A800_X8)


def test_hit_tokens_leaves_last_token():
    assert hit_tokens(2, 2000) == 1024 and hit_tokens(2, 1024) == 1023 and hit_tokens(0, 5) == 0


def _tiny_trace():
    # 2 个节点，轮询：r0→0、r1→1、r2→0、r3→1。块 1、2 由 r0 在节点 0 算出。
    blocks = [(1, 2), (1, 2, 3), (1, 2, 4), (1, 5)]
    return [Request(0.0, 512 * len(b), 1, b) for b in blocks], [0, 2, 2, 1]


def _plan(hot_ids, n_nodes=2):
    """_tiny_trace 的到达时刻和 fetch_plan；hot_ids：哪些块算热点块。"""
    tr, hits = _tiny_trace()
    arrival, _, blocks = trace_columns(Trace.from_requests(tr))
    homes = block_homes(blocks)
    hot = np.isin(np.arange(len(homes[1])), list(hot_ids))     # 小 id 不重新编号：dense 编号 = 块 id
    return arrival, fetch_plan(hit_accesses(blocks, hits, homes, hot), len(tr), n_nodes)


def test_fetch_plan_groups_by_home_and_heat_in_first_seen_order():
    _, plan = _plan(set())
    # r1 命中块 1、2（家都是节点 0）→ 一组 2 块；r2 同样；r3 命中块 1 → 一组 1 块；r0 没有命中
    assert plan == dict(home=[0, 0, 0], nb=[2, 2, 1], hot=[False, False, False], start=[0, 0, 1, 2, 3])
    _, plan = _plan({1})
    # 块 1 是热点块：r1、r2 各分成"热的块 1"和"冷的块 2"两组，按在请求里出现的顺序
    assert plan == dict(home=[0, 0, 0, 0, 0], nb=[1, 1, 1, 1, 1], hot=[True, False, True, False, True],
                        start=[0, 0, 2, 4, 5])
    _, plan = _plan(set(), n_nodes=1)
    assert plan["home"] == [0, 0, 0] and plan["start"] == [0, 0, 1, 2, 3]


def test_nic_fetch_fifo_by_hand():
    arrival, plan = _plan(set())
    res = nic_fetch(arrival, plan, 2, 1, rate_scale=1.0)
    # r1 从节点 0 拉 2 块（不等）；r2 在节点 0，本机有；r3 从节点 0 拉 1 块，要等 r1 的 2 块传完
    assert res["wait"] == pytest.approx([0, 0, 0, 2 * P])
    assert res["blocks_sent"] == 3 and res["busy"] == pytest.approx([3 * P, 0])


def test_nic_fetch_replica_on_destination_skips_network():
    arrival, plan = _plan({1})
    res = nic_fetch(arrival, plan, 2, 2, rate_scale=1.0)
    # 块 1 在两台都有副本：r1 只拉块 2（1 块），r3 什么也不拉
    assert res["wait"] == pytest.approx([0, 0, 0, 0])
    assert res["blocks_sent"] == 1


def test_run_prefill_global_pulls_to_idle_node():
    tr = [Request(0.0, 1024, 1, (1, 2)), Request(0.0, 1024, 1, (1, 3))]
    r = run_prefill(*trace_columns(Trace.from_requests(tr)), "global_cache", n_nodes=2, capacity=10, rate_scale=1.0)
    # 节点 0 在算块 1，还没算完：拉不到；节点 1 空闲，从头算比排队快
    assert list(r["where"]) == [0, 1] and list(r["pulled"]) == [0, 0] and list(r["hits"]) == [0, 0]
    assert r["ttft"].tolist() == pytest.approx([prefill_s(1024, 0)] * 2)


def test_run_prefill_load_balancing_and_local():
    tr = [Request(0.0, 1024, 1, (1, 2)), Request(0.0, 1024, 1, (1, 3))]
    lb = run_prefill(*trace_columns(Trace.from_requests(tr)), "load_balancing", 2, 10, 1.0)
    assert list(lb["where"]) == [0, 1] and list(lb["hits"]) == [0, 0]
    loc = run_prefill(*trace_columns(Trace.from_requests(tr)), "local_cache", 2, 10, 1.0)
    assert list(loc["where"]) == [0, 1] and list(loc["pulled"]) == [0, 0]   # 排队比从头算还贵


def test_run_prefill_rejects_unknown_scheduler():
    with pytest.raises(ValueError, match="未知的调度器"):
        run_prefill([], [], [], "fastest", 2, 10, 1.0)


def test_kv_cluster_doctests():
    assert doctest.testmod(kv_store.cluster).failed == 0


def test_05_doctests():
    assert doctest.testmod(m).failed == 0


# ---------------------------------------------------------------- 整个脚本
def flat(text):
    """去掉折行和空白：打印时被折开的句子也能整句查找。"""
    return "".join(text.split())


@pytest.fixture(scope="module")
def more_out(full_run, simulate_once):
    """--more 的输出（conftest.run_main，和 test_golden 共用那一遍）：默认输出挪走的每个事实都在这里。"""
    return run_main("05_kv_store", ["--more"])[0]


def test_smoke_a_number_from_each_demo(d1, d2, d3, out):
    """冒烟：每个演示打印的一个数字，等于它返回的 dict 里的那个数。"""
    assert d1["a800_100"] == pytest.approx(5.86, abs=0.01)
    assert flat(f"8×A800 要 {d1['a800_100']:.2f}") in flat(out)
    assert d2["n_hot"] == 21 and flat(f"的请求）：{d2['n_hot']} 块") in flat(out)
    glo = d3["results"]["global_cache"]["mean"]
    assert glo == pytest.approx(0.38, abs=0.005) and flat(f"全局缓存感知 {glo:.2f}") in flat(out)


def test_default_output_fits_the_budget(out):
    """默认输出：80 列；每个演示至多 28 行、至多 2 条观察，每条至多 3 行。"""
    lines = out.splitlines()
    assert max(cell_len(line) for line in lines) <= 80
    demos = out.split("═" * 80)[1:]
    assert len(demos) == 4
    for text in demos:
        assert len(text.strip("\n").splitlines()) <= 28
        obs = re.findall(r"^  (\d+)\. ", text, flags=re.M)
        assert obs == ["1", "2"][:len(obs)] and 1 <= len(obs) <= 2


def test_each_observation_fits_three_lines(d1, d2, d3, d4):
    for fn, d in ((m.observations_1, d1), (m.observations_2, d2), (m.observations_3, d3), (m.observations_4, d4)):
        lines, more = fn(d)
        assert 1 <= len(lines) <= 2
        assert all(observation_lines(x) <= 3 for x in lines + more), [observation_lines(x) for x in lines]


def obs_of(text, demo):
    """第 demo 个演示默认印出的观察（去掉折行）。"""
    part = text.split("═" * 80)[demo]
    return flat(part.split("观察", 1)[1])


def test_main_prints_the_claims(out):
    """每个演示的两条观察里的数，都是表里印出来的那些（措辞由 golden 文件守着）。"""
    for demo, values in {1: ("8,192", "763.5ms", "4", "389.0ms", "0.510", "5.86", "18.57", "6、19GB/s"),
                         2: ("20%", "151%", "3.9%", "11,626.7ms", "42,974.7ms", "5.3ms", "76%"),
                         3: ("15%", "14%", "38%", "59%", "72%", "46%"),
                         4: ("131,072", "40GiB", "429.5ms", "40,409.4ms", "5.4ms", "95%", "24.6×", "1.3×")}.items():
        text = obs_of(out, demo)
        for v in values:
            assert v in text, (demo, v)
    assert "超载" in obs_of(out, 2) and "超载" not in obs_of(out, 3)       # 151% 的网卡超载；演示 3 的负载都不到 100%
    assert "不一致" not in obs_of(out, 1)


def test_more_prints_the_moved_facts(more_out):
    """--more：默认挪走的事实都在（细表和表注里）。"""
    for claim in ("40,944", "串行", "逐层模拟", "3.2×", "“320 KB”", "= 320 KiB", "2.50 GiB（2.68 GB", "2.35 台",
                  "42,974.7", "P99", "FIFO", "4.8×", "5.75 台", "15.9", "63.6", "0.49 s（线速 0.43 s）", "−91.5%",
                  "NVIDIA H100 SXM", "FP64", "43,936 块", "30.3–140.8 ms"):
        assert flat(claim) in flat(more_out), claim
    rows = {ln.split()[0] + ln.split()[1]: ln.split()[2:] for ln in more_out.splitlines() if ln.startswith("8×")}
    assert rows["8×A800100%"] == ["6.77", "5.86", "4.01", "1.77"]                   # 8×A800（100%）5.86 GB/s
    assert rows["8×A80060%"][1] == "3.52" and rows["8×H80060%"][1] == "11.14"      # 按 60% 算力的门槛
    margin = {ln.split("  ")[0]: ln.split()[-1] for ln in more_out.splitlines() if ln.startswith("LLaMA")}
    assert margin == {"LLaMA3-8B": "6.3×", "LLaMA2-7B": "1.6×", "LLaMA3-70B ÷ 8": "24.6×"}   # 一张卡的网卡余量
    assert re.search(r"^  1,024 .* 4\.1% .*$", more_out, flags=re.M)                  # 发/算：1,024 token 4.1%
    assert re.search(r"^131,072 .* 1\.1% .*$", more_out, flags=re.M)


def test_demo1_same_bytes_from_any_cwd(capsys, tmp_path):
    assert m.main(["--demo", "1"]) == 0
    here = capsys.readouterr().out
    p = subprocess.run([sys.executable, SCRIPT, "--demo", "1"], cwd=tmp_path, capture_output=True, text=True,
                       env=dict(os.environ, NO_COLOR="1"))
    assert p.returncode == 0 and p.stdout == here         # 任何目录、两次运行，逐字节相同


@pytest.mark.real_trace
def test_runs_on_mooncake_jsonl_trace(tmp_path):
    p = subprocess.run([sys.executable, SCRIPT, "--trace", REAL_TRACE, "--demo", "2"], cwd=tmp_path,
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert "3,993 个请求" in p.stdout


@pytest.mark.parametrize("content,where", [('{"timestamp": 0}\n', ":1:"), ("not json\n", ":1:")])
def test_bad_trace_is_one_line_exit_2(tmp_path, content, where):
    f = tmp_path / "bad.jsonl"
    f.write_text(content)
    p = subprocess.run([sys.executable, SCRIPT, "--trace", str(f), "--demo", "2"], capture_output=True, text=True)
    assert p.returncode == 2 and p.stdout == ""
    assert len(p.stderr.strip().splitlines()) == 1 and f"bad.jsonl{where}" in p.stderr


@pytest.mark.parametrize("args", [["--demo", "9"], ["--trace", "/no/such/file.jsonl"], ["--bogus"]])
def test_bad_arguments_are_one_line_exit_2(args):
    p = subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1 and "Traceback" not in p.stderr


def test_min_bandwidth_is_finite():
    assert np.isfinite(m.min_bandwidth(8192, A800_X8))


# ---------------------------------------------------------------- 引用的事实（核对过论文原文）
def test_model_is_named_as_fast25_and_shares_shape_with_v3_dummy(d1, out, more_out):
    """FAST'25 表 1 是 LLaMA3-70B；arXiv v3 是同形状的 dummy LLaMA2-70B：KV 都是 320 KiB/token。"""
    from kv_store.tiers import LLAMA2_70B, LLAMA3_70B
    shape = lambda s: (s.n_layers, s.d_model, s.n_heads, s.n_kv_heads, s.dtype_bytes)  # noqa: E731
    assert shape(LLAMA3_70B) == shape(LLAMA2_70B) == (80, 8192, 64, 8, 2)
    assert LLAMA3_70B.kv_bytes_per_token() == 320 * 1024
    assert kv_store.cluster.MODEL is LLAMA3_70B and d1["model"] == "LLaMA3-70B"
    assert "演示1：读还是重算——LLaMA3-70B" in flat(out)
    assert flat("FAST'25 表 1（gqa = 查询头数 / KV 头数）、§5.3.1：gqa = 8") in flat(more_out)
    assert flat("64 个查询头 ÷ 8 = 8 个 KV 头，2 × 80 × 1,024 × 2 B = 320 KiB") in flat(more_out)
    assert "dummyLLaMA2-70B形状相同" in flat(more_out)


def test_citations_of_layerwise_streaming_and_placement(out):
    """FAST'25 §3.1 第 3 步：逐层发给 decode 节点；arXiv v3 §5.2：prefill 里逐层读 KV、和计算重叠。
    没法在 Mooncake 论文里核对的（DistServe 的放置）不印。"""
    assert flat("FAST'25 §3.1 第 3 步") in flat(out) and flat("arXiv v3 §5.2") in flat(out)
    assert "DistServe" not in out


def test_nic_is_the_node_total_modelled_as_one_fifo(out, more_out):
    """FAST'25 表 1 的 800 Gbps 是一台节点的合计；§3.2.3 每张 A800 配一块 100/200 Gbps 网卡。网卡一律用 Gbps 说。"""
    assert kv_store.cluster.NIC_GB_PER_S * 8 == 800 == m.NIC_GBPS
    assert "每块网卡" not in more_out and "每台一块" not in more_out
    assert "合计800Gbps" in flat(out) and "100GB/s" not in flat(out)
    assert "B_nic=800Gbps（100GB/s）" in flat(more_out) and "100/200Gbps" in flat(more_out)
    assert "FIFO" in more_out


def test_fig5_setup_differences_are_printed(out, more_out):
    """FAST'25 §4.2：16 台 8×A800 的 Mooncake 集群回放 Conversation trace，没说几台做 prefill；本实验全是 prefill。"""
    assert m.PAPER_FIG5_SETUP["nodes"] == 16 and m.PAPER_FIG5_SETUP["trace"] == "Conversation trace"
    assert flat("FAST'25 图 5（16 台 8×A800，Conversation trace）") in flat(out)
    assert flat("没说几台做 prefill") in flat(more_out) and flat("本实验 8 台全做 prefill") in flat(more_out)


def test_trace_is_called_what_it_is(out):
    assert "真实 trace" not in out and "仿Tool&Agent的合成trace（种子0）" in flat(out)


def test_units_one_system_per_quantity(out, more_out):
    """KV 字节用 KiB/MiB/GiB/TiB，内存带宽用 GB/s（10⁹），网卡用 Gbps：8,192 token 的 KV 2.50 GiB = 2.68 GB。"""
    assert flat("8,192 token 共 2.50 GiB（2.68 GB") in flat(more_out)
    assert " KB = " not in more_out
    assert flat("本地缓存 938 GiB（307 万 token") in flat(out)
    assert flat("16,312") in flat(out) and BLOCK_BYTES == 160 * 2**20
    assert "time to first token" in out.split("TTFT", 1)[1][:40]             # TTFT 第一次出现就写全


def test_local_dram_capacity_matches_fast25_5_3_1(out, capsys, monkeypatch):
    """FAST'25 §5.3.1：约 1 TB 的 DRAM 只能存约 300 万 token（320 KB/token）。6,000 块 ≈ 3.07M token。
    出处只印在仍是论文的值旁边：SCHED_CAPACITY 改了就不印 §5.3.1。"""
    paper = m.PAPER_LOCAL_DRAM
    assert paper["tokens"] * LLAMA2_70B.kv_bytes_per_token() == pytest.approx(paper["tb"] * 1e12, rel=0.02)
    assert m.SCHED_CAPACITY * 512 == pytest.approx(paper["tokens"], rel=0.03)
    head = out.split("═" * 80)[3].split("随机", 1)[0]
    assert "§5.3.1" in head
    monkeypatch.setattr(m, "SCHED_CAPACITY", 600)
    monkeypatch.setattr(m, "SCHED_LOAD", 0.01)                               # 只为跑得快
    assert m.main(["--demo", "3"]) == 0
    head = capsys.readouterr().out.split("随机", 1)[0]
    assert "§5.3.1" not in head and "31 万 token" in head


def test_fig5_paper_values_and_14_percent():
    """FAST'25 图 5：3.07 / 3.58 / 5.27 / 19.65 s；§4.2：全局比本地再低 14%。"""
    p = m.PAPER_FIG5
    assert (p["global_cache"], p["local_cache"], p["load_balancing"], p["random"]) == (3.07, 3.58, 5.27, 19.65)
    assert round(100 * (1 - p["global_cache"] / p["local_cache"])) == 14


# ---------------------------------------------------------------- 很小、很怪的 trace：照样跑完，说真话
def _write(path, rows):
    with open(path, "w", encoding="utf-8") as f:
        for ts, n_in, ids in rows:
            f.write(json.dumps(dict(timestamp=ts, input_length=n_in, output_length=1, hash_ids=ids)) + "\n")
    return str(path)


ODD = {   # 名字 → 演示 2、3 的输出里必须有的说法
    "first1": ("只有 1 个请求", "没有任何请求要从别的节点拉 KV", "随机 = 负载均衡 = 本地缓存感知 = 全局缓存感知"),
    "first2": ("同时到达（突发）", "没有一个块被第二个请求用到", "随机 = 负载均衡 = 本地缓存感知 = 全局缓存感知"),
    "first5": ("没有任何请求要从别的节点拉 KV", "负载 > 100% 即超载"),
    "first20": ("没有任何请求要从别的节点拉 KV", "四种调度的命中率都是 0%"),
    "same_ts": ("同时到达（突发）", "所有请求同时到达，算不出网卡负载"),
    "burst_1ms": ("同时到达（突发）",),
    "huge_span": ("分钟",),
    # 块复用 ≠ 前缀命中：块 2 在每个请求里，但都不在开头（04、05 的"命中"只指前缀命中）
    "reuse_not_prefix": ("块复用有 3 次，但都不接在相同的开头后面，前缀缓存用不上", "四种调度的命中率都是 0%"),
    # 一个 token 的请求共用一块：最后一个 token 总要重算，命中的块一个 token 也用不上，不拉 KV
    "one_token": ("命中的 9 块里没有用得上的 token：最后一个 token 总要重算", "四种调度的命中率都是 0%"),
}


@pytest.fixture(scope="module")
def odd_traces(tmp_path_factory):
    """课程 trace 的前 1、2、5、20 行；同一时刻的 20 个请求；1 ms 内的突发；跨度接近 2^53 ms 的两行；
    块复用但前缀不同；一个 token 的请求共用一块。"""
    d = tmp_path_factory.mktemp("odd")
    out = {}
    if os.path.exists(REAL_TRACE):
        with open(REAL_TRACE, encoding="utf-8") as f:
            head = [next(f) for _ in range(20)]
        for n in (1, 2, 5, 20):
            (d / f"first{n}.jsonl").write_text("".join(head[:n]), encoding="utf-8")
            out[f"first{n}"] = str(d / f"first{n}.jsonl")
    shared = [0, 1, 2, 3]                          # 每个请求都以同样的 4 块开头：有复用、有热点
    rows = [(1000, 512 * 6, shared + [100 + 2 * i, 101 + 2 * i]) for i in range(20)]
    out["same_ts"] = _write(d / "same_ts.jsonl", rows)
    out["burst_1ms"] = _write(d / "burst.jsonl", [(0.05 * i, n, ids) for i, (_, n, ids) in enumerate(rows)])
    out["huge_span"] = _write(d / "huge.jsonl", [(0, 1024, [0, 1]), (2 ** 53 - 1, 1024, [0, 1])])
    out["reuse_not_prefix"] = _write(d / "reuse.jsonl", [(1000 * i, 1024, [2 * i + 1, 2]) for i in range(4)])
    out["one_token"] = _write(d / "one_token.jsonl", [(1000 * i, 1, [7]) for i in range(10)])
    return out


def assert_honest(out):
    """没有 nan / inf；印出来的百分比超过 100% 时，文字里说了"超载"。"""
    assert not re.search(r"\bnan\b|\binf\b", out)
    over = [float(x.replace(",", "")) for x in re.findall(r"(\d[\d,]*(?:\.\d+)?)%", out) if float(x.replace(",", "")) > 100]
    if over:
        assert "超载" in out, over


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.real_trace) for n in sorted(ODD) if n.startswith("first")]
                         + [n for n in sorted(ODD) if not n.startswith("first")])    # first*：课程 trace 的前几行
def test_tiny_and_odd_traces_run_with_honest_wording(odd_traces, name, capsys):
    for demo in ("2", "3"):
        assert m.main(["--trace", odd_traces[name], "--demo", demo]) == 0
    out = capsys.readouterr().out
    assert_honest(out)
    assert "没有一个块被第二个请求用到" not in out or name.startswith("first")
    for claim in ODD[name]:
        assert flat(claim) in flat(out), claim


def test_default_output_is_honest_about_overload(out):
    assert_honest(out)
    assert "151%（超载）" in flat(out) and "越排越长" not in out


@pytest.mark.parametrize("arg", [["--trace", ""], ["--trace="]])
def test_empty_trace_name_is_an_error_not_the_synthetic_trace(arg, capsys):
    assert m.main(arg) == 2
    cap = capsys.readouterr()
    assert cap.out == "" and len(cap.err.strip().splitlines()) == 1 and ":0:" in cap.err


# ---------------------------------------------------------------- 演示 4：prefill/decode 分离时发 KV
@pytest.fixture(scope="module")
def d4(full_run):
    return full_run[0][4]


def test_demo4_kv_bytes_and_send_time(d4):
    """KV 字节 = n × 320 KiB；发送时间 = 字节 × 8 / Gbps；按层流水 = max + min / 80，逐层模拟与之相同。"""
    for c in d4["base"]:
        assert c["kv"] == c["n"] * 320 * 1024
        assert c["send"] == pytest.approx(c["kv"] * 8 / (m.PD_NIC_GBPS * 1e9))
        assert c["total"] == pytest.approx(max(c["prefill"], c["send"]) + min(c["prefill"], c["send"]) / 80)
    assert d4["worst_diff"] < 1e-9


def test_demo4_baseline_hides_the_send_behind_prefill(d4, out):
    """800 Gbps：每个长度都藏得住，只露出最后一层（发送的 1/80）。"""
    for c in d4["base"]:
        assert c["hidden"] and c["exposed"] == pytest.approx(c["send"] / 80)
    long_ = d4["base"][-1]
    assert long_["n"] == 131072 and long_["send"] == pytest.approx(0.4295, abs=1e-4)
    assert all(v in obs_of(out, 4) for v in ("800Gbps", "429.5ms", "40,409.4ms", "5.4ms"))


def test_demo4_needed_bandwidth_is_demo1_min_bandwidth(d4):
    """不命中时"藏得住所需的带宽"和演示 1 的"读比重算快所需的带宽"是同一个量：KV 字节 / prefill 时间；
    藏得住的最短 prompt（cross）就是演示 1 的保本长度（带宽 = Gbps / 8）。"""
    for c in d4["base"]:
        assert c["need_gbps"] == pytest.approx(m.min_bandwidth(c["n"], A800_X8) * 8)
    for g, n in d4["curves"]["cross"].items():
        assert m.min_bandwidth(n, A800_X8) * 8 == pytest.approx(g)


def test_demo4_shorter_prompt_sends_relatively_more(d4, more_out):
    ratios = [c["send"] / c["prefill"] for c in d4["base"]]
    assert all(a > b for a, b in zip(ratios, ratios[1:]))
    assert re.search(r"^  1,024 .* 4\.1% .*$", more_out, flags=re.M)


def test_demo4_slow_nic_exposes_short_prompts_only(d4, more_out):
    """24 Gbps（FAST'25 §5.4.2 模拟了 24–400 Gbps）：1K、8K 藏不住（需要 32.5、28.1 Gbps），32K、128K 藏得住。"""
    assert [c["hidden"] for c in d4["slow"]] == [False, False, True, True]
    assert all(v in obs_of(more_out, 4) for v in ("24Gbps", "1,024和8,192", "30.3–140.8ms", "18%–37%"))


def test_demo4_prefix_hits_make_the_network_show(d4, out):
    """命中 95%：计算少了，要发的 KV 没少——需要的带宽是不命中时的 20 倍上下，800 Gbps 仍藏得住。"""
    hit, base = [c["need_gbps"] for c in d4["hits"]], [c["need_gbps"] for c in d4["base"]]
    assert all(h > 10 * b for h, b in zip(hit, base))
    assert max(hit) < 800 and min(hit) == pytest.approx(99.5, abs=0.1)
    assert "从24.6×降到1.3×" in obs_of(out, 4)
    assert re.search(r"^131,072 .* 8\.5 +99\.5$", out, flags=re.M)                 # 需要：不命中 8.5、命中 99.5 Gbps


def test_demo4_small_models(d4, more_out):
    """LLaMA3-8B（GQA）一张 A800 要 15.9 Gbps，LLaMA2-7B（MHA，KV 4 倍）要 63.6 Gbps；70B 每张卡只要 4.1 Gbps。"""
    gqa, mha = (max(d4["need"][name]) for name in d4["small"])
    assert gqa == pytest.approx(15.9, abs=0.05) and mha == pytest.approx(63.6, abs=0.05)
    assert mha < d4["paper"]["a800_nic_gbps"] and d4["per_gpu"] == pytest.approx(4.06, abs=0.01)
    assert flat("LLaMA2-7B 是 MHA（KV 是 GQA 的 4 倍）") in flat(more_out)
    assert flat("KV 却是 LLaMA3-70B 的 1/2.5") in flat(more_out) and flat("不到 1.0× 就藏不住") in flat(more_out)


def test_demo4_paper_values_checked_in_fast25(d4):
    """FAST'25 §5.4.1：128K token 的 KV 40 GB、87 / 190 GB/s；§5.4.2：24–400 Gbps、至少 100 Gbps；
    §5.4.3：命中 95% 时 prefill −92%、TTFT −86%。本实验：40 GiB、prefill −91.5%。"""
    p = d4["paper"]
    assert (p["kv_gb"], p["engine_gbs"], p["min_gbps"], p["sweep"]) == (40, {"4×200 Gbps": 87, "8×400 Gbps": 190},
                                                                       100, (24, 400))
    assert (p["hit"], p["prefill_cut"], p["ttft_cut"], p["a800_nic_gbps"]) == (0.95, 0.92, 0.86, 100)
    assert d4["ref"]["kv"] == 40 * 2**30
    assert d4["engine"]["4×200 Gbps"] == pytest.approx(0.494, abs=0.001)
    cut = 1 - d4["ref_hit"]["prefill"] / d4["ref"]["prefill"]
    assert abs(cut - p["prefill_cut"]) < 0.01


# ---------------------------------------------------------------- 观察函数：手改的输入，退化情形各有说法
def _tweak(d, **kw):
    """d 的深拷贝，再改几项（不碰模块级的结果）。"""
    import copy
    d = copy.deepcopy(d)
    d.update(kw)
    return d


def _text(fn, d):
    lines, more = fn(d)
    assert 1 <= len(lines) <= 2 and all(observation_lines(x) <= 3 for x in lines + more)
    assert not re.search(r"-0(?![.\d])|-0\.0+\b|\b0 GiB|从 (\S+) (?:升|降)到 \1\b", "".join(lines + more))
    return " ".join(lines + more)


def test_observations_1_degenerate(d1):
    slow = [dict(r, ratio=1.2) for r in d1["tiers"]]
    assert "没有一个层级" in _text(m.observations_1, _tweak(d1, tiers=slow))
    tie = [dict(r, ratio=0.9996) for r in d1["tiers"]]                      # 印出来 1.000：不算更快
    assert "没有一个层级" in _text(m.observations_1, _tweak(d1, tiers=tie))
    some = [dict(r, ratio=1.2 if r["short"] == "SSD" else r["ratio"]) for r in d1["tiers"]]
    text = _text(m.observations_1, _tweak(d1, tiers=some))
    assert flat("只有 HBM、本机 DRAM 和远端 DRAM") in flat(text) and "4 个层级" not in text
    assert "不一致" in _text(m.observations_1, _tweak(d1, a800_100=7.2))
    tiers = [dict(r) for r in d1["tiers"]]
    tiers[1]["load"] = 2 * d1["compute"]
    tiers[3]["pipe"] = 2 * d1["full"]
    text = _text(m.observations_1, _tweak(d1, tiers=tiers))                  # --more 的流水一句
    assert "223.9 ms 对 112.0 ms" in text and "长" in text and "慢" in text
    tiers[3]["pipe"] = d1["full"] + 1e-6                                     # 印出来相同：一样
    assert "都是 875.5 ms" in _text(m.observations_1, _tweak(d1, tiers=tiers))


def test_observations_2_no_traffic_says_why(d2):
    quiet = {key: dict(r, sent=0) for key, r in d2["by"].items()}
    base = _tweak(d2, by=quiet, hit_blocks=0, raw_hits=0, reuse=0)
    assert "没有一个块被第二个请求用到" in _text(m.observations_2, base)
    assert "块复用有 3 次，但都不接在相同的开头后面" in _text(m.observations_2, _tweak(base, reuse=3))
    assert "命中的 9 块里没有用得上的 token" in _text(m.observations_2, _tweak(base, reuse=9, raw_hits=9))
    assert "命中的 1 块都在执行它的那台节点上" in _text(m.observations_2, _tweak(base, raw_hits=1, hit_blocks=1))


def test_observations_2_degenerate(d2):
    one = _tweak(d2, nodes=[128])
    text = _text(m.observations_2, one)
    assert "151%（128 台）" in text and "→" not in text
    calm = {key: dict(r, hot_load=min(r["hot_load"], 0.5)) for key, r in d2["by"].items()}
    lines, more = m.observations_2(_tweak(d2, by=calm))
    assert "超载" not in " ".join(lines + more) and "50%" in lines[1]
    assert "没有被至少 945 个请求用到的块" in _text(m.observations_2, _tweak(d2, n_hot=0)).split("；")[-1]
    assert "REPLICAS" in _text(m.observations_2, _tweak(d2, replicas=[1]))
    flat_by = {key: dict(r, hot_load=d2["by"][(128, 1)]["hot_load"], mean=d2["by"][(128, 1)]["mean"])
               for key, r in d2["by"].items()}
    text = _text(m.observations_2, _tweak(d2, by=flat_by))
    assert "保持在 11,626.7 ms" in text and "保持在 151%" in text
    burst = {key: dict(r, hot_load=None, avg_load=None) for key, r in d2["by"].items()}
    lines, _ = m.observations_2(_tweak(d2, by=burst, burst=True))
    assert len(lines) == 2 and "最忙" not in " ".join(lines) and "11,626.7 ms" in lines[1]
    everywhere = {key: dict(r, avg_load=r["hot_load"]) for key, r in d2["by"].items()}
    assert "集中在" not in _text(m.observations_2, _tweak(d2, by=everywhere))   # 平均也一样忙：不是热点的问题
    # 负载超过 100% 才说超载；最忙网卡 100% 以下、排队为 0 时不说"队列"
    quiet = {key: dict(r, mean=0.0, max=0.0) for key, r in d2["by"].items()}
    text = _text(m.observations_2, _tweak(d2, by=quiet))
    assert "队列" not in text and "0.0 ms" in text


def test_observations_2_names_hot_prefixes_only_when_the_data_shows_them(d2):
    """第一条的后半句（crowded）：有热点块、复制让最忙的网卡降下来，才说"集中在持有热门前缀的几台上"；
    平均只说最大的集群，并说出是几台。"""
    ks = [k for k in d2["replicas"] if k > 1]
    first = m.observations_2(d2)[0][0]
    assert flat("128 台时全部网卡平均 3.9%：流量集中在持有热门前缀的几台上（最忙的是平均的 38.7 倍）") in flat(first)
    assert m.crowded(d2, ks).startswith("：流量集中在")
    stuck = {key: dict(r, hot_load=d2["by"][(key[0], 1)]["hot_load"]) for key, r in d2["by"].items()}   # 复制也不降
    text = m.crowded(_tweak(d2, by=stuck), ks)
    assert text == "：最忙的是平均的 38.7 倍，但复制热点块也没让它降下来，挤的不是热点块"
    assert m.crowded(d2, []) == "：最忙的是平均的 38.7 倍"                 # 没有 k > 1：比不出是不是热点块
    assert m.crowded(_tweak(d2, n_hot=0), ks) == "：最忙的是平均的 38.7 倍，但没有热点块"
    near = {key: dict(r, avg_load=r["hot_load"] / 4) for key, r in d2["by"].items()}    # 不到平均的 5 倍：不说
    assert m.crowded(_tweak(d2, by=near), ks) == ""
    assert "集中在" not in _text(m.observations_2, _tweak(d2, n_hot=0))


def test_observations_2_ranges_and_counts_use_the_vocabulary(d2):
    """REPLICAS = (1, 2)：多存 "1 份"，不说 "1–1"；REPLICAS = (1, 4096)、4,096 台：副本数带千分位、多存 "4,095 份"。"""
    two = _tweak(d2, replicas=[1, 2], by={key: r for key, r in d2["by"].items() if key[1] <= 2})
    text = _text(m.observations_2, two)
    assert "每个热点块多存 1 份" in text and "1–1" not in text
    r1, r2 = d2["by"][(128, 1)], d2["by"][(128, 2)]
    big = _tweak(d2, nodes=[4096], replicas=[1, 4096], by={(4096, 1): r1, (4096, 4096): r2})
    text = _text(m.observations_2, big)
    assert "热点块复制 4,096 份" in text and "多存 4,095 份" in text and "4095" not in text and "4096" not in text
    assert "151%（4,096 台），全部网卡平均 3.9%" in text                       # 一种集群：不再说"4,096 台时"


def test_hot_block_rule_for_tiny_shares():
    """HOT_SHARE 很小时：门槛是"至少 2 个请求"，设置照原样印（不印 "至少 < 0.1%"）。"""
    assert m.hot_need(1e-6, 23608) == 2 and m.hot_need(0.04, 23608) == 945 and m.hot_need(0.0001, 23608) == 3
    tiny = m.hot_rule(1e-6, 23608)
    assert tiny.startswith("被至少 2 个请求用到：HOT_SHARE = 0.0001% 的请求不到 2 个") and "<" not in tiny
    assert m.hot_rule(0.0001, 23608) == "被至少 3 个请求用到：HOT_SHARE = 0.01% 的请求"
    assert m.setting_pct(0.045) == "4.5%" and m.setting_pct(0.07) == "7%"


@pytest.mark.real_trace
def test_mooncake_trace_has_no_hot_blocks_and_says_so(capsys):
    """Mooncake 的合成 trace：没有块被 4% 的请求用到——第一条不说"热门前缀"，平均负载说明是 128 台的。"""
    assert m.main(["--trace", REAL_TRACE, "--demo", "2"]) == 0
    out = flat(capsys.readouterr().out)
    assert flat("热点块（被至少 160 个请求用到：HOT_SHARE = 4% 的请求）：没有块") in out
    assert flat("128 台时全部网卡平均 3.6%：最忙的是平均的 5.8 倍，但没有热点块。") in out
    assert "热门前缀" not in out


def test_rate_text_follows_the_scale_actually_used():
    assert m.rate_text(True, [1.0], 0.8).startswith("全部请求同一时刻到达")
    up, down, mixed = m.rate_text(False, [5.4, 43.6], 0.8), m.rate_text(False, [0.3, 0.7], 0.8), m.rate_text(False, [0.5, 2], 0.8)
    assert "放大 5.4–43.6" in up and "缩小到 0.30–0.70" in down and "乘以 0.50–2.00" in mixed
    assert "放大" not in down + mixed


def test_observations_3_degenerate(d3):
    res = d3["results"]
    assert "只有 1 台节点" in _text(m.observations_3, _tweak(d3, nodes=1))
    same = {s: dict(r, mean=0.5) for s, r in res.items()}
    text = _text(m.observations_3, _tweak(d3, results=same))
    assert "都是 0.50 s" in text and "低 0%" not in text
    assert "随机 = 负载均衡 = 本地缓存感知 = 全局缓存感知" in text
    tie = _tweak(d3, results={**res, "local_cache": dict(res["local_cache"], mean=res["global_cache"]["mean"])})
    text = _text(m.observations_3, tie)                                  # 有并列：和论文的顺序并排印出来
    assert "本地缓存感知 = 全局缓存感知" in text and "随机 > 负载均衡 > 本地缓存感知 > 全局缓存感知" in text
    assert "都是 0.38 s" in text
    flip = _tweak(d3, results={**res, "random": dict(res["random"], mean=0.01)})
    assert "负载均衡 > 本地缓存感知 > 全局缓存感知 > 随机" in _text(m.observations_3, flip)
    none = {s: dict(r, hit=0.0, pulled=0, pulled_share=0.0) for s, r in res.items()}
    text = _text(m.observations_3, _tweak(d3, results=none))
    assert "0%" in text and "一次也没有" in text
    burst = {s: dict(r, util=None) for s, r in res.items()}
    assert "负载从" not in _text(m.observations_3, _tweak(d3, results=burst, burst=True))
    # 小 trace：TTFT 只有几毫秒，表里、排名里都不印成 0.00（排名和 ×全局 那一列一致）
    tiny = {s: dict(r, mean=v, p90=v) for (s, r), v in zip(res.items(), (0.0067, 0.0052, 0.0044, 0.002))}
    d = _tweak(d3, results=tiny, seconds=m.seconds_fmt([0.0067, 0.0052, 0.0044, 0.002]))
    text = _text(m.observations_3, d)
    assert "随机 > 负载均衡 > 本地缓存感知 > 全局缓存感知" in text and "低 55%" in text
    assert d["seconds"](0.002) == "0.0020"
    # 负载超过 100% 的调度被叫作超载，不超过的不叫
    hot = {**res, "random": dict(res["random"], util=1.06), "load_balancing": dict(res["load_balancing"], util=1.04)}
    text = _text(m.observations_3, _tweak(d3, results=hot))
    assert "超载" in text and "104%" in text
    ok = [f"{round(100 * hot[s]['util'])}%" for s in ("local_cache", "global_cache")]     # 不超载的只说负载，不说"跟得上"
    assert f"随机和负载均衡超载，本地缓存感知和全局缓存感知不超载（负载 {min(ok)}–{max(ok)}）" in text and "跟得上" not in text
    allover = {s: dict(r, util=1.05) for s, r in res.items()}
    assert "都超载" in _text(m.observations_3, _tweak(d3, results=allover))


def test_observations_4_degenerate(d4):
    text = _text(m.observations_4, _tweak(d4, slow=[dict(c, hidden=True) for c in d4["slow"]]))
    assert "仍藏得住" in text
    bad = [dict(c, hidden=False) for c in d4["base"]]
    assert "1,024、8,192、32,768 和 131,072 token" in _text(m.observations_4, _tweak(d4, base=bad))
    no_hit = _tweak(d4, hit=0.0, hits=[dict(c, hit=0) for c in d4["hits"]])
    assert "0%" in m.observations_4(no_hit)[0][1] and "余量" not in m.observations_4(no_hit)[0][1]
    assert not m.observations_4(_tweak(d4, slow_gbps=d4["nic_gbps"]))[1]       # 对照网卡和主网卡一样：不说
    assert "99.9%" in _text(m.observations_4, _tweak(d4, hit=0.999))
    text = m.observations_4(_tweak(d4, nic_gbps=100))[0][1]
    assert "1,024、8,192 和 32,768 token" in text and "余量" not in text
    one = _tweak(d4, base=d4["base"][:1], hits=d4["hits"][:1], slow=d4["slow"][:1])
    text = _text(m.observations_4, one)                     # 只有一个长度：范围只写一个数，不把它说两遍
    assert "30.3 ms" in text and "37%" in text and "–" not in text.replace("24–400", "")
    two = _tweak(d4, slow=[dict(c, hidden=c["n"] > 8192) for c in d4["slow"]])
    assert "30.3–140.8 ms" in _text(m.observations_4, two)


# ---------------------------------------------------------------- 图：数字都来自演示返回的 dict
@pytest.fixture(scope="module")
def plot05():
    import plot_05
    from figlib import setup_matplotlib
    setup_matplotlib()
    return plot_05


def _texts(fig_path_fn, *args):
    """画一张图，截下它写的所有文字（标题、图注、标注、图例），不落盘以外的东西。"""
    import matplotlib.figure
    seen, real = [], matplotlib.figure.Figure.savefig

    def grab(fig, path, *a, **kw):
        fig.draw_without_rendering()
        seen.extend(t.get_text() for t in fig.findobj(lambda o: hasattr(o, "get_text")))
        return real(fig, path, *a, **kw)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(matplotlib.figure.Figure, "savefig", grab)
        path = fig_path_fn(*args)
    assert os.path.getsize(path) > 10_000
    return " ".join(seen)


def test_plot_pd_transfer_draws_from_the_dict(plot05, d4, tmp_path):
    """标题只说终端表里的长度（24 Gbps 时 1,024、8,192 藏不住）；终端没印的交点长度（17,344 这类）不上图。"""
    text = _texts(plot05.plot_pd_transfer, d4, str(tmp_path / "pd.png"), "测试").replace("\n", "")   # 标题按页宽折行
    assert "800\u00a0Gbps 时 1,024、8,192、32,768、131,072 token 都藏得住" in text
    assert "24\u00a0Gbps 时 1,024、8,192 token 藏不住" in text
    for n in d4["curves"]["cross"].values():
        if n is not None:
            assert integer(n) not in text


def test_plot_hot_nic_draws_from_the_dict(plot05, d2, tmp_path):
    text = _texts(plot05.plot_hot_nic, d2, str(tmp_path / "nic.png"))
    assert "从 20% 升到 151%" in text and "128 台复制 2 份：从 151% 降到 76%" in text and "3.9%" in text
    tweaked = dict(d2, by={key: dict(r, hot_load=r["hot_load"] / 2) for key, r in d2["by"].items()})
    assert "升到 76%" in _texts(plot05.plot_hot_nic, tweaked, str(tmp_path / "nic2.png"))   # 数字跟着 dict 走


def test_plot_load_vs_recompute_titles_the_break_even(plot05, d1, tmp_path):
    text = _texts(plot05.plot_load_vs_recompute, d1["curves"]["n"], d1["curves"]["by_node"], str(tmp_path / "l.png"),
                  "测试")
    assert "8×H800 上 SSD 要前缀超过 40,944 token" in text and "16,312" in text and "16312" not in text


def test_plot_ttft_titles_the_finding(plot05, d3, tmp_path):
    text = _texts(plot05.plot_ttft, d3["results"], d3["names"], d3["paper"], str(tmp_path / "t.png"), "测试")
    assert "全局缓存感知最快（0.38" in text and "随机最慢（3.56" in text and "3.07\u00a0s" in text


def test_demo4_faster_contrast_nic_does_not_say_still(monkeypatch, capsys):
    """主网卡每个长度都藏不住、对照的网卡反而快得藏得住：说"都藏得住"，不说"仍"。"""
    monkeypatch.setattr(m, "PD_NIC_GBPS", 1)
    monkeypatch.setattr(m, "PD_SLOW_GBPS", 100_000)
    assert m.main(["--demo", "4", "--more"]) == 0
    text = flat(capsys.readouterr().out)
    assert "都藏得住" in text and "仍藏得住" not in text


def test_sched_nodes_above_the_limit_is_one_line_exit_2(monkeypatch, capsys):
    """演示 3 的节点数上限 MAX_SCHED_NODES = 256（看缓存的调度每个请求逐台查缓存：512 台要半分钟以上）：
    257 一行拒绝、说明原因，256 可以。"""
    assert m.MAX_SCHED_NODES == 256
    monkeypatch.setattr(m, "SCHED_NODES", 257)
    with pytest.raises(SystemExit) as e:
        m.main(["--demo", "1"])
    err = capsys.readouterr().err.strip()
    assert e.value.code == 2 and len(err.splitlines()) == 1 and "SCHED_NODES = 257" in err and "逐台查缓存" in err
    monkeypatch.setattr(m, "SCHED_NODES", 256)
    m.check_settings()


def test_observations_4_margin_names_the_tightest_length(d4):
    """余量那半句说是哪个长度的余量：需要带宽最高的那个（默认 1,024 token，命中前后都是它），数是 800 / 它的需要。"""
    line = m.observations_4(d4)[0][1]
    tight = max(d4["base"], key=lambda c: c["need_gbps"])
    assert tight["n"] == 1024 and max(d4["hits"], key=lambda c: c["need_gbps"])["n"] == 1024
    assert "余量（最吃紧的1,024token）从24.6×降到1.3×" in "".join(line.split())
    moved = _tweak(d4, hits=[dict(c, need_gbps=700.0 if c["n"] == 8192 else 1.0) for c in d4["hits"]])   # 8,192 最吃紧
    assert "最吃紧的长度从 1,024 变成 8,192 token" in m.observations_4(moved)[0][1]
