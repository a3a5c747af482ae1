"""检查练习：make check 查全部六个，make check EX=3 只查练习 3（就是 python exercises/check.py 3）。

和讲义的实现比三步：手算的例子（每个考一个想法）、几百个随机输入（一组变一样东西）、讲义的工作量（trace、小模型）。
第一个不同：那次调用、应当、你的、一句说哪个想法不对的提示。每步最多 LIMIT 秒；print 收起来。用例登记在 cases.py。
"""
import argparse
import contextlib
import copy
import importlib
import io
import os
import signal
import sys
import traceback

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
for _p in (os.path.join(ROOT, "lecture07"), ROOT):      # 讲义的模块（paged_kv、kv_store）；exercises、lab_common
    if _p not in sys.path:
        sys.path.insert(0, _p)
from lab_common import show                                    # noqa: E402
from exercises import cases                                    # noqa: E402

LIMIT = 5       # 秒：一步（一两次调用）最多跑这么久。讲义的实现每步不到 0.1 秒：慢一百倍也够，死循环几秒就停
ARGS_HINT = "你的代码改了调用者传进来的参数：调用者之后还要用它（要改就先复制一份）"


class Hang(BaseException):
    """一步跑了 LIMIT 秒还没完。BaseException：你代码里的 except Exception 拦不住它。"""


def _hang(signum, frame):
    raise Hang(f"{LIMIT} 秒还没完（多半是死循环）")


@contextlib.contextmanager
def guarded(printed):
    """一步：最多 LIMIT 秒（SIGALRM：Linux、macOS），print 收进 printed。"""
    old = signal.signal(signal.SIGALRM, _hang)
    signal.setitimer(signal.ITIMER_REAL, LIMIT)
    try:
        with contextlib.redirect_stdout(printed):
            yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def steps(play, impl, inp, printed=None):
    """跑一个输入（的一份新副本），逐个给出 (到这一步为止的调用, 看到的 {名字: 值})。printed 不是 None（你的代码）时
    每步限时、收起 print，出错时看到的就是那个异常，然后停。"""
    calls, gen = [], play(impl, copy.deepcopy(inp))
    while True:
        try:
            with guarded(printed) if printed is not None else contextlib.nullcontext():
                item = next(gen)
        except StopIteration:
            return
        except (Exception, Hang) as err:
            if printed is None:
                raise
            yield list(calls), err
            return
        if isinstance(item, str):
            calls.append(item)
        else:
            yield list(calls), item


def same(a, b):
    """相等：数组比 dtype 和每个元素；list 和 tuple 逐项比；int 和 float、bool 和 int 算不同；dict 用 ==。"""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.dtype == b.dtype and np.array_equal(a, b)
    if isinstance(a, (list, tuple)):
        return isinstance(b, (list, tuple)) and len(a) == len(b) and all(map(same, a, b))
    kinds = [(bool, np.bool_), (int, np.integer), (float, np.floating)]
    return [isinstance(a, k) for k in kinds] == [isinstance(b, k) for k in kinds] and a == b


def frame(err, path):
    """异常停在哪儿：你文件里的最后一帧（没有就是最后一帧）。"""
    frames = traceback.extract_tb(err.__traceback__)
    return ([f for f in frames if os.path.abspath(f.filename) == os.path.abspath(path)] or frames)[-1]


def compare(play, ref, impl, inp, printed, path):
    """一个输入：讲义的实现先跑完，你的一步一步跟着比。相同返回 None，否则 (调用, 哪一项, 应当, 你的)。"""
    for (calls, want), (_, got) in zip(list(steps(play, ref, inp)), steps(play, impl, inp, printed)):
        if isinstance(got, BaseException):
            f = frame(got, path)
            at = f"{os.path.basename(f.filename)} 第 {f.lineno} 行（{f.name}）"
            if isinstance(got, NotImplementedError):
                return calls, "还没写", None, f.name
            if isinstance(got, Hang):
                return calls, "超时", None, f"{got}，停在 {at}"
            return calls, "出错", next(iter(want.items())), f"{type(got).__name__}: {got}（{at}）"
        for key, value in want.items():
            mine = got.get(key, "（没有这一项）")
            if not same(value, mine):
                numbers = all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (value, mine))
                diff = f"（差 {mine - value:+,.6g}）".replace("-", "−") if numbers else ""
                return calls, key, (key, value), cases.text(mine) + diff
    return None


def lines(label, text, room):
    """'  标签：文字'，按 80 列折行（标点不放行首，所以按 78 折），最多 room 行，多的截掉写 …。"""
    out, pad = [], 2 + show.cols(label)
    for i, part in enumerate(text.split("\n")):
        out += show.wrap(("  " + label if i == 0 else " " * pad) + part, show.WIDTH - 2, indent=pad)
    return out if len(out) <= room else out[:room - 1] + [out[room - 1][:show.WIDTH - 10] + " …"]


def explain(stage, name, n, total, hint, fail):
    """第一个不同，至多 15 行：哪一组、调用、应当、你的、提示。"""
    calls, key, want, got = fail
    calls = calls if len(calls) <= 5 else [f"（前面还有 {len(calls) - 4} 步）"] + calls[-4:]
    which = f"（第 {n} 个，共 {total} 个）" if total > 1 else ""
    out = show.wrap(f"  {stage}：{name}{which}", show.WIDTH - 2, indent=4) + lines("调用：", "\n".join(calls), 5)
    if key == "还没写":
        return out + lines("", f"用到的 {got} 还没写（还在 raise NotImplementedError）", 2)
    if key == "超时":
        return out + lines("", got, 2) + lines("提示：", hint, 2)
    label = "" if want[0] in ("返回值", "字节数") else want[0] + " "
    out += lines("应当：", label + cases.text(want[1]), 2) + lines("你的：", ("出错 " if key == "出错" else label) + got, 2)
    return out + lines("提示：", ARGS_HINT if key.startswith("调用之后的") else cases.KEY_HINTS.get(key, hint), 3)


def check(number, impl, path):
    """检查一个练习，返回 (通过 / 没通过 / 还没写, 要印的行)。impl：{名字: 你的函数或类}；path：你的文件。"""
    ex, (ref, _), printed, counts = cases.EXERCISES[number], cases.reference(number), io.StringIO(), {}
    head = f"练习 {number} · {ex.title}（{os.path.relpath(path, ROOT)}）"
    for stage, name, hint, inputs, play in ex.groups():
        for n, inp in enumerate(inputs):
            fail = compare(play, ref, impl, inp, printed, path)
            if fail and fail[1] == "还没写" and not counts and n == 0:
                return "还没写", [f"练习 {number} 还没写（{os.path.relpath(path, ROOT)} 的 {fail[3]}）"]
            if fail:
                return "没通过", [f"{head}：没通过", *explain(stage, name, n + 1, len(inputs), hint, fail), *said(printed)]
        counts[stage] = counts.get(stage, 0) + len(inputs)
    done = "、".join(f"{stage} {k} 个" for stage, k in counts.items())
    return "通过", [f"{head}：通过", f"  {done}，都和讲义的实现相同", *said(printed)]


def said(printed):
    out = printed.getvalue().splitlines()
    if not out:
        return []
    return lines("print：", f"你的代码 print 了 {len(out):,} 行（检查时收起来了），最先的：{'；'.join(out[:3])}", 2)


def load(number):
    """读你的练习文件：返回 ({名字: 对象}, 文件, 出错时的一行说明)。"""
    ex = cases.EXERCISES[number]
    path = os.path.join(ROOT, "exercises", ex.file + ".py")
    try:
        with guarded(io.StringIO()):
            module = importlib.import_module("exercises." + ex.file)
    except (Exception, Hang) as err:
        at = f"第 {err.lineno if isinstance(err, SyntaxError) else frame(err, path).lineno} 行"
        return {}, path, f"练习 {number}：读 exercises/{ex.file}.py 时出错（{at}）：{type(err).__name__}: {err}"
    missing = [name for name in ex.names if not hasattr(module, name)]
    if missing:
        return {}, path, f"练习 {number}：exercises/{ex.file}.py 里没有 {missing[0]}（名字要和起始代码里的一样）"
    return {name: getattr(module, name) for name in ex.names}, path, None


def main(argv=None):
    p = argparse.ArgumentParser(description="检查 exercises/ 里的练习：手算的例子、随机输入、讲义的工作量")
    p.add_argument("numbers", nargs="*", type=int, metavar="练习号", help="只查这几个（1–6；不写就查全部）")
    numbers = set(p.parse_args(argv).numbers)
    if numbers - set(cases.EXERCISES):
        p.error(f"没有练习 {min(numbers - set(cases.EXERCISES))}：练习号是 1–6")
    result = {}
    for number in sorted(numbers) or sorted(cases.EXERCISES):
        impl, path, error = load(number)
        result[number], out = ("没通过", show.wrap(error, show.WIDTH - 2, 2)) if error else check(number, impl, path)
        print("\n".join(out))
    parts = [f"练习 {'、'.join(str(n) for n in result if result[n] == s)} {s}" for s in ("通过", "没通过", "还没写")
             if s in result.values()]
    print("合计：" + "；".join(parts) + "。")
    return 0 if all(r == "通过" for r in result.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
