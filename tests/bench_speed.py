"""make bench：每个脚本的墙钟时间（中位数），和它的预算对照；另有几项模块级的基准。

    .venv/bin/python tests/bench_speed.py            # 全部，各跑 5 次
    .venv/bin/python tests/bench_speed.py --runs 3 04_prefix_caching "sweep 7×3"

不在单元测试里计时（机器忙的时候会误报）；有一项超出预算时退出码为 1。
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "lecture07")]   # lab_common 包和 lecture07 的共用模块

from lab_common.console import print_header, print_table  # noqa: E402

SCRIPT_BUDGET_S = {              # 每个脚本的墙钟预算（秒，中位数）
    "01_kv_cache_memory": 5.0,
    "02_paged_attention": 5.0,
    "03_sharing_and_cow": 5.0,
    "04_prefix_caching": 4.0,
    "05_kv_store": 5.0,
}
SWEEP_CAPACITIES = (None, 100_000, 50_000, 30_000, 10_000, 3_000, 1_000)   # 和 04 演示 3 一样
ONLINE = ("lru", "lfu", "lengthaware")


def time_script(name):
    """跑一次脚本（子进程，NO_COLOR），返回墙钟秒数。"""
    env = dict(os.environ, NO_COLOR="1")
    t = time.perf_counter()
    subprocess.run([sys.executable, os.path.join(ROOT, "lecture07", name + ".py")], check=True,
                   stdout=subprocess.DEVNULL, env=env, cwd=ROOT)
    return time.perf_counter() - t


def time_sweep(policies):
    """04 演示 3 的整张命中率表（合成 trace 种子 0）的扫描时间；生成 trace 不计时。"""
    from kv_cache_sim import sweep
    from kv_trace import make_trace
    blocks = [r.blocks for r in make_trace(0)]
    t = time.perf_counter()
    sweep(blocks, SWEEP_CAPACITIES, policies)
    return time.perf_counter() - t


# 模块级基准：名字 → (无参函数，返回秒数；预算秒)
EXTRA = {
    "sweep 7×3": (lambda: time_sweep(ONLINE), 3.0),
    "sweep 7×4 with MIN": (lambda: time_sweep(ONLINE + ("min",)), 6.0),
}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5, help="每项跑几次（取中位数）")
    ap.add_argument("only", nargs="*", help="只测这些（脚本名或基准名）")
    args = ap.parse_args(argv)
    if args.runs <= 0:
        print(f"bench_speed: --runs 必须是正数（收到 {args.runs}）", file=sys.stderr)
        return 2
    items = {name: ((lambda n=name: time_script(n)), budget) for name, budget in SCRIPT_BUDGET_S.items()}
    items.update(EXTRA)
    rows, over = [], 0
    for name, (fn, budget) in items.items():
        if args.only and name not in args.only:
            continue
        times = [fn() for _ in range(args.runs)]
        med = statistics.median(times)
        ok = med <= budget
        over += not ok
        rows.append([name, f"{med:.2f}", f"{min(times):.2f}", f"{max(times):.2f}", f"{budget:.1f}",
                     "✓" if ok else "✗ 超出"])
    print_header(f"make bench：墙钟时间（秒），每项 {args.runs} 次，{os.cpu_count()} 个核")
    print_table(["项目", "中位数", "最快", "最慢", "预算", ""], rows)
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
