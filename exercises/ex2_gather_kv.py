"""练习 2 · 按块表取回 K/V 再做注意力（约 25 分钟 · ★★☆ · 对应 02_paged_attention.py 的演示 2）

【任务】写 gather_kv(pool, layer, blocks, length)：一条序列的 KV 分散在块池的几个物理块里，
按它的块表 blocks（第 i 个逻辑块 → 物理块号）把第 layer 层的 K、V 拼回连续的一段，交给注意力。

  pool.k、pool.v 的形状：(n_layers, n_blocks, n_kv_heads, block_size, head_dim)；pool.block_size 每块几个 token
      pool.k[layer, b, h, j] = 物理块 b 里第 j 个位置、第 h 个 KV 头的 key 向量
  返回 (k, v)，形状都是 (n_kv_heads, length, head_dim)：
      k[h, t] = 这条序列第 t 个 token 的 key = 逻辑块 t // block_size 里的第 t % block_size 个位置
  - 最后一块可能没写满，也可能正好写满：只要前 length 个位置；
  - blocks 可能是 list，也可能是 numpy 的整数数组（int32 或 int64）；可能比 length 需要的长（后面的块不是这条
    序列的）；块大小不一定是 2 的幂，可能是 1；
  - 不要改 pool 和 blocks；不要转换 dtype（块池可能是 float64 也可能是 float32）：分页版要和连续版逐位相同。

    例：块大小 2，blocks = [2, 0]，length = 3 → 第 0、1 个 token 在物理块 2，第 2 个 token 在物理块 0 的位置 0。

写对了，paged_step 每层用你的 gather_kv 读块池，logits 和连续版逐位相同。提示：花式索引一次取出好几块；想清楚哪一维
要和哪一维挨在一起。

【检查】make check EX=2   【用在】lecture07/02_paged_attention.py --mine   【参考】paged_kv.py（写完再看）
"""
import numpy as np  # noqa: F401  （写的时候用得上）


def gather_kv(pool, layer, blocks, length):
    """返回 (k, v)，形状 (n_kv_heads, length, head_dim)。"""
    # TODO：取出 blocks 这些物理块的第 layer 层 K、V，按块表的顺序拼成连续的 length 个位置
    raise NotImplementedError
