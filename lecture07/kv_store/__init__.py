"""KV 存储：一块 GPU 之外的 KV（一块 GPU 里面的块池、块表、写时复制在 paged_kv.py）。

    prefix_match.py  链式块哈希 block_hashes、从第一块起连续命中几块 match_prefix
    eviction.py      淘汰策略的类（LRU、LFU、LengthAware、S3-FIFO……）和注册表 CACHE_POLICIES
    replay.py        按 trace 把请求一个个喂给策略类（simulate、sweep）
    belady.py        Belady 的 MIN：知道未来时的离线最优
    radix_tree.py    SGLang 式的基数树前缀缓存（RadixCache）
    tiers.py         模型的 KV 大小、存储层级和带宽、prefill 要算多久（FAST'25 式 1）
    cluster.py       05 的集群：网卡队列、热点块复制、四种调度
    traces.py        列式的 Trace 和合成的工作负载；trace_file.py 逐行读 Mooncake JSONL 并检查
"""
