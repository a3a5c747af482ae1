"""测试 04 的几个文件共用的数据：trace 和它的整张命中表（最慢的一步）。命中表的每一格整个测试会话只算一遍
（conftest.shared_sweep：两个 pytest 进程共用，和本进程里跑 main 的那几遍也是同一份）。"""
import pytest

from conftest import load_script, share_slow_calls, shared

m = load_script("04_prefix_caching")
_trace_sweep = m.trace_sweep      # 原来的函数：测试会把 m.trace_sweep 换成"返回这里缓存的那一份"，这里不能跟着换
_cache = {}


def trace_data(path=None, block_size=512, with_contrast=True):
    """m.trace_sweep(...)：演示 3、4 的参数（和 main 传的一样；with_contrast：--more 的对照行）。path=None 是合成
    trace。调用方只读，不改。"""
    key = (path, block_size, with_contrast)
    if key not in _cache:
        with pytest.MonkeyPatch.context() as mp:
            share_slow_calls(m, mp, "04_prefix_caching")
            _cache[key] = _trace_sweep(m.read_trace(path, block_size), path, block_size,
                                       with_contrast=with_contrast)
    return _cache[key]


def synthetic_data():
    return trace_data(None, 512)


def demo2_results():
    """m.demo2_shared_prefix() 的结果（跑一次小模型约 0.5 s），测试 04 和 04b 共用。它会打印；调用方只读。"""
    return shared(("04 demo2",), m.demo2_shared_prefix)
