"""（GPU 加餐）写时复制要把共享的、没写满的最后一块整块克隆：这一步要多久？一次 launch 搬完所有层的
Triton kernel 能否既省掉逐层 launch 的开销、又跑到显存带宽的上限？放回一整步 decode 里它占多少？

运行：
    python lecture07/06_triton_cow_clone.py               # NVIDIA GPU：校验 + 计时，写 JSON（H200 上约 30 秒）
    python lecture07/06_triton_cow_clone.py               # 没有 GPU：Triton 解释器里校验，再打印保存的结果（约 3 秒）
    python lecture07/06_triton_cow_clone.py --plot-only   # 用保存的 JSON 重画图（= python figures/plot_06.py）
    选项：--json PATH 结果文件，--figures DIR 图的目录，--demo N 只跑一个演示

一步 COW 要克隆 N 个块（所有层、K 和 V），四种做法；A、B 是博客《从零实现 LLM Inference：063. Triton
batched KV COW clone（替换 index_select/index_copy）》（rosellm 项目的 roseinfer 引擎）里的"之前"和"之后"：
    A 每层 index_select + index_copy_   B 每层一次 Triton launch   C 所有层一次 launch   D 连续拷贝（上限）
"""
import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.realpath(__file__))))  # 仓库根目录：lab_common

from lab_common.console import ArgParser, fail, print_header, print_observations, print_table, print_text  # noqa: E402
from lab_common.settings import check_setting, is_int  # noqa: E402

# ───────────────────────────── 学生可以改的设置 ─────────────────────────────
SHAPES = {   # 每层的 KV 形状：KV 头数 H、头维度 D、块大小 BS（token）
    "gpt2-small": dict(n_layers=12, n_heads=12, head_dim=64, block_size=16, dtype="float16"),
    "llama3-8b": dict(n_layers=32, n_heads=8, head_dim=128, block_size=16, dtype="bfloat16"),
}
NS = (1, 8, 64, 256, 2048)      # 一步要克隆的块对数 N（从小到大；最小的看开销，最大的看带宽）
REPS = 15                       # 每个计时取几个样本的中位数
DECODE_BATCHES = (1, 8, 64)     # 演示 4：同一步里刚命中 prefix 的序列数 B（= 要克隆的块对数）
DECODE_PREFIX_LEN = 200         # 命中的 prefix 长度（token）；不能是块大小的整数倍，否则最后一块是满的、不用 COW
DECODE_ROUNDS = 3               # 演示 4：三个 graph 轮流计时几轮（看轮与轮之间的波动）
LARGE_SHARE = 0.10              # 克隆占一步的比例 ≥ 它叫"大头"，否则叫"小头"
SEED = 0                        # 随机数种子（形状、块号、权重）

TARGETS = {"C/A (N 最小)": 1 / 20, "C/D 带宽 (N 最大)": 0.95, "C/D 耗时 (N 最小)": 1.3}
MIN_VERSIONS = {"torch": (2, 4), "triton": (3, 0)}
SCRIPT = "06_triton_cow_clone.py"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_JSON = os.path.join(ROOT, "figures", "data", "triton_cow_clone_h200.json")
BLOG = dict(name="博客《从零实现 LLM Inference：063. Triton batched KV COW clone》",
            first_token_p99_ms={"之前": (0.59, 0.55, 0.51), "之后": (0.52, 0.49, 0.47)},   # 三次运行
            ttft_p99_ms={"之前": (26.44, 28.22, 27.97), "之后": (25.14, 28.82, 28.93)})
METHODS = ("A", "B", "C", "D", "A图", "C图", "D图")


def check_settings():
    dims = ("n_layers", "n_heads", "head_dim", "block_size")
    for name, ok, allowed in (
            ("NS", len(NS) >= 2 and all(is_int(n, 1, 4096) for n in NS) and list(NS) == sorted(set(NS)),
             "至少两个、从小到大、不重复的 1~4096 的整数"),
            ("REPS", is_int(REPS, 3, 1000), "3~1000 的整数"),
            ("DECODE_BATCHES", len(DECODE_BATCHES) > 0 and all(is_int(b, 1, 512) for b in DECODE_BATCHES),
             "1~512 的整数"),
            ("DECODE_PREFIX_LEN", is_int(DECODE_PREFIX_LEN, 2, 1000) and DECODE_PREFIX_LEN % 16 != 0,
             "2~1000、不是块大小 16 的整数倍"),
            ("DECODE_ROUNDS", is_int(DECODE_ROUNDS, 2, 20), "2~20 的整数"),
            ("SHAPES", "gpt2-small" in SHAPES and SHAPES["gpt2-small"]["block_size"] == 16 and all(
                is_int(s[k], 1, 256) for s in SHAPES.values() for k in dims) and all(
                s["dtype"] in ("float16", "bfloat16", "float32") for s in SHAPES.values()),
             "含 gpt2-small（块大小 16，演示 4 用它）、各维 1~256、dtype 为 float16/bfloat16/float32")):
        check_setting(name, globals()[name], ok, allowed, SCRIPT)


def import_gpu_stack():
    """torch 与 triton：缺了或版本太旧 → stderr 一行、退出码 2。没有 CUDA 时先开 Triton 解释器。"""
    mods = {}
    for name in ("torch", "triton"):
        if name == "triton":
            import torch
            if not torch.cuda.is_available():
                os.environ.setdefault("TRITON_INTERPRET", "1")      # 必须在 import triton 之前
        try:
            mods[name] = __import__(name)
        except ImportError:
            fail(SCRIPT, f"需要 {name} ≥ {'.'.join(map(str, MIN_VERSIONS[name]))}，没有装：有 NVIDIA GPU 时装 CUDA 版 "
                         "torch（自带 triton），只有 CPU 时 pip install -r requirements-triton.txt")
        got = tuple(int(x) for x in mods[name].__version__.split("+")[0].split(".")[:2])
        if got < MIN_VERSIONS[name]:
            fail(SCRIPT, f"{name} {mods[name].__version__} 太旧：需要 ≥ {'.'.join(map(str, MIN_VERSIONS[name]))}")
    import kv_clone_bench
    import kv_clone_triton
    return mods["torch"], kv_clone_triton, kv_clone_bench


# ───────────────────────────── 演示 1：校验 ─────────────────────────────
def demo_1(torch, kvc, bench, on_gpu):
    """COW 克隆 kernel 在 fp16/bf16/fp32、N = 0 / 1 / 多个、一块跨几个 tile 时，是否逐位正确？"""
    where = "CPU 上的 Triton 解释器（TRITON_INTERPRET=1）"
    if on_gpu:
        where = f"GPU（{torch.cuda.get_device_name()}，真实 kernel）"
    print_header(f"演示 1：校验 COW 克隆——{where}")
    rows, n_ok, n_checks = [], 0, 0
    for i, (dt, L, H, D, BS, n, tile) in enumerate(bench.validation_cases(SHAPES, on_gpu)):
        ok, k = bench.check_cow_write(getattr(torch, dt), L, H, D, BS, n, ("cpu", "cuda")[on_gpu], SEED + i, tile)
        block, tiles = kvc.tile_for(H * BS * D, tile)
        n_ok += ok
        n_checks += k
        rows.append([dt, f"L{L} H{H} D{D} BS{BS}", n, f"{tiles}×{block}", ("失败", "通过")[ok]])
    print_table(["dtype", "形状", "N", "tile 划分", "结果"], rows,
                caption="tile 划分：每块 H×BS×D 个元素分给几个 program、每个搬几个（最后一个可以不满）")
    lines = [f"{len(rows)} 个用例、{n_checks} 项检查，通过 {n_ok} 个用例。"]
    if n_ok == len(rows):
        lines.append("写入前空闲块的每个字节都是 0xFF；整个缓存与按预期重放的结果逐位相同，所以没有漏写、多写、"
                     "写错位置；共享块本身没被改动，一步里所有块对只调用了一次克隆。")
    else:
        lines.append("有用例失败：后面的计时没有意义。")
    print_observations(lines)
    return {"cases": len(rows), "passed": n_ok, "checks": n_checks, "all_ok": n_ok == len(rows)}


# ───────────────────────────── 演示 2–4：测量（GPU）与打印（GPU / CPU） ─────────────────────────────
def load_results(path):
    """读保存的结果；不是文件、不是 JSON、缺字段 → 一行错误、退出码 2。"""
    if not os.path.isfile(path):
        fail(SCRIPT, f"--json {path}：不是一个存在的文件")
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        assert all(isinstance(data["meta"][k], str) for k in ("gpu", "torch", "triton", "date"))
        assert all({"shape", "N", "method", "us"} <= set(r) for r in data["results"])
        assert all({"B", "us", "rounds_us", "attention", "repeatable"} <= set(r) for r in data["decode"]["rows"])
        assert all({"check", "upload", "launch", "launch_jit", "C", "D"} <= set(data["tuning"][s]["host_us_N1"])
                   for s in data["shapes"])
    except (ValueError, KeyError, TypeError, AssertionError, UnicodeDecodeError) as exc:
        fail(SCRIPT, f"--json {path}：不是本脚本保存的结果（{type(exc).__name__}：{str(exc)[:60]}）")
    return data


def get(data, shape, n, m):
    return next(r for r in data["results"] if r["shape"] == shape and r["N"] == n and r["method"] == m)["us"]


def fmt_us(x):
    if x >= 100:
        return f"{x:,.0f}"
    return f"{x:.1f}"


def saved_label(data, path):
    m = data["meta"]
    return f"{m['gpu']}，torch {m['torch']}，triton {m['triton']}，{m['date']}（{os.path.relpath(path)}）"


def demo_2(data):
    """一步克隆 N 个块（所有层、K 和 V）要多少 µs？A/B/C/D，以及捕获进 CUDA graph 之后。"""
    print_header("演示 2：计时 A / B / C / D（每步 µs）")
    out = {}
    for name, s in data["shapes"].items():
        ns = sorted({r["N"] for r in data["results"] if r["shape"] == name})
        best = data["tuning"][name]["best"]
        print_table(["N"] + list(METHODS), [[n] + [fmt_us(get(data, name, n, m)) for m in METHODS] for n in ns],
                    title=f"{name}：{s['n_layers']} 层、H={s['n_heads']}、D={s['head_dim']}、BS={s['block_size']}、"
                          f"{s['dtype']}",
                    caption=f"µs/步，{data['reps']} 个样本的中位数（CUDA event 包住连续调用）。图 = 捕获进 CUDA graph 后 "
                            f"replay；C图 每步还含主机上检查下标、写锁页内存。C 的 tile={best['tile']}、"
                            f"warps={best['num_warps']}（在 N={ns[-1]} 上扫出来的）")
        out[name] = {n: {m: get(data, name, n, m) for m in METHODS} for n in ns}
    return out


def ratios(data, name):
    ns = sorted({r["N"] for r in data["results"] if r["shape"] == name})
    lo, hi = ns[0], ns[-1]
    r = dict(n_lo=lo, n_hi=hi, c_over_a=get(data, name, lo, "C") / get(data, name, lo, "A"),
             c_over_d_bw=get(data, name, hi, "D") / get(data, name, hi, "C"),
             seq_over_d_bw=get(data, name, hi, "D") / data["tuning"][name]["sequential_blocks_us"],
             c_over_d_lo=get(data, name, lo, "C") / get(data, name, lo, "D"), d_lo=get(data, name, lo, "D"),
             cg_over_d_lo=get(data, name, lo, "C图") / get(data, name, lo, "D"),
             cg_over_dg_lo=get(data, name, lo, "C图") / get(data, name, lo, "D图"))
    roof = r["roof_GBps"] = max(x["GBps"] for x in data["results"] if x["shape"] == name and x["method"] == "D")
    r["cross"] = next((n for n in ns if any(x["GBps"] >= roof / 2 for x in data["results"] if x["shape"] == name
                                            and x["N"] == n and x["method"] == "C")), None)
    return r


def reached(x, target, at_most):
    return ("未达标", "达标")[(x <= target) == at_most]


def bottleneck_observations(data, name, r):
    h = data["tuning"][name]["host_us_N1"]
    rest = h["C"] - h["check"] - h["upload"] - h["launch"]
    lines = [f"{name}，N={r['n_lo']}：C/A = {r['c_over_a']:.4f}（目标 ≤ {TARGETS['C/A (N 最小)']:.2f}："
             f"{reached(r['c_over_a'], TARGETS['C/A (N 最小)'], True)}）。这里受主机开销限制：C 每步主机上检查下标 "
             f"{h['check']:.1f} µs、上传下标 {h['upload']:.1f} µs、launch 编译好的 kernel {h['launch']:.1f} µs"
             f"（走 kernel[grid](...) 的通用路径要 {h['launch_jit']:.1f} µs），整个调用 {h['C']:.1f} µs，比三项"
             f"分开量的和{('多', '少')[rest < 0]} {abs(rest):.1f} µs；D 只是一次 torch 拷贝，主机上 {h['D']:.1f} µs。",
             f"{name}，N={r['n_lo']}：C/D 耗时 = {r['c_over_d_lo']:.2f}（目标 ≤ {TARGETS['C/D 耗时 (N 最小)']}："
             f"{reached(r['c_over_d_lo'], TARGETS['C/D 耗时 (N 最小)'], True)}），光 Triton 的 launch 就是 D 一整步"
             f"（{r['d_lo']:.1f} µs）的 {h['launch'] / r['d_lo']:.2f} 倍；C 捕获进 CUDA graph 后 C图/D = {r['cg_over_d_lo']:.2f}"
             f"（{reached(r['cg_over_d_lo'], TARGETS['C/D 耗时 (N 最小)'], True)}），剩下检查下标、等 event、写锁页内存和"
             f"一次 replay；D 也捕获进 graph 时 C图/D图 = {r['cg_over_dg_lo']:.2f}。"]
    if r["cross"] is None:
        lines.append(f"{name}：测到的 N 里 C 都没到 D 实测上限 {r['roof_GBps'] / 1e3:.2f} TB/s 的一半。")
    else:
        lines.append(f"{name}：从 N={r['cross']} 起 C 超过 D 实测上限 {r['roof_GBps'] / 1e3:.2f} TB/s 的一半，"
                     "每步时间大致随字节数线性增长：瓶颈从主机开销移到了显存带宽。")
    lines.append(f"{name}，N={r['n_hi']}：C 的带宽是 D 的 {100 * r['c_over_d_bw']:.1f}%（目标 ≥ "
                 f"{100 * TARGETS['C/D 带宽 (N 最大)']:.0f}%：{reached(r['c_over_d_bw'], TARGETS['C/D 带宽 (N 最大)'], False)}）"
                 f"；同一个 kernel 拷连续的块是 D 的 {100 * r['seq_over_d_bw']:.1f}%，所以块散在各处只差 "
                 f"{100 * (r['seq_over_d_bw'] - r['c_over_d_bw']):.1f} 个百分点，其余差距在 kernel 本身与 torch 拷贝之间。")
    return lines


def demo_3(data):
    """瓶颈从哪里移到哪里：N 小时是主机开销，N 大时是显存带宽？目标比值达标了吗？"""
    print_header("演示 3：瓶颈在哪里移动（GB/s = 克隆读 + 写的字节 / 时间）")
    out, lines = {}, []
    for name in data["shapes"]:
        ns = sorted({r["N"] for r in data["results"] if r["shape"] == name})
        gb = {(r["N"], r["method"]): r["GBps"] for r in data["results"] if r["shape"] == name}
        print_table(["N", "MB/步", "C µs", "C GB/s", "D GB/s", "C/D", "C图 GB/s"],
                    [[n, f"{gb[n, 'C'] * get(data, name, n, 'C') / 1e3:,.1f}", fmt_us(get(data, name, n, "C")),
                      f"{gb[n, 'C']:,.0f}", f"{gb[n, 'D']:,.0f}", f"{100 * gb[n, 'C'] / gb[n, 'D']:.1f}%",
                      f"{gb[n, 'C图']:,.0f}"] for n in ns], title=name)
        out[name] = ratios(data, name)
        lines += bottleneck_observations(data, name, out[name])
    print_observations(lines)
    return out


def decode_rows(data):
    """演示 4 的每一行：每步 µs、3 轮的波动、克隆占比（差分）和按演示 2 单独测的 graph 耗时估算的占比。"""
    rows = []
    for r in data["decode"]["rows"]:
        row = dict(B=r["B"], us=r["us"], spread=max((max(v) - min(v)) / statistics.median(v)
                                                     for v in r["rounds_us"].values()))
        for m in ("A", "C"):
            row[f"share_{m}"] = (r["us"][m] - r["us"]["none"]) / r["us"][m]
            alone = [x["us"] for x in data["results"] if x["shape"] == "gpt2-small" and x["N"] == r["N_pairs"]
                     and x["method"] == m + "图"]
            row[f"est_{m}"] = None
            if alone:
                row[f"est_{m}"] = alone[0] / (r["us"]["none"] + alone[0])
        rows.append(row)
    return rows


def pct(x):
    if x is None:
        return "-"
    return f"{100 * x:.1f}%"


def decode_observations(data, rows):
    lines = []
    for r in rows:
        txt = f"B={r['B']}：A 的克隆占一步的 {pct(r['share_A'])}（{('小头', '大头')[r['share_A'] >= LARGE_SHARE]}），" \
              f"C 占 {pct(r['share_C'])}"
        if r["est_C"] is not None:
            gap = 100 * abs(r["share_C"] - r["est_C"])
            txt += f"；C 的差分与单独测的估算相差 {gap:.1f} 个百分点（{('超过', '在')[gap <= 2]} 2 个百分点以内）"
        lines.append(txt + "。")
    worst = max(r["spread"] for r in rows)
    lines.append(f"{data['decode']['rounds']} 轮之间同一做法每步耗时最多相差 {100 * worst:.1f}%"
                 f"（{('超过', '不超过')[worst <= 0.05]} 5%）：整步捕获进 CUDA graph 后 replay，主机不再逐个 launch 算子。")
    raw = data["decode"]["rows"]
    swapped = [r for r in raw if r["attention"] != "默认"]
    if swapped:
        txt = (f"B={'、'.join(str(r['B']) for r in swapped)} 时，用 torch 默认选的注意力 kernel 捕获的 graph 重放"
               "两次，logits 就不同：这一步里有结果不确定的 kernel，与克隆无关。")
        if all(r["repeatable"]["只用 cuDNN"] is False for r in swapped):
            txt += "只用 cuDNN 的注意力后端时同样不可复现，所以不确定的是它；"
        lines.append(txt + "这些 B 不用 cuDNN（flash / efficient / math）重新捕获、计时。")
    if all(r["logits_identical"] for r in raw):
        lines.append("不克隆、A、C 三种做法算出的 logits 逐位相同：克隆是逐位拷贝，之后的计算一模一样。")
    elif not all(r["repeatable"][r["attention"]] for r in raw):
        lines.append("不用 cuDNN 后同一个 graph 重放仍不可复现：logits 的差别来自不确定的 kernel，不是克隆。")
    elif all(r["kv_identical"] for r in raw):
        lines.append(f"三种做法之后 KV 缓存逐位相同、同一 graph 重放可复现，logits 却最多差 "
                     f"{max(r['logits_max_abs_diff'] for r in raw):.3g}：三个 graph 里同样的运算选了不同的 kernel。")
    else:
        lines.append("三种做法之后 KV 缓存不同：克隆写出的数据不一样（见演示 1 的逐位校验）。")
    b, ft, tt = BLOG, BLOG["first_token_p99_ms"], BLOG["ttft_p99_ms"]
    a1 = get(data, "gpt2-small", sorted(data["Ns"])[0], "A")
    lines.append(f"{b['name']} 把“prefill→首 token p99”（三次平均 {statistics.mean(ft['之前']):.2f} → "
                 f"{statistics.mean(ft['之后']):.2f} ms）和 TTFT p99（{statistics.mean(tt['之前']):.2f} → "
                 f"{statistics.mean(tt['之后']):.2f} ms，主要是排队）分开报告。前者三次运行的区间 "
                 f"{min(ft['之前'])}–{max(ft['之前'])} 与 {min(ft['之后'])}–{max(ft['之后'])} ms 重叠，整个指标"
                 f"只有 {1e3 * statistics.mean(ft['之前']):.0f} µs，比我们单独的 A 克隆（{a1:,.0f} µs）还小："
                 "引擎与计时方式都不同，所以这里不拿百分比去比，只比方向——两边都是换成拷贝 kernel 后这一段变短。")
    return lines


def demo_4(data):
    """命中 prefix 后的第一次 decode 要 COW：克隆占一整步 decode（GPT-2 small 的尺寸）的多少？"""
    m = data["decode"]["model"]
    print_header(f"演示 4：克隆占一步 decode 的多少（{m['n_layers']} 层、d={m['d_model']}、词表 {m['vocab']}，随机权重）")
    print_text(f"模型是 transformer_lab 的结构（RMSNorm、RoPE、SwiGLU），尺寸取 GPT-2 small；prefix {data['decode']['prefix_len']}"
               f" 个 token（最后一块没写满），B 条序列各 COW 一块。一步 = 克隆 + {m['n_layers']} 层前向 + LM head，整步捕获进 CUDA graph 后 replay。")
    rows = decode_rows(data)
    print_table(["B", "无克隆", "+A", "+C", "波动"], [[r["B"]] + [fmt_us(r["us"][k]) for k in ("none", "A", "C")]
                                                 + [pct(r["spread"])] for r in rows],
                caption=f"µs/步；波动 = {data['decode']['rounds']} 轮中位数的 (最大 − 最小) / 中位数，三种做法里最大的")
    print_table(["B", "A 差分", "A 估算", "C 差分", "C 估算"],
                [[r["B"], pct(r["share_A"]), pct(r["est_A"]), pct(r["share_C"]), pct(r["est_C"])] for r in rows],
                caption="差分 = (有克隆 − 无克隆) / 有克隆；估算 = 演示 2 的 A图/C图 / (无克隆 + 它)")
    print_observations(decode_observations(data, rows))
    return {"rows": rows}


def main(argv=None):
    ap = ArgParser(prog=SCRIPT, description="Triton 写时复制克隆：校验、计时、克隆占一步 decode 的多少")
    ap.add_argument("--json", default=DEFAULT_JSON, help="结果 JSON（GPU 上写，CPU 上读）")
    ap.add_argument("--figures", default=os.path.join(ROOT, "figures"), help="--plot-only 时图的目录")
    ap.add_argument("--plot-only", action="store_true", help="只用保存的 JSON 重画图")
    ap.add_argument("--demo", type=int, choices=(1, 2, 3, 4), help="只跑一个演示")
    args = ap.parse_args(argv)
    check_settings()
    if os.path.exists(args.figures) and not os.path.isdir(args.figures):
        fail(SCRIPT, f"--figures {args.figures}：是一个文件，不是目录")
    if os.path.isdir(args.json):
        fail(SCRIPT, f"--json {args.json}：是一个目录，不是文件")
    if args.plot_only:                  # 画图的代码只在 figures/plot_06.py 里
        load_results(args.json)
        return subprocess.call([sys.executable, os.path.join(ROOT, "figures", "plot_06.py"), "--json", args.json,
                                "--out", args.figures])
    torch, kvc, bench = import_gpu_stack()
    on_gpu = torch.cuda.is_available()
    val = None
    if args.demo in (None, 1):
        val = demo_1(torch, kvc, bench, on_gpu)
        if not val["all_ok"]:
            return 1
    if args.demo == 1:
        return 0
    if on_gpu:
        data = bench.measure_all(SHAPES, NS, REPS, DECODE_BATCHES, DECODE_PREFIX_LEN, DECODE_ROUNDS, SEED)
        data["validation"] = val
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(data, f, ensure_ascii=False, indent=1, sort_keys=True)
        print_text(f"\n结果已写入 {args.json}（{saved_label(data, args.json)}）；python figures/plot_06.py 重画图。")
    elif not os.path.exists(args.json):
        print_text(f"\n这台机器没有 CUDA，也还没有保存的 GPU 结果（{os.path.relpath(args.json)}）：计时要在 NVIDIA GPU 上跑。")
        return 0
    else:
        data = load_results(args.json)
        print_text(f"\n这台机器没有 CUDA：下面演示 2–4 的表是保存的结果——{saved_label(data, args.json)}，不是本机测的。")
    for k, demo in ((2, demo_2), (3, demo_3), (4, demo_4)):
        if args.demo in (None, k):
            demo(data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
