"""测试共用：把 lecture07/ 和 lab_common/ 放进 sys.path，按文件名加载以数字开头的脚本。"""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LECTURE = os.path.join(ROOT, "lecture07")
sys.path.insert(0, LECTURE)
sys.path.insert(0, os.path.join(ROOT, "lab_common"))

from script_tools import load_script as _load  # noqa: E402


def load_script(name):
    """load_script("04_prefix_caching") → 那个脚本的模块对象（每个进程只加载一次）。"""
    return _load(os.path.join(LECTURE, name + ".py"))
