"""每个脚本：参数不对时只打一行错误、退出码 2、没有 traceback、stdout 里什么也没有。

本进程里调 main(argv)（像命令行那样收下退出码和两个输出）；04 另在新的解释器里跑一次，看真正的进程也一样。
"""
import glob
import os
import re
import subprocess
import sys

import pytest
from conftest import LECTURE, call_main, fresh_env, load_script
from lab_common.console import argparse_message

SCRIPTS = sorted(os.path.basename(p)[:-3] for p in glob.glob(os.path.join(LECTURE, "0[1-5]*.py")))
BAD_ARGS = [["--demo", "99"], ["--no-such-flag"], ["--demo", "abc"]]


def _one_line_exit_2(rc, out, err, args):
    assert rc == 2, err
    assert out == "" and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    assert args[0] in err
    assert not re.search(r"invalid|unrecognized|argument|choose", err), err      # argparse 的英文换成了中文


@pytest.mark.parametrize("script", SCRIPTS)
@pytest.mark.parametrize("args", BAD_ARGS)
def test_bad_argument_is_one_line_exit_2(script, args):
    _one_line_exit_2(*call_main(load_script(script), args), args)


@pytest.mark.parametrize("args", BAD_ARGS)
def test_bad_argument_in_a_real_process(args):
    p = subprocess.run([sys.executable, os.path.join(LECTURE, "04_prefix_caching.py")] + args,
                       capture_output=True, text=True, env=fresh_env(), timeout=120)
    _one_line_exit_2(p.returncode, p.stdout, p.stderr, args)


@pytest.mark.parametrize("english, chinese", [
    ("argument --demo: invalid choice: 0 (choose from 1, 2, 3, 4, 5)", "--demo 只能是 1、2、3、4、5（收到 0）"),
    ("argument --policy: invalid choice: 'x' (choose from 'lru', 'lfu')", "--policy 只能是 lru、lfu（收到 'x'）"),  # ≤ 3.12.7
    ("argument --policy: invalid choice: 'x' (choose from lru, lfu)", "--policy 只能是 lru、lfu（收到 'x'）"),      # 3.12.8 起
    ("argument --demo: invalid choice: 7, maybe you meant 1? (choose from 1, 2)", "--demo 只能是 1、2（收到 7）"),  # 3.14
    ("argument --block: invalid int value: 'abc'", "--block 要一个整数（收到 'abc'）"),
    ("argument 练习号: invalid int value: 'x'", "练习号 要一个整数（收到 'x'）"),
    ("argument --demo: expected one argument", "--demo 后面要跟一个值"),
    ("unrecognized arguments: --trace x", "不认识的参数：--trace x"),
    ("--block 只对 --trace 读入的文件有效", "--block 只对 --trace 读入的文件有效"),        # 脚本自己的中文报错：不动
    ("argument --x: something new in Python 3.15", "argument --x: something new in Python 3.15"),  # 认不出：原样
])
def test_argparse_messages_in_chinese(english, chinese):
    assert argparse_message(english) == chinese
