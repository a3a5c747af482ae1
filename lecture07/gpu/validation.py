"""逐位校验（06 演示 1）：目的块先写成 0xFF（没写到的字节一定露馅），克隆之后整个缓存与"按预期重放"逐位比较。

    C：一步真实的 COW 写入（PagedKVCache.append_token_batch）：要 COW 的子序列、独占最后一块的、最后一块刚写满的
    E：vLLM copy_blocks 式的 kernel 直接克隆 N 个块对；B：博客逐层的 kernel
N 取在块号交给 kernel 的每条路径的分界两侧：8（标量参数）和 9（零拷贝），旁路 stream 上传的起点前后。
"""
import torch

from gpu import clone_kernel as kvc
from gpu.paged_decode import PagedKVCache


def bits(t):
    return t.contiguous().view(torch.uint8)


def patched(fn, tile, overlap_mb):
    """在 clone_kernel 的 TILE / OVERLAP_MIN_MB 临时换掉时调用 fn()（新建的 Cloner 读到它们）。"""
    old = kvc.TILE, kvc.OVERLAP_MIN_MB
    kvc.TILE, kvc.OVERLAP_MIN_MB = tile or kvc.TILE, kvc.OVERLAP_MIN_MB if overlap_mb is None else overlap_mb
    try:
        return fn()
    finally:
        kvc.TILE, kvc.OVERLAP_MIN_MB = old


def check_cow_write(dtype, L, H, D, BS, n_cow, device, seed, tile=None, overlap_mb=None):
    """一步写入：n_cow 个子序列要 COW，另有一个独占最后一块的、一个最后一块刚写满的。返回 (逐位正确, 检查项数)。"""
    g = torch.Generator().manual_seed(seed)

    def rnd(t):
        return torch.randn((L, t, H, D), generator=g).to(device)
    cache = patched(lambda: PagedKVCache(L, H, D, BS, 3 * n_cow + 12, dtype, device), tile, overlap_mb)
    parent, own, full = (cache.new_sequence() for _ in range(3))
    for seq, t in ((parent, BS + 1 + seed % (BS - 1)), (own, BS + 1), (full, 2 * BS)):
        cache.append_token_batch([seq], rnd(t), rnd(t), n_tokens=t)
    kids = [parent.fork() for _ in range(n_cow)]
    bits(cache.kv)[:, :, list(cache.pool.free_blocks)] = 0xFF
    before, seqs = cache.kv.clone(), kids + [own, full]
    k, v = rnd(len(seqs)), rnd(len(seqs))
    pairs = cache.append_token_batch(seqs, k, v)
    exp = before.clone()
    for s, d in pairs:
        exp[:, :, d] = before[:, :, s]
    for i, seq in enumerate(seqs):
        exp[:, 0, seq.blocks[-1], :, (seq.length - 1) % BS] = k[:, i].to(dtype)
        exp[:, 1, seq.blocks[-1], :, (seq.length - 1) % BS] = v[:, i].to(dtype)
    checks = [torch.equal(bits(cache.kv), bits(exp)), [s for s, _ in pairs] == [parent.blocks[-1]] * n_cow,
              cache.clone_calls == int(n_cow > 0), int(cache.pool.ref_count[parent.blocks[-1]]) == 1,
              len({d for _, d in pairs}) == n_cow]
    return all(checks), len(checks)


def check_direct(design, dtype, L, H, D, BS, n, device, seed, tile=None, overlap_mb=None):
    """E（Cloner 的 "E"）或 B（博客逐层的 kernel）直接克隆 n 个随机块对。返回 (逐位正确, 1)。"""
    g = torch.Generator().manual_seed(seed)
    kv = torch.randn((L, 2, 2 * n + 3, H, BS, D), generator=g).to(dtype).to(device)
    perm = torch.randperm(kv.shape[2], generator=g).tolist()
    src, dst = perm[:n], perm[n:2 * n]
    bits(kv)[:, :, dst] = 0xFF
    exp = kv.clone()
    exp[:, :, dst] = kv[:, :, src]
    if design == "E":
        patched(lambda: kvc.Cloner(kv, "E", block=tile), None, overlap_mb)(src, dst)
    else:
        for layer in kv:
            kvc.clone_layer(layer[0], layer[1], src, dst)
    return torch.equal(bits(kv), bits(exp)), 1


def cases(shapes, on_gpu):
    """[(做法, dtype, L, H, D, BS, N, tile, OVERLAP_MIN_MB)]：CPU（解释器）上小形状、tile 32/64，让一块跨几个 tile、
    最后一个不满，OVERLAP_MIN_MB = 0 时走旁路上传；GPU 上再加每种真实形状在每条路径分界两侧的 N。"""
    k, out = kvc.ARG_PAIRS, []
    for i, dt in enumerate(("float16", "bfloat16", "float32")):
        tile = 32 * (1 + i % 2)
        out += [("C", dt, 2, 3, 7, 5, n, tile, None) for n in (0, 1, k, k + 1)] + [("C", dt, 2, 3, 7, 5, k + 1, tile, 0)]
        out += [("E", dt, 2, 3, 7, 5, n, tile, mb) for n, mb in ((1, None), (k + 1, 0))]
        out += [("B", dt, 2, 3, 7, 5, k + 1, None, None)]
    for s in shapes.values() if on_gpu else ():
        dims = (s["dtype"], s["n_layers"], s["n_heads"], s["head_dim"], s["block_size"])
        el = torch.empty(0, dtype=getattr(torch, s["dtype"])).element_size()
        f = kvc.overlap_from(s["n_layers"], s["n_heads"] * s["head_dim"] * s["block_size"], el)
        out += [("C", *dims, n, None, None) for n in (1, k, k + 1, f - 1, f)] + [("E", *dims, n, None, None)
                                                                                for n in (1, f - 1, f)]
    return out


def run_case(case, device, seed):
    """一个用例 → (逐位正确, 检查项数)。"""
    design, dt, L, H, D, BS, n, tile, mb = case
    if design == "C":
        return check_cow_write(getattr(torch, dt), L, H, D, BS, n, device, seed, tile, mb)
    return check_direct(design, getattr(torch, dt), L, H, D, BS, n, device, seed, tile, mb)
