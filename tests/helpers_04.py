"""测试 04 的几个文件共用的数据：trace 和它的整张命中表（最慢的一步），整个测试会话每个 trace 只算一遍。"""
from conftest import load_script

m = load_script("04_prefix_caching")
_cache = {}
_trace_sweep = m.trace_sweep      # 原来的函数：测试会把 m.trace_sweep 换成"返回这里缓存的那一份"，这里不能跟着换


def trace_data(path=None, block_size=512):
    """m.trace_sweep(...)：演示 3、4 的参数。path=None 是合成 trace。调用方只读，不改。"""
    key = (path, block_size)
    if key not in _cache:
        _cache[key] = _trace_sweep(m.read_trace(path, block_size), path, block_size)
    return _cache[key]


def synthetic_data():
    return trace_data(None, 512)


def demo2_results():
    """m.demo2_shared_prefix() 的结果（跑一次小模型约 0.5 s），测试 04 和 04b 共用。它会打印；调用方只读。"""
    if "demo2" not in _cache:
        _cache["demo2"] = m.demo2_shared_prefix()
    return _cache["demo2"]
