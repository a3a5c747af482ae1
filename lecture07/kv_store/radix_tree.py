"""基数树（radix tree）前缀缓存：SGLang 的 RadixAttention 找前缀、淘汰叶子的办法。

vLLM、Mooncake 用链式块哈希认前缀（kv_store.prefix_match.block_hashes）；SGLang（Zheng 等，"SGLang: Efficient Execution of
Structured Language Model Programs"，NeurIPS 2024）把所有请求的 token 放进一棵基数树：
- 每个节点 = 一段 token（key，长度不固定），孩子按下一段的第一个 token 索引；
- match(seq)：从根往下走，能走多远就命中多长——按 token 匹配，不必凑满一块；
- insert(seq)：走到分叉处；分叉点落在某个节点的中间，就把它拆成两个（split）；剩下的挂成新叶子；
- 淘汰：只淘汰叶子，按最近一次访问的时刻（LRU），叶子删空了，它的父节点可能变成新的叶子；
- ref：有几个还在跑的请求用着这个节点（SGLang 的 lock_ref），ref > 0 的节点不淘汰。

和 SGLang 的一个差别：SGLang 的 evict 一次释放整个叶子节点（至少释放要求的 token 数）；这里从叶子的
尾巴按单位（token 或块）删，删到刚好不超容量——这样容量按块数精确控制，才能和按块的 LRU 逐格比较。

    >>> t = RadixCache()
    >>> t.insert([1, 2, 3, 4]), t.insert([1, 2, 9])     # 第二个请求在 2 之后分叉：[1 2 3 4] 拆成 [1 2] + [3 4]
    ((0, 0), (2, 1))
    >>> t.match([1, 2, 3, 7]), t.n_splits, t.size       # 命中 3 个 token；存了 [1 2] [3 4] [9] 共 5 个
    (3, 1, 5)
    >>> print("\\n".join(t.render()))
    └─ [0, 2) 2 个 ref 0
       ├─ [2, 4) 2 个 ref 0
       └─ [2, 3) 1 个 ref 0
"""
import heapq

import numpy as np

from kv_store.sim_base import fork_map, n_cores
from lab_common.say import integer, span


class RadixNode:
    """key：这个节点的一段 token（list）；children：{下一段的第一个 token: 子节点}；last_access：最近访问的时刻。"""

    __slots__ = ("key", "children", "parent", "last_access", "ref", "alive")

    def __init__(self, key, parent, last_access):
        self.key, self.parent, self.last_access = key, parent, last_access
        self.children, self.ref, self.alive = {}, 0, True


class RadixCache:
    """capacity：最多存多少个单位（token 或块）；None = 不淘汰。时刻 = 第几次 insert。"""

    def __init__(self, capacity=None):
        self.capacity = capacity
        self.root = RadixNode([], None, -1)
        self.size = 0            # 树里一共存了多少个单位
        self.n_splits = 0        # 拆过几次节点
        self.clock = 0
        self._leaves = []        # (last_access, 序号, 节点) 的最小堆；过时的记录在弹出时跳过
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

        lock=True：路径上每个节点 ref + 1（这个请求还在跑，SGLang 的 inc_lock_ref）。
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
        heapq.heappush(self._leaves, (node.last_access, self._seq, node))

    def _evict(self, need):
        """从最久没用的叶子的尾巴删，一共删 need 个单位；ref > 0 的叶子不动（没有可删的就停）。"""
        heap = self._leaves
        while need > 0 and heap:
            t, s, node = heapq.heappop(heap)
            if not node.alive or node.children or node.last_access != t or node.ref > 0:
                continue                            # 过时的记录：节点已删、已不是叶子、被碰过、或正在用
            k = min(need, len(node.key))
            del node.key[len(node.key) - k:]        # 尾巴上的 k 个单位（靠后的先走）
            self.size -= k
            need -= k
            if node.key:
                heapq.heappush(heap, (t, s, node))  # 还剩一截：它仍是最旧的叶子
                continue
            node.alive = False
            parent = node.parent
            for first, c in list(parent.children.items()):
                if c is node:
                    del parent.children[first]
                    break
            if parent is not self.root and not parent.children:
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

    def render(self, max_children=None, unit="个"):
        """树的文字图：每个节点一行 "[起点, 终点) 长度 ref"；max_children：每个节点最多画几个孩子。"""
        lines = []

        def walk(node, start, prefix):
            kids = list(node.children.values())
            shown = kids
            if max_children is not None and len(kids) > max_children:
                shown = kids[:max_children]
            for k, c in enumerate(shown):
                last = k == len(shown) - 1 and len(shown) == len(kids)
                branch, more = "├─ ", "│  "
                if last:
                    branch, more = "└─ ", "   "
                end = start + len(c.key)
                lines.append(f"{prefix}{branch}[{start}, {end}) {len(c.key)} {unit} ref {c.ref}")
                walk(c, end, prefix + more)
            if len(shown) < len(kids):
                rest = kids[len(shown):]
                lengths = span([len(c.key) for c in rest], integer)   # 两端相同时只写一个值
                lines.append(f"{prefix}└─ …另外 {len(rest)} 个孩子（长度 {lengths}）")

        walk(self.root, 0, "")
        return lines


def radix_lru_hits(trace_blocks, capacity):
    """按到达顺序把每个请求的块序列先 match、再 insert 进一棵容量为 capacity 块的基数树，返回每个请求的命中块数。

    >>> radix_lru_hits([(1, 2), (1, 2, 3), (4,), (1, 2)], 2)      # 和 kv_store.replay.simulate(..., 2, "lru") 一样
    [0, 2, 0, 1]
    """
    tree = RadixCache(capacity)
    out = []
    for blocks in trace_blocks:
        seq = list(blocks)
        out.append(tree.match(seq))
        tree.insert(seq)
    return out


# ---------------------------------------------------------------- 每个容量一棵树（两个核一起算）
_BLOCKS = None     # fork 出的子进程直接继承这份数据，不用序列化几十万个块 id


def _radix_task(cap):
    return cap, radix_lru_hits(_BLOCKS, cap)


def radix_sweep(block_lists, capacities, workers=None):
    """{容量: 每个请求的命中块数 (n,)}：每个容量各跑一遍 radix_lru_hits。各容量互相独立，分给多个进程。

    >>> radix_sweep([(1, 2), (1, 2, 3), (4,), (1, 2)], [2, None], workers=1)[2].tolist()
    [0, 2, 0, 1]
    """
    global _BLOCKS
    blocks = [tuple(b) for b in block_lists]
    caps = [c for c in capacities if c is None] + sorted((c for c in capacities if c is not None), reverse=True)
    # ↑ 无限和大容量的树大、慢，先派出去，两个核的负载更均衡
    if workers is None:
        workers = min(2, n_cores())
    _BLOCKS = blocks
    try:
        pairs = fork_map(_radix_task, caps, workers)      # 工作进程 fork 时继承 _BLOCKS
    finally:
        _BLOCKS = None
    return {c: np.asarray(h, dtype=np.int64) for c, h in pairs}
