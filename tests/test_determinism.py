"""同一条命令，换一个进程（新的哈希种子）输出也逐字节相同（NO_COLOR=1，管道输出固定 80 列）。

每个 lecture07/0*.py（GPU 脚本除外）：新解释器里跑一遍，和本进程里 main([]) 的输出比。本进程的那一遍由
conftest.run_main 缓存，和该脚本的冒烟测试共用（xdist_group 让它们在同一个 pytest 进程里）。
"""
import contextlib
import glob
import io
import os

import pytest
from conftest import LECTURE, ROOT, finish_fresh, load_script, run_main, start_fresh

REAL = os.path.join(ROOT, "..", "shared", "traces", "mooncake_fast25_synthetic_trace.jsonl")
SCRIPTS = sorted(os.path.basename(p)[:-3] for p in glob.glob(os.path.join(LECTURE, "0*.py"))
                 if "triton" not in os.path.basename(p))          # 06_triton_cow_clone 要 GPU
GROUP = {"03_sharing_and_cow": "test_03_sharing_and_cow", "04_prefix_caching": "s04", "04b_radix_cache": "s04",
         "05_kv_store": "test_05_kv_store"}                          # 和这几个脚本的测试同一个进程：共用算过的结果


def output_here(name):
    """本进程里 main([]) 的输出。04 的命中表（最慢的一步）用 04 的测试共享的那一份（helpers_04），不再算一遍。"""
    if name != "04_prefix_caching":
        return run_main(name)[0]
    import helpers_04
    m = load_script(name)
    buf = io.StringIO()
    with pytest.MonkeyPatch.context() as mp, contextlib.redirect_stdout(buf):
        mp.setattr(m, "trace_sweep", lambda *a, **k: helpers_04.synthetic_data())
        assert m.main([]) == 0
    return buf.getvalue()


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.xdist_group(GROUP.get(n, "determinism")))
                                  for n in SCRIPTS])
def test_same_command_same_output_in_a_fresh_process(name):
    proc = start_fresh(name)                  # 新进程在另一个核上跑，同时本进程跑（或直接拿缓存的）那一遍
    here = output_here(name)
    fresh = finish_fresh(proc)
    assert here.strip(), f"{name} 什么也没打印"
    assert fresh == here


@pytest.mark.skipif(not os.path.exists(REAL), reason="../shared/traces 不在（真实 trace 只在有 shared/ 的机器上测）")
def test_real_trace_run_is_deterministic():
    a, b = start_fresh("04_prefix_caching", "--trace", REAL, "--demo", "3"), \
        start_fresh("04_prefix_caching", "--trace", REAL, "--demo", "3")
    assert finish_fresh(a) == finish_fresh(b)
