"""本课唯一的进程池：几件互不相干的活（每件一个函数和它的参数）分给几个进程同时算。

kv_store.replay.sweep（命中率表的每一格）、kv_store.cluster.run_schedulers（每种调度一次模拟）和 05 的网卡模拟
都用它。结果按给出的顺序回来；没有模块级的全局变量。

    >>> run_jobs([(pow, (2, 10)), (divmod, (7, 2))], workers=1)   # workers=1：就在本进程里按顺序算
    [1024, (3, 1)]

怎么做的：每件活 fork 一个子进程。fork 出的子进程有父进程此刻内存的一份拷贝，参数（几 MB 的 trace 列）
不用序列化再传过去，用的也是此刻的类——学生改过的类、测试里换过的类都一样。子进程算完把结果 pickle 进一根
管道就退出；同时最多 workers 个子进程。Ctrl-C 只给主进程（子进程忽略 SIGINT）：主进程杀掉还在算的子进程，
由 lab_common.endings 打成一行。没有 fork 的平台（Windows），或者只有一件活、一个核：就在本进程里按顺序算。
"""
import multiprocessing
import multiprocessing.connection
import os
import signal
import sys
import traceback


def run_jobs(jobs, workers=None):
    """jobs：[(fn, args), ...] → [fn(*args), ...]，顺序和 jobs 一样。

    workers：同时几个进程（None：本机的核数，最多 4 个）。某件活抛了异常：杀掉别的，在主进程里原样抛出。
    按 jobs 的顺序开始：长的活放在前面，最后一起结束。
    """
    if workers is None:
        workers = min(4, n_cores())
    if workers < 2 or len(jobs) < 2 or "fork" not in multiprocessing.get_all_start_methods():
        return [fn(*args) for fn, args in jobs]
    fork = multiprocessing.get_context("fork")
    results, running, next_job = [None] * len(jobs), {}, 0     # running：管道的读端 → (第几件活, 子进程)
    try:
        while next_job < len(jobs) or running:
            while next_job < len(jobs) and len(running) < workers:
                fn, args = jobs[next_job]
                here, there = fork.Pipe(duplex=False)
                child = fork.Process(target=_work, args=(there, fn, args), daemon=True)
                sys.stdout.flush()                 # 还没写出的输出先写出去：子进程退出前要冲自己的缓冲，别再带一份
                blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})   # fork 的那一刻不收 Ctrl-C
                try:
                    child.start()
                finally:
                    signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
                there.close()
                running[here] = (next_job, child)
                next_job += 1
            for here in multiprocessing.connection.wait(list(running)):
                i, child = running.pop(here)
                try:
                    ok, value = here.recv()
                except EOFError:                   # 子进程没送回结果就没了（比如内存不够被系统杀掉）
                    ok, value = False, None
                here.close()
                child.join()
                if value is None and not ok:
                    value = (RuntimeError(f"算第 {i + 1} 件活的子进程意外退出（退出码 {child.exitcode}）"), "")
                if not ok:
                    error, child_traceback = value
                    raise error from ChildTraceback(child_traceback)   # 印出来的 traceback 里看得到子进程里出错的那一行
                results[i] = value
    finally:
        for here, (_, child) in running.items():   # 提前结束（Ctrl-C、某件活出错）：还在算的子进程不要了
            child.kill()
            child.join()
            here.close()
    return results


def _work(there, fn, args):
    """子进程里：忽略 Ctrl-C，算 fn(*args)，把 (是否成功, 结果或异常) 送回主进程，直接退出。"""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    try:
        out = (True, fn(*args))
    except BaseException as e:                    # 连 SystemExit 也送回去，由主进程决定怎么结束
        out = (False, (e, traceback.format_exc()))
    for stream in (sys.stdout, sys.stderr):       # 你在策略类里 print 的调试输出：先写出去（os._exit 不冲缓冲）
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    try:
        there.send(out)
    except Exception as e:                        # 结果或异常 pickle 不了：送回一句话
        there.send((False, (RuntimeError(f"{getattr(fn, '__name__', fn)} 的结果传不回主进程：{e}"), "")))
    os._exit(0)                                   # 不跑父进程的 atexit


class ChildTraceback(Exception):
    """子进程里的 traceback（文字）：主进程重新抛出子进程的异常时挂在 __cause__ 上。"""


def n_cores():
    """这个进程能用的核数。"""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1
