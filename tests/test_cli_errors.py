"""每个脚本：参数不对时只打一行错误、退出码 2、没有 traceback、stdout 里什么也没有。"""
import glob
import os
import subprocess
import sys

import pytest
from conftest import LECTURE

SCRIPTS = sorted(os.path.basename(p) for p in glob.glob(os.path.join(LECTURE, "0[1-5]_*.py")))


@pytest.mark.parametrize("script", SCRIPTS)
@pytest.mark.parametrize("args", [["--demo", "99"], ["--no-such-flag"]])
def test_bad_argument_is_one_line_exit_2(script, args):
    p = subprocess.run([sys.executable, os.path.join(LECTURE, script)] + args,
                       capture_output=True, text=True, env=dict(os.environ, NO_COLOR="1"))
    assert p.returncode == 2, p.stderr
    assert p.stdout == "" and "Traceback" not in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1
    assert args[0] in p.stderr
