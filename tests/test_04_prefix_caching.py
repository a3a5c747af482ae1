"""04_prefix_caching.py：每个演示打印的每条结论都在这里检查。"""
import math
import re
import subprocess
import sys

import pytest
from conftest import LECTURE, load_script

m = load_script("04_prefix_caching")


@pytest.fixture(scope="module")
def d1():
    return m.demo1_hashing()


@pytest.fixture(scope="module")
def d2():
    return m.demo2_shared_prefix()


@pytest.fixture(scope="module")
def d3():
    return m.demo3_trace()


@pytest.fixture(scope="module")
def d4():
    return m.demo4_compute_saved()


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
    assert r["full_prefix_blocks"] == plen // m.PAGE
    assert r["mapped"] == (m.N_SHARING - 1) * r["full_prefix_blocks"]      # 后 7 个请求每个都映射全部满块
    assert r["computed"] == r["total"] - r["mapped"] * m.PAGE              # 只算自己的部分
    assert r["used_shared"] < r["used_private"]


def test_demo2_longer_prefix_saves_more(d2):
    save = {k: 1 - v["computed"] / v["total"] for k, v in d2.items()}
    assert save["5-shot"] > save["1-shot"]


# ---------------------------------------------------------------- 演示 3
def test_demo3_trace_mimics_public_tool_agent_trace(d3):
    st = d3["stats"]
    assert st["n"] == 23_608 and abs(st["minutes"] - 60) < 0.5
    assert abs(st["mean_in"] / 8_596 - 1) <= 0.05 and abs(st["mean_out"] / 182 - 1) <= 0.05
    tr, _ = m.trace_and_hits()
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


# ---------------------------------------------------------------- 演示 4
def test_demo4_cache_saves_gpu_time_in_capacity_order(d4):
    h = {c: v[0] for c, v in d4["lru"].items()}
    assert h[None] < h[10_000] < h[1_000] < d4["base_hours"]


def test_demo4_storage_for_10k_blocks_exceeds_hbm(d4):
    assert d4["need_bytes"] == 10_000 * 512 * 327_680
    assert d4["need_bytes"] > d4["hbm_bytes"] == 8 * 80e9


# ---------------------------------------------------------------- 整个脚本
def test_observations_printed_match_the_claims(capsys):
    m.demo3_trace()
    out = capsys.readouterr().out
    assert "LRU 都不低于 LFU" in out and "LRUCache performs best" in out
    m.demo2_shared_prefix()
    assert "逐位相同（最大差 0.0）" in capsys.readouterr().out


def test_main_runs_all_demos(capsys):
    assert m.main([]) == 0
    out = capsys.readouterr().out
    for k in range(1, 5):
        assert f"演示 {k}" in out


def test_bad_argument_is_one_line_and_exit_2():
    p = subprocess.run([sys.executable, f"{LECTURE}/04_prefix_caching.py", "--demo", "9"],
                       capture_output=True, text=True)
    assert p.returncode == 2 and p.stdout == ""
    assert len(p.stderr.strip().splitlines()) == 1 and "--demo" in p.stderr and "Traceback" not in p.stderr


@pytest.mark.parametrize("cwd", ["lecture07", "/"])
def test_runs_from_any_working_directory(cwd, tmp_path):
    import os
    root = os.path.dirname(LECTURE)
    where = os.path.join(root, cwd) if cwd != "/" else str(tmp_path)
    p = subprocess.run([sys.executable, os.path.join(LECTURE, "04_prefix_caching.py"), "--demo", "1"],
                       capture_output=True, text=True, cwd=where, env=dict(os.environ, NO_COLOR="1"))
    assert p.returncode == 0 and "演示 1" in p.stdout


def test_lengthaware_evicts_parents_first_among_equal_counts():
    """演示 3 的解释：次数相同时 LengthAware 先淘汰靠前的块（父块），子块留下也用不上。"""
    from kv_cache_policies import make_cache
    la, lfu = make_cache(2, "lengthaware"), make_cache(2, "lfu")
    for c in (la, lfu):
        c.insert([1, 2])
        c.insert([3])
    assert la.match([1, 2]) == 0 and la.count([1, 2]) == 1     # 父块 1 没了，子块 2 还在
    assert lfu.match([1, 2]) == 1                               # LFU 按时刻淘汰了子块 2


def test_lengthaware_sentence_matches_its_ratio(d3, capsys):
    r = d3["ratio"]
    m.demo3_trace()
    out = "".join(capsys.readouterr().out.split())
    share = r[("lengthaware", 10_000)] / r[("lfu", 10_000)]
    assert f"只有LFU的{share:.0%}" in out if share < 0.9 else "相差不大" in out
