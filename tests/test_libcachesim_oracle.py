"""外部的对照：libCacheSim（S3-FIFO 作者的缓存模拟器，pip 包 libcachesim）。

共享 trace 的块流按 04 喂块的顺序排好（每个请求从最后一块到第一块，见 kv_store.eviction 的"从尾到头"），
取前 ACCESSES 次访问，一块一块地喂：本课的策略类每块先 count([块]) 再 insert([块])，libCacheSim 每块 get 一次。
两边的逐块命中数（object hit）在每个容量上都必须完全相同：
- LRU、LFU：libCacheSim 的 LRU、LFU；
- S3-FIFO：libCacheSim 的 S3FIFOv0（S3-FIFO 论文用的原始实现），再加一份这里独立转写的论文算法 1；
- libCacheSim 默认的 S3FIFO 是 2024 年的后来版本：LaterS3FIFO 只改它说明里的那一处，就和它逐块相同。
libCacheSim 的数记在 LIBCACHESIM_HITS 里（libcachesim 0.3.5 跑出来的）：没装 libcachesim 的机器也拿本课的类和它比。
"""
import os
from collections import OrderedDict, deque

import pytest

from kv_store.eviction import LFUCache, LRUCache, S3FIFOCache
from kv_store.traces import load_trace

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRACE = os.path.join(ROOT, "..", "shared", "traces", "mooncake_fast25_synthetic_trace.jsonl")
ACCESSES = 100_000                          # 块流的前 10 万次访问（全部 121,877 次）
CAPACITIES = (300, 1_000, 3_000, 10_000, 30_000)
LIBCACHESIM_HITS = {   # libcachesim 0.3.5 在这 10 万次访问上的命中数（对象数为单位的容量、每块大小 1）
    "LRU": (1_256, 3_433, 11_046, 32_443, 55_063),
    "LFU": (995, 2_978, 9_947, 30_807, 55_276),
    "S3FIFOv0": (1_488, 3_998, 11_589, 31_852, 53_646),
    "S3FIFO": (1_254, 4_449, 11_546, 32_462, 52_531),
}
NO_WHEEL = ("没有安装 libcachesim：它只有 Linux x86_64（glibc ≥ 2.34）和 macOS 15 arm64、Python 3.10–3.13 的 wheel，"
            "requirements-dev.txt 在别的平台上不装它；本课的类仍和 LIBCACHESIM_HITS 里记下的数比")


@pytest.fixture(scope="module")
def stream():
    """04 喂块的顺序：请求按到达顺序，每个请求从最后一块到第一块。"""
    if not os.path.exists(TRACE):
        pytest.skip(f"没有共享 trace：把 Mooncake FAST'25 的 synthetic_trace.jsonl 放到 {os.path.normpath(TRACE)}"
                    "（仓库旁边的 shared/traces/）")
    tr = load_trace(TRACE)
    ids, off = tr.hash_ids.tolist(), tr.offsets.tolist()
    out = []
    for i in range(len(off) - 1):
        out.extend(reversed(ids[off[i]:off[i + 1]]))
        if len(out) >= ACCESSES:
            break
    assert len(out) >= ACCESSES
    return out[:ACCESSES]


def lab_hits(cache, blocks):
    """本课的类，一块一块：先数命中（count），再放进去（insert）。"""
    count, insert, hits = cache.count, cache.insert, 0
    for b in blocks:
        one = [b]
        hits += count(one)
        insert(one)
    return hits


def libcachesim_hits(name, capacity, blocks):
    """libCacheSim：容量按对象数（每块大小 1），每块 get 一次，数返回 True 的次数。"""
    lcs = pytest.importorskip("libcachesim", reason=NO_WHEEL)
    if name == "S3FIFOv0":
        from libcachesim import libcachesim_python as core
        if not hasattr(core, "S3FIFOv0_init"):
            pytest.skip("这个版本的 libcachesim 没有 S3FIFOv0")
        cache = lcs.CacheBase(core.S3FIFOv0_init(core.CommonCacheParams(cache_size=capacity), ""))
    else:
        cache = getattr(lcs, name)(capacity)
    req, hits = lcs.Request(), 0
    req.obj_size = 1
    for b in blocks:
        req.obj_id = b
        hits += cache.get(req)
    return hits


# ---------------------------------------------------------------- 论文的算法 1，独立转写（不用本课的类）
class Algorithm1:
    """S3-FIFO（Yang 等，SOSP'23）算法 1，逐行转写。只有一处要选读法：块到来时就查幽灵队列 G
    （libCacheSim 的 S3FIFOv0 也是这样；算法 1 写的是先淘汰再查 G，淘汰可能把它挤出 G）。"""

    def __init__(self, capacity):
        self.capacity = capacity
        self.S, self.M, self.G, self.freq = deque(), deque(), OrderedDict(), {}
        self.g_size = int(capacity * 0.9)               # G 记的条数和 M 一样多

    def read(self, x):
        if x in self.freq:                                # 命中：x.freq ← min(x.freq + 1, 3)
            self.freq[x] = min(self.freq[x] + 1, 3)
            return True
        in_g = self.G.pop(x, False) is None               # G 的值都是 None：在 G 里 → True，并从 G 删掉
        while len(self.S) + len(self.M) >= self.capacity:  # INSERT：缓存满了先淘汰
            self.evict()
        (self.M if in_g else self.S).append(x)
        self.freq[x] = 0
        return False

    def evict(self):
        if len(self.S) >= 0.1 * self.capacity:
            self.evict_s()
        else:
            self.evict_m()

    def evict_s(self):
        while self.S:
            t = self.S.popleft()
            if self.freq[t] > 1:
                self.M.append(t)
                self.freq[t] = 0
                if len(self.M) >= self.capacity - 0.1 * self.capacity:   # M 满了
                    self.evict_m()
            else:
                del self.freq[t]
                self.G[t] = None
                if len(self.G) > self.g_size:
                    self.G.popitem(last=False)
                return

    def evict_m(self):
        while self.M:
            t = self.M.popleft()
            if self.freq[t] > 0:
                self.M.append(t)
                self.freq[t] -= 1
            else:
                del self.freq[t]
                return


class LaterS3FIFO(S3FIFOCache):
    """libCacheSim 默认的 S3FIFO（S3FIFO.c，2024 年 12 月的版本，文件开头的说明）相对 S3FIFOv0 只改了一处：
    缓存还没淘汰过时，小队列满了以后新块直接进主队列（原始版本照样进小队列）。它的淘汰照 libCacheSim 写：
    主队列超过 90% 或小队列空了才淘汰主队列，否则淘汰小队列；块升进主队列时不马上淘汰主队列。"""

    def __init__(self, capacity):
        super().__init__(capacity)
        self.has_evicted = False

    def touch(self, block, pos):
        if block in self.entries or block in self.ghost:
            return super().touch(block, pos)
        while len(self.entries) >= self.capacity:
            self.evict()
        if not self.has_evicted and len(self.small) >= self.small_size:
            self.main.append(block)                      # 唯一的改动：预热时小队列满了 → 主队列
        else:
            self.small.append(block)
        self.entries[block] = 0

    def evict(self):
        self.has_evicted = True
        if len(self.main) > self.main_size or not self.small:
            return self._evict_main()
        return self._evict_small()

    def _evict_small(self):
        size, self.main_size = self.main_size, float("inf")   # 块升进 M 时不马上淘汰 M（M 可以暂时超过 90%）
        try:
            return super()._evict_small()
        finally:
            self.main_size = size


# ---------------------------------------------------------------- 手算的小例子
def test_algorithm1_small_example():
    """容量 10（S 占 1、M 占 9）：0–9 进 S；0 再访问两次（freq 2）；来 10 时先淘汰：S 的队尾 0 升进 M，
    1 没被再访问 → 踢出、记进 G；再来 1：在 G 里，缓存又满了，先踢出 S 的队尾 2（记进 G），1 直接进 M。
    本课的类和转写给出同样的命中和队列。"""
    a, c = Algorithm1(10), S3FIFOCache(10)
    seq = list(range(10)) + [0, 0, 10, 1]
    assert [a.read(x) for x in seq] == [lab_hits(c, [x]) == 1 for x in seq]
    assert list(a.M) == list(c.main) == [0, 1] and 1 not in a.G and 1 not in c.ghost
    assert list(a.S) == list(c.small) == list(range(3, 11)) and 2 in a.G and 2 in c.ghost


def test_later_variant_differs_only_while_warming_up():
    """容量 10：从没淘汰过时 S（1 个位置）满了，后来的新块进 M；第一次淘汰以后新块照常进 S。"""
    c = LaterS3FIFO(10)
    for b in range(10):
        c.insert([b])
    assert list(c.small) == [0] and list(c.main) == list(range(1, 10)) and not c.has_evicted
    c.insert([10])                                   # 满了：M 没超过 90%、S 不空 → 淘汰 S 的 0
    assert c.has_evicted and list(c.small) == [10] and 0 in c.ghost


# ---------------------------------------------------------------- 共享 trace 上逐个容量比
@pytest.mark.real_trace
@pytest.mark.parametrize("i,capacity", list(enumerate(CAPACITIES)))
def test_lru_lfu_equal_libcachesim(stream, i, capacity):
    assert lab_hits(LRUCache(capacity), stream) == LIBCACHESIM_HITS["LRU"][i]
    assert lab_hits(LFUCache(capacity), stream) == LIBCACHESIM_HITS["LFU"][i]


@pytest.mark.real_trace
@pytest.mark.parametrize("i,capacity", list(enumerate(CAPACITIES)))
def test_s3fifo_equals_algorithm1_and_s3fifov0(stream, i, capacity):
    a = Algorithm1(capacity)
    assert lab_hits(S3FIFOCache(capacity), stream) == sum(map(a.read, stream)) == LIBCACHESIM_HITS["S3FIFOv0"][i]


@pytest.mark.real_trace
@pytest.mark.parametrize("i,capacity", list(enumerate(CAPACITIES)))
def test_later_variant_equals_libcachesim_default(stream, i, capacity):
    assert lab_hits(LaterS3FIFO(capacity), stream) == LIBCACHESIM_HITS["S3FIFO"][i]


@pytest.mark.real_trace
@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.test_all) if n == "S3FIFO" else n   # 默认变体：只在 make test-all 里重算
                                  for n in LIBCACHESIM_HITS])
def test_recorded_numbers_are_libcachesims(stream, name):
    """LIBCACHESIM_HITS 就是 libCacheSim 现在算出来的数（装了 libcachesim 才跑）。"""
    assert tuple(libcachesim_hits(name, cap, stream) for cap in CAPACITIES) == LIBCACHESIM_HITS[name]
