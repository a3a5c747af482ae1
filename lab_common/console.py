"""CS349E 全课程共用的终端输出：标题、表格、"观察"列表（基于 rich）。

    from console import print_header, print_table, print_observations
    print_header("演示 1：……")
    print_table(["策略", "命中率"], [["LRU", "0.51"], ["LFU", "0.49"]])
    print_observations(["LRU 比 LFU 高 0.02。"])

设计要点：
- 管道 / 重定向到文件、或设置了 NO_COLOR 时，输出是干净的纯文本（没有颜色控制符），
  而且宽度固定为 80 列，所以同一条命令两次的输出逐字节相同（测试会检查）。
- 中文在终端里占 2 列；rich 按显示宽度排版，所以中英混排的表格在 80 列里也是对齐的。
"""
import os
import sys

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

DEFAULT_WIDTH = 80  # 不是终端时（管道、文件、测试）的固定宽度：保证输出可复现


def _console():
    """每次按当前的 sys.stdout 新建：pytest 的 capsys 替换 stdout 后也能抓到输出。"""
    tty = sys.stdout.isatty()
    width = None if tty else DEFAULT_WIDTH
    if tty and os.environ.get("COLUMNS") is None:
        width = min(Console().width, 120)  # 投影仪上的超宽终端：表格太宽反而难读
    return Console(file=sys.stdout, width=width, highlight=False, soft_wrap=False,
                   no_color=bool(os.environ.get("NO_COLOR")) or not tty,
                   force_terminal=False if not tty else None, emoji=False)


def _is_number(s):
    """'1,234' '0.51' '-3.2×' '12%' '1.0e-12' 这类单元格右对齐。

    >>> _is_number("1,234"), _is_number("0.51×"), _is_number("LRU")
    (True, True, False)
    """
    t = str(s).replace(",", "").rstrip("×%xs ").strip()
    try:
        float(t)
        return True
    except ValueError:
        return False


def print_header(title):
    """一个演示的大标题（上下各空一行）。"""
    c = _console()
    c.print()
    c.rule(Text(title, style="bold"), characters="═", style="cyan")


def print_text(text=""):
    """普通的一段说明文字（不做 rich 标记解析，方括号原样输出）。"""
    _console().print(text, markup=False)


def print_table(headers, rows, title=None, caption=None):
    """打印一张表；数字列自动右对齐。rows 的每个元素都会被 str() 一次。"""
    rows = [[str(x) for x in r] for r in rows]
    table = Table(title=title, caption=caption, box=box.SIMPLE_HEAD, header_style="bold",
                  show_edge=False, pad_edge=False)
    for j, h in enumerate(headers):
        numeric = bool(rows) and all(_is_number(r[j]) or r[j] in ("-", "") for r in rows)
        table.add_column(str(h), justify="right" if numeric else "left", overflow="fold")
    for r in rows:
        table.add_row(*r)
    _console().print(table)


def print_observations(lines, title="观察"):
    """编号的"观察"列表。每一条都应当由代码算出的数字拼成（f-string），而不是手写的结论。"""
    c = _console()
    c.print(Text(title, style="bold yellow"))
    for i, line in enumerate(lines, 1):
        c.print(f"  {i}. {line}", markup=False)


def fmt_int(n):
    """千分位整数：fmt_int(23608) == '23,608'。"""
    return f"{int(round(n)):,}"
