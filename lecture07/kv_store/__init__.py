"""KV 存储：一块 GPU 之外的 KV（一块 GPU 里面的块池、块表、写时复制在 paged_kv.py）。

    prefix.py      链式块哈希 block_hashes、从第一块起连续命中几块 match_prefix
    trace.py       请求 trace：Request、合成的 make_trace、读 Mooncake JSONL 的 load_trace
    policies.py    淘汰策略（LRU、LFU、LengthAware、S3-FIFO）和按 trace 回放的 hit_blocks、hit_ratio
    belady.py      Belady 的 MIN：知道未来时的离线最优（逐块命中，上界）
    radix_tree.py  SGLang 式的基数树前缀缓存（RadixCache）
    tiers.py       模型的 KV 大小、存储层级和带宽、prefill 要算多久（FAST'25 式 1）
    cluster.py     05 的集群：网卡队列、热点块复制、调度
    mooncake_paper.py  Mooncake 论文的数（04 印在本实验的数旁边对照）
"""
