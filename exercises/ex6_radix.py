"""练习 6 · 基数树：match 和 insert，分叉点落在节点中间时拆节点（约 45 分钟 · ★★★ · 对应 04b_radix_cache.py）

SGLang 的 RadixAttention 把所有请求的 token 放进一棵基数树：每个节点存一段 token（key，长短不一），
孩子按"下一段的第一个 token"找。命中多长 = 从根往下能走多远，可以停在一个节点的中间。

    插入 [1 2 3 4]，再插入 [1 2 9]：第二个请求在 2 之后分叉，[1 2 3 4] 拆成 [1 2] → [3 4]，再挂上 [9]
        根 ─ [1 2] ┬─ [3 4]
                   └─ [9]

【任务】写下面 RadixCache 的三个方法（淘汰 evict(need) 继承自讲义的 kv_store.radix_tree.RadixCache）。
节点是 RadixNode(key, parent, last_access)：key（一段 token）、children（{第一个 token: 子节点}）、parent、
last_access（最近被 insert 走过的时刻）、ref（几个还在跑的请求锁着它）。
  1. match(seq)：seq（list 或 tuple）从头起有多少个 token 已经在树里。只读：不改时刻、不拆节点。
  2. _split(child, j)：把 child 在 key 的第 j 个位置拆开（0 < j < len(child.key)）：新节点 head = key[:j]
     接到 child 原来的位置上，child 只留 key[j:]、成为 head 唯一的孩子（child 原来的孩子还是它的）。
     head 继承 child 的 last_access 和 ref；self.n_splits 加 1；返回 head。
  3. insert(seq, lock=False)：把 seq 放进树，返回插入前已经在树里的长度。
     - now = self.clock，然后 self.clock += 1（时刻 = 第几次 insert）；
     - 从根往下走：seq[i] 对应的孩子 key 只有前 j 个和 seq[i:] 相同（j 比 key 短）→ 拆开；self.rule 是
       "sglang"（默认）时先给 child 记上 now 再拆（照 SGLang：没用到的后半段也像刚用过），"trim" 时不记；
     - 走过的每个节点 last_access = now（整段命中的也算），lock=True 时 ref += 1；
     - 走不下去时，剩下的 token 挂成一片新叶子 RadixNode(剩下的, 节点, now)（lock 时它的 ref = 1），
       self.size 加上它的长度，heapq.heappush(self.leaves, (now, 叶子))：淘汰从这个堆里找最旧的叶子；
     - self.capacity 不是 None 且 self.size > self.capacity：self.evict(self.size - self.capacity)。不要改 seq。

    >>> t = RadixCache()
    >>> t.insert([1, 2, 3, 4]), t.insert([1, 2, 9])
    (0, 2)
    >>> t.match([1, 2, 3, 7]), t.n_splits, t.size       # 命中 3 个；树里存了 [1 2] [3 4] [9] 共 5 个
    (3, 1, 5)

【检查】make check EX=6   【用在】lecture07/04b_radix_cache.py --mine   【参考】kv_store/radix_tree.py（写完再看）
"""
import heapq  # noqa: F401

import kv_store.radix_tree
from kv_store.radix_tree import RadixNode  # noqa: F401


class RadixCache(kv_store.radix_tree.RadixCache):
    """capacity：最多存多少个单位（token 或块），None = 不淘汰；rule："sglang" 或 "trim"。"""

    def match(self, seq):
        # TODO
        raise NotImplementedError

    def _split(self, child, j):
        # TODO
        raise NotImplementedError

    def insert(self, seq, lock=False):
        # TODO
        raise NotImplementedError
