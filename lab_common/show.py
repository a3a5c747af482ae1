"""打印：演示的标题、一张表、至多两条"观察"（claim），数字的格式，设置的检查，脚本的入口。

每个脚本都是同一个样子：

    def demo_hashing():
        \"\"\"两个请求的开头相同，它们的块哈希有几块相同？\"\"\"     # docstring 就是这个演示的问题
        rows = ...                                                   # 算
        show.table(["请求", "哈希"], rows)                           # 一张表
        show.claim(f"A 和 B 的前 {n} 块哈希相同……", n == 3,          # 一条观察：条件不成立时印 ✗ 和反驳它的数
                   f"相同的块 {n}")

    DEMOS = [("演示 1：链式哈希", demo_hashing), ...]   # main(argv)：show.parser → show.run；入口 show.quietly(main)

输出是纯文本、80 列（管道、文件、测试里都一样，逐字节可复现）；--step 的停顿和清屏只在终端上。
"""
import argparse
import math
import multiprocessing
import os
import re
import sys
import traceback
import unicodedata

WIDTH = 80        # 一行最多几列（中文字占 2 列）：投影仪上的 80 × 30 终端
STEP = False      # --step 且在终端上：每个演示先问问题、等回车，再印表和观察（run 设置）
_claims = [0]     # 这个演示已经印了几条观察（header 清零）


# ---- 数字的格式：非零的数不印成 0，小于 1 的比例不印成 100%，不印 -0 ----

def num(x, nd=0):
    """千分位、nd 位小数。非零的数舍入成 0 时印 '< 0.01' 这样的界，不印 '0.00'；不印 '-0'。

    >>> num(1234567), num(0.4644, 2), num(0.001, 2), num(-0.0001, 1), num(-0.0)
    ('1,234,567', '0.46', '< 0.01', '> -0.1', '0')
    """
    s = f"{x:,.{nd}f}"
    if x != 0 and float(s.replace(",", "")) == 0:      # 舍入成了 0：印出界
        bound = f"{10 ** -nd:.{nd}f}"
        if x > 0:
            return f"< {bound}"
        return f"> -{bound}"
    if s.startswith("-") and float(s.replace(",", "")) == 0:
        s = s[1:]                                      # -0.00 → 0.00
    return s.replace("-", "−") if x < 0 else s


def pct(frac, nd=0):
    """比例印成百分数；小于 1 的不印成 100%，大于 0 的不印成 0%。

    >>> pct(0.4644), pct(0.9996), pct(0.0004), pct(1.0), pct(0.5, 1)
    ('46%', '> 99%', '< 1%', '100%', '50.0%')
    """
    s = f"{frac * 100:.{nd}f}"
    top, low, step = f"{100:.{nd}f}", f"{0:.{nd}f}", f"{10 ** -nd:.{nd}f}"
    if s == top and frac < 1:
        return f"> {100 - 10 ** -nd:.{nd}f}%"
    if s == low and frac > 0:
        return f"< {step}%"
    return num(frac * 100, nd) + "%"


def times(x, nd=1):
    """倍数：times(3.44) 是 '3.4×'。"""
    return num(x, nd) + "×"


def size(nbytes):
    """字节数，二进制单位，三位有效数字：'320 KiB'、'1.56 TiB'。

    >>> size(327680), size(1.7e12), size(512)
    ('320 KiB', '1.55 TiB', '512 B')
    """
    for unit, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= scale:
            v = nbytes / scale
            return f"{v:.{max(0, 2 - int(math.log10(v)))}f} {unit}"
    return f"{num(nbytes)} B"                      # 负数（学生的错答案）也用 − 号


def value(text):
    """印出来的格子读回成数（观察比较的是印出来的值，不是背后没印出的位）：'1,234' → 1234、'46%' → 0.46、'3.4×' → 3.4。

    >>> value("1,234"), value("46%"), value("3.4×"), value("−2.5"), value("< 0.01")
    (1234.0, 0.46, 3.4, -2.5, 0.01)
    """
    t = text.replace(",", "").replace("−", "-").lstrip("<> ").rstrip("×")
    if t.endswith("%"):
        return float(t[:-1]) / 100
    return float(t.split()[0])


# ---- 文字：按显示宽度折行 ----

def cols(text):
    """显示宽度：中文字（全角）占 2 列。

    >>> cols("LRU 命中率")
    10
    """
    return sum(1 + (unicodedata.east_asian_width(c) in "WF") for c in text)


_NO_START = set("，。；：、）》」！？%×")       # 不放在行首的标点：折行时带上前一个字
_NO_END = set("（《「“")                       # 不留在行尾的开括号
_UNITS = {"ms", "s", "µs", "GB/s", "Gbps", "GiB", "MiB", "KiB", "TiB", "GB", "MB", "KB", "TB", "B", "W"}


def _words(text):
    """折行的单位：一串英文 / 数字（连同后面的一个空格），或一个别的字。'b = 22'、'64.2 ms' 粘成一个，不拆开。"""
    out = []
    for w in re.findall(r"[A-Za-zµ0-9²_.,%×/+\-−:()'~§=]+ ?|.", text):
        prev = out[-1].rstrip() if out else ""
        glue = out and out[-1].endswith(" ") and (
            w.rstrip() == "=" or prev.endswith("=") or prev[-1:].isdigit() and w.rstrip() in _UNITS)
        if glue:
            out[-1] += w
        else:
            out.append(w)
    return out


def wrap(text, width=WIDTH, indent=0):
    """按显示宽度折行，英文单词和数字不拆开，标点不放行首，开括号不留行尾；续行缩进 indent 列。

    >>> wrap("缓存命中率 hit ratio 很高。", 12)
    ['缓存命中率', 'hit ratio 很', '高。']
    >>> wrap("一二三四五六七，八", 14), wrap("取 a = 4、b = 22", 12)
    (['一二三四五六', '七，八'], ['取 a = 4、', 'b = 22'])
    """
    lines, line = [], []
    for w in _words(text):
        room = width - (indent if lines else 0)
        if line and cols("".join(line) + w.rstrip()) > room:
            keep = len(line)                      # 这一行留下前 keep 个词，其余挪到下一行
            while keep > 1 and (line + [w])[keep][0] in _NO_START:
                keep -= 1
            while keep > 1 and line[keep - 1] in _NO_END:
                keep -= 1
            lines.append("".join(line[:keep]).rstrip())
            line = line[keep:]
            if line:
                line[0] = line[0].lstrip()
            else:
                w = w.lstrip()
        line.append(w)
    lines.append("".join(line).rstrip())
    return [lines[0]] + [" " * indent + x for x in lines[1:]]


# ---- 标题、表、观察 ----

def header(title, question=None):
    """演示的标题。--step（终端上）：先清屏、印标题和问题"想一想：…"，等回车，再往下印表和观察。"""
    _claims[0] = 0
    if STEP:
        print("\033[2J\033[H", end="")                 # 清屏，光标回到左上角
    print(f"\n{'═' * WIDTH}\n{title}\n{'─' * WIDTH}")
    if STEP and question:
        print("\n".join(wrap("想一想：" + question, WIDTH - 2, indent=8)))
        pause("（回车看结果）")
        print("（计算中…）", end="\r", flush=True)      # 算几秒时课堂上看得到；下一行印在它上面


def note(text):
    """一段说明（设置、单位、出处）：折到 80 列。"""
    print("\n".join(wrap(text, WIDTH)))


def table(headers, rows, caption=None):
    """一张表：列之间 3 个空格，数字列右对齐（'-' 和空格子不算），表头下一条横线。caption：表下的一段说明。"""
    rows = [[str(c) for c in r] for r in rows]
    widths = [max(cols(str(h)), *(cols(r[j]) for r in rows)) for j, h in enumerate(headers)]
    right = [bool(rows) and all(re.fullmatch(r"[<>≈ ]*[−-]?[\d,.]+(%|×| \S+)?", r[j]) or r[j] in ("-", "") for r in rows)
             for j in range(len(headers))]        # 数字列（"1,234" "46%" "3.4×" "< 0.01" "320 KiB"）右对齐

    def line(cells):
        out = []
        for c, w, r in zip(cells, widths, right):
            pad = " " * (w - cols(c))
            out.append(pad + c if r else c + pad)
        return "   ".join(out).rstrip()

    print(line([str(h) for h in headers]))
    print("─" * (sum(widths) + 3 * (len(widths) - 1)))
    for r in rows:
        print(line(r))
    if caption:
        print("\n".join(wrap(caption, WIDTH, indent=2)))


def claim(text, holds, evidence):
    """一条观察：这一讲的一个要点，用表里印出的数核对。

    holds 为真：印 text（句子里的数取自表）。为假（学生改了设置或类）：这一行以 ✗ 开头，说这个要点在这组设置下
    不成立，并印出反驳它的数 evidence——不印一句假话。"""
    _claims[0] += 1
    if _claims[0] == 1:
        print("观察")
    if holds:
        line = f"  {_claims[0]}. {text}"
    else:
        line = f"  {_claims[0]}. ✗ 在这组设置下不成立：{evidence}（要点：{text}）"
    print("\n".join(wrap(line, WIDTH, indent=5)))


# ---- 设置、出错 ----

def fail(message, code=2):
    """一行说明哪里不对（脚本名开头），退出码 2：不合理的设置、坏的 trace 文件。"""
    print(f"{os.path.basename(sys.argv[0] or 'script')}: {message}", file=sys.stderr)
    sys.exit(code)


def check(name, value_, ok, allowed):
    """设置不合理就一行拒绝：check("BLOCK_SIZE", BLOCK_SIZE, is_int(BLOCK_SIZE, 1, 1024), "1 到 1,024 的整数")。"""
    if not ok:
        fail(f"设置 {name} = {value_!r} 不合理：应为{allowed}")


def is_int(x, lo, hi):
    """lo ≤ x ≤ hi 的整数（bool 不算）。"""
    return isinstance(x, int) and not isinstance(x, bool) and lo <= x <= hi


def is_number(x, lo, hi):
    """lo ≤ x ≤ hi 的有限实数（bool、-0.0 不算：符号会在后面冒出来）。严格为正的设置 lo 写有意义的最小值（如 0.01）。"""
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
        return False
    return lo <= x <= hi and not (x == 0 and math.copysign(1, x) < 0)


def is_ints(xs, lo, hi):
    """一串严格递增、各不相同的整数，都在 lo..hi 之间（元组设置：重复的值不接受）。"""
    return (isinstance(xs, (tuple, list)) and len(xs) > 0 and all(is_int(x, lo, hi) for x in xs)
            and all(a < b for a, b in zip(xs, xs[1:])))


# ---- 入口：argparse、--step、Ctrl-C 和关掉的管道 ----

def parser(doc, demos):
    """--demo N、--step、--mine；--help 列出各演示和它的问题。脚本可以再加自己的参数（--trace）。"""
    listing = "\n".join(f"  {title}：{fn.__doc__.strip()}" for title, fn in demos)
    p = argparse.ArgumentParser(description=doc.split("\n\n")[0].strip(), epilog="演示：\n" + listing,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--demo", type=int, choices=range(1, len(demos) + 1), metavar="N", help="只跑第 N 个演示")
    p.add_argument("--step", action="store_true", help="每个演示先问问题、按回车再看结果（只在终端上）")
    p.add_argument("--mine", action="store_true", help="用你在 exercises/ 里写的函数跑")
    return p


def pause(prompt):
    """--step 时在终端上等回车（管道里从不等）。"""
    if STEP:
        input(prompt)


def run(demos, args):
    """按顺序跑演示（--demo N：只跑第 N 个）；每个演示的标题之后是它的 docstring 问的问题。"""
    global STEP
    STEP = bool(args.step) and sys.stdin.isatty() and sys.stdout.isatty()
    for i, (title, fn) in enumerate(demos, 1):
        if args.demo in (None, i):
            header(title, fn.__doc__.strip())
            fn()
            if i < len(demos) and args.demo is None:
                pause("（回车看下一个演示）")


def quietly(main):
    """跑 main(sys.argv[1:])：Ctrl-C（或 --step 时 Ctrl-D）印一行、退出码 130；管道被关（| head）什么都不印；学生代码里出的错只印一行：
    exercises/ 里哪个文件、哪一行、什么错（退出码 1）。其余的错照常印 traceback（那是本课代码的 bug）。"""
    try:
        sys.exit(main(sys.argv[1:]))
    except (KeyboardInterrupt, EOFError):           # Ctrl-C；--step 的提示处按了 Ctrl-D
        stop(f"\n{os.path.basename(sys.argv[0])}: 已中断", 130)
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())    # 退出时冲缓冲区也不再报错
        sys.exit(0)
    except Exception as err:
        where = [(f.filename, str(f.lineno), f.name) for f in traceback.extract_tb(err.__traceback__)]
        where += re.findall(r'File "(.+)", line (\d+), in (\S+)', getattr(err.__cause__, "tb", ""))  # 工作进程里的
        mine = [w for w in where if f"{os.sep}exercises{os.sep}" in w[0]]
        if not mine:
            raise
        file, line, name = mine[-1]
        stop(f"{os.path.basename(sys.argv[0])}: 你的代码出错：exercises/{os.path.basename(file)} 第 {line} 行（{name}）："
             f"{type(err).__name__}: {' '.join(str(err).split())}", 1)      # 多行的错误信息也只占一行


def stop(message, code):
    """印一行就结束：还在算的工作进程（它们不理 Ctrl-C）直接停下，不等它们算完，也不做进程池退出时的收尾（会卡住）。"""
    for child in multiprocessing.active_children():
        child.kill()
    try:
        sys.stdout.flush()                 # 已经印出的写出去（管道、文件里不丢）
    finally:
        print(message, file=sys.stderr)
        os._exit(code)
