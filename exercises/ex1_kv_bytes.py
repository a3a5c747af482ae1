"""练习 1 · 一个 token 的 KV 有多大？（约 15 分钟 · ★☆☆ · 对应 01_kv_cache_memory.py）

【任务】写 kv_bytes_per_token：一个 token 的 KV 缓存占多少字节。

    字节数 = 层数 × 每层每个 token 存几个数 × 每个数几字节（dtype_bytes：fp32 是 4，fp16/bf16 是 2，FP8 是 1）

"每层存几个数"看注意力的种类（attention）：
  - "MHA"：每个查询头都有自己的一组 K 和 V；
  - "GQA"：只有 n_kv_heads 组 K、V，每组由 n_heads / n_kv_heads 个查询头共用；
  - "MQA"：所有查询头共用一组 K、V；
  - "MLA"（DeepSeek-V2）：不存每个头的 K、V，只存一个 kv_lora_rank 维的压缩向量 c_KV 和一个 rope_dim 维
    的带 RoPE 的 key——K 和 V 都由同一个 c_KV 还原出来。
别忘了 K 和 V 是两份（MLA 除外：想想为什么）。n_kv_heads 只有 GQA 用；别的种类给了也用不上。
返回整数（int）：字节数不会是小数。不认识的 attention：raise ValueError。

    >>> kv_bytes_per_token("GQA", 80, 64, 128, n_kv_heads=8)     # LLaMA2-70B：应当是 320 KiB
    327680

【检查】make check EX=1   【用在】lecture07/01_kv_cache_memory.py --mine   【参考】paged_kv.py（写完再看）
"""


def kv_bytes_per_token(attention, n_layers, n_heads, head_dim, n_kv_heads=None, kv_lora_rank=None, rope_dim=None,
                       dtype_bytes=2):
    """attention："MHA" / "GQA" / "MQA" / "MLA"；返回整数字节数。"""
    # TODO：先算每层每个 token 存几个数（按 attention 分四种情况），再乘层数和每个数的字节数
    raise NotImplementedError
