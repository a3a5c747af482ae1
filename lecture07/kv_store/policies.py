"""前缀缓存的淘汰策略，和"按 trace 回放、数命中"的 hit_blocks / hit_ratio。

缓存的单位是块（trace 里的块 id）。一个策略是 BlockCache 的一个子类：
- self.entries：在缓存里的块 → 这个策略自己记的东西（LRU：None，按先后排；LFU：次数……）；
- match(blocks)：从第一块起连续有几块在缓存里（BlockCache 写好了，只读，不算一次使用）；
- insert(blocks)：先 match，再从最后一块往前对每块调用 touch(块, 它在请求里的位置)，然后只要超出容量就调用
  evict()；返回 match 的结果——放进来之前已经命中几块（SGLang 的 RadixCache.insert 也返回这个）；
- touch、evict：子类写。"淘汰谁"就是策略本身。

从尾到头 touch，让靠前的块（父块）比靠后的块更"新"：LRU 总是先淘汰靠后的块，缓存里留下的始终是完整的前缀
（vLLM 的空闲队列也是把一个请求的块倒序放回去的）。

    >>> c = LRUCache(3)
    >>> c.insert([1, 2, 3]), c.match([1, 2, 9])    # insert 返回放进来之前命中几块
    (0, 2)
    >>> c.insert([4]), c.match([1, 2, 3])          # 容量 3：最久没用的块 3 被淘汰
    (0, 2)

自己写一个策略：照 LRUCache 写一个子类（NAME、__init__、touch、evict），把它加进 04 的 POLICIES。
"""
import heapq
import itertools
from collections import OrderedDict, deque

BLOCK_SIZE = 512      # trace 里每块的 token 数（Mooncake 的 trace 也是 512）：命中规则按它换算 token


class BlockCache:
    """所有策略的基类。capacity：最多几块，None = 无限（从不淘汰）。"""

    NAME = "?"                       # 表格里的名字

    def __init__(self, capacity, entries):
        self.capacity, self.entries = capacity, entries

    def match(self, blocks):
        """前缀命中：从第一块起连续有几块在缓存里。"""
        entries = self.entries
        for n, b in enumerate(blocks):
            if b not in entries:
                return n
        return len(blocks)

    def insert(self, blocks):
        """放进一个请求的全部块：从最后一块往前 touch，再 evict() 到不超过容量。返回放之前的 match(blocks)。"""
        found = self.match(blocks)
        touch, entries, capacity = self.touch, self.entries, self.capacity
        for pos in range(len(blocks) - 1, -1, -1):
            touch(blocks[pos], pos)
        if capacity is None:
            return found
        while len(entries) > capacity:
            size = len(entries)
            self.evict()
            if len(entries) == size:                  # 一块也没删：不然这个循环永远停不下来
                raise RuntimeError(f"{type(self).__name__}.evict() 没有从 self.entries 里删掉任何块")
        return found

    def touch(self, block, pos):
        """记下对 block 的一次访问（pos：它是请求里的第几块，从 0 数）。"""
        raise NotImplementedError

    def evict(self):
        """淘汰一块：从 self.entries 里删掉，返回它。"""
        raise NotImplementedError


class LRUCache(BlockCache):
    """最近最少使用：entries 是 OrderedDict，从旧到新排——它的顺序就是淘汰的顺序。每次操作 O(1)。"""

    NAME = "LRU"

    def __init__(self, capacity):
        super().__init__(capacity, OrderedDict())

    def touch(self, block, pos):
        if block in self.entries:
            self.entries.move_to_end(block)           # 碰过：挪到最新的一端
        else:
            self.entries[block] = None                # 新块：放在最新的一端

    def evict(self):
        return self.entries.popitem(last=False)[0]   # 最旧的一端


class LFUCache(BlockCache):
    """最不经常使用：淘汰键 (访问次数, rank(位置), 最近访问的时刻) 最小的块；被淘汰的块再进来，次数从 1 算起。

    堆里每个缓存着的块一条记录。命中时只改 entries[块]，不动堆：堆里那条变旧了，但旧的键只会比真的小
    （次数、时刻只增不减）。淘汰时看堆顶：和 entries 里的一样，它就是最小的；不一样就换成真的键放回去再看。"""

    NAME = "LFU"

    def __init__(self, capacity):
        super().__init__(capacity, {})   # entries：块 → 它此刻的键 (次数, rank, 时刻, 块)
        self.heap = []
        self.clock = itertools.count()   # 时刻：每碰一块，next(self.clock) 加 1

    def rank(self, pos):
        """次数相同时谁先走：rank 小的先被淘汰。LFU 不看位置。"""
        return 0

    def touch(self, block, pos):
        old = self.entries.get(block)
        if old is None:                  # 新块：次数 1，进堆（容量无限时从不淘汰，不用堆）
            key = self.entries[block] = (1, self.rank(pos), next(self.clock), block)
            if self.capacity is not None:
                heapq.heappush(self.heap, key)
        else:                            # 命中：只换 entries 里的键，堆里那条留着（变旧了）
            self.entries[block] = (old[0] + 1, self.rank(pos), next(self.clock), block)

    def evict(self):
        while True:
            key = self.heap[0]
            block = key[-1]
            if self.entries[block] is key:                # 就是它此刻的键：真正的最小者
                heapq.heappop(self.heap)
                del self.entries[block]
                return block
            heapq.heapreplace(self.heap, self.entries[block])   # 旧记录：换成真的键放回去


class LengthAwareCache(LFUCache):
    """Mooncake 的 LengthAwareCache。论文（arXiv v3 §4.2）只有一句："similar to LFU but prioritizing cache
    blocks occurring later in requests"。本课的读法：先比访问次数；次数相同时，先淘汰请求里位置靠后的块
    （位置取最近一次访问时的）。这样先走的总是链的尾巴，留下的仍是完整的前缀。"""

    NAME = "LengthAware"

    def rank(self, pos):
        return -pos                      # 越靠后，rank 越小，越先走


class S3FIFOCache(BlockCache):
    """S3-FIFO（Yang 等，"FIFO queues are all you need for cache eviction"，SOSP'23，算法 1）：三个 FIFO 队列。
    小队列 S（容量的 10%）：新块先进这里；主队列 M（其余 90%）：在 S 里又被访问过的块才升进来；
    幽灵队列 G：只记被 S 淘汰的块 id（不占缓存，最多 M 那么多个），G 里的块再来时直接进 M。
    每块一个 0..3 的计数 freq，命中只加计数、不挪位置（比 LRU 便宜）。淘汰：S 至少占 10% 时取 S 最早的一块，
    freq ≥ 2 升进 M（清零），否则踢出、记进 G；否则取 M 最早的一块，freq > 0 就减 1 放回去，否则踢出。
    和 libCacheSim 的 S3FIFOv0（论文用的原始实现）逐块命中相同。算法 1 在 touch 里先腾位置再放新块。"""

    NAME = "S3-FIFO"
    SMALL_RATIO = 0.10               # S 占容量的比例
    MOVE_TO_MAIN = 2                 # 在 S 里 freq 至少这么多才升进 M

    def __init__(self, capacity):
        super().__init__(capacity, {})             # entries：块 → freq
        self.small, self.main = deque(), deque()   # 左边是最早进来的
        self.ghost = OrderedDict()
        self.small_size = self.main_size = self.ghost_size = 0
        if capacity is not None:
            self.small_size = capacity * self.SMALL_RATIO
            self.main_size = capacity - self.small_size
            self.ghost_size = int(self.main_size)

    def touch(self, block, pos):
        if block in self.entries:
            self.entries[block] = min(self.entries[block] + 1, 3)   # 命中：只加计数
            return
        in_ghost = block in self.ghost                 # 最近刚从 S 淘汰过：直接进 M
        if in_ghost:
            del self.ghost[block]
        while self.capacity is not None and len(self.entries) >= self.capacity:
            self.evict()                               # 先腾出一个位置
        if in_ghost:
            self.main.append(block)
        else:
            self.small.append(block)
        self.entries[block] = 0

    def evict(self):
        if self.small and len(self.small) >= self.small_size:
            return self._evict_small()
        return self._evict_main()

    def _evict_small(self):
        while self.small:
            b = self.small.popleft()
            if self.entries[b] >= self.MOVE_TO_MAIN:
                self.entries[b] = 0                    # 升进 M
                self.main.append(b)
                if len(self.main) >= self.main_size:
                    self._evict_main()
            else:
                del self.entries[b]
                self.ghost[b] = None
                if len(self.ghost) > self.ghost_size:
                    self.ghost.popitem(last=False)
                return b
        return None                                    # S 里的都升进了 M（M 已经腾出了位置）

    def _evict_main(self):
        while True:
            b = self.main.popleft()
            if self.entries[b] > 0:
                self.entries[b] -= 1                   # 再给一次机会
                self.main.append(b)
            else:
                del self.entries[b]
                return b


# ---- 按 trace 回放：请求按到达顺序 insert，它返回的命中块数按命中规则算成用得上的 ----
def usable_tokens(found, input_len):
    """全讲唯一的命中规则：缓存里找到前 found 块，用得上的 token = min(found × BLOCK_SIZE, input_len − 1)——
    最后一个输入 token 总要重算（它的输出才是第一个输出 token）。nano-vllm 只查前 k − 1 块，最多用上
    (k − 1) × 块大小 个 token：最后一块满着、整段命中时，这里用上 n − 1 个（k 块里都有），nano-vllm 少一整块。"""
    return min(found * BLOCK_SIZE, input_len - 1)


def hit_blocks(trace, cache):
    """按到达顺序回放 trace：每个请求 insert 进缓存，它返回放进来之前从第一块起命中几块（同 match）。返回每个请求
    用得上的命中块数（装着至少一个用得上的 token 的块，usable_tokens 的规则）。cache：BlockCache 的子类，
    或 04b 的 RadixCache（它的 insert 也返回命中的长度，只从根往下走一遍）。

    >>> from kv_store.trace import Request
    >>> hit_blocks([Request(0, 1024, 1, (1, 2)), Request(1, 1024, 1, (1, 2)), Request(2, 1025, 1, (1, 2, 3))],
    ...            LRUCache(None))        # 第 2 个：1,023 个 token 用得上，仍在 2 块里；第 3 个：块 3 没命中
    [0, 2, 2]
    """
    hits = []
    for r in trace:
        usable = usable_tokens(cache.insert(r.blocks), r.input_len)
        hits.append(-(-usable // BLOCK_SIZE))      # 向上取整：装着用得上的 token 的块
    return hits


def hit_ratio(trace, cache):
    """前缀命中率 = 用得上的命中块 / 全部块访问。"""
    return sum(hit_blocks(trace, cache)) / sum(len(r.blocks) for r in trace)
