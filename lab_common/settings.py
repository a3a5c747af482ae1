"""检查脚本顶部"学生可以改的设置"：不合理的值在开始时一行拒绝（说清常量名、收到的值、允许的范围），退出码 2。

    CAPACITIES = (None, 10_000, 1_000)
    check_setting("CAPACITIES", CAPACITIES, len(CAPACITIES) > 0, "至少一个容量（None = 无限）")

    >>> check_setting("BLOCK_SIZE", 16, 16 > 0, "正整数")      # 合理：什么都不发生
    >>> try:
    ...     check_setting("BLOCK_SIZE", -4, -4 > 0, "正整数", script="02_paged_attention.py")
    ... except SystemExit as e:
    ...     print("退出码", e.code)
    退出码 2
"""
import sys


def check_setting(name, value, ok, allowed, script=None):
    """ok 为假时：stderr 打一行 "脚本: 设置 NAME = 值 不合理：应为 …"，退出码 2（不打印 traceback）。"""
    if ok:
        return
    where = script or (sys.argv[0].rsplit("/", 1)[-1] if sys.argv and sys.argv[0] else "设置")
    text = " ".join(repr(value).split())   # 值里的换行也压成一行
    if len(text) > 80:
        text = text[:77] + "..."
    print(f"{where}: 设置 {name} = {text} 不合理：应为{allowed}", file=sys.stderr)
    raise SystemExit(2)


def is_int(x, lo=None, hi=None):
    """x 是整数（bool 不算）且在 [lo, hi] 里。is_int(16, 1) → True；is_int(2.5, 1) → False。"""
    if isinstance(x, bool) or not isinstance(x, int):
        return False
    return (lo is None or x >= lo) and (hi is None or x <= hi)


def is_number(x, lo=None, hi=None):
    """x 是有限的实数（bool 不算）且在 [lo, hi] 里。"""
    if isinstance(x, bool) or not isinstance(x, (int, float)) or x != x or x in (float("inf"), float("-inf")):
        return False
    return (lo is None or x >= lo) and (hi is None or x <= hi)


def is_sorted_ints(seq, lo=None, hi=None):
    """非空、从小到大、不重复的整数序列，每个在 [lo, hi] 里。is_sorted_ints((8, 16, 32), 1) → True；(32, 16) → False。"""
    if not isinstance(seq, (tuple, list)) or len(seq) == 0 or not all(is_int(x, lo, hi) for x in seq):
        return False
    return list(seq) == sorted(set(seq))


# ---------------------------------------------------------------------------
# 出处跟着设置走：论文的名字只印在仍是论文的值的设置旁边


class Source:
    """一个出自论文的数：value 是论文里的值，where 是出处（论文、版本、节 / 表 / 图），what 说它是什么。

    设置块里的常量照旧是普通的值；它的出处写在"论文的数字"一节里，用一个 Source 记下论文的值。演示运行时拿
    设置的当前值来问它：还是论文的值，才印论文的名字；学生改过了，就说这是自己的值（并把论文的值并排印出来）。

        ALPACA_MEAN = (19.31, 58.45)       # 设置：平均输入 / 输出长度
        VLLM_ALPACA = Source((19.31, 58.45), "vLLM 论文图 11(b)", "Alpaca 的平均输入 / 输出长度")
        print_text(f"长度按均值 {ALPACA_MEAN} 抽（{VLLM_ALPACA.beside(ALPACA_MEAN)}）")

    >>> src = Source((19.31, 58.45), "vLLM 论文图 11(b)", "Alpaca 的均值")
    >>> src.holds((19.31, 58.45)), src.holds([19.31, 58.45]), src.holds((20, 60))
    (True, True, False)
    >>> src.beside((19.31, 58.45))
    'vLLM 论文图 11(b) Alpaca 的均值'
    >>> src.beside((20, 60), fmt=lambda v: " / ".join(map(str, v)))
    '你设的值；vLLM 论文图 11(b) 是 19.31 / 58.45'
    >>> src.beside((20, 60), own="")          # 改过了就什么也不说
    ''
    """

    def __init__(self, value, where, what=""):
        self.value, self.where, self.what = value, where, what

    def holds(self, current):
        """current 还是论文的值吗？（元组和列表按元素比；数按 ==，所以 16 和 16.0 相同）"""
        return _plain(current) == _plain(self.value)

    def cite(self):
        """出处本身："vLLM 论文图 11(b) Alpaca 的均值"。"""
        return " ".join(x for x in (self.where, self.what) if x)

    def beside(self, current, fmt=str, own="你设的值"):
        """印在设置旁边的一段：还是论文的值时就是出处；改过了时 "你设的值；<出处> 是 <论文的值>"（own="" 时什么也不说）。"""
        if self.holds(current):
            return self.cite()
        if not own:
            return ""
        return f"{own}；{self.where} 是 {fmt(self.value)}"


def _plain(x):
    if isinstance(x, (tuple, list)):
        return tuple(_plain(v) for v in x)
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    return x


def changed(current, sources):
    """几个设置一起决定能不能和论文的一个数比（同一个实验条件）：返回改过了的设置名（按 sources 的顺序）。
    current = {名字: 当前值}，sources = {名字: Source}。

    >>> changed({"MAX_SEQ": 4096, "BLOCK_SIZE": 16},
    ...         {"MAX_SEQ": Source(2048, "vLLM §6.1"), "BLOCK_SIZE": Source(16, "vLLM §7.2")})
    ['MAX_SEQ']
    """
    return [name for name, src in sources.items() if not src.holds(current[name])]


# ---------------------------------------------------------------------------
# 一个设置不见了（改了名、删掉了）：一行拒绝，而不是 NameError 的 traceback


def missing_setting(err, script=None):
    """err 是读一个全大写的名字时的 NameError：返回一行说明（设置不见了）；不是这种错返回 None。

    >>> missing_setting(NameError("name 'BLOCK_SIZE' is not defined", name="BLOCK_SIZE"), "02.py")
    '02.py: 设置 BLOCK_SIZE 不见了（改了名或删掉了？）：把它加回脚本顶部的设置块'
    >>> missing_setting(NameError("name 'foo' is not defined", name="foo")) is None
    True
    """
    name = getattr(err, "name", None)
    if not name or not name.isupper():
        return None
    where = script or (sys.argv[0].rsplit("/", 1)[-1] if sys.argv and sys.argv[0] else "设置")
    return f"{where}: 设置 {name} 不见了（改了名或删掉了？）：把它加回脚本顶部的设置块"
