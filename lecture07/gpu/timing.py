"""GPU 上的计时（06 演示 2–4）：每步克隆 N 个块对要多少 µs、只量 kernel 时多少、克隆占一整步 decode 的多少。

    A  每层从列表新建 long 下标张量 + index_select + index_copy_（博客的"之前"）
    B  每层新建 int32 下标张量 + 一次 Triton launch（博客的"之后"）
    C  所有层 × K/V 一次 launch（clone_kernel.Cloner）；C_zero_copy / C_side：N > 8 时一律零拷贝 / 旁路 stream 上传
    D  同样字节的一次连续 device-to-device 拷贝（N 大时的带宽上限）
    E  vLLM copy_blocks 的设计，主机路径与 C 相同
    *_graph   捕获进 CUDA graph 后 replay 一步（H2D 上传也在 graph 里）
    C_kernel / C_contig / E_kernel / E_vllm   只量 kernel：K 次 launch 捕获进一个 graph，下标已在显存
一个样本：CUDA event 包住连续 ≥ MIN_MS 的调用；一轮里各做法轮流，每个连着测 reps 个样本取中位数；测 rounds 轮，
报告各轮中位数的中位数，轮与轮的 (最大 − 最小) / 中位数就是波动。计时时关掉 Python 的垃圾回收。
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
from gpu.validation import bits
from lab_common.transformer_lab import TINY, config_like, init_params
from paged_kv import n_blocks

MIN_MS = 10.0



def time_rounds(fns, reps, rounds):
    """fns = {名字: (fn, 每次调用算几步)} → {名字: [每轮的中位数 µs/步]}。"""
    inner, start, end = {}, torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for k, (fn, _) in fns.items():
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        t = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        inner[k] = max(1, min(1000, math.ceil(MIN_MS / 1e3 / max(1e-6, time.perf_counter() - t))))
    out = {k: [] for k in fns}
    gc.collect()
    gc.disable()
    try:
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
    finally:
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


def clone_a(kv, src, dst):
    """A（博客的"之前"）：每层从 python 列表新建 long 下标张量，再 index_select + index_copy_（K、V 各一次）。"""
    for layer in kv:
        s, d = torch.tensor(src, device=kv.device), torch.tensor(dst, device=kv.device)
        for j in (0, 1):
            layer[j].index_copy_(0, d, layer[j].index_select(0, s))


def graphable_a(kv, src, dst):
    """A 的 graph 版：每层两次 H2D（从锁页内存，像 torch.tensor(...) 那样每层拷一次）+ 4 个 kernel。"""
    hs, hd = torch.tensor(src).pin_memory(), torch.tensor(dst).pin_memory()
    ds, dd = (torch.empty((kv.shape[0], len(src)), dtype=torch.long, device=kv.device) for _ in range(2))

    def step():
        for l, layer in enumerate(kv):
            ds[l].copy_(hs, non_blocking=True)
            dd[l].copy_(hd, non_blocking=True)
            for j in (0, 1):
                layer[j].index_copy_(0, dd[l], layer[j].index_select(0, ds[l]))
    return step


def bytes_per_step(shape, n):
    """一步克隆读 + 写的字节：2 × N × 层数 × 2(K,V) × H×BS×D × 元素字节。"""
    el = torch.empty(0, dtype=getattr(torch, shape["dtype"])).element_size()
    return 2 * n * shape["n_layers"] * 2 * shape["n_heads"] * shape["block_size"] * shape["head_dim"] * el


def bench_shape(name, shape, ns, reps, rounds, seed):
    """一种形状上每个 N 的全部做法（METHODS）：结果的行 {shape, N, method, us, rounds_us, bytes, GBps}。"""
    L, H, BS, D = shape["n_layers"], shape["n_heads"], shape["block_size"], shape["head_dim"]
    kv = torch.empty((L, 2, 2 * max(ns) + 16, H, BS, D), dtype=getattr(torch, shape["dtype"]), device="cuda")
    bits(kv).random_(0, 64)                              # 随机但有限的数（不会有 NaN）
    flat = torch.empty(bytes_per_step(shape, max(ns)) // kv.element_size(), dtype=kv.dtype, device="cuda")
    perm = torch.randperm(kv.shape[2], generator=torch.Generator().manual_seed(seed)).tolist()
    c, e, e_vllm = kvc.Cloner(kv), kvc.Cloner(kv, "E"), kvc.Cloner(kv, "E", block=1024, warps=32)
    forced = {}
    for m, mb in (("C_zero_copy", 1 << 40), ("C_side", 0)):        # 换掉 OVERLAP_MIN_MB 再建：只走一条路径
        old, kvc.OVERLAP_MIN_MB = kvc.OVERLAP_MIN_MB, mb
        forced[m], kvc.OVERLAP_MIN_MB = kvc.Cloner(kv), old
    rows = []
    for n in ns:
        src, dst, half = perm[:n], perm[n:2 * n], bytes_per_step(shape, n) // 2 // kv.element_size()
        fns = {"A": lambda: clone_a(kv, src, dst), "B": lambda: [kvc.clone_layer(x[0], x[1], src, dst) for x in kv],
               "C": lambda: c(src, dst), "D": lambda: flat[half:2 * half].copy_(flat[:half]),
               "E": lambda: e(src, dst), **{m: (lambda f=f: f(src, dst)) for m, f in forced.items()}}
        idx = torch.tensor(dst, device="cuda")
        for m in ("A", "B", "C", "E", *forced):                          # 每个做法先逐位核对一次
            for layer in kv:                                             # 目的块先写成 0xFF（逐层：每次 < 2^31 字节）
                bits(layer).index_fill_(1, idx, 0xFF)
            fns[m]()
            assert torch.equal(bits(kv.index_select(2, idx)), bits(kv[:, :, src])), f"{name} N={n} {m}：结果不对"
        timed = {m: (fn, 1) for m, fn in fns.items()}
        for m, fn in (("A_graph", graphable_a(kv, src, dst)), ("C_graph", c.fixed(src, dst)), ("D_graph", fns["D"])):
            timed[m] = (capture(fn)[0].replay, 1)
        for m, fn in (("C_kernel", c.fixed(src, dst, False)), ("C_contig", c.fixed(range(n), range(n, 2 * n), False)),
                      ("E_kernel", e.fixed(src, dst, False)), ("E_vllm", e_vllm.fixed(src, dst, False))):
            k = max(4, min(200, math.ceil(2e-3 / max(1e-6, bytes_per_step(shape, n) / 4e12))))
            timed[m] = (capture(fn, k)[0].replay, k)
        for m, us in time_rounds(timed, reps, rounds).items():
            med = statistics.median(us)
            rows.append(dict(shape=name, N=n, method=m, us=med, rounds_us=us, bytes=2 * half * kv.element_size(),
                             GBps=2 * half * kv.element_size() / med / 1e3))
        timed = fns = None
    kv = flat = c = e = e_vllm = forced = None
    torch.cuda.empty_cache()
    return rows


def decode_share(cfg, batches, prefix_len, block_size, reps, rounds, seed):
    """B 条序列刚命中同一个前缀（最后一块没写满），这一步各 COW 一块。不克隆 / A / C 三个 graph（克隆 + 一整步
    decode）轮流计时 rounds 轮，再核对三者的 logits、KV 缓存是否逐位相同。注意力不用 cuDNN 后端：它同一个 graph
    重放两次结果就可能不同（与克隆无关），比不出逐位相同。"""
    tp, rows = torch_params(init_params(cfg, seed), "cuda", torch.float16), []
    L, H, hd = cfg.n_layers, cfg.n_kv_heads, cfg.head_dim
    for b in batches:
        g = torch.Generator().manual_seed(seed + b)
        cache = PagedKVCache(L, H, hd, block_size, n_blocks(prefix_len, block_size) + b + 1, device="cuda")
        prefix = cache.new_sequence()                    # 前缀缓存条目：它自己一直持有这些块
        cache.append_token_batch([prefix], *(torch.randn((L, prefix_len, H, hd), generator=g) for _ in range(2)),
                                 n_tokens=prefix_len)
        kids = [prefix.fork() for _ in range(b)]
        pairs, _, _ = cache.reserve(kids, 1)             # 第一次写入：每条序列 COW 一次（下面每个 graph 再拷一遍）
        src, dst, kv = [p[0] for p in pairs], [p[1] for p in pairs], cache.kv
        table = torch.tensor([s.blocks for s in kids], device="cuda")
        tokens = torch.randint(0, cfg.vocab, (b,), generator=g).cuda()
        clone = {"none": lambda: None, "A": graphable_a(kv, src, dst), "C": kvc.Cloner(kv).fixed(src, dst)}
        graphs = {}
        with sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]):
            for m, fn in clone.items():
                graphs[m] = capture(lambda fn=fn: (fn(), decode_step(tp, cfg, kv, tokens, table, prefix_len + 1))[1])
        per_round = {m: [] for m in graphs}
        for _ in range(rounds):
            for m, (gr, _) in graphs.items():
                per_round[m] += time_rounds({m: (gr.replay, 1)}, reps, 1)[m]
        logits, kv_after = {}, {}
        for m, (gr, out) in graphs.items():           # 每个 graph 都是幂等的：同样的输入、同样的写入
            gr.replay()
            first = out.clone()
            gr.replay()                                  # 同一个 graph 再放一次：这一步的结果是确定的吗？
            torch.cuda.synchronize()
            logits[m], kv_after[m] = (first, torch.equal(bits(first), bits(out))), kv.clone()
        rows.append(dict(B=b, N_pairs=len(src), rounds_us=per_round, us={m: statistics.median(v) for m, v in
                                                                          per_round.items()},
                         repeatable=all(r for _, r in logits.values()),
                         logits_identical=all(torch.equal(bits(logits[m][0]), bits(logits["none"][0])) for m in "AC"),
                         kv_identical=all(torch.equal(bits(kv_after[m]), bits(kv_after["none"])) for m in "AC")))
        graphs = cache = kv = clone = None
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
                cuda=torch.version.cuda, date=datetime.date.today().isoformat(), arg_pairs=kvc.ARG_PAIRS,
                overlap_min_mb=kvc.OVERLAP_MIN_MB, tile=kvc.TILE, warps=kvc.WARPS, e_block=kvc.E_BLOCK,
                e_warps=kvc.E_WARPS)
    return dict(meta=meta, shapes=shapes, Ns=list(ns), reps=reps, rounds=rounds, results=results,
                decode=dict(model=dict(vars(cfg)), prefix_len=prefix_len, rounds=decode_rounds, rows=rows))
