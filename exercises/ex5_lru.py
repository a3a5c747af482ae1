"""练习 5 · 自己写一个淘汰策略：LRU（约 15 分钟 · ★☆☆ · 对应 04_prefix_caching.py 的演示 4）

前缀缓存满了，新块要进来，就得踢走一块。LRU（最近最少使用）踢的是"最久没被用过"的那一块。

【任务】把 LRUCache 写成 kv_store.policies.BlockCache 的子类，实现两个方法：
  - touch(block, pos)：记下对 block 的一次访问。已经在缓存里：变成"最新"的；不在：加进来（也是最新的）。pos 用不上。
  - evict()：删掉最久没用的一块，返回它的块号。
self.entries 是一个 OrderedDict（块 → 随便什么，比如 None），"在缓存里的块"就是它的键。
BlockCache 已经写好了 match（前缀命中）和 insert：insert 先 match，再从请求的最后一块往前逐块 touch，
然后只要 len(self.entries) > self.capacity 就调用 evict()，返回 match 的结果。match 只读：查一下命中几块不算一次使用。
entries 里的先后怎样排随你（最旧的在前或在后都行），检查器只看缓存里有哪些块、命中几块。

    >>> c = LRUCache(3)
    >>> c.insert([1, 2, 3]), c.match([1, 2, 9])    # insert 返回放进来之前命中几块
    (0, 2)
    >>> c.insert([4]), c.match([1, 2, 3])          # 容量 3：最久没用的块 3 被淘汰
    (0, 2)

【检查】make check EX=5   【用在】lecture07/04_prefix_caching.py --mine   【参考】kv_store/policies.py（写完再看）
"""
from collections import OrderedDict

from kv_store.policies import BlockCache


class LRUCache(BlockCache):
    """最近最少使用：entries 是 OrderedDict。"""

    NAME = "LRU"       # 表格里显示的名字

    def __init__(self, capacity):
        super().__init__(capacity, OrderedDict())

    def touch(self, block, pos):
        # TODO
        raise NotImplementedError

    def evict(self):
        # TODO
        raise NotImplementedError
