"""06 要的 torch 和 triton：缺了或太旧一行说清；import 时按的 Ctrl-C 等 import 完才中断。import 本模块不碰 torch。

    with ctrl_c_after():                        # 06 的 import_gpu_stack：连同 gpu/ 的 kernel 模块一起
        torch = import_torch_triton("06_triton_cow_clone.py")
"""
import contextlib
import os
import signal

from lab_common.console import fail

MIN_VERSIONS = {"torch": (2, 4), "triton": (3, 0)}     # 更旧的没有试过


@contextlib.contextmanager
def ctrl_c_after():
    """块里按的 Ctrl-C 等块跑完才生效：块后抛 KeyboardInterrupt（→ 一行、退出码 130）。import torch 时要这样：
    torch 在自己的 import 里 import numpy，KeyboardInterrupt 落在那里会被 torch 接住，变成别的错（numpy 没有
    iinfo、"没有装 torch"）、C++ 里 abort，或者干脆没了。
    做法：块里 SIGINT 的处理函数只记一笔（Python 总在主线程上调它，不管信号落在哪个线程上；屏蔽信号只管得了
    一个线程），块后换回原来的；按过就再发一次 SIGINT，交给原来的处理函数（默认的就在这里抛 KeyboardInterrupt）。
    块里已经出了错（一行、退出码 2）时不再叠一个 Ctrl-C。"""
    pressed = []
    try:
        old = signal.signal(signal.SIGINT, lambda *_: pressed.append(True))
    except ValueError:              # 不在主线程上：换不了处理函数，照旧
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler if old is None else old)
    if pressed:
        signal.raise_signal(signal.SIGINT)


def import_torch_triton(script):
    """import torch、triton（没有 CUDA 时先开 Triton 解释器），返回 torch；缺了或太旧 → 以 script 开头的一行、退出码 2。"""
    mods = {}
    for name in ("torch", "triton"):
        need = ".".join(map(str, MIN_VERSIONS[name]))
        if name == "triton" and not mods["torch"].cuda.is_available():
            os.environ.setdefault("TRITON_INTERPRET", "1")      # 必须在 import triton 之前
        try:
            mods[name] = __import__(name)
        except ImportError:
            fail(script, f"需要 {name} ≥ {need}，没有装：有 NVIDIA GPU 时装 CUDA 版 torch（自带 triton），只有 CPU 时 "
                         "pip install -r requirements-triton.txt")
        if tuple(int(x) for x in mods[name].__version__.split("+")[0].split(".")[:2]) < MIN_VERSIONS[name]:
            fail(script, f"{name} {mods[name].__version__} 太旧：需要 ≥ {need}")
    return mods["torch"]
