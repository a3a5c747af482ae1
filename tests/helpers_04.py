"""测试 04 的几个文件共用的数据：trace 和它的整张命中表（最慢的一步），整个测试会话每个 trace 只算一遍
（conftest.shared：两个 pytest 进程共用，和本进程里跑 main 的那一遍也是同一份）。"""
from conftest import load_script, shared, shared_trace_sweep

m = load_script("04_prefix_caching")
_trace_sweep = shared_trace_sweep(m)   # 原来的函数加上会话缓存：测试会把 m.trace_sweep 换掉，这里不跟着换
_traces = {}


def trace_data(path=None, block_size=512):
    """m.trace_sweep(...)：演示 3、4 的参数（和 main 传的一样）。path=None 是合成 trace。调用方只读，不改。"""
    if (path, block_size) not in _traces:
        _traces[path, block_size] = m.read_trace(path, block_size)
    return _trace_sweep(_traces[path, block_size], path, block_size, demo3=True)


def synthetic_data():
    return trace_data(None, 512)


def demo2_results():
    """m.demo2_shared_prefix() 的结果（跑一次小模型约 0.5 s），测试 04 和 04b 共用。它会打印；调用方只读。"""
    return shared(("04 demo2",), m.demo2_shared_prefix)
