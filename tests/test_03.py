"""03：并行采样的重放（手算）、束搜索（宽度 1 不共享；成批和逐个一样）、写时复制那一步、✗ 和一行拒绝。"""
import re

import numpy as np
import pytest

from conftest import load
from lab_common.transformer_lab import TINY, config_like, init_params

s03 = load("03_sharing_and_cow")


def marks(out):
    return re.findall(r"^  \d+\. (✗?)", out, re.M)


def test_parallel_sampling_by_hand():
    """提示 20 个 token（块 16：满块 0 + 写了 4 个的块 1），两个样本各写 3、1 个。第一步：样本 0 要写共享又没写满的
    块 1，先复制成块 2（3 块在用，不共享要 2 + 2 块），样本 1 原地写块 1；样本 1 写完放手，块 1 回到空闲表。"""
    steps = s03.parallel_sampling(20, np.array([3, 1]), 2, 16)
    assert steps == [(3, 4, 1), (2, 2, 1), (2, 2, 1)]


def test_beam_search_width_1_shares_nothing_and_batching_changes_nothing():
    cfg = config_like(TINY, max_seq=64)
    params = init_params(cfg, seed=0)
    rng = np.random.default_rng(0)
    jobs = [(rng.integers(0, cfg.vocab, n), steps, w) for n, steps, w in ((5, 9, 1), (17, 6, 3), (2, 12, 2))]
    together = s03.beam_search(params, cfg, jobs, 4)
    assert together == [s03.beam_search(params, cfg, [job], 4)[0] for job in jobs]   # 成批 = 一个一个地跑
    assert all(used == need for used, need, _ in together[0]) and together[0][-1][2] == 0   # 宽度 1：没有共享
    assert all(used <= need for steps in together for used, need, _ in steps)


def test_savings_table_and_claims(capsys):
    d = s03.demo_savings()
    out = capsys.readouterr().out
    saved = {(r[1], r[2], r[0]): r[5] for r in d["rows"]}
    assert [saved[("束搜索", "Alpaca", w)] for w in (2, 4, 6)] == ["37.7%", "56.2%", "62.1%"]
    assert [saved[("并行采样", "ShareGPT", w)] for w in (2, 4, 6)] == ["12.7%", "21.1%", "24.4%"]
    assert saved[("并行采样", "Alpaca", 6)] == "6.3%" and marks(out) == ["", ""]


def test_width_1_breaks_both_savings_claims(capsys):
    s = load("03_sharing_and_cow")
    s.WIDTHS, s.N_REQUESTS = (1,), 3
    s.demo_savings()
    assert marks(capsys.readouterr().out) == ["✗", "✗"]


def test_copy_on_write_step(capsys):
    d = s03.demo_cow()
    out = capsys.readouterr().out
    assert [st["tables"].get("b") for st in d["steps"]] == [None, [0, 1], [0, 2], [0, 2]]
    assert [st["ref_count"] for st in d["steps"]][1:3] == [[2, 2, 0, 0], [2, 1, 1, 0]]
    assert [st["cow"] for st in d["steps"]] == [0, 0, 1, 1] and marks(out) == ["", ""]
    assert "lecture07/gpu/paged_decode.py" in out.replace("\n  ", "")


@pytest.mark.parametrize("prompt, block", [(8, 4), (6, 1)])
def test_full_last_block_means_no_copy_and_a_cross(capsys, prompt, block):
    s = load("03_sharing_and_cow")
    s.COW_PROMPT, s.COW_BLOCK_SIZE = prompt, block
    d = s.demo_cow()
    assert d["steps"][-1]["cow"] == 0 and marks(capsys.readouterr().out) == ["✗", "✗"]
