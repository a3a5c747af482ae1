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
from helpers_04 import m, synthetic_data


def flat(s):
    """去掉全部空白：观察会按 80 列折行，比较时不管在哪里折的。"""
    return re.sub(r"\s+", "", s)


@pytest.fixture(scope="module")
def d1():
    return m.demo1_hashing()


@pytest.fixture(scope="module")
def d2():
    return m.demo2_shared_prefix()


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
def test_no_conditional_expressions():
    """观察用普通的 if/else 拼句子：04 里一个条件表达式（a if c else b）都没有。"""
    tree = ast.parse(pathlib.Path(LECTURE, "04_prefix_caching.py").read_text(encoding="utf-8"))
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
    assert d4["need_bytes"] > d4["hbm_bytes"] == 8 * 80e9


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


def test_lengthaware_evicts_parents_first_among_equal_counts():
    """演示 3 的解释：次数相同时 LengthAware 先淘汰靠前的块（父块），子块留下也用不上。"""
    from kv_cache_policies import make_cache
    la, lfu = make_cache(2, "lengthaware"), make_cache(2, "lfu")
    for c in (la, lfu):
        c.insert([1, 2])
        c.insert([3])
    assert la.match([1, 2]) == 0 and la.count([1, 2]) == 1     # 父块 1 没了，子块 2 还在
    assert lfu.match([1, 2]) == 1                               # LFU 按时刻淘汰了子块 2


def test_lengthaware_sentence_matches_its_ratio(d3, data, capsys):
    r = d3["ratio"]
    m.demo3_trace(data)
    out = flat(capsys.readouterr().out)
    share = r[("lengthaware", 10_000)] / r[("lfu", 10_000)]
    if share < 0.9:
        assert f"只有LFU的{share:.0%}" in out
    else:
        assert "相差不大" in out
