"""04_prefix_caching.py：每个演示打印的每条结论都在这里检查。"""
import ast
import math
import os
import pathlib
import re
import subprocess
import sys

import pytest
from conftest import LECTURE
from helpers_04 import demo2_results, m, synthetic_data

pytestmark = pytest.mark.xdist_group("s04")   # 04 的三个测试文件在同一个 pytest 进程里：命中表只算一遍


def flat(s):
    """去掉全部空白：观察会按 80 列折行，比较时不管在哪里折的。"""
    return re.sub(r"\s+", "", s)


@pytest.fixture(scope="module")
def d1():
    return m.demo1_hashing()


@pytest.fixture(scope="module")
def d2():
    return demo2_results()


@pytest.fixture(scope="module")
def data():
    return synthetic_data()


@pytest.fixture(scope="module")
def d3(data):
    return m.demo3_trace(data)


@pytest.fixture(scope="module")
def d4(data):
    return m.demo4_compute_saved(data)


# ---------------------------------------------------------------- 代码本身
@pytest.mark.parametrize("name", ["04_prefix_caching.py", "04b_radix_cache.py", "radix_cache.py"])
def test_no_conditional_expressions(name):
    """观察用普通的 if/else 拼句子：一个条件表达式（a if c else b）都没有。"""
    tree = ast.parse(pathlib.Path(LECTURE, name).read_text(encoding="utf-8"))
    assert [n.lineno for n in ast.walk(tree) if isinstance(n, ast.IfExp)] == []


# ---------------------------------------------------------------- 演示 1
def test_demo1_a_and_b_share_first_three_blocks(d1):
    h = d1["hashes"]
    assert d1["a_b_common"] == 3 and h["A"][:3] == h["B"][:3] and h["A"][3] != h["B"][3]


def test_demo1_c_differs_from_its_changed_block_onward(d1):
    h, k = d1["hashes"], d1["c_first_changed_block"]
    assert k == 1 and d1["a_c_common"] == k
    assert all(a != c for a, c in zip(h["A"][k:], h["C"][k:]))


def test_demo1_partial_tail_is_not_hashed(d1):
    h = d1["hashes"]
    assert len(h["A"]) == 17 // 4 == 4 and d1["a_tail"] == 1
    assert all(re.fullmatch(r"[0-9a-f]{12}", x) for x in h["A"])


# ---------------------------------------------------------------- 演示 2
@pytest.mark.parametrize("name,plen", m.FEW_SHOT)
def test_demo2_logits_equal_full_recompute(d2, name, plen):
    assert d2[name]["worst"] <= 1e-12


@pytest.mark.parametrize("name,plen", m.FEW_SHOT)
def test_demo2_prefix_blocks_are_mapped_not_recomputed(d2, name, plen):
    r = d2[name]
    assert r["full_prefix_blocks"] == plen // m.BLOCK_SIZE
    assert r["mapped"] == (m.N_SHARING - 1) * r["full_prefix_blocks"]      # 后 7 个请求每个都映射全部满块
    assert r["computed"] == r["total"] - r["mapped"] * m.BLOCK_SIZE         # 只算自己的部分
    assert r["saved"] == 1 - r["computed"] / r["total"]
    assert r["used_shared"] < r["used_private"]


def test_demo2_longer_prefix_saves_more(d2):
    assert d2["5-shot"]["saved"] > d2["1-shot"]["saved"]


# ---------------------------------------------------------------- 演示 3
def test_demo3_trace_mimics_public_tool_agent_trace(d3, data):
    st = d3["stats"]
    assert st["n"] == 23_608 and abs(st["minutes"] - 60) < 0.5
    assert abs(st["mean_in"] / 8_596 - 1) <= 0.05 and abs(st["mean_out"] / 182 - 1) <= 0.05
    tr = data["trace"]
    assert all(len(r.blocks) == math.ceil(r.input_len / 512) for r in tr)
    assert all(a.arrival <= b.arrival for a, b in zip(tr, tr[1:]))


def test_demo3_infinite_hit_ratio(d3):
    st, ratio = d3["stats"], d3["ratio"]
    assert 0.55 <= ratio[("lru", None)] <= 0.62
    assert ratio[("lru", None)] == pytest.approx(1 - st["distinct"] / st["total_blocks"], abs=1e-12)
    assert ratio[("lru", None)] == ratio[("lfu", None)] == ratio[("lengthaware", None)]


def test_demo3_block_popularity(d3):
    st = d3["stats"]
    assert st["once"] > 0.5 and st["hottest"] >= 10_000
    assert st["counts"][0] == st["hottest"] and int(st["counts"].sum()) == st["total_blocks"]


def test_demo3_lru_beats_lfu_at_mid_capacities(d3):
    r = d3["ratio"]
    for c in (10_000, 30_000, 50_000):
        assert r[("lru", c)] >= r[("lfu", c)]


def test_demo3_lru_at_1000_keeps_enough(d3):
    r = d3["ratio"]
    assert r[("lru", 1_000)] >= 0.45 * r[("lru", None)]


def test_demo3_hit_ratio_is_monotone_for_lru(d3):
    r = d3["ratio"]
    caps = [c for c in m.CAPACITIES if c is not None]
    vals = [r[("lru", c)] for c in sorted(caps)]
    assert vals == sorted(vals) and max(vals) <= r[("lru", None)]


def test_demo3_why_lru_wins_is_printed(data, capsys):
    """观察 3 说完"LRU 不低于 LFU"之后要说出原因（复用在时间上相近），不能停在一个悬空的冒号上。"""
    m.demo3_trace(data)
    out = flat(capsys.readouterr().out)
    assert "LRU都不低于LFU" in out and "LRUCacheperformsbest" in out
    assert "一致：复用多半发生在时间上相近的请求之间（同一个会话的下一轮）" in out
    assert "一致：\n" not in out and not re.search(r"：\d+\.\d+,000块时三种策略", out)


# ---------------------------------------------------------------- 演示 4
def test_demo4_cache_saves_gpu_time_in_capacity_order(d4):
    h = {c: d4["hours"][("lru", c)] for c in m.DEMO4_CAPS}
    assert h[None] < h[10_000] < h[1_000] < d4["base_hours"]


def test_demo4_storage_for_10k_blocks_exceeds_hbm(d4):
    assert d4["need_bytes"] == 10_000 * 512 * 327_680
    assert d4["need_bytes"] > d4["hbm_bytes"] == 8 * 80 * 2**30      # A800 的 "80GB" 是 80 GiB


# ---------------------------------------------------------------- 整个脚本
def test_main_prints_a_number_from_each_demo(d1, d2, d3, d4, data, monkeypatch, capsys):
    """main() 跑完四个演示；每个演示的一个数出现在输出里（命中表用测试共享的那一份，不再算一遍）。"""
    monkeypatch.setattr(m, "trace_sweep", lambda *a, **k: data)
    assert m.main([]) == 0
    out = capsys.readouterr().out
    for k in range(1, 5):
        assert f"演示 {k}" in out
    assert f"前 {d1['a_b_common']} 块哈希相同" in out
    r5 = d2["5-shot"]
    assert re.search(rf"5-shot\s+341\s+{r5['total']}\s+{r5['computed']}\s+{r5['saved']:.0%}", out)
    lru_row = next(x for x in out.splitlines() if x.startswith("LRU "))
    assert lru_row.split()[1:] == [f"{d3['ratio'][('lru', c)]:.2f}" for c in m.CAPACITIES]
    assert re.search(rf"不缓存\s+0%\s+{d4['base_hours']:.2f}\s+1\.00×", out)


def test_bad_argument_is_one_line_and_exit_2():
    p = subprocess.run([sys.executable, f"{LECTURE}/04_prefix_caching.py", "--demo", "9"],
                       capture_output=True, text=True)
    assert p.returncode == 2 and p.stdout == ""
    assert len(p.stderr.strip().splitlines()) == 1 and "--demo" in p.stderr and "Traceback" not in p.stderr


@pytest.mark.parametrize("cwd", ["lecture07", "/"])
def test_runs_from_any_working_directory(cwd, tmp_path):
    root = os.path.dirname(LECTURE)
    where = os.path.join(root, cwd) if cwd != "/" else str(tmp_path)
    p = subprocess.run([sys.executable, os.path.join(LECTURE, "04_prefix_caching.py"), "--demo", "1"],
                       capture_output=True, text=True, cwd=where, env=dict(os.environ, NO_COLOR="1"))
    assert p.returncode == 0 and "演示 1" in p.stdout


def test_lengthaware_keeps_chains_and_contrast_breaks_them():
    """次数相同时：LengthAware（本课的读法）先淘汰靠后的子块，前缀还能命中；对照（先淘汰靠前的）先丢父块。"""
    from kv_cache_policies import make_cache
    la, early = make_cache(2, "lengthaware"), make_cache(2, m.CONTRAST)
    for c in (la, early):
        c.insert([1, 2])
        c.insert([3])
    assert la.match([1, 2]) == 1                                   # 父块 1 还在
    assert early.match([1, 2]) == 0 and early.count([1, 2]) == 1   # 父块 1 没了，子块 2 留着也用不上


def test_lengthaware_definition_and_contrast_row_are_printed(d3, data, capsys):
    """表注里是论文的原话（从常量打印）；对照行有自己的标签，数和命中表同一份。"""
    from kv_cache_policies import LENGTHAWARE_DEFINITION
    assert LENGTHAWARE_DEFINITION == "similar to LFU but prioritizing cache blocks occurring later in requests"
    m.demo3_trace(data)
    raw = capsys.readouterr().out
    out = flat(raw)
    assert flat(LENGTHAWARE_DEFINITION) in out and "本课读作：访问次数相同时先淘汰请求里靠后的块" in out
    assert "对照行：另一种读法，不是论文的策略" in out
    r = d3["ratio"]
    row = next(x for x in raw.splitlines() if x.startswith("对照："))
    assert row.split()[1:] == ["-"] * 4 + [f"{r[(m.CONTRAST, 10_000)]:.2f}"] + ["-"] * 2
    la, lfu, c = r[("lengthaware", 10_000)], r[("lfu", 10_000)], r[(m.CONTRAST, 10_000)]
    assert f"10,000块时它是LFU的{la / lfu:.0%}" in out and "（论文表1：0.35/0.35=100%）" in out
    assert c < la and f"只有{c:.2f}，是LFU的{c / lfu:.0%}" in out and "父块没了" in out
    assert la / lfu > 0.9                    # 本课的读法跟得上论文"和 LFU 差不多"的趋势


# ---------------------------------------------------------------- 引用的论文数字、模型、单位（每一条都在论文里核对过）
def test_vllm_fig16_constants_are_the_papers():
    """vLLM 论文 §6.4 / 图 16：LLaMA-13B、WMT16 英译德；前缀 80 / 341 token；吞吐是 Orca (Oracle) 的 1.67 / 3.58 倍。"""
    v = m.VLLM_FIG16
    assert v["model"] == "LLaMA-13B" and v["dataset"].startswith("WMT16") and v["baseline"] == "Orca (Oracle)"
    assert v["prefix_tokens"] == {"1-shot": 80, "5-shot": 341} and dict(m.FEW_SHOT) == v["prefix_tokens"]
    assert v["throughput_x"] == {"1-shot": 1.67, "5-shot": 3.58}


def test_demo2_cites_fig16_as_vllm_vs_orca(capsys):
    m.demo2_shared_prefix()
    out = flat(capsys.readouterr().out)
    assert "OPT-13B" not in out and "LLaMA-13B、WMT16英译德" in out
    assert "vLLM的吞吐是Orca(Oracle)的1.67倍，5-shot时是3.58倍" in out and "vLLM整体（分页+共享）" in out


def test_demo2_explains_what_differs_between_prefixes(d2, capsys):
    """1-shot 的 80 token 正好 5 个满块、没有零头；差别来自前缀占输入的比例，不是零头。"""
    r1, r5 = d2["1-shot"], d2["5-shot"]
    assert (r1["full_prefix_blocks"], r1["prefix_tail"]) == (5, 0) and (r5["full_prefix_blocks"], r5["prefix_tail"]) == (21, 5)
    m.demo2_shared_prefix()
    out = flat(capsys.readouterr().out)
    assert "1-shot的80个token正好是5个满块、没有零头" in out and "5-shot的341个token=21个满块+5个零头" in out
    assert f"前缀占全部输入的比例：1-shot{r1['prefix_share']:.0%}、5-shot{r5['prefix_share']:.0%}" in out
    assert r5["prefix_share"] > r1["prefix_share"] and "前缀占比更大，所以省得更多" in out


def test_demo1_names_the_changed_blocks_unambiguously(d1, capsys):
    m.demo1_hashing()
    out = flat(capsys.readouterr().out)
    assert "从改动的第2块到最后的第4块（共3块）哈希都变了" in out and "以及之后全部" not in out


def test_demo3_arxiv_trace_is_named_and_public(capsys, data):
    """arXiv v3 表 1 算在 arXiv 版公开的 trace（mooncake_trace.jsonl）上，不是 FAST'25 的 Tool&Agent。"""
    assert m.PAPER_TRACES[0][1:6] == (23_608, 60, 7_590, 182, 0.51)
    assert m.PAPER_TRACES[1][0] == "FAST'25 Tool&Agent" and m.PAPER_TRACES[1][1:6] == (23_608, 60, 8_596, 182, 0.59)
    assert [r[1:6] for r in m.PAPER_TRACES_MORE] == [(12_031, None, 12_035, 343, 0.40), (3_993, None, 15_325, 149, 0.66)]
    m.demo3_trace(data)
    out = flat(capsys.readouterr().out)
    assert "mooncake_trace.jsonl" in out and "不是同一个trace" in out and "今天公开" not in out
    assert "真实trace" not in out


def test_demo3_paper_wording(capsys, data):
    """arXiv v3 §4.2：tens of thousands → 数万次；中文列表用顿号。"""
    assert "tens of thousands" in m.BLOCK_HOT_PAPER
    m.demo3_trace(data)
    out = capsys.readouterr().out
    assert "有的块被访问数万次" in out and "上万次" not in out
    assert "在50,000、30,000、10,000块时LRU都不低于LFU" in flat(out)


def test_demo3_lru_gap_shape_follows_the_numbers(d3, capsys, data):
    """LRU 离 MIN 的差距先增后减（3,000 块最大），句子说的是这个形状，不是只比两端。"""
    finite = sorted((c for c in m.CAPACITIES if c is not None), reverse=True)
    g = [d3["gap"][("lru", c)] for c in finite]
    peak = max(range(len(g)), key=lambda i: g[i])
    assert finite[peak] == 3_000 and 0 < peak < len(g) - 1
    m.demo3_trace(data)
    out = flat(capsys.readouterr().out)
    assert "、".join(f"{x:.2f}" for x in g) in out
    assert f"先变大、在{finite[peak]:,}块时最大（{g[peak]:.2f}），再到{finite[-1]:,}块时回落到{g[-1]:.2f}" in out
    assert "缓存小时，\"留谁\"更要紧" not in out


def test_demo4_model_and_units(d4, capsys, data):
    """FAST'25 的数（式 1、128 GB/s）配 LLaMA3-70B；KV 用二进制单位：512 × 320 KiB = 160 MiB。"""
    assert d4["model"] == "LLaMA3-70B" and d4["kv_block_bytes"] == 512 * 320 * 2**10 == 160 * 2**20
    assert d4["hbm_bytes"] == 8 * 80 * 2**30
    m.demo4_compute_saved(data)
    out = flat(capsys.readouterr().out)
    assert "LLaMA3-70B（FAST'25表1、§5.3.1" in out and "dummyLLaMA2-70B（arXivv3§1.2）形状相同" in out
    assert "一块=512×320KiB=160MiB" in out and "1,562GiB" in out and "640GiB" in out and "156GiB" in out
    assert not re.search(r"\d(KB|MB|TB)", out)
