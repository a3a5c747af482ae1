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
import importlib.util
import os
import sys

from lab_common import console
from lab_common.console import ArgParser, terminal_width, wrap_hanging
from lab_common.endings import ended_quietly, quiet_endings

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
    ap = ArgParser(prog=prog, description=description, epilog="演示：\n" + listing)
    ap.add_argument("--demo", type=int, choices=sorted(demos), help="只跑某一个演示（默认全跑）")
    ap.add_argument("--list", action="store_true", help="列出各演示的题目，不运行")
    ap.add_argument("--more", action="store_true", help="每个演示印出全部观察（默认至多 2 条）")
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
        for k in sorted(demos):                       # 按终端的宽度折行（管道里 80 列），续行对齐到题目
            for line in wrap_hanging(f"演示 {k}：{demo_title(demos[k])}", terminal_width() - 2):
                print(line)
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


quiet_endings()      # 经 script_tools 进来的（画图、测试）也一样：import 时出的这几种错只打一行


def run_mine(go, script):
    """--mine：交给仓库里 exercises/mine.py（练习的事只有它知道：lab_common 不认识任何一讲的练习）。"""
    if ROOT not in sys.path:
        sys.path.insert(0, ROOT)
    from exercises.mine import run_with_mine
    return run_with_mine(go, script)
