"""CS349E · 第 7 讲 · 01_kv_cache_memory.py —— 为什么 KV 缓存的显存是推理的瓶颈？

【问题】解码时每个 token 的 K/V 都要留在显存里，直到请求结束。那么：一个 token 的 KV 有多大？
一张卡放完权重以后还能放多少 token？如果像早期系统那样给每个请求按最大长度"预留"一段连续显存，
真正存着 token 的显存有多少？按需分配的小块（分页）又能到多少？

  演示 1：真实模型每个 token 的 KV 字节数，以及一张 GPU（默认 A800 80GB、H200 141GB）放完 fp16 权重后
          能放多少 token。
  演示 2：连续预分配（Orca 的 Max / Pow2 / Oracle 三种预留）与按块（默认 16 个 token 一块）分页，
          在 ShareGPT 式的长度分布下模拟：显存里真正存着 token 状态的比例（对照 vLLM 论文图 2）。
  演示 3：让 KV 本身变小：同一个 13B 形状下 MHA、GQA、MQA、MLA（DeepSeek-V2）与 FP8 KV，每 token 多少字节、
          一张卡能放多少 token（对照 DeepSeek-V2 论文的 2.25 组、93.3%）。
  演示 4：显存不够时的抢占：演示 2 的负载下抢占了多少次；重算与换出到 CPU 内存各要多久，随块大小、
          序列长度怎样变（对照 vLLM 论文 §7.3、图 19）。

【运行】python lecture07/01_kv_cache_memory.py          （约 0.5 秒，2 核笔记本，不需要 GPU）
        python lecture07/01_kv_cache_memory.py --demo 2 （只跑演示 2）
【依赖】numpy、rich；本目录的 kv_store（ModelSpec、LLAMA2_70B、prefill_compute_time）、paged_kv（n_blocks）；
        lab_common 的 console、settings。

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
from lab_common.console import fmt_int, print_header, print_observations, print_table, print_text  # noqa: E402
from lab_common.console import ArgParser  # noqa: E402
from lab_common.settings import check_setting, is_int, is_number, is_sorted_ints  # noqa: E402
from kv_store import EQ1_B, LLAMA2_70B, ModelSpec, Node, prefill_compute_time  # noqa: E402
from paged_kv import n_blocks  # noqa: E402

KiB, MiB, GiB = 1024, 1024 ** 2, 1024 ** 3   # 本脚本的字节数一律按 1024 进位、标成 KiB/MiB/GiB（vLLM 论文写的
#                                             "800 KB""12 GB" 也是按 1024 进位：演示 1 的观察 1 核对了这一点）

# ---- 模型配置（公开的 config.json / 论文；参数个数用来算 fp16 权重）----
GPT2_SMALL = ModelSpec("GPT-2 small", n_layers=12, d_model=768, n_heads=12, n_kv_heads=12, n_params=124e6)
OPT_13B = ModelSpec("OPT-13B", n_layers=40, d_model=5120, n_heads=40, n_kv_heads=40, n_params=13e9)
LLAMA2_7B = ModelSpec("LLaMA2-7B", n_layers=32, d_model=4096, n_heads=32, n_kv_heads=32, n_params=6.74e9)
LLAMA2_13B = ModelSpec("LLaMA2-13B", n_layers=40, d_model=5120, n_heads=40, n_kv_heads=40, n_params=13.0e9)
LLAMA3_8B = ModelSpec("LLaMA3-8B", n_layers=32, d_model=4096, n_heads=32, n_kv_heads=8, n_params=8.03e9)
MODELS = (GPT2_SMALL, OPT_13B, LLAMA2_7B, LLAMA2_13B, LLAMA2_70B, LLAMA3_8B)

# ---- 学生可以改的设置 ----
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
PCIE_GBPS = 16.0         # 演示 4：每张卡 host↔device 的带宽（GB/s，1 GB = 10⁹ B）：FAST'25 表 1 整机 128 GB/s ÷ 8 卡
COPY_OVERHEAD_US = 10.0  # 演示 4：每次 cudaMemcpyAsync 的固定开销（µs）——本实验的假设，只取量级
SWAP_LEN = 512           # 演示 4：比较块大小时，被抢占的序列已有几个 token
SWAP_BLOCK_SIZES = (1, 4, 16, 64, 256)   # 演示 4：比较的块大小
SWAP_LENS = (128, 512, 2048)             # 演示 4：按 BLOCK_SIZE 比较的序列长度
LEN_SIGMA = 1.0          # 长度的对数正态分布的 σ（越大尾巴越长）

# ---- 论文的数字（只用来对照，标明出处）----
SHAREGPT_MEAN = (161.31, 337.99)    # vLLM 论文（SOSP'23）图 11(a)：ShareGPT 平均输入 / 输出长度
VLLM_FIG2 = {"Orca (Max)": 20.4, "Orca (Pow2)": 26.8, "Orca (Oracle)": 38.2, "vLLM": 96.3}   # 图 2：token 状态占比 %
VLLM_TABLE1_KV_GB = 12              # vLLM 论文表 1：OPT-13B 在 A100 40GB 上留给 KV 的 12 GB
VLLM_TABLE1_SLOTS = 15.7e3          # vLLM 论文表 1：OPT-13B、A100 40GB、KV 12 GB → 最多 15.7K 个 KV slot
VLLM_REQ_GB = 1.6                   # vLLM 论文 §3：OPT-13B 一个 2048 token 的请求的 KV 可达 1.6 GB
DSV2_LAYERS = 60                    # DeepSeek-V2 config.json：num_hidden_layers = 60（kv_lora_rank 512、qk_rope_head_dim 64）
DSV2_GQA_EQUIV = 2.25               # DeepSeek-V2 论文 §2.1.4 表 1：MLA 的 KV 缓存相当于只有 2.25 组的 GQA
DSV2_KV_REDUCTION = 93.3            # DeepSeek-V2 论文摘要：与 DeepSeek 67B 相比 KV 缓存减少 93.3%
DSV2_KV_BITS = 6                    # DeepSeek-V2 论文 §3.2.3：部署时把 KV 缓存量化到平均每个数 6 bit
DEEPSEEK_67B = ModelSpec("DeepSeek 67B", n_layers=95, d_model=8192, n_heads=64, n_kv_heads=8,
                         n_params=67e9)   # deepseek-llm-67b 的 config.json：95 层、64 个查询头、8 个 KV 头（GQA）
VLLM_73_MEDIUM = (16, 64)           # vLLM 论文 §7.3、图 19：块 16–64 时重算与换出的端到端性能相当
VLLM_73_RECOMPUTE_MAX = 20          # vLLM 论文 §7.3：重算的开销从不超过换出延迟的 20%
SWAP_GPU = Node("A100", n_gpus=1, tflops_per_gpu=312, hbm_gb_per_gpu=40)   # 演示 4 重算用的卡：bf16 峰值 312 TFLOPS、MFU 0.6


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
    return fmt_int(n)


def demo1_bytes_per_token():
    """一个 token 的 KV 有多大？一张卡放完权重后还能放多少 token？"""
    print_header("演示 1：每个 token 的 KV = 2（K、V）× 层数 × KV 头数 × 头维度 × 2 字节（fp16）")
    rows, fit = [], {}
    for m in MODELS:
        fit[m.name] = {g: tokens_that_fit(m, cap, GPU_MEM_UTIL) for g, cap in GPUS}
        rows.append([m.name, f"{m.n_layers}×{m.n_kv_heads}×{m.head_dim}", f"{m.kv_bytes_per_token() / KiB:g}",
                     f"{m.n_params * 2 / GiB:.1f}"] + [fit_cell(fit[m.name][g]) for g, _ in GPUS])
    caps = "，".join(f"{g} 按 {fmt_int(cap // MiB)} MiB" for g, cap in GPUS)
    print_table(["模型", "形状", "KV KiB", "权重 GiB"] + [g for g, _ in GPUS], rows,
                caption=f"形状 = 层数 × KV 头数 × 头维度；KV KiB：每个 token 的 KV 有多少 KiB（1 KiB = 1024 字节，"
                        f"1 GiB = 1024³ 字节）。每种 GPU 一列：一张卡的 {GPU_MEM_UTIL:.0%} 显存（vLLM 的 "
                        f"gpu_memory_utilization，默认 0.9）减去 fp16 权重（参数数 × 2 B）后能放的 token 数；"
                        "激活、CUDA 上下文没有另外扣，所以是上限；- 表示一张卡连权重都放不下。"
                        f"容量：{caps}。")
    opt_b = OPT_13B.kv_bytes_per_token()
    d = dict(kv_bytes={m.name: m.kv_bytes_per_token() for m in MODELS}, fit=fit, util=GPU_MEM_UTIL,
             usable_gib={g: GPU_MEM_UTIL * cap / GiB for g, cap in GPUS},
             opt_req_mib=MAX_SEQ * opt_b / MiB, opt_slots=kv_pool_tokens(),
             opt_slots_decimal=int(KV_POOL_GIB * 1e9 // opt_b),
             mha_70=ModelSpec("LLaMA2-70B（假如没有 GQA）", 80, 8192, 64, 64, 70e9).kv_bytes_per_token(),
             l70_tp=tokens_that_fit(LLAMA2_70B, GPUS[0][1], GPU_MEM_UTIL, n_gpus=TP_GPUS),
             l70_weights_gib=LLAMA2_70B.n_params * 2 / GiB)
    print_observations(observations_1(d))
    return d


def observations_1(d):
    """演示 1 的观察：每个数都取自 d（和上表同一份数据）。"""
    kv, fit = d["kv_bytes"], d["fit"]
    opt, l70 = OPT_13B, LLAMA2_70B
    opt_b, l70_b, l7, l3 = kv[opt.name], kv[l70.name], kv[LLAMA2_7B.name], kv[LLAMA3_8B.name]
    text = (f"OPT-13B：2 × {opt.d_model} × {opt.n_layers} 层 × 2 B = {fmt_int(opt_b)} B = {opt_b / KiB:g} KiB/token"
            f"（vLLM 论文 §3 写作 800 KB）；一个 {MAX_SEQ} token 的请求要 {fmt_int(d['opt_req_mib'])} MiB = "
            f"{d['opt_req_mib'] / 1024:.2f} GiB（论文：可达 {VLLM_REQ_GB} GB）。{KV_POOL_GIB} GiB 的 KV 空间 = "
            f"{fmt_int(d['opt_slots'])} 个 token")
    if KV_POOL_GIB == VLLM_TABLE1_KV_GB:
        text += (f"，与论文表 1 的 {VLLM_TABLE1_KV_GB} GB → {VLLM_TABLE1_SLOTS / 1e3:g}K 一致；若按 10⁹ 字节算只有 "
                 f"{fmt_int(d['opt_slots_decimal'])} 个，可见论文的 KB、GB 也是按 1024 进位。")
    else:
        text += f"（论文表 1 用的是 {VLLM_TABLE1_KV_GB} GB → {VLLM_TABLE1_SLOTS / 1e3:g}K；这里改成了 {KV_POOL_GIB} GiB）。"
    obs = [text,
           f"LLaMA2-70B 用 GQA（{l70.n_heads} 个查询头共用 {l70.n_kv_heads} 组 K/V）：{l70_b / KiB:g} KiB/token；"
           f"如果每个头都有自己的 K/V，要 {d['mha_70'] / KiB:g} KiB，是现在的 {d['mha_70'] // l70_b} 倍。"
           f"同样，LLaMA3-8B（{LLAMA3_8B.n_kv_heads} 组 K/V）{l3 / KiB:g} KiB/token，只有 LLaMA2-7B 的 1/{l7 // l3}。"]
    obs.append(one_gpu_sentence(d) + tp_sentence(d))
    gpu0 = GPUS[0][0]
    l13 = fit[LLAMA2_13B.name][gpu0]
    if l13 is None:
        obs.append(f"GPU_MEM_UTIL = {d['util']:g} 时，一张 {gpu0} 能用的 {d['usable_gib'][gpu0]:.1f} GiB 连 LLaMA2-13B "
                   "的权重都放不下，更谈不上 KV：批能开多大、吞吐有多高，取决于权重之外还剩多少显存、KV 用得有多省"
                   "——这就是后面分页、共享、前缀缓存要解决的事。")
    else:
        obs.append(f"一张 {gpu0} 上的 LLaMA2-13B 最多放 {fmt_int(l13)} 个 token，= {l13 // MAX_SEQ} 个 {MAX_SEQ} token "
                   "的请求：批能开多大、吞吐有多高，取决于 KV 显存用得有多省——这就是后面分页、共享、前缀缓存要解决的事。")
    return obs


def one_gpu_sentence(d):
    """LLaMA2-70B 的权重放不放得进一张卡：按当前的 GPU_MEM_UTIL 逐张判断。"""
    w = d["l70_weights_gib"]
    fits = [g for g, _ in GPUS if d["fit"][LLAMA2_70B.name][g] is not None]
    too_small = [g for g, _ in GPUS if g not in fits]
    usable = "、".join(f"{g} {d['usable_gib'][g]:.1f} GiB" for g, _ in GPUS)
    head = (f"LLaMA2-70B 的 fp16 权重 {w:.1f} GiB；GPU_MEM_UTIL = {d['util']:g} 时一张卡能用的显存：{usable}。")
    if not fits:
        return head + "所以单独一张卡都放不下；"
    if not too_small:
        return head + "所以一张卡就放得下权重；"
    return head + f"所以一张 {'、'.join(fits)} 放得下，一张 {'、'.join(too_small)} 放不下；"


def tp_sentence(d):
    """几张卡张量并行以后还能放多少 token。"""
    n = d["l70_tp"]
    if n is None:
        return f"{TP_GPUS} 张 {GPUS[0][0]} 张量并行也放不下。"
    return (f"{TP_GPUS} 张 {GPUS[0][0]} 张量并行后还能放 {fmt_int(n)} 个 token，"
            f"也就是 {n // 8192} 个 8,192 token 的长请求。")


# =============================================================================
def make_lengths(n, seed=SEQ_SEED, means=SHAREGPT_MEAN, sigma=LEN_SIGMA, max_seq=MAX_SEQ):
    """ShareGPT 式的长度：输入、输出各自服从对数正态分布（均值取论文图 11 的值），总长截到 max_seq。"""
    rng = np.random.default_rng(seed)
    mu = [np.log(m) - sigma ** 2 / 2 for m in means]          # 对数正态的均值 = exp(μ + σ²/2)
    p = np.clip(np.round(rng.lognormal(mu[0], sigma, n)), 1, max_seq - 1).astype(int)
    o = np.clip(np.round(rng.lognormal(mu[1], sigma, n)), 1, None).astype(int)
    return p, np.minimum(o, max_seq - p)


def next_pow2(x):
    return 1 << (int(x) - 1).bit_length()


def reservation(kind, p, o, max_seq=MAX_SEQ):
    """Orca 的三种预留（vLLM 论文 §6.1）：Max 按最大长度；Pow2 把输出长度向上取到 2 的幂（最多多留 1 倍）；
    Oracle 事先知道真实的输出长度，正好预留 p + o。"""
    if kind == "Max":
        return max_seq
    if kind == "Pow2":
        return min(max_seq, p + next_pow2(o))
    return p + o


def simulate_contiguous(kind, prompts, outputs, pool, max_seq=MAX_SEQ):
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


def simulate_paged(prompts, outputs, pool, block_size=BLOCK_SIZE):
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
    """演示 2 和演示 4 共用的一次模拟：同一批请求、同一个 KV 池，三种连续预留 + 分页。"""
    prompts, outputs = make_lengths(N_REQUESTS)
    pool = kv_pool_tokens()
    res = {}
    for kind in ("Max", "Pow2", "Oracle"):
        res[f"Orca ({kind})"] = simulate_contiguous(kind, prompts, outputs, pool)
    share, conc, preempted = simulate_paged(prompts, outputs, pool)
    res["vLLM"] = (share, conc)
    return dict(prompts=prompts, outputs=outputs, pool=pool, res=res, preempted=preempted)


def kv_pool_tokens():
    """KV 池能放几个 OPT-13B 的 token：KV_POOL_GIB GiB // 每个 token 的 KV 字节数。"""
    return int(KV_POOL_GIB * GiB) // OPT_13B.kv_bytes_per_token()


def pool_source():
    """KV 池大小的出处：只有取论文的值时才说是论文的。"""
    if KV_POOL_GIB == VLLM_TABLE1_KV_GB:
        return "（vLLM 论文表 1：OPT-13B 在 A100-40GB 上的 KV 空间）"
    return f"（vLLM 论文表 1 是 {VLLM_TABLE1_KV_GB} GB，这里改成了 {KV_POOL_GIB} GiB）"


def demo2_fragmentation(sim=None):
    """按最大长度预留连续显存，真正存着 token 的显存占多少？分页能到多少？（sim：simulate_load() 的结果）"""
    print_header(f"演示 2：连续预分配与分页（块 {BLOCK_SIZE}）——显存里有多少真正存着 token 的状态（vLLM 论文图 2）")
    if sim is None:
        sim = simulate_load()
    prompts, outputs, pool, res = sim["prompts"], sim["outputs"], sim["pool"], sim["res"]
    print_text(f"设置：OPT-13B，KV 池 = {KV_POOL_GIB} GiB / {OPT_13B.kv_bytes_per_token() // KiB} KiB = "
               f"{fmt_int(pool)} 个 token{pool_source()}；{N_REQUESTS} 个请求开始时全部排队"
               f"（种子 {SEQ_SEED}），输入 / 输出长度是对数正态（σ={LEN_SIGMA}），平均 {prompts.mean():.0f} / "
               f"{outputs.mean():.0f}（论文 ShareGPT：{SHAREGPT_MEAN[0]:.0f} / {SHAREGPT_MEAN[1]:.0f}），"
               f"总长不超过 {MAX_SEQ}。每步每个请求生成一个 token；只统计队列里还有人等的那些步。")
    rows = []
    for name, (share, conc) in res.items():
        if share is None:
            rows.append([name, "-", f"{VLLM_FIG2[name]:.1f}%", "-", "-", "-", "-"])
        else:
            rows.append([name, f"{share[0]:.1%}", f"{VLLM_FIG2[name]:.1f}%", f"{share[1]:.1%}", f"{share[2]:.1%}",
                         f"{share[3]:.1%}", f"{conc:.1f}"])
    print_table(["系统", "token 状态", "论文", "预留", "内部碎片", "外部/空闲", "并发"], rows,
                caption="除\"论文\"和\"并发\"外，各列是占整个 KV 池的时间平均比例，加起来 = 100%。"
                        "token 状态：已经写进去的 token；"
                        "预留：留给这个请求以后要生成的 token；内部碎片：预留了但请求到结束也用不到的位置"
                        "（分页时是最后一块没写满的部分）；外部/空闲：没分出去的空间（连续分配时是"
                        "放不下队首请求那一整段预留的零碎空隙）；并发：平均同时在跑的请求数；"
                        "- 表示这个系统从来没有满载（没有人排队的时刻），没有可统计的步。"
                        "论文：vLLM 论文（SOSP'23）图 2 的 token 状态占比。")
    measured = [k for k, v in res.items() if v[0] is not None]
    share = {k: res[k][0][0] for k in measured}
    order = sorted(share, key=share.get)
    d = dict(shares={k: v[0] for k, v in res.items()}, concurrency={k: v[1] for k, v in res.items()}, pool=pool,
             order=order, idle=[k for k in res if k not in measured],
             mean_prompt=float(prompts.mean()), mean_output=float(outputs.mean()),
             mean_total=float((prompts + outputs).mean()),
             same_order=order == sorted(order, key=VLLM_FIG2.get),
             model=OPT_13B.name, pool_gib=KV_POOL_GIB, n_requests=N_REQUESTS, seed=SEQ_SEED, max_seq=MAX_SEQ,
             block_size=BLOCK_SIZE, paper=dict(VLLM_FIG2))
    d["pow2_between"] = None
    if {"Orca (Max)", "Orca (Pow2)", "Orca (Oracle)"} <= set(measured):
        mx, orc = share["Orca (Max)"], share["Orca (Oracle)"]
        d["pow2_between"] = bool(min(mx, orc) < share["Orca (Pow2)"] < max(mx, orc))
    print_observations(observations_2(d))
    return d


def observations_2(d):
    """演示 2 的观察：每个数都取自 d（和上表同一份数据）。没满载过的系统（d["idle"]）不参与比较。"""
    s, conc, idle = d["shares"], d["concurrency"], d["idle"]
    obs = []
    if idle:
        obs.append(f"{'、'.join(idle)}：{d['n_requests']} 个请求一开始就全部放得下，从来没有人排队，没有满载的时刻可统计"
                   "（表里打 -）；把 N_REQUESTS 调大、或把 KV_POOL_GIB 调小，才能看到满载时显存是怎么分的。")
    if s["Orca (Max)"] is not None:
        mx = s["Orca (Max)"]
        obs.append(f"按 {d['max_seq']} 预留（Orca (Max)）时只有 {mx[0]:.1%} 的 KV 显存存着 token，{mx[2]:.1%} 是永远用不到"
                   f"的内部碎片：平均请求只有 {d['mean_total']:.0f} 个 token，却占着 {d['max_seq']} 个位置。")
    if s["Orca (Oracle)"] is not None:
        orc = s["Orca (Oracle)"]
        text = (f"即使事先知道输出长度（Orca (Oracle)），token 状态也只有 {orc[0]:.1%}：还没生成的 token 的预留占 "
                f"{orc[1]:.1%}，没分出去、却放不下队首请求那一整段预留的空间占 {orc[3]:.1%}。")
        if d["pow2_between"] is True:
            text += f"Pow2（{s['Orca (Pow2)'][0]:.1%}）介于 Max 和 Oracle 之间。"
        elif d["pow2_between"] is False:
            text += f"Pow2（{s['Orca (Pow2)'][0]:.1%}）不在 Max 和 Oracle 之间。"
        obs.append(text)
    if s["vLLM"] is not None:
        pg = s["vLLM"]
        text = (f"分页（块 {d['block_size']}，写到新块才分配）让 token 状态达到 {pg[0]:.1%}，浪费只剩最后一块的零头 "
                f"{pg[2]:.1%} 和空闲 {pg[3]:.1%}；同样 {fmt_int(d['pool'])} 个 token 的池子平均同时跑 "
                f"{conc['vLLM']:.1f} 个请求")
        ratios = [f"{k} 的 {conc['vLLM'] / conc[k]:.1f} 倍" for k in ("Orca (Max)", "Orca (Oracle)")
                  if conc[k] is not None]
        if ratios:
            text += "，是 " + "、".join(ratios)
        obs.append(text + "——批越大，吞吐越高。")
    if len(d["order"]) >= 2:
        if d["same_order"]:
            same = "相同"
        else:
            same = "不同"
        paper = " / ".join(f"{VLLM_FIG2[k]}%" for k in VLLM_FIG2)
        obs.append(f"从低到高：{' < '.join(d['order'])}，与论文图 2 的顺序{same}。"
                   f"论文测的是真实系统在 ShareGPT 请求流下的平均（{paper}）；这里是合成长度、"
                   "全部请求一开始就排队、first-fit 连续分配器的离散模拟，没有模型计算，只比较量级和顺序。")
    return obs


# =============================================================================
def kv_variants(base=LLAMA2_13B):
    """同一个形状（层数、查询头数、头维度）下几种存 KV 的方式：[(名字, 每层每 token 存几个数, 每个数几字节)]。

    >>> [(name, n) for name, n, _ in kv_variants()][:4]      # LLaMA2-13B 形状：40 个头 × 128 维
    [('MHA', 10240), ('GQA-8', 2048), ('MQA', 256), ('MLA', 576)]
    """
    h, d = base.n_heads, base.head_dim
    return [("MHA", 2 * h * d, 2),                                   # 每个查询头一组 K、V
            (f"GQA-{GQA_GROUPS}", 2 * GQA_GROUPS * d, 2),             # 几个查询头共用一组 K、V（GQA_GROUPS 组）
            ("MQA", 2 * d, 2),                                       # 所有查询头共用一组 K、V
            ("MLA", MLA_KV_LORA_RANK + MLA_ROPE_DIM, 2),             # 只存压缩向量 c_KV 和 RoPE key（DeepSeek-V2）
            ("MHA + FP8", 2 * h * d, 1),
            (f"GQA-{GQA_GROUPS} + FP8", 2 * GQA_GROUPS * d, 1)]


def demo3_smaller_kv():
    """同样大小的模型，换一种注意力或把 KV 存成 FP8，每个 token 的 KV 能小多少？一张卡能多放多少 token？"""
    base = LLAMA2_13B
    print_header(f"演示 3：让 KV 本身变小——MHA、GQA、MQA、MLA 与 FP8（都按 {base.name} 的形状算）")
    rows, table = [], {}
    for name, n, nbytes in kv_variants(base):
        kv = base.n_layers * n * nbytes
        fit = {g: tokens_that_fit(base, cap, GPU_MEM_UTIL, kv_bytes=kv) for g, cap in GPUS}
        table[name] = dict(per_layer=n, bytes=nbytes, kv=kv, fit=fit)
        rows.append([name, fmt_int(n), nbytes, f"{kv / KiB:g}", f"{kv / table['MHA']['kv']:.1%}"]
                    + [fit_cell(fit[g]) for g, _ in GPUS])
    print_table(["方式", "每层的数", "字节/数", "KV KiB", "相对 MHA"] + [g for g, _ in GPUS], rows,
                caption=f"{base.name} 的形状：{base.n_layers} 层、{base.n_heads} 个查询头 × 头维度 {base.head_dim}；"
                        f"GQA-{GQA_GROUPS} = {GQA_GROUPS} 组 K/V。每层的数：每个 token 每层要缓存几个数；MLA = d_c + d_h^R = "
                        f"{MLA_KV_LORA_RANK} + {MLA_ROPE_DIM}（DeepSeek-V2 的 kv_lora_rank、qk_rope_head_dim）。"
                        f"KV KiB = 层数 × 每层的数 × 字节/数 / 1024。GPU 列：{GPU_MEM_UTIL:.0%} 显存减去 "
                        f"{base.n_params * 2 / GiB:.1f} GiB 的 fp16 权重后能放的 token 数（各种方式的权重都按 "
                        f"{base.n_params / 1e9:g}B 参数算，注意力投影的参数差别忽略）。")
    ds67 = DEEPSEEK_67B.kv_bytes_per_token()
    dsv2 = DSV2_LAYERS * (MLA_KV_LORA_RANK + MLA_ROPE_DIM) * 2
    d = dict(table=table, mla_groups=(MLA_KV_LORA_RANK + MLA_ROPE_DIM) / (2 * base.head_dim),
             ds67_kv=ds67, dsv2_kv=dsv2, dsv2_kv_quant=DSV2_LAYERS * (MLA_KV_LORA_RANK + MLA_ROPE_DIM) * DSV2_KV_BITS / 8,
             base=base.name)
    d["reduction_bf16"] = 1 - dsv2 / ds67
    d["reduction_quant"] = 1 - d["dsv2_kv_quant"] / ds67
    print_observations(observations_3(d))
    return d


def observations_3(d):
    """演示 3 的观察：每个数都取自 d（和上表同一份数据）。"""
    t = d["table"]
    mha, gqa, mqa, mla = (t[k] for k in list(t)[:4])
    gqa_name = list(t)[1]
    obs = [f"MHA 每层每 token 存 {fmt_int(mha['per_layer'])} 个数，{mha['kv'] / KiB:g} KiB/token；{gqa_name}（{GQA_GROUPS} 组）"
           f"{gqa['kv'] / KiB:g} KiB（{gqa['kv'] / mha['kv']:.1%}）；MQA 只存一组，{mqa['kv'] / KiB:g} KiB"
           f"（{mqa['kv'] / mha['kv']:.1%}）。组越少越省，代价是更多查询头共用同一组 K/V：DeepSeek-V2 论文表 1 把能力"
           "标为 MHA 强、GQA 中、MQA 弱。"]
    if abs(d["mla_groups"] - DSV2_GQA_EQUIV) < 1e-9:
        same = f"正是 DeepSeek-V2 论文 §2.1.4 表 1 说的\"相当于只有 {DSV2_GQA_EQUIV} 组的 GQA\""
    else:
        same = f"（DeepSeek-V2 用 512 + 64 时是论文 §2.1.4 表 1 说的 {DSV2_GQA_EQUIV} 组；这里改了维度）"
    obs.append(f"MLA 不存每个头的 K/V，只存 d_c = {MLA_KV_LORA_RANK} 维的压缩向量和 d_h^R = {MLA_ROPE_DIM} 维的 RoPE "
               f"key：{fmt_int(mla['per_layer'])} 个数 = {d['mla_groups']:g} × (2 × 头维度)，{same}；在这个形状上 "
               f"{mla['kv'] / KiB:g} KiB/token，是 MHA 的 {mla['kv'] / mha['kv']:.1%}，论文表 1 把它的能力标为比 MHA 更强。")
    g = GPUS[-1][0]
    fp8 = [k for k in t if k.endswith("FP8")]
    text = (f"FP8 KV 每个数 1 字节，任何方式都再减半：{fp8[0]} {t[fp8[0]]['kv'] / KiB:g} KiB、"
            f"{fp8[1]} {t[fp8[1]]['kv'] / KiB:g} KiB。")
    if mha["fit"][g] is None:
        text += f"一张 {g} 在 GPU_MEM_UTIL = {GPU_MEM_UTIL:g} 时连 {d['base']} 的权重都放不下，哪种方式都放不了 KV。"
    else:
        text += (f"一张 {g} 放完权重后：MHA 放 {fmt_int(mha['fit'][g])} 个 token，MLA 放 {fmt_int(mla['fit'][g])} 个，"
                 f"是 {mla['fit'][g] / mha['fit'][g]:.1f} 倍——同样的显存能开大得多的批。")
    obs.append(text)
    obs.append(f"和论文的 {DSV2_KV_REDUCTION}% 对照（DeepSeek-V2 论文摘要：比 DeepSeek 67B 的 KV 缓存少 {DSV2_KV_REDUCTION}%）："
               f"按配置算，DeepSeek 67B（{DEEPSEEK_67B.n_layers} 层 × {DEEPSEEK_67B.n_kv_heads} 组 K/V × "
               f"{DEEPSEEK_67B.head_dim} 维，bf16）{d['ds67_kv'] / KiB:g} KiB/token，DeepSeek-V2（{DSV2_LAYERS} 层 × "
               f"{MLA_KV_LORA_RANK + MLA_ROPE_DIM}，bf16）{d['dsv2_kv'] / KiB:g} KiB/token，只少 {d['reduction_bf16']:.1%}；"
               f"论文部署时还把 KV 量化到平均 {DSV2_KV_BITS} bit（§3.2.3），{d['dsv2_kv_quant'] / KiB:.2f} KiB/token，"
               f"少 {d['reduction_quant']:.1%}。论文的 {DSV2_KV_REDUCTION}% 是 MLA 和量化合起来的效果。")
    return obs


# =============================================================================
def swap_seconds(model, n_tokens, block_size):
    """换出（或换入）一条 n_tokens 长的序列的 KV：每层、K 和 V 各对每个块调一次 cudaMemcpyAsync（vLLM 的
    swap_blocks），每次有 COPY_OVERHEAD_US 的固定开销，字节按 PCIE_GBPS 传。返回 (拷贝次数, 秒)。

    >>> n, t = swap_seconds(OPT_13B, 512, 16)             # 40 层 × K、V × 32 块；512 × 800 KiB 过 PCIe
    >>> n, round(t * 1e3, 1)
    (2560, 51.8)
    """
    nb = n_blocks(n_tokens, block_size)
    copies = model.n_layers * 2 * nb
    nbytes = nb * block_size * model.kv_bytes_per_token()      # 整块搬：最后一块没写满也一样大
    return copies, copies * COPY_OVERHEAD_US * 1e-6 + nbytes / (PCIE_GBPS * 1e9)


def attention_share(model, n):
    """式 1 里注意力项（∝ n²）占 prefill FLOPs 的比例：a·n²·d / (a·n²·d + b·n·d²)。"""
    return 1 - model.n_layers * EQ1_B * n * model.d_model ** 2 / model.prefill_flops(n)


def recompute_seconds(model, n_tokens):
    """把 n_tokens 个 token 当作输入重新 prefill 一遍（kv_store.prefill_compute_time，FAST'25 式 1）。"""
    return prefill_compute_time(model, n_tokens, 0, node=SWAP_GPU)


def swap_row(model, n_tokens, block_size):
    copies, one_way = swap_seconds(model, n_tokens, block_size)
    rec = recompute_seconds(model, n_tokens)
    return dict(copies=copies, one_way=one_way, round_trip=2 * one_way, recompute=rec, ratio=rec / (2 * one_way))


def demo4_preemption(sim=None):
    """显存不够时要抢占：演示 2 的负载下抢占了多少次？被抢占的请求是重算划算，还是换到 CPU 内存划算？"""
    print_header("演示 4：显存不够时的抢占——重算，还是换出到 CPU 内存（vLLM 论文 §4.5、§7.3）")
    if sim is None:
        sim = simulate_load()
    m = OPT_13B
    pre = sim["preempted"]
    lens = [L for _, L in pre]
    total_tokens = int((sim["prompts"] + sim["outputs"]).sum())
    by_block = {b: swap_row(m, SWAP_LEN, b) for b in SWAP_BLOCK_SIZES}
    by_len = {L: swap_row(m, L, BLOCK_SIZE) for L in SWAP_LENS}
    load = dict(recompute=sum(recompute_seconds(m, L) for L in lens),
                round_trip=sum(2 * swap_seconds(m, L, BLOCK_SIZE)[1] for L in lens))
    print_text(f"模型：{m.name}（{m.kv_bytes_per_token() // KiB} KiB/token）在一张 {SWAP_GPU.name} 上。重算 = 把已有的 "
               f"token 当输入重新 prefill（FAST'25 式 1 的 FLOPs ÷ {SWAP_GPU.tflops_per_gpu:g} TFLOPS × MFU "
               f"{SWAP_GPU.mfu:g}）；换出 / 换入 = 每层、K 和 V 各对每个块调一次 cudaMemcpyAsync（vLLM 的 swap_blocks），"
               f"每次固定开销 {COPY_OVERHEAD_US:g} µs（本实验的假设），字节按 PCIe {PCIE_GBPS:g} GB/s（Mooncake FAST'25 "
               "表 1：整机 host-to-device 128 GB/s，8 卡平分）。抢占一次要换出、以后再换入：来回 = 2 × 单程。")
    head = ["块", "拷贝次数", "单程 ms", "来回 ms", "重算 ms", "重算 / 来回"]
    print_table(head, [[b, fmt_int(r["copies"]), f"{r['one_way'] * 1e3:.1f}", f"{r['round_trip'] * 1e3:.1f}",
                        f"{r['recompute'] * 1e3:.1f}", f"{r['ratio']:.2f}"] for b, r in by_block.items()],
                title=f"一条已有 {fmt_int(SWAP_LEN)} 个 token 的序列被抢占：块大小变化")
    print_table(["长度"] + head[1:], [[fmt_int(L), fmt_int(r["copies"]), f"{r['one_way'] * 1e3:.1f}",
                                     f"{r['round_trip'] * 1e3:.1f}", f"{r['recompute'] * 1e3:.1f}", f"{r['ratio']:.2f}"]
                                    for L, r in by_len.items()],
                title=f"块 {BLOCK_SIZE}：序列长度变化",
                caption="重算 / 来回 < 1：重算更快；> 1：换出再换入更快。")
    d = dict(n_preempt=len(pre), n_requests=len({r for r, _ in pre}), n_total=N_REQUESTS,
             mean_len=None, recomputed_tokens=sum(lens), total_tokens=total_tokens,
             load=load, by_block=by_block, by_len=by_len,
             attn_share=attention_share(m, max(SWAP_LENS)))
    if lens:
        d["mean_len"] = float(np.mean(lens))
    print_observations(observations_4(d))
    return d


def observations_4(d):
    """演示 4 的观察：每个数都取自 d（和上面两张表同一份数据）。"""
    obs = []
    if d["n_preempt"] == 0:
        obs.append(f"演示 2 的负载下（{d['n_total']} 个请求、块 {BLOCK_SIZE}）分页一次也没有抢占：KV 池一直够用。"
                   "把 KV_POOL_GIB 调小或 N_REQUESTS 调大，才会出现抢占。")
    else:
        load = d["load"]
        if load["recompute"] < load["round_trip"]:
            cheaper = "重算更省"
        else:
            cheaper = "换出再换入更省"
        obs.append(f"演示 2 的负载下（{d['n_total']} 个请求、块 {BLOCK_SIZE}），分页一共抢占了 {fmt_int(d['n_preempt'])} 次，"
                   f"涉及 {d['n_requests']} 个请求（{d['n_requests'] / d['n_total']:.0%}），被抢占时平均已有 "
                   f"{d['mean_len']:.0f} 个 token。这些 token 要重算的共 {fmt_int(d['recomputed_tokens'])} 个，是全部 "
                   f"{fmt_int(d['total_tokens'])} 个 token 的 {d['recomputed_tokens'] / d['total_tokens']:.0%}；按上面的模型全部"
                   f"重算要 {load['recompute']:.1f} s，全部换出再换入要 {load['round_trip']:.1f} s——{cheaper}。")
    bb = d["by_block"]
    recompute_wins = [b for b, r in bb.items() if r["ratio"] < 1]
    swap_wins = [b for b, r in bb.items() if r["ratio"] >= 1]
    first, last = list(bb)[0], list(bb)[-1]
    text = (f"块越小，拷贝次数越多：块 {first} 时单程要拷 {fmt_int(bb[first]['copies'])} 次、{bb[first]['one_way'] * 1e3:.0f} ms，"
            f"块 {last} 时 {fmt_int(bb[last]['copies'])} 次、{bb[last]['one_way'] * 1e3:.0f} ms；重算与块大小无关，都是 "
            f"{bb[first]['recompute'] * 1e3:.0f} ms。")
    if recompute_wins and swap_wins:
        text += (f"所以块 {'、'.join(map(str, recompute_wins))} 时重算更快，块 {'、'.join(map(str, swap_wins))} 时换出再换入"
                 "更快。")
    elif recompute_wins:
        text += "表里每个块大小下都是重算更快。"
    else:
        text += "表里每个块大小下都是换出再换入更快。"
    obs.append(text)
    ratios = [r["ratio"] for r in d["by_len"].values()]
    text = (f"序列长度变化时（块 {BLOCK_SIZE}），重算 / 来回在 {min(ratios):.2f}–{max(ratios):.2f} 之间：换出按字节和块数、"
            f"重算按 FLOPs，都大致与长度成正比（式 1 里 n² 的注意力项到 {fmt_int(max(SWAP_LENS))} 个 token 时也只占 "
            f"{d['attn_share']:.1%}）。")
    if all(r < 1 for r in ratios) or all(r >= 1 for r in ratios):
        text += "在这些长度上谁更快不变；决定胜负的主要是块大小。"
    else:
        text += "在这些长度之间，谁更快变了。"
    obs.append(text)
    worst = max(r["ratio"] for r in bb.values())
    medium = [b for b in bb if VLLM_73_MEDIUM[0] <= b <= VLLM_73_MEDIUM[1]]
    text = (f"vLLM 论文 §7.3、图 19：块小时重算更高效、块大时换出更高效，重算的开销从不超过换出延迟的 "
            f"{VLLM_73_RECOMPUTE_MAX}%；块 {VLLM_73_MEDIUM[0]}–{VLLM_73_MEDIUM[1]} 时两者端到端性能相当。这里的模型：")
    if worst > 1:
        text += f"重算最多比来回慢 {worst - 1:.0%}"
    else:
        text += "每个块大小下重算都不比来回慢"
    if medium:
        text += "，块 " + "、".join(f"{b} 时重算 / 来回 = {bb[b]['ratio']:.2f}" for b in medium)
    obs.append(text + "。论文测的是真实 GPU 上的 OPT-13B；这里是按配置和假设算出来的量级，趋势可以对照。")
    return obs


# =============================================================================
def check_settings():
    """设置块里每个常量：不合理的值一行拒绝（退出码 2），其余的值都能跑。"""
    check_setting("GPUS", GPUS, isinstance(GPUS, tuple) and 1 <= len(GPUS) <= 3 and all(
        isinstance(g, tuple) and len(g) == 2 and isinstance(g[0], str) and is_int(g[1], 1) for g in GPUS),
        " 1–3 种 GPU：((名字, 显存字节数), ...)，字节数是正整数，例如 ((\"A100 80GB\", 81_920 * MiB),)")
    check_setting("GPU_MEM_UTIL", GPU_MEM_UTIL, is_number(GPU_MEM_UTIL) and 0 < GPU_MEM_UTIL <= 1, " (0, 1] 之间的数")
    check_setting("SEQ_SEED", SEQ_SEED, is_int(SEQ_SEED, 0), "非负整数")
    check_setting("N_REQUESTS", N_REQUESTS, is_int(N_REQUESTS, 1, 100_000), " 1–100,000 的整数")
    check_setting("MAX_SEQ", MAX_SEQ, is_int(MAX_SEQ, 2, 1 << 20), " 2–1,048,576 的整数（输入、输出至少各 1 个 token）")
    check_setting("LEN_SIGMA", LEN_SIGMA, is_number(LEN_SIGMA, 0, 3), " 0–3 之间的数")
    check_setting("TP_GPUS", TP_GPUS, is_int(TP_GPUS, 1, 1024), " 1–1024 的整数")
    check_setting("KV_POOL_GIB", KV_POOL_GIB, is_number(KV_POOL_GIB) and KV_POOL_GIB > 0, "正数（GiB）")
    check_setting("BLOCK_SIZE", BLOCK_SIZE, is_int(BLOCK_SIZE, 1, MAX_SEQ), f" 1 到 MAX_SEQ（{MAX_SEQ}）之间的整数")
    pool = kv_pool_tokens()
    check_setting("KV_POOL_GIB", KV_POOL_GIB, pool >= n_blocks(MAX_SEQ, BLOCK_SIZE) * BLOCK_SIZE,
                  f"至少放得下一个 MAX_SEQ = {MAX_SEQ} 个 token 的请求（现在只有 {pool} 个 token）")
    heads = LLAMA2_13B.n_heads
    check_setting("GQA_GROUPS", GQA_GROUPS, is_int(GQA_GROUPS, 1, heads) and heads % GQA_GROUPS == 0,
                  f"能整除 {heads}（LLaMA2-13B 的查询头数）的正整数，例如 1、2、4、5、8、10、20、40")
    check_setting("MLA_KV_LORA_RANK", MLA_KV_LORA_RANK, is_int(MLA_KV_LORA_RANK, 1, 65_536), " 1–65,536 的整数")
    check_setting("MLA_ROPE_DIM", MLA_ROPE_DIM, is_int(MLA_ROPE_DIM, 0, 65_536), " 0–65,536 的整数")
    check_setting("PCIE_GBPS", PCIE_GBPS, is_number(PCIE_GBPS) and PCIE_GBPS > 0, "正数（GB/s）")
    check_setting("COPY_OVERHEAD_US", COPY_OVERHEAD_US, is_number(COPY_OVERHEAD_US, 0, 10_000), " 0–10,000 之间的数（µs）")
    check_setting("SWAP_LEN", SWAP_LEN, is_int(SWAP_LEN, 1, 1 << 20), " 1–1,048,576 的整数")
    for name, value in (("SWAP_BLOCK_SIZES", SWAP_BLOCK_SIZES), ("SWAP_LENS", SWAP_LENS)):
        check_setting(name, value, is_sorted_ints(value, 1, 1 << 20) and len(value) <= 8,
                      " 1–8 个从小到大、不重复的正整数，例如 (1, 16, 256)")


DEMOS = {1: demo1_bytes_per_token, 2: demo2_fragmentation, 3: demo3_smaller_kv, 4: demo4_preemption}
LOAD_DEMOS = (2, 4)      # 这两个演示用同一次负载模拟：main 只模拟一遍，作为参数传给它们


def main(argv=None):
    check_settings()
    ap = ArgParser(description="第 7 讲 · KV 缓存的显存为什么是瓶颈")
    ap.add_argument("--demo", type=int, choices=sorted(DEMOS), help="只跑某一个演示（默认全跑）")
    args = ap.parse_args(argv)
    todo = sorted(DEMOS)
    if args.demo:
        todo = [args.demo]
    sim = None
    for k in todo:
        if k in LOAD_DEMOS:
            if sim is None:
                sim = simulate_load()
            DEMOS[k](sim)
        else:
            DEMOS[k]()
    return 0


if __name__ == "__main__":
    sys.exit(main())
