"""测试的唯一路径配置：仓库根目录（lab_common 包）、lecture07/（共用模块）、figures/（画图脚本）放进 sys.path；
警告一律当错误（filterwarnings = error）。加载数字开头的脚本用 lab_common.script_tools.load_script。"""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LECTURE = os.path.join(ROOT, "lecture07")
for _p in (os.path.join(ROOT, "figures"), LECTURE, ROOT):
    if _p not in sys.path:
        sys.path.insert(0, _p)

from lab_common.script_tools import load_script  # noqa: E402,F401  测试文件 from conftest import load_script


def pytest_configure(config):
    config.addinivalue_line("filterwarnings", "error")
