"""03_sharing_and_cow.py：并行采样 / 束搜索的共享节省，以及一次写时复制的每个不变量。"""
import numpy as np
import pytest
from rich.cells import cell_len

from conftest import assert_settings_refused, load_script, run_main
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
    assert "输入 16、8、8、13、5" in out                               # 数字列表用顿号
    assert max(cell_len(line) for line in out.splitlines()) <= 80


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
    real = m.parallel_sampling(params, cfg, np.arange(8), outs, 3)
    assert real[:3] + (real[4],) == m.replay_sampling(cfg, 8, outs, 3)
    assert real[2] == 2                                  # 3 个样本写进共享的半块：前两个复制，最后一个原地写


def test_replay_hand_checked():
    cfg = config_like(TINY, max_seq=16)
    # 提示 20 个 token（1 个满块 + 4 个），2 个样本各写 1 个 token：
    # 写之前共享 2 块；写时第一个样本复制最后一块 → 3 块；不共享时 2 × 2 = 4 块
    s, p, c, steps = m.replay_sampling(cfg, 20, np.array([1, 1]), 2)
    assert steps == [(3, 4, 1)]
    assert (s, p, c) == (3, 4, 1)


def test_beam_search_small_case_is_consistent():
    cfg = config_like(TINY, max_seq=24)
    params = init_params(cfg, seed=0)
    prompt = np.arange(5)
    sh, pr, cow, common, steps = m.beam_search(params, cfg, prompt, steps=6, width=3)
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


def test_wording_fixes(d1):
    """fork 不是复制；"12 个（束搜索 12 个）"不重复；数字列表用顿号。"""
    text = "".join(m.observations_1(d1))
    assert "复制留下的" not in text and "fork（只加引用计数，不复制数据）" in text
    assert "（束搜索 12 个）" not in text and "并行采样和束搜索用同一批" in text


def test_sharegpt_parallel_sampling(d1):
    """vLLM 论文 §6.3：ShareGPT 上并行采样省 16.2–30.5%；我们按 ShareGPT 的长度在块池里重放，每个 n 都比 Alpaca 长度时省得多。"""
    assert m.VLLM_63_SHAREGPT_PARALLEL == (16.2, 30.5)
    assert m.VLLM_63 == {"并行采样": (6.1, 9.8), "束搜索": (37.6, 55.2)}
    long = [d1["share_long"][w]["saved"] for w in m.WIDTHS]
    assert all(a > b for a, b in zip(long, d1["parallel"]))
    assert [round(x, 3) for x in long] == [0.127, 0.211, 0.244]
    assert "每个 n 都比 Alpaca 长度时多" in m.observations_1(d1)[1]
    assert "16.2–30.5%" in m.observations_1(d1)[1]


def test_cow_without_partial_block(monkeypatch):
    """最后一块正好写满（COW_PROMPT = 8，块 4）：没有写时复制；检查全部通过、没有"位置 0–-1"。"""
    import contextlib
    import io
    monkeypatch.setattr(m, "COW_PROMPT", 8)
    with contextlib.redirect_stdout(io.StringIO()):
        d = m.demo2_cow_step_by_step()
    assert d["pos"] == 0 and d["n_cow"] == 0 and all(d["checks"].values())
    assert d["b_blocks"] == [0, 1, 2] and d["a_blocks"] == [0, 1, 3] and d["ref_count"] == [2, 2, 1, 1]
    text = "".join(d["checks"]) + "".join(m.observations_2(d))
    assert "0–-1" not in text and "这次没有发生写时复制（COW 次数 0）" in text


def test_width_one_is_a_tie_not_a_failure(monkeypatch):
    """WIDTHS 含 1：宽度 1 两边都省 0%，"束搜索省得多"只在宽度 ≥ 2 上比较（不跑模型：直接喂观察函数）。"""
    monkeypatch.setattr(m, "WIDTHS", (1, 2))
    res = {("并行采样", 1): dict(saved=0.0, cow=0, common=0.0), ("并行采样", 2): dict(saved=0.04, cow=1, common=0.0),
           ("束搜索", 1): dict(saved=0.0, cow=0, common=1.0), ("束搜索", 2): dict(saved=0.36, cow=9, common=0.9)}
    d = dict(res=res, parallel=[0.0, 0.04], beam=[0.0, 0.36], mean_in=19.0, mean_out=54.0, short_prompts=6,
             share_long={1: dict(saved=0.0), 2: dict(saved=0.09)}, long_mean_in=109.0, n_beam=m.N_REQUESTS)
    text = "".join(m.observations_1(d))
    assert "宽度 1 时两者都是 0%" in text and "没有复现" not in text and "顺序可以对照" in text
    assert "n ≥ 2 时每个 n 都比 Alpaca 长度时多" in text


def test_settings_are_checked():
    """不合理的设置在 main() 开始时一行拒绝（退出码 2）。"""
    assert_settings_refused(m, (("WIDTHS", ()), ("N_BEAM", 0), ("COW_PROMPT", 100), ("TEMPERATURE", 0)), ["--demo", "2"])
