"""Ctrl-C 和关掉的管道：一行（或什么都不印）就结束，不印 traceback，不卡住，不留下还在算的工作进程。"""
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import LECTURE, ROOT


def start(script, *args):
    env = dict(os.environ, PYTHONIOENCODING="utf-8", PYTHONUNBUFFERED="1")
    return subprocess.Popen([sys.executable, os.path.join(LECTURE, script + ".py"), *args], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)


@pytest.mark.parametrize("script,demo", [("04_prefix_caching", "4"), ("05_kv_store", "2")])   # 04b 和 04 一样
def test_ctrl_c_while_the_workers_compute(script, demo):
    p = start(script, "--demo", demo)
    while "────" not in p.stdout.readline().decode():      # 标题印完了：接下来是两个进程一起算的那张表
        pass
    time.sleep(0.5)
    os.killpg(p.pid, signal.SIGINT)                          # 终端里的 Ctrl-C 发给整个前台进程组
    sent = time.monotonic()
    err = p.communicate(timeout=10)[1].decode()
    assert time.monotonic() - sent < 2                       # 不等剩下的格子算完
    assert (p.returncode, err) == (130, f"\n{script}.py: 已中断\n")
    for _ in range(40):                                      # 工作进程也都停了（被系统收走，最多等 2 秒）
        try:
            os.killpg(p.pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    pytest.fail("Ctrl-C 以后还有工作进程在跑")


def test_closed_pipe_prints_nothing():
    p = start("04_prefix_caching", "--demo", "1")
    p.stdout.readline()
    p.stdout.close()                                          # 像 | head -1：读了一行就不读了
    err = p.stderr.read()
    p.stderr.close()
    assert (p.wait(timeout=30), err) == (0, b"")


def test_a_crash_in_a_worker_names_the_students_line(tmp_path):
    """学生的代码在工作进程里出错（--mine 的类在两个核上算表）：一行说出 exercises/ 里的文件和行，退出码 1。"""
    (tmp_path / "exercises").mkdir()
    (tmp_path / "exercises" / "__init__.py").write_text("")
    (tmp_path / "exercises" / "ex9.py").write_text("def touch(block):\n    raise ValueError('boom')\n")
    code = ("from concurrent.futures import ProcessPoolExecutor; from lab_common import show; "
            "from exercises.ex9 import touch; show.quietly(lambda argv: ProcessPoolExecutor(1).submit(touch, 1).result())")
    p = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=dict(os.environ, PYTHONPATH=ROOT),
                       capture_output=True, text=True, encoding="utf-8", timeout=60)
    assert (p.returncode, p.stderr) == (1, "-c: 你的代码出错：exercises/ex9.py 第 2 行（touch）：ValueError: boom\n")
