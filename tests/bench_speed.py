"""make bench：每个脚本的墙钟时间（中位数）和峰值内存，和它的预算对照；另有几项模块级的基准。

    .venv/bin/python tests/bench_speed.py            # 全部，各跑 5 次（12 万请求的两项各跑 1 次）
    .venv/bin/python tests/bench_speed.py --runs 3 04_prefix_caching "sweep 6×3"
    .venv/bin/python tests/bench_speed.py "04 vs baseline"       # 只做和旧版本（721b4fd）的 04 交替计时
    .venv/bin/python tests/bench_speed.py "大 trace 各策略"       # 大 trace 上每种策略 6 个容量各算多久（不在默认里）

几类项目：
- 每个脚本默认运行（合成 trace）：墙钟时间对照预算；
- 大 trace：FAST'25 的 Conversation trace（Mooncake 仓库 FAST25-release/traces/conversation_trace.jsonl，
  12,031 个请求）首尾相接 10 遍——第 k 遍（k = 0..9）的时间戳加 k × 整个 trace 的时长、hash id 加 k × 10⁷，
  共 120,310 个请求、288.5 万次块访问；第一次用时从 .bench/conversation_trace.jsonl 建到 .bench/ 里
  （源文件不在就打印一行下载命令，不联网）；04、05 用 --trace 读它：墙钟 ≤ 30 s、峰值内存 ≤ 200 MB，
  并报告每 1 万个请求占多少 MB；同一个脚本读 1 遍的 Conversation：10 倍的请求最多 11 倍的时间；
- 六个 CPU 脚本默认运行的中位数合计 ≤ 15 s；
- 和旧版本比（默认 721b4fd，--baseline none 不比）：把 git 里那个版本的 lecture07/ 和 lab_common/ 导出到临时目录，
  用同一个 Python 交替运行新旧 04（默认设置），新的要 ≤ 旧的 60%。
峰值内存 = os.wait4 给出的 ru_maxrss：进程树里最大的那个进程（sweep 的工作进程各算各的），和 /usr/bin/time 的 %M 相同。
机器上同时还有别的负载时墙钟会变长：表头印出开始时的 1 分钟平均负载。
不在单元测试里计时（机器忙的时候会误报）；有一项超出预算时退出码为 1。
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "lecture07")]   # lab_common 包和 lecture07 的共用模块

from lab_common.console import print_header, print_table  # noqa: E402

SCRIPT_BUDGET_S = {              # 每个脚本的墙钟预算（秒，中位数）
    "01_kv_cache_memory": 5.0,
    "02_paged_attention": 5.0,
    "03_sharing_and_cow": 5.0,
    "04_prefix_caching": 5.0,
    "04b_radix_cache": 5.0,
    "05_kv_store": 5.0,
}
SWEEP_CAPACITIES = (None, 100_000, 50_000, 30_000, 10_000, 1_000)   # 和 04 演示 3 一样
ONLINE = ("lru", "lfu", "lengthaware")

BENCH_DIR = os.path.join(ROOT, ".bench")            # 不进 git（.gitignore）
BIG_SOURCE = os.path.join(BENCH_DIR, "conversation_trace.jsonl")
BIG_SOURCE_URL = ("https://raw.githubusercontent.com/kvcache-ai/Mooncake/main/FAST25-release/traces/"
                  "conversation_trace.jsonl")
BIG_COPIES = 10                  # 重复几遍：12,031 × 10 = 120,310 个请求
BIG_ID_SHIFT = 10 ** 7           # 第 k 遍的 hash id 加 k × 10⁷（原 trace 的 id < 10⁷：各遍互不重叠）
BIG_TRACE = os.path.join(BENCH_DIR, f"conversation_x{BIG_COPIES}.jsonl")
BIG_BUDGET_S, BIG_BUDGET_MB = 30.0, 200.0
ALL_SCRIPTS_BUDGET_S = 15.0      # 六个 CPU 脚本（01–05、04b）默认运行的中位数加起来
LINEAR_BUDGET = 11.0             # 10 倍的请求最多 11 倍的时间（大 trace 对 1 遍的 Conversation）
BASELINE_RATIO = 0.60            # 新的默认 04 ≤ 旧的 60%
BASELINE_REV = "721b4fd"         # 旧版本：trace 还是 Request 对象的列表、逐个容量模拟的时候


def run_script(name, args=(), cwd=ROOT, python=sys.executable):
    """跑一次脚本（子进程，NO_COLOR，输出丢掉），返回 (墙钟秒数, 峰值 RSS MB, CPU 秒数)。失败就抛 RuntimeError。

    CPU 秒数 = 用户态 + 内核态，含 sweep 的工作进程：机器忙的时候墙钟不准，它比较稳。"""
    env = dict(os.environ, NO_COLOR="1", LAB_NO_TIMING="1")
    with tempfile.TemporaryFile() as err:
        t = time.perf_counter()
        p = subprocess.Popen([python, os.path.join(cwd, "lecture07", name + ".py"), *args],
                             stdout=subprocess.DEVNULL, stderr=err, env=env, cwd=cwd)
        _, status, usage = os.wait4(p.pid, 0)          # 自己收尸：顺便拿到这个子进程的 rusage
        wall = time.perf_counter() - t
        p.returncode = os.waitstatus_to_exitcode(status)
        if p.returncode != 0:
            err.seek(0)
            raise RuntimeError(f"{name} {' '.join(args)} 退出码 {p.returncode}："
                               f"{err.read().decode(errors='replace').strip()[-300:]}")
    rss_mb = usage.ru_maxrss / 1024           # Linux：KB
    if sys.platform == "darwin":
        rss_mb = usage.ru_maxrss / 2 ** 20    # macOS：字节
    return wall, rss_mb, usage.ru_utime + usage.ru_stime


def write_big_trace(path, src=BIG_SOURCE, copies=BIG_COPIES, id_shift=BIG_ID_SHIFT):
    """把 src 重复 copies 遍写到 path：第 k 遍的时间戳加 k × (最后一个 − 第一个时间戳)，hash id 加 k × id_shift。
    返回 (请求数, 块访问数)。先写临时文件再改名：中途失败不会留下半个 trace。"""
    with open(src, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    span = rows[-1]["timestamp"] - rows[0]["timestamp"]
    if max(max(r["hash_ids"], default=0) for r in rows) >= id_shift:
        raise ValueError(f"{src}：hash id 不小于 {id_shift}，各遍会重叠")
    tmp = path + ".part"
    with open(tmp, "w", encoding="utf-8") as f:
        for k in range(copies):
            for r in rows:
                f.write(json.dumps({"timestamp": r["timestamp"] + k * span, "input_length": r["input_length"],
                                    "output_length": r["output_length"],
                                    "hash_ids": [h + k * id_shift for h in r["hash_ids"]]}) + "\n")
    os.replace(tmp, path)
    return len(rows) * copies, sum(len(r["hash_ids"]) for r in rows) * copies


def big_trace():
    """(路径, 说明)：大 trace 已经建好或能建就返回它的路径；源文件不在时路径是 None，说明里是下载命令。"""
    if not os.path.exists(BIG_TRACE):
        if not os.path.exists(BIG_SOURCE):
            return None, (f"跳过大 trace 的几项：没有 {os.path.relpath(BIG_SOURCE, ROOT)}；"
                          f"下载：mkdir -p .bench && curl -L -o {os.path.relpath(BIG_SOURCE, ROOT)} {BIG_SOURCE_URL}")
        os.makedirs(BENCH_DIR, exist_ok=True)
        write_big_trace(BIG_TRACE)
    with open(BIG_TRACE, encoding="utf-8") as f:
        n = sum(1 for _ in f)
    return BIG_TRACE, (f"大 trace：{n:,} 个请求（FAST'25 Conversation × {BIG_COPIES}，"
                       f"{os.path.relpath(BIG_TRACE, ROOT)}）。")


def time_policy_cells(path):
    """大 trace 上每种策略（04 的 6 个容量）逐个算完的时间：一个进程、一格接一格（看哪种策略最慢）。"""
    from kv_store.replay import sweep
    from kv_store.traces import load_trace
    tr = load_trace(path)
    out = []
    for policy in ONLINE + ("min",):
        t = time.perf_counter()
        sweep(tr, SWEEP_CAPACITIES, (policy,), workers=1)
        out.append((f"大 trace 各策略：{policy}", time.perf_counter() - t))
    return out


def time_sweep(policies):
    """04 演示 3 的整张命中率表（合成 trace 种子 0）的扫描时间；生成 trace 不计时。"""
    from kv_store.replay import sweep
    from kv_store.traces import make_trace
    tr = make_trace(0)
    t = time.perf_counter()
    sweep(tr, SWEEP_CAPACITIES, policies)
    return time.perf_counter() - t, None, None


def export_baseline(rev, dest):
    """把 git 里 rev 版本的 lecture07/ 和 lab_common/ 导出到 dest（不碰工作区）。"""
    arch = subprocess.run(["git", "-C", ROOT, "archive", rev, "lecture07", "lab_common"], check=True,
                          capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", dest], input=arch, check=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5, help="每项跑几次（取中位数；大 trace 的两项最多 --big-runs 次）")
    ap.add_argument("--big-runs", type=int, default=1, help="大 trace 的两项跑几次")
    ap.add_argument("--baseline", metavar="REV", default=BASELINE_REV,
                    help=f"和 git 里这个版本的 04 交替计时（默认 {BASELINE_REV}：改成列式 trace 之前的版本；none = 不比）")
    ap.add_argument("only", nargs="*", help="只测这些（脚本名或基准名）")
    args = ap.parse_args(argv)
    if args.runs <= 0 or args.big_runs <= 0:
        print(f"bench_speed: --runs 和 --big-runs 必须是正数（收到 {args.runs}、{args.big_runs}）", file=sys.stderr)
        return 2

    def wanted(name):
        return not args.only or name in args.only

    rows, notes, over = [], [], 0
    load = os.getloadavg()[0]

    def record(name, samples, budget_s, budget_mb=None, extra=""):
        nonlocal over
        times = [s for s, _, _ in samples]
        med = statistics.median(times)
        rss = [m for _, m, _ in samples if m is not None]
        cpu = [c for _, _, c in samples if c is not None]
        ok = (budget_s is None or med <= budget_s) and (budget_mb is None or max(rss) <= budget_mb)
        over += not ok
        mark = "✓"
        if not ok:
            mark = "✗ 超出"
        rows.append([name, f"{med:.2f}（{min(times):.2f}–{max(times):.2f}）",
                     f"{statistics.median(cpu):.1f}" if cpu else "-", "-" if budget_s is None else f"{budget_s:.1f}",
                     f"{max(rss):.0f}" if rss else "-", "-" if budget_mb is None else f"{budget_mb:.0f}", extra, mark])

    medians = {}
    for name, budget in SCRIPT_BUDGET_S.items():
        if wanted(name):
            samples = [run_script(name) for _ in range(args.runs)]
            medians[name] = statistics.median(s for s, _, _ in samples)
            record(name, samples, budget)
    if len(medians) == len(SCRIPT_BUDGET_S):
        record("六个脚本合计", [(sum(medians.values()), None, None)], ALL_SCRIPTS_BUDGET_S)
    for name, policies, budget in (("sweep 6×3", ONLINE, None), ("sweep 6×4 with MIN", ONLINE + ("min",), None)):
        if wanted(name):
            record(name, [time_sweep(policies) for _ in range(args.runs)], budget)

    big = [n for n in ("04 大 trace", "05 大 trace") if wanted(n)]
    cells = args.only and "大 trace 各策略" in args.only          # 只在点名时做（一个核上逐格算，要 20 秒以上）
    if big or cells:
        path, note = big_trace()
        notes.append(note)
        if path is None:
            big, cells = [], False
    if big:
        with open(path, encoding="utf-8") as f:
            n = sum(1 for _ in f)
        for label in big:
            script = {"04": "04_prefix_caching", "05": "05_kv_store"}[label[:2]]
            samples = [run_script(script, ("--trace", path)) for _ in range(args.big_runs)]
            per10k = max(m for _, m, _ in samples) / (n / 10_000)
            record(label, samples, BIG_BUDGET_S, BIG_BUDGET_MB, f"{per10k:.1f} MB/万")
            one = [run_script(script, ("--trace", BIG_SOURCE)) for _ in range(args.big_runs)]
            grow = statistics.median(s for s, _, _ in samples) / statistics.median(s for s, _, _ in one)
            record(f"{label[:2]} 1 遍 Conversation", one, None, extra=f"× {BIG_COPIES} 的请求：× {grow:.1f} 的时间")
            if grow > LINEAR_BUDGET:
                over += 1
                rows[-1][-1] = f"✗ 超出 ×{LINEAR_BUDGET:.0f}"
    if cells:
        for label, sec in time_policy_cells(path):
            record(label, [(sec, None, None)], None)

    have_rev = subprocess.run(["git", "-C", ROOT, "cat-file", "-e", f"{args.baseline}^{{commit}}"],
                              capture_output=True).returncode == 0
    if args.baseline != "none" and not have_rev and wanted("04 vs baseline"):
        notes.append(f"跳过和旧版本的比较：git 里没有 {args.baseline}。")
    if args.baseline != "none" and have_rev and wanted("04 vs baseline"):
        tmp = tempfile.mkdtemp(prefix="bench_baseline_")
        try:
            export_baseline(args.baseline, tmp)
            old, new = [], []
            for _ in range(args.runs):                    # 交替跑：机器忙闲对两边一样
                old.append(run_script("04_prefix_caching", cwd=tmp))
                new.append(run_script("04_prefix_caching"))
            ratio = statistics.median(t for t, _, _ in new) / statistics.median(t for t, _, _ in old)
            cpu_ratio = statistics.median(c for _, _, c in new) / statistics.median(c for _, _, c in old)
            record(f"04 {args.baseline}", old, None)
            record("04 vs baseline", new, BASELINE_RATIO * statistics.median(t for t, _, _ in old),
                   extra=f"新/旧 {ratio:.0%}（CPU {cpu_ratio:.0%}）")
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    print_header(f"make bench：墙钟时间（秒），每项 {args.runs} 次（大 trace {args.big_runs} 次），{os.cpu_count()} 个核，"
                 f"开始时 1 分钟平均负载 {load:.1f}")
    print_table(["项目", "墙钟（最快–最慢）", "CPU", "预算", "MB", "上限", "备注", ""], rows,
                caption=" ".join(notes + ["墙钟、CPU（用户 + 内核，含工作进程）单位秒；MB：峰值内存，进程树里最大的那个进程的"
                                          " ru_maxrss（脚本项；sweep 项不测）；MB/万：每 1 万个请求的峰值内存。"]))
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
