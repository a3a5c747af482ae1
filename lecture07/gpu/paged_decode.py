"""GPU 上的分页 KV 缓存和它的写时复制分支（博客里 append_token_batch 的做法；簿记全用 paged_kv.BlockPool /
PagedSequence），再加 lab_common.transformer_lab 那个模型的一步 decode，换成 torch 算子、K/V 存进分页缓存。"""
import torch
import torch.nn.functional as F

from gpu.clone_kernel import Cloner
from paged_kv import BlockPool, PagedSequence


class PagedKVCache:
    """存储是一整块 kv[L, 2, n_blocks, H, BS, D]；写时复制时 BlockPool 调 copy_fn，这里只记下 (src, dst)，一步里所有的
    块对最后用一次 Cloner 调用拷完（options 交给 Cloner）。"""

    def __init__(self, n_layers, n_kv_heads, head_dim, block_size, n_blocks, dtype=torch.float16, device="cpu",
                 **options):
        self.pending, self.clone_calls = [], 0
        self.pool = BlockPool(None, n_blocks, block_size, copy_fn=lambda s, d: self.pending.append((s, d)))
        self.kv = torch.zeros((n_layers, 2, n_blocks, n_kv_heads, block_size, head_dim), dtype=dtype, device=device)
        self.cloner = Cloner(self.kv, **options)

    def reserve(self, seqs, n_tokens):
        """每条序列接下来 n_tokens 个 token 的位置；COW 分支：共享且没写满的最后一块在 PagedSequence.reserve 里换成新块，
        这一步的块对最后一次拷完。返回 (块对, 块号列表, 块内偏移列表)；不改 length。"""
        where = [s.reserve(n_tokens) for s in seqs]
        blk, off = ([x for w in where for x in w[j].tolist()] for j in (0, 1))
        pairs, self.pending = self.pending, []
        if pairs:
            self.cloner([p[0] for p in pairs], [p[1] for p in pairs])
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


def torch_params(params, device, dtype):
    """transformer_lab.init_params 的 numpy 权重 → torch 张量（同一个模型，换个后端）。"""
    conv = lambda a: torch.as_tensor(a).to(device=device, dtype=dtype)       # noqa: E731
    return {k: [{n: conv(w) for n, w in p.items()} for p in v] if k == "layers" else conv(v) for k, v in params.items()}


def decode_step(tp, cfg, kv, tokens, table, seq_len):
    """B 条等长序列各算一个新 token（位置 seq_len − 1，K/V 写进块表里那一格），返回 logits [B, vocab]。没有主机同步：
    整步能捕获进 CUDA graph。RMSNorm、RoPE（前后两半配对旋转）、GQA、SwiGLU 都和 transformer_lab 的一样。"""
    B, H, Hkv, hd, BS, x = tokens.shape[0], cfg.n_heads, cfg.n_kv_heads, cfg.head_dim, kv.shape[4], tp["embed"][tokens]
    half, blk, slot = hd // 2, table[:, (seq_len - 1) // BS], (seq_len - 1) % BS
    ang = (seq_len - 1) * cfg.rope_theta ** (-torch.arange(half, dtype=torch.float64, device=kv.device) / half)
    cos, sin = torch.cos(ang).to(x.dtype), torch.sin(ang).to(x.dtype)

    def rope(t):
        return torch.cat([t[..., :half] * cos - t[..., half:] * sin, t[..., :half] * sin + t[..., half:] * cos], dim=-1)

    def norm(t, g):
        return t / torch.sqrt(torch.mean(t * t, dim=-1, keepdim=True) + cfg.norm_eps) * g
    for li, p in enumerate(tp["layers"]):
        h = norm(x, p["attn_norm"])
        q = rope((h @ p["wq"]).view(B, H, hd))
        kv[li, 0][blk, :, slot] = rope((h @ p["wk"]).view(B, Hkv, hd))
        kv[li, 1][blk, :, slot] = (h @ p["wv"]).view(B, Hkv, hd)
        K, V = (kv[li, j][table].permute(0, 2, 1, 3, 4).reshape(B, Hkv, -1, hd)[:, :, :seq_len].repeat_interleave(
            H // Hkv, dim=1) for j in (0, 1))                                # [B, H, seq_len, hd]（GQA 复制）
        x = x + F.scaled_dot_product_attention(q[:, :, None], K, V).reshape(B, H * hd) @ p["wo"]
        h = norm(x, p["ffn_norm"])
        g = h @ p["w_gate"]
        x = x + (g * torch.sigmoid(g) * (h @ p["w_up"])) @ p["w_down"]      # SwiGLU
    return norm(x, tp["final_norm"]) @ tp["lm_head"]
