"""Belady 的 MIN：知道未来的离线最优。缓存满了就淘汰"下一次用到最晚"的块（再也不用的块干脆不留）。

它数的是逐块命中：请求的块只要在缓存里就算，不要求从第一块起连续，也不扣最后一个 token。
前缀命中 ≤ 同一个缓存的逐块命中 ≤ MIN 的逐块命中，所以 MIN 是任何在线策略的上界（真实系统做不到）。

    >>> min_hits([(1, 2), (1, 2, 3), (4,), (1, 2)], [2, None])   # 容量 2：留住 1、2，请求 4 时两块都命中
    [[0, 2, 0, 2], [0, 2, 0, 2]]
"""
import heapq


def min_hits(trace, capacities):
    """对每个容量（None = 无限）回放一遍：每个请求有几块在缓存里（逐块命中）；然后把它的块放进缓存，超出容量时
    淘汰下一次用到最晚的块。返回每个容量的命中列表。trace：Request 的列表（用 .blocks），或块 id 序列的列表。"""
    seqs = [getattr(r, "blocks", r) for r in trace]
    n = len(seqs)
    nxt, last = [None] * n, {}            # nxt[i][j]：请求 i 的第 j 块下一次在哪个请求里用到（n = 再也不用）
    for i in range(n - 1, -1, -1):           # 从后往前：last[b] = 块 b 下一次出现在哪个请求；各个容量共用
        nxt[i] = [last.get(b, n) for b in seqs[i]]
        last.update(dict.fromkeys(seqs[i], i))
    unlimited, peak = replay(seqs, nxt, None)
    # 容量不小于 peak（容量无限时缓存最多有几块）：从不淘汰，和无限一样，不用再回放
    return [unlimited if c is None or c >= peak else replay(seqs, nxt, c)[0] for c in capacities]


def replay(seqs, nxt, capacity):
    """一个容量的 MIN：返回 (每个请求的逐块命中, 缓存最多时有几块)。cache：块 → 下一次用到它的请求；
    heap：(−下一次, 块)，可能有过时的记录。"""
    n, cache, heap, hits, peak = len(seqs), {}, [], [], 0
    for i, blocks in enumerate(seqs):
        hits.append(sum(b in cache for b in blocks))
        for b, when in zip(blocks, nxt[i]):
            if when == n:
                cache.pop(b, None)        # 再也不用：不留
            else:
                cache[b] = when
                if heap:                  # 堆在第一次超出容量时才建：从不超出容量就不用堆
                    heapq.heappush(heap, (-when, b))
        peak = max(peak, len(cache))
        over = capacity is not None and len(cache) > capacity
        if (over and not heap) or len(heap) > 2 * len(cache) + 1000:
            heap = [(-w, b) for b, w in cache.items()]   # 建堆，或清掉太多的过时记录（内存有上限）
            heapq.heapify(heap)
        while over and len(cache) > capacity:
            when, b = heapq.heappop(heap)
            if cache.get(b) == -when:     # 不是过时的记录：它就是下一次用到最晚的块
                del cache[b]
    return hits, peak
