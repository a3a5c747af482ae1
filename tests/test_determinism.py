"""同一条命令跑两次，输出逐字节相同（NO_COLOR=1，管道输出固定 80 列）。

每个 lecture07/0*.py 都查（GPU 脚本除外）。02 会打印计时：它读环境变量 LAB_NO_TIMING，
设了就把计时栏换成 "-"；02 里没有这个开关时跳过 02 并说明原因。
"""
import glob
import os
import re
import subprocess
import sys

import pytest
from conftest import LECTURE, ROOT

REAL = os.path.join(ROOT, "..", "shared", "traces", "mooncake_fast25_synthetic_trace.jsonl")
SCRIPTS = sorted(os.path.basename(p)[:-3] for p in glob.glob(os.path.join(LECTURE, "0*.py"))
                 if "triton" not in os.path.basename(p))          # 06_triton_cow_clone 要 GPU


def timing_switch(name):
    """脚本里让计时不打印的环境变量名（如 LAB_NO_TIMING），没有就返回 None。"""
    with open(os.path.join(LECTURE, name + ".py"), encoding="utf-8") as f:
        m = re.search(r"environ(?:\.get)?[(\[]\s*[\"'](\w*NO_TIMING\w*)[\"']", f.read())
    return m.group(1) if m else None


def run_twice(args, env):
    """两次同时跑（两个核），返回两次的 stdout。"""
    procs = [subprocess.Popen([sys.executable, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env=env, cwd=ROOT) for _ in range(2)]
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-2000:]
        outs.append(out)
    return outs


@pytest.mark.parametrize("name", SCRIPTS)
def test_same_command_same_output(name):
    env = dict(os.environ, NO_COLOR="1")
    if name.startswith("02"):
        switch = timing_switch(name)
        if switch is None:
            pytest.skip("02 打印计时，但还没有关掉计时的环境变量（LAB_NO_TIMING），两次输出必然不同")
        env[switch] = "1"
    a, b = run_twice([os.path.join(LECTURE, name + ".py")], env)
    assert a.strip(), f"{name} 什么也没打印"
    assert a == b


@pytest.mark.skipif(not os.path.exists(REAL), reason="../shared/traces 不在（真实 trace 只在有 shared/ 的机器上测）")
def test_real_trace_run_is_deterministic():
    a, b = run_twice([os.path.join(LECTURE, "04_prefix_caching.py"), "--trace", REAL, "--demo", "3"],
                     dict(os.environ, NO_COLOR="1"))
    assert a == b and a.strip()
