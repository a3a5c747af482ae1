"""COW 克隆的 kernel 和主机路径（lecture07/gpu/）：没有 GPU 时在 Triton 解释器里跑（CI 装 CPU 版 torch + triton），
有 GPU 时同一批测试跑真实 kernel，另外几项（CUDA graph、旁路 stream、C 启动函数）只在 CUDA 上有意义。"""
import importlib.util

import numpy as np
import pytest

if not all(importlib.util.find_spec(m) for m in ("torch", "triton")):
    pytest.skip("没有装 torch / triton：kernel 测试跳过（make test KERNEL=1 会装）", allow_module_level=True)

import torch  # noqa: E402

from gpu import clone_kernel as kvc  # noqa: E402
from gpu import paged_decode, validation  # noqa: E402
from lab_common.transformer_lab import TINY, config_like, init_params  # noqa: E402
from paged_kv import BlockPool, PagedSequence, gather_kv, paged_step  # noqa: E402

DEV = "cuda" if torch.cuda.is_available() else "cpu"
bits, SIDE = validation.bits, validation.SIDE


def random_pairs(kv, n, seed):
    perm = torch.randperm(kv.shape[2], generator=torch.Generator().manual_seed(seed)).tolist()
    return perm[:n], perm[n:2 * n]


def expect(kv, src, dst):
    bits(kv)[:, :, dst] = 0xFF                          # 毒化：没写到的字节一定露馅
    exp = kv.clone()
    exp[:, :, dst] = kv[:, :, src]
    return exp


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
@pytest.mark.parametrize("design", ["C", "E"])
@pytest.mark.parametrize("n,opts", [(0, {}), (1, {}), (8, {}), (9, {}), (8, dict(args_max=0)), (9, SIDE)])
def test_every_index_path_is_bit_exact(dtype, design, n, opts):
    """每块 3×5×7 = 105 个元素，tile 32：一块跨 4 个 tile、最后一个只有 9 个。C 的 N ≤ 8 块号当参数、之后同一 stream
    上传，overlap_mb = 0 时旁路上传；__call__、fixed（上传 + launch）和只 launch 的三条路都逐位相同。"""
    kv = torch.randn((2, 2, 2 * n + 5, 3, 5, 7), generator=torch.Generator().manual_seed(n)).to(getattr(torch, dtype))
    kv = kv.to(DEV)
    src, dst = random_pairs(kv, n, n)
    for how in ("call", "fixed", "kernel"):
        exp = expect(kv, src, dst)
        cl = kvc.Cloner(kv, design, block=32, **opts)
        if how == "call":
            cl(src, dst)
        elif n:
            cl.fixed(src, dst, upload=how == "fixed")()
        assert torch.equal(bits(kv), bits(exp)), how


@pytest.mark.parametrize("n_cow,dtype", [(0, "float32"), (1, "bfloat16"), (9, "float16")])
def test_one_cow_write_step_is_bit_exact(n_cow, dtype):
    """演示 1 的检查：一步写入里混着 COW 子序列、独占最后一块的、最后一块刚写满的；整个缓存逐位对上。"""
    assert validation.check_cow_write(getattr(torch, dtype), 2, 3, 7, 5, n_cow, DEV, seed=17 + n_cow, block=32) == (True, 5)


def test_blog_kernel_and_fallback_agree_and_src_may_repeat():
    """B（博客逐层的 kernel）逐位对；几个子序列从同一块 COW（src 重复）时 C 和 index_copy_ 结果一样。"""
    kv = torch.randn((2, 2, 21, 3, 5, 7)).half().to(DEV)
    src, dst = random_pairs(kv, 9, 3)
    exp = expect(kv, src, dst)
    for layer in kv:
        kvc.clone_layer(layer[0], layer[1], src, dst)
    assert torch.equal(bits(kv), bits(exp))
    kv = torch.randn((1, 2, 6, 2, 3, 4)).to(DEV)
    ref = kv.clone()
    kvc.Cloner(kv)([0, 0, 0], [3, 4, 5])
    ref.index_copy_(2, torch.tensor([3, 4, 5], device=DEV), ref.index_select(2, torch.tensor([0, 0, 0], device=DEV)))
    assert torch.equal(kv, ref) and all(torch.equal(kv[:, :, d], kv[:, :, 0]) for d in (3, 4, 5))


BAD = [("浮点下标", [0.5], [1], "整数块号"), ("字符串", ["3"], [1], "整数块号"), ("二维", [[0]], [[1]], "整数块号"),
       ("越界", [0], [8], "整数块号"), ("负数", [-1], [1], "整数块号"), ("超出 int32", [2 ** 40], [1], "整数块号"),
       ("长度不同", [0, 1], [2], "长度必须相同"), ("dst 重复", [0, 1], [3, 3], "重复"),
       ("src 与 dst 重叠", [0, 1], [1, 2], "重叠"),
       ("大数组重复", np.arange(100), np.r_[np.arange(100, 199), 100], "重复")]


@pytest.mark.parametrize("name,src,dst,msg", BAD, ids=[b[0] for b in BAD])
def test_bad_indices_are_refused_before_anything_is_written(name, src, dst, msg):
    kv = torch.zeros((2, 2, 300 if name.startswith("大") else 8, 2, 3, 4), device=DEV)
    before = kv.clone()
    with pytest.raises(ValueError, match=msg):
        kvc.Cloner(kv)(src, dst)
    assert torch.equal(kv, before)


def test_bad_cache_is_refused():
    for kv in (torch.zeros(8, 2, 3, 4), torch.zeros((2, 3, 8, 2, 3, 4)), torch.zeros((2, 2, 8, 2, 3, 4), dtype=torch.int32),
               torch.zeros((2, 2, 8, 4, 3, 2)).transpose(3, 5)):
        with pytest.raises(ValueError, match=r"\[L, 2, n_blocks"):
            kvc.Cloner(kv.to(DEV))


def test_many_steps_without_sync_rotate_the_buffers(monkeypatch):
    """连续很多步、每步一组不同的块对、中间不同步（锁页内存 4 份轮流用，绕很多圈），N 跨过三条路径、N ≥ 40 时按目的块
    排序：和逐步重放的结果逐位相同。GPU 上 120 步；解释器很慢，CPU 上 8 步。"""
    monkeypatch.setattr(kvc, "SORT_MIN", 40)

    class Small(kvc.Cloner):
        SLOTS, GROUP = 4, 2
    g = torch.Generator().manual_seed(0)
    kv = torch.randn((1, 2, 400, 1, 2, 3), generator=g).to(DEV)
    ref = kv.cpu().clone()
    cl = Small(kv, overlap_mb=4200 / 2 ** 20)                                 # 旁路上传从 N = 44 起
    ns = [0, 1, 5, 12, 70, 3, 44, 150] if DEV == "cpu" else torch.randint(0, 190, (120,), generator=g).tolist()
    for n in ns:
        src, dst = random_pairs(kv, n, n + 7)
        cl(src, dst)
        ref[:, :, dst] = ref[:, :, src]
    assert cl.overlap_from == 44 and torch.equal(kv.cpu(), ref)


@pytest.mark.skipif(DEV != "cuda", reason="CUDA graph、C 启动函数只在 CUDA 上")
def test_cuda_graph_of_a_step_and_the_fast_launch():
    kv = torch.randn((2, 2, 600, 2, 4, 8), device="cuda")
    cl = kvc.Cloner(kv)
    assert all("head" in f.__code__.co_freevars for f in (cl.kernel, cl.by_args, cl.loader))   # 直接调 C 启动函数
    for n in (3, 40, 250):
        src, dst = random_pairs(kv, n, n)
        exp = expect(kv, src, dst)
        g = torch.cuda.CUDAGraph()
        step = cl.fixed(src, dst)
        with torch.cuda.graph(g):
            step()
        g.replay()
        torch.cuda.synchronize()
        assert torch.equal(bits(kv), bits(exp)), n


def test_torch_decode_is_the_transformer_lab_model():
    """同一份权重、同一段前缀、同样的 fork + 写时复制：torch 分页 decode（float64）与 numpy 的 paged_step 一致。"""
    cfg = config_like(TINY, max_seq=32)
    params, pool = init_params(cfg, seed=0), BlockPool(cfg, 16, 4)
    a = PagedSequence(pool)
    paged_step(params, cfg, [a], [np.arange(1, 8)])                 # 7 个 token：最后一块写了 3 个
    toks = [5, 9, 11]
    ref = np.stack([x[0] for x in paged_step(params, cfg, [a.fork() for _ in toks], [[t] for t in toks])])
    cache = paged_decode.PagedKVCache(cfg.n_layers, cfg.n_kv_heads, cfg.head_dim, 4, 16, torch.float64, DEV)
    p = PagedSequence(cache.pool)
    kv = [torch.as_tensor(np.stack([gather_kv(pool, li, a.blocks, a.length)[j].transpose(1, 0, 2)
                                    for li in range(cfg.n_layers)])) for j in (0, 1)]
    cache.append_token_batch([p], *kv, n_tokens=a.length)
    kids = [p.fork() for _ in toks]
    pairs, _, _ = cache.reserve(kids, 1)                            # 3 个块对，一次克隆
    tp = paged_decode.torch_params(params, DEV, torch.float64)
    out = paged_decode.decode_step(tp, cfg, cache.kv, torch.tensor(toks, device=DEV),
                                   torch.tensor([k.blocks for k in kids], device=DEV), a.length + 1)
    assert len(pairs) == 3 and cache.clone_calls == 1 and cache.pool.ref_count[p.blocks[-1]] == 1
    assert np.abs(out.cpu().numpy() - ref).max() <= 1e-12
