"""列式 trace（kv_store.traces.Trace）：列的形状和类型、和 Request 的互相转换、读文件、合成 trace 不变、内存紧凑。"""
import gzip
import json
import os

import numpy as np
import pytest

import kv_store.belady
from kv_store.replay import simulate, sweep
from kv_store.traces import BlockLists, Trace, columns, iter_block_lists, load_trace, make_trace
from kv_store.trace_file import BLOCK_SIZE, Request
from kv_store.trace_file import iter_trace_records

REQS = [Request(0.0, 1024, 7, (5, 6)), Request(2.5, 1025, 0, (5, 6, 9)), Request(2.5, 1, 3, (11,))]
from conftest import REAL_TRACE as REAL


def test_columns_and_dtypes():
    tr = Trace.from_requests(REQS)
    assert tr.arrival.dtype == np.float64 and tr.input_len.dtype == tr.output_len.dtype == np.int64
    assert tr.hash_ids.dtype == tr.offsets.dtype == np.int64
    assert tr.hash_ids.tolist() == [5, 6, 5, 6, 9, 11] and tr.offsets.tolist() == [0, 2, 5, 6]
    assert tr.n_blocks.tolist() == [2, 3, 1] and len(tr) == 3
    assert tr.nbytes == 3 * 8 * 3 + 6 * 8 + 4 * 8


def test_round_trip_through_requests():
    tr = Trace.from_requests(REQS)
    assert list(tr) == REQS and tr == REQS and tr[1] == REQS[1] and tr[-1] == REQS[-1]
    assert Trace.from_requests(tr) == tr
    assert all(isinstance(r.blocks, tuple) for r in tr)
    with pytest.raises(IndexError):
        tr[3]


def test_slices_are_traces():
    tr = Trace.from_requests(REQS)
    part = tr[1:]
    assert isinstance(part, Trace) and part == REQS[1:] and part.offsets.tolist() == [0, 3, 4]
    assert tr[:0] == [] and len(tr[5:]) == 0
    with pytest.raises(ValueError):
        tr[::2]


def test_inconsistent_columns_are_refused():
    with pytest.raises(ValueError, match="offsets"):
        Trace([0.0], [1], [1], [1, 2], [0, 1])          # offsets[-1] ≠ len(hash_ids)
    with pytest.raises(ValueError, match="offsets"):
        Trace([0.0, 1.0], [1, 1], [1, 1], [1, 2], [0, 2, 1])   # 递减


def test_block_lists_view_and_popularity():
    tr = Trace.from_requests(REQS)
    bl = tr.block_lists()
    assert isinstance(bl, BlockLists) and len(bl) == 3 and bl[1] == [5, 6, 9] and bl[-1] == [11]
    assert list(bl) == [[5, 6], [5, 6, 9], [11]] and list(bl) == list(tr.iter_blocks())
    ids, counts = tr.popularity()
    assert ids.tolist() == [5, 6, 9, 11] and counts.tolist() == [2, 2, 1, 1]
    assert tr.block_counts().tolist() == [2, 2, 1, 1]
    assert columns(bl)[0] is tr.hash_ids                # 模拟直接用这两列，不复制


def test_iteration_in_chunks_crosses_boundaries():
    ids = np.arange(10)
    offsets = np.array([0, 3, 3, 4, 8, 10])
    assert list(iter_block_lists(ids, offsets, chunk=2)) == [[0, 1, 2], [], [3], [4, 5, 6, 7], [8, 9]]


def test_simulation_accepts_all_three_forms():
    tr = Trace.from_requests(REQS)
    for form in (tr, list(tr), [r.blocks for r in tr], tr.block_lists()):
        assert simulate(form, 2, "lru").tolist() == [0, 2, 0]
    assert sweep(tr, (None, 2), ("lru", "min"), workers=1)[("min", 2)].tolist() == [0, 2, 0]


def test_make_trace_is_unchanged():
    """合成 trace（种子 0）和改成列式之前逐个请求生成的完全一样：这几个数是用旧版本（721b4fd）算的。"""
    tr = make_trace(0)
    assert len(tr) == 23_608 and len(tr.hash_ids) == 413_147 and len(np.unique(tr.hash_ids)) == 163_070
    assert float(tr.arrival[-1]) == 3600.0 and float(tr.arrival[0]) == 0.409
    assert tr[0] == Request(0.409, 7179, 102, (0, 1, 2, 3, 4, 9, 64, 65, 66, 67, 68, 69, 70, 71, 72))
    assert int(tr.input_len.sum()) == 205_465_282 and int(tr.output_len.sum()) == 4_259_932
    assert int(tr.hash_ids.sum()) == 21_864_518_469
    assert make_trace(0) == tr and make_trace(1) != tr


def test_load_trace_equals_the_record_reader(tmp_path):
    p = tmp_path / "t.jsonl"
    p.write_text("\n".join(json.dumps({"timestamp": r.arrival * 1000, "input_length": r.input_len,
                                       "output_length": r.output_len, "hash_ids": list(r.blocks)}) for r in REQS))
    tr = load_trace(str(p))
    assert isinstance(tr, Trace) and tr == REQS
    recs = list(iter_trace_records(str(p), BLOCK_SIZE))
    assert tr.arrival.tolist() == [ts / 1000 for ts, *_ in recs]
    gz = tmp_path / "t.jsonl.gz"
    gz.write_bytes(gzip.compress(p.read_bytes()))
    assert load_trace(str(gz)) == tr
    assert load_trace(str(p), block_size=512) == tr


@pytest.mark.real_trace
def test_real_trace_is_compact():
    """公开 trace：3,993 个请求、121,877 次块访问；列式存放每个块 8 字节，共不到 1.1 MiB。"""
    tr = load_trace(REAL)
    assert len(tr) == 3_993 and len(tr.hash_ids) == 121_877 and tr[0].input_len == 40_160
    assert tr.nbytes == 3_993 * 8 * 3 + 121_877 * 8 + 3_994 * 8 < 1.1 * 2 ** 20


def test_chunk_size_does_not_change_results(monkeypatch):
    tr = make_trace(0)[:600]
    ref = {p: simulate(tr, 500, p).tolist() for p in ("lru", "lfu", "lengthaware", "s3fifo", "min")}
    monkeypatch.setattr(kv_store.belady, "CHUNK", 7)
    assert {p: simulate(tr, 500, p).tolist() for p in ref} == ref


def test_run_schedulers_equals_one_by_one():
    """kv_store.cluster.run_schedulers：每个调度器的结果和单独 run_prefill 逐位相同。"""
    from kv_store.cluster import SCHEDULERS, run_prefill, run_schedulers, trace_columns
    arrival, n_in, blocks = trace_columns(make_trace(0)[:400])
    both = run_schedulers(arrival, n_in, blocks, SCHEDULERS, 4, 50, 30.0, seed=3)
    assert list(both) == list(SCHEDULERS)
    for s in SCHEDULERS:
        one = run_prefill(arrival, n_in, blocks, s, 4, 50, 30.0, seed=3)
        assert one.keys() == both[s].keys() and all(np.array_equal(one[k], both[s][k]) for k in one)


def _globals_read(code):
    """code（连同它里面的函数）读到的模块级全大写名字。"""
    names = {n for n in code.co_names if n.isupper()}
    for c in code.co_consts:
        if hasattr(c, "co_names"):
            names |= _globals_read(c)
    return names


def test_make_trace_is_remembered_read_only_and_keyed_on_every_setting(monkeypatch):
    """同一个进程里同样的参数只生成一次，列是只读的；make_trace 读的每个设置都在键里，改了就重新生成。"""
    import kv_store.traces
    tr = make_trace(0, n_requests=300)
    assert make_trace(0, n_requests=300) == tr and make_trace(0, n_requests=300).hash_ids is tr.hash_ids
    assert not any(getattr(tr, k).flags.writeable for k in Trace.__slots__)
    with pytest.raises(ValueError):
        tr.input_len[0] = 1
    assert tr[:10].input_len.flags.writeable                 # 切片是拷贝，可以改
    read = _globals_read(kv_store.traces.make_trace.__code__) | _globals_read(kv_store.traces._generate.__code__)
    assert read - {"TRACE_SETTINGS", "MAX_MADE", "_MADE"} == set(kv_store.traces.TRACE_SETTINGS)
    monkeypatch.setattr(kv_store.traces, "MEAN_TURNS", 5.0)
    edited = make_trace(0, n_requests=300)
    assert edited != tr and edited == Trace(*kv_store.traces._generate(0, 300, kv_store.traces.DURATION_S))
    monkeypatch.setattr(kv_store.traces, "N_REQUESTS", 40)          # 默认参数也在运行时读
    assert len(make_trace(0)) == 40
