"""01_kv_cache_memory.py：每个 token 的 KV 字节数、一张卡能放多少 token、连续预分配与分页的显存构成、
让 KV 变小的几种方式、抢占时重算与换出；观察函数在手搭的数据上的退化情况；改属性 = 改源码；01 的三张图。"""
import contextlib
import io
import os
import pathlib
import re

import numpy as np
import pytest
from rich.cells import cell_len

from conftest import assert_observation_shape, assert_settings_refused, load_plot, load_script
from lab_common import console

m = load_script("01_kv_cache_memory")


def quiet(fn, *args):
    with contextlib.redirect_stdout(io.StringIO()):
        return fn(*args)


@pytest.fixture(scope="module")
def d1():
    return quiet(m.demo1_bytes_per_token)


@pytest.fixture(scope="module")
def sim():
    return m.simulate_load()


@pytest.fixture(scope="module")
def d2(sim):
    return quiet(m.demo2_fragmentation, sim)


@pytest.fixture(scope="module")
def d3():
    return quiet(m.demo3_smaller_kv)


@pytest.fixture(scope="module")
def d4(sim):
    return quiet(m.demo4_preemption, sim)


def run(argv):
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert m.main(argv) == 0
    return buf.getvalue()


def flat(lines):
    return "".join(lines)


def has(text, *parts):
    """text 里有每一段（数、名字、说明是哪种情况的短词）：措辞由 tests/golden/ 守住，这里只查取了哪种情况、用了哪些值。"""
    return all(p in text for p in parts)


# ---------------------------------------------------------------- 整个脚本
def test_smoke_main_and_budget():
    out = run([])
    assert all(f"演示 {k}" in out for k in (1, 2, 3, 4))
    assert "15,728 个 token" in out                                    # 演示 2：12 GiB / 800 KiB
    assert "97.3%" in out                                             # 演示 2：分页时 token 状态的占比
    assert "2,380,193" in out                                         # 演示 3：MLA 时一张 H200 能放的 token
    assert re.search(r"^ *256 +160 +27\.8 +55\.6 +64\.2 +1\.15 +1\.75 +2\.18$", out, flags=re.M)   # 演示 4：块 256
    assert max(cell_len(line) for line in out.splitlines()) <= 80   # 显示宽度（中文占 2 列）
    assert len(out.splitlines()) <= 75                                # 投影一屏半：默认输出的预算
    assert out.count("观察") == 4


def test_more_prints_everything_and_default_at_most_three(d1, d2, d3, d4):
    more = run(["--more"])
    for fact in ("14,648", "320 KB", "(512 + 64) ÷ (2 × 128) = 2.25 组", "25.3 KiB，少了 93.3%",
                 "81,920 MiB", "217 / 400（54%）", "106,746 / 189,426（56%）", "默认 16 GB/s", "块 16–64"):
        assert fact in more, fact
    for row in (r"^LLaMA2-70B +64 / 8 +320 KiB +2\.50 MiB +8×$", r"^LLaMA3-8B +32 / 8 +128 KiB +512 KiB +4×$",  # GQA 省多少
                r"^A800 80GB +81,920 MiB +72 GiB +1,460,190 +178$",          # 张量并行后能放几个 8,192 token 的长请求
                r"^这里 +155 +319 +474 +2,048$", r"^vLLM 图 11\(a\) 的 ShareGPT +161 +338 +- +-$",   # 长度：--more 的表
                r"^ *1 +40,960 +435\.8 +871\.6 ", r"^2,048 +10,240 +207\.3 +414\.5 +270\.7 +0\.65 +6\.8%$",
                r"^被抢占时平均已有的 token +169 *$"):
        assert re.search(row, more, flags=re.M), row
    assert re.search(r"^20 µs +0\.04 +0\.14 +0\.41 +0\.82 +1\.09$", more, flags=re.M)      # 固定开销的敏感性：--more 的表
    assert re.search(r"^MLA +2,226,970 +4,760,387$", more, flags=re.M)                  # FP8 时能放的 token：--more 的表
    for obs, d in ((m.observations_1, d1), (m.observations_2, d2), (m.observations_3, d3), (m.observations_4, d4)):
        assert_observation_shape(*obs(d))


def test_bad_demo_argument_exits_2():
    with pytest.raises(SystemExit) as e:
        m.main(["--demo", "9"])
    assert e.value.code == 2


def test_output_deterministic():
    assert run([]) == run([])


def test_main_simulates_the_load_once(monkeypatch):
    calls = []
    real = m.simulate_load
    monkeypatch.setattr(m, "simulate_load", lambda: calls.append(1) or real())
    run([])
    assert len(calls) == 1


# ---------------------------------------------------------------- 演示 1
def test_kv_bytes_per_token_known_values(d1):
    kv = d1["kv_bytes"]
    assert kv["OPT-13B"] == 2 * 5120 * 40 * 2 == 800 * 1024          # vLLM 论文 §3：800 KB
    assert kv["LLaMA2-70B"] == 320 * 1024                            # GQA：80 × 8 × 128 × 2 × 2
    assert kv["GPT-2 small"] == 36 * 1024
    assert kv["LLaMA2-7B"] == 512 * 1024
    assert kv["LLaMA2-13B"] == 800 * 1024
    assert kv["LLaMA3-8B"] == 128 * 1024


def test_demo1_claims(d1):
    assert d1["opt_req"] == 1600 * 2**20                             # 2048 × 800 KiB = 1,600 MiB（论文：1.6 GB）
    assert round(d1["opt_slots"] / 100) / 10 == 15.7                  # 论文表 1：15.7K
    assert d1["mha_70"] == 8 * 320 * 1024
    for gpu in ("A800 80GB", "H200 141GB"):
        assert d1["fit"]["LLaMA2-70B"][gpu] is None                   # 一张卡放不下 70B 的 fp16 权重
    assert d1["fit"]["LLaMA2-13B"]["A800 80GB"] // 2048 == 30
    assert d1["l70_tp"] == 1_460_190
    lines, more = m.observations_1(d1)
    assert has(lines[0], "62,633", "（30 个", "1.56 GiB")
    assert has(lines[1], "A800 80GB 或 H200 141GB 放不下", "1,460,190", "标称 70B", "68.98B", "128.5 GiB")
    assert has(more[0], "GQA", "320 KiB/token", "8 倍")
    out = run(["--demo", "1", "--more"])            # 论文的数和我们的数并排：--more 的表
    assert "12 GB → 15.7K" in out and "12 GiB → 15,728（按" in out and "14,648）" in out
    assert "gqa = 8（查询头数 / KV 头数）" in out and re.search(r"FAST'25 §5\.3\.1 +320 KB +2 × 80 × 1,024 × 2 B =", out)


def test_tokens_that_fit_hand_checked():
    spec = m.ModelSpec("toy", n_layers=1, d_model=4, n_heads=1, n_kv_heads=1, n_params=10)   # 16 B/token，权重 20 B
    assert spec.kv_bytes_per_token() == 16
    assert m.tokens_that_fit(spec, 100, util=1.0) == 5                # (100 − 20) // 16
    assert m.tokens_that_fit(spec, 10, util=1.0) is None


def demo1_data(util, gpus, tp=8):
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(m, "GPU_MEM_UTIL", util)
        mp.setattr(m, "GPUS", gpus)
        mp.setattr(m, "TP_GPUS", tp)
        return quiet(m.demo1_bytes_per_token)


def test_observations_1_degenerate_cases():
    gib = 2**30
    # 一种 GPU、显存小：13B 的权重都放不下，70B 张量并行也放不下
    lines, more = m.observations_1(demo1_data(0.3, (("Tiny 40GB", 40 * gib),), tp=1))
    assert_observation_shape(lines, more)
    assert has(lines[0], "连它的权重都放不下") and has(lines[1], "Tiny 40GB 放不下。")
    assert "张量并行" not in lines[1]                                # 一张卡不叫张量并行
    # 显存够：70B 一张卡就放得下
    lines, more = m.observations_1(demo1_data(1.0, (("Big 200GB", 200 * gib),)))
    assert has(lines[1], "Big 200GB 放得下；8 张", "后还能放")
    # 两种卡一张放得下、一张放不下：按名字说
    lines, _ = m.observations_1(demo1_data(1.0, (("A800 80GB", 80 * gib), ("H200 141GB", 143_771 * 2**20))))
    assert has(lines[1], "H200 141GB 放得下", "A800 80GB 放不下")
    # OPT-13B 放得下权重但不够一个 MAX_SEQ 的请求
    d = demo1_data(0.9, (("A800 80GB", 80 * gib),))
    d["fit"]["OPT-13B"]["A800 80GB"] = 1000
    assert has(m.observations_1(d)[0][0], "1,000 个 token", "（不到 1 个")
    d["fit"]["OPT-13B"]["A800 80GB"] = 2048
    assert has(m.observations_1(d)[0][0], "2,048 个 token", "（1 个")
    # 8 张卡张量并行也放不下 70B 的权重
    lines, _ = m.observations_1(demo1_data(0.9, (("Tiny 16GB", 16 * gib),)))
    assert has(lines[1], "8 张 Tiny 16GB", "也放不下")


def test_pool_wording_only_claims_the_paper_for_12_gib(monkeypatch):
    """KV 池改成 40 GiB：论文那一格仍是 12 GB → 15.7K，我们这一格照设置印 40 GiB，不说"一致"。"""
    monkeypatch.setattr(m, "KV_POOL_GIB", 40)
    out = run(["--demo", "1", "--more"])
    assert "12 GB → 15.7K" in out and "40 GiB → 52,428" in out and "一致" not in out


def test_units_are_binary_and_labelled(d1):
    """字节数一律按 1024 进位、标成 KiB/MiB/GiB；论文的 12 GB → 15.7K 只有按 1024 进位才对得上。"""
    assert d1["opt_slots"] == 12 * 1024 ** 3 // (800 * 1024) == 15_728
    assert d1["opt_slots_decimal"] == int(12e9 // (800 * 1024)) == 14_648      # 按 10⁹ 算就不是 15.7K
    lines, more = m.observations_1(d1)
    text = flat(lines) + flat(more)
    assert "800 KiB" in text and "320 KiB/token" in text
    assert re.sub(r"\"[^\"]*\"|写作 800 KB|12 GB|1\.6 GB|的 KB、GB|的 KB 是", "", text).count(" KB") == 0   # 只有引用论文原文时才写 KB、GB


def test_one_gpu_sentence_follows_the_utilization():
    for util, want in ((0.9, "一张 A800 80GB 或 H200 141GB 放不下"), (1.0, "一张 H200 141GB 放得下，一张 A800 80GB 放不下")):
        d = demo1_data(util, m.GPUS)
        assert want in m.observations_1(d)[0][1]
        assert d["usable"]["H200 141GB"] == pytest.approx(util * 143_771 * 2**20)


# ---------------------------------------------------------------- 演示 2
def test_reservation_rules():
    from allocation import reservation
    assert reservation("Max", 10, 25, 2048) == 2048
    assert reservation("Pow2", 10, 25, 2048) == 10 + 32                  # 论文：输出 25 → 预留 32
    assert reservation("Oracle", 10, 25, 2048) == 35
    assert reservation("Pow2", 1000, 1040, 2048) == 2048                  # 不超过最大长度


def test_lengths_deterministic_and_bounded():
    p1, o1 = m.make_lengths(200, 0, m.SHAREGPT_MEAN, 1.0, 2048)
    p2, o2 = m.make_lengths(200, 0, m.SHAREGPT_MEAN, 1.0, 2048)
    assert np.array_equal(p1, p2) and np.array_equal(o1, o2)
    assert (p1 >= 1).all() and (o1 >= 1).all() and (p1 + o1 <= 2048).all()


def test_tiny_contiguous_hand_checked():
    # 池 10 个位置；三个请求 (p=2, o=2)、Oracle 各预留 4：前两个占 8，第三个放不下（空 2 < 4），排队 2 步。
    share, conc = m.simulate_contiguous("Oracle", np.array([2, 2, 2]), np.array([2, 2, 2]), pool=10, max_seq=2048)
    # 第 0 步：token 4、预留 4、内部 0、空闲 2；第 1 步：token 6、预留 2、空闲 2
    assert np.allclose(share, np.array([10, 6, 0, 4]) / 20)
    assert conc == 2


def test_tiny_paged_hand_checked():
    share, conc, preempted = m.simulate_paged(np.array([1, 1, 1, 1]), np.array([1, 1, 1, 1]), pool=6, block_size=2)
    assert np.isclose(share.sum(), 1.0)
    assert share[1] == 0                                             # 分页没有"预留"


def test_simulators_return_none_without_full_load():
    share, conc, preempted = m.simulate_paged(np.array([2]), np.array([2]), pool=64, block_size=4)
    assert share is None and conc is None and preempted == []
    share, conc = m.simulate_contiguous("Oracle", np.array([2]), np.array([2]), pool=64, max_seq=2048)
    assert share is None and conc is None


def test_demo2_claims(d2):
    s = d2["shares"]
    for v in s.values():
        assert np.isclose(v.sum(), 1.0)
    assert s["vLLM"][0] > 0.9 and s["vLLM"][1] == 0
    assert s["Orca (Oracle)"][2] == 0                                # Oracle 没有内部碎片
    c = d2["concurrency"]
    assert c["vLLM"] > c["Orca (Oracle)"] > c["Orca (Max)"]
    assert c["Orca (Max)"] == d2["pool"] // 2048
    assert abs(d2["mean_prompt"] - m.SHAREGPT_MEAN[0]) / m.SHAREGPT_MEAN[0] < 0.1
    lines, more = m.observations_2(d2)
    assert len(lines) == 2 and has(lines[0], "分页（块 16）比 Orca (Max) 高", "97.3% 对 21.8%", "4.9 倍", "2.2 倍")
    assert has(lines[1], "相同", "vLLM > Orca (Oracle) > Orca (Pow2) > Orca (Max)")        # 和论文图 2 的顺序比
    assert has(more[0], "54.2%", "2,048", "474")                                           # Max 的内部碎片：--more
    assert "真实系统" not in flat(lines + more) and "ShareGPT 请求流" not in flat(lines + more)


def fake_d2(shares, conc, **kw):
    d = dict(shares={k: None if v is None else np.array(v) for k, v in shares.items()}, concurrency=conc,
             idle=[k for k, v in shares.items() if v is None], n_requests=400, block_size=16, max_seq=2048,
             mean_total=474.0, mean_prompt=155.0, mean_output=319.0, seed=0, sigma=1.0, paper=dict(m.VLLM_FIG2),
             sharegpt=m.SHAREGPT_MEAN)
    d.update(kw)
    return d


def test_observations_2_degenerate_cases():
    names = list(m.VLLM_FIG2)
    # 一个请求：谁都不满载
    d = fake_d2({k: None for k in names}, {k: None for k in names}, n_requests=1)
    lines, more = m.observations_2(d)
    assert_observation_shape(lines, more)
    assert has(lines[0], "1 个请求", "就放得下") and "从高到低" not in flat(lines + more)
    # 只有 Max 满载：不比顺序，不说分页
    d = fake_d2({"Orca (Max)": [0.2, 0.1, 0.6, 0.1], "Orca (Pow2)": None, "Orca (Oracle)": None, "vLLM": None},
                {"Orca (Max)": 7.0, "Orca (Pow2)": None, "Orca (Oracle)": None, "vLLM": None}, n_requests=20)
    lines, more = m.observations_2(d)
    assert_observation_shape(lines, more)
    assert has(lines[0], "20 个请求", "全部放得下") and "分页" not in flat(lines)
    # 印出来相同的占比：排名里用 =，和论文的顺序不同时两边都印出来
    same = [0.5, 0.1, 0.3, 0.1]
    d = fake_d2({k: same for k in names}, {k: 10.0 for k in names})
    lines, _ = m.observations_2(d)
    assert has(lines[0], "一样（都是 50.0%）", "一样（1.0 倍）")
    assert has(lines[1], "这里 ", " = ", "论文图 2 是 vLLM > Orca (Oracle)")
    # 改了图 2 的实验条件（MAX_SEQ）：不和论文比顺序
    lines, more = m.observations_2(dict(d, own_setup=["MAX_SEQ"]))
    assert "论文" not in flat(lines + more)


# ---------------------------------------------------------------- 演示 3
def test_kv_variants_from_the_configuration(d3):
    t = d3["table"]
    assert [t[k]["kv"] for k in t] == [800 * 1024, 160 * 1024, 20 * 1024, 40 * 576 * 2]
    assert [t[k]["kv_fp8"] for k in t] == [400 * 1024, 80 * 1024, 10 * 1024, 40 * 576]
    assert t["MLA"]["per_layer"] == 512 + 64 == 2.25 * 2 * 128               # DeepSeek-V2：相当于 2.25 组 GQA
    assert d3["mla_groups"] == m.DSV2_GQA_EQUIV == 2.25
    assert t["MHA"]["fit"]["H200 141GB"] == 133_885                          # 和演示 1 的 LLaMA2-13B 一格相同
    assert t["MLA"]["fit"]["H200 141GB"] == 2_380_193
    assert t["MHA"]["fit_fp8"]["H200 141GB"] == 267_771


def test_deepseek_v2_reduction_is_presented_as_our_reconstruction(d3):
    """DeepSeek-V2 摘要的 93.3% = MLA（60 层 × 576）加平均 6 bit 的 KV 量化，对 DeepSeek 67B：我们的重构。"""
    assert d3["ds67_kv"] == 95 * 8 * 128 * 2 * 2 == 389_120
    assert d3["dsv2_kv"] == 60 * 576 * 2
    assert round(d3["reduction_bf16"] * 100, 1) == 82.2
    assert round(d3["reduction_quant"] * 100, 1) == m.DSV2_KV_REDUCTION == 93.3
    lines, more = m.observations_3(d3)
    assert has(lines[1], "少了 93.3%", "对上了", "重构")
    assert "17.8 倍" in lines[0]
    out = run(["--demo", "3", "--more"])                     # bf16 的 82.2% 和 2.25 组在 --more 的表里
    flat_out = re.sub(r"\s+", "", out)
    assert "67.5KiB（60层×576），少了82.2%" in flat_out and re.search(r"§2\.1\.4 表 1 +2\.25 组", out)


def test_observations_3_degenerate_cases(d3):
    # 改了 MLA 的维度：不说"对上了"，也不说是论文的 2.25 组
    d = dict(d3, reduction_quant=0.5, mla_groups=1.0, table=dict(d3["table"]))
    d["table"]["MLA"] = dict(d3["table"]["MLA"], per_layer=256)
    lines, more = m.observations_3(d)
    assert_observation_shape(lines, more)
    assert has(lines[1], "不同。") and "对上了" not in lines[1]            # 维度是论文的：不猜原因
    lines, more = m.observations_3(dict(d, own_dims=["MLA_KV_LORA_RANK"]))
    assert has(lines[1], "不同", "你改了 MLA_KV_LORA_RANK")                     # 原因按设置说
    # 一张卡放不下权重：不说能放几倍
    t = {k: dict(v, fit={g: None for g in v["fit"]}, fit_fp8={g: None for g in v["fit"]}) for k, v in d3["table"].items()}
    lines, more = m.observations_3(dict(d3, table=t))
    assert has(lines[0], "LLaMA2-13B", "都放不下") and "倍" not in lines[0]
    assert "能放" not in flat(more)


# ---------------------------------------------------------------- 演示 4
def test_preemption_count_under_demo2_load(d4, sim):
    assert d4["n_preempt"] == len(sim["preempted"]) == 633
    assert d4["n_requests"] == 217 and d4["recomputed_tokens"] == 106_746
    assert round(d4["mean_len"]) == 169
    lines, more = m.observations_4(d4)
    assert has(lines[0], "633 次", "217 个请求", "换入快", "13.3 s 对 22.5 s")


def test_swap_versus_recompute(d4):
    bb = d4["by_block"]
    ratios = [bb[b]["ratio"] for b in m.SWAP_BLOCK_SIZES]
    assert all(b > a for a, b in zip(ratios, ratios[1:]))                    # 块越大，换出越划算
    assert len({round(r["recompute"], 12) for r in bb.values()}) == 1        # 重算与块大小无关
    assert bb[16]["copies"] == 40 * 2 * 32
    assert m.swap_seconds(m.OPT_13B, 512, 16, 16.0, 10.0)[1] == pytest.approx(2560 * 10e-6 + 512 * 800 * 1024 / 16e9)
    assert m.recompute_seconds(m.OPT_13B, 512, m.SWAP_GPU) == pytest.approx(m.OPT_13B.prefill_flops(512) / (312e12 * 0.6))
    lines, _ = m.observations_4(d4)
    assert has(lines[1], "16 GB/s", "1、4、16、64 重算更快", "256 换出", "换入更快")


def test_bandwidth_sensitivity_and_the_papers_20_percent(d4):
    """vLLM §7.3 的"never higher than 20% of swapping's latency" = 重算最多比换出再换入慢 20%；
    16 GB/s 是我们的假设，A100 自己的 PCIe 4.0 ×16（25、32 GB/s）时块 64 的重算 / 来回是 1.39、1.65。"""
    b64 = d4["by_block"][64]
    assert round(b64["ratio"], 2) == 0.98
    assert (round(b64["ratio_gbps"][25.0], 2), round(b64["ratio_gbps"][32.0], 2)) == (1.39, 1.65)
    assert (round(b64["ratio_overhead"][0.0], 2), round(b64["ratio_overhead"][20.0], 2)) == (1.23, 0.82)
    lines, more = m.observations_4(d4)
    assert len(lines) == 2 and has(more[0], "20%", "≤ 1.20", "1.15、1.75、2.18", "16 GB/s 在论文以内", "25 GB/s、32 GB/s 超出")
    out = run(["--demo", "4", "--more"]).replace("\n", "")
    assert has(out, "默认 16 GB/s = FAST'25 表 1", "25–32 GB/s")
    assert re.search(r"^0 µs +1\.23 +1\.23 +1\.23 +1\.23 +1\.23$", run(["--demo", "4", "--more"]), flags=re.M)


def test_pcie_bandwidth_assumption_is_the_fast25_node_total_over_8():
    """每卡 16 GB/s = FAST'25 表 1 的整机 128 GB/s ÷ 8 卡（kv_store.tiers.TIERS 里的同一个数）。"""
    from kv_store.tiers import A800_X8, TIERS
    assert m.PCIE_GBPS == TIERS[1].gb_per_s / A800_X8.n_gpus


def test_paper_limit_wording_on_printed_values():
    """和论文的 1.20 比，按印出来的两位小数：1.199 印出来是 1.20，算在以内；0.999 印出来是 1.00，算"两者一样"。"""
    lines, more = m.observations_4(fake_d4({1: 0.5, 4: 1.199}, alt_gbps=[]))
    assert has(more[0], "1.20：16 GB/s 在论文以内")
    lines, more = m.observations_4(fake_d4({1: 0.62, 4: 0.999}))
    assert has(lines[1], "1 重算更快", "4 两者一样") and has(more[0], "1.00、1.40", "16 GB/s 在论文以内", "25 GB/s 超出")


def fake_d4(ratios, **kw):
    bb = {b: dict(copies=100 // b, one_way=0.01, round_trip=0.02, recompute=0.02 * r, ratio=r,
                  ratio_gbps={25.0: r * 1.4}, ratio_overhead={0.0: 1.2}) for b, r in ratios.items()}
    d = dict(n_preempt=0, n_requests=0, n_total=1, mean_len=None, recomputed_tokens=0, total_tokens=10,
             load=dict(recompute=0, round_trip=0), by_block=bb, by_len={128: dict(ratio=0.6)}, attn_share=0.01,
             block_size=16, swap_len=512, gbps=16.0, alt_gbps=[25.0], overhead_us=10.0, alt_overhead_us=[0.0],
             gbps_note=m.PCIE_SOURCE, paper=dict(m.PAPER))
    d.update(kw)
    return d


def test_observations_4_degenerate_cases():
    # 没有抢占、只有一个块大小、重算 / 来回印出来是 1.00
    lines, more = m.observations_4(fake_d4({16: 0.999}))
    assert_observation_shape(lines, more)
    assert has(lines[0], "没有抢占", "1 个请求")
    assert has(lines[1], "16 GB/s", "16 两者一样") and "块从" not in flat(lines)
    # 每个块大小下都是换出更快；没有别的带宽
    lines, more = m.observations_4(fake_d4({1: 1.2, 4: 1.3}, alt_gbps=[]))
    assert has(lines[1], "每个块", "换入更快") and has(more[0], "1.30：16 GB/s 超出")
    lines, more = m.observations_4(fake_d4({1: 0.5, 4: 1.2}, alt_gbps=[]))
    assert has(more[0], "1.20：16 GB/s 在论文以内")                       # 一个带宽：不说"每种"
    lines, more = m.observations_4(fake_d4({1: 1.3, 4: 1.5}, alt_gbps=[25.0]))
    assert has(more[0], "每种带宽下", "超出论文")                           # 两种带宽都超出
    # 全部重算和全部换出印出来一样
    lines, _ = m.observations_4(fake_d4({1: 0.5, 4: 1.5}, n_preempt=3, n_requests=1, mean_len=5.0,
                                        recomputed_tokens=15, load=dict(recompute=1.04, round_trip=0.96)))
    assert has(lines[0], "3 次", "1 个请求", "一样（都是 1.0 s）")


# ---------------------------------------------------------------- 设置
def test_settings_are_checked():
    assert_settings_refused(m, (("GPU_MEM_UTIL", 0), ("GPUS", ()), ("N_REQUESTS", 0), ("KV_POOL_GIB", 0.5),
                                ("BLOCK_SIZE", -4), ("PCIE_GBPS_ALT", (1, 2, 3)), ("COPY_OVERHEAD_ALT_US", (-1.0,)),
                                ("GPUS", (("A", 1), ("A", 2)))), ["--demo", "1"])


def test_docstring_and_console_state():
    assert m.__doc__.splitlines()[0].endswith("？") and "【运行】" in m.__doc__ and "【试一试】" in m.__doc__
    assert console.SHOW_MORE is False


# ---------------------------------------------------------------- 01 的三张图（数字全部来自演示返回的 dict）
def test_plot_01_draws_every_figure_from_the_demo_dicts(tmp_path, monkeypatch, d3, d4):
    p = load_plot("plot_01")
    assert p.FIGURES == ("01_kv_memory_breakdown.png", "01_kv_per_token.png", "01_recompute_vs_swap.png")
    # compute() 只转交演示返回的 dict：把演示换成返回记号的假函数，图拿到的就是记号
    marker3, marker4 = dict(d3, base="记号 3"), dict(d4, model="记号 4")
    monkeypatch.setattr(m, "demo3_smaller_kv", lambda: marker3)
    monkeypatch.setattr(m, "demo4_preemption", lambda sim=None: marker4)
    got = p.compute()
    assert got["d3"] is marker3 and got["d4"] is marker4
    src = pathlib.Path(p.__file__).read_text(encoding="utf-8")
    assert set(re.findall(r"s01\.(\w+)", src)) == {"simulate_load", "demo2_fragmentation", "demo3_smaller_kv",
                                                   "demo4_preemption"}
    paths = [p.plot_kv_per_token(d3, str(tmp_path / "b.png")), p.plot_recompute_vs_swap(d4, str(tmp_path / "c.png"))]
    shares = {"Orca (Max)": [0.2, 0.1, 0.6, 0.1], "vLLM": [0.96, 0.0, 0.02, 0.02]}
    paths.append(p.plot_breakdown(shares, {"Orca (Max)": 7, "vLLM": 30}, {"Orca (Max)": 20.4, "vLLM": 96.3},
                                  str(tmp_path / "a.png"), "小数据"))
    for path in paths:
        assert os.path.getsize(path) > 10_000


def test_plot_01_titles_state_the_finding(d4):
    p = load_plot("plot_01")
    title = p.breakdown_title({"vLLM": [0.973], "Orca (Max)": [0.218]})
    assert has(title, "97.3%", "21.8%") and title.index("97.3%") < title.index("21.8%")
    assert "%" not in p.breakdown_title({"Orca (Max)": [0.2]})               # 分页从未满载：不说结论          # 分页从未满载：不说结论
    assert has(p.swap_title(d4), "块 ≤ 64", "块 256", "16 GB/s")
    one = dict(d4, by_block={16: dict(d4["by_block"][16])})
    assert has(p.swap_title(one), "每个块", "重算更快") and "256" not in p.swap_title(one)
    tie = dict(d4, by_block={16: dict(d4["by_block"][16], ratio=0.999)})
    assert has(p.swap_title(tie), "取决于") and "≤" not in p.swap_title(tie)


def test_plot_01_without_room_for_weights(tmp_path, d3):
    """一张卡放不下权重时，右图照实说，不画空条。"""
    p = load_plot("plot_01")
    t = {k: dict(v, fit={g: None for g in v["fit"]}, fit_fp8={g: None for g in v["fit"]}) for k, v in d3["table"].items()}
    assert os.path.getsize(p.plot_kv_per_token(dict(d3, table=t), str(tmp_path / "x.png"))) > 10_000


def test_bandwidth_source_only_claimed_for_the_default(monkeypatch):
    """FAST'25 的 128 ÷ 8 只说是默认值的出处：改成 20 GB/s 时不说 20 GB/s 来自 FAST'25。"""
    monkeypatch.setattr(m, "PCIE_GBPS", 20.0)
    out = run(["--demo", "4", "--more"]).replace("\n", "")
    assert "默认 16 GB/s = FAST'25 表 1 整机" in out and "20 GB/s = FAST" not in out and "20 GB/s 时" in out


def test_probe_fixes_formatting_and_duplicates(monkeypatch):
    """探针里找到的问题：带宽千分位、和主值相同的敏感性列不重复、MLA 维度改了时的"x 组"、KiB 格子。"""
    monkeypatch.setattr(m, "PCIE_GBPS", 10_000)
    monkeypatch.setattr(m, "PCIE_GBPS_ALT", (10_000, 32.0))
    out = run(["--demo", "4"])
    assert re.search(r"^ *块 .*重算 ms +10,000 GB/s +32 GB/s$", out, flags=re.M) and "10000" not in out
    monkeypatch.setattr(m, "MLA_KV_LORA_RANK", 1)
    out = run(["--demo", "3", "--more"]).replace("\n     ", "")
    assert re.search(r"^MLA +65 +5\.08 +2\.54 ", out, flags=re.M) and "(1 + 64) ÷ (2 × 128) = 0.25 组" in out
    assert "少了98.0%" in re.sub(r"\s+", "", out) and "你改了 MLA_KV_LORA_RANK" in out
    assert m.kib(46080) == "45" and m.kib(23040) == "22.5" and m.num(16.0) == "16"


def test_kv_alloc_sim_doctests():
    import doctest
    import allocation
    assert doctest.testmod(allocation).failed == 0
    assert m.simulate_paged is allocation.simulate_paged          # 01 用的就是这一份


def test_probe_p1_sentence_classes():
    """p1 的探针发现的几类问题，各用手造的数据测一次。"""
    # MLA 比 DeepSeek 67B 还大：说"多了"，不说"少 -1,923.0%"，也不说"只存"
    d = dict(quiet(m.demo3_smaller_kv))
    d["dsv2_kv"], d["dsv2_kv_quant"] = 20.23 * d["ds67_kv"], 7.586 * d["ds67_kv"]
    d["reduction_bf16"], d["reduction_quant"] = 1 - 20.23, 1 - 7.586
    text = flat(m.observations_3(d)[0])
    assert has(text, "反而多了 658.6%") and "少 -" not in text and "只存" not in text
    # 设置里的数不用科学计数法
    assert m.num(1e6) == "1,000,000" and m.num(0.01) == "0.01" and m.num(16.0) == "16"
    # 容量按大小自己挑单位：1 字节的卡不印 "0 MiB"、"0.0 GiB"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(m, "GPUS", (("X", 1),))
        mp.setattr(m, "TP_GPUS", 1)
        d1 = quiet(m.demo1_bytes_per_token)
    lines, more = m.observations_1(d1)
    more = flat(more)
    assert "张量并行" not in lines[1]
    from artefacts import find_artefacts
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(m, "GPUS", (("X", 1),))
        out = run(["--demo", "1", "--more"])
    assert find_artefacts(out) == [] and re.search(r"^X +1 B +1 B +- +-$", out, flags=re.M)


def test_oracle_share_is_not_called_small_when_it_beats_paging(d2):
    """块 2048 时分页只有 21.8%，Orca (Oracle) 46.4%：不能说 Oracle "也只有"（手造：把分页的占比调低）。"""
    shares = dict(d2["shares"], vLLM=(0.218, 0.0, 0.694, 0.0))
    text = flat(m.observations_2(dict(d2, shares=shares))[0])
    assert "只有 46.4%" not in text and "只有" not in text
    assert has(text, "分页（块 16）和 Orca (Max) 一样", "21.8%")


def test_demo1_runs_when_models_lists_none_of_the_named_ones(monkeypatch):
    """MODELS 只留 GPT-2 small：观察点名的 OPT-13B、LLaMA2-13B、LLaMA2-70B 照样算，不抛 KeyError。"""
    monkeypatch.setattr(m, "MODELS", (m.GPT2_SMALL,))
    d = quiet(m.demo1_bytes_per_token)
    lines, _ = m.observations_1(d)
    lines, more = m.observations_1(d)
    assert "800 KiB" in lines[0] and "320 KiB/token" in more[0] and d["mha_70"] == 2560 * 1024
