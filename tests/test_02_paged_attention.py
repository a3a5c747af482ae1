"""02_paged_attention.py：块表的按需分配、paged_step 与连续 forward 逐位相同、块大小的取舍。"""
import os
import re
import subprocess
import sys

import pytest
from rich.cells import cell_len

from conftest import LECTURE, load_script

m = load_script("02_paged_attention")


@pytest.fixture(scope="module")
def d1():
    return m.demo1_block_table()


@pytest.fixture(scope="module")
def d2():
    return m.demo2_equivalence()


@pytest.fixture(scope="module")
def d3(monkeypatch_module):
    monkeypatch_module.setattr(m, "NO_TIMING", True)     # 计时不影响任何断言
    return m.demo3_block_size()


@pytest.fixture(scope="module")
def monkeypatch_module():
    mp = pytest.MonkeyPatch()
    yield mp
    mp.undo()


def test_smoke_main(capsys):
    assert m.main([]) == 0
    out = capsys.readouterr().out
    assert all(f"演示 {k}" in out for k in (1, 2, 3))
    assert "[0 1 7] 10" in out                                        # 演示 1：序列 A 最后的块表和长度
    assert "最大差 0.0：逐位相同" in out                               # 演示 2
    assert re.search(r"^ *16 +7\.4 +1\.5%", out, flags=re.M)           # 演示 3：块 16 那一行，ShareGPT 每条浪费 7.4
    assert max(cell_len(line) for line in out.splitlines()) <= 80


def test_bad_demo_argument_exits_2():
    with pytest.raises(SystemExit) as e:
        m.main(["--demo", "0"])
    assert e.value.code == 2


def test_block_tables_grow_on_demand(d1):
    bs = m.WALK_BLOCK_SIZE
    for n, table in d1["tables"].items():
        L = d1["lengths"][n]
        assert L == m.WALK_PROMPTS[n] + m.WALK_DECODE
        assert len(table) == -(-L // bs)                  # 恰好 ceil(L / B) 块，不多分配
    assert d1["alloc_order"] == list(range(len(d1["alloc_order"])))   # FIFO 空闲表
    assert d1["interleaved"]
    assert d1["total"] == sum(d1["lengths"].values())
    assert d1["waste"] == sum(len(t) * bs for t in d1["tables"].values()) - d1["total"]
    assert all(len(t) * bs - d1["lengths"][n] < bs for n, t in d1["tables"].items())
    st, name, new = d1["first_grow"]
    assert (st, name, new) == ("解码 2", "B", [6])        # B 长度 3 → 解码 1 写满第一块 → 解码 2 要新块
    assert d1["n_decode_alloc"] == 3
    assert d1["n_free"] == 12 - sum(len(t) for t in d1["tables"].values())


def test_paged_equals_contiguous_exactly(d2):
    assert d2["worst"] == 0.0
    assert (d2["diff"] == 0.0).all()
    lens = [p + m.EQ_DECODE for p in m.EQ_PROMPTS]
    assert d2["used"] == sum(-(-L // m.EQ_BLOCK_SIZE) for L in lens)


def test_block_size_tradeoff(d3):
    sg, al = d3["stats"]["ShareGPT"], d3["stats"]["Alpaca"]
    bs = m.BLOCK_SIZES
    assert sg[1]["waste"] == 0 and al[1]["waste"] == 0
    for a, b in zip(bs, bs[1:]):                          # 块越大：浪费越多、块表越短、读的段越少
        assert sg[b]["waste_frac"] > sg[a]["waste_frac"]
        assert al[b]["waste_frac"] > al[a]["waste_frac"]
        assert sg[b]["blocks"] < sg[a]["blocks"]
        assert d3["reads"][b] < d3["reads"][a]
    for b in bs[1:]:
        assert abs(sg[b]["waste"] - (b - 1) / 2) / ((b - 1) / 2) < 0.1    # 约 (B − 1)/2
        assert al[b]["waste_frac"] > sg[b]["waste_frac"]                  # 短序列更怕大块
    assert al[128]["waste_frac"] > 0.4 and al[16]["waste_frac"] < 0.1
    assert sg[128]["waste_frac"] < 0.15
    assert d3["reads"][16] == 2 * 2 * 14                  # 2 层 × K、V × ceil(216 / 16)
    assert all(t is None for t in d3["times"].values())
    assert abs(d3["mean_len"]["Alpaca"] - 77.76) < 5


def test_no_timing_output_is_deterministic():
    env = dict(os.environ, LAB_NO_TIMING="1", NO_COLOR="1")
    script = os.path.join(LECTURE, "02_paged_attention.py")
    runs = [subprocess.run([sys.executable, script], capture_output=True, text=True, env=env, cwd="/")
            for _ in range(2)]
    assert all(r.returncode == 0 for r in runs)
    assert runs[0].stdout == runs[1].stdout
    assert "设置了 LAB_NO_TIMING" in runs[0].stdout
