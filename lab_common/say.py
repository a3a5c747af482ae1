"""观察句子的共用词汇：数字怎么印、两个数怎么比、范围和变化怎么说、大小带什么单位、个数怎么数。

规则只有一条：**句子按印出来的值说话**。先用和表格相同的格式把数印成字符串，再比较印出来的字符串：
印出来相同就说"一样"，范围两端印出来相同就只写一个值，绝不印 "-0"，大小自己挑单位（160 MiB 不会印成 "0 GiB"）。
印出来的值不说假话：不是 0 的数不印成 0（多给一位小数，还是 0 就写 "< 0.1%"），不到 1 的比例不印成 100%
（"> 99.9%"）；"< x"、"> x" 也是印出来的值，比较时它比 x 小（大）一点点，两个 "< 1%" 算一样。

    >>> f2 = fixed(2)                              # 和表格一样：两位小数
    >>> vs("LRU", 0.4612, "LFU", 0.3871, f2)
    'LRU 比 LFU 高（0.46 对 0.39）'
    >>> vs("LRU", 0.4612, "LFU", 0.4649, f2)       # 原始值不同，印出来相同：一样
    'LRU 和 LFU 一样（都是 0.46）'
    >>> change(0.61, 0.33, f2), change(0.612, 0.608, f2)
    ('从 0.61 降到 0.33', '保持在 0.61')
    >>> span([0.041, 0.044], f2), span([0.04, 0.3], f2)
    ('0.04', '0.04–0.30')
    >>> size(160 * 2**20), size(1.53 * 2**40), pct(0.004), pct(0.0004), pct(0.9996), pct(0)
    ('160 MiB', '1.53 TiB', '0.4%', '< 0.1%', '> 99.9%', '0%')

一个"格式"就是一个函数 x → 字符串（fixed(2)、pct、size、times……），比较函数都收这样一个格式。
"""
import math
import re

# ---------------------------------------------------------------------------
# 印数字：所有格式都经过 _no_neg_zero，不会出现 "-0"、"-0.0"、"-0%"


def _no_neg_zero(s):
    """'-0.00' → '0.00'，'-0%' → '0%'；真正的负数不动。

    >>> _no_neg_zero("-0.00"), _no_neg_zero("-0.01"), _no_neg_zero("-0 µs")
    ('0.00', '-0.01', '0 µs')
    """
    if s.startswith(("-", "−")) and not re.search(r"[1-9]", s.split(" ")[0]):
        return s[1:]
    return s


def _digits(x, nd):
    """x 印成 nd 位小数、千分位；不印 -0。"""
    return _no_neg_zero(f"{x:,.{max(nd, 0)}f}")


def _is_zero(text):
    return not re.search(r"[1-9]", text)


def honest(x, nd, extra=1, top=None):
    """x 印成 nd 位小数，但不说假话：x 不是 0 却印成 0 时多给 extra 位小数，还是 0 就写 "< 0.1"（负数 "> -0.1"）；
    top（例如 100）：x 比 top 小却印成 top 时同样多给一位，还是 top 就写 "> 99.9"。返回不带单位的字符串。

    >>> honest(0.4, 0), honest(0.04, 0), honest(-0.04, 0), honest(0, 2), honest(0.3, 0, extra=0)
    ('0.4', '< 0.1', '> -0.1', '0.00', '< 1')
    >>> honest(99.6, 0, top=100), honest(99.96, 0, top=100), honest(100, 0, top=100), honest(99.4, 0, top=100)
    ('99.6', '> 99.9', '100', '99')
    """
    text = _digits(x, nd)
    if x != 0 and _is_zero(text):
        for more in range(1, extra + 1):
            text = _digits(x, nd + more)
            if not _is_zero(text):
                return text
        bound = _digits(10.0 ** -(nd + extra), nd + extra)
        if x < 0:
            return f"> -{bound}"
        return f"< {bound}"
    if top is not None and x < top and value(text) >= top:
        for more in range(1, extra + 1):
            text = _digits(x, nd + more)
            if value(text) < top:
                return text
        return f"> {_digits(top - 10.0 ** -(nd + extra), nd + extra)}"
    return text


def _with_unit(text, unit):
    if unit:
        return f"{text} {unit}"
    return text


def fixed(nd=2, unit="", top=None):
    """固定小数位、千分位的格式：fixed(1)(1234.56) == '1,234.6'；unit 跟在数后面（前面空一格）。
    不是 0 的数不印成 0：多给一位小数，还是 0 就写 "< 0.001"。top=1（命中率这样的比例）：不到 1 的不印成 1.00。

    >>> fixed(0, "s")(3.4), fixed(1)(-0.04), fixed(2)(0.456), fixed(2, "s")(0.004), fixed(2, "s")(0.0004)
    ('3 s', '-0.04', '0.46', '0.004 s', '< 0.001 s')
    >>> fixed(2, top=1)(0.9983), fixed(2, top=1)(0.99996), fixed(2, top=1)(1.0), fixed(2)(0.9983)
    ('0.998', '> 0.999', '1.00', '1.00')
    """
    def f(x):
        return _with_unit(honest(x, nd, top=top), unit)
    return f


def integer(x):
    """千分位整数：integer(23608) == '23,608'；不是 0 的数不印成 0：integer(0.2) == '< 1'，integer(-0.2) == '> -1'。

    >>> integer(23608), integer(0.2), integer(-0.2), integer(0)
    ('23,608', '< 1', '> -1', '0')
    """
    return honest(x, 0, extra=0)


def pct(frac, nd=0):
    """比例 → 百分数：pct(0.623) == '62%'，pct(0.0623, 1) == '6.2%'。不会印 '-0%'；
    不是 0 的比例不印成 0%、不到 1 的比例不印成 100%（多给一位小数，还不行就写 "< 0.1%"、"> 99.9%"）。

    >>> pct(0.623), pct(0.004), pct(0.0004), pct(0.996), pct(0.9996), pct(1.0), pct(0.0004, 1)
    ('62%', '0.4%', '< 0.1%', '99.6%', '> 99.9%', '100%', '0.04%')
    """
    return honest(frac * 100, nd, top=100) + "%"


def share(frac):
    """整体里的一部分 → 百分数：就是 pct（只有真的全部 / 真的没有才印 100% / 0%）。

    >>> share(0.62), share(0.9996), share(1.0), share(0.0004), share(0)
    ('62%', '> 99.9%', '100%', '< 0.1%', '0%')
    """
    return pct(frac)


def pct1(frac):
    """一位小数的百分数：pct1(0.0634) == '6.3%'，pct1(0.0004) == '0.04%'。"""
    return pct(frac, 1)


def pct_of(part, whole, fmt, nd=0):
    """part 是 whole 的百分之几，按印出来的两个数算：读者拿印出来的数去除，得到的就是这个百分数。
    印出来的 whole 是 0 时说不出比例，返回 None。

    >>> pct_of(0.3365, 0.6232, pct), pct(0.3365 / 0.6232), pct_of(0.33, 0.614, fixed(2))
    ('55%', '54%', '54%')
    """
    whole = value(fmt(whole))
    if whole == 0:
        return None
    return pct(value(fmt(part)) / whole, nd)


def times(x, nd=2):
    """倍数：times(2.444) == '2.44×'；times(2.444, 1) == '2.4×'；times(0.0004) == '< 0.001×'。"""
    return honest(x, nd) + "×"


def times1(x):
    """一位小数的倍数：times1(1.39) == '1.4×'。"""
    return times(x, 1)


_BIN = [("B", 1), ("KiB", 2**10), ("MiB", 2**20), ("GiB", 2**30), ("TiB", 2**40), ("PiB", 2**50)]
_DEC = [("B", 1), ("KB", 1e3), ("MB", 1e6), ("GB", 1e9), ("TB", 1e12), ("PB", 1e15)]


def size(nbytes, binary=True):
    """字节数 → 自己挑单位、三位有效数字：不会把 160 MiB 印成 '0 GiB'。binary=False 用 1 GB = 10⁹ 字节。

    >>> size(0), size(320 * 1024), size(1.5 * 2**30), size(1562 * 2**30), size(16312e9, binary=False)
    ('0 B', '320 KiB', '1.50 GiB', '1.53 TiB', '16.3 TB')
    """
    units = _BIN
    if not binary:
        units = _DEC
    name, scale = units[0]
    for n, s in units:
        if abs(nbytes) >= s:
            name, scale = n, s
    v = nbytes / scale
    if scale == 1 or abs(v) >= 100 or float(v).is_integer():
        return f"{integer(v)} {name}"
    if abs(v) >= 10:
        return f"{honest(v, 1)} {name}"
    return f"{honest(v, 2)} {name}"


def count(n, unit):
    """个数 + 量词：count(1, '个请求') == '1 个请求'；count(0, '个请求') == '没有请求'（中文不说"0 个请求"）。

    >>> count(23608, "个请求"), count(0, "块")
    ('23,608 个请求', '没有块')
    """
    if n == 0:
        return "没有" + unit.lstrip("个")
    return f"{integer(n)} {unit}"


def listing(items, last="和"):
    """列举："A、B 和 C"：和前后照 words() 的规则，英文、数字旁边空一格，中文之间不空（"随机、负载均衡和全局"）。

    >>> listing(["A"]), listing(["A", "B", "C"]), listing(["随机", "负载均衡", "全局"]), listing([1, 2], last="或")
    ('A', 'A、B 和 C', '随机、负载均衡和全局', '1 或 2')
    """
    items = [str(x) for x in items]
    if len(items) <= 1:
        return "".join(items)
    return words("、".join(items[:-1]), last, items[-1])


def listed(values, fmt, all_same="都是"):
    """一列数按印出来的值列出（顿号隔开）；印出来都一样时只说一次。

    >>> listed([1.231, 1.229], fixed(2)), listed([0.04, 0.16], fixed(2)), listed([3], integer)
    ('都是 1.23', '0.04、0.16', '3')
    """
    shown = [fmt(v) for v in values]
    if len(shown) > 1 and len({value(x) for x in shown}) == 1:
        return f"{all_same} {shown[0]}"
    return "、".join(shown)


# ---------------------------------------------------------------------------
# 拼句子：中文和中文之间不空格，中文和英文 / 数字之间空一格


def _cjk(ch):
    return "\u3000" <= ch <= "\u9fff" or "\uff00" <= ch <= "\uffef"


def words(*parts):
    """把几段拼成一句：两边都是中文时直接连上，否则空一格。

    >>> words("LRU", "比", "LFU", "高"), words("本地", "和", "全局", "一样")
    ('LRU 比 LFU 高', '本地和全局一样')
    """
    out = ""
    for p in (str(x) for x in parts if str(x)):
        if out and not out[-1].isspace() and not p[0].isspace() and not (_cjk(out[-1]) and _cjk(p[0])):
            out += " "
        out += p
    return out


# ---------------------------------------------------------------------------
# 比较：都先印出来再比


_UNIT_SCALE = {u: s for u, s in _BIN + _DEC}


def value(text):
    """印出来的字符串 → 它表示的数（去掉千分位、%、×、单位；大小按单位换回字节），用来比较"印出来的值"。
    "< x" 比 x 小一点点、"> x" 比 x 大一点点：两个 "< 1%" 一样，"< 1%" 比 "1%" 小、比 "0%" 大。

    >>> value("1,234.5"), value("62%"), value("2.4×"), value("160 MiB") == 160 * 2**20, value("-0.3 s")
    (1234.5, 62.0, 2.4, True, -0.3)
    >>> 0 < value("< 0.1%") < 0.1, 99.9 < value("> 99.9%") < 100, value("< 1%") == value("< 1%")
    (True, True, True)
    """
    t = str(text).replace(",", "").replace("−", "-").strip()
    m = re.match(r"^([<>]\s*)?(-?\d+(?:\.\d*)?(?:e[-+]?\d+)?)\s*(.*)$", t)
    if not m:
        raise ValueError(f"不是印出来的数：{text!r}")
    v, rest = float(m.group(2)), m.group(3).strip()
    if m.group(1):
        nudge = 1e-9 * max(abs(v), 1e-12)
        if m.group(1).startswith("<"):
            nudge = -nudge
        v += nudge
    if rest in _UNIT_SCALE:
        v *= _UNIT_SCALE[rest]
    return v


def amount(text, less="不到", more="超过"):
    """接在动词后面的量："< 1%" → "不到 1%"，"> 99.9%" → "超过 99.9%"，其余原样（"少了不到 1%"，不说"少了 < 1%"）。

    >>> amount("< 1%"), amount("> 99.9%"), amount("62%")
    ('不到 1%', '超过 99.9%', '62%')
    """
    if text.startswith("< "):
        return f"{less} {text[2:]}"
    if text.startswith("> "):
        return f"{more} {text[2:]}"
    return text


def order(a, b, fmt):
    """按印出来的值比较：-1（a 小）、0（印出来相同）、1（a 大）。

    >>> order(0.461, 0.459, fixed(2)), order(0.47, 0.46, fixed(2)), order(1, 2, pct)
    (0, 1, -1)
    """
    va, vb = value(fmt(a)), value(fmt(b))
    if va == vb:
        return 0
    if va > vb:
        return 1
    return -1


def same(a, b, fmt):
    """印出来是否相同：same(0.461, 0.459, fixed(2)) → True。"""
    return order(a, b, fmt) == 0


def vs(name_a, a, name_b, b, fmt, more="高", less="低"):
    """"A 比 B 高（x 对 y）"；印出来相同时 "A 和 B 一样（都是 x）"。

    >>> vs("本地", 0.541, "全局", 0.538, fixed(2, "s"), more="慢", less="快")
    '本地和全局一样（都是 0.54 s）'
    """
    sa, sb = fmt(a), fmt(b)
    o = order(a, b, fmt)
    if o == 0:
        return words(name_a, "和", name_b, f"一样（都是 {sa}）")
    word = more
    if o < 0:
        word = less
    return words(name_a, "比", name_b, f"{word}（{sa} 对 {sb}）")


def by_order(named, pivot, fmt):
    """{名字: 值} 按印出来的值和 pivot 比，分成 (小于, 相同, 大于) 三组名字（顺序不变）。

    >>> by_order({1: 0.62, 16: 0.999, 256: 1.15}, 1, fixed(2))
    ([1], [16], [256])
    """
    groups = ([], [], [])
    for name, v in named.items():
        groups[order(v, pivot, fmt) + 1].append(name)
    return groups


def grouped(groups, unit, every=None):
    """[(名字们, 说法)] → "块 1、4 重算更快，块 256 换出更快"；空的组不说；只有一组且不止一个名字时说
    "每个…都是"（every 换掉"每个{unit}"，例如 "每个块大小下"）。

    >>> grouped([([1, 4], "重算更快"), ([], "一样"), ([256], "换出更快")], "块")
    '块 1、4 重算更快，块 256 换出更快'
    >>> grouped([([1, 4], "重算更快"), ([], "换出更快")], "块"), grouped([([16], "一样")], "块")
    ('每个块都是重算更快', '块 16 一样')
    """
    full = [(names, what) for names, what in groups if names]
    if every is None:
        every = f"每个{unit}"
    if len(full) == 1 and len(full[0][0]) > 1:
        return f"{every}都是{full[0][1]}"
    return "，".join(words(unit, "、".join(map(str, names)), what) for names, what in full)


def span(values, fmt, sep="–"):
    """一组数的范围 "lo–hi"；两端印出来相同时只写一个值。

    >>> span([353, 353], integer), span([99.5, 634.4], integer), span([3], integer)
    ('353', '100–634', '3')
    """
    values = list(values)
    if not values:
        raise ValueError("span() 需要至少一个数")
    lo, hi = fmt(min(values)), fmt(max(values))
    if value(lo) == value(hi):
        return lo
    return f"{lo}{sep}{hi}"


def change(a, b, fmt, up="升到", down="降到", flat="保持在"):
    """从 a 到 b："从 a 降到 b" / "从 a 升到 b"；印出来相同时 "保持在 a"。

    >>> change(24.12, 24.08, fixed(1)), change(8, 16, integer, up="增加到")
    ('保持在 24.1', '从 8 增加到 16')
    """
    o = order(b, a, fmt)
    if o == 0:
        return f"{flat} {fmt(a)}"
    word = up
    if o < 0:
        word = down
    return f"从 {fmt(a)} {word} {fmt(b)}"


def rel_change(before, after, nd=0, less="少了", more="多了", flat="没变"):
    """相对变化，按印出来的百分数说方向："少了 59%" / "多了 5%" / "多了 0.3%" / "没变（0%）"。不会说"少了 -5%"，
    也不把不是 0 的变化说成 0%（pct 多给一位小数，还是 0 就说"不到 0.1%"）。

    >>> rel_change(5.74, 2.35), rel_change(2.0, 2.1), rel_change(3.0, 3.01), rel_change(0, 0), rel_change(3.0, 3.001)
    ('少了 59%', '多了 5%', '多了 0.3%', '没变（0%）', '多了不到 0.1%')
    """
    if before == 0:
        frac = 0.0
        if after != 0:
            frac = math.copysign(math.inf, after)
    else:
        frac = (after - before) / abs(before)
    if math.isinf(frac):
        return f"{more}（原来是 0）"
    text = pct(abs(frac), nd)
    if value(text) == 0:
        return f"{flat}（{text}）"
    word = more
    if frac < 0:
        word = less
    return words(word, amount(text))


def ratio(a, b, nd=1, more="倍", same_word="一样"):
    """a 是 b 的几倍，按印出来的倍数说："是 2.4 倍" / "一样（1.0 倍）"；b = 0 时说不出倍数；
    不是 0 的倍数不印成 0（"是 0.04 倍"、"不到 0.01 倍"）；0.1 到 1 倍之间的多给一位小数，免得只剩一位有效数字
    （20,899 对 133,885 是 "0.16 倍"，不是 "0.2 倍"）。a、b 不同、倍数却印成 1.0 时多给小数
    （133,054 对 133,885 是 "0.99 倍"，不说"一样"）；多给三位还是 1 才说一样。

    >>> ratio(2.44, 1.0), ratio(1.02, 1.0), ratio(0.5, 1.0), ratio(1, 0), ratio(1, 25), ratio(1, 2000)
    ('是 2.4 倍', '是 1.02 倍', '是 0.50 倍', '无法相比（分母是 0）', '是 0.04 倍', '是不到 0.01 倍')
    >>> ratio(20899, 133885)
    '是 0.16 倍'
    >>> ratio(133054, 133885), ratio(1.00001, 1.0), ratio(3, 3)
    ('是 0.99 倍', '一样（1.0 倍）', '一样（1.0 倍）')
    """
    if b == 0:
        return "无法相比（分母是 0）"
    if 0.1 <= abs(a / b) < 1:
        nd += 1                                            # 0.156 印成 0.16（两位有效数字），不是 0.2
    r = honest(a / b, nd)
    extra = 1
    while a != b and value(r) == 1 and extra <= 3:        # 两个数不同：多给小数，直到看得出不是 1
        if value(honest(a / b, nd + extra)) != 1:
            r = honest(a / b, nd + extra)
        extra += 1
    if value(r) == 1 and r.replace(".", "").strip("0") == "1":
        return f"{same_word}（{honest(1, nd)} {more}）"
    return words("是", amount(r), more)


def rank(names_values, fmt, more=" > ", tie=" = "):
    """从高到低排一排，印出来相同的用 "="：rank([("LRU", .46), ("LFU", .391), ("LA", .389)], fixed(2))
    == 'LRU > LFU = LA'。

    >>> rank([("LRU", 0.46), ("LFU", 0.391), ("LA", 0.389)], fixed(2))
    'LRU > LFU = LA'
    """
    items = sorted(names_values, key=lambda nv: -value(fmt(nv[1])))
    out = str(items[0][0])
    for (_, prev), (name, v) in zip(items, items[1:]):
        sep = more
        if same(prev, v, fmt):
            sep = tie
        out += sep + str(name)
    return out


# ---------------------------------------------------------------------------
# 两列数逐点比（"A 在每一处都不低于 B，差得最多在 X"）；很小的差的格式


def never_below(name_a, a, name_b, b, fmt, at, every="在每一处"):
    """两列数 a、b（{点: 值}，点相同）按印出来的值逐点比：谁在每一处都不低于谁、差得最多在哪一点。
    at(点) 说出一个点（"10,000 块时"）。只有一个点时就是 vs；处处印出来相同时说"都一样"；
    B 处处不低于 A 时换过来说；互有高低时各举差得最多的一处。"差得最多"按印出来的两个数的差；几处印出来差得
    一样多时都说出来（"都差 0.44"），互有高低时一样多的按原值的差取一处。

    >>> f2, at = fixed(2), "{:,} 块时".format
    >>> never_below("LRU", {1: .46, 2: .60}, "LFU", {1: .39, 2: .60}, f2, at)
    'LRU 在每一处都不低于 LFU，1 块时差得最多（0.46 对 0.39）'
    >>> never_below("LRU", {1: .30, 2: .60}, "LFU", {1: .40, 2: .60}, f2, at, every="在每个容量")
    'LFU 在每个容量都不低于 LRU，1 块时差得最多（0.40 对 0.30）'
    >>> never_below("A", {1: .3, 2: .6}, "B", {1: .4, 2: .5}, f2, at)
    'A 和 B 互有高低：2 块时 A 比 B 高（0.60 对 0.50），1 块时 B 比 A 高（0.40 对 0.30）'
    >>> never_below("A", {1: .5932, 2: .5214}, "B", {1: .1474, 2: .0764}, f2, at)   # 0.59 − 0.15 = 0.52 − 0.08
    'A 在每一处都不低于 B，1 块时和 2 块时差得最多（都差 0.44）'
    >>> never_below("A", {1: .301, 2: .6}, "B", {1: .299, 2: .6}, f2, at), never_below("A", {7: .5}, "B", {7: .4}, f2, at)
    ('A 和 B 在每一处都一样', '7 块时 A 比 B 高（0.50 对 0.40）')
    """
    o = {k: order(a[k], b[k], fmt) for k in a}
    if -1 in o.values() and 1 not in o.values():
        return never_below(name_b, b, name_a, a, fmt, at, every)
    # 印出来的差（round 去掉浮点的零头：0.59 − 0.15 和 0.52 − 0.08 都是 0.44）；一样时按原值的差
    gap = {k: (round(value(fmt(a[k])) - value(fmt(b[k])), 9), a[k] - b[k]) for k in a}
    hi, lo = max(gap, key=gap.get), min(gap, key=gap.get)
    if len(a) == 1:
        return words(at(hi), vs(name_a, a[hi], name_b, b[hi], fmt))
    if 1 not in o.values():
        return words(name_a, "和", name_b, every, "都一样")
    if -1 not in o.values():
        top = [k for k in a if gap[k][0] == gap[hi][0]]          # 印出来差得一样多的几处
        if len(top) > 1:
            return words(name_a, every, "都不低于", name_b) + f"，{listing([at(k) for k in top])}差得最多（都差 {fmt(gap[hi][0])}）"
        return words(name_a, every, "都不低于", name_b) + f"，{at(hi)}差得最多（{fmt(a[hi])} 对 {fmt(b[hi])}）"
    return (words(name_a, "和", name_b, "互有高低：") + words(at(hi), vs(name_a, a[hi], name_b, b[hi], fmt)) + "，"
            + words(at(lo), vs(name_b, b[lo], name_a, a[lo], fmt)))


def sci(x, nd=1):
    """很小的差（max |diff|）：恰好 0 印 "0.0"（-0.0 也是），否则科学计数法。

    >>> sci(0.0), sci(-0.0), sci(3.04e-15), sci(2.5e-3, 2)
    ('0.0', '0.0', '3.0e-15', '2.50e-03')
    """
    if x == 0:
        return "0.0"
    return f"{x:.{nd}e}"


# ---------------------------------------------------------------------------
# 容量：total 里装得下几个完整的 each（01 的"一张卡放得下几个请求"，也适用于块、前缀……）


def whole(total, each, unit):
    """total 里有几个完整的 each（向下取整）；一个都不到时说"不到 1"，不说"0 个"或"没有"。

    >>> whole(62633, 2048, "个这样的请求"), whole(1000, 2048, "个请求"), whole(4096, 2048, "块")
    ('30 个这样的请求', '不到 1 个请求', '2 块')
    """
    n = int(total // each)
    if n == 0:
        return f"不到 1 {unit}"
    return count(n, unit)


# ---------------------------------------------------------------------------
# 相对的比较、一列数的走向、带正负号的差


def rel_vs(name_a, a, name_b, b, fmt, nd=0, more="高", less="低"):
    """"A 比 B 低 15%"（相对 B 的百分数）；a、b 按 fmt 印出来相同时 "A 和 B 一样（都是 x）"，不再说"低 0%"；
    印出来不同、百分数却印成 0% 时 "低不到 1%"；b = 0 时没有百分数，照 vs 说。

    >>> s2 = fixed(2, "s")
    >>> rel_vs("全局", 0.38, "本地", 0.44, s2), rel_vs("全局", 0.501, "本地", 0.499, s2)
    ('全局比本地低 14%', '全局和本地一样（都是 0.50 s）')
    >>> rel_vs("A", 100.2, "B", 100.6, fixed(1)), rel_vs("A", 3, "B", 0, fixed(1))
    ('A 比 B 低不到 1%', 'A 比 B 高（3.0 对 0.0）')
    """
    if same(a, b, fmt) or b == 0:
        return vs(name_a, a, name_b, b, fmt, more=more, less=less)
    frac, word = (a - b) / abs(b), more
    if frac < 0:
        word = less
    text = f"{word} {pct(abs(frac), nd)}"
    if value(pct(abs(frac), nd)) < 10 ** -nd:            # 印出来的差不到一个百分数的末位：说"不到"
        text = f"{word}不到 {pct(10 ** -nd / 100, nd)}"
    return words(name_a, "比", name_b, text)


def trend(values, fmt, up="升到", down="降到", flat="保持在"):
    """一列数从头到尾怎么变：change(第一个, 最后一个)；只有一个数时就说这个数，不说"从 8 到 8"、也不说"保持在"。
    和前面的字用 words() 连起来，空格才对："负载" + "151%" → "负载 151%"。

    >>> trend([0.2, 0.39, 1.51], pct), trend([1.51], pct), trend([0.2, 0.2], pct)
    ('从 20% 升到 151%', '151%', '保持在 20%')
    """
    values = list(values)
    if len(values) == 1:
        return fmt(values[0])
    return change(values[0], values[-1], fmt, up=up, down=down, flat=flat)


def signed(x, nd=1):
    """带正负号的差（百分点、毫秒……）：恰好是 0 时不带号；不是 0 的差不印成 0（多给一位小数，还是 0 就写 "< 0.01"）。

    >>> signed(1.84), signed(-2.25), signed(0.04), signed(-0.04), signed(1234.5, 0), signed(0), signed(0.001)
    ('+1.8', '-2.2', '+0.04', '-0.04', '+1,234', '0.0', '< 0.01')
    """
    s = fixed(nd)(x)
    if s[0] in "<>":
        return s
    if value(s) > 0:
        return "+" + s
    return s
