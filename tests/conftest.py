"""测试的共用配置：路径（仓库根目录、lecture07/、figures/ 放进 sys.path）、按文件加载数字开头的脚本、
在新解释器里跑一个脚本、真实 trace 的位置。警告一律当错误（pytest.ini）。"""
import importlib.util
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LECTURE = os.path.join(ROOT, "lecture07")
for _p in (os.path.join(ROOT, "figures"), LECTURE, ROOT):
    if _p not in sys.path:
        sys.path.insert(0, _p)

REAL_TRACE = os.path.normpath(os.path.join(ROOT, "..", "shared", "traces", "mooncake_fast25_synthetic_trace.jsonl"))
needs_real_trace = pytest.mark.skipif(not os.path.exists(REAL_TRACE),
                                      reason=f"没有 Mooncake 的公开 trace：放到 {REAL_TRACE}")


def load(name):
    """load("04_prefix_caching") → 模块对象（数字开头的文件名不能直接 import）；每次调用都重新执行一遍，
    测试里改它的设置不影响别的测试。"""
    spec = importlib.util.spec_from_file_location("script_" + name, os.path.join(LECTURE, name + ".py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run(script, *args, env=None, timeout=300):
    """在新的解释器里跑 lecture07/script.py（输出进管道，和学生敲的命令一样），返回 (退出码, stdout, stderr)。"""
    e = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "FORCE_COLOR")}
    e.update(PYTHONIOENCODING="utf-8", **(env or {}))
    p = subprocess.run([sys.executable, os.path.join(LECTURE, script + ".py"), *args], cwd=ROOT, env=e,
                       capture_output=True, text=True, encoding="utf-8", timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def pytest_collection_modifyitems(items):
    """最长的测试（test_room：每个脚本整个跑一遍）先开始，两个进程差不多同时收尾。"""
    items.sort(key=lambda item: "test_room.py" not in item.nodeid)
