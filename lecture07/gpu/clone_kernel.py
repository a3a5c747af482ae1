"""写时复制（COW）的整块克隆：kernel C、E（vLLM copy_blocks 的设计）、B（博客逐层的），和把块号交给 kernel 的 Cloner。
缓存是一整块 kv[L, 2, n_blocks, H, BS, D]，看成 2L 段（层 × K/V），每段 [n_blocks, E]，E = H×BS×D。没有 CUDA 时先设
TRITON_INTERPRET=1：kernel 在 Triton 解释器里跑，慢，但逐位相同。"""
import os
import struct

import torch
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

TILE, WARPS = 1024, 2         # C：一个 program 搬一块里的 1024 个元素（fp16 时 2 KB），2 个 warp
ARGS_MAX, SORT_MIN = 8, 1024  # N ≤ 8：块号就是 kernel 的参数（一次 launch）；N ≥ 1024：块对按目的块排序（快约 1.5%）
OVERLAP_MIN_MB = 200          # 一步读写 ≥ 200 MiB（H200 上 ≥ 约 50 µs）：块号在旁路 stream 上传，藏在上一步的拷贝后面
E_BLOCK, E_WARPS = 8192, 16   # E：一个 program 每次搬几个元素、几个 warp（vLLM：1024 个线程各搬 1 个）
PAIR_ARGS, ZEROS = [f"{c}{j}" for c in "sd" for j in range(8)], (0,) * 8


@triton.jit
def pick(n, a0, a1, a2, a3, a4, a5, a6, a7):                 # a0…a7 里的第 n 个：三层二选一
    return tl.where(n < 4, tl.where(n < 2, tl.where(n == 0, a0, a1), tl.where(n == 2, a2, a3)),
                    tl.where(n < 6, tl.where(n == 4, a4, a5), tl.where(n == 6, a6, a7)))


@triton.jit(do_not_specialize=["n_pairs"] + PAIR_ARGS)
def clone_all_kernel(kv, idx, group_stride, n_pairs, s0, s1, s2, s3, s4, s5, s6, s7, d0, d1, d2, d3, d4, d5, d6, d7,
                     E: tl.constexpr, BLOCK: tl.constexpr, TILES: tl.constexpr, ARGS: tl.constexpr):
    """C：一维 grid = 2L × N × TILES，program → (段 g, 块对 n, 第几个 tile)，同一时刻在飞的 program 都在同一段里。
    ARGS：块对就在参数 s0…s7、d0…d7 里；否则 idx = [src(N) | dst(N)]，在显存里。"""
    pid = tl.program_id(0)
    g, n = pid // (n_pairs * TILES), pid // TILES % n_pairs
    if ARGS:
        s, d = pick(n, s0, s1, s2, s3, s4, s5, s6, s7).to(tl.int64), pick(n, d0, d1, d2, d3, d4, d5, d6, d7).to(tl.int64)
    else:
        s, d = tl.load(idx + n).to(tl.int64), tl.load(idx + n_pairs + n).to(tl.int64)
    e = pid % TILES * BLOCK + tl.arange(0, BLOCK)
    base = kv + g.to(tl.int64) * group_stride
    tl.store(base + d * E + e, tl.load(base + s * E + e, mask=e < E), mask=e < E)


@triton.jit(do_not_specialize=["n_pairs"])
def copy_blocks_kernel(kv, idx, group_stride, n_pairs, E: tl.constexpr, BLOCK: tl.constexpr):
    """E：vLLM csrc/cache_kernels.cu 里 copy_blocks 的设计。grid = (层数, N)：program (l, p) 在第 l 层把第 p 对块的 K 和
    V 整块拷一遍，一段 BLOCK 个元素地搬（vLLM 从每层 K、V 的地址表取地址；这里是一整块缓存，按段长算）。"""
    layer, pair = tl.program_id(0), tl.program_id(1)
    k = kv + 2 * layer.to(tl.int64) * group_stride
    src, dst = tl.load(idx + pair).to(tl.int64) * E, tl.load(idx + n_pairs + pair).to(tl.int64) * E
    for start in range(0, E, BLOCK):
        e = start + tl.arange(0, BLOCK)
        a, b = tl.load(k + src + e, mask=e < E), tl.load(k + group_stride + src + e, mask=e < E)
        tl.store(k + dst + e, a, mask=e < E)
        tl.store(k + group_stride + dst + e, b, mask=e < E)


@triton.jit
def clone_layer_kernel(k, v, src_idx, dst_idx, H: tl.constexpr, TD: tl.constexpr, BLOCK: tl.constexpr):
    """B：博客的 kernel，一层一次 launch。grid = (N, H, cdiv(BS×D, BLOCK))，一个 program 搬一个 (头, tile)，K/V 一起搬。"""
    n, h = tl.program_id(0), tl.program_id(1)
    td = tl.program_id(2) * BLOCK + tl.arange(0, BLOCK)
    src = (tl.load(src_idx + n).to(tl.int64) * H + h) * TD + td
    dst = (tl.load(dst_idx + n).to(tl.int64) * H + h) * TD + td
    tl.store(k + dst, tl.load(k + src, mask=td < TD), mask=td < TD)
    tl.store(v + dst, tl.load(v + src, mask=td < TD), mask=td < TD)


@triton.jit(do_not_specialize=["n"])
def copy_ints_kernel(src, dst, n, BLOCK: tl.constexpr):
    """把 n 个 int32 从 src（锁页内存：GPU 经 PCIe 直接读）拷到 dst（显存）：一次"上传"就是这一个小 kernel。"""
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + i, tl.load(src + i, mask=i < n), mask=i < n)


def clone_layer(k_layer, v_layer, src, dst):
    """博客里的"之后"：一层 [n_blocks, H, BS, D]，每次从列表新建 int32 下标张量，一次 launch（不做检查）。"""
    _, H, BS, D = k_layer.shape
    s, d = (torch.tensor(x, dtype=torch.int32, device=k_layer.device) for x in (src, dst))
    block = min(1024, triton.next_power_of_2(BS * D))
    clone_layer_kernel[(len(src), H, triton.cdiv(BS * D, block))](k_layer, v_layer, s, d, H, BS * D, block, num_warps=4)


def overlap_from(L, E, element_size, mb=None):
    """从哪个 N 起块号在旁路 stream 上传：一步读写 2 × N × 2L × E 个元素 ≥ mb（默认 OVERLAP_MIN_MB）MiB。"""
    return max(1, -(-int((OVERLAP_MIN_MB if mb is None else mb) * 2 ** 20) // (4 * L * E * element_size)))


def launcher(kernel, grid, args, warps, cuda):
    """→ launch(gx, gy, stream, *args)。CUDA 上编译一次，之后直接调 Triton 生成的 C 启动函数（一次 cuLaunchKernelEx，传
    裸地址；拿不到内部属性、有 launch 钩子时走公开路径）；CPU 上（解释器）用 kernel[grid](...)。"""
    if not cuda:
        return lambda gx, gy, stream, *a: kernel[(gx, gy)](*a, num_warps=warps)
    compiled, knobs = kernel.warmup(*args, grid=grid, num_warps=warps), triton.knobs.runtime
    try:
        compiled._init_handles()
        run, meta = compiled.run, compiled.packed_metadata
        assert not (run.global_scratch_size or knobs.launch_enter_hook.calls or knobs.launch_exit_hook.calls)
        head = (compiled.function, run.launch_cooperative_grid, run.launch_pdl, None, None, meta, None, None, None)
        return lambda gx, gy, stream, *a: run.launch(gx, gy, 1, stream, *head, *a)
    except (AttributeError, AssertionError):
        return lambda gx, gy, stream, *a: compiled[(gx, gy, 1)](*a)


class Cloner:
    """一块 KV 缓存的克隆，每步一次调用搬完所有层的 K 和 V（design "C" 或 "E"）。先检查块号，再按 N 走一条路：C 且
    N ≤ args_max：块号当参数，一次 launch；N < overlap_from：块号写进锁页内存，同一 stream 上一个小 kernel 把它搬进显存，
    再 launch；更大：这个小 kernel 在旁路 stream 上，和上一步的拷贝重叠。锁页内存、显存各 SLOTS 份轮流用（宽度补到 16 字节
    的倍数：kernel 按第 0 份的地址编译）；每 GROUP 步在主 stream 上记一个 event，改写这一组之前先等它（早就完成了）。"""
    SLOTS, GROUP = 64, 32

    def __init__(self, kv, design="C", block=None, args_max=ARGS_MAX, overlap_mb=None):
        if not (torch.is_tensor(kv) and kv.is_floating_point() and kv.dim() == 6 and kv.shape[1] == 2 and kv.is_contiguous()
                and (kv.is_cuda or os.environ.get("TRITON_INTERPRET") == "1")):
            raise ValueError(f"kv 必须是 contiguous 的 [L, 2, n_blocks, H, BS, D] 浮点张量，在 GPU 上（CPU 上要先设 "
                             f"TRITON_INTERPRET=1），收到 {getattr(kv, 'shape', type(kv).__name__)}")
        (L, _, nb, H, BS, D), self.kv, self.cuda, self.design, self.step = kv.shape, kv, kv.is_cuda, design, 0
        E, self.n_blocks, self.L = H * BS * D, nb, L
        self.args_max = args_max if design == "C" else 0      # E 总是先上传块号（vLLM 也这样）
        self.overlap_from = overlap_from(L, E, kv.element_size(), overlap_mb)
        self.host = torch.empty((self.SLOTS + 1, -(-2 * nb // 4) * 4), dtype=torch.int32, pin_memory=self.cuda)  # 16 字节对齐
        self.dev, self.rows = self.host.to(kv.device, copy=True), list(self.host.numpy())
        self.host_idx, self.dev_idx = ([t.data_ptr() if self.cuda else t for t in x] for x in (self.host, self.dev))
        block = min(block or (TILE if design == "C" else E_BLOCK), triton.next_power_of_2(E))
        self.programs, self.stride = 2 * L * triton.cdiv(E, block), nb * E      # C：每个块对几个 program；段长
        self.head, self.tail, kernel, warps = kv, (E, block), copy_blocks_kernel, E_WARPS
        if design == "C":
            self.tail, kernel, warps = (E, block, triton.cdiv(E, block)), clone_all_kernel, WARPS
            self.by_args = launcher(kernel, *self._args(1, self.dev[0], ZEROS * 2), warps, self.cuda)
        self.kernel = launcher(kernel, *self._args(1, self.dev[0]), warps, self.cuda)
        self.loader = launcher(copy_ints_kernel, (1, 1), (self.host[0], self.dev[0], 2, 1024), 4, self.cuda)
        self.stream = lambda: 0
        if self.cuda:                                       # 编译完了：之后只传裸地址
            self.head, self.side = kv.data_ptr(), torch.cuda.Stream(kv.device, priority=-1)
            self.done, self.uploaded = ([torch.cuda.Event() for _ in range(k)] for k in (self.SLOTS // self.GROUP, self.SLOTS))
            self.stream = lambda: torch._C._cuda_getCurrentRawStream(kv.device.index)

    def _args(self, n, idx, pairs=None):
        """(grid, 参数)：前 n 个块对，块号在 idx（显存）或 pairs（src、dst 各补到 8 个）里。"""
        if self.design == "E":
            return (self.L, n), (self.head, idx, self.stride, n, *self.tail)
        return (n * self.programs, 1), (self.head, idx, self.stride, n, *(pairs or ZEROS * 2), *self.tail, bool(pairs))

    def check(self, i, src, dst):
        """写进第 i 份锁页内存并检查：struct 转 uint32、max、set，每项是 C 里的一个循环（src 可以重复：同一块 COW 几次）。"""
        src, dst = (x.tolist() if hasattr(x, "tolist") else x for x in (src, dst))     # numpy、torch：先变成列表
        n = len(src)
        if len(dst) != n:
            raise ValueError(f"src 有 {n} 个块号，dst 有 {len(dst)} 个：长度必须相同")
        try:
            struct.pack_into(f"{2 * n}I", self.rows[i], 0, *src, *dst)
            bad = n and max(max(src), max(dst)) >= self.n_blocks
        except (struct.error, TypeError):
            bad = True
        if bad:
            raise ValueError(f"src、dst 必须是一维的、[0, {self.n_blocks}) 里的整数块号，收到 {src[:4]}、{dst[:4]}…")
        d = set(dst)
        if len(d) < n or not d.isdisjoint(src):
            raise ValueError("dst 有重复的块号，或者和 src 重叠：两个 program 会写同一块，或者读写互相竞争")
        if n >= SORT_MIN:                                   # 写出去的地址接近顺序
            x, order = self.rows[i][:2 * n], self.rows[i][n:2 * n].argsort(kind="stable")
            x[:n], x[n:] = x[:n][order], x[n:][order]
        return src, dst, n

    def __call__(self, src, dst):
        """一步克隆：src[j] → dst[j]，所有层、K 和 V。"""
        if len(src) <= self.args_max:                       # 一次 launch：块号在参数里（检查时写进草稿，没用上）
            src, dst, n = self.check(self.SLOTS, src, dst)
            if n:
                z = ZEROS[n:]
                self.by_args(n * self.programs, 1, self.stream(), self.head, self.dev_idx[0], self.stride, n, *src, *z, *dst,
                             *z, *self.tail, True)
            return
        i = self.step % self.SLOTS
        if self.cuda and i % self.GROUP == 0:
            self.done[i // self.GROUP].synchronize()        # 这一组上一轮的活早就完成了：立刻返回
        n, self.step = self.check(i, src, dst)[2], self.step + 1
        if n < self.overlap_from:
            self.loader(-(-n // 512), 1, self.stream(), self.host_idx[i], self.dev_idx[i], 2 * n, 1024)   # 上传 2N 个数
        else:
            self.loader(-(-n // 512), 1, self.side.cuda_stream if self.cuda else 0, self.host_idx[i], self.dev_idx[i], 2 * n, 1024)
            if self.cuda:
                self.uploaded[i].record(self.side)
                self.uploaded[i].wait()                     # 主 stream（当前 stream）等块号到了再拷
        grid, args = self._args(n, self.dev_idx[i])
        self.kernel(*grid, self.stream(), *args)
        if self.cuda and i % self.GROUP == self.GROUP - 1:
            self.done[i // self.GROUP].record()

    def fixed(self, src, dst, upload=True):
        """固定的块对 → 无参函数：一步（同一 stream 上搬块号 + launch），可以捕获进 CUDA graph；upload=False：只 launch。"""
        n, host = self.check(self.SLOTS, src, dst)[2], torch.empty_like(self.host[-1:], pin_memory=self.cuda)
        dev = host.copy_(self.host[-1:]).to(self.kv.device, copy=True)
        hp, dp = (host.data_ptr(), dev.data_ptr()) if self.cuda else (host[0], dev[0])
        grid, args = self._args(n, dp)

        def step():
            if upload:
                self.loader(-(-n // 512), 1, self.stream(), hp, dp, 2 * n, 1024)
            self.kernel(*grid, self.stream(), *args)
        step.keep = (host, dev)                            # graph 只记住地址：张量要和它活得一样久
        return step
