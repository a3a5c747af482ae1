"""基数树（radix tree）前缀缓存：SGLang 的 RadixAttention 认前缀、淘汰叶子的办法。

vLLM、Mooncake 用链式块哈希认前缀（kv_store/prefix.py）；SGLang（Zheng 等，"SGLang: Efficient Execution of
Structured Language Model Programs"，NeurIPS 2024）把所有请求的 token 放进一棵基数树：
- 节点 = 一段 token（key，长短不一），孩子按下一段的第一个 token 找：children = {第一个 token: 子节点}；
- match(seq)：从根往下走，能走多远就命中多长——按 token 匹配，不必凑满一块，可以停在一个节点的中间；
- insert(seq)：走到分叉处；分叉点在某个节点的中间，就把它拆成两个（_split），剩下的挂成一片新叶子；
- 淘汰：只淘汰叶子，最久没用的先走（LRU）；叶子删光了，它的父节点可能成了新的叶子；
- ref：几个还在跑的请求锁着这个节点（SGLang 的 lock_ref），ref > 0 的不淘汰。
单位可以是 token（04b 演示 1、2、4），也可以是块 id（演示 3 的 trace：链式哈希 id，一个 id 就是一段前缀）。

两种淘汰规则（rule）：
- "sglang"：照 SGLang 0.5.23 的 python/sglang/srt/mem_cache/radix_cache.py。evict(need) 从最旧的叶子起整片删，
  删够 need 个为止（树常停在容量以下）；请求在节点中间分叉时先给节点记上现在的时刻、再拆，原来的节点对象成了
  没用到的尾巴，时刻却是"刚用过"。
- "trim"（修剪）：从最旧的叶子的尾巴删，删到正好 need 个；拆开的尾巴保留原来的时刻。这就是块 LRU 的做法。
时刻 = 第几次 insert；同一时刻的两片叶子，先建的先走（SGLang 里尾巴的时刻在 match 时记，早于新叶子）。

    >>> t = RadixCache()
    >>> t.insert([1, 2, 3, 4]), t.insert([1, 2, 9])     # 第二个在 2 之后分叉：[1 2 3 4] 拆成 [1 2] → [3 4]
    (0, 2)
    >>> t.match([1, 2, 3, 7]), t.n_splits, t.size       # 命中 3 个；树里存着 [1 2] [3 4] [9] 共 5 个
    (3, 1, 5)
    >>> [(depth, start, node.key) for depth, start, node in t.nodes()]
    [(0, 0, [1, 2]), (1, 2, [3, 4]), (1, 2, [9])]
"""
import heapq

RULES = ("sglang", "trim")


class RadixNode:
    """树的一个节点（普通数据）：key 这一段单位（插入的 seq 的一段，list 或 tuple）；children {下一段的第一个单位:
    子节点}；parent；last_access 最近一次被 insert 走过的时刻；ref 几个还在跑的请求锁着它；id 第几个建的。"""

    __slots__ = ("key", "children", "parent", "last_access", "ref", "id")
    count = 0            # 一共建过几个节点：id 按建的先后编

    def __init__(self, key, parent, last_access):
        self.key, self.parent, self.last_access = key, parent, last_access
        self.children, self.ref = {}, 0
        self.id = RadixNode.count
        RadixNode.count += 1

    def __lt__(self, other):            # 堆里的记录是 (时刻, 节点)：时刻相同时，先建的节点先走
        return self.id < other.id


def common_len(key, seq, i):
    """key 和 seq[i:] 开头有几个单位相同：common_len([5, 6, 7], [1, 5, 6, 9], 1) == 2。"""
    m = len(key)
    if seq[i:i + m] == key:             # 整段相同（最常见）：一次切片比较，比逐个比快得多
        return m
    j, n = 0, min(m, len(seq) - i)
    while j < n and key[j] == seq[i + j]:
        j += 1
    return j


class RadixCache:
    """capacity：最多存多少个单位（None = 从不淘汰）；rule："sglang" 或 "trim"（见上）。"""

    def __init__(self, capacity=None, rule="sglang"):
        if rule not in RULES:
            raise ValueError(f"rule 只能是 {' 或 '.join(RULES)}（收到 {rule!r}）")
        self.capacity, self.rule = capacity, rule
        self.root = RadixNode([], None, -1)
        self.size = 0            # 树里一共存着几个单位
        self.n_splits = 0        # 拆过几次节点
        self.clock = 0           # 现在的时刻 = 已经 insert 过几次
        self.leaves = []         # 最小堆 [(时刻, 叶子)]：淘汰的候选。记录可能过时（叶子后来被走过、长了孩子、
        #                          被删了），弹出时再核对——比每次淘汰都把全树的叶子找一遍便宜

    def match(self, seq):
        """seq 从头起有几个单位已经在树里。只读：不改时刻、不拆节点。"""
        node, i, n = self.root, 0, len(seq)
        while i < n:
            node = node.children.get(seq[i])
            if node is None:
                break
            j = common_len(node.key, seq, i)
            if j < len(node.key):        # 停在这个节点的中间
                return i + j
            i += j
        return i

    def insert(self, seq, lock=False):
        """把 seq 放进树，返回插入前已经在树里的长度。走过的节点时刻记成现在；lock=True：走过的节点 ref + 1
        （这个请求还在跑）。超出容量就淘汰。"""
        now = self.clock
        self.clock += 1
        node, i, n = self.root, 0, len(seq)
        while i < n:
            child = node.children.get(seq[i])
            if child is None:
                break
            j = common_len(child.key, seq, i)
            if j < len(child.key):                   # 分叉点在 child 中间：拆开，只走前半段
                if self.rule == "sglang":
                    child.last_access = now          # SGLang 先记时刻再拆：没用到的尾巴也像"刚用过"
                child = self._split(child, j)
            child.last_access = now
            if lock:
                child.ref += 1
            node, i = child, i + j
        matched = i
        if i < n:                                    # 剩下的挂成一片新叶子
            leaf = RadixNode(seq[i:], node, now)      # key 是 seq 的一段（list 或 tuple，和 seq 同类）
            if lock:
                leaf.ref = 1
            node.children[seq[i]] = leaf
            self.size += len(leaf.key)
            heapq.heappush(self.leaves, (now, leaf))
        if self.capacity is not None and self.size > self.capacity:
            self.evict(self.size - self.capacity)
        return matched

    def unlock(self, seq):
        """insert(seq, lock=True) 的请求跑完了：走过的节点 ref − 1（SGLang 的 dec_lock_ref），没锁的叶子又能淘汰。"""
        node, i = self.root, 0
        while i < len(seq):
            node = node.children[seq[i]]             # 锁着的路径不会被淘汰，只会被拆得更细：一定走得通
            i += len(node.key)
            node.ref -= 1
            if node.ref == 0 and not node.children:
                heapq.heappush(self.leaves, (node.last_access, node))
        if self.capacity is not None and self.size > self.capacity:
            self.evict(self.size - self.capacity)

    def _split(self, child, j):
        """child 在第 j 个单位处拆开（0 < j < len(child.key)）：新节点 head = key[:j] 接到 child 原来的位置，
        child 只留 key[j:]，成了 head 唯一的孩子。head 继承 child 的时刻和 ref。返回 head。"""
        parent, key = child.parent, child.key
        head = RadixNode(key[:j], parent, child.last_access)
        head.ref = child.ref
        head.children[key[j]] = child
        parent.children[key[0]] = head
        child.key, child.parent = key[j:], head
        self.n_splits += 1
        return head

    def evict(self, need):
        """淘汰至少 need 个单位（"trim"：正好 need 个），最久没用的叶子先走；没有能删的叶子就停。
        返回 [(叶子, 从它尾巴上删掉的那一段)]，按删的先后。"""
        gone = []
        while need > 0 and self.leaves:
            t, leaf = heapq.heappop(self.leaves)
            if not leaf.key or leaf.children or leaf.ref > 0:
                continue                             # 过时的记录：已经删光、不再是叶子、或者锁着
            if leaf.last_access != t:                # 入堆以后又被走过：按新的时刻重新排队
                heapq.heappush(self.leaves, (leaf.last_access, leaf))
                continue
            k = len(leaf.key)                        # "sglang"：整片叶子
            if self.rule == "trim":
                k = min(k, need)                     # 修剪：只删尾巴上的 k 个
            first, cut = leaf.key[0], len(leaf.key) - k
            gone.append((leaf, leaf.key[cut:]))
            leaf.key = leaf.key[:cut]
            self.size -= k
            need -= k
            if leaf.key:
                heapq.heappush(self.leaves, (t, leaf))     # 还剩一截：它仍是最旧的叶子
                continue
            parent = leaf.parent
            del parent.children[first]
            if parent is not self.root and not parent.children:
                heapq.heappush(self.leaves, (parent.last_access, parent))   # 父节点成了叶子
        return gone

    def nodes(self):
        """深度优先列出 [(深度, 起点, 节点)]：起点 = 节点的 key 在序列里从第几个单位开始。孩子按插入的先后。"""
        out, stack = [], [(0, 0, c) for c in reversed(self.root.children.values())]
        while stack:
            depth, start, node = stack.pop()
            out.append((depth, start, node))
            end = start + len(node.key)
            stack.extend((depth + 1, end, c) for c in reversed(node.children.values()))
        return out
