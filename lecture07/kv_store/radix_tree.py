"""基数树（radix tree）前缀缓存：SGLang 的 RadixAttention 找前缀、淘汰叶子的办法。

vLLM、Mooncake 用链式块哈希认前缀（kv_store.prefix_match.block_hashes）；SGLang（Zheng 等，"SGLang: Efficient
Execution of Structured Language Model Programs"，NeurIPS 2024）把所有请求的 token 放进一棵基数树：
- 每个节点 = 一段 token（key，长度不固定），孩子按下一段的第一个 token 索引；
- match(seq)：从根往下走，能走多远就命中多长——按 token 匹配，不必凑满一块；
- insert(seq)：走到分叉处；分叉点落在某个节点的中间，就把它拆成两个（split）；剩下的挂成新叶子；
- 淘汰：只淘汰叶子，按最近一次访问的时刻（LRU）；叶子删空了，它的父节点可能变成新的叶子；
- ref：有几个还在跑的请求用着这个节点（SGLang 的 lock_ref），ref > 0 的节点不淘汰。

两条规则，默认照 SGLang 0.5.23 的 python/sglang/srt/mem_cache/radix_cache.py（RadixCache）：
- 淘汰的粒度（rule="sglang"，照 RadixCache.evict）：evict(n) 按时刻从旧到新删整片叶子，删够至少 n 个为止，
  所以树可能停在容量以下；
- 拆开的尾巴的时刻（照 _match_prefix_helper / _insert_helper）：先给走到的节点记上现在的时刻，再 _split_node；
  原来那个节点对象成了尾巴（没被这个请求用到的后半段），时刻也是"刚用过"。
另一种规则 rule="trim"（块 LRU 的做法）：从最旧的叶子的尾巴一个单位一个单位地删，删到刚好不超容量；拆开的
尾巴保留它原来的时刻。链式块 id 上，它给每个请求的命中和按块淘汰的 LRU 逐个相同（04b 演示 3）。
时刻 = 第几次 insert；同一时刻的叶子，先建的节点先走（SGLang 里尾巴的时刻在 match 时记，早于新叶子）。

    >>> t = RadixCache()
    >>> t.insert([1, 2, 3, 4]), t.insert([1, 2, 9])     # 第二个请求在 2 之后分叉：[1 2 3 4] 拆成 [1 2] + [3 4]
    ((0, 0), (2, 1))
    >>> t.match([1, 2, 3, 7]), t.n_splits, t.size       # 命中 3 个 token；存了 [1 2] [3 4] [9] 共 5 个
    (3, 1, 5)
    >>> [(depth, start, node.key, node.ref) for depth, start, node in t.nodes()]   # 04b 把它画成树
    [(0, 0, [1, 2], 0), (1, 2, [3, 4], 0), (1, 2, [9], 0)]
"""
import heapq
import itertools

RULES = {   # 规则名 → 一句话（演示、报错都用它）
    "sglang": "SGLang 的规则：整片叶子淘汰，拆开的尾巴记成刚用过",
    "trim": "逐单位修剪：从最旧叶子的尾巴删到刚好满，拆开的尾巴保留原来的时刻",
}


class RadixNode:
    """key：这个节点的一段 token（list）；children：{下一段的第一个 token: 子节点}；last_access：最近访问的时刻；
    id：建节点的先后（同一时刻的叶子，id 小的先淘汰）。"""

    __slots__ = ("key", "children", "parent", "last_access", "ref", "alive", "id")
    _ids = itertools.count()

    def __init__(self, key, parent, last_access):
        self.key, self.parent, self.last_access = key, parent, last_access
        self.children, self.ref, self.alive = {}, 0, True
        self.id = next(RadixNode._ids)


class RadixCache:
    """capacity：最多存多少个单位（token 或块）；None = 不淘汰。rule：RULES 里的一个。时刻 = 第几次 insert。"""

    def __init__(self, capacity=None, rule="sglang"):
        if rule not in RULES:
            raise ValueError(f"rule 只能是 {'、'.join(RULES)}（收到 {rule!r}）")
        self.capacity, self.rule = capacity, rule
        self.root = RadixNode([], None, -1)
        self.size = 0            # 树里一共存了多少个单位
        self.n_splits = 0        # 拆过几次节点
        self.clock = 0
        self._leaves = []        # (last_access, 节点 id, 序号, 节点) 的最小堆；过时的记录在弹出时处理
        self._seq = 0

    # ---------------------------------------------------------------- 查询
    def match(self, seq):
        """seq 从头起有多少个单位已经在树里（只读，不改时刻、不拆节点）。"""
        node, i, n = self.root, 0, len(seq)
        while i < n:
            child = node.children.get(seq[i])
            if child is None:
                return i
            key = child.key
            m = len(key)
            if seq[i:i + m] == key:
                i += m
                node = child
                continue
            j = 1                                  # 第一个已经相等（按它找到的孩子）
            while j < m and i + j < n and key[j] == seq[i + j]:
                j += 1
            return i + j
        return i

    # ---------------------------------------------------------------- 插入
    def insert(self, seq, lock=False):
        """把 seq 放进树：返回 (插入前已经在树里的长度, 拆了几个节点)。路径上每个节点的时刻更新为现在。

        lock=True：路径上每个节点 ref + 1（这个请求还在跑，SGLang 的 inc_lock_ref）；用完 unlock(seq)。
        """
        now = self.clock
        self.clock += 1
        node, i, n, splits = self.root, 0, len(seq), 0
        while i < n:
            child = node.children.get(seq[i])
            if child is None:
                break
            key = child.key
            m = len(key)
            j = 1
            while j < m and i + j < n and key[j] == seq[i + j]:
                j += 1
            if j < m:                              # 分叉点在 child 中间：拆成 child[:j] → child[j:]
                if self.rule == "sglang":
                    child.last_access = now        # SGLang 先记时刻再拆：child 这个对象成了尾巴，也"刚用过"
                child = self._split(child, j)
                splits += 1
            child.last_access = now
            if lock:
                child.ref += 1
            node, i = child, i + j
        matched = i
        if i < n:                                  # 剩下的挂成一个新叶子
            leaf = RadixNode(list(seq[i:]), node, now)
            node.children[seq[i]] = leaf
            if lock:
                leaf.ref += 1
            self.size += n - i
            node = leaf
        if node is not self.root and not node.children:
            self._push_leaf(node)
        if self.capacity is not None and self.size > self.capacity:
            self._evict(self.size - self.capacity)
        return matched, splits

    def unlock(self, seq):
        """insert(seq, lock=True) 的请求跑完了：路径上每个节点 ref − 1（SGLang 的 dec_lock_ref）；超出容量的再淘汰。"""
        node, i = self.root, 0
        while i < len(seq):
            node = node.children[seq[i]]           # 锁着的路径不会被淘汰，也只会被拆得更细：一定走得通
            i += len(node.key)
            node.ref -= 1
            if node.ref == 0 and not node.children:
                self._push_leaf(node)
        if self.capacity is not None and self.size > self.capacity:
            self._evict(self.size - self.capacity)

    def _split(self, child, j):
        """child 的 key 在第 j 个单位处拆开：新节点 head = key[:j] 接到原来的位置，child 只留 key[j:]。"""
        parent, key = child.parent, child.key
        head = RadixNode(key[:j], parent, child.last_access)
        head.ref = child.ref
        head.children[key[j]] = child
        parent.children[key[0]] = head
        child.key, child.parent = key[j:], head
        self.n_splits += 1
        return head

    # ---------------------------------------------------------------- 淘汰
    def _push_leaf(self, node):
        self._seq += 1
        heapq.heappush(self._leaves, (node.last_access, node.id, self._seq, node))

    def _evict(self, need):
        """按时刻从旧到新淘汰没锁的叶子，一共至少 need 个单位（rule="trim"：刚好 need 个）；没有可删的就停。"""
        heap = self._leaves
        while need > 0 and heap:
            t, _, _, node = heapq.heappop(heap)
            if not node.alive or node.children or node.ref > 0:
                continue                            # 过时的记录：节点已删、已不是叶子、或正在用（unlock 时再进队）
            if node.last_access != t:
                self._push_leaf(node)               # 入队以后又被碰过（拆开的尾巴）：按新的时刻重新排队
                continue
            first = node.key[0]                     # 父节点按它找到这个孩子
            k = len(node.key)                       # SGLang：整片叶子
            if self.rule == "trim":
                k = min(need, k)                    # 修剪：只删尾巴上的 k 个单位（靠后的先走）
            del node.key[len(node.key) - k:]
            self.size -= k
            need -= k
            if node.key:
                self._push_leaf(node)               # 还剩一截：它仍是最旧的叶子
                continue
            node.alive = False
            parent = node.parent
            del parent.children[first]
            if parent is not self.root and not parent.children and parent.ref == 0:
                self._push_leaf(parent)             # 父节点成了叶子：按它自己的时刻排队

    # ---------------------------------------------------------------- 展示
    def nodes(self):
        """深度优先列出 (深度, 起点, 节点)：起点 = 这个节点的 key 在序列里从第几个单位开始。"""
        out, stack = [], [(0, 0, c) for c in reversed(list(self.root.children.values()))]
        while stack:
            depth, start, node = stack.pop()
            out.append((depth, start, node))
            end = start + len(node.key)
            stack.extend((depth + 1, end, c) for c in reversed(list(node.children.values())))
        return out


def radix_lru_hits(trace_blocks, capacity, rule="sglang"):
    """按到达顺序把每个请求的块序列放进一棵容量为 capacity 块的基数树，返回每个请求的命中块数（插入前已经在树里的
    长度：insert 的第一个返回值就是 match(seq)，省一遍从根往下走）。

    >>> reqs = [(1, 2), (1, 2, 3), (4,), (1, 2)]                   # 容量 2：第 3 个请求来时要腾出 1 块
    >>> radix_lru_hits(reqs, 2), radix_lru_hits(reqs, 2, "trim")   # SGLang 删整片叶子 [1 2]；修剪只删它的尾巴 [2]
    ([0, 2, 0, 0], [0, 2, 0, 1])
    """
    tree = RadixCache(capacity, rule)
    out = []
    for blocks in trace_blocks:
        out.append(tree.insert(list(blocks))[0])
    return out
