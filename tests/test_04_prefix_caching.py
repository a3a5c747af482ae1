"""04_prefix_caching.py：每个演示打印的每条结论都在这里检查；观察函数用手写的数据测退化的情形。"""
import ast
import json
import os
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest
from artefacts import find_artefacts
from conftest import LECTURE, ROOT, load_plot, run_main
from helpers_04 import demo2_results, m, synthetic_data

from lab_common import console
from lab_common.console import observation_lines

pytestmark = pytest.mark.xdist_group("s04")   # 04 的测试文件在同一个 pytest 进程里：命中表只算一遍


def flat(s):
    """去掉全部空白：观察会按 80 列折行，比较时不管在哪里折的。"""
    return re.sub(r"\s+", "", s)


def text(lines_more):
    """(lines, more) → 一个去掉空白的字符串。"""
    lines, more = lines_more
    return flat("".join(lines) + "|" + "".join(more))


def observations(out):
    """输出里每个"观察"块的条目：[[第 1 条的各行, ...], ...]（一块一个演示）。"""
    blocks, cur = [], None
    for line in out.splitlines():
        if line == "观察":
            cur = []
            blocks.append(cur)
        elif cur is not None and re.match(r"  \d+\. ", line):
            cur.append([line])
        elif cur is not None and line.startswith("     ") and cur:
            cur[-1].append(line)
        else:
            cur = None
    return blocks


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
    return m.demo4_policies(data)


@pytest.fixture(scope="module")
def d4(data):
    return m.demo5_compute_saved(data)


@pytest.fixture(scope="module")
def default_out():
    """main([]) 的默认输出（conftest.run_main：整个会话只跑一遍，命中表和这里的 data 是同一份）。"""
    return run_main("04_prefix_caching")[0]


@pytest.fixture(scope="module")
def more_out():
    """main(["--demo", "5", "--more"]) 的输出（命中表用测试共享的那一份）。"""
    return run_main("04_prefix_caching", ["--demo", "5", "--more"])[0]


# ---------------------------------------------------------------- 代码本身
@pytest.mark.parametrize("name", ["04_prefix_caching.py", "04b_radix_cache.py", "kv_store/radix_tree.py"])
def test_no_conditional_expressions(name):
    """观察用普通的 if/else 拼句子：一个条件表达式（a if c else b）都没有。"""
    tree = ast.parse(pathlib.Path(LECTURE, name).read_text(encoding="utf-8"))
    assert [n.lineno for n in ast.walk(tree) if isinstance(n, ast.IfExp)] == []


# ---------------------------------------------------------------- 默认输出：预算
def test_default_output_budget(default_out):
    """默认输出：每个演示至多 28 行、至多 2 条观察（演示 2 属于基数树那一边，另算），每条至多 3 行；没有句子的假象。"""
    blocks = observations(default_out)
    assert len(blocks) == 5 and all(1 <= len(b) <= 2 for i, b in enumerate(blocks) if i != 1)
    demos = default_out.split("═" * 80)[1:]
    assert all(len(x.strip("\n").splitlines()) <= 28 for i, x in enumerate(demos) if i != 1)
    assert all(len(item) <= 3 for b in blocks for item in b)
    assert find_artefacts(default_out) == []


@pytest.mark.parametrize("demos,cells", [((3,), {("lru", None)}), ((5,), {("lru", None), ("lru", 10_000), ("lru", 1_000)}),
                                         ((3, 5), {("lru", None), ("lru", 10_000), ("lru", 1_000)})])
def test_trace_sweep_computes_only_what_the_demos_print(monkeypatch, demos, cells):
    """--demo 3 只要无限容量的一格（约 1 秒，不是整张表的几秒），--demo 5 只要 SAVED_CAPS 的几格。"""
    asked = []
    real = m.sweep
    def spy(trace, capacities, policies, extra=(), workers=None):
        asked.append({(p, c) for p in policies for c in capacities} | set(extra))
        return real(trace, capacities, policies, extra, workers)
    monkeypatch.setattr(m, "sweep", spy)
    got = m.trace_sweep(m.read_trace(), demos=demos)
    assert asked == [cells] and set(got["hits"]) == cells and got["capacities"] == ()


def test_demo3_alone_prints_what_it_prints_in_the_whole_run(default_out, capsys):
    assert m.main(["--demo", "3"]) == 0
    alone = capsys.readouterr().out
    whole = default_out.split("═" * 80)
    same = [x.rstrip("\n") for x in whole if x.startswith("\n演示 3")]                # 演示之间的空行不算
    assert "演示 3" in alone and [x.rstrip("\n") for x in alone.split("═" * 80)[1:]] == same


def test_more_prints_the_dropped_facts(data, monkeypatch, capsys):
    """--more：演示 2 的零头表和 vLLM 图 16 对照、演示 3 的 MIN 差距表、块复用率和 LengthAware 的原话、
    演示 4 的"不溢出"一列都在（默认输出里说的数，--more 里至少在表里）。"""
    monkeypatch.setattr(m, "trace_sweep", lambda *a, **k: data)
    assert m.main(["--more"]) == 0
    out = capsys.readouterr().out
    f = flat(out)
    assert "MIN减去\\容量" in f and flat(m.LENGTHAWARE_DEFINITION) in f and "父块没了" in f and flat(m.HIT_RULE) in f
    assert "共享1-shot、5-shot前缀时vLLM的吞吐是Orca(Oracle)的1.67、3.58倍" in f
    assert re.search(r"^5-shot +21 +5 +95% +147$", out, flags=re.M)                       # 满块、零头、前缀占输入、映射次数
    assert re.search(r"^块复用率 +0\.61 +-", out, flags=re.M) and "块复用率=1−不同的块/块访问" in f
    assert "无限容量的前缀命中率和块复用率一样（都是0.61）" in f
    assert re.search(r"^LRU，容量 10,000 +1\.53 TiB +48% +3\.25 +1\.77× +3\.25$", out, flags=re.M)    # 不溢出：一样
    assert flat(m.LOCAL_NOTE.format(m.TIERS[m.TIER_FOR_HITS].name)) in f and "dummyLLaMA2-70B（§1.2）和LLaMA3-70B的层数、d、KV头数都相同" in f
    assert find_artefacts(out) == []


# ---------------------------------------------------------------- 演示 1
def test_demo1_hashes(d1):
    h = d1["hashes"]
    assert d1["a_b_common"] == 3 and h["A"][:3] == h["B"][:3] and h["A"][3] != h["B"][3]
    assert d1["c_first_changed_block"] == 1 == d1["a_c_common"] and d1["c_blocks"] == 4
    assert all(a != c for a, c in zip(h["A"][1:], h["C"][1:]))
    assert len(h["A"]) == 17 // 4 == 4 and d1["a_tail"] == 1
    assert all(re.fullmatch(r"[0-9a-f]{12}", x) for x in h["A"])


def test_demo1_observations(d1):
    t = text(m.observations_1(d1))
    assert "第2–4块的哈希全变了" in t and "vLLM也只缓存完整的块" in t and "6,955个token→14个ID" in t
    one = dict(d1, c_first_changed_block=3, c_changed=[4], a_tail=0)         # 改的是最后一块；没有零头
    t = text(m.observations_1(one))
    assert "第4块的哈希全变了" in t and "4–4" not in t and "不满一块" not in t
    unchained = dict(d1, c_changed=[2])        # 哈希没链上前一块（--mine 跑一个这样写的 block_hashes）：表里第 3、4 块相同
    t = text(m.observations_1(unchained))
    assert "第3和4块的哈希和A相同" in t and "全变了" not in t


# ---------------------------------------------------------------- 演示 2
@pytest.mark.parametrize("name,plen", m.FEW_SHOT)
def test_demo2_prefix_blocks_are_mapped_not_recomputed(d2, name, plen):
    r = d2[name]
    assert r["worst"] <= 1e-12 and r["full_prefix_blocks"] == plen // m.BLOCK_SIZE
    assert r["mapped"] == (m.N_SHARING - 1) * r["full_prefix_blocks"]
    assert r["computed"] == r["total"] - r["mapped"] * m.BLOCK_SIZE
    assert r["used_shared"] < r["used_private"]


def mk2(prefix_len, n=8, bs=16, saved=0.8, mapped=None, shared=10, private=50, worst=0.0, share=0.9):
    full = prefix_len // bs
    if mapped is None:
        mapped = (n - 1) * full
    return dict(prefix_len=prefix_len, saved=saved, mapped=mapped, used_shared=shared, used_private=private,
                worst=worst, prefix_share=share, full_prefix_blocks=full, prefix_tail=prefix_len % bs, repeats=0)


def test_demo2_observations_default(d2):
    lines, more = m.observations_2(d2, 8, 16)
    t = text((lines, more))
    assert len(lines) == 2 and "省下的比例" in lines[1] and "显存也省了" in more[0] and "5-shot省下82%的计算" in t and "逐位相同（最大差0.0）" in t and "21个满块" in t
    assert "前缀占输入的比例（5-shot95%），再减去每个请求都要重算的零头（5个token）" in t and "共享只要36块（20%）" in t


def test_demo2_observations_one_request():
    res = {"p": mk2(80, n=1, saved=0.0, mapped=0, shared=6, private=6)}
    t = text(m.observations_2(res, 1, 16))
    assert "只有1个请求：没有后来的请求来用缓存里的块" in t and "每个前缀都省下0%" in t and "显存也没有省" in t
    assert "省下的比例≈" not in t and "后面0个请求" not in t and "不满一块" not in t


def test_demo2_observations_prefix_shorter_than_a_block():
    """7 个别的请求在场，但前缀没有满块：不说"没有别的请求来共享"。"""
    res = {"p": mk2(10, saved=0.0, mapped=0, shared=8, private=8, worst=3e-15)}
    t = text(m.observations_2(res, 8, 16))
    assert "前缀不满一块（块大小16），后面7个请求什么也复用不了" in t and "一致到3.0e-15" in t
    assert "只有1个请求" not in t and "显存也没有省" in t and "没有别的请求" not in t


def test_demo2_observations_equal_prefixes_and_savings():
    """两个前缀一样长：说先出现的那个，不说谁省得多；长短不同时说最长的那个（省下的数在表里）。"""
    res = {"a": mk2(80, saved=0.711), "b": mk2(80, saved=0.709)}
    t = text(m.observations_2(res, 8, 16))
    assert "a省下71%的计算" in t and "省得多" not in t and "省得少" not in t
    res = {"a": mk2(80, saved=0.711), "b": mk2(96, saved=0.709)}
    assert "b省下71%的计算" in text(m.observations_2(res, 8, 16))


def test_demo2_repeated_aligned_prompt_recomputes_its_last_block():
    """一个请求和前面的一模一样、正好 5 整块（前缀 79 + 后缀 1 个 token，两个后缀相同）：5 块都在缓存里，只映射 4 块，
    最后一块（16 个 token）重算，logits 照样和从头算逐位相同。手算：80 + 80 + 80 个 token，第 2、3 个各映射 4 块。"""
    cfg = m.config_like(m.TINY, max_seq=96)
    params = m.init_params(cfg, seed=0)
    prefix = np.arange(79) % cfg.vocab
    sufs = [np.array([3]), np.array([3]), np.array([5])]
    r = m.run_shared_prefix(params, cfg, prefix, sufs, 16)
    assert (r["repeats"], r["mapped"], r["computed"], r["worst"]) == (1, 8, 80 + 16 + 16, 0.0)
    lines, more = m.observations_2({"x": dict(r, n=3)}, 3, 16)
    assert "有1个请求和前面某个请求一模一样、正好是整块：整段都在缓存里，最后一块照样重算（16个token）" in text((lines, []))
    assert len(lines) == 2 and any("显存也省了" in x for x in more) and m.POOL_NOTES in more


def test_demo2_runs_with_exact_repeats(monkeypatch, capsys):
    """FEW_SHOT = (("x", 79),)、SUFFIX_LEN = (1, 2)：每个请求 80 个 token，后缀只有 1 个随机 token，常有完全相同的请求。"""
    monkeypatch.setattr(m, "FEW_SHOT", (("x", 79),))
    monkeypatch.setattr(m, "SUFFIX_LEN", (1, 2))
    res = m.demo2_shared_prefix()
    r = res["x"]
    assert r["repeats"] >= 1 and r["worst"] == 0.0 and r["computed"] >= r["n"] * 16
    assert "最后一块照样重算" in flat(capsys.readouterr().out)


def test_demo2_pool_notes_name_the_three_rules():
    t = flat(m.POOL_NOTES)
    assert "vLLMv1把命中截在n−1个token" in t and "nano-vllm只查第0到倒数第2块" in t
    assert "请求结束时块回到空闲表、哈希还在" in t and "同一批prefill的请求互相用不上" in t


def test_demo2_cites_fig16_as_vllm_vs_orca():
    v = m.VLLM_FIG16
    assert v["model"] == "LLaMA-13B" and v["baseline"] == "Orca (Oracle)" and v["throughput_x"] == {"1-shot": 1.67, "5-shot": 3.58}
    assert dict(m.FEW_SHOT) == v["prefix_tokens"] == {"1-shot": 80, "5-shot": 341}


# ---------------------------------------------------------------- 演示 3
def test_demo3_trace_mimics_public_tool_agent_trace(d3):
    st = d3["stats"]
    assert st["n"] == 23_608 and abs(st["minutes"] - 60) < 0.5
    assert abs(st["mean_in"] / 8_596 - 1) <= 0.05 and abs(st["mean_out"] / 182 - 1) <= 0.05
    assert st["once"] > 0.5 and st["hottest"] >= 10_000 and int(st["counts"].sum()) == st["total_blocks"]
    assert d3["match"] is None                     # 合成 trace 不和论文的 trace 相认，哪怕统计量碰巧对得上


def test_demo3_hit_table(d3):
    r = d3["ratio"]
    assert 0.55 <= r[("lru", None)] <= 0.62 and r[("lru", None)] == r[("lfu", None)] == r[("lengthaware", None)]
    for c in (10_000, 30_000, 50_000):
        assert r[("lru", c)] >= r[("lfu", c)]
    vals = [r[("lru", c)] for c in sorted(c for c in m.CAPACITIES if c is not None)]
    assert vals == sorted(vals) and r[("lru", 1_000)] >= 0.45 * r[("lru", None)]
    assert d3["bound_ok"] and all(r[("min", c)] >= r[(p, c)] for p in m.POLICIES for c in m.CAPACITIES)


def test_demo3_tables_in_output(default_out, d3):
    """命中率表、论文行、对照行（短名字）；trace 表里前缀命中率和 cache ratio 分两列。"""
    lines = default_out.splitlines()
    lru = next(x for x in lines if x.startswith("LRU "))
    assert lru.split()[1:] == [f"{d3['ratio'][('lru', c)]:.2f}" for c in m.CAPACITIES]
    assert not any(x.startswith("对照") for x in lines)                   # 对照行只在 --more 里
    assert d3["ratio"][(m.CONTRAST, 10_000)] < d3["ratio"][("lengthaware", 10_000)]
    assert "前缀命中率   cache ratio" in default_out
    assert next(x for x in lines if x.startswith("FAST'25 Tool&Agent")).split()[-2:] == ["-", "0.59"]
    assert next(x for x in lines if x.startswith("arXiv v3 的 trace")).split()[-2:] == ["0.51", "-"]


def mk3(ratio, caps, distinct=1_000, reuse=None, policies=("lru", "lfu"), contrast_caps=()):
    """手写的演示 3 数据：ratio 给每个 (策略, 容量)；MIN 默认等于各策略的最大值。"""
    r = dict(ratio)
    for c in caps + (None,):
        r.setdefault(("min", c), max(r[(p, c)] for p in policies))
    gap = {(p, c): r[("min", c)] - r[(p, c)] for p in policies for c in caps}
    if reuse is None:
        reuse = r[(policies[0], None)]
    st = dict(n=4, minutes=1.0, mean_in=1000.0, mean_out=10.0, total_blocks=8, distinct=distinct, once=0.5,
              hottest=5, top1pct=0.1, reuse=reuse)
    return dict(ratio=r, gap=gap, stats=st, capacities=caps, contrast_caps=contrast_caps, lead=policies[0],
                real=False, match=None, syn_hit=r[(policies[0], None)], syn_stats=st)


def test_demo3_observations_default(d3):
    lines, more = m.observations_4(d3, m.POLICIES)
    t = text((lines, more))
    assert len(lines) == 2 and all(observation_lines(x) <= 3 for x in lines)
    assert "容量从无限降到1,000块，LRU的命中率从0.61降到0.33，保住了54%（论文1,000块时0.30/0.51=59%）" in t
    assert "LRU在每个要淘汰的容量都不低于LFU，10,000块时差得最多（0.46对0.39）" in t and "LRUCacheperformsbest" in t
    assert "MIN在每个要淘汰的容量都不低于在线策略，LengthAware在10,000块时差得最多（0.61对0.37）" in t
    assert "LRU在每个要淘汰的容量都不低于LengthAware" in t
    t3 = text(m.observations_3(d3, m.HOT_ACCESSES))
    assert "72%" in t3 and "14,540" in t3 and "36%" in t3 and "和块复用率一样（都是0.61）" in t3
    assert "热门块值得复制" in t3 and "这是合成负载" in t3


def test_demo3_prefix_hit_and_block_reuse_have_one_meaning_each():
    """[1,2],[3,2],[5,2],[7,2]：前缀命中 0，块复用 0.38——两个量两个名字，不说"命中率 0.38"。"""
    ratio = {(p, c): 0.0 for p in ("lru", "lfu") for c in (None, 2)}
    d = mk3(ratio, (None, 2), distinct=5, reuse=3 / 8)
    lines, more = m.observations_4(d, ("lru", "lfu"))
    t = text((lines, more))
    assert len(lines) == 1 and "前缀命中率0：每种在线策略、每个容量都是0，没有一个请求的开头" in t
    assert "无限容量的前缀命中率比块复用率低（0.00对0.38）" in text(m.observations_3(d, 1_000))
    assert "前缀命中率0.38" not in t and "LRU都不低于LFU" not in t and "MIN在" not in t


def test_demo3_observations_nothing_evicted_and_only_infinite():
    ratio = {(p, c): 0.5 for p in ("lru", "lfu") for c in (None, 2_000)}
    t = text(m.observations_4(mk3(ratio, (None, 2_000)), ("lru", "lfu")))
    assert "CAPACITIES里没有比全部1,000个不同的块更小的有限容量：从不淘汰，每种策略都是0.50" in t and "MIN在" not in t
    ratio = {(p, None): 0.5 for p in ("lru", "lfu")}
    t = text(m.observations_4(mk3(ratio, (None,)), ("lru", "lfu")))
    assert "CAPACITIES里没有比全部1,000个不同的块更小的有限容量" in t and "保住了" not in t


def test_demo3_observations_ties_and_reversals():
    """LRU、LFU 印出来相同：说相同；LFU 印出来更高：说 LFU 高；保持不变的命中率不说"降到"。"""
    ratio = {("lru", None): 0.612, ("lfu", None): 0.612, ("lru", 100): 0.608, ("lfu", 100): 0.6051}
    lines, _ = m.observations_4(mk3(ratio, (None, 100)), ("lru", "lfu"))
    t = flat("".join(lines))
    assert "LRU的命中率保持在0.61" in t and "100块时LRU和LFU一样（都是0.61）" in t and "0.61降到0.61" not in t
    ratio = {("lru", None): 0.6, ("lfu", None): 0.6, ("lru", 100): 0.3, ("lfu", 100): 0.4}
    t = flat("".join(m.observations_4(mk3(ratio, (None, 100)), ("lru", "lfu"))[0]))
    assert "100块时LFU比LRU高（0.40对0.30）" in t and "复用多在时间上相近" not in t
    ratio = {(p, c): 0.6 for p in ("lru", "lfu") for c in (None, 100, 50)}     # 处处印出来一样
    t = flat("".join(m.observations_4(mk3(ratio, (None, 100, 50)), ("lru", "lfu"))[0]))
    assert "LRU和LFU在每个要淘汰的容量都一样" in t and "差得最多" not in t and "复用多在时间上相近" not in t


def test_demo3_observations_one_policy_and_other_policies():
    ratio = {("lru", None): 0.6, ("lru", 100): 0.3, ("lru", 50): 0.2}
    t = text(m.observations_4(mk3(ratio, (None, 100, 50), policies=("lru",)), ("lru",)))
    assert "MIN和在线策略在每个要淘汰的容量都一样" in t and "LFU" not in t      # MIN 没有比 LRU 高：照实说一样
    ratio.update({("s3fifo", None): 0.6, ("s3fifo", 100): 0.31, ("s3fifo", 50): 0.2})
    d = mk3(ratio, (None, 100, 50), policies=("lru", "s3fifo"))
    t = text(m.observations_4(d, ("lru", "s3fifo")))
    s3 = m.CACHE_POLICIES["s3fifo"].SHORT
    assert f"{s3}在每个要淘汰的容量都不低于LRU，100块时差得最多（0.31对0.30）" in t          # 一格高、一格持平
    assert "复用多在时间上相近" not in t


def test_demo3_observations_bound_violated_is_said():
    ratio = {("lru", None): 0.6, ("lru", 100): 0.3, ("min", 100): 0.2, ("min", None): 0.6}
    t = text(m.observations_4(mk3(ratio, (None, 100), policies=("lru",)), ("lru",)))
    assert "上界被违反，程序有错" in t


def test_contrast_row_reads_from_the_setting(tmp_path, monkeypatch, capsys):
    """CONTRAST = "s3fifo"：对照行的名字和说明都来自 S3-FIFO 的类，不再说"先淘汰靠前"。"""
    path = write_trace(tmp_path / "t.jsonl", [[1, 2, 3], [1, 2, 4], [5, 6], [1, 2, 7], [5, 6, 8]] * 3)
    monkeypatch.setattr(m, "CONTRAST", "s3fifo")
    monkeypatch.setattr(m, "CAPACITIES", (None, 4))
    monkeypatch.setattr(m, "CONTRAST_CAPS", (4,))
    assert m.main(["--trace", path, "--demo", "4", "--more"]) == 0
    out = capsys.readouterr().out
    assert any(x.startswith("S3-FIFO ") for x in out.splitlines())
    assert "对照行（CONTRAST=\"s3fifo\"）：S3-FIFO（Yang等" in flat(out) and "先淘汰靠前" not in out


# ---------------------------------------------------------------- 小 trace：一种"命中"
def write_trace(path, blocks, lens=None):
    rows = []
    for i, ids in enumerate(blocks):
        n = (len(ids) - 1) * 512 + 100
        if lens is not None:
            n = lens[i]
        rows.append(json.dumps({"timestamp": 1000 * i, "input_length": n, "output_length": 5, "hash_ids": ids}))
    path.write_text("\n".join(rows) + "\n")
    return str(path)


@pytest.mark.parametrize("case", ["suffix_reuse", "one_token"])
def test_unusable_reuse_is_not_a_hit(tmp_path, capsys, case):
    """块 2 出现在每个请求里但不在开头；或一个 token 的请求都落在同一块：演示 3、4 都说没有前缀命中。"""
    if case == "suffix_reuse":
        path = write_trace(tmp_path / "t.jsonl", [[1, 2], [3, 2], [5, 2], [7, 2]])
    else:
        path = write_trace(tmp_path / "t.jsonl", [[9]] * 5, lens=[1] * 5)
    assert m.main(["--trace", path, "--demo", "3", "--more"]) == 0
    out3 = flat(capsys.readouterr().out)
    assert m.main(["--trace", path, "--demo", "4"]) == 0
    out4p = flat(capsys.readouterr().out)
    assert m.main(["--trace", path, "--demo", "5"]) == 0
    out4 = flat(capsys.readouterr().out)
    assert "前缀命中率0：" in out4p and "块复用率" in out3
    assert "你给的trace" in out3 and re.search(r"你给的trace[\d,]+<?[\d.]+[\d,]+[\d,]+0\.00-", out3)
    assert "命中的输入token也是0%" in out4 and "前缀缓存省不下计算" in out4


def test_sums_do_not_overflow():
    """3,000 个请求、每个 2^52 个 token：命中的 token 比例用 Python 整数算，不会超过 100%。"""
    from kv_store.traces import Trace
    from kv_store.trace_file import Request
    tr = Trace.from_requests([Request(float(i), 2 ** 52, 1, (1, 2, 3)) for i in range(3_000)])
    tier = m.TIERS[1]
    hours, frac = m.gpu_hours(tr, m.usable_hits(np.full(3_000, 3), tr.input_len, 512), tier, 512)
    assert frac == 3 * 512 / 2 ** 52 and hours > 0                   # trace 里只有 3 块：命中 1,536 个 token
    hours, frac = m.gpu_hours(tr, np.full(3_000, 2 ** 43), tier, 512)     # 命中到只剩最后一个 token
    assert frac == (2 ** 52 - 1) / 2 ** 52 and f"{frac:.0%}" == "100%"
    lines, _ = m.observations_5(dict(unit=("小时", 1.0), hours={("lru", None): 1.0}, hit_frac={("lru", None): frac}, kv_block_bytes=1,
                                     base_hours=2.0, stored={None: 1}, hbm_bytes=10, local_hours={}), "lru", (None,))
    assert "命中>99.9%的输入token" in flat("".join(lines))           # 不到 1：不印 100%


def test_usable_hits_one_rule():
    """全讲一条规则：最后一个 token 总要重算；只装着最后一个 token 的块不算命中（和 GPU 时间里数的 token 一致）。"""
    from kv_store.traces import Trace
    from kv_store.trace_file import Request
    tr = Trace.from_requests([Request(0.0, 1024, 1, (1, 2)), Request(1.0, 1025, 1, (1, 2, 3)), Request(2.0, 1, 1, (1,))])
    assert m.usable_hits(np.array([2, 3, 1]), tr.input_len, 512).tolist() == [2, 2, 0]


# ---------------------------------------------------------------- 演示 4
def test_demo4_numbers(d4):
    h = {c: d4["hours"][("lru", c)] for c in m.SAVED_CAPS}
    assert h[None] < h[10_000] < h[1_000] < d4["base_hours"]
    assert d4["kv_block_bytes"] == 512 * 320 * 2 ** 10 and d4["hbm_bytes"] == 8 * 80 * 2 ** 30
    assert d4["stored"][10_000] == 10_000 * d4["kv_block_bytes"] > m.LOCAL_KV_BYTES > d4["stored"][1_000]


def test_demo4_reads_excess_from_remote(d4, data):
    """超过本机 1 TB 的缓存：超出的部分按远端 DRAM 读；和全部从本机读比，印出来的时间一样（读被计算盖住）。"""
    for c in (None, 10_000):
        assert d4["hours"][("lru", c)] >= d4["local_hours"][("lru", c)]
        assert f"{d4['hours'][('lru', c)]:.2f}" == f"{d4['local_hours'][('lru', c)]:.2f}"
    assert d4["hours"][("lru", 1_000)] == d4["local_hours"][("lru", 1_000)]
    from kv_store.tiers import hit_tier
    tier = hit_tier(4e12, m.TIERS[1], m.TIERS[2], 1e12)
    assert 1 / tier.gb_per_s == pytest.approx(0.25 / 128 + 0.75 / 100)


def test_demo4_model_quotes_the_paper_then_converts(default_out, more_out):
    f = flat(more_out)
    assert flat('gqa = 8（查询头数 / KV 头数）；§5.3.1：每 token 的 KV "320 KB"') in f
    assert "64个查询头÷8=8个KV头，每token2×80×1,024×2B=320KiB，一块512token=160MiB" in f
    assert "1.53TiB" in f and "640GiB" in f and "156GiB" in f and "1,562GiB" not in f
    assert "8×312TFLOPS" in flat(default_out) and "本实验的假设" in flat(default_out)   # 60% 是我们的假设
    assert re.findall(r"\d+ ?(?:KB|MB|TB)\b", default_out) == ["1 TB", "1 TB"]   # LOCAL_KV_BYTES 和它的出处


def mk4(frac_big, frac_small=None, caps=(None, 1_000), stored_small=10 * 2 ** 30):
    hours = {("lru", None): 2.0, ("lru", 1_000): 2.5}
    frac = {("lru", None): frac_big, ("lru", 1_000): frac_small or frac_big / 3}
    stored = {None: 30 * 2 ** 40, 1_000: stored_small}
    return dict(unit=("小时", 1.0), hours=hours, hit_frac=frac, base_hours=3.0, stored=stored, kv_block_bytes=1,
                distinct=10 ** 9,
                hbm_bytes=640 * 2 ** 30, local_hours={("lru", None): 2.0, ("lru", 1_000): 2.5}), caps


def test_demo4_observations_cases():
    d, caps = mk4(0.0, 0.0)
    t = text(m.observations_5(d, "lru", caps))
    assert "容量无限的缓存命中的输入token也是0%" in t and "只有1,000块" not in t and "降到" not in t
    d, caps = mk4(0.6)
    lines, more = m.observations_5(d, "lru", caps)
    t = text((lines, more))
    assert "从3.00降到2.00小时（少了33%）" in t and "省下的时间比例低于命中的token比例" in t
    assert "容量1,000块的缓存存10GiB，放得进一台8卡机器的HBM" in t and "是容量无限的缓存的33%：复用分散在许多前缀上" in t
    d, caps = mk4(0.6, 0.3)                                                # 印出来正好一半：算"至少一半"
    assert "的50%：热门的前缀很集中" in text(m.observations_5(d, "lru", caps))
    d, caps = mk4(0.6)
    lines, _ = m.observations_5(d, "lru", (None,))
    assert len(lines) == 1


# ---------------------------------------------------------------- 整个脚本
def test_main_prints_a_number_from_each_demo(d1, d2, d3, d4, default_out):
    for k in range(1, 5):
        assert f"演示 {k}" in default_out
    r5 = d2["5-shot"]
    assert re.search(rf"5-shot\s+341\s+{r5['total']:,}\s+{r5['computed']}\s+{r5['saved']:.0%}", default_out)
    assert re.search(rf"不缓存\s+-\s+0%\s+{d4['base_hours']:.2f}\s+1\.00×", default_out)


def test_bad_argument_is_one_line_and_exit_2():
    p = subprocess.run([sys.executable, f"{LECTURE}/04_prefix_caching.py", "--demo", "9"],
                       capture_output=True, text=True)
    assert p.returncode == 2 and p.stdout == ""
    assert len(p.stderr.strip().splitlines()) == 1 and "--demo" in p.stderr and "Traceback" not in p.stderr


@pytest.mark.parametrize("name,value,args", [
    ("BLOCK_SIZE", "64", ["--demo", "2"]),
    ("CONTRAST", '"s3fifo"', ["--demo", "3", "--trace", "SMALL"]),
    ("SAVED_CAPS", "(5_000, 500)", ["--demo", "5", "--trace", "SMALL"]),
])
def test_setting_an_attribute_equals_editing_the_source(name, value, args, tmp_path, monkeypatch, capsys):
    """m.SETTING = v; m.main(...) 印出的和改源文件一字不差（设置在演示运行时才读，不在 import 时）。"""
    small = write_trace(tmp_path / "small.jsonl", [[1, 2, 3], [1, 2, 4], [5, 6], [1, 2, 7], [5, 6, 8]] * 4)
    args = [small if a == "SMALL" else a for a in args]
    src = pathlib.Path(LECTURE, "04_prefix_caching.py").read_text(encoding="utf-8")
    edited, n = re.subn(rf"^{name} = .*?(?=\s+#)", f"{name} = {value}", src, count=1, flags=re.M)
    assert n == 1
    script = tmp_path / "04_prefix_caching.py"
    script.write_text(edited, encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, LECTURE]), NO_COLOR="1")
    p = subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, env=env, cwd=LECTURE)
    assert p.returncode == 0, p.stderr
    monkeypatch.setattr(m, name, eval(value))
    assert m.main(args) == 0
    assert capsys.readouterr().out == p.stdout


# ---------------------------------------------------------------- 图（figures/plot_04.py）
def test_plot_04_titles_state_the_finding(tmp_path, monkeypatch):
    """小数据画三张图：标题是由数算出的结论；每个面板至多 4 条线；没有缺字的警告；PNG ≥ 1600 像素宽。"""
    import warnings
    from lab_common import plotting
    plot = load_plot("plot_04")
    figs = []
    monkeypatch.setattr(plot, "save_png", lambda fig, out: figs.append(fig) or plotting.save_png(fig, out))
    caps = (300, 1_000, 10_000, None)
    names = {"lru": "LRU", "lfu": "LFU", "lengthaware": "LengthAware", "min": "MIN"}
    ratio = {"lru": [0.2, 0.3, 0.4, 0.5], "lfu": [0.1, 0.3, 0.35, 0.5], "lengthaware": [0.1, 0.2, 0.3, 0.5],
             "min": [0.3, 0.4, 0.5, 0.5]}
    hours = {p: [5 - 4 * r for r in v] for p, v in ratio.items()}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        plotting.setup_matplotlib()
        plot.plot_block_popularity([50, 7, 3, 2, 1, 1, 1, 1], str(tmp_path / "a.png"), "小数据")
        plot.plot_hit_ratio(caps, ratio, names, {"lru": {1_000: 0.3, None: 0.51}}, str(tmp_path / "b.png"), "小数据", "表 1")
        plot.plot_prefill_time(caps, hours, names, 5.0, str(tmp_path / "c.png"), "配置", "小数据")
    titles = [f._suptitle.get_text() for f in figs]
    assert titles == ["50% 的块只用过一次，最热 1% 的块却占了 76% 的访问",
                      "容量降到 10,000 块，LRU 仍保住 0.40（无限容量时 0.50）",
                      "无限缓存把 prefill 的 GPU 时间从 5.00 降到 3.00 小时（少 40%）"]
    assert all(len(ax.get_lines()) <= 5 for f in figs for ax in f.axes)    # 4 条线 + 至多一条水平基线
    for name in "abc":
        head = (tmp_path / f"{name}.png").read_bytes()[:24]
        assert head[:8] == b"\x89PNG\r\n\x1a\n" and int.from_bytes(head[16:20], "big") >= plotting.MIN_WIDTH_PX


def test_plot_04_takes_its_numbers_from_the_demos(monkeypatch):
    """compute() 只读演示 3、4 返回的字典（不自己重算命中率或 GPU 时间）。"""
    plot = load_plot("plot_04")
    s04 = plot.figlib.load_script("04_prefix_caching")
    st = dict(n=3, minutes=1.0, total_blocks=10, counts=np.array([3, 1]))
    d3 = dict(stats=st, seed=7, block_size=512, policies=("lru", "min"), names={"lru": "LRU", "min": "MIN"}, paper={},
              ratio={(p, c): 0.123 for p in ("lru", "min") for c in (None, 300)})
    d4 = dict(base_hours=9.0, hours={("lru", c): 4.5 for c in (None, 300)}, policies=("lru",), model="M", node="N",
              mfu=0.5, tier="T", tier_gb_per_s=1.0, method="方法")
    monkeypatch.setattr(s04, "CAPACITIES", (None, 300))
    monkeypatch.setattr(s04, "read_trace", lambda *a, **k: None)
    monkeypatch.setattr(s04, "trace_sweep", lambda *a, **k: "data")
    monkeypatch.setattr(s04, "demo4_policies", lambda data: d3)
    monkeypatch.setattr(s04, "demo5_compute_saved", lambda data, caps, policies: d4)
    d = plot.compute()
    assert d["ratio"] == {"lru": [0.123, 0.123], "min": [0.123, 0.123]} and d["hours"] == {"lru": [4.5, 4.5]}
    assert d["base_hours"] == 9.0 and "种子 7" in d["trace_cfg"]


@pytest.mark.parametrize("real,match,want", [(False, None, "合成负载"), (True, None, "内容都不一样"),
                                             (False, 1, "合成负载"),     # 合成的 trace 不按内容认：仍是合成负载
                                             (True, 2, "FAST'25Conversation")])
def test_where_the_trace_comes_from(real, match, want):
    """--more 的最后一句说 trace 是什么：合成的、认不出的、或按内容认出的论文 trace 文件（两边的数并排）。"""
    d = mk3({("lru", None): 0.4, ("lfu", None): 0.4}, (None,))
    d.update(real=real, match=None)
    if match is not None and real:
        d["match"] = m.PAPER_TRACES[match]
    assert want in flat(m.observations_3(d, 1_000)[1][-1])


def test_trace_file_is_identified_by_its_content(tmp_path):
    """按内容（git blob 哈希）认文件，不按平均值：同样的统计量、不同的字节就认不出；.gz 按解压后的内容。"""
    import gzip
    shared = os.path.join(os.path.dirname(LECTURE), "..", "shared", "traces", "mooncake_fast25_synthetic_trace.jsonl")
    f = tmp_path / "a.jsonl"
    f.write_text('{"timestamp": 0, "input_length": 7590, "output_length": 182, "hash_ids": [0]}\n')
    assert m.known_file(str(f)) is None
    g = tmp_path / "a.jsonl.gz"
    g.write_bytes(gzip.compress(f.read_bytes()))
    assert m.blob_sha1(str(g)) == m.blob_sha1(str(f))
    if os.path.exists(shared):                         # FAST'25 发布的 synthetic_trace.jsonl（git blob e4838049）
        assert m.known_file(shared) == "FAST'25 Synthetic"
        h = tmp_path / "b.jsonl"
        with open(shared, "rb") as src:
            h.write_bytes(src.read()[:-1])  # 少一个换行：内容不同，就不是那个文件
        assert m.known_file(str(h)) is None


def test_demo2_observations_equal_savings_explain_no_difference():
    """前缀长短不同、省下的比例印出来一样（例如块比两个前缀都大，都是 0%）：不说"差别来自…"。"""
    res = {"a": mk2(80, saved=0.0, mapped=0, shared=8, private=8), "b": mk2(341, saved=0.0, mapped=0, shared=8, private=8)}
    t = text(m.observations_2(res, 8, 512))
    assert "前缀不满一块（块大小512）" in t and "每个前缀都省下0%" in t and "差别来自" not in t and "省得多" not in t


def test_demo3_observations_one_capacity_one_policy():
    """只有一个要淘汰的容量：LRU 和 LFU 只比一格，不说"都不低于"、"差得最多"；只有一种策略：不和别的策略比。"""
    ratio = {("lru", None): 0.6, ("lfu", None): 0.6, ("lru", 100): 0.35, ("lfu", 100): 0.3}
    t = text(m.observations_4(mk3(ratio, (None, 100)), ("lru", "lfu")))
    assert "100块时LRU比LFU高（0.35对0.30）" in t and "都不低于LFU" not in t
    ratio = {("lru", None): 0.6, ("lru", 100): 0.35}
    t = text(m.observations_4(mk3(ratio, (None, 100), policies=("lru",)), ("lru",)))
    assert "都不低于LFU" not in t and "LRU在每个要淘汰的容量" not in t


@pytest.mark.parametrize("match,want", [(None, "在另一个trace上算的"), (0, "就是在这个trace")])
def test_paper_rows_say_whether_they_are_on_this_trace(match, want, capsys):
    """--trace 给的就是 arXiv v3 的 trace 时，论文行的脚注不说"另一个 trace"。"""
    ratio = {(p, c): 0.5 for p in ("lru", "min") for c in (None, 1_000)}
    gap = {("lru", c): 0.0 for c in (None, 1_000)}
    if match is not None:
        match = m.PAPER_TRACES[match]
    m.print_policy_tables(ratio, gap, (None, 1_000), ("lru",), "lfu", (), match)
    out = flat(capsys.readouterr().out)
    assert want in out and ("另一个" in out) == (match is None)


def test_demo4_caption_cites_fast25_only_for_its_1_tb(monkeypatch, tmp_path, capsys):
    """LOCAL_KV_BYTES 改成 1,000 PB：表注不再把它挂在"FAST'25：每台约 1 TB DRAM"后面。"""
    tr = tmp_path / "t.jsonl"
    tr.write_text('{"timestamp": 0, "input_length": 1024, "output_length": 5, "hash_ids": [7, 8]}\n' * 3)
    monkeypatch.setattr(m, "LOCAL_KV_BYTES", 10 ** 18)
    assert m.main(["--demo", "5", "--trace", str(tr)]) == 0
    out = capsys.readouterr().out.replace("\n  ", "")
    assert "1,000 PB" in out and "§5.3.1" not in out


def test_heat_table_never_prints_100_percent_once_when_a_block_repeats(tmp_path, capsys):
    """250 个不同的块里有 1 块被访问两次：只被访问过一次的块是 99.6%，表里印 "99.6%"（say.pct 多给一位），不印 "100%"。"""
    lines = [{"timestamp": i, "input_length": 100, "output_length": 1, "hash_ids": [i]} for i in range(250)]
    lines.append({"timestamp": 250, "input_length": 100, "output_length": 1, "hash_ids": [0]})
    tr = tmp_path / "t.jsonl"
    tr.write_text("".join(json.dumps(r) + "\n" for r in lines))
    assert m.main(["--demo", "3", "--trace", str(tr)]) == 0
    row = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("只被访问过一次的块"))
    assert "99.6%" in row and "100%" not in row


def test_observations_3_gives_the_lru_reason_once():
    """只有一个要淘汰的容量、LRU 同时胜过 LFU 和 LengthAware：理由（论文表 1 也是 LRU 最好）只说一次。"""
    r = {("lru", None): 0.61, ("lru", 10): 0.46, ("lfu", None): 0.61, ("lfu", 10): 0.39,
         ("lengthaware", None): 0.61, ("lengthaware", 10): 0.37, ("min", None): 0.61, ("min", 10): 0.61}
    d = dict(ratio=r, stats=dict(distinct=100, reuse=0.61, hottest=5), lead="lru", match=None,
             capacities=(None, 10), gap={("lru", 10): 0.15}, real=False)
    lines, more = m.observations_4(d, ("lru", "lfu", "lengthaware"))
    assert sum("LRUCache performs best" in x for x in lines + more) == 1
    assert any(x.startswith("10 块时 LRU 比 LengthAware 高（0.46 对 0.37）。") for x in more), more


def test_kept_share_is_the_ratio_of_the_printed_rates():
    """"保住了"按表里印出来的两个命中率算：0.6132 → 0.3348 印成 0.61 → 0.33，说 54%（0.33 / 0.61），
    不说未取整的 55%（0.3348 / 0.6132）。"""
    d = mk3({("lru", None): 0.6132, ("lru", 500): 0.3348, ("lfu", None): 0.6132, ("lfu", 500): 0.30}, (None, 500))
    t = text(m.observations_4(d, ("lru", "lfu")))
    assert "从0.61降到0.33，保住了54%" in t


def test_lengthaware_caption_follows_the_class(monkeypatch, capsys):
    """--more 的表下说"本课读作：靠后的块先走"；rank 被改成靠前的先走时，表下说这一行按改过的 rank 算。"""
    from kv_store import eviction
    caps, pols = (None, 10), ("lengthaware",)
    ratio = {(p, c): 0.5 for p in pols + ("min",) for c in caps}
    gap = {(p, c): 0.0 for p in pols for c in caps}
    monkeypatch.setattr(console, "SHOW_MORE", True)
    m.print_policy_tables(ratio, gap, caps, pols, m.CONTRAST, ())
    assert "改过的" not in "".join(capsys.readouterr().out.split())
    monkeypatch.setattr(eviction.LengthAwareCache, "rank", lambda self, pos: pos)
    m.print_policy_tables(ratio, gap, caps, pols, m.CONTRAST, ())
    assert "你改过的LengthAwareCache.rank不再让靠后的块先走" in "".join(capsys.readouterr().out.split())


def test_demo2_without_a_full_prefix_block_credits_chance_blocks():
    """前缀不满一块（15 个 token，块 16），却映射上了 11 次（词表小，后缀开头撞上）：不说"前缀的 0 个满块"省下了
    计算、不说"共享的前缀块"，说省下的来自碰巧相同的整块；按公式算是 0%。"""
    res = {"a": dict(prefix_len=15, worst=0.0, repeats=0, mapped=11, prefix_share=0.45, prefix_tail=15,
                     used_private=163, used_shared=152, saved=0.08, full_prefix_blocks=0)}
    lines, more = m.observations_2(res, 64, 16)
    t = text((lines, more))
    assert "a的前缀只有15个token，不满一块（块大小16）：省下的8%全来自11次映射，映射的是碰巧相同的整块" in t
    assert "按它算是0%" in t and "碰巧相同的块只存一份" in t and "共享的前缀块" not in t and "0个满块映射" not in t


def test_saved_policy_need_not_be_in_policies(monkeypatch):
    """POLICIES 里没有 LRU 也能跑（演示 5 的 SAVED_POLICY 另算它那几格），不因一个没改的设置被拒绝。"""
    monkeypatch.setattr(m, "POLICIES", ("lfu",))
    m.check_settings()
    asked = []
    monkeypatch.setattr(m, "sweep", lambda trace, caps, pols, extra=(), workers=None: asked.append(
        ({(p, c) for p in pols for c in caps}, set(extra))) or {})
    m.trace_sweep(m.read_trace(), demos=(4, 5), with_contrast=False)
    grid, extra = asked[0]
    assert {("lru", c) for c in m.SAVED_CAPS} <= grid | extra and not any(p == "lru" for p, _ in grid)


@pytest.mark.parametrize("tier,column", [(1, True), (2, False), (3, False)])
def test_no_spill_column_only_where_a_tier_can_spill(data, monkeypatch, capsys, tier, column):
    """--more 的"不溢出"一列：只有 HBM、本机 DRAM 有容量上限；远端 DRAM、SSD 不设上限，那一列和 GPU 时间一样，不印。"""
    monkeypatch.setattr(m, "TIER_FOR_HITS", tier)
    monkeypatch.setattr(console, "SHOW_MORE", True)
    m.demo5_compute_saved(data)
    out = "".join(capsys.readouterr().out.split())
    assert ("不溢出" in out) == column and "全在本机" not in out


def test_every_block_once_is_said_plainly():
    """每个块只被访问一次（3 个请求的小 trace）：不说"最热的块却被访问了 1 次"。"""
    st = dict(once=1.0, hottest=1, distinct=198, top1pct=0.005)
    st.update(reuse=0.0)
    lines, _ = m.observations_3(dict(stats=st, match=None, ratio={("lru", None): 0.0}, lead="lru", real=True),
                                m.HOT_ACCESSES)
    assert lines[0] == "每个块都只被访问过一次（198 个块），没有一块被复用。"
