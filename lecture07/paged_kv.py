"""分页 KV 缓存（PagedAttention 的 numpy 版）：块池、块表、引用计数、写时复制。

术语和 vLLM / nano-vllm 一致：
- 物理块（block）：块池里固定大小的一段 KV 存储，能放 block_size 个 token；
- 块表（block_table，这里是 PagedSequence.blocks）：序列的第 i 个逻辑块 → 物理块号；
- ref_count：有几个序列（或前缀缓存）在用这个物理块；降到 0 就回到空闲表；
- 写时复制（copy-on-write，COW）：要往一个 ref_count > 1 的块里写时，先复制一份自己的。
另有一个小函数：kv_bytes_per_token（每个 token 的 KV 有多大，MHA/GQA/MQA/MLA）。

    >>> from lab_common.transformer_lab import TINY, config_like, init_params
    >>> cfg = config_like(TINY, max_seq=32); params = init_params(cfg, seed=0)
    >>> pool = BlockPool(cfg, n_blocks=8, block_size=4)
    >>> a = PagedSequence(pool)
    >>> _ = paged_step(params, cfg, [a], [np.array([5, 6, 7, 8, 9])])   # 5 个 token → 2 个块
    >>> a.blocks, a.length
    ([0, 1], 5)
    >>> b = a.fork()            # 共享 a 的两个块：ref_count 都变成 2
    >>> _ = paged_step(params, cfg, [b], [np.array([3])])   # 块 1 没写满又被共享 → 复制成块 2 再写
    >>> b.blocks, pool.ref_count[:3].tolist(), pool.n_cow
    ([0, 2], [2, 1, 1], 1)
"""
from collections import deque

import numpy as np

from lab_common.transformer_lab import run_layers


def n_blocks(n_tokens, block_size):
    """n_tokens 个 token 要占几个块：ceil(n_tokens / block_size)，最后一块可以不满。

    >>> n_blocks(1025, 512), n_blocks(1024, 512), n_blocks(0, 16)
    (3, 2, 0)
    """
    return -(-n_tokens // block_size)


KV_ATTENTION = ("MHA", "GQA", "MQA", "MLA")


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
        raise ValueError(f"未知的注意力种类 {attention!r}；可选：{', '.join(KV_ATTENTION)}")
    return n_layers * per_layer * dtype_bytes


class OutOfBlocks(RuntimeError):
    """块池用完了（真实系统此时会抢占 / 换出某个请求）。"""


class BlockPool:
    """所有层共用一张块表：第 b 个物理块在每一层都有自己的 K/V 存储。

    copy_fn(src, dst)：写时复制时由谁搬数据。默认 None = 拷这里的 numpy 存储；
    cfg=None 时只做簿记（ref_count、空闲表、写时复制），K/V 存在别处（比如 GPU 上的 torch 张量），
    由 copy_fn 去拷——06 的 GPU 版就这样复用这一个类：

    >>> pairs = []
    >>> pool = BlockPool(None, n_blocks=4, block_size=2, copy_fn=lambda s, d: pairs.append((s, d)))
    >>> a = PagedSequence(pool); _ = a.reserve(3); a.length = 3     # 3 个 token：块 0 满、块 1 写了 1 个
    >>> b = a.fork()
    >>> _ = b.reserve(1)        # 块 1 只写了 1 个 token 又被共享 → 复制成块 2
    >>> b.blocks, pairs, pool.ref_count.tolist()
    ([0, 2], [(1, 2)], [2, 1, 1, 0])
    """

    def __init__(self, cfg, n_blocks, block_size, copy_fn=None):
        if n_blocks <= 0 or block_size <= 0:
            raise ValueError(f"n_blocks 和 block_size 必须是正数（收到 {n_blocks}, {block_size}）")
        self.cfg, self.n_blocks, self.block_size = cfg, n_blocks, block_size
        self.copy_fn = copy_fn
        self.k = self.v = None     # cfg=None：只做簿记，存储在别处
        if cfg is not None:
            shape = (cfg.n_layers, n_blocks, cfg.n_kv_heads, block_size, cfg.head_dim)
            self.k = np.zeros(shape)   # (n_layers, n_blocks, n_kv_heads, block_size, head_dim)
            self.v = np.zeros(shape)
        self.ref_count = np.zeros(n_blocks, dtype=np.int64)
        self.free_blocks = deque(range(n_blocks))   # 空闲表：先进先出
        self.n_cow = 0                               # 发生过几次写时复制（给演示统计用）

    @property
    def num_free(self):
        return len(self.free_blocks)

    @property
    def num_used(self):
        return self.n_blocks - len(self.free_blocks)

    def alloc(self):
        """取一个空闲块，ref_count = 1。"""
        if not self.free_blocks:
            raise OutOfBlocks(f"块池已满：{self.n_blocks} 个块（每块 {self.block_size} 个 token）都在用")
        b = self.free_blocks.popleft()
        self.ref_count[b] = 1
        return b

    def incref(self, b):
        """多一个使用者（共享前缀、fork 出的样本、前缀缓存本身）。"""
        if self.ref_count[b] <= 0:
            raise ValueError(f"块 {b} 是空闲的，不能 incref")
        self.ref_count[b] += 1

    def decref(self, b):
        """少一个使用者；降到 0 时块回到空闲表（内容不清零，下次分配时会被覆盖）。"""
        if self.ref_count[b] <= 0:
            raise ValueError(f"块 {b} 的 ref_count 已经是 0，不能再 decref")
        self.ref_count[b] -= 1
        if self.ref_count[b] == 0:
            self.free_blocks.append(b)

    def copy_block(self, src):
        """写时复制：分配新块，把 src 在所有层的 K/V 整块拷过去（或交给 copy_fn），返回新块号。"""
        dst = self.alloc()
        if self.copy_fn is not None:
            self.copy_fn(src, dst)
        else:
            self.k[:, dst] = self.k[:, src]
            self.v[:, dst] = self.v[:, src]
        self.n_cow += 1
        return dst


class PagedSequence:
    """一条序列：块表 blocks（逻辑块 i → 物理块号）和已经写入的 token 数 length。"""

    def __init__(self, pool):
        self.pool, self.blocks, self.length = pool, [], 0

    def fork(self):
        """复制出一条共享全部块的序列（并行采样、束搜索）：只加引用计数，不拷数据。"""
        child = type(self)(self.pool)              # 子类 fork 出的还是子类
        child.blocks, child.length = list(self.blocks), self.length
        for b in self.blocks:
            self.pool.incref(b)
        return child

    def free(self):
        for b in self.blocks:
            self.pool.decref(b)
        self.blocks, self.length = [], 0

    def reserve(self, n):
        """为接下来的 n 个 token 准备好可写的位置，返回它们的 (物理块, 块内偏移)。

        - 最后一块没写满、而且被共享（ref_count > 1）→ 写时复制，换成自己的一份；
        - 不够的位置按需分配新块（分页的意义：用多少分多少）。
        """
        pool, bs = self.pool, self.pool.block_size
        if n > 0 and self.length % bs != 0:
            last = self.blocks[-1]
            if pool.ref_count[last] > 1:
                self.blocks[-1] = pool.copy_block(last)   # 先复制再 decref：旧块绝不会被写
                pool.decref(last)
        need = n_blocks(self.length + n, bs) - len(self.blocks)
        for _ in range(need):
            self.blocks.append(pool.alloc())
        pos = range(self.length, self.length + n)    # 这 n 个 token 在序列里的位置（n 常常是 1：不值得用 numpy 算）
        return (np.array([self.blocks[p // bs] for p in pos], dtype=np.int64),   # 物理块 = 块表的第 p // bs 项
                np.array([p % bs for p in pos], dtype=np.int64))                 # 块内偏移


def gather_kv(pool, layer, blocks, length):
    """按块表把一条序列的 K/V 拼回连续的 (n_kv_heads, length, head_dim)——PagedAttention 的"查表"。"""
    k = pool.k[layer, blocks]          # (n_blocks_of_seq, n_kv_heads, block_size, head_dim)
    v = pool.v[layer, blocks]
    H, hd = k.shape[1], k.shape[3]
    k = k.transpose(1, 0, 2, 3).reshape(H, -1, hd)[:, :length]
    v = v.transpose(1, 0, 2, 3).reshape(H, -1, hd)[:, :length]
    return k, v


def paged_step(params, cfg, seqs, new_tokens):
    """每条序列接着自己的 KV 往后算 new_tokens[i]，返回每条的 logits (len(new), vocab)。

    和 transformer_lab.forward 共用同一份层计算（run_layers），只是 K/V 写进块池、按块表读出。
    新 token 数相同的序列一起过一次 run_layers（x: (B, T, d)，束搜索、并行采样的一步就是这样）；
    每条的结果与单独算时逐位相同。先按顺序为每条序列 reserve（写时复制、分配新块），再逐层
    按顺序"散写这条的 K/V、按块表读回"。
    """
    toks = [np.asarray(t) for t in new_tokens]
    starts = [seq.length for seq in seqs]
    where = [seq.reserve(len(t)) for seq, t in zip(seqs, toks)]       # 每条的 (物理块, 块内偏移)
    tables = [np.asarray(seq.blocks, dtype=np.int64) for seq in seqs]
    outs = [None] * len(seqs)
    by_len = {}
    for i, t in enumerate(toks):                   # 新 token 数相同的序列一批
        by_len.setdefault(len(t), []).append(i)
    for T, idx in by_len.items():
        def kv_io(layer, k, v, idx=idx, T=T):      # k, v: (B, n_kv_heads, T, head_dim)
            k_all, v_all = [], []
            for b, i in enumerate(idx):
                pool, (blk, off) = seqs[i].pool, where[i]
                pool.k[layer, blk, :, off] = k[b].transpose(1, 0, 2)   # 按 (块, 偏移) 散写
                pool.v[layer, blk, :, off] = v[b].transpose(1, 0, 2)
                kb, vb = gather_kv(pool, layer, tables[i], starts[i] + T)
                k_all.append(kb)
                v_all.append(vb)
            return k_all, v_all

        x = params["embed"][np.stack([toks[i] for i in idx])]          # (B, T, d_model)
        pos = np.stack([np.arange(starts[i], starts[i] + T) for i in idx])
        for i, o in zip(idx, run_layers(params, cfg, x, pos, kv_io)):
            outs[i] = o
    for seq, s0, t in zip(seqs, starts, toks):
        seq.length = s0 + len(t)
    return outs
