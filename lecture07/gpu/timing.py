"""GPU 上的计时（06 演示 2–4）。做法：A 每层新建下标张量 + index_select + index_copy_、B 每层一次 Triton launch（博客的
之前、之后）；C 所有层一次 launch（Cloner），C_zero_copy / C_side 一律零拷贝 / 一律旁路上传；D 同样字节的一次连续拷贝；
E vLLM 式（主机路径同 C）；*_graph 一步捕获进 CUDA graph；C_kernel、C_contig（拷连续的块）、E_kernel、E_vllm（vLLM 的
线程形状）只量 kernel：K 次 launch 捕获进一个 graph，块号已在显存。一个样本：CUDA event 包住连续 ≥ MIN_MS 的调用；一轮
里各做法轮流，每个连着测 reps 个样本取中位数；报告 rounds 轮中位数的中位数。计时时关掉垃圾回收、主线程钉在一个核上。
"""
import datetime
import gc
import math
import os
import statistics
import time

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from gpu import clone_kernel as kvc
from gpu.paged_decode import PagedKVCache, decode_step, torch_params
from gpu.validation import bits, patched
from lab_common.transformer_lab import TINY, config_like, init_params
from paged_kv import n_blocks

MIN_MS = 10.0


def time_rounds(fns, reps, rounds):
    """fns = {名字: (fn, 每次调用算几步)} → {名字: [每轮的中位数 µs/步]}。"""
    inner, start, end = {}, torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for k, (fn, _) in fns.items():
        for _ in range(4):
            fn()
        torch.cuda.synchronize()
        t = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        inner[k] = max(1, min(1000, math.ceil(MIN_MS / 1e3 / max(1e-6, time.perf_counter() - t))))
    out = {k: [] for k in fns}
    gc.collect()
    gc.disable()
    for _ in range(rounds):
        for k, (fn, per) in fns.items():
            samples = []
            for _ in range(reps):
                fn()                       # 先不计时调一次：GPU 上先排着活
                start.record()
                for _ in range(inner[k]):
                    fn()
                end.record()
                end.synchronize()
                samples.append(start.elapsed_time(end) * 1e3 / inner[k] / per)
            out[k].append(statistics.median(samples))
    gc.enable()
    return out


def capture(fn, k=1):
    """fn 先跑一次（编译、分配），再连着 k 次捕获进一个 CUDA graph。返回 (graph, 最后一次的返回值)。"""
    fn()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(k):
            out = fn()
    g.keep = fn                        # graph 只记住地址：fn 闭包里的张量要和它活得一样久
    return g, out


def clone_a(kv, src, dst, pinned=None):
    """A（博客的"之前"）：每层从列表新建 long 下标张量，再 index_select + index_copy_（K、V 各一次）。pinned =（锁页内存里的
    下标, 显存里每层一份）时是 graph 版：每层从锁页内存上传一次（像 torch.tensor(...) 那样）。"""
    for l, layer in enumerate(kv):
        if pinned is None:
            s, d = torch.tensor(src, device="cuda"), torch.tensor(dst, device="cuda")
        else:
            pinned[1][l].copy_(pinned[0], non_blocking=True)
            s, d = pinned[1][l]
        for j in (0, 1):
            layer[j].index_copy_(0, d, layer[j].index_select(0, s))


def graphable_a(kv, src, dst):
    pinned = torch.tensor([src, dst]).pin_memory(), torch.empty((kv.shape[0], 2, len(src)), dtype=torch.long, device="cuda")
    return lambda: clone_a(kv, src, dst, pinned)


def bench_shape(name, shape, ns, reps, rounds, seed):
    """一种形状上每个 N 的每种做法：结果的行 {shape, N, method, us, rounds_us, bytes, GBps}。"""
    L, H, BS, D = shape["n_layers"], shape["n_heads"], shape["block_size"], shape["head_dim"]
    kv = torch.empty((L, 2, 2 * max(ns) + 16, H, BS, D), dtype=getattr(torch, shape["dtype"]), device="cuda")
    bits(kv).random_(0, 64)                              # 随机但有限的数（不会有 NaN）
    flat = torch.empty(2 * max(ns) * kv[:, :, 0].numel(), dtype=kv.dtype, device="cuda")
    perm = torch.randperm(kv.shape[2], generator=torch.Generator().manual_seed(seed)).tolist()
    cl = dict(C=kvc.Cloner(kv), E=kvc.Cloner(kv, "E"), E_vllm=kvc.Cloner(kv, "E", block=1024, warps=32),
              C_zero_copy=patched(lambda: kvc.Cloner(kv), None, 1 << 40), C_side=patched(lambda: kvc.Cloner(kv), None, 0))
    rows = []
    for n in ns:
        src, dst, half = perm[:n], perm[n:2 * n], n * kv[:, :, 0].numel()
        fns = {"A": lambda: clone_a(kv, src, dst), "B": lambda: [kvc.clone_layer(x[0], x[1], src, dst) for x in kv],
               **{m: (lambda c=cl[m]: c(src, dst)) for m in ("C", "E", "C_zero_copy", "C_side")}}
        idx = torch.tensor(dst, device="cuda")
        for m, fn in fns.items():                                        # 每个做法先逐位核对一次
            for layer in kv:                                             # 目的块先写成 0xFF（逐层：每次 < 2^31 字节）
                bits(layer).index_fill_(1, idx, 0xFF)
            fn()
            assert torch.equal(bits(kv.index_select(2, idx)), bits(kv[:, :, src])), f"{name} N={n} {m}：结果不对"
        fns["D"] = lambda: flat[half:2 * half].copy_(flat[:half])
        timed = {m: (fn, 1) for m, fn in fns.items()}
        for m, fn in (("A_graph", graphable_a(kv, src, dst)), ("C_graph", cl["C"].fixed(src, dst)), ("D_graph", fns["D"])):
            timed[m] = (capture(fn)[0].replay, 1)
        k = max(4, min(200, math.ceil(2e-3 / (2 * half * kv.element_size() / 4e12))))   # 一次 replay 约 2 ms
        for m, c, s, d in (("C_kernel", "C", src, dst), ("C_contig", "C", range(n), range(n, 2 * n)),
                           ("E_kernel", "E", src, dst), ("E_vllm", "E_vllm", src, dst)):
            timed[m] = (capture(cl[c].fixed(s, d, upload=False), k)[0].replay, k)
        for m, us in time_rounds(timed, reps, rounds).items():
            med, nbytes = statistics.median(us), 2 * half * kv.element_size()       # 读 + 写
            rows.append(dict(shape=name, N=n, method=m, us=med, rounds_us=us, bytes=nbytes, GBps=nbytes / med / 1e3))
        timed = fns = None
    kv = flat = cl = None
    torch.cuda.empty_cache()
    return rows


def decode_share(cfg, batches, prefix_len, block_size, reps, rounds, seed):
    """B 条序列刚命中同一个前缀（最后一块没写满），这一步各 COW 一块：不克隆 / A / C 三个 graph（克隆 + 一整步 decode）
    轮流计时；再核对三者的 logits、KV 缓存逐位相同，同一个 graph 放两次也相同。注意力不用 cuDNN：它同一个 graph
    重放两次结果就可能不同（与克隆无关）。"""
    tp, rows, (L, H, hd) = torch_params(init_params(cfg, seed), "cuda", torch.float16), [], (
        cfg.n_layers, cfg.n_kv_heads, cfg.head_dim)
    for b in batches:
        g = torch.Generator().manual_seed(seed + b)
        cache = PagedKVCache(L, H, hd, block_size, n_blocks(prefix_len, block_size) + b + 1, device="cuda")
        prefix = cache.new_sequence()                    # 前缀缓存条目：它自己一直持有这些块
        cache.append_token_batch([prefix], *(torch.randn((L, prefix_len, H, hd), generator=g) for _ in range(2)),
                                 n_tokens=prefix_len)
        kids = [prefix.fork() for _ in range(b)]
        pairs, _, _ = cache.reserve(kids, 1)             # 第一次写入：每条序列 COW 一次（每个 graph 里再拷一遍）
        src, dst, kv = [p[0] for p in pairs], [p[1] for p in pairs], cache.kv
        table, tokens = torch.tensor([s.blocks for s in kids]).cuda(), torch.randint(0, cfg.vocab, (b,), generator=g).cuda()
        clone = {"none": lambda: None, "A": graphable_a(kv, src, dst), "C": cache.cloner.fixed(src, dst)}
        with sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]):
            graphs = {m: capture(lambda f=f: (f(), decode_step(tp, cfg, kv, tokens, table, prefix_len + 1))[1])
                      for m, f in clone.items()}
        times = {m: [] for m in graphs}
        for _ in range(rounds):
            for m, (gr, _) in graphs.items():
                times[m] += time_rounds({m: (gr.replay, 1)}, reps, 1)[m]
        after = {}
        for m, (gr, logits) in graphs.items():           # 每个 graph 都是幂等的：同样的输入、同样的写入
            gr.replay()
            first = bits(logits).clone()
            gr.replay()
            after[m] = (first, torch.equal(first, bits(logits)), bits(kv).clone())
        rows.append(dict(B=b, N_pairs=len(src), rounds_us=times, us={m: statistics.median(v) for m, v in times.items()},
                         repeatable=all(r for _, r, _ in after.values()),
                         logits_identical=all(torch.equal(after[m][0], after["none"][0]) for m in "AC"),
                         kv_identical=all(torch.equal(after[m][2], after["none"][2]) for m in "AC")))
        graphs = cache = kv = clone = after = None
        torch.cuda.empty_cache()
    return rows


def measure_all(shapes, ns, reps, rounds, batches, prefix_len, decode_rounds, seed):
    """06 演示 2–4 要的全部数字（只在 CUDA 上）。主线程钉在一个核上：在核之间迁移时主机忽快忽慢。"""
    os.sched_setaffinity(0, {max(os.sched_getaffinity(0))})
    results = [r for name, s in shapes.items() for r in bench_shape(name, s, ns, reps, rounds, seed)]
    s = shapes["gpt2-small"]      # 模型：transformer_lab 的结构，尺寸取 GPT-2 small（KV 形状与这一种相同）
    cfg = config_like(TINY, vocab=50257, d_model=s["n_heads"] * s["head_dim"], n_layers=s["n_layers"],
                      n_heads=s["n_heads"], n_kv_heads=s["n_heads"], d_ff=2048, max_seq=1024)
    rows = decode_share(cfg, batches, prefix_len, s["block_size"], reps, decode_rounds, seed)
    meta = dict(gpu=torch.cuda.get_device_name(), torch=torch.__version__, triton=kvc.triton.__version__,
                cuda=torch.version.cuda, date=datetime.date.today().isoformat(), tile=kvc.TILE, warps=kvc.WARPS,
                overlap_min_mb=kvc.OVERLAP_MIN_MB, e_block=kvc.E_BLOCK, e_warps=kvc.E_WARPS)
    return dict(meta=meta, results=results, decode=dict(model=dict(vars(cfg)), rows=rows))
