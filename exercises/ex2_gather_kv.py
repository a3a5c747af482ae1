"""练习 2 · 按块表取回 K/V 再做注意力（约 25 分钟 · 难度 ★★☆ · 对应 02_paged_attention.py 的演示 2）

【任务】写 gather_kv(pool, layer, blocks, length)：一条序列的 KV 分散在块池的几个物理块里，
按它的块表 blocks（第 i 个逻辑块 → 物理块号）把第 layer 层的 K、V 拼回连续的一段，交给注意力。

  pool.k、pool.v 的形状：(n_layers, n_blocks, n_kv_heads, block_size, head_dim)
      pool.k[layer, b, h, j] = 物理块 b 里第 j 个位置、第 h 个 KV 头的 key 向量
  返回 (k, v)，形状都是 (n_kv_heads, length, head_dim)：
      k[h, t] = 这条序列第 t 个 token 的 key = 逻辑块 t // block_size 里的第 t % block_size 个位置
  最后一块可能没写满：只要前 length 个位置。返回 tuple 或 list 都行（调用者写的是 k, v = gather_kv(...)）。
  blocks 可能是 list，也可能是 numpy 的整数数组（paged_step 传的就是数组）；块大小不一定是 2 的幂，可能是 1。
  不要改 pool，也不要转换 dtype：分页版要和连续版逐位相同。

    例：块大小 2，blocks = [2, 0]，length = 3 → 第 0、1 个 token 在物理块 2，第 2 个 token 在物理块 0 的位置 0。

paged_kv.paged_step 每一层都调用 gather_kv，再把结果交给和连续 KV 缓存同一个 attend：
你写对了，分页版的 logits 和连续版逐位相同（max |diff| = 0.0）。
提示：numpy 的花式索引 pool.k[layer, blocks] 一次取出所有块；之后想清楚哪一维要和哪一维挨在一起
（transpose 再 reshape），最后切掉多余的位置。

【检查】make check EX=2：手算的几个小块池，再是随机的块池（块大小 1、3、5、16；只有一块、正好满块）和小模型解码。
【时间预算】每个用例里你的代码最多用参考实现的 10 倍时间（至少 1 秒）；超出时检查器会说用了多久、预算多少。
【--mine 用在】02_paged_attention.py（演示 2 最直接）、03_sharing_and_cow.py、04_prefix_caching.py（演示 2）：
  它们都经过 paged_step，paged_step 每一层都调用 gather_kv。python lecture07/02_paged_attention.py --mine --demo 2
参考实现：lecture07/paged_kv.py 的 gather_kv（写完之前别看）。
"""
import numpy as np  # noqa: F401  （写的时候用得上）


def gather_kv(pool, layer, blocks, length):
    """返回 (k, v)，形状 (n_kv_heads, length, head_dim)。"""
    # TODO：取出 blocks 这些物理块的第 layer 层 K、V，按块表的顺序拼接成连续的 length 个位置
    raise NotImplementedError
