"""每个脚本的默认和 --more 输出与 tests/golden/ 里的文件逐字相同（措辞由这里守住；改了句子就 make golden）。
默认输出里每个演示至多 2 条观察：在同一批文件上数。

标准文件是 make golden 在新解释器里跑出来的。这里比的是本进程里 main(argv) 的输出（conftest.run_main：整个会话
每个脚本、每个 argv 只跑一遍，冒烟测试和 test_determinism 用的也是这一遍）；新进程里打印的和本进程逐字节相同，
由 test_determinism 守住（06：test_06_decode_share 在本进程里跑过就用那一遍，否则在新解释器里跑）。"""
import difflib
import os
import re

import pytest

from conftest import kernel_missing, run_main, shared_get
from golden import cases, path, run


@pytest.mark.parametrize("script,suffix,args", cases(), ids=[f"{s}{x}" for s, x, _ in cases()])
def test_output_matches_golden_file(script, suffix, args):
    if script.startswith("06") and kernel_missing():
        pytest.skip(kernel_missing())
    want_path = path(script, suffix)
    assert os.path.exists(want_path), f"没有 {want_path}：make golden"
    with open(want_path, encoding="utf-8") as f:
        want = f.read()
    if script.startswith("06"):
        # 06 在本进程里要 import torch：只在 kernel 测试的进程里做（这个进程之后可能还要 fork 进程池，fork 一个
        # 已经起了 torch 线程的进程，子进程会死、池子永远等）。test_06_decode_share 已经跑过就用它那一遍
        # （conftest.run_main 的会话缓存），否则在新解释器里跑。
        found, value = shared_get(("run_main", script, tuple(args)))
        if found:
            got = value[0]
        else:
            code, got, err = run(script, args)
            assert code == 0, err
    else:
        got = run_main(script, args)[0]            # 退出码 0 由 run_main 断言
    if got != want:
        diff = "".join(list(difflib.unified_diff(want.splitlines(True), got.splitlines(True), want_path, "现在的输出"))[:60])
        pytest.fail(f"输出和标准文件不同（改了句子就 make golden，再看 git diff）：\n{diff}")


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
