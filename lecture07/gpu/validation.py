"""逐位校验（06 演示 1）：一步真实的 COW 写入（PagedKVCache.append_token_batch），空闲块先写成 0xFF（没写到的字节一定
露馅），写完后整个缓存与"按预期重放"逐位比较，再查块对、克隆次数和 ref_count。"""
import torch

from gpu import clone_kernel as kvc
from gpu.paged_decode import PagedKVCache, PagedSequence

SIDE = dict(overlap_mb=0)        # 块号一律在旁路 stream 上传


def bits(t):
    return t.contiguous().view(torch.uint8)


def check_cow_write(dtype, L, H, D, BS, n_cow, device, seed, **options):
    """一步写入：n_cow 个子序列要 COW，另有一个独占最后一块的、一个最后一块刚写满的。返回 (逐位正确, 检查项数)。"""
    g = torch.Generator().manual_seed(seed)
    rnd = lambda t: torch.randn((L, t, H, D), generator=g).to(device)     # noqa: E731
    cache = PagedKVCache(L, H, D, BS, 3 * n_cow + 12, dtype, device, **options)
    parent, own, full = (PagedSequence(cache.pool) for _ in range(3))
    for seq, t in ((parent, BS + 1 + seed % (BS - 1)), (own, BS + 1), (full, 2 * BS)):
        cache.append_token_batch([seq], rnd(t), rnd(t), n_tokens=t)
    kids = [parent.fork() for _ in range(n_cow)]
    bits(cache.kv)[:, :, list(cache.pool.free_blocks)] = 0xFF
    before, seqs = cache.kv.clone(), kids + [own, full]
    k, v = rnd(len(seqs)), rnd(len(seqs))
    pairs, exp = cache.append_token_batch(seqs, k, v), before.clone()
    for s, d in pairs:
        exp[:, :, d] = before[:, :, s]
    for i, seq in enumerate(seqs):
        for j, x in enumerate((k, v)):
            exp[:, j, seq.blocks[-1], :, (seq.length - 1) % BS] = x[:, i].to(dtype)
    checks = [torch.equal(bits(cache.kv), bits(exp)), [s for s, _ in pairs] == [parent.blocks[-1]] * n_cow,
              cache.clone_calls == int(n_cow > 0), int(cache.pool.ref_count[parent.blocks[-1]]) == 1,
              len({d for _, d in pairs}) == n_cow]
    return all(checks), len(checks)


def cases(shapes, device):
    """[(做法, dtype, 形状, N（旁路上传的带 *）, seed → (逐位正确, 检查项数))]：N 在三条路径（参数、同一 stream、旁路）的
    分界两侧。CPU（解释器）上的小形状：tile 32/64（一块跨几个 tile），SIDE 走旁路；GPU 上再用真实形状：N = 8、9，f − 1、f
    （f = overlap_from）。"""
    todo = []
    for i, dt in enumerate(("float16", "bfloat16", "float32")):
        o = dict(block=32 * (1 + i % 2))
        todo += [("C", dt, (2, 3, 7, 5), n, dict(o, **x)) for n, x in ((0, {}), (1, {}), (8, {}), (9, {}), (9, SIDE))]
        todo += [("E", dt, (2, 3, 7, 5), n, dict(o, design="E", **x)) for n, x in ((1, {}), (9, SIDE))]
    for s in shapes.values() if device == "cuda" else ():
        L, H, D, BS = dims = (s["n_layers"], s["n_heads"], s["head_dim"], s["block_size"])
        f = kvc.overlap_from(L, H * D * BS, torch.tensor([], dtype=getattr(torch, s["dtype"])).element_size())
        todo += [(m, s["dtype"], dims, n, dict(design=m)) for m in "CE" for n in sorted({1, 8, 9, f - 1, f})]
    return [(m, dt, "L{} H{} D{} BS{}".format(*dims), f"{n}*" if o.get("overlap_mb") == 0 else str(n),
             lambda seed, dt=dt, dims=dims, n=n, o=o: check_cow_write(getattr(torch, dt), *dims, n, device, seed, **o))
            for m, dt, dims, n, o in todo]
