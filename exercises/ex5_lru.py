"""练习 5 · 自己写一个淘汰策略：LRU（对应 04_prefix_caching.py 的演示 3）

前缀缓存满了，新块要进来，就得踢走一块。LRU（最近最少使用）踢的是"最久没被用过"的那一块。

【任务】把 LRUCache 写成 kv_store.eviction.BlockCache 的子类，实现两个方法：
  - touch(block, pos)：记下对 block 的一次访问。它已经在缓存里：变成"最新"的；不在：加进来（也是最新的）。
    （pos 是它在请求里的位置，LRU 用不上。）
  - evict()：删掉最久没用的一块，返回它的块号。
self.entries 是一个 OrderedDict（块 → 随便什么，比如 None），"在缓存里的块"就是它的键；
BlockCache 已经写好了 match（前缀命中）和 insert：insert 从请求的最后一块往前逐块 touch，
然后只要 len(self.entries) > self.capacity 就调用 evict()。
提示：OrderedDict 的 move_to_end(key) 和 popitem(last=...)——哪一头是最旧的？

    >>> c = LRUCache(3)
    >>> c.insert([1, 2, 3]); c.match([1, 2, 9])
    2
    >>> c.insert([4]); c.match([1, 2, 3])      # 容量 3：最久没用的块 3 被淘汰
    2

【检查】make check EX=5
【用在演示里】python lecture07/04_prefix_caching.py --mine --demo 3   （命中率表里的 LRU 一行用你的类算）
参考实现：lecture07/kv_store/eviction.py 的 LRUCache（写完之前别看）。
"""
from collections import OrderedDict

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
