"""KV 的物理量：模型每 token 的 KV 有多大、各存储层级的带宽、prefill 要算多久（FAST'25 式 1）、读 KV 要多久
（一个请求，或一整个 trace 的请求加起来），这里只有这些；块哈希、trace、缓存策略和模拟器各在自己的模块里。

数字的来源（都在变量旁边注明）：
- Mooncake arXiv 2407.00079v3（§4、表 1）和 FAST'25 论文（式 1、表 1、表 2）；
- vLLM 论文（SOSP'23）。

单位：KV 的字节数用二进制单位（1 KiB = 1024 B：每 token 320 KiB，每块 512 token = 160 MiB）；
带宽用十进制（1 GB/s = 10⁹ B/s，和论文、数据手册一样）。

    >>> LLAMA2_70B.kv_bytes_per_token()          # 80 层 × 8 个 KV 头 × 128 × 2（K、V）× 2 字节 = 320 KiB
    327680
    >>> LLAMA3_70B.kv_bytes_per_token() == LLAMA2_70B.kv_bytes_per_token()   # 同形状
    True
"""
import functools
import itertools
import operator
from dataclasses import dataclass

import numpy as np


# ---------------------------------------------------------------- 模型与硬件
EQ1_A, EQ1_B = 4, 22     # FAST'25 表 1：式 (1) 的常数 a（注意力，∝ n²）、b（投影与 MLP，∝ n）；全讲只写在这里


@dataclass(frozen=True)
class ModelSpec:
    name: str
    n_layers: int
    d_model: int
    n_heads: int
    n_kv_heads: int
    n_params: float          # 参数个数（算权重占多少显存）
    dtype_bytes: int = 2     # fp16 / bf16

    @property
    def head_dim(self):
        return self.d_model // self.n_heads

    def kv_bytes_per_token(self):
        """层数 × KV 头数 × 头维度 × 2（K 和 V）× 每个数的字节数。"""
        return self.n_layers * self.n_kv_heads * self.head_dim * 2 * self.dtype_bytes

    def prefill_flops(self, n):
        """FAST'25 式 (1)：FLOPs(n) = l·(a·n²·d + b·n·d²)，a = EQ1_A（注意力），b = EQ1_B（投影与 MLP）。"""
        return self.n_layers * (EQ1_A * n * n * self.d_model + EQ1_B * n * self.d_model ** 2)


LLAMA2_70B = ModelSpec("LLaMA2-70B", n_layers=80, d_model=8192, n_heads=64, n_kv_heads=8, n_params=70e9)
# FAST'25（表 1、§2.2、§5.3.1）的模型是 LLaMA3-70B；arXiv v3 用的是同形状的 dummy LLaMA2-70B。
# 形状（80 层、d = 8192、64 个查询头、8 个 KV 头）相同，所以每 token 的 KV（320 KiB）和式 (1) 的 FLOPs 都相同。
LLAMA3_70B = ModelSpec("LLaMA3-70B", n_layers=80, d_model=8192, n_heads=64, n_kv_heads=8, n_params=70.6e9)
# 小模型（公开的 config.json）：LLaMA3-8B 用 GQA（8 个 KV 头），LLaMA2-7B 是 MHA（32 个 KV 头，每 token 的 KV 是 4 倍）
LLAMA3_8B = ModelSpec("LLaMA3-8B", n_layers=32, d_model=4096, n_heads=32, n_kv_heads=8, n_params=8.03e9)
LLAMA2_7B = ModelSpec("LLaMA2-7B", n_layers=32, d_model=4096, n_heads=32, n_kv_heads=32, n_params=6.74e9)


@dataclass(frozen=True)
class Node:
    """一台推理机器（FAST'25 表 1 的设置：8 × A800，张量并行）。"""
    name: str
    n_gpus: int
    tflops_per_gpu: float    # bf16 稠密峰值
    hbm_gb_per_gpu: float    # 标称的 "80GB"：实际是 80 GiB（nvidia-smi 显示 81,920 MiB），见 hbm_bytes
    mfu: float = 0.6         # 实际能达到的峰值比例（04_prefix_caching 演示 5 的假设）

    @property
    def flops(self):
        return self.n_gpus * self.tflops_per_gpu * 1e12 * self.mfu

    @property
    def hbm_bytes(self):
        """整台机器的 HBM 字节数，按二进制单位：8 × 80 GiB = 640 GiB。

        >>> A800_X8.hbm_bytes / 2**30
        640.0
        """
        return self.n_gpus * self.hbm_gb_per_gpu * 2**30


A800_X8 = Node("8×A800", n_gpus=8, tflops_per_gpu=312, hbm_gb_per_gpu=80)


@dataclass(frozen=True)
class Tier:
    name: str
    gb_per_s: float          # 整台 8 卡机器能拿到的读带宽（GB/s，1 GB = 1e9 字节）：读的时间都用它算
    source: str
    nic: bool = False        # 经网卡读（RDMA）：印的时候按网卡的习惯用 Gbps（论文表 1 的 B_nic 就这样写）

    def bandwidth(self, with_gb_per_s=False):
        """印出来的带宽：网卡用 Gbps，内存、PCIe、SSD 用 GB/s；with_gb_per_s 时网卡再写出算时间用的 GB/s
        （Gbps ÷ 8：1 字节 = 8 比特）。

        >>> TIERS[2].bandwidth(), TIERS[2].bandwidth(with_gb_per_s=True), TIERS[1].bandwidth()
        ('800 Gbps', '800 Gbps = 100 GB/s', '128 GB/s')
        """
        gb = f"{self.gb_per_s:,.10g} GB/s"
        if not self.nic:
            return gb
        gbit = f"{self.gb_per_s * 8:,.10g} Gbps"
        if with_gb_per_s:
            return f"{gbit} = {gb}"
        return gbit


B_NIC_GBPS = 800         # Mooncake FAST'25 表 1 的 B_nic（Gbps）：一台 8×A800 全部网卡的合计
TIERS = [
    Tier("HBM（显存）", 8 * 2039, "A800 80GB SXM 数据手册：每卡 2,039 GB/s × 8 卡"),
    Tier("本机 DRAM（PCIe）", 128, "Mooncake FAST'25 表 1：host-to-device 128 GB/s"),
    Tier("远端 DRAM（RDMA）", B_NIC_GBPS / 8, "Mooncake FAST'25 表 1：B_nic = 800 Gbps = 100 GB/s，是一台节点全部网卡的合计"
                                           "（§3.2.3：每张 A800 配一块 100/200 Gbps 的网卡）", nic=True),
    Tier("本机 SSD（NVMe）", 6.9, "本实验的假设：一块 PCIe 4.0 NVMe 顺序读约 6.9 GB/s（厂商规格量级）"),
]


def prefill_compute_time(model, n_input, n_cached, node=A800_X8):
    """前 n_cached 个 token 的 KV 已经有了，只算剩下的：FLOPs(n_input) − FLOPs(n_cached)。

    （新 token 的注意力要看全部 n_input 个位置，式 (1) 的差正好是这部分。）
    """
    return (model.prefill_flops(n_input) - model.prefill_flops(n_cached)) / node.flops


def prefill_time(model, n_input, n_hit, tier, node=A800_X8):
    """命中的 n_hit 个 token 的 KV 从 tier 读进来，和其余 token 的计算按层流水重叠。

    l 层流水线、两种资源（读 KV、算）：总时间 ≈ max(读, 算) + min(读, 算) / l
    （第一层的读没有计算可以盖住，最后一层的算没有读可以盖住，各露出 1/l）。
    """
    compute = prefill_compute_time(model, n_input, n_hit, node)
    load = load_time(model, n_hit, tier)
    return layer_overlap(compute, load, model.n_layers)


def layer_overlap(a, b, n_layers):
    """两件事按层流水（读 KV 和算、或者算和发 KV）：总时间 = max(a, b) + min(a, b) / n_layers。

    慢的那件决定总时间；快的那件只露出一层的份（流水线的头或尾）。a、b 也可以是两列 numpy 数组（一整个 trace
    的请求一起算，见 trace_prefill_time）：逐元素的 np.maximum / np.minimum 和 max / min 取的是同一个数，结果逐位相同。
    >>> layer_overlap(1.0, 0.5, 2)        # 快的 0.5 秒只露出一层 = 0.25 秒
    1.25
    """
    if isinstance(a, np.ndarray):
        slow, fast = np.maximum(a, b), np.minimum(a, b)
    else:                                 # 两个数：Python 的 max / min 比 numpy 快几倍（05 的集群模拟逐个请求调用）
        slow, fast = max(a, b), min(a, b)
    return slow + fast / n_layers


def load_time(model, n_tokens, tier):
    """n_tokens 个 token 的 KV 从 tier 读进 HBM 的秒数：字节数 / 带宽（GB/s，1 GB = 1e9 字节）。

    >>> round(load_time(LLAMA2_70B, 8192, TIERS[1]) * 1e3, 1)     # 8,192 × 320 KiB / 128 GB/s
    21.0
    """
    return n_tokens * model.kv_bytes_per_token() / (tier.gb_per_s * 1e9)


def trace_prefill_time(model, n_input, n_hit, tier, node=A800_X8):
    """一整个 trace 的 prefill 时间（秒）：每个请求 prefill_time(model, n_input[i], n_hit[i], tier)，从前往后
    一个一个加起来（和 `total += x` 的循环逐位相同；不用 numpy 的两两求和）。n_hit 全是 0 = 不缓存。

    n_input、n_hit 是 numpy 整数列。最长的输入的 FLOPs 放得进 int64 时整列算：prefill_time 的 +、−、×、÷ 和
    max、min 逐元素做，每个数都和逐个请求算的一模一样；np.cumsum 从前往后累加（不是 np.sum 的两两求和），
    最后一项就是循环加出来的总和。否则（几百万 token 的输入）逐个请求用 Python 整数算，不会溢出。
    >>> one = [prefill_time(LLAMA3_70B, n, h, TIERS[1]) for n, h in [(1000, 0), (2000, 512)]]
    >>> trace_prefill_time(LLAMA3_70B, np.array([1000, 2000]), np.array([0, 512]), TIERS[1]) == one[0] + one[1]
    True
    """
    if len(n_input) == 0:
        return 0.0
    if model.prefill_flops(int(n_input.max())) < 2 ** 63:
        return float(np.cumsum(prefill_time(model, n_input, n_hit, tier, node))[-1])
    times = map(prefill_time, itertools.repeat(model), n_input.tolist(), n_hit.tolist(), itertools.repeat(tier),
                itertools.repeat(node))
    return functools.reduce(operator.add, times, 0.0)


def hit_tier(cache_bytes, local, remote, local_bytes):
    """缓存放得进本机（local_bytes）就全从 local 读；放不下时超出的那一份在别的机器上，按比例从 remote 读
    （假设命中均匀落在缓存各处）：等效带宽是两者按字节数的调和平均。

    >>> round(hit_tier(4e12, TIERS[1], TIERS[2], 1e12).gb_per_s, 1)      # 1/4 从 128 GB/s、3/4 从 800 Gbps = 100 GB/s
    105.8
    """
    if cache_bytes <= local_bytes:
        return local
    f = local_bytes / cache_bytes
    return Tier(f"{local.name} + {remote.name}", 1 / (f / local.gb_per_s + (1 - f) / remote.gb_per_s),
                f"{local.source}；{remote.source}")
