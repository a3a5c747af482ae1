"""输出：管道里没有颜色控制符、80 列、中文按 2 列算宽度、观察列表折行。"""
import doctest

from lab_common import console
from lab_common.console import print_header, print_observations, print_table, wrap_cjk
from rich.cells import cell_len


def test_doctests():
    assert doctest.testmod(console).failed == 0


def test_piped_output_is_plain_and_fits_80_columns(capsys, monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    print_header("演示：一个很长很长的中文标题，" * 4)
    print_table(["策略", "容量（块）", "命中率"], [["LRU", "10,000", "0.46"], ["LengthAwareCache", "1,000", "0.30"]],
                caption="说明文字" * 30)
    print_observations(["这是一条由数字拼出来的观察：LRU 的命中率 0.46 高于 LFU 的 0.39。" * 3])
    out = capsys.readouterr().out
    assert "\x1b[" not in out
    assert max(cell_len(line) for line in out.splitlines()) <= 80
    assert "LengthAwareCache" in out and "0.46" in out


def test_numbers_are_right_aligned(capsys):
    print_table(["a", "b"], [["x", "1"], ["yy", "1,000"]])
    lines = capsys.readouterr().out.splitlines()
    row = next(line for line in lines if line.startswith("x"))
    assert row.rstrip().endswith("    1")


def test_wrap_keeps_ascii_words_whole_and_indents():
    lines = wrap_cjk("  1. " + "前缀缓存 prefix caching 省下了 82% 的计算。" * 4, 40, indent=5)
    assert all(cell_len(x) <= 42 for x in lines)
    assert all(x.startswith("     ") for x in lines[1:])
    assert "prefix" in "".join(lines) and "prefi\n" not in "\n".join(lines)
