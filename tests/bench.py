"""make bench：和一个固定的旧版本并排计时，印出比值（绝对秒数在不同机器上差 2 倍，比值才可比）。

    .venv/bin/python tests/bench.py eeff79c              # 六个脚本、04 和 05 读 FAST'25 Conversation trace（1 遍、10 遍）
    .venv/bin/python tests/bench.py eeff79c --pytest     # 再加 pytest（和 make test 一样，不含 kernel 测试；几分钟）

旧版本用 git archive 导出到 .bench/BASE/，同一个 Python、交替运行，每项取中位数。Conversation trace 是 Mooncake 仓库
的 FAST25-release/traces/conversation_trace.jsonl（12,031 个请求），要先放到 .bench/；10 遍 = 首尾相接，第 k 遍的
时间戳加 k × 时长、hash id 加 k × 10⁷。峰值内存 = 进程树里最大的进程的 ru_maxrss。
"""
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(ROOT, ".bench")
SCRIPTS = ("01_kv_cache_memory", "02_paged_attention", "03_sharing_and_cow", "04_prefix_caching",
           "04b_radix_cache", "05_kv_store")
RUNS = 3                                            # 每项新旧各跑几次（交替）
CONVERSATION = os.path.join(BENCH, "conversation_trace.jsonl")


def timed(cmd, cwd):
    """跑一条命令（输出丢掉），返回 (墙钟秒, 峰值 MB)。"""
    t = time.perf_counter()
    p = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"{' '.join(cmd)} 在 {cwd} 失败：{p.stderr.read().decode()[-300:]}")
    return wall, usage.ru_maxrss / 1024


def side_by_side(args, base, runs=RUNS, old_args=None):
    """新旧交替跑 runs 次（旧版本跑 old_args，默认和 args 一样）：返回 (新的中位秒, 旧的中位秒, 新的峰值 MB)。"""
    new, old, mb = [], [], 0
    for _ in range(runs):
        for tree, out, a in ((ROOT, new, args), (base, old, old_args or args)):
            wall, peak = timed([sys.executable, *a], tree)
            out.append(wall)
            if tree == ROOT:
                mb = max(mb, peak)
    return statistics.median(new), statistics.median(old), mb


def copies(n):
    """Conversation trace 首尾相接 n 遍，写到 .bench/conversation_xN.jsonl。"""
    path = os.path.join(BENCH, f"conversation_x{n}.jsonl")
    rows = [json.loads(x) for x in open(CONVERSATION, encoding="utf-8")]
    span = rows[-1]["timestamp"] + 1
    with open(path, "w", encoding="utf-8") as f:
        for k in range(n):
            for r in rows:
                f.write(json.dumps(dict(r, timestamp=r["timestamp"] + k * span,
                                        hash_ids=[h + k * 10 ** 7 for h in r["hash_ids"]])) + "\n")
    return path


def main(argv):
    rev = argv[0] if argv else "eeff79c"
    base = os.path.join(BENCH, rev)
    if not os.path.isdir(base):
        os.makedirs(base)
        subprocess.run(f"git archive {rev} | tar -x -C {base}", shell=True, cwd=ROOT, check=True)
    print(f"和 {rev} 并排，各跑 {RUNS} 次取中位数（Python {sys.version.split()[0]}）")
    print(f"{'项目':<28}{'现在 s':>9}{'旧 s':>9}{'比值':>8}{'峰值 MB':>9}")
    total_new = total_old = 0
    for s in SCRIPTS:
        n, o, mb = side_by_side([f"lecture07/{s}.py"], base)
        total_new, total_old = total_new + n, total_old + o
        print(f"{s:<30}{n:>9.2f}{o:>9.2f}{n / o:>8.2f}{mb:>9.0f}")
    print(f"{'六个脚本合计':<24}{total_new:>9.2f}{total_old:>9.2f}{total_new / total_old:>8.2f}")
    if os.path.exists(CONVERSATION):
        x10 = copies(10)
        for s in ("04_prefix_caching", "05_kv_store"):
            n1, o1, mb1 = side_by_side([f"lecture07/{s}.py", "--trace", CONVERSATION], base)
            print(f"{s[:2] + ' Conversation':<26}{n1:>9.2f}{o1:>9.2f}{n1 / o1:>8.2f}{mb1:>9.0f}")
            n10, o10, mb10 = side_by_side([f"lecture07/{s}.py", "--trace", x10], base, runs=1)
            print(f"{s[:2] + ' Conversation ×10':<25}{n10:>9.2f}{o10:>9.2f}{n10 / o10:>8.2f}{mb10:>9.0f}"
                  f"   ×10 / ×1 = {n10 / n1:.1f}")
    else:
        print(f"没有 {CONVERSATION}：从 Mooncake 仓库的 FAST25-release/traces/ 拿来放在这里，才测大 trace")
    if "--pytest" in argv:
        cmd = ["-m", "pytest", "-q", "-n", "2", "-p", "no:cacheprovider", "tests"]     # 各自的 make test
        n, o, _ = side_by_side(cmd[:5] + ["--dist", "worksteal"] + cmd[5:], base, runs=1, old_args=cmd)
        print(f"{'pytest（不含 kernel 测试）':<22}{n:>9.2f}{o:>9.2f}{n / o:>8.2f}")


if __name__ == "__main__":
    main(sys.argv[1:])
