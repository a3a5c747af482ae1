"""检查器必须抓住的典型错误写法：每个练习至少两个。每一项说明错在哪里，以及应当由哪个用例抓住。

    python exercises/check.py --variant lru_evict_newest      # 看检查器对这个错误写法说什么

能借用讲义代码的地方都借用（子类只改出错的那一个方法），这里不是参考答案的第二份。
"""
import hashlib
from dataclasses import dataclass

import numpy as np

from kv_store.eviction import BlockCache, LRUCache
from paged_kv import PagedSequence
from kv_store.radix_tree import RadixCache


@dataclass(frozen=True)
class Buggy:
    exercise: int
    objs: dict            # {练习里的名字: 错误的写法}
    caught_by: str        # 第一个没过的用例的名字（开头一段即可）
    what: str             # 错在哪里


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


# ---------------------------------------------------------------- 练习 2
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


# ---------------------------------------------------------------- 练习 6
class RadixSplitOffByOne(RadixCache):
    def _split(self, child, j):
        return super()._split(child, max(1, j - 1))                      # 拆早了一个位置


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


BUGGY = {
    "kv_forgot_k_and_v": Buggy(1, {"kv_bytes_per_token": kv_forgot_k_and_v}, "MHA：LLaMA2-7B", "忘了 K 和 V 是两份"),
    "kv_gqa_uses_n_heads": Buggy(1, {"kv_bytes_per_token": kv_gqa_uses_n_heads}, "GQA：LLaMA3-8B",
                                 "GQA 按查询头数算"),
    "kv_mla_times_two": Buggy(1, {"kv_bytes_per_token": kv_mla_times_two}, "MLA：DeepSeek-V2", "MLA 也乘了 2"),
    "gather_ignores_block_table": Buggy(2, {"gather_kv": gather_ignores_block_table}, "块表 [2, 0]",
                                        "取物理块 0、1……，没按块表"),
    "gather_reshape_without_transpose": Buggy(2, {"gather_kv": gather_reshape_without_transpose}, "两个 KV 头",
                                              "没有 transpose 就 reshape：块和头搅在一起"),
    "gather_no_trim": Buggy(2, {"gather_kv": gather_no_trim}, "块表 [2, 0]", "没有切到 length"),
    "fork_no_incref": Buggy(3, {"PagedSequence": ForkNoIncref}, "fork：", "fork 忘了 incref"),
    "fork_shares_list": Buggy(3, {"PagedSequence": ForkSharesList}, "fork：", "fork 出的序列和原序列共用块表"),
    "cow_no_decref": Buggy(3, {"PagedSequence": CowNoDecref}, "写时复制：", "写时复制后旧块没有 decref"),
    "no_cow": Buggy(3, {"PagedSequence": NoCow}, "写时复制：", "从不写时复制"),
    "free_no_decref": Buggy(3, {"PagedSequence": FreeNoDecref}, "free：", "free 忘了 decref"),
    "hashes_without_parent": Buggy(4, {"block_hashes": hashes_without_parent},
                                   "block_hashes：链式", "每块单独哈希，没有链上前一块"),
    "hashes_partial_tail": Buggy(4, {"block_hashes": hashes_partial_tail},
                                 "block_hashes：结尾不满一块", "零头也算了哈希"),
    "match_counts_all": Buggy(4, {"match_prefix": match_counts_all},
                              "match_prefix：第一块没命中", "数所有命中的块，不要求连续"),
    "match_off_by_one": Buggy(4, {"match_prefix": match_off_by_one},
                              "match_prefix：第一块没命中", "先加后判断，多算一块"),
    "lru_evict_newest": Buggy(5, {"LRUCache": LRUEvictNewest}, "超出容量", "淘汰了最新的块"),
    "lru_no_refresh": Buggy(5, {"LRUCache": LRUNoRefresh}, "命中过的块变成最新的", "命中时不更新：成了 FIFO"),
    "radix_split_off_by_one": Buggy(6, {"RadixCache": RadixSplitOffByOne}, "讲义的例子", "拆节点的位置差一"),
    "radix_match_whole_nodes": Buggy(6, {"RadixCache": RadixMatchWholeNodes}, "讲义的例子",
                                     "match 只数整段相同的节点"),
    "radix_size_not_updated": Buggy(6, {"RadixCache": RadixSizeNotUpdated}, "讲义的例子", "size 没有加上新叶子"),
    "radix_no_push_leaf": Buggy(6, {"RadixCache": RadixNoPushLeaf}, "容量 4", "新叶子没进淘汰队列"),
}
