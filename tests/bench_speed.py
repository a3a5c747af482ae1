"""make bench：每个脚本的运行时间（墙钟，中位数），和 issue 里的预算对照。

    .venv/bin/python tests/bench_speed.py            # 全部脚本，各跑 5 次
    .venv/bin/python tests/bench_speed.py --runs 3 04_prefix_caching

不在单元测试里计时（机器忙的时候会误报）；超出预算时退出码为 1。
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "lab_common"))
from console import print_header, print_table  # noqa: E402

BUDGET_S = {                     # 每个脚本的墙钟预算（秒，中位数）：来自各个 issue
    "01_kv_cache_memory": 5.0,
    "02_paged_attention": 5.0,
    "03_sharing_and_cow": 5.0,
    "04_prefix_caching": 4.0,
    "05_kv_store": 5.0,
}
EXTRA = {}                       # 其他基准：名字 → (函数, 预算秒)；返回秒数。见 register()


def register(name, budget_s):
    def deco(fn):
        EXTRA[name] = (fn, budget_s)
        return fn
    return deco


def time_script(name, runs):
    path = os.path.join(ROOT, "lecture07", name + ".py")
    env = dict(os.environ, NO_COLOR="1")
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run([sys.executable, path], check=True, stdout=subprocess.DEVNULL, env=env, cwd=ROOT)
        times.append(time.perf_counter() - t)
    return times


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5, help="每个脚本跑几次（取中位数）")
    ap.add_argument("only", nargs="*", help="只测这些（脚本名或基准名）")
    args = ap.parse_args(argv)
    if args.runs <= 0:
        print(f"bench_speed: --runs 必须是正数（收到 {args.runs}）", file=sys.stderr)
        return 2
    try:
        import bench_extra  # noqa: F401  其他基准（扫描命中率等）在这个文件里注册
    except ImportError:
        pass
    rows, over = [], 0
    names = [n for n in BUDGET_S if os.path.exists(os.path.join(ROOT, "lecture07", n + ".py"))]
    for name in names + list(EXTRA):
        if args.only and name not in args.only:
            continue
        if name in BUDGET_S:
            times, budget = time_script(name, args.runs), BUDGET_S[name]
        else:
            fn, budget = EXTRA[name]
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
    sys.modules.setdefault("bench_speed", sys.modules["__main__"])   # bench_extra 里的 register() 要注册到这一份
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    sys.exit(main())
