"""练习的常见错误写法，和几种写法不同的正确答案（tests/test_exercises.py 的参数）。错误写法只改讲义实现的一处
（函数包一层讲义的函数、类是讲义的类的子类）：WRONG[名字] = (练习号, {名字: 对象}, 应当没过的那一组, 提示里的一段)。"""
import hashlib
from collections import OrderedDict

import numpy as np

import paged_kv
from kv_store import policies, radix_tree
from kv_store.radix_tree import RadixNode

WRONG, RIGHT = {}, {}


def wrong(number, name, case=None, hint=None):
    """登记一个答案：给了 case 的是错误写法（WRONG），没给的是正确写法（RIGHT）。"""
    def register(obj):
        (WRONG if case else RIGHT)[obj.__name__] = (number, {name: obj}, case, hint)
        return obj
    return register


# ---------------------------------------------------------------- 练习 1（讲义的函数，改一处）
@wrong(1, "kv_bytes_per_token", "GQA", "n_kv_heads 组")
def gqa_uses_all_heads(attention, n_layers, n_heads, head_dim, n_kv_heads=None, **kw):
    return paged_kv.kv_bytes_per_token(attention, n_layers, n_heads, head_dim, n_heads, **kw)


@wrong(1, "kv_bytes_per_token", "GQA", "float")
def gqa_true_division(attention, n_layers, n_heads, head_dim, n_kv_heads=None, **kw):
    if attention == "GQA":                            # n_heads / (n_heads / n_kv_heads) 组：/ 得到的是 float
        return paged_kv.kv_bytes_per_token("MHA", n_layers, n_heads / (n_heads / n_kv_heads), head_dim, **kw)
    return paged_kv.kv_bytes_per_token(attention, n_layers, n_heads, head_dim, n_kv_heads, **kw)


@wrong(1, "kv_bytes_per_token", "MHA、MQA 也给了 n_kv_heads", "只有 GQA 看 n_kv_heads")
def mha_reads_kv_heads(attention, n_layers, n_heads, head_dim, n_kv_heads=None, **kw):
    if attention == "MHA" and n_kv_heads:
        return paged_kv.kv_bytes_per_token("GQA", n_layers, n_heads, head_dim, n_kv_heads, **kw)
    return paged_kv.kv_bytes_per_token(attention, n_layers, n_heads, head_dim, n_kv_heads, **kw)


@wrong(1, "kv_bytes_per_token", "不认识的种类", "不能算出一个数")
def unknown_is_zero(attention, *args, **kw):
    if attention not in ("MHA", "GQA", "MQA", "MLA"):
        return 0
    return paged_kv.kv_bytes_per_token(attention, *args, **kw)


# ---------------------------------------------------------------- 练习 2
@wrong(2, "gather_kv", "最后一块正好写满", "整数倍")
def last_block_by_remainder(pool, layer, blocks, length):   # 最后一块取 length % 块大小 个：满块时一个也不取
    bs = pool.block_size
    return paged_kv.gather_kv(pool, layer, blocks, (-(-length // bs) - 1) * bs + length % bs)


@wrong(2, "gather_kv", "块表比需要的长", "由 length 决定")
def last_block_from_table_length(pool, layer, blocks, length):     # 块表的每一块都取，最后一块取"剩下的"
    bs, n = pool.block_size, len(blocks)
    take = [bs] * (n - 1) + [length - bs * (n - 1)]
    return tuple(np.concatenate([x[layer, b, :, :t] for b, t in zip(blocks, take)], axis=1) for x in (pool.k, pool.v))


@wrong(2, "gather_kv", "两个 KV 头", "第一维是 KV 头")
def reshape_without_transpose(pool, layer, blocks, length):
    k, v = pool.k[layer, blocks], pool.v[layer, blocks]
    return k.reshape(k.shape[1], -1, k.shape[3])[:, :length], v.reshape(v.shape[1], -1, v.shape[3])[:, :length]


@wrong(2, "gather_kv", "块表 [2, 0]", "块表第 t // block_size 项")
def physical_blocks_in_order(pool, layer, blocks, length):
    return paged_kv.gather_kv(pool, layer, list(range(len(blocks))), length)


@wrong(2, "gather_kv", "块表 [2, 0]", "pool.v")
def v_is_k(pool, layer, blocks, length):
    k, _ = paged_kv.gather_kv(pool, layer, blocks, length)
    return k, k


@wrong(2, "gather_kv", "float32 的块池", "dtype")
def fills_float64(pool, layer, blocks, length):
    return tuple(np.array(x, dtype=np.float64) for x in paged_kv.gather_kv(pool, layer, blocks, length))


@wrong(2, "gather_kv", "块表比需要的长", "调用者")
def trims_callers_table(pool, layer, blocks, length):
    while len(blocks) * pool.block_size - pool.block_size >= length:
        blocks.pop()
    return paged_kv.gather_kv(pool, layer, blocks, length)


# ---------------------------------------------------------------- 练习 3
@wrong(3, "PagedSequence", "fork", "每块多一个使用者")
class ForkWithoutIncref(paged_kv.PagedSequence):
    def fork(self):
        child = type(self)(self.pool)
        child.blocks, child.length = list(self.blocks), self.length
        return child


@wrong(3, "PagedSequence", "fork", "自己的一份块表")
class ForkSharesTheList(paged_kv.PagedSequence):
    def fork(self):
        child = super().fork()
        child.blocks = self.blocks
        return child


@wrong(3, "PagedSequence", "一次写几个 token、跨过块边界", "先复制它")
class AllocBeforeCopy(paged_kv.PagedSequence):
    def reserve(self, n):          # 先分配新块：之后写时复制看 blocks[-1]，看到的已经是新块，共享的旧块被写坏
        while len(self.blocks) * self.pool.block_size < self.length + n:
            self.blocks.append(self.pool.alloc())
        return super().reserve(n)


@wrong(3, "PagedSequence", "最后一块写满了", "用不着复制")
class CopiesFullBlock(paged_kv.PagedSequence):
    def reserve(self, n):
        if self.blocks and self.pool.ref_count[self.blocks[-1]] > 1:
            old = self.blocks[-1]
            self.blocks[-1] = self.pool.copy_block(old)
            self.pool.decref(old)
        return super().reserve(n)


@wrong(3, "PagedSequence", "free", "少一个使用者")
class FreeKeepsLength(paged_kv.PagedSequence):
    def free(self):
        length = self.length
        super().free()
        self.length = length


# ---------------------------------------------------------------- 练习 4
def _chain(tokens, block, as_bytes):
    out, prev = [], b""
    for i in range(len(tokens) // block):
        prev = hashlib.sha256(prev + as_bytes(tokens[i * block:(i + 1) * block])).digest()
        out.append(prev.hex()[:12])
    return out


@wrong(4, "block_hashes", "int32 的 numpy 数组", "int64")
def hashes_ignore_dtype(tokens, block):
    return _chain(tokens, block, lambda chunk: np.asarray(chunk).tobytes())


@wrong(4, "block_hashes", "两块：链式", "第 1 块的完整哈希")
def hashes_not_chained(tokens, block):
    return [hashlib.sha256(np.asarray(tokens[i:i + block], dtype=np.int64).tobytes()).hexdigest()[:12]
            for i in range(0, len(tokens) // block * block, block)]


@wrong(4, "block_hashes", "结尾不满一块", "不算")
def hashes_partial_block(tokens, block):
    return _chain(list(tokens) + [0] * (-len(tokens) % block), block,
                  lambda chunk: np.asarray(chunk, dtype=np.int64).tobytes())


@wrong(4, "match_prefix", "中间断了", "第一次没命中就停")
def match_counts_every_hit(hashes, cache):
    return sum(h in cache for h in hashes)


@wrong(4, "match_prefix", "全部命中", "调用者")
def match_pops_the_list(hashes, cache):
    n = 0
    while hashes and hashes[0] in cache:
        hashes.pop(0)
        n += 1
    return n


@wrong(4, "match_prefix")
def match_on_sequences_only(hashes, cache):       # 只认 list、tuple（docstring 只承诺这两种）：numpy 数组上 not 会出错
    if not hashes or hashes[0] not in cache:
        return 0
    return 1 + match_on_sequences_only(hashes[1:], cache)


# ---------------------------------------------------------------- 练习 5
@wrong(5, "LRUCache", "碰过的块变最新", "变成最新的")
class Fifo(policies.LRUCache):
    def touch(self, block, pos):
        self.entries.setdefault(block, None)


@wrong(5, "LRUCache", "超出容量", "最久没碰过")
class EvictsNewest(policies.LRUCache):
    def evict(self):
        return self.entries.popitem(last=True)[0]


@wrong(5, "LRUCache", "match 不算使用", "只读")
class MatchRefreshes(policies.LRUCache):
    def match(self, blocks):
        n = super().match(blocks)
        for b in blocks[:n]:
            self.entries.move_to_end(b)
        return n


@wrong(5, "LRUCache", "超出容量", "最久没碰过")
class EvictSpins(policies.LRUCache):
    def evict(self):
        while True:
            self.entries.move_to_end(next(iter(self.entries)))


@wrong(5, "LRUCache")
class NewestFirst(policies.LRUCache):
    def touch(self, block, pos):
        self.entries[block] = None
        self.entries.move_to_end(block, last=False)

    def evict(self):
        print("淘汰", next(reversed(self.entries)))
        return self.entries.popitem(last=True)[0]


@wrong(5, "LRUCache")
class Timestamps(policies.BlockCache):
    def __init__(self, capacity):
        super().__init__(capacity, OrderedDict())
        self.now = 0

    def touch(self, block, pos):
        self.now += 1
        self.entries[block] = self.now

    def evict(self):
        oldest = min(self.entries, key=self.entries.get)
        del self.entries[oldest]
        return oldest


# ---------------------------------------------------------------- 练习 6
class _Radix(radix_tree.RadixCache):     # _split 照讲义的步骤写一遍，子类只改其中一步
    def _split(self, child, j):
        parent, key = child.parent, child.key
        head = RadixNode(key[:j], parent, child.last_access)
        head.ref = child.ref
        head.children[key[j]] = self._tail(child, head, key[j:])
        parent.children[key[0]] = head
        self.n_splits += 1
        return head

    def _tail(self, child, head, key):
        child.key, child.parent = key, head
        return child


@wrong(6, "RadixCache", "再拆一次拆出来的后半段", "父节点")
class TailKeepsOldParent(_Radix):
    def _tail(self, child, head, key):
        child.key = key
        return child


@wrong(6, "RadixCache", "拆一个有孩子的节点", "原来的孩子")
class SplitLosesChildren(_Radix):
    def _tail(self, child, head, key):
        child.key = key
        tail = RadixNode(key, head, child.last_access)
        tail.ref = child.ref
        return tail


@wrong(6, "RadixCache", "[1 2 3 4] 再 [1 2 9]", "调用者")
class InsertConsumesSeq(radix_tree.RadixCache):
    def insert(self, seq, lock=False):
        matched = super().insert(list(seq), lock)
        del seq[:matched]
        return matched


@wrong(6, "RadixCache", "[1 2 3 4] 再 [1 2 9]", "一个数")
class InsertReturnsPair(radix_tree.RadixCache):
    def insert(self, seq, lock=False):
        splits = self.n_splits
        return super().insert(seq, lock), self.n_splits - splits


@wrong(6, "RadixCache")
class SplitLikeTheLecture(_Radix):
    pass
