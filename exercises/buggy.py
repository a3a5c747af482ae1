"""检查器必须抓住的典型错误写法：每个练习至少两个。每一项说明错在哪里，以及应当由哪个用例抓住。

    python exercises/check.py --variant lru_evict_newest      # 看检查器对这个错误写法说什么

能借用讲义代码的地方都借用（子类只改出错的那一个方法），这里不是参考答案的第二份。
"""
import hashlib
from dataclasses import dataclass

import numpy as np

from kv_store.eviction import BlockCache, LRUCache, S3FIFOCache
from kv_store.prefix_match import block_hashes
from paged_kv import PagedSequence, gather_kv, kv_bytes_per_token, n_blocks
from kv_store.radix_tree import RadixCache


@dataclass(frozen=True)
class Buggy:
    exercise: int
    objs: dict            # {练习里的名字: 错误的写法}
    caught_by: str        # 第一个没过的用例的名字（开头一段即可）
    what: str             # 错在哪里
    hint: str = ""        # 提示里应当有的一段话（空：不查提示的内容）


# ---------------------------------------------------------------- 练习 1
def kv_forgot_k_and_v(attention, n_layers, n_heads, head_dim, n_kv_heads=None, kv_lora_rank=None, rope_dim=None,
                      dtype_bytes=2):
    heads = {"MHA": n_heads, "GQA": n_kv_heads, "MQA": 1}.get(attention)
    per_layer = heads * head_dim if heads is not None else kv_lora_rank + rope_dim
    return n_layers * per_layer * dtype_bytes


def kv_gqa_uses_n_heads(attention, n_layers, n_heads, head_dim, n_kv_heads=None, kv_lora_rank=None, rope_dim=None,
                        dtype_bytes=2):
    heads = {"MHA": n_heads, "GQA": n_heads, "MQA": 1}.get(attention)
    per_layer = 2 * heads * head_dim if heads is not None else kv_lora_rank + rope_dim
    return n_layers * per_layer * dtype_bytes


def kv_mla_times_two(attention, n_layers, n_heads, head_dim, n_kv_heads=None, kv_lora_rank=None, rope_dim=None,
                     dtype_bytes=2):
    heads = {"MHA": n_heads, "GQA": n_kv_heads, "MQA": 1}.get(attention)
    per_layer = 2 * heads * head_dim if heads is not None else 2 * (kv_lora_rank + rope_dim)
    return n_layers * per_layer * dtype_bytes


def kv_fp32_as_fp16(attention, n_layers, n_heads, head_dim, n_kv_heads=None, kv_lora_rank=None, rope_dim=None,
                    dtype_bytes=2):
    return kv_bytes_per_token(attention, n_layers, n_heads, head_dim, n_kv_heads, kv_lora_rank, rope_dim,
                              1 if dtype_bytes == 1 else 2)         # 只想到了 FP8 和 fp16：fp32 也按 2 字节算


def kv_unknown_is_zero(attention, n_layers, n_heads, head_dim, n_kv_heads=None, kv_lora_rank=None, rope_dim=None,
                       dtype_bytes=2):
    per_layer = {"MHA": 2 * n_heads * head_dim, "GQA": 2 * (n_kv_heads or 0) * head_dim, "MQA": 2 * head_dim,
                 "MLA": (kv_lora_rank or 0) + (rope_dim or 0)}.get(attention, 0)     # 写错的名字悄悄得到 0 字节
    return n_layers * per_layer * dtype_bytes


def kv_float_result(attention, n_layers, n_heads, head_dim, n_kv_heads=None, kv_lora_rank=None, rope_dim=None,
                    dtype_bytes=2):
    if attention == "GQA":
        return n_layers * 2 * n_heads * head_dim / (n_heads / n_kv_heads) * dtype_bytes   # / 除法：得到 float
    return kv_bytes_per_token(attention, n_layers, n_heads, head_dim, n_kv_heads, kv_lora_rank, rope_dim, dtype_bytes)


def kv_gqa_float_ratio(attention, n_layers, n_heads, head_dim, n_kv_heads=None, kv_lora_rank=None, rope_dim=None,
                       dtype_bytes=2):
    if attention == "GQA":
        return n_layers * 2 * (n_heads / n_kv_heads) * head_dim * dtype_bytes     # 乘了每组的查询头数，还是 float
    return kv_bytes_per_token(attention, n_layers, n_heads, head_dim, n_kv_heads, kv_lora_rank, rope_dim, dtype_bytes)


# ---------------------------------------------------------------- 练习 2
def gather_drops_partial_block(pool, layer, blocks, length):
    bs, H, hd = pool.block_size, pool.k.shape[2], pool.k.shape[4]
    k, v = np.zeros((H, length, hd), pool.k.dtype), np.zeros((H, length, hd), pool.v.dtype)
    for t0 in range(0, length // bs * bs, bs):                          # 只取满块：没写满的最后一块留着 0
        k[:, t0:t0 + bs], v[:, t0:t0 + bs] = pool.k[layer, blocks[t0 // bs]], pool.v[layer, blocks[t0 // bs]]
    return k, v


def gather_ignores_block_table(pool, layer, blocks, length):
    k, v = pool.k[layer, :len(blocks)], pool.v[layer, :len(blocks)]     # 取了物理块 0、1、……，没按块表
    H, hd = k.shape[1], k.shape[3]
    return (k.transpose(1, 0, 2, 3).reshape(H, -1, hd)[:, :length],
            v.transpose(1, 0, 2, 3).reshape(H, -1, hd)[:, :length])


def gather_reshape_without_transpose(pool, layer, blocks, length):
    k, v = pool.k[layer, blocks], pool.v[layer, blocks]
    H, hd = k.shape[1], k.shape[3]
    return k.reshape(H, -1, hd)[:, :length], v.reshape(H, -1, hd)[:, :length]    # 块和头的维度搅在一起


def gather_no_trim(pool, layer, blocks, length):
    k, v = pool.k[layer, blocks], pool.v[layer, blocks]
    H, hd = k.shape[1], k.shape[3]
    return k.transpose(1, 0, 2, 3).reshape(H, -1, hd), v.transpose(1, 0, 2, 3).reshape(H, -1, hd)   # 没切到 length


def gather_power_of_two(pool, layer, blocks, length):
    shift = pool.block_size.bit_length() - 1                             # 以为块大小总是 2 的幂：t >> shift、t & (bs-1)
    idx = [(blocks[t >> shift], t & (pool.block_size - 1)) for t in range(length)]
    return (np.stack([pool.k[layer, b, :, j] for b, j in idx], axis=1),
            np.stack([pool.v[layer, b, :, j] for b, j in idx], axis=1))


def gather_one_block_fast_path(pool, layer, blocks, length):
    if len(blocks) == 1:
        return pool.k[layer, blocks[0]], pool.v[layer, blocks[0]]        # 只有一块时"直接返回"：忘了切到 length
    return gather_kv(pool, layer, blocks, length)


# ---------------------------------------------------------------- 练习 3
class ForkNoIncref(PagedSequence):
    def fork(self):
        child = type(self)(self.pool)
        child.blocks, child.length = list(self.blocks), self.length      # 忘了 incref
        return child


class ForkSharesList(PagedSequence):
    def fork(self):
        child = type(self)(self.pool)
        child.blocks, child.length = self.blocks, self.length            # 和原序列共用一个 list
        for b in self.blocks:
            self.pool.incref(b)
        return child


class CowNoDecref(PagedSequence):
    def reserve(self, n):
        pool, bs = self.pool, self.pool.block_size
        if n > 0 and self.length % bs and pool.ref_count[self.blocks[-1]] > 1:
            self.blocks[-1] = pool.copy_block(self.blocks[-1])           # 复制了，旧块却没有 decref
        return super().reserve(n)


class NoCow(PagedSequence):
    def reserve(self, n):
        pool, bs = self.pool, self.pool.block_size
        while len(self.blocks) * bs < self.length + n:                   # 从不复制：直接写进共享的块
            self.blocks.append(pool.alloc())
        pos = self.length + np.arange(n)
        return np.asarray(self.blocks, dtype=np.int64)[pos // bs], pos % bs


class CowAfterAlloc(PagedSequence):
    def reserve(self, n):
        pool, bs = self.pool, self.pool.block_size
        for _ in range(n_blocks(self.length + n, bs) - len(self.blocks)):
            self.blocks.append(pool.alloc())                             # 先分配新块……
        if n > 0 and self.length % bs and pool.ref_count[self.blocks[-1]] > 1:
            old = self.blocks[-1]                                        # ……再看 blocks[-1]：跨块时它已经是新块了，
            self.blocks[-1] = pool.copy_block(old)                       # 共享的未满块没复制就被写了
            pool.decref(old)
        pos = self.length + np.arange(n)
        return np.asarray(self.blocks, dtype=np.int64)[pos // bs], pos % bs


class FreeNoDecref(PagedSequence):
    def free(self):
        self.blocks, self.length = [], 0                                 # 忘了 decref：块永远回不到空闲表


# ---------------------------------------------------------------- 练习 4
def hashes_without_parent(tokens, block):
    return [hashlib.sha256(np.asarray(tokens[i * block:(i + 1) * block], dtype=np.int64).tobytes()).hexdigest()[:12]
            for i in range(len(tokens) // block)]                       # 每块单独哈希，没有链上前一块


def hashes_partial_tail(tokens, block):
    out, prev = [], b""
    for i in range(-(-len(tokens) // block)):                            # 向上取整：结尾的零头也算了一块
        prev = hashlib.sha256(prev + np.asarray(tokens[i * block:(i + 1) * block], dtype=np.int64).tobytes()).digest()
        out.append(prev.hex()[:12])
    return out


def hashes_shorten_input(tokens, block):
    del tokens[len(tokens) // block * block:]                            # 把调用者的 list 截短了（调用者之后还要用）
    return block_hashes(tokens, block)


def hashes_numpy_truthiness(tokens, block):
    if not tokens:                                                       # numpy 数组不能这样判断真假：ValueError
        return []
    return block_hashes(list(tokens), block)


def match_counts_all(hashes, cache):
    return sum(h in cache for h in hashes)                               # 数了所有命中的块，没在第一次不中时停


def match_off_by_one(hashes, cache):
    n = 0
    for h in hashes:
        n += 1                                                           # 先加后判断：多算一块
        if h not in cache:
            break
    return n


# ---------------------------------------------------------------- 练习 5
class LRUEvictNewest(LRUCache):
    insert = BlockCache.insert

    def evict(self):
        return self.entries.popitem(last=True)[0]                        # 踢掉了最新的一块


class LRUNoRefresh(LRUCache):
    insert = BlockCache.insert

    def touch(self, block, pos):
        self.entries.setdefault(block, None)                             # 命中时没挪到最新：成了 FIFO


class LRUMatchRefreshes(LRUCache):
    def match(self, blocks):
        n = super().match(blocks)
        for b in reversed(list(blocks)[:n]):
            self.entries.move_to_end(b)                                  # 查一下也刷新：只 match 不 insert 时顺序被改了
        return n


class S3FIFORechecksSmall(S3FIFOCache):
    def evict(self):
        while self.small and len(self.small) >= self.small_size:        # 每取一块都重新比大小：S 一变小就改去 M
            b = self.small[0]
            if self.entries[b] < self.MOVE_TO_MAIN:
                return self._evict_small()                               # 队尾这块不升级：父类正好只踢它
            self.entries[b] = 0
            self.main.append(self.small.popleft())
            if len(self.main) >= self.main_size:
                self._evict_main()
        return self._evict_main()


# ---------------------------------------------------------------- 练习 6
class RadixSplitOffByOne(RadixCache):
    def _split(self, child, j):
        return super()._split(child, max(1, j - 1))                      # 拆早了一个位置


class RadixSplitSliceOff(RadixCache):
    def _split(self, child, j):
        key = child.key
        head = super()._split(child, j)
        child.key = key[j + 1:]                                          # 尾巴从 j + 1 起：丢了分叉处的那个单位
        return head


class RadixSplitNoReattach(RadixCache):
    def _split(self, child, j):
        parent, first = child.parent, child.key[0]
        head = super()._split(child, j)
        parent.children[first] = child                                   # 没把 head 接回父节点：父节点还指着尾巴
        return head


class RadixMatchWholeNodes(RadixCache):
    def match(self, seq):
        node, i = self.root, 0
        while i < len(seq) and seq[i] in node.children:
            child = node.children[seq[i]]
            if list(seq[i:i + len(child.key)]) != child.key:
                break                                                    # 节点只匹配了一部分：没算进去
            node, i = child, i + len(child.key)
        return i


class RadixSizeNotUpdated(RadixCache):
    def insert(self, seq, lock=False):
        size = self.size
        out = super().insert(seq, lock)
        self.size = size                                                 # 新叶子的长度没加进 size
        return out


class RadixNoPushLeaf(RadixCache):
    def _push_leaf(self, node):
        pass                                                             # 新叶子没进淘汰队列：超容量也淘汰不了


class RadixFullHitNoRefresh(RadixCache):
    def insert(self, seq, lock=False):
        path, node, i = [], self.root, 0
        while i < len(seq) and seq[i] in node.children:                  # 先记下整段命中时会走过的最后一个节点
            node = node.children[seq[i]]
            if list(seq[i:i + len(node.key)]) != node.key:
                break
            i += len(node.key)
            path.append(node)
        stamp = path[-1].last_access if path and i == len(seq) else None
        out = super().insert(seq, lock)
        if stamp is not None:
            path[-1].last_access = stamp                                 # 正好停在已有节点上：那个节点没刷新
        return out


class RadixEvictBeforeAttach(RadixCache):
    def insert(self, seq, lock=False):
        cap, self.capacity = self.capacity, None
        if cap is not None:
            new = len(seq) - self.match(seq)
            if self.size + new > cap:
                self._evict(self.size + new - cap)                       # 挂上新叶子之前就淘汰：新叶子不在候选里
        try:
            return super().insert(seq, lock)
        finally:
            self.capacity = cap


BUGGY = {
    "kv_forgot_k_and_v": Buggy(1, {"kv_bytes_per_token": kv_forgot_k_and_v}, "MHA：LLaMA2-7B", "忘了 K 和 V 是两份"),
    "kv_gqa_uses_n_heads": Buggy(1, {"kv_bytes_per_token": kv_gqa_uses_n_heads}, "GQA：LLaMA3-8B",
                                 "GQA 按查询头数算"),
    "kv_mla_times_two": Buggy(1, {"kv_bytes_per_token": kv_mla_times_two}, "MLA：DeepSeek-V2", "MLA 也乘了 2"),
    "kv_fp32_as_fp16": Buggy(1, {"kv_bytes_per_token": kv_fp32_as_fp16}, "fp32", "fp32 也按 2 字节算"),
    "kv_unknown_is_zero": Buggy(1, {"kv_bytes_per_token": kv_unknown_is_zero}, "未知的注意力种类",
                                "未知的种类返回 0，不 raise ValueError"),
    "kv_float_result": Buggy(1, {"kv_bytes_per_token": kv_float_result}, "GQA：LLaMA3-8B", "GQA 用 / 除法，返回 float",
                             "值对了，但要返回整数"),
    "kv_gqa_float_ratio": Buggy(1, {"kv_bytes_per_token": kv_gqa_float_ratio}, "GQA：LLaMA3-8B",
                                "GQA 乘了 n_heads / n_kv_heads（每组的查询头数），还得到 float：先说值错在哪",
                                "要存的是 n_kv_heads 组"),
    "gather_drops_partial_block": Buggy(2, {"gather_kv": gather_drops_partial_block}, "块表 [2, 0]",
                                        "只取满块：没写满的最后一块的 token 是 0", "没写满的最后一块也要取"),
    "gather_ignores_block_table": Buggy(2, {"gather_kv": gather_ignores_block_table}, "块表 [2, 0]",
                                        "取物理块 0、1……，没按块表"),
    "gather_reshape_without_transpose": Buggy(2, {"gather_kv": gather_reshape_without_transpose}, "两个 KV 头",
                                              "没有 transpose 就 reshape：块和头搅在一起"),
    "gather_no_trim": Buggy(2, {"gather_kv": gather_no_trim}, "块表 [2, 0]", "没有切到 length"),
    "gather_power_of_two": Buggy(2, {"gather_kv": gather_power_of_two}, "只有一块、没满",
                                 "以为块大小是 2 的幂（位运算）"),
    "gather_one_block_fast_path": Buggy(2, {"gather_kv": gather_one_block_fast_path}, "只有一块、没满",
                                        "一块的序列走捷径，没切到 length"),
    "fork_no_incref": Buggy(3, {"PagedSequence": ForkNoIncref}, "fork：", "fork 忘了 incref"),
    "fork_shares_list": Buggy(3, {"PagedSequence": ForkSharesList}, "fork：", "fork 出的序列和原序列共用块表"),
    "cow_no_decref": Buggy(3, {"PagedSequence": CowNoDecref}, "写时复制：", "写时复制后旧块没有 decref"),
    "no_cow": Buggy(3, {"PagedSequence": NoCow}, "写时复制：", "从不写时复制"),
    "cow_after_alloc": Buggy(3, {"PagedSequence": CowAfterAlloc}, "写时复制跨块",
                             "先分配新块再判断写时复制：跨块写入时共享的未满块被写坏"),
    "free_no_decref": Buggy(3, {"PagedSequence": FreeNoDecref}, "free：", "free 忘了 decref"),
    "hashes_without_parent": Buggy(4, {"block_hashes": hashes_without_parent},
                                   "block_hashes：链式", "每块单独哈希，没有链上前一块"),
    "hashes_partial_tail": Buggy(4, {"block_hashes": hashes_partial_tail},
                                 "block_hashes：结尾不满一块", "零头也算了哈希"),
    "hashes_shorten_input": Buggy(4, {"block_hashes": hashes_shorten_input}, "block_hashes：结尾不满一块",
                                  "截短了调用者的 tokens"),
    "hashes_numpy_truthiness": Buggy(4, {"block_hashes": hashes_numpy_truthiness}, "block_hashes：随机的 tokens",
                                     "numpy 数组的 tokens 上出错"),
    "match_counts_all": Buggy(4, {"match_prefix": match_counts_all},
                              "match_prefix：第一块没命中", "数所有命中的块，不要求连续"),
    "match_off_by_one": Buggy(4, {"match_prefix": match_off_by_one},
                              "match_prefix：第一块没命中", "先加后判断，多算一块"),
    "lru_evict_newest": Buggy(5, {"LRUCache": LRUEvictNewest}, "超出容量", "淘汰了最新的块",
                                "看你 touch 把刚用过的放在哪一端"),
    "lru_no_refresh": Buggy(5, {"LRUCache": LRUNoRefresh}, "命中过的块变成最新的", "命中时不更新：成了 FIFO"),
    "lru_match_refreshes": Buggy(5, {"LRUCache": LRUMatchRefreshes}, "只 match 不 insert", "match 也刷新"),
    "s3fifo_rechecks_small": Buggy(5, {"S3FIFOCache": S3FIFORechecksSmall}, "选做 · S3-FIFO",
                                   "evict 每从 S 取一块都重新比 len(S) >= small_size（算法 1 只在开头比一次）"),
    "radix_split_off_by_one": Buggy(6, {"RadixCache": RadixSplitOffByOne}, "讲义的例子", "拆节点的位置差一"),
    "radix_split_slice_off": Buggy(6, {"RadixCache": RadixSplitSliceOff}, "讲义的例子",
                                   "拆出来的 child 留 key[j + 1:]：丢了一个单位", "不是 j + 1"),
    "radix_split_no_reattach": Buggy(6, {"RadixCache": RadixSplitNoReattach}, "讲义的例子",
                                     "拆开以后没把 head 接回父节点", "parent.children[key[0]] = head"),
    "radix_match_whole_nodes": Buggy(6, {"RadixCache": RadixMatchWholeNodes}, "讲义的例子",
                                     "match 只数整段相同的节点"),
    "radix_size_not_updated": Buggy(6, {"RadixCache": RadixSizeNotUpdated}, "讲义的例子", "size 没有加上新叶子"),
    "radix_no_push_leaf": Buggy(6, {"RadixCache": RadixNoPushLeaf}, "容量 4", "新叶子没进淘汰队列",
                                 "self._push_leaf(node)"),
    "radix_full_hit_no_refresh": Buggy(6, {"RadixCache": RadixFullHitNoRefresh}, "同样的序列插两次",
                                       "insert 正好停在已有节点上时没刷新它的 last_access"),
    "radix_evict_before_attach": Buggy(6, {"RadixCache": RadixEvictBeforeAttach}, "容量 4、一次插入 6 个",
                                       "挂上新叶子之前就淘汰"),
}
