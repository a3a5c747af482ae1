"""写时复制（COW）要把共享的、没写满的最后一块整块复制一份：能不能一次 launch、贴着显存带宽做完？

- kv_clone_blocks_triton：每层一次 Triton launch，K/V 一起搬（博客《从零实现 LLM Inference：063.
  Triton batched KV COW clone（替换 index_select/index_copy）》里的 kernel）。
- kv_clone_blocks_all：所有层 × K/V × N 个块对一次 launch，缓存是一整块 [L, 2, n_blocks, H, BS, D]；
  CloneGraph 把它捕获进 CUDA graph。用它的 GPU KV 缓存（paged_kv 的块表与 ref_count）在 paged_decode。
没有 CUDA 时先设 TRITON_INTERPRET=1（须在 import triton 之前）：kernel 在 Triton 解释器里逐个 program
在 CPU 上执行——慢，但逐位结果相同，测试就这样校验 kernel。
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
    """这个设备上能不能跑 Triton kernel：CUDA + triton，或者 CPU + triton 解释器。"""
    interp = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")
    return HAVE_TRITON and (torch.device(device).type == "cuda" or interp)


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
    check_cache("k_cache_layer", k_cache_layer, 4)
    check_cache("v_cache_layer", v_cache_layer, 4)
    if (k_cache_layer.shape, k_cache_layer.dtype, k_cache_layer.device) != \
            (v_cache_layer.shape, v_cache_layer.dtype, v_cache_layer.device):
        raise ValueError("K 和 V 的形状、dtype、设备必须相同")
    _need_kernel(k_cache_layer.device)
    src, dst = check_clone_indices(src_block_idx, dst_block_idx, k_cache_layer.shape[0])
    if len(src):
        launch_layer_kernel(k_cache_layer, v_cache_layer,
                            torch.tensor(src, dtype=torch.int32, device=k_cache_layer.device),
                            torch.tensor(dst, dtype=torch.int32, device=k_cache_layer.device))


def launch_layer_kernel(k_layer, v_layer, src_dev, dst_dev, tile=None):
    """不做检查的每层 launch（下标已在设备上、已检查过）；博客原样用 4 个 warp。"""
    _, H, BS, D = k_layer.shape
    block, tiles = tile_for(BS * D, tile)
    _kv_clone_layer_kernel[(src_dev.shape[0], H, tiles)](k_layer, v_layer, src_dev, dst_dev,
                                                         H=H, TD=BS * D, BLOCK=block, num_warps=4)


def launch_all_kernel(kv, src_dev, dst_dev, tile=None, num_warps=None, n=None):
    """不做检查的一次 launch：kv 是 [L, 2, n_blocks, H, BS, D]，前 n（默认 len(src_dev)）个下标已在设备上。"""
    L, _, nb, H, BS, D = kv.shape
    e = H * BS * D
    block, tiles = tile_for(e, tile)
    _kv_clone_all_kernel[((n or src_dev.shape[0]) * 2 * L * tiles,)](
        kv, src_dev, dst_dev, nb * e, G=2 * L, E=e, BLOCK=block, TILES=tiles,
        num_warps=num_warps or NUM_WARPS)


class CpuGpuBuffer:
    """每步的 (src, dst) 下标：两份锁页内存轮流用 + 一块显存，一次 H2D 拷贝带上两段（名字取自 vLLM）。
    布局 [src(cap) | dst(cap)]。H2D 读完之前那份锁页内存不能改写：每份上传后记一个 event，下次改写前
    等它——两份轮流，主机最多领先 GPU 一步，几乎不用真的等。显存一块就够：拷贝和 kernel 排在同一个流上，
    下一步的拷贝一定在这一步的 kernel 之后。CPU 上不用锁页、不用 event。"""

    def __init__(self, device, capacity=64, copies=2):
        self.device, self.cuda, self.count = torch.device(device), torch.device(device).type == "cuda", 0
        self.cap = 16 * n_blocks(max(1, capacity), 16)      # 16 的倍数：dst 段起点也按 64 字节对齐
        self.host = [torch.empty(2 * self.cap, dtype=torch.int32, pin_memory=self.cuda) for _ in range(copies)]
        self.host_np = [h.numpy() for h in self.host]
        self.events = [torch.cuda.Event() for _ in range(copies * self.cuda)]
        self.dev = torch.empty(2 * self.cap, dtype=torch.int32, device=self.device)
        self.dev_src, self.dev_dst = self.dev[:self.cap], self.dev[self.cap:]   # 视图事先建好：每步不切片

    def write(self, src, dst):
        """把检查过的下标写进下一份锁页内存（先等它上一次的上传读完），返回这一份的编号。"""
        i = self.count % len(self.host)
        self.count += 1
        if self.cuda:
            self.events[i].synchronize()        # 从没 record 过的 event 立即返回
        self.host_np[i][:len(src)] = src
        self.host_np[i][self.cap:self.cap + len(dst)] = dst
        return i

    def upload(self, i):
        """第 i 份整块一次 H2D（可以捕获进 CUDA graph），返回显存里的 (src, dst)：只有前 n 个有意义。"""
        self.dev.copy_(self.host[i], non_blocking=True)
        return self.dev_src, self.dev_dst

    def done(self, i):
        if self.cuda:
            self.events[i].record()


_buffers = {}


def kv_clone_blocks_all(kv, src_block_idx, dst_block_idx, use_kernel=None):
    """所有层、K 和 V、N 个块对：检查 → 一次 H2D 上传下标 → 一次 launch（没有 kernel 时 index_copy_ 回退）。"""
    check_cache("kv", kv, 6)
    if kv.shape[1] != 2:
        raise ValueError(f"整块 KV 缓存必须是 [L, 2, n_blocks, H, BS, D]，收到形状 {tuple(kv.shape)}")
    src, dst = check_clone_indices(src_block_idx, dst_block_idx, kv.shape[2])
    if use_kernel is None:
        use_kernel = kernel_available(kv.device)
    if use_kernel:
        _need_kernel(kv.device)
    if len(src) == 0:
        return
    if not use_kernel:
        s = torch.as_tensor(src, device=kv.device)
        kv.index_copy_(2, torch.as_tensor(dst, device=kv.device), kv.index_select(2, s))
        return
    buf = _buffers.get(kv.device)
    if buf is None or buf.cap < len(src):      # 换大的：旧的锁页内存由 torch 等拷贝读完再回收，显存按流的顺序回收
        buf = _buffers[kv.device] = CpuGpuBuffer(kv.device, max(64, len(src)))
    i = buf.write(src, dst)
    launch_all_kernel(kv, *buf.upload(i), n=len(src))
    buf.done(i)


class CloneGraph:
    """把"上传下标 + 一次 launch"捕获进 CUDA graph（N 固定）：每步只剩检查下标、写锁页内存、一次 replay。
    真实引擎把整步 decode 捕获成 graph（vLLM 按批大小分档）。graph 里的 H2D 在 replay 时才读锁页内存，
    所以 CpuGpuBuffer 的每一份锁页内存各捕获一个 graph，轮流 replay。"""

    def __init__(self, kv, n):
        self.kv, self.n, self.buf, self.graphs = kv, n, CpuGpuBuffer(kv.device, n), []
        for i in range(len(self.buf.host)):
            self.buf.write(list(range(n)), list(range(n)))  # 预热、捕获时：每块拷到自己身上，不改数据
            launch_all_kernel(kv, *self.buf.upload(i), n=n)  # 先编译好：捕获时不能编译
            torch.cuda.synchronize()
            self.graphs.append(torch.cuda.CUDAGraph())
            with torch.cuda.graph(self.graphs[i]):
                launch_all_kernel(kv, *self.buf.upload(i), n=n)

    def __call__(self, src_block_idx, dst_block_idx):
        src, dst = check_clone_indices(src_block_idx, dst_block_idx, self.kv.shape[2])
        if len(src) != self.n:
            raise ValueError(f"这个 graph 是按 N={self.n} 捕获的，收到 {len(src)} 个块对")
        i = self.buf.write(src, dst)
        self.graphs[i].replay()
        self.buf.done(i)
