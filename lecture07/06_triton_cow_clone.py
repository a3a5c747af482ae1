"""CS349E · 第 7 讲 · 06_triton_cow_clone.py —— （GPU 加餐）写时复制的整块克隆：一次 launch 能多快。

【问题】写时复制要把共享的、没写满的最后一块整块克隆：这一步要多久、受什么限制？一次 launch 搬完所有层的
Triton kernel 离连续拷贝（上限）多远，和 vLLM 的 copy_blocks 设计比如何？放回一整步 decode 里它占多少？

【运行】python lecture07/06_triton_cow_clone.py              （没有 GPU：在 Triton 解释器里校验，再打印保存的 H200
              结果，约 10 秒，2 核笔记本；有 GPU：校验 + 计时，写 JSON，H200 上约 2 分钟）
        python lecture07/06_triton_cow_clone.py --plot-only  （用保存的 JSON 重画图；另有 --json、--figures、--demo、--more）

一步 COW 要克隆 N 个块对（所有层、K 和 V）。A、B 是博客《从零实现 LLM Inference：063. Triton batched KV COW clone
（替换 index_select/index_copy）》（rosellm 项目的 roseinfer 引擎）的"之前"和"之后"：A 每层 index_select +
index_copy_，B 每层一次 Triton launch；C 所有层一次 launch（本讲）；D 同样字节的一次连续拷贝（N 大时的带宽上限）；E vLLM
csrc/cache_kernels.cu 的 copy_blocks 设计（grid = (层, 块对)）。安装、测量方法、结果见 lecture07/gpu/GPU.md 和 NOTES.md。

【试一试】（要 GPU：没有 GPU 时演示 2–4 是保存的结果，改了设置会注明和保存的那次不同）
  1. 把 NS 改成 (1, 8, 9, 64, 65)：下标从 kernel 参数（N ≤ 8）换成上传（N = 9）、再换成零拷贝（N = 65）时，
     C 多了多少 µs？
  2. 把 gpu/clone_kernel.py 的 E_BLOCK 改成 1024、E_WARPS 改成 32（vLLM 的线程形状）：E 慢多少？
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.realpath(__file__))))  # 仓库根目录：lab_common
from lab_common.endings import quiet_endings  # noqa: E402
quiet_endings()  # 最先做（还没 import numpy）：这之后按 Ctrl-C、管道被关都只打一行，不打印 traceback
import json  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
from lab_common import console  # noqa: E402
from lab_common.console import ArgParser, fail, print_header, print_observations, print_table, print_text, status  # noqa: E402
from lab_common.say import count, fixed, integer, pct1, span, value  # noqa: E402
from lab_common.script_tools import run_lecture  # noqa: E402
from lab_common.settings import check_setting, is_int, is_sorted_ints  # noqa: E402
from gpu.saved_results import decode_rows, differing_settings, ladder_cells, read_results, row, steady  # noqa: E402
from gpu.stack import ctrl_c_after, import_torch_triton  # noqa: E402  （import 它不碰 torch）

# ───────────────────────────── 学生可以改的设置 ─────────────────────────────
SHAPES = {   # 每层的 KV 形状：KV 头数 H、头维度 D、块大小 BS（token）
    "gpt2-small": dict(n_layers=12, n_heads=12, head_dim=64, block_size=16, dtype="float16"),
    "llama3-8b": dict(n_layers=32, n_heads=8, head_dim=128, block_size=16, dtype="bfloat16"),
}
NS = (1, 8, 64, 256, 2048)      # 一步要克隆的块对数 N（从小到大；最小的看开销，最大的看带宽；≥ 64 的还逐步改 C）
REPS = 15                       # 每个计时每轮取几个样本的中位数
ROUNDS = 5                      # 每个计时测几轮（各轮的中位数再取中位数；轮与轮之间的差就是波动）
DECODE_BATCHES = (1, 8, 64)     # 演示 4：同一步里刚命中同一前缀的序列数 B（= 要克隆的块对数）
DECODE_PREFIX_LEN = 200         # 命中的前缀长度（token）；不能是块大小的整数倍，否则最后一块是满的、不用 COW
DECODE_ROUNDS = 3               # 演示 4：三个 graph 轮流计时几轮（看轮与轮之间的波动）
SEED = 0                        # 随机数种子（校验的数据、块号、权重）

STEADY = 0.10                   # 各轮相差超过它的中位数在表里标 ≈（主机忽快忽慢），不进观察
SCRIPT = "06_triton_cow_clone.py"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_JSON = os.path.join(ROOT, "figures", "data", "triton_cow_clone_h200.json")
BLOG = dict(name="博客《从零实现 LLM Inference：063. Triton batched KV COW clone》",
            first_token_p99_ms={"之前": (0.59, 0.55, 0.51), "之后": (0.52, 0.49, 0.47)})   # 三次运行
METHODS = ("A", "B", "C", "D", "E", "A图", "C图", "D图")
SETTINGS = ("SHAPES", "NS", "REPS", "ROUNDS", "DECODE_BATCHES", "DECODE_PREFIX_LEN", "DECODE_ROUNDS", "SEED")


def check_settings(todo):
    """跑到的演示要用的设置，不合理（或删掉、改了名字）就一行拒绝、退出码 2。演示 1 只用 SEED、SHAPES。"""
    gone = [k for k in SETTINGS if k not in globals()]
    if gone:
        fail(SCRIPT, f"设置 {gone[0]} 不见了（删掉了还是改了名字？）：06 要用它，请按原名写回文件顶部")
    g, dims = globals(), ("n_layers", "n_heads", "head_dim", "block_size")
    rules = [("SEED", is_int(SEED, 0, 2 ** 31), "0~2^31 的整数"),
             ("SHAPES", isinstance(SHAPES, dict) and "gpt2-small" in SHAPES and all(
                 isinstance(s, dict) and all(is_int(s.get(k), 1, 256) for k in dims)
                 and s.get("dtype") in ("float16", "bfloat16", "float32") for s in SHAPES.values())
              and SHAPES["gpt2-small"]["block_size"] == 16,
              "含 gpt2-small（块大小 16，演示 4 用它）、各维 1~256、dtype 为 float16/bfloat16/float32 的 dict")]
    if any(k in todo for k in (2, 3, 4)):
        rules += [("NS", is_sorted_ints(NS, 1, 4096) and len(NS) >= 2, "至少两个、从小到大、不重复的 1~4096 的整数"),
                  ("REPS", is_int(REPS, 3, 1000), "3~1000 的整数"), ("ROUNDS", is_int(ROUNDS, 2, 20), "2~20 的整数"),
                  ("DECODE_BATCHES", is_sorted_ints(DECODE_BATCHES, 1, 512), "从小到大、不重复的 1~512 的整数"),
                  ("DECODE_PREFIX_LEN", is_int(DECODE_PREFIX_LEN, 2, 1000) and DECODE_PREFIX_LEN % 16 != 0,
                   "2~1000、不是块大小 16 的整数倍"), ("DECODE_ROUNDS", is_int(DECODE_ROUNDS, 2, 20), "2~20 的整数")]
    for name, ok, allowed in rules:
        check_setting(name, g[name], ok, allowed, SCRIPT)


def import_gpu_stack():
    """(torch, clone_kernel, clone_bench)；缺了、太旧 → 一行、退出码 2；import 时按的 Ctrl-C 等 import 完才中断。"""
    with ctrl_c_after():
        torch = import_torch_triton(SCRIPT)
        from gpu import clone_bench, clone_kernel
    return torch, clone_kernel, clone_bench


# ───────────────────────────── 演示 1：校验 ─────────────────────────────
def validation_observations(v):
    """演示 1 的观察：v 是 demo_1 返回的 dict。"""
    k = v["arg_pairs"]
    if v["passed"] != v["cases"]:
        return [f"{count(v['cases'] - v['passed'], '个用例')}写错了（共 {v['cases']} 个）：后面的计时没有意义。"], []
    lines = [f"{count(v['cases'], '个用例')}、{count(v['checks'], '项检查')}都逐位正确：目的块先写成 0xFF，没有漏写、多写、错位。"]
    if k in v["ns"] and k + 1 in v["ns"]:
        lines.append(f"N = {k:,} 块号当 kernel 参数传，N = {k + 1:,} 起先上传下标：分界两侧都逐位正确。")
    return lines, ["C 的用例是一步真实的 COW 写入：整个缓存与按预期重放的结果逐位相同，共享块没被改动，ref_count 回到 1。"]


def demo_1(torch, kvc, bench, on_gpu):
    """C（所有层一次 launch）和 E（vLLM 的 copy_blocks 设计）在 fp16/bf16/fp32、各种 N、一块跨几段时，是否逐位正确？"""
    where = "CPU 上的 Triton 解释器（TRITON_INTERPRET=1）"
    if on_gpu:
        where = f"GPU（{torch.cuda.get_device_name()}，真实 kernel）"
    print_header(f"演示 1：校验 COW 克隆——{where}")
    groups, cases = {}, bench.validation_cases(SHAPES, on_gpu)
    with status(f"逐位校验 {len(cases)} 个用例…"):
        results = [bench.check_case(case, ("cpu", "cuda")[on_gpu], SEED + i) for i, case in enumerate(cases)]
    for (design, dt, L, H, D, BS, n, _), (ok, _) in zip(cases, results):
        groups.setdefault((design, dt, f"L{L} H{H} D{D} BS{BS}"), []).append((n, ok))
    print_table(["做法", "dtype", "形状", "N", "逐位正确"],
                [[*key, " ".join(f"{n:,}" for n, _ in g), f"{sum(ok for _, ok in g)}/{len(g)}"] for key, g in groups.items()])
    out = {"cases": len(cases), "passed": sum(ok for ok, _ in results), "checks": sum(k for _, k in results),
           "arg_pairs": kvc.ARG_PAIRS, "ns": sorted({c[6] for c in cases})}
    out["all_ok"] = out["passed"] == out["cases"]
    print_observations(*validation_observations(out))
    return out


# ───────────────────────────── 保存的结果 ─────────────────────────────
def load_results(path):
    """读保存的结果（gpu/saved_results.py 查每个字段）；不是文件、不是 JSON、缺字段 → 一行错误、退出码 2。"""
    if not os.path.isfile(path):
        fail(SCRIPT, f"--json {short(path)}：不是一个存在的文件")
    try:
        return read_results(path, METHODS)
    except ValueError as exc:
        fail(SCRIPT, f"--json {short(path)}：不是本脚本保存的完整结果（{str(exc)[:70]}）")


def short(path):
    """仓库里的文件按仓库根目录的相对路径写，仓库外的照原样。"""
    full = os.path.abspath(path)
    return (path, os.path.relpath(full, ROOT))[full.startswith(ROOT + os.sep)]


def fmt_us(x):
    return (f"{x:.1f}", f"{x:,.0f}")[x >= 100]


def mark(r, text):
    """表格单元格：各轮相差超过 STEADY 时前面加 ≈。"""
    return ("≈" + text, text)[steady(STEADY, r)]


# ───────────────────────────── 演示 2：每步 µs ─────────────────────────────
def timing_observations(data):
    """演示 2 的观察（只用各轮稳定的数）：N 小时 A/B 受主机开销限制、C/D 一次调用；N 最大时 C、E 离 D 多远。"""
    names, lines = list(data["shapes"]), []
    first, L = names[0], data["shapes"][names[0]]["n_layers"]
    lo = next((n for n in data["Ns"] if all(steady(STEADY, row(data, first, n, m)) for m in "ABCD")), None)
    if lo is not None:
        a, b, c, d = (fmt_us(row(data, first, lo, m)["us"]) for m in "ABCD")
        lines.append(f"N={lo:,}（{first}，µs）：A {a}、B {b} 受主机开销限制（每步 {6 * L}、{3 * L} 次驱动调用）；"
                     f"C {c}、D {d}。")
    hi = data["Ns"][-1]
    ok = [n for n in names if all(steady(STEADY, row(data, n, hi, m)) for m in "CDE")]
    if ok:
        cd = "、".join(f"{n} {pct1(row(data, n, hi, 'D')['us'] / row(data, n, hi, 'C')['us'])}" for n in ok)
        ed = "、".join(pct1(row(data, n, hi, "D")["us"] / row(data, n, hi, "E")["us"]) for n in ok)
        lines.append(f"N={hi:,} 时 C 的带宽是 D 的 {cd}，E 是 {ed}：同样一次 launch，grid 的形状和每个 program 的活"
                     "决定带宽（见演示 3）。")
    return lines, []


def demo_2(data):
    """一步克隆 N 个块对（所有层、K 和 V）要多少 µs？A/B/C/D/E，C/D、E/D 是带宽之比。"""
    print_header("演示 2：计时 A / B / C / D / E（每步 µs）")
    for line in ("A 每层 index_select + index_copy_，B 每层一次 Triton launch（博客之前、之后）；",  # 图例：每行
                 "C 所有层一次 launch（本讲）；D 同样字节的一次连续拷贝（N 大时的带宽上限）；",      # 在 80 列里
                 "E vLLM copy_blocks 的设计，grid = (层, 块对)。C/D、E/D：带宽之比。"):             # 不折行
        print_text(line)
    out = {}
    for name, s in data["shapes"].items():
        cells = {n: {m: row(data, name, n, m) for m in METHODS} for n in data["Ns"]}
        print_table(["N", "A", "B", "C", "D", "E", "C/D", "E/D"],
                    [[f"{n:,}"] + [mark(c[m], fmt_us(c[m]["us"])) for m in "ABCDE"]
                     + [pct1(c["D"]["us"] / c[m]["us"]) for m in "CE"] for n, c in cells.items()],
                    title=f"{name}：{s['n_layers']} 层、H={s['n_heads']}、D={s['head_dim']}、BS={s['block_size']}、"
                          f"{s['dtype']}")
        if console.SHOW_MORE:
            print_table(["N", "A图", "C图", "D图", "C 各轮", "D 各轮"],
                        [[f"{n:,}"] + [mark(c[m], fmt_us(c[m]["us"])) for m in ("A图", "C图", "D图")]
                         + [span(c[m]["rounds_us"], fixed(1)) for m in "CD"] for n, c in cells.items()],
                        title=f"{name}：捕获进 CUDA graph、各轮的范围（µs）")
        out[name] = {n: {m: c[m]["us"] for m in METHODS} for n, c in cells.items()}
    print_text(f"{data['rounds']} 轮 × {data['reps']} 个样本的中位数（CUDA event 计时）；≈：各轮相差超过 "
               f"{pct1(STEADY)}，不进观察。")
    print_observations(*timing_observations(data))
    return out


# ───────────────────────────── 演示 3：C 受什么限制 ─────────────────────────────
def bound_observations(data):
    """演示 3 的观察：只量 kernel 时 C 离 D 多远、整步的 C 差在哪；E 为什么慢。"""
    cells = {k: v for k, v in ladder_cells(data).items() if steady(STEADY, v["zero_copy"]) and steady(STEADY, v["kernel"])}
    lines = []
    if cells:
        (s, n), w = min(cells.items(), key=lambda kv: kv[1]["zero_copy"]["c_over_d"])
        kern = span([v["kernel"]["c_over_d"] for v in cells.values()], pct1)
        lines.append(f"只量 kernel（下标已在显存）时 C 是 D 的 {kern}；整步的 C 最低是 {pct1(w['zero_copy']['c_over_d'])}"
                     f"（{s}，N={n:,}），比只量 kernel 每步多 {fmt_us(w['zero_copy']['us'] - w['kernel']['us'])} µs："
                     "这是主机上把下标交给 kernel 的开销（检查、写锁页内存、上传）。")
    e = [(v["E"]["c_over_d"], v["E_vllm"]["c_over_d"]) for v in ladder_cells(data).values()]
    sizes = sorted({2 * sh["n_heads"] * sh["block_size"] * sh["head_dim"] * (2, 4)[sh["dtype"] == "float32"]
                    for sh in data["shapes"].values()})
    lines.append(f"E（vLLM 的 (层, 块对) grid）只量 kernel 是 D 的 {span([x for x, _ in e], pct1)}，用 vLLM 的线程形状是 "
                 f"{span([y for _, y in e], pct1)}：同样一次 launch，E 的 program 少（N × 层数个），每个搬一对块的 K、V"
                 f"（{'–'.join(str(b // 1024) for b in sizes)} KB），C 的 program 多、每个只搬 "
                 f"{data['meta'].get('tile', 1024) * 2 // 1024} KB。")
    h, f1 = data["tuning"][next(iter(data["shapes"]))]["host_us_N1"], fixed(1)
    return lines, [f"N=1 时主机上一步：C {f1(h['C'])} µs＝检查下标 {f1(h['check'])} + launch {f1(h['launch'])}（通用的 "
                   f"kernel[grid] 路径要 {f1(h['launch_jit'])}）+ 其余；块号当参数传，省掉上传下标的 {f1(h['upload'])} µs。"]


def demo_3(data):
    """C 为什么停在那里：整步里逐步改 C 的 C/D，对照只量 kernel 的 C、连续的块和 E。"""
    print_header("演示 3：C 受什么限制——逐步改 C（每步只改一处）的 C/D，对照只量 kernel")
    cells = ladder_cells(data)
    cols = list(cells)
    print_table(["改动"] + [f"{s[0]}\n{n:,}" for s, n in cols],       # 两行的表头：80 列放得下
                [[st["label"]] + [mark(cells[c][st["key"]], pct1(cells[c][st["key"]]["c_over_d"])) for c in cols]
                 for st in data["ladder"]],
                caption=f"列：{'、'.join(f'{s[0]} = {s}' for s in data['shapes'])} 的 N；C/D = D 的耗时 / 这一行的耗时；"
                        f"≈：各轮相差超过 {pct1(STEADY)}")
    print_observations(*bound_observations(data))
    return {c: {k: r["c_over_d"] for k, r in v.items()} for c, v in cells.items()}


# ───────────────────────────── 演示 4：占一步 decode 的多少 ─────────────────────────────
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
            f"{pct1(worst)}）：C 的克隆在整步 decode 里{visible}。", logits], [
        "注意力后端：" + "、".join(f"B={r['B']} {r['attention']}" for r in raw) + "（默认的注意力 kernel 重放两次 logits 就"
        "不同时，改用 flash / efficient / math 重新捕获、计时）。", blog_sentence(data)]


def blog_sentence(data):
    """出处对照：博客报告的数字和我们单独测的一次 A 克隆（引擎、计时都不同，只比方向）。"""
    ft, n1 = BLOG["first_token_p99_ms"], min(data["Ns"])
    runs = "；".join(f"{k} {'、'.join(f'{x:.2f}' for x in v)} ms（平均 {1e3 * statistics.mean(v):.0f} µs）"
                     for k, v in ft.items())
    return (f"{BLOG['name']}的“prefill→首 token p99”三次：{runs}，之前、之后的区间重叠；本实验单独一次 A 克隆（N={n1:,}）"
            f"{fmt_us(row(data, 'gpt2-small', n1, 'A')['us'])} µs：引擎和计时都与这里不同，只比方向。")


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


def measure(bench, args, val):
    """GPU 上：测量、写 JSON，印一行结果。"""
    with status("在 GPU 上测 A/B/C/D/E、逐步改 C、decode（H200 上约 2 分钟）…"):
        data = bench.measure_all(SHAPES, NS, REPS, DECODE_BATCHES, DECODE_PREFIX_LEN, DECODE_ROUNDS, SEED, ROUNDS)
    data["validation"], data["seed"] = val, SEED
    try:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(data, f, ensure_ascii=False, indent=1, sort_keys=True)
    except OSError as exc:
        fail(SCRIPT, f"--json {short(args.json)}：写不进去（{exc.strerror}）")
    print_text(f"\n结果已写入 {short(args.json)}（{data['meta']['gpu']}）；python figures/plot_06.py 重画图。")
    return data


def run(todo, args, step):
    """校验（演示 1，本机跑），再测量（有 CUDA）或读保存的结果（没有 CUDA），打印演示 2–4。"""
    if args.figures is not None and not args.plot_only:         # 不画图时 --figures 没有用处：说出来，不悄悄忽略
        ArgParser(prog=SCRIPT).error("--figures 只和 --plot-only 一起用（图由保存的 JSON 画）")
    figures = args.figures or os.path.join(ROOT, "figures")      # 默认：仓库的 figures/
    if os.path.exists(figures) and not os.path.isdir(figures):
        fail(SCRIPT, f"--figures {figures}：是一个文件，不是目录")
    if os.path.isdir(args.json):
        fail(SCRIPT, f"--json {args.json}：是一个目录，不是文件")
    if args.plot_only:                  # 画图的代码只在 figures/plot_06.py 里
        load_results(args.json)
        return subprocess.call([sys.executable, os.path.join(ROOT, "figures", "plot_06.py"), "--json", args.json,
                                "--out", figures])
    check_settings(todo)
    with status("导入 torch、triton…"):
        torch, kvc, bench = import_gpu_stack()
    on_gpu = torch.cuda.is_available()
    if not on_gpu and any(k in todo for k in (2, 3, 4)):
        data = load_results(args.json)            # 先查文件：坏文件不用等校验跑完才知道
    val = None
    if 1 in todo:
        val = demo_1(torch, kvc, bench, on_gpu)
        if not val["all_ok"]:
            return 1
    if todo == [1]:
        return 0
    if not on_gpu:                                # 在翻页之前说：--step 时下一个演示的标题会清屏
        print_text("\n没有 CUDA：演示 2–4 是保存的结果（{gpu}，torch {torch}，triton {triton}，{date}，".format(**data["meta"])
                   + f"{short(args.json)}）。")
        diff = differing_settings(data, {k: globals()[k] for k in SETTINGS})
        if diff:
            print_text(f"保存的那次测量用的设置和这里不同：{'、'.join(diff)}；要按这里的设置测，请在 GPU 上运行。")
    if 1 in todo:
        step()
    if on_gpu:
        data = measure(bench, args, val)
    shown = [k for k in todo if k in (2, 3, 4)]
    for i, k in enumerate(shown):
        DEMOS[k](data)
        if i + 1 < len(shown):
            step()
    return 0


DEMOS = {1: demo_1, 2: demo_2, 3: demo_3, 4: demo_4}


def add_args(ap):
    ap.add_argument("--json", default=DEFAULT_JSON, help="结果 JSON（GPU 上写，CPU 上读）")
    ap.add_argument("--figures", metavar="DIR", help="--plot-only 时图的目录（默认 figures/）")
    ap.add_argument("--plot-only", action="store_true", help="只用保存的 JSON 重画图")


def main(argv=None):
    return run_lecture(DEMOS, "Triton 写时复制克隆：校验、计时、受什么限制、占一步 decode 的多少", argv, run=run,
                       add_args=add_args, prog=SCRIPT)


if __name__ == "__main__":
    sys.exit(main())
