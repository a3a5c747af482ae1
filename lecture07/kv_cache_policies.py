"""前缀缓存的淘汰策略：LRU、LFU、LengthAwareCache（Mooncake arXiv v3 表 1 比较的三种）。

每种缓存都有两个操作（单位是块，块用整数 id 表示）：
- match(blocks)：从第一块开始，连续有几块在缓存里（前缀命中：中间断了，后面的 KV 也用不上）；
- insert(blocks)：把这个请求的全部块放进缓存（已经在的就"碰一下"，更新访问记录），超出容量就淘汰。

    >>> c = make_cache(3, "lru")
    >>> c.match([1, 2, 3]); c.insert([1, 2, 3]); c.match([1, 2, 9])
    0
    2
    >>> c.insert([4]); c.match([1, 2, 3])    # 容量 3：最久没用的块 3 被淘汰（见下面"从尾到头"）
    2

一个细节：insert 从最后一块往前"碰"，让父块（靠前的块）比子块更"新"。这样 LRU 总是先淘汰
靠后的块，缓存里的内容始终是若干完整的前缀，前缀命中数 = 逐块命中数（vLLM 的空闲队列
也是把一个请求的块倒序放回去的）。

按 trace 跑这些缓存（以及离线最优的 Belady MIN）的代码在 kv_cache_sim.py。
"""
import heapq
from collections import OrderedDict


class BlockCache:
    """各种缓存共用的查询：entries 是"在缓存里的块"的字典（块 → 该策略自己的记录）。"""

    def __init__(self, capacity, entries):
        self.capacity, self.entries = capacity, entries

    def __len__(self):
        return len(self.entries)

    def match(self, blocks):
        """前缀命中：从第一块起连续有几块在缓存里。"""
        n = 0
        for b in blocks:
            if b not in self.entries:
                break
            n += 1
        return n

    def count(self, blocks):
        """逐块命中：有几块在缓存里（不要求连续）。"""
        entries = self.entries
        return sum(b in entries for b in blocks)


class LRUCache(BlockCache):
    """最近最少使用：OrderedDict 从旧到新排列，每次操作 O(1)。"""

    def __init__(self, capacity):
        super().__init__(capacity, OrderedDict())

    def insert(self, blocks):
        od = self.entries
        for b in reversed(blocks):            # 从尾到头：父块最后被碰，最"新"
            if b in od:
                od.move_to_end(b)
            else:
                od[b] = None
        if self.capacity is not None:
            while len(od) > self.capacity:
                od.popitem(last=False)        # 淘汰最旧的


class LFUCache(BlockCache):
    """最不经常使用：按 (在缓存里被访问的次数, 最近访问时刻) 排序，最小的先淘汰。
    被淘汰的块再进来时，次数从 1 重新算。

    实现（每次访问摊还 O(log n)）：一个最小堆，每个缓存里的块在堆里恰好有一条记录。
    命中时只改 key[b]，不动堆——堆里那条记录变"旧"了，但旧记录的键只会比真实的小
    （次数和时刻都只增不减）。淘汰时弹出堆顶：记录和 key[b] 一致，它就是真正的最小者；
    不一致就按真实的键放回去，再弹下一个。键编码成一个整数：(次数, 位置, 时刻) 各占一段位。
    """

    USE_POSITION = False      # LengthAwareCache 把块在请求里的位置也放进键里

    def __init__(self, capacity):
        super().__init__(capacity, {})   # entries：块 → 当前的键（整数）
        self.heap = []            # 每块一条记录（可能是旧的）
        self.block_at = []        # 时刻 → 那一刻访问的块（从键里的时刻找回块）

    def insert(self, blocks):
        key, heap, block_at = self.entries, self.heap, self.block_at
        use_pos = self.USE_POSITION
        for pos in range(len(blocks) - 1, -1, -1):       # 从尾到头，和 LRU 一样
            b = blocks[pos]
            tick = len(block_at)
            block_at.append(b)
            old = key.get(b)
            count = 1 if old is None else (old >> 52) + 1
            k = (count << 52) | ((min(pos, 4095) if use_pos else 0) << 40) | tick
            key[b] = k
            if old is None:
                heapq.heappush(heap, k)
        if self.capacity is None:
            return
        while len(key) > self.capacity:
            k = heapq.heappop(heap)
            b = block_at[k & _TICK_MASK]
            if key[b] == k:
                del key[b]                               # 真正的最小者：淘汰
            else:
                heapq.heappush(heap, key[b])             # 旧记录：换成真实的键放回去


_TICK_MASK = (1 << 40) - 1


class LengthAwareCache(LFUCache):
    """和 LFU 类似，但优先保留在请求里位置靠后的块（论文原话："similar to LFU but prioritizing
    cache blocks occurring later in requests"）。这里的排序键是 (次数, 在请求中的块位置, 时刻)：
    次数相同时，位置靠前的块先被淘汰。（位置取最近一次访问时的位置，超过 4095 按 4095 算。）"""

    USE_POSITION = True


CACHE_POLICIES = {"lru": LRUCache, "lfu": LFUCache, "lengthaware": LengthAwareCache}
POLICY_NAMES = {"lru": "LRU", "lfu": "LFU", "lengthaware": "LengthAwareCache", "min": "MIN（Belady，离线最优）"}


def check_policy_args(capacity, policy, allowed):
    """策略名必须在 allowed 里，容量必须是正整数或 None；否则 ValueError（一句话说清哪里不对）。"""
    if policy not in allowed:
        raise ValueError(f"未知的缓存策略 {policy!r}；可选：{', '.join(allowed)}")
    try:
        bad = capacity is not None and (int(capacity) != capacity or capacity <= 0)
    except (TypeError, ValueError):
        bad = True
    if bad:
        raise ValueError(f"缓存容量必须是正整数或 None（无限），收到 {capacity!r}")


def make_cache(capacity, policy):
    """capacity：块数，None 表示无限；policy："lru"、"lfu" 或 "lengthaware"（"min" 不是在线缓存，用 simulate）。"""
    check_policy_args(capacity, policy, CACHE_POLICIES)
    return CACHE_POLICIES[policy](capacity)
