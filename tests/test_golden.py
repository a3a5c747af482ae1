"""每个脚本的默认和 --more 输出与 tests/golden/ 里的文件逐字相同（措辞由这里守住；改了句子就 make golden）。
默认输出里每个演示至多 2 条观察：在同一批文件上数。

标准文件是 make golden 在新解释器里跑出来的。这里比的是本进程里 main(argv) 的输出（conftest.run_main：整个会话
每个脚本、每个 argv 只跑一遍，冒烟测试和 test_determinism 用的也是这一遍）；新进程里打印的和本进程逐字节相同，
由 test_determinism 守住。06 的两份在 test_06_decode_share 里比：06 要 import torch，只在 kernel 测试的进程里
跑（这个进程之后可能还要 fork 进程池，fork 一个已经起了 torch 线程的进程，子进程会死）；在那里它和别的 06 测试
共用同一遍输出，不另起新解释器。"""
import re

import pytest

from conftest import run_main
from golden import cases, mismatch, path


ONE_PROCESS = [c for c in cases() if not c[0].startswith("06")]   # 06 的两份在 test_06_decode_share 里比（见上）


@pytest.mark.parametrize("script,suffix,args", ONE_PROCESS, ids=[f"{s}{x}" for s, x, _ in ONE_PROCESS])
def test_output_matches_golden_file(script, suffix, args):
    got = run_main(script, args)[0]                # 退出码 0 由 run_main 断言
    problem = mismatch(script, suffix, got)
    if problem:
        pytest.fail(problem)


def observation_counts(text):
    """一份输出里每个"观察"块有几条（编号 "  1. "、"  2. " 开头的行）。

    >>> observation_counts("观察\\n  1. 甲。\\n  2. 乙，\\n     接着。\\n表\\n观察\\n  1. 丙。\\n")
    [2, 1]
    """
    counts = []
    for line in text.splitlines():
        if line.strip() == "观察":
            counts.append(0)
        elif counts and re.match(r"^  \d+\. ", line):
            counts[-1] += 1
    return counts


@pytest.mark.parametrize("script", sorted({s for s, _, _ in cases()}))
def test_default_output_has_at_most_two_observations_per_demo(script):
    with open(path(script, ""), encoding="utf-8") as f:
        counts = observation_counts(f.read())
    assert counts and 1 <= min(counts) and max(counts) <= 2, counts
