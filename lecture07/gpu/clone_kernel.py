"""写时复制（COW）的整块克隆：一次 launch 把 N 个块对在所有层的 K、V 都拷完（C），对照 vLLM copy_blocks 的设计（E）和
博客里逐层的 kernel（B）；块号怎么交给 kernel 也在这里（Cloner）。缓存是一整块 kv[L, 2, n_blocks, H, BS, D]，看成 2L 段
（层 × K/V），每段 [n_blocks, E]，E = H×BS×D。没有 CUDA 时先设 TRITON_INTERPRET=1（在 import triton 之前）：kernel 在
Triton 解释器里逐个 program 跑——慢，但逐位相同。
"""
import os
import struct

import numpy as np
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

TILE, WARPS = 1024, 2     # C：一个 program 搬一块里的 1024 个元素（fp16 时 2 KB），2 个 warp
OVERLAP_MIN_MB = 200      # 一步读写 ≥ 200 MiB（H200 上 ≥ 约 50 µs）：下标在旁路 stream 上传，藏在上一步的拷贝后面
E_BLOCK, E_WARPS = 8192, 16   # E：一个 program 每次搬几个元素、几个 warp（vLLM：1024 个线程各搬 1 个）


@triton.jit(do_not_specialize=["n_pairs"])
def clone_all_kernel(kv, idx, group_stride, n_pairs, E: tl.constexpr, BLOCK: tl.constexpr, TILES: tl.constexpr):
    """C：一维 grid = 2L × N × TILES，program → (段 g, 块对 n, 第几个 tile)，同一时刻在飞的 program 都在同一段里。
    idx = [src(N) | dst(N)]，在显存里，或在锁页内存里（GPU 经 PCIe 直接读）。"""
    pid = tl.program_id(0)
    g, n = pid // (n_pairs * TILES), pid // TILES % n_pairs
    s, d = tl.load(idx + n).to(tl.int64), tl.load(idx + n_pairs + n).to(tl.int64)
    e = pid % TILES * BLOCK + tl.arange(0, BLOCK)
    base = kv + g.to(tl.int64) * group_stride
    tl.store(base + d * E + e, tl.load(base + s * E + e, mask=e < E), mask=e < E)


@triton.jit(do_not_specialize=["n_pairs"])
def copy_blocks_kernel(key_ptrs, value_ptrs, idx, n_pairs, like, E: tl.constexpr, BLOCK: tl.constexpr):
    """E：vLLM csrc/cache_kernels.cu 里 copy_blocks 的设计。grid = (层数, N)：program (l, p) 在第 l 层把第 p 对块的 K 和
    V 整块拷一遍，一段 BLOCK 个元素地搬。key_ptrs / value_ptrs：每层 K、V 缓存的地址（int64）；like 只给出元素类型。"""
    layer, pair = tl.program_id(0), tl.program_id(1)
    ty = tl.pointer_type(like.dtype.element_ty)
    k, v = tl.load(key_ptrs + layer).to(ty), tl.load(value_ptrs + layer).to(ty)
    src, dst = tl.load(idx + pair).to(tl.int64) * E, tl.load(idx + n_pairs + pair).to(tl.int64) * E
    for start in range(0, E, BLOCK):
        e = start + tl.arange(0, BLOCK)
        a, b = tl.load(k + src + e, mask=e < E), tl.load(v + src + e, mask=e < E)
        tl.store(k + dst + e, a, mask=e < E)
        tl.store(v + dst + e, b, mask=e < E)


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
    """把 n 个 int32 从 src（锁页内存：GPU 经 PCIe 直接读）拷到 dst（显存）：旁路 stream 上的"上传"。"""
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + i, tl.load(src + i, mask=i < n), mask=i < n)


def clone_layer(k_layer, v_layer, src, dst):
    """博客里的"之后"：一层 [n_blocks, H, BS, D]，每次从列表新建 int32 下标张量，一次 launch（不做检查）。"""
    _, H, BS, D = k_layer.shape
    s, d = (torch.tensor(x, dtype=torch.int32, device=k_layer.device) for x in (src, dst))
    block = min(1024, triton.next_power_of_2(BS * D))
    clone_layer_kernel[(len(src), H, triton.cdiv(BS * D, block))](k_layer, v_layer, s, d, H, BS * D, block, num_warps=4)


def overlap_from(L, E, element_size):
    """从哪个 N 起下标在旁路 stream 上传：一步读写 2 × N × 2L × E 个元素 ≥ OVERLAP_MIN_MB。"""
    return max(1, -(-int(OVERLAP_MIN_MB * 2 ** 20) // (4 * L * E * element_size)))


def launcher(kernel, grid, args, warps, cuda):
    """→ launch(gx, gy, stream, *args)。CUDA 上用张量参数编译一次，之后直接调 Triton 生成的 C 启动函数（一次
    cuLaunchKernelEx）、传裸地址，省掉 kernel[grid](...) 每次在 Python 里做的事（拿不到这些内部属性、注册了 launch
    钩子时走公开路径）；CPU 上（解释器）用 kernel[grid](...)。"""
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
    """一块 KV 缓存的克隆，每步一次 launch 搬完所有层、K 和 V（design "C"：一维 grid；"E"：vLLM 的 (层, 块对) grid）。
    主机上每步：检查块号、写进预先分配的锁页内存（常数次 Python 调用），然后
    - 一步读写 < OVERLAP_MIN_MB：kernel 直接读锁页内存里的块号（零拷贝），一次 launch；C 用一个 program 搬一整块
      的版本：经 PCIe 读块号的 program 少；
    - 否则：旁路 stream 上一个小 kernel 把块号搬进显存（和上一步还在跑的拷贝重叠），主 stream 等它，再 launch。
    锁页内存和显存各 SLOTS 份轮流用；每 GROUP 步在主 stream 上记一个 event，改写下一组之前先等它（早就完成了）。"""
    SLOTS, GROUP = 16, 8

    def __init__(self, kv, design="C", block=None, warps=None):
        if not (torch.is_tensor(kv) and kv.is_floating_point() and kv.dim() == 6 and kv.shape[1] == 2
                and kv.is_contiguous() and (kv.is_cuda or os.environ.get("TRITON_INTERPRET") == "1")):
            raise ValueError("kv 必须是 contiguous 的 [L, 2, n_blocks, H, BS, D] 浮点张量，在 GPU 上（CPU 上要先设 "
                             f"TRITON_INTERPRET=1），收到 {getattr(kv, 'shape', type(kv).__name__)}")
        L, _, nb, H, BS, D = kv.shape
        E, self.cuda, self.design, self.n_blocks, self.L, self.step = H * BS * D, kv.is_cuda, design, nb, L, 0
        self.kv, raw = kv, (lambda t: t.data_ptr()) if kv.is_cuda else (lambda t: t)
        self.overlap_from = overlap_from(L, E, kv.element_size())
        width = -(-2 * nb // 4) * 4       # 每份 16 字节对齐：kernel 按第 0 份的地址编译，假定下标地址是 16 的倍数
        self.host = torch.empty((self.SLOTS + 1, width), dtype=torch.int32, pin_memory=self.cuda)  # 最后一份给 fixed
        self.rows, self.dev = self.host.numpy(), self.host.to(kv.device, copy=True)      # 每份 [src(N) | dst(N)]
        self.host_idx, self.dev_idx = [raw(t) for t in self.host], [raw(t) for t in self.dev]
        full = triton.next_power_of_2(E)
        if design == "E":
            self.head = [torch.tensor([kv[l, j].data_ptr() for l in range(L)], device=kv.device) for j in (0, 1)]
            w, block = warps or E_WARPS, min(block or E_BLOCK, full)
            self.kernel, self.warps, self.tail = copy_blocks_kernel, {"t": w, "w": w}, {k: (kv, E, block) for k in "tw"}
        else:       # "t"：一个 program 一个 tile（块号在显存）；"w"：零拷贝时一个 program 一整块
            self.kernel, self.head, self.warps = clone_all_kernel, [kv], {"t": warps or WARPS, "w": 4}
            self.tail = {k: (E, b, triton.cdiv(E, b)) for k, b in (("t", min(block or TILE, full)), ("w", full))}
        self.launch = {k: launcher(self.kernel, *self._args(k, 1, self.dev[0]), w, self.cuda)
                       for k, w in self.warps.items()}
        self.launch["i"] = launcher(copy_ints_kernel, (1,), (self.host[0], self.dev[0], 2, 1024), 4, self.cuda)
        self.stream = lambda: 0
        if self.cuda:
            self.side = torch.cuda.Stream(kv.device, priority=-1)
            self.done = [torch.cuda.Event() for _ in range(self.SLOTS // self.GROUP)]
            self.uploaded = [torch.cuda.Event() for _ in range(self.SLOTS)]
            self.tables, self.head = self.head, [t.data_ptr() for t in self.head]   # E 的地址表：留着，否则显存被收回
            self.tail = {k: tuple(raw(x) if torch.is_tensor(x) else x for x in t) for k, t in self.tail.items()}
            self.stream = lambda: torch._C._cuda_getCurrentRawStream(kv.device.index)

    def _args(self, key, n, idx):
        """(grid, 参数)：前 n 个块对，块号在 idx（显存或锁页内存的地址）。"""
        if self.design == "E":
            return (self.L, n), (*self.head, idx, n, *self.tail[key])
        E, block, tiles = self.tail[key]
        return (n * 2 * self.L * tiles, 1), (*self.head, idx, self.n_blocks * E, n, E, block, tiles)

    def run(self, key, n, idx):
        grid, args = self._args(key, n, idx)
        self.launch[key](*grid, self.stream(), *args)

    def upload(self, n, host, dev, stream):              # 2N 个 int32：锁页内存 → 显存
        self.launch["i"](-(-2 * n // 1024), 1, stream, host, dev, 2 * n, 1024)

    def write(self, i, src, dst):
        """块对写进第 i 份锁页内存并检查（GPU 上越界的块号不报错，只会悄悄写坏别处的显存）：整数、在 [0, n_blocks) 里、
        dst 不重复、不与 src 重叠（src 可以重复：几个请求从同一块 COW）；每项是 C 里的一个循环（struct、numpy、set）。
        旁路上传时按目的块排序：写出去的地址接近顺序，只量 kernel 快约 1.5%。返回 N。"""
        src, dst = (x.tolist() if hasattr(x, "tolist") else x for x in (src, dst))     # numpy、torch：先变成列表
        n = len(src)
        if len(dst) != n:
            raise ValueError(f"src 有 {n} 个块号，dst 有 {len(dst)} 个：长度必须相同")
        try:
            struct.pack_into(f"{2 * n}i", self.rows[i], 0, *src, *dst)
        except (struct.error, TypeError) as exc:
            raise ValueError(f"src、dst 必须是一维的整数块号（{exc}）") from None
        x = self.rows[i, :2 * n]
        if n and x.view(np.uint32).max() >= self.n_blocks:     # 负数当成很大的无符号数：一次比较查两头
            raise ValueError(f"块号 {x[(x < 0) | (x >= self.n_blocks)][0]} 越界：合法范围是 [0, {self.n_blocks})")
        d = set(dst)
        if len(d) < n:
            raise ValueError("dst 有重复的块号：两个 program 会写同一块")
        if not d.isdisjoint(src):
            raise ValueError(f"块 {min(d.intersection(src))} 同时是 src 和 dst：读写会互相竞争")
        if n >= self.overlap_from:
            order = x[n:].argsort(kind="stable")
            x[:n], x[n:] = x[:n][order], x[n:][order]
        return n

    def __call__(self, src, dst):
        """一步克隆：src[j] → dst[j]，所有层、K 和 V。"""
        i = self.step % self.SLOTS
        if self.cuda and i % self.GROUP == 0:
            self.done[i // self.GROUP].synchronize()        # 这一组上一轮的活早就完成了：立刻返回
        n = self.write(i, src, dst)
        if n == 0:
            return
        self.step += 1
        if n < self.overlap_from:
            self.run("w", n, self.host_idx[i])
        else:
            self.upload(n, self.host_idx[i], self.dev_idx[i], self.side.cuda_stream if self.cuda else 0)
            if self.cuda:
                self.uploaded[i].record(self.side)
                torch.cuda.current_stream(self.kv.device).wait_event(self.uploaded[i])
            self.run("t", n, self.dev_idx[i])
        if self.cuda and i % self.GROUP == self.GROUP - 1:
            self.done[i // self.GROUP].record()

    def fixed(self, src, dst, upload=True):
        """一组固定的块对 → 无参函数：GPU 上的一步（上传块号 + launch，都在当前 stream 上），可以捕获进 CUDA graph。
        upload=False：块号已在显存，只 launch（"只量 kernel"）。"""
        n = self.write(self.SLOTS, src, dst)
        host = torch.tensor(self.rows[self.SLOTS, :2 * n], dtype=torch.int32)
        host = host.pin_memory() if self.cuda else host
        dev = host.to(self.kv.device, copy=True)
        hp, dp = (host.data_ptr(), dev.data_ptr()) if self.cuda else (host, dev)

        def step():
            if upload:
                self.upload(n, hp, dp, self.stream())
            self.run("t", n, dp)
        step.keep = (host, dev)                            # graph 只记住地址：张量要和它活得一样久
        return step
