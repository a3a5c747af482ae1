"""每个脚本的默认输出：和 tests/golden/ 里的文件逐字相同（改了句子就 make golden，再看 git diff），
没有一条 ✗（默认设置下每个要点都成立），每个演示至多两条观察，每行至多 80 列。"""
import difflib
import os
import re

import pytest

from conftest import run
from golden import SCRIPTS, path
from lab_common.show import cols


@pytest.mark.parametrize("script", [s for s in SCRIPTS if os.path.exists(path(s))])
def test_default_output(script):
    code, out, err = run(script)
    assert code == 0, err
    with open(path(script), encoding="utf-8") as f:
        want = f.read()
    diff = "".join(list(difflib.unified_diff(want.splitlines(True), out.splitlines(True), "标准", "现在"))[:60])
    assert out == want, "输出和标准文件不同（改了句子就 make golden）：\n" + diff
    assert not [x for x in out.splitlines() if re.match(r"^\s*(\d+\.\s*)?✗", x)]
    assert max(cols(x) for x in out.splitlines()) <= 80
    for block in out.split("\n观察\n")[1:]:                   # 每个演示至多两条观察
        assert 1 <= len(re.findall(r"^  \d+\. ", block.split("═")[0], re.M)) <= 2
