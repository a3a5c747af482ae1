"""课程脚本的两件杂事：按名字加载以数字开头的脚本（测试和画图共用这一个加载器）；
"跑全部演示 / 只跑第 N 个"的统一入口。

    from lab_common.script_tools import load_script
    s04 = load_script("04_prefix_caching")      # 01_xxx.py 不能直接 import，按文件加载
    s04.demo1_hashing()

    DEMOS = {1: demo1_bytes_per_token, 2: demo2_fragmentation}
    def main(argv=None):
        return run_demos(DEMOS, "第 7 讲 · KV 缓存的显存为什么是瓶颈", argv)
"""
import importlib.util
import os
import sys
import traceback

from lab_common.console import ArgParser

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


def run_demos(demos, description, argv=None):
    """--demo N 只跑第 N 个演示，默认按编号全跑；参数错误时一行报错、退出码 2。"""
    ap = ArgParser(description=description)
    ap.add_argument("--demo", type=int, choices=sorted(demos), help="只跑某一个演示（默认全跑）")
    args = ap.parse_args(argv)
    for k in ([args.demo] if args.demo else sorted(demos)):
        demos[k]()
    return 0


def run_in_child(demos):
    """在 fork 出来的子进程里依次跑 demos（它们只打印，返回值不用），返回"等它跑完、给出退出码"的函数。
    这样两个核一起干活：子进程跑演示，主进程同时做别的（04 里是建 trace、开始算命中表）。
    不能 fork（Windows），或者标准输出不是真正的文件（测试里的 capsys）时返回 None，调用者自己就地跑。
    """
    try:
        sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        return None
    if not hasattr(os, "fork"):
        return None
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:                                   # 子进程：跑完演示就退出（不回到 main）
        code = 1
        try:
            for demo in demos:
                demo()
            code = 0
        except SystemExit as e:                    # fail()：一行错误已经打印了
            code = 1
            if e.code is None:
                code = 0
            elif isinstance(e.code, int):
                code = e.code
        except BaseException:
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)

    def wait():
        return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    return wait
