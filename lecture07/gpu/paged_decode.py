"""GPU 上的分页 KV 缓存和它的写时复制分支（博客里 append_token_batch 的做法），再加一步 torch decode。

簿记（块表、ref_count、写时复制）全用 paged_kv.BlockPool / PagedSequence；模型是 lab_common.transformer_lab 的那一个
（RMSNorm + RoPE + GQA + SwiGLU），这里只把一步 decode 换成 torch 算子、K/V 存进分页缓存。

    cache = PagedKVCache(n_layers=2, n_kv_heads=2, head_dim=8, block_size=4, n_blocks=16)
    a = cache.new_sequence(); cache.append_token_batch([a], k, v, n_tokens=6)    # k, v: [L, T, H, D]
    kids = [a.fork() for _ in range(3)]                                         # 共享 a 的全部块
    cache.append_token_batch(kids, k1, v1)      # 最后一块没写满又被共享 → 3 个块对，一次 launch 拷完
"""
import torch
import torch.nn.functional as F

from gpu.clone_kernel import Cloner
from paged_kv import BlockPool, PagedSequence


class PagedKVCache:
    """存储是一整块 kv[L, 2, n_blocks, H, BS, D]；写时复制时 BlockPool 调 copy_fn，这里只记下 (src, dst)，
    一步里所有的块对最后用一次 Cloner 调用拷完（use_kernel=False：index_select + index_copy_，博客的"之前"）。"""

    def __init__(self, n_layers, n_kv_heads, head_dim, block_size, n_blocks, dtype=torch.float16, device="cpu",
                 use_kernel=True):
        self.pending, self.clone_calls = [], 0
        self.pool = BlockPool(None, n_blocks, block_size, copy_fn=lambda s, d: self.pending.append((s, d)))
        self.kv = torch.zeros((n_layers, 2, n_blocks, n_kv_heads, block_size, head_dim), dtype=dtype, device=device)
        self.cloner = Cloner(self.kv) if use_kernel else None

    def new_sequence(self):
        return PagedSequence(self.pool)

    def reserve(self, seqs, n_tokens):
        """每条序列接下来 n_tokens 个 token 的位置（块号、块内偏移两个列表）；COW 分支：共享且没写满的最后一块
        在 reserve 里换成新块，循环结束后这一步的块对一次拷完。返回 (块对, 块号, 偏移)；不改 length。"""
        blk, off = [], []
        for s in seqs:
            b, o = s.reserve(n_tokens)
            blk += b.tolist()
            off += o.tolist()
        pairs, self.pending = self.pending, []
        if pairs:
            src, dst = [p[0] for p in pairs], [p[1] for p in pairs]
            if self.cloner:
                self.cloner(src, dst)
            else:
                s, d = (torch.tensor(x, device=self.kv.device) for x in (src, dst))
                self.kv.index_copy_(2, d, self.kv.index_select(2, s))
            self.clone_calls += 1
        return pairs, blk, off

    def append_token_batch(self, seqs, k, v, n_tokens=1):
        """每条序列接着写 n_tokens 个 token（k、v：[L, len(seqs) × n_tokens, H, D]，按序列排），返回克隆的块对。"""
        pairs, blk, off = self.reserve(seqs, n_tokens)
        b, o = (torch.tensor(x, device=self.kv.device) for x in (blk, off))
        for j, x in enumerate((k, v)):            # 两个高级下标被切片隔开：结果维度是 [token, L, H, D]
            self.kv[:, j][:, b, :, o] = x.permute(1, 0, 2, 3).to(self.kv)
        for s in seqs:
            s.length += n_tokens
        return pairs

    def gather(self, seq):
        """按块表读出一条序列的 K/V：[L, 2, T, H, D]。"""
        x = self.kv[:, :, seq.blocks]
        L, _, nb, H, BS, D = x.shape
        return x.permute(0, 1, 2, 4, 3, 5).reshape(L, 2, nb * BS, H, D)[:, :, :seq.length]


def torch_params(params, device, dtype):
    """transformer_lab.init_params 的 numpy 权重 → torch 张量（同一个模型，换个后端）。"""
    def conv(a):
        return torch.as_tensor(a).to(device=device, dtype=dtype)
    return dict(embed=conv(params["embed"]), final_norm=conv(params["final_norm"]), lm_head=conv(params["lm_head"]),
                layers=[{k: conv(w) for k, w in p.items()} for p in params["layers"]])


def rmsnorm(x, g, eps):
    return x / torch.sqrt(torch.mean(x * x, dim=-1, keepdim=True) + eps) * g


def rope(x, pos, theta):
    """x: [B, H, hd]，pos: [B]。和 transformer_lab.rope 一样前后两半配对旋转。"""
    half = x.shape[-1] // 2
    freq = theta ** (-torch.arange(half, dtype=torch.float64, device=x.device) / half)
    ang = (pos.to(torch.float64)[:, None] * freq[None, :])[:, None, :]
    cos, sin = torch.cos(ang).to(x.dtype), torch.sin(ang).to(x.dtype)
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


def decode_step(tp, cfg, kv, tokens, table, seq_len):
    """B 条等长序列各算一个新 token（位置 seq_len − 1），返回 logits [B, vocab]。新 token 的 K/V 写进块表
    table[:, (seq_len − 1) // BS] 的第 (seq_len − 1) % BS 格；只有张量运算、没有主机同步：整步能捕获进 CUDA graph。"""
    B, (H, Hkv, hd, BS) = tokens.shape[0], (cfg.n_heads, cfg.n_kv_heads, cfg.head_dim, kv.shape[4])
    pos = torch.full((B,), seq_len - 1, device=kv.device)
    blk, slot = table[:, (seq_len - 1) // BS], (seq_len - 1) % BS
    x = tp["embed"][tokens]
    for li, p in enumerate(tp["layers"]):
        h = rmsnorm(x, p["attn_norm"], cfg.norm_eps)
        q = rope((h @ p["wq"]).view(B, H, hd), pos, cfg.rope_theta)
        kv[li, 0][blk, :, slot] = rope((h @ p["wk"]).view(B, Hkv, hd), pos, cfg.rope_theta)
        kv[li, 1][blk, :, slot] = (h @ p["wv"]).view(B, Hkv, hd)
        K, V = (kv[li, j][table].permute(0, 2, 1, 3, 4).reshape(B, Hkv, -1, hd)[:, :, :seq_len].repeat_interleave(
            H // Hkv, dim=1) for j in (0, 1))                                # [B, H, seq_len, hd]（GQA 复制）
        a = F.scaled_dot_product_attention(q[:, :, None], K, V)
        x = x + a.reshape(B, H * hd) @ p["wo"]
        h = rmsnorm(x, p["ffn_norm"], cfg.norm_eps)
        g = h @ p["w_gate"]
        x = x + (g * torch.sigmoid(g) * (h @ p["w_up"])) @ p["w_down"]      # SwiGLU
    return rmsnorm(x, tp["final_norm"], cfg.norm_eps) @ tp["lm_head"]
