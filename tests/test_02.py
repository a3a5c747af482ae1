"""02：每个演示跑得通、返回表里的数；改一个设置让要点不成立时印 ✗；不合理的设置一行拒绝、退出码 2。"""
import re

import pytest

from conftest import load, run


def demo(capsys, fn, **settings):
    """改几个设置（模块的全局常量），跑一个演示，返回 (它返回的数据, 它印的字)。"""
    m = load("02_paged_attention")
    for name, value in settings.items():
        setattr(m, name, value)
    d = getattr(m, fn)()
    return d, capsys.readouterr().out


def marks(out):
    """每条观察开头有没有 ✗：["✗", ""] = 第一条不成立、第二条成立。"""
    return re.findall(r"^  \d+\. (✗?)", out, re.M)


def test_block_table_grows_only_when_the_last_block_is_full(capsys):
    d, out = demo(capsys, "demo_block_table")
    last = d["steps"][-1]
    assert last["tables"] == {"A": [0, 1, 7], "B": [2, 6], "C": [3, 4, 5, 8]}
    assert last["lengths"] == {"A": 10, "B": 7, "C": 13} and last["free"] == 3
    assert all(st["tight"] for st in d["steps"]) and "✗" not in out


def test_one_sequence_is_contiguous_so_the_layout_claim_fails(capsys):
    _, out = demo(capsys, "demo_block_table", WALK_PROMPTS={"A": 6})
    assert marks(out) == ["✗", ""] and "A [0, 1, 2]" in out


def test_paged_equals_contiguous_for_other_block_sizes(capsys):
    for bs in (1, 3, 64):
        d, out = demo(capsys, "demo_equivalence", EQ_BLOCK_SIZE=bs)
        assert d["diff"] == [0.0] * 4 and "✗" not in out


def test_block_size_rows(capsys):
    d, out = demo(capsys, "demo_block_size")
    rows = {r[0]: r for r in d["rows"]}
    assert rows[16][1:4] == ["7.4", "1.5%", "8.8%"] and rows[128][2:4] == ["11.5%", "49.3%"]
    assert rows[16][6:] == ["4.00 KiB", "81,920"] and rows["连续"][6:] == ["256 KiB", "1,280"]
    assert "20–26%，来自查块表、多出的分支、处理变长序列三项开销之和" in out.replace("\n  ", "")


def test_reads_claim_fails_when_the_sequence_is_shorter_than_every_block(capsys):
    _, out = demo(capsys, "demo_block_size", BLOCK_SIZES=(128, 256), READ_LEN=64)
    assert marks(out) == ["", "✗"]


@pytest.mark.parametrize("script, name, value", [
    ("02_paged_attention", "BLOCK_SIZES", (16, 16)), ("02_paged_attention", "BLOCK_SIZES", (16,)),
    ("02_paged_attention", "EQ_PROMPTS", (3, 3)), ("02_paged_attention", "WALK_BLOCK_SIZE", 0),
    ("02_paged_attention", "MODEL_SEED", True), ("02_paged_attention", "WALK_PROMPTS", {"A": 0}),
    ("02_paged_attention", "READ_LEN", 1024.0), ("03_sharing_and_cow", "WIDTHS", (2, 2)),
    ("03_sharing_and_cow", "WIDTHS", (7,)), ("03_sharing_and_cow", "WIDTHS", ()),
    ("03_sharing_and_cow", "BLOCK_SIZE", -0.0), ("03_sharing_and_cow", "COW_PROMPT", 64),
    ("03_sharing_and_cow", "N_REQUESTS", 1e-308), ("03_sharing_and_cow", "LEN_SEED", -1)])
def test_bad_setting_is_one_line_and_exit_2(capsys, script, name, value):
    """02 和 03：一行说清哪个设置、什么值、允许什么，退出码 2，演示一行都还没印。"""
    m = load(script)
    setattr(m, name, value)
    with pytest.raises(SystemExit) as e:
        m.main([])
    out, err = capsys.readouterr()
    assert e.value.code == 2 and out == "" and err.count("\n") == 1 and name in err


def test_each_demo_runs_from_the_command_line():
    for n in (1, 2, 3):
        code, out, err = run("02_paged_attention", "--demo", str(n))
        assert code == 0 and out.count("演示 ") == 1 and "✗" not in out, err
