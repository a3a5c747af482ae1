"""CS349E 全课程共用的终端输出：标题、表格、"观察"列表（基于 rich）。

    from lab_common.console import print_header, print_table, print_observations
    print_header("演示 1：……")
    print_table(["策略", "命中率"], [["LRU", "0.51"], ["LFU", "0.49"]])
    print_observations(["LRU 比 LFU 高 0.02。"])

设计要点：
- 管道 / 重定向到文件、或设置了 NO_COLOR 时，输出是干净的纯文本（没有颜色控制符），
  而且宽度固定为 80 列，所以同一条命令两次的输出逐字节相同（测试会检查）。
- 中文在终端里占 2 列；rich 按显示宽度排版，所以中英混排的表格在 80 列里也是对齐的。
"""
import argparse
import codecs
import os
import re
import sys

from rich import box
from rich.cells import cell_len
from rich.console import Console
from rich.table import Table
from rich.text import Text

DEFAULT_WIDTH = 80  # 不是终端时（管道、文件、测试）的固定宽度：保证输出可复现

# ---- 编不出某些字符的终端（GBK 的中文 Windows、ASCII）：换成看得懂的替代写法，而不是抛 UnicodeEncodeError ----
_PLAIN = {"−": "-", "–": "-", "—": "-", "‖": "||", "≈": "~", "≤": "<=", "≥": ">=", "×": "x", "µ": "u", "…": "...",
          "→": "->", "←": "<-", "·": ".", "σ": "sigma", "²": "^2", "³": "^3", "⁹": "^9"}
_SUPERSCRIPT = dict(zip("⁰¹²³⁴⁵⁶⁷⁸⁹⁻", "0123456789-"))


def plain_fallback(err):
    """编码错误处理（codecs 的名字 "lab_plain"）：编不出的字符换成 ASCII 的写法，上标写成 ^，其余换成 ?。

    >>> "10⁹ B，−3 µs，2¹⁰".encode("ascii", "lab_plain")
    b'10^9 B?-3 us?2^10'
    """
    text, out = err.object, []
    for i in range(err.start, err.end):
        ch = text[i]
        if ch in _SUPERSCRIPT:
            lead = "" if i > 0 and text[i - 1] in _SUPERSCRIPT else "^"     # 一串上标只在前面写一个 ^
            out.append(lead + _SUPERSCRIPT[ch])
        else:
            out.append(_PLAIN.get(ch, "?"))
    return "".join(out), err.end


codecs.register_error("lab_plain", plain_fallback)


def use_plain_fallback(stream):
    """stream 的编码不是 UTF（例如 PYTHONIOENCODING=gbk、中文 Windows 上重定向到文件时的 cp936）时，
    让它把编不出的字符换成替代写法（plain_fallback），而不是在第一个 '³' 上崩溃。"""
    enc = getattr(stream, "encoding", None) or "utf-8"
    try:
        unicode = codecs.lookup(enc).name.startswith("utf")
    except LookupError:
        unicode = False
    if not unicode and getattr(stream, "errors", "strict") in ("strict", "backslashreplace", "surrogateescape") \
            and hasattr(stream, "reconfigure"):
        stream.reconfigure(errors="lab_plain")


use_plain_fallback(sys.stdout)     # 所有脚本都 import 这个模块：在打印任何东西之前就装好
use_plain_fallback(sys.stderr)


class _Console(Console):
    @property
    def encoding(self):
        """排版一律按 UTF-8（表格线不因为终端是 GBK 就换成 ASCII），所以不同编码的输出只差那几个被换掉的字符。"""
        return "utf-8"

    def on_broken_pipe(self):
        """管道那头关了（`| head -3`）：交给运行器（endings.ended_quietly）安静地结束；rich 自己会 exit(1)。"""
        raise BrokenPipeError


def _on_terminal():
    return sys.stdout.isatty()


def _console():
    """每次按当前的 sys.stdout 新建：pytest 的 capsys 替换 stdout 后也能抓到输出。"""
    tty = _on_terminal()
    width = None if tty else DEFAULT_WIDTH
    if tty and os.environ.get("COLUMNS") is None:
        width = min(Console().width, 120)  # 投影仪上的超宽终端：表格太宽反而难读
    return _Console(file=sys.stdout, width=width, highlight=False, soft_wrap=False,
                    no_color=bool(os.environ.get("NO_COLOR")) or not tty,
                    force_terminal=False if not tty else None, emoji=False)


def _is_number(s):
    """'1,234' '0.51' '-3.2×' '12%' '1.0e-12' 这类单元格右对齐。

    >>> _is_number("1,234"), _is_number("0.51×"), _is_number("LRU"), _is_number("> 99%"), _is_number("≈20.6")
    (True, True, False, True, True)
    """
    t = str(s).replace(",", "").lstrip("<>≈~ ").rstrip("×%xs ").strip()   # '> 99%'（say.share）、'≈20.6'（不稳的计时；纯文本里 ≈ 印成 ~）也是数
    try:
        float(t)
        return True
    except ValueError:
        return False


_NO_LINE_START = set("，。；：、）》」！？") | {"——"}  # 这些标点不放在行首（允许超出 2 列）
_NO_LINE_END = set("（《「“")


def wrap_cjk(text, width, indent=0):
    """按显示宽度折行（中文占 2 列），尽量不把英文单词 / 数字从中间断开。
    不放在行首的标点（，。）：等）可以挂在行尾超出一格字；第二个也要挂出去时，连同它前面的字挪到下一行。

    >>> wrap_cjk("缓存命中率 hit ratio 很高。", 12)
    ['缓存命中率', 'hit ratio 很', '高。']
    >>> wrap_cjk("一二三四五）。", 10)
    ['一二三四', '五）。']
    """
    lines, toks, w = [], [], 0
    pad = " " * indent
    for word in re.findall(r"[A-Za-z0-9_.,%×µ/+\-:()'~]+ ?|——|.", text):
        limit = width - (indent if lines else 0)
        move = None                       # 折行时从这一行末尾挪几个词到下一行
        if toks and w + cell_len(word.rstrip()) > limit:
            if word not in _NO_LINE_START:
                move = int(toks[-1] in _NO_LINE_END)          # 开括号不留在行尾
            elif w > limit:                                   # 已经有一个标点挂在行尾了
                move = 1
                while move < len(toks) and toks[-move] in _NO_LINE_START:
                    move += 1
        if move is not None and move < len(toks):
            lines.append("".join(toks[:len(toks) - move]).rstrip())
            toks = toks[len(toks) - move:]
            if toks:
                toks[0] = toks[0].lstrip()
            else:
                word = word.lstrip()
            w = sum(cell_len(t) for t in toks)
        toks.append(word)
        w += cell_len(word)
    if "".join(toks).strip():
        lines.append("".join(toks).rstrip())
    return [lines[0]] + [pad + x for x in lines[1:]] if lines else []


def clip(text, width):
    """截到 width 列以内（中文占 2 列），截掉了就以"…"结尾。

    >>> clip("ref_count", 9), clip("ref_count", 6), clip("块表很长", 5)
    ('ref_count', 'ref_c…', '块表…')
    """
    if cell_len(text) <= width:
        return text
    out = ""
    for ch in text:
        if cell_len(out + ch) > width - 1:
            break
        out += ch
    return out + "…"


# ---- 投影仪上的逐步揭晓（--step，只在终端上）：清屏 → 标题和表 → 想一想 → 回车 → 观察 ----
STEP = False        # --step：由 script_tools 的运行器设置，跑完复原；管道输出时不起作用
QUESTIONS = {}      # {演示编号: 它 docstring 的第一个问句}，运行器在 --step 时填；print_header 按标题里的编号取
_shown = {"title": None, "question": None}      # 当前演示的标题（动画播完重画用）和要问的问题


def stepping():
    """--step 而且标准输入、输出都是终端：这时才清屏、停下来等回车。管道、文件、测试里永远是 False。"""
    if not STEP:
        return False
    try:
        return sys.stdin.isatty() and sys.stdout.isatty()
    except (AttributeError, ValueError):
        return False


def question_of(text):
    """演示的问题：docstring 第一行到最后一个"？"为止（后面常是答案的提示，不提前说）；没有问句时返回 None。

    >>> question_of("块该多大？小块浪费少，但块表长、读得碎。"), question_of("C 为什么停在那里：N 大时……")
    ('块该多大？', None)
    """
    head, mark, _ = text.rpartition("？")
    return head + mark if mark else None


def clear_screen():
    """清屏并把光标放回左上角（只在 stepping() 时调用）。"""
    sys.stdout.write("\033[H\033[2J\033[3J")
    sys.stdout.flush()


def wait_enter(prompt):
    """在终端上印一行暗色的提示、等回车。Ctrl-C：和别处一样交给 lab_common.endings（一行"已中断"、退出码 130）；
    输入结束（EOF）就继续。"""
    _console().print(Text(prompt, style="dim"), end="")
    sys.stdout.flush()
    try:
        input()
    except EOFError:
        print()


def redraw_title():
    """清屏、重画当前演示的标题（终端上的动画播完以后，表格从一屏的顶上开始）。"""
    if stepping() and _shown["title"] is not None:
        clear_screen()
        _print_title(_console(), _shown["title"])


def print_header(title):
    """一个演示的大标题：上方空一行和一条粗线，标题太长时折行而不是被截断。--step 时先清屏。"""
    c = _console()
    if stepping():
        clear_screen()
        m = re.match(r"演示 (\d+)", title)
        _shown.update(title=title, question=QUESTIONS.get(int(m.group(1))) if m else None)
    _print_title(c, title)


def _print_title(c, title):
    c.print()
    c.print("═" * c.width, style="cyan")
    for line in wrap_cjk(title, c.width - 2):
        c.print(Text(line, style="bold"), soft_wrap=True)
    c.print("─" * c.width, style="cyan")


def print_text(text=""):
    """普通的一段说明文字（不做 rich 标记解析，方括号原样输出），按显示宽度折行。"""
    c = _console()
    for line in wrap_cjk(text, c.width - 2) or [""]:
        c.print(line, markup=False, highlight=False, soft_wrap=True)


_TOKEN = re.compile(r"[A-Za-z0-9_.,%×µ/+\-–:()'~&]+")   # 数字（含 11–341 这样的范围）、英文单词：表格折行时不拆开
_GAP = 3                                                # 表的列之间 3 格：两边的内边距和一格分隔（表的两边不留）


def _least_widths(headers, rows):
    """每列至少多宽：它里面（含表头）最长的数字 / 英文单词，至少 2 格（一个汉字）。中文可以在任何地方折行。"""
    return [max([2] + [cell_len(t) for c in [str(h)] + [r[j] for r in rows] for t in _TOKEN.findall(c)])
            for j, h in enumerate(headers)]


def plan_column_widths(headers, rows, room):
    """表太宽时的列宽：从最宽的列起一格一格地收窄，但每列不窄于它里面最长的数字 / 英文单词，中文和表头可以折行。
    room = 能给各列内容的总宽度（不含列之间的空格）。本来就放得下时返回 None（照 rich 的排法，输出不变）。

    >>> plan_column_widths(["名字", "数"], [["一个很长的名字", "1,234,567"]], 16)
    [7, 9]
    >>> plan_column_widths(["名字", "数"], [["短", "1"]], 16) is None
    True
    """
    cells = [[str(h)] + [r[j] for r in rows] for j, h in enumerate(headers)]
    want = [max(cell_len(line) for c in col for line in c.split("\n")) for col in cells]
    if sum(want) <= room:
        return None
    least = _least_widths(headers, rows)
    width = [max(w, m) for w, m in zip(want, least)]
    while sum(width) > room:
        slack = [(w, j) for j, (w, m) in enumerate(zip(width, least)) if w > m]
        if not slack:
            break
        width[max(slack)[1]] -= 1
    return width


def column_groups(headers, rows, width):
    """终端太窄、收窄到每个数字刚好放下也放不下整张表时，把表竖着切成几张：每张都带着第 1 列（行的名字）。

    >>> column_groups(["名字", "a", "b", "c"], [["x", "1,000,000", "2,000,000", "3,000,000"]], 30)
    [[0, 1, 2], [0, 3]]
    """
    least = _least_widths(headers, rows)
    groups, cur = [], [0]
    for j in range(1, len(headers)):
        if len(cur) > 1 and sum(least[k] for k in cur + [j]) + _GAP * len(cur) > width:
            groups.append(cur)
            cur = [0]
        cur.append(j)
    return groups + [cur]


def print_table(headers, rows, title=None, caption=None):
    """打印一张表；数字列自动右对齐。rows 的每个元素都会被 str() 一次。
    窄终端上表格收窄时数字不会被拆开；实在放不下时竖着切成几张（每张都带第 1 列）。"""
    rows = [[str(x) for x in r] for r in rows]
    c = _console()
    for cols in column_groups(headers, rows, c.width):
        _print_table(c, [headers[j] for j in cols], [[r[j] for j in cols] for r in rows], title)
        title = None
    if caption:
        for line in wrap_cjk(caption, c.width - 2, indent=2):
            c.print(line, markup=False, highlight=False, soft_wrap=True)


def _print_table(c, headers, rows, title):
    table = Table(title=title, caption=None, box=box.SIMPLE_HEAD, header_style="bold",
                  show_edge=False, pad_edge=False)
    for j, h in enumerate(headers):
        numeric = bool(rows) and all(_is_number(r[j]) or r[j] in ("-", "") for r in rows)
        table.add_column(str(h), justify="right" if numeric else "left", overflow="fold")
    for r in rows:
        table.add_row(*r)
    widths = plan_column_widths(headers, rows, c.width - _GAP * (len(headers) - 1))
    if widths is not None:
        for col, w in zip(table.columns, widths):
            col.width = w
    c.print(table)


SHOW_MORE = False   # --more：也印出"更多"的观察（由 script_tools 的运行器设置，跑完复原）


def print_observations(lines, more=(), title="观察"):
    """编号的"观察"列表：默认只印 lines（至多 2 条，第一条是这个演示的要点，终端上加粗）；
    带 --more 时接着印 more 里的条目。每一条都应当由代码算出的数字拼成（lab_common.say 的词汇）。
    """
    c = _console()
    shown = list(lines)
    if SHOW_MORE:
        shown += list(more)
    if not shown:
        return
    if stepping():                                 # 先让全班看表、想一想，回车后才揭晓
        if _shown["question"]:
            for out in wrap_cjk(f"想一想：{_shown['question']}", c.width - 2, indent=4):
                c.print(Text(out, style="bold magenta"), soft_wrap=True)
        wait_enter("（回车看观察）")
        _shown["question"] = None
    c.print(Text(title, style="bold yellow"))
    for i, line in enumerate(shown, 1):
        style = None
        if i == 1 and c.is_terminal:               # 要点加粗：只在终端上，管道输出不变
            style = "bold"
        for out in wrap_cjk(f"  {i}. {line}", c.width - 2, indent=5):   # 留 2 列给行尾的标点
            c.print(Text(out, style=style), soft_wrap=True)


def observation_lines(line, width=DEFAULT_WIDTH):
    """一条观察在 width 列的终端上占几行（测试用：默认每条至多 3 行）。

    >>> observation_lines("短句。")
    1
    """
    return len(wrap_cjk(f"  1. {line}", width - 2, indent=5))


class status:
    """较长的计算时在 stderr 上显示一行临时状态（只在 stderr 是终端时；做完擦掉）。管道输出不受影响。

        with status("正在模拟 23,608 个请求的缓存…"):
            table = sweep(...)
    """

    def __init__(self, text):
        self.text = text
        self.on = False

    def __enter__(self):
        try:
            self.on = sys.stderr.isatty()
        except (AttributeError, ValueError):
            self.on = False
        if self.on:
            sys.stderr.write(f"\r⋯ {self.text}")
            sys.stderr.flush()
        return self

    def __exit__(self, *exc):
        if self.on:
            sys.stderr.write("\r" + " " * (cell_len(self.text) + 2) + "\r")
            sys.stderr.flush()
        return False


def fmt_int(n):
    """千分位整数：fmt_int(23608) == '23,608'。"""
    return f"{int(round(n)):,}"


def terminal_width():
    """输出的宽度：终端的宽度（投影仪上的超宽终端至多 120 列）；管道、文件、测试里固定 DEFAULT_WIDTH（80）列。"""
    return _console().width


def wrap_hanging(line, width):
    """一行按显示宽度折到 width 列（wrap_cjk），续行悬挂缩进：对齐到开头的"名字："之后（"  演示 3："），
    没有这样的开头时比这一行的缩进多 2 列。不用折的行原样返回。

    >>> wrap_hanging("  演示 1：一个 token 的 KV 有多大？一张卡放完权重后还能放多少 token？", 40)
    ['  演示 1：一个 token 的 KV 有多大？一张', '          卡放完权重后还能放多少 token？']
    >>> wrap_hanging("短的一行", 40)
    ['短的一行']
    """
    if cell_len(line) <= width:
        return [line]
    body = line.lstrip(" ")
    lead = len(line) - len(body)
    head, mark, _ = body.partition("：")
    hang = 2
    if mark and cell_len(head) <= 12:
        hang = cell_len(head + mark)
    return [" " * lead + x for x in wrap_cjk(body, width - lead, indent=hang)]


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """--help 的排版：按显示宽度折行（argparse 自己用 len() 数，一个汉字只算 1 列，中文的说明就超出终端）。
    宽度和别的输出一样：终端的宽度，管道里 80 列（argparse 也留 2 列）。说明、结尾（epilog）里排好的行照旧，
    太长的那一行折开、悬挂缩进（wrap_hanging）。"""

    def __init__(self, prog, indent_increment=2, max_help_position=24, width=None):
        if width is None:
            width = terminal_width() - 2
        super().__init__(prog, indent_increment, max_help_position, width)

    def _split_lines(self, text, width):
        return wrap_cjk(re.sub(r"\s+", " ", text).strip(), width)

    def _fill_text(self, text, width, indent):
        return "\n".join(x for line in text.splitlines() for x in wrap_hanging(indent + line, width))

    def _format_action(self, action):
        """argparse 按 len() 在参数名后面补空格对齐说明：参数名里有中文（"练习号"）时多补了，减掉；
        减完不到 2 格就把说明挪到下一行（说明的其余行本来就从那一列开始）。"""
        text = super()._format_action(action)
        header = self._format_action_invocation(action)
        extra = cell_len(header) - len(header)
        first, nl, rest = text.partition("\n")
        end = first.find(header) + len(header)
        help_text = first[end:].lstrip(" ")
        if not extra or not help_text:
            return text
        column = len(first) - len(help_text)            # 说明从第几个字符开始（= argparse 的 help_position）
        if column - end - extra >= 2:
            return first[:end] + " " * (column - end - extra) + help_text + nl + rest
        return first[:end] + "\n" + " " * column + help_text + nl + rest


def _choices(text):
    """argparse 列出的可选值 "1, 2, 3" 或 "'lru', 'lfu'"（3.12.8 以前字符串带引号）→ "1、2、3" / "lru、lfu"。"""
    return "、".join(x.strip().strip("'\"") for x in text.split(","))


# argparse 的英文报错（Python 3.10–3.13 的写法）→ 中文；认不出的原样留着。每条：(正则, 中文的写法)
_ARG = r"argument (?P<arg>[^:]+): "
ARGPARSE_MESSAGES = (
    (_ARG + r"invalid choice: (?P<got>.*?)(?:, maybe you meant .*?\?)? \(choose from (?P<choices>.*)\)",
     lambda m: f"{m['arg']} 只能是 {_choices(m['choices'])}（收到 {m['got']}）"),
    (_ARG + r"invalid int value: (?P<got>.*)", lambda m: f"{m['arg']} 要一个整数（收到 {m['got']}）"),
    (_ARG + r"invalid float value: (?P<got>.*)", lambda m: f"{m['arg']} 要一个数（收到 {m['got']}）"),
    (_ARG + r"invalid \S+ value: (?P<got>.*)", lambda m: f"{m['arg']} 的值不对（收到 {m['got']}）"),
    (_ARG + r"expected one argument", lambda m: f"{m['arg']} 后面要跟一个值"),
    (_ARG + r"expected (?:at least one|at most one|\d+) arguments?", lambda m: f"{m['arg']} 后面跟的值的个数不对"),
    (_ARG + r"not allowed with argument (?P<other>.+)", lambda m: f"{m['arg']} 不能和 {m['other']} 一起用"),
    (_ARG + r"ignored explicit argument (?P<got>.+)", lambda m: f"{m['arg']} 后面不跟值（收到 {m['got']}）"),
    (r"unrecognized arguments: (?P<rest>.*)", lambda m: f"不认识的参数：{m['rest']}"),
    (r"the following arguments are required: (?P<args>.+)", lambda m: f"缺少参数：{m['args']}"),
    (r"ambiguous option: (?P<opt>\S+) could match (?P<matches>.+)",
     lambda m: f"{m['opt']} 不知道是哪一个：{_choices(m['matches'])}（写全）"),
)


def argparse_message(message):
    """argparse 的英文报错换成中文（ARGPARSE_MESSAGES）；认不出的（包括脚本自己写的中文报错）原样返回。

    >>> argparse_message("argument --demo: invalid choice: 0 (choose from 1, 2, 3, 4, 5)")
    '--demo 只能是 1、2、3、4、5（收到 0）'
    >>> argparse_message("argument --block: invalid int value: 'abc'")
    "--block 要一个整数（收到 'abc'）"
    >>> argparse_message("unrecognized arguments: --trace x"), argparse_message("--block 只对 --trace 有效")
    ('不认识的参数：--trace x', '--block 只对 --trace 有效')
    """
    for pattern, chinese in ARGPARSE_MESSAGES:
        m = re.fullmatch(pattern, message, flags=re.S)
        if m:
            return chinese(m)
    return message


class ArgParser(argparse.ArgumentParser):
    """参数不对时只打一行中文的错误（说清是哪个参数，argparse 的英文报错换成中文），退出码 2，
    不打印用法大段文字或 traceback。--help 按显示宽度折行（HelpFormatter）。

    >>> ArgParser(prog="04_prefix_caching.py").format_usage().startswith("usage:")
    True
    """

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", HelpFormatter)
        help_flag = kwargs.get("add_help", True)
        kwargs["add_help"] = False
        super().__init__(*args, **kwargs)
        if help_flag:
            self.add_argument("-h", "--help", action="help", default=argparse.SUPPRESS, help="印出这段说明，不运行")

    def error(self, message):
        self.exit(2, f"{self.prog}: 参数错误：{argparse_message(message)}；--help 查看用法\n")


def fail(where, message):
    """输入有错：在 stderr 打一行 "where: message"，退出码 2（用在读文件、检查参数的地方）。"""
    print(f"{where}: {message}", file=sys.stderr)
    raise SystemExit(2)
