"""KV 的物理量：每 token 的 KV 有多大，各存储层级读 KV 的带宽，prefill 要算多久，读 KV 要多久。
prefill 的计算量用 Mooncake FAST'25 式 (1)：FLOPs(n) = l·(a·n²·d + b·n·d²)，a = 4、b = 22 取自它的表 1
（论文用于 LLaMA3-70B；这里也用于讲义里别的模型）。算力按峰值的 60% 算：这是本实验的假设（Node.mfu）。
单位：KV 的字节数用二进制（每 token 320 KiB，一块 512 token = 160 MiB）；带宽用十进制（1 GB/s = 10⁹ B/s，
和论文、数据手册一样）。

    >>> LLAMA2_70B.kv_bytes_per_token()          # 80 层 × 8 个 KV 头 × 128 × 2（K、V）× 2 字节 = 320 KiB
    327680
"""
from dataclasses import dataclass

EQ1_A, EQ1_B = 4, 22     # FAST'25 表 1：式 (1) 的常数 a（注意力，∝ n²）、b（投影与 MLP，∝ n）


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
        """FAST'25 式 (1)：n 个 token 的 prefill 要多少 FLOPs。n 是 Python 整数时结果是精确的整数。"""
        return self.n_layers * (EQ1_A * n * n * self.d_model + EQ1_B * n * self.d_model ** 2)


LLAMA2_70B = ModelSpec("LLaMA2-70B", n_layers=80, d_model=8192, n_heads=64, n_kv_heads=8, n_params=70e9)
# FAST'25 的模型是 LLaMA3-70B（表 1、§5.3.1）；arXiv v3 用同形状的 dummy LLaMA2-70B：每 token 的 KV 和 FLOPs 都一样
LLAMA3_70B = ModelSpec("LLaMA3-70B", n_layers=80, d_model=8192, n_heads=64, n_kv_heads=8, n_params=70.6e9)


@dataclass(frozen=True)
class Node:
    """一台推理机器：n_gpus 张卡张量并行（FAST'25 表 1：8 × A800）。"""
    name: str
    n_gpus: int
    tflops_per_gpu: float    # bf16 稠密峰值
    hbm_gb_per_gpu: float    # 标称的 "80GB" 实际是 80 GiB（nvidia-smi 显示 81,920 MiB）
    mfu: float = 0.6         # 实际达到峰值的比例：本实验的假设

    @property
    def flops(self):
        """整台机器每秒实际做的 FLOPs = 卡数 × 峰值 × mfu。"""
        return self.n_gpus * self.tflops_per_gpu * 1e12 * self.mfu

    @property
    def hbm_bytes(self):
        return self.n_gpus * self.hbm_gb_per_gpu * 2**30     # 8 × 80 GiB = 640 GiB


A800_X8 = Node("8×A800", n_gpus=8, tflops_per_gpu=312, hbm_gb_per_gpu=80)   # 312 TFLOPS：FAST'25 表 1 的 G


@dataclass(frozen=True)
class Tier:
    name: str
    gb_per_s: float          # 整台 8 卡机器读 KV 的合计带宽（GB/s）：读的时间都用它算
    source: str
    nic: bool = False        # 经网卡（RDMA）：按网卡的习惯说 Gbps（1 字节 = 8 比特）

    def bandwidth(self, with_gb_per_s=False):
        """印出来的带宽：网卡用 Gbps，其余用 GB/s。

        >>> TIERS[2].bandwidth(), TIERS[2].bandwidth(with_gb_per_s=True), TIERS[1].bandwidth()
        ('800 Gbps', '800 Gbps = 100 GB/s', '128 GB/s')
        """
        gb = f"{self.gb_per_s:,.10g} GB/s"
        if not self.nic:
            return gb
        if with_gb_per_s:
            return f"{self.gb_per_s * 8:,.10g} Gbps = {gb}"
        return f"{self.gb_per_s * 8:,.10g} Gbps"


TIERS = [      # 带宽都是整台 8 卡机器的合计；source 是出处（05 的表里一列）
    Tier("HBM（显存）", 8 * 2039, "8 卡 × 2,039（A800 每卡）"),        # A800 80GB SXM 数据手册：每卡 2,039 GB/s
    Tier("本机 DRAM（PCIe）", 128, "FAST'25 表 1：CPU 到 GPU"),         # host-to-device：B_h2d
    Tier("远端 DRAM（RDMA）", 800 / 8, "FAST'25 表 1：800 Gbps", nic=True),   # B_nic：一台节点全部网卡的合计
    Tier("本机 SSD（NVMe）", 6.9, "本实验的假设（NVMe 顺序读）"),       # 一块 PCIe 4.0 NVMe 的顺序读
]


def prefill_compute_time(model, n_input, n_cached, node=A800_X8):
    """前 n_cached 个 token 的 KV 已经有了，只算其余的（秒）：(FLOPs(n_input) − FLOPs(n_cached)) / 算力。
    新 token 的注意力要看全部 n_input 个位置，式 (1) 的差正好含这部分。"""
    return (model.prefill_flops(n_input) - model.prefill_flops(n_cached)) / node.flops


def load_time(model, n_tokens, tier):
    """n_tokens 个 token 的 KV 从 tier 读进 HBM 的秒数：字节数 / 带宽。

    >>> round(load_time(LLAMA2_70B, 8192, TIERS[1]) * 1e3, 1)     # 8,192 × 320 KiB / 128 GB/s
    21.0
    """
    return n_tokens * model.kv_bytes_per_token() / (tier.gb_per_s * 1e9)


def layer_overlap(a, b, n_layers):
    """两件事按层流水（读 KV 和算，或算和发 KV）：总时间 = max(a, b) + min(a, b) / n_layers。
    慢的那件决定总时间；快的那件只露出一层（流水线的头或尾）。

    >>> layer_overlap(1.0, 0.5, 2)
    1.25
    """
    return max(a, b) + min(a, b) / n_layers


def prefill_time(model, n_input, n_hit, tier, node=A800_X8):
    """命中的 n_hit 个 token 的 KV 从 tier 读进来，和其余 token 的计算按层流水（arXiv v3 §5.2）。"""
    compute = prefill_compute_time(model, n_input, n_hit, node)
    return layer_overlap(compute, load_time(model, n_hit, tier), model.n_layers)


def trace_prefill_time(model, n_input, n_hit, tier, node=A800_X8):
    """一整个 trace 的 prefill 时间（秒）：逐个请求 prefill_time 加起来。n_input、n_hit：每个请求一个整数
    （列表或 numpy 数组）；n_hit 全是 0 = 不缓存。

    >>> one = [prefill_time(LLAMA3_70B, n, h, TIERS[1]) for n, h in [(1000, 0), (2000, 512)]]
    >>> trace_prefill_time(LLAMA3_70B, [1000, 2000], [0, 512], TIERS[1]) == one[0] + one[1]
    True
    """
    total = 0.0
    for n, h in zip(n_input, n_hit):
        total += prefill_time(model, int(n), int(h), tier, node)      # int：FLOPs 用 Python 整数，不会溢出
    return total


def hit_tier(cache_bytes, local, remote, local_bytes):
    """缓存放得进本机（local_bytes）就全从 local 读；放不下时超出的那一份在别的机器上，按比例从 remote 读
    （假设命中均匀落在缓存各处）：等效带宽是两者按字节数的调和平均。

    >>> round(hit_tier(4e12, TIERS[1], TIERS[2], 1e12).gb_per_s, 1)      # 1/4 从 128 GB/s、3/4 从 100 GB/s
    105.8
    """
    if cache_bytes <= local_bytes:
        return local
    f = local_bytes / cache_bytes
    return Tier(f"{local.name} + {remote.name}", 1 / (f / local.gb_per_s + (1 - f) / remote.gb_per_s),
                f"{local.source}；{remote.source}")
