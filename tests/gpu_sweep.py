"""GPU 上的探索扫描（不是测试，pytest 不收集）：C、E 的 kernel 配置在每个 N 下的 kernel 时间（CUDA graph 里连续
K 次、event 计时），和几种上传方式的整步时间。结果写 JSON（figures/data/clone_sweep_*_h200.json），摘要记在 lecture07/gpu/NOTES.md。

    python tests/gpu_sweep.py OUT.json
"""
import json
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "lecture07")]

import torch  # noqa: E402

from gpu import clone_kernel as kvc  # noqa: E402

SHAPES = {"gpt2-small": (12, 12, 64, 16, torch.float16), "llama3-8b": (32, 8, 128, 16, torch.bfloat16)}
NS = (1, 8, 64, 256, 2048)


def ms_per_call(fn, n=5):
    """fn 连续跑 n 次、每次平均几毫秒（前后都同步 GPU；至少 1 µs，免得除以 0）。"""
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(n):
        fn()
    torch.cuda.synchronize()
    return max(1e-3, (time.perf_counter() - t) / n * 1e3)


def graph_us(fn, target_ms=2.0, replays=7):
    """fn 连续 K 次捕获进一个 graph；replay 计时，返回每次 fn 的 µs（replays 个样本）。"""
    fn()
    k = max(4, min(400, int(target_ms / ms_per_call(fn))))
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(k):
            fn()
    g.replay()
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    out = []
    for _ in range(replays):
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        out.append(a.elapsed_time(b) * 1e3 / k)
    return out, k


def eager_us(fn, samples=25, min_ms=2.0):
    for _ in range(5):
        fn()
    inner = max(2, min(400, int(min_ms / ms_per_call(fn))))
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    out = []
    for _ in range(samples):
        fn()
        a.record()
        for _ in range(inner):
            fn()
        b.record()
        b.synchronize()
        out.append(a.elapsed_time(b) * 1e3 / inner)
    return out


def main(path):
    dev = torch.device("cuda")
    res = dict(meta=dict(gpu=torch.cuda.get_device_name(), torch=torch.__version__,
                         triton=kvc.triton.__version__), rows=[])
    t0 = time.time()
    for name, (L, H, D, BS, dt) in SHAPES.items():
        maxn = max(NS)
        kv = torch.empty((L, 2, 2 * maxn + 16, H, BS, D), dtype=dt, device=dev)
        kv.view(torch.uint8).random_(0, 64)
        E = H * BS * D
        per = 2 * L * E * kv.element_size()                  # 一个块对读的字节
        flat = torch.empty(2 * maxn * per // kv.element_size(), dtype=dt, device=dev)
        perm = torch.randperm(kv.shape[2], generator=torch.Generator().manual_seed(0)).tolist()
        kp = torch.tensor([kv[l, 0].data_ptr() for l in range(L)], dtype=torch.int64, device=dev)
        vp = torch.tensor([kv[l, 1].data_ptr() for l in range(L)], dtype=torch.int64, device=dev)
        for n in NS:
            src, dst = perm[:n], perm[n:2 * n]
            order = sorted(range(n), key=lambda j: dst[j])
            s_dev = torch.tensor([src[j] for j in order], dtype=torch.int32, device=dev)
            d_dev = torch.tensor([dst[j] for j in order], dtype=torch.int32, device=dev)
            mp = torch.stack([s_dev, d_dev], 1).contiguous()
            seq = torch.arange(2 * n, dtype=torch.int32, device=dev)
            half = n * per // kv.element_size()
            fns = {"D": lambda: flat[half:2 * half].copy_(flat[:half])}
            for tile in (1024, 2048, 4096, 8192, 16384):
                for w in (1, 2, 4, 8):
                    if tile // w < 256:
                        continue
                    fns[f"C t{tile} w{w}"] = (lambda t=tile, w=w: kvc.launch_all_kernel(kv, s_dev, d_dev, t, w))
            for tile, w in ((1024, 1), (1024, 2), (2048, 1), (4096, 4)):
                fns[f"C0 t{tile} w{w}"] = (lambda t=tile, w=w: kvc.launch_all_kernel(kv, s_dev, d_dev, t, w, order=0))
                fns[f"Cseq t{tile} w{w}"] = (lambda t=tile, w=w: kvc.launch_all_kernel(kv, seq[:n], seq[n:], t, w))
            for blk, w in ((1024, 32), (1024, 4), (2048, 4), (4096, 4), (4096, 8), (8192, 8), (2048, 8), (8192, 16)):
                fns[f"E b{blk} w{w}"] = (lambda b=blk, w=w: kvc._copy_blocks_kernel[(L, n)](
                    kp, vp, mp, kv, E=E, BLOCK=b, num_warps=w))
            # 正确性：每个变体先核对一遍
            idx_s, idx_d = torch.tensor(src, device=dev), torch.tensor(dst, device=dev)
            ref = kv.index_select(2, idx_s).clone()
            for k, fn in fns.items():
                if k == "D":
                    continue
                if k.startswith("Cseq"):
                    continue
                kv.view(torch.uint8)[:, :, dst] = 0xFF
                fn()
                torch.cuda.synchronize()
                ok = torch.equal(kv.index_select(2, idx_d).view(torch.uint8), ref.view(torch.uint8))
                if not ok:
                    print("WRONG", name, n, k, flush=True)
            for rnd in range(2):
                for k, fn in fns.items():
                    us, kk = graph_us(fn)
                    res["rows"].append(dict(shape=name, N=n, key=k, mode="graph", round=rnd, us=statistics.median(us),
                                            samples=us, k=kk, bytes=2 * n * per))
            # 整步（eager）：D、C（下标在同一 stream 上传 / 旁路 stream 上传）、E（vLLM 的主机路径：torch.tensor 上传）
            for rnd in range(3):
                for thr in (512, 9):
                    kvc.OVERLAP_MIN_PAIRS = thr
                    kvc._clones.clear()
                    for tile, w in ((1024, 2), (2048, 1), (4096, 4)):
                        kvc.TILE, kvc.NUM_WARPS = tile, w
                        kvc._clones.clear()
                        us = eager_us(lambda: kvc.kv_clone_blocks_all(kv, src, dst, True))
                        res["rows"].append(dict(shape=name, N=n, key=f"Ceager ovl{thr} t{tile} w{w}", mode="eager",
                                                round=rnd, us=statistics.median(us), bytes=2 * n * per))
                kvc.OVERLAP_MIN_PAIRS, kvc.TILE, kvc.NUM_WARPS = 512, 2048, 1
                us = eager_us(fns["D"])
                res["rows"].append(dict(shape=name, N=n, key="Deager", mode="eager", round=rnd,
                                        us=statistics.median(us), bytes=2 * n * per))

                def e_full():
                    s, d = kvc.check_clone_indices(src, dst, kv.shape[2])
                    m = torch.tensor([s, d], dtype=torch.int32, device=dev).t().contiguous()
                    kvc._copy_blocks_kernel[(L, n)](kp, vp, m, kv, E=E, BLOCK=4096, num_warps=4)
                us = eager_us(e_full)
                res["rows"].append(dict(shape=name, N=n, key="Eeager vllm-host", mode="eager", round=rnd,
                                        us=statistics.median(us), bytes=2 * n * per))
            print(name, n, f"{time.time() - t0:.0f}s", flush=True)
        kv = flat = None
        torch.cuda.empty_cache()
    # 主机上的几个操作（µs）
    ev = torch.cuda.Event()
    st = torch.cuda.Stream()
    h = {}
    for k, fn in {"event.record": lambda: ev.record(), "wait_event": lambda: torch.cuda.current_stream().wait_event(ev),
                  "stream ctx": lambda: torch.cuda.stream(st).__enter__()}.items():
        t = time.perf_counter()
        for _ in range(2000):
            fn()
        h[k] = (time.perf_counter() - t) / 2000 * 1e6
    torch.cuda.synchronize()
    res["host_us"] = h
    with open(path, "w") as f:
        json.dump(res, f)
    # 摘要：每个 (shape, N) 下 D 与最好的 C、E（graph，两轮各自的中位数）
    for name in SHAPES:
        for n in NS:
            rows = [r for r in res["rows"] if r["shape"] == name and r["N"] == n]
            g = {}
            for r in rows:
                g.setdefault((r["mode"], r["key"]), []).append(r["us"])
            d = statistics.median(g[("graph", "D")])
            de = statistics.median(g[("eager", "Deager")])
            best = sorted(((statistics.median(v), k) for (m, k), v in g.items() if m == "graph" and k != "D"))
            cs = [b for b in best if b[1].startswith("C ")][:3]
            es = [b for b in best if b[1].startswith("E ")][:2]
            eg = sorted((statistics.median(v), k, (max(v) - min(v)) / statistics.median(v))
                        for (m, k), v in g.items() if m == "eager")
            print(f"{name} N={n} Dg={d:.1f} De={de:.1f} | " + " ".join(f"{k}={u:.1f}({d / u:.0%})" for u, k in cs + es)
                  + " | " + " ".join(f"{k}={u:.1f}({de / u:.0%},sp{sp:.0%})" for u, k, sp in eg[:4]))
        print()
    print(h)


if __name__ == "__main__" and len(sys.argv) == 2:
    main(sys.argv[1])


def main2(path):
    """第二轮：零拷贝下标（kernel 直接读锁页内存）对同一 stream 上传；HOST_TILE；E 走同一条主机路径。"""
    dev = torch.device("cuda")
    out = []
    for name, (L, H, D, BS, dt) in SHAPES.items():
        maxn = 2048
        kv = torch.empty((L, 2, 2 * maxn + 16, H, BS, D), dtype=dt, device=dev)
        kv.view(torch.uint8).random_(0, 64)
        per = 2 * L * H * BS * D * kv.element_size()
        flat = torch.empty(2 * maxn * per // kv.element_size(), dtype=dt, device=dev)
        perm = torch.randperm(kv.shape[2], generator=torch.Generator().manual_seed(0)).tolist()
        for n in (1, 8, 9, 64, 150, 256, 511, 512, 2048):
            src, dst = perm[:n], perm[n:2 * n]
            half = n * per // kv.element_size()
            variants = {}
            for ht in (1024, 16384):
                for design in ("C", "E"):
                    if design == "E" and ht == 1024:
                        continue
                    c = kvc.AllLayersClone(kv, n, design) if ht == 16384 else None
                    if c is None:
                        old = kvc.HOST_TILE
                        kvc.HOST_TILE = ht
                        c = kvc.AllLayersClone(kv, n, design)
                        kvc.HOST_TILE = old
                        c.fast[16384] = c.fast[1024] if 1024 in c.fast else c.fast[kvc.TILE]

                    def step(c=c, mode=None):
                        s, d = kvc.check_clone_indices(src, dst, kv.shape[2])
                        s, d = kvc.by_destination(s, d)
                        if n <= kvc.ARG_PAIRS and c.design == "C" and mode is None:
                            c(kv, s, d)
                            return
                        i = c.write(s, d)
                        c.launch(kv, i, n, mode or kvc.mode_for(n))
                        c.done(i)
                    variants[f"{design} auto ht{ht}"] = step
                    if ht == 16384:
                        variants[f"{design} upload"] = lambda step=step: step(mode="upload")
                        variants[f"{design} host"] = lambda step=step: step(mode="host")
            variants["D"] = lambda: flat[half:2 * half].copy_(flat[:half])
            idx_s, idx_d = torch.tensor(src, device=dev), torch.tensor(dst, device=dev)
            ref = kv.index_select(2, idx_s).clone()
            for k, fn in variants.items():
                if k == "D":
                    continue
                for _ in range(20):        # 轮换过几圈缓冲区
                    kv.view(torch.uint8)[:, :, dst] = 0xFF
                    fn()
                torch.cuda.synchronize()
                if not torch.equal(kv.index_select(2, idx_d).view(torch.uint8), ref.view(torch.uint8)):
                    print("WRONG", name, n, k, flush=True)
            res = {k: [] for k in variants}
            for rnd in range(5):
                for k, fn in variants.items():
                    res[k].append(statistics.median(eager_us(fn, samples=21, min_ms=2.0)))
            d = statistics.median(res["D"])
            line = f"{name} N={n} D={d:.1f}"
            for k, v in res.items():
                m = statistics.median(v)
                out.append(dict(shape=name, N=n, key=k, rounds=v))
                line += f" | {k} {m:.1f} ({d / m:.0%}, sp {(max(v) - min(v)) / m:.0%})"
            print(line, flush=True)
        kv = flat = None
        torch.cuda.empty_cache()
    with open(path, "w") as f:
        json.dump(out, f)


if __name__ == "__main__" and len(sys.argv) > 2:
    main2(sys.argv[2])
