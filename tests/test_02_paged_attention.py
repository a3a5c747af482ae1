"""02_paged_attention.py：块表的按需分配、paged_step 与连续 forward 逐位相同、块大小的取舍。"""
import os
import re
import subprocess
import sys

import pytest
from rich.cells import cell_len

from conftest import LECTURE, assert_settings_refused, load_script

m = load_script("02_paged_attention")


@pytest.fixture(scope="module")
def d1():
    return m.demo1_block_table()


@pytest.fixture(scope="module")
def d2():
    return m.demo2_equivalence()


@pytest.fixture(scope="module")
def d3():
    return m.demo3_block_size()


def test_smoke_main(capsys):
    assert m.main([]) == 0
    out = capsys.readouterr().out
    assert all(f"演示 {k}" in out for k in (1, 2, 3))
    assert "[0 1 7] 10" in out                                        # 演示 1：序列 A 最后的块表和长度
    assert "最大差 0.0：逐位相同" in out                               # 演示 2
    assert re.search(r"^ *16 +7\.4 +1\.5%", out, flags=re.M)           # 演示 3：块 16 那一行，ShareGPT 每条浪费 7.4
    assert re.search(r"^16 +64 +4 KiB +81,920$", out, flags=re.M)        # 演示 3：LLaMA2-70B 每步读 81,920 段
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
    for b in bs[1:]:
        assert abs(sg[b]["waste"] - (b - 1) / 2) / ((b - 1) / 2) < 0.1    # 约 (B − 1)/2
        assert al[b]["waste_frac"] > sg[b]["waste_frac"]                  # 短序列更怕大块
    assert al[128]["waste_frac"] > 0.4 and al[16]["waste_frac"] < 0.1
    assert sg[128]["waste_frac"] < 0.15
    r16 = d3["reads"][16]                                 # LLaMA2-70B，1024 个 token：80 层 × 8 头 × K、V × 64 块
    assert (r16["table_len"], r16["segments"], r16["segment_bytes"]) == (64, 80 * 8 * 2 * 64, 16 * 128 * 2)
    assert d3["contiguous"]["segments"] == 80 * 8 * 2 and d3["contiguous"]["segment_bytes"] == 1024 * 128 * 2
    for a, b in zip(bs, bs[1:]):
        assert d3["reads"][b]["segments"] < d3["reads"][a]["segments"]
    assert abs(d3["mean_len"]["Alpaca"] - 77.76) < 5


def test_output_is_deterministic_without_any_env_var():
    """演示 3 不再计时：不设 LAB_NO_TIMING 两次输出也逐字节相同；设了它（旧习惯）输出也一样。"""
    env = {k: v for k, v in os.environ.items() if k != "LAB_NO_TIMING"}
    env["NO_COLOR"] = "1"
    script = os.path.join(LECTURE, "02_paged_attention.py")
    runs = [subprocess.run([sys.executable, script, "--demo", "3"], capture_output=True, text=True, env=e, cwd="/")
            for e in (env, env, dict(env, LAB_NO_TIMING="1"))]
    assert all(r.returncode == 0 for r in runs)
    assert runs[0].stdout == runs[1].stdout == runs[2].stdout
    assert "µs" not in runs[0].stdout and " ms" not in runs[0].stdout and "LAB_NO_TIMING" not in runs[0].stdout


def test_paper_kernel_overhead_is_cited_exactly(d3):
    """vLLM 论文 §7.1、图 18(a)：注意力 kernel 延迟比 FasterTransformer 高 20–26%。"""
    assert m.VLLM_KERNEL_OVERHEAD == (20, 26)
    text = "".join(m.observations_3(d3))
    assert "§7.1、图 18(a)" in text and "FasterTransformer 高 20–26%" in text
    assert "gather 的开销" not in text and "计时" not in text.replace("不在 GPU 上计时", "")


def test_walkthrough_wording(d1):
    """"第 2 步解码时"，不是"解码 2 步时"。"""
    text = "".join(m.observations_1(d1))
    assert "第 2 步解码时 B" in text and "解码 2 步时" not in text


def test_layout_sentence_follows_the_tables():
    """"交错"只在块表真的交错时说；[0] [1] [2] [3] 时说没有交错，并说明原因。"""
    d = dict(used=4, tables=[[0], [1], [2], [3]], interleaved=False, decode_alloc=0)
    assert "没有交错：解码期间没有序列写满一块" in m.layout_sentence(d)
    d = dict(used=9, tables=[[0, 4], [1, 5], [2], [3]], interleaved=True, decode_alloc=2)
    assert "交错分布" in m.layout_sentence(d)
    assert m.is_contiguous([3, 4, 5]) and not m.is_contiguous([0, 1, 7])


def test_walkthrough_pool_is_sized_from_the_settings(monkeypatch, d1):
    """演示 1 的块池 = 刚好够用的块 + WALK_SPARE_BLOCKS（以前固定 12 块，改设置就 OutOfBlocks）。"""
    need = sum(-(-(p + m.WALK_DECODE) // m.WALK_BLOCK_SIZE) for p in m.WALK_PROMPTS.values())
    assert d1["n_pool"] == need + m.WALK_SPARE_BLOCKS == 12
    import contextlib
    import io
    monkeypatch.setattr(m, "WALK_BLOCK_SIZE", 2)
    monkeypatch.setattr(m, "WALK_DECODE", 10)
    with contextlib.redirect_stdout(io.StringIO()):
        d = m.demo1_block_table()
    assert d["n_free"] == m.WALK_SPARE_BLOCKS
    assert "3 条序列一共 48 个 token，占 25 块" in "".join(m.observations_1(d))


def test_settings_are_checked():
    assert_settings_refused(m, (("WALK_BLOCK_SIZE", 0), ("BLOCK_SIZES", (32, 16)), ("EQ_PROMPTS", ()), ("WALK_PROMPTS", {})), ["--demo", "1"])
