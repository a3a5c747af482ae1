"""KV 的物理量：模型每 token 的 KV 有多大、各存储层级的带宽、prefill 要算多久（FAST'25 式 1）、读 KV 要多久，
以及认前缀用的链式块哈希。这里只有这些；trace、缓存策略和模拟器各在自己的模块里。

数字的来源（都在变量旁边注明）：
- Mooncake arXiv 2407.00079v3（§4、表 1）和 FAST'25 论文（式 1、表 1、表 2）；
- vLLM 论文（SOSP'23）。

单位：KV 的字节数用二进制单位（1 KiB = 1024 B：每 token 320 KiB，每块 512 token = 160 MiB）；
带宽用十进制（1 GB/s = 10⁹ B/s，和论文、数据手册一样）。

    >>> LLAMA2_70B.kv_bytes_per_token()          # 80 层 × 8 个 KV 头 × 128 × 2（K、V）× 2 字节 = 320 KiB
    327680
    >>> LLAMA3_70B.kv_bytes_per_token() == LLAMA2_70B.kv_bytes_per_token()   # 同形状
    True
    >>> block_hashes([1, 2, 3, 4, 5, 6], block=4)   # 只有一个完整块；结尾 2 个 token 不算哈希
    ['73e200e2b048']
"""
import hashlib
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
    mfu: float = 0.6         # 实际能达到的峰值比例（04_prefix_caching 演示 4 的假设）

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
    gb_per_s: float          # 整台 8 卡机器能拿到的读带宽（GB/s，1 GB = 1e9 字节）
    source: str


TIERS = [
    Tier("HBM（显存）", 8 * 2039, "A800 80GB SXM 数据手册：每卡 2,039 GB/s × 8 卡"),
    Tier("本机 DRAM（PCIe）", 128, "Mooncake FAST'25 表 1：host-to-device 128 GB/s"),
    Tier("远端 DRAM（RDMA）", 100, "Mooncake FAST'25 表 1：B_nic = 800 Gbps = 100 GB/s，是一台节点全部网卡的合计"
                                 "（§3.2.3：每张 A800 配一块 100/200 Gbps 的网卡）"),
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

    慢的那件决定总时间；快的那件只露出一层的份（流水线的头或尾）。
    >>> layer_overlap(1.0, 0.5, 2)        # 快的 0.5 秒只露出一层 = 0.25 秒
    1.25
    """
    return max(a, b) + min(a, b) / n_layers


def load_time(model, n_tokens, tier):
    """n_tokens 个 token 的 KV 从 tier 读进 HBM 的秒数：字节数 / 带宽（GB/s，1 GB = 1e9 字节）。

    >>> round(load_time(LLAMA2_70B, 8192, TIERS[1]) * 1e3, 1)     # 8,192 × 320 KiB / 128 GB/s
    21.0
    """
    return n_tokens * model.kv_bytes_per_token() / (tier.gb_per_s * 1e9)


# ---------------------------------------------------------------- 链式块哈希
def block_hashes(tokens, block):
    """每个完整块的哈希 = SHA-256(前一块的哈希 ‖ 这一块的 token)，返回前 12 位十六进制。

    链式：第 i 块的哈希包含了第 0..i 块的全部内容，所以"哈希相同"就等于"从开头到这里都相同"。
    结尾不满一块的 token 不算哈希（vLLM、Mooncake 都只缓存完整的块）。

    >>> a = block_hashes([1, 2, 3, 4, 5, 6, 7, 8], block=4)
    >>> b = block_hashes([1, 2, 3, 4, 9, 9, 9, 9], block=4)
    >>> a[0] == b[0], a[1] == b[1]
    (True, False)
    """
    out, prev = [], b""
    for i in range(len(tokens) // block):
        chunk = np.asarray(tokens[i * block:(i + 1) * block], dtype=np.int64).tobytes()
        prev = hashlib.sha256(prev + chunk).digest()
        out.append(prev.hex()[:12])
    return out
