"""每个脚本的默认和 --more 输出与 tests/golden/ 里的文件逐字相同（措辞由这里守住；改了句子就 make golden）。"""
import difflib
import os

import pytest

from conftest import kernel_missing
from golden import cases, path, run


@pytest.mark.parametrize("script,suffix,args", cases(), ids=[f"{s}{x}" for s, x, _ in cases()])
def test_output_matches_golden_file(script, suffix, args):
    if script.startswith("06") and kernel_missing():
        pytest.skip(kernel_missing())
    want_path = path(script, suffix)
    assert os.path.exists(want_path), f"没有 {want_path}：make golden"
    with open(want_path, encoding="utf-8") as f:
        want = f.read()
    code, got, err = run(script, args)
    assert code == 0, err
    if got != want:
        diff = "".join(list(difflib.unified_diff(want.splitlines(True), got.splitlines(True), want_path, "现在的输出"))[:60])
        pytest.fail(f"输出和标准文件不同（改了句子就 make golden，再看 git diff）：\n{diff}")
