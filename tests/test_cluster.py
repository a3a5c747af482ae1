"""集群模拟（kv_store.cluster）在手算得出答案的小例子上：KV 算完才能拉走；不复制的对照行不受热点块怎么选的影响。"""
import numpy as np
import pytest

from kv_store.cluster import (BLOCK_BYTES, LOCAL_DRAM, NIC_GB_PER_S, block_homes, done_prefix, fetch_plan,
                              hit_accesses, hit_tokens, nic_fetch, run_prefill, trace_columns)
from kv_store.tiers import A800_X8, LLAMA3_70B, prefill_time
from kv_store.trace_file import Request
from kv_store.traces import Trace

P = BLOCK_BYTES / (NIC_GB_PER_S * 1e9)        # 经网卡拉一块的秒数


def prefill_s(n_in, hit_blocks):
    return prefill_time(LLAMA3_70B, n_in, hit_tokens(hit_blocks, n_in), LOCAL_DRAM, A800_X8)


def cols(reqs):
    return trace_columns(Trace.from_requests(reqs))


PREFIX = tuple(range(100))          # 100 块 = 51,200 token：一个 prefill 要好几秒


def test_kv_cannot_be_pulled_before_the_prefill_that_makes_it_finishes():
    # 两个请求相隔 1 ms、前缀相同：第一个还在算，第二个不能从它那里拉 KV，只能自己从头算（去空闲的节点 1）
    reqs = [Request(0.0, 51_200, 1, PREFIX), Request(0.001, 51_200, 1, PREFIX)]
    r = run_prefill(*cols(reqs), "global_cache", n_nodes=8, capacity=1_000, rate_scale=1.0)
    assert r["where"].tolist() == [0, 1] and r["pulled"].tolist() == [0, 0] and r["hits"].tolist() == [0, 0]
    assert r["ttft"].tolist() == pytest.approx([prefill_s(51_200, 0)] * 2)
    # 全局调度此时和本地缓存感知选得一样
    loc = run_prefill(*cols(reqs), "local_cache", n_nodes=8, capacity=1_000, rate_scale=1.0)
    assert loc["ttft"].tolist() == r["ttft"].tolist()


def test_kv_is_pulled_once_the_prefill_has_finished():
    # r0 在节点 0 算出前缀（T0 秒做完）；r1 在 T0 之后到、占住节点 0；r2 再到：前缀已经算完，拉到空闲的节点 1
    t0 = prefill_s(51_200, 0)
    reqs = [Request(0.0, 51_200, 1, PREFIX), Request(t0 + 0.01, 51_200, 1, tuple(range(1000, 1100))),
            Request(t0 + 0.02, 51_200, 1, PREFIX)]
    r = run_prefill(*cols(reqs), "global_cache", n_nodes=2, capacity=1_000, rate_scale=1.0)
    assert r["where"].tolist() == [0, 0, 1] and r["pulled"].tolist() == [0, 0, 100] and r["hits"].tolist() == [0, 0, 100]
    assert r["ttft"][2] == pytest.approx(100 * P + prefill_s(51_200, 100))


def test_done_prefix_counts_only_finished_leading_blocks():
    ready = [{1: 0.5, 2: 3.0, 3: 0.1}, {1: 0.2, 2: 0.9}]
    assert done_prefix(ready, [3, 2], [1, 2, 3], t=1.0) == 2     # 节点 0 的块 2 还没算完；节点 1 的两块都算完了
    assert done_prefix(ready, [3, 2], [1, 2, 3], t=5.0) == 3
    assert done_prefix(ready, [3, 2], [1, 2, 3], t=0.0) == 0


def _plan(hot_ids, n_nodes=2):
    # 2 个节点，轮询：r0→0、r1→1、r2→0、r3→1。块 1、2 由 r0 在节点 0 算出；r1、r3 在节点 1，从节点 0 拉
    blocks = [(1, 2), (1, 2, 3), (1, 2, 4), (1, 5)]
    hits = [0, 2, 2, 1]
    arrival, _, bl = cols([Request(0.0, 512 * len(b), 1, b) for b in blocks])
    homes = block_homes(bl)
    hot = np.isin(np.arange(len(homes[1])), list(hot_ids))
    return arrival, fetch_plan(hit_accesses(bl, hits, homes, hot), len(blocks), n_nodes)


@pytest.mark.parametrize("hot", [set(), {1}, {2}, {1, 2}])
def test_no_replication_row_does_not_depend_on_which_blocks_are_hot(hot):
    # k = 1：冷热只影响怎样复制，不复制时 r1 从节点 0 一次拉 2 块，r3 排在它后面等 2 块的时间
    arrival, plan = _plan(hot)
    res = nic_fetch(arrival, plan, 2, 1, rate_scale=1.0)
    assert res["wait"].tolist() == pytest.approx([0, 0, 0, 2 * P])
    assert res["blocks_sent"] == 3 and res["busy"].tolist() == pytest.approx([3 * P, 0])


@pytest.mark.parametrize("workers", [1, 2])
def test_evict_that_removes_nothing_is_refused_in_one_line(monkeypatch, capsys, workers):
    # 学生改坏了 LRUCache.evict（一块也不删）：和 replay.sweep 一样一行拒绝、退出码 2，不打 traceback（进程池里也一样）
    from kv_store.cluster import run_schedulers
    from kv_store.eviction import LRUCache
    monkeypatch.setattr(LRUCache, "evict", lambda self: None)
    arrival, n_in, bl = cols([Request(0.0, 1024, 1, (1, 2)), Request(1.0, 1024, 1, (3, 4))])
    with pytest.raises(SystemExit) as e:
        run_schedulers(arrival, n_in, bl, ("random", "local_cache"), 2, 1, 1.0, workers=workers)
    assert e.value.code == 2
    assert capsys.readouterr().err.strip() == "LRUCache.evict(): 没有从 self.entries 里删掉任何块，缓存永远超出容量"


def test_schedulers_in_a_pool_equal_one_by_one(monkeypatch):
    # run_schedulers 把调度器分给进程池：结果和在本进程里一个一个跑逐位相同，顺序是给出的顺序；
    # 工作进程用的是此刻的 LRUCache（改过的类也一样：这里换成先淘汰最新的块）
    from kv_store.cluster import SCHEDULERS, run_schedulers
    from kv_store.eviction import LRUCache
    reqs = [Request(0.5 * i, 512 * (2 + i % 3), 1, tuple(range(i % 4, i % 4 + 2 + i % 3))) for i in range(40)]
    arrival, n_in, bl = cols(reqs)
    hits = {}
    for edit in (False, True):
        if edit:
            monkeypatch.setattr(LRUCache, "evict", lambda self: self.entries.popitem(last=True)[0])
        one = run_schedulers(arrival, n_in, bl, SCHEDULERS[::-1], 3, 2, 1.0, workers=1)
        two = run_schedulers(arrival, n_in, bl, SCHEDULERS[::-1], 3, 2, 1.0, workers=2)
        assert list(two) == list(SCHEDULERS[::-1])
        for s in SCHEDULERS:
            for col in one[s]:
                assert one[s][col].tolist() == two[s][col].tolist(), (edit, s, col)
        ref = {s: run_prefill(arrival, n_in, bl, s, 3, 2, 1.0) for s in SCHEDULERS}
        assert all(ref[s]["hits"].tolist() == two[s]["hits"].tolist() for s in SCHEDULERS)
        hits[edit] = two["local_cache"]["hits"].tolist()
    assert hits[False] != hits[True]              # 改过的 evict 确实进了工作进程
