"""06 的校验与测量：一步 COW 写入的逐位校验（CPU 解释器或 GPU），以及 GPU 上的每步耗时、CUDA graph、逐步改
C 的 C/D、克隆占一步 decode 多少。返回的都是普通的 dict / list，06 打印它们、存进 JSON。

    A  每层新建 long 下标张量 + index_select + index_copy_（博客里的"之前"）
    B  每层新建 int32 下标张量 + 一次 Triton launch（博客里的"之后"）
    C  所有层 × K/V 一次 launch（clone_kernel.kv_clone_blocks_all）：下标怎么交给 kernel 按 N 选（见 AllLayersClone）
    D  同样字节数的一次连续 device-to-device 拷贝（带宽上限）
    E  vLLM copy_blocks 的设计：grid = (层数, N)，一个 program 拷一对块的 K 和 V（一层），主机路径与 C 相同
    图  捕获进 CUDA graph 后 replay（H2D 拷贝也在 graph 里）；C图 每步还包括主机上检查下标、写锁页内存
计时：CUDA event 包住连续 inner 次调用（合计 ≥ 5 ms）算一个样本；一轮里各做法轮流、每个做法连着测 reps 个样本取
中位数；测 ROUNDS 轮，报告各轮中位数的中位数，轮与轮的极差 / 中位数就是波动。
"只量 kernel"的行：K 次 launch 捕获进一个 CUDA graph，replay 一次的时间 / K（没有主机开销和 launch 间隙）。
"""
import datetime
import math
import platform
import statistics
import time

import numpy as np
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from gpu import clone_kernel as kvc
from gpu.paged_decode import PagedKVCache, decode_step, torch_params
from lab_common.transformer_lab import TINY, config_like, init_params
from paged_kv import n_blocks

DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32}


def check_cow_write(dtype, L, H, D, BS, n_cow, device, seed, tile=None):
    """一步写入里混着 n_cow 个要 COW 的子序列、一个独占最后一块的、一个最后一块刚写满的序列。
    空闲块先全写成 0xFF；写完后整个缓存与"按预期重放"逐位比较，再查块对、克隆次数和 ref_count。"""
    g = torch.Generator().manual_seed(seed)
    cache = PagedKVCache(L, H, D, BS, 3 * n_cow + 12, dtype, device, use_kernel=True)

    def rnd(t):
        return torch.randn((L, t, H, D), generator=g).to(device)
    parent, own, full = cache.new_sequence(), cache.new_sequence(), cache.new_sequence()
    for seq, t in ((parent, BS + 1 + seed % (BS - 1)), (own, BS + 1), (full, 2 * BS)):
        cache.prefill(seq, rnd(t), rnd(t))
    kids = [parent.fork() for _ in range(n_cow)]
    cache.kv.view(torch.uint8)[:, :, list(cache.pool.free_blocks)] = 0xFF
    before = cache.kv.clone()
    seqs = kids + [own, full]
    k, v = rnd(len(seqs)), rnd(len(seqs))
    old, kvc.TILE = kvc.TILE, tile or kvc.TILE          # tile 调小：一块跨几个 tile、最后一个不满
    try:
        pairs = cache.write(seqs, k, v)
    finally:
        kvc.TILE = old
    exp = before.clone()
    for s, d in pairs:
        exp[:, :, d] = before[:, :, s]
    for i, seq in enumerate(seqs):
        exp[:, 0, seq.blocks[-1], :, (seq.length - 1) % BS] = k[:, i].to(dtype)
        exp[:, 1, seq.blocks[-1], :, (seq.length - 1) % BS] = v[:, i].to(dtype)
    checks = [torch.equal(cache.kv.view(torch.uint8), exp.view(torch.uint8)),
              [s for s, _ in pairs] == [parent.blocks[-1]] * n_cow, cache.clone_calls == int(n_cow > 0),
              int(cache.pool.ref_count[parent.blocks[-1]]) == 1, len({d for _, d in pairs}) == n_cow]
    return all(checks), len(checks)


def check_copy_blocks(dtype, L, H, D, BS, n, device, seed, block=None):
    """E（vLLM 式的 kernel）一步克隆 n 个块对：目的块先写成 0xFF，拷完后整个缓存与按预期重放的结果逐位比较。"""
    g = torch.Generator().manual_seed(seed)
    kv = torch.randn((L, 2, 2 * n + 3, H, BS, D), generator=g).to(dtype).to(device)
    perm = torch.randperm(kv.shape[2], generator=g).tolist()
    src, dst = perm[:n], perm[n:2 * n]
    kv.view(torch.uint8)[:, :, dst] = 0xFF
    exp = kv.clone()
    exp[:, :, dst] = kv[:, :, src]
    old, kvc.E_BLOCK = kvc.E_BLOCK, block or kvc.E_BLOCK       # 调小：一块分几段搬、最后一段不满
    try:
        kvc.kv_clone_blocks_all(kv, src, dst, True, design="E")
    finally:
        kvc.E_BLOCK = old
    return torch.equal(kv.view(torch.uint8), exp.view(torch.uint8)), 1


def validation_cases(shapes, on_gpu):
    """[(做法, dtype, L, H, D, BS, N, tile)]。CPU（解释器）：小形状、tile 调到 32，让一块跨几个 tile、最后一个不满；
    GPU 再加两种真实形状。N 取在下标交给 kernel 的每条路径的分界两侧（块号当参数 / 上传 / 零拷贝 / 旁路上传）；
    零拷贝的分界（N 大，解释器里慢）只查 float16、一块一个 tile。"""
    k, z, o = kvc.ARG_PAIRS, kvc.ZERO_COPY_MIN_PAIRS, kvc.OVERLAP_MIN_PAIRS
    cases = []
    for i, dt in enumerate(("float16", "bfloat16", "float32")):
        tile = 32 * (1 + i % 2)
        cases += [("C", dt, 2, 3, 7, 5, n, tile) for n in (0, 1, 5, k, k + 1)]
        cases += [("E", dt, 2, 3, 7, 5, n, tile) for n in (1, k + 1)]
    cases += [("C", "float16", 2, 3, 7, 5, n, 128) for n in (z - 1, z)] + [("E", "float16", 2, 3, 7, 5, z, 128)]
    if on_gpu:
        for name, s in shapes.items():
            dims = (s["dtype"], s["n_layers"], s["n_heads"], s["head_dim"], s["block_size"])
            cases += [("C", *dims, n, None) for n in (1, k, k + 1, z - 1, z, o - 1, o)]
            cases += [("E", *dims, n, None) for n in (1, z, o)]
    return cases


def check_case(case, device, seed):
    """一个校验用例 → (逐位正确, 检查项数)。C 走一步真实的 COW 写入（check_cow_write），E 直接克隆。"""
    design, dt, L, H, D, BS, n, tile = case
    if design == "E":
        return check_copy_blocks(getattr(torch, dt), L, H, D, BS, max(n, 1), device, seed, tile)
    return check_cow_write(getattr(torch, dt), L, H, D, BS, n, device, seed, tile)


def _inner(fn, min_ms):
    """预热，再估一次调用的时间：一个样本要连续调几次才 ≥ min_ms。"""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    t = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    return max(1, min(400, math.ceil(min_ms / max(1e-3, (time.perf_counter() - t) * 1e3))))


def time_rounds(fns, reps, rounds, min_ms=5.0):
    """fns = {名字: (fn, 每次调用算几步)} → {名字: [每轮的中位数 µs/步]}。一个样本：先不计时调 1 次（GPU 上先排着活），
    再用 CUDA event 包住 inner 次连续调用（合计 ≥ min_ms）；一轮里各做法轮流测，每个做法连着测 reps 个样本。"""
    inner = {k: _inner(fn, min_ms) for k, (fn, _) in fns.items()}
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    out = {k: [] for k in fns}
    for _ in range(rounds):
        for k, (fn, per) in fns.items():
            samples = []
            for _ in range(reps):
                fn()
                start.record()
                for _ in range(inner[k]):
                    fn()
                end.record()
                end.synchronize()
                samples.append(start.elapsed_time(end) * 1e3 / inner[k] / per)
            out[k].append(statistics.median(samples))
    return out


def kernel_graph(fn, k=None):
    """只量 kernel：fn（一次 launch，下标已在显存）连续 k 次捕获进一个 CUDA graph。返回 (graph.replay, k)。"""
    fn()
    torch.cuda.synchronize()
    if k is None:
        k = max(4, min(200, 2 * _inner(fn, 1.0)))
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(k):
            fn()
    g.keepalive = fn          # graph 只记住指针：fn 闭包里的张量（下标、地址表）必须和 graph 活得一样久
    return g.replay, k


def capture(fn):
    """fn 先跑一次（编译 kernel、分配好张量），再捕获进 CUDA graph。返回 (graph, fn 在 graph 里的返回值)。"""
    fn()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = fn()
    g.keepalive = fn          # graph 只记住指针：fn 闭包里的张量（下标、锁页内存）必须和 graph 活得一样久
    return g, out


def clone_a(kv, src, dst):
    """方法 A（博客的"之前"）：每层从 python 列表新建 long 下标张量，再 index_select + index_copy_。"""
    for l in range(kv.shape[0]):
        s = torch.tensor(src, device=kv.device)
        d = torch.tensor(dst, device=kv.device)
        for j in (0, 1):
            kv[l, j].index_copy_(0, d, kv[l, j].index_select(0, s))


def clone_b(kv, src, dst):
    """方法 B（博客的"之后"）：每层新建 int32 下标张量，再一次 Triton launch（K/V 一起）。"""
    for l in range(kv.shape[0]):
        kvc.launch_layer_kernel(kv[l, 0], kv[l, 1], torch.tensor(src, dtype=torch.int32, device=kv.device),
                                torch.tensor(dst, dtype=torch.int32, device=kv.device))


def graphable_a(kv, src, dst):
    """A 的 graph 版：每层两次 H2D（从锁页内存，像 torch.tensor(...) 那样每层拷一次）+ 4 个 kernel。"""
    hs, hd = torch.tensor(src).pin_memory(), torch.tensor(dst).pin_memory()
    ds = torch.empty((kv.shape[0], len(src)), dtype=torch.long, device=kv.device)
    dd = torch.empty_like(ds)

    def step():
        for l in range(kv.shape[0]):
            ds[l].copy_(hs, non_blocking=True)
            dd[l].copy_(hd, non_blocking=True)
            for j in (0, 1):
                kv[l, j].index_copy_(0, dd[l], kv[l, j].index_select(0, ds[l]))
    return step


def graphable_c(kv, src, dst):
    """C 的 graph 版：下标在锁页内存里，graph 里是一次 H2D + 一次 launch。"""
    host = torch.tensor(src + dst, dtype=torch.int32).pin_memory()
    dev = torch.empty_like(host, device=kv.device)

    def step():
        dev.copy_(host, non_blocking=True)
        kvc.launch_all_kernel(kv, dev[:len(src)], dev[len(src):])
    return step


class CloneGraph:
    """把"上传下标 + 一次 launch"捕获进 CUDA graph（N 固定），每步只剩检查、写锁页内存、一次 replay（真实引擎
    捕获整步 decode）。graph 里的 H2D 在 replay 时才读锁页内存：每一份锁页内存各捕获一个 graph，轮流 replay。"""

    def __init__(self, kv, n):
        self.kv, self.n, self.clone, self.graphs = kv, n, kvc.AllLayersClone(kv, n), []
        self.mode = "host" if kvc.mode_for(n) == "host" else "upload"     # graph 里不换 stream、不换标量参数
        for i in range(len(self.clone.host)):
            self.graphs.append(torch.cuda.CUDAGraph())
            with torch.cuda.graph(self.graphs[i]):          # 只记录、不执行；kernel 已由 warmup 编译好
                self.clone.launch(kv, i, n, self.mode)

    def __call__(self, src_block_idx, dst_block_idx):
        src, dst = kvc.check_clone_indices(src_block_idx, dst_block_idx, self.kv.shape[2])
        if len(src) != self.n:
            raise ValueError(f"这个 graph 是按 N={self.n} 捕获的，收到 {len(src)} 个块对")
        i = self.clone.write(src, dst)
        self.graphs[i].replay()
        self.clone.done(i)


def bytes_per_step(shape, n):
    """一步克隆读 + 写的字节数：2 × N × 层数 × 2(K,V) × H×BS×D × 元素字节。"""
    el = torch.empty(0, dtype=DTYPES[shape["dtype"]]).element_size()
    return 2 * n * shape["n_layers"] * 2 * shape["n_heads"] * shape["block_size"] * shape["head_dim"] * el


# 逐步改 C，每步只动一处（都是整步计时，和演示 2 的 C 一样）；改动的是 clone_kernel 顶部的设置
LADDER = (
    ("before", None, "之前：2048 元素 1 warp，上传",
     dict(TILE=2048, NUM_WARPS=1, ZERO_COPY_MIN_PAIRS=512)),
    ("tile", "before", "+ 1024 元素 2 warp", dict(TILE=1024, NUM_WARPS=2, ZERO_COPY_MIN_PAIRS=512)),
    ("zero_copy", "tile", "+ N ≥ 65 零拷贝（= C）", dict(TILE=1024, NUM_WARPS=2, ZERO_COPY_MIN_PAIRS=65)),
)
CONTROLS = (    # 只量 kernel（下标已在显存，CUDA graph 里连续 launch）；E 的两行：vLLM 1024 线程 / 本讲调过的配置
    ("kernel", "对照：C 只量 kernel"),
    ("contiguous", "对照：C 拷连续的块"),
    ("E_vllm", "E：vLLM 的线程形状"),
    ("E", f"E：{kvc.E_BLOCK} 元素 {kvc.E_WARPS} warp"),
)


def with_settings(settings, fn):
    """在 clone_kernel 的几个设置临时换成 settings 时调用 fn（每换一组设置，克隆对象重建、kernel 重新编译）。"""
    old = {k: getattr(kvc, k) for k in settings}

    def call():
        for k, v in settings.items():
            setattr(kvc, k, v)
        try:
            fn()
        finally:
            for k, v in old.items():
                setattr(kvc, k, v)
    return call


def ladder_fns(kv, src, dst):
    """演示 3 的每一行：{key: (fn, 每次调用几步)}。"""
    n, dev = len(src), kv.device
    fns = {key: (with_settings(kw, lambda: kvc.kv_clone_blocks_all(kv, src, dst, True)), 1)
           for key, _, _, kw in LADDER}
    order = sorted(range(n), key=lambda j: dst[j])
    s_dev, d_dev = (torch.tensor([x[j] for j in order], dtype=torch.int32, device=dev) for x in (src, dst))
    seq = torch.arange(2 * n, dtype=torch.int32, device=dev)
    ptrs = kvc.layer_pointers(kv)
    fns["kernel"] = kernel_graph(lambda: kvc.launch_all_kernel(kv, s_dev, d_dev))
    fns["contiguous"] = kernel_graph(lambda: kvc.launch_all_kernel(kv, seq[:n], seq[n:]))
    fns["E_vllm"] = kernel_graph(lambda: kvc.launch_copy_blocks(kv, ptrs, s_dev, d_dev, block=1024, num_warps=32))
    fns["E"] = kernel_graph(lambda: kvc.launch_copy_blocks(kv, ptrs, s_dev, d_dev))
    return fns


def host_breakdown(kv, src, dst, d_fn, iters=400, chunks=9):
    """C 与 D 在 N 很小时每步的主机时间（µs，perf_counter；GPU 跟得上，所以就是主机的时间）：C 拆成检查下标、
    launch（块号当标量参数，直接调 Triton 的 C 启动函数）；对照：走 kernel[grid](...) 通用路径的 launch，以及
    N > 8 时才用的"写锁页内存 + H2D 上传下标"（N ≤ 8 时省掉的那一步）。
    每项 chunks 段、每段 iters 次调用，取各段平均的中位数：主机偶尔整段变慢，一个总平均会被它带偏。"""
    def clock(fn):
        for _ in range(100):
            fn()
        out = []
        for _ in range(chunks):
            torch.cuda.synchronize()
            t = time.perf_counter()
            for _ in range(iters):
                fn()
            out.append((time.perf_counter() - t) / iters * 1e6)
        torch.cuda.synchronize()
        return statistics.median(out)
    clone = kvc.AllLayersClone(kv, len(src))

    def upload():
        i = clone.write(src, dst)
        clone.dev[i].copy_(clone.host[i], non_blocking=True)
        clone.done(i)
    return {"check": clock(lambda: kvc.check_clone_indices(src, dst, kv.shape[2])),
            "upload": clock(upload),
            "launch": clock(lambda: clone(kv, src, dst)),
            "launch_jit": clock(lambda: kvc.launch_all_kernel(kv, *clone.rows["dev"][0], n=len(src),
                                                              pairs=(src, dst))),
            "D": clock(d_fn),
            "C": clock(lambda: kvc.kv_clone_blocks_all(kv, src, dst, True))}


def check_result(kv, src, dst, fn, what):
    """fn 拷完之后目的块与源块逐位相同（目的块先写成 0xFF）。"""
    ref = kv.index_select(2, torch.tensor(src, device=kv.device))
    idx = torch.tensor(dst, device=kv.device)
    for layer in kv:                # 逐层写 0xFF（每次 < 2^31 个元素）：对整块缓存一次 index_put，H200 上报过下标越界
        layer.view(torch.uint8).index_fill_(1, idx, 0xFF)
    fn()
    torch.cuda.synchronize()
    got = kv.index_select(2, torch.tensor(dst, device=kv.device))
    assert torch.equal(got.view(torch.uint8), ref.view(torch.uint8)), f"{what}：结果不对"


def bench_shape(name, shape, ns, reps, rounds, ladder_ns, seed=0):
    """一种形状上，每个 N 的 A/B/C/D/E 与 A图/C图/D图（每步 µs，rounds 轮）；ladder_ns 里的 N 再测逐步改 C 的
    每一行；外加 N=1 时主机开销的拆分。"""
    dev = torch.device("cuda")
    L, H, BS, D = shape["n_layers"], shape["n_heads"], shape["block_size"], shape["head_dim"]
    maxn = max(ns)
    kv = torch.empty((L, 2, 2 * maxn + 16, H, BS, D), dtype=DTYPES[shape["dtype"]], device=dev)
    kv.view(torch.uint8).random_(0, 64)                 # 随机但有限的数（不会出现 NaN）
    flat = torch.empty(2 * bytes_per_step(shape, maxn) // 2 // kv.element_size(), dtype=kv.dtype, device=dev)
    perm = torch.randperm(kv.shape[2], generator=torch.Generator().manual_seed(seed)).tolist()
    rows, steps = [], []
    for n in ns:
        src, dst = perm[:n], perm[n:2 * n]              # 源块各不相同：读真的来自 HBM
        half = bytes_per_step(shape, n) // 2 // kv.element_size()
        fns = {"A": lambda: clone_a(kv, src, dst), "B": lambda: clone_b(kv, src, dst),
               "C": lambda: kvc.kv_clone_blocks_all(kv, src, dst, True),
               "D": lambda: flat[half:2 * half].copy_(flat[:half]),
               "E": lambda: kvc.kv_clone_blocks_all(kv, src, dst, True, design="E")}
        for m in ("A", "B", "C", "E"):
            check_result(kv, src, dst, fns[m], f"{name} N={n} {m}")
        timed = {m: (fn, 1) for m, fn in fns.items()}
        graphs = {"A图": capture(graphable_a(kv, src, dst))[0], "D图": capture(fns["D"])[0]}
        timed.update({m: (g.replay, 1) for m, g in graphs.items()})
        cg = CloneGraph(kv, n)
        timed["C图"] = (lambda: cg(src, dst), 1)
        if n in ladder_ns:
            extra = ladder_fns(kv, src, dst)
            for key, (fn, _) in extra.items():
                if key in dict((k, 1) for k, *_ in LADDER):
                    check_result(kv, src, dst, fn, f"{name} N={n} {key}")
            timed.update({("ladder", k): v for k, v in extra.items()})
        for m, us in time_rounds(timed, reps, rounds).items():
            med = statistics.median(us)
            if isinstance(m, tuple):
                steps.append({"N": n, "key": m[1], "us": med, "rounds_us": us})
                continue
            rows.append({"shape": name, "N": n, "method": m, "us": med, "rounds_us": us,
                         "bytes": 2 * half * kv.element_size(), "GBps": 2 * half * kv.element_size() / med / 1e3})
        check_result(kv, src, dst, fns["C"], f"{name} N={n} 计时之后的 C")
        graphs = cg = timed = None
    d_us = {r["N"]: r["us"] for r in rows if r["method"] == "D"}
    for r in steps:
        r["c_over_d"] = d_us[r["N"]] / r["us"]
    one = bytes_per_step(shape, 1) // 2 // kv.element_size()
    host = host_breakdown(kv, perm[:1], perm[1:2], lambda: flat[one:2 * one].copy_(flat[:one]))
    kv = flat = None
    torch.cuda.empty_cache()
    return rows, {"host_us_N1": host, "ladder": steps}


# ─────────────────────────── 克隆占一步 decode 的多少 ───────────────────────────
def decode_case(cfg, batch, prefix_len, block_size, seed):
    """B 条序列刚命中同一个前缀条目（最后一块没写满）：fork 之后第一次写入，各 COW 一次。"""
    L, H, hd = cfg.n_layers, cfg.n_kv_heads, cfg.head_dim
    cache = PagedKVCache(L, H, hd, block_size, n_blocks(prefix_len, block_size) + batch + 1, device="cuda")
    g = torch.Generator().manual_seed(seed)
    prefix = cache.new_sequence()                         # 前缀缓存条目：它自己一直持有这些块
    cache.prefill(prefix, *(torch.randn((L, prefix_len, H, hd), generator=g) for _ in range(2)))
    kids = [prefix.fork() for _ in range(batch)]
    pairs, _, _ = cache.reserve(kids, 1)                  # 第一次写入：每条序列 COW 一次（一次调用拷完）
    for s in kids:
        s.length += 1
    return dict(cache=cache, src=[p[0] for p in pairs], dst=[p[1] for p in pairs],
                table=torch.tensor([s.blocks for s in kids], device="cuda"),
                tokens=torch.randint(0, cfg.vocab, (batch,), generator=g).cuda(), seq_len=prefix_len + 1)


def repeatable(graph, out):
    """同一个 graph 重放两次，输出是否逐位相同（检查这一步里有没有结果不确定的 kernel）。"""
    graph.replay()
    first = out.clone()
    graph.replay()
    torch.cuda.synchronize()
    return torch.equal(first.view(torch.int16), out.view(torch.int16))


def decode_share(cfg, batches, prefix_len, block_size, reps, rounds, seed=0):
    """每个 B：none / A / C 三个 graph（克隆 + 一整步 decode）轮流计时 rounds 轮；再核对三者的 logits。

    先用 torch 默认选的注意力 kernel 捕获；如果同一个 graph 重放两次 logits 都不同，再单用 cuDNN 的
    注意力后端试一次（看是不是它），然后不用 cuDNN（flash / efficient / math）重新捕获、计时；都记下来。
    """
    tp = torch_params(init_params(cfg, seed), "cuda", torch.float16)
    rows = []
    for b in batches:
        case = decode_case(cfg, b, prefix_len, block_size, seed + b)
        kv = case["cache"].kv
        clone = {"none": lambda: None, "A": graphable_a(kv, case["src"], case["dst"]),
                 "C": graphable_c(kv, case["src"], case["dst"])}

        def step_of(m):
            def step():
                clone[m]()
                return decode_step(tp, cfg, kv, case["tokens"], case["table"], case["seq_len"])
            return step
        graphs = {m: capture(step_of(m)) for m in clone}
        attn, tried = "默认", {"默认": repeatable(*graphs["none"])}
        if not tried["默认"]:
            try:                                  # 只用 cuDNN 的注意力：是不是它不确定？
                with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                    tried["只用 cuDNN"] = repeatable(*capture(step_of("none")))
            except RuntimeError:                  # 这个形状 cuDNN 不支持
                tried["只用 cuDNN"] = None
            attn = "不用 cuDNN"
            with sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]):
                graphs = {m: capture(step_of(m)) for m in clone}
            tried[attn] = repeatable(*graphs["none"])
        per_round = {m: [] for m in graphs}
        for _ in range(rounds):
            for m, (g, _) in graphs.items():
                per_round[m].append(time_rounds({m: (g.replay, 1)}, reps, 1)[m][0])
        logits, kv_after = {}, {}
        for m, (g, out) in graphs.items():
            g.replay()
            torch.cuda.synchronize()
            logits[m], kv_after[m] = out.clone(), kv.clone()
        bits = {m: x.view(torch.int16) for m, x in logits.items()}
        rows.append({"B": b, "N_pairs": len(case["src"]), "rounds_us": per_round, "attention": attn,
                     "repeatable": tried, "us": {m: statistics.median(v) for m, v in per_round.items()},
                     "logits_identical": all(torch.equal(bits["none"], bits[m]) for m in ("A", "C")),
                     "logits_max_abs_diff": max(float((logits[m].float() - logits["none"].float()).abs().max())
                                                for m in ("A", "C")),
                     "kv_identical": all(torch.equal(kv_after["none"].view(torch.int16), kv_after[m].view(torch.int16))
                                         for m in ("A", "C"))})
        graphs = case = kv = clone = None
        torch.cuda.empty_cache()
    return rows


def measure_all(shapes, ns, reps, batches, prefix_len, rounds, seed, bench_rounds=5):
    """06 的演示 2–4 要的全部数字（只在 CUDA 上）：每种形状的 A/B/C/D/E 计时、逐步改 C，再是克隆占一步 decode 的多少。"""
    results, tuning = [], {}
    ladder_ns = [n for n in ns if n >= 64]
    for name, shape in shapes.items():
        rows, tuning[name] = bench_shape(name, shape, ns, reps, bench_rounds, ladder_ns, seed)
        results += rows
    s = shapes["gpt2-small"]     # 模型：transformer_lab 的结构，尺寸取 GPT-2 small（KV 形状与这一种相同）
    cfg = config_like(TINY, vocab=50257, d_model=s["n_heads"] * s["head_dim"], n_layers=s["n_layers"],
                      n_heads=s["n_heads"], n_kv_heads=s["n_heads"], d_ff=2048, max_seq=1024)
    rows = decode_share(cfg, batches, prefix_len, s["block_size"], reps, rounds, seed)
    meta = dict(gpu=torch.cuda.get_device_name(), torch=torch.__version__, triton=kvc.triton.__version__,
                cuda=torch.version.cuda, python=platform.python_version(), date=datetime.date.today().isoformat(),
                arg_pairs=kvc.ARG_PAIRS, zero_copy_min_pairs=kvc.ZERO_COPY_MIN_PAIRS,
                overlap_min_pairs=kvc.OVERLAP_MIN_PAIRS, tile=kvc.TILE, num_warps=kvc.NUM_WARPS,
                host_tile=kvc.HOST_TILE, e_block=kvc.E_BLOCK, e_warps=kvc.E_WARPS)
    ladder = [dict(key=k, base=b, label=lab) for k, b, lab, _ in LADDER] + [dict(key=k, base=None, label=lab)
                                                                          for k, lab in CONTROLS]
    return dict(meta=meta, shapes=shapes, Ns=list(ns), reps=reps, rounds=bench_rounds, results=results,
                tuning=tuning, ladder=ladder, ladder_ns=ladder_ns,
                decode=dict(model=dict(vars(cfg)), prefix_len=prefix_len, rounds=rounds, rows=rows))
