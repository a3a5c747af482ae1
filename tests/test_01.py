"""01_kv_cache_memory 和 allocation：小例子上手算的答案、一个逐步重算的孪生模拟、每个演示改一个设置就印 ✗、
坏设置一行拒绝、--mine 用的是练习里的函数。"""
import random
import sys
from collections import deque

import pytest

from allocation import make_lengths, reservation, simulate_contiguous, simulate_paged, swap_seconds
from conftest import load

S01 = load("01_kv_cache_memory")


def test_reservation_is_orcas_three_baselines():
    assert [reservation(k, 10, 25, 2048) for k in ("Max", "Pow2", "Oracle")] == [2048, 10 + 32, 10 + 25]
    assert reservation("Pow2", 10, 32, 2048) == 42 and reservation("Pow2", 10, 33, 2048) == 74
    assert reservation("Pow2", 2000, 40, 2048) == 2048           # 不超过最长的序列


def test_contiguous_by_hand_external_fragmentation():
    # 池 10：A(3+1) 占 0–4，B(2+3) 占 4–9；C(2+3) 要 5 个连续位置。A 走后空着 4 + 1 = 5 个，却不连续：C 等到 B 走
    share, running = simulate_contiguous("Oracle", [3, 2, 2], [1, 3, 3], pool=10, max_seq=2048)
    assert [round(float(x) * 30) for x in share] == [5 + 3 + 4, 4 + 2 + 1, 0, 1 + 5 + 5]
    assert running == 4 / 3


def test_paged_by_hand_preempts_the_latest():
    # 池 8 个 token、块 2（4 块）：A、B 各 2 + 3，C 的 4 个输入要 3 块、等着；第 2 步 A 要新块时抢占 B（已有 4 个）
    share, running, preempted = simulate_paged([2, 2, 4], [3, 3, 1], pool=8, block_size=2)
    assert [round(float(x) * 32) for x in share] == [4 + 6 + 8 + 4, 0, 2, 4 + 4]
    assert running == 7 / 4 and preempted == [(1, 4)]


def contiguous_twin(kind, prompts, outputs, pool, max_seq):
    """simulate_contiguous 的孪生：每一步从在跑的请求重新数一遍（不记增量）。"""
    queue, running, total, full, busy = deque(range(len(prompts))), [], [0] * 4, 0, 0   # running：[起点, 大小, 请求, 已生成]
    while queue or running:
        while queue:
            need = reservation(kind, prompts[queue[0]], outputs[queue[0]], max_seq)
            ends = [0] + [s + n for s, n, _, _ in running]
            starts = [s for s, _, _, _ in running] + [pool]
            gaps = [e for e, s in zip(ends, starts) if s - e >= need]
            if not gaps:
                break
            running = sorted(running + [[gaps[0], need, queue.popleft(), 0]])
        if queue:
            tok = sum(prompts[r] + k for _, _, r, k in running)
            fut = sum(outputs[r] - k for _, _, r, k in running)
            res = sum(n for _, n, _, _ in running)
            total = [a + b for a, b in zip(total, (tok, fut, res - tok - fut, pool - res))]
            full, busy = full + 1, busy + len(running)
        running = [[s, n, r, k + 1] for s, n, r, k in running if k + 1 < outputs[r]]
    return [x / (full * pool) for x in total], busy / full


@pytest.mark.parametrize("seed", range(6))
def test_contiguous_equals_its_step_by_step_twin(seed):
    rng = random.Random(seed)
    prompts, outputs = make_lengths(rng.randint(5, 40), seed, (20, 30), 1.0, 128)
    pool = rng.randint(128, 600)
    for kind in ("Max", "Pow2", "Oracle"):
        share, running = simulate_contiguous(kind, prompts, outputs, pool, 128)
        if share is None:
            continue
        want, want_running = contiguous_twin(kind, prompts, outputs, pool, 128)
        assert [float(x) for x in share] == pytest.approx(want, abs=1e-12) and running == pytest.approx(want_running)


def test_swap_seconds_by_hand():
    copies, seconds = swap_seconds(S01.OPT_13B, 512, 16, 16.0, 10.0)    # 40 层 × K、V × 32 块；32 × 16 × 800 KiB
    assert copies == 2560 and seconds == pytest.approx(2560 * 10e-6 + 512 * 800 * 1024 / 16e9, rel=1e-15)
    assert swap_seconds(S01.OPT_13B, 17, 16, 16.0, 0.0)[1] == pytest.approx(32 * 800 * 1024 / 16e9)   # 整块搬


def test_tokens_fit_and_kib():
    assert S01.tokens_fit(S01.OPT_13B, 800 * 1024, 80 * 2 ** 30) == "62,633"     # (0.9 × 80 GiB − 26e9) // 800 KiB
    assert S01.tokens_fit(S01.LLAMA2_70B, 320 * 1024, 80 * 2 ** 30) == "-"
    assert (S01.kib(46080), S01.kib(23040), S01.kib(5200)) == ("45", "22.5", "5.08")


@pytest.mark.parametrize("setting, value, demo, broken", [
    ("GPU_MEM_UTIL", 1.0, "demo_bytes_per_token", [2]),         # 一张 H200 放得下 LLaMA2-70B 了
    ("N_REQUESTS", 20, "demo_fragmentation", [1, 2]),           # 分页从没满载
    ("MLA_KV_LORA_RANK", 4096, "demo_smaller_kv", [2]),         # MLA 比 GQA-8 存得多
    ("COPY_OVERHEAD_US", 0.0, "demo_preemption", [1, 2]),       # 没有固定开销：块再小也是换出快
    ("N_REQUESTS", 20, "demo_preemption", [1]),                 # 没有抢占
])
def test_a_changed_setting_prints_a_cross_not_a_false_sentence(monkeypatch, capsys, setting, value, demo, broken):
    monkeypatch.setattr(S01, setting, value)
    S01.check_settings()
    S01.show.header(demo)                       # 观察从 1 数起
    d = getattr(S01, demo)()
    out = capsys.readouterr().out
    crossed = [int(line.split(".")[0]) for line in out.split("观察\n")[1].splitlines() if "✗ 在这组设置下不成立" in line]
    assert crossed == broken
    assert all(len(r) == len(d["headers"]) for r in d["rows"].values()) and "".join(d["caption"].split()) in "".join(out.split())
    assert "−-" not in out and "-−" not in out


@pytest.mark.parametrize("setting, value", [("SEQ_SEED", 1), ("KV_POOL_GIB", 6), ("BLOCK_SIZE", 32)])
def test_the_papers_figures_leave_when_their_setup_changes(monkeypatch, capsys, setting, value):
    monkeypatch.setattr(S01, setting, value)
    d = S01.demo_fragmentation()
    out = "".join(capsys.readouterr().out.split())
    assert [r[2] for r in d["rows"].values()] == ["-"] * 4 and "论文图2的顺序" not in out
    assert ("表1写作\"12GB\"" in out) == (setting != "KV_POOL_GIB")


@pytest.mark.parametrize("setting, value", [
    ("GPU_MEM_UTIL", -0.0), ("GPU_MEM_UTIL", 1e-308), ("LEN_SIGMA", -0.0), ("MFU", 1e-308), ("TP_GPUS", 8.0),
    ("N_REQUESTS", True), ("PCIE_GBPS", (16.0, 16.0)), ("SWAP_BLOCK_SIZES", (1, 1, 4)), ("GQA_GROUPS", 3),
    ("GPUS", (("A", 2 ** 36), ("A", 2 ** 36))), ("GPUS", (("A", 2 ** 36, 1),)), ("KV_POOL_GIB", 1), ("BLOCK_SIZE", 0),
    ("COPY_OVERHEAD_US", -0.0), ("SEQ_SEED", -1),
])
def test_a_bad_setting_is_one_line_and_exit_2(monkeypatch, capsys, setting, value):
    monkeypatch.setattr(S01, setting, value)
    with pytest.raises(SystemExit) as e:
        S01.main([])
    out, err = capsys.readouterr()
    assert e.value.code == 2 and out == "" and len(err.splitlines()) == 1 and f"设置 {setting} = " in err


def test_tiny_settings_still_run(monkeypatch, capsys):
    for setting, value in (("LEN_SIGMA", 1e-308), ("COPY_OVERHEAD_US", 1e-308), ("N_REQUESTS", 1)):
        monkeypatch.setattr(S01, setting, value)
    S01.main([])
    assert "−-" not in capsys.readouterr().out


def test_mine_imports_the_exercise_by_name(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["01_kv_cache_memory.py", "--mine"])
    assert load("01_kv_cache_memory").kv_bytes_per_token.__module__ == "exercises.ex1_kv_bytes"
    assert S01.kv_bytes_per_token.__module__ == "paged_kv"
