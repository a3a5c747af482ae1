"""01_kv_cache_memory.py：每个 token 的 KV 字节数、一张卡能放多少 token、连续预分配与分页的显存构成。"""
import re

import numpy as np
import pytest
from rich.cells import cell_len

from conftest import assert_settings_refused, load_script

m = load_script("01_kv_cache_memory")


@pytest.fixture(scope="module")
def d1():
    return m.demo1_bytes_per_token()


@pytest.fixture(scope="module")
def sim():
    return m.simulate_load()


@pytest.fixture(scope="module")
def d2(sim):
    return m.demo2_fragmentation(sim)


@pytest.fixture(scope="module")
def d3():
    return m.demo3_smaller_kv()


@pytest.fixture(scope="module")
def d4(sim):
    return m.demo4_preemption(sim)


def test_smoke_main(capsys):
    assert m.main([]) == 0
    out = capsys.readouterr().out
    assert "演示 1" in out and "演示 2" in out
    assert "15,728 个 token" in out                                    # 演示 1：12 GiB / 800 KiB
    assert "97.3%" in out                                             # 演示 2：分页时 token 状态的占比
    assert "2,380,193" in out                                         # 演示 3：MLA 时一张 H200 能放的 token
    assert re.search(r"^ *256 +160 +27\.8 +55\.6 +64\.2 +1\.15$", out, flags=re.M)   # 演示 4：块 256 那一行
    assert max(cell_len(line) for line in out.splitlines()) <= 80   # 显示宽度（中文占 2 列）


def test_bad_demo_argument_exits_2():
    with pytest.raises(SystemExit) as e:
        m.main(["--demo", "9"])
    assert e.value.code == 2


def test_kv_bytes_per_token_known_values(d1):
    kv = d1["kv_bytes"]
    assert kv["OPT-13B"] == 2 * 5120 * 40 * 2 == 800 * 1024          # vLLM 论文 §3：800 KB
    assert kv["LLaMA2-70B"] == 320 * 1024                            # GQA：80 × 8 × 128 × 2 × 2
    assert kv["GPT-2 small"] == 36 * 1024
    assert kv["LLaMA2-7B"] == 512 * 1024
    assert kv["LLaMA2-13B"] == 800 * 1024
    assert kv["LLaMA3-8B"] == 128 * 1024


def test_demo1_claims(d1):
    assert d1["opt_req_mib"] == 1600                                  # 2048 × 800 KiB = 1,600 MiB（论文：1.6 GB）
    assert round(d1["opt_slots"] / 100) / 10 == 15.7                  # 论文表 1：15.7K
    assert d1["mha_70"] == 8 * 320 * 1024
    for gpu in ("A800 80GB", "H200 141GB"):
        assert d1["fit"]["LLaMA2-70B"][gpu] is None                   # 一张卡放不下 70B 的 fp16 权重
        assert d1["fit"]["LLaMA2-13B"][gpu] > 0
    assert d1["fit"]["LLaMA2-13B"]["A800 80GB"] // 2048 == 30
    assert d1["l70_tp"] > 1_000_000
    # H200 的显存更大，能放的 token 更多
    for name, f in d1["fit"].items():
        if f["A800 80GB"] is not None:
            assert f["H200 141GB"] > f["A800 80GB"]


def test_tokens_that_fit_hand_checked():
    spec = m.ModelSpec("toy", n_layers=1, d_model=4, n_heads=1, n_kv_heads=1, n_params=10)   # 16 B/token，权重 20 B
    assert spec.kv_bytes_per_token() == 16
    assert m.tokens_that_fit(spec, 100, util=1.0) == 5                # (100 − 20) // 16
    assert m.tokens_that_fit(spec, 10, util=1.0) is None


def test_reservation_rules():
    assert m.reservation("Max", 10, 25) == m.MAX_SEQ
    assert m.reservation("Pow2", 10, 25) == 10 + 32                  # 论文：输出 25 → 预留 32
    assert m.reservation("Oracle", 10, 25) == 35
    assert m.reservation("Pow2", 1000, 1040) == m.MAX_SEQ            # 不超过最大长度


def test_lengths_deterministic_and_bounded():
    p1, o1 = m.make_lengths(200)
    p2, o2 = m.make_lengths(200)
    assert np.array_equal(p1, p2) and np.array_equal(o1, o2)
    assert (p1 >= 1).all() and (o1 >= 1).all() and (p1 + o1 <= m.MAX_SEQ).all()


def test_tiny_contiguous_hand_checked():
    # 池 10 个位置；两个请求 (p=2, o=2)、Oracle 各预留 4：都放得下，之后没人排队 → 没有满载的步
    # 三个请求时：前两个占 8，第三个放不下（空 2 < 4），排队 2 步。
    share, conc = m.simulate_contiguous("Oracle", np.array([2, 2, 2]), np.array([2, 2, 2]), pool=10)
    # 第 0 步：token 4、预留 4、内部 0、空闲 2；第 1 步：token 6、预留 2、空闲 2
    assert np.allclose(share, np.array([10, 6, 0, 4]) / 20)
    assert conc == 2


def test_tiny_paged_hand_checked():
    # 块 2、池 6 个位置（3 块）；请求 (p=2, o=1) × 4：每个要 1 块输入 + 写第 3 个 token 时再要 1 块
    share, conc, preempted = m.simulate_paged(np.array([1, 1, 1, 1]), np.array([1, 1, 1, 1]), pool=6, block_size=2)
    assert np.isclose(share.sum(), 1.0)
    assert share[1] == 0                                             # 分页没有"预留"


def test_demo2_claims(d2):
    s = d2["shares"]
    for v in s.values():
        assert np.isclose(v.sum(), 1.0)
    assert d2["same_order"] and d2["order"] == ["Orca (Max)", "Orca (Pow2)", "Orca (Oracle)", "vLLM"]
    assert d2["pow2_between"]
    assert s["vLLM"][0] > 0.9                                        # 分页后绝大部分显存存着 token
    assert s["vLLM"][1] == 0
    assert s["Orca (Oracle)"][2] == 0                                # Oracle 没有内部碎片
    assert s["Orca (Max)"][2] > s["Orca (Max)"][0]                   # Max 的内部碎片比 token 状态还多
    c = d2["concurrency"]
    assert c["vLLM"] > c["Orca (Oracle)"] > c["Orca (Max)"]
    assert c["Orca (Max)"] == d2["pool"] // m.MAX_SEQ
    assert abs(d2["mean_prompt"] - m.SHAREGPT_MEAN[0]) / m.SHAREGPT_MEAN[0] < 0.1
    assert abs(d2["mean_output"] - m.SHAREGPT_MEAN[1]) / m.SHAREGPT_MEAN[1] < 0.1


def test_output_deterministic(capsys):
    m.main([])
    a = capsys.readouterr().out
    m.main([])
    assert capsys.readouterr().out == a


def test_observations_are_plain_functions_of_the_dicts(d1, d2):
    """观察只由 demo 返回的 dict 算出：同一个 dict 再算一次，句子一字不差。"""
    assert m.observations_1(d1) == m.observations_1(dict(d1))
    assert len(m.observations_1(d1)) == 4 and len(m.observations_2(d2)) == 4
    assert "都放不下" in m.observations_1(d1)[2]


def test_units_are_binary_and_labelled(d1):
    """字节数一律按 1024 进位、标成 KiB/MiB/GiB；论文的 12 GB → 15.7K 只有按 1024 进位才对得上。"""
    assert d1["opt_slots"] == 12 * 1024 ** 3 // (800 * 1024) == 15_728
    assert d1["opt_slots_decimal"] == int(12e9 // (800 * 1024)) == 14_648      # 按 10⁹ 算就不是 15.7K
    obs = m.observations_1(d1)
    assert "800 KiB/token" in obs[0] and "1,600 MiB = 1.56 GiB" in obs[0] and "14,648" in obs[0]
    assert "320 KiB/token" in obs[1] and "2560 KiB" in obs[1]
    assert " KB/token" not in "".join(obs) and " MB" not in "".join(obs)      # 只有引用论文原文时才写 KB、GB


def test_one_gpu_sentence_follows_the_utilization(monkeypatch):
    """"一张卡放不下 70B" 只在 GPU_MEM_UTIL = 0.9 时成立：句子按当前设置逐张卡算。"""
    import contextlib
    import io
    for util, want in ((0.9, "一张卡都放不下"), (1.0, "一张 H200 141GB 放得下，一张 A800 80GB 放不下")):
        monkeypatch.setattr(m, "GPU_MEM_UTIL", util)
        with contextlib.redirect_stdout(io.StringIO()):
            d = m.demo1_bytes_per_token()
        assert want in m.observations_1(d)[2], m.observations_1(d)[2]
        assert d["usable_gib"]["H200 141GB"] == pytest.approx(util * 143_771 / 1024)
    assert 0.9 * 143_771 / 1024 < 70e9 * 2 / 1024 ** 3 < 1.0 * 143_771 / 1024     # 130.4 GiB 夹在两者之间


def test_never_full_load_is_reported_not_divided_by_zero(monkeypatch):
    """N_REQUESTS = 20：分页、Pow2、Oracle 一开始就全部放得下，没有满载的步——打 -，另有说法（以前 ZeroDivisionError）。"""
    import contextlib
    import io
    monkeypatch.setattr(m, "N_REQUESTS", 20)
    with contextlib.redirect_stdout(io.StringIO()):
        d = m.demo2_fragmentation()
    assert d["idle"] == ["Orca (Pow2)", "Orca (Oracle)", "vLLM"] and d["shares"]["vLLM"] is None
    assert d["order"] == ["Orca (Max)"]
    obs = m.observations_2(d)
    assert "一开始就全部放得下" in obs[0] and len(obs) == 2


def test_simulators_return_none_without_full_load():
    share, conc, preempted = m.simulate_paged(np.array([2]), np.array([2]), pool=64, block_size=4)
    assert share is None and conc is None and preempted == []
    share, conc = m.simulate_contiguous("Oracle", np.array([2]), np.array([2]), pool=64)
    assert share is None and conc is None


def test_pool_wording_only_claims_the_paper_for_12_gib(monkeypatch, d1):
    assert "与论文表 1 的 12 GB → 15.7K 一致" in m.observations_1(d1)[0]
    monkeypatch.setattr(m, "KV_POOL_GIB", 40)
    assert "这里改成了 40 GiB" in m.pool_source()


def test_settings_are_checked():
    assert_settings_refused(m, (("GPU_MEM_UTIL", 0), ("GPUS", ()), ("N_REQUESTS", 0), ("KV_POOL_GIB", 0.5), ("BLOCK_SIZE", -4)), ["--demo", "1"])


# ---------------------------------------------------------------- 演示 3：让 KV 变小
def test_kv_variants_from_the_configuration(d3):
    t = d3["table"]
    assert [t[k]["kv"] for k in t] == [800 * 1024, 160 * 1024, 20 * 1024, 40 * 576 * 2, 400 * 1024, 80 * 1024]
    assert t["MLA"]["per_layer"] == 512 + 64 == 2.25 * 2 * 128               # DeepSeek-V2：相当于 2.25 组 GQA
    assert d3["mla_groups"] == m.DSV2_GQA_EQUIV == 2.25
    assert t["MHA"]["fit"]["H200 141GB"] == 133_885                          # 和演示 1 的 LLaMA2-13B 一格相同
    assert t["MLA"]["fit"]["H200 141GB"] == 2_380_193


def test_deepseek_v2_reduction_matches_the_paper(d3):
    """DeepSeek-V2 摘要的 93.3% = MLA（60 层 × 576）加平均 6 bit 的 KV 量化，对 DeepSeek 67B（95 层 × 8 组 × 128，bf16）。"""
    assert d3["ds67_kv"] == 95 * 8 * 128 * 2 * 2 == 389_120
    assert d3["dsv2_kv"] == 60 * 576 * 2
    assert round(d3["reduction_bf16"] * 100, 1) == 82.2
    assert round(d3["reduction_quant"] * 100, 1) == m.DSV2_KV_REDUCTION == 93.3
    text = "".join(m.observations_3(d3))
    assert "只少 82.2%" in text and "少 93.3%" in text and "§2.1.4 表 1" in text


# ---------------------------------------------------------------- 演示 4：抢占
def test_preemption_count_under_demo2_load(d4, sim):
    assert d4["n_preempt"] == len(sim["preempted"]) == 633
    assert d4["n_requests"] == 217 and d4["recomputed_tokens"] == 106_746
    assert round(d4["mean_len"]) == 169
    assert "抢占了 633 次，涉及 217 个请求（54%）" in m.observations_4(d4)[0]


def test_swap_versus_recompute(d4):
    bb = d4["by_block"]
    ratios = [bb[b]["ratio"] for b in m.SWAP_BLOCK_SIZES]
    assert all(b > a for a, b in zip(ratios, ratios[1:]))                    # 块越大，换出越划算
    assert len({round(r["recompute"], 12) for r in bb.values()}) == 1        # 重算与块大小无关
    assert [b for b in bb if bb[b]["ratio"] < 1] == [1, 4, 16, 64]
    assert max(ratios) < 1 + m.VLLM_73_RECOMPUTE_MAX / 100                   # 论文：重算从不超过换出的 20%
    text = "".join(m.observations_4(d4))
    assert "块 1、4、16、64 时重算更快，块 256 时换出再换入更快" in text and "重算最多比来回慢 15%" in text
    assert bb[16]["copies"] == 40 * 2 * 32
    assert m.swap_seconds(m.OPT_13B, 512, 16)[1] == pytest.approx(2560 * 10e-6 + 512 * 800 * 1024 / 16e9)
    assert m.recompute_seconds(m.OPT_13B, 512) == pytest.approx(m.OPT_13B.prefill_flops(512) / (312e12 * 0.6))


def test_pcie_bandwidth_has_one_source():
    """每卡 16 GB/s = FAST'25 表 1 的整机 128 GB/s ÷ 8 卡（kv_physics.TIERS 里的同一个数）。"""
    from kv_physics import A800_X8, TIERS
    assert m.PCIE_GBPS == TIERS[1].gb_per_s / A800_X8.n_gpus


def test_main_simulates_the_load_once(monkeypatch, capsys):
    calls = []
    real = m.simulate_load
    monkeypatch.setattr(m, "simulate_load", lambda: calls.append(1) or real())
    assert m.main([]) == 0
    assert len(calls) == 1
    capsys.readouterr()
