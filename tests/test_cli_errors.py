"""每个脚本：参数不对时只打一行错误、退出码 2、没有 traceback、stdout 里什么也没有。

本进程里调 main(argv)（像命令行那样收下退出码和两个输出）；04 另在新的解释器里跑一次，看真正的进程也一样。
"""
import glob
import os
import subprocess
import sys

import pytest
from conftest import LECTURE, call_main, fresh_env, load_script

SCRIPTS = sorted(os.path.basename(p)[:-3] for p in glob.glob(os.path.join(LECTURE, "0[1-5]*.py")))
BAD_ARGS = [["--demo", "99"], ["--no-such-flag"]]


def _one_line_exit_2(rc, out, err, args):
    assert rc == 2, err
    assert out == "" and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    assert args[0] in err


@pytest.mark.parametrize("script", SCRIPTS)
@pytest.mark.parametrize("args", BAD_ARGS)
def test_bad_argument_is_one_line_exit_2(script, args):
    _one_line_exit_2(*call_main(load_script(script), args), args)


@pytest.mark.parametrize("args", BAD_ARGS)
def test_bad_argument_in_a_real_process(args):
    p = subprocess.run([sys.executable, os.path.join(LECTURE, "04_prefix_caching.py")] + args,
                       capture_output=True, text=True, env=fresh_env(), timeout=120)
    _one_line_exit_2(p.returncode, p.stdout, p.stderr, args)
