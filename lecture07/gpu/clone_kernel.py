"""写时复制（COW）要把共享的、没写满的最后一块整块复制一份：能不能一次 launch、贴着显存带宽做完？

- kv_clone_blocks_triton：每层一次 launch，K/V 一起搬（博客《从零实现 LLM Inference：063. Triton batched KV
  COW clone（替换 index_select/index_copy）》的 kernel）。
- kv_clone_blocks_all：所有层 × K/V × N 个块对一次 launch，缓存是一整块 [L, 2, n_blocks, H, BS, D]（GPU KV 缓存
  在 gpu/paged_decode.py；捕获进 CUDA graph 的版本 CloneGraph 在 gpu/clone_bench.py）。下标怎么交给 kernel
  按 N 选（标量参数 / 上传 / 零拷贝 / 旁路 stream 上传），规则见 AllLayersClone。
- kv_clone_blocks_all(..., design="E")：vLLM csrc/cache_kernels.cu 里 copy_blocks 的设计（grid = (层数, N)，一个
  program 拷一对块在一层里的 K 和 V，每层地址表 + 块映射表），用 Triton 重写；主机路径与 C 相同。
没有 CUDA 时先设 TRITON_INTERPRET=1（须在 import triton 之前）：kernel 在 Triton 解释器里逐个 program 在 CPU
上执行——慢，但逐位结果相同，测试就这样校验 kernel。
"""
import os

import numpy as np
import torch


if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
try:
    import triton
    import triton.language as tl
except ImportError:          # 没装 triton：模块照样可用，克隆走 index_select + index_copy_
    triton = None

HAVE_TRITON = triton is not None
SUPPORTED_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)   # float64：CPU 上逐位核对用
TILE = 1024          # 块对多时一个 program 搬几个元素（2 的幂；fp16 时 2 KB）：H200 上扫过，见 gpu/NOTES.md
NUM_WARPS = 2        # 每个 program 几个 warp：小 program、多个同时在飞；N ≥ 64 时 1、2、4 warp 只差 1% 以内
ARG_PAIRS = 8        # N ≤ 8：块对直接当 kernel 的标量参数传（kernel 里写死 8 对），不碰下标缓冲区：一次驱动调用
ZERO_COPY_MIN_PAIRS = 65  # 8 < N < 它：下标在同一 stream 上 H2D 上传再 launch；它 ≤ N < OVERLAP_MIN_PAIRS：下标留在
                          # 锁页内存里、kernel 直接读（零拷贝：省一次驱动调用，GPU 上多等一次 PCIe 往返，约 5 µs）
OVERLAP_MIN_PAIRS = 512   # N ≥ 它：下标在旁路 stream 上传，与上一步的拷贝重叠（多 3 次驱动调用，N 小时不划算）
HOST_TILE = 16384    # 零拷贝时一个 program 搬几个元素（≥ 一整块）：program 少，跨 PCIe 读下标的次数就少
ORDER_LAYER_MAJOR = 1     # grid 顺序：1 = 先按 (层, K/V) 分组（同时在飞的 program 落在同一段缓存里）；0 = 先按块对
E_BLOCK = 8192       # E（vLLM 的 copy_blocks 设计）：一个 program 每次搬几个元素（vLLM 是 1024 个线程各搬 1 个）
E_WARPS = 16         # E 的每个 program 几个 warp（vLLM：一个 thread block 最多 1024 个线程 = 32 warp）


def kernel_available(device):
    """这个设备上能不能跑 Triton kernel：CUDA + triton，或者 CPU + triton 解释器（CUDA 上不查环境变量：每步都调）。"""
    if torch.device(device).type == "cuda":
        return HAVE_TRITON
    return HAVE_TRITON and os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def tile_for(n_elems, tile=None):
    """(每个 program 的元素数：2 的幂, 每块几个 program)。tile_for(12288) → (2048, 6)；tile_for(105, 32) → (32, 4)。"""
    t = min(tile or TILE, 1 << max(0, n_elems - 1).bit_length())
    return t, -(-n_elems // t)                   # 向上取整：最后一个 program 可以不满


_SCALARS = [f"s{i}" for i in range(ARG_PAIRS)] + [f"d{i}" for i in range(ARG_PAIRS)]

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

    # 标量参数不按值特化（否则每换一组块号就重新编译，值为 1 的还会被当成常数）
    @triton.jit(do_not_specialize=["n_pairs", "from_args"] + _SCALARS)
    def _kv_clone_all_kernel(kv_ptr, src_ptr, dst_ptr, group_stride, n_pairs, from_args,
                             s0, s1, s2, s3, s4, s5, s6, s7, d0, d1, d2, d3, d4, d5, d6, d7,
                             G: tl.constexpr, E: tl.constexpr, BLOCK: tl.constexpr, TILES: tl.constexpr,
                             ORDER: tl.constexpr, HINTS: tl.constexpr, EVICT: tl.constexpr):
        """一次 launch 搬完所有 (层, K/V) × N 个块：一维 grid = N × G × TILES。kv 看成 [G, n_blocks, E]
        （G = 层数 × 2，E = H×BS×D，group_stride = n_blocks × E）。
        ORDER=1：pid → (g, n, tile)，同一时刻在飞的 program 都在第 g 段里（H200 上比 ORDER=0 的 (n, g, tile) 快约 2%）。
        from_args≠0：第 n 对块号取自标量参数 s0..s7 / d0..d7（N ≤ 8，不用上传下标）；否则从 src_ptr / dst_ptr 读。
        HINTS：E 是 BLOCK 的整数倍时去掉 mask、标明连续与对齐；EVICT：读写都标 evict_first（一次性的拷贝）。"""
        pid = tl.program_id(0)
        if ORDER == 1:
            g = pid // (n_pairs * TILES)
            n = (pid // TILES) % n_pairs
        else:
            g = (pid // TILES) % G
            n = pid // (TILES * G)
        if from_args != 0:           # 二分选择：n < 4 ? (n < 2 ? …) : …，8 选 1 只要 3 层
            s = tl.where(n < 4, tl.where(n < 2, tl.where(n < 1, s0, s1), tl.where(n < 3, s2, s3)),
                         tl.where(n < 6, tl.where(n < 5, s4, s5), tl.where(n < 7, s6, s7)))
            d = tl.where(n < 4, tl.where(n < 2, tl.where(n < 1, d0, d1), tl.where(n < 3, d2, d3)),
                         tl.where(n < 6, tl.where(n < 5, d4, d5), tl.where(n < 7, d6, d7)))
        else:
            s = tl.load(src_ptr + n)
            d = tl.load(dst_ptr + n)
        e = (pid % TILES) * BLOCK + tl.arange(0, BLOCK)
        base = kv_ptr + g.to(tl.int64) * group_stride
        src = base + s.to(tl.int64) * E
        dst = base + d.to(tl.int64) * E
        if HINTS and E % BLOCK == 0:
            e = tl.max_contiguous(tl.multiple_of(e, BLOCK), BLOCK)
            if EVICT:
                tl.store(dst + e, tl.load(src + e, eviction_policy="evict_first"), eviction_policy="evict_first")
            else:
                tl.store(dst + e, tl.load(src + e))
        else:
            mask = e < E
            if EVICT:
                tl.store(dst + e, tl.load(src + e, mask=mask, eviction_policy="evict_first"), mask=mask,
                         eviction_policy="evict_first")
            else:
                tl.store(dst + e, tl.load(src + e, mask=mask), mask=mask)


    @triton.jit
    def _copy_blocks_kernel(key_ptrs, value_ptrs, src_ptr, dst_ptr, like_ptr, E: tl.constexpr, BLOCK: tl.constexpr):
        """E：vLLM csrc/cache_kernels.cu 里 copy_blocks 的设计，用 Triton 写。grid = (层数, 块对数)：program (l, p)
        把第 p 对的整块（E 个元素，K 和 V 各一份）在第 l 层拷一遍。key_ptrs / value_ptrs：每层 K、V 缓存的地址
        （int64，[L]）；块映射表 [2, N] 的两行 src_ptr、dst_ptr；like_ptr 只用来告诉 kernel 元素类型。"""
        layer, pair = tl.program_id(0), tl.program_id(1)
        ty = tl.pointer_type(like_ptr.dtype.element_ty)
        k = tl.load(key_ptrs + layer).to(ty)
        v = tl.load(value_ptrs + layer).to(ty)
        src = tl.load(src_ptr + pair).to(tl.int64) * E
        dst = tl.load(dst_ptr + pair).to(tl.int64) * E
        for start in range(0, E, BLOCK):            # 一个 program 搬完整块：E / BLOCK 段，每段 K、V 各读一次再写
            e = start + tl.arange(0, BLOCK)
            mask = e < E
            a = tl.load(k + src + e, mask=mask)
            b = tl.load(v + src + e, mask=mask)
            tl.store(k + dst + e, a, mask=mask)
            tl.store(v + dst + e, b, mask=mask)


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
        both = set(src).intersection(dst)
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


def kernel_args(kv, src_dev, dst_dev, n, pairs=None, tile=None, num_warps=None, order=None, hints=1, evict=0):
    """(grid, 位置参数, num_warps)：一次 launch 的全部参数。pairs=(src, dst) 两个 ≤ 8 个的 int 列表时块号走标量参数。"""
    L, _, nb, H, BS, D = kv.shape
    block, tiles = tile_for(H * BS * D, tile)
    scalars = [0] * (2 * ARG_PAIRS)
    if pairs is not None:
        scalars[:len(pairs[0])] = pairs[0]
        scalars[ARG_PAIRS:ARG_PAIRS + len(pairs[1])] = pairs[1]
    if order is None:
        order = ORDER_LAYER_MAJOR
    args = (kv, src_dev, dst_dev, nb * H * BS * D, n, int(pairs is not None), *scalars, 2 * L, H * BS * D, block,
            tiles, order, hints, evict)
    return (n * 2 * L * tiles,), args, num_warps or NUM_WARPS


def launch_all_kernel(kv, src_dev, dst_dev, tile=None, num_warps=None, n=None, pairs=None, order=None, hints=1,
                      evict=0):
    """不做检查的一次 launch（通用的 kernel[grid](...) 路径）：kv 是 [L, 2, n_blocks, H, BS, D]，前 n（默认
    len(src_dev)）个块对；pairs 给了就用标量参数、不读 src_dev / dst_dev。order / hints / evict 见 kernel 的说明。"""
    grid, args, warps = kernel_args(kv, src_dev, dst_dev, n or len(src_dev), pairs, tile, num_warps, order, hints,
                                    evict)
    _kv_clone_all_kernel[grid](*args, num_warps=warps)


def layer_pointers(kv):
    """E 的每层地址表：(K 的 [L] 个地址, V 的 [L] 个地址)，int64，和 kv 在同一设备上（缓存不换，表也不变）。"""
    return tuple(torch.tensor([kv[l, j].data_ptr() for l in range(kv.shape[0])], dtype=torch.int64, device=kv.device)
                 for j in (0, 1))


def copy_blocks_args(kv, ptrs, src_dev, dst_dev, n, block=None, num_warps=None):
    """E 的一次 launch：(grid, 位置参数, num_warps)；grid = (层数, N)。"""
    L, _, _, H, BS, D = kv.shape
    block = min(block or E_BLOCK, 1 << max(0, H * BS * D - 1).bit_length())
    return (L, n), (*ptrs, src_dev, dst_dev, kv, H * BS * D, block), num_warps or E_WARPS


def launch_copy_blocks(kv, ptrs, src_dev, dst_dev, n=None, block=None, num_warps=None):
    """不做检查的 E（通用路径）：ptrs = layer_pointers(kv)，前 n 个块对。"""
    grid, args, warps = copy_blocks_args(kv, ptrs, src_dev, dst_dev, n or len(src_dev), block, num_warps)
    _copy_blocks_kernel[grid](*args, num_warps=warps)


def fast_launcher(compiled, device):
    """编译好的 kernel → launch(grid_x, grid_y, *args)：直接调 Triton 生成的 C 启动函数（一次 cuLaunchKernelEx），
    跳过 CompiledKernel[grid](...) 每次在 Python 里做的事（闭包、取设备、建 launch 元数据、钩子、scratch）；
    两者各要多少 µs 见 06 演示 3（--more）。拿不到这些内部属性（别的 triton 版本）就退回公开的路径。"""
    try:
        compiled._init_handles()               # 之后才有 compiled.run（Triton 的 CudaLauncher）
        run = compiled.run
        c_launch, function, meta = run.launch, compiled.function, compiled.packed_metadata
        flags = (run.launch_cooperative_grid, run.launch_pdl)
        plain = run.global_scratch_size == 0 and run.profile_scratch_size == 0
        from triton import knobs                 # 注册了 launch 钩子（比如 profiler）就走公开路径，钩子照常调用
        plain = plain and all(h is None or not getattr(h, "calls", True)
                              for h in (knobs.runtime.launch_enter_hook, knobs.runtime.launch_exit_hook))
        stream_of = torch._C._cuda_getCurrentRawStream
    except (AttributeError, ImportError):
        plain = False
    if not plain:
        return lambda grid_x, grid_y, *args: compiled[(grid_x, grid_y, 1)](*args)

    def launch(grid_x, grid_y, *args):
        c_launch(grid_x, grid_y, 1, stream_of(device), function, *flags, None, None, meta, None, None, None, *args)
    return launch


class AllLayersClone:
    """一块 KV 缓存的克隆（下标已检查），每步一次 launch 搬完所有层、K 和 V。design="C"：本讲的一维 grid；
    design="E"：vLLM copy_blocks 的 (层, 块对) grid。下标怎么到 kernel 手里，按 N 选（规则写在模块顶部）：
    - N ≤ ARG_PAIRS（只有 C）：块号当 kernel 的标量参数，一次驱动调用，不碰下标缓冲区；
    - N < ZERO_COPY_MIN_PAIRS（E：N < OVERLAP_MIN_PAIRS）：下标写进锁页内存，在同一 stream 上 H2D 上传再 launch；
    - N < OVERLAP_MIN_PAIRS（只有 C）：kernel 直接读锁页内存里的下标（零拷贝），一次驱动调用；
    - 否则：锁页内存在旁路 stream 上 H2D 上传，与上一步还在跑的拷贝重叠（主 stream 只等这次上传的 event）。
    规则来自 H200 上每个 N 的实测（gpu/NOTES.md）。
    锁页内存与显存各 2×GROUP 份轮流用，布局 [src(cap) | dst(cap)]（同 vLLM 的 CpuGpuBuffer）。第 i 份在第 i+16 步
    才再被改写：每用完一组（GROUP 步）在主 stream 上记一个 event，主机改写锁页内存、旁路 stream 改写显存之前先等
    这一组上一轮的 event（那时早完成了，立即返回）；只每 GROUP 步记一次，因为 torch.cuda.Event.record() 在 H200
    那台主机上约 9 µs。launch：每块缓存用公开的 JITFunction.warmup 编译一次，之后走 fast_launcher、传裸地址。"""
    GROUP = 8

    def __init__(self, kv, capacity, design="C"):
        L, _, nb, H, BS, D = kv.shape
        self.design, self.cuda, self.count, self.L = design, kv.is_cuda, 0, L
        self.cap = 16 * -(-max(1, capacity) // 16)         # 向上取到 16 的倍数：dst 段起点也按 64 字节对齐
        k = 2 * self.GROUP
        self.host = [torch.empty(2 * self.cap, dtype=torch.int32, pin_memory=self.cuda) for _ in range(k)]
        self.host_np = [h.numpy() for h in self.host]
        self.dev = [torch.empty(2 * self.cap, dtype=torch.int32, device=kv.device) for _ in range(k)]
        self.rows = {b: [(t[:self.cap], t[self.cap:]) for t in bufs] for b, bufs in (("host", self.host),
                                                                                       ("dev", self.dev))}
        self.events = [torch.cuda.Event() for _ in range(2 * self.cuda)]
        self.uploaded = [torch.cuda.Event() for _ in range(k * self.cuda)]
        self.ptrs = layer_pointers(kv) if design == "E" else None
        self.side, self.fast = None, {}
        if self.cuda:
            self.side = torch.cuda.Stream(kv.device)
            self.row_ptrs = {b: [(s.data_ptr(), d.data_ptr()) for s, d in r] for b, r in self.rows.items()}
            kern = (_kv_clone_all_kernel, _copy_blocks_kernel)[design == "E"]
            for role, tile in (("dev", TILE), ("host", HOST_TILE))[:1 + (design == "C")]:
                grid, args, warps = self._args(kv, self.rows["dev"][0], 1, tile)
                raw = [a.data_ptr() if isinstance(a, torch.Tensor) else a for a in args]
                launch = fast_launcher(kern.warmup(*args, grid=grid, num_warps=warps), kv.device.index)
                if design == "E":             # (launch, 每层地址表, 之后的参数)
                    self.fast[role] = (launch, raw[:2], raw[4:])
                else:                         # (launch, 每个块对几个 program, kv 地址, group_stride, 常数参数)
                    self.fast[role] = (launch, grid[0], raw[0], raw[3], raw[6 + 2 * ARG_PAIRS:])
            self.zeros = (0,) * (2 * ARG_PAIRS)

    def _args(self, kv, rows, n, tile, pairs=None):
        if self.design == "E":
            return copy_blocks_args(kv, self.ptrs, *rows, n)
        return kernel_args(kv, *rows, n, pairs, tile)

    def _launch(self, kv, where, i, n, tile, pairs=None):
        """一次 launch，下标在第 i 份 where（"host" 锁页内存 / "dev" 显存）里；CUDA 上直接调 C 启动函数
        （换上这一份缓冲区的地址和块数 n），CPU 上走通用路径。pairs：N ≤ ARG_PAIRS 时的标量块号。"""
        if not self.fast:
            grid, args, warps = self._args(kv, self.rows[where][i], n, tile, pairs)
            kern = (_kv_clone_all_kernel, _copy_blocks_kernel)[self.design == "E"]
            kern[grid](*args, num_warps=warps)
            return
        src_ptr, dst_ptr = self.row_ptrs[where][i]
        if self.design == "E":
            launch, ptrs, tail = self.fast["dev"]
            launch(self.L, n, *ptrs, src_ptr, dst_ptr, *tail)
            return
        launch, per_pair, kv_ptr, stride, tail = self.fast[where]
        scalars, flag = self.zeros, 0
        if pairs is not None:
            pad = (0,) * (ARG_PAIRS - n)
            scalars, flag = (*pairs[0], *pad, *pairs[1], *pad), 1
        launch(n * per_pair, 1, kv_ptr, src_ptr, dst_ptr, stride, n, flag, *scalars, *tail)

    def write(self, src, dst):
        """把下标写进下一份锁页内存（新一组的第一份：先等这一组上一轮用完），返回它的编号。"""
        i = self.count % len(self.host)
        self.count += 1
        if self.cuda and i % self.GROUP == 0:
            self.events[i // self.GROUP].synchronize()        # 从没 record 过的 event 立即返回
        self.host_np[i][:len(src)] = src
        self.host_np[i][self.cap:self.cap + len(dst)] = dst
        return i

    def launch(self, kv, i, n, mode):
        """用第 i 份下标 launch 一次（前 n 个块对）。mode："host" kernel 直接读锁页内存；"upload" 当前 stream 上
        先 H2D 再 launch（可以捕获进 CUDA graph）；"overlap" 上传在旁路 stream 上（先等这一组上一轮的 kernel 读完）。"""
        if mode == "host":
            self._launch(kv, "host", i, n, HOST_TILE)
            return
        if mode == "overlap":
            main = torch.cuda.current_stream(kv.device)
            if i % self.GROUP == 0:
                self.side.wait_event(self.events[i // self.GROUP])
            with torch.cuda.stream(self.side):
                self.dev[i].copy_(self.host[i], non_blocking=True)
                self.uploaded[i].record()
            main.wait_event(self.uploaded[i])
        else:
            self.dev[i].copy_(self.host[i], non_blocking=True)
        self._launch(kv, "dev", i, n, TILE)

    def done(self, i):
        if self.cuda and i % self.GROUP == self.GROUP - 1:
            self.events[i // self.GROUP].record()

    def __call__(self, kv, src, dst):
        n = len(src)
        if n <= ARG_PAIRS and self.design == "C":
            if isinstance(src, np.ndarray):
                src, dst = src.tolist(), dst.tolist()
            self._launch(kv, "dev", 0, n, TILE, (src, dst))
            return
        i = self.write(src, dst)
        self.launch(kv, i, n, mode_for(n, self.design, self.cuda))
        self.done(i)


def mode_for(n, design="C", cuda=True):
    """N > ARG_PAIRS 时下标怎么到 kernel 手里："upload" / "host"（零拷贝）/ "overlap"（规则见 AllLayersClone）。

    >>> [mode_for(n) for n in (9, 64, 65, 511, 512)], mode_for(100, "E")
    (['upload', 'upload', 'host', 'host', 'overlap'], 'upload')
    """
    if n >= OVERLAP_MIN_PAIRS and cuda:
        return "overlap"
    if n >= ZERO_COPY_MIN_PAIRS and design == "C":
        return "host"
    return "upload"


_clones = {}


def by_destination(src, dst):
    """块对按 dst 升序排（写出去的地址接近顺序；H200 上 N=2048 时快约 1%）。只对 numpy 数组（N > 64）排：N 小时不值。

    >>> [a.tolist() for a in by_destination(np.array([7, 8, 9]), np.array([5, 2, 4]))]
    [[8, 9, 7], [2, 4, 5]]
    """
    if isinstance(dst, np.ndarray):
        order = np.argsort(dst, kind="stable")
        return src[order], dst[order]
    return src, dst


def kv_clone_blocks_all(kv, src_block_idx, dst_block_idx, use_kernel=None, design="C"):
    """所有层、K 和 V、N 个块对：检查 → 一次 launch（下标怎么交给 kernel 见 AllLayersClone；没有 kernel 时
    index_copy_ 回退）。design="E"：用 vLLM copy_blocks 式的 kernel（06 的方法 E）。"""
    check_cache("kv", kv, 6)
    if kv.shape[1] != 2:
        raise ValueError(f"整块 KV 缓存必须是 [L, 2, n_blocks, H, BS, D]，收到形状 {tuple(kv.shape)}")
    src, dst = check_clone_indices(src_block_idx, dst_block_idx, kv.shape[2])
    if use_kernel is None:
        use_kernel = HAVE_TRITON                    # CUDA 上不用 kernel_available：省掉建 device 对象
        if not kv.is_cuda:
            use_kernel = kernel_available(kv.device)
    elif use_kernel:
        _need_kernel(kv.device)
    if len(src) == 0:
        return
    if not use_kernel:
        s = torch.as_tensor(src, device=kv.device)
        kv.index_copy_(2, torch.as_tensor(dst, device=kv.device), kv.index_select(2, s))
        return
    key = (kv.data_ptr(), kv.shape, kv.dtype, kv.device, design, TILE, NUM_WARPS, HOST_TILE, ORDER_LAYER_MAJOR,
           E_BLOCK, E_WARPS)
    clone = _clones.get(key)
    if clone is None or clone.cap < len(src):   # 换掉的锁页内存由 torch 等拷贝读完再回收，显存按流的顺序回收
        if len(_clones) >= 16:
            _clones.pop(next(iter(_clones)))
        clone = _clones[key] = AllLayersClone(kv, max(64, len(src)), design)
    clone(kv, *by_destination(src, dst))
