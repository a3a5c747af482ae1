"""KV block 的 copy-on-write（COW）克隆：Triton kernel、带校验的 wrapper、一个小的 KVBlockManager。

问题：多个请求共享同一个没写满的 last block 时，第一次 decode 写入要先把这个 block
整块复制一份（COW）。这一步能不能只用一次 kernel launch、以接近显存带宽的速度完成？

本模块提供三种克隆方式（06_triton_cow_clone.py 会逐一校验、计时）：

- ``clone_blocks_index_copy``：index_select + index_copy_（种子文章里的“之前”，也是 CPU 上的回退）。
- ``kv_clone_blocks_triton``：每层一次 Triton launch，K/V 一起搬（种子文章里的“之后”）。
- ``kv_clone_blocks_all``：所有层 × K/V × N 个 block 对只用一次 launch；
  缓存是一整块 ``[L, 2, n_blocks, H, BS, D]`` 的张量，下标走可复用的 ``CloneIndexBuffer``。

用法（需要 torch；kernel 还需要 triton）::

    from kv_clone_triton import KVBlockManager
    mgr = KVBlockManager(n_layers=12, n_heads=12, head_dim=64, block_size=16,
                         n_blocks=1024, dtype=torch.float16, device="cuda")

没有 CUDA 的机器上，导入本模块时会设置 ``TRITON_INTERPRET=1``（在导入 triton 之前），
kernel 由 Triton 的解释器在 CPU 上逐个 program 执行：很慢，但逐位结果与 GPU 上一致，
测试就用它校验 kernel。没装 triton 时本模块仍可导入（只能用 index_copy 回退）；
没装 torch 时导入会抛出 ImportError，并说明如何安装。
"""
import os

try:
    import numpy as np
    import torch
except ImportError as exc:  # CPU 讲义的安装里没有 torch：给出一句清楚的话
    raise ImportError(
        "kv_clone_triton 需要 torch（以及 triton）：pip install -r requirements-triton.txt"
        f"（原始错误：{exc}）") from exc

# 没有 CUDA 时用 Triton 解释器：必须在 import triton 之前设置（triton.jit 在装饰时读取它）
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

try:
    import triton
    import triton.language as tl
    HAVE_TRITON = True
    TRITON_VERSION = triton.__version__
except ImportError:  # 没装 triton：模块照样可用，只是没有 kernel
    triton = None
    tl = None
    HAVE_TRITON = False
    TRITON_VERSION = None

SUPPORTED_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
MAX_TILE = 4096          # 一个 program 最多搬多少个元素（fp16 时 8 KB）
NUM_WARPS = 4
STREAM_HINTS = False     # 读写是否加流式缓存提示（06 脚本在 GPU 上扫一遍再定）
SMALL_N = 64             # N 不超过它时：主机检查走纯 Python（比 numpy 快）
ZERO_COPY_MAX_N = 16     # N 不超过它时：kernel 直接从锁页内存读下标（零拷贝），省掉一次 H2D 拷贝调用


def interpret_mode():
    """当前 triton 是否跑在解释器里（TRITON_INTERPRET=1）。"""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0", "false", "False")


def kernel_available(device):
    """这个 device 上能不能跑 Triton kernel：CUDA + triton，或者 CPU + triton 解释器。"""
    if not HAVE_TRITON:
        return False
    device = torch.device(device)
    if device.type == "cuda":
        return True
    return device.type == "cpu" and interpret_mode()


def _next_pow2(x):
    return 1 << max(0, int(x) - 1).bit_length()


def tile_for(n_elems, max_tile=None):
    """每个 program 搬的元素数（2 的幂）和每个 block 要几个 tile。max_tile=None 用当前的 MAX_TILE。"""
    max_tile = MAX_TILE if max_tile is None else max_tile
    tile = min(max_tile, _next_pow2(max(1, n_elems)))
    return tile, -(-n_elems // tile)


# ─────────────────────────────── Triton kernels ───────────────────────────────
if HAVE_TRITON:
    @triton.jit
    def _kv_clone_layer_kernel(k_ptr, v_ptr, src_ptr, dst_ptr,
                               H: tl.constexpr, TD: tl.constexpr, BLOCK: tl.constexpr):
        """种子文章里的 kernel：grid = (N, H, cdiv(BS*D, BLOCK))，一个 program 搬一个 (h, tile)，K/V 一起搬。"""
        n = tl.program_id(0)
        h = tl.program_id(1)
        pid = tl.program_id(2)
        td = pid * BLOCK + tl.arange(0, BLOCK)
        mask = td < TD
        src_blk = tl.load(src_ptr + n).to(tl.int64)
        dst_blk = tl.load(dst_ptr + n).to(tl.int64)
        src_off = (src_blk * H + h) * TD + td
        dst_off = (dst_blk * H + h) * TD + td
        k = tl.load(k_ptr + src_off, mask=mask, other=0)
        v = tl.load(v_ptr + src_off, mask=mask, other=0)
        tl.store(k_ptr + dst_off, k, mask=mask)
        tl.store(v_ptr + dst_off, v, mask=mask)

    @triton.jit
    def _kv_clone_all_kernel(kv_ptr, src_ptr, dst_ptr, group_stride,
                             G: tl.constexpr, E: tl.constexpr, BLOCK: tl.constexpr,
                             TILES: tl.constexpr, STREAM: tl.constexpr):
        """一次 launch 搬完所有 (层, K/V) × N 个 block：一维 grid = N * G * TILES。

        kv 看作 [G, n_blocks, E]（G = 层数 × 2，E = H*BS*D）；group_stride = n_blocks * E。
        相邻的 program 搬同一个 block 的相邻 tile，读写都是连续的大段。
        STREAM=True 时给读写加“流式”提示（读 evict_first，写 .cs）：拷贝的数据不会再用，别占 L2。
        """
        pid = tl.program_id(0)
        tile = pid % TILES
        rest = pid // TILES
        g = (rest % G).to(tl.int64)
        n = rest // G
        src_blk = tl.load(src_ptr + n).to(tl.int64)
        dst_blk = tl.load(dst_ptr + n).to(tl.int64)
        e = tile * BLOCK + tl.arange(0, BLOCK)
        mask = e < E
        base = g * group_stride
        if STREAM:
            x = tl.load(kv_ptr + base + src_blk * E + e, mask=mask, other=0,
                        eviction_policy="evict_first")     # 注意 ptxas 不许 .cg 与 evict_first 同用
            tl.store(kv_ptr + base + dst_blk * E + e, x, mask=mask, cache_modifier=".cs")
        else:
            x = tl.load(kv_ptr + base + src_blk * E + e, mask=mask, other=0)
            tl.store(kv_ptr + base + dst_blk * E + e, x, mask=mask)


# ─────────────────────────────── 输入校验 ───────────────────────────────
def _check_cache(name, t):
    if not isinstance(t, torch.Tensor):
        raise ValueError(f"{name} 必须是 torch.Tensor，收到 {type(t).__name__}")
    if t.dtype not in SUPPORTED_DTYPES:
        raise ValueError(f"{name} 的 dtype 是 {t.dtype}，只支持 float16 / bfloat16 / float32")
    if not t.is_contiguous():
        raise ValueError(f"{name} 必须是 contiguous 的（kernel 按连续内存计算偏移）")


def _index_to_host(name, idx, device):
    """把下标变成主机上的整数序列并检查类型/维度/设备。

    小的 python int 列表（≤ SMALL_N）原样返回（纯 Python 检查比 numpy 快），其余转成 int64 numpy 数组。
    传 GPU 上的下标张量会多一次同步（要把它拷回主机才能检查范围）；
    热路径请传主机端下标（list / numpy / CPU 张量），让 wrapper 通过可复用缓冲区上传。
    """
    if isinstance(idx, (list, tuple)) and len(idx) <= SMALL_N:
        for x in idx:
            if type(x) is not int:
                if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, np.integer)):
                    raise ValueError(f"{name} 必须是整数下标，收到 {type(x).__name__} 元素 {x!r}")
        return [int(x) for x in idx]
    if isinstance(idx, torch.Tensor):
        if idx.dtype.is_floating_point or idx.dtype.is_complex or idx.dtype == torch.bool:
            raise ValueError(f"{name} 必须是整数下标，收到 dtype {idx.dtype}")
        if idx.dim() != 1:
            raise ValueError(f"{name} 必须是一维的，收到形状 {tuple(idx.shape)}")
        if idx.device.type != "cpu" and idx.device != torch.device(device):
            raise ValueError(f"{name} 在 {idx.device} 上，而 KV 缓存在 {device} 上")
        if idx.device.type == "meta":
            raise ValueError(f"{name} 在 meta 设备上，没有数值")
        return idx.detach().to("cpu", torch.int64).numpy()
    if isinstance(idx, np.ndarray):
        arr = idx
    elif isinstance(idx, (list, tuple)):
        arr = np.asarray(idx)            # 混了浮点数会得到浮点 dtype，下面会拒绝
    else:
        try:
            arr = np.asarray(list(idx))
        except TypeError as exc:
            raise ValueError(f"{name} 必须是整数序列，收到 {type(idx).__name__}") from exc
    if arr.size == 0:
        arr = arr.reshape(-1).astype(np.int64)
    if arr.ndim != 1:
        raise ValueError(f"{name} 必须是一维的，收到形状 {arr.shape}")
    if arr.dtype.kind not in "iu" or arr.dtype == np.bool_:
        raise ValueError(f"{name} 必须是整数下标，收到 dtype {arr.dtype}")
    return arr.astype(np.int64, copy=False)


def check_clone_indices(src, dst, n_blocks):
    """检查一组 (src, dst) block 对：长度一致、范围合法、dst 不重复、dst 不与 src 重叠。

    src/dst 是 python int 列表或 int64 numpy 数组（_index_to_host 的结果）。
    GPU 上越界的下标不会报错，只会悄悄写坏别的显存，所以必须在 launch 之前在主机上查。
    返回 (src, dst)：两者类型统一（有一个是 numpy 就都转成 numpy）。
    """
    if len(src) != len(dst):
        raise ValueError(f"src 有 {len(src)} 个下标，dst 有 {len(dst)} 个：长度必须相同")
    if len(src) == 0:
        return src, dst
    if isinstance(src, list) and isinstance(dst, list):          # 小 N：纯 Python
        for name, a in (("src", src), ("dst", dst)):
            lo, hi = min(a), max(a)
            if lo < 0 or hi >= n_blocks:
                raise ValueError(f"{name} 下标 {lo if lo < 0 else hi} 越界：合法范围是 [0, {n_blocks})")
        seen = set()
        for d in dst:
            if d in seen:
                raise ValueError(f"dst 下标 {d} 重复：两个 program 会写同一个 block")
            seen.add(d)
        for x in src:
            if x in seen:
                raise ValueError(f"block {x} 同时是 src 和 dst：读写会互相竞争")
        return src, dst
    src = np.asarray(src, dtype=np.int64)
    dst = np.asarray(dst, dtype=np.int64)
    for name, a in (("src", src), ("dst", dst)):
        lo, hi = int(a.min()), int(a.max())
        if lo < 0 or hi >= n_blocks:
            raise ValueError(f"{name} 下标 {lo if lo < 0 else hi} 越界：合法范围是 [0, {n_blocks})")
    # 重复 / 重叠：bincount 是 O(N + n_blocks)，比排序（np.unique）快得多
    cnt = np.bincount(dst, minlength=n_blocks)
    if cnt.max() > 1:
        raise ValueError(f"dst 下标 {int(cnt.argmax())} 重复：两个 program 会写同一个 block")
    both = cnt[src] > 0
    if both.any():
        raise ValueError(f"block {int(src[both.argmax()])} 同时是 src 和 dst：读写会互相竞争")
    return src, dst


def _check_layer_pair(k_cache_layer, v_cache_layer):
    _check_cache("k_cache_layer", k_cache_layer)
    _check_cache("v_cache_layer", v_cache_layer)
    if k_cache_layer.device != v_cache_layer.device:
        raise ValueError(f"K 在 {k_cache_layer.device}、V 在 {v_cache_layer.device}：必须在同一设备上")
    if k_cache_layer.dtype != v_cache_layer.dtype:
        raise ValueError(f"K 是 {k_cache_layer.dtype}、V 是 {v_cache_layer.dtype}：dtype 必须相同")
    if k_cache_layer.dim() != 4:
        raise ValueError(f"每层的 KV 缓存必须是 [n_blocks, H, BS, D]，收到形状 {tuple(k_cache_layer.shape)}")
    if k_cache_layer.shape != v_cache_layer.shape:
        raise ValueError(f"K 形状 {tuple(k_cache_layer.shape)} 与 V 形状 {tuple(v_cache_layer.shape)} 不同")


def _check_stacked(kv):
    _check_cache("kv", kv)
    if kv.dim() != 6 or kv.shape[1] != 2:
        raise ValueError(f"整块 KV 缓存必须是 [L, 2, n_blocks, H, BS, D]，收到形状 {tuple(kv.shape)}")


def _check_kernel_device(device):
    if not HAVE_TRITON:
        raise ValueError("没有安装 triton：用 clone_blocks_index_copy，或 pip install -r requirements-triton.txt")
    if not kernel_available(device):
        raise ValueError(f"张量在 {device} 上：Triton kernel 需要 CUDA，CPU 上需要先设置 TRITON_INTERPRET=1")


# ─────────────────────────────── 可复用的下标缓冲区 ───────────────────────────────
class CloneIndexBuffer:
    """可复用的 src/dst 下标缓冲区：每步不再 torch.tensor(...)，也不再等 GPU。

    CUDA 上：一个由 RING 个槽组成的锁页（pinned）主机环形缓冲区 + 一块设备缓冲区。
    - N ≤ ZERO_COPY_MAX_N：kernel 直接从锁页内存读下标（零拷贝，UVA 映射），连 H2D 拷贝调用都省了；
      但每个 program 读下标都要穿过 PCIe，N 大了反而慢（06 脚本在 H200 上对比过两条路）；
    - N 更大：一次 cudaMemcpyAsync 把 src、dst 两段一起拷进设备缓冲区（拷贝相对 kernel 可以忽略）。
    一个槽要等它上一次的读者（kernel 或拷贝）完成才能改写：每 EPOCH 次 launch 记一个 CUDA event，
    复用槽之前等“覆盖它上次使用”的那个 event——绝大多数时候它早就完成了，所以不会卡住主机。
    CPU 上（解释器 / 回退）：就是一块普通张量。
    """
    RING = 32
    EPOCH = 8

    def __init__(self, device, capacity=256, zero_copy=True):
        self.device = torch.device(device)
        self.cuda = self.device.type == "cuda"
        self.zero_copy = zero_copy and self.cuda
        self.capacity = 0
        self.count = 0                 # 已经交出去的槽数
        self.pending = []              # [(count 值, event)]，按时间排序
        self.done_upto = -1            # 这个编号之前（含）的槽都已用完
        self._grow(max(1, int(capacity)))

    def _grow(self, capacity):
        if self.cuda and self.count:
            torch.cuda.current_stream(self.device).synchronize()   # 旧缓冲区可能还在被读
        capacity = -(-capacity // 16) * 16       # 16 的倍数：dst 段的起点也 64 字节对齐
        self.capacity = capacity
        # 每个槽一维布局：[src(0..cap) | dst(cap..2cap)]：起点固定，视图可以预先建好，每步不再切片
        self.dev = torch.empty(2 * capacity, dtype=torch.int32, device=self.device)
        self.dev_views = (self.dev[:capacity], self.dev[capacity:])
        ring = self.RING if self.cuda else 1
        self.host = torch.empty((ring, 2 * capacity), dtype=torch.int32, pin_memory=self.cuda)
        self.host_np = self.host.numpy()
        self.host_views = [(self.host[i, :capacity], self.host[i, capacity:]) for i in range(ring)]
        self.pending = []
        self.done_upto = self.count - 1

    def _wait_slot_free(self):
        need = self.count - self.RING            # 这次要复用的槽上一次是第 need 次使用
        if need < 0 or self.done_upto >= need:
            return
        while self.pending and self.pending[0][0] < need:
            self.pending.pop(0)
        k, ev = self.pending.pop(0)              # 第一个 ≥ need 的 event（一定存在：RING > EPOCH）
        ev.synchronize()
        self.done_upto = k

    def upload(self, src, dst):
        """src/dst：已检查过的主机下标（list 或 int64 数组）。返回给 kernel 用的 (src, dst) int32 张量。

        返回的张量长度是 capacity（不是 N）：只有前 N 个有效，launch 时要另传 N。
        调用者 launch 之后必须调用 commit()。
        """
        n = len(src)
        cap = self.capacity
        if n > cap:
            self._grow(max(n, 2 * cap))
            cap = self.capacity
        if not self.cuda:
            self.dev[:n] = torch.as_tensor(src, dtype=torch.int32)
            self.dev[cap:cap + n] = torch.as_tensor(dst, dtype=torch.int32)
            return self.dev_views
        self._wait_slot_free()
        slot = self.count % self.RING
        h = self.host_np[slot]
        h[:n] = src
        h[cap:cap + n] = dst
        if self.zero_copy and n <= ZERO_COPY_MAX_N:
            return self.host_views[slot]          # kernel 直接读锁页内存
        # 一次拷贝把 src 段和 dst 段一起带上：[0, cap + n) 覆盖 src[:n] 与 dst[:n]，
        # 中间 cap - n 个没用的 int32 顺带拷过去（几 KB），换来每步少一次拷贝调用
        self.dev[:cap + n].copy_(self.host[slot, :cap + n], non_blocking=True)
        return self.dev_views

    def commit(self):
        """launch 之后调用：这个槽交出去了；每 EPOCH 次记一个 event，标记“到这里为止的槽都可复用”。"""
        if self.cuda:
            if self.count % self.EPOCH == self.EPOCH - 1:
                ev = torch.cuda.Event()
                ev.record()
                self.pending.append((self.count, ev))
        self.count += 1


# ─────────────────────────────── 三种克隆方式 ───────────────────────────────
def _checked_index_tensors(k_cache_layer, src_block_idx, dst_block_idx, dtype):
    """检查下标（范围、长度、重复），每次新建设备上的下标张量（A、B 两种做法都这样，这正是它们的开销）。

    N = 0 时返回 (None, None)。
    """
    device = k_cache_layer.device
    src = _index_to_host("src_block_idx", src_block_idx, device)
    dst = _index_to_host("dst_block_idx", dst_block_idx, device)
    src, dst = check_clone_indices(src, dst, k_cache_layer.shape[0])
    if len(src) == 0:
        return None, None
    return (torch.as_tensor(src, dtype=dtype).to(device), torch.as_tensor(dst, dtype=dtype).to(device))


def clone_blocks_index_copy(k_cache_layer, v_cache_layer, src_block_idx, dst_block_idx):
    """种子文章里的“之前”：index_select + index_copy_（通用 gather/scatter）。也用作 CPU 回退。"""
    _check_layer_pair(k_cache_layer, v_cache_layer)
    s, d = _checked_index_tensors(k_cache_layer, src_block_idx, dst_block_idx, torch.long)
    if s is None:
        return
    k_cache_layer.index_copy_(0, d, k_cache_layer.index_select(0, s))
    v_cache_layer.index_copy_(0, d, v_cache_layer.index_select(0, s))


def launch_layer_kernel(k_cache_layer, v_cache_layer, src_dev, dst_dev, max_tile=None):
    """不做任何检查的每层 launch（种子文章原样）：下标必须已在设备上、已检查过。"""
    n = src_dev.shape[0]
    if n == 0:
        return
    _, H, BS, D = k_cache_layer.shape
    td = BS * D
    block, tiles = tile_for(td, max_tile)
    _kv_clone_layer_kernel[(n, H, tiles)](k_cache_layer, v_cache_layer, src_dev, dst_dev,
                                          H=H, TD=td, BLOCK=block, num_warps=4)   # 种子原样：固定 4 warps


def kv_clone_blocks_triton(k_cache_layer, v_cache_layer, src_block_idx, dst_block_idx):
    """种子文章里的“之后”：一层、一次 Triton launch，把 N 个 [H, BS, D] block 从 src 拷到 dst（K/V 一起）。

    先检查设备、dtype、形状、下标（范围、长度、重复）——不合法就抛 ValueError。
    """
    _check_layer_pair(k_cache_layer, v_cache_layer)
    _check_kernel_device(k_cache_layer.device)
    s, d = _checked_index_tensors(k_cache_layer, src_block_idx, dst_block_idx, torch.int32)
    if s is None:
        return
    launch_layer_kernel(k_cache_layer, v_cache_layer, s, d)


FAST_LAUNCH = True    # CUDA 上复用已编译的 kernel，跳过 triton 每次 launch 的参数特化与缓存查找
_compiled = {}


def launch_all_kernel(kv, src_dev, dst_dev, n=None, *, max_tile=None, num_warps=None, stream_hints=None):
    """不做检查的单次 launch：kv 是 [L, 2, n_blocks, H, BS, D]，下标已在设备上（或在映射的锁页内存里）。

    n：要拷的 block 对数（默认 len(src_dev)）。CUDA 上第一次按 triton 的正常路径编译、launch，
    之后同样的特化直接调已编译的 kernel（省掉约一半的 launch 主机开销）。
    """
    global FAST_LAUNCH
    n = src_dev.shape[0] if n is None else n
    if n == 0:
        return
    L, _, n_blocks, H, BS, D = kv.shape
    e = H * BS * D
    block, tiles = tile_for(e, max_tile)
    g = 2 * L
    stride = n_blocks * e
    st = STREAM_HINTS if stream_hints is None else stream_hints
    nw = NUM_WARPS if num_warps is None else num_warps
    grid = (n * g * tiles, 1, 1)
    key = None
    if kv.is_cuda:
        # 与 triton 的特化规则一致：指针按 16 字节对齐与否，整数按 ==1、%16、是否超出 int32
        key = (kv.dtype, kv.device.index, g, e, block, tiles, st, nw, stride == 1, stride % 16 == 0,
               stride >= 2 ** 31, kv.data_ptr() % 16 == 0, src_dev.data_ptr() % 16 == 0,
               dst_dev.data_ptr() % 16 == 0)
        ck = _compiled.get(key) if FAST_LAUNCH else None
        if ck is not None:
            try:
                ck[grid](kv, src_dev, dst_dev, stride, g, e, block, tiles, st)
                return
            except Exception:      # 这个 triton 版本的接口不一样：以后都走正常路径
                FAST_LAUNCH = False
    ck = _kv_clone_all_kernel[grid](kv, src_dev, dst_dev, stride, G=g, E=e, BLOCK=block, TILES=tiles,
                                    STREAM=st, num_warps=nw)
    if key is not None and hasattr(ck, "function"):
        _compiled[key] = ck


def kv_clone_blocks_all(kv, src_block_idx, dst_block_idx, index_buffer=None, use_kernel=None):
    """所有层、K 和 V、N 个 block 对：一次调用（kernel 路径下是一次 launch）。

    kv：[L, 2, n_blocks, H, BS, D] contiguous。下标最好是主机端的（list / numpy / CPU 张量）：
    在主机上检查后，经 index_buffer（CloneIndexBuffer，可复用）一次 H2D 上传。
    use_kernel=None 时：CUDA 或解释器可用就用 kernel，否则回退到 index_select + index_copy_。
    """
    _check_stacked(kv)
    device = kv.device
    src = _index_to_host("src_block_idx", src_block_idx, device)
    dst = _index_to_host("dst_block_idx", dst_block_idx, device)
    src, dst = check_clone_indices(src, dst, kv.shape[2])
    if use_kernel is None:
        use_kernel = kernel_available(device)
    if use_kernel:
        _check_kernel_device(device)
    if len(src) == 0:
        return
    if not use_kernel:
        s = torch.as_tensor(src, dtype=torch.long).to(device)
        d = torch.as_tensor(dst, dtype=torch.long).to(device)
        kv.index_copy_(2, d, kv.index_select(2, s))
        return
    if index_buffer is None:
        index_buffer = CloneIndexBuffer(device, capacity=len(src))
    n = len(src)
    s, d = index_buffer.upload(src, dst)
    try:
        launch_all_kernel(kv, s, d, n)
    except ValueError:
        if s.device.type == "cuda" or not index_buffer.zero_copy:
            raise
        # 这台机器的锁页内存没有映射到 GPU（triton 报 "cannot be accessed"）：以后都先拷进显存
        index_buffer.zero_copy = False
        s, d = index_buffer.upload(src, dst)
        launch_all_kernel(kv, s, d, n)
    index_buffer.commit()


# ─────────────────────────────── KVBlockManager ───────────────────────────────
class KVBlockManager:
    """最小的分页 KV 缓存管理器：block 池、引用计数、每条序列的 block table。

    存储是一整块 ``kv[L, 2, n_blocks, H, BS, D]``；``k_caches[l]`` / ``v_caches[l]`` 是每层的
    ``[n_blocks, H, BS, D]`` 视图（和种子文章的每层缓存一样），整块存储让一次 launch 覆盖所有层。
    """

    def __init__(self, n_layers, n_heads, head_dim, block_size, n_blocks,
                 dtype=torch.float16, device="cpu", use_kernel=None):
        if dtype not in SUPPORTED_DTYPES:
            raise ValueError(f"dtype {dtype} 不支持：只支持 float16 / bfloat16 / float32")
        for name, v in (("n_layers", n_layers), ("n_heads", n_heads), ("head_dim", head_dim),
                        ("block_size", block_size), ("n_blocks", n_blocks)):
            if int(v) < 1:
                raise ValueError(f"{name} 必须 ≥ 1，收到 {v}")
        self.n_layers, self.n_heads, self.head_dim = n_layers, n_heads, head_dim
        self.block_size, self.n_blocks = block_size, n_blocks
        self.dtype, self.device = dtype, torch.device(device)
        self.kv = torch.zeros((n_layers, 2, n_blocks, n_heads, block_size, head_dim),
                              dtype=dtype, device=self.device)
        self.k_caches = [self.kv[l, 0] for l in range(n_layers)]
        self.v_caches = [self.kv[l, 1] for l in range(n_layers)]
        self.ref_counts = [0] * n_blocks
        self.free_blocks = list(range(n_blocks - 1, -1, -1))   # pop() 从 0 开始给
        self.block_tables = {}
        self.seq_lens = {}
        self.use_kernel = kernel_available(self.device) if use_kernel is None else bool(use_kernel)
        self.index_buffer = CloneIndexBuffer(self.device) if self.use_kernel else None
        self.last_clone_pairs = []          # 最近一次 append 的 (src, dst)，给校验和教学用
        self.clone_calls = 0                # 调用克隆的次数（每个 append 最多一次）

    # ---- block 池 ----
    def _alloc(self):
        if not self.free_blocks:
            raise RuntimeError("KV block 用完了")
        b = self.free_blocks.pop()
        self.ref_counts[b] = 1
        return b

    def _release(self, b):
        self.ref_counts[b] -= 1
        if self.ref_counts[b] == 0:
            self.free_blocks.append(b)

    # ---- 序列 ----
    def add_sequence(self, seq_id, k, v):
        """新序列并写入它的 prefill KV：k/v 形状 [L, T, H, D]。"""
        if seq_id in self.block_tables:
            raise ValueError(f"序列 {seq_id!r} 已存在")
        L, T, H, D = k.shape
        bs = self.block_size
        table = [self._alloc() for _ in range(-(-T // bs))]
        self.block_tables[seq_id] = table
        self.seq_lens[seq_id] = T
        for i, b in enumerate(table):
            lo, hi = i * bs, min(T, (i + 1) * bs)
            self.kv[:, 0, b, :, : hi - lo, :] = k[:, lo:hi].permute(0, 2, 1, 3).to(self.dtype)
            self.kv[:, 1, b, :, : hi - lo, :] = v[:, lo:hi].permute(0, 2, 1, 3).to(self.dtype)

    def fork(self, parent_id, child_id):
        """child 共享 parent 的全部 block（prefix cache 命中）：只增加引用计数，不拷贝。"""
        if child_id in self.block_tables:
            raise ValueError(f"序列 {child_id!r} 已存在")
        table = list(self.block_tables[parent_id])
        for b in table:
            self.ref_counts[b] += 1
        self.block_tables[child_id] = table
        self.seq_lens[child_id] = self.seq_lens[parent_id]

    def free_sequence(self, seq_id):
        for b in self.block_tables.pop(seq_id):
            self._release(b)
        del self.seq_lens[seq_id]

    def append_token_batch(self, seq_ids, k_new, v_new):
        """一批序列各追加一个 token：k_new/v_new 形状 [L, B, H, D]。

        1) 最后一个 block 写满了 → 分配新 block；
        2) 最后一个 block 没写满但被共享（ref_count > 1）→ COW：分配新 block、记下 (旧, 新)；
        3) 所有待克隆的 block 对一次调用拷完（所有层、K 和 V）；
        4) 在 pos = old_len % BS 写入新 token 的 KV。
        """
        seq_ids = list(seq_ids)
        if len(set(seq_ids)) != len(seq_ids):
            raise ValueError("同一批里有重复的序列")
        exp = (self.n_layers, len(seq_ids), self.n_heads, self.head_dim)
        if tuple(k_new.shape) != exp or tuple(v_new.shape) != exp:
            raise ValueError(f"k_new/v_new 形状必须是 {exp}，收到 {tuple(k_new.shape)} / {tuple(v_new.shape)}")
        bs = self.block_size
        cow_src, cow_dst, blocks, slots = [], [], [], []
        for sid in seq_ids:
            table = self.block_tables[sid]
            old_len = self.seq_lens[sid]
            pos = old_len % bs
            if pos == 0:                              # 写满了（或空序列）：新 block
                table.append(self._alloc())
            elif self.ref_counts[table[-1]] > 1:      # 共享且没写满：copy-on-write
                old = table[-1]
                new = self._alloc()
                self.ref_counts[old] -= 1             # 还 > 0：别人仍在用它
                table[-1] = new
                cow_src.append(old)
                cow_dst.append(new)
            blocks.append(table[-1])
            slots.append(pos)
            self.seq_lens[sid] = old_len + 1
        self.last_clone_pairs = list(zip(cow_src, cow_dst))
        if cow_src:
            kv_clone_blocks_all(self.kv, cow_src, cow_dst, index_buffer=self.index_buffer,
                                use_kernel=self.use_kernel)
            self.clone_calls += 1
        if seq_ids:
            b = torch.tensor(blocks, dtype=torch.long, device=self.device)
            p = torch.tensor(slots, dtype=torch.long, device=self.device)
            new = torch.stack([k_new, v_new], dim=1).to(self.device, self.dtype)   # [L, 2, B, H, D]
            # 两个高级下标（dim 2 和 dim 4）被切片隔开 → 结果维度是 [B, L, 2, H, D]
            self.kv[:, :, b, :, p, :] = new.permute(2, 0, 1, 3, 4)
        return self.last_clone_pairs

    def gather_sequence(self, seq_id):
        """按 block table 读出一条序列的 K/V：[L, 2, T, H, D]（给校验用）。"""
        table = self.block_tables[seq_id]
        T = self.seq_lens[seq_id]
        x = self.kv[:, :, table]                                  # [L, 2, nb, H, BS, D]
        x = x.permute(0, 1, 2, 4, 3, 5).reshape(self.n_layers, 2, -1, self.n_heads, self.head_dim)
        return x[:, :, :T]
