"""前缀缓存的淘汰策略：LRU、LFU、LengthAwareCache（Mooncake arXiv v3 表 1 比较的三种），
一个对照（LengthAware 的另一种读法），和一个课外的例子 S3-FIFO。

缓存的单位是块（整数 id）。一个策略就是 BlockCache 的一个子类，要有三个操作：
- match(blocks)：从第一块开始，连续有几块在缓存里（前缀命中：中间断了，后面的 KV 也用不上）。
  BlockCache 已经写好了，子类一般不用改；
- insert(blocks)：把这个请求的全部块放进缓存。BlockCache.insert 从最后一块往前，对每一块调用
  touch(块, 它在请求里的位置)，然后只要超出容量就调用 evict()；
- evict()：挑至少一块踢出去（从 self.entries 里删掉）。"淘汰谁"就是策略本身。
self.entries 是"在缓存里的块"的字典（块 → 这个策略自己记的东西：次数、时刻……），match 只看它。

    >>> c = make_cache(3, "lru")
    >>> c.match([1, 2, 3]); c.insert([1, 2, 3]); c.match([1, 2, 9])
    0
    2
    >>> c.insert([4]); c.match([1, 2, 3])    # 容量 3：最久没用的块 3 被淘汰（见下面"从尾到头"）
    2

一个细节：insert 从最后一块往前"碰"，让父块（靠前的块）比子块更"新"。这样 LRU 总是先淘汰
靠后的块，缓存里的内容始终是若干完整的前缀，前缀命中数 = 逐块命中数（vLLM 的空闲队列
也是把一个请求的块倒序放回去的）。

自己写一个策略（十分钟）：
  1. 在本文件里写一个类：class MyCache(BlockCache)，NAME = "显示的名字"，SHORT = "表格里的短名字"；
     __init__(self, capacity) 里调用 super().__init__(capacity, {})；实现 touch(self, block, pos)
     （记下这次访问；块不在缓存里就加进 self.entries）和 evict(self)（删掉一块并返回它）；
  2. 在本文件末尾的 CACHE_POLICIES 里加一行 "mine": MyCache；
  3. 在 04_prefix_caching.py 的 POLICIES 里加上 "mine"，运行 python 04_prefix_caching.py --demo 4：
     命中率表里多出一行；加 --more 还有"MIN 减去"表（它离离线最优还差多少）和全部观察（包括它和 LRU 比的那句）。
  照抄的样板：tests/test_cache_policies.py 里 10 行的 FIFOCache（touch 只加新块，evict 删最早进来的）。
  S3FIFOCache 是一个完整的真策略，但它照论文的算法 1 在 touch 里先腾位置再放新块，不靠 BlockCache.insert 淘汰。
按 trace 跑这些缓存的代码在 kv_store/replay.py：每个请求先 match 再 insert，跑的就是这里的类——你改了哪个类，
04、04b、05 的数字就来自改过的类（离线最优的 Belady MIN 是另一个概念，在 kv_store/belady.py）。
"""
import heapq
from collections import OrderedDict, deque

# Mooncake arXiv 2407.00079v3 §4.2 对 LengthAwareCache 的全部描述（原话，表 1 之前的一句）
LENGTHAWARE_DEFINITION = "similar to LFU but prioritizing cache blocks occurring later in requests"
LENGTHAWARE_SOURCE = "Mooncake arXiv 2407.00079v3 §4.2（表 1）"


class NoEviction(Exception):
    """evict() 一块也没删：args = (哪个类的 evict, 说明)，正好是 lab_common.console.fail 的两个参数。"""


class BlockCache:
    """所有缓存策略的基类：entries 是"在缓存里的块"的字典（块 → 该策略自己的记录）。"""

    NAME = SHORT = "?"

    def __init__(self, capacity, entries):
        self.capacity, self.entries = capacity, entries

    def __len__(self):
        return len(self.entries)

    def match(self, blocks):
        """前缀命中：从第一块起连续有几块在缓存里。"""
        for n, b in enumerate(blocks):
            if b not in self.entries:
                return n
        return len(blocks)

    def count(self, blocks):
        """逐块命中：有几块在缓存里（不要求连续）。"""
        return sum(b in self.entries for b in blocks)

    def insert(self, blocks):
        """放进一个请求的全部块：从最后一块往前 touch，再一次次调用 evict()，直到不超过容量（capacity=None：不淘汰）。
        evict() 一块也没删时抛 NoEviction（不空转；kv_store.replay.sweep 把它印成一行）。"""
        for pos in range(len(blocks) - 1, -1, -1):
            self.touch(blocks[pos], pos)
        over = 0                                          # 超出容量几块
        if self.capacity is not None:
            over = len(self.entries) - self.capacity
        while over > 0:
            self.evict()
            left = len(self.entries) - self.capacity
            if left >= over:
                raise NoEviction(f"{type(self).__name__}.evict()", "没有从 self.entries 里删掉任何块，缓存永远超出容量")
            over = left

    def touch(self, block, pos):
        """记下对 block 的一次访问（pos：它在这个请求里是第几块，从 0 数）。子类实现。"""
        raise NotImplementedError

    def evict(self):
        """挑至少一块淘汰：从 entries 里删掉，返回被淘汰的块。子类实现。"""
        raise NotImplementedError


class LRUCache(BlockCache):
    """最近最少使用：entries 是 OrderedDict，从旧到新排列——它的顺序就是淘汰的顺序。每次操作 O(1)。"""

    NAME, SHORT = "LRU", "LRU"

    def __init__(self, capacity):
        super().__init__(capacity, OrderedDict())

    def touch(self, block, pos):
        if block in self.entries:
            self.entries.move_to_end(block)               # 碰过：挪到最新的一端
        else:
            self.entries[block] = None                    # 新块：放在最新的一端

    def evict(self):
        return self.entries.popitem(last=False)[0]       # 最旧的


class LFUCache(BlockCache):
    """最不经常使用：淘汰键 (访问次数, rank(位置), 最近访问时刻) 最小的块；被淘汰的块再进来时，次数从 1 重新算。
    平局：次数相同时 rank 小的先走（LFU 的 rank 都是 0），再相同时最久没碰的先走——就是元组的比较顺序。

    堆里每个缓存着的块恰好一条记录 (次数, rank, 时刻, 块)。命中时只改 entries[块]，不动堆（惰性删除）：
    堆里那条变"旧"了，但旧记录只会比真实的小（次数、时刻都只增不减）。淘汰时看堆顶：和 entries 里的一样，
    它就是真正的最小者；不一样就换成真实的键放回去，再看新的堆顶。每次访问摊还 O(log n)。容量无限时堆是空的。
    """

    NAME, SHORT = "LFU", "LFU"

    def __init__(self, capacity):
        super().__init__(capacity, {})   # entries：块 → 它此刻的键 (次数, rank, 时刻, 块)
        self.heap = []                   # 每块一条记录（可能是旧的）
        self.tick = 0                    # 访问时刻：每碰一块加 1

    def rank(self, pos):
        """次数相同时谁先走：小的先被淘汰。LFU 不看位置（都是 0）。"""
        return 0

    def touch(self, block, pos):
        old = self.entries.get(block)
        count = 1
        if old is not None:
            count = old[0] + 1
        key = (count, self.rank(pos), self.tick, block)   # 淘汰顺序：先比次数，再比 rank，再比时刻
        self.tick += 1
        self.entries[block] = key
        if old is None and self.capacity is not None:     # 容量无限（None）时从不淘汰：不用进堆
            heapq.heappush(self.heap, key)

    def evict(self):
        while True:
            key = self.heap[0]
            block = key[-1]
            if self.entries[block] is key:               # 就是它此刻的那条记录：真正的最小者，淘汰
                heapq.heappop(self.heap)
                del self.entries[block]
                return block
            heapq.heapreplace(self.heap, self.entries[block])   # 旧记录：换成真实的键放回去


class LengthAwareCache(LFUCache):
    """Mooncake 的 LengthAwareCache，论文原话见 LENGTHAWARE_DEFINITION。我们的读法：和 LFU 一样先比
    访问次数；次数相同时，先淘汰在请求里位置靠后的块（位置取最近一次访问时的位置）。
    这样先走的总是链的尾巴，留下的仍是从第一块起的完整前缀，前缀命中用得上。"""

    NAME, SHORT = "LengthAwareCache", "LengthAware"

    def rank(self, pos):
        return -pos                      # 位置越靠后，rank 越小，越先走


class LengthAwareEarlyCache(LFUCache):
    """对照组，不是论文的策略：次数相同时先淘汰位置靠前的块（另一种读法）。它先拆掉前缀的父块，
    而前缀命中要求从第一块起连续：父块没了，留在缓存里的子块也用不上。"""

    NAME, SHORT = "对照：先淘汰靠前的块", "对照：先淘汰靠前"

    def rank(self, pos):
        return pos


class S3FIFOCache(BlockCache):
    """S3-FIFO（Yang 等，"FIFO queues are all you need for cache eviction"，SOSP'23，算法 1）：三个 FIFO 队列。

    - 小队列 S（容量的 10%）：新块先进这里；
    - 主队列 M（其余 90%）：在 S 里被再次访问过的块才升进来；
    - 幽灵队列 G：只记被 S 淘汰的块 id（不占缓存），最多记 M 那么多个；G 里的块再来时直接进 M。
    每块一个 0..3 的计数 freq：进缓存时为 0，命中一次加 1（不移动位置，这是它比 LRU 便宜的地方）。
    淘汰：S 至少占 10% 时从 S 的队尾取——freq > 1（MOVE_TO_MAIN = 2）就挪进 M（计数清零），否则踢出并记进 G；
    否则从 M 的队尾取——freq > 0 就减 1 放回队头（再给一次机会），否则踢出。
    参数和论文的原始实现一致（libCacheSim 的 S3FIFOv0.c：小队列 0.10、幽灵 0.90、move-to-main-threshold=2）。

    用 libCacheSim 核对（pip install libcachesim）：一块一块喂同一串块，这个类和 S3FIFOv0（论文用的原始实现）
    的命中数完全相同（tests/test_libcachesim_oracle.py）。libCacheSim 默认的 S3FIFO 是 2024 年的后来版本，只改了
    一处：缓存还没淘汰过时，小队列满了以后新块直接进主队列（原始版本照样进小队列），让预热时进来的块留得久一些；
    第一次淘汰以后两者一样。所以拿 libcachesim.S3FIFO 核对会得到略有不同的数——要比就比 S3FIFOv0。

    >>> c = S3FIFOCache(10)
    >>> for b in range(10): c.insert([b])      # 10 个新块都进了小队列
    >>> c.insert([0]); c.insert([0])           # 块 0 被访问了两次：freq = 2
    >>> c.insert([10])                         # 超出容量：S 的队尾是块 0（最早进来），freq > 1 → 升进 M；
    >>> sorted(c.main), 1 in c.entries, 1 in c.ghost   # 再往下，块 1 没被再访问过 → 踢出，进幽灵队列
    ([0], False, True)
    """

    NAME, SHORT = "S3-FIFO（SOSP'23）", "S3-FIFO"
    SMALL_RATIO = 0.10        # 小队列占容量的比例
    MOVE_TO_MAIN = 2          # 在小队列里 freq 至少这么多才升进主队列（论文算法 1：freq > 1）

    def __init__(self, capacity):
        super().__init__(capacity, {})             # entries：块 → freq（0..3）
        self.small, self.main = deque(), deque()   # 左边是队尾（最早进来的）
        self.ghost = OrderedDict()                 # 被 S 淘汰的块 id，最早的在前
        self.ghost_size = self.small_size = self.main_size = 0
        if capacity is not None:
            self.small_size = capacity * self.SMALL_RATIO
            self.main_size = capacity - self.small_size
            self.ghost_size = int(self.main_size)

    def touch(self, block, pos):
        """算法 1 的 READ：命中只加计数；不命中时先查幽灵队列，缓存满了先淘汰，再放进 M（在 G 里）或 S。
        （先腾位置再放新块，和算法 1 一样；所以 BlockCache.insert 最后的淘汰在这里用不上。）"""
        entries = self.entries
        freq = entries.get(block)
        if freq is not None:
            entries[block] = min(freq + 1, 3)            # 命中：只加计数，不挪位置
            return
        in_ghost = block in self.ghost                   # 块到来时就查（淘汰时 G 可能把它挤掉）
        if in_ghost:
            del self.ghost[block]
        while self.capacity is not None and len(entries) >= self.capacity:
            self.evict()                                 # 先腾出一个位置
        if in_ghost:
            self.main.append(block)                      # 最近刚从 S 淘汰过：直接进 M
        else:
            self.small.append(block)
        entries[block] = 0

    def evict(self):
        if len(self.small) >= self.small_size and self.small:
            return self._evict_small()
        return self._evict_main()

    def _evict_small(self):
        entries = self.entries
        while self.small:
            b = self.small.popleft()
            if entries[b] >= self.MOVE_TO_MAIN:
                entries[b] = 0                           # 升进 M，计数清零
                self.main.append(b)
                if len(self.main) >= self.main_size:
                    self._evict_main()
            else:
                del entries[b]
                self.ghost[b] = None
                if len(self.ghost) > self.ghost_size:
                    self.ghost.popitem(last=False)
                return b
        return None                                      # S 里的都升进了 M（这时 M 已经腾出了位置）

    def _evict_main(self):
        entries, main = self.entries, self.main
        while True:
            b = main.popleft()
            if entries[b] > 0:
                entries[b] -= 1                          # 再给一次机会：放回队头
                main.append(b)
            else:
                del entries[b]
                return b


# 唯一的注册表：04 的演示 4 给这里的每个策略算一行命中率和它离 MIN 的差距。加自己的策略：加一行。
CACHE_POLICIES = {
    "lru": LRUCache,
    "lfu": LFUCache,
    "lengthaware": LengthAwareCache,
    "lengthaware_early": LengthAwareEarlyCache,
    "s3fifo": S3FIFOCache,
}
PAPER_POLICIES = ("lru", "lfu", "lengthaware")       # Mooncake arXiv v3 表 1 比较的三种
MIN_NAME = "MIN（Belady，离线最优）"


def policy_name(policy):
    """策略的显示名字（包括 "min"）。"""
    if policy == "min":
        return MIN_NAME
    return CACHE_POLICIES[policy].NAME


def cap_name(c, unit=""):
    """表头里的容量：cap_name(None) → '无限'；cap_name(10_000) → '10,000'；cap_name(10_000, " 块") → '10,000 块'。"""
    if c is None:
        return "无限"
    return f"{c:,}{unit}"


def check_policy_args(capacity, policy, allowed):
    """策略名必须在 allowed 里（或者直接给一个类：policy(capacity) 建出缓存），容量必须是正整数或 None；
    否则 ValueError（一句话说清哪里不对）。"""
    if not callable(policy) and policy not in allowed:
        raise ValueError(f"未知的缓存策略 {policy!r}；可选：{', '.join(allowed)}")
    try:
        bad = capacity is not None and (int(capacity) != capacity or capacity <= 0)
    except (TypeError, ValueError):
        bad = True
    if bad:
        raise ValueError(f"缓存容量必须是正整数或 None（无限），收到 {capacity!r}")


def make_cache(capacity, policy):
    """capacity：块数，None 表示无限；policy：CACHE_POLICIES 里的名字（"min" 不是在线缓存，用 simulate）。"""
    check_policy_args(capacity, policy, CACHE_POLICIES)
    return CACHE_POLICIES[policy](capacity)
