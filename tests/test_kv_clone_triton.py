"""COW 克隆 kernel 的校验矩阵（lecture07/gpu/clone_kernel.py）和 06 脚本的命令行。

没有 GPU 时 kernel 在 Triton 解释器（TRITON_INTERPRET=1）里跑；在 GPU 机器上同一批测试跑真实 kernel，
另外几项（锁页内存轮换、CUDA graph）只在 CUDA 上有意义。没装 torch / triton 时整文件跳过并说明原因。
"""
import builtins
import json
import os
import signal
import sys
import threading

import pytest
from conftest import ROOT, KERNEL_MARKS, LazyModule, kernel_module, load_script, on_cuda, skip_without_kernel

skip_without_kernel()

import numpy as np  # noqa: E402

from paged_kv import BlockPool  # noqa: E402

pytestmark = KERNEL_MARKS                          # 和 test_06_decode_share 同一个进程：只有它 import torch
torch = LazyModule("torch")                        # 收集测试时不 import（第一次用到时才 import）
kvc = LazyModule("gpu.clone_kernel")
bench = LazyModule("gpu.clone_bench")
paged_decode = LazyModule("gpu.paged_decode")
DTYPES = ["float16", "bfloat16", "float32"]        # torch 的 dtype 名字：getattr(torch, 名字)
s06 = load_script("06_triton_cow_clone")


def device():
    return ("cpu", "cuda")[on_cuda()]


def bits(t):
    return t.contiguous().view(torch.uint8)


def test_interpreter_or_cuda_is_active():
    assert kvc.HAVE_TRITON and kvc.kernel_available(device())


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("n,tile", [(0, 32), (1, 32), (11, 32), (3, None)])
def test_all_layers_kernel_matches_reference(dtype, n, tile):
    """每块 3×5×7 = 105 个元素：tile=32 时一块跨 4 个 tile，最后一个只有 9 个。"""
    dtype = getattr(torch, dtype)
    g = torch.Generator().manual_seed(n)
    kv = torch.randn((2, 2, 2 * n + 5, 3, 5, 7), generator=g).to(dtype).to(device())
    perm = torch.randperm(kv.shape[2], generator=g).tolist()
    src, dst = perm[:n], perm[n:2 * n]
    kv.view(torch.uint8)[:, :, dst] = 0xFF                  # 毒化：没写到的字节一定露馅
    exp = kv.clone()
    exp[:, :, dst] = kv[:, :, src]
    old, kvc.TILE = kvc.TILE, tile or kvc.TILE
    try:
        kvc.kv_clone_blocks_all(kv, src, dst, use_kernel=True)
    finally:
        kvc.TILE = old
    assert torch.equal(bits(kv), bits(exp))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("n,block", [(1, 32), (9, 64), (70, 32), (3, None)])
def test_copy_blocks_kernel_of_vllm_matches_reference(dtype, n, block):
    """E：grid = (层数, N)，一个 program 拷一对块的 K 和 V；每块 105 个元素，block=32 时分 4 段、最后一段 9 个。"""
    ok, _ = bench.check_copy_blocks(getattr(torch, dtype), 2, 3, 5, 7, n, device(), seed=n, block=block)
    assert ok


def test_copy_blocks_reads_the_per_layer_pointer_table():
    """E 的每层地址表就是每层 K、V 缓存的起点；kernel 只通过它找到每一层。"""
    kv = torch.zeros((3, 2, 4, 1, 2, 2), device=device())
    k, v = kvc.layer_pointers(kv)
    step = kv[0].numel() * kv.element_size()
    assert k.tolist() == [kv.data_ptr() + l * step for l in range(3)]
    assert v.tolist() == [kv.data_ptr() + l * step + step // 2 for l in range(3)]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("n", [0, 1, 9])
def test_per_layer_kernel_of_the_blog(dtype, n):
    dtype = getattr(torch, dtype)
    g = torch.Generator().manual_seed(n)
    k, v = (torch.randn((2 * n + 3, 3, 5, 8), generator=g).to(dtype).to(device()) for _ in range(2))
    ek, ev = k.clone(), v.clone()
    src, dst = list(range(n)), list(range(n, 2 * n))
    ek[dst], ev[dst] = k[src], v[src]
    kvc.kv_clone_blocks_triton(k, v, src, dst)
    assert torch.equal(bits(k), bits(ek)) and torch.equal(bits(v), bits(ev))


@pytest.mark.parametrize("dtype,n_cow", [("float16", 13), ("bfloat16", 1), ("float32", 0)], ids=str)
def test_one_cow_write_step_bit_exact(dtype, n_cow):
    """演示 1 的检查：一步写入里混着 COW 子序列、独占的、刚写满的序列；整个缓存逐位对上。"""
    dtype = getattr(torch, dtype)
    ok, n_checks = bench.check_cow_write(dtype, 2, 3, 7, 5, n_cow, device(), seed=17 + n_cow, tile=32)
    assert ok and n_checks == 5


@pytest.mark.parametrize("extra", [0, 1], ids=["N=k", "N=k+1"])
def test_pairs_as_kernel_arguments_boundary(extra):
    """N ≤ ARG_PAIRS：块号当 kernel 的标量参数，不写锁页内存、不上传；N = ARG_PAIRS + 1 起上传下标。两边都逐位对。"""
    n = kvc.ARG_PAIRS + extra
    g = torch.Generator().manual_seed(100 + n)
    kv = torch.randn((2, 2, 2 * n + 7, 3, 5, 7), generator=g).to(torch.float16).to(device())
    perm = torch.randperm(kv.shape[2], generator=g).tolist()
    src, dst = perm[:n], perm[n:2 * n]
    kv.view(torch.uint8)[:, :, dst] = 0xFF
    exp = kv.clone()
    exp[:, :, dst] = kv[:, :, src]
    clone = kvc.AllLayersClone(kv, 64)
    old, kvc.TILE = kvc.TILE, 32
    try:
        clone(kv, src, dst)
    finally:
        kvc.TILE = old
    assert torch.equal(bits(kv), bits(exp))
    assert clone.count == int(n > kvc.ARG_PAIRS)              # 上传路径才用一份锁页内存


@pytest.mark.parametrize("order,hints,evict,tile", [(0, 0, 0, 32), (1, 1, 0, 32), (0, 1, 1, 64), (1, 1, 1, 16),
                                                    (1, 0, 0, 128)])
@pytest.mark.parametrize("n", [3, 9])
def test_kernel_variants_of_the_ladder_are_bit_exact(order, hints, evict, tile, n):
    """演示 3 逐步改的每个版本（grid 顺序、提示、evict、tile；E = 2×4×8 = 64 时 tile 16/32/64 不用 mask、128 要 mask），
    下标读显存或走标量参数（n = 3），结果都逐位相同。"""
    g = torch.Generator().manual_seed(order * 10 + n)
    kv = torch.randn((2, 2, 2 * n + 4, 2, 4, 8), generator=g).to(device())
    perm = torch.randperm(kv.shape[2], generator=g).tolist()
    src, dst = perm[:n], perm[n:2 * n]
    exp = kv.clone()
    exp[:, :, dst] = kv[:, :, src]
    sd = torch.tensor(src + dst, dtype=torch.int32, device=device())
    pairs = (src, dst) if n <= kvc.ARG_PAIRS else None
    kvc.launch_all_kernel(kv, sd[:n], sd[n:], tile=tile, num_warps=1, pairs=pairs, order=order, hints=hints,
                          evict=evict)
    assert torch.equal(bits(kv), bits(exp))


def test_large_n_is_ordered_by_destination():
    s, d = kvc.by_destination(np.array([7, 8, 9]), np.array([5, 2, 4]))
    assert s.tolist() == [8, 9, 7] and d.tolist() == [2, 4, 5]
    assert kvc.by_destination([1, 2], [9, 3]) == ([1, 2], [9, 3])          # 短列表（N ≤ 64）不排


def test_repeated_src_is_allowed_and_fallback_agrees():
    """几个子序列从同一个共享块 COW：src 可以重复；没有 kernel 时的 index_copy_ 回退结果一样。"""
    kv = torch.randn((1, 2, 6, 2, 3, 4)).to(device())
    ref = kv.clone()
    kvc.kv_clone_blocks_all(kv, [0, 0, 0], [3, 4, 5], use_kernel=True)
    kvc.kv_clone_blocks_all(ref, [0, 0, 0], [3, 4, 5], use_kernel=False)
    assert torch.equal(kv, ref) and all(torch.equal(kv[:, :, d], kv[:, :, 0]) for d in (3, 4, 5))


def test_gpu_cache_uses_paged_kv_bookkeeping():
    """GPU 缓存没有自己的簿记：块表、ref_count、写时复制都是 paged_kv.BlockPool / PagedSequence。"""
    cache = paged_decode.PagedKVCache(2, 2, 4, 4, 16, dtype=torch.float32, device=device())
    assert type(cache.pool) is BlockPool and cache.pool.k is None
    p = cache.new_sequence()
    cache.prefill(p, torch.randn(2, 6, 2, 4), torch.randn(2, 6, 2, 4))       # 6 个 token：块 0 满、块 1 写了 2 个
    kids = [p.fork() for _ in range(3)]
    assert cache.pool.ref_count[p.blocks[-1]] == 4
    pairs = cache.write(kids, torch.randn(2, 3, 2, 4), torch.randn(2, 3, 2, 4))
    assert [s for s, _ in pairs] == [p.blocks[-1]] * 3 and cache.clone_calls == 1 and cache.pool.n_cow == 3
    assert cache.pool.ref_count[p.blocks[-1]] == 1 and all(cache.pool.ref_count[k.blocks[-1]] == 1 for k in kids)
    for k in kids:
        assert torch.equal(cache.gather(k)[:, :, :6], cache.gather(p))     # 前缀逐位相同
    cache.write(kids[:1], torch.randn(2, 1, 2, 4), torch.randn(2, 1, 2, 4))   # 不再共享：原地写，不克隆
    assert cache.clone_calls == 1
    kids[0].free()
    assert cache.pool.num_free == 16 - 2 - 2


def test_cpu_gpu_buffer_many_steps_without_sync():
    """连续很多步、每步一组不同的块对（N 跨过缓冲区容量 64），中间不同步：和逐步重放的结果逐位相同。
    GPU 上 200 步（16 份锁页内存轮换 12 圈多）；解释器很慢，CPU 上走 7 步。"""
    g = torch.Generator().manual_seed(0)
    kv = torch.randn((1, 2, 300, 1, 2, 3), generator=g).to(device())
    ref = kv.cpu().clone()
    ns = [0, 1, 5, 12, 70, 3, 9]
    if device() == "cuda":
        ns = torch.randint(0, 150, (200,), generator=g).tolist()
    for n in ns:
        perm = torch.randperm(300, generator=g).tolist()
        kvc.kv_clone_blocks_all(kv, perm[:n], perm[n:2 * n], use_kernel=True)
        ref[:, :, perm[n:2 * n]] = ref[:, :, perm[:n]]
    assert torch.equal(kv.cpu(), ref)


@pytest.mark.skipif("device() != 'cuda'", reason="CUDA graph 只在 CUDA 上")
def test_clone_graph_matches_reference():
    kv = torch.randn((2, 2, 64, 2, 4, 8), device="cuda")
    cg = bench.CloneGraph(kv, 3)
    ref = kv.clone()
    for s in range(40):                     # 16 份锁页内存轮流用、绕两圈多：每步的下标都要生效
        src, dst = [s % 10, s % 10 + 10, s % 10 + 20], [40 + s % 10, 50 + s % 10, 30 + s % 10]
        cg(src, dst)
        ref[:, :, dst] = ref[:, :, src]
    torch.cuda.synchronize()
    assert torch.equal(kv, ref)
    with pytest.raises(ValueError, match="N=3"):
        cg([1], [2])


@pytest.mark.skipif("device() != 'cuda'", reason="旁路 stream 与直接调 C 启动函数只在 CUDA 上")
def test_overlapped_upload_many_steps_without_sync():
    """N ≥ OVERLAP_MIN_PAIRS：下标在旁路 stream 上传；连续 40 步（锁页内存与显存各 16 份、轮换两圈多）、每步不同的
    块对、中间不同步，和逐步重放的结果逐位相同；N 在 1…2×阈值之间变，三条路径交替出现。"""
    g = torch.Generator().manual_seed(1)
    nb = 4 * kvc.OVERLAP_MIN_PAIRS + 8
    kv = torch.randn((2, 2, nb, 2, 4, 8), generator=g).to("cuda")
    ref = kv.cpu().clone()
    clone = kvc.AllLayersClone(kv, 2 * kvc.OVERLAP_MIN_PAIRS)
    assert all(f[0].__name__ == "launch" for f in clone.fast.values())                   # 直接调 C 启动函数，不是退回的通用路径
    for step in range(40):
        n = [1, kvc.ARG_PAIRS, kvc.OVERLAP_MIN_PAIRS, 2 * kvc.OVERLAP_MIN_PAIRS, 100][step % 5]
        perm = torch.randperm(nb, generator=g).tolist()
        kvc.kv_clone_blocks_all(kv, perm[:n], perm[n:2 * n], use_kernel=True)
        ref[:, :, perm[n:2 * n]] = ref[:, :, perm[:n]]
    assert torch.equal(kv.cpu(), ref)


def _stacked(nb=8, dtype=None):
    dtype = dtype or torch.float32
    return torch.zeros((2, 2, nb, 2, 3, 4), dtype=dtype, device=device())


BAD = [
    ("不是 6 维", lambda: (torch.zeros(8, 2, 3, 4), [0], [1]), "6 维"),
    ("第二维不是 2", lambda: (torch.zeros((2, 3, 8, 2, 3, 4)), [0], [1]), r"\[L, 2, n_blocks"),
    ("整数缓存", lambda: (_stacked(dtype=torch.int32), [0], [1]), "float16"),
    ("不是张量", lambda: (np.zeros((2, 2, 8, 2, 3, 4), np.float32), [0], [1]), "torch.Tensor"),
    ("不连续", lambda: (_stacked().transpose(3, 4), [0], [1]), "contiguous"),
    ("浮点下标", lambda: (_stacked(), [0.5], [1]), "整数下标"),
    ("bool 下标", lambda: (_stacked(), [True], [1]), "整数下标"),
    ("二维下标", lambda: (_stacked(), np.zeros((1, 1), np.int64), [1]), "一维"),
    ("越界", lambda: (_stacked(), [0], [8]), "越界"),
    ("负数", lambda: (_stacked(), [-1], [1]), "越界"),
    ("长度不同", lambda: (_stacked(), [0, 1], [2]), "长度必须相同"),
    ("dst 重复", lambda: (_stacked(), [0, 1], [3, 3]), "重复"),
    ("src 与 dst 重叠", lambda: (_stacked(), [0, 1], [1, 2]), "同时是 src 和 dst"),
    ("大数组 dst 重复", lambda: (_stacked(nb=300), np.arange(100), np.r_[np.arange(100, 199), 100]), "重复"),
    ("大数组重叠", lambda: (_stacked(nb=300), np.arange(100), np.arange(99, 199)), "同时是 src 和 dst"),
    ("大数组越界", lambda: (_stacked(nb=300), np.arange(100), np.arange(250, 350)), "越界"),
]


@pytest.mark.parametrize("use_kernel", [True, False], ids=["kernel", "fallback"])
@pytest.mark.parametrize("name,make,msg", BAD, ids=[b[0] for b in BAD])
def test_bad_input_is_refused_before_anything_is_written(use_kernel, name, make, msg):
    kv, s, d = make()
    before = kv.copy() if isinstance(kv, np.ndarray) else kv.clone()
    with pytest.raises(ValueError, match=msg):
        kvc.kv_clone_blocks_all(kv, s, d, use_kernel=use_kernel)
    assert (before == kv).all()


def test_per_layer_bad_input():
    layer = torch.zeros((8, 2, 3, 4), device=device())
    with pytest.raises(ValueError, match="形状、dtype、设备必须相同"):
        kvc.kv_clone_blocks_triton(layer, layer.half(), [0], [1])
    with pytest.raises(ValueError, match="越界"):
        kvc.kv_clone_blocks_triton(layer, layer.clone(), [0], [9])


def test_kernel_path_without_interpreter_is_a_clear_error(monkeypatch):
    if device() != "cpu":
        pytest.skip("只在 CPU 上有意义")
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    with pytest.raises(ValueError, match="TRITON_INTERPRET=1"):
        kvc.kv_clone_blocks_all(_stacked(), [0], [1], use_kernel=True)


# ─────────────────────────────── 06 脚本的命令行 ───────────────────────────────
@pytest.mark.parametrize("missing,words", [
    ({"torch": None}, ("torch ≥ 2.4", "没有装", "CUDA 版", "requirements-triton.txt")),
    ({"triton": None}, ("triton ≥ 3.0", "没有装")),
    ({}, ("torch 2.1.0 太旧", "≥ 2.4")),
], ids=["no-torch", "no-triton", "old-torch"])
def test_missing_or_old_torch_triton_is_one_line_exit_2(missing, words, monkeypatch, capsys):
    real_torch = kernel_module("gpu.clone_kernel") and kernel_module("torch")    # 先照常 import（设好解释器）
    for name, mod in missing.items():
        monkeypatch.setitem(sys.modules, name, mod)          # import 时抛 ImportError
    if not missing:
        monkeypatch.setattr(real_torch, "__version__", "2.1.0")
    with pytest.raises(SystemExit) as e:
        s06.import_gpu_stack()
    err = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 2 and len(err) == 1 and all(w in err[0] for w in words), err


@pytest.fixture
def ctrl_c_raises():
    """SIGINT 的处理函数换回 Python 默认的（抛 KeyboardInterrupt），测完复原；只在主线程上能换。"""
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("Python 只在主线程上处理信号")
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler      # 块后换回了原来的处理函数
    signal.signal(signal.SIGINT, old)


def test_ctrl_c_during_the_gpu_import_lands_after_it(ctrl_c_raises, monkeypatch):
    """import torch 的那一刻按 Ctrl-C（这里给自己发 SIGINT）：不管的话 KeyboardInterrupt 落在 torch 的 import 里
    （torch 会接住它，变成别的错或被忽略）；06 里 torch、triton、gpu/ 的模块都 import 完，之后才抛 KeyboardInterrupt
    （运行器把它变成一行、退出码 130）。"""
    stack = kernel_module("gpu.stack")
    done = []

    def import_then_ctrl_c(name, *args):
        if name == "torch":
            os.kill(os.getpid(), signal.SIGINT)       # 没有 ctrl_c_after 时 KeyboardInterrupt 就从这里抛出
        mod = builtins.__import__(name, *args)
        done.append(name)                             # import 完了
        return mod
    monkeypatch.setattr(stack, "__import__", import_then_ctrl_c, raising=False)   # 它的 __import__(name) 先找到这个
    with pytest.raises(KeyboardInterrupt):
        s06.import_gpu_stack()
    assert done == ["torch", "triton"]


def test_ctrl_c_during_a_failed_import_leaves_only_the_failure(ctrl_c_raises):
    """import 时按了 Ctrl-C、import 又一行报错退出（没装 torch）：只有那个 SystemExit(2)，Ctrl-C 被取走，不再叠一行。"""
    stack = kernel_module("gpu.stack")
    reached = []
    with pytest.raises(SystemExit):
        with stack.ctrl_c_after():
            os.kill(os.getpid(), signal.SIGINT)
            reached.append(1)
            raise SystemExit(2)
    assert reached == [1]


def test_module_without_triton_falls_back_to_index_copy(monkeypatch):
    """没装 triton：模块照样能导入（这里按文件重新执行一份），克隆走 index_copy_，kernel 路径给出清楚的错误。"""
    import importlib.util
    monkeypatch.setitem(sys.modules, "triton", None)
    spec = importlib.util.spec_from_file_location("kvc_without_triton", kvc.__file__)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    assert not m.HAVE_TRITON and not m.kernel_available("cpu")
    kv = torch.randn(1, 2, 4, 1, 2, 2)
    m.kv_clone_blocks_all(kv, [0], [3])
    assert torch.equal(kv[:, :, 3], kv[:, :, 0])
    with pytest.raises(ValueError, match="triton"):
        m.kv_clone_blocks_triton(torch.zeros(4, 1, 2, 2), torch.zeros(4, 1, 2, 2), [0], [1])


@pytest.mark.parametrize("argv,word", [
    (["--no-such-flag"], "参数错误"),
    (["--demo", "7"], "参数错误"),
    (["--plot-only", "--json", "{missing}"], "不是一个存在的文件"),
    (["--plot-only", "--json", "{empty}"], "不是本脚本保存的完整结果"),
    (["--plot-only", "--json", "{notjson}"], "不是本脚本保存的完整结果"),
    (["--plot-only", "--json", "{dir}"], "是一个目录"),
    (["--plot-only", "--figures", "{empty}"], "是一个文件，不是目录"),
    (["--figures", "{dir}"], "--figures 只和 --plot-only 一起用"),
    (["--json", "{empty}"], "不是本脚本保存的完整结果"),
    (["--json", "{holey}"], "缺少 ('gpt2-small', 8, 'C图')"),
    (["--json", "{one_n}"], "Ns 至少要两个 N"),
    (["--json", "{no_decode}"], "decode 没有行"),
    (["--json", "{no_shapes}"], "shapes 是空的"),
    (["--json", "{missing}"], "不是一个存在的文件"),
], ids=["flag", "demo", "missing", "empty-json", "not-json", "json-dir", "figures-file", "figures-alone", "cpu-bad-json", "missing-row",
        "one-N", "no-decode-rows", "no-shapes", "cpu-missing-json"])
def test_bad_command_line_is_one_line_exit_2(argv, word, tmp_path, capsys):
    (tmp_path / "empty.json").write_text("{}")
    (tmp_path / "bad.txt").write_text("{not json")
    saved = s06.load_results(s06.DEFAULT_JSON)             # 少了一行（N = 8 的 C图）：一行说清，不是 traceback
    saved["results"] = [r for r in saved["results"] if (r["shape"], r["N"], r["method"]) != ("gpt2-small", 8, "C图")]
    (tmp_path / "holey.json").write_text(json.dumps(saved, ensure_ascii=False), encoding="utf-8")
    for name, edit in (("one_n", lambda d: d.update(Ns=d["Ns"][:1])), ("no_decode", lambda d: d["decode"].update(rows=[])),
                       ("no_shapes", lambda d: d.update(shapes={}))):
        d = s06.load_results(s06.DEFAULT_JSON)
        edit(d)
        (tmp_path / f"{name}.json").write_text(json.dumps(d, ensure_ascii=False), encoding="utf-8")
    paths = dict(missing=tmp_path / "nope.json", empty=tmp_path / "empty.json", notjson=tmp_path / "bad.txt",
                 dir=tmp_path, holey=tmp_path / "holey.json", one_n=tmp_path / "one_n.json",
                 no_decode=tmp_path / "no_decode.json", no_shapes=tmp_path / "no_shapes.json")
    argv = [a.format(**paths) for a in argv]
    if device() == "cuda" and argv[0] == "--json":
        pytest.skip("GPU 上会重新测量并写这个文件")
    with pytest.raises(SystemExit) as e:
        s06.main(argv + ["--demo", "2"] * ("--demo" not in argv and "--no-such-flag" not in argv))
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and word in err[0], err


def test_plot_only_hands_the_checked_json_to_plot_06(tmp_path, monkeypatch):
    """--plot-only 先检查 JSON，再调 figures/plot_06.py（画图代码只在那里；它的测试在 test_figures.py）。"""
    calls = []
    monkeypatch.setattr(s06.subprocess, "call", lambda argv: calls.append(argv) or 0)
    assert s06.main(["--plot-only", "--figures", str(tmp_path)]) == 0
    assert calls[0][1].endswith(os.path.join("figures", "plot_06.py"))
    assert calls[0][2:] == ["--json", s06.DEFAULT_JSON, "--out", str(tmp_path)]


def test_saved_json_is_what_the_script_writes():
    """保存的结果：元数据齐全；GB/s 能从字节和 µs 重算；每种形状、N、做法都在；decode 的中位数能重算。"""
    d = s06.load_results(s06.DEFAULT_JSON)
    assert all(d["meta"][k] for k in ("gpu", "torch", "triton", "date", "cuda"))
    for r in d["results"]:
        assert r["bytes"] == bench.bytes_per_step(d["shapes"][r["shape"]], r["N"])
        assert r["GBps"] == pytest.approx(r["bytes"] / r["us"] / 1e3)
    assert {(r["shape"], r["N"], r["method"]) for r in d["results"]} == {
        (s, n, m) for s in d["shapes"] for n in d["Ns"] for m in s06.METHODS}
    for r in d["decode"]["rows"]:
        assert all(r["us"][m] == pytest.approx(float(np.median(v))) for m, v in r["rounds_us"].items())
    assert json.loads(json.dumps(d)) == d


@pytest.mark.parametrize("name,value,demo", [("REPS", 1, 2), ("NS", (8, 1), 2), ("NS", 8, 3), ("DECODE_PREFIX_LEN", 208, 4),
                                             ("DECODE_BATCHES", 8, 4), ("SEED", "0", 1), ("ROUNDS", 1, 2),
                                             ("SHAPES", {"gpt2-small": 3}, 1)])
def test_impossible_setting_is_refused_in_one_line(name, value, demo, monkeypatch, capsys):
    """每个设置在用到它的演示开始前查：不合理的值一行拒绝、退出码 2（类型不对也不是 traceback）。"""
    monkeypatch.setattr(s06, name, value)
    with pytest.raises(SystemExit) as e:
        s06.main(["--demo", str(demo)])
    err = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 2 and len(err) == 1 and f"设置 {name} = " in err[0]


def test_missing_or_renamed_setting_is_refused_in_one_line(monkeypatch, capsys):
    monkeypatch.delattr(s06, "DECODE_ROUNDS")
    with pytest.raises(SystemExit) as e:
        s06.main(["--demo", "4"])
    err = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 2 and len(err) == 1 and "设置 DECODE_ROUNDS 不见了" in err[0]


def test_plot_06_in_a_read_only_directory_is_one_line(tmp_path):
    """图写不进去（只读的 checkout）：plot_06 一行说清、退出码 1（和 endings 一样）；06 --plot-only 把这个退出码交回去。"""
    import subprocess
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        if os.access(ro, os.W_OK):
            pytest.skip("以 root 运行：只读目录照样能写")
        p = subprocess.run([sys.executable, os.path.join(ROOT, "lecture07", "06_triton_cow_clone.py"), "--plot-only",
                            "--figures", str(ro)], capture_output=True, text=True, timeout=120)
    finally:
        ro.chmod(0o755)
    err = p.stderr.strip().splitlines()
    assert p.returncode == 1 and len(err) == 1 and "图写不进" in err[0], p.stderr


def test_plot_06_unwritable_is_one_line_even_as_root(monkeypatch, capsys, tmp_path):
    """以 root 运行时 chmod 拦不住写：直接让 build 抛 PermissionError，一样是一行、退出码 1。"""
    import errno
    from conftest import load_plot
    p06 = load_plot("plot_06")

    def refuse(*a, **k):
        raise PermissionError(errno.EACCES, "Permission denied")
    monkeypatch.setattr(p06, "build", refuse)
    assert p06.main(["--out", str(tmp_path)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "图写不进" in err[0] and "Permission denied" in err[0]
