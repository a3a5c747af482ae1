"""检查器的共用工具：没通过时的说明（Fail）、调用学生代码的办法、计时。

- 学生的每次调用都拿到输入的一份副本（fresh）；调用之后副本变了，就是"改了调用者的输入"，没通过；
- 学生代码抛的异常带着当时的调用（Crash）报出去：学生能照着这一行在 python 里重现；
- 学生和参考实现各自的用时记在 CLOCK 里，一个用例跑完由 check.py 对照时间预算（参考的 10 倍，至少 1 秒）。
"""
import copy
import time
from types import SimpleNamespace

import numpy as np

from exercises.mine import CaseTimeout

CLOCK = {"ref": 0.0, "mine": 0.0}      # 这个用例里参考实现、学生代码各用了多少秒（check.py 每个用例前清零）


class Fail(Exception):
    """一个用例没通过：输入（完整的调用）、应当是什么、实际是什么、一句提示。"""

    def __init__(self, given, expected, got, hint):
        super().__init__(hint)
        self.given, self.expected, self.got, self.hint = given, expected, got, hint


class Crash(Exception):
    """学生的代码抛了异常：记下当时的调用（异常本身是 __cause__）。"""

    def __init__(self, given):
        super().__init__(given)
        self.given = given


def show(x, limit=600):
    """用例里显示一个值：numpy 数组写成 np.array([...])，太长的截断。"""
    if isinstance(x, np.ndarray):
        s = f"np.array({x.tolist()!r})"
        if x.dtype != np.int64 and x.dtype.kind in "iu":
            s = f"np.array({x.tolist()!r}, dtype=np.{x.dtype})"
    elif isinstance(x, str):
        s = x
    else:
        s = repr(x)
    if len(s) > limit:
        s = s[:limit - 3] + "..."
    return s


def call_text(name, args=(), kwargs=None):
    """'block_hashes([1, 2, 3], 2)'：一次调用的完整写法，学生可以照着在 python 里重现。"""
    parts = [show(a) if not isinstance(a, str) else repr(a) for a in args]
    parts += [f"{k}={v!r}" for k, v in (kwargs or {}).items()]
    return f"{name}({', '.join(parts)})"


def equal(a, b):
    """值相等：numpy 数组按形状和每个元素比；list 和 tuple 逐个比（[k, v] 和 (k, v) 一样）。"""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        try:
            a, b = np.asarray(a), np.asarray(b)
        except ValueError:
            return False
        return a.shape == b.shape and np.array_equal(a, b)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(equal(x, y) for x, y in zip(a, b))
    return a == b


def same(got, expected, given, hint):
    if not equal(got, expected):
        raise Fail(given, show(expected), show(got), hint)


def fresh(x):
    """输入的一份副本：每次调用学生的代码都给新的一份，参考实现和学生不共用同一个 list。"""
    if isinstance(x, np.ndarray):
        return x.copy()
    if isinstance(x, (list, dict, set)):
        return copy.deepcopy(x)
    if isinstance(x, SimpleNamespace):
        return SimpleNamespace(**{k: fresh(v) for k, v in vars(x).items()})
    return x


def snapshot(x):
    """能比较的"样子"：调用前后各取一次，不同就是学生的代码改了输入。"""
    if isinstance(x, np.ndarray):
        return ("array", x.dtype.str, x.shape, x.tobytes())
    if isinstance(x, (list, tuple)):
        return (type(x).__name__, tuple(snapshot(v) for v in x))
    if isinstance(x, dict):
        return ("dict", tuple((repr(k), snapshot(v)) for k, v in x.items()))
    if isinstance(x, set):
        return ("set", frozenset(x))
    if isinstance(x, SimpleNamespace):
        return ("ns", tuple((k, snapshot(v)) for k, v in sorted(vars(x).items())))
    return x


def mine(given, thunk):
    """跑一段学生的代码（thunk()）：计时；抛异常时带着 given（当时的调用）报出去。"""
    t = time.perf_counter()
    try:
        return thunk()
    except (Fail, NotImplementedError):
        raise
    except CaseTimeout as e:              # 超时：记下停在哪一次调用
        if e.given is None:
            e.given = given
        raise
    except Exception as e:
        raise Crash(given) from e
    finally:
        CLOCK["mine"] += time.perf_counter() - t


def student(fn, name, *args, given=None, what=None, **kwargs):
    """调用学生的函数：每个参数给一份副本；调用之后副本变了 → 没通过（改了调用者的输入）。
    what：参数的名字（提示里用），默认 arg0、arg1……"""
    text = given or call_text(name, args, kwargs)
    copies = [fresh(a) for a in args]
    before = [snapshot(a) for a in copies]
    out = mine(text, lambda: fn(*copies, **kwargs))
    for k, (b, c) in enumerate(zip(before, copies)):
        if snapshot(c) != b:
            label = what[k] if what else f"第 {k + 1} 个参数"
            raise Fail(text, f"调用之后 {label} 不变：{show(args[k], 200)}", f"变成了 {show(c, 200)}",
                       f"你的代码改了调用者传进来的 {label}（比如 pop、del、原地赋值）：调用者之后还要用它。"
                       "要改就先复制一份（list(x)、x.copy()）")
    return out


def ref(thunk):
    """跑一段参考实现的代码，计时（时间预算按它算）。"""
    t = time.perf_counter()
    try:
        return thunk()
    finally:
        CLOCK["ref"] += time.perf_counter() - t


def need(probe, m, *names):
    """用到真实数据的用例先在很小的输入上试一下要用的名字：还没写就马上停（不用先造 trace、跑参考实现）。"""
    for name in names:
        probe[name](m[name])
