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


def project_imports():
    """{模块名: 它 import 的本项目模块}：lecture07/ 下的脚本和模块（kv_store.x、gpu.x）和 lab_common.x。"""
    files = glob.glob(os.path.join(LECTURE, "**", "*.py"), recursive=True) + glob.glob(os.path.join(ROOT, "lab_common", "*.py"))
    def name(f):
        base = LECTURE if f.startswith(LECTURE + os.sep) else ROOT
        return os.path.relpath(f, base)[:-3].replace(os.sep, ".").removesuffix(".__init__")
    names = {name(f): f for f in files}
    edges = {}
    for m, f in names.items():
        found = set()
        for n in ast.walk(ast.parse(_src(f))):
            if isinstance(n, ast.Import):
                found |= {a.name for a in n.names}
            elif isinstance(n, ast.ImportFrom) and n.module:
                found |= {n.module} | {f"{n.module}.{a.name}" for a in n.names}
            elif isinstance(n, ast.Constant) and isinstance(n.value, str) and re.fullmatch(r"0\d[a-z]?_\w+\.py", n.value):
                found.add(n.value[:-3])                                       # 按路径加载另一个脚本
        edges[m] = {x for x in found if x in names and x != m}
    return edges


def longest_chain(edges):
    """最长的一条 import 链（模块名的列表，从最上面的脚本到最底下的模块）。

    >>> longest_chain({"a": {"b"}, "b": {"c"}, "c": set(), "d": {"c"}})
    ['a', 'b', 'c']
    """
    best = {}
    def down(m):
        if m not in best:
            best[m] = [m] + max((down(x) for x in edges[m]), key=len, default=[])
        return best[m]
    return max((down(m) for m in edges), key=len)


def test_imports_go_down_at_most_five_modules():
    """最长的 import 链至多 5 个模块（nano-vllm 也是 5 层）；没有脚本加载另一个脚本；lab_common 不认识第 7 讲。"""
    edges = project_imports()
    chain = longest_chain(edges)
    assert len(chain) <= 5, " → ".join(chain)
    scripts = {m for m in edges if re.fullmatch(r"0\d[a-z]?_\w+", m)}
    assert all(not (edges[s] & scripts) for s in scripts), {s: edges[s] & scripts for s in scripts}
    assert all(x.startswith("lab_common") for m in edges if m.startswith("lab_common") for x in edges[m])


def test_no_private_name_is_imported_across_modules():
    files = (glob.glob(os.path.join(LECTURE, "**", "*.py"), recursive=True) + glob.glob(os.path.join(ROOT, "lab_common", "*.py"))
             + glob.glob(os.path.join(ROOT, "figures", "*.py")) + glob.glob(os.path.join(ROOT, "exercises", "*.py")))
    bad = [(os.path.relpath(f, ROOT), a.name) for f in files for n in ast.walk(ast.parse(_src(f)))
           if isinstance(n, ast.ImportFrom) and n.module and not n.module.startswith("__")
           for a in n.names if a.name.startswith("_")]
    assert bad == []


def test_one_process_pool_with_explicit_arguments():
    """全讲只有一个进程池：lab_common/workers.py 的 run_jobs（sweep、调度模拟、网卡模拟都交给它）。
    别处不 import multiprocessing、concurrent.futures，也不 fork 打印的子进程。"""
    files = (glob.glob(os.path.join(LECTURE, "**", "*.py"), recursive=True) + glob.glob(os.path.join(ROOT, "lab_common", "*.py")))
    uses = sorted(os.path.relpath(f, ROOT) for f in files
                  if re.search(r"^\s*(import|from)\s+(multiprocessing|concurrent)\b|os\.fork\(", _src(f), flags=re.M))
    assert uses == ["lab_common/workers.py"], uses
    workers = _src(os.path.join(ROOT, "lab_common", "workers.py"))
    assert not re.search(r"^(global\s|_[A-Z]+\s*=)", workers, flags=re.M)     # 没有模块级的全局变量给工作进程传数据
