"""（GPU 加餐）共享 prefix 的 last block 被 copy-on-write 时，克隆这一步要花多少时间？
一次 launch 搬完所有层的 Triton kernel，能否既打败“每层 gather/scatter”的 launch 开销，又跑到显存带宽的上限？

运行：
    python lecture07/06_triton_cow_clone.py                 # 有 NVIDIA GPU：校验 + 计时 + 存 JSON + 画图（H200 上约 45 秒）
    python lecture07/06_triton_cow_clone.py                 # 没有 GPU：用 Triton 解释器校验 kernel（约 6 秒），不计时
    python lecture07/06_triton_cow_clone.py --plot-only     # 只用保存的 JSON 重画图（CPU 即可，约 1.5 秒）
    python lecture07/06_triton_cow_clone.py --figures DIR --json PATH

四种方法（一次 COW step 要克隆 N 个 block，所有层、K 和 V）：
    A  每层 index_select + index_copy_，每层都新建下标张量（种子文章的“之前”）
    B  每层一次 Triton launch，每层新建 int32 下标张量（种子文章的“之后”）
    C  所有层 × K/V × N 只用一次 launch；整块缓存 [L, 2, n_blocks, H, BS, D]，下标经可复用的锁页缓冲区上传
    D  同样字节数的一次连续 device-to-device 拷贝（带宽上限）

演示 4 把克隆放回一整步 decode 里（GPT-2 small 形状、随机权重、torch 分页注意力）：B 条序列刚命中
同一个 prefix 条目、最后一块没写满，这一步各 COW 一次；比较不克隆 / 用 A 克隆 / 用 C 克隆的每步 µs。
没有 GPU 时只打印已保存的 H200 结果（标明日期）。
"""
import argparse
import datetime
import json
import math
import os
import platform
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, ".."))
sys.path.insert(0, ROOT)  # 仓库根目录：让 lab_common 包可以 import

from lab_common.console import print_header, print_observations, print_table, print_text  # noqa: E402

DEFAULT_JSON = os.path.join(ROOT, "figures", "data", "triton_cow_clone_h200.json")
DEFAULT_FIGURES = os.path.join(ROOT, "figures")
FIGURE_NAME = "06_triton_cow_clone.png"

SHAPES = {
    "gpt2-small": dict(n_layers=12, n_heads=12, head_dim=64, block_size=16, dtype="float16"),
    "llama3-8b": dict(n_layers=32, n_heads=8, head_dim=128, block_size=16, dtype="bfloat16"),
}
NS = (1, 8, 64, 256, 2048)
METHODS = ("A", "B", "C", "D")
METHOD_NAMES = {
    "A": "A 每层 index_select+index_copy_",
    "B": "B 每层一次 Triton launch",
    "C": "C 一次 launch（全部层 + K/V）",
    "D": "D 连续 D2D 拷贝（带宽上限）",
    "C_kernel": "C 仅 kernel（下标已在 GPU 上）",
    "B_kernel": "B 仅 kernel（下标已在 GPU 上）",
}
METHOD_NAMES_EN = {
    "A": "A per-layer index_select+index_copy_",
    "B": "B per-layer Triton launch",
    "C": "C one launch (all layers, K/V)",
    "D": "D contiguous D2D copy (roof)",
    "C_kernel": "C kernel only",
    "B_kernel": "B kernels only",
}
# 文献 / 种子里的数字：只用来对照，不参与任何计算
ANCHORS = {
    "source_issue": "issue 4 给出的 H200 锚点（torch 2.11, triton 3.6）",
    "gpt2_N1_us": {"A": 1143.0, "B": 270.0, "D": 16.0},
    "N2048_TBps": {"B": 3.68, "D": 4.23},
    "source_seed": "种子文章（roseinfer benchmark_streaming, HF GPT-2, 256 请求）",
    "seed_prefill_first_token_p99_ms": {"before": 0.55, "after": 0.49},
    "seed_throughput_tok_s": {"before": 3394.40, "after": 3459.84},
}
TARGET_C_OVER_A_N1 = 1 / 20      # C ≤ A/20（N=1，GPT-2）
TARGET_C_VS_D_BW = 0.90          # C ≥ 90% × D 的带宽（N=2048，两种形状）

_kvc = None          # kv_clone_triton 模块（延迟导入：CPU 讲义环境没有 torch）
torch = None


class CliError(Exception):
    """命令行参数错误：打印一行，退出码 2。"""


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise CliError(message)


def _import_torch():
    """导入 torch 与 kv_clone_triton；没有 CUDA 时先设 TRITON_INTERPRET=1（必须在导入 triton 之前）。"""
    global _kvc, torch
    if _kvc is not None:
        return _kvc
    import torch as _torch
    if not _torch.cuda.is_available():
        os.environ.setdefault("TRITON_INTERPRET", "1")
    import kv_clone_triton
    torch = _torch
    _kvc = kv_clone_triton
    return _kvc


def _dtype(name):
    return {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32}[name]


def _bits(t):
    """按位比较用：把浮点张量看成同宽的整数（NaN 也能逐位比较）。"""
    return t.contiguous().view({2: torch.int16, 4: torch.int32}[t.element_size()])


def _same_bits(a, b):
    return bool(torch.equal(_bits(a), _bits(b)))


# ─────────────────────────────── (a) 校验 ───────────────────────────────
def validate_case(dtype, n_layers, n_heads, head_dim, block_size, n_cow, seed=0,
                  device="cpu", use_kernel=True, max_tile=None):
    """构造 ref_count > 1 的共享 last block，调一次 append_token_batch，逐位检查结果。

    批里混着：n_cow 个 COW 子序列（分给 1~3 个父序列）、一个独占 last block 的序列（原地写）、
    一个 last block 刚写满的序列（新 block、不拷贝）、一个共享“已写满” block 的子序列（也不拷贝）。
    目标 block 在调用前全部填成 0xFF（NaN）——没被写到的元素一定会露馅。
    返回 {检查名: bool} 以及几个计数。
    """
    kvc = _import_torch()
    g = torch.Generator().manual_seed(seed)

    def rint(lo, hi):
        return int(torch.randint(lo, hi + 1, (1,), generator=g))

    bs = block_size
    n_par = max(1, min(3, n_cow))
    par_lens = [rint(0, 3) * bs + rint(1, bs - 1) for _ in range(n_par)]   # 最后一块没写满
    own_len = rint(0, 2) * bs + rint(1, bs - 1)
    full_len = rint(1, 2) * bs
    need = sum(-(-t // bs) for t in par_lens) + n_cow + (-(-own_len // bs)) + 1 + 2 * (full_len // bs) + 2
    n_blocks = need + rint(1, 5)                                            # 多几个从不该被碰的空闲块
    mgr = kvc.KVBlockManager(n_layers, n_heads, head_dim, bs, n_blocks, dtype=dtype,
                             device=device, use_kernel=use_kernel)

    def rand_kv(t):
        return (torch.randn((n_layers, t, n_heads, head_dim), generator=g).to(device),
                torch.randn((n_layers, t, n_heads, head_dim), generator=g).to(device))

    for i, t in enumerate(par_lens):
        mgr.add_sequence(("P", i), *rand_kv(t))
    mgr.add_sequence("own", *rand_kv(own_len))
    mgr.add_sequence("full", *rand_kv(full_len))
    mgr.add_sequence("fullP", *rand_kv(full_len))
    children = []
    for j in range(n_cow):
        cid = ("C", j)
        mgr.fork(("P", j % n_par), cid)
        children.append(cid)
    mgr.fork("fullP", "fullC")
    batch = children + ["own", "full", "fullC"]
    perm = torch.randperm(len(batch), generator=g).tolist()
    batch = [batch[i] for i in perm]

    # 毒化：所有空闲 block 的每个字节都写成 0xFF
    free = torch.tensor(sorted(mgr.free_blocks), dtype=torch.long, device=device)
    mgr.kv.view(torch.uint8)[:, :, free] = 0xFF
    before = mgr.kv.clone()
    tables0 = {s: list(t) for s, t in mgr.block_tables.items()}
    lens0 = dict(mgr.seq_lens)
    refs0 = list(mgr.ref_counts)
    calls0 = mgr.clone_calls
    k_new, v_new = rand_kv(len(batch))                                      # [L, B, H, D]

    old_tile = kvc.MAX_TILE
    if max_tile is not None:
        kvc.MAX_TILE = max_tile
    try:
        pairs = mgr.append_token_batch(batch, k_new, v_new)
    finally:
        kvc.MAX_TILE = old_tile
    if device != "cpu":
        torch.cuda.synchronize()

    kv = mgr.kv
    checks = {}
    checks["一次调用克隆全部"] = (mgr.clone_calls - calls0) == (1 if n_cow else 0) and len(pairs) == n_cow
    src = [s for s, _ in pairs]
    dst = [d for _, d in pairs]
    checks["共享块不变（含 old_len 槽）"] = all(_same_bits(kv[:, :, s], before[:, :, s]) for s in set(src))
    ok_prefix, ok_tok, ok_rest = True, True, True
    for i, sid in enumerate(batch):
        blk = mgr.block_tables[sid][-1]
        pos = lens0[sid] % bs
        ok_tok &= _same_bits(kv[:, 0, blk, :, pos], k_new[:, i].to(dtype))
        ok_tok &= _same_bits(kv[:, 1, blk, :, pos], v_new[:, i].to(dtype))
        if sid in children:
            s = tables0[sid][-1]
            ok_prefix &= _same_bits(kv[:, :, blk, :, :pos], before[:, :, s, :, :pos])
            ok_rest &= _same_bits(kv[:, :, blk, :, pos + 1:], before[:, :, s, :, pos + 1:])
    checks["前缀逐位相同"] = ok_prefix
    checks["新 token 已写入"] = ok_tok
    checks["整块拷贝（old_len 之后也覆盖毒值）"] = ok_rest
    # 整个缓存：按预期重放一遍，逐位比较（没有多写、没有漏写）
    exp = before.clone()
    if pairs:
        exp[:, :, dst] = before[:, :, src]
    for i, sid in enumerate(batch):
        blk = mgr.block_tables[sid][-1]
        pos = lens0[sid] % bs
        exp[:, 0, blk, :, pos] = k_new[:, i].to(dtype)
        exp[:, 1, blk, :, pos] = v_new[:, i].to(dtype)
    checks["整个缓存与预期逐位相同"] = _same_bits(kv, exp)
    # 引用计数与 block table
    ok_ref, ok_tab = True, True
    for sid in batch:
        t0, t1 = tables0[sid], mgr.block_tables[sid]
        ok_tab &= mgr.seq_lens[sid] == lens0[sid] + 1
        if sid in children:
            ok_tab &= t1[:-1] == t0[:-1] and t1[-1] != t0[-1] and t1[-1] in dst
            ok_ref &= mgr.ref_counts[t1[-1]] == 1
        elif lens0[sid] % bs == 0:
            ok_tab &= t1[:-1] == t0 and refs0[t1[-1]] == 0 and mgr.ref_counts[t1[-1]] == 1
        else:
            ok_tab &= t1 == t0
    for i in range(n_par):
        last = tables0[("P", i)][-1]
        ok_ref &= mgr.ref_counts[last] == 1                      # 只剩父序列（prefix cache 条目）持有
        ok_tab &= mgr.block_tables[("P", i)] == tables0[("P", i)]
    ok_ref &= mgr.ref_counts[tables0["fullP"][-1]] == 2          # 写满的共享块不需要 COW，仍被共享
    ok_ref &= sum(1 for r in mgr.ref_counts if r == 0) == len(mgr.free_blocks)
    checks["ref_counts 正确"] = bool(ok_ref)
    checks["block table 正确"] = bool(ok_tab)
    # 子序列读出来 = 父序列的前缀 + 新 token
    ok_seq = True
    for j, cid in enumerate(children):
        pref = mgr.gather_sequence(("P", j % n_par))
        ok_seq &= _same_bits(mgr.gather_sequence(cid)[:, :, :-1], pref)
    checks["子序列 = 父前缀 + 新 token"] = ok_seq
    return {"checks": checks, "n_pairs": len(pairs), "elems_per_block": n_heads * bs * head_dim,
            "ok": all(checks.values())}


def validate_layer_kernel(dtype, n_blocks, n_heads, block_size, head_dim, n, seed=0, device="cpu",
                          max_tile=None):
    """方法 B 用的每层 kernel（种子原样）：N 个 block 从 src 拷到 dst，其余逐位不变。"""
    kvc = _import_torch()
    g = torch.Generator().manual_seed(seed)
    shape = (n_blocks, n_heads, block_size, head_dim)
    k = torch.randn(shape, generator=g).to(dtype).to(device)
    v = torch.randn(shape, generator=g).to(dtype).to(device)
    perm = torch.randperm(n_blocks, generator=g).tolist()
    src, dst = perm[:n], perm[n:2 * n]
    for t in (k, v):
        t.view(torch.uint8)[torch.tensor(dst, dtype=torch.long, device=device)] = 0xFF
    k0, v0 = k.clone(), v.clone()
    old_tile = kvc.MAX_TILE
    if max_tile is not None:
        kvc.MAX_TILE = max_tile
    try:
        kvc.kv_clone_blocks_triton(k, v, src, dst)
    finally:
        kvc.MAX_TILE = old_tile
    ek, ev = k0.clone(), v0.clone()
    if n:
        ek[dst] = k0[src]
        ev[dst] = v0[src]
    return _same_bits(k, ek) and _same_bits(v, ev)


def validate_many_steps(device, steps=101, seed=0, max_n=None):
    """连续很多步、每步一组不同的 (src, dst)，不在中间同步：复用的下标缓冲区不能被提前改写。

    最后和在主机上逐步重放（index_select/index_copy_）的结果逐位比较。
    """
    kvc = _import_torch()
    g = torch.Generator().manual_seed(seed)
    max_n = 2 * kvc.SMALL_N if max_n is None else max_n
    nb = 2 * max_n + 8
    kv = torch.randn((2, 2, nb, 2, 3, 8), generator=g).to(torch.float16)
    ref = kv.clone()
    kv = kv.to(device)
    buf = kvc.CloneIndexBuffer(device, capacity=4)       # 故意很小：中途要扩容
    for _ in range(steps):
        n = int(torch.randint(0, max_n + 1, (1,), generator=g))
        perm = torch.randperm(nb, generator=g).tolist()
        src, dst = perm[:n], perm[n:2 * n]
        kvc.kv_clone_blocks_all(kv, src, dst, index_buffer=buf, use_kernel=True)
        if n:
            ref[:, :, dst] = ref[:, :, src]
    return _same_bits(kv.cpu(), ref)


def validation_plan(on_gpu, seed=0):
    """要跑的校验用例：随机形状 × 3 种 dtype × N = 0 / 1 / 多个；元素数不是 tile 的整数倍。"""
    g = torch.Generator().manual_seed(seed)

    def pick(xs):
        return xs[int(torch.randint(0, len(xs), (1,), generator=g))]

    cases = []
    many = (37, 150) if on_gpu else (13,)
    dtypes = ("float16", "bfloat16", "float32")
    for dt in dtypes:
        for n in (0, 1) + many:
            L = pick([1, 2, 3]) if not on_gpu else pick([1, 2, 5, 12])
            H = pick([1, 2, 3, 5])
            bs = pick([3, 5, 8, 16])
            d = pick([7, 24, 40, 64]) if not on_gpu else pick([7, 40, 64, 100, 128])
            # 一半的用例把 tile 调小，保证一个 block 要多个 tile、最后一个 tile 不满（测 mask）
            mt = pick([None, 32, 64]) if not on_gpu else pick([None, 256, 1024])
            cases.append(dict(dtype=dt, n_layers=L, n_heads=H, head_dim=d, block_size=bs,
                              n_cow=n, max_tile=mt))
    if on_gpu:   # 真实形状、小 N
        for name, s in SHAPES.items():
            for n in (1, 64):
                cases.append(dict(dtype=s["dtype"], n_layers=s["n_layers"], n_heads=s["n_heads"],
                                  head_dim=s["head_dim"], block_size=s["block_size"], n_cow=n,
                                  max_tile=None))
    return cases


def demo_1(on_gpu, seed=0):
    """Triton COW 克隆 kernel 在随机形状、fp16/bf16/fp32、N = 0 / 1 / 多个时，是否逐位正确？"""
    kvc = _import_torch()
    device = "cuda" if on_gpu else "cpu"
    where = "GPU（真实 kernel）" if on_gpu else "CPU（Triton 解释器，TRITON_INTERPRET=1）"
    print_header(f"演示 1：校验 COW 克隆（{where}）")
    if not kvc.HAVE_TRITON:
        print_text("没有安装 triton：只能校验 index_copy 回退路径。pip install -r requirements-triton.txt")
    rows, all_ok, n_checks = [], True, 0
    t0 = time.perf_counter()
    for i, c in enumerate(validation_plan(on_gpu, seed)):
        dt = _dtype(c["dtype"])
        paths = ([("kernel", True)] if kvc.HAVE_TRITON else []) + ([("回退", False)] if not on_gpu else [])
        for path, use_k in paths:
            r = validate_case(dt, c["n_layers"], c["n_heads"], c["head_dim"], c["block_size"],
                              c["n_cow"], seed=seed + i, device=device, use_kernel=use_k,
                              max_tile=c["max_tile"] if use_k else None)
            n_checks += len(r["checks"])
            all_ok &= r["ok"]
            bad = [k for k, v in r["checks"].items() if not v]
            shape = f"L{c['n_layers']} H{c['n_heads']} BS{c['block_size']} D{c['head_dim']}"
            e = r["elems_per_block"]
            tile, tiles = kvc.tile_for(e, c["max_tile"] if use_k else None)
            tail = e - (tiles - 1) * tile
            rows.append([c["dtype"], shape, r["n_pairs"], e,
                         f"{tiles}×{tile} 尾{tail}" if use_k else "-", path, "通过" if r["ok"] else "失败：" + "、".join(bad)])
    layer_ok = True
    if kvc.HAVE_TRITON:
        for j, dt in enumerate(("float16", "bfloat16", "float32")):
            for n in (0, 1, 9):
                layer_ok &= validate_layer_kernel(_dtype(dt), 2 * n + 3, 3, 5, 24, n, seed=seed + j,
                                                  device=device, max_tile=32)
    # GPU 上：101 步、N 跨过零拷贝/H2D 分界、绕环形缓冲区 3 圈；解释器很慢，CPU 上只走 8 步小 N
    ring_steps, ring_n = (3 * 32 + 5, 2 * kvc.SMALL_N) if on_gpu else (8, 6)
    ring_ok = validate_many_steps(device, steps=ring_steps, seed=seed, max_n=ring_n) if kvc.HAVE_TRITON else True
    secs = time.perf_counter() - t0
    print_table(["dtype", "形状", "N", "每块元素", "tile 划分", "路径", "结果"], rows)
    print_observations([
        f"{len(rows)} 个用例、{n_checks} 项检查，{'全部通过' if all_ok else '有失败'}；"
        f"用时 {secs:.1f} 秒。",
        "每个用例调用前把所有空闲 block 的字节写成 0xFF（NaN）；整个缓存与按预期重放的结果逐位比较，"
        "所以漏写、多写、写错位置都会失败。",
        f"每层 kernel（方法 B，种子原样）在 3 种 dtype × N = 0/1/9 上：{'逐位正确' if layer_ok else '有错误'}。",
        f"连续 {ring_steps} 步、每步换一组随机 block 对（N 在 0~{ring_n} 之间"
        + ("，跨过零拷贝/H2D 的分界，绕环形下标缓冲区 3 圈以上" if on_gpu else "") +
        f"），中间不同步：{'与逐步重放的结果逐位相同' if ring_ok else '有错误'}。",
    ])
    return {"cases": len(rows), "checks": n_checks, "all_ok": bool(all_ok and layer_ok and ring_ok),
            "layer_kernel_ok": bool(layer_ok), "ring_ok": bool(ring_ok), "seconds": secs,
            "mode": "cuda" if on_gpu else "interpreter"}


# ─────────────────────────────── (b) 计时 ───────────────────────────────
def _time_per_step(fn, min_rep_ms=5.0, reps=15, warmup=5):
    """稳态每步耗时（µs）：预热后，用 CUDA event 包住 inner 次连续调用，取 reps 次的中位数。

    每次先不计时地调用一次（让 GPU 手上有活），再记起点 event：测的是连续 decode 时的稳态。
    event 在主机走到那里时入队：主机比 GPU 慢（launch / 建张量的开销）时，GPU 的空等也算进去，
    所以这是“一步真正要多久”，不是 kernel 自己的时间。
    """
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    t = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    est_ms = max((time.perf_counter() - t) * 1e3, 1e-3)
    inner = max(1, min(200, math.ceil(min_rep_ms / est_ms)))
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    samples = []
    for _ in range(reps):
        fn()                                   # 不计时：GPU 上先排着一步，起点之后没有“冷启动”
        start.record()
        for _ in range(inner):
            fn()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) * 1e3 / inner)
    return statistics.median(samples), inner


def bytes_per_step(shape, n):
    """一步克隆读 + 写的字节数：N × 层数 × 2(K,V) × H×BS×D × 元素字节 × 2(读+写)。"""
    el = {"float16": 2, "bfloat16": 2, "float32": 4}[shape["dtype"]]
    e = shape["n_heads"] * shape["block_size"] * shape["head_dim"]
    return 2 * n * shape["n_layers"] * 2 * e * el


def tune_c(kv, src_dev, dst_dev, reps):
    """在最大的 N 上扫 (tile, num_warps, 流式提示)，选 kernel 最快的一组（整张表写进 JSON）。"""
    kvc = _kvc
    rows = []
    for tile in (1024, 2048, 4096, 8192):
        for nw in (4, 8):
            for st in (False, True):
                try:
                    us, _ = _time_per_step(lambda: kvc.launch_all_kernel(
                        kv, src_dev, dst_dev, max_tile=tile, num_warps=nw, stream_hints=st), reps=reps)
                except Exception as exc:     # 某个配置编译失败：记下来、跳过，不让整次计时白跑
                    rows.append({"max_tile": tile, "num_warps": nw, "stream_hints": st, "us": None,
                                 "error": str(exc).splitlines()[0][:200]})
                    continue
                rows.append({"max_tile": tile, "num_warps": nw, "stream_hints": st, "us": us})
    best = min((r for r in rows if r["us"] is not None), key=lambda r: r["us"])
    return best, rows


def host_breakdown(kv, src, dst, buf, iters=2000):
    """C 在小 N 时每步的主机开销拆开看（µs，perf_counter，不同步）：检查 / 上传 / launch。"""
    kvc = _kvc
    out = {}

    def clock(fn):
        for _ in range(50):
            fn()
        torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(iters):
            fn()
        dt = (time.perf_counter() - t) / iters * 1e6
        torch.cuda.synchronize()
        return dt

    dev = kv.device

    def checks():
        kvc._check_stacked(kv)
        a = kvc._index_to_host("src", src, dev)
        b = kvc._index_to_host("dst", dst, dev)
        kvc.check_clone_indices(a, b, kv.shape[2])

    s_ok, d_ok = kvc.check_clone_indices(kvc._index_to_host("s", src, dev), kvc._index_to_host("d", dst, dev),
                                         kv.shape[2])

    def upload():
        buf.upload(s_ok, d_ok)
        buf.commit()

    s_dev, d_dev = buf.upload(s_ok, d_ok)
    buf.commit()
    n_ok = len(s_ok)
    out["检查下标"] = clock(checks)
    out["上传（环形锁页缓冲区）"] = clock(upload)
    out["launch（triton）"] = clock(lambda: kvc.launch_all_kernel(kv, s_dev, d_dev, n_ok))
    out["整个 C（主机侧）"] = clock(lambda: kvc.kv_clone_blocks_all(kv, src, dst, index_buffer=buf,
                                                                    use_kernel=True))
    return out


def bench_shape(name, shape, ns, reps=15, seed=0):
    """一种形状上，A/B/C/D（外加 C 仅 kernel）在每个 N 下的每步耗时与带宽。"""
    kvc = _kvc
    dev = torch.device("cuda")
    dt = _dtype(shape["dtype"])
    L, H, BS, D = shape["n_layers"], shape["n_heads"], shape["block_size"], shape["head_dim"]
    maxn = max(ns)
    n_blocks = 2 * maxn + 16
    kv = torch.empty((L, 2, n_blocks, H, BS, D), dtype=dt, device=dev)
    kv.view(torch.int16 if kv.element_size() == 2 else torch.int32).random_(-1000, 1000)
    kc = [kv[l, 0] for l in range(L)]
    vc = [kv[l, 1] for l in range(L)]
    flat_elems = maxn * L * 2 * H * BS * D
    d_src = torch.empty(flat_elems, dtype=dt, device=dev).fill_(1)
    d_dst = torch.empty(flat_elems, dtype=dt, device=dev)
    g = torch.Generator().manual_seed(seed)
    perm = torch.randperm(n_blocks, generator=g).tolist()
    buf = kvc.CloneIndexBuffer(dev, capacity=maxn)

    # 先在最大的 N 上调 C 的 tile / warps
    src_all, dst_all = perm[:maxn], perm[maxn:2 * maxn]
    s_dev = torch.tensor(src_all, dtype=torch.int32, device=dev)
    d_dev = torch.tensor(dst_all, dtype=torch.int32, device=dev)
    best, sweep = tune_c(kv, s_dev, d_dev, reps=max(5, reps // 2))
    kvc.MAX_TILE, kvc.NUM_WARPS, kvc.STREAM_HINTS = best["max_tile"], best["num_warps"], best["stream_hints"]

    results = []
    for n in ns:
        src, dst = perm[:n], perm[n:2 * n]          # 各不相同的源块：读真的来自 HBM，而非 L2 里的同一块
        s_d, d_d = s_dev[:n].contiguous(), d_dev[:n].contiguous()
        nbytes = bytes_per_step(shape, n)
        half = nbytes // 2 // kv.element_size()

        def step_a():
            clone_method_a(kc, vc, src, dst, dev)

        def step_b():
            for l in range(L):
                s = torch.tensor(src, device=dev, dtype=torch.int32)
                d = torch.tensor(dst, device=dev, dtype=torch.int32)
                kvc.launch_layer_kernel(kc[l], vc[l], s, d)

        def step_bk():
            for l in range(L):
                kvc.launch_layer_kernel(kc[l], vc[l], s_d, d_d)

        def step_c():
            kvc.kv_clone_blocks_all(kv, src, dst, index_buffer=buf, use_kernel=True)

        def step_ck():
            kvc.launch_all_kernel(kv, s_d, d_d)

        def step_d():
            d_dst[:half].copy_(d_src[:half])

        for m, fn in (("A", step_a), ("B", step_b), ("B_kernel", step_bk), ("C", step_c),
                      ("C_kernel", step_ck), ("D", step_d)):
            us, inner = _time_per_step(fn, reps=reps)
            results.append({"shape": name, "N": n, "method": m, "us": us, "bytes": nbytes,
                            "GBps": nbytes / (us * 1e-6) / 1e9, "inner": inner})
        # 计时之后再确认一次 C 的结果是对的（计时循环反复拷贝同一组块，结果应与 index_copy 一致）
        ref = kv.index_select(2, torch.tensor(src, device=dev))
        kvc.kv_clone_blocks_all(kv, src, dst, index_buffer=buf, use_kernel=True)
        torch.cuda.synchronize()
        assert _same_bits(kv.index_select(2, torch.tensor(dst, device=dev)), ref), "计时后的校验失败"
    # 零拷贝（kernel 读锁页内存）与 H2D 两条路，在小 N 上各测一遍：零拷贝阈值就是据此定的
    zc_cmp = []
    for n in [x for x in ns if x <= 256]:
        src, dst = perm[:n], perm[n:2 * n]
        row = {"N": n}
        for label, zc in (("zero_copy", True), ("h2d", False)):
            old = kvc.ZERO_COPY_MAX_N
            kvc.ZERO_COPY_MAX_N = max(ns) if zc else -1
            b2 = kvc.CloneIndexBuffer(dev, capacity=maxn)
            try:
                row[label], _ = _time_per_step(
                    lambda: kvc.kv_clone_blocks_all(kv, src, dst, index_buffer=b2, use_kernel=True), reps=reps)
            finally:
                kvc.ZERO_COPY_MAX_N = old
        zc_cmp.append(row)
    host = host_breakdown(kv, perm[:1], perm[1:2], buf)
    host["零拷贝下标"] = bool(buf.zero_copy)
    host["复用已编译 kernel"] = bool(kvc.FAST_LAUNCH)
    kv = d_src = d_dst = kc = vc = None      # 释放显存，下一个形状要用
    torch.cuda.empty_cache()
    return results, {"best": best, "sweep": sweep, "host_us_N1": host, "zero_copy_vs_h2d_us": zc_cmp,
                     "zero_copy_max_n": kvc.ZERO_COPY_MAX_N}


def _get(results, shape, n, m):
    for r in results:
        if r["shape"] == shape and r["N"] == n and r["method"] == m:
            return r
    raise KeyError((shape, n, m))


def compute_ratios(results):
    """两个目标比值（以及几个解释用的比值），全部从测得的结果算出。"""
    shapes = sorted({r["shape"] for r in results}, key=list(SHAPES).index)
    ns = sorted({r["N"] for r in results})
    n_lo, n_hi = ns[0], ns[-1]
    out = {}
    for s in shapes:
        a = _get(results, s, n_lo, "A")["us"]
        b = _get(results, s, n_lo, "B")["us"]
        c = _get(results, s, n_lo, "C")["us"]
        ck = _get(results, s, n_lo, "C_kernel")["us"]
        d = _get(results, s, n_lo, "D")["us"]
        c_bw = _get(results, s, n_hi, "C")["GBps"]
        d_bw = _get(results, s, n_hi, "D")["GBps"]
        b_bw = _get(results, s, n_hi, "B")["GBps"]
        out[s] = {
            "N_small": n_lo, "N_large": n_hi,
            "C_over_A_small": c / a, "A_over_C_small": a / c, "B_over_A_small": b / a,
            "C_kernel_over_C_small": ck / c, "D_us_small": d,
            "C_over_D_bw_large": c_bw / d_bw, "B_over_D_bw_large": b_bw / d_bw,
            "pass_C_le_A_over_20": c <= a * TARGET_C_OVER_A_N1,
            "pass_C_ge_90pct_D_bw": c_bw >= TARGET_C_VS_D_BW * d_bw,
        }
    return out


def observations(data):
    """由测得的数字拼成的观察（每句都是 f-string；测试会核对这些结论）。"""
    res, rat = data["results"], data["ratios"]
    lines = []
    for s, r in rat.items():
        n1, n2 = r["N_small"], r["N_large"]
        a, b = _get(res, s, n1, "A")["us"], _get(res, s, n1, "B")["us"]
        c, ck = _get(res, s, n1, "C")["us"], _get(res, s, n1, "C_kernel")["us"]
        L = data["shapes"][s]["n_layers"]
        lines.append(
            f"{s}，N={n1}：A {a:,.1f} µs、B {b:,.1f} µs、C {c:,.1f} µs → C/A = {r['C_over_A_small']:.4f}"
            f"（A 是 C 的 {r['A_over_C_small']:.1f} 倍），目标 C ≤ A/20："
            f"{'达标' if r['pass_C_le_A_over_20'] else '未达标'}。")
        lines.append(
            f"{s}，N={n1} 受 launch/主机开销限制：A 每步 {L} 层 × (2 次建下标张量 + 4 个 kernel)，"
            f"B 每步 {L} 次建下标 + launch；C 只有 1 次 launch（小 N 时 kernel 直接读锁页内存里的下标），"
            f"其中 launch + kernel 本身（下标已在 GPU）{ck:.1f} µs，占 C 的 {100 * r['C_kernel_over_C_small']:.0f}%，"
            f"其余是主机端检查与写下标。")
        c_bw = _get(res, s, n2, "C")["GBps"]
        d_bw = _get(res, s, n2, "D")["GBps"]
        b_bw = _get(res, s, n2, "B")["GBps"]
        bk = [x for x in res if x["shape"] == s and x["N"] == n2 and x["method"] == "B_kernel"]
        bk_txt = (f"；B 的 {L} 个 kernel 本身（下标事先已在 GPU）{bk[0]['GBps'] / 1e3:.2f} TB/s，"
                  f"差距来自每层从 Python 列表新建下标张量" if bk else "")
        lines.append(
            f"{s}，N={n2} 受 HBM 带宽限制：C {c_bw / 1e3:.2f} TB/s，D（连续拷贝）{d_bw / 1e3:.2f} TB/s，"
            f"C/D = {100 * r['C_over_D_bw_large']:.1f}%（目标 ≥ 90%：{'达标' if r['pass_C_ge_90pct_D_bw'] else '未达标'}）；"
            f"B {b_bw / 1e3:.2f} TB/s（{100 * r['B_over_D_bw_large']:.1f}%）{bk_txt}。")
        # 从哪个 N 起 C 进入带宽区：C 的带宽第一次达到 D 实测上限（各 N 里 D 的最大值）的一半
        ns = sorted({x["N"] for x in res if x["shape"] == s})
        roof = max(_get(res, s, n, "D")["GBps"] for n in ns)
        cross = next((n for n in ns if _get(res, s, n, "C")["GBps"] >= 0.5 * roof), None)
        if cross is not None:
            lines.append(f"{s}：C 的带宽从 N={cross} 起超过 D 实测上限 {roof / 1e3:.2f} TB/s 的一半"
                         f"（{_get(res, s, cross, 'C')['GBps'] / 1e3:.2f} TB/s）——由此往上，"
                         f"每步时间大致随字节数线性增长，瓶颈从 launch/主机开销变成 HBM 带宽。")
        else:
            lines.append(f"{s}：测到的 N 里 C 的带宽都不到 D 实测上限 {roof / 1e3:.2f} TB/s 的一半。")
    return lines


def anchor_rows(data):
    """issue / 种子里的 H200 锚点与我们测得的对应值并列。"""
    res = data["results"]
    rows = []
    s = "gpt2-small"
    have_bk = any(r["method"] == "B_kernel" for r in res)
    if any(r["shape"] == s for r in res):
        for m, v in ANCHORS["gpt2_N1_us"].items():
            got = f"{_get(res, s, 1, m)['us']:,.1f}"
            if m == "B" and have_bk:
                got += f"（仅 kernel {_get(res, s, 1, 'B_kernel')['us']:,.1f}）"
            rows.append([f"GPT-2 N=1 方法 {m}（µs）", f"{v:,.0f}", got, ANCHORS["source_issue"]])
        for m, v in ANCHORS["N2048_TBps"].items():
            got = f"{_get(res, s, 2048, m)['GBps'] / 1e3:.2f}"
            if m == "B" and have_bk:
                got += f"（仅 kernel {_get(res, s, 2048, 'B_kernel')['GBps'] / 1e3:.2f}）"
            rows.append([f"GPT-2 N=2048 方法 {m}（TB/s）", f"{v:.2f}", got, ANCHORS["source_issue"]])
    sp = ANCHORS["seed_prefill_first_token_p99_ms"]
    rows.append(["prefill→首 token p99（ms，前/后）", f"{sp['before']} / {sp['after']}", "-",
                 ANCHORS["source_seed"]])
    return rows


def demo_2(reps=15, ns=NS, shapes=None, seed=0):
    """一次 COW step（所有层、K 和 V）的克隆要多少 µs、跑到多少 GB/s？A/B/C/D 比一比。"""
    _import_torch()
    shapes = shapes or list(SHAPES)
    print_header("演示 2：计时 A / B / C / D（每步 µs 与 GB/s）")
    print_text("计时方法：每种方法先预热 5 次；之后每次先不计时地调用 1 次（GPU 上有活排着，测的是稳态），"
               "再用 CUDA event 包住 inner 次连续调用（每次至少约 5 ms），"
               f"重复 {reps} 次取中位数。主机比 GPU 慢时 GPU 的空等也计入——这就是一步的真实代价。"
               "GB/s 按克隆的有效字节数（读 + 写）计算；源块各不相同，读来自 HBM。")
    all_res, tuning = [], {}
    for name in shapes:
        shape = SHAPES[name]
        t0 = time.perf_counter()
        res, tune = bench_shape(name, shape, ns, reps=reps, seed=seed)
        all_res += res
        tuning[name] = tune
        rows = []
        for n in ns:
            row = [n]
            for m in ("A", "B", "B_kernel", "C", "C_kernel", "D"):
                r = _get(res, name, n, m)
                row.append(f"{r['us']:,.0f}" if r["us"] >= 1000 else f"{r['us']:.1f}")
            for m in ("A", "B", "C", "D"):
                row.append(f"{_get(res, name, n, m)['GBps']:,.0f}")
            rows.append(row)
        print_text(f"\n{name}：{shape['n_layers']} 层、{shape['n_heads']} 个 KV 头、head_dim {shape['head_dim']}、"
                   f"block {shape['block_size']}、{shape['dtype']}；C 的 tile={tune['best']['max_tile']}、"
                   f"num_warps={tune['best']['num_warps']}、流式提示={'开' if tune['best']['stream_hints'] else '关'}"
                   f"（在 N={max(ns)} 上从 {len(tune['sweep'])} 组里扫出来的）；用时 {time.perf_counter() - t0:.1f} 秒")
        hb = tune["host_us_N1"]
        print_text("C 在 N=1 时每步的主机开销（µs）：" + "，".join(f"{k} {v:.1f}" for k, v in hb.items()
                                                                 if not isinstance(v, bool))
                   + f"；小 N 零拷贝读下标：{'是' if hb['零拷贝下标'] else '否（锁页内存未映射，改为 H2D）'}"
                   + f"；复用已编译 kernel：{'是' if hb.get('复用已编译 kernel') else '否'}")
        zc = tune["zero_copy_vs_h2d_us"]
        print_text("C 的下标怎么交给 kernel（每步 µs）：" + "；".join(
            f"N={r['N']} 零拷贝 {r['zero_copy']:.1f} / H2D {r['h2d']:.1f}" for r in zc)
            + f"（默认 N ≤ {tune['zero_copy_max_n']} 用零拷贝）")
        print_table(["N", "A", "B", "B核", "C", "C核", "D", "A", "B", "C", "D"], rows,
                    caption="前 6 列：每步 µs；后 4 列：GB/s（读+写）。“核”= 下标事先已在 GPU 上，只剩 launch 与 kernel")
    return all_res, tuning


def demo_3(data):
    """两个目标比值是否达标？各区间受什么限制？与 issue / 种子的锚点对照。"""
    print_header("演示 3：目标比值与瓶颈")
    rows = []
    for s, r in data["ratios"].items():
        rows.append([s, f"{r['C_over_A_small']:.4f}", "≤ 0.05", "达标" if r["pass_C_le_A_over_20"] else "未达标",
                     f"{100 * r['C_over_D_bw_large']:.1f}%", "≥ 90%", "达标" if r["pass_C_ge_90pct_D_bw"] else "未达标"])
    print_table(["形状", "C/A (N=1)", "目标", "", "C/D 带宽 (N=2048)", "目标", ""], rows)
    print_table(["量", "锚点", "本次测得", "出处"], anchor_rows(data))
    print_observations(observations(data))


# ─────────────────────────────── (d) 克隆在一次 decode step 里占多少 ───────────────────────────────
# GPT-2 small 的形状（随机权重，只用来计时；和 SHAPES["gpt2-small"] 的 KV 形状一致）
DECODE_MODEL = dict(n_layers=12, d_model=768, n_heads=12, d_ff=3072, vocab=50257, n_pos=1024,
                    block_size=16, dtype="float16")
DECODE_BATCHES = (1, 8, 64)   # 同一步里刚命中 prefix 条目的序列数 B（= 这一步要克隆的 block 对数）
DECODE_PREFIX_LEN = 200       # 命中的 prefix 长度（token）：12 个满 block + 1 个只写了 8 个 token 的 block
DECODE_ROUNDS = 3             # 三种做法轮流计时几轮（每轮各自取中位数，再取各轮的中位数）
LARGE_SHARE = 0.10            # 克隆占一步的比例 ≥ 它就叫“大头”，否则叫“小头”


def clone_method_a(kc, vc, src, dst, device):
    """方法 A（种子的“之前”）：每层从 Python 列表新建下标张量，再 index_select + index_copy_。"""
    for l in range(len(kc)):
        s = torch.tensor(src, device=device, dtype=torch.long)
        d = torch.tensor(dst, device=device, dtype=torch.long)
        kc[l].index_copy_(0, d, kc[l].index_select(0, s))
        vc[l].index_copy_(0, d, vc[l].index_select(0, s))


def init_decoder(cfg, device, seed=0):
    """GPT-2 结构的随机权重（pre-LN、GELU、tied embedding），dtype 取 cfg["dtype"]。"""
    dt = _dtype(cfg["dtype"])
    g = torch.Generator(device=device).manual_seed(seed)
    d, f = cfg["d_model"], cfg["d_ff"]

    def w(*shape):
        return (torch.randn(shape, generator=g, device=device) * 0.02).to(dt)

    def ln():
        return torch.ones(d, device=device, dtype=dt), torch.zeros(d, device=device, dtype=dt)

    layers = [dict(ln1=ln(), qkv_w=w(3 * d, d), qkv_b=w(3 * d), o_w=w(d, d), o_b=w(d), ln2=ln(),
                   fc_w=w(f, d), fc_b=w(f), pr_w=w(d, f), pr_b=w(d)) for _ in range(cfg["n_layers"])]
    return dict(wte=w(cfg["vocab"], d), wpe=w(cfg["n_pos"], d), lnf=ln(), layers=layers)


def paged_decode_step(params, cfg, kv, tokens, pos, table, slot, seq_len):
    """一次 decode step（每条序列 1 个 token），分页注意力用 torch 算子：

    每层：算 q/k/v → 把新 token 的 k/v 写进 block table 最后一块的第 slot 格 →
    按 block table 把 K/V gather 成连续张量 → F.scaled_dot_product_attention。
    kv：[L, 2, n_blocks, H, BS, D]；table：[B, nb] long；这一批序列等长（都是 seq_len），所以直接截断、不用 mask。
    返回 logits [B, vocab]。
    """
    import torch.nn.functional as F
    d, H = cfg["d_model"], cfg["n_heads"]
    D = d // H
    B = tokens.shape[0]
    blk = table[:, -1]
    x = params["wte"][tokens] + params["wpe"][pos]
    for l, p in enumerate(params["layers"]):
        h = F.layer_norm(x, (d,), *p["ln1"])
        q, k, v = F.linear(h, p["qkv_w"], p["qkv_b"]).view(B, 3, H, D).unbind(1)
        kv[l, 0, blk, :, slot] = k
        kv[l, 1, blk, :, slot] = v
        kvb = kv[l][:, table]                                          # [2, B, nb, H, BS, D]
        kvb = kvb.permute(0, 1, 3, 2, 4, 5).reshape(2, B, H, -1, D)[:, :, :, :seq_len]
        a = F.scaled_dot_product_attention(q.unsqueeze(2), kvb[0], kvb[1])    # [B, H, 1, D]
        x = x + F.linear(a.reshape(B, d), p["o_w"], p["o_b"])
        h = F.layer_norm(x, (d,), *p["ln2"])
        x = x + F.linear(F.gelu(F.linear(h, p["fc_w"], p["fc_b"]), approximate="tanh"), p["pr_w"], p["pr_b"])
    x = F.layer_norm(x, (d,), *params["lnf"])
    return F.linear(x, params["wte"])


def make_decode_case(cfg, batch, prefix_len, device, seed=0, use_kernel=None):
    """B 条序列刚命中同一个 prefix 条目（最后一块没写满）：用 KVBlockManager 做 fork 和第一次 append 的 COW。

    返回这一步要用的全部张量，以及 COW 的 (src, dst) 列表——计时时每步重做同样的克隆。
    """
    kvc = _import_torch()
    bs = cfg["block_size"]
    if prefix_len % bs == 0:
        raise ValueError(f"prefix 长度 {prefix_len} 是 block {bs} 的整数倍：最后一块是满的，不会 COW")
    L, H = cfg["n_layers"], cfg["n_heads"]
    D = cfg["d_model"] // H
    n_pref = -(-prefix_len // bs)
    mgr = kvc.KVBlockManager(L, H, D, bs, n_pref + batch + 2, dtype=_dtype(cfg["dtype"]), device=device,
                             use_kernel=use_kernel)
    g = torch.Generator().manual_seed(seed)
    k = torch.randn((L, prefix_len, H, D), generator=g).to(device)
    v = torch.randn((L, prefix_len, H, D), generator=g).to(device)
    mgr.add_sequence("prefix", k, v)              # prefix cache 条目（它自己一直持有这些 block）
    seqs = list(range(batch))
    for s in seqs:
        mgr.fork("prefix", s)
    zero = torch.zeros((L, batch, H, D))
    pairs = mgr.append_token_batch(seqs, zero, zero)     # 第一次 decode 写入：每条序列 COW 一次
    table = torch.tensor([mgr.block_tables[s] for s in seqs], dtype=torch.long, device=device)
    tokens = torch.randint(0, cfg["vocab"], (batch,), generator=g).to(device)
    pos = torch.full((batch,), prefix_len, dtype=torch.long, device=device)
    return dict(mgr=mgr, src=[s for s, _ in pairs], dst=[d for _, d in pairs], table=table, tokens=tokens,
                pos=pos, slot=prefix_len % bs, seq_len=prefix_len + 1)


def decode_step_fn(params, cfg, case, method):
    """返回一个“做一步”的函数：method = none（不克隆）/ A / C，克隆之后跑完整的 decode step 并取 argmax。"""
    kvc = _kvc
    mgr = case["mgr"]
    src, dst = case["src"], case["dst"]
    dev = mgr.kv.device

    def step():
        if method == "A":
            clone_method_a(mgr.k_caches, mgr.v_caches, src, dst, dev)
        elif method == "C":
            kvc.kv_clone_blocks_all(mgr.kv, src, dst, index_buffer=mgr.index_buffer, use_kernel=mgr.use_kernel)
        logits = paged_decode_step(params, cfg, mgr.kv, case["tokens"], case["pos"], case["table"],
                                   case["slot"], case["seq_len"])
        step.logits = logits
        return logits.argmax(-1)
    return step


def decode_share_rows(timings):
    """由每步 µs 算出克隆的耗时与占比。timings: [{B, us_none, us_A, us_C}]。"""
    rows = []
    for t in timings:
        r = dict(t)
        for m in ("A", "C"):
            r[f"clone_us_{m}"] = t[f"us_{m}"] - t["us_none"]
            r[f"share_{m}"] = r[f"clone_us_{m}"] / t[f"us_{m}"]
        r["A_to_C_reduction"] = (t["us_A"] - t["us_C"]) / t["us_A"]
        rows.append(r)
    return rows


def measure_decode_share(reps=15, batches=DECODE_BATCHES, prefix_len=DECODE_PREFIX_LEN, rounds=DECODE_ROUNDS,
                         seed=0):
    """GPU 上：每个 B 建一个用例，none / A / C 轮流计时 rounds 轮；再核对三种做法的 logits 相同。"""
    _import_torch()
    cfg = DECODE_MODEL
    dev = torch.device("cuda")
    params = init_decoder(cfg, dev, seed)
    timings, max_diff = [], 0.0
    for b in batches:
        case = make_decode_case(cfg, b, prefix_len, dev, seed=seed + b)
        fns = {m: decode_step_fn(params, cfg, case, m) for m in ("none", "A", "C")}
        samples = {m: [] for m in fns}
        for _ in range(rounds):
            for m, fn in fns.items():
                samples[m].append(_time_per_step(fn, reps=reps)[0])
        outs = {}
        for m, fn in fns.items():
            fn()
            outs[m] = fn.logits.float()
        torch.cuda.synchronize()
        max_diff = max(max_diff, float((outs["A"] - outs["C"]).abs().max()),
                       float((outs["none"] - outs["C"]).abs().max()))
        timings.append({"B": b, "N_pairs": len(case["src"]),
                        **{f"us_{m}": statistics.median(v) for m, v in samples.items()}})
        case = fns = None
        torch.cuda.empty_cache()
    return {"config": dict(cfg, prefix_len=prefix_len, batches=list(batches), rounds=rounds,
                           attention="按 block table gather K/V + F.scaled_dot_product_attention（eager，无 CUDA graph）",
                           step="克隆（none 时不做）+ 12 层前向（写新 token 的 K/V、分页注意力、MLP）+ LM head + argmax；"
                                "不含调度器与 block 簿记"),
            "rows": decode_share_rows(timings), "max_abs_logit_diff": max_diff}


def decode_estimates(ds, results):
    """第二种估算：用演示 2 单独测的克隆耗时（同一个 JSON 里）。

    eager 的一步受主机限制（主机逐个 launch 算子），克隆的主机时间串行地加在一步上，
    所以估算占比 = 单独克隆 / (不克隆的一步 + 单独克隆)。没有对应 N 的结果时返回 None。
    """
    out = []
    for r in ds["rows"]:
        try:
            a = _get(results or [], "gpt2-small", r["N_pairs"], "A")["us"]
            c = _get(results or [], "gpt2-small", r["N_pairs"], "C")["us"]
        except KeyError:
            out.append(None)
            continue
        out.append({"B": r["B"], "alone_us_A": a, "alone_us_C": c,
                    "est_share_A": a / (r["us_none"] + a), "est_share_C": c / (r["us_none"] + c),
                    "est_reduction": (a - c) / (r["us_none"] + a)})
    return out


def decode_noise(ds):
    """抖动的下限（µs）：B 越大 GPU 的活越多，不克隆的一步却变快了多少（最大值）；单调变长时为 0。"""
    rows = ds["rows"]
    worst = (0.0, None, None)
    for i in range(len(rows)):
        for j in range(i + 1, len(rows)):
            drop = rows[i]["us_none"] - rows[j]["us_none"]
            if rows[j]["B"] > rows[i]["B"] and drop > worst[0]:
                worst = (drop, rows[i], rows[j])
    return worst


def _big(x):
    return "大头" if x >= LARGE_SHARE else "小头"


def decode_observations(ds, results=None):
    """由 decode_share 的数字（和演示 2 的单独克隆耗时）拼成的观察；措辞由数字决定。"""
    rows = ds["rows"]
    est = decode_estimates(ds, results)
    lines = []
    for r, e in zip(rows, est):
        txt = (f"B={r['B']}（{r['N_pairs']} 个 block 对）：不克隆的一步 {r['us_none']:,.0f} µs；"
               f"差分法（有克隆 − 无克隆）：A +{r['clone_us_A']:,.0f} µs（{100 * r['share_A']:.1f}%），"
               f"C {r['clone_us_C']:+,.0f} µs（{100 * r['share_C']:.1f}%）")
        if e:
            txt += (f"；按单独测的耗时估算：A {e['alone_us_A']:,.0f} µs → {100 * e['est_share_A']:.1f}%"
                    f"（{_big(e['est_share_A'])}），C {e['alone_us_C']:.1f} µs → {100 * e['est_share_C']:.1f}%"
                    f"（{_big(e['est_share_C'])}）")
        lines.append(txt + f"；大头/小头以 {100 * LARGE_SHARE:.0f}% 为界。")
    noise, lo, hi = decode_noise(ds)
    ok_est = [e for e in est if e]
    if noise > 0:
        txt = (f"测量抖动：B 从 {lo['B']} 到 {hi['B']}，GPU 的活更多，不克隆的一步却从 {lo['us_none']:,.0f} 变成 "
               f"{hi['us_none']:,.0f} µs——这台机器上 eager 一步的计时至少有约 {noise:,.0f} µs 的抖动"
               "（一步里几百个算子逐个从 Python launch，主机端的快慢直接变成一步的快慢）。")
        if ok_est:
            c_max = max(e["alone_us_C"] for e in ok_est)
            a_min = min(e["alone_us_A"] for e in ok_est)
            txt += (f"C 单独最多 {c_max:.1f} µs，{'远小于' if c_max * 5 < noise else '不远小于'}这个抖动，"
                    + ("所以差分法给出的 C 占比只是噪声，不是 C 的代价；" if c_max * 5 < noise else "")
                    + f"A 单独至少 {a_min:,.0f} µs，{'大于' if a_min > noise else '不大于'}这个抖动"
                    + ("，差分法只能看出 A 的量级。" if a_min <= noise else "。"))
        lines.append(txt)
    else:
        lines.append("不克隆的一步随 B 单调变长，数据里看不出明显的计时抖动。")
    if ok_est:
        ea = [e["est_share_A"] for e in ok_est]
        ec = [e["est_share_C"] for e in ok_est]
        turned = min(ea) >= LARGE_SHARE > max(ec)
        lines.append(f"按单独测的耗时估算，A 的克隆占一步的 {100 * min(ea):.1f}%~{100 * max(ea):.1f}%，"
                     f"C 的占 {100 * min(ec):.1f}%~{100 * max(ec):.1f}%："
                     + ("C 把克隆从一步的大头变成了小头。" if turned else "两者的大小关系见上表。"))
    sp = ANCHORS["seed_prefill_first_token_p99_ms"]
    seed_red = (sp["before"] - sp["after"]) / sp["before"]
    ours = "、".join(f"B={e['B']} −{100 * e['est_reduction']:.1f}%" for e in ok_est)
    diff = "、".join(f"B={r['B']} −{100 * r['A_to_C_reduction']:.1f}%" for r in rows)
    lines.append(f"对照种子：它报告 prefill→首 token p99 从 {sp['before']} 降到 {sp['after']} ms（−{100 * seed_red:.1f}%，"
                 f"{ANCHORS['source_seed']}）。把一步里的克隆从 A 换成 C，这一步缩短"
                 + (f"（估算）{ours}；" if ours else "")
                 + f"（差分法）{diff}。设置不同：种子是真权重、它自己的引擎、延迟含 prefill 与排队；"
                 "我们是随机权重、eager torch、只量一步 decode。只有命中 prefix 后的第一次 decode 才 COW，"
                 "之后的 step 没有克隆。")
    if ds.get("max_abs_logit_diff") is not None:
        md = ds["max_abs_logit_diff"]
        lines.append("不克隆 / A / C 三种做法算出的 logits "
                     + ("逐位相同（最大差 0）。" if md == 0 else
                        f"最大差 {md:.3g}，不是逐位相同；克隆本身的逐位正确性见演示 1，这个差别从哪来本次没有查明。"))
    return lines


def print_decode_table(ds, results=None, caption_extra=""):
    cfg = ds["config"]
    rows = []
    for r, e in zip(ds["rows"], decode_estimates(ds, results)):
        rows.append([r["B"], f"{r['us_none']:,.0f}", f"{r['us_A']:,.0f}", f"{r['us_C']:,.0f}",
                     f"{100 * r['share_A']:.1f}%", f"{100 * r['share_C']:.1f}%",
                     f"{100 * e['est_share_A']:.1f}%" if e else "-", f"{100 * e['est_share_C']:.1f}%" if e else "-"])
    print_table(["B", "无克隆", "+A", "+C", "A 差分", "C 差分", "A 估算", "C 估算"], rows,
                caption=f"前 3 列：每步 µs；prefix {cfg['prefix_len']} token（最后一块没写满），B 条序列各 COW 一个 block。"
                        "差分 = (有克隆 − 无克隆) / 有克隆；估算 = 演示 2 单独测的克隆 / (无克隆 + 单独克隆)"
                        + caption_extra)


def demo_4(on_gpu, reps=15, results=None, saved_json=DEFAULT_JSON, seed=0):
    """命中 prefix 后的第一次 decode 要 COW：克隆在一整步 decode（GPT-2 small 形状）里占多少？"""
    print_header("演示 4：克隆在一次 decode step 里占多少（GPT-2 small 形状，随机权重）")
    if not on_gpu:
        print_text("这个演示要在 NVIDIA GPU 上计时（CUDA + triton）：这里不跑。")
        data = None
        if saved_json and os.path.exists(saved_json):
            try:
                data = load_json(saved_json)
            except ValueError:
                data = None
        ds = data.get("decode_share") if isinstance(data, dict) else None
        if not ds:
            print_text("还没有保存的 GPU 结果。")
            return {"ran": False, "saved": False}
        m = data["meta"]
        print_text(f"下面是已保存的 {m['gpu']} 结果（{m['date']}，torch {m['torch']}，"
                   f"来自 {os.path.relpath(saved_json)}），不是本机测的：")
        print_decode_table(ds, data.get("results"), caption_extra=f"；已保存的 {m['gpu']} 结果（{m['date']}）")
        print_observations(decode_observations(ds, data.get("results")))
        return {"ran": False, "saved": True, "date": m["date"], "gpu": m["gpu"], "rows": ds["rows"]}
    m = DECODE_MODEL
    print_text(f"模型：{m['n_layers']} 层、d={m['d_model']}、{m['n_heads']} 头（head_dim {m['d_model'] // m['n_heads']}）、"
               f"block {m['block_size']}、{m['dtype']}、随机权重；分页注意力 = 按 block table gather K/V + "
               "F.scaled_dot_product_attention（eager torch）。一步 = 克隆 + 前向 + LM head + argmax，"
               f"不含调度器与 block 簿记。计时同演示 2，三种做法轮流测 {DECODE_ROUNDS} 轮取中位数。")
    t0 = time.perf_counter()
    ds = measure_decode_share(reps=reps, seed=seed)
    print_decode_table(ds, results, caption_extra=f"；用时 {time.perf_counter() - t0:.1f} 秒")
    print_observations(decode_observations(ds, results))
    return {"ran": True, "decode_share": ds}


# ─────────────────────────────── (c) JSON 与图 ───────────────────────────────
def save_json(data, path):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f, ensure_ascii=False, indent=1, sort_keys=True)
        f.write("\n")
    return path


def load_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def plot_from_json(data, out_png):
    """延迟与带宽随 N 的变化（每种方法一条线），带宽图上画出 D 的实测上限。只依赖 JSON 和 matplotlib。"""
    from lab_common.plotting import plt, save_png, setup_matplotlib
    font = setup_matplotlib()
    zh = font is not None                                # 没有中文字体时用英文标签，保证能渲染
    names = METHOD_NAMES if zh else METHOD_NAMES_EN
    res = data["results"]
    shapes = [s for s in SHAPES if any(r["shape"] == s for r in res)]
    fig, axes = plt.subplots(2, len(shapes), figsize=(8 * len(shapes), 11), squeeze=False)
    styles = {"A": ("tab:red", "o-"), "B": ("tab:orange", "s-"), "C": ("tab:blue", "^-"),
              "C_kernel": ("tab:blue", "^:"), "B_kernel": ("tab:orange", "s:"), "D": ("tab:gray", "D--")}
    for j, s in enumerate(shapes):
        sh = data["shapes"][s]
        for m in ("A", "B", "B_kernel", "C", "C_kernel", "D"):
            pts = sorted((r["N"], r["us"], r["GBps"]) for r in res if r["shape"] == s and r["method"] == m)
            if not pts:
                continue
            color, st = styles[m]
            axes[0][j].plot([p[0] for p in pts], [p[1] for p in pts], st, color=color, label=names[m])
            axes[1][j].plot([p[0] for p in pts], [p[2] for p in pts], st, color=color, label=names[m])
        roof = max(r["GBps"] for r in res if r["shape"] == s and r["method"] == "D")
        axes[1][j].axhline(roof, color="black", lw=1, ls="-.")
        axes[1][j].annotate((f"D 实测上限 {roof / 1e3:.2f} TB/s" if zh else f"measured roof (D) {roof / 1e3:.2f} TB/s"),
                            xy=(0.02, roof), xycoords=("axes fraction", "data"), va="bottom", fontsize=12)
        cfg = f"{s}: L={sh['n_layers']} H={sh['n_heads']} D={sh['head_dim']} BS={sh['block_size']} {sh['dtype']}"
        axes[0][j].set_title(cfg)
        axes[0][j].set_ylabel("每步耗时 (µs)" if zh else "time per step (µs)")
        axes[1][j].set_ylabel("带宽 GB/s（读+写）" if zh else "bandwidth GB/s (read+write)")
        ns = sorted({r["N"] for r in res if r["shape"] == s})
        for ax in (axes[0][j], axes[1][j]):
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xticks(ns)
            ax.set_xticklabels([str(n) for n in ns])
            ax.set_xlabel("克隆的 block 对数 N" if zh else "cloned block pairs N")
            ax.grid(True, which="both", alpha=0.3)
        axes[1][j].set_ylim(top=roof * 2.5)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=3, fontsize=13, frameon=False)
    m = data["meta"]
    fig.suptitle(f"COW block clone — {m['gpu']}, torch {m['torch']}, triton {m['triton']}, {m['date']}",
                 fontsize=15)
    fig.tight_layout(rect=(0, 0.08, 1, 0.96))
    return save_png(fig, out_png)


# ─────────────────────────────── main ───────────────────────────────
def parse_args(argv):
    p = _Parser(description="Triton COW block 克隆：校验、计时、画图")
    p.add_argument("--plot-only", action="store_true", help="只用保存的 JSON 重画图（不需要 torch / GPU）")
    p.add_argument("--figures", default=DEFAULT_FIGURES, help="图的输出目录")
    p.add_argument("--json", default=DEFAULT_JSON, help="结果 JSON 的路径（GPU 上写，--plot-only 时读）")
    p.add_argument("--reps", type=int, default=15, help="计时重复次数（取中位数）")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-plot", action="store_true", help="GPU 上计时后不画图")
    a = p.parse_args(argv)
    if a.reps < 3:
        raise CliError(f"--reps 至少为 3，收到 {a.reps}")
    return a


def run(args):
    if args.plot_only:
        if not os.path.exists(args.json):
            raise CliError(f"找不到结果 JSON：{args.json}（先在 GPU 上运行本脚本）")
        try:
            data = load_json(args.json)
        except ValueError as exc:
            raise CliError(f"{args.json} 不是合法的 JSON：{exc}") from exc
        out = plot_from_json(data, os.path.join(args.figures, FIGURE_NAME))
        print_text(f"已从 {os.path.relpath(args.json)} 重画：{os.path.relpath(out)}")
        return 0
    try:
        kvc = _import_torch()
    except ImportError as exc:
        print_text(f"本脚本需要 torch 和 triton（pip install -r requirements-triton.txt）：{exc}")
        print_text("CPU 讲义环境里可以用 --plot-only 从保存的 JSON 重画图。")
        return 0
    on_gpu = torch.cuda.is_available() and kvc.HAVE_TRITON
    val = demo_1(on_gpu, seed=args.seed)
    if not val["all_ok"]:
        print_text("校验失败：不计时。")
        return 1
    if not on_gpu:
        print_text("\n计时需要 NVIDIA GPU（CUDA + triton）：这里只在 Triton 解释器里校验了正确性。"
                   f"已保存的 H200 结果可用 --plot-only 重画（{os.path.relpath(args.json)}）。")
        demo_4(False, saved_json=args.json)
        return 0
    results, tuning = demo_2(reps=args.reps, seed=args.seed)
    import triton
    data = {
        "meta": {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
                 "triton": triton.__version__, "cuda": torch.version.cuda,
                 "python": platform.python_version(),
                 "date": datetime.date.today().isoformat(),
                 "timing": f"预热 5 次；每次先不计时调用 1 次，再用 CUDA event 包住 inner 次连续调用（≥ 约 5 ms），"
                           f"{args.reps} 次取中位数；"
                           "µs 为每步耗时（含主机开销），GB/s = 克隆读+写的字节数 / 时间",
                 "methods": METHOD_NAMES,
                 "launches_per_step": {"A": "L × (2 次 H2D 建下标 + 4 个 kernel)", "B": "L × (2 次 H2D + 1 个 kernel)",
                                       "B_kernel": "L 个 kernel（下标事先已在 GPU）",
                                       "C": f"1 个 kernel；N ≤ {_kvc.ZERO_COPY_MAX_N} 时 kernel 直接读锁页内存里的下标，"
                                            "更大时先 1 次 H2D（环形锁页缓冲区）",
                                       "C_kernel": "1 个 kernel（下标事先已在 GPU）", "D": "1 次 D2D 拷贝"}},
        "shapes": SHAPES, "Ns": list(NS), "anchors": ANCHORS,
        "validation": val, "tuning_C": tuning, "results": results,
    }
    data["ratios"] = compute_ratios(results)
    demo_3(data)
    data["decode_share"] = demo_4(True, reps=args.reps, results=results, seed=args.seed)["decode_share"]
    save_json(data, args.json)
    print_text(f"\n结果已写入 {args.json}")
    if not args.no_plot:
        out = plot_from_json(data, os.path.join(args.figures, FIGURE_NAME))
        print_text(f"图已写入 {out}")
    return 0


def main(argv=None):
    try:
        args = parse_args(argv)
        return run(args)
    except CliError as exc:
        print(f"06_triton_cow_clone.py: 错误：{exc}", file=sys.stderr)
        raise SystemExit(2)


if __name__ == "__main__":
    sys.exit(main())
