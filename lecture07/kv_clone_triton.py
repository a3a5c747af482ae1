"""写时复制（COW）要把共享的、没写满的最后一块整块复制一份：能不能一次 launch、贴着显存带宽做完？

- kv_clone_blocks_triton：每层一次 launch，K/V 一起搬（博客《从零实现 LLM Inference：063. Triton batched KV
  COW clone（替换 index_select/index_copy）》的 kernel）。
- kv_clone_blocks_all：所有层 × K/V × N 个块对一次 launch，缓存是一整块 [L, 2, n_blocks, H, BS, D]（GPU KV 缓存
  在 paged_decode；捕获进 CUDA graph 的版本 CloneGraph 在 kv_clone_bench）。
没有 CUDA 时先设 TRITON_INTERPRET=1（须在 import triton 之前）：kernel 在 Triton 解释器里逐个 program 在 CPU
上执行——慢，但逐位结果相同，测试就这样校验 kernel。
"""
import os

import numpy as np
import torch

from paged_kv import n_blocks

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
try:
    import triton
    import triton.language as tl
except ImportError:          # 没装 triton：模块照样可用，克隆走 index_select + index_copy_
    triton = None

HAVE_TRITON = triton is not None
SUPPORTED_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)   # float64：CPU 上逐位核对用
TILE = 2048          # 一个 program 搬几个元素（2 的幂；fp16 时 4 KB）：H200 上扫过，见 kv_clone_bench.sweep_tiles
NUM_WARPS = 4


def kernel_available(device):
    """这个设备上能不能跑 Triton kernel：CUDA + triton，或者 CPU + triton 解释器（CUDA 上不查环境变量：每步都调）。"""
    if torch.device(device).type == "cuda":
        return HAVE_TRITON
    return HAVE_TRITON and os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def tile_for(n_elems, tile=None):
    """(每个 program 的元素数：2 的幂, 每块几个 program)。tile_for(12288) → (2048, 6)；tile_for(105, 32) → (32, 4)。"""
    t = min(tile or TILE, 1 << max(0, n_elems - 1).bit_length())
    return t, n_blocks(n_elems, t)


if HAVE_TRITON:
    @triton.jit
    def _kv_clone_layer_kernel(k_ptr, v_ptr, src_ptr, dst_ptr, H: tl.constexpr, TD: tl.constexpr,
                               BLOCK: tl.constexpr):
        """博客的 kernel：grid = (N, H, cdiv(BS*D, BLOCK))，一个 program 搬一个 (头, tile)，K/V 一起搬。"""
        n, h = tl.program_id(0), tl.program_id(1)
        td = tl.program_id(2) * BLOCK + tl.arange(0, BLOCK)
        mask = td < TD
        src = (tl.load(src_ptr + n).to(tl.int64) * H + h) * TD + td
        dst = (tl.load(dst_ptr + n).to(tl.int64) * H + h) * TD + td
        tl.store(k_ptr + dst, tl.load(k_ptr + src, mask=mask), mask=mask)
        tl.store(v_ptr + dst, tl.load(v_ptr + src, mask=mask), mask=mask)

    @triton.jit
    def _kv_clone_all_kernel(kv_ptr, src_ptr, dst_ptr, group_stride, G: tl.constexpr, E: tl.constexpr,
                             BLOCK: tl.constexpr, TILES: tl.constexpr):
        """一次 launch 搬完所有 (层, K/V) × N 个块：一维 grid = N × G × TILES。kv 看成 [G, n_blocks, E]
        （G = 层数 × 2，E = H×BS×D，group_stride = n_blocks × E）；相邻的 program 搬同一块的相邻 tile。"""
        pid = tl.program_id(0)
        g = ((pid // TILES) % G).to(tl.int64)
        n = pid // (TILES * G)
        e = (pid % TILES) * BLOCK + tl.arange(0, BLOCK)
        mask = e < E
        base = kv_ptr + g * group_stride
        x = tl.load(base + tl.load(src_ptr + n).to(tl.int64) * E + e, mask=mask)
        tl.store(base + tl.load(dst_ptr + n).to(tl.int64) * E + e, x, mask=mask)


def check_cache(name, t, dim):
    """KV 缓存张量：torch、支持的 dtype、contiguous（kernel 按连续内存算偏移）、dim 维。"""
    if not isinstance(t, torch.Tensor) or t.dtype not in SUPPORTED_DTYPES:
        raise ValueError(f"{name} 必须是 float16 / bfloat16 / float32 / float64 的 torch.Tensor，收到 "
                         f"{getattr(t, 'dtype', type(t).__name__)}")
    if not t.is_contiguous():
        raise ValueError(f"{name} 必须是 contiguous 的（kernel 按连续内存计算偏移）")
    if t.dim() != dim:
        raise ValueError(f"{name} 的形状 {tuple(t.shape)} 不对：应为 {dim} 维")


def _as_index(name, idx):
    """下标 → 短的 python int 列表（常见情形：N 小时纯 Python 最快），或 int64 numpy 数组。"""
    if isinstance(idx, list) and len(idx) <= 64 and all(type(x) is int for x in idx):
        return idx
    if isinstance(idx, torch.Tensor):
        if idx.device.type != "cpu":
            raise ValueError(f"{name} 在 {idx.device} 上：请传主机上的下标（GPU 下标要先同步拷回来才能检查）")
        idx = idx.numpy()
    a = np.asarray(idx)
    if a.size and a.dtype.kind not in "iu":
        raise ValueError(f"{name} 必须是整数下标，收到 dtype {a.dtype}")
    if a.ndim != 1:
        raise ValueError(f"{name} 必须是一维的，收到形状 {a.shape}")
    return a.astype(np.int64)


def check_clone_indices(src, dst, n_blocks):
    """在主机上检查一组 (src, dst) 块对，返回 (src, dst)：短的 int 列表，或 int64 数组。

    GPU 上越界的下标不会报错，只会悄悄写坏别处的显存，所以 launch 之前必须查：整数、一维、
    长度相同、在 [0, n_blocks) 里、dst 不重复、dst 不与 src 重叠（src 可以重复：几个请求从同一块 COW）。

    >>> check_clone_indices([3, 3], [5, 6], 8)
    ([3, 3], [5, 6])
    """
    src, dst = _as_index("src", src), _as_index("dst", dst)
    if len(src) != len(dst):
        raise ValueError(f"src 有 {len(src)} 个下标，dst 有 {len(dst)} 个：长度必须相同")
    if len(src) == 0:
        return src, dst
    if isinstance(src, list) and isinstance(dst, list):      # N 小：纯 Python
        lo, hi, dup = min(src + dst), max(src + dst), len(set(dst)) != len(dst)
        both = set(src) & set(dst)
    else:                                                     # N 大：numpy，O(N + n_blocks)
        src, dst = np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)
        lo, hi = int(min(src.min(), dst.min())), int(max(src.max(), dst.max()))
        used = np.bincount(dst.clip(0, n_blocks), minlength=n_blocks + 1)
        dup, both = used.max() > 1, set(src[used[src.clip(0, n_blocks)] > 0].tolist())
    if lo < 0 or hi >= n_blocks:
        raise ValueError(f"下标 {(hi, lo)[lo < 0]} 越界：合法范围是 [0, {n_blocks})")
    if dup:
        raise ValueError("dst 下标有重复：两个 program 会写同一块")
    if both:
        raise ValueError(f"块 {min(both)} 同时是 src 和 dst：读写会互相竞争")
    return src, dst


def _need_kernel(device):
    if not kernel_available(device):
        raise ValueError(f"张量在 {device} 上：Triton kernel 要 CUDA + triton，CPU 上要先设 TRITON_INTERPRET=1")


def kv_clone_blocks_triton(k_cache_layer, v_cache_layer, src_block_idx, dst_block_idx):
    """博客里的"之后"：一层、一次 launch，把 N 个 [H, BS, D] 块从 src 拷到 dst（K/V 一起）。"""
    k, v = k_cache_layer, v_cache_layer
    check_cache("k_cache_layer", k, 4)
    check_cache("v_cache_layer", v, 4)
    if (k.shape, k.dtype, k.device) != (v.shape, v.dtype, v.device):
        raise ValueError("K 和 V 的形状、dtype、设备必须相同")
    _need_kernel(k.device)
    src, dst = check_clone_indices(src_block_idx, dst_block_idx, k.shape[0])
    if len(src):        # 和博客一样：每次从列表新建设备上的下标张量
        launch_layer_kernel(k, v, *(torch.tensor(x, dtype=torch.int32, device=k.device) for x in (src, dst)))


def launch_layer_kernel(k_layer, v_layer, src_dev, dst_dev, tile=None):
    """不做检查的每层 launch（下标已在设备上、已检查过）；博客原样用 4 个 warp。"""
    _, H, BS, D = k_layer.shape
    block, tiles = tile_for(BS * D, tile)
    _kv_clone_layer_kernel[(src_dev.shape[0], H, tiles)](k_layer, v_layer, src_dev, dst_dev,
                                                         H=H, TD=BS * D, BLOCK=block, num_warps=4)


def launch_all_kernel(kv, src_dev, dst_dev, tile=None, num_warps=None, n=None):
    """不做检查的一次 launch：kv 是 [L, 2, n_blocks, H, BS, D]，前 n（默认 len(src_dev)）个下标已在设备上。"""
    L, _, nb, H, BS, D = kv.shape
    block, tiles = tile_for(H * BS * D, tile)
    _kv_clone_all_kernel[((n or src_dev.shape[0]) * 2 * L * tiles,)](
        kv, src_dev, dst_dev, nb * H * BS * D, G=2 * L, E=H * BS * D, BLOCK=block, TILES=tiles,
        num_warps=num_warps or NUM_WARPS)


class AllLayersClone:
    """一块 KV 缓存的克隆（下标已检查）：下标一次 H2D 上传，一次 launch 搬完所有层、K 和 V。
    下标：2×GROUP 份锁页内存轮流用 + 一块显存，布局 [src(cap) | dst(cap)]（同 vLLM 的 CpuGpuBuffer）。H2D 读完之前
    那份锁页内存不能改写：每用完一组记一个 event，下一轮改写这一组前等它（那时早读完了，立即返回）；只每 GROUP 步记
    一次，因为 torch.cuda.Event.record() 先在 Python 里取当前流，H200 那台主机上约 9 µs。显存一块就够：拷贝和 kernel
    排在同一个流上。launch：编译结果只取决于 kv 的地址、形状、dtype 和 TILE / NUM_WARPS（即 _clones 的键），所以每块
    缓存用公开的 JITFunction.warmup 编译一次，之后直接调这个 CompiledKernel、传裸地址（int），省掉 kernel[grid](...)
    每次的参数绑定、特化查表和逐个张量问驱动。"""
    GROUP = 8

    def __init__(self, kv, capacity):
        L, _, nb, H, BS, D = kv.shape
        e, (block, tiles) = H * BS * D, tile_for(H * BS * D)
        self.cuda, self.count, self.per_pair, self.kernel = kv.is_cuda, 0, 2 * L * tiles, None
        self.cap = 16 * n_blocks(max(1, capacity), 16)      # 16 的倍数：dst 段起点也按 64 字节对齐
        self.host = [torch.empty(2 * self.cap, dtype=torch.int32, pin_memory=self.cuda) for _ in range(2 * self.GROUP)]
        self.host_np = [h.numpy() for h in self.host]
        self.events = [torch.cuda.Event() for _ in range(2 * self.cuda)]
        self.dev = torch.empty(2 * self.cap, dtype=torch.int32, device=kv.device)
        self.dev_src, self.dev_dst = self.dev[:self.cap], self.dev[self.cap:]   # 视图事先建好：每步不切片
        if self.cuda:
            self.args = (kv.data_ptr(), self.dev_src.data_ptr(), self.dev_dst.data_ptr(), nb * e, 2 * L, e, block,
                         tiles)
            self.kernel = _kv_clone_all_kernel.warmup(kv, self.dev_src, self.dev_dst, *self.args[3:], grid=(1,),
                                                      num_warps=NUM_WARPS)

    def write(self, src, dst):
        """把下标写进下一份锁页内存（新一组的第一份：先等这一组上一轮的上传读完），返回它的编号。"""
        i = self.count % len(self.host)
        self.count += 1
        if self.cuda and i % self.GROUP == 0:
            self.events[i // self.GROUP].synchronize()        # 从没 record 过的 event 立即返回
        self.host_np[i][:len(src)] = src
        self.host_np[i][self.cap:self.cap + len(dst)] = dst
        return i

    def launch(self, kv, i, n):
        """第 i 份锁页内存整块一次 H2D，再 launch 一次（前 n 个块对）；两步都可以捕获进 CUDA graph。"""
        self.dev.copy_(self.host[i], non_blocking=True)
        if self.kernel is None:
            launch_all_kernel(kv, self.dev_src, self.dev_dst, n=n)
        else:
            self.kernel[(n * self.per_pair, 1, 1)](*self.args)

    def done(self, i):
        if self.cuda and i % self.GROUP == self.GROUP - 1:
            self.events[i // self.GROUP].record()

    def __call__(self, kv, src, dst):
        i = self.write(src, dst)
        self.launch(kv, i, len(src))
        self.done(i)


_clones = {}


def kv_clone_blocks_all(kv, src_block_idx, dst_block_idx, use_kernel=None):
    """所有层、K 和 V、N 个块对：检查 → 一次 H2D 上传下标 → 一次 launch（没有 kernel 时 index_copy_ 回退）。"""
    check_cache("kv", kv, 6)
    if kv.shape[1] != 2:
        raise ValueError(f"整块 KV 缓存必须是 [L, 2, n_blocks, H, BS, D]，收到形状 {tuple(kv.shape)}")
    src, dst = check_clone_indices(src_block_idx, dst_block_idx, kv.shape[2])
    if use_kernel is None:
        use_kernel = kernel_available(kv.device)
    elif use_kernel:
        _need_kernel(kv.device)
    if len(src) == 0:
        return
    if not use_kernel:
        s = torch.as_tensor(src, device=kv.device)
        kv.index_copy_(2, torch.as_tensor(dst, device=kv.device), kv.index_select(2, s))
        return
    key = (kv.data_ptr(), kv.shape, kv.dtype, kv.device, TILE, NUM_WARPS)
    clone = _clones.get(key)
    if clone is None or clone.cap < len(src):   # 换掉的锁页内存由 torch 等拷贝读完再回收，显存按流的顺序回收
        if len(_clones) >= 16:
            _clones.pop(next(iter(_clones)))
        clone = _clones[key] = AllLayersClone(kv, max(64, len(src)))
    clone(kv, src, dst)

