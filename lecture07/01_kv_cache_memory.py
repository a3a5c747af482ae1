"""CS349E · 第 7 讲 · 01_kv_cache_memory.py —— 为什么 KV 缓存的显存是推理的瓶颈？

【问题】解码时每个 token 的 K/V 都要留在显存里，直到请求结束。那么：一个 token 的 KV 有多大？
一张卡放完权重以后还能放多少 token？如果像早期系统那样给每个请求按最大长度"预留"一段连续显存，
真正存着 token 的显存有多少？按需分配的小块（分页）又能到多少？显存不够要抢占时，重算和换出哪个快？

【运行】python lecture07/01_kv_cache_memory.py          （约 0.5 秒，2 核笔记本，不需要 GPU）
        python lecture07/01_kv_cache_memory.py --demo 2 （只跑演示 2；--more 印出全部观察，--list 列出演示）

  演示 1：真实模型每个 token 的 KV 字节数，以及一张 GPU（默认 A800 80GB、H200 141GB）放完 fp16 权重后
          能放多少 token。
  演示 2：连续预分配（Orca 的 Max / Pow2 / Oracle 三种预留）与按块（默认 16 个 token 一块）分页，
          在 ShareGPT 式的长度分布下模拟：显存里真正存着 token 状态的比例（对照 vLLM 论文图 2）。
  演示 3：让 KV 本身变小：同一个 13B 形状下 MHA、GQA、MQA、MLA（DeepSeek-V2）与 FP8 KV，每 token 多少字节、
          一张卡能放多少 token（对照 DeepSeek-V2 论文的 2.25 组、93.3%）。
  演示 4：显存不够时的抢占：演示 2 的负载下抢占了多少次；重算与换出到 CPU 内存各要多久，随块大小、
          PCIe 带宽怎样变（对照 vLLM 论文 §7.3、图 19）。

【依赖】numpy、rich；本目录的 kv_physics（ModelSpec、LLAMA2_70B、prefill_compute_time）、paged_kv（n_blocks）；
        lab_common 的 console、say、settings、script_tools。

【试一试】改下面"学生可以改的设置"里的一个值，再运行（不合理的值会被一行拒绝，并说明允许的范围）：
  1. 把 `GPU_MEM_UTIL` 改成 1.0：一张 H200 放得下 LLaMA2-70B 的 fp16 权重了吗？一张 A800 呢？
  2. 把 `BLOCK_SIZE` 改成 1 和 128（--demo 2）：分页时的内部碎片和平均并发怎样变？
  3. 把 `N_REQUESTS` 改成 20（--demo 2）：服务器还会满载吗？表里哪几行没有数，为什么？
  4. 把 `GPUS` 换成 `(("A100 40GB", 40_960 * MiB),)`：一张 A100 40GB 放得下几个 LLaMA2-13B 的 token？
  5. 把 `COPY_OVERHEAD_US` 改成 0（--demo 4）：每次拷贝没有固定开销时，小块还是重算更快吗？
"""
import heapq
import os
import sys
from collections import deque

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.realpath(__file__))))  # 仓库根目录：让 lab_common 包可以 import
from lab_common import console  # noqa: E402
from lab_common.console import print_header, print_observations, print_table, print_text, status  # noqa: E402
from lab_common.say import change, count, fixed, integer, listing, order, pct, pct1, rank, ratio, size, span, value, words  # noqa: E402
from lab_common.script_tools import run_lecture  # noqa: E402
from lab_common.settings import check_setting, is_int, is_number, is_sorted_ints  # noqa: E402
from kv_physics import EQ1_B, LLAMA2_70B, ModelSpec, Node, prefill_compute_time  # noqa: E402
from paged_kv import n_blocks  # noqa: E402

KiB, MiB, GiB = 1024, 1024 ** 2, 1024 ** 3   # 本脚本的字节数一律按 1024 进位、标成 KiB/MiB/GiB（vLLM 论文写的
#                                             "800 KB""12 GB" 也是按 1024 进位：演示 1 的 --more 核对了这一点）

# ---- 模型配置（公开的 config.json / 论文；参数个数用来算 fp16 权重）----
GPT2_SMALL = ModelSpec("GPT-2 small", n_layers=12, d_model=768, n_heads=12, n_kv_heads=12, n_params=124e6)
OPT_13B = ModelSpec("OPT-13B", n_layers=40, d_model=5120, n_heads=40, n_kv_heads=40, n_params=13e9)
LLAMA2_7B = ModelSpec("LLaMA2-7B", n_layers=32, d_model=4096, n_heads=32, n_kv_heads=32, n_params=6.74e9)
LLAMA2_13B = ModelSpec("LLaMA2-13B", n_layers=40, d_model=5120, n_heads=40, n_kv_heads=40, n_params=13.0e9)
LLAMA3_8B = ModelSpec("LLaMA3-8B", n_layers=32, d_model=4096, n_heads=32, n_kv_heads=8, n_params=8.03e9)
MODELS = (GPT2_SMALL, OPT_13B, LLAMA2_7B, LLAMA2_13B, LLAMA2_70B, LLAMA3_8B)

# ---- 学生可以改的设置（每个演示运行时才读）----
GPUS = (("A800 80GB", 81_920 * MiB),    # 标称 80 GB，按 80 GiB = 81,920 MiB 算
        ("H200 141GB", 143_771 * MiB))  # 在一张 H200 上用 nvidia-smi 查到的 memory.total
GPU_MEM_UTIL = 0.9       # 显存里给"权重 + KV"用的比例（vLLM 的默认 gpu_memory_utilization=0.9；激活没有另外扣）
SEQ_SEED = 0             # 演示 2 请求长度的随机种子
N_REQUESTS = 400         # 演示 2 排队的请求数（开始时全部到达，服务器一直满载）
MAX_SEQ = 2048           # OPT 的最大序列长度（Orca (Max) 按它预留）
BLOCK_SIZE = 16          # 分页的块大小（vLLM 默认 16）
KV_POOL_GIB = 12         # KV 池大小（GiB）：vLLM 论文表 1，OPT-13B 在 A100-40GB 上留给 KV 的 12 GB
TP_GPUS = 8              # 演示 1：LLaMA2-70B 用几张卡（GPUS 的第一种）张量并行
GQA_GROUPS = 8           # 演示 3：GQA 的 KV 组数（要整除 LLaMA2-13B 形状的 40 个查询头）
MLA_KV_LORA_RANK = 512   # 演示 3：MLA 每层存的压缩 KV 维度 d_c（DeepSeek-V2 config.json 的 kv_lora_rank）
MLA_ROPE_DIM = 64        # 演示 3：MLA 每层另存的带 RoPE 的 key 维度 d_h^R（DeepSeek-V2 的 qk_rope_head_dim）
PCIE_GBPS = 16.0         # 演示 4：每张卡 host↔device 的带宽（GB/s，1 GB = 10⁹ B）。本实验的假设：FAST'25 表 1
#                          整机 128 GB/s ÷ 8 卡；vLLM 的实验是一张 A100 独占 PCIe 4.0 ×16，约 25–32 GB/s
PCIE_GBPS_ALT = (25.0, 32.0)       # 演示 4：再按这几个带宽各算一列"重算 / 来回"（看结论对带宽有多敏感）
COPY_OVERHEAD_US = 10.0  # 演示 4：每次 cudaMemcpyAsync 的固定开销（µs）——本实验的假设，只取量级
COPY_OVERHEAD_ALT_US = (0.0, 20.0)  # 演示 4：固定开销换成这几个值再算一遍（--more 里的敏感性）
SWAP_LEN = 512           # 演示 4：比较块大小时，被抢占的序列已有几个 token
SWAP_BLOCK_SIZES = (1, 4, 16, 64, 256)   # 演示 4：比较的块大小
SWAP_LENS = (128, 512, 2048)             # 演示 4：按 BLOCK_SIZE 比较的序列长度（--more 的表）
LEN_SIGMA = 1.0          # 长度的对数正态分布的 σ（越大尾巴越长）

# ---- 论文的数字（只用来对照，标明出处）----
SHAREGPT_MEAN = (161.31, 337.99)    # vLLM 论文（SOSP'23）图 11(a)：ShareGPT 平均输入 / 输出长度
VLLM_FIG2 = {"Orca (Max)": 20.4, "Orca (Pow2)": 26.8, "Orca (Oracle)": 38.2, "vLLM": 96.3}   # 图 2：token 状态占比 %
VLLM_TABLE1_KV_GB = 12              # vLLM 论文表 1：OPT-13B 在 A100 40GB 上留给 KV 的 12 GB
VLLM_TABLE1_SLOTS = 15.7e3          # vLLM 论文表 1：OPT-13B、A100 40GB、KV 12 GB → 最多 15.7K 个 KV slot
VLLM_REQ_GB = 1.6                   # vLLM 论文 §3：OPT-13B 一个 2048 token 的请求的 KV 可达 1.6 GB
FAST25_GQA = 8                      # Mooncake FAST'25 表 1：gqa = 8（查询头数 ÷ KV 头数）
FAST25_KV_KB = 320                  # Mooncake FAST'25 §5.3.1：LLaMA3-70B 每个 token 的 KV 写作 "320 KB"
DSV2_LAYERS = 60                    # DeepSeek-V2 config.json：num_hidden_layers = 60（kv_lora_rank 512、qk_rope_head_dim 64）
DSV2_GQA_EQUIV = 2.25               # DeepSeek-V2 论文 §2.1.4 表 1：MLA 的 KV 缓存相当于只有 2.25 组的 GQA
DSV2_KV_REDUCTION = 93.3            # DeepSeek-V2 论文摘要：与 DeepSeek 67B 相比 KV 缓存减少 93.3%
DSV2_KV_BITS = 6                    # DeepSeek-V2 论文 §3.2.3：部署时把 KV 缓存量化到平均每个数 6 bit
DEEPSEEK_67B = ModelSpec("DeepSeek 67B", n_layers=95, d_model=8192, n_heads=64, n_kv_heads=8,
                         n_params=67e9)   # deepseek-llm-67b 的 config.json：95 层、64 个查询头、8 个 KV 头（GQA）
VLLM_73_MEDIUM = (16, 64)           # vLLM 论文 §7.3、图 19：块 16–64 时重算与换出的端到端性能相当
VLLM_73_RECOMPUTE_MAX = 20          # vLLM 论文 §7.3：重算的开销"从不超过换出延迟的 20%"，即重算最多比换出慢 20%
SWAP_GPU = Node("A100", n_gpus=1, tflops_per_gpu=312, hbm_gb_per_gpu=40)   # 演示 4 重算用的卡：bf16 峰值 312 TFLOPS、MFU 0.6
PAPER = dict(fig2=VLLM_FIG2, sharegpt=SHAREGPT_MEAN, gqa_equiv=DSV2_GQA_EQUIV, dsv2_reduction=DSV2_KV_REDUCTION,
             dsv2_bits=DSV2_KV_BITS, medium=VLLM_73_MEDIUM, recompute_max=VLLM_73_RECOMPUTE_MAX)


# =============================================================================
def tokens_that_fit(model, hbm_bytes, util, n_gpus=1, kv_bytes=None):
    """n_gpus 张卡（张量并行，权重和 KV 平均切开）放完 fp16 权重后还能放几个 token 的 KV；放不下权重返回 None。

    kv_bytes：每个 token 的 KV 字节数（默认按 model 的 MHA/GQA 形状算；演示 3 换成 MQA、MLA、FP8 的值）。
    """
    if kv_bytes is None:
        kv_bytes = model.kv_bytes_per_token()
    free = n_gpus * hbm_bytes * util - model.n_params * 2      # fp16 权重：每个参数 2 字节
    if free <= 0:
        return None
    return int(free // kv_bytes)


def fit_cell(n):
    """表格里的一格：放不下权重（None）打印 "-"。"""
    if n is None:
        return "-"
    return integer(n)


def kv_pool_tokens(pool_gib):
    """pool_gib GiB 的 KV 池能放几个 OPT-13B 的 token：kv_pool_tokens(12) == 15728（12 GiB // 800 KiB）。"""
    return int(pool_gib * GiB) // OPT_13B.kv_bytes_per_token()


def demo1_bytes_per_token():
    """一个 token 的 KV 有多大？一张卡放完权重后还能放多少 token？"""
    gpus, util, max_seq, pool_gib, tp = GPUS, GPU_MEM_UTIL, MAX_SEQ, KV_POOL_GIB, TP_GPUS
    print_header("演示 1：每个 token 的 KV = 2（K、V）× 层数 × KV 头数 × 头维度 × 2 字节")
    fit = {m.name: {g: tokens_that_fit(m, cap, util) for g, cap in gpus} for m in MODELS}
    print_table(["模型", "形状", "KV KiB", "权重 GiB"] + [g for g, _ in gpus],
                [[m.name, f"{m.n_layers}×{m.n_kv_heads}×{m.head_dim}", f"{m.kv_bytes_per_token() / KiB:g}",
                  f"{m.n_params * 2 / GiB:.1f}"] + [fit_cell(fit[m.name][g]) for g, _ in gpus] for m in MODELS],
                caption=f"GPU 列：一张卡 {pct(util)} 显存减去 fp16 权重后能放几个 token（上限）；- = 放不下权重")
    opt_b = OPT_13B.kv_bytes_per_token()
    d = dict(kv_bytes={m.name: m.kv_bytes_per_token() for m in MODELS}, fit=fit, util=util, gpus=list(gpus),
             usable={g: util * cap for g, cap in gpus}, max_seq=max_seq, pool_gib=pool_gib, tp=tp,
             opt_req=max_seq * opt_b, opt_slots=kv_pool_tokens(pool_gib),
             opt_slots_decimal=int(pool_gib * 1e9 // opt_b),
             mha_70=ModelSpec("LLaMA2-70B（假如没有 GQA）", 80, 8192, 64, 64, 70e9).kv_bytes_per_token(),
             l70_tp=tokens_that_fit(LLAMA2_70B, gpus[0][1], util, n_gpus=tp), l70_weights=LLAMA2_70B.n_params * 2)
    print_observations(*observations_1(d))
    return d


def observations_1(d):
    """演示 1 的观察 → (默认印的, --more 才印的)。每个数都取自 d（和上表同一份数据）。"""
    kv, fit, gpu0, max_seq = d["kv_bytes"], d["fit"], d["gpus"][0][0], d["max_seq"]
    opt_b, l70_b = kv[OPT_13B.name], kv[LLAMA2_70B.name]
    text = f"OPT-13B 每个 token 的 KV 是 {size(opt_b)}，{integer(max_seq)} token 的请求 {size(d['opt_req'])}；"
    l13 = fit[LLAMA2_13B.name][gpu0]
    if l13 is None:
        text += f"一张 {gpu0} 用 {pct(d['util'])} 的显存连 LLaMA2-13B 的权重都放不下。"
    elif l13 < max_seq:
        text += f"一张 {gpu0} 放完 LLaMA2-13B 的权重只剩 {integer(l13)} 个 token，一个这样的请求都放不下。"
    else:
        text += f"一张 {gpu0} 放完 LLaMA2-13B 的权重只剩 {integer(l13)} 个 token（{integer(l13 // max_seq)} 个这样的请求）。"
    lines = [text,
             f"GQA：LLaMA2-70B {LLAMA2_70B.n_heads} 个查询头共用 {LLAMA2_70B.n_kv_heads} 组 K/V，{size(l70_b)}/token，"
             f"每头一组{ratio(d['mha_70'], l70_b, 0)}。",
             one_gpu_sentence(d) + tp_sentence(d)]
    more = [pool_sentence(d),
            f"vLLM 论文 §3 把 OPT-13B 的 {size(opt_b)} 写作 800 KB，2048 token 的请求写作"
            f"\"可达 {VLLM_REQ_GB} GB\"（我们算 {size(2048 * opt_b)}）。",
            f"Mooncake FAST'25 表 1 的 gqa = {FAST25_GQA} 是查询头数与 KV 头数之比（LLaMA3-70B：64 ÷ 8）；§5.3.1 写每个 "
            f"token 的 KV 是 \"{FAST25_KV_KB} KB\"，我们换算为 80 层 × 8 头 × 128 × 2 × 2 B = {integer(l70_b)} B = "
            f"{size(l70_b)}。",
            f"每头一组时 LLaMA2-70B 要 {size(d['mha_70'])}/token。同样，LLaMA3-8B（{LLAMA3_8B.n_kv_heads} 组 K/V）{size(kv[LLAMA3_8B.name])}/token，"
            f"LLaMA2-7B（每头一组）{size(kv[LLAMA2_7B.name])}，{ratio(kv[LLAMA2_7B.name], kv[LLAMA3_8B.name], 0)}。"
            "批能开多大、吞吐有多高，取决于 KV 用得多省：这就是后面分页、共享、前缀缓存要解决的事。",
            "容量：" + "，".join(f"{g} 按 {integer(cap / MiB)} MiB" for g, cap in d["gpus"])
            + f"；GPU_MEM_UTIL = {d['util']:g}：能用 " + "、".join(gib(d["usable"][g]) for g, _ in d["gpus"]) + "。"]
    if long_requests(d):
        more.append(long_requests(d))
    return lines, more


def pool_sentence(d):
    """KV 池 = 多少个 token；只有取论文的 12 GB 时才说与论文表 1 一致。"""
    text = f"{d['pool_gib']:g} GiB 的 KV 空间 = {integer(d['opt_slots'])} 个 OPT-13B 的 token"
    if d["pool_gib"] != VLLM_TABLE1_KV_GB:
        return text + f"（vLLM 论文表 1 用的是 {VLLM_TABLE1_KV_GB} GB → {VLLM_TABLE1_SLOTS / 1e3:g}K；这里改成了 {d['pool_gib']:g} GiB）。"
    return (text + f"，与 vLLM 论文表 1 的 {VLLM_TABLE1_KV_GB} GB → {VLLM_TABLE1_SLOTS / 1e3:g}K 一致；若按 10⁹ 字节算"
            f"只有 {integer(d['opt_slots_decimal'])} 个：论文的 KB、GB 也是按 1024 进位。")


def gib(nbytes):
    """和演示 1 的表同样的格式：一位小数的 GiB（gib(130.4 * GiB) == '130.4 GiB'）。"""
    return fixed(1, "GiB")(nbytes / GiB)


def one_gpu_sentence(d):
    """LLaMA2-70B 的权重放不放得进一张卡：按当前的 GPU_MEM_UTIL 逐张判断。"""
    fits = [g for g, _ in d["gpus"] if d["fit"][LLAMA2_70B.name][g] is not None]
    too_small = [g for g, _ in d["gpus"] if g not in fits]
    head = f"LLaMA2-70B 的 fp16 权重 {gib(d['l70_weights'])}，"
    if not fits:
        return head + "一张卡都放不下；"
    if not too_small:
        return head + "一张卡就放得下；"
    return head + f"一张 {listing(fits)} 放得下，一张 {listing(too_small)} 放不下；"


def tp_sentence(d):
    """几张卡张量并行以后还能放多少 token（8,192 token 的长请求几个）。"""
    n, gpu0 = d["l70_tp"], d["gpus"][0][0]
    if n is None:
        return f"{d['tp']} 张 {gpu0} 张量并行也放不下。"
    return f"{d['tp']} 张 {gpu0} 张量并行后还能放 {integer(n)} 个 token。"


def long_requests(d):
    """张量并行后能放几个 8,192 token 的长请求（--more）。"""
    n = d["l70_tp"]
    if n is None or n < 8192:
        return ""
    return f"张量并行后的 {integer(n)} 个 token 够 {integer(n // 8192)} 个 8,192 token 的长请求。"


# =============================================================================
def make_lengths(n, seed, means, sigma, max_seq):
    """ShareGPT 式的长度：输入、输出各自服从对数正态分布（均值取论文图 11 的值），总长截到 max_seq。"""
    rng = np.random.default_rng(seed)
    mu = [np.log(m) - sigma ** 2 / 2 for m in means]          # 对数正态的均值 = exp(μ + σ²/2)
    p = np.clip(np.round(rng.lognormal(mu[0], sigma, n)), 1, max_seq - 1).astype(int)
    o = np.clip(np.round(rng.lognormal(mu[1], sigma, n)), 1, None).astype(int)
    return p, np.minimum(o, max_seq - p)


def next_pow2(x):
    return 1 << (int(x) - 1).bit_length()


def reservation(kind, p, o, max_seq):
    """Orca 的三种预留（vLLM 论文 §6.1）：Max 按最大长度；Pow2 把输出长度向上取到 2 的幂（最多多留 1 倍）；
    Oracle 事先知道真实的输出长度，正好预留 p + o。"""
    if kind == "Max":
        return max_seq
    if kind == "Pow2":
        return min(max_seq, p + next_pow2(o))
    return p + o


def simulate_contiguous(kind, prompts, outputs, pool, max_seq):
    """连续预分配：每个请求到来时在池里找一段连续的空间（first-fit）放下整段预留，严格先来先服务。

    每一步所有在跑的请求各生成一个 token。只在队列非空（服务器满载）时统计，
    返回 (各类显存的时间平均占比, 平均同时在跑的请求数)。
    """
    queue = deque(range(len(prompts)))
    segs = []                     # 已分配的连续段 (起点, 大小)，按起点排序
    finish = []                   # (结束的步, 段的起点, 预留, 请求号)
    t, tok, fut, inner, reserved = 0, 0, 0, 0, 0
    n_run, running = 0, 0
    acc = np.zeros(4)             # token 状态、预留（将来的 token）、内部碎片、外部碎片 / 空闲
    steps = 0
    while queue or finish:
        while queue:              # 先来先服务：排在最前面的放不下，后面的也不放
            r = queue[0]
            p, o = int(prompts[r]), int(outputs[r])
            need = reservation(kind, p, o, max_seq)
            start, prev_end, at = None, 0, 0
            for i, (s, size) in enumerate(segs + [(pool, 0)]):
                if s - prev_end >= need:
                    start, at = prev_end, i
                    break
                prev_end = s + size
            if start is None:
                break
            queue.popleft()
            segs.insert(at, (start, need))
            heapq.heappush(finish, (t + o, start, need, r))
            tok += p
            fut += o
            inner += need - p - o
            reserved += need
            n_run += 1
        if queue:                 # 满载时统计这一步的显存构成
            acc += (tok, fut, inner, pool - reserved)
            running += n_run
            steps += 1
        t += 1                    # 解码一步：每个请求写一个 token
        tok += n_run
        fut -= n_run
        while finish and finish[0][0] == t:
            _, start, need, r = heapq.heappop(finish)
            segs.remove((start, need))
            p, o = int(prompts[r]), int(outputs[r])
            tok -= p + o
            inner -= need - p - o
            reserved -= need
            n_run -= 1
    if steps == 0:                # 从来没有人排队：没有满载的步可统计
        return None, None
    return acc / (steps * pool), running / steps


def simulate_paged(prompts, outputs, pool, block_size):
    """分页：KV 池切成 block_size 个 token 一块，写到新块时才分配。块不够时抢占最后进来的请求（vLLM 的重算策略：
    释放它的块、放回队首，再进来时已生成的 token 当作输入重算）。

    返回 (占比, 平均并发, 抢占记录)：前两项与 simulate_contiguous 相同；抢占记录是 [(请求号, 被抢占时的长度)]。
    """
    total = pool // block_size    # 池里一共几个块
    free = total
    queue = deque((r, int(p), int(o)) for r, (p, o) in enumerate(zip(prompts, outputs)))
    run = []                      # [请求号, 当前长度, 剩余要生成的 token 数]，按进入的先后
    preempted = []
    acc = np.zeros(4)
    steps, running = 0, 0
    while queue or run:
        while queue:              # 放得下输入（再加下一个 token 的一块）就进来
            r, p, o = queue[0]
            need = n_blocks(p + 1, block_size)
            if need > free:
                break
            queue.popleft()
            free -= n_blocks(p, block_size)
            run.append([r, p, o])
        if queue:
            tok = sum(L for _, L, _ in run)
            held = total - free
            acc += (tok, 0, held * block_size - tok, free * block_size)
            running += len(run)
            steps += 1
        i = 0                     # 解码一步
        while i < len(run):
            r, L, left = run[i]
            if L % block_size == 0:    # 写满了：要一个新块
                while free == 0:  # 没有空闲块：抢占最后进来的那个
                    r2, L2, left2 = run.pop()
                    preempted.append((r2, L2))
                    free += n_blocks(L2, block_size)
                    queue.appendleft((r2, L2, left2))
                if i >= len(run):
                    break
                free -= 1
            run[i][1] += 1
            run[i][2] -= 1
            if run[i][2] == 0:
                free += n_blocks(run[i][1], block_size)
                run.pop(i)
                continue
            i += 1
    if steps == 0:
        return None, None, preempted
    return acc / (steps * pool), running / steps, preempted


def simulate_load():
    """演示 2 和演示 4 共用的一次模拟（设置在这里读一次）：同一批请求、同一个 KV 池，三种连续预留 + 分页。"""
    s = dict(n_requests=N_REQUESTS, seed=SEQ_SEED, sigma=LEN_SIGMA, max_seq=MAX_SEQ, pool_gib=KV_POOL_GIB,
             block_size=BLOCK_SIZE)
    with status(f"正在模拟 {integer(s['n_requests'])} 个请求…"):
        prompts, outputs = make_lengths(s["n_requests"], s["seed"], SHAREGPT_MEAN, s["sigma"], s["max_seq"])
        pool = kv_pool_tokens(s["pool_gib"])
        res = {f"Orca ({k})": simulate_contiguous(k, prompts, outputs, pool, s["max_seq"])
               for k in ("Max", "Pow2", "Oracle")}
        share, conc, preempted = simulate_paged(prompts, outputs, pool, s["block_size"])
    res["vLLM"] = (share, conc)
    return dict(prompts=prompts, outputs=outputs, pool=pool, res=res, preempted=preempted, settings=s)


def demo2_fragmentation(sim=None):
    """按最大长度预留连续显存，真正存着 token 的显存占多少？分页能到多少？（sim：simulate_load() 的结果）"""
    if sim is None:
        sim = simulate_load()
    s, prompts, outputs, pool, res = sim["settings"], sim["prompts"], sim["outputs"], sim["pool"], sim["res"]
    print_header(f"演示 2：连续预留与分页（块 {s['block_size']}）——KV 池里多少真正存着 token")
    source = "（vLLM 表 1）"
    if s["pool_gib"] != VLLM_TABLE1_KV_GB:
        source = f"（论文表 1 是 {VLLM_TABLE1_KV_GB} GB，这里改成了 {s['pool_gib']:g} GiB）"
    print_text(f"OPT-13B，KV 池 {s['pool_gib']:g} GiB = {integer(pool)} 个 token{source}；"
               f"{count(s['n_requests'], '个请求')}一开始全部排队。")
    rows = []
    for name, (share, conc) in res.items():
        cells = ["-"] * 5
        if share is not None:
            cells = [pct1(x) for x in share] + [fixed(1)(conc)]
        rows.append([name, cells[0], f"{VLLM_FIG2[name]:.1f}%", *cells[1:]])
    print_table(["系统", "token 状态", "论文", "预留", "内部碎片", "外部/空闲", "并发"], rows,
                caption="满载时占 KV 池的时间平均比例；并发：平均在跑的请求数；论文：vLLM 图 2（§6.2）")
    d = dict(shares={k: v[0] for k, v in res.items()}, concurrency={k: v[1] for k, v in res.items()}, pool=pool,
             idle=[k for k, v in res.items() if v[0] is None], mean_prompt=float(prompts.mean()),
             mean_output=float(outputs.mean()), mean_total=float((prompts + outputs).mean()), model=OPT_13B.name,
             pool_gib=s["pool_gib"], n_requests=s["n_requests"], seed=s["seed"], max_seq=s["max_seq"],
             block_size=s["block_size"], sigma=s["sigma"], paper=dict(VLLM_FIG2), sharegpt=SHAREGPT_MEAN)
    print_observations(*observations_2(d))
    return d


def observations_2(d):
    """演示 2 的观察 → (默认印的, --more 才印的)。没满载过的系统（d["idle"]）不参与比较。"""
    s, conc, idle, paper = d["shares"], d["concurrency"], d["idle"], d["paper"]
    obs, more = [], []
    if idle:
        who = f"{integer(d['n_requests'])} 个请求一开始就全部放得下"
        if d["n_requests"] == 1:
            who = "唯一的一个请求一开始就放得下"
        obs.append(f"{listing(idle)}：{who}，从来没有人排队，没有满载的时刻可统计（表里打 -）；"
                   "把 N_REQUESTS 调大、或把 KV_POOL_GIB 调小，才能看到满载时显存是怎么分的。")
    mx, pg = s["Orca (Max)"], s["vLLM"]
    if pg is not None:
        text = (f"分页（块 {d['block_size']}）时 {pct1(pg[0])} 的 KV 池存着 token，零头 {pct1(pg[2])} 和空闲 "
                f"{pct1(pg[3])}")
        if mx is not None:
            text += (f"；Orca (Max) {words_vs(mx[0], pg[0])} {pct1(mx[0])}，并发 {fixed(1)(conc['vLLM'])} 对 "
                     f"{fixed(1)(conc['Orca (Max)'])}（{ratio(conc['vLLM'], conc['Orca (Max)'])}）")
        obs.append(text + "。")
        if conc["Orca (Oracle)"] is not None:
            more.append(f"分页的平均并发 {fixed(1)(conc['vLLM'])}，对 Orca (Oracle) 的 {fixed(1)(conc['Orca (Oracle)'])}"
                        f"（{ratio(conc['vLLM'], conc['Orca (Oracle)'])}）。")
    text = ""
    if mx is not None:
        text = f"Orca (Max) 的 {pct1(mx[2])} 是内部碎片。"
        more.append(f"Orca (Max) 按 {integer(d['max_seq'])} 预留，平均请求却只有 {integer(d['mean_total'])} 个 token。")
    orc = s["Orca (Oracle)"]
    if orc is not None:
        text += (f"事先知道输出长度的 Orca (Oracle) 也只有 {pct1(orc[0])}：预留占 {pct1(orc[1])}，"
                 f"放不下队首请求的空隙占 {pct1(orc[3])}。")
    if text:
        obs.append(text)
    measured = [k for k in s if s[k] is not None]
    if len(measured) >= 2:
        ours = rank([(k, s[k][0]) for k in measured], pct1)
        theirs = rank([(k, paper[k]) for k in measured], fixed(1))
        if ours == theirs:
            obs.append(f"{count(len(measured), '个系统')}从高到低的顺序与论文图 2 相同（论文的 Orca 是作者自己的重新实现）。")
        else:
            obs.append(f"从高到低：这里 {ours}，论文图 2 是 {theirs}。论文的 Orca 是作者自己的重新实现，"
                       "这里是离散模拟，只比量级和顺序。")
        more.append(f"从高到低：{ours}。这里是离散模拟（没有模型计算），只比量级和顺序。")
    if {"Orca (Max)", "Orca (Pow2)", "Orca (Oracle)"} <= set(measured):
        lo, hi = sorted([s["Orca (Max)"][0], s["Orca (Oracle)"][0]])
        where = "不在"
        if order(lo, s["Orca (Pow2)"][0], pct1) < 0 < order(hi, s["Orca (Pow2)"][0], pct1):
            where = "介于"
        more.append(f"Orca (Pow2)（{pct1(s['Orca (Pow2)'][0])}）{where} Max 和 Oracle 之间。")
    more.append("列的含义：token 状态 = 已经写进去的 token；预留 = 留给以后要生成的 token；内部碎片 = 预留了但到结束"
                "也用不到的位置（分页时是最后一块没写满的部分）；外部/空闲 = 没分出去的空间（连续分配时是放不下队首"
                "请求那一整段预留的零碎空隙）；- = 从来没有满载。模拟：全部请求一开始就排队、first-fit 连续分配、"
                "严格先来先服务，每步每个请求生成一个 token，没有模型计算。")
    more.append(f"长度：输入、输出各自对数正态（种子 {d['seed']}，σ = {d['sigma']:g}），平均 {integer(d['mean_prompt'])} / "
                f"{integer(d['mean_output'])}（vLLM 论文图 11 的 ShareGPT：{integer(d['sharegpt'][0])} / "
                f"{integer(d['sharegpt'][1])}），总长不超过 {integer(d['max_seq'])}。")
    return obs[:3], obs[3:] + more


def words_vs(a, b):
    """Orca (Max) 的占比 a 和分页的 b 比（按印出来的值）：'只有' / '也是' / '反而有'。"""
    o = order(a, b, pct1)
    if o < 0:
        return "只有"
    if o == 0:
        return "也是"
    return "反而有"


# =============================================================================
def kv_variants(base, groups, kv_lora_rank, rope_dim):
    """同一个形状（层数、查询头数、头维度）下几种存 KV 的方式：[(名字, 每层每 token 存几个数)]（bf16 / fp16）。

    >>> kv_variants(LLAMA2_13B, 8, 512, 64)      # LLaMA2-13B 形状：40 个头 × 128 维
    [('MHA', 10240), ('GQA-8', 2048), ('MQA', 256), ('MLA', 576)]
    """
    h, d = base.n_heads, base.head_dim
    return [("MHA", 2 * h * d),                  # 每个查询头一组 K、V
            (f"GQA-{groups}", 2 * groups * d),   # 几个查询头共用一组 K、V（groups 组）
            ("MQA", 2 * d),                      # 所有查询头共用一组 K、V
            ("MLA", kv_lora_rank + rope_dim)]    # 只存压缩向量 c_KV 和 RoPE key（DeepSeek-V2）


def demo3_smaller_kv():
    """同样大小的模型，换一种注意力或把 KV 存成 FP8，每个 token 的 KV 能小多少？一张卡能多放多少 token？"""
    gpus, util, groups, rank_c, rope = GPUS, GPU_MEM_UTIL, GQA_GROUPS, MLA_KV_LORA_RANK, MLA_ROPE_DIM
    base = LLAMA2_13B
    print_header(f"演示 3：让 KV 本身变小——MHA、GQA、MQA、MLA 与 FP8（{base.name} 的形状）")
    table = {}
    for name, n in kv_variants(base, groups, rank_c, rope):
        kv, kv8 = base.n_layers * n * 2, base.n_layers * n     # bf16：每个数 2 字节；FP8：1 字节
        table[name] = dict(per_layer=n, kv=kv, kv_fp8=kv8, fit={g: tokens_that_fit(base, cap, util, kv_bytes=kv)
                                                                for g, cap in gpus},
                           fit_fp8={g: tokens_that_fit(base, cap, util, kv_bytes=kv8) for g, cap in gpus})
    mha = table["MHA"]["kv"]
    print_table(["方式", "每层的数", "KV KiB", "FP8 KiB", "相对 MHA"] + [g for g, _ in gpus],
                [[k, integer(t["per_layer"]), f"{t['kv'] / KiB:g}", f"{t['kv_fp8'] / KiB:g}", pct1(t["kv"] / mha)]
                 + [fit_cell(t["fit"][g]) for g, _ in gpus] for k, t in table.items()])
    ds67 = DEEPSEEK_67B.kv_bytes_per_token()
    dsv2 = DSV2_LAYERS * (rank_c + rope) * 2
    d = dict(table=table, gpus=[g for g, _ in gpus], util=util, base=base.name, head_dim=base.head_dim,
             n_layers=base.n_layers, n_heads=base.n_heads,
             groups=groups, kv_lora_rank=rank_c, rope_dim=rope, mla_groups=(rank_c + rope) / (2 * base.head_dim),
             ds67_kv=ds67, dsv2_kv=dsv2, dsv2_kv_quant=DSV2_LAYERS * (rank_c + rope) * DSV2_KV_BITS / 8,
             paper=dict(PAPER))
    d["reduction_bf16"] = 1 - dsv2 / ds67
    d["reduction_quant"] = 1 - d["dsv2_kv_quant"] / ds67
    print_observations(*observations_3(d))
    return d


def observations_3(d):
    """演示 3 的观察 → (默认印的, --more 才印的)。每个数都取自 d（和上表同一份数据）。"""
    t, g, paper = d["table"], d["gpus"][-1], d["paper"]
    mha, mla = t["MHA"], t["MLA"]
    gqa_name = list(t)[1]
    gqa, mqa = t[gqa_name], t["MQA"]
    text = (f"MLA 每层只存 d_c + d_h^R = {d['kv_lora_rank']} + {d['rope_dim']} 个数，{size(mla['kv'])}/token，"
            f"是 MHA 的 {pct1(mla['kv'] / mha['kv'])}")
    if mha["fit"][g] is None:
        text += f"；但一张 {g} 用 {pct(d['util'])} 的显存连 {d['base']} 的权重都放不下。"
    else:
        text += f"：一张 {g} 能放的 token {ratio(mla['fit'][g], mha['fit'][g])}。"
    lines = [text, f"组越少越省，但更多查询头共用一组 K/V：DeepSeek-V2 论文表 1 把能力标为 MHA 强、GQA 中、MQA 弱，"
                   "MLA 比 MHA 强。"]
    reduction = (f"DeepSeek-V2 说 KV 比 DeepSeek 67B 少 {paper['dsv2_reduction']}%；按配置算 MLA 只少 "
                 f"{pct1(d['reduction_bf16'])}，再加平均 {paper['dsv2_bits']} bit 量化少 {pct1(d['reduction_quant'])}")
    if order(d["reduction_quant"], paper["dsv2_reduction"] / 100, pct1) == 0:
        reduction += "：这是我们的重构，论文没写怎么算出的。"
    else:
        reduction += f"，和论文的 {paper['dsv2_reduction']}% 不同（这里改了 MLA 的维度）。"
    lines.append(reduction)
    if mla["per_layer"] == paper["gqa_equiv"] * 2 * d["head_dim"]:
        equiv = f"正是 DeepSeek-V2 论文 §2.1.4 表 1 说的\"相当于只有 {paper['gqa_equiv']} 组的 GQA\""
    else:
        equiv = f"（DeepSeek-V2 用 512 + 64 时是论文 §2.1.4 表 1 说的 {paper['gqa_equiv']} 组；这里改了维度）"
    more = [f"MLA 的 {integer(mla['per_layer'])} 个数 = {d['mla_groups']:g} × (2 × 头维度)，{equiv}。",
            f"{gqa_name} {size(gqa['kv'])}/token（MHA 的 {pct1(gqa['kv'] / mha['kv'])}），MQA {size(mqa['kv'])}"
            f"（{pct1(mqa['kv'] / mha['kv'])}）。",
            f"FP8 KV 每个数 1 字节：MHA {size(mha['kv_fp8'])}、{gqa_name} {size(gqa['kv_fp8'])}/token"
            + fp8_fit(mha, gqa, gqa_name, g) + "。",
            f"DeepSeek 67B（{DEEPSEEK_67B.n_layers} 层 × {DEEPSEEK_67B.n_kv_heads} 组 K/V × {DEEPSEEK_67B.head_dim} 维，"
            f"bf16）{size(d['ds67_kv'])}/token；DeepSeek-V2（{DSV2_LAYERS} 层 × {integer(mla['per_layer'])}，bf16）"
            f"{size(d['dsv2_kv'])}/token，平均 {paper['dsv2_bits']} bit 时 {size(d['dsv2_kv_quant'])}/token。",
            f"形状：{d['n_layers']} 层、{d['n_heads']} 个查询头 × {d['head_dim']} 维。GPU 列和演示 1 一样（KV 按 bf16）："
            f"{pct(d['util'])} 的显存减去 {d['base']} 的 fp16 权重（各种方式都按它算，注意力投影的参数差别忽略）。"]
    return lines, more


def fp8_fit(mha, gqa, gqa_name, g):
    """FP8 时一张卡能放多少 token（放不下权重时不说）。"""
    if mha["fit_fp8"][g] is None:
        return ""
    return f"；一张 {g} 能放 {integer(mha['fit_fp8'][g])}、{integer(gqa['fit_fp8'][g])} 个 token"


# =============================================================================
def swap_seconds(model, n_tokens, block_size, gbps, overhead_us):
    """换出（或换入）一条 n_tokens 长的序列的 KV：每层、K 和 V 各对每个块调一次 cudaMemcpyAsync（vLLM 的
    swap_blocks），每次有 overhead_us 的固定开销，字节按 gbps（GB/s）传。返回 (拷贝次数, 秒)。

    >>> n, t = swap_seconds(OPT_13B, 512, 16, 16.0, 10.0)   # 40 层 × K、V × 32 块；512 × 800 KiB 过 PCIe
    >>> n, round(t * 1e3, 1)
    (2560, 51.8)
    """
    nb = n_blocks(n_tokens, block_size)
    copies = model.n_layers * 2 * nb
    nbytes = nb * block_size * model.kv_bytes_per_token()      # 整块搬：最后一块没写满也一样大
    return copies, copies * overhead_us * 1e-6 + nbytes / (gbps * 1e9)


def attention_share(model, n):
    """式 1 里注意力项（∝ n²）占 prefill FLOPs 的比例：a·n²·d / (a·n²·d + b·n·d²)。"""
    return 1 - model.n_layers * EQ1_B * n * model.d_model ** 2 / model.prefill_flops(n)


def recompute_seconds(model, n_tokens):
    """把 n_tokens 个 token 当作输入重新 prefill 一遍（kv_physics.prefill_compute_time，FAST'25 式 1）。"""
    return prefill_compute_time(model, n_tokens, 0, node=SWAP_GPU)


def swap_row(model, n_tokens, block_size, gbps, overhead_us, alt_gbps=(), alt_overhead=()):
    """一行：拷贝次数、单程、来回、重算、重算 / 来回；alt：换一个带宽（或固定开销）时的重算 / 来回。"""
    copies, one_way = swap_seconds(model, n_tokens, block_size, gbps, overhead_us)
    rec = recompute_seconds(model, n_tokens)
    return dict(copies=copies, one_way=one_way, round_trip=2 * one_way, recompute=rec, ratio=rec / (2 * one_way),
                ratio_gbps={g: rec / (2 * swap_seconds(model, n_tokens, block_size, g, overhead_us)[1])
                            for g in alt_gbps},
                ratio_overhead={u: rec / (2 * swap_seconds(model, n_tokens, block_size, gbps, u)[1])
                                for u in alt_overhead})


R2 = fixed(2)          # 重算 / 来回：表里和句子里都印两位小数


def demo4_preemption(sim=None):
    """显存不够时要抢占：演示 2 的负载下抢占了多少次？被抢占的请求是重算划算，还是换到 CPU 内存划算？"""
    gbps, alt, overhead, alt_us = PCIE_GBPS, PCIE_GBPS_ALT, COPY_OVERHEAD_US, COPY_OVERHEAD_ALT_US
    swap_len, blocks, lens = SWAP_LEN, SWAP_BLOCK_SIZES, SWAP_LENS
    print_header("演示 4：显存不够时的抢占——重算，还是换出到 CPU 内存再换回（vLLM 论文 §7.3）")
    if sim is None:
        sim = simulate_load()
    m, bs = OPT_13B, sim["settings"]["block_size"]
    lens_pre = [L for _, L in sim["preempted"]]
    by_block = {b: swap_row(m, swap_len, b, gbps, overhead, alt, alt_us) for b in blocks}
    by_len = {L: swap_row(m, L, bs, gbps, overhead) for L in lens}
    load = dict(recompute=sum(recompute_seconds(m, L) for L in lens_pre),
                round_trip=sum(2 * swap_seconds(m, L, bs, gbps, overhead)[1] for L in lens_pre))
    print_text(f"{m.name}、{SWAP_GPU.name}、{integer(swap_len)} 个 token。重算 = 式 1 的 FLOPs ÷ "
               f"({SWAP_GPU.tflops_per_gpu:g} TFLOPS × {SWAP_GPU.mfu:g})；来回 = 换出 + 换入，每层 K、V 每块拷一次："
               f"{overhead:g} µs + 字节 ÷ 带宽（假设）。")
    head = ["块", "拷贝次数", "来回 ms", "重算 ms", f"{gbps:g} GB/s"] + [f"{g:g} GB/s" for g in alt]
    print_table(head, [[b, integer(r["copies"]), fixed(1)(r["round_trip"] * 1e3), fixed(1)(r["recompute"] * 1e3),
                        R2(r["ratio"])] + [R2(r["ratio_gbps"][g]) for g in alt] for b, r in by_block.items()],
                caption="GB/s 列：重算 / 来回（> 1：换出再换入更快），PCIe 带宽取这几个值")
    if console.SHOW_MORE:
        print_table(["长度", "拷贝次数", "单程 ms", "来回 ms", "重算 ms", "重算 / 来回"],
                    [[integer(L), integer(r["copies"]), fixed(1)(r["one_way"] * 1e3), fixed(1)(r["round_trip"] * 1e3),
                      fixed(1)(r["recompute"] * 1e3), R2(r["ratio"])] for L, r in by_len.items()],
                    title=f"块 {bs}：序列长度变化（PCIe {gbps:g} GB/s）")
    d = dict(n_preempt=len(lens_pre), n_requests=len({r for r, _ in sim["preempted"]}),
             n_total=sim["settings"]["n_requests"], mean_len=None, recomputed_tokens=sum(lens_pre),
             total_tokens=int((sim["prompts"] + sim["outputs"]).sum()), load=load, by_block=by_block, by_len=by_len,
             attn_share=attention_share(m, max(lens)), block_size=bs, swap_len=swap_len, gbps=gbps, alt_gbps=list(alt),
             overhead_us=overhead, alt_overhead_us=list(alt_us), model=m.name, paper=dict(PAPER))
    if lens_pre:
        d["mean_len"] = float(np.mean(lens_pre))
    print_observations(*observations_4(d))
    return d


def slowest(worst):
    """每个带宽下最大的重算 / 来回（按印出来的两位小数）→ "重算最多慢 15% / 75%"；不慢的说"重算从不更慢"。

    >>> slowest([1.15, 1.75]), slowest([0.62]), slowest([0.999, 1.3])
    ('重算最多慢 15% / 75%', '重算从不更慢', '重算最多慢 0% / 30%')
    """
    v = [value(R2(r)) for r in worst]
    if all(x <= 1 for x in v):
        return "重算从不更慢"
    return "重算最多慢 " + " / ".join(pct(max(x - 1, 0)) for x in v)


def winners(rows):
    """rows = {块: 比值}：按印出来的值分成重算更快 / 一样 / 换出更快的三组块大小。"""
    groups = ([], [], [])
    for b, r in rows.items():
        groups[order(r, 1, R2) + 1].append(str(b))
    return groups


def observations_4(d):
    """演示 4 的观察 → (默认印的, --more 才印的)。每个数都取自 d（和上面的表同一份数据）。"""
    obs, more = [], []
    load, bb, paper = d["load"], d["by_block"], d["paper"]
    if d["n_preempt"] == 0:
        obs.append(f"演示 2 的负载下（{count(d['n_total'], '个请求')}、块 {d['block_size']}）分页一次也没有抢占："
                   "KV 池一直够用。把 KV_POOL_GIB 调小或 N_REQUESTS 调大，才会出现抢占。")
    else:
        s1 = fixed(1, "s")
        o = order(load["recompute"], load["round_trip"], s1)
        cheaper = {-1: "重算更省", 0: "两者一样", 1: "换出再换入更省"}[o]
        obs.append(f"演示 2 的负载下分页抢占了 {integer(d['n_preempt'])} 次（{count(d['n_requests'], '个请求')}）："
                   f"全部重算 {s1(load['recompute'])}，全部换出再换入 {s1(load['round_trip'])}，{cheaper}。")
        more.append(f"被抢占的请求占全部 {integer(d['n_total'])} 个的 {pct(d['n_requests'] / d['n_total'])}，被抢占时平均"
                    f"已有 {integer(d['mean_len'])} 个 token；要重算的共 {integer(d['recomputed_tokens'])} 个，是全部 "
                    f"{integer(d['total_tokens'])} 个 token 的 {pct(d['recomputed_tokens'] / d['total_tokens'])}。")
    first, last = list(bb)[0], list(bb)[-1]
    ms = fixed(1, "ms")
    rec_wins, ties, swap_wins = winners({b: r["ratio"] for b, r in bb.items()})
    parts = []
    for blocks, what in ((rec_wins, "重算更快"), (ties, "两者一样"), (swap_wins, "换出再换入更快")):
        if blocks and len(blocks) == len(bb):
            parts.append(f"每个块大小下都是{what}")
        elif blocks:
            parts.append(f"块 {'、'.join(blocks)} {what}")
    text = f"{d['gbps']:g} GB/s 时" + "，".join(parts)
    if first == last:
        obs.append(text + "。")
    else:
        obs.append(text + f"：块从 {first} 到 {last}，来回{change_ms(bb[first]['round_trip'], bb[last]['round_trip'])}，"
                   f"重算都是 {ms(bb[first]['recompute'] * 1e3)}。")
        more.append(f"块从 {first} 到 {last}，单程拷贝次数{change_int(bb[first]['copies'], bb[last]['copies'])}；"
                    "重算不用 KV 块，与块大小无关。")
    worst = {d["gbps"]: max(r["ratio"] for r in bb.values())}
    worst.update({g: max(r["ratio_gbps"][g] for r in bb.values()) for g in d["alt_gbps"]})
    gb = [d["gbps"]] + d["alt_gbps"]
    obs.append(f"vLLM 论文 §7.3：重算最多比换出再换入慢 {paper['recompute_max']}%。这里 "
               + " / ".join(f"{g:g}" for g in gb) + " GB/s 时" + slowest([worst[g] for g in gb]) + "：对不对得上论文，"
               "取决于带宽这个假设。")
    more.append(f"{d['gbps']:g} GB/s 是本实验的假设：FAST'25 表 1 整机 host-to-device 128 GB/s ÷ 8 卡；vLLM 的实验是"
                "一张 A100 独占 PCIe 4.0 ×16，约 25–32 GB/s。")
    medium = [b for b in bb if paper["medium"][0] <= b <= paper["medium"][1]]
    if medium:
        more.append(f"vLLM 论文 §7.3、图 19：块 {paper['medium'][0]}–{paper['medium'][1]} 时两者的端到端性能相当；这里"
                    + "、".join(f"块 {b} 的重算 / 来回 = {R2(bb[b]['ratio'])}" for b in medium)
                    + "。论文测的是真实 GPU 上的 OPT-13B；这里是按配置和假设算出来的量级，趋势可以对照。")
    if d["alt_overhead_us"]:
        more.append(f"每次拷贝的固定开销 {d['overhead_us']:g} µs 也是假设。块 " + "、".join(map(str, bb)) + " 的重算 / 来回："
                    + "；".join(words(f"{u:g} µs 时", listed([r["ratio_overhead"][u] for r in bb.values()], R2))
                               for u in d["alt_overhead_us"]) + "。")
    more.append(length_sentence(d))
    more.append("单程 = 来回 / 2：" + "、".join(f"块 {b} {ms(r['one_way'] * 1e3)}" for b, r in bb.items()) + "。")
    return obs[:3], obs[3:] + more


def listed(values, fmt):
    """一列数按印出来的值列出；都一样时只说一次：listed([1.231, 1.229], R2) == '都是 1.23'。"""
    shown = [fmt(v) for v in values]
    if len(values) > 1 and len(set(shown)) == 1:
        return f"都是 {shown[0]}"
    return "、".join(shown)


def change_ms(a, b):
    return change(a * 1e3, b * 1e3, fixed(1, "ms"), up="升到", down="降到")


def change_int(a, b):
    return change(a, b, integer)


def length_sentence(d):
    """序列长度变化时（--more 的表），重算 / 来回变不变。"""
    ratios = [r["ratio"] for r in d["by_len"].values()]
    text = (f"序列长度变化时（块 {d['block_size']}），重算 / 来回 {span(ratios, R2)}：换出按字节和块数、重算按 FLOPs，"
            f"都大致与长度成正比（式 1 里 n² 的注意力项到 {integer(max(d['by_len']))} 个 token 时占 "
            f"{pct1(d['attn_share'])}）。")
    groups = winners(dict(enumerate(ratios)))
    if sum(1 for g in groups if g) == 1:
        return text + "在这些长度上谁更快不变。"
    return text + "在这些长度之间，谁更快变了。"


# =============================================================================
def check_settings(args=None):
    """设置块里每个常量：不合理的值一行拒绝（退出码 2），其余的值都能跑。"""
    check_setting("GPUS", GPUS, isinstance(GPUS, tuple) and 1 <= len(GPUS) <= 3 and all(
        isinstance(g, tuple) and len(g) == 2 and isinstance(g[0], str) and is_int(g[1], 1) for g in GPUS)
        and len({g[0] for g in GPUS}) == len(GPUS),
        " 1–3 种名字不同的 GPU：((名字, 显存字节数), ...)，字节数是正整数，例如 ((\"A100 80GB\", 81_920 * MiB),)")
    check_setting("GPU_MEM_UTIL", GPU_MEM_UTIL, is_number(GPU_MEM_UTIL) and 0 < GPU_MEM_UTIL <= 1, " (0, 1] 之间的数")
    check_setting("SEQ_SEED", SEQ_SEED, is_int(SEQ_SEED, 0), "非负整数")
    check_setting("N_REQUESTS", N_REQUESTS, is_int(N_REQUESTS, 1, 100_000), " 1–100,000 的整数")
    check_setting("MAX_SEQ", MAX_SEQ, is_int(MAX_SEQ, 2, 1 << 20), " 2–1,048,576 的整数（输入、输出至少各 1 个 token）")
    check_setting("LEN_SIGMA", LEN_SIGMA, is_number(LEN_SIGMA, 0, 3), " 0–3 之间的数")
    check_setting("TP_GPUS", TP_GPUS, is_int(TP_GPUS, 1, 1024), " 1–1024 的整数")
    check_setting("KV_POOL_GIB", KV_POOL_GIB, is_number(KV_POOL_GIB) and 0 < KV_POOL_GIB <= 1 << 20, "正数（GiB）")
    check_setting("BLOCK_SIZE", BLOCK_SIZE, is_int(BLOCK_SIZE, 1, MAX_SEQ), f" 1 到 MAX_SEQ（{MAX_SEQ}）之间的整数")
    pool = kv_pool_tokens(KV_POOL_GIB)
    check_setting("KV_POOL_GIB", KV_POOL_GIB, pool >= n_blocks(MAX_SEQ, BLOCK_SIZE) * BLOCK_SIZE,
                  f"至少放得下一个 MAX_SEQ = {MAX_SEQ} 个 token 的请求（现在只有 {pool} 个 token）")
    heads = LLAMA2_13B.n_heads
    check_setting("GQA_GROUPS", GQA_GROUPS, is_int(GQA_GROUPS, 1, heads) and heads % GQA_GROUPS == 0,
                  f"能整除 {heads}（LLaMA2-13B 的查询头数）的正整数，例如 1、2、4、5、8、10、20、40")
    check_setting("MLA_KV_LORA_RANK", MLA_KV_LORA_RANK, is_int(MLA_KV_LORA_RANK, 1, 65_536), " 1–65,536 的整数")
    check_setting("MLA_ROPE_DIM", MLA_ROPE_DIM, is_int(MLA_ROPE_DIM, 0, 65_536), " 0–65,536 的整数")
    check_setting("PCIE_GBPS", PCIE_GBPS, is_number(PCIE_GBPS) and 0 < PCIE_GBPS <= 10_000, " (0, 10,000] 的数（GB/s）")
    check_setting("PCIE_GBPS_ALT", PCIE_GBPS_ALT, isinstance(PCIE_GBPS_ALT, tuple) and len(PCIE_GBPS_ALT) <= 2
                  and all(is_number(g) and 0 < g <= 10_000 for g in PCIE_GBPS_ALT), " 0–2 个 (0, 10,000] 的数（GB/s）")
    check_setting("COPY_OVERHEAD_US", COPY_OVERHEAD_US, is_number(COPY_OVERHEAD_US, 0, 10_000), " 0–10,000 之间的数（µs）")
    check_setting("COPY_OVERHEAD_ALT_US", COPY_OVERHEAD_ALT_US, isinstance(COPY_OVERHEAD_ALT_US, tuple) and all(
        is_number(u, 0, 10_000) for u in COPY_OVERHEAD_ALT_US), "一组 0–10,000 之间的数（µs）")
    check_setting("SWAP_LEN", SWAP_LEN, is_int(SWAP_LEN, 1, 1 << 20), " 1–1,048,576 的整数")
    for name, val in (("SWAP_BLOCK_SIZES", SWAP_BLOCK_SIZES), ("SWAP_LENS", SWAP_LENS)):
        check_setting(name, val, is_sorted_ints(val, 1, 1 << 20) and len(val) <= 8,
                      " 1–8 个从小到大、不重复的正整数，例如 (1, 16, 256)")


DEMOS = {1: demo1_bytes_per_token, 2: demo2_fragmentation, 3: demo3_smaller_kv, 4: demo4_preemption}
LOAD_DEMOS = (2, 4)      # 这两个演示用同一次负载模拟：只模拟一遍，作为参数传给它们


def run(todo, args, step):
    """按顺序跑演示；演示 2、4 共用一次 simulate_load()。"""
    sim = None
    for i, k in enumerate(todo):
        if k in LOAD_DEMOS:
            if sim is None:
                sim = simulate_load()
            DEMOS[k](sim)
        else:
            DEMOS[k]()
        if i + 1 < len(todo):
            step()
    return 0


def main(argv=None):
    return run_lecture(DEMOS, "第 7 讲 · KV 缓存的显存为什么是瓶颈", argv, run=run, check=check_settings)


if __name__ == "__main__":
    sys.exit(main())
