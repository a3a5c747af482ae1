"""GPU 上的分页 decode：KV 存储（PagedKVCache）和一步 decode（decode_step），都用 torch。

模型就是 lab_common.transformer_lab 的那一个（RMSNorm + RoPE + GQA + SwiGLU，权重来自 init_params），
这里只是把 run_layers 的一步 decode 换成 torch 算子、K/V 存进分页缓存；簿记（块表、ref_count、
写时复制）全用 paged_kv.BlockPool / PagedSequence。float64 下它与 paged_kv.paged_step 的 logits
相差不到 1e-12（测试会查），06 用它在 GPU 上量"克隆占一步 decode 的多少"。

    cache = PagedKVCache(cfg.n_layers, cfg.n_kv_heads, cfg.head_dim, block_size=16, n_blocks=64)
    a = cache.new_sequence(); cache.prefill(a, k, v)          # k, v: [L, T, H_kv, hd]
    kids = [a.fork() for _ in range(4)]                        # 共享 a 的全部块
    pairs, _, _ = cache.reserve(kids, 1)                       # 最后一块没写满 → 4 个块对，一次拷完
"""
import torch
import torch.nn.functional as F

from gpu.clone_kernel import check_cache, kernel_available, kv_clone_blocks_all
from paged_kv import BlockPool, PagedSequence


class PagedKVCache:
    """GPU 上的分页 KV 缓存：存储是一整块 kv[L, 2, n_blocks, H, BS, D]，簿记是 paged_kv.BlockPool。

    写时复制时 BlockPool 调 copy_fn，这里只记下 (src, dst)；reserve 结束前把这一步的所有块对
    用一次 kv_clone_blocks_all 拷完（所有层、K 和 V，kernel 路径下是一次 launch）。
    """

    def __init__(self, n_layers, n_kv_heads, head_dim, block_size, n_blocks, dtype=torch.float16,
                 device="cpu", use_kernel=None):
        self.pending = []
        self.pool = BlockPool(None, n_blocks, block_size, copy_fn=lambda s, d: self.pending.append((s, d)))
        self.kv = torch.zeros((n_layers, 2, n_blocks, n_kv_heads, block_size, head_dim), dtype=dtype,
                              device=device)
        check_cache("kv", self.kv, 6)
        self.use_kernel = use_kernel
        if use_kernel is None:
            self.use_kernel = kernel_available(device)
        self.clone_calls = 0

    def new_sequence(self):
        return PagedSequence(self.pool)

    def reserve(self, seqs, n_tokens):
        """为每条序列接下来的 n_tokens 个 token 准备位置；返回 (这一步克隆的块对, 块号列表, 块内偏移列表)。

        共享且没写满的最后一块 → BlockPool.copy_block → copy_fn 记下块对；循环结束后一次拷完。
        和 PagedSequence.reserve 一样不改 length：写完 K/V 的人再加。
        """
        blk, off = [], []
        for s in seqs:
            b, o = s.reserve(n_tokens)
            blk += b.tolist()
            off += o.tolist()
        pairs, self.pending = self.pending, []
        if pairs:
            kv_clone_blocks_all(self.kv, [p[0] for p in pairs], [p[1] for p in pairs], self.use_kernel)
            self.clone_calls += 1
        return pairs, blk, off

    def write(self, seqs, k, v, n_tokens=1):
        """每条序列接着写 n_tokens 个 token：k/v 形状 [L, len(seqs) × n_tokens, H, D]（按序列排）。"""
        pairs, blk, off = self.reserve(seqs, n_tokens)
        b = torch.tensor(blk, device=self.kv.device)
        o = torch.tensor(off, device=self.kv.device)
        # 两个高级下标（块、块内位置）被切片隔开：结果维度是 [token, L, H, D]
        self.kv[:, 0][:, b, :, o] = k.permute(1, 0, 2, 3).to(self.kv)
        self.kv[:, 1][:, b, :, o] = v.permute(1, 0, 2, 3).to(self.kv)
        for s in seqs:
            s.length += n_tokens
        return pairs

    def prefill(self, seq, k, v):
        """一条序列一次写入 T 个 token 的 K/V（k/v 形状 [L, T, H, D]）。"""
        return self.write([seq], k, v, n_tokens=k.shape[1])

    def gather(self, seq):
        """按块表读出一条序列的 K/V：[L, 2, T, H, D]。"""
        x = self.kv[:, :, seq.blocks]                                  # [L, 2, nb, H, BS, D]
        L, _, nb, H, BS, D = x.shape
        return x.permute(0, 1, 2, 4, 3, 5).reshape(L, 2, nb * BS, H, D)[:, :, :seq.length]


# ─────────────────────────── 一步 decode（transformer_lab.run_layers 的 torch 版） ───────────────────────────
def torch_params(params, device, dtype):
    """transformer_lab.init_params 的 numpy 权重 → torch 张量（同一个模型，换个后端）。"""
    def conv(a):
        return torch.as_tensor(a).to(device=device, dtype=dtype)
    layers = [{k: conv(w) for k, w in p.items()} for p in params["layers"]]
    return dict(embed=conv(params["embed"]), final_norm=conv(params["final_norm"]),
                lm_head=conv(params["lm_head"]), layers=layers)


def rmsnorm(x, g, eps):
    return x / torch.sqrt(torch.mean(x * x, dim=-1, keepdim=True) + eps) * g


def rope(x, pos, theta):
    """x: [B, H, hd]，pos: [B]（每条序列这个 token 的绝对位置）。和 transformer_lab.rope 一样前后两半配对旋转。"""
    half = x.shape[-1] // 2
    freq = theta ** (-torch.arange(half, dtype=torch.float64, device=x.device) / half)
    ang = (pos.to(torch.float64)[:, None] * freq[None, :])[:, None, :]      # [B, 1, half]
    cos, sin = torch.cos(ang).to(x.dtype), torch.sin(ang).to(x.dtype)
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


def decode_step(tp, cfg, kv, tokens, table, seq_len):
    """B 条等长序列各算一个新 token（位置 seq_len − 1），返回 logits [B, vocab]。

    kv: [L, 2, n_blocks, H_kv, BS, hd]；table: [B, nb] 块表（long）；新 token 的 K/V 写进
    table[:, (seq_len−1) // BS] 的第 (seq_len−1) % BS 格，再按块表把 K/V 拼回连续的、交给
    F.scaled_dot_product_attention。只有张量运算、没有主机同步：整步可以捕获进 CUDA graph。
    """
    B = tokens.shape[0]
    H, Hkv, hd, BS = cfg.n_heads, cfg.n_kv_heads, cfg.head_dim, kv.shape[4]
    pos = torch.full((B,), seq_len - 1, device=kv.device)
    blk = table[:, (seq_len - 1) // BS]
    slot = (seq_len - 1) % BS
    x = tp["embed"][tokens]                                                  # [B, d]
    for li, p in enumerate(tp["layers"]):
        h = rmsnorm(x, p["attn_norm"], cfg.norm_eps)
        q = rope((h @ p["wq"]).view(B, H, hd), pos, cfg.rope_theta)
        k = rope((h @ p["wk"]).view(B, Hkv, hd), pos, cfg.rope_theta)
        kv[li, 0][blk, :, slot] = k                                          # 高级下标被切片隔开：[B, H_kv, hd]
        kv[li, 1][blk, :, slot] = (h @ p["wv"]).view(B, Hkv, hd)
        K, V = (kv[li, j][table].permute(0, 2, 1, 3, 4).reshape(B, Hkv, -1, hd)[:, :, :seq_len]
                for j in (0, 1))                                              # [B, H_kv, seq_len, hd]
        K, V = K.repeat_interleave(H // Hkv, dim=1), V.repeat_interleave(H // Hkv, dim=1)   # GQA
        a = F.scaled_dot_product_attention(q[:, :, None], K, V)              # [B, H, 1, hd]
        x = x + a.reshape(B, H * hd) @ p["wo"]
        h = rmsnorm(x, p["ffn_norm"], cfg.norm_eps)
        g = h @ p["w_gate"]
        x = x + (g * torch.sigmoid(g) * (h @ p["w_up"])) @ p["w_down"]      # SwiGLU
    return rmsnorm(x, tp["final_norm"], cfg.norm_eps) @ tp["lm_head"]
