"""课程脚本的两件杂事：按文件名加载以数字开头的脚本；"跑全部演示 / 只跑第 N 个"的统一入口。

    mod = load_script("/path/to/lecture07/04_prefix_caching.py")   # 01_xxx.py 不能直接 import
    mod.demo1_hashing()

    DEMOS = {1: demo1_bytes_per_token, 2: demo2_fragmentation}
    def main(argv=None):
        return run_demos(DEMOS, "第 7 讲 · KV 缓存的显存为什么是瓶颈", argv)
"""
import importlib.util
import os

from console import ArgParser

_loaded = {}


def load_script(path):
    """加载（并缓存）一个脚本文件，返回模块对象；同一个进程里同一个文件只执行一次。"""
    path = os.path.abspath(path)
    if path not in _loaded:
        name = "script_" + os.path.splitext(os.path.basename(path))[0]
        spec = importlib.util.spec_from_file_location(name, path)
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
