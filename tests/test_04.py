"""04_prefix_caching：复用前缀和从头算逐位相同；改一个设置让要点不成立时印 ✗（不印假话）；改了策略类，演示 4 的表
就按改过的类算；不合理的设置在任何输出之前一行拒绝。默认输出和标准文件相同由 test_golden 管。"""
import heapq
import re
from collections import OrderedDict

import pytest

from conftest import load
from kv_store.policies import BlockCache, LengthAwareCache, LFUCache, LRUCache, hit_blocks
from kv_store.trace import make_trace

SMALL = ("小 trace", make_trace(0, n_requests=2_000))       # 演示 4 的改类测试用：几秒变成零点几秒


@pytest.fixture
def m():
    return load("04_prefix_caching")


def claims(out):
    """印出来的观察：[(是否 ✗, 整句)]。"""
    return [(text.startswith("✗"), text) for text in re.findall(r"^  \d+\. (.+(?:\n     .+)*)", out, re.M)]


@pytest.mark.parametrize("block", [16, 5])
def test_prefix_reuse_equals_full_recompute(m, capsys, block):
    m.BLOCK_SIZE = block
    res = m.demo2_shared_prefix()
    assert all(r["worst"] == 0.0 for r in res.values())             # max |diff| 0.0，不只是"很小"
    assert all(r["computed"] < r["total"] and r["shared"] < r["private"] for r in res.values())
    assert not any(bad for bad, _ in claims(capsys.readouterr().out))


def test_demo_1_hashes(m, capsys):
    d = m.demo1_hashing()
    assert d["hashes"]["A"][0].startswith("b1146cef") and (d["same_ab"], d["same_c"]) == (3, [1])


@pytest.mark.parametrize("setting,value,demo,which", [
    ("N_SHARING", 1, "demo2_shared_prefix", 0),                     # 一个请求：没有后来的请求来复用
    ("HOT_ACCESSES", 20_000, "demo3_block_heat", 1),                # 最热的块不到两万次
    ("CAPACITIES", (None, 200_000), "demo4_policies", 0),           # 从不淘汰：容量变小命中率不降
    ("CAPACITIES", (None, 1_000_000), "demo4_policies", 1),         # 各策略一样：LRU 没有"高得最多"的一格
    ("SAVED_CAPS", (None, 1_000), "demo5_prefill_time", 1),         # 1,000 块放得进一台机器的 HBM
])
def test_a_changed_setting_prints_a_cross(m, capsys, setting, value, demo, which):
    setattr(m, setting, value)
    m.TRACE = SMALL
    if setting in ("HOT_ACCESSES", "SAVED_CAPS"):
        m.TRACE = None                                                # 这两条要全量的合成 trace
    getattr(m, demo)()
    got = claims(capsys.readouterr().out)
    assert got[which][0] and "在这组设置下不成立" in got[which][1], got     # ✗、反驳它的数，不是一句假话


def lru_row(m, capsys, cls=LRUCache):
    """演示 4 在小 trace 上的一行：印出来的格子 + 直接用 cls 算出来的格子。"""
    m.TRACE = SMALL
    d = m.demo4_policies()
    capsys.readouterr()
    trace = SMALL[1]
    acc = sum(len(r.blocks) for r in trace)
    direct = [f"{sum(hit_blocks(trace, cls(c))) / acc:.2f}" for c in m.CAPACITIES]
    row = next(r for r in d["rows"] if r[0] == cls.NAME)
    return row[1:], direct


def test_default_row_is_the_class(m, capsys):
    printed, direct = lru_row(m, capsys)
    assert printed == direct


def test_editing_lru_evict_changes_the_table(m, capsys, monkeypatch):
    before, _ = lru_row(m, capsys)
    monkeypatch.setattr(LRUCache, "evict", lambda self: self.entries.popitem(last=True)[0])   # 先扔最新的
    printed, direct = lru_row(m, capsys)
    assert printed == direct != before


def test_editing_lru_touch_changes_the_table(m, capsys, monkeypatch):
    before, _ = lru_row(m, capsys)

    def touch(self, block, pos):                                       # 碰过的块不挪：变成 FIFO
        if block not in self.entries:
            self.entries[block] = None
    monkeypatch.setattr(LRUCache, "touch", touch)
    printed, direct = lru_row(m, capsys)
    assert printed == direct != before


def test_editing_lengthaware_rank_changes_the_table(m, capsys, monkeypatch):
    before, _ = lru_row(m, capsys, LengthAwareCache)
    monkeypatch.setattr(LengthAwareCache, "rank", lambda self, pos: pos)      # 先扔靠前的块
    printed, direct = lru_row(m, capsys, LengthAwareCache)
    assert printed == direct != before


def test_editing_lfu_touch_changes_the_table(m, capsys, monkeypatch):
    before, _ = lru_row(m, capsys, LFUCache)

    def touch(self, block, pos):                                       # 次数不累加（总是 1）：LFU 变成了 LRU
        old = self.entries.get(block)
        key = self.entries[block] = (1, self.rank(pos), next(self.clock), block)
        if old is None and self.capacity is not None:
            heapq.heappush(self.heap, key)
    monkeypatch.setattr(LFUCache, "touch", touch)
    printed, direct = lru_row(m, capsys, LFUCache)
    assert printed == direct != before


class FIFOCache(BlockCache):
    """先进先出：碰过的块不挪位置。"""
    NAME = "FIFO"

    def __init__(self, capacity):
        super().__init__(capacity, OrderedDict())

    def touch(self, block, pos):
        self.entries.setdefault(block, None)

    def evict(self):
        return self.entries.popitem(last=False)[0]


def test_registering_a_fifo_class_adds_its_row(m, capsys):
    m.POLICIES = m.POLICIES + (FIFOCache,)
    printed, direct = lru_row(m, capsys, FIFOCache)
    assert printed == direct


def test_min_row_is_at_least_every_policy(m, capsys):
    m.TRACE = SMALL
    d = m.demo4_policies()
    capsys.readouterr()
    k = len(m.CAPACITIES)
    for i in range(len(m.POLICIES)):
        assert all(sum(d["hits"][i * k + j]) <= sum(d["min_hits"][j]) for j in range(k))


class Broken(LRUCache):
    def evict(self):
        return None


@pytest.mark.parametrize("setting,value", [
    ("N_SHARING", 0), ("BLOCK_SIZE", -0.0), ("SUFFIX_LEN", (30, 10)), ("FEW_SHOT", (("a", 5), ("a", 6))),
    ("CAPACITIES", (None, 10, 10)), ("CAPACITIES", (1e308,)), ("POLICIES", (LFUCache, LengthAwareCache)),
    ("SAVED_CAPS", (None,)), ("TRACE_SEED", -1), ("POLICIES", (LRUCache, Broken)),
])
def test_bad_setting_is_refused_before_any_output(m, capsys, setting, value):
    setattr(m, setting, value)
    with pytest.raises(SystemExit) as e:
        m.main(["--demo", "1"])
    out, err = capsys.readouterr()
    named = setting
    if setting == "POLICIES" and Broken in value:
        named = "Broken.evict()"                                       # 改坏的 evict：说出是哪个类的
    assert e.value.code == 2 and out == "" and err.count("\n") == 1 and named in err, err
