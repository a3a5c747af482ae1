"""06_triton_cow_clone 的图（GPU 加餐）：COW 克隆的延迟与带宽随 N 的变化，各方法一条线，带带宽上限。

运行：python figures/plot_06.py [--out DIR]     （约 2 秒；CPU 即可，make all 会调用它）
数据是 H200 上实测、存在 figures/data/triton_cow_clone_h200.json 里的结果（CPU 上重新测不了，
make clean 也不删它）；画图函数就是 06 脚本自己的 plot_from_json（--plot-only 用的同一个）。
"""
import os
import sys

import figlib

FIGURES = ("06_triton_cow_clone.png",)              # = 06 脚本的 FIGURE_NAME
DATA_FILES = ("data/triton_cow_clone_h200.json",)   # = 06 脚本的 DEFAULT_JSON（相对 figures/）


def build(out_dir):
    s06 = figlib.load_script("06_triton_cow_clone")
    data = s06.load_json(os.path.join(figlib.FIGDIR, DATA_FILES[0]))
    return [s06.plot_from_json(data, os.path.join(out_dir, FIGURES[0]))]


def main(argv=None):
    return figlib.main(argv, __doc__, build)


if __name__ == "__main__":
    sys.exit(main())
