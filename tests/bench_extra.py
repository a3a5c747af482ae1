"""make bench 的附加项：命中率扫描（演示 3 的整张表）的墙钟时间。bench_speed.py 会 import 这个文件。

    .venv/bin/python tests/bench_speed.py --runs 3 "sweep 7×3" "sweep 7×4 with MIN"
"""
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lecture07"))
from bench_speed import register  # noqa: E402
from kv_cache_sim import sweep  # noqa: E402
from kv_trace import make_trace  # noqa: E402

CAPACITIES = (None, 100_000, 50_000, 30_000, 10_000, 3_000, 1_000)   # 和 04 演示 3 一样
ONLINE = ("lru", "lfu", "lengthaware")
_BLOCKS = []


def _blocks():
    """合成 trace（种子 0，约 41 万次块访问）只生成一次，不计入扫描时间。"""
    if not _BLOCKS:
        _BLOCKS.extend(r.blocks for r in make_trace(0))
    return _BLOCKS


def _time_sweep(policies):
    blocks = _blocks()
    t = time.perf_counter()
    sweep(blocks, CAPACITIES, policies)
    return time.perf_counter() - t


@register("sweep 7×3", 3.0)
def sweep_online():
    return _time_sweep(ONLINE)


@register("sweep 7×4 with MIN", 6.0)
def sweep_with_min():
    return _time_sweep(ONLINE + ("min",))
