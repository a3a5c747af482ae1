"""导入只往下走：脚本 → lecture07 的模块 → lab_common；没有环；从脚本 01–05、04b 起最长的项目导入链 ≤ 3
（--mine 的 exercises 导入也算）；lab_common 不知道第 7 讲。"""
import ast
import os

import pytest

from conftest import LECTURE, ROOT

SCRIPTS = ("01_kv_cache_memory", "02_paged_attention", "03_sharing_and_cow", "04_prefix_caching",
           "04b_radix_cache", "05_kv_store")


def module_file(name):
    """项目里的模块名 → 文件（不是项目的返回 None）。"""
    for base in (LECTURE, ROOT):
        path = os.path.join(base, *name.split(".")) + ".py"
        if os.path.exists(path):
            return path
    return None


def imports(path):
    """这个文件 import 的项目模块（文件路径），含 if 分支里的（--mine）。"""
    found = set()
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        found |= {module_file(n) for n in names} - {None, path}
    return found


def depth(path, seen=()):
    assert path not in seen, "导入成环：" + " → ".join(os.path.relpath(p, ROOT) for p in seen + (path,))
    return max([0] + [1 + depth(p, seen + (path,)) for p in imports(path)])


@pytest.mark.parametrize("script", SCRIPTS)
def test_import_chain_is_short(script):
    assert depth(os.path.join(LECTURE, script + ".py")) <= 3


def test_lab_common_knows_nothing_of_lecture07():
    for f in os.listdir(os.path.join(ROOT, "lab_common")):
        if f.endswith(".py"):
            assert all("lab_common" in p for p in imports(os.path.join(ROOT, "lab_common", f))), f
