"""练习 5 · 自己写一个淘汰策略：LRU（约 15 分钟 · 难度 ★☆☆；选做 S3-FIFO 约 40 分钟 · ★★★）

前缀缓存满了，新块要进来，就得踢走一块。LRU（最近最少使用）踢的是"最久没被用过"的那一块。

【任务】把 LRUCache 写成 kv_store.eviction.BlockCache 的子类，实现两个方法：
  - touch(block, pos)：记下对 block 的一次访问。它已经在缓存里：变成"最新"的；不在：加进来（也是最新的）。
    （pos 是它在请求里的位置，LRU 用不上。）
  - evict()：删掉最久没用的一块，返回它的块号。
self.entries 是一个 OrderedDict（块 → 随便什么，比如 None），"在缓存里的块"就是它的键；
BlockCache 已经写好了 match（前缀命中）和 insert：insert 从请求的最后一块往前逐块 touch，
然后只要 len(self.entries) > self.capacity 就调用 evict()。match 只读：查一下命中几块不算一次使用，不刷新。
entries 里的先后怎样排随你（最旧的在前或在后都行），检查器只看缓存里有哪些块、命中几块。
提示：OrderedDict 的 move_to_end(key) 和 popitem(last=...)——哪一头是最旧的？

    >>> c = LRUCache(3)
    >>> c.insert([1, 2, 3]); c.match([1, 2, 9])
    2
    >>> c.insert([4]); c.match([1, 2, 3])      # 容量 3：最久没用的块 3 被淘汰
    2

【检查】make check EX=5：手算的几个例子、insert 和只 match 不 insert 混着的随机脚本（容量 1–8），
  再是合成 trace 的前 4,000 个请求。
【时间预算】每个用例里你的代码最多用参考实现的 10 倍时间（至少 1 秒）；超出时检查器会说用了多久、预算多少。（每次淘汰都扫一遍全部的块会超出预算：OrderedDict 两头的操作都是 O(1)。）
【--mine 用在】04_prefix_caching.py（演示 4、5）、04b_radix_cache.py、05_kv_store.py：
  python lecture07/04_prefix_caching.py --mine --demo 4（命中率表里的 LRU 一行用你的类算）

【选做 · S3-FIFO】（Yang 等，SOSP'23）把文件末尾的 S3FIFOCache 写完：三个 FIFO 队列，行为和讲义的
  kv_store.eviction.S3FIFOCache 一样（它的 docstring 有完整的规则）。写好以后 make check EX=5 多检查三个"选做"用例；
  把 04 的 POLICIES 改成 ("lru", "s3fifo")，--mine --demo 4 就用你的 S3-FIFO 算那一行。没写时不影响练习 5 通过。
参考实现：lecture07/kv_store/eviction.py 的 LRUCache（写完之前别看）。
"""
from collections import OrderedDict, deque

from kv_store.eviction import BlockCache


class LRUCache(BlockCache):
    """最近最少使用：entries 是 OrderedDict。"""

    NAME, SHORT = "LRU", "LRU"       # 表格里显示的名字（和参考实现一样，方便逐格比较）

    def __init__(self, capacity):
        super().__init__(capacity, OrderedDict())

    def touch(self, block, pos):
        # TODO
        raise NotImplementedError

    def evict(self):
        # TODO
        raise NotImplementedError


class S3FIFOCache(BlockCache):
    """选做 · S3-FIFO（Yang 等，SOSP'23，算法 1）：小队列 S、主队列 M、幽灵队列 G，每块一个 0..3 的计数 freq。
    规则见 kv_store.eviction.S3FIFOCache 的 docstring（写完之前别看它的代码）。要点：
      - touch：在缓存里 → freq 加 1（最多 3），不挪位置；不在 → 先看它在不在 G 里（在就从 G 删掉），
        缓存满了（len(entries) >= capacity）先 evict 直到有空位，再放进 M（刚在 G 里）或 S，freq = 0；
      - evict：每次调用只在开头比一次大小：S 不空且 len(S) >= small_size 就从 S 淘汰，否则从 M 淘汰。
        从 S 淘汰：一个接一个取 S 的队尾（最早进来的），中途不再比 len(S) 和 small_size——freq >= MOVE_TO_MAIN
        就清零、放进 M 的队头（放进以后 len(M) >= main_size 就从 M 淘汰一块），接着取下一个；取到 freq 不够的
        那块就踢出、记进 G（G 超过 ghost_size 就丢掉最早的），返回它。S 取空了也没踢出（全升进了 M）就返回 None。
        从 M 淘汰：取 M 的队尾：freq > 0 就减 1 放回队头、接着取下一个；否则踢出并返回它。
        （和论文的算法 1、讲义的 kv_store.eviction.S3FIFOCache 一样。）
    """

    NAME, SHORT = "S3-FIFO（SOSP'23）", "S3-FIFO"
    SMALL_RATIO = 0.10        # 小队列占容量的比例
    MOVE_TO_MAIN = 2          # 小队列里 freq 至少这么多才升进主队列

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
        # TODO（选做）
        raise NotImplementedError

    def evict(self):
        # TODO（选做）
        raise NotImplementedError
