"""02_paged_attention.py：块表的按需分配、paged_step 与连续 forward 逐位相同、块大小的取舍；
观察函数在手搭的数据上的退化情况；改属性 = 改源码；02 的图。"""
import contextlib
import io
import os
import re
import subprocess
import sys

import pytest
from rich.cells import cell_len

from conftest import LECTURE, assert_observation_shape, assert_settings_refused, load_plot, load_script

m = load_script("02_paged_attention")


def quiet(fn, *args):
    with contextlib.redirect_stdout(io.StringIO()):
        return fn(*args)


def run(argv):
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert m.main(argv) == 0
    return buf.getvalue()


@pytest.fixture(scope="module")
def d1():
    return quiet(m.demo1_block_table)


@pytest.fixture(scope="module")
def d2():
    return quiet(m.demo2_equivalence)


@pytest.fixture(scope="module")
def d3():
    return quiet(m.demo3_block_size)


def has(text, *parts):
    """text 里有每一段（数、名字、说明是哪种情况的短词）：措辞由 tests/golden/ 守住。"""
    return all(x in text for x in parts)


def flat(lines):
    return "".join(lines)


def test_smoke_main_and_budget():
    out = run([])
    assert all(f"演示 {k}" in out for k in (1, 2, 3))
    assert "[0 1 7] 10" in out                                        # 演示 1：序列 A 最后的块表和长度
    assert "最大差 0.0：逐位相同" in out                               # 演示 2
    assert re.search(r"^16 +7\.4 +1\.5% +8\.8% +30\.7 +5\.3 +4 KiB +81,920$", out, flags=re.M)   # 演示 3：块 16
    assert max(cell_len(line) for line in out.splitlines()) <= 80
    assert len(out.splitlines()) <= 60 and out.count("观察") == 3


def test_more_prints_everything_and_default_at_most_three(d1, d2, d3):
    raw = run(["--more"])
    more = raw.replace("\n     ", "").replace("\n  ", "")
    for fact in ("0–3", "4–7", "run_layers", "max_seq = 32", "gather_kv", "§4.1", "足够大能用满 GPU", "(B − 1)/2",
                 "种子 0", "均值取 LENGTH_MEANS", "总长截在 2,048"):
        assert fact in more, fact
    # 句子搬进 --more 的表：分配顺序（第几个分配）、平均长度（这里 / 论文）、读法用的模型配置
    assert re.search(r"^A +2 +7 +8–9 +2/4 +8$", raw, flags=re.M) and re.search(r"^C +3 +8 +12 +1/4 +9$", raw, flags=re.M)
    assert re.search(r"^ShareGPT +161\.31 / 337\.99 +161\.31 / 337\.99 +484$", raw, flags=re.M)   # 设的均值、论文的均值
    assert re.search(r"^Alpaca +19\.31 / 58\.45 +19\.31 / 58\.45 +78$", raw, flags=re.M)
    assert re.search(r"^LLaMA2-70B +80 +8 +128 +2 B +1,024$", raw, flags=re.M)
    assert re.search(r"^128 +63\.1 +11\.5% +49\.3% ", raw, flags=re.M)      # Alpaca 在大块时的浪费：表里的数（不再重复成句子）
    assert len(raw.splitlines()) > len(run([]).splitlines())
    for obs, d in ((m.observations_1, d1), (m.observations_2, d2), (m.observations_3, d3)):
        assert_observation_shape(*obs(d))


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
    lines, more = m.observations_3(d3)
    assert "FasterTransformer 慢 20–26%" in m.VLLM_7_NOTE and "§7.1、图 18(a)" in m.VLLM_71_NOTE   # 静态的论文数字：表的脚注
    assert "FasterTransformer 慢 20–26%" in run(["--demo", "3"]).replace("\n  ", "")
    assert "§7.1、图 18(a)" in run(["--demo", "3", "--more"]).replace("\n  ", "")
    assert "gather 的开销" not in flat(lines + more) and "计时" not in flat(lines + more).replace("不计时", "")


def test_walkthrough_wording(d1):
    """"第 2 步解码时"，不是"解码 2 步时"。"""
    text = flat(m.observations_1(d1)[0])
    assert "第 2 步解码时 B" in text and "解码 2 步时" not in text


def test_layout_sentence_follows_the_tables():
    """"不相邻"只在块表真的不连续时说；[0] [1] [2] [3] 时说连成一段，不说"恰好"（一条序列时并非巧合）。"""
    text = m.layout_sentence({"a": [0], "b": [1], "c": [2], "d": [3]})
    assert has(text, "连成一段", "[0] [1] [2] [3]") and "并不相邻" not in text and "恰好" not in text
    assert "（B 的块表 [1 5]）" in m.layout_sentence({"A": [0], "B": [1, 5]})
    assert "恰好" not in m.layout_sentence({"A": [0, 1, 2, 3]})
    assert m.is_contiguous([3, 4, 5]) and not m.is_contiguous([0, 1, 7])


def test_walkthrough_pool_is_sized_from_the_settings(monkeypatch, d1):
    """演示 1 的块池 = 刚好够用的块 + WALK_SPARE_BLOCKS（以前固定 12 块，改设置就 OutOfBlocks）。"""
    need = sum(-(-(p + m.WALK_DECODE) // m.WALK_BLOCK_SIZE) for p in m.WALK_PROMPTS.values())
    assert d1["n_pool"] == need + m.WALK_SPARE_BLOCKS == 12
    monkeypatch.setattr(m, "WALK_BLOCK_SIZE", 2)
    monkeypatch.setattr(m, "WALK_DECODE", 10)
    d = quiet(m.demo1_block_table)
    assert d["n_free"] == m.WALK_SPARE_BLOCKS
    assert has(flat(m.observations_1(d)[1]), "3 条序列", "48 个 token", "25 块")


def test_settings_are_checked():
    assert_settings_refused(m, (("WALK_BLOCK_SIZE", 0), ("BLOCK_SIZES", (32, 16)), ("EQ_PROMPTS", ()), ("WALK_PROMPTS", {})), ["--demo", "1"])


def walk_data(prompts, n_decode, block_size):
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(m, "WALK_PROMPTS", prompts)
        mp.setattr(m, "WALK_DECODE", n_decode)
        mp.setattr(m, "WALK_BLOCK_SIZE", block_size)
        return quiet(m.demo1_block_table)


def test_observations_1_degenerate_cases():
    # 一条序列、不解码、块 1：块连成一段，没有分配，没有浪费
    lines, more = m.observations_1(walk_data({"A": 5}, 0, 1))
    assert_observation_shape(lines, more)
    assert has(lines[0], "连成一段") and has(lines[1], "没有解码", "WALK_DECODE = 0")
    assert has(more[0], "1 条序列", "5 个 token", "5 块", "没写满的 0 个")
    assert "只分配" not in lines[1]                        # 块 1 时每个 token 一块："只"不对
    # 每条都正好写满；两条序列、不解码：块是 prefill 时一次拿到的
    lines, more = m.observations_1(walk_data({"A": 4, "B": 8}, 0, 4))
    assert has(more[0], "没写满的 0 个") and has(lines[1], "prefill", "输入长度")
    # 解码了但没写满一块
    lines, _ = m.observations_1(walk_data({"A": 1}, 2, 8))
    assert "没有块" not in lines[1] and has(lines[1], "已有的块", "没有分配") and "[0]" in lines[0]
    # 解码正好把最后一块写满、但没有写到下一块：不说"没有写满"
    lines, _ = m.observations_1(walk_data({"A": 3, "B": 3}, 1, 4))
    assert "写满" not in lines[1] and "没有分配" in lines[1]
    # 只有一条序列、解码时又分配了块：相邻不是"巧合"
    lines, more = m.observations_1(walk_data({"X": 1}, 4, 4))
    assert "[0 1]" in lines[0] and "巧合" not in lines[0] and "恰好" not in lines[0]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(m, "WALK_PROMPTS", {"X": 1})
        out = run(["--demo", "1", "--more"])
    assert re.search(r"^X +1 +1 +4 +1/4", out, flags=re.M) and "4–4" not in out     # 只有一个位置：不印 "4–4"


def test_observations_2_degenerate_cases(d2):
    lines, more = m.observations_2(dict(d2, worst=3e-9, n_seqs=1, interleaved=False, decode_alloc=0, tables=[[0]],
                                        used=1))
    assert_observation_shape(lines, more)
    assert "1 条序列" in lines[0] and "不是 0" in lines[0] and "逐位相同" not in lines[0] and "连成一段" in lines[1]
    lines, _ = m.observations_2(dict(d2, n_steps=1, tables=[[0], [1, 2]]))
    assert has(lines[1], "连成一段", "[0] [1 2]")


def test_observations_3_degenerate_cases(monkeypatch):
    # 一个块大小、又不是 16；序列不比块长：分页和连续读的段一样多
    monkeypatch.setattr(m, "BLOCK_SIZES", (2048,))
    monkeypatch.setattr(m, "READ_LEN", 100)
    monkeypatch.setattr(m, "N_LENGTHS", 200)
    d = quiet(m.demo3_block_size)
    lines, more = m.observations_3(d)
    assert_observation_shape(lines, more)
    assert lines[0].startswith("块 2048 时") and "；块 2048" not in lines[0]
    assert has(lines[1], "块 2048", "也是 1,280 段")
    assert not more and d["stats"]["Alpaca"][2048]["waste_frac"] > 0.5       # Alpaca 浪费过半：表里的格子说
    assert re.search(r"^2048 +[\d,.]+ +[\d.]+% +9\d\.\d%", run(["--demo", "3"]), flags=re.M)
    assert d["reads"][2048]["segment_bytes"] == 100 * 128 * 2          # 序列比块短：一段只有 100 个 token


# ---------------------------------------------------------------- 02 的图：块表
def test_plot_02_comes_from_the_demo_dict(tmp_path, monkeypatch, d1):
    p = load_plot("plot_02")
    marker = dict(d1, tables={"Q": [5, 2]}, lengths={"Q": 7}, prompts={"Q": 3})
    monkeypatch.setattr(m, "demo1_block_table", lambda: marker)
    got = p.compute()
    assert got["tables"] == {"Q": [5, 2]} and "Q 3" in got["config"]
    assert has(p.finding(d1["tables"]), "A ", "0、1、2", "0、1、7")              # 图的标题：A 的块表 [0 1 7]
    assert "0、1、7" not in p.finding({"A": [0, 1], "B": [2]}) and "相邻" in p.finding({"A": [0, 1], "B": [2]})
    path = p.plot_block_table(d1["tables"], d1["lengths"], d1["block_size"], d1["n_pool"], d1["events"],
                              str(tmp_path / "a.png"), "配置")
    assert os.path.getsize(path) > 10_000


def test_plot_02_arrows_leave_their_logical_block_and_cross_no_box(tmp_path, monkeypatch, d1):
    """每支箭头从它的逻辑块的下沿出发、落在物理块的上沿；两排之间没有格子，所以箭头不穿过任何格子。"""
    from matplotlib.patches import FancyArrowPatch, Rectangle
    p = load_plot("plot_02")
    seen = {}
    real_save = p.save_png

    def grab(fig, out):
        ax = fig.axes[0]
        seen["arrows"] = [a for a in ax.patches if isinstance(a, FancyArrowPatch)]
        seen["boxes"] = [r for r in ax.patches if isinstance(r, Rectangle)]
        return real_save(fig, out)

    monkeypatch.setattr(p, "save_png", grab)
    big = quiet(lambda: walk_data({"A": 6, "B": 3, "C": 9, "D": 5, "E": 1, "F": 12}, 10, 2))
    for d in (d1, big):
        p.plot_block_table(d["tables"], d["lengths"], d["block_size"], d["n_pool"], d["events"],
                           str(tmp_path / "b.png"), "配置")
        assert len(seen["arrows"]) == sum(len(t) for t in d["tables"].values())
        for a in seen["arrows"]:
            (x0, y0), (x1, y1) = a._posA_posB
            assert y0 == p.TOP and y1 == p.POOL + p.ROW_H
        for r in seen["boxes"]:                                 # 每个格子都在上排或下排，不在箭头走的空白里
            y, h = r.get_y(), r.get_height()
            assert y >= p.TOP or y + h <= p.POOL + p.ROW_H


def test_observations_3_waste_approximation_is_qualified(monkeypatch):
    """块比序列长时最后一块空着的远多于 (B − 1)/2：句子只在"块比序列短得多时"说这个近似。"""
    monkeypatch.setattr(m, "BLOCK_SIZES", (4096,))
    monkeypatch.setattr(m, "N_LENGTHS", 200)
    d = quiet(m.demo3_block_size)
    assert d["stats"]["ShareGPT"][4096]["waste"] > 4095 / 2
    more = run(["--demo", "3", "--more"]).replace("\n  ", "")          # 这个近似现在是 --more 表下的一句脚注
    assert has(more, "短得多时约 (B − 1)/2") and "平均空着约" not in more


def test_observations_3_equal_printed_waste_is_a_tie(d3):
    """块 128 时两种长度的浪费印出来相同（11.5% 对 11.46%）：说"一样"，不说谁更高。"""
    stats = {k: {b: dict(v) for b, v in s.items()} for k, s in d3["stats"].items()}
    stats["Alpaca"][128]["waste_frac"] = 0.1146
    line = m.observations_3(dict(d3, stats=stats))[0][0]
    assert has(line, "128 时都是 11.5%", "一样") and "更高" not in line


def test_observations_3_shorter_is_read_from_the_lengths_not_the_name(d3):
    """把两种长度对调（ShareGPT 更短）：句子说更短的是 ShareGPT，不照默认说 Alpaca。"""
    stats = {"ShareGPT": d3["stats"]["Alpaca"], "Alpaca": d3["stats"]["ShareGPT"]}
    mean_len = {"ShareGPT": d3["mean_len"]["Alpaca"], "Alpaca": d3["mean_len"]["ShareGPT"]}
    line = m.observations_3(dict(d3, stats=stats, mean_len=mean_len))[0][0]
    assert has(line, "128 时 49.3% 和 11.5%", "更短的 ShareGPT", "更高"), line


@pytest.mark.parametrize("means", [{"X": (100.0, 100.0)}, {"ShareGPT": (100_000.0, 100_000.0), "Alpaca": (1.0, 1.0)}])
def test_length_means_with_other_names_is_refused_in_one_line(monkeypatch, capsys, means):
    """别的名字，或均值大过 2,048（总长截在 2,048，设的均值就不是表里的均值了）：一行拒绝。"""
    monkeypatch.setattr(m, "LENGTH_MEANS", means)
    with pytest.raises(SystemExit) as e:
        m.main(["--demo", "3"])
    err = capsys.readouterr().err
    assert e.value.code == 2
    assert "LENGTH_MEANS" in err and err.count("\n") == 1 and "Traceback" not in err


def test_demo2_caption_names_both_seeds(monkeypatch):
    """演示 2 的表注说出两个种子（模型、提示）：改了 PROMPT_SEED，表注跟着变。"""
    monkeypatch.setattr(m, "PROMPT_SEED", 9)
    out = "".join(run(["--demo", "2"]).split())
    assert f"（模型种子{m.MODEL_SEED}、提示种子9）" in out
