"""写时复制（COW）的整块克隆：一次 launch 把 N 个块对在所有层的 K、V 都拷完（C），对照 vLLM copy_blocks 的设计（E）
和博客里逐层的 kernel（B）；块号怎么交给 kernel 也在这里（Cloner）。

缓存是一整块 kv[L, 2, n_blocks, H, BS, D]，看成 2L 段（层 × K/V），每段 [n_blocks, E]，E = H×BS×D 个元素。
没有 CUDA 时先设 TRITON_INTERPRET=1（在 import triton 之前）：kernel 在 Triton 解释器里逐个 program 跑——慢，但逐位相同。
"""
import os
import struct

import numpy as np
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)   # float64：CPU 上逐位核对用
TILE, WARPS = 1024, 2     # C：一个 program 搬一块里的 1024 个元素（fp16 时 2 KB），2 个 warp
ARG_PAIRS = 8             # N ≤ 8：块号当 kernel 的标量参数传（kernel 里写死 8 对），什么都不上传
OVERLAP_MIN_MB = 200      # 一步读写 ≥ 200 MB（H200 上 ≥ 约 50 µs）：下标在旁路 stream 上传，藏在上一步的拷贝后面
E_BLOCK, E_WARPS = 8192, 16   # E：一个 program 每次搬几个元素、几个 warp（vLLM 是 1024 个线程各搬 1 个）
SCALARS = [f"{c}{i}" for c in "sd" for i in range(ARG_PAIRS)]


@triton.jit(do_not_specialize=["n_pairs", "from_args"] + SCALARS)
def clone_all_kernel(kv, idx, group_stride, n_pairs, from_args, s0, s1, s2, s3, s4, s5, s6, s7,
                     d0, d1, d2, d3, d4, d5, d6, d7, E: tl.constexpr, BLOCK: tl.constexpr, TILES: tl.constexpr):
    """C：一维 grid = 2L × N × TILES，program → (段 g, 块对 n, 第几个 tile)，同一时刻在飞的 program 都在同一段里。
    from_args ≠ 0：第 n 对块号是标量参数 s_n、d_n；否则读 idx = [src(N) | dst(N)]（显存，或锁页内存：经 PCIe 读）。"""
    pid = tl.program_id(0)
    g = pid // (n_pairs * TILES)
    n = pid // TILES % n_pairs
    if from_args != 0:        # 8 选 1：三层二分
        s = tl.where(n < 4, tl.where(n < 2, tl.where(n < 1, s0, s1), tl.where(n < 3, s2, s3)),
                     tl.where(n < 6, tl.where(n < 5, s4, s5), tl.where(n < 7, s6, s7)))
        d = tl.where(n < 4, tl.where(n < 2, tl.where(n < 1, d0, d1), tl.where(n < 3, d2, d3)),
                     tl.where(n < 6, tl.where(n < 5, d4, d5), tl.where(n < 7, d6, d7)))
    else:
        s = tl.load(idx + n)
        d = tl.load(idx + n_pairs + n)
    e = pid % TILES * BLOCK + tl.arange(0, BLOCK)
    base = kv + g.to(tl.int64) * group_stride
    mask = e < E
    tl.store(base + d.to(tl.int64) * E + e, tl.load(base + s.to(tl.int64) * E + e, mask=mask), mask=mask)


@triton.jit(do_not_specialize=["n_pairs"])
def copy_blocks_kernel(key_ptrs, value_ptrs, idx, n_pairs, like, E: tl.constexpr, BLOCK: tl.constexpr):
    """E：vLLM csrc/cache_kernels.cu 里 copy_blocks 的设计。grid = (层数, N)：program (l, p) 在第 l 层把第 p 对块的
    K 和 V 整块拷一遍，一段 BLOCK 个元素地搬。key_ptrs / value_ptrs：每层 K、V 缓存的地址（int64）；like 只给出元素类型。"""
    layer, pair = tl.program_id(0), tl.program_id(1)
    ty = tl.pointer_type(like.dtype.element_ty)
    k = tl.load(key_ptrs + layer).to(ty)
    v = tl.load(value_ptrs + layer).to(ty)
    src = tl.load(idx + pair).to(tl.int64) * E
    dst = tl.load(idx + n_pairs + pair).to(tl.int64) * E
    for start in range(0, E, BLOCK):
        e = start + tl.arange(0, BLOCK)
        mask = e < E
        a = tl.load(k + src + e, mask=mask)
        b = tl.load(v + src + e, mask=mask)
        tl.store(k + dst + e, a, mask=mask)
        tl.store(v + dst + e, b, mask=mask)


@triton.jit
def clone_layer_kernel(k, v, src_idx, dst_idx, H: tl.constexpr, TD: tl.constexpr, BLOCK: tl.constexpr):
    """B：博客的 kernel，一层一次 launch。grid = (N, H, cdiv(BS×D, BLOCK))，一个 program 搬一个 (头, tile)，K/V 一起搬。"""
    n, h = tl.program_id(0), tl.program_id(1)
    td = tl.program_id(2) * BLOCK + tl.arange(0, BLOCK)
    mask = td < TD
    src = (tl.load(src_idx + n).to(tl.int64) * H + h) * TD + td
    dst = (tl.load(dst_idx + n).to(tl.int64) * H + h) * TD + td
    tl.store(k + dst, tl.load(k + src, mask=mask), mask=mask)
    tl.store(v + dst, tl.load(v + src, mask=mask), mask=mask)


@triton.jit(do_not_specialize=["n"])
def copy_ints_kernel(src, dst, n, BLOCK: tl.constexpr):
    """把 n 个 int32 从 src（锁页内存：GPU 经 PCIe 直接读）拷到 dst（显存）：旁路 stream 上的"上传"。"""
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + i, tl.load(src + i, mask=i < n), mask=i < n)


def clone_layer(k_layer, v_layer, src, dst):
    """博客里的"之后"：一层 [n_blocks, H, BS, D]，每次从列表新建 int32 下标张量，一次 launch（不做检查）。"""
    _, H, BS, D = k_layer.shape
    s, d = (torch.tensor(x, dtype=torch.int32, device=k_layer.device) for x in (src, dst))
    block = min(1024, triton.next_power_of_2(BS * D))
    clone_layer_kernel[(len(src), H, triton.cdiv(BS * D, block))](k_layer, v_layer, s, d, H=H, TD=BS * D,
                                                                  BLOCK=block, num_warps=4)


def overlap_from(L, E, element_size):
    """从哪个 N 起下标在旁路 stream 上传：一步读写（2 × N × 2L × E 个元素）≥ OVERLAP_MIN_MB，且 N > ARG_PAIRS。"""
    return max(ARG_PAIRS + 1, -(-OVERLAP_MIN_MB * 2 ** 20 // (4 * L * E * element_size)))


def public(kernel, warps):
    """launch(gx, gy, stream, *args) 的公开路径 kernel[grid](...)（CPU 上的解释器用它；stream 不用）。"""
    return lambda gx, gy, stream, *a: kernel[(gx, gy)](*a, num_warps=warps)


def fast_launcher(kernel, grid, args, warps):
    """用张量参数编译一次 → launch(gx, gy, stream, *args)：之后直接调 Triton 生成的 C 启动函数（一次 cuLaunchKernelEx），
    传裸地址，跳过 kernel[grid](...) 每次在 Python 里做的事。拿不到这些内部属性（别的 triton 版本）时走公开路径。"""
    compiled = kernel.warmup(*args, grid=grid, num_warps=warps)
    try:
        compiled._init_handles()
        run, hooks = compiled.run, (triton.knobs.runtime.launch_enter_hook, triton.knobs.runtime.launch_exit_hook)
        if run.global_scratch_size or run.profile_scratch_size or any(h.calls for h in hooks):
            raise AttributeError
        head = (compiled.function, run.launch_cooperative_grid, run.launch_pdl, None, None, compiled.packed_metadata,
                None, None, None)
        return lambda gx, gy, stream, *a: run.launch(gx, gy, 1, stream, *head, *a)
    except AttributeError:
        return lambda gx, gy, stream, *a: compiled[(gx, gy, 1)](*a)


class Cloner:
    """一块 KV 缓存的克隆，每步一次 launch 搬完所有层、K 和 V。design "C"：一维 grid；"E"：vLLM 的 (层, 块对) grid。
    主机上每步：检查下标（常数次 Python 调用，每次是 C 里的循环）、写进预先分配的锁页内存，然后按这一步的大小：
    - N ≤ ARG_PAIRS（C）：块号当 kernel 的标量参数，一次 launch，什么都不上传；
    - 一步读写 < OVERLAP_MIN_MB：kernel 直接读锁页内存里的下标（零拷贝），一次 launch；一个 program 搬一整块，
      经 PCIe 读下标的 program 少；
    - 否则：旁路 stream 上一个小 kernel 把下标搬进显存（和上一步还在跑的拷贝重叠），主 stream 等它、再 launch。
    锁页内存和显存各 SLOTS 份轮流用，每 GROUP 步在主 stream 上记一个 event，改写下一组之前先等它（早就完成了）。"""
    SLOTS, GROUP = 16, 8

    def __init__(self, kv, design="C", block=None, warps=None):
        if not isinstance(kv, torch.Tensor) or kv.dtype not in DTYPES or kv.dim() != 6 or kv.shape[1] != 2:
            raise ValueError(f"kv 必须是 [L, 2, n_blocks, H, BS, D] 的浮点 torch.Tensor，收到 {getattr(kv, 'shape', kv)}")
        if not kv.is_contiguous() or not (kv.is_cuda or os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")):
            raise ValueError("kv 必须是 contiguous 的，在 CUDA 上（CPU 上要先设 TRITON_INTERPRET=1）")
        L, _, nb, H, BS, D = kv.shape
        E, self.cuda, self.design, self.n_blocks, self.L, self.step = H * BS * D, kv.is_cuda, design, nb, L, 0
        self.kv, self.raw = kv, (lambda t: t.data_ptr()) if kv.is_cuda else (lambda t: t)
        self.overlap_from = overlap_from(L, E, kv.element_size())
        whole, block = triton.next_power_of_2(E), min(block or (TILE, E_BLOCK)[design == "E"], triton.next_power_of_2(E))
        if design == "E":
            self.head = [torch.tensor([kv[l, j].data_ptr() for l in range(L)], device=kv.device) for j in (0, 1)]
            self.kernel, warps, self.tail = copy_blocks_kernel, warps or E_WARPS, {k: (kv, E, block) for k in "tw"}
            self.warps = {"t": warps, "w": warps}
        else:
            self.kernel, self.head, self.warps = clone_all_kernel, [kv], {"t": warps or WARPS, "w": 4}
            self.tail = {k: (E, b, triton.cdiv(E, b)) for k, b in (("t", block), ("w", whole))}
            self.per_pair = {k: 2 * L * t[2] for k, t in self.tail.items()}
        self.reserve(64)
        self.launch = {k: public(self.kernel, w) for k, w in self.warps.items()}
        self.launch["i"], self.stream = public(copy_ints_kernel, 4), lambda: 0
        if self.cuda:
            self.side = torch.cuda.Stream(kv.device, priority=-1)
            self.done = [torch.cuda.Event() for _ in range(self.SLOTS // self.GROUP)]
            self.uploaded = [torch.cuda.Event() for _ in range(self.SLOTS)]
            self.launch = {k: fast_launcher(self.kernel, *self._args(k, 1, self.dev[0]), w) for k, w in self.warps.items()}
            self.launch["i"] = fast_launcher(copy_ints_kernel, (1,), (self.host[0], self.dev[0], 2, 1024), 4)
            self.head = [t.data_ptr() for t in self.head]
            self.tail = {k: tuple(x.data_ptr() if torch.is_tensor(x) else x for x in t) for k, t in self.tail.items()}
            self.stream = lambda: torch._C._cuda_getCurrentRawStream(kv.device.index)

    def _args(self, key, n, idx, scalars=(0,) * 2 * ARG_PAIRS, from_args=0):
        """(grid, 参数)：key "t"（一个 program 一个 tile；下标在显存或当标量参数）或 "w"（零拷贝：一个 program 一整块）。"""
        if self.design == "E":
            return (self.L, n), (*self.head, idx, n, *self.tail[key])
        return (n * self.per_pair[key], 1), (*self.head, idx, self.n_blocks * self.tail[key][0], n, from_args, *scalars,
                                             *self.tail[key])

    def run(self, key, n, idx, pairs=None):
        """一次 launch：前 n 个块对，下标在 idx；pairs = (src 列表, dst 列表) 时当标量参数传（n ≤ 8）。"""
        if pairs is None:
            grid, args = self._args(key, n, idx)
        else:
            pad = [0] * (ARG_PAIRS - n)
            grid, args = self._args(key, n, idx, (*pairs[0], *pad, *pairs[1], *pad), 1)
        self.launch[key](*grid, self.stream(), *args)

    def reserve(self, cap):
        """下标缓冲区：锁页内存和显存各 SLOTS + 1 份 [src(cap) | dst(cap)]（最后一份给 fixed）。换大的之前等 GPU 用完。"""
        if self.cuda and getattr(self, "cap", 0):
            torch.cuda.synchronize(self.kv.device)
        self.cap = 16 * -(-cap // 16)
        self.host = torch.empty((self.SLOTS + 1, 2 * self.cap), dtype=torch.int32, pin_memory=self.cuda)
        self.rows, self.dev = self.host.numpy(), self.host.to(self.kv.device, copy=True)
        self.host_idx, self.dev_idx = [self.raw(t) for t in self.host], [self.raw(t) for t in self.dev]

    def write(self, i, src, dst):
        """把块对写进第 i 份锁页内存并检查（GPU 上越界的下标不报错，只会悄悄写坏别处的显存）：整数、在 [0, n_blocks)
        里、dst 不重复、dst 不与 src 重叠（src 可以重复：几个请求从同一块 COW）。返回 (src 列表, dst 列表)。
        常数次 Python 调用，每次是 C 里的循环（struct 转 int32、numpy 查范围、set 查重复）。"""
        src, dst = (x.tolist() if hasattr(x, "tolist") else x for x in (src, dst))     # numpy、torch：先变成列表
        n = len(src)
        if len(dst) != n:
            raise ValueError(f"src 有 {n} 个下标，dst 有 {len(dst)} 个：长度必须相同")
        if n > self.cap:
            self.reserve(n)
        try:
            struct.pack_into(f"{2 * n}i", self.rows[i], 0, *src, *dst)
        except (struct.error, TypeError) as exc:
            raise ValueError(f"src、dst 必须是一维的整数下标（{exc}）") from None
        x = self.rows[i, :2 * n]
        if n and x.view(np.uint32).max() >= self.n_blocks:     # 负数当成很大的无符号数：一次比较查两头
            raise ValueError(f"下标 {x[(x < 0) | (x >= self.n_blocks)][0]} 越界：合法范围是 [0, {self.n_blocks})")
        d = set(dst)
        if len(d) < n:
            raise ValueError("dst 下标有重复：两个 program 会写同一块")
        if not d.isdisjoint(src):
            raise ValueError(f"块 {min(d.intersection(src))} 同时是 src 和 dst：读写会互相竞争")
        return src, dst

    def __call__(self, src, dst):
        """一步克隆：src[j] → dst[j]，所有层、K 和 V。"""
        i = self.step % self.SLOTS
        if self.cuda and i % self.GROUP == 0:
            self.done[i // self.GROUP].synchronize()        # 这一组上一轮的活早就完成了：立刻返回
        a, b = self.write(i, src, dst)
        n = len(a)
        if n == 0:
            return
        self.step += 1
        if n <= ARG_PAIRS and self.design == "C":
            self.run("t", n, self.dev_idx[i], (a, b))
        elif n < self.overlap_from:
            self.run("w", n, self.host_idx[i])
        else:
            self.by_destination(i, n)
            main = torch.cuda.current_stream(self.kv.device) if self.cuda else None
            self.launch["i"](-(-2 * n // 1024), 1, self.side.cuda_stream if self.cuda else 0, self.host_idx[i],
                             self.dev_idx[i], 2 * n, 1024)
            if self.cuda:
                self.uploaded[i].record(self.side)
                main.wait_event(self.uploaded[i])
            self.run("t", n, self.dev_idx[i])
        if self.cuda and i % self.GROUP == self.GROUP - 1:
            self.done[i // self.GROUP].record()

    def by_destination(self, i, n):
        """第 i 份里的块对按目的块排序：写出去的地址接近顺序（N 大时只量 kernel 快约 1.5%）。"""
        x = self.rows[i, :2 * n]
        order = x[n:].argsort(kind="stable")
        x[:n], x[n:] = x[:n][order], x[n:][order]

    def fixed(self, src, dst, upload=True):
        """一组固定的块对 → 无参函数：GPU 上的一步（和 __call__ 同一条路径，只是不再检查、不写锁页内存），可以捕获进
        CUDA graph。upload=False：下标已在显存，只 launch（"只量 kernel"）。"""
        a, b = self.write(self.SLOTS, src, dst)
        n = len(a)
        if n >= self.overlap_from:
            self.by_destination(self.SLOTS, n)
        host = torch.tensor(self.rows[self.SLOTS, :2 * n], dtype=torch.int32)
        host = host.pin_memory() if self.cuda else host
        dev = host.to(self.kv.device, copy=True)
        hp, dp = self.raw(host), self.raw(dev)

        def step():
            if n <= ARG_PAIRS and self.design == "C":
                self.run("t", n, dp, (a, b))
            elif upload and n < self.overlap_from:
                self.run("w", n, hp)
            else:
                if upload:
                    self.launch["i"](-(-2 * n // 1024), 1, self.stream(), hp, dp, 2 * n, 1024)
                self.run("t", n, dp)
        step.keep = (host, dev)                            # graph 只记住地址：张量要和它活得一样久
        return step
