"""全讲的几条规矩，用源码检查：
- lecture07/ 里没有条件表达式（`a if c else b`）：观察用普通的 if/else 一句句加进列表；
- 共用模块里没有 sys.path，编号脚本最多一行（把仓库根目录放上去）；
- FAST'25 式 (1) 的常数 a = 4、b = 22 只在一个模块里；
- 学生读到的东西（脚本、模块、README、画图代码）里没有开发过程的用词。
"""
import ast
import glob
import os
import pathlib
import re

import pytest

from conftest import LECTURE, ROOT

PY = sorted(glob.glob(os.path.join(LECTURE, "*.py")) + glob.glob(os.path.join(LECTURE, "kv_store", "*.py")))


def _src(path):
    return pathlib.Path(path).read_text(encoding="utf-8")


@pytest.mark.parametrize("path", PY, ids=os.path.basename)
def test_no_conditional_expressions(path):
    bad = [n.lineno for n in ast.walk(ast.parse(_src(path))) if isinstance(n, ast.IfExp)]
    assert bad == [], f"{os.path.basename(path)} 第 {bad} 行有 x if c else y，改成 if/else 语句"


@pytest.mark.parametrize("path", PY, ids=os.path.basename)
def test_sys_path_lines(path):
    n = _src(path).count("sys.path")
    if re.match(r"\d\d[a-z]?_", os.path.basename(path)):
        assert n <= 1
    else:
        assert n == 0


def test_eq1_constants_live_in_one_module():
    pattern = r"\b4\s*\*\s*n\s*\*\s*n\b|\b22\s*\*\s*n\b|=\s*4,\s*22\b"
    homes = [os.path.relpath(p, LECTURE) for p in PY if re.search(pattern, _src(p))]
    assert homes == ["kv_store/tiers.py"], homes


def _student_facing():
    files = PY + glob.glob(os.path.join(ROOT, "lab_common", "*.py")) + glob.glob(os.path.join(ROOT, "figures", "*.py"))
    return files + [os.path.join(ROOT, "README.md")]


@pytest.mark.parametrize("word", [r"issue\s*\d", "种子文章", "种子原样", "没有查明", r"\bseed file", "锚点"])
def test_no_build_process_words(word):
    hits = [os.path.relpath(p, ROOT) for p in _student_facing() if re.search(word, _src(p), flags=re.I)]
    assert hits == [], hits
