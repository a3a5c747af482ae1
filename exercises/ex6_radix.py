"""练习 6 · 基数树：match 和 insert，分叉点落在节点中间时拆节点（约 45 分钟 · 难度 ★★★；选做淘汰约 30 分钟）

SGLang 的 RadixAttention 把所有请求的 token 放进一棵基数树：每个节点存一段 token（key，长度不固定），
孩子按"下一段的第一个 token"索引。命中多长 = 从根往下能走多远，可以停在一个节点的中间。

    插入 [1 2 3 4]，再插入 [1 2 9]：第二个请求在 2 之后分叉，[1 2 3 4] 拆成 [1 2] → [3 4]，再挂上 [9]
        根 ─ [1 2] ┬─ [3 4]
                   └─ [9]

【任务】写下面 RadixCache 的三个方法（淘汰 _evict 继承自 kv_store.radix_tree.RadixCache，已经写好）。
节点是 kv_store.radix_tree.RadixNode(key, parent, last_access)：node.key（list）、node.children（{第一个 token: 子节点}）、
node.parent、node.last_access（最近访问的时刻）、node.ref（几个还在跑的请求用着它）。
  1. match(seq)：seq 从头起有多少个 token 已经在树里。只读：不改时刻、不拆节点。
     走到某个孩子时，它的 key 可能只有前一部分和 seq 相同——那就停在那里，命中到那个位置为止。
  2. _split(child, j)：把 child 在 key 的第 j 个位置拆开（0 < j < len(child.key)）：新节点 head = key[:j]
     接到 child 原来的位置上（parent.children 里同一个键），child 只留 key[j:]、成为 head 唯一的孩子。
     head 继承 child 的 last_access 和 ref；self.n_splits 加 1；返回 head。
  3. insert(seq, lock=False)：把 seq 放进树，返回 (插入前已经在树里的长度, 这次拆了几个节点)。
     - now = self.clock，然后 self.clock += 1（时刻 = 第几次 insert）；
     - 从根往下走：找 seq[i] 对应的孩子；比较它的 key 和 seq[i:] 有几个相同（j）；j 比 key 短 → 拆：
       self.rule == "sglang"（默认，照 SGLang）时先 child.last_access = now（先记时刻再拆：拆开的尾巴也算
       刚用过；rule="trim" 时不记），再 child = self._split(child, j)；
       走过的每个节点 last_access = now（整段命中的、最后正好停在上面的节点也算），lock=True 时 ref += 1；
     - 走不下去时，剩下的 token 挂成一个新叶子 RadixNode(list(seq[i:]), 节点, now)（lock 时它的 ref 也 + 1），
       self.size 加上新叶子的长度；
     - 最后停在的节点不是根、又没有孩子（是叶子）：self._push_leaf(它)，淘汰才找得到它；
     - self.capacity 不是 None 且 self.size > self.capacity：self._evict(self.size - self.capacity)。

    >>> t = RadixCache()
    >>> t.insert([1, 2, 3, 4]), t.insert([1, 2, 9])
    ((0, 0), (2, 1))
    >>> t.match([1, 2, 3, 7]), t.n_splits, t.size       # 命中 3 个；树里存了 [1 2] [3 4] [9] 共 5 个
    (3, 1, 5)

【检查】make check EX=6：手算的几个例子（整段命中、拆节点、淘汰），再是容量很小、序列反复出现的随机脚本，
  每一步都和参考实现比返回值、match、树（按"从根出发的每条路径"比，孩子的先后无所谓）、size、n_splits；
  最后是合成 trace 的前 3,000 个请求。
【时间预算】每个用例里你的代码最多用参考实现的 10 倍时间（至少 1 秒）；超出时检查器会说用了多久、预算多少。
【--mine 用在】04b_radix_cache.py：python lecture07/04b_radix_cache.py --mine

【选做 · 淘汰】在类里自己写 _evict(self, need)（覆盖继承来的那个）：从 self._leaves（(last_access, 节点 id,
  序号, 节点) 的最小堆，_push_leaf 往里放）弹出最旧的叶子。跳过过时的记录：节点已删（alive 为 False）、不再是
  叶子、ref > 0；last_access 和记录里的不同（入队以后又被碰过）就 _push_leaf 重新排队。rule="sglang" 删整片叶子、
  一共删到至少 need 个单位（树可能停在容量以下）；rule="trim" 只从 key 的尾巴删，删到正好 need 个，还剩一截的
  叶子放回堆里。size 跟着减；删空了就 alive=False、从父节点的 children 里摘掉，父节点成了没锁的叶子（又不是根）
  就 _push_leaf(父节点)。写了就多检查一个"选做"用例。
参考实现：lecture07/kv_store/radix_tree.py（写完之前别看）。
"""
import kv_store.radix_tree
from kv_store.radix_tree import RadixNode  # noqa: F401


class RadixCache(kv_store.radix_tree.RadixCache):
    """capacity：最多存多少个单位（token 或块），None = 不淘汰。其余的属性见 kv_store.radix_tree.RadixCache.__init__。"""

    def match(self, seq):
        # TODO
        raise NotImplementedError

    def _split(self, child, j):
        # TODO
        raise NotImplementedError

    def insert(self, seq, lock=False):
        # TODO
        raise NotImplementedError
