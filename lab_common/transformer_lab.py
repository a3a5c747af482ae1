"""CS349E 第 2 讲的小模型：纯 numpy、float64 的 decoder-only transformer（LLaMA 风格）。

RMSNorm + RoPE + 分组查询注意力（GQA）+ SwiGLU，和 LLaMA 的结构一样，所以后面几讲
按真实模型算 KV 大小（n_layers × n_kv_heads × head_dim × 2 × 字节数）时，公式是对得上的。

    cfg = config_like(TINY, max_seq=128)
    params = init_params(cfg, seed=0)
    cache = KVCache(cfg, batch=1)
    logits = forward(params, cfg, np.array([[1, 2, 3]]), cache)    # (1, 3, vocab)
    logits = forward(params, cfg, np.array([[4]]), cache)          # 接着缓存往后算一个 token

第 7 讲的 paged_kv 复用这里的 run_layers：它只换掉"K/V 存在哪、从哪取"这一步（kv_io 回调），
其余计算完全相同——所以分页版和连续版的 logits 可以做到逐位相等（max |diff| = 0.0）。

逐位相等的一个陷阱：BLAS 的矩阵乘法对不同的行数 M 可能走不同的内核（求和顺序不同，
结果差 1e-16 量级）。所以这里的线性层用 np.einsum（numpy 自己的循环，每一行的求和顺序
与行数无关），注意力的分母（softmax 的 Σ）补零到固定长度 max_seq 再求和（见 attend）。
"""
from dataclasses import dataclass, replace

import numpy as np


@dataclass(frozen=True)
class Config:
    vocab: int = 256          # 词表大小
    d_model: int = 64         # 隐藏维度
    n_layers: int = 2         # 层数
    n_heads: int = 4          # 查询头数
    n_kv_heads: int = 2       # K/V 头数（GQA：每 n_heads // n_kv_heads 个查询头共用一组 K/V）
    d_ff: int = 176           # SwiGLU 的中间维度
    max_seq: int = 256        # 连续 KVCache 预留的最大长度
    rope_theta: float = 10000.0
    norm_eps: float = 1e-6

    @property
    def head_dim(self):
        return self.d_model // self.n_heads


TINY = Config()


def config_like(cfg, **changes):
    """复制一个配置并改几个字段：config_like(TINY, max_seq=512)。"""
    return replace(cfg, **changes)


def init_params(cfg, seed):
    """随机初始化（固定种子 → 固定权重）。权重形状都写成 (输入维, 输出维)，x @ W。"""
    rng = np.random.default_rng(seed)
    d, hd = cfg.d_model, cfg.head_dim

    def w(n_in, n_out):
        return rng.normal(0.0, 1.0 / np.sqrt(n_in), (n_in, n_out))

    layers = []
    for _ in range(cfg.n_layers):
        layers.append(dict(
            attn_norm=np.ones(d), wq=w(d, cfg.n_heads * hd), wk=w(d, cfg.n_kv_heads * hd),
            wv=w(d, cfg.n_kv_heads * hd), wo=w(cfg.n_heads * hd, d),
            ffn_norm=np.ones(d), w_gate=w(d, cfg.d_ff), w_up=w(d, cfg.d_ff), w_down=w(cfg.d_ff, d)))
    return dict(embed=rng.normal(0.0, 1.0, (cfg.vocab, d)), layers=layers,
                final_norm=np.ones(d), lm_head=w(d, cfg.vocab))


class KVCache:
    """连续的 KV 缓存：每个序列按 max_seq 预留一整段（第 1、2 个脚本对比的就是这种做法）。"""

    def __init__(self, cfg, batch):
        shape = (cfg.n_layers, batch, cfg.n_kv_heads, cfg.max_seq, cfg.head_dim)
        self.k = np.zeros(shape)  # (n_layers, batch, n_kv_heads, max_seq, head_dim)
        self.v = np.zeros(shape)
        self.length = 0           # 已经存了多少个位置（批里所有序列一样长）


# ---------------------------------------------------------------- 基本运算
def linear(x, w):
    """x (..., n_in) @ w (n_in, n_out)。用 einsum 而不是 @：每一行的结果与一次算几行无关。"""
    return np.einsum("...i,io->...o", x, w)


def rmsnorm(x, g, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * g


def rope_angles(pos, half, theta):
    """rope 的 (cos, sin)：(T, half)，或 pos 是 (B, T) 时 (B, 1, T, half)（对所有头广播）。一次前向里 q、k 和
    每一层的位置都一样，run_layers 只算一次。"""
    freq = theta ** (-np.arange(half) / half)          # (half,)
    ang = pos[..., None] * freq                         # (T, half) 或 (B, T, half)
    cos, sin = np.cos(ang), np.sin(ang)
    if pos.ndim == 2:
        cos, sin = cos[:, None], sin[:, None]
    return cos, sin


def rotate(x, cos, sin):
    """按 rope_angles 给的角度旋转 x 的前后两半。"""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return np.concatenate([x1 * cos - x2 * sin, x1 * sin + x2 * cos], axis=-1)


QUERY_BLOCK = 64          # attend 一次最多算这么多个查询：长的 prefill 按块算（见 attend）


def attend(q, k, v, q_pos, pad_to):
    """因果注意力。q: (H, T, hd)，k/v: (H_kv, L, hd)，q_pos: (T,) 每个查询的绝对位置；查询 i 只看位置 0..q_pos[i]。

    一批 B 条序列：q: (B, H, T, hd)，k/v: B 个 (H_kv, L_b, hd) 的列表（长度可以不同），q_pos: (B, T)。
    每一行的求和顺序都与"一起算了几条、几个 token，缓存里已有多少"无关，所以整段 prefill、逐个 decode、
    成批或单独算，结果逐位相同：分子 Σ p·v 由 einsum 逐个位置累加（补的 0 不改变任何一位）；分母 Σ p 用的
    numpy sum 是成对求和、分组随长度变，所以先补零到固定长度 pad_to（= max_seq）再求和。
    T > QUERY_BLOCK 时按查询分块算，每块只乘到它最后一个查询的位置（后面的键本来就被遮住）。
    """
    if q.ndim == 3:
        return attend(q[None], [k], [v], q_pos[None], pad_to)[0]
    B, H, T, hd = q.shape
    if T > QUERY_BLOCK:
        return np.concatenate([attend(q[:, :, t:t + QUERY_BLOCK], k, v, q_pos[:, t:t + QUERY_BLOCK], pad_to)
                               for t in range(0, T, QUERY_BLOCK)], axis=2)
    Hkv = k[0].shape[0]
    L = max(kb.shape[1] for kb in k)
    if L > pad_to:
        raise ValueError(f"序列长度 {L} 超过了模型的 max_seq={pad_to}")
    L = min(L, int(q_pos.max(initial=0)) + 1)            # 比最后一个查询还靠后的键谁也看不见：不乘（initial：T 可以是 0）
    kp = np.zeros((B, Hkv, L, hd))
    vp = np.zeros((B, Hkv, L, hd))
    for b, (kb, vb) in enumerate(zip(k, v)):
        kb, vb = kb[:, :L], vb[:, :L]
        kp[b, :, :kb.shape[1]] = kb
        vp[b, :, :vb.shape[1]] = vb
    # GQA：第 h 个查询头用第 h // group 组 K/V。同组的 group 个查询头并成 group × T 行，K/V 不必复制
    group = H // Hkv
    qg = q.reshape(B, Hkv, group * T, hd)
    s = np.einsum("bkqd,bknd->bkqn", qg, kp).reshape(B, H, T, L) / np.sqrt(hd)   # (B, H, T, L)
    s = np.where(np.arange(L) <= q_pos[:, None, :, None], s, -np.inf)            # 因果遮罩
    p = np.zeros((B, H, T, pad_to))                      # 补零到 pad_to：给分母一个固定的求和长度
    p[..., :L] = np.exp(s - s.max(axis=-1, keepdims=True))   # 被遮住的位置：exp(-inf) = 0.0
    out = np.einsum("bkqn,bknd->bkqd", p[..., :L].reshape(B, Hkv, group * T, L), vp)
    return out.reshape(B, H, T, hd) / p.sum(axis=-1, keepdims=True)


# ---------------------------------------------------------------- 前向
def run_layers(params, cfg, x, pos, kv_io):
    """一条序列过所有层：x: (T, d_model)，pos: (T,)。kv_io(layer, k_new, v_new) 存下这 T 个新位置的 K/V
    （(H_kv, T, hd)），返回这条序列到目前为止的全部 K/V（(H_kv, L, hd)）：连续缓存和分页缓存只在这里不同。

    一批 B 条序列（各自接着自己的缓存，每条 T 个新 token）：x: (B, T, d_model)，pos: (B, T)；kv_io 收到
    (B, H_kv, T, hd)，返回 B 条各自的全部 K/V（两个列表）。每条的 logits 与单独算时逐位相同（见 attend）。
    """
    if x.ndim == 2:
        def one(li, k, v):
            k_all, v_all = kv_io(li, k[0], v[0])
            return [k_all], [v_all]
        return run_layers(params, cfg, x[None], pos[None], one)[0]
    H, Hkv, hd = cfg.n_heads, cfg.n_kv_heads, cfg.head_dim
    B, T = x.shape[:2]
    angles = rope_angles(pos, hd // 2, cfg.rope_theta)
    for li, p in enumerate(params["layers"]):
        h = rmsnorm(x, p["attn_norm"], cfg.norm_eps)
        # q、k、v 一次乘 [wq | wk | wv]（真实实现的 qkv_proj）：einsum 每一列单独累加，和分开乘逐位相同
        q, k, v = np.split(linear(h, np.concatenate([p["wq"], p["wk"], p["wv"]], axis=1)),
                           [H * hd, (H + Hkv) * hd], axis=-1)
        q = rotate(q.reshape(B, T, H, hd).transpose(0, 2, 1, 3), *angles)
        k = rotate(k.reshape(B, T, Hkv, hd).transpose(0, 2, 1, 3), *angles)
        v = v.reshape(B, T, Hkv, hd).transpose(0, 2, 1, 3)
        k_all, v_all = kv_io(li, k, v)
        a = attend(q, k_all, v_all, pos, cfg.max_seq)   # (B, H, T, hd)
        x = x + linear(a.transpose(0, 2, 1, 3).reshape(B, T, H * hd), p["wo"])
        h = rmsnorm(x, p["ffn_norm"], cfg.norm_eps)
        g, up = np.split(linear(h, np.concatenate([p["w_gate"], p["w_up"]], axis=1)), 2, axis=-1)   # 同上
        x = x + linear(g / (1.0 + np.exp(-g)) * up, p["w_down"])  # SwiGLU
    return linear(rmsnorm(x, params["final_norm"], cfg.norm_eps), params["lm_head"])


def forward(params, cfg, tokens, cache=None):
    """tokens: (B, T) 整数 → logits (B, T, vocab)。

    有 cache 时从 cache.length 接着算，并把新的 K/V 写进 cache；没有 cache 就是从头算。
    """
    tokens = np.atleast_2d(np.asarray(tokens))
    B, T = tokens.shape
    start = 0 if cache is None else cache.length
    if start + T > cfg.max_seq and cache is not None:
        raise ValueError(f"KVCache 放不下：已有 {start} 个位置，再加 {T} 个超过 max_seq={cfg.max_seq}")
    pos = np.arange(start, start + T)
    out = np.empty((B, T, cfg.vocab))
    for b in range(B):
        def kv_io(li, k, v, b=b):
            if cache is None:
                return k, v
            cache.k[li, b, :, start:start + T] = k
            cache.v[li, b, :, start:start + T] = v
            return cache.k[li, b, :, :start + T], cache.v[li, b, :, :start + T]
        out[b] = run_layers(params, cfg, params["embed"][tokens[b]], pos, kv_io)
    if cache is not None:
        cache.length = start + T
    return out
