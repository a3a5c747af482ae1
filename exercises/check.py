"""检查练习：先跑能手算的小例子，再在真实数据（小模型、合成 trace）上和讲义的参考实现逐个比。

    make check              检查全部六个练习（python exercises/check.py）
    make check EX=3         只检查练习 3（python exercises/check.py 3）

每个练习打印每个用例过没过；第一个没过的用例给出输入、应当是什么、你的代码返回了什么和一句提示。
还没动手的练习只说一行"练习 N 还没写"。全部检查过的练习都通过时退出码 0，否则 1。
助教用：--reference 用讲义的参考实现跑（应当全过）；--variant 名字 用 exercises/buggy.py 里的一个错误写法。
"""
import contextlib
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # 仓库根目录：lab_common、exercises
from lab_common.console import ArgParser  # noqa: E402
from exercises.mine import (EXERCISES, HARD_SECONDS, CaseTimeout, Impl, Printed, exercises_dir,  # noqa: E402
                             hang_text, one_line, print_report, reference_impl, setup_path, short_path,
                             student_impl, time_limit)

setup_path()
from exercises.cases import CASES, CLOCK, STRETCH, Crash, Fail  # noqa: E402

BUDGET_FACTOR, BUDGET_FLOOR = 10, 1.0   # 时间预算：每个用例里你的代码最多用参考实现的 10 倍时间，至少给 1 秒


def budget(ref_seconds):
    return max(BUDGET_FLOOR, BUDGET_FACTOR * ref_seconds)


def run_case(fn, objs, path):
    """跑一个用例：返回 (状态, 细节, printed)。状态：通过 / 没通过 / 还没写 / 出错 / 超时 / 太慢。
    用例在 time_limit 里跑（HARD_SECONDS 秒还没完就停下）；学生代码 print 的东西收进 printed（Printed），不刷屏。"""
    CLOCK["ref"] = CLOCK["mine"] = 0.0
    printed = Printed()
    try:
        with time_limit(HARD_SECONDS), contextlib.redirect_stdout(printed):
            fn(objs)
        if CLOCK["mine"] > budget(CLOCK["ref"]):
            return "太慢", (CLOCK["mine"], CLOCK["ref"], None), printed
        return "通过", None, printed
    except Fail as f:
        return "没通过", f, printed
    except NotImplementedError as e:
        return "还没写", e, printed
    except CaseTimeout as e:
        return "超时", (CLOCK["mine"], CLOCK["ref"], e), printed
    except Crash as c:
        return "出错", (c.given, one_line(c.__cause__, path)), printed
    except Exception as e:
        return "出错", (None, one_line(e, path)), printed


def _not_written_name(err, impl):
    """NotImplementedError 来自哪个名字：写在提示里（'PagedSequence.free 还没写'）。"""
    tb = err.__traceback__
    last = None
    while tb is not None:
        last = tb
        tb = tb.tb_next
    if last is not None:
        code = last.tb_frame.f_code
        self_obj = last.tb_frame.f_locals.get("self")
        if self_obj is not None:
            return f"{type(self_obj).__name__}.{code.co_name}"
        return code.co_name
    return "、".join(n for n, s in impl.status.items() if s == "还没写")


def check_exercise(number, impl, out=print, fail_fast=False):
    """检查一个练习，打印结果，返回 "通过" / "没通过" / "还没写"。fail_fast：第一个没过的用例之后不再跑（测试用）。"""
    ex = EXERCISES[number]
    path = impl.path
    label = short_path(path) if path else "参考实现"
    missing = [n for n, _ in ex.names if n not in impl.objs and n not in ex.optional]
    if impl.error or missing:
        reason = impl.error
        if reason is None:
            reason = impl.status[missing[0]]
        out(f"练习 {number} · {ex.title}：{reason}")
        return "没通过"
    results = []
    for name, fn in CASES[number]:
        if any(r[1] == "超时" for r in results):
            results.append((name, "没跑", None, Printed()))        # 一个用例停在死循环里：后面的多半也一样，不再各等 10 秒
            continue
        results.append((name, *run_case(fn, impl.objs, path)))
        if fail_fast and results[-1][1] not in ("通过", "还没写"):
            break
    core = [r for r in results if not r[0].startswith(STRETCH)]
    if all(r[1] == "还没写" for r in core):
        out(f"练习 {number} 还没写（{label}）")
        return "还没写"
    out(f"练习 {number} · {ex.title}（{label}）")
    for name, state, _, _ in results:
        mark = {"通过": "  通过    ", "还没写": "  还没写  ", "没跑": "  没跑    "}.get(state, "  没通过  ")
        if state == "还没写" and name.startswith(STRETCH):
            mark = "  （没写）"
        out(f"{mark}{name}")
    failed = [r for r in results if r[1] not in ("通过", "没跑")
              and not (r[1] == "还没写" and r[0].startswith(STRETCH))]
    printed = Printed()                 # 留下了 print：说所有用例一共几行，给出最先的几行
    for r in results:
        printed.absorb(r[3])
    if failed:
        _explain(failed[0], impl, out)
        for line in print_report(printed, "     "):
            out(line)
        return "没通过"
    for line in print_report(printed, "  "):
        out(line)
    n_core = len(core)
    done = [r for r in results if r[0].startswith(STRETCH) and r[1] == "通过"]
    extra = f"，选做的 {len(done)} 个也通过" if done else ""
    out(f"  全部 {n_core} 个用例通过{extra}。用你的代码跑讲义的演示：python lecture07/{ex.scripts[0]}.py --mine "
        f"{ex.try_args}".rstrip())
    return "通过"


def _explain(first, impl, out):
    """第一个没过的用例：输入、应当、你的、提示。"""
    name, state, detail, printed = first
    out(f"  ── 第一个没过的用例：{name}")
    if state == "没通过":
        out(f"     输入：{detail.given}")
        out(f"     应当：{detail.expected}")
        out(f"     你的：{detail.got}")
        out(f"     提示：{detail.hint}")
    elif state == "还没写":
        out(f"     用到的 {_not_written_name(detail, impl)} 还没写（还在 raise NotImplementedError）")
    elif state == "超时":
        spent, ref_s, exc = detail
        if exc.given:
            out(f"     输入：{exc.given}")
        out(f"     {hang_text(exc, impl.path, '你的代码')}")
        out(f"     （这个用例里参考实现一共用 {ref_s:.2f} 秒）")
        if printed.count:
            out(f"     提示：也可能是 print 太多：这个用例里你的代码 print 了 {printed.count:,} 行，print 本身就慢")
    elif state == "太慢":
        spent, ref_s, _ = detail
        out(f"     结果都对，但你的代码用了 {spent:.2f} 秒；参考实现这个用例用 {ref_s:.2f} 秒，时间预算是它的 "
            f"{BUDGET_FACTOR} 倍、至少 {BUDGET_FLOOR:g} 秒（{budget(ref_s):.2f} 秒）")
        if printed.count:
            out(f"     提示：慢多半是因为 print：这个用例里你的代码 print 了 {printed.count:,} 行（见下面），"
                "删掉调试用的 print 再跑")
        else:
            out("     提示：每次操作都要快：在 list 里查找、删除，每次淘汰都扫一遍全部的块，都随缓存变大而变慢——"
                "换成 dict / OrderedDict（两头 O(1)）/ 堆")
    else:
        given, error = detail
        if given is not None:
            out(f"     输入：{given}")
        out(f"     出错：{error}")
        out("     提示：在 python 里用这个输入调用你的代码，从出错的那一行往回看")


def variant_impl(name):
    """exercises/buggy.py 里的一个错误写法：只替换它那个练习的名字，其余用参考实现。"""
    from exercises.buggy import BUGGY
    v = BUGGY[name]
    objs = dict(reference_impl(v.exercise).objs)
    objs.update(v.objs)
    import exercises.buggy as b
    return v.exercise, Impl(v.exercise, objs, {n: "写好了" for n in objs}, b.__file__)


def main(argv=None):
    ap = ArgParser(prog="exercises/check.py", description="检查 exercises/ 里的练习")
    ap.add_argument("numbers", nargs="*", type=int, metavar="练习号", help="只检查这几个练习（1–6；默认全部）")
    ap.add_argument("--reference", action="store_true", help="用讲义的参考实现跑（助教核对检查器本身）")
    ap.add_argument("--variant", metavar="名字", help="用 exercises/buggy.py 里的一个错误写法跑")
    ap.add_argument("--dir", metavar="目录", help="练习文件所在的目录（默认 exercises/）")
    args = ap.parse_args(argv)
    bad = [n for n in args.numbers if n not in EXERCISES]
    if bad:
        ap.error(f"没有练习 {bad[0]}：练习号是 1–6")
    if args.variant:
        from exercises.buggy import BUGGY
        if args.variant not in BUGGY:
            ap.error(f"exercises/buggy.py 里没有 {args.variant!r}；有：{', '.join(BUGGY)}")
    if args.dir and not os.path.isdir(args.dir):
        ap.error(f"--dir {args.dir}：目录不存在")
    if not args.dir and not os.path.isdir(exercises_dir()):
        ap.error(f"环境变量 LAB_EXERCISES_DIR={exercises_dir()}：目录不存在")
    try:
        sys.stdout.reconfigure(errors="replace")     # GBK、ASCII 的终端：打不出的字符换成 ?，不崩
    except (AttributeError, ValueError):
        pass
    directory = args.dir or exercises_dir()
    if args.variant:
        number, impl = variant_impl(args.variant)
        impls = {number: impl}
    else:
        numbers = sorted(set(args.numbers)) or sorted(EXERCISES)
        impls = {n: reference_impl(n) if args.reference else student_impl(n, directory) for n in numbers}
    result = {}
    for number, impl in impls.items():
        lines = []
        result[number] = check_exercise(number, impl, out=lines.append)
        print("\n".join(lines))
        if len(lines) > 1:
            print()                                  # 多行的练习之后空一行
    if len(lines) == 1:
        print()
    print(summary(result))
    todo = [n for n, r in result.items() if r == "还没写"]
    if todo:
        again = f"make check EX={todo[0]}" if len(todo) == 1 else "make check EX=练习号"
        print(f"接下来：打开还没写的练习文件，把标着 TODO 的 raise NotImplementedError 换成你的代码，再跑 {again}。")
    return 0 if all(r == "通过" for r in result.values()) else 1


def summary(result):
    """'合计：练习 1、2 通过；练习 5 没通过；练习 3、4、6 还没写。'"""
    parts = []
    for state in ("通过", "没通过", "还没写"):
        ns = [str(n) for n, r in result.items() if r == state]
        if ns:
            parts.append(f"练习 {'、'.join(ns)} {state}")
    return "合计：" + "；".join(parts) + "。"


if __name__ == "__main__":
    sys.exit(main())
