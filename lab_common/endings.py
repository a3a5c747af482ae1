"""怎样结束：Ctrl-C、管道被关（`| head -3`）、设置不见了、目录只读——只打一行（或什么都不打），不打印 traceback。

这个模块只用标准库，import 它几乎不花时间：每个脚本第一个 import 它、调用 quiet_endings()，再 import numpy
等重的库。这样在最开始的零点几秒（还在 import numpy 时）按 Ctrl-C，也只打一行、退出码 130。

    from lab_common.endings import quiet_endings
    quiet_endings()                # 从这里起：import 时出的这几种错也只打一行
    import numpy as np

运行器（script_tools.run_lecture）和画图（figures/figlib.py）用 ended_quietly(fn) 跑整个程序。
学生最常犯的错是用错了 Python（`python3 04_prefix_caching.py`，没进 .venv）：没装 numpy / rich / matplotlib 时
也只打一行，说缺哪个包、怎样用 .venv 里的 Python 跑（missing_package）。
"""
import errno
import os
import sys


INTERRUPTED = 130      # Ctrl-C：和 shell 的约定一样（128 + SIGINT）
PACKAGES = ("numpy", "rich", "matplotlib")     # requirements.txt 里 make demo 装进 .venv 的包（import 的名字）
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


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
        where = err.filename or "输出"          # 没有文件名：写的是标准输出（例如重定向到一个满了的盘）
        if err.errno == errno.ENOSPC:
            return f"写不了 {where}：磁盘满了（清出一些空间再跑）"
        why = {errno.EROFS: "文件系统只读"}.get(err.errno, "没有写权限")
        return f"写不了 {where}：{why}（换一个可写的目录再跑）"
    return None


def missing_package(err):
    """import 一个 PACKAGES 里的包、而这个 Python 里没有它（用错了 Python，或还没 make demo）：返回一行怎么办；
    别的 ModuleNotFoundError（本课自己的模块、包里缺了一个子模块、torch）返回 None，照常报出在哪一行。

    >>> missing_package(ModuleNotFoundError("No module named 'kv_store.foo'", name="kv_store.foo")) is None
    True
    """
    if not isinstance(err, ModuleNotFoundError) or err.name not in PACKAGES:
        return None
    venv = os.path.join(ROOT, ".venv")
    bin_dir = "Scripts" if os.name == "nt" else "bin"
    here = f"没有装 {err.name}（这个 Python 是 {sys.executable}）"
    if os.path.realpath(sys.prefix) == os.path.realpath(venv):       # 就在 .venv 里：.venv 坏了
        return f"{here}：.venv 不完整，删掉 .venv 再 make demo 重建"
    how = f"用 {_nearby(venv, bin_dir, 'python')} 运行，或先 source {_nearby(venv, bin_dir, 'activate')}"
    if not os.path.isdir(os.path.join(venv, bin_dir)):
        where = ""
        if _nearby(ROOT) != ".":
            where = f"在 {_nearby(ROOT)} 里"
        how = f"先{where} make demo（建好 .venv），再" + how
    return f"{here}：{how}"


def _nearby(*parts):
    """在仓库里跑时从当前目录看过去的路径（在 lecture07/ 里是 ../.venv/bin/python）；在仓库外面时用绝对路径。"""
    path = os.path.join(*parts)
    try:
        if os.path.commonpath([os.path.abspath(os.getcwd()), ROOT]) == ROOT:
            return os.path.relpath(path)
    except ValueError:                          # Windows 上不同的盘
        pass
    return path


def ended_quietly(fn, prog=None):
    """跑 fn()，返回它的退出码；下面几种结束都不打印 traceback：
    Ctrl-C → 130（stderr 一行 "已中断"）；管道被关（`| head`）→ 0，什么都不打；读一个不存在的设置（改了名、删掉了）
    → 一行说明、2；没装 numpy / rich / matplotlib（用错了 Python）→ 一行说明、2；写文件时目录只读 / 没有权限
    → 一行说明、1。
    还在算的进程池由它自己收拾（lab_common.workers.run_jobs 的 finally）。"""
    name = _script_name(prog)
    try:
        return fn()
    except KeyboardInterrupt:
        _flush_quietly()
        lead = "\n" if is_terminal(sys.stderr) else ""     # 终端上 ^C 停在行中间：先换行；管道里不空一行
        print(f"{lead}{name}: 已中断（Ctrl-C）", file=sys.stderr)
        return INTERRUPTED
    except BrokenPipeError:
        _quiet_stdout()
        return 0
    except NameError as err:
        from lab_common.settings import missing_setting     # 只在这时才要：import 本模块时少找一个文件
        line = missing_setting(err, name)
        if line is None:
            raise
        print(line, file=sys.stderr)
        return 2
    except ModuleNotFoundError as err:
        line = missing_package(err)
        if line is None:
            raise
        print(f"{name}: {line}", file=sys.stderr)
        return 2
    except OSError as err:
        if err.errno == errno.EPIPE:
            _quiet_stdout()
            return 0
        line = _unwritable(err)
        if line is None:
            raise
        print(f"{name}: {line}", file=sys.stderr)
        return 1


def is_terminal(stream):
    """stream 是不是终端（只在终端上显示的东西用它判断）；被换掉的、已经关掉的流不是。"""
    try:
        return stream.isatty()
    except (AttributeError, ValueError):                 # 被换掉的流、已经关掉的流
        return False


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
        sys.__excepthook__(kind, err.with_traceback(tb), tb)   # 上面重新抛出时 err 的 traceback 多了本模块的几帧：去掉
        return
    _flush_quietly()
    os._exit(code)


def _reraise(err):
    raise err


def quiet_endings():
    """从现在起，没被接住的 Ctrl-C、管道被关、设置不见了、没装的包、目录只读也只打一行（换掉 sys.excepthook）：
    脚本还在 import numpy、还没进 run_lecture 时也一样。"""
    sys.excepthook = _excepthook
