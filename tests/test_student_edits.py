"""学生改设置：每个改动要么正常跑完（rc 0）且一句可检查的说法成立，要么一行拒绝（rc 2）。

做法：把 lecture07/ 复制到临时目录（lab_common 也复制，脚本的"仓库根目录"那一行照常生效），
只改脚本顶部设置块里那一个常量的赋值，再用子进程跑 `--demo N`（够用时只跑一个演示，省时间）。

每条 Edit：脚本、常量、新值（源码文本）、要跑的演示（None = 全部）、检查函数 check(rc, out, err)。
各脚本的改动表在下面分节列出；docstring 里的"试一试"每一条都在表里。
"""
import os
import pathlib
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass

import pytest

from conftest import ROOT


@dataclass(frozen=True)
class Edit:
    script: str          # "04_prefix_caching"
    const: str           # "CAPACITIES"
    value: str           # 新值的源码文本，例如 "(None, 1)"
    demo: object         # 演示编号，或 None（全跑）
    check: object        # check(rc, out, err)：断言这个改动下应该成立的事
    why: str = ""        # 这个改动考的是什么（失败时显示）

    @property
    def id(self):
        return f"{self.script[:2]}-{self.const}={self.value}"[:60]


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory):
    """lecture07/ 和 lab_common/ 的一份临时副本（改动只落在副本上）。"""
    root = tmp_path_factory.mktemp("edits")
    for d in ("lecture07", "lab_common"):
        shutil.copytree(os.path.join(ROOT, d), root / d, ignore=shutil.ignore_patterns("__pycache__"))
    return root


def apply_edit(src, const, value):
    """把设置块里 `CONST = ...` 那一条赋值（可能跨行，到括号配平为止）换成 `CONST = value`。

    >>> apply_edit("A = (1,\\n     2)  # 注释\\nB = 3\\n", "A", "(5,)")
    'A = (5,)  # 改过\\nB = 3\\n'
    """
    m = re.search(rf"^{const} = ", src, flags=re.M)
    assert m, f"设置 {const} 不在脚本里"
    i, depth = m.end(), 0
    while True:                                   # 找到赋值表达式的结尾：括号配平后的第一个换行
        c = src[i]
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == "#" and depth == 0:
            i = src.index("\n", i)
            break
        elif c == "\n" and depth == 0:
            break
        elif c in "\"'":
            i = src.index(c, i + 1)
        i += 1
    return src[:m.start()] + f"{const} = {value}  # 改过" + src[i:]


def run_edit(sandbox, edit):
    path = sandbox / "lecture07" / f"{edit.script}.py"
    original = pathlib.Path(ROOT, "lecture07", f"{edit.script}.py").read_text(encoding="utf-8")
    path.write_text(apply_edit(original, edit.const, edit.value), encoding="utf-8")
    try:
        argv = [sys.executable, str(path)] + ([] if edit.demo is None else ["--demo", str(edit.demo)])
        p = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=sandbox,
                           env=dict(os.environ, NO_COLOR="1", LAB_NO_TIMING="1", COLUMNS="100"))
    finally:
        path.write_text(original, encoding="utf-8")
    return p.returncode, p.stdout, p.stderr


# ---------------------------------------------------------------- 检查函数的小工具
def refused(const):
    """rc 2，stderr 恰好一行，点名这个常量；没有 traceback。"""
    def check(rc, out, err):
        assert rc == 2, (rc, err[-500:])
        lines = err.strip().splitlines()
        assert len(lines) == 1 and const in lines[0] and "Traceback" not in err, err
    return check


def runs(*must_contain, absent=()):
    """rc 0，没有 traceback / nan / inf；输出里包含每个 must_contain，且不包含 absent 里的任何一个。"""
    def check(rc, out, err):
        assert rc == 0, err[-2000:]
        assert "Traceback" not in err and not re.search(r"\bnan\b|\binf\b", out), err[-500:]
        for s in must_contain:
            assert s in out, s
        for s in absent:
            assert s not in out, s
    return check


# ---------------------------------------------------------------- 改动表（每个脚本一节）
EDITS = []

# ---- 01_kv_cache_memory
EDITS_01 = []

# ---- 02_paged_attention
EDITS_02 = []

# ---- 03_sharing_and_cow
EDITS_03 = []

# ---- 04_prefix_caching
EDITS_04 = []

# ---- 05_kv_store
EDITS_05 = []

EDITS = EDITS_01 + EDITS_02 + EDITS_03 + EDITS_04 + EDITS_05


@pytest.mark.parametrize("edit", EDITS, ids=[e.id for e in EDITS])  # 每条改动一个测试
def test_student_edit(sandbox, edit):
    rc, out, err = run_edit(sandbox, edit)
    edit.check(rc, out, err)
