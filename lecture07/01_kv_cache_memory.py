"""CS349E · 第 7 讲 · 01_kv_cache_memory.py —— 为什么 KV 缓存的显存是推理的瓶颈？

【问题】解码时每个 token 的 K/V 都要留在显存里，直到请求结束。那么：一个 token 的 KV 有多大？
一张卡放完权重以后还能放多少 token？如果像早期系统那样给每个请求按最大长度"预留"一段连续显存，
真正存着 token 的显存有多少？按需分配的小块（分页）又能到多少？显存不够要抢占时，重算和换出哪个快？

【运行】python lecture07/01_kv_cache_memory.py          （约 0.5 秒，2 核笔记本，不需要 GPU）
        python lecture07/01_kv_cache_memory.py --demo 2 （只跑演示 2；--more 印出全部观察，--list 列出演示）

  演示 1：真实模型每个 token 的 KV 字节数；一张 GPU 放完 fp16 权重后能放多少 token。
  演示 2：连续预留（Orca 的 Max / Pow2 / Oracle）与分页：KV 池里多少真正存着 token（对照 vLLM 论文图 2）。
  演示 3：MHA、GQA、MQA、MLA（DeepSeek-V2）与 FP8：每 token 的 KV 能小多少（对照 DeepSeek-V2 的 2.25 组、93.3%）。
  演示 4：抢占时重算还是换出到 CPU 内存，随块大小、PCIe 带宽怎样变（对照 vLLM 论文 §7.3、图 19）。

【依赖】numpy、rich；本目录的 kv_store.tiers、paged_kv、allocation（连续预留与分页的模拟）；lab_common。

【练习】exercises/ex1_kv_bytes.py：自己写 kv_bytes_per_token（MHA、GQA、MQA、MLA）；make check EX=1，再加 --mine 运行本脚本。
【试一试】改下面"学生可以改的设置"里的一个值，再运行（不合理的值会被一行拒绝，并说明允许的范围）：
  1. 把 `GPU_MEM_UTIL` 改成 1.0：一张 H200 放得下 LLaMA2-70B 的 fp16 权重了吗？一张 A800 呢？
  2. 把 `BLOCK_SIZE` 改成 1 和 128（--demo 2）：分页时的内部碎片和平均并发怎样变？
  3. 把 `N_REQUESTS` 改成 20（--demo 2）：服务器还会满载吗？表里哪几行没有数，为什么？
  4. 把 `GPUS` 换成 `(("A100 40GB", 40_960 * MiB),)`：一张 A100 40GB 放得下几个 LLaMA2-13B 的 token？
  5. 把 `COPY_OVERHEAD_US` 改成 0（--demo 4）：每次拷贝没有固定开销时，小块还是重算更快吗？
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.realpath(__file__))))  # 仓库根目录：让 lab_common 包可以 import
from lab_common.endings import quiet_endings  # noqa: E402
quiet_endings()  # 最先做（还没 import numpy）：这之后按 Ctrl-C、管道被关都只打一行，不打印 traceback
from lab_common import console  # noqa: E402
from lab_common.console import print_header, print_observations, print_table, print_text, status  # noqa: E402
from lab_common.say import by_order, count, fixed, grouped, integer, listed, listing, order, pct, pct1, rank  # noqa: E402
from lab_common.say import ratio, rel_change, size, times, vs, whole, words  # noqa: E402
from lab_common.script_tools import run_lecture  # noqa: E402
from lab_common.settings import Source, changed, check_setting, is_int, is_number, is_sorted_ints  # noqa: E402
import numpy as np  # noqa: E402
from kv_store.tiers import LLAMA2_70B, ModelSpec, Node  # noqa: E402
from paged_kv import kv_bytes_per_token, n_blocks  # noqa: E402
from allocation import make_lengths, recompute_seconds, simulate_contiguous, simulate_paged  # noqa: E402
from allocation import attention_share, swap_row, swap_seconds  # noqa: E402

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
#                          整机 128 GB/s ÷ 8 卡；vLLM 论文没给，一张卡独占 PCIe 4.0 ×16 时约 25–32 GB/s
PCIE_GBPS_ALT = (25.0, 32.0)       # 演示 4：再按这几个带宽各算一列"重算 / 来回"（单卡独占 PCIe 4.0 ×16 的量级，假设）
COPY_OVERHEAD_US = 10.0  # 演示 4：每次 cudaMemcpyAsync 的固定开销（µs）——本实验的假设，只取量级
COPY_OVERHEAD_ALT_US = (0.0, 20.0)  # 演示 4：固定开销换成这几个值再算一遍（--more 里的敏感性）
SWAP_LEN = 512           # 演示 4：比较块大小时，被抢占的序列已有几个 token
SWAP_BLOCK_SIZES = (1, 4, 16, 64, 256)   # 演示 4：比较的块大小
SWAP_LENS = (128, 512, 2048)             # 演示 4：按 BLOCK_SIZE 比较的序列长度（--more 的表）
LEN_SIGMA = 1.0          # 长度的对数正态分布的 σ（越大尾巴越长）

# ---- 论文的数字（只用来对照，标明出处）----
SHAREGPT_MEAN = (161.31, 337.99)    # vLLM 论文（SOSP'23）图 11(a)：ShareGPT 平均输入 / 输出长度
VLLM_FIG2 = {"Orca (Max)": 20.4, "Orca (Pow2)": 26.8, "Orca (Oracle)": 38.2, "vLLM": 96.3}   # 图 2：token 状态占比 %
#             （§6.2 实验的平均；三种 Orca 是作者自己重写的实现，图注没说数据集；正文 §1 给出 20.4–38.2%）
VLLM_TABLE1_KV_GB = 12              # vLLM 论文表 1：OPT-13B 在 A100 40GB 上留给 KV 的 12 GB
VLLM_TABLE1_SLOTS = 15.7e3          # vLLM 论文表 1：OPT-13B、A100 40GB、KV 12 GB → 最多 15.7K 个 KV slot
VLLM_REQ_GB = 1.6                   # vLLM 论文 §3：OPT-13B 一个 2048 token 的请求的 KV 可达 1.6 GB
FAST25_H2D_GBPS = 128              # Mooncake FAST'25 表 1：B_h2d = 128 GB/s（一台 8×A800 的 host-to-device 合计）
FAST25_GQA = 8                      # Mooncake FAST'25 表 1：gqa = 8（查询头数 ÷ KV 头数）
FAST25_KV_KB = 320                  # Mooncake FAST'25 §5.3.1：LLaMA3-70B 每个 token 的 KV 写作 "320 KB"
DSV2_LAYERS = 60                    # DeepSeek-V2 config.json：num_hidden_layers = 60（kv_lora_rank 512、qk_rope_head_dim 64）
DSV2_GQA_EQUIV = 2.25               # DeepSeek-V2 论文 §2.1.4 表 1：MLA 的 KV 缓存相当于只有 2.25 组的 GQA
DSV2_KV_REDUCTION = 93.3            # DeepSeek-V2 论文摘要：与 DeepSeek 67B 相比 KV 缓存减少 93.3%
DSV2_KV_BITS = 6                    # DeepSeek-V2 论文 §3.2.3：部署时把 KV 缓存量化到平均每个数 6 bit
LLAMA2_70B_RELEASED = 68_976_648_192  # meta-llama/Llama-2-70b-hf 的 config.json 算出的参数个数（80 层、d = 8192、
#                                       FFN 28,672、8 个 KV 头、词表 32,000，embedding 与输出层不共享）：fp16 128.5 GiB
# 设置里出自论文 / 配置的值：设置还是这个值时才印出处（lab_common.settings.Source）
SOURCES = dict(
    MAX_SEQ=Source(2048, "vLLM 论文 §6.1", "（Orca (Max) 按 OPT 的最大序列长度 2048 预留）"),
    BLOCK_SIZE=Source(16, "vLLM 论文 §7.2", "的默认块大小"),
    KV_POOL_GIB=Source(12, "vLLM 论文表 1", "（OPT-13B 在 A100-40GB 上留给 KV 的 12 GB）"),
    MLA_KV_LORA_RANK=Source(512, "DeepSeek-V2 config.json", "kv_lora_rank"),
    MLA_ROPE_DIM=Source(64, "DeepSeek-V2 config.json", "qk_rope_head_dim"),
    PCIE_GBPS=Source(16.0, "FAST'25 表 1", "整机 host-to-device 128 GB/s ÷ 8 卡"))
FIG2_SETUP = ("MAX_SEQ", "BLOCK_SIZE")   # 图 2 的数只在这两个设置还是论文的值时并排（图注没说数据集，§6.1：Orca (Max) 按 2048 预留）
DEEPSEEK_67B = ModelSpec("DeepSeek 67B", n_layers=95, d_model=8192, n_heads=64, n_kv_heads=8,
                         n_params=67e9)   # deepseek-llm-67b 的 config.json：95 层、64 个查询头、8 个 KV 头（GQA）
VLLM_73_MEDIUM = (16, 64)           # vLLM 论文 §7.3、图 19：块 16–64 时重算与换出的端到端性能相当
VLLM_73_RECOMPUTE_MAX = 20          # vLLM 论文 §7.3：块大时换出更快，但重算最多比换出慢 20%（重算 ≤ 1.2 × 换出）
SWAP_GPU = Node("A100", n_gpus=1, tflops_per_gpu=312, hbm_gb_per_gpu=40)   # 演示 4 重算用的卡：bf16 峰值 312 TFLOPS、MFU 0.6
PCIE_SOURCE = (f"默认 {FAST25_H2D_GBPS / 8:g} GB/s = FAST'25 表 1 整机 host-to-device {FAST25_H2D_GBPS} GB/s ÷ 8 卡，"
               "本实验的假设")
DEMO4_NOTES = (f"带宽：{PCIE_SOURCE}；vLLM 论文没给带宽，一张 A100 独占 PCIe 4.0 ×16 约 25–32 GB/s（也是假设）。"
               "论文的\"换出延迟\"是换出、换入还是两者之和，正文没说：这里取来回；和论文对不对得上，取决于带宽这个假设。"
               "重算不用 KV 块，与块大小无关。vLLM 论文 §7.3、图 19：块 "
               f"{VLLM_73_MEDIUM[0]}–{VLLM_73_MEDIUM[1]} 时两者的端到端性能相当（真实 GPU 上的 OPT-13B；这里是按配置和"
               "假设算的量级）。")
DEMO2_COLUMNS = ("列的含义：token 状态 = 已经写进去的 token；预留 = 留给以后要生成的 token；内部碎片 = 预留了但到结束也用不到"
                 "的位置（分页时是最后一块没写满的部分）；外部/空闲 = 没分出去的空间（连续分配时是放不下队首请求那一整段"
                 "预留的零碎空隙）；- = 从来没有满载。模拟：全部请求一开始就排队、first-fit 连续分配、严格先来先服务，"
                 "每步每个请求生成一个 token，没有模型计算：和论文图 2（§6.2 实验的平均，图注没说数据集；论文的 Orca 是"
                 "作者自己重写的实现）只比量级和顺序。")
ALL_OF = {1: "就"}                  # "N 个请求一开始全部排队"：只有一个请求时不说"全部"
PAPER = dict(fig2=VLLM_FIG2, sharegpt=SHAREGPT_MEAN, gqa_equiv=DSV2_GQA_EQUIV, dsv2_reduction=DSV2_KV_REDUCTION,
             dsv2_bits=DSV2_KV_BITS, medium=VLLM_73_MEDIUM, recompute_max=VLLM_73_RECOMPUTE_MAX)


# =============================================================================
def tokens_that_fit(model, hbm_bytes, util, n_gpus=1, kv_bytes=None):
    """n_gpus 张卡（张量并行）放完 fp16 权重后还能放几个 token 的 KV（每个 kv_bytes 字节）；放不下权重返回 None。"""
    if kv_bytes is None:
        kv_bytes = model.kv_bytes_per_token()
    free = n_gpus * hbm_bytes * util - model.n_params * 2      # fp16 权重：每个参数 2 字节
    if free <= 0:
        return None
    return int(free // kv_bytes)


def kib(nbytes):
    """表里的 KiB 一格：至多两位小数，去掉多余的 0（kib(46080) == '45'，kib(5200) == '5.08'）。"""
    return fixed(2)(nbytes / KiB).rstrip("0").rstrip(".")


def num(x):
    """设置里的数照原样印、带千分位，不用科学计数法：num(16.0) == '16'，num(1e6) == '1,000,000'，num(0.01) == '0.01'。"""
    return f"{x:,.6f}".rstrip("0").rstrip(".")


def fit_cell(n, per=1):
    """表格里的一格：放不下权重（None）打印 "-"；per 把 token 数换成"几个 per 长的请求"（向下取整）。

    >>> fit_cell(None), fit_cell(62633), fit_cell(1460190, per=8192)
    ('-', '62,633', '178')
    """
    if n is None:
        return "-"
    return integer(n // per)


def mib(nbytes):
    """显存容量照设置印成整 MiB（mib(143_771 * MiB) == '143,771 MiB'）；不到 1 MiB 时自己挑单位（mib(1) == '1 B'）。"""
    if nbytes < MiB:
        return size(nbytes)
    return f"{integer(nbytes / MiB)} MiB"


def model_kv_bytes(m, kind=None):
    """一个 ModelSpec 每个 token 的 KV 字节数，经 paged_kv.kv_bytes_per_token（练习 1；--mine 时用学生写的）。
    kind="MHA"：假如每个查询头各存一组 K/V。

    >>> model_kv_bytes(OPT_13B) == OPT_13B.kv_bytes_per_token() == 800 * 1024, model_kv_bytes(LLAMA2_70B, "MHA") // KiB
    (True, 2560)
    """
    if kind is None:
        kind = "GQA"
    if m.n_kv_heads == m.n_heads:
        kind = "MHA"
    return kv_bytes_per_token(kind, m.n_layers, m.n_heads, m.head_dim, n_kv_heads=m.n_kv_heads,
                              dtype_bytes=m.dtype_bytes)


def kv_pool_tokens(pool_gib):
    """pool_gib GiB 的 KV 池能放几个 OPT-13B 的 token：kv_pool_tokens(12) == 15728（12 GiB // 800 KiB）。"""
    return int(pool_gib * GiB) // OPT_13B.kv_bytes_per_token()


def demo1_bytes_per_token():
    """一个 token 的 KV 有多大？一张卡放完权重后还能放多少 token？"""
    gpus, util, max_seq, pool_gib, tp = GPUS, GPU_MEM_UTIL, MAX_SEQ, KV_POOL_GIB, TP_GPUS
    print_header("演示 1：每个 token 的 KV = 2（K、V）× 层数 × KV 头数 × 头维度 × 2 字节")
    named = tuple(MODELS) + tuple(m for m in (OPT_13B, LLAMA2_70B) if m not in MODELS)   # 观察点名的两个总要算
    kv = {m.name: model_kv_bytes(m) for m in named}
    fit = {m.name: {g: tokens_that_fit(m, cap, util, kv_bytes=kv[m.name]) for g, cap in gpus} for m in named}
    print_table(["模型", "形状", "KV KiB", "权重 GiB"] + [g for g, _ in gpus],
                [[m.name, f"{m.n_layers}×{m.n_kv_heads}×{m.head_dim}", kib(kv[m.name]),
                  fixed(1)(m.n_params * 2 / GiB)] + [fit_cell(fit[m.name][g]) for g, _ in gpus] for m in named],
                caption=f"GPU 列：一张卡 {pct(util)} 显存减去 fp16 权重后能放几个 token（上限）；- = 放不下权重"
                        + extra_rows_note(named[len(MODELS):]))
    opt_b, l70_b = kv[OPT_13B.name], kv[LLAMA2_70B.name]
    gqa = [m for m in MODELS if m.n_kv_heads < m.n_heads]
    tp_fit = {g: tokens_that_fit(LLAMA2_70B, cap, util, n_gpus=tp, kv_bytes=l70_b) for g, cap in gpus}
    d = dict(kv_bytes=kv, fit=fit, util=util, gpus=list(gpus), usable={g: util * cap for g, cap in gpus},
             max_seq=max_seq, pool_gib=pool_gib, tp=tp, opt_req=max_seq * opt_b, opt_slots=kv_pool_tokens(pool_gib),
             opt_slots_decimal=int(pool_gib * 1e9 // opt_b), mha={m.name: model_kv_bytes(m, "MHA") for m in gqa},
             tp_fit=tp_fit, l70_tp=tp_fit[gpus[0][0]], l70_weights=LLAMA2_70B.n_params * 2,
             l70_params=LLAMA2_70B.n_params, l70_released=LLAMA2_70B_RELEASED)
    d["mha_70"] = model_kv_bytes(LLAMA2_70B, "MHA")
    if console.SHOW_MORE:       # 论文的数和我们按配置算的数并排（论文的 KB、GB 也按 1024 进位）
        print_table(["数", "出处", "论文", "这里"], [
            ["OPT-13B 每 token 的 KV", "vLLM §3", "800 KB", f"2 × {OPT_13B.d_model} × {OPT_13B.n_layers} 层 × 2 B = {integer(opt_b)} B"],
            ["OPT-13B 2,048 token 的请求", "vLLM §3", f"可达 {VLLM_REQ_GB} GB", f"{integer(2048 * opt_b / MiB)} MiB"],
            ["KV 空间 → OPT-13B 的 token", "vLLM 表 1", f"{VLLM_TABLE1_KV_GB} GB → {VLLM_TABLE1_SLOTS / 1e3:g}K",
             f"{num(pool_gib)} GiB → {integer(d['opt_slots'])}（按 10⁹ B：{integer(d['opt_slots_decimal'])}）"],
            ["LLaMA3-70B 每 token 的 KV", "FAST'25 §5.3.1", f"{FAST25_KV_KB} KB", f"2 × 80 × 1,024 × 2 B = {integer(l70_b)} B"]],
            title="论文里的数（KB、GB 按 1024 进位才对得上）",
            caption=f"FAST'25 表 1：l = 80、d = 8192、gqa = {FAST25_GQA}（查询头数 / KV 头数）：64 个查询头 ÷ {FAST25_GQA} = 8 个 KV 头。")
        if gqa:                 # MODELS 里没有 GQA 的模型时不印空表
            print_table(["GQA 的模型", "查询头 / KV 组", "KV/token", "每头一组时", "倍数"],
                        [[m.name, f"{m.n_heads} / {m.n_kv_heads}", size(kv[m.name]), size(d["mha"][m.name]),
                          times(d["mha"][m.name] / kv[m.name], 0)] for m in gqa],
                        caption="每头一组 = MHA。批能开多大，取决于 KV 用得多省：这就是后面几个演示要解决的事。")
        print_table(["GPU", "容量", "能用", f"{tp} 张：token", "8,192 token 请求"],
                    [[g, mib(cap), size(d["usable"][g]), fit_cell(tp_fit[g]), fit_cell(tp_fit[g], 8192)] for g, cap in gpus],
                    caption=f"能用 = 容量 × {num(util)}；后两列：{tp} 张这种卡放完 LLaMA2-70B 的权重以后")
    print_observations(*observations_1(d))
    return d


def extra_rows_note(extra):
    """MODELS 里没有、观察却要点名的模型（OPT-13B、LLaMA2-70B）也列在表里：句子都对得上表。"""
    if not extra:
        return ""
    return f"；{listing([m.name for m in extra])} 不在 MODELS 里，观察要用，也列出"


def observations_1(d):
    """演示 1 的观察 → (默认印的, --more 才印的)。每个数都取自 d（和上表同一份数据）。"""
    kv, gpu0, max_seq, l70_b = d["kv_bytes"], d["gpus"][0][0], d["max_seq"], d["kv_bytes"][LLAMA2_70B.name]
    l13, fit70 = d["fit"][OPT_13B.name][gpu0], d["fit"][LLAMA2_70B.name]     # 一句话只说一个模型：OPT-13B（vLLM 论文 §3 的例子）
    room = f"用 {pct(d['util'])} 的显存连它的权重都放不下"
    if l13 is not None:
        room = f"放完它的权重还能放 {integer(l13)} 个 token（{whole(l13, max_seq, '个这样的请求')}）"
    ok, no = [g for g, _ in d["gpus"] if fit70[g] is not None], [g for g, _ in d["gpus"] if fit70[g] is None]
    weights = f"LLaMA2-70B 的 fp16 权重 {fixed(1, 'GiB')(d['l70_weights'] / GiB)}{params_note(d)}，" + "，".join(
        f"一张 {listing(g, last='或')} {w}" for g, w in ((ok, "放得下"), (no, "放不下")) if g)
    if d["tp"] > 1 and d["l70_tp"] is None:
        weights += f"；{d['tp']} 张 {gpu0} 张量并行也放不下"
    elif d["tp"] > 1:
        weights += f"；{d['tp']} 张 {gpu0} 张量并行后还能放 {integer(d['l70_tp'])} 个 token"
    return [f"OPT-13B 每个 token 的 KV 是 {size(kv[OPT_13B.name])}，{integer(max_seq)} token 的请求 "
            f"{size(d['opt_req'])}；一张 {gpu0} {room}。", weights + "。"], [
            f"GQA：LLaMA2-70B {LLAMA2_70B.n_heads} 个查询头共用 {LLAMA2_70B.n_kv_heads} 组 K/V，{size(l70_b)}/token，"
            f"每头一组{ratio(d['mha_70'], l70_b, 0)}。"]


def params_note(d):
    """LLaMA2-70B 的参数个数用的是哪个：标称的 70e9，还是改过的值（发布的 checkpoint 并排）。"""
    released = fixed(1, "GiB")(d["l70_released"] * 2 / GiB)
    if d["l70_params"] == 70e9:
        return f"（按标称 70B 个参数；发布的 checkpoint 是 {d['l70_released'] / 1e9:.2f}B 个、{released}）"
    return f"（按 {d['l70_params'] / 1e9:g}B 个参数；发布的 checkpoint 是 {d['l70_released'] / 1e9:.2f}B 个、{released}）"


# =============================================================================
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
    """按最大长度预留连续显存，真正存着 token 的显存占多少？分页能到多少？"""
    if sim is None:                 # sim：simulate_load() 的结果，和演示 4 共用；不给就自己模拟一次
        sim = simulate_load()
    s, prompts, outputs, pool, res = sim["settings"], sim["prompts"], sim["outputs"], sim["pool"], sim["res"]
    print_header(f"演示 2：连续预留与分页（块 {s['block_size']}）——KV 池里多少真正存着 token")
    source = f"（{SOURCES['KV_POOL_GIB'].where}）"
    if not SOURCES["KV_POOL_GIB"].holds(s["pool_gib"]):
        source = f"（你设的值；{SOURCES['KV_POOL_GIB'].where}是 {VLLM_TABLE1_KV_GB} GB）"
    print_text(f"OPT-13B，KV 池 {num(s['pool_gib'])} GiB = {integer(pool)} 个 token{source}；"
               f"{count(s['n_requests'], '个请求')}一开始{ALL_OF.get(s['n_requests'], '全部')}排队。")
    own = changed({k: s[k.lower()] for k in FIG2_SETUP}, {k: SOURCES[k] for k in FIG2_SETUP})
    rows = []
    for name, (share, conc) in res.items():
        cells = ["-"] * 5
        if share is not None:
            cells = [pct1(x) for x in share] + [fixed(1)(conc)]
        paper = [f"{VLLM_FIG2[name]:.1f}%"]
        if own:                     # 改了图 2 的实验条件：论文的数不再并排
            paper = []
        rows.append([name, cells[0], *paper, *cells[1:]])
    print_table(["系统", "token 状态"] + ["论文"] * (not own) + ["预留", "内部碎片", "外部/空闲", "并发"], rows,
                caption=fig2_caption(own, s))
    d = dict(shares={k: v[0] for k, v in res.items()}, concurrency={k: v[1] for k, v in res.items()}, pool=pool,
             idle=[k for k, v in res.items() if v[0] is None], mean_prompt=float(prompts.mean()),
             mean_output=float(outputs.mean()), mean_total=float((prompts + outputs).mean()), model=OPT_13B.name,
             pool_gib=s["pool_gib"], n_requests=s["n_requests"], seed=s["seed"], max_seq=s["max_seq"],
             block_size=s["block_size"], sigma=s["sigma"], paper=dict(VLLM_FIG2), sharegpt=SHAREGPT_MEAN,
             own_setup=own)
    if console.SHOW_MORE:
        print_table(["平均长度（token）", "输入", "输出", "总长", "最长"],
                    [["这里", integer(d["mean_prompt"]), integer(d["mean_output"]), integer(d["mean_total"]),
                      integer(d["max_seq"])], ["vLLM 图 11(a) 的 ShareGPT", integer(SHAREGPT_MEAN[0]),
                                               integer(SHAREGPT_MEAN[1]), "-", "-"]],
                    caption=f"输入、输出各自对数正态（种子 {d['seed']}，σ = {d['sigma']:g}），总长 ≤ 最长 = MAX_SEQ")
        print_text(DEMO2_COLUMNS)
    print_observations(*observations_2(d))
    return d


def fig2_caption(own, s):
    """演示 2 的表注：比例的意思；图 2 的数并排时说清论文的 Orca 和这里的不同，改了实验条件时说论文的数不再并排。"""
    text = "满载时占 KV 池的时间平均比例；并发：平均在跑的请求数。"
    if own:
        return text + ("vLLM 论文图 2 是 " + "、".join(f"{k} = {SOURCES[k].value}" for k in FIG2_SETUP) + " 时的；你改了 "
                       + "、".join(f"{k}（{num(s[k.lower()])}）" for k in own) + "，论文的数不再并排。")
    return text + "论文：vLLM 论文图 2（§6.2 实验的平均）；论文的 Orca 是作者重写的，按 buddy 分配器放 KV（§6.1），这里是 first-fit。"


def observations_2(d):
    """演示 2 的观察 → (默认至多 2 条, --more 才印的)。没满载过的系统（d["idle"]）不参与比较；改了图 2 的实验条件
    （d["own_setup"]）时不和论文比顺序。"""
    s, conc, n, pg, mx = d["shares"], d["concurrency"], d["n_requests"], "vLLM", "Orca (Max)"
    measured = [k for k in s if s[k] is not None]
    lines = []
    if d["idle"]:
        lines.append(f"{listing(d['idle'])}：{count(n, '个请求')}一开始{ALL_OF.get(n, '全部')}放得下，从来没有人排队，"
                     "没有满载的时刻可统计（表里打 -）；把 N_REQUESTS 调大、或把 KV_POOL_GIB 调小才看得到。")
    if pg in measured and mx in measured:
        paged = f"分页（块 {d['block_size']}）"
        lines.append(f"KV 池里存着 token 的比例：{vs(paged, s[pg][0], mx, s[mx][0], pct1)}；"
                     f"平均并发 {fixed(1)(conc[pg])}，" + "、".join(
                         f"相对 {k} {ratio(conc[pg], conc[k])}" for k in (mx, "Orca (Oracle)") if k in measured) + "。")
    frag = []
    if mx in measured:
        frag.append(f"Orca (Max) 的 {pct1(s[mx][2])} 是内部碎片：按 {integer(d['max_seq'])} 个 token 预留，"
                    f"平均请求是 {integer(d['mean_total'])} 个。")
    rank_line = []
    if len(measured) >= 2 and not d.get("own_setup"):
        ours, theirs = rank([(k, s[k][0]) for k in measured], pct1), rank([(k, d["paper"][k]) for k in measured], fixed(1))
        text = f"从高到低与论文图 2 相同：{ours}。"
        if ours != theirs:
            text = f"从高到低：这里 {ours}，论文图 2 是 {theirs}。"
        rank_line.append(text)
    lines += rank_line + frag
    return lines[:2], lines[2:]


# =============================================================================
def kv_variants(base, groups, kv_lora_rank, rope_dim):
    """同一个形状下几种存 KV 的方式：[(名字, 种类, 每层每 token 存几个数)]（字节数由 kv_bytes_per_token 算）。

    >>> [(name, n) for name, _, n in kv_variants(LLAMA2_13B, 8, 512, 64)]      # LLaMA2-13B：40 个头 × 128 维
    [('MHA', 10240), ('GQA-8', 2048), ('MQA', 256), ('MLA', 576)]
    """
    h, d = base.n_heads, base.head_dim
    return [("MHA", "MHA", 2 * h * d),                  # 每个查询头一组 K、V
            (f"GQA-{groups}", "GQA", 2 * groups * d),   # 几个查询头共用一组 K、V（groups 组）
            ("MQA", "MQA", 2 * d),                      # 所有查询头共用一组 K、V
            ("MLA", "MLA", kv_lora_rank + rope_dim)]    # 只存压缩向量 c_KV 和 RoPE key（DeepSeek-V2）


def demo3_smaller_kv():
    """同样大小的模型，换一种注意力或把 KV 存成 FP8，每个 token 的 KV 能小多少？一张卡能多放多少 token？"""
    gpus, util, groups, rank_c, rope = GPUS, GPU_MEM_UTIL, GQA_GROUPS, MLA_KV_LORA_RANK, MLA_ROPE_DIM
    base = LLAMA2_13B
    print_header(f"演示 3：让 KV 本身变小——MHA、GQA、MQA、MLA 与 FP8（{base.name} 的形状）")
    table = {}
    for name, kind, n in kv_variants(base, groups, rank_c, rope):
        kv, kv8 = (kv_bytes_per_token(kind, base.n_layers, base.n_heads, base.head_dim, n_kv_heads=groups,
                                      kv_lora_rank=rank_c, rope_dim=rope, dtype_bytes=b) for b in (2, 1))   # bf16、FP8
        table[name] = dict(per_layer=n, kv=kv, kv_fp8=kv8, fit={g: tokens_that_fit(base, cap, util, kv_bytes=kv)
                                                                for g, cap in gpus},
                           fit_fp8={g: tokens_that_fit(base, cap, util, kv_bytes=kv8) for g, cap in gpus})
    mha = table["MHA"]["kv"]
    print_table(["方式", "每层的数", "KV KiB", "FP8 KiB", "相对 MHA"] + [g for g, _ in gpus],
                [[k, integer(t["per_layer"]), kib(t["kv"]), kib(t["kv_fp8"]), pct1(t["kv"] / mha)]
                 + [fit_cell(t["fit"][g]) for g, _ in gpus] for k, t in table.items()],
                caption=f"{base.n_layers} 层 × {base.n_heads} 头 × {base.head_dim} 维；GPU 列同演示 1（KV 按 bf16）。组越少越省，"
                        "但共用一组 K/V 的头更多：DeepSeek-V2 表 1 的能力 MHA 强、GQA 中、MQA 弱，MLA 比 MHA 强。")
    ds67 = DEEPSEEK_67B.kv_bytes_per_token()
    dsv2 = DSV2_LAYERS * (rank_c + rope) * 2
    d = dict(table=table, gpus=[g for g, _ in gpus], util=util, base=base.name, head_dim=base.head_dim, groups=groups,
             n_layers=base.n_layers, n_heads=base.n_heads, kv_lora_rank=rank_c, rope_dim=rope,
             mla_groups=(rank_c + rope) / (2 * base.head_dim),
             ds67_kv=ds67, dsv2_kv=dsv2, dsv2_kv_quant=DSV2_LAYERS * (rank_c + rope) * DSV2_KV_BITS / 8,
             own_dims=changed(dict(MLA_KV_LORA_RANK=rank_c, MLA_ROPE_DIM=rope),
                              {k: SOURCES[k] for k in ("MLA_KV_LORA_RANK", "MLA_ROPE_DIM")}),
             paper=dict(PAPER))
    d["reduction_bf16"] = 1 - dsv2 / ds67
    d["reduction_quant"] = 1 - d["dsv2_kv_quant"] / ds67
    if console.SHOW_MORE:
        print_table(["FP8 时能放的 token"] + [g for g, _ in gpus],
                    [[k] + [fit_cell(t["fit_fp8"][g]) for g, _ in gpus] for k, t in table.items()],
                    caption=f"都减去 {base.name} 的 fp16 权重（忽略注意力投影参数的差别）；- = 放不下")
        ds, cut = DEEPSEEK_67B, dict(nd=1, less="少了", more="反而多了")
        print_table(["数", "出处", "论文", "这里"], [
            ["MLA 相当于几组 GQA", "§2.1.4 表 1", f"{DSV2_GQA_EQUIV} 组",
             f"({integer(rank_c)} + {integer(rope)}) ÷ (2 × {base.head_dim}) = {fixed(2)(d['mla_groups'])} 组"],
            ["DeepSeek 67B", "config", "-",
             f"{size(ds67)}（{ds.n_layers} 层 × {ds.n_kv_heads} 组 × {ds.head_dim} 维）"],
            ["MLA（bf16）", "config", "-",
             f"{size(dsv2)}（{DSV2_LAYERS} 层 × {integer(rank_c + rope)}），{rel_change(ds67, dsv2, **cut)}"],
            [f"MLA（平均 {DSV2_KV_BITS} bit）", "§3.2.3、摘要", f"少 {DSV2_KV_REDUCTION}%",
             f"{size(d['dsv2_kv_quant'])}，{rel_change(ds67, d['dsv2_kv_quant'], **cut)}"]],
            title="DeepSeek-V2 论文里的数（这里按 config.json 重构）", caption="少多少：都是对 DeepSeek 67B 的 KV")
    print_observations(*observations_3(d))
    return d


def observations_3(d):
    """演示 3 的观察 → (默认印的, --more 才印的)。每个数都取自 d（和上表同一份数据）。"""
    t, g, paper = d["table"], d["gpus"][-1], d["paper"]
    mha, mla = t["MHA"], t["MLA"]
    text = (f"MLA 每层存 d_c + d_h^R = {integer(d['kv_lora_rank'])} + {integer(d['rope_dim'])} 个数，{size(mla['kv'])}/token，"
            f"是 MHA 的 {pct1(mla['kv'] / mha['kv'])}")
    if mha["fit"][g] is None:
        text += f"；但一张 {g} 用 {pct(d['util'])} 的显存连 {d['base']} 的权重都放不下。"
    else:
        text += f"：一张 {g} 能放的 token {ratio(mla['fit'][g], mha['fit'][g])}。"
    reduction = (f"DeepSeek-V2 说 KV 比 DeepSeek 67B 少 {paper['dsv2_reduction']}%；按配置算，MLA 再加平均 "
                 f"{paper['dsv2_bits']} bit 量化{rel_change(d['ds67_kv'], d['dsv2_kv_quant'], 1, more='反而多了')}")
    if order(d["reduction_quant"], paper["dsv2_reduction"] / 100, pct1) == 0:
        reduction += "：对上了，但这是我们的重构，论文没写怎么算出的。"
    elif d.get("own_dims"):
        reduction += f"，和论文的 {paper['dsv2_reduction']}% 不同（你改了 {listing(d['own_dims'])}）。"
    else:
        reduction += f"，和论文的 {paper['dsv2_reduction']}% 不同。"
    return [text, reduction], []


# =============================================================================
R2 = fixed(2)          # 重算 / 来回：表里和句子里都印两位小数
MS = fixed(1)          # 表里的毫秒数


def demo4_preemption(sim=None):
    """显存不够时要抢占：演示 2 的负载下抢占了多少次？被抢占的请求是重算划算，还是换到 CPU 内存划算？"""
    gbps, overhead = PCIE_GBPS, COPY_OVERHEAD_US
    alt = tuple(g for g in PCIE_GBPS_ALT if g != gbps)                  # 和主带宽相同的不再算一列
    alt_us = tuple(u for u in COPY_OVERHEAD_ALT_US if u != overhead)
    swap_len, blocks, lens = SWAP_LEN, SWAP_BLOCK_SIZES, SWAP_LENS
    print_header("演示 4：显存不够时的抢占——重算，还是换出到 CPU 内存再换回（vLLM 论文 §7.3）")
    if sim is None:
        sim = simulate_load()
    m, bs = OPT_13B, sim["settings"]["block_size"]
    lens_pre = [L for _, L in sim["preempted"]]
    by_block = {b: swap_row(m, SWAP_GPU, swap_len, b, gbps, overhead, alt, alt_us) for b in blocks}
    by_len = {L: swap_row(m, SWAP_GPU, L, bs, gbps, overhead) for L in lens}
    load = dict(recompute=sum(recompute_seconds(m, L, SWAP_GPU) for L in lens_pre),
                round_trip=sum(2 * swap_seconds(m, L, bs, gbps, overhead)[1] for L in lens_pre))
    print_text(f"{m.name}、{SWAP_GPU.name}、{integer(swap_len)} 个 token。重算 = 式 1 的 FLOPs ÷ "
               f"({SWAP_GPU.tflops_per_gpu:g} TFLOPS × {SWAP_GPU.mfu:g})；来回 = 换出 + 换入，每层 K、V 每块拷一次："
               f"{num(overhead)} µs + 字节 ÷ 带宽（假设）。")
    head = ["块", "拷贝次数", "单程 ms", "来回 ms", "重算 ms", f"{num(gbps)} GB/s"] + [f"{num(g)} GB/s" for g in alt]
    print_table(head, [[b, integer(r["copies"]), MS(r["one_way"] * 1e3), MS(r["round_trip"] * 1e3),
                        MS(r["recompute"] * 1e3), R2(r["ratio"])] + [R2(r["ratio_gbps"][g]) for g in alt]
                       for b, r in by_block.items()],
                caption="GB/s 列：重算 / 来回（> 1：换出再换入更快），PCIe 带宽取这几个值")
    d = dict(n_preempt=len(lens_pre), n_requests=len({r for r, _ in sim["preempted"]}),
             n_total=sim["settings"]["n_requests"], mean_len=None, recomputed_tokens=sum(lens_pre),
             total_tokens=int((sim["prompts"] + sim["outputs"]).sum()), load=load, by_block=by_block, by_len=by_len,
             attn_share=attention_share(m, max(lens)), block_size=bs, swap_len=swap_len, gbps=gbps, alt_gbps=list(alt),
             overhead_us=overhead, alt_overhead_us=list(alt_us), model=m.name, gpu=SWAP_GPU.name,
             tflops=SWAP_GPU.tflops_per_gpu, mfu=SWAP_GPU.mfu, gbps_note=PCIE_SOURCE, paper=dict(PAPER))
    mean_cell = "-"             # 没有抢占时没有平均长度
    if lens_pre:
        d["mean_len"] = float(np.mean(lens_pre))
        mean_cell = integer(d["mean_len"])
    if console.SHOW_MORE:
        print_table(["长度", "拷贝次数", "单程 ms", "来回 ms", "重算 ms", "重算 / 来回", "注意力项"],
                    [[integer(L), integer(r["copies"]), MS(r["one_way"] * 1e3), MS(r["round_trip"] * 1e3),
                      MS(r["recompute"] * 1e3), R2(r["ratio"]), pct1(attention_share(m, L))] for L, r in by_len.items()],
                    title=f"块 {bs}：序列长度变化（PCIe {num(gbps)} GB/s）",
                    caption=length_caption(by_len, m))
        if alt_us:              # 每次拷贝的固定开销也是假设：换成别的值，重算 / 来回怎样变
            print_table(["固定开销"] + [f"块 {b}" for b in by_block],
                        [[f"{num(u)} µs"] + [R2(r["ratio_overhead"][u]) for r in by_block.values()] for u in alt_us],
                        caption=f"重算 / 来回（{num(gbps)} GB/s）：每次拷贝的固定开销换成这几个值")
        n, s1 = d["n_total"], fixed(1, "s")
        print_table(["演示 2 的负载下分页的抢占", "数"], [
            ["抢占次数", integer(d["n_preempt"])],
            ["被抢占的请求", f"{integer(d['n_requests'])} / {integer(n)}（{pct(d['n_requests'] / n)}）"],
            ["被抢占时平均已有的 token", mean_cell],
            ["要重算的 token", f"{integer(d['recomputed_tokens'])} / {integer(d['total_tokens'])}"
                              f"（{pct(d['recomputed_tokens'] / d['total_tokens'])}）"],
            ["全部重算 / 全部换出再换入", f"{s1(load['recompute'])} / {s1(load['round_trip'])}"]])
        print_text(DEMO4_NOTES)
    print_observations(*observations_4(d))
    return d


def observations_4(d):
    """演示 4 的观察 → (默认印的, --more 才印的)。每个数都取自 d（和上面的表同一份数据）。"""
    load, bb, limit = d["load"], d["by_block"], d["paper"]["recompute_max"]
    head = (f"演示 2 的负载下（{count(d['n_total'], '个请求')}、块 {d['block_size']}）分页一次也没有抢占：KV 池一直够用；"
            "把 KV_POOL_GIB 调小或 N_REQUESTS 调大，才会出现抢占。")
    if d["n_preempt"]:
        head = (f"演示 2 的负载下分页抢占了 {integer(d['n_preempt'])} 次（{count(d['n_requests'], '个请求')}）："
                + vs("全部重算", load["recompute"], "全部换出再换入", load["round_trip"], fixed(1, "s"), "慢", "快") + "。")
    rec, tie, swap = by_order({b: r["ratio"] for b, r in bb.items()}, 1, R2)
    blocks = grouped([(rec, "重算更快"), (tie, "两者一样"), (swap, "换出再换入更快")], "块", every="每个块大小下")
    worst = {f"{num(g)} GB/s": max(r["ratio_gbps"].get(g, r["ratio"]) for r in bb.values())
             for g in [d["gbps"]] + d["alt_gbps"]}
    ok, same_, over = by_order(worst, 1 + limit / 100, R2)
    return [head, f"{num(d['gbps'])} GB/s 时{blocks}。"], [
            f"vLLM 论文 §7.3：块大时换出更快，但重算最多慢 {limit}%（重算 / 来回 ≤ {R2(1 + limit / 100)}）。按来回算，"
            + words("表里各 GB/s 列的最大值", listed(worst.values(), R2)) + "："
            + grouped([(ok + same_, "在论文以内"), (over, "超出论文")], "", every="每种带宽下") + "。"]


def length_caption(by_len, model):
    """--more 那张"序列长度变化"表的表注：每个 token 的重算、来回时间从最短到最长差多少，按印出来的值说是否大致成正比。"""
    lens = sorted(by_len)
    parts = []
    for key, name in (("round_trip", "来回"), ("recompute", "重算")):
        per = [by_len[L][key] / L for L in lens]
        grow = per[-1] / per[0]
        if len(lens) == 1:
            continue
        if 0.8 <= grow <= 1.25:
            parts.append(f"{name}大致与长度成正比")
        else:
            parts.append(f"{name}每个 token 的时间从 {integer(lens[0])} 到 {integer(lens[-1])} 个 token {ratio(per[-1], per[0])}")
    share = attention_share(model, lens[-1])
    text = "注意力项：式 1 里 n² 那一项占重算 FLOPs 的比例"
    if parts == ["来回大致与长度成正比", "重算大致与长度成正比"]:
        parts = ["来回和重算都大致与长度成正比"]
    if parts:
        text = "；".join(parts) + f"（{integer(lens[-1])} 个 token 时注意力项占重算的 {pct1(share)}）。" + text
    return text


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
    kv_heads = LLAMA2_70B.n_kv_heads   # 张量并行把 KV 头平分到各卡；卡比 KV 头多时 vLLM 复制 KV 头，这里的算法不再成立
    check_setting("TP_GPUS", TP_GPUS, is_int(TP_GPUS, 1, kv_heads) and kv_heads % TP_GPUS == 0,
                  f"能整除 {kv_heads}（LLaMA2-70B 的 KV 头数）的正整数，例如 1、2、4、8：每张卡分到同样多的 KV 头")
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
    if set(todo) & set(LOAD_DEMOS):
        sim = simulate_load()
    for i, k in enumerate(todo):
        if k in LOAD_DEMOS:
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
