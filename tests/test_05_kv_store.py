"""05_kv_store.py 和 kv_cluster.py：每个演示打印的每条结论都在这里检查，再加几个手算的小例子。"""
import ast
import doctest
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest
from conftest import LECTURE, REAL_TRACE, load_script, run_main
from rich.cells import cell_len

import kv_cluster
from kv_cluster import (BLOCK_BYTES, LOCAL_DRAM, block_homes, fetch_plan, hit_accesses, hit_tokens, nic_fetch,
                        run_prefill, trace_columns)
from kv_physics import A800_X8, LLAMA2_70B, TIERS, load_time, prefill_compute_time, prefill_time
from kv_trace_io import Request
from kv_trace import Trace

m = load_script("05_kv_store")
SCRIPT = os.path.join(LECTURE, "05_kv_store.py")


def prefill_s(n_in, hit_blocks):
    """集群模拟里一个请求的 prefill 时间：kv_physics.prefill_time，命中的 KV 从本机 DRAM 读。"""
    return prefill_time(LLAMA2_70B, n_in, hit_tokens(hit_blocks, n_in), LOCAL_DRAM, A800_X8)


@pytest.fixture(scope="module")
def full_run():
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
    assert d1["faster"] == m.SHORT_TIER
    assert all(r["ratio_a800"] < 1 and r["n_star_a800"] <= 0 for r in d1["tiers"])
    ssd = min(d1["tiers"], key=lambda r: r["gbps"])
    assert ssd["short"] == "SSD" and 0.5 < ssd["ratio_a800"] < 0.52


def test_demo1_ssd_break_even_on_h800_solves_the_equation(d1):
    slow = [r for r in d1["tiers"] if r["n_star_h800"] > 0]
    assert [r["short"] for r in slow] == ["SSD"]
    n = slow[0]["n_star_h800"]
    h800 = m.replace(m.H800_X8, mfu=A800_X8.mfu)
    assert load_time(LLAMA2_70B, n, TIERS[3]) == pytest.approx(prefill_compute_time(LLAMA2_70B, n, 0, h800))
    assert 40_000 < n < 42_000


def test_demo1_layer_simulation_equals_formula(d1):
    assert d1["worst_diff"] < 1e-12
    for p in d1["pipeline"]:
        assert p["hidden"] + p["exposed"] == pytest.approx(p["load"])
        assert p["formula"] < p["full"]                      # 四个层级都比全部重算快


def test_demo1_dram_load_is_hidden_but_first_layer(d1):
    dram = d1["pipeline"][1]
    assert dram["load"] < dram["compute"]
    assert dram["exposed"] == pytest.approx(dram["load"] / LLAMA2_70B.n_layers)
    assert dram["hidden"] / dram["load"] > 0.985


def test_demo1_ssd_load_dominates(d1):
    ssd = d1["pipeline"][3]
    assert ssd["load"] > ssd["compute"] and ssd["formula"] < ssd["full"]
    assert ssd["formula"] == pytest.approx(ssd["load"] + ssd["compute"] / LLAMA2_70B.n_layers)


# ---------------------------------------------------------------- 演示 2
def test_demo2_hot_nic_load_grows_with_cluster(d2):
    loads = [d2["by_n"][n]["k1"]["hot_load"] for n in m.NET_NODES]
    assert all(a < b for a, b in zip(loads, loads[1:]))
    big = d2["by_n"][m.NET_NODES[-1]]["k1"]
    assert big["hot_load"] > 5 * big["avg_load"] and big["avg_load"] < 0.05


def test_demo2_only_the_largest_cluster_saturates_without_replication(d2):
    assert d2["saturated"] == [128]
    assert d2["by_k"][1]["mean"] > 1.0                        # 秒级排队


def test_demo2_replication_reduces_queueing(d2):
    by_k = d2["by_k"]
    means = [by_k[k]["mean"] for k in m.REPLICAS]
    loads = [by_k[k]["hot_load"] for k in m.REPLICAS]
    assert all(a >= b for a, b in zip(means, means[1:])) and means[0] > 100 * means[1]
    assert all(a > b for a, b in zip(loads, loads[1:]))
    assert d2["ok_replicas"][0] == 2 and loads[1] <= 1 < loads[0]
    for n in m.NET_NODES:
        assert d2["by_n"][n]["k4"]["mean"] < d2["by_n"][n]["k1"]["mean"]


def test_demo2_hot_blocks_exist(d2):
    assert d2["n_hot"] > 0 and 0.2 < d2["hot_share"] < 0.5


# ---------------------------------------------------------------- 演示 3
def test_demo3_order_matches_paper(d3):
    r = d3["results"]
    assert d3["holds"]
    assert d3["order"] == ["global_cache", "local_cache", "load_balancing", "random"]
    assert r["global_cache"]["mean"] <= r["local_cache"]["mean"] <= r["load_balancing"]["mean"] <= r["random"]["mean"]
    assert sorted(m.PAPER_FIG5, key=m.PAPER_FIG5.get) == d3["order"]


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


# ---------------------------------------------------------------- kv_cluster：手算的小例子
P = BLOCK_BYTES / 100e9          # 一块经 100 GB/s 网卡的时间


def test_one_prefill_formula_for_04_05_and_the_cluster():
    """prefill 时间只有 kv_physics.prefill_time 一个；FAST'25 式 1 的常数 a = 4、b = 22 只写在 kv_physics 里。"""
    assert not hasattr(kv_cluster, "prefill_seconds") and kv_cluster.prefill_time is prefill_time
    assert m.prefill_time is prefill_time and m.prefill_compute_time is prefill_compute_time
    homes = set()
    for name in os.listdir(LECTURE):
        if name.endswith(".py"):
            with open(os.path.join(LECTURE, name), encoding="utf-8") as f:
                src = f.read()
            if re.search(r"\b4\s*\*\s*n\s*\*\s*n|\b22\s*\*|=\s*4,\s*22\b", src):
                homes.add(name)
    assert homes == {"kv_physics.py"}


def test_no_conditional_expressions_in_05_and_its_modules():
    for name in ("05_kv_store.py", "kv_cluster.py", "kv_physics.py"):
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
    # 节点 0 在忙且有块 1；节点 1 空闲：拉 1 块再算，比排队或从头算都快
    assert list(r["where"]) == [0, 1] and list(r["pulled"]) == [0, 1] and list(r["hits"]) == [0, 1]
    assert r["ttft"][0] == pytest.approx(prefill_s(1024, 0))
    assert r["ttft"][1] == pytest.approx(P + prefill_s(1024, 1))


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
    assert doctest.testmod(kv_cluster).failed == 0


def test_05_doctests():
    assert doctest.testmod(m).failed == 0


# ---------------------------------------------------------------- 整个脚本
def flat(text):
    """去掉折行和空白：打印时被折开的句子也能整句查找。"""
    return "".join(text.split())


def test_smoke_a_number_from_each_demo(d1, d2, d3, out):
    """冒烟：每个演示打印的一个数字，等于它返回的 dict 里的那个数。"""
    assert d1["a800_100"] == pytest.approx(5.86, abs=0.01)
    assert flat(f"最低带宽 8×A800 是 {d1['a800_100']:.2f} GB/s") in flat(out)
    assert d2["n_hot"] == 21 and flat(f"用到的块：{d2['n_hot']} 个") in flat(out)
    glo = d3["results"]["global_cache"]["mean"]
    assert glo == pytest.approx(0.38, abs=0.005) and flat(f"全局缓存感知 {glo:.2f}") in flat(out)


def test_main_prints_80_columns(out):
    assert max(cell_len(line) for line in out.splitlines()) <= 80
    flat = "".join(out.split())                           # 去掉折行和空白再找
    for claim in ("≈ 6 GB/s", "≈ 19 GB/s", "与论文的 6 GB/s、19 GB/s 一致", "（共 4/4 个）",
                  "与论文图 5 的顺序（全局 ≤ 本地 ≤ 负载均衡 ≤ 随机）一致", "随集群规模增长",
                  "是流量全挤在一台上", "最忙网卡的负载从 151% 降到 76%", "副本数 ≥ 2 时不再超载",
                  "命中率升到", "省下的计算就是省下的排队", "比只看本地低", "SSD 要前缀超过"):
        assert "".join(claim.split()) in flat, claim


def test_demo1_same_bytes_from_any_cwd(capsys, tmp_path):
    assert m.main(["--demo", "1"]) == 0
    here = capsys.readouterr().out
    p = subprocess.run([sys.executable, SCRIPT, "--demo", "1"], cwd=tmp_path, capture_output=True, text=True,
                       env=dict(os.environ, NO_COLOR="1"))
    assert p.returncode == 0 and p.stdout == here         # 任何目录、两次运行，逐字节相同


@pytest.mark.real_trace
def test_runs_on_mooncake_jsonl_trace(tmp_path):
    p = subprocess.run([sys.executable, SCRIPT, "--trace", REAL_TRACE, "--demo", "3"], cwd=tmp_path,
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
def test_model_is_named_as_fast25_and_shares_shape_with_v3_dummy(d1, out):
    """FAST'25 表 1 是 LLaMA3-70B；arXiv v3 是同形状的 dummy LLaMA2-70B：KV 都是 320 KiB/token。"""
    from kv_physics import LLAMA2_70B, LLAMA3_70B
    shape = lambda s: (s.n_layers, s.d_model, s.n_heads, s.n_kv_heads, s.dtype_bytes)  # noqa: E731
    assert shape(LLAMA3_70B) == shape(LLAMA2_70B) == (80, 8192, 64, 8, 2)
    assert LLAMA3_70B.kv_bytes_per_token() == 320 * 1024
    assert kv_cluster.MODEL is LLAMA3_70B and d1["model"] == "LLaMA3-70B"
    assert "演示1：读还是重算——LLaMA3-70B" in flat(out)
    assert "LLaMA3-70B" in m.MODEL_NOTE and "dummyLLaMA2-70B形状相同" in flat(m.MODEL_NOTE)
    assert "LLaMA3-70B" in m.PAPER_MIN_BW_SOURCE and "§2.2" in m.PAPER_MIN_BW_SOURCE


def test_nic_is_the_node_total_modelled_as_one_fifo(out):
    """FAST'25 表 1 的 800 Gbps 是一台节点的合计；§3.2.3 每张 A800 配一块 100/200 Gbps 网卡。"""
    assert kv_cluster.NIC_GB_PER_S * 8 == 800
    assert "每块网卡" not in out and "每台一块" not in out
    assert "每台节点的网卡合计100GB/s" in flat(out)
    assert "B_nic=800Gbps=100GB/s是一台节点全部网卡的合计" in flat(out)
    assert "每张A800配一块100/200Gbps的网卡" in flat(out) and "当成一个FIFO队列" in flat(out)
    with open(SCRIPT, encoding="utf-8") as f:
        assert "每台一块 800 Gbps" not in f.read()


def test_fig5_setup_differences_are_printed(d3, out):
    """FAST'25 §4.2：图 5 是 16 台 8×A800 回放 Conversation trace；本实验 8 台、仿 Tool&Agent 的合成 trace。"""
    assert m.PAPER_FIG5_SETUP["nodes"] == 16 and m.PAPER_FIG5_SETUP["trace"] == "Conversation trace"
    assert "论文在16台8×A800上回放Conversationtrace" in flat(out)
    assert flat(f"本实验是 {m.SCHED_NODES} 台 8×A800（节点数不同），负载是仿 Tool&Agent 的合成 trace（种子 0）") in flat(out)
    assert "§4.2图5" in flat(out)


def test_trace_is_called_what_it_is(out):
    assert "真实 trace" not in out and "仿Tool&Agent的合成trace（种子0）" in flat(out)


def test_units_one_system_per_quantity(out):
    """KV 字节用 KiB/MiB/GiB/TiB，带宽用 GB/s（10⁹）：8,192 × 320 KiB = 2.50 GiB = 2.68 GB。"""
    assert flat("8,192 × 320 KiB = 2.50 GiB（= 2.68 GB") in flat(out)
    assert " KB = " not in out and "320 KB" not in out
    assert flat("6,000 块 × 512 token = 3,072,000 token × 320 KiB = 0.92 TiB（1.01 TB）") in flat(out)
    assert BLOCK_BYTES == 160 * 2**20


def test_local_dram_capacity_matches_fast25_5_3_1(out):
    """FAST'25 §5.3.1：约 1 TB 的 DRAM 只能存约 300 万 token（320 KB/token）。6,000 块 ≈ 3.07M token。"""
    paper = m.PAPER_LOCAL_DRAM
    assert paper["tokens"] * LLAMA2_70B.kv_bytes_per_token() == pytest.approx(paper["tb"] * 1e12, rel=0.02)
    assert m.SCHED_CAPACITY * 512 == pytest.approx(paper["tokens"], rel=0.03)
    assert "本机留约1TBDRAM做缓存，只能存约300万token" in flat(out)


def test_wording_fixes(out):
    assert "最慢的 SSD" in out and "最慢的SSD" not in out
    assert "按 04 演示 4 的 60% 算力" in " ".join(out.split())
    assert flat("（0.38 s、0.44 s、0.74 s、3.56 s）") in flat(out)


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


@pytest.fixture(scope="module")
def odd_traces(tmp_path_factory):
    """课程 trace 的前 1、2、5、20 行；同一时刻的 20 个请求；1 ms 内的突发；跨度接近 2^53 ms 的两行。"""
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
    return out


def assert_honest(out):
    """没有 nan / inf；印出来的百分比超过 100% 时，文字里说了"超载"和它的意思。"""
    assert not re.search(r"\bnan\b|\binf\b", out)
    over = [float(x.replace(",", "")) for x in re.findall(r"(\d[\d,]*(?:\.\d+)?)%", out) if float(x.replace(",", "")) > 100]
    if over:
        assert "超载：" in out and "队列越排越长" in out, over


ODD = {   # 名字 → 演示 2、3 的输出里必须有的说法
    "first1": ("当成同一时刻的突发", "没有任何请求要从别的节点拉 KV", "四种调度的平均 TTFT 都是"),
    "first2": ("当成同一时刻的突发", "没有一个块被第二个请求用到", "四种调度的平均 TTFT 都是"),
    "first5": ("没有任何请求要从别的节点拉 KV", "但有并列", "四种调度的 GPU 负载超过 100%，超载"),
    "first20": ("没有任何请求要从别的节点拉 KV", "没有可以命中的前缀"),
    "same_ts": ("当成同一时刻的突发", "所有请求同时到达，算不出网卡负载"),
    "burst_1ms": ("当成同一时刻的突发",),
    "huge_span": ("分钟",),
}


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.real_trace) for n in sorted(ODD) if n.startswith("first")]
                         + [n for n in sorted(ODD) if not n.startswith("first")])    # first*：课程 trace 的前几行
def test_tiny_and_odd_traces_run_with_honest_wording(odd_traces, name, capsys):
    for demo in ("2", "3"):
        assert m.main(["--trace", odd_traces[name], "--demo", demo]) == 0
    out = capsys.readouterr().out
    assert_honest(out)
    for claim in ODD[name]:
        assert flat(claim) in flat(out), claim


def test_default_output_is_honest_about_overload(out):
    assert_honest(out)
    assert "151%" in out and "超载：要发的比带宽能发的多" in flat(out).replace("，", "，")


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
    assert flat("按层流水，每个长度的发送都藏在 prefill 后面，只露出最后一层：131,072 token 露出 5.4 ms") in flat(out)


def test_demo4_needed_bandwidth_is_demo1_min_bandwidth(d1, d4):
    """不命中时"藏得住所需的带宽"和演示 1 的"读比重算快所需的带宽"是同一个量：KV 字节 / prefill 时间。"""
    base = d4["need"][d4["configs"][0]]
    for n, gbps in zip(d4["lens"], base):
        assert gbps == pytest.approx(m.min_bandwidth(n, A800_X8) * 8)


def test_demo4_shorter_prompt_sends_relatively_more(d4, out):
    ratios = [c["send"] / c["prefill"] for c in d4["base"]]
    assert all(a > b for a, b in zip(ratios, ratios[1:]))
    assert flat("发/prefill 从 131,072 token 的 1.1% 升到 1,024 token 的 4.1%") in flat(out)


def test_demo4_slow_nic_exposes_short_prompts_only(d4, out):
    """24 Gbps（FAST'25 §5.4.2 模拟的最低带宽）：1K、8K 藏不住（需要 32.5、28.1 Gbps），32K、128K 藏得住。"""
    assert [c["hidden"] for c in d4["slow"]] == [False, False, True, True]
    assert flat("1,024、8,192 token 藏不住：最短的露出 30.3 ms") in flat(out)


def test_demo4_prefix_hits_make_the_network_show(d4, out):
    """命中 95%：计算少了，要发的 KV 没少——需要的带宽是不命中时的 20 倍上下，800 Gbps 仍藏得住。"""
    hit, base = d4["need"][d4["configs"][1]], d4["need"][d4["configs"][0]]
    assert all(h > 10 * b for h, b in zip(hit, base))
    assert max(hit) < 800 and min(hit) == pytest.approx(99.5, abs=0.1)
    assert flat("藏得住要 100–634 Gbps，不命中时只要 9–32 Gbps") in flat(out)


def test_demo4_small_models(d4, out):
    """LLaMA3-8B（GQA）一张 A800 要 15.9 Gbps，LLaMA2-7B（MHA，KV 4 倍）要 63.6 Gbps；70B 每张卡只要 4.1 Gbps。"""
    need = d4["need"]
    gqa, mha = max(need[d4["configs"][2]]), max(need[d4["configs"][3]])
    assert gqa == pytest.approx(15.9, abs=0.05) and mha == pytest.approx(63.6, abs=0.05)
    assert mha < d4["paper"]["a800_nic_gbps"] and max(need[d4["configs"][0]]) / 8 == pytest.approx(4.06, abs=0.01)
    assert flat("LLaMA2-7B 是 MHA（每 token 的 KV 是 GQA 的 4 倍）要 63.6 Gbps") in flat(out)


def test_demo4_paper_values_checked_in_fast25(d4):
    """FAST'25 §5.4.1：128K token 的 KV 40 GB、87 / 190 GB/s；§5.4.2：24–400 Gbps、至少 100 Gbps；
    §5.4.3：命中 95% 时 prefill −92%、TTFT −86%。本实验：40.0 GiB、prefill −91.5%。"""
    p = d4["paper"]
    assert (p["kv_gb"], p["engine_gbs"], p["min_gbps"], p["sweep"]) == (40, {"4×200 Gbps": 87, "8×400 Gbps": 190},
                                                                       100, (24, 400))
    assert (p["hit"], p["prefill_cut"], p["ttft_cut"], p["a800_nic_gbps"]) == (0.95, 0.92, 0.86, 100)
    assert d4["ref"]["kv"] == 40 * 2**30
    assert d4["engine"]["4×200 Gbps"] == pytest.approx(0.494, abs=0.001)
    cut = 1 - d4["ref_hit"]["prefill"] / d4["ref"]["prefill"]
    assert abs(cut - p["prefill_cut"]) < 0.01


def test_plot_pd_transfer_draws_from_the_dict(d4, tmp_path):
    import plot_05
    from figlib import setup_matplotlib
    setup_matplotlib()
    path = plot_05.plot_pd_transfer(d4["curves"], d4["hit"], str(tmp_path / "pd.png"), "测试")
    assert os.path.getsize(path) > 10_000
