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
