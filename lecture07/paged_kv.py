"""分页 KV 缓存（一块 GPU 里面）：块池、块表、引用计数、写时复制，和按块表读 K/V 的注意力（PagedAttention 的 numpy 版）。

术语和 vLLM / nano-vllm 一致：
- 物理块（block）：块池里固定大小的一段 KV 存储，放 block_size 个 token；
- 块表（PagedSequence.blocks）：序列的第 i 个逻辑块 → 物理块号；
- ref_count：有几条序列（或前缀缓存）在用这个物理块；降到 0 就回到空闲表；
- 写时复制（copy-on-write）：要往一个 ref_count > 1、又没写满的块里写时，先复制一份自己的。nano-vllm 的
  BlockManager 没有这一步：它只共享写满的块（前缀缓存），没有 fork；这里 fork 出的序列共享没写满的最后一块。

    >>> from lab_common.transformer_lab import TINY, config_like, init_params
    >>> cfg = config_like(TINY, max_seq=32); params = init_params(cfg, seed=0)
    >>> pool = BlockPool(cfg, n_blocks=8, block_size=4)
    >>> a = PagedSequence(pool)
    >>> _ = paged_step(params, cfg, [a], [np.array([5, 6, 7, 8, 9])])   # 5 个 token → 2 个块
    >>> a.blocks, a.length
    ([0, 1], 5)
    >>> b = a.fork()                                          # 共享 a 的两个块：ref_count 都变成 2
    >>> _ = paged_step(params, cfg, [b], [np.array([3])])    # 块 1 没写满又被共享 → 复制成块 2 再写
    >>> b.blocks, pool.ref_count[:3].tolist(), pool.n_cow
    ([0, 2], [2, 1, 1], 1)
"""
from collections import deque

import numpy as np

from lab_common.transformer_lab import run_layers


def n_blocks(n_tokens, block_size):
    """n_tokens 个 token 占几个块：ceil(n_tokens / block_size)，最后一块可以不满。

    >>> n_blocks(1025, 512), n_blocks(1024, 512), n_blocks(0, 16)
    (3, 2, 0)
    """
    return -(-n_tokens // block_size)


def kv_bytes_per_token(attention, n_layers, n_heads, head_dim, n_kv_heads=None, kv_lora_rank=None, rope_dim=None,
                       dtype_bytes=2):
    """一个 token 的 KV 占多少字节 = 层数 × 每层存几个数 × 每个数几字节。每层存几个数看注意力的种类：

    - MHA：每个查询头一组 K、V → 2 × n_heads × head_dim；
    - GQA：n_kv_heads 组 K、V，每组由 n_heads / n_kv_heads 个查询头共用 → 2 × n_kv_heads × head_dim；
    - MQA：所有查询头共用一组 → 2 × head_dim；
    - MLA（DeepSeek-V2）：只存压缩向量 c_KV（kv_lora_rank 维）和带 RoPE 的 key（rope_dim 维）→
      kv_lora_rank + rope_dim，不乘 2（K 和 V 都由同一个 c_KV 还原出来）。

    >>> kv_bytes_per_token("GQA", 80, 64, 128, n_kv_heads=8)         # LLaMA2-70B：80 × 2 × 8 × 128 × 2 = 320 KiB
    327680
    >>> kv_bytes_per_token("MLA", 60, 128, 128, kv_lora_rank=512, rope_dim=64)   # DeepSeek-V2：60 × 576 × 2
    69120
    """
    if attention == "MHA":
        per_layer = 2 * n_heads * head_dim
    elif attention == "GQA":
        per_layer = 2 * n_kv_heads * head_dim
    elif attention == "MQA":
        per_layer = 2 * head_dim
    elif attention == "MLA":
        per_layer = kv_lora_rank + rope_dim
    else:
        raise ValueError(f"未知的注意力种类 {attention!r}：应为 MHA、GQA、MQA 或 MLA")
    return n_layers * per_layer * dtype_bytes


class BlockPool:
    """n_blocks 个物理块，所有层共用一个块号：第 b 块在每一层都有自己的 K/V。cfg=None 时只记账（ref_count、
    空闲表、写时复制），K/V 在别处，写时复制由 copy_fn(src, dst) 去拷：lecture07/gpu/paged_decode.py 就这样用它。"""

    def __init__(self, cfg, n_blocks, block_size, copy_fn=None):
        self.n_blocks, self.block_size, self.copy_fn = n_blocks, block_size, copy_fn
        self.k = self.v = None
        if cfg is not None:
            shape = (cfg.n_layers, n_blocks, cfg.n_kv_heads, block_size, cfg.head_dim)
            self.k = np.zeros(shape)     # (n_layers, n_blocks, n_kv_heads, block_size, head_dim)
            self.v = np.zeros(shape)
        self.ref_count = np.zeros(n_blocks, dtype=np.int64)
        self.free_blocks = deque(range(n_blocks))    # 空闲表：先进先出（和 nano-vllm 的 BlockManager 一样）
        self.n_cow = 0                                # 一共做过几次写时复制

    @property
    def num_free(self):
        return len(self.free_blocks)

    @property
    def num_used(self):
        return self.n_blocks - len(self.free_blocks)

    def alloc(self):
        """取空闲表头上的块，ref_count = 1。"""
        if not self.free_blocks:
            raise RuntimeError(f"块池满了：{self.n_blocks} 块都在用（真实系统此时会抢占某个请求）")
        b = self.free_blocks.popleft()
        self.ref_count[b] = 1
        return b

    def incref(self, b):                           # 多一个使用者（fork 出的序列、前缀缓存）
        assert self.ref_count[b] > 0, f"块 {b} 是空闲的"
        self.ref_count[b] += 1

    def decref(self, b):                           # 少一个使用者；降到 0 回到空闲表（内容不清零：下次分配时覆盖）
        assert self.ref_count[b] > 0, f"块 {b} 的 ref_count 已经是 0"
        self.ref_count[b] -= 1
        if self.ref_count[b] == 0:
            self.free_blocks.append(b)

    def copy_block(self, src):
        """写时复制：分配新块，把 src 在所有层的 K/V 整块拷过去，返回新块号。"""
        dst = self.alloc()
        if self.copy_fn is not None:
            self.copy_fn(src, dst)
        if self.k is not None:
            self.k[:, dst] = self.k[:, src]
            self.v[:, dst] = self.v[:, src]
        self.n_cow += 1
        return dst


class PagedSequence:
    """一条序列：块表 blocks（逻辑块 i → 物理块号）和已经写进 K/V 的 token 数 length。"""

    def __init__(self, pool):
        self.pool, self.blocks, self.length = pool, [], 0

    def fork(self):
        """一条共享全部块的新序列（并行采样、束搜索）：只加引用计数，不拷数据。"""
        child = type(self)(self.pool)
        child.blocks, child.length = list(self.blocks), self.length
        for b in self.blocks:
            self.pool.incref(b)
        return child

    def reserve(self, n):
        """为接下来的 n 个 token 准备好可写的位置，返回它们的 (物理块号, 块内偏移)，两个长度 n 的整数数组。
        不改 length：写完 K/V 的人（paged_step）再加。

        1. 最后一块没写满、又被共享（ref_count > 1）：写时复制，换成自己的一份——共享的旧块一个字节也不写；
        2. 再按需分配新块，直到放得下 length + n 个 token（分页：用多少分多少）。
        """
        pool, bs = self.pool, self.pool.block_size
        if n > 0 and self.length % bs != 0 and pool.ref_count[self.blocks[-1]] > 1:
            last = self.blocks[-1]
            self.blocks[-1] = pool.copy_block(last)
            pool.decref(last)
        while len(self.blocks) < n_blocks(self.length + n, bs):
            self.blocks.append(pool.alloc())
        pos = range(self.length, self.length + n)            # 这 n 个 token 在序列里的位置
        return (np.array([self.blocks[p // bs] for p in pos], dtype=np.int64),     # 物理块 = 块表的第 p // bs 项
                np.array([p % bs for p in pos], dtype=np.int64))                 # 块内偏移

    def free(self):                                # 请求结束、束被淘汰
        for b in self.blocks:
            self.pool.decref(b)
        self.blocks, self.length = [], 0


def gather_kv(pool, layer, blocks, length):
    """按块表把一条序列第 layer 层的 K/V 拼回连续的 (n_kv_heads, length, head_dim)：PagedAttention 的"查表"。"""
    k = pool.k[layer, blocks]                  # (len(blocks), n_kv_heads, block_size, head_dim)
    v = pool.v[layer, blocks]
    H, hd = k.shape[1], k.shape[3]
    k = k.transpose(1, 0, 2, 3).reshape(H, -1, hd)[:, :length]    # 逻辑块一个接一个：(n_kv_heads, 块数 × 块大小, hd)
    v = v.transpose(1, 0, 2, 3).reshape(H, -1, hd)[:, :length]
    return k, v


def paged_step(params, cfg, seqs, new_tokens, gather_kv=gather_kv):
    """每条序列接着自己的 KV 往后算 new_tokens[i] 个 token，返回每条的 logits (len(new_tokens[i]), vocab)。

    和 transformer_lab.forward 共用同一份层计算（run_layers），只有"K/V 存在哪、从哪取"不同：先为每条序列
    reserve（写时复制、分配新块），再逐层把新 K/V 按 (块, 偏移) 写进块池、用 gather_kv 按块表读回。
    新 token 数相同的序列一起过一次 run_layers（束搜索、并行采样的一步就是这样）：每条的结果和单独算逐位相同。
    gather_kv：按块表读 K/V 的函数（--mine 时是练习 2 里学生写的）。
    """
    toks = [np.asarray(t) for t in new_tokens]
    starts = [s.length for s in seqs]
    where = [s.reserve(len(t)) for s, t in zip(seqs, toks)]          # 每条的 (物理块号, 块内偏移)
    tables = [np.array(s.blocks, dtype=np.int64) for s in seqs]
    outs = [None] * len(seqs)
    for T in sorted({len(t) for t in toks}):                           # 新 token 数相同的一批
        idx = [i for i, t in enumerate(toks) if len(t) == T]

        def kv_io(layer, k, v):                                        # k, v: (批, n_kv_heads, T, head_dim)
            k_all, v_all = [], []
            for b, i in enumerate(idx):
                pool, (blk, off) = seqs[i].pool, where[i]
                pool.k[layer, blk, :, off] = k[b].transpose(1, 0, 2)     # 散写：第 t 个新 token → (blk[t], off[t])
                pool.v[layer, blk, :, off] = v[b].transpose(1, 0, 2)
                kb, vb = gather_kv(pool, layer, tables[i], starts[i] + T)
                k_all.append(kb)
                v_all.append(vb)
            return k_all, v_all

        x = params["embed"][np.stack([toks[i] for i in idx])]          # (批, T, d_model)
        pos = np.stack([np.arange(starts[i], starts[i] + T) for i in idx])
        for i, o in zip(idx, run_layers(params, cfg, x, pos, kv_io)):
            outs[i] = o
    for s, s0, t in zip(seqs, starts, toks):
        s.length = s0 + len(t)
    return outs
