"""课程脚本的两件杂事：按名字加载以数字开头的脚本（测试和画图共用这一个加载器）；
每个脚本共用的命令行入口 run_lecture（--demo / --list / --more / --step / --mine）。

    from lab_common.script_tools import load_script
    s04 = load_script("04_prefix_caching")      # 01_xxx.py 不能直接 import，按文件加载
    s04.demo1_hashing()

    DEMOS = {1: demo1_bytes_per_token, 2: demo2_fragmentation}
    def main(argv=None):
        return run_lecture(DEMOS, "第 7 讲 · KV 缓存的显存为什么是瓶颈", argv)

演示之间要共享数据（同一个 trace、同一张命中表）的脚本传 run=：run(todo, args, step) 自己按 todo
的顺序跑演示，每跑完一个调用一次 step()（--step 时在终端上停下来等回车）。
"""
import argparse
import errno
import importlib.util
import os
import sys

from lab_common import console
from lab_common.console import ArgParser
from lab_common.settings import missing_setting

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LECTURE = os.path.join(ROOT, "lecture07")
_loaded = {}


def load_script(name, lecture_dir=LECTURE):
    """load_script("04_prefix_caching") → 模块对象；同一个进程里同一个文件只执行一次。

    和 `python lecture07/04_prefix_caching.py` 一样，脚本所在目录放在 sys.path 上（它 import paged_kv 等）。
    """
    path = os.path.abspath(os.path.join(lecture_dir, name + ".py"))
    if path not in _loaded:
        here = os.path.dirname(path)
        if here not in sys.path:
            sys.path.insert(0, here)
        spec = importlib.util.spec_from_file_location("script_" + name, path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        _loaded[path] = mod
    return _loaded[path]


def demo_title(fn):
    """演示函数的 docstring 第一行就是它回答的问题（--list 和 --help 里列出）。"""
    return (fn.__doc__ or fn.__name__).strip().splitlines()[0]


def lecture_parser(demos, description, prog=None):
    """所有脚本共用的参数：--demo N、--list、--more、--step、--mine。脚本可以再 add_argument 自己的（--trace 等）。"""
    listing = "\n".join(f"  演示 {k}：{demo_title(demos[k])}" for k in sorted(demos))
    ap = ArgParser(prog=prog, description=description, epilog="演示：\n" + listing,
                   formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--demo", type=int, choices=sorted(demos), help="只跑某一个演示（默认全跑）")
    ap.add_argument("--list", action="store_true", help="列出各演示的题目，不运行")
    ap.add_argument("--more", action="store_true", help="每个演示印出全部观察（默认至多 3 条）")
    ap.add_argument("--step", action="store_true", help="投影仪上讲课：每个演示先清屏、印表、问一句，回车后才印观察（只在终端上）")
    ap.add_argument("--mine", action="store_true", help="用 exercises/ 里你自己写的实现跑，并和参考实现对比")
    return ap


def _stepper(demos, on):
    """--step（投影仪上讲课）：标准输入和输出都是终端时，每个演示先清屏、印标题和表，问一句它 docstring 的问题，
    回车后才印观察（lab_common.console 做这几步）；演示之间再等一次回车。不是终端时什么也不做：管道输出逐字节不变。
    返回 step()：运行器在两个演示之间调用它。"""
    console.STEP = on
    console.QUESTIONS = {k: console.question_of(demo_title(fn)) for k, fn in demos.items()}

    def step():
        if console.stepping():
            sys.stdout.flush()
            console.wait_enter("（回车看下一个演示）")
    return step


def run_lecture(demos, description, argv=None, run=None, add_args=None, prog=None, check=None):
    """解析参数并跑演示（_run_lecture），结束的方式由 ended_quietly 决定：Ctrl-C、管道被关、设置不见了、
    只读的目录都只打一行（或什么都不打），不打印 traceback。"""
    return ended_quietly(lambda: _run_lecture(demos, description, argv, run, add_args, prog, check), prog)


def _run_lecture(demos, description, argv=None, run=None, add_args=None, prog=None, check=None):
    """解析参数并跑演示。run(todo, args, step) 可以替换默认的"依次调用 demos[k]()"；
    add_args(ap) 加脚本自己的参数；check(args) 在跑之前检查设置 / 参数（不合理时一行报错、退出码 2）。"""
    ap = lecture_parser(demos, description, prog)
    if add_args is not None:
        add_args(ap)
    args = ap.parse_args(argv)
    if args.list:
        for k in sorted(demos):
            print(f"演示 {k}：{demo_title(demos[k])}")
        return 0
    if check is not None:
        check(args)
    todo = sorted(demos)
    if args.demo:
        todo = [args.demo]
    step = _stepper(demos, args.step)

    def go():
        if run is not None:
            return run(todo, args, step) or 0
        for i, k in enumerate(todo):
            demos[k]()
            if i + 1 < len(todo):
                step()
        return 0

    console.SHOW_MORE = args.more
    try:
        if args.mine:
            return run_mine(go, demos[todo[0]].__globals__["__file__"])     # 演示函数所在的脚本文件
        return go()
    finally:
        console.SHOW_MORE = console.STEP = False


# ---------------------------------------------------------------------------
# 怎样结束：没有一种结束方式打印 traceback（学生的代码真有 bug 时除外）

INTERRUPTED = 130      # Ctrl-C：和 shell 的约定一样（128 + SIGINT）


def _script_name(prog=None):
    return prog or os.path.basename(sys.argv[0] if sys.argv and sys.argv[0] else "script")


def _quiet_stdout():
    """管道那头已经关了（`| head -3`）：把标准输出接到 /dev/null，退出时 Python 冲缓冲区也不再报 BrokenPipeError。"""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass


def _unwritable(err):
    """写文件失败是因为目录只读 / 没有权限 / 磁盘满：返回一行说明；别的 OSError 返回 None。"""
    if isinstance(err, OSError) and err.errno in (errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOSPC):
        where = err.filename or "文件"
        why = {errno.EROFS: "文件系统只读", errno.ENOSPC: "磁盘满了"}.get(err.errno, "没有写权限")
        return f"写不了 {where}：{why}（换一个可写的目录再跑）"
    return None


def ended_quietly(fn, prog=None, child=False):
    """跑 fn()，返回它的退出码；下面几种结束都不打印 traceback：
    Ctrl-C → 130（stderr 一行 "已中断"）；管道被关（`| head`）→ 0，什么都不打；读一个不存在的设置（改了名、删掉了）
    → 一行说明、2；写文件时目录只读 / 没有权限 → 一行说明、1。child=True（fork 出的子进程）：Ctrl-C 不另打一行
    （主进程会打）。"""
    name = _script_name(prog)
    try:
        return fn()
    except KeyboardInterrupt:
        _stop_worker_pools()
        _flush_quietly()
        if not child:
            print(f"\n{name}: 已中断（Ctrl-C）", file=sys.stderr)
        return INTERRUPTED
    except BrokenPipeError:
        _stop_worker_pools()
        _quiet_stdout()
        return 0
    except NameError as err:
        line = missing_setting(err, name)
        if line is None:
            raise
        print(line, file=sys.stderr)
        return 2
    except OSError as err:
        if err.errno == errno.EPIPE:
            _stop_worker_pools()
            _quiet_stdout()
            return 0
        line = _unwritable(err)
        if line is None:
            raise
        print(f"{name}: {line}", file=sys.stderr)
        return 1


def _stop_worker_pools():
    """提前结束时（管道被关、Ctrl-C）还在算的进程池：先关掉，
    否则解释器退出时 Pool.__del__ 会在 stderr 上打一段 OSError。"""
    if "multiprocessing.pool" not in sys.modules:
        return
    import gc
    from multiprocessing.pool import Pool
    for obj in gc.get_objects():
        if issubclass(type(obj), Pool):     # type()，不是 isinstance：后者会读 obj.__class__，有的对象（torch 的弃用代理）读它就警告
            try:
                obj.terminate()
                obj.join()
            except (OSError, ValueError, AssertionError):
                pass


def worker_ignores_ctrl_c():
    """进程池的 initializer：工作进程不理 Ctrl-C（主进程收到后关掉进程池），否则每个工作进程各打一段 traceback。"""
    import signal
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _flush_quietly():
    try:
        sys.stdout.flush()
    except (BrokenPipeError, OSError, ValueError):
        _quiet_stdout()


def _excepthook(kind, err, tb):
    """脚本 import 时（还没进 run_lecture）出的同几种错：也只打一行。其余的照 Python 原样打印。"""
    try:
        code = ended_quietly(lambda: _reraise(err))
    except BaseException:
        sys.__excepthook__(kind, err, tb)
        return
    _flush_quietly()
    os._exit(code)


def _reraise(err):
    raise err


def _run_all(demos):
    for demo in demos:
        demo()
    return 0


sys.excepthook = _excepthook


def run_mine(go, script):
    """--mine：交给仓库里 exercises/mine.py（练习的事只有它知道：lab_common 不认识任何一讲的练习）。"""
    if ROOT not in sys.path:
        sys.path.insert(0, ROOT)
    from exercises.mine import run_with_mine
    return run_with_mine(go, script)
