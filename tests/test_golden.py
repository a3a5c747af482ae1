"""tests/golden/ 里每个脚本的标准输出（管道里的默认输出；make golden 生成）：没有一条 ✗（默认设置下每个要点都
成立），每个演示至多两条观察，每行至多 80 列。输出和标准文件逐字相同，由 test_room.py 在伪终端里顺便查（--step
去掉只在终端上才有的，就是管道里的输出）：每个脚本只跑一遍。"""
import os
import re

import pytest

from golden import SCRIPTS, path
from lab_common.show import cols


@pytest.mark.parametrize("script", [s for s in SCRIPTS if os.path.exists(path(s))])
def test_golden_file_reads_well(script):
    with open(path(script), encoding="utf-8") as f:
        out = f.read()
    assert not [x for x in out.splitlines() if re.match(r"^\s*(\d+\.\s*)?✗", x)]
    assert max(cols(x) for x in out.splitlines()) <= 80
    for block in out.split("\n观察\n")[1:]:                   # 每个演示至多两条观察
        assert 1 <= len(re.findall(r"^  \d+\. ", block.split("═")[0], re.M)) <= 2
