"""CS349E · 第 7 讲 · 06_triton_cow_clone.py —— （GPU 加餐）写时复制的整块克隆：一次 launch 能多快？

写时复制要把共享的、没写满的最后一块整块克隆：一步 N 个块对，所有层的 K 和 V。一次 launch 搬完的 Triton kernel
离连续拷贝（带宽上限）多远？主机上把块号交给 kernel 要多久？放回一整步 decode 里它占多少？A、B 是博客《从零实现 LLM
Inference：063. Triton batched KV COW clone（替换 index_select/index_copy）》（rosellm 的 roseinfer 引擎）的"之前"和
"之后"；C 所有层一次 launch（lecture07/gpu/）；D 同样字节的一次连续拷贝；E 是 vLLM csrc/cache_kernels.cu 里
copy_blocks 的设计。方法和 H200 上的结果见 lecture07/gpu/GPU.md。

运行：python lecture07/06_triton_cow_clone.py（没有 GPU：解释器里校验，再印保存的 H200 结果，约 10 秒；有 GPU：约 2 分钟）
试一试（要 GPU）：
  1. 把 gpu/clone_kernel.py 的 ARGS_MAX 改成 0（N ≤ 8 也先上传块号，两次驱动调用）：N = 1、8 时整步的 C 慢多少？
  2. 把 E_BLOCK 改成 1024、E_WARPS 改成 32（vLLM 的线程形状）：只量 kernel 时 E 慢多少？
"""
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "lecture07")]
from lab_common import show  # noqa: E402
from lab_common.show import num, pct  # noqa: E402
from gpu.saved_results import read_results, spread  # noqa: E402  （不 import torch）

# ───────────────────────────── 学生可以改的设置 ─────────────────────────────
SHAPES = {   # 每层的 KV 形状：KV 头数 H、头维度 D、块大小 BS（token）
    "gpt2-small": dict(n_layers=12, n_heads=12, head_dim=64, block_size=16, dtype="float16"),
    "llama3-8b": dict(n_layers=32, n_heads=8, head_dim=128, block_size=16, dtype="bfloat16"),
}
NS = [1, 8, 64, 256, 2048]      # 一步克隆的块对数 N：最小的看开销，最大的看带宽
REPS, ROUNDS, SEED = 21, 5, 0   # 每轮取 REPS 个样本的中位数，测 ROUNDS 轮（交错；轮与轮之间的差就是波动）；随机种子
DECODE_BATCHES = [1, 8, 64]     # 演示 4：同一步里刚命中同一前缀的序列数 B（= 克隆的块对数）
DECODE_PREFIX_LEN = 200         # 前缀长度（token）：不是块大小的整数倍，最后一块没写满、要 COW
JSON = os.path.join(ROOT, "figures", "data", "triton_cow_clone_h200.json")
SETTINGS = ("SHAPES", "NS", "REPS", "ROUNDS", "DECODE_BATCHES", "DECODE_PREFIX_LEN", "SEED")
_got = {}


def check_settings():
    ok = isinstance(SHAPES, dict) and "gpt2-small" in SHAPES and all(isinstance(s, dict) and all(show.is_int(
        s.get(k), 1, 256) for k in ("n_layers", "n_heads", "head_dim", "block_size")) and s.get("dtype") in (
        "float16", "bfloat16", "float32") for s in SHAPES.values())
    show.check("SHAPES", SHAPES, ok, "含 gpt2-small、各维 1~256、dtype 为 float16/bfloat16/float32 的 dict")
    show.check("NS", NS, show.is_ints(NS, 1, 4096) and len(NS) >= 2, "至少两个、递增的 1~4,096 的整数")
    for name, lo, hi in (("REPS", 3, 99), ("ROUNDS", 2, 20), ("SEED", 0, 2 ** 31)):
        show.check(name, globals()[name], show.is_int(globals()[name], lo, hi), f" {lo}~{hi:,} 的整数")
    show.check("DECODE_BATCHES", DECODE_BATCHES, show.is_ints(DECODE_BATCHES, 1, 512), "递增的 1~512 的整数")
    show.check("DECODE_PREFIX_LEN", DECODE_PREFIX_LEN, show.is_int(DECODE_PREFIX_LEN, 2, 1000) and
               DECODE_PREFIX_LEN % SHAPES["gpt2-small"]["block_size"] != 0, "2~1,000、不是块大小的整数倍")


def gpu():
    """import torch 和 gpu/ 的模块（没有 CUDA 时先开 Triton 解释器）；缺了一行说清、退出码 2。"""
    if not _got:
        try:
            import torch
            from gpu import timing, validation
        except ImportError as exc:
            show.fail(f"需要 torch ≥ 2.4 和 triton ≥ 3.0（{exc.name} 没有装）：有 NVIDIA GPU 时装 CUDA 版 torch（自带 "
                      "triton），只有 CPU 时 pip install -r requirements-triton.txt")
        _got.update(torch=torch, timing=timing, validation=validation, cuda=torch.cuda.is_available())
    return _got


def results():
    """演示 2–4 的数 (data, 表)：有 CUDA 时测一次、写进 --json；没有时读保存的，说明是哪一次。"""
    short, here = os.path.relpath(JSON, ROOT) if JSON.startswith(ROOT + os.sep) else JSON, {k: globals()[k] for k in SETTINGS}
    if "data" not in _got and gpu()["cuda"]:
        print("在 GPU 上计时（H200 上约 2 分钟）…", file=sys.stderr)
        data = _got["timing"].measure_all(SHAPES, NS, REPS, ROUNDS, DECODE_BATCHES, DECODE_PREFIX_LEN, SEED)
        try:
            with open(JSON, "w", encoding="utf-8") as f:
                json.dump(dict(data, settings=here, validation=_got.get("checked")), f, ensure_ascii=False, indent=1)
        except OSError as exc:
            show.fail(f"--json {short}：写不进去（{exc.strerror}）")
        show.note(f"结果已写入 {short}；python figures/plot_06.py 重画图。")
    elif "data" in _got:
        return _got["data"]
    try:
        _got["data"] = read_results(JSON)
    except ValueError as exc:
        show.fail(f"--json {short}：不是本脚本保存的完整结果（{exc}）")
    if not _got["cuda"]:
        m = _got["data"][0]["meta"]
        show.note(f"没有 CUDA：下面是保存的结果（{m['gpu']}，torch {m['torch']}，triton {m['triton']}，{m['date']}，{short}）。")
        diff = [k for k in SETTINGS if json.loads(json.dumps(here[k])) != _got["data"][0]["settings"].get(k)]
        if diff:
            show.note(f"保存的那次测量用的设置和这里不同（{'、'.join(diff)}）：要按这里的设置测，请在 GPU 上运行。")
    return _got["data"]


def us(x):
    return num(x, 1) if x < 100 else num(x)


def demo_validate():
    """一步真实的 COW 写入里，C、E 拷出来的每个字节都对吗？fp16/bf16/fp32，块号交给 kernel 的三条路径的分界两侧。"""
    g = gpu()
    cases, groups = g["validation"].cases(SHAPES, ("cpu", "cuda")[g["cuda"]]), {}
    res = [run(SEED + i) for i, (*_, run) in enumerate(cases)]
    for (design, dt, shape, n, _), (ok, _) in zip(cases, res):
        groups.setdefault((design, dt, shape), []).append((n, ok))
    show.table(["做法", "dtype", "形状", "N", "逐位正确"], [[*k, " ".join(n for n, _ in v), f"{sum(o for _, o in v)}/"
                                                       f"{len(v)}"] for k, v in groups.items()],
               caption=f"在 {g['torch'].cuda.get_device_name() if g['cuda'] else 'CPU 的 Triton 解释器'}上；目的块先写成"
                       " 0xFF：漏写、多写、错位都会露馅。*：这一例块号一律在旁路上传。")
    bad, checks = sum(not ok for ok, _ in res), sum(k for _, k in res)
    g["checked"] = dict(cases=len(cases), checks=checks, wrong=bad)
    show.claim(f"{len(cases)} 个用例、{checks} 项检查都逐位正确：块号当 kernel 参数、在同一 stream 上传、在旁路 stream "
               "上传，三条路径的分界两侧都对；共享块没被改动，ref_count 回到 1。", bad == 0, f"{bad} 个用例不对")


def demo_times():
    """一步克隆 N 个块对（所有层、K 和 V），A/B/C/D/E 各要多少 µs？C 离连续拷贝 D 多远？"""
    data, t = results()
    ns, shapes, rounds = data["settings"]["NS"], data["settings"]["SHAPES"], data["settings"]["ROUNDS"]
    show.note("A 每层 index_select + index_copy_，B 每层一次 Triton launch（博客的之前、之后）；C 所有层一次 launch；"
              "D 同样字节的一次连续拷贝；E vLLM copy_blocks 的设计。C/D、E/D 是带宽之比；图：捕获进 CUDA graph。")
    for s, sh in shapes.items():
        u = {k[1:]: r["us"] for k, r in t.items() if k[0] == s}
        wob = {m: max(spread(t[s, n, m]["rounds_us"]) for n in ns if n >= 64) for m in "ABCDE"}
        show.table(["N", "A", "B", "C", "D", "E", "C/D", "E/D", "C图/D图"],
                   [[num(n)] + [us(u[n, m]) for m in "ABCDE"] + [pct(u[n, "D"] / u[n, m], 1) for m in "CE"]
                    + [pct(u[n, "D_graph"] / u[n, "C_graph"], 1)] for n in ns],
                   caption=f"{s}：{sh['n_layers']} 层、H={sh['n_heads']}、D={sh['head_dim']}、BS={sh['block_size']}、"
                           f"{sh['dtype']}；µs/步，{rounds} 轮中位数的中位数；N ≥ 64 时各轮的波动（最大 − 最小）/ 中位数"
                           "：" + "、".join(f"{m} {pct(v, 1)}" for m, v in wob.items()))
    cd = {s: t[s, ns[-1], "D"]["us"] / t[s, ns[-1], "C"]["us"] for s in shapes}
    show.claim(f"N = {num(ns[-1])} 时 C 是 D 的 " + "、".join(f"{pct(v, 1)}（{s}）" for s, v in cd.items()) +
               "：一次 launch 搬完所有层，贴着显存带宽。", min(cd.values()) >= 0.9, f"C/D 最低 {pct(min(cd.values()), 1)}")
    a, c = t["gpt2-small", ns[0], "A"]["us"], t["gpt2-small", ns[0], "C"]["us"]
    show.claim(f"N = {num(ns[0])} 时 A 要 {us(a)} µs、C 只要 {us(c)} µs（gpt2-small）：拷的字节很少时，A 每层几次驱动调用的"
               "主机开销就是全部耗时，C 只有一次。", a > 10 * c, f"A {us(a)} µs、C {us(c)} µs")


def demo_limits():
    """整步的 C 离 D 差在哪：kernel 本身（只量 kernel、连续的块、E 的 grid），还是主机上把块号交给 kernel？"""
    data, t = results()
    ns, shapes = data["settings"]["NS"], data["settings"]["SHAPES"]
    for s in shapes:
        def r(n, m):
            return pct(t[s, n, "D"]["us"] / t[s, n, m]["us"], 1)
        show.table(["N", "整步", "kernel", "主机 µs", "同流", "旁路", "连续", "E"],
                   [[num(n), r(n, "C"), r(n, "C_kernel"), num(t[s, n, "C"]["us"] - t[s, n, "C_kernel"]["us"], 1),
                     *(r(n, m) for m in ("C_same", "C_side", "C_contig", "E_kernel"))] for n in ns],
                   caption=f"{s}：C/D = D 的耗时 / 这一列的耗时。整步：演示 2 的 C；kernel：只量 kernel（K 次 launch 捕获"
                           "进一个 graph，块号已在显存）；主机 µs：整步比只量 kernel 多的；同流、旁路：N 多大块号都在同一 "
                           "stream / 旁路 stream 上传；连续：只量 kernel、拷连续的块；E：只量 kernel。")
    big = [(s, n) for s in shapes for n in ns if n >= 256]
    kern = [t[s, n, "D"]["us"] / t[s, n, "C_kernel"]["us"] for s, n in big]
    e = [t[s, n, "D"]["us"] / t[s, n, "E_kernel"]["us"] for s, n in big]
    show.claim(f"N ≥ 256 时只量 kernel 的 C 是 D 的 {pct(min(kern), 1)}–{pct(max(kern), 1)}，vLLM 式的 E 是 {pct(min(e), 1)}–"
               f"{pct(max(e), 1)}：同样一次 launch，E 的 program 少、每个搬一整块，C 的 program 多、每个搬 2 KB，同时在飞的"
               "字节多。", min(kern) > max(e), f"C 最低 {pct(min(kern), 1)}、E 最高 {pct(max(e), 1)}")
    host, s, n = max((t[s, n, "C"]["us"] - t[s, n, "C_kernel"]["us"], s, n) for s in shapes for n in ns)
    show.claim(f"每个 N 上整步的 C 比只量 kernel 最多多 {num(host, 1)} µs（{s}，N = {num(n)}）：N ≤ 8 时块号就是参数，一次驱动调用；"
               "更大时一个小 kernel 把块号搬进显存，N 大时它在旁路 stream 上、和上一步的拷贝重叠。", host <= 10, f"多 {num(host, 1)} µs")


def demo_decode():
    """命中前缀后的第一步 decode 要 COW：克隆占一整步 decode（GPT-2 small 的尺寸）的多少？"""
    data, _ = results()
    dec, m = data["decode"], data["decode"]["model"]
    rows = [[num(r["B"]), *(us(r["us"][m]) for m in ("none", "A", "C")), *(pct((r["us"][m] - r["us"]["none"]) /
             r["us"][m], 1) for m in "AC"), pct(max(spread(v) for v in r["rounds_us"].values()), 1)] for r in dec["rows"]]
    show.table(["B", "无克隆", "+A", "+C", "A 占", "C 占", "波动"], rows,
               caption=f"{m['n_layers']} 层、d={m['d_model']}、词表 {num(m['vocab'])}，随机权重，前缀 "
                       f"{data['settings']['DECODE_PREFIX_LEN']} 个 token，B 条序列各 COW 一块，整步一个 CUDA graph；µs/步；"
                       f"占 = (有克隆 − 无克隆) / 有克隆；波动 = {data['settings']['ROUNDS']} 轮的 (最大 − 最小) / 中位数。")
    a, c = ([show.value(r[i]) for r in rows] for i in (4, 5))
    show.claim(f"A 的克隆占一步 decode 的 {pct(min(a), 1)}–{pct(max(a), 1)}，C 占 {pct(min(c), 1)}–{pct(max(c), 1)}：一次 "
               "launch 的克隆在整步里几乎看不出来。", max(c) < min(a) / 3, f"C 最多占 {pct(max(c), 1)}")
    same = all(r["logits_identical"] and r["kv_identical"] for r in dec["rows"])
    show.claim("不克隆、A、C 之后的 KV 缓存和 logits 都逐位相同：克隆是逐位拷贝，之后的计算一模一样。", same,
               "有一行的 logits 或 KV 缓存不同")
    show.note("出处对照：博客的 prefill→首 token p99（三次运行）之前 0.59、0.55、0.51 ms；之后 0.52、0.49、0.47 ms，"
              "区间重叠；它量的是整个引擎的首 token，这里量的是克隆本身，只比方向。")


DEMOS = [("演示 1：逐位校验", demo_validate), ("演示 2：每步 µs（A / B / C / D / E）", demo_times),
         ("演示 3：C 受什么限制", demo_limits), ("演示 4：克隆占一步 decode 的多少", demo_decode)]


def main(argv=None):
    global JSON
    p = show.parser(__doc__, DEMOS)
    p.add_argument("--json", default=JSON, help="结果 JSON（有 GPU 时写，没有时读；默认是保存的 H200 结果）")
    JSON = (args := p.parse_args(argv)).json
    check_settings()
    if os.path.isdir(JSON):
        show.fail(f"--json {JSON}：是一个目录，不是文件")
    show.run(DEMOS, args)
    return 0


if __name__ == "__main__":
    show.quietly(main)
