"""GPU 上的计时（06 演示 2–4）。做法：A、B 博客的之前、之后；C 所有层一次 launch（Cloner），C_same / C_side 块号一律在同一
stream / 旁路 stream 上传；D 同样字节的一次连续拷贝；E vLLM 式；C_graph、D_graph 一步捕获进 CUDA graph；C_kernel、C_contig
（拷连续的块）、E_kernel 只量 kernel：K 次 launch 捕获进一个 graph，块号已在显存。一个样本：先不计时地调 ≥ WARM_MS，再用
CUDA event 包住连续 ≥ MIN_MS 的调用；一遍里各做法各一个样本，轮与轮交错（第 j 遍归第 j % rounds 轮），每轮 reps 个样本
取中位数，报告 rounds 轮的中位数：主机时快时慢（一阵约 1 秒），交错的轮各自都碰上快的和慢的。"""
import datetime
import gc
import math
import os
import statistics
import time

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from gpu import clone_kernel as kvc
from gpu.paged_decode import PagedKVCache, PagedSequence, decode_step, torch_params
from gpu.validation import SIDE, bits
from lab_common.transformer_lab import TINY, config_like, init_params
from paged_kv import n_blocks

MIN_MS, WARM_MS = 5.0, 1.0


def time_rounds(fns, reps, rounds):
    """fns = {名字: (fn, 每次调用算几步)} → {名字: [每轮的中位数 µs/步]}。计时时关掉垃圾回收。"""
    ev, calls, names = [torch.cuda.Event(enable_timing=True) for _ in "se"], {}, list(fns)
    for k, (fn, _) in fns.items():                 # 一次调用多久 → 预热调几次、一个样本连着调几次
        for _ in range(4):
            torch.cuda.synchronize()
            t = time.perf_counter()
            fn()
        torch.cuda.synchronize()
        calls[k] = [min(1000, math.ceil(ms / 1e3 / max(1e-6, time.perf_counter() - t))) for ms in (WARM_MS, MIN_MS)]
    samples = {k: [[] for _ in range(rounds)] for k in fns}
    gc.collect()
    gc.disable()
    for j in range(rounds * reps):                 # 一遍：各做法各一个样本，每遍换个起点；第 j 遍归第 j % rounds 轮
        for k in names[j % len(names):] + names[:j % len(names)]:
            (fn, per), (warm, inner) = fns[k], calls[k]
            for _ in range(warm):
                fn()
            ev[0].record()
            for _ in range(inner):
                fn()
            ev[1].record()
            ev[1].synchronize()
            samples[k][j % rounds].append(ev[0].elapsed_time(ev[1]) * 1e3 / inner / per)
    gc.enable()
    return {k: [statistics.median(v) for v in rs] for k, rs in samples.items()}


def capture(fn, k=1):
    """fn 先跑一次（编译、分配），再连着 k 次捕获进一个 CUDA graph。返回 (graph, 最后一次的返回值)。"""
    fn()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = [fn() for _ in range(k)][-1]
    g.keep = fn                        # graph 只记住地址：fn 闭包里的张量要和它活得一样久
    return g, out


def clone_a(kv, src, dst, pinned=None):
    """A（博客的"之前"）：每层从列表新建下标张量，再 index_select + index_copy_；pinned 给了时每层从锁页内存上传（可捕获）。"""
    for l, layer in enumerate(kv):
        if pinned is None:
            s, d = torch.tensor(src, device="cuda"), torch.tensor(dst, device="cuda")
        else:
            s, d = pinned[1][l].copy_(pinned[0], non_blocking=True)
        for j in (0, 1):
            layer[j].index_copy_(0, d, layer[j].index_select(0, s))


def bench_shape(name, shape, ns, reps, rounds, seed):
    """一种形状上每个 N 的每种做法：结果的行 {shape, N, method, us, rounds_us, bytes, GBps}。"""
    kv = torch.empty((shape["n_layers"], 2, 2 * max(ns) + 16, shape["n_heads"], shape["block_size"], shape["head_dim"]),
                     dtype=getattr(torch, shape["dtype"]), device="cuda")
    bits(kv).random_(0, 64)                              # 随机但有限的数（不会有 NaN）
    flat = torch.empty(2 * max(ns) * kv[:, :, 0].numel(), dtype=kv.dtype, device="cuda")
    perm, rows = torch.randperm(kv.shape[2], generator=torch.Generator().manual_seed(seed)).tolist(), []
    cl = dict(C=kvc.Cloner(kv), E=kvc.Cloner(kv, "E"), C_same=kvc.Cloner(kv, args_max=0, overlap_mb=1 << 40),
              C_side=kvc.Cloner(kv, args_max=0, **SIDE))
    for n in ns:
        src, dst, half = perm[:n], perm[n:2 * n], n * kv[:, :, 0].numel()
        fns = {"A": lambda: clone_a(kv, src, dst), "B": lambda: [kvc.clone_layer(x[0], x[1], src, dst) for x in kv],
               **{m: (lambda c=c: c(src, dst)) for m, c in cl.items()}}
        idx = torch.tensor(dst, device="cuda")
        for m, fn in fns.items():                        # 每个做法先逐位核对一次：目的块先逐层写成 0xFF
            for layer in kv:
                bits(layer).index_fill_(1, idx, 0xFF)
            fn()
            assert torch.equal(bits(kv.index_select(2, idx)), bits(kv[:, :, src])), f"{name} N={n} {m}：结果不对"
        fns["D"] = lambda: flat[half:2 * half].copy_(flat[:half])
        timed = {m: (fn, 1) for m, fn in fns.items()}
        timed.update(C_graph=(capture(cl["C"].fixed(src, dst))[0].replay, 1), D_graph=(capture(fns["D"])[0].replay, 1))
        k = max(4, min(200, math.ceil(2e-3 / (2 * half * kv.element_size() / 4e12))))   # 一次 replay 约 2 ms
        for m, c, s, d in ("C_kernel", "C", src, dst), ("C_contig", "C", range(n), range(n, 2 * n)), ("E_kernel", "E", src, dst):
            timed[m] = (capture(cl[c].fixed(s, d, upload=False), k)[0].replay, k)
        for m, us in time_rounds(timed, reps, rounds).items():
            med, nbytes = statistics.median(us), 2 * half * kv.element_size()       # 读 + 写
            rows.append(dict(shape=name, N=n, method=m, us=med, rounds_us=us, bytes=nbytes, GBps=nbytes / med / 1e3))
    return rows


def decode_share(cfg, batches, prefix_len, block_size, reps, rounds, seed):
    """B 条序列刚命中同一个前缀（最后一块没写满），这一步各 COW 一块：不克隆 / A / C 三个 graph（克隆 + 一整步 decode）
    交错计时；再核对三者的 logits、KV 缓存逐位相同。注意力不用 cuDNN：它同一个 graph 重放两次结果就可能不同。"""
    L, H, hd, rows = cfg.n_layers, cfg.n_kv_heads, cfg.head_dim, []
    tp = torch_params(init_params(cfg, seed), "cuda", torch.float16)
    for b in batches:
        g = torch.Generator().manual_seed(seed + b)
        cache = PagedKVCache(L, H, hd, block_size, n_blocks(prefix_len, block_size) + b + 1, device="cuda")
        prefix = PagedSequence(cache.pool)              # 前缀缓存条目：它自己一直持有这些块
        cache.append_token_batch([prefix], *(torch.randn((L, prefix_len, H, hd), generator=g) for _ in range(2)),
                                 n_tokens=prefix_len)
        kids = [prefix.fork() for _ in range(b)]
        pairs, _, _ = cache.reserve(kids, 1)             # 第一次写入：每条序列 COW 一次（每个 graph 里再拷一遍）
        src, dst, kv = [p[0] for p in pairs], [p[1] for p in pairs], cache.kv
        table, tokens = torch.tensor([s.blocks for s in kids]).cuda(), torch.randint(0, cfg.vocab, (b,), generator=g).cuda()
        pinned = torch.tensor([src, dst]).pin_memory(), torch.empty((L, 2, b), dtype=torch.long, device="cuda")
        clone = {"none": lambda: None, "A": lambda: clone_a(kv, src, dst, pinned), "C": cache.cloner.fixed(src, dst)}
        with sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]):
            graphs = {m: capture(lambda f=f: (f(), decode_step(tp, cfg, kv, tokens, table, prefix_len + 1))[1])
                      for m, f in clone.items()}
        times, after = time_rounds({m: (gr.replay, 1) for m, (gr, _) in graphs.items()}, reps, rounds), {}
        for m, (gr, logits) in graphs.items():           # 每个 graph 都是幂等的：同样的输入、同样的写入
            gr.replay()
            after[m] = bits(logits).clone(), bits(kv).clone()
        same = [all(torch.equal(after[m][j], after["none"][j]) for m in "AC") for j in (0, 1)]
        rows.append(dict(B=b, N_pairs=len(src), rounds_us=times, us={m: statistics.median(v) for m, v in times.items()},
                         logits_identical=same[0], kv_identical=same[1]))
    return rows


def measure_all(shapes, ns, reps, rounds, batches, prefix_len, seed):
    """06 演示 2–4 要的全部数字（只在 CUDA 上）。主线程钉在一个核上：在核之间迁移时主机忽快忽慢。"""
    os.sched_setaffinity(0, {max(os.sched_getaffinity(0))})
    results = [r for name, s in shapes.items() for r in bench_shape(name, s, ns, reps, rounds, seed)]
    s = shapes["gpt2-small"]      # 模型：transformer_lab 的结构，尺寸取 GPT-2 small（KV 形状与这一种相同）
    cfg = config_like(TINY, vocab=50257, d_model=s["n_heads"] * s["head_dim"], n_layers=s["n_layers"],
                      n_heads=s["n_heads"], n_kv_heads=s["n_heads"], d_ff=2048, max_seq=1024)
    rows = decode_share(cfg, batches, prefix_len, s["block_size"], reps, rounds, seed)
    meta = dict(gpu=torch.cuda.get_device_name(), torch=torch.__version__, triton=kvc.triton.__version__, cuda=torch.version.cuda,
                date=datetime.date.today().isoformat(), args_max=kvc.ARGS_MAX, overlap_min_mb=kvc.OVERLAP_MIN_MB)
    return dict(meta=meta, results=results, decode=dict(model=dict(vars(cfg)), rows=rows))
