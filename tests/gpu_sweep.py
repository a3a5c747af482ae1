"""GPU 上的探索（不是测试，pytest 不收集）：C 的 kernel 变体只量 kernel 时离 D 多远；块号交给 kernel 的几种主机路径
整步要多久。结果写 JSON，摘要记在 lecture07/gpu/NOTES.md。

    python tests/gpu_sweep.py OUT.json
"""
import array
import json
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "lecture07")]

import numpy as np  # noqa: E402
import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from gpu import clone_kernel as kvc  # noqa: E402
from gpu.timing import time_rounds  # noqa: E402

SHAPES = {"gpt2-small": (12, 12, 64, torch.float16), "llama3-8b": (32, 8, 128, torch.bfloat16)}


@triton.jit(do_not_specialize=["n_pairs"])
def var_kernel(kv, idx, group_stride, n_pairs, E: tl.constexpr, BLOCK: tl.constexpr, TILES: tl.constexpr,
               MASK: tl.constexpr, EVICT: tl.constexpr, CG: tl.constexpr):
    pid = tl.program_id(0)
    g = pid // (n_pairs * TILES)
    n = pid // TILES % n_pairs
    s = tl.load(idx + n)
    d = tl.load(idx + n_pairs + n)
    e = pid % TILES * BLOCK + tl.arange(0, BLOCK)
    base = kv + g.to(tl.int64) * group_stride
    src = base + s.to(tl.int64) * E + e
    dst = base + d.to(tl.int64) * E + e
    if MASK:
        m = e < E
        tl.store(dst, tl.load(src, mask=m), mask=m)
    elif EVICT:
        tl.store(dst, tl.load(src, eviction_policy="evict_first"), eviction_policy="evict_first")
    elif CG:
        tl.store(dst, tl.load(src, cache_modifier=".cg"), cache_modifier=".cs")
    else:
        tl.store(dst, tl.load(src))


@triton.jit(do_not_specialize=["n_pairs"])
def pair_major_kernel(kv, idx, group_stride, n_pairs, E: tl.constexpr, BLOCK: tl.constexpr, TILES: tl.constexpr,
                      G: tl.constexpr):
    pid = tl.program_id(0)
    g = pid // TILES % G
    n = pid // (TILES * G)
    s = tl.load(idx + n)
    d = tl.load(idx + n_pairs + n)
    e = pid % TILES * BLOCK + tl.arange(0, BLOCK)
    base = kv + g.to(tl.int64) * group_stride
    tl.store(base + d.to(tl.int64) * E + e, tl.load(base + s.to(tl.int64) * E + e))


@triton.jit(do_not_specialize=["n2"])
def load_idx_kernel(host, dev, n2, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < n2
    tl.store(dev + i, tl.load(host + i, mask=m), mask=m)


def host_us(fn, iters=300, chunks=7):
    for _ in range(50):
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


def raw(compiled):
    compiled._init_handles()
    run = compiled.run
    head = (compiled.function, run.launch_cooperative_grid, run.launch_pdl, None, None, compiled.packed_metadata,
            None, None, None)
    return lambda gx, stream, *args: run.launch(gx, 1, 1, stream, *head, *args)


def graph_of(fn, k):
    fn()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(k):
            fn()
    g.keep = fn
    return g.replay


class Paths:
    """几种主机路径，主机上都用同一个快的检查（array.array + numpy min/max + set）。"""

    def __init__(self, kv):
        L, _, nb, H, BS, D = kv.shape
        self.kv, self.nb, E = kv, nb, H * BS * D
        self.cap = 4096
        self.host = torch.empty((16, 2 * self.cap), dtype=torch.int32).pin_memory()
        self.hnp = self.host.numpy()
        self.dev = torch.empty_like(self.host, device="cuda")
        self.hp = [t.data_ptr() for t in self.host]
        self.dp = [t.data_ptr() for t in self.dev]
        self.side = torch.cuda.Stream(priority=-1)
        self.side_h = self.side.cuda_stream
        self.ev = [torch.cuda.Event() for _ in range(16)]
        self.done = [torch.cuda.Event() for _ in range(2)]
        self.step = 0
        t, whole = 1024, triton.next_power_of_2(E)
        self.main_args = lambda tile: (E, tile, triton.cdiv(E, tile), int(E % tile != 0), 0, 0)
        self.k_tile = raw(var_kernel.warmup(kv, self.dev[0], nb * E, 1, *self.main_args(t), grid=(1,), num_warps=2))
        self.k_whole = raw(var_kernel.warmup(kv, self.dev[0], nb * E, 1, *self.main_args(whole), grid=(1,),
                                             num_warps=4))
        self.loader = raw(load_idx_kernel.warmup(self.host[0], self.dev[0], 2, 1024, grid=(1,), num_warps=4))
        self.per_tile, self.per_whole = 2 * L * triton.cdiv(E, t), 2 * L
        self.kvp, self.stride, self.E = kv.data_ptr(), nb * E, E
        self.t, self.whole = t, whole

    def prep(self, src, dst):
        n = len(src)
        a = array.array("i", src)
        a.extend(dst)
        i = self.step % 16
        self.step += 1
        if i % 8 == 0:
            self.done[i // 8].synchronize()
        x = self.hnp[i, :2 * n]
        x[:] = np.frombuffer(a, np.int32)
        if x.min() < 0 or x.max() >= self.nb:
            raise ValueError("越界")
        d = set(dst)
        if len(d) < n or not d.isdisjoint(src):
            raise ValueError("重复")
        return i, n

    def fin(self, i):
        if i % 8 == 7:
            self.done[i // 8].record()

    def main(self, n, idx, stream):
        self.k_tile(n * self.per_tile, stream, self.kvp, idx, self.stride, n, *self.main_args(self.t))

    def zc(self, src, dst):
        i, n = self.prep(src, dst)
        self.k_whole(n * self.per_whole, torch._C._cuda_getCurrentRawStream(0), self.kvp, self.hp[i], self.stride, n,
                     *self.main_args(self.whole))
        self.fin(i)

    def same_loader(self, src, dst):
        i, n = self.prep(src, dst)
        s = torch._C._cuda_getCurrentRawStream(0)
        self.loader(triton.cdiv(2 * n, 1024), s, self.hp[i], self.dp[i], 2 * n, 1024)
        self.main(n, self.dp[i], s)
        self.fin(i)

    def side_loader(self, src, dst):
        i, n = self.prep(src, dst)
        self.loader(triton.cdiv(2 * n, 1024), self.side_h, self.hp[i], self.dp[i], 2 * n, 1024)
        self.ev[i].record(self.side)
        main = torch.cuda.current_stream()
        main.wait_event(self.ev[i])
        self.main(n, self.dp[i], main.cuda_stream)
        self.fin(i)

    def same_copy(self, src, dst):
        i, n = self.prep(src, dst)
        self.dev[i].copy_(self.host[i], non_blocking=True)
        self.main(n, self.dp[i], torch._C._cuda_getCurrentRawStream(0))
        self.fin(i)

    def side_copy(self, src, dst):
        i, n = self.prep(src, dst)
        main = torch.cuda.current_stream()
        with torch.cuda.stream(self.side):
            self.dev[i].copy_(self.host[i], non_blocking=True)
            self.ev[i].record()
        main.wait_event(self.ev[i])
        self.main(n, self.dp[i], main.cuda_stream)
        self.fin(i)


def kernel_variants(kv, src, dst):
    """{名字: 一次 launch 的函数}（下标已在显存）。"""
    L, _, nb, H, BS, D = kv.shape
    E, dev = H * BS * D, "cuda"

    def idx_of(s, d):
        return torch.tensor(list(s) + list(d), dtype=torch.int32, device=dev)
    n = len(src)
    base = idx_of(src, dst)
    order = np.argsort(dst)
    by_dst = idx_of(np.array(src)[order].tolist(), np.array(dst)[order].tolist())
    order = np.argsort(src)
    by_src = idx_of(np.array(src)[order].tolist(), np.array(dst)[order].tolist())
    out = {}

    def v(tile, warps, idx, mask=None, evict=0, cg=0):
        mask = int(E % tile != 0) if mask is None else mask
        grid = (n * 2 * L * triton.cdiv(E, tile),)
        return lambda: var_kernel[grid](kv, idx, nb * E, n, E, tile, triton.cdiv(E, tile), mask, evict, cg,
                                        num_warps=warps)
    out["t1024w2"] = v(1024, 2, base)
    out["t1024w2_mask"] = v(1024, 2, base, mask=1)
    out["t1024w2_by_dst"] = v(1024, 2, by_dst)
    out["t1024w2_by_src"] = v(1024, 2, by_src)
    out["t1024w2_evict"] = v(1024, 2, base, evict=1)
    out["t1024w2_cg"] = v(1024, 2, base, cg=1)
    out["t2048w4"] = v(2048, 4, base)
    out["t512w1"] = v(512, 1, base)
    out["t1024w4"] = v(1024, 4, base)
    out["t4096w8"] = v(4096, 8, base)
    tiles = triton.cdiv(E, 1024)
    out["pair_major"] = lambda: pair_major_kernel[(n * 2 * L * tiles,)](kv, base, nb * E, n, E, 1024, tiles, 2 * L,
                                                                          num_warps=2)
    out["production"] = kvc.Cloner(kv).fixed(src, dst, upload=False)
    return out


def main(path):
    out = dict(kernel={}, paths={}, host={})
    for name, (L, H, D, dt) in SHAPES.items():
        maxn = 2048
        kv = torch.empty((L, 2, 2 * maxn + 16, H, 16, D), dtype=dt, device="cuda")
        kv.view(torch.uint8).random_(0, 64)
        perm = torch.randperm(kv.shape[2], generator=torch.Generator().manual_seed(0)).tolist()
        flat = torch.empty(2 * maxn * L * 2 * H * 16 * D, dtype=dt, device="cuda")
        paths = Paths(kv)
        for n in ((9, 64, 128, 256, 2048) if name == "gpt2-small" else (64, 256, 2048)):
            src, dst = perm[:n], perm[n:2 * n]
            half = n * L * 2 * H * 16 * D
            d_fn = (lambda half=half: flat[half:2 * half].copy_(flat[:half]), 1)
            fns = {"D": d_fn}
            if n in (256, 2048) or (n == 64):
                for k, f in kernel_variants(kv, src, dst).items():
                    fns["k_" + k] = (graph_of(f, 20), 20)
            for m in ("zc", "same_loader", "side_loader", "same_copy", "side_copy"):
                fn = getattr(paths, m)
                exp = kv[:, :, src].clone()
                fn(src, dst)
                torch.cuda.synchronize()
                assert torch.equal(kv[:, :, dst], exp), (name, n, m)
                fns["p_" + m] = (lambda fn=fn, src=src, dst=dst: fn(src, dst), 1)
            r = time_rounds(fns, 5, 3)
            res = {k: dict(us=statistics.median(v), spread=(max(v) - min(v)) / statistics.median(v)) for k, v in r.items()}
            out["kernel"][f"{name} {n}"] = res
            dd = res["D"]["us"]
            print(name, n, " ".join(f"{k}={dd / v['us']:.3f}" for k, v in res.items()), flush=True)
            if name == "gpt2-small" and n in (64, 256):
                out["host"][n] = {m: host_us(lambda m=m: getattr(paths, m)(src, dst)) for m in
                                  ("zc", "same_loader", "side_loader", "same_copy", "side_copy")}
                out["host"][n]["prep"] = host_us(lambda: paths.fin(paths.prep(src, dst)[0]))
                print("host", n, {k: round(v, 1) for k, v in out["host"][n].items()}, flush=True)
        kv = flat = paths = None
        torch.cuda.empty_cache()
    with open(path, "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
