"""03_sharing_and_cow.py：并行采样 / 束搜索的共享节省，以及一次写时复制的每个不变量。"""
import numpy as np
import pytest
from rich.cells import cell_len

from conftest import assert_settings_refused, load_script, run_main
from lab_common.console import observation_lines
from paged_kv import BlockPool, PagedSequence, paged_step
from lab_common.transformer_lab import TINY, config_like, init_params

m = load_script("03_sharing_and_cow")


@pytest.fixture(scope="module")
def main_run():
    """main() 只跑这一次（演示 1 最慢）：(打印的文字, {演示号: 返回的 dict})，和换进程的测试共用。"""
    return run_main("03_sharing_and_cow")


@pytest.fixture(scope="module")
def d1(main_run):
    return main_run[1][1]


@pytest.fixture(scope="module")
def d2(main_run):
    return main_run[1][2]


def test_smoke_main(main_run):
    out = main_run[0]
    assert "演示 1" in out and "演示 2" in out and "失败" not in out
    assert "5,637" in out                                             # 演示 1：宽度 6 的束搜索共享时的块·步
    assert "[2 1 1 0]" in out                                         # 演示 2：COW 之后的 ref_count
    assert "1,382" in out                                             # 千分位
    assert max(cell_len(line) for line in out.splitlines()) <= 80


def test_default_output_is_short(main_run):
    """默认：每个演示至多 2 条观察、每条至多 3 行；整份输出 ≤ 55 行。--more 还印出其余的事实。"""
    out = main_run[0]
    assert len(out.splitlines()) <= 55
    for d, fn in ((main_run[1][1], m.observations_1), (main_run[1][2], m.observations_2)):
        lines, more = fn(d)
        assert 1 <= len(lines) <= 2 and more
        assert all(observation_lines(x) <= 3 for x in lines)


def test_more_prints_every_fact(capsys):
    m.main(["--demo", "2", "--more"])
    out = capsys.readouterr().out
    assert "通过" in out and "Triton kernel" in out and "原来的 0（空位）" in out


def test_bad_demo_argument_exits_2():
    with pytest.raises(SystemExit) as e:
        m.main(["--demo", "3"])
    assert e.value.code == 2


def test_savings_rise_with_n_and_width(d1):
    ps, bs = d1["parallel"], d1["beam"]
    assert d1["parallel_rising"] and d1["beam_rising"]
    assert all(b > a for a, b in zip(ps, ps[1:]))
    assert all(b > a for a, b in zip(bs, bs[1:]))
    assert all(b > p for b, p in zip(bs, ps))          # 束搜索比同样 n 的并行采样省得多
    assert all(0 < x < 1 for x in ps + bs)


def test_savings_accounting(d1):
    for (kind, w), r in d1["res"].items():
        assert r["shared"] < r["private"]
        assert np.isclose(r["saved"], 1 - r["shared"] / r["private"])
        if kind == "束搜索":
            assert 0 < r["common"] <= 1
    # 并行采样时每个请求只有提示的最后一块（如果不满）会被复制：每个样本最多一次
    for w in m.WIDTHS:
        r = d1["res"][("并行采样", w)]
        n_partial = sum(len(p) % m.BLOCK_SIZE != 0 for p, _ in d1["reqs"])
        assert r["cow"] == n_partial * (w - 1)          # 最后一个持有者原地写
    assert d1["short_prompts"] == sum(len(p) < m.BLOCK_SIZE for p, _ in d1["reqs"])


def test_replay_matches_real_model(d1):
    """前 N_CHECK 个请求在真模型上采样：总数和逐步的块数都与块池重放相同。"""
    assert d1["replay_matches_model"] and d1["n_checked"] == m.N_CHECK == 3


def test_replay_equals_model_for_a_partial_prompt_block():
    """提示 8 个 token（块 16 的一半）：真模型采样与重放逐步相同（含写时复制次数）。"""
    cfg = config_like(TINY, max_seq=40)
    params = init_params(cfg, seed=0)
    outs = np.array([5, 3, 7])
    real = m.parallel_sampling(params, cfg, np.arange(8), outs, 3, 16, 7, 1.0)
    assert real[:3] + (real[4],) == m.replay_sampling(cfg, 8, outs, 3, 16)
    assert real[2] == 2                                  # 3 个样本写进共享的半块：前两个复制，最后一个原地写


def test_replay_hand_checked():
    cfg = config_like(TINY, max_seq=16)
    # 提示 20 个 token（1 个满块 + 4 个），2 个样本各写 1 个 token：
    # 写之前共享 2 块；写时第一个样本复制最后一块 → 3 块；不共享时 2 × 2 = 4 块
    s, p, c, steps = m.replay_sampling(cfg, 20, np.array([1, 1]), 2, 16)
    assert steps == [(3, 4, 1)]
    assert (s, p, c) == (3, 4, 1)


def test_beam_search_small_case_is_consistent():
    cfg = config_like(TINY, max_seq=24)
    params = init_params(cfg, seed=0)
    prompt = np.arange(5)
    sh, pr, cow, common, steps = m.beam_search(params, cfg, prompt, steps=6, width=3, block_size=16)
    assert pr == sum(3 * m.n_blocks(5 + t, m.BLOCK_SIZE) for t in range(1, 7))
    assert len(steps) == 6 and sum(s[0] for s in steps) == sh and steps[-1][2] == cow
    assert sh <= pr and 0 <= common <= 6


def test_cow_invariants(d2):
    assert all(d2["checks"].values()), d2["checks"]
    assert len(d2["checks"]) == 8
    assert d2["old_len"] == m.COW_PROMPT and d2["pos"] == m.COW_PROMPT % m.COW_BLOCK_SIZE
    assert d2["a_blocks"] == [0, 1] and d2["b_blocks"] == [0, 2]
    assert d2["ref_count"] == [2, 1, 1, 0]
    assert d2["n_cow"] == 1
    assert d2["slot_was_zero"]
    assert [r[3] for r in d2["rows"]] == ["[1 1 0 0]", "[2 2 0 0]", "[2 1 1 0]", "[2 1 1 0]"]


def test_cow_does_not_touch_other_sharers():
    """三个持有者共享一个不满的块：前两个各复制一份，第三个原地写；原块的前缀一直不变。"""
    cfg = config_like(TINY, max_seq=16)
    params = init_params(cfg, seed=0)
    pool = BlockPool(cfg, n_blocks=6, block_size=4)
    a = PagedSequence(pool)
    paged_step(params, cfg, [a], [np.arange(3)])
    b, c = a.fork(), a.fork()
    prefix = pool.k[:, 0, :, :3].copy()
    paged_step(params, cfg, [b, c], [[7], [8]])
    assert pool.n_cow == 2 and pool.ref_count[0] == 1
    paged_step(params, cfg, [a], [[9]])
    assert pool.n_cow == 2 and a.blocks == [0]
    for s in (a, b, c):
        assert np.array_equal(pool.k[:, s.blocks[0], :, :3], prefix)


def test_output_deterministic(capsys):
    m.main(["--demo", "2"])
    x = capsys.readouterr().out
    m.main(["--demo", "2"])
    assert capsys.readouterr().out == x


def test_step_series_add_up_to_the_totals(d1):
    """画图用的逐步记录（最大的 n / 宽度）加起来等于表里的总和：图和表是同一次解码。"""
    w = max(m.WIDTHS)
    for kind, reqs in (("并行采样", d1["reqs"]), ("束搜索", d1["reqs"][:m.N_BEAM])):
        rows = [d1["steps"][(kind, k)] for k in range(len(reqs))]
        assert sum(r[0] for s in rows for r in s) == d1["res"][(kind, w)]["shared"]
        assert sum(r[1] for s in rows for r in s) == d1["res"][(kind, w)]["private"]
        assert sum(s[-1][2] for s in rows) == d1["res"][(kind, w)]["cow"]


def test_common_prefix_len():
    assert m.common_prefix_len(np.array([[1, 2, 3], [1, 2, 4]])) == 2
    assert m.common_prefix_len(np.array([[1, 2], [3, 2]])) == 0
    assert m.common_prefix_len(np.array([[5, 6], [5, 6]])) == 2


def has(text, *parts):
    """text 里有每一段（数、名字、说明是哪种情况的短词）：措辞由 tests/golden/ 守住。"""
    return all(x in text for x in parts)


def test_wording_fixes(d1):
    """默认两条：束搜索对并行采样、ShareGPT 长度；和论文比的条件（真模型、负载）写在默认的表注里。"""
    lines, more = m.observations_1(d1)
    text = "".join(lines + more)
    assert len(lines) == 2 and has(lines[0], "62.1%", "6.3%", "90%") and "复制留下的" not in text
    assert has(m.table_caption_1(d1), "OPT-13B", "TINY", "块 16") and "论文的块" not in m.table_caption_1(d1)
    assert has(m.table_caption_1(dict(d1, block_size=64)), "块 64", "论文的块是 16")
    assert has(text, "从 3.0% 升到 6.3%")


def test_sharegpt_parallel_sampling(d1):
    """vLLM 论文 §6.3：ShareGPT 上并行采样省 16.2–30.5%；我们按 ShareGPT 的长度在块池里重放，每个 n 都比 Alpaca 长度时省得多。"""
    assert m.VLLM_63_SHAREGPT_PARALLEL == (16.2, 30.5)
    assert m.VLLM_63 == {"并行采样": (6.1, 9.8), "束搜索": (37.6, 55.2)}
    long = [d1["share_long"][w]["saved"] for w in m.WIDTHS]
    assert all(a > b for a, b in zip(long, d1["parallel"]))
    assert [round(x, 3) for x in long] == [0.127, 0.211, 0.244]
    assert has(m.observations_1(d1)[0][1], "ShareGPT", "192", "从 6.3% 升到 24.4%", "16.2–30.5%")


def test_cow_without_partial_block(monkeypatch):
    """最后一块正好写满（COW_PROMPT = 8，块 4）：没有写时复制；检查全部通过、没有"位置 0–-1"。"""
    import contextlib
    import io
    monkeypatch.setattr(m, "COW_PROMPT", 8)
    with contextlib.redirect_stdout(io.StringIO()):
        d = m.demo2_cow_step_by_step()
    assert d["pos"] == 0 and d["n_cow"] == 0 and all(d["checks"].values())
    assert d["b_blocks"] == [0, 1, 2] and d["a_blocks"] == [0, 1, 3] and d["ref_count"] == [2, 2, 1, 1]
    text = "".join(d["checks"]) + "".join(sum(m.observations_2(d), []))
    assert "0–-1" not in text and has(text, "没有发生", "COW 次数 0")


def fake_d1(widths, par, beam, long, cow=9, short=6):
    """手造的演示 1 数据：{n: 省下的比例}。"""
    res = {}
    for w in widths:
        res[("并行采样", w)] = dict(saved=par[w], cow=cow, common=0.0)
        res[("束搜索", w)] = dict(saved=beam[w], cow=cow, common=0.9)
        res[(m.SHAREGPT, w)] = dict(saved=long[w], cow=cow, common=0.0)
    return dict(res=res, widths=widths, parallel=[par[w] for w in widths], beam=[beam[w] for w in widths],
                mean_in=19.0, mean_out=54.0, short_prompts=short, long_mean_in=109.0, n_requests=12, block_size=16,
                beam_max_len=100,
                paper=dict(m.VLLM_63), paper_sharegpt=m.VLLM_63_SHAREGPT_PARALLEL)


def test_width_one_is_a_tie_not_a_failure():
    """WIDTHS 含 1：宽度 1 两边都省 0%，比较只在宽度 ≥ 2 上（手造数据，不跑模型）。"""
    d = fake_d1((1, 2), {1: 0.0, 2: 0.04}, {1: 0.0, 2: 0.36}, {1: 0.0, 2: 0.09})
    lines, more = m.observations_1(d)
    text = "".join(lines + more)
    assert has(lines[0], "宽度 2", "36.0%", "4.0%") and "没有复现" not in text
    assert has(text, "宽度 ≥ 2 时（2）束搜索都比同样 n 的并行采样省得多", "顺序一致", "宽度 1 只有一条序列",
               "束搜索和并行采样一样（都是 0.0%）") and "每个宽度下" not in text
    d = fake_d1((2, 4), {2: 0.04, 4: 0.05}, {2: 0.36, 4: 0.4}, {2: 0.09, 4: 0.1})   # 没有宽度 1：每个宽度下
    assert has("".join(m.observations_1(d)[1]), "每个宽度下束搜索都比同样 n 的并行采样省得多")
    only_one, more = m.observations_1(fake_d1((1,), {1: 0.0}, {1: 0.0}, {1: 0.0}))
    assert len(only_one) == 1 and not more and has(only_one[0], "只有宽度 1", "0.0%")


def test_equal_printed_values_and_no_cow():
    """印出来相同的省下比例不说"升到"；没有写时复制时不说"复制了 0 次"；没有短提示时不说"0 个请求"。"""
    d = fake_d1((2, 4), {2: 0.0631, 4: 0.0634}, {2: 0.5, 4: 0.6}, {2: 0.0632, 4: 0.0629}, cow=0, short=0)
    lines, more = m.observations_1(d)
    text = "".join(lines + more)
    assert has(lines[1], "不比", "6.3% 多")                     # ShareGPT 6.3% 对 Alpaca 6.3%：印出来相同
    assert has(text, "都是 6.3%", "不随")
    assert has(text, "没有发生") and "0 次" not in text and "没有次" not in text
    assert has(text, "满块") and "0 个请求" not in text


def test_settings_are_checked():
    """不合理的设置在 main() 开始时一行拒绝（退出码 2）。"""
    assert_settings_refused(m, (("WIDTHS", ()), ("N_BEAM", 0), ("COW_PROMPT", 100), ("TEMPERATURE", 0)), ["--demo", "2"])


def test_cow_hint_is_possible_at_block_size_one(monkeypatch):
    """块大小 1 时每个整数都是 1 的倍数："把 COW_PROMPT 改成不是 1 的倍数"做不到；提示要说先把块调大。"""
    import contextlib
    import io
    monkeypatch.setattr(m, "COW_BLOCK_SIZE", 1)
    with contextlib.redirect_stdout(io.StringIO()):
        d = m.demo2_cow_step_by_step()
    lines, _ = m.observations_2(d)
    text = "".join(lines)
    assert d["n_cow"] == 0 and "倍数" not in text and has(lines[1], "想一想", "COW_BLOCK_SIZE 调大")


def test_trend_sentence_names_the_lengths_it_is_about():
    """--more 里"n 越大省得越多"说的是 Alpaca 长度的行（ShareGPT 的行可能不单调）。"""
    d = fake_d1((2, 4, 6), {2: 0.16, 4: 0.2, 6: 0.27}, {2: 0.25, 4: 0.37, 6: 0.41}, {2: 0.14, 4: 0.27, 6: 0.23})
    more = "".join(m.observations_1(d)[1])
    assert has(more, "并行采样（Alpaca 长度）", "2 到 6")


def test_widths_do_not_change_the_workload(monkeypatch):
    """WIDTHS = (2, 4) 和 (1, 2, 4)：演示 1 交给 savings 的请求（提示、每个样本的输出长度）和 ShareGPT 长度逐个相同；
    样本 j 的输出长度总是第 j 个（n = 4 的前两个就是 n = 2 的两个）。"""
    import contextlib
    import io

    class Got(Exception):
        pass

    def grab(cfg, params, reqs, long, *rest):
        raise Got(reqs, long)
    monkeypatch.setattr(m, "savings", grab)
    seen = []
    for widths in ((2, 4), (1, 2, 4)):
        monkeypatch.setattr(m, "WIDTHS", widths)
        with contextlib.redirect_stdout(io.StringIO()), pytest.raises(Got) as e:
            m.demo1_savings()
        seen.append(e.value.args)
    (reqs_a, long_a), (reqs_b, long_b) = seen
    assert len(reqs_a) == len(reqs_b) == m.N_REQUESTS and len(long_a) == len(long_b) == m.N_REQUESTS
    for (pa, oa), (pb, ob) in zip(reqs_a, reqs_b):
        assert pa.tolist() == pb.tolist() and oa.tolist() == ob.tolist() and len(oa) == m.MAX_WIDTH
    for (pa, oa), (pb, ob) in zip(long_a, long_b):
        assert pa == pb and oa.tolist() == ob.tolist()
    assert round(float(np.mean([len(p) for p, _ in reqs_a]))) == 14          # 默认设置表头印的"平均输入 14"
