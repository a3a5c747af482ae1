"""（GPU 加餐）写时复制要把共享的、没写满的最后一块整块克隆：这一步要多久、受什么限制？N 小时是主机开销和
launch，N 大时是显存带宽——一次 launch 搬完所有层的 Triton kernel 能不能两头都贴着下限？放回一整步 decode 里它占多少？

运行：
    python lecture07/06_triton_cow_clone.py               # NVIDIA GPU：校验 + 计时，写 JSON（H200 上约 50 秒）
    python lecture07/06_triton_cow_clone.py               # 没有 GPU：Triton 解释器里校验，再打印保存的结果（约 4 秒）
    python lecture07/06_triton_cow_clone.py --plot-only   # 用保存的 JSON 重画图（= python figures/plot_06.py）
    选项：--json PATH 结果文件，--figures DIR 图的目录，--demo N 只跑一个演示，--more 全部观察，--list 演示题目

一步 COW 要克隆 N 个块（所有层、K 和 V），四种做法；A、B 是博客《从零实现 LLM Inference：063. Triton
batched KV COW clone（替换 index_select/index_copy）》（rosellm 项目的 roseinfer 引擎）里的"之前"和"之后"：
    A 每层 index_select + index_copy_   B 每层一次 Triton launch   C 所有层一次 launch   D 连续拷贝（上限）
GPU 上的安装、测量方法和 H200 的结果表见 lecture07/gpu/GPU.md。

试一试：把 NS 改成 (1, 2, 4, 8, 9, 16)，看块号从 kernel 参数（N ≤ 8）换成上传下标（N = 9）时 C 多了多少 µs；
在 GPU 上把 gpu/clone_kernel.py 的 ORDER_LAYER_MAJOR 改成 0，看演示 2 里 N 最大时 C/D 带宽掉多少。
"""
import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.realpath(__file__))))  # 仓库根目录：lab_common

from lab_common import console  # noqa: E402
from lab_common.console import fail, print_header, print_observations, print_table, print_text, status  # noqa: E402
from lab_common.say import count, fixed, integer, pct, pct1, signed, size, span, value  # noqa: E402
from lab_common.script_tools import run_lecture  # noqa: E402
from lab_common.settings import check_setting, is_int  # noqa: E402

# ───────────────────────────── 学生可以改的设置 ─────────────────────────────
SHAPES = {   # 每层的 KV 形状：KV 头数 H、头维度 D、块大小 BS（token）
    "gpt2-small": dict(n_layers=12, n_heads=12, head_dim=64, block_size=16, dtype="float16"),
    "llama3-8b": dict(n_layers=32, n_heads=8, head_dim=128, block_size=16, dtype="bfloat16"),
}
NS = (1, 8, 64, 256, 2048)      # 一步要克隆的块对数 N（从小到大；最小的看开销，最大的看带宽）
REPS = 15                       # 每个计时取几个样本的中位数
ROUNDS = 3                      # 每个计时重复几轮（各轮的中位数再取中位数；轮与轮之间的差就是波动）
DECODE_BATCHES = (1, 8, 64)     # 演示 4：同一步里刚命中同一前缀的序列数 B（= 要克隆的块对数）
DECODE_PREFIX_LEN = 200         # 命中的前缀长度（token）；不能是块大小的整数倍，否则最后一块是满的、不用 COW
DECODE_ROUNDS = 3               # 演示 4：三个 graph 轮流计时几轮（看轮与轮之间的波动）
SEED = 0                        # 随机数种子（形状、块号、权重）

MIN_VERSIONS = {"torch": (2, 4), "triton": (3, 0)}
SCRIPT = "06_triton_cow_clone.py"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_JSON = os.path.join(ROOT, "figures", "data", "triton_cow_clone_h200.json")
BLOG = dict(name="博客《从零实现 LLM Inference：063. Triton batched KV COW clone》",
            first_token_p99_ms={"之前": (0.59, 0.55, 0.51), "之后": (0.52, 0.49, 0.47)})   # 三次运行
METHODS = ("A", "B", "C", "D", "A图", "C图", "D图")


def check_settings():
    dims = ("n_layers", "n_heads", "head_dim", "block_size")
    for name, ok, allowed in (
            ("NS", len(NS) >= 2 and all(is_int(n, 1, 4096) for n in NS) and list(NS) == sorted(set(NS)),
             "至少两个、从小到大、不重复的 1~4096 的整数"),
            ("REPS", is_int(REPS, 3, 1000), "3~1000 的整数"),
            ("ROUNDS", is_int(ROUNDS, 1, 20), "1~20 的整数"),
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
    from gpu import clone_bench, clone_kernel
    return mods["torch"], clone_kernel, clone_bench


# ───────────────────────────── 演示 1：校验 ─────────────────────────────
def validation_observations(v):
    """演示 1 的观察：v 是 demo_1 返回的 dict。"""
    k = v["arg_pairs"]
    if v["passed"] != v["cases"]:
        return [f"{count(v['cases'] - v['passed'], '个用例')}写错了（共 {v['cases']} 个）：后面的计时没有意义。"], []
    lines = [f"{count(v['cases'], '个用例')}、{count(v['checks'], '项检查')}都逐位正确：空闲块先写成 0xFF，没有漏写、多写、错位。"]
    if k in v["ns"] and k + 1 in v["ns"]:
        lines.append(f"N = {k} 块号当 kernel 参数传，N = {k + 1} 起先上传下标：分界两侧都逐位正确。")
    return lines, ["整个缓存与按预期重放的结果逐位相同；共享块本身没被改动，ref_count 回到 1，一步里所有块对只调用了一次克隆。"]


def demo_1(torch, kvc, bench, on_gpu):
    """COW 克隆 kernel 在 fp16/bf16/fp32、N = 0 / 1 / 多个、一块跨几个 tile 时，是否逐位正确？"""
    where = "CPU 上的 Triton 解释器（TRITON_INTERPRET=1）"
    if on_gpu:
        where = f"GPU（{torch.cuda.get_device_name()}，真实 kernel）"
    print_header(f"演示 1：校验 COW 克隆——{where}")
    groups, n_ok, n_checks, ns = {}, 0, 0, set()
    for i, (dt, L, H, D, BS, n, tile) in enumerate(bench.validation_cases(SHAPES, on_gpu)):
        ok, k = bench.check_cow_write(getattr(torch, dt), L, H, D, BS, n, ("cpu", "cuda")[on_gpu], SEED + i, tile)
        block, tiles = kvc.tile_for(H * BS * D, tile)
        g = groups.setdefault((dt, f"L{L} H{H} D{D} BS{BS}", f"{tiles}×{block}"), [[], 0])
        g[0].append(n)
        g[1] += ok
        n_ok += ok
        n_checks += k
        ns.add(n)
    print_table(["dtype", "形状", "N", "program×元素/块", "逐位正确"],
                [[dt, shape, ",".join(map(str, g[0])), tl, f"{g[1]}/{len(g[0])}"]
                 for (dt, shape, tl), g in groups.items()])
    out = {"cases": sum(len(g[0]) for g in groups.values()), "passed": n_ok, "checks": n_checks,
           "arg_pairs": kvc.ARG_PAIRS, "ns": sorted(ns)}
    out["all_ok"] = n_ok == out["cases"]
    print_observations(*validation_observations(out))
    return out


# ───────────────────────────── 演示 2–4：测量（GPU）与打印（GPU / CPU） ─────────────────────────────
def load_results(path):
    """读保存的结果；不是文件、不是 JSON、缺字段 → 一行错误、退出码 2。"""
    if not os.path.isfile(path):
        fail(SCRIPT, f"--json {path}：不是一个存在的文件")
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        assert all(isinstance(data["meta"][k], str) for k in ("gpu", "torch", "triton", "date"))
        assert all({"shape", "N", "method", "us", "rounds_us"} <= set(r) for r in data["results"])
        have = {(r["shape"], r["N"], r["method"]) for r in data["results"]}
        missing = [(s, n, m) for s, n, _ in have for m in METHODS if (s, n, m) not in have]     # 每个 N 每种做法都要有
        assert not missing, f"缺少 {missing[0]}"
        assert all({"B", "us", "rounds_us", "attention", "repeatable"} <= set(r) for r in data["decode"]["rows"])
        for s in data["shapes"]:
            t = data["tuning"][s]
            assert {"check", "upload", "launch", "launch_jit", "C", "D"} <= set(t["host_us_N1"])
            assert all({"key", "label", "c_over_d", "rounds_us"} <= set(r) for r in t["ladder"]["steps"])
    except (ValueError, KeyError, TypeError, AssertionError, UnicodeDecodeError) as exc:
        fail(SCRIPT, f"--json {path}：不是本脚本保存的结果（{type(exc).__name__}：{str(exc)[:60]}）")
    return data


def row(data, shape, n, m):
    return next(r for r in data["results"] if r["shape"] == shape and r["N"] == n and r["method"] == m)


def get(data, shape, n, m):
    return row(data, shape, n, m)["us"]


def fmt_us(x):
    if x >= 100:
        return f"{x:,.0f}"
    return f"{x:.1f}"


def cell(x, fmt):
    """表格单元格：没有这个值（None）时印 "-"。"""
    if x is None:
        return "-"
    return fmt(x)


def saved_note(data, path):
    """保存的结果从哪来：GPU、版本、日期、文件。"""
    m = data["meta"]
    return f"{m['gpu']}，torch {m['torch']}，triton {m['triton']}，{m['date']}（{os.path.relpath(path)}）"


def ratios(data, name):
    """一种形状的要点：N 最小 / 最大时 C 与 A、D 的比，graph 版本，C 过 D 上限一半的 N，各轮的波动。"""
    ns = sorted({r["N"] for r in data["results"] if r["shape"] == name})
    lo, hi = ns[0], ns[-1]
    r = dict(n_lo=lo, n_hi=hi, c_over_a=get(data, name, lo, "C") / get(data, name, lo, "A"),
             c_over_d_bw=get(data, name, hi, "D") / get(data, name, hi, "C"),
             c_over_d_lo=get(data, name, lo, "C") / get(data, name, lo, "D"), d_lo=get(data, name, lo, "D"),
             cg_over_d_lo=get(data, name, lo, "C图") / get(data, name, lo, "D"))
    roof = r["roof_GBps"] = max(x["GBps"] for x in data["results"] if x["shape"] == name and x["method"] == "D")
    r["cross"] = next((n for n in ns if row(data, name, n, "C")["GBps"] >= roof / 2), None)
    # 受什么限制，看 C 的时间跟不跟着块数涨：相邻两个 N，时间涨得不到块数的一半 → 固定开销（launch）为主
    r["n_lo2"], r["n_hi2"] = ns[1], ns[-2]
    r["grow_lo"], r["grow_hi"] = (get(data, name, b, "C") / get(data, name, a, "C") for a, b in ((lo, ns[1]), (ns[-2], hi)))
    r["lo_small"], r["hi_small"] = r["grow_lo"] < ns[1] / lo / 2, r["grow_hi"] < hi / ns[-2] / 2
    r["spread_hi"] = max(spread(row(data, name, hi, m)["rounds_us"]) for m in ("C", "D"))
    r["bytes_hi"] = row(data, name, hi, "C")["bytes"]
    r["c_rounds_lo"], r["d_rounds_lo"] = (row(data, name, lo, m)["rounds_us"] for m in ("C", "D"))
    return r


def spread(values):
    """各轮中位数的 (最大 − 最小) / 中位数。"""
    return (max(values) - min(values)) / statistics.median(values)


def timing_observations(data):
    """演示 2 的观察：N 最小时谁受主机开销 / launch 限制，N 最大时 C 离带宽上限多远；受什么限制看 C 的时间跟不跟着块数涨。"""
    names, first = list(data["shapes"]), next(iter(data["shapes"]))
    r, L = {n: ratios(data, n) for n in names}, data["shapes"][first]["n_layers"]
    lo, hi, lo2, hi2 = (r[first][k] for k in ("n_lo", "n_hi", "n_lo2", "n_hi2"))
    bound, where = f"N={lo2} 时 C 是 {fmt_us(get(data, first, lo2, 'C'))}：受 launch 开销限制", "受显存带宽限制"
    if not r[first]["lo_small"]:
        bound = f"N={lo2} 时 C 是 {fmt_us(get(data, first, lo2, 'C'))}，已跟着块数涨"
    if r[first]["c_over_d_bw"] < 0.5:
        where = "时间跟着块数涨，带宽却不到 D 的一半：受 kernel 本身的写法限制"
    if r[first]["hi_small"]:
        where = "时间还不跟着块数涨，仍受调用开销限制"
    a, b, c, d = (fmt_us(get(data, first, lo, m)) for m in ("A", "B", "C", "D"))
    return [f"N={lo}（{first}，µs）：A {a}、B {b} 受主机开销限制（每步 {6 * L}、{3 * L} 次驱动调用：逐层上传下标、launch）；"
            f"C {c}、D {d} 各一次调用，{bound}。",
            f"N 从 {hi2} 到 {hi}（块数 × {hi / hi2:g}），C 的时间 × {r[first]['grow_hi']:.1f}，C 的带宽是 D 的 "
            + "、".join(f"{n} {pct1(r[n]['c_over_d_bw'])}" for n in names)
            + f"（一步搬 {size(r[first]['bytes_hi'], binary=False)}）：{where}。"], []


def demo_2(data):
    """一步克隆 N 个块（所有层、K 和 V）要多少 µs？A/B/C/D，以及捕获进 CUDA graph 之后。"""
    print_header("演示 2：计时 A / B / C / D（每步 µs；C图 = C 捕获进 CUDA graph）")
    out = {}
    for name, s in data["shapes"].items():
        ns = sorted({r["N"] for r in data["results"] if r["shape"] == name})
        print_table(["N", "A", "B", "C", "D", "C图", "C/D 带宽", "波动"],
                    [[n] + [fmt_us(get(data, name, n, m)) for m in ("A", "B", "C", "D", "C图")]
                     + [pct1(get(data, name, n, "D") / get(data, name, n, "C")),
                        pct(max(spread(row(data, name, n, m)["rounds_us"]) for m in ("C", "D")), 2)] for n in ns],
                    title=f"{name}：{s['n_layers']} 层、H={s['n_heads']}、D={s['head_dim']}、BS={s['block_size']}、"
                          f"{s['dtype']}")
        if console.SHOW_MORE:
            print_table(["N", "A图", "D图", "C 各轮", "D 各轮"],
                        [[n] + [fmt_us(get(data, name, n, m)) for m in ("A图", "D图")]
                         + [span(row(data, name, n, m)["rounds_us"], fixed(1)) for m in ("C", "D")] for n in ns],
                        title=f"{name}：CUDA graph 与各轮", caption="A图、D图：捕获进 CUDA graph，不在主机上逐个 launch；"
                                                          "各轮：每轮中位数的范围（µs）")
        out[name] = {n: {m: get(data, name, n, m) for m in METHODS} for n in ns}
    print_text(f"{data.get('rounds', 1)} 轮 × {data['reps']} 个样本的中位数；C/D 带宽 = D/C 耗时；波动 = C、D 各轮的极差 / 中位数")
    print_observations(*timing_observations(data))
    return out


def ladder_rows(data):
    """演示 3 的表：[(key, 说明, 基线 key, {形状: C/D}, {形状: 比基线多几个百分点（按印出的一位小数）})]。"""
    names = list(data["shapes"])
    steps = {n: {r["key"]: r for r in data["tuning"][n]["ladder"]["steps"]} for n in names}
    out = []
    for r in data["tuning"][names[0]]["ladder"]["steps"]:
        v = {n: steps[n][r["key"]]["c_over_d"] for n in names}
        gain = {}
        if r["base"] is not None:
            gain = {n: value(pct1(v[n])) - value(pct1(steps[n][r["base"]]["c_over_d"])) for n in names}
        out.append((r["key"], r["label"], r["base"], v, gain))
    return out


def bound_observations(data):
    """演示 3 的观察：哪一步改动起作用（没有一步让每种形状都更快时照实说）、剩下的差距在哪、N 小时主机上的一步花在哪。"""
    rows, names, f1 = ladder_rows(data), list(data["shapes"]), fixed(1)
    steps, each = [r for r in rows if r[4]], {r[0]: "、".join(pct1(r[3][n]) for n in names) for r in rows}
    best = max(steps, key=lambda r: min(r[4].values()))
    hurt = "、".join(f"“{r[1].lstrip('+ ')}”" for r in steps if max(r[4].values()) < 0)
    text = (f"作用最大的一步是“{best[1].lstrip('+ ')}”（" + "、".join(f"{n} {signed(best[4][n])}" for n in names)
            + " 个百分点）")
    if min(best[4].values()) <= 0:
        text = "没有哪一步让每种形状都变快"
    if hurt:
        text += f"；{hurt}反而更慢"
    h = data["tuning"][names[0]]["host_us_N1"]
    return [text + "。",
            f"剩下的差距来自块是散的：同一个 kernel 拷连续的块是 D 的 {each['contiguous_blocks']}，拷散的块是 "
            f"{each['final']}；torch index_select 收拢同样散的块只有 {each['torch_gather']}。",
            f"N=1 时主机上一步（{names[0]}）：C {f1(h['C'])} µs＝检查下标 {f1(h['check'])} + launch "
            f"{f1(h['launch'])} + 其余；块号当参数传，省掉上传下标的 {f1(h['upload'])} µs。D {f1(h['D'])} µs。"], \
        [f"Triton 用同样写法拷一整段连续内存是 D 的 {each['triton_contiguous']}：kernel 的写法本身不是瓶颈。"]


def demo_3(data):
    """C 为什么停在那里：N 大时逐步改 kernel 的 C/D，N 小时主机上一步的开销。"""
    names = list(data["shapes"])
    n_hi = max(data["Ns"])
    print_header(f"演示 3：C 受什么限制——N={n_hi} 时逐步改 kernel 的 C/D（只量 kernel）")
    rows = ladder_rows(data)
    print_table(["改动（每步只改一处）"] + names, [[label] + [pct1(v[n]) for n in names] for k, label, _, v, _ in rows
                                               if k != "triton_contiguous" or console.SHOW_MORE])
    if console.SHOW_MORE:
        keys = ("check", "launch", "launch_jit", "upload", "C", "D")
        labels = ("检查下标", "launch（C 启动函数）", "launch（通用路径）", "写锁页内存 + 上传下标", "C 整个调用",
                  "D 整个调用")
        print_table(["N=1，主机上 µs"] + names, [[lab] + [f"{data['tuning'][n]['host_us_N1'][k]:.1f}" for n in names]
                                                for k, lab in zip(keys, labels)],
                    caption="通用路径：kernel[grid](...) 每次在 Python 里绑参数、查特化、取设备、调钩子；直接调 Triton 生成的"
                            " C 启动函数只剩一次 cuLaunchKernelEx。")
    print_observations(*bound_observations(data))
    return {n: ratios(data, n) for n in names}


def decode_rows(data):
    """演示 4 的每一行：每步 µs、几轮之间的波动、克隆占比（差分）和按演示 2 单独测的 graph 耗时估算的占比。"""
    rows = []
    for r in data["decode"]["rows"]:
        row_ = dict(B=r["B"], us=r["us"], spread=max(spread(v) for v in r["rounds_us"].values()))
        for m in ("A", "C"):
            row_[f"share_{m}"] = (r["us"][m] - r["us"]["none"]) / r["us"][m]
            alone = [x["us"] for x in data["results"] if x["shape"] == "gpt2-small" and x["N"] == r["N_pairs"]
                     and x["method"] == m + "图"]
            row_[f"est_{m}"] = None
            if alone:
                row_[f"est_{m}"] = alone[0] / (r["us"]["none"] + alone[0])
        rows.append(row_)
    return rows


def decode_observations(data, rows):
    """演示 4 的观察：A、C 各占一步多少、C 看不看得出来、logits 是否逐位相同。"""
    raw, worst = data["decode"]["rows"], max(r["spread"] for r in rows)
    visible = "几乎看不出来"
    if max(abs(value(pct1(r["share_C"]))) for r in rows) > max(1.0, value(pct1(worst))):
        visible = "仍看得出来"
    logits = "不克隆、A、C 算出的 logits 逐位相同：克隆是逐位拷贝，之后的计算一模一样。"
    if not all(r["logits_identical"] for r in raw):
        logits = (f"三种做法的 logits 最多差 {max(r['logits_max_abs_diff'] for r in raw):.3g}，KV 缓存却逐位相同：差别来自"
                  "之后的计算（注意力 kernel 选得不同或结果不确定），不是克隆。")
    if not all(r["logits_identical"] or r["kv_identical"] for r in raw):
        logits = "三种做法之后 KV 缓存不同：克隆写出的数据不一样（见演示 1 的逐位校验）。"
    return [f"A 的克隆占一步 decode 的 {span([r['share_A'] for r in rows], pct1)}，C 占 "
            f"{span([r['share_C'] for r in rows], pct1)}（B = {span([r['B'] for r in rows], integer)}，各轮最多相差 "
            f"{pct1(worst)}）：C 的克隆在整步 decode 里{visible}。", logits], []


def demo_4(data):
    """命中前缀后的第一次 decode 要 COW：克隆占一整步 decode（GPT-2 small 的尺寸）的多少？"""
    m = data["decode"]["model"]
    print_header(f"演示 4：克隆占一步 decode 的多少（{m['n_layers']} 层、d={m['d_model']}、词表 {m['vocab']:,}）")
    print_text(f"随机权重，前缀 {data['decode']['prefix_len']} 个 token，B 条序列各 COW 一块，整步 CUDA graph。")
    rows = decode_rows(data)
    print_table(["B", "无克隆", "+A", "+C", "A 占", "C 占", "波动"],
                [[r["B"]] + [fmt_us(r["us"][k]) for k in ("none", "A", "C")]
                 + [pct1(r["share_A"]), pct1(r["share_C"]), pct1(r["spread"])] for r in rows],
                caption=f"µs/步；占 = (有克隆 − 无克隆) / 有克隆；波动 = {data['decode']['rounds']} 轮的 (最大 − 最小) "
                        "/ 中位数")
    if console.SHOW_MORE:
        yes = {True: "是", False: "否", None: "-"}
        print_table(["B", "C 占（估算）", "注意力后端", "默认可复现", "只用 cuDNN 可复现"],
                    [[r["B"], cell(r["est_C"], pct1), raw["attention"], yes[raw["repeatable"].get("默认")],
                      yes[raw["repeatable"].get("只用 cuDNN")]] for r, raw in zip(rows, data["decode"]["rows"])],
                    caption="估算 = 演示 2 单独测的 C图 / (无克隆 + C图)，和上表的差分对照。默认的注意力 kernel 重放两次"
                            " logits 就不同的 B，不用 cuDNN（flash / efficient / math）重新捕获、计时；只用 cuDNN 也不可复现，"
                            "不确定的就是 cuDNN 的注意力 kernel。")
    if console.SHOW_MORE:                 # 出处对照：博客报告的数字和我们单独测的一次 A 克隆
        ft, n1 = BLOG["first_token_p99_ms"], min(data["Ns"])
        print_table(["对照", "三次（ms）", "平均（µs）"],
                    [[f"博客：{k}", "、".join(f"{x:.2f}" for x in v), f"{1e3 * statistics.mean(v):.0f}"] for k, v in ft.items()]
                    + [[f"本实验：单独一次 A 克隆（N={n1}）", "-", fmt_us(get(data, "gpt2-small", n1, "A"))]],
                    caption=f"{BLOG['name']} 的“prefill→首 token p99”：之前、之后三次的区间重叠；引擎和计时都与这里不同，"
                            "只比方向。")
    print_observations(*decode_observations(data, rows))
    return {"rows": rows}


def run(todo, args, step):
    """校验（演示 1，本机跑），再测量（有 CUDA）或读保存的结果（没有 CUDA），打印演示 2–4。"""
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
    if 1 in todo:
        val = demo_1(torch, kvc, bench, on_gpu)
        if not val["all_ok"]:
            return 1
        if todo == [1]:
            return 0
        step()
    if on_gpu:
        with status("在 GPU 上测 A/B/C/D、逐步改 kernel、decode（约 50 秒）…"):
            data = bench.measure_all(SHAPES, NS, REPS, DECODE_BATCHES, DECODE_PREFIX_LEN, DECODE_ROUNDS, SEED,
                                     ROUNDS)
        data["validation"] = val
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(data, f, ensure_ascii=False, indent=1, sort_keys=True)
        print_text(f"\n结果已写入 {args.json}（{saved_note(data, args.json)}）；python figures/plot_06.py 重画图。")
    elif not os.path.exists(args.json):
        print_text(f"\n这台机器没有 CUDA，也还没有保存的 GPU 结果（{os.path.relpath(args.json)}）：计时要在 NVIDIA GPU 上跑。")
        return 0
    else:
        data = load_results(args.json)
        print_text(f"\n没有 CUDA：演示 2–4 是保存的结果——{saved_note(data, args.json)}。")
    shown = [k for k in todo if k in (2, 3, 4)]
    for i, k in enumerate(shown):
        DEMOS[k](data)
        if i + 1 < len(shown):
            step()
    return 0


DEMOS = {1: demo_1, 2: demo_2, 3: demo_3, 4: demo_4}


def add_args(ap):
    ap.add_argument("--json", default=DEFAULT_JSON, help="结果 JSON（GPU 上写，CPU 上读）")
    ap.add_argument("--figures", default=os.path.join(ROOT, "figures"), help="--plot-only 时图的目录")
    ap.add_argument("--plot-only", action="store_true", help="只用保存的 JSON 重画图")


def main(argv=None):
    return run_lecture(DEMOS, "Triton 写时复制克隆：校验、计时、受什么限制、占一步 decode 的多少", argv, run=run,
                       add_args=add_args, prog=SCRIPT, check=lambda args: check_settings())


if __name__ == "__main__":
    sys.exit(main())
