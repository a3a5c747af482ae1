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
GPU 上的安装、测量方法和 H200 的结果表见 lecture07/GPU.md。

试一试：把 NS 改成 (1, 2, 4, 8, 9, 16)，看块号从 kernel 参数（N ≤ 8）换成上传下标（N = 9）时 C 多了多少 µs；
在 GPU 上把 kv_clone_triton.ORDER_LAYER_MAJOR 改成 0，看演示 3 里 N 最大时 C/D 掉多少。
"""
import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.realpath(__file__))))  # 仓库根目录：lab_common

from lab_common import console  # noqa: E402
from lab_common.console import fail, print_header, print_observations, print_table, print_text, status  # noqa: E402
from lab_common.say import change, count, fixed, integer, pct, pct1, same, size, span, value  # noqa: E402
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
            first_token_p99_ms={"之前": (0.59, 0.55, 0.51), "之后": (0.52, 0.49, 0.47)},   # 三次运行
            ttft_p99_ms={"之前": (26.44, 28.22, 27.97), "之后": (25.14, 28.82, 28.93)})
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
    import kv_clone_bench
    import kv_clone_triton
    return mods["torch"], kv_clone_triton, kv_clone_bench


# ───────────────────────────── 演示 1：校验 ─────────────────────────────
def validation_observations(v):
    """演示 1 的观察：v 是 demo_1 返回的 dict。"""
    lines, more = [], []
    if v["passed"] == v["cases"]:
        lines.append(f"{count(v['cases'], '个用例')}、{count(v['checks'], '项检查')}全部通过：空闲块先写成 0xFF，"
                     "整个缓存与按预期重放的结果逐位相同——没有漏写、多写、写错位置。")
    else:
        lines.append(f"{count(v['cases'] - v['passed'], '个用例')}失败（共 {v['cases']} 个）：后面的计时没有意义。")
    k = v["arg_pairs"]
    sides = [n for n in (k, k + 1) if n in v["ns"]]
    if len(sides) == 2 and v["passed"] == v["cases"]:
        lines.append(f"N = {k} 块号当 kernel 参数传，N = {k + 1} 起先上传下标：分界两侧都逐位正确。")
    more.append("共享块本身没被改动，ref_count 回到 1，一步里所有块对只调用了一次克隆。")
    return lines, more


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
    print_table(["dtype", "形状", "N", "program×元素/块", "通过"],
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


def saved_label(data, path):
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
    r["spread_hi"] = max(spread(row(data, name, hi, m)["rounds_us"]) for m in ("C", "D"))
    return r


def spread(values):
    """各轮中位数的 (最大 − 最小) / 中位数。"""
    return (max(values) - min(values)) / statistics.median(values)


def timing_observations(data):
    """演示 2 的观察：N 最小时谁受主机开销 / launch 限制，N 最大时 C 离带宽上限多远，graph 省下什么。"""
    names = list(data["shapes"])
    first, r = names[0], {n: ratios(data, n) for n in names}
    lo, hi, L = r[first]["n_lo"], r[first]["n_hi"], data["shapes"][first]["n_layers"]
    a, b, c, d = (get(data, first, lo, m) for m in ("A", "B", "C", "D"))
    lines = [f"N={lo}（{first}）：A {fmt_us(a)} µs、B {fmt_us(b)} µs 受主机开销限制（每步 {6 * L}、{3 * L} 次"
             f"驱动调用：逐层上传下标、launch）；C {fmt_us(c)} µs、D {fmt_us(d)} µs 各一次调用，受 launch 开销限制。"]
    bw = "、".join(f"{n} {pct1(r[n]['c_over_d_bw'])}" for n in names)
    worst = max(r[n]["spread_hi"] for n in names)
    noise = f"各轮最多相差 {pct(worst, 2)}"
    if pct(worst, 2) == "0.00%":
        noise = "各轮相差不到 0.01%"
    lines.append(f"N={hi}：C 的带宽是 D 的 {bw}（{data.get('rounds', 1)} 轮的中位数，{noise}）：一步要搬 "
                 f"{size(row(data, first, hi, 'C')['bytes'], binary=False)}（{first}），这时受显存带宽限制。")
    cg = get(data, first, lo, "C图")
    more = [f"C 捕获进 CUDA graph 后，N={lo} 时{change(c, cg, fixed(1, 'µs'), up='反而升到', flat='仍是')}"
            "：graph 一次 replay，省掉的是主机上 launch 的开销。"]
    for n in names:
        dg, dd = get(data, n, r[n]["n_hi"], "D图"), get(data, n, r[n]["n_hi"], "D")
        more.append(f"{n}，N={r[n]['n_hi']}：D 捕获进 graph 后每步 {fmt_us(dg)} µs，不捕获 {fmt_us(dd)} µs："
                    "graph 里的拷贝节点不一定和直接调用走同一条实现。")
        cs = row(data, n, r[n]["n_lo"], "C")["rounds_us"]
        ds = row(data, n, r[n]["n_lo"], "D")["rounds_us"]
        more.append(f"{n}，N={r[n]['n_lo']}：C/D 耗时 {r[n]['c_over_d_lo']:.2f}，主机计时各轮波动大："
                    f"C {span(cs, fixed(1))} µs，D {span(ds, fixed(1))} µs。")
    return lines, more


def demo_2(data):
    """一步克隆 N 个块（所有层、K 和 V）要多少 µs？A/B/C/D，以及捕获进 CUDA graph 之后。"""
    print_header("演示 2：计时 A / B / C / D（每步 µs）")
    out = {}
    for name, s in data["shapes"].items():
        ns = sorted({r["N"] for r in data["results"] if r["shape"] == name})
        print_table(["N", "A", "B", "C", "D", "C图", "C/D 带宽"],
                    [[n] + [fmt_us(get(data, name, n, m)) for m in ("A", "B", "C", "D", "C图")]
                     + [pct1(get(data, name, n, "D") / get(data, name, n, "C"))] for n in ns],
                    title=f"{name}：{s['n_layers']} 层、H={s['n_heads']}、D={s['head_dim']}、BS={s['block_size']}、"
                          f"{s['dtype']}")
        if console.SHOW_MORE:
            print_table(["N", "A图", "D图"], [[n] + [fmt_us(get(data, name, n, m)) for m in ("A图", "D图")]
                                              for n in ns], title=f"{name}：捕获进 CUDA graph")
        out[name] = {n: {m: get(data, name, n, m) for m in METHODS} for n in ns}
    print_text(f"µs/步，{data.get('rounds', 1)} 轮 × {data['reps']} 个样本的中位数；C图：CUDA graph；"
               "C/D 带宽 = D/C 耗时")
    print_observations(*timing_observations(data))
    return out


def ladder_rows(data):
    """演示 3 的表：每一步在各形状上的 C/D（N 最大、只量 kernel）。"""
    names = list(data["shapes"])
    steps = {n: {r["key"]: r for r in data["tuning"][n]["ladder"]["steps"]} for n in names}
    return [(r["key"], r["label"], r["base"], {n: steps[n][r["key"]]["c_over_d"] for n in names})
            for r in data["tuning"][names[0]]["ladder"]["steps"]]


def gain_words(rows, key):
    """一步相对它的基线的变化（百分点，按印出来的一位小数）：'+2.0'、'-2.3'、'不变'。"""
    k, _, base, v = next(r for r in rows if r[0] == key)
    b = next(r for r in rows if r[0] == base)[3]
    out = []
    for n in v:
        delta = fixed(1)(100 * v[n]) if base is None else fixed(1)(100 * v[n] - 100 * b[n])
        if same(100 * v[n], 100 * b[n], fixed(1)):
            out.append(f"{n} 不变")
        elif 100 * v[n] > 100 * b[n]:
            out.append(f"{n} +{fixed(1)(abs(value(fixed(1)(100 * v[n])) - value(fixed(1)(100 * b[n]))))}")
        else:
            out.append(f"{n} -{fixed(1)(abs(value(fixed(1)(100 * v[n])) - value(fixed(1)(100 * b[n]))))}")
        del delta
    return "、".join(out)


def bound_observations(data):
    """演示 3 的观察：哪一步改动起作用、剩下的差距在哪、N 小时主机上的一步花在哪。"""
    rows = ladder_rows(data)
    names = list(data["shapes"])
    steps = [r for r in rows if r[2] is not None]

    def gain(r):
        base = next(x for x in rows if x[0] == r[2])[3]
        return min(value(pct1(r[3][n])) - value(pct1(base[n])) for n in names)
    best = max(steps, key=gain)
    hurt = [r for r in steps if max(value(pct1(r[3][n])) - value(pct1(next(x for x in rows if x[0] == r[2])[3][n]))
                                    for n in names) < 0]
    label = best[1].lstrip("+ ")
    text = f"作用最大的一步是“{label}”（{gain_words(rows, best[0])} 个百分点）"
    if hurt:
        text += "；" + "、".join(f"“{r[1].lstrip('+ ')}”" for r in hurt) + "反而更慢"
    lines = [text + "。"]
    ref = {k: v for k, _, _, v in rows}
    if "contiguous_blocks" in ref and "final" in ref:
        lines.append("剩下的差距来自块是散的：同一个 kernel 拷连续的块是 D 的 "
                     + "、".join(pct1(ref["contiguous_blocks"][n]) for n in names)
                     + "，拷散的块是 " + "、".join(pct1(ref["final"][n]) for n in names)
                     + "；torch index_select 收拢同样散的块只有 "
                     + "、".join(pct1(ref["torch_gather"][n]) for n in names) + "。")
    h = data["tuning"][names[0]]["host_us_N1"]
    f1 = fixed(1)
    lines.append(f"N=1 时主机上一步（{names[0]}）：C {f1(h['C'])} µs＝检查下标 {f1(h['check'])} + launch "
                 f"{f1(h['launch'])} + 其余；块号当参数传，省掉上传下标的 {f1(h['upload'])} µs。D {f1(h['D'])} µs。")
    more = [f"同一次 launch 走 Triton 的通用路径 kernel[grid](...) 要 {f1(h['launch_jit'])} µs（{names[0]}）："
            "每次在 Python 里绑参数、查特化、取设备、调钩子；直接调它生成的 C 启动函数只剩一次 cuLaunchKernelEx。"]
    if "triton_contiguous" in ref:
        more.append("Triton 用同样写法拷一整段连续内存是 D 的 " + "、".join(pct1(ref["triton_contiguous"][n])
                                                                     for n in names) + "：kernel 的写法本身不是瓶颈。")
    more.append(f"N 最大时 C（上传下标在旁路 stream 上、与上一步重叠）的 C/D 是 "
                + "、".join(pct1(ratios(data, n)["c_over_d_bw"]) for n in names)
                + "，只量 kernel 的最后一步是 " + "、".join(pct1(ref["final"][n]) for n in names) + "。")
    return lines, more


def demo_3(data):
    """C 为什么停在那里：N 大时逐步改 kernel 的 C/D，N 小时主机上一步的开销。"""
    names = list(data["shapes"])
    n_hi = max(data["Ns"])
    print_header(f"演示 3：C 受什么限制——N={n_hi} 时逐步改 kernel 的 C/D（只量 kernel）")
    rows = ladder_rows(data)
    print_table(["改动（每步只改一处）"] + names, [[label] + [pct1(v[n]) for n in names] for k, label, _, v in rows
                                               if k != "triton_contiguous" or console.SHOW_MORE])
    if console.SHOW_MORE:
        keys = ("check", "launch", "launch_jit", "upload", "C", "D")
        labels = ("检查下标", "launch（C 启动函数）", "launch（通用路径）", "写锁页内存 + 上传下标", "C 整个调用",
                  "D 整个调用")
        print_table(["N=1，主机上 µs"] + names, [[lab] + [f"{data['tuning'][n]['host_us_N1'][k]:.1f}" for n in names]
                                                for k, lab in zip(keys, labels)])
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


def pct_or_dash(x):
    if x is None:
        return "-"
    return pct1(x)


def decode_observations(data, rows):
    """演示 4 的观察：A、C 各占一步多少，波动，logits 是否逐位相同；其余（cuDNN、估算、博客）在 more 里。"""
    raw = data["decode"]["rows"]
    worst = max(r["spread"] for r in rows)
    c_span = span([r["share_C"] for r in rows], pct1)
    text = (f"A 的克隆占一步 decode 的 {span([r['share_A'] for r in rows], pct1)}，C 占 {c_span}"
            f"（B = {span([r['B'] for r in rows], integer)}，各轮最多相差 {pct1(worst)}）")
    if max(abs(value(pct1(r["share_C"]))) for r in rows) <= max(1.0, value(pct1(worst))):
        text += "：C 的克隆在整步 decode 里几乎看不出来。"
    else:
        text += "：C 的克隆在整步 decode 里仍看得出来。"
    lines = [text]
    if all(r["logits_identical"] for r in raw):
        lines.append("不克隆、A、C 算出的 logits 逐位相同：克隆是逐位拷贝，之后的计算一模一样。")
    elif not all(r["repeatable"][r["attention"]] for r in raw):
        lines.append("同一个 graph 重放两次 logits 就不同：差别来自结果不确定的 kernel，不是克隆。")
    elif all(r["kv_identical"] for r in raw):
        lines.append(f"三种做法之后 KV 缓存逐位相同、同一 graph 重放可复现，logits 却最多差 "
                     f"{max(r['logits_max_abs_diff'] for r in raw):.3g}：三个 graph 里同样的运算选了不同的 kernel。")
    else:
        lines.append("三种做法之后 KV 缓存不同：克隆写出的数据不一样（见演示 1 的逐位校验）。")
    more = []
    for r in rows:
        if r["est_C"] is not None:
            more.append(f"B={r['B']}：C 的差分 {pct1(r['share_C'])}，按演示 2 单独测的 C图 估算 {pct1(r['est_C'])}"
                        f"；A 的差分 {pct1(r['share_A'])}，估算 {pct_or_dash(r['est_A'])}。")
    swapped = [r for r in raw if r["attention"] != "默认"]
    if swapped:
        txt = (f"B={'、'.join(str(r['B']) for r in swapped)} 时，用 torch 默认选的注意力 kernel 捕获的 graph 重放"
               "两次，logits 就不同：这一步里有结果不确定的 kernel，与克隆无关。")
        if all(r["repeatable"]["只用 cuDNN"] is False for r in swapped):
            txt += "只用 cuDNN 的注意力后端时同样不可复现，所以不确定的是它；"
        more.append(txt + "这些 B 不用 cuDNN（flash / efficient / math）重新捕获、计时。")
    b, ft, tt = BLOG, BLOG["first_token_p99_ms"], BLOG["ttft_p99_ms"]
    a1 = get(data, "gpt2-small", sorted(data["Ns"])[0], "A")
    more.append(f"{b['name']} 把“prefill→首 token p99”（三次平均 {statistics.mean(ft['之前']):.2f} → "
                f"{statistics.mean(ft['之后']):.2f} ms）和 TTFT p99（{statistics.mean(tt['之前']):.2f} → "
                f"{statistics.mean(tt['之后']):.2f} ms，主要是排队）分开报告。前者三次运行的区间 "
                f"{min(ft['之前'])}–{max(ft['之前'])} 与 {min(ft['之后'])}–{max(ft['之后'])} ms 重叠，整个指标"
                f"只有 {1e3 * statistics.mean(ft['之前']):.0f} µs，比我们单独的 A 克隆（{a1:,.0f} µs）还小："
                "引擎与计时方式都不同，所以这里不拿百分比去比，只比方向——两边都是换成拷贝 kernel 后这一段变短。")
    return lines, more


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
        print_text(f"\n结果已写入 {args.json}（{saved_label(data, args.json)}）；python figures/plot_06.py 重画图。")
    elif not os.path.exists(args.json):
        print_text(f"\n这台机器没有 CUDA，也还没有保存的 GPU 结果（{os.path.relpath(args.json)}）：计时要在 NVIDIA GPU 上跑。")
        return 0
    else:
        data = load_results(args.json)
        print_text(f"\n没有 CUDA：演示 2–4 是保存的结果——{saved_label(data, args.json)}。")
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
