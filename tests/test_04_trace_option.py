"""04_prefix_caching.py 的 --trace / --block 和 MIN 那一行：每条打印出来的结论都由算出的数决定。"""
import json
import re

import numpy as np
import pytest
from conftest import REAL_TRACE as REAL
from helpers_04 import m, trace_data

pytestmark = pytest.mark.xdist_group("s04")   # 04 的三个测试文件在同一个 pytest 进程里：命中表只算一遍
need_real = pytest.mark.real_trace       # 文件不在时跳过，理由里写明它该放在哪里（conftest）


def flat(s):
    """去掉全部空白：观察会按 80 列折行，比较时不管在哪里折的。"""
    return re.sub(r"\s+", "", s)


def write_fixture(path, block=512, n=80, seed=3):
    """小的链式 trace：每个请求 = 之前某个请求的前缀 + 新块；时间戳单调不减。"""
    rng = np.random.default_rng(seed)
    reqs, nxt, lines = [], 0, []
    for i in range(n):
        base = reqs[int(rng.integers(len(reqs)))] if reqs and rng.random() < 0.7 else []
        base = base[:int(rng.integers(len(base) + 1))]
        new = int(rng.integers(1, 5))
        ids = base + list(range(nxt, nxt + new))
        nxt += new
        reqs.append(ids)
        n_in = (len(ids) - 1) * block + int(rng.integers(1, block + 1))
        lines.append(json.dumps({"timestamp": 250 * i, "input_length": n_in, "output_length": int(rng.integers(0, 50)),
                                 "hash_ids": ids}))
    path.write_text("\n".join(lines) + "\n")
    return str(path), reqs


def check_min_row(d):
    r, g = d["ratio"], d["gap"]
    assert d["bound_ok"]
    for c in m.CAPACITIES:
        for p in m.POLICIES:
            assert r[("min", c)] >= r[(p, c)] - 1e-12
            assert g[(p, c)] == pytest.approx(r[("min", c)] - r[(p, c)], abs=1e-15)
    assert r[("min", None)] >= r[("lru", None)] == r[("lfu", None)]     # 不淘汰时在线策略都一样；MIN 数逐块命中


# ---------------------------------------------------------------- 合成 trace（默认）
def demo3(path=None, block_size=512):
    """跑演示 3；trace 和命中表用测试共享的那一份（每个 trace 只算一遍）。"""
    return m.demo4_policies(trace_data(path, block_size))


@pytest.fixture(scope="module")
def syn():
    return demo3()


def test_synthetic_table_has_min_at_every_capacity(syn, capsys):
    check_min_row(syn)
    demo3()
    out = capsys.readouterr().out
    row = next(x for x in out.splitlines() if x.startswith("MIN "))
    assert row.split()[1:] == [f"{syn['ratio'][('min', c)]:.2f}" for c in m.CAPACITIES]
    assert any("MIN在每个要淘汰的容量都不低于在线策略" in flat(x) for x in m.observations_4(syn, m.POLICIES)[1])


# ---------------------------------------------------------------- 小的夹具 trace
def test_fixture_trace_stats_and_output(tmp_path, capsys):
    path, reqs = write_fixture(tmp_path / "small.jsonl")
    assert m.main(["--trace", path, "--demo", "3", "--more"]) == 0
    out = flat(capsys.readouterr().out)
    d = demo3(path)
    capsys.readouterr()
    st = d["stats"]
    ids = [b for r in reqs for b in r]
    assert st["n"] == 80 and st["distinct"] == len(set(ids)) and st["total_blocks"] == len(ids)
    assert st["minutes"] == pytest.approx(79 * 0.25 / 60)
    assert d["synthetic_stats"]["n"] == 23_608                     # 合成 trace 的统计量并排打印
    check_min_row(d)
    assert "你给的trace（small.jsonl）" in out and "本实验（合成）" in out and "FAST'25Synthetic" in out
    assert "真实trace" not in out and "内容都不一样" in out
    hot = "热门块值得复制" if st["hottest"] >= m.HOT_ACCESSES else "没有特别热的块"
    assert hot in out


def test_block_option_reaches_demo4(tmp_path, capsys):
    path, _ = write_fixture(tmp_path / "b16.jsonl", block=16, n=30)
    assert m.main(["--trace", path, "--block", "16", "--demo", "5", "--more"]) == 0
    assert "一块16token=5MiB" in flat(capsys.readouterr().out)
    d4 = m.demo5_compute_saved(trace_data(path, 16))
    assert d4["need_bytes"] == 10_000 * 16 * 327_680


def test_bad_trace_exits_2_before_printing(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [1]}\nnot json\n')
    with pytest.raises(SystemExit) as e:
        m.main(["--trace", str(bad)])
    cap = capsys.readouterr()
    assert e.value.code == 2 and cap.out == ""
    assert cap.err.strip().startswith(f"{bad}:2: ") and len(cap.err.splitlines()) == 1


# ---------------------------------------------------------------- 真实 trace
@pytest.fixture(scope="module")
def real():
    return demo3(REAL)


@need_real
def test_real_trace_statistics(real):
    st = real["stats"]
    assert st["n"] == 3_993 and st["mean_in"] == pytest.approx(15_325, abs=1)
    assert st["mean_out"] == pytest.approx(149, abs=0.5)
    assert st["minutes"] == pytest.approx(1022.025 / 60)
    assert st["distinct"] == 43_924 and st["total_blocks"] == 121_877
    assert st["reuse"] == pytest.approx(1 - 43_924 / 121_877) == real["ratio"][("min", None)]
    assert f"{real['ratio'][('lru', None)]:.2f}" == "0.64" < f"{st['reuse']:.3f}"   # 前缀命中（去掉最后一个 token）


@need_real
def test_real_trace_min_bounds_online_policies(real):
    check_min_row(real)


@need_real
def test_real_trace_observations_follow_the_numbers(real, capsys, monkeypatch):
    monkeypatch.setattr(m.console, "SHOW_MORE", True)
    m.demo3_block_heat(trace_data(REAL))
    demo3(REAL)
    out = flat(capsys.readouterr().out)
    r, st = real["ratio"], real["stats"]
    evict = [c for c in m.CAPACITIES if c is not None and c < st["distinct"]]
    diff = {round(r[("lru", c)] - r[("lfu", c)], 9) for c in evict if f"{r[('lru', c)]:.2f}" != f"{r[('lfu', c)]:.2f}"}
    if diff and min(diff) > 0:
        assert "LRU在每个要淘汰的容量都不低于LFU" in out
    else:
        assert "LRU在每个要淘汰的容量都不低于LFU" not in out
    assert ("没有特别热的块" in out) == (real["stats"]["hottest"] < m.HOT_ACCESSES)
    # FAST'25 表 2 的同一个 trace：按它是什么来称呼（公开数据集拼成的合成负载），不叫"真实 trace"
    assert "你给的文件就是FAST'25Synthetic的文件（按内容认出" in out
    assert re.search(r"FAST'25Synthetic3,993-15,325149-0\.66", out)              # 论文表 2 的 cache ratio 在表里
    assert "泊松" in out and "§5.2.1" in out and "真实trace" not in out
    assert "你给的trace3,993" in out and "这是合成负载" not in out


@need_real
def test_real_trace_demo4(capsys, monkeypatch):
    monkeypatch.setattr(m.console, "SHOW_MORE", True)
    d4 = m.demo5_compute_saved(trace_data(REAL))
    h = {c: d4["hours"][("lru", c)] for c in m.SAVED_CAPS}
    assert h[None] <= h[10_000] <= h[1_000] < d4["base_hours"]
    out = flat(capsys.readouterr().out)
    assert "你给的trace里3,993个请求" in out and "真实trace" not in out
    concentrated = d4["hit_frac"][("lru", 1_000)] >= d4["hit_frac"][("lru", None)] / 2
    assert ("热门的前缀很集中" in out) == concentrated and ("小缓存留不住" in out) == (not concentrated)


# ---------------------------------------------------------------- 很小、没有复用的 trace
@need_real
@pytest.mark.parametrize("n_lines", [1, 2, 5, 20])
def test_tiny_trace_without_reuse_says_so(tmp_path, capsys, n_lines):
    """课程 trace 的前 1、2、5、20 行：没有一次前缀命中。照实说"没有复用"，rc 0，没有 nan / inf / 警告。"""
    with open(REAL, encoding="utf-8") as f:
        head = [next(f) for _ in range(n_lines)]
    path = tmp_path / f"head{n_lines}.jsonl"
    path.write_text("".join(head), encoding="utf-8")
    assert m.main(["--trace", str(path), "--demo", "4"]) == 0      # conftest：警告即错误
    out3 = capsys.readouterr().out
    assert m.main(["--trace", str(path), "--demo", "5"]) == 0
    out4 = capsys.readouterr().out
    for out in (out3, out4):
        assert not re.search(r"\bnan\b|\binf\b", out, flags=re.I) and "Traceback" not in out
    out3, out4 = flat(out3), flat(out4)
    assert "前缀命中率0：" in out3 and "每种在线策略、每个容量都是0" in out3
    assert "LRU都不低于LFU" not in out3 and "热门块值得复制" not in out3
    assert "命中的输入token也是0%" in out4 and "前缀缓存省不下计算" in out4
    assert "GPU时间（秒）" in out4                                      # 一个请求只有几秒：不写成 0.00 小时


@need_real
def test_small_trace_ties_are_called_ties(tmp_path, capsys):
    """前 200 行：有一点复用，但各策略在两位小数上打平——不说谁高，用 "=" 排序。"""
    with open(REAL, encoding="utf-8") as f:
        head = [next(f) for _ in range(200)]
    path = tmp_path / "head200.jsonl"
    path.write_text("".join(head), encoding="utf-8")
    d = m.demo4_policies(m.trace_sweep(m.read_trace(str(path)), str(path)))
    out = flat(capsys.readouterr().out)
    r = d["ratio"]
    assert r[("lru", None)] > 0
    evict = [c for c in m.CAPACITIES if c is not None and c < d["stats"]["distinct"]]
    if all(f"{r[('lru', c)]:.2f}" == f"{r[('lfu', c)]:.2f}" for c in evict):
        tie = "LRU和LFU在每个要淘汰的容量都一样"
        if len(evict) == 1:                               # 只有一个容量要淘汰：直接说是哪个
            tie = f"{evict[0]:,}块时LRU和LFU一样"
        assert tie in out and "LFU比LRU高" not in out
    assert "LRU>LFU>LengthAwareCache（0.06、0.06、0.06）" not in out
