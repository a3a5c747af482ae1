"""测试用的参照实现：照定义写的最直白的淘汰策略（每次淘汰都把整个缓存扫一遍），只用来核对 kv_store.eviction 的类。

    naive_hits([(1, 2), (1, 2, 3), (4,), (1, 2)], 2, "lru")   # → [0, 2, 0, 1]，和 simulate(..., 2, "lru") 一样

LRU：淘汰最久没碰的块。LFU 类：淘汰 (次数, rank, 最近访问时刻) 最小的块，rank 取最近一次访问时的位置：
LFU 都是 0，LengthAware 是 -位置（靠后的先走），对照组是 +位置。每个请求先数前缀命中，再从最后一块往前碰，
碰完再淘汰到不超过容量——和 BlockCache.insert 说的一样，但不用 OrderedDict、堆或惰性删除。
"""

RANKS = {"lfu": lambda pos: 0, "lengthaware": lambda pos: -pos, "lengthaware_early": lambda pos: pos}


def naive_hits(blocks, capacity, policy, per_block=False):
    """每个请求的命中块数（per_block：逐块命中；否则前缀命中）。policy："lru" 或 RANKS 里的一种。"""
    last, key, tick, out = {}, {}, 0, []          # last：块 → 最近碰它的时刻；key：块 → LFU 类的键
    for req in blocks:
        hit = [b in last for b in req]
        if per_block:
            out.append(sum(hit))
        else:
            out.append((hit + [False]).index(False))
        for pos in range(len(req) - 1, -1, -1):
            b = req[pos]
            if policy != "lru":
                count = key.get(b, (0,))[0] + 1
                key[b] = (count, RANKS[policy](pos), tick)
            last[b] = tick
            tick += 1
        while capacity is not None and len(last) > capacity:
            if policy == "lru":
                victim = min(last, key=last.get)
            else:
                victim = min(key, key=key.get)
                del key[victim]
            del last[victim]
    return out
