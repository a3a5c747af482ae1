"""06 的校验与测量：一步 COW 写入的逐位校验（CPU 解释器或 GPU），以及 GPU 上的每步耗时（CUDA event）、
CUDA graph 捕获、A/B/C/D 计时、tile 扫描、克隆占一步 decode 多少。返回的都是普通的 dict / list，
06 打印它们、存进 JSON。

    A  每层新建 long 下标张量 + index_select + index_copy_（博客里的"之前"）
    B  每层新建 int32 下标张量 + 一次 Triton launch（博客里的"之后"）
    C  所有层 × K/V 一次 launch（clone_kernel.kv_clone_blocks_all）：N ≤ 8 时块号是 kernel 参数，否则下标经锁页
       缓冲区一次上传（N 大时在旁路 stream 上传，与上一步的拷贝重叠）
    D  同样字节数的一次连续 device-to-device 拷贝（带宽上限）
    图  捕获进 CUDA graph 后 replay（H2D 拷贝也在 graph 里）；C图 每步还包括主机上检查下标、写锁页内存
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
from lab_common.transformer_lab import TINY, config_like, init_params
from gpu.paged_decode import PagedKVCache, decode_step, torch_params
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


def validation_cases(shapes, on_gpu):
    """CPU（解释器）：小形状、tile 调到 32，让一块跨几个 tile、最后一个 tile 不满；GPU 再加两种真实形状。
    N 取 0、1、5 和 ARG_PAIRS、ARG_PAIRS + 1（块号当参数传 / 上传下标的分界两侧）。"""
    k = kvc.ARG_PAIRS                       # N = k 走标量参数，N = k + 1 起上传下标：两边都查
    cases = []
    for i, dt in enumerate(("float16", "bfloat16", "float32")):
        for n in (0, 1, 5, k, k + 1):
            cases.append((dt, 2, 3, 7, 5, n, 32 * (1 + i % 2)))
    if on_gpu:                               # 再加 N ≥ OVERLAP_MIN_PAIRS：旁路 stream 上传
        for name, s in shapes.items():
            for n in (1, k, k + 1, 150, kvc.OVERLAP_MIN_PAIRS):
                cases.append((s["dtype"], s["n_layers"], s["n_heads"], s["head_dim"], s["block_size"], n, None))
    return cases


def time_per_step(fn, reps, min_ms=5.0):
    """稳态每步 µs 的 reps 个样本：预热后，每个样本先不计时调 1 次（GPU 上先排着活），
    再用 CUDA event 包住 inner 次连续调用（合计 ≥ min_ms）。主机比 GPU 慢时，GPU 的空等也算进去。"""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    t = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    inner = max(1, min(200, math.ceil(min_ms / max(1e-3, (time.perf_counter() - t) * 1e3))))
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    out = []
    for _ in range(reps):
        fn()
        start.record()
        for _ in range(inner):
            fn()
        end.record()
        end.synchronize()
        out.append(start.elapsed_time(end) * 1e3 / inner)
    return out


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
        for i in range(len(self.clone.host)):
            self.graphs.append(torch.cuda.CUDAGraph())
            with torch.cuda.graph(self.graphs[i]):          # 只记录、不执行；kernel 已由 warmup 编译好
                self.clone.launch(kv, i, n)

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


def rounds_of(fns, reps, rounds):
    """每个函数测 rounds 轮（轮内按顺序轮流测，各取 reps 个样本的中位数）：{名字: [每轮的 µs]}。"""
    out = {k: [] for k in fns}
    for _ in range(rounds):
        for k, fn in fns.items():
            out[k].append(statistics.median(time_per_step(fn, reps)))
    return out


def sweep_tiles(kv, src_dev, dst_dev, reps, tiles=(1024, 2048, 4096), warps=(1, 2, 4)):
    """在最大的 N 上扫 (tile, num_warps)，只量 kernel（下标已在 GPU 上、按 dst 排好）。返回按耗时排好的行。"""
    rows = []
    for t in tiles:
        for w in warps:
            us = statistics.median(time_per_step(lambda: kvc.launch_all_kernel(kv, src_dev, dst_dev, t, w), reps))
            rows.append({"tile": t, "num_warps": w, "us": us})
    return sorted(rows, key=lambda r: r["us"])


# 一次改一处：每一步在上一行（base）的基础上只动一个旋钮；只量 kernel（下标已在 GPU 上）
LADDER = (
    ("before", None, "之前：pid → (块对, 层, tile)", dict(order=0, hints=0, tile=2048, num_warps=1)),
    ("hints", "before", "+ 对齐与连续提示、去掉 mask", dict(order=0, hints=1, tile=2048, num_warps=1)),
    ("big_tiles", "hints", "+ 大 tile 多 warp（8192、8 warp）", dict(order=0, hints=1, tile=8192, num_warps=8)),
    ("evict", "hints", "+ evict_first 读写提示", dict(order=0, hints=1, evict=1, tile=2048, num_warps=1)),
    ("layer_major", "hints", "+ grid 先按 (层, K/V) 分组", dict(order=1, hints=1, tile=2048, num_warps=1)),
    ("sorted", "layer_major", "+ 块对按 dst 排序", dict(order=1, hints=1, tile=2048, num_warps=1, sort=True)),
)

if kvc.HAVE_TRITON:
    @kvc.triton.jit
    def _contiguous_copy_kernel(a_ptr, b_ptr, BLOCK: kvc.tl.constexpr):
        """对照：同样写法的 Triton 拷贝，但源和目的各是一整段连续内存。"""
        off = kvc.tl.program_id(0).to(kvc.tl.int64) * BLOCK + kvc.tl.arange(0, BLOCK)
        kvc.tl.store(b_ptr + off, kvc.tl.load(a_ptr + off))


def ladder(kv, src, dst, flat, half, reps, rounds, best):
    """N 最大时逐步改 kernel，每步的 C/D（D 在同几轮里量）；再加几条对照：同一个 kernel 拷连续的块、
    Triton 拷一整段连续内存、torch index_select 把散的块收拢到一段连续内存（读散、写连续）。"""
    dev = kv.device
    n = len(src)
    order = sorted(range(n), key=lambda j: dst[j])
    plain = [torch.tensor(x, dtype=torch.int32, device=dev) for x in (src, dst)]
    by_dst = [torch.tensor([x[j] for j in order], dtype=torch.int32, device=dev) for x in (src, dst)]
    seq = torch.arange(2 * n, dtype=torch.int32, device=dev)
    L, _, nb, H, BS, D = kv.shape
    kvg = kv.view(2 * L, nb, H * BS * D)
    gathered = torch.empty((2 * L, n, H * BS * D), dtype=kv.dtype, device=dev)
    src_long = plain[0].long()
    fns = {"D": lambda: flat[half:2 * half].copy_(flat[:half])}
    for key, _, _, kw in LADDER:
        kw = dict(kw)
        s, d = plain
        if kw.pop("sort", False):
            s, d = by_dst
        fns[key] = (lambda s=s, d=d, kw=kw: kvc.launch_all_kernel(kv, s, d, **kw))
    final = dict(tile=best["tile"], num_warps=best["num_warps"])
    fns["final"] = lambda: kvc.launch_all_kernel(kv, *by_dst, **final)
    fns["contiguous_blocks"] = lambda: kvc.launch_all_kernel(kv, seq[:n], seq[n:], **final)
    fns["triton_contiguous"] = lambda: _contiguous_copy_kernel[(half // 1024,)](flat, flat[half:], BLOCK=1024,
                                                                               num_warps=1)
    fns["torch_gather"] = lambda: torch.index_select(kvg, 1, src_long, out=gathered)
    dst_long = plain[1].long()
    for key in [k for k, *_ in LADDER] + ["final"]:        # 每一步都先逐位核对一次：毒化 dst → 拷 → 比较
        ref = kvg[:, src_long].clone()
        kvg[:, dst_long] = 0
        fns[key]()
        assert torch.equal(kvg[:, dst_long].view(torch.uint8), ref.view(torch.uint8)), f"{key}：结果不对"
    times = rounds_of(fns, reps, rounds)
    d_us = statistics.median(times["D"])
    labels = {k: (base, label) for k, base, label, _ in LADDER}
    labels.update(final=("sorted", f"+ 扫出的 tile {best['tile']}、{best['num_warps']} warp（C 用的配置）"),
                  contiguous_blocks=(None, "对照：同一个 kernel 拷连续的块"),
                  triton_contiguous=(None, "对照：Triton 拷一整段连续内存"),
                  torch_gather=(None, "对照：torch index_select 收拢散的块"))
    rows = []
    for key, (base, label) in labels.items():
        us = statistics.median(times[key])
        rows.append({"key": key, "base": base, "label": label, "us": us, "rounds_us": times[key],
                     "c_over_d": d_us / us})
    return {"D_us": d_us, "D_rounds_us": times["D"], "steps": rows}


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
            "launch": clock(lambda: clone.launch_pairs(kv, src, dst)),
            "launch_jit": clock(lambda: kvc.launch_all_kernel(kv, clone.dev_src[0], clone.dev_dst[0], n=len(src),
                                                              pairs=(src, dst))),
            "D": clock(d_fn),
            "C": clock(lambda: kvc.kv_clone_blocks_all(kv, src, dst, True))}


def bench_shape(name, shape, ns, reps, rounds, seed=0):
    """一种形状上，A/B/C/D 与 A图/C图/D图 在每个 N 下的每步 µs（rounds 轮）；外加 tile 扫描、逐步改 kernel 的
    C/D、主机开销拆分。"""
    dev = torch.device("cuda")
    L, H, BS, D = shape["n_layers"], shape["n_heads"], shape["block_size"], shape["head_dim"]
    maxn = max(ns)
    kv = torch.empty((L, 2, 2 * maxn + 16, H, BS, D), dtype=DTYPES[shape["dtype"]], device=dev)
    kv.view(torch.uint8).random_(0, 64)                 # 随机但有限的数（不会出现 NaN）
    flat = torch.empty(2 * bytes_per_step(shape, maxn) // 2 // kv.element_size(), dtype=kv.dtype, device=dev)
    perm = torch.randperm(kv.shape[2], generator=torch.Generator().manual_seed(seed)).tolist()
    s_np, d_np = kvc.by_destination(np.array(perm[:maxn]), np.array(perm[maxn:2 * maxn]))
    big_s, big_d = (torch.tensor(x, dtype=torch.int32, device=dev) for x in (s_np, d_np))
    sweep = sweep_tiles(kv, big_s, big_d, reps)
    kvc.TILE, kvc.NUM_WARPS = sweep[0]["tile"], sweep[0]["num_warps"]
    seq = torch.arange(2 * maxn, dtype=torch.int32, device=dev)       # 连续的块：排除"块是散的"这个因素
    seq_us = statistics.median(time_per_step(lambda: kvc.launch_all_kernel(kv, seq[:maxn], seq[maxn:]), reps))
    half_max = bytes_per_step(shape, maxn) // 2 // kv.element_size()
    steps = ladder(kv, perm[:maxn], perm[maxn:2 * maxn], flat, half_max, reps, rounds, sweep[0])
    rows = []
    for n in ns:
        src, dst = perm[:n], perm[n:2 * n]              # 源块各不相同：读真的来自 HBM
        half = bytes_per_step(shape, n) // 2 // kv.element_size()
        fns = {"A": lambda: clone_a(kv, src, dst), "B": lambda: clone_b(kv, src, dst),
               "C": lambda: kvc.kv_clone_blocks_all(kv, src, dst, True),
               "D": lambda: flat[half:2 * half].copy_(flat[:half])}
        graphs = {"A图": capture(graphable_a(kv, src, dst))[0], "D图": capture(fns["D"])[0]}
        fns.update({m: g.replay for m, g in graphs.items()})
        cg = CloneGraph(kv, n)
        fns["C图"] = lambda: cg(src, dst)
        for m, us in rounds_of(fns, reps, rounds).items():
            rows.append({"shape": name, "N": n, "method": m, "us": statistics.median(us), "rounds_us": us,
                         "bytes": 2 * half * kv.element_size(),
                         "GBps": 2 * half * kv.element_size() / statistics.median(us) / 1e3})
        ref = kv.index_select(2, torch.tensor(src, device=dev))   # 计时之后再确认一次：C 的结果逐位正确
        kv.view(torch.uint8)[:, :, dst] = 0xFF
        kvc.kv_clone_blocks_all(kv, src, dst, True)
        torch.cuda.synchronize()
        ok = torch.equal(kv.index_select(2, torch.tensor(dst, device=dev)).view(torch.uint8), ref.view(torch.uint8))
        assert ok, f"{name} N={n}：计时后的校验失败"
        graphs = cg = None
    one = bytes_per_step(shape, 1) // 2 // kv.element_size()
    host = host_breakdown(kv, perm[:1], perm[1:2], lambda: flat[one:2 * one].copy_(flat[:one]))
    kv = flat = None
    torch.cuda.empty_cache()
    return rows, {"sweep": sweep, "best": sweep[0], "sequential_blocks_us": seq_us, "host_us_N1": host,
                  "ladder": steps}


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
                per_round[m].append(statistics.median(time_per_step(g.replay, reps)))
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


def measure_all(shapes, ns, reps, batches, prefix_len, rounds, seed, bench_rounds=3):
    """06 的演示 2–4 要的全部数字（只在 CUDA 上）：每种形状的 A/B/C/D 计时，再是克隆占一步 decode 的多少。"""
    results, tuning = [], {}
    for name, shape in shapes.items():
        rows, tuning[name] = bench_shape(name, shape, ns, reps, bench_rounds, seed)
        results += rows
    kvc.TILE, kvc.NUM_WARPS = tuning["gpt2-small"]["best"]["tile"], tuning["gpt2-small"]["best"]["num_warps"]
    s = shapes["gpt2-small"]     # 模型：transformer_lab 的结构，尺寸取 GPT-2 small（KV 形状与这一种相同）
    cfg = config_like(TINY, vocab=50257, d_model=s["n_heads"] * s["head_dim"], n_layers=s["n_layers"],
                      n_heads=s["n_heads"], n_kv_heads=s["n_heads"], d_ff=2048, max_seq=1024)
    rows = decode_share(cfg, batches, prefix_len, s["block_size"], reps, rounds, seed)
    meta = dict(gpu=torch.cuda.get_device_name(), torch=torch.__version__, triton=kvc.triton.__version__,
                cuda=torch.version.cuda, python=platform.python_version(), date=datetime.date.today().isoformat(),
                arg_pairs=kvc.ARG_PAIRS, overlap_min_pairs=kvc.OVERLAP_MIN_PAIRS)
    return dict(meta=meta, shapes=shapes, Ns=list(ns), reps=reps, rounds=bench_rounds, results=results, tuning=tuning,
                decode=dict(model=dict(vars(cfg)), prefix_len=prefix_len, rounds=rounds, rows=rows))
