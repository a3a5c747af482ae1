"""CS349E · 第 7 讲 · 01_kv_cache_memory.py —— 为什么 KV 缓存的显存是推理的瓶颈？

【问题】解码时每个 token 的 K、V 都留在显存里直到请求结束。一个 token 的 KV 多大，一张卡放得下多少？
按最大长度预留连续显存时，真正存着 token 的有多少，分页呢？显存不够要抢占时，重算快还是换到 CPU 内存再换回快？

【运行】python lecture07/01_kv_cache_memory.py            （约 0.5 秒，不需要 GPU）
        python lecture07/01_kv_cache_memory.py --demo 2   （只跑演示 2；--step：先想再看；--mine：用 exercises/ex1 里你写的）

【试一试】改下面的设置再运行（不合理的值会被一行拒绝，并说明允许的范围）：
  1. GPU_MEM_UTIL = 1.0（--demo 1）：一张 H200 放得下 LLaMA2-70B 的 fp16 权重了吗？
  2. BLOCK_SIZE = 1 和 128（--demo 2）：分页时的内部碎片和并发怎样变？
  3. N_REQUESTS = 20（--demo 2）：服务器还会满载吗？表里哪几行没有数，为什么？
  4. MLA_KV_LORA_RANK = 4096（--demo 3）：MLA 还比 GQA 省吗？
  5. COPY_OVERHEAD_US = 0（--demo 4）：每次拷贝没有固定开销时，小块还是重算更快吗？
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from lab_common import show  # noqa: E402
from kv_store.tiers import EQ1_A, EQ1_B, LLAMA2_70B, ModelSpec  # noqa: E402
from allocation import make_lengths, simulate_contiguous, simulate_paged, swap_seconds  # noqa: E402

# --mine：用你在 exercises/ 里写的（见 exercises/README.md）；不加就用讲义的实现
if "--mine" in sys.argv[1:]:
    from exercises.ex1_kv_bytes import kv_bytes_per_token
else:
    from paged_kv import kv_bytes_per_token

KiB, MiB, GiB = 1024, 1024 ** 2, 1024 ** 3    # 字节数一律按 1024 进位（论文的“800 KB”“12 GB”也是）
# ---- 设置（演示运行时才读）----
GPUS = (("A800 80GB", 81_920 * MiB), ("H200 141GB", 143_771 * MiB))   # (名字, 显存字节数)：nvidia-smi 显示的
GPU_MEM_UTIL = 0.9       # 显存里给"权重 + KV"用的比例（vLLM 的 gpu_memory_utilization 默认 0.9）
TP_GPUS = 8              # 演示 1：LLaMA2-70B 用几张卡张量并行（每张分到同样多的 KV 头）
N_REQUESTS = 400         # 演示 2、4：一开始就全部排队的请求数
SEQ_SEED = 0             # 演示 2、4：请求长度的随机种子
LEN_SIGMA = 1.0          # 演示 2、4：长度的对数正态分布的 σ（越大，长短越悬殊）
MAX_SEQ = 2048           # 演示 2、4：一个请求最长几个 token（OPT 的上限；Orca (Max) 按它预留）
KV_POOL_GIB = 12         # 演示 2、4：KV 池多大（GiB）：vLLM 论文表 1 里 OPT-13B 在 A100 40GB 上的 "12 GB"
BLOCK_SIZE = 16          # 演示 2、4：分页的块大小（token；vLLM 的默认值）
GQA_GROUPS = 8           # 演示 3：GQA 有几组 K、V（要整除 40 个查询头）
MLA_KV_LORA_RANK = 512   # 演示 3：MLA 每层存的压缩向量 c_KV 的维数 d_c（DeepSeek-V2 的 kv_lora_rank）
MLA_ROPE_DIM = 64        # 演示 3：MLA 每层另存的带 RoPE 的 key 的维数 d_h^R（DeepSeek-V2：qk_rope_head_dim）
SWAP_LEN = 512           # 演示 4：被抢占的序列已有几个 token
SWAP_BLOCK_SIZES = (1, 4, 16, 64, 256)   # 演示 4：比较的块大小（token），每个一行
PCIE_GBPS = (16.0, 25.0, 32.0)  # 演示 4：每张卡 CPU↔GPU 的带宽（GB/s），每个一列：我们的假设（见演示 4 的表注）
COPY_OVERHEAD_US = 10.0  # 演示 4：每次拷贝的固定开销（µs）：我们的假设，只取量级
MFU = 0.6                # 演示 4：重算时能达到峰值算力的比例：我们的假设
# ---- 模型（公开的 config.json；参数个数用来算 fp16 权重）和论文的数（只用来对照）----
GPT2_SMALL = ModelSpec("GPT-2 small", n_layers=12, d_model=768, n_heads=12, n_kv_heads=12, n_params=124e6)
OPT_13B = ModelSpec("OPT-13B", n_layers=40, d_model=5120, n_heads=40, n_kv_heads=40, n_params=13e9)
LLAMA2_7B = ModelSpec("LLaMA2-7B", n_layers=32, d_model=4096, n_heads=32, n_kv_heads=32, n_params=6.74e9)
LLAMA2_13B = ModelSpec("LLaMA2-13B", n_layers=40, d_model=5120, n_heads=40, n_kv_heads=40, n_params=13.0e9)
LLAMA3_8B = ModelSpec("LLaMA3-8B", n_layers=32, d_model=4096, n_heads=32, n_kv_heads=8, n_params=8.03e9)   # GQA
MODELS = (GPT2_SMALL, OPT_13B, LLAMA2_7B, LLAMA2_13B, LLAMA2_70B, LLAMA3_8B)
A100_TFLOPS = 312        # A100 的 bf16 稠密峰值（数据手册；FAST'25 表 1 的 A800 也是 312）
SHAREGPT_MEANS = (161.31, 337.99)   # vLLM 论文图 11(a)：ShareGPT 的平均输入、输出长度
VLLM_FIG2 = {"Orca (Max)": "20.4%", "Orca (Pow2)": "26.8%", "Orca (Oracle)": "38.2%", "vLLM": "96.3%"}  # 图 2：token 状态
DS67_KV = 95 * 8 * 128 * 2 * 2          # DeepSeek 67B 的 config.json：95 层 × 8 个 KV 头 × 128 维 × K、V × 2 字节
DSV2_KV_6BIT = 60 * (512 + 64) * 6 / 8  # DeepSeek-V2：60 层 × (d_c + d_h^R)，§3.2.3 部署时 KV 平均 6 bit


def kib(nbytes):
    """KiB，至多两位小数、不留多余的 0：kib(46080) == '45'，kib(23040) == '22.5'。"""
    return show.num(nbytes / KiB, 2).rstrip("0").rstrip(".")


def gpu_headers():
    """GPU 列的表头：'A800 token 数'（名字的第一个词；两种卡的第一个词相同时用全名）。"""
    short = [g.split()[0] for g, _ in GPUS]
    return [f"{n} token 数" for n in (short if len(set(short)) == len(short) else [g for g, _ in GPUS])]


def tokens_fit(model, kv_bytes, hbm_bytes, n_gpus=1):
    """n_gpus 张卡各用 GPU_MEM_UTIL 的显存，放完 fp16 权重（每个参数 2 字节）能放几个 token；'-'：放不下。"""
    free = n_gpus * hbm_bytes * GPU_MEM_UTIL - model.n_params * 2
    return show.num(free // kv_bytes) if free > 0 else "-"


def demo_bytes_per_token():
    """一个 token 的 KV 有多大？一张卡放完 fp16 权重，还能放多少个 token？"""
    rows = {}
    for m, n in [(m, 1) for m in MODELS] + [(LLAMA2_70B, TP_GPUS)]:
        kind = "MHA" if m.n_kv_heads == m.n_heads else "GQA"
        kv = kv_bytes_per_token(kind, m.n_layers, m.n_heads, m.head_dim, n_kv_heads=m.n_kv_heads)
        name = m.name if n == 1 else f"{m.name} ×{n} 张"
        rows[name] = [name, f"{m.n_layers}×{m.n_kv_heads}×{m.head_dim}", kib(kv), show.num(m.n_params * 2 / GiB, 1)]
        rows[name] += [tokens_fit(m, kv, cap, n) for _, cap in GPUS]
    headers = ["模型", "形状", "KV KiB", "权重 GiB"] + gpu_headers()
    gpus = " / ".join(g for g, _ in GPUS)
    caption = (f"形状 = 层 × KV 头 × 头维度；KV 头少于查询头的（{LLAMA3_8B.n_kv_heads}）是 GQA：几个查询头共用一组 K、V，"
               f"见演示 3。KV：每个 token，fp16。token 数：一张 {gpus}（名字后是显存）用 {show.pct(GPU_MEM_UTIL)} 的"
               f"显存、放完 fp16 权重后能放的 token；×{TP_GPUS} 张：张量并行，每层平分到 {TP_GPUS} 张卡上；- = 放不下权重。"
               "LLaMA2-70B 按标称 70B 个参数（发布的 68.98B 个、128.5 GiB）。论文（会议名'年份）：vLLM（SOSP'23，"
               "分页管理 KV 的服务系统）；Mooncake（FAST'25，Kimi 的服务系统）§5.3.1：同形状的 LLaMA3-70B 每个 token "
               "写作“320 KB”。")
    show.table(headers, list(rows.values()), caption)
    opt, l70, tp, gpu0 = rows[OPT_13B.name], rows[LLAMA2_70B.name], rows[f"{LLAMA2_70B.name} ×{TP_GPUS} 张"], GPUS[0][0]
    per_request = int(show.value(opt[4]) // 2048) if opt[4] != "-" else 0    # 放得下几个 2,048 token 的请求
    show.claim(f"OPT-13B 每个 token 的 KV 是 {opt[2]} KiB，2,048 个 token（OPT 的上限）的请求要 "
               f"{show.size(show.value(opt[2]) * KiB * 2048)}（vLLM 论文 §3：“800 KB”、“1.6 GB”）；一张 {gpu0} 放完权重"
               f"还能放 {opt[4]} 个 token，只够 {per_request} 个这样的请求：批能开多大，是 KV 的显存说了算。",
               1 <= per_request < 100, f"一张 {gpu0} 放完 OPT-13B 的权重能放的 token：{opt[4]}")
    show.claim(f"LLaMA2-70B 的 fp16 权重 {l70[3]} GiB，一张 {' 或 '.join(g for g, _ in GPUS)} 都放不下；"
               f"{TP_GPUS} 张 {gpu0} 张量并行，放完权重还能放 {tp[4]} 个 token。",
               all(c == "-" for c in l70[4:]) and tp[4] != "-", f"LLaMA2-70B：{'、'.join(l70[4:])}；×{TP_GPUS}：{tp[4]}")
    return dict(headers=headers, rows=rows, caption=caption)


def simulate():
    """演示 2、4 的负载：(输入长度, 输出长度, KV 池能放几个 OPT-13B 的 token)。"""
    prompts, outputs = make_lengths(N_REQUESTS, SEQ_SEED, SHAREGPT_MEANS, LEN_SIGMA, MAX_SEQ)
    return prompts, outputs, int(KV_POOL_GIB * GiB) // OPT_13B.kv_bytes_per_token()


def demo_fragmentation():
    """每个请求按最大长度预留一段连续显存，KV 池（显存里放 KV 的部分）里真正存着 token 的有多少？按需分配小块（分页）呢？"""
    prompts, outputs, pool = simulate()
    runs = {f"Orca ({k})": simulate_contiguous(k, prompts, outputs, pool, MAX_SEQ) for k in ("Max", "Pow2", "Oracle")}
    runs["vLLM"] = simulate_paged(prompts, outputs, pool, BLOCK_SIZE)[:2]
    paper = (N_REQUESTS, SEQ_SEED, LEN_SIGMA, MAX_SEQ, KV_POOL_GIB, BLOCK_SIZE) == (400, 0, 1, 2048, 12, 16)  # 都是默认值
    headers, rows = ["系统", "存着 token", "论文", "预留", "内部碎片", "外部/空闲", "平均并发"], {}
    for name, (share, running) in runs.items():
        cells = ["-"] * 5 if share is None else [show.pct(x, 1) for x in share] + [show.num(running, 1)]
        rows[name] = [name, cells[0], VLLM_FIG2[name] if paper else "-"] + cells[1:]
    source = "vLLM 论文表 1 写作 \"12 GB\"、15.7K 个位置" if KV_POOL_GIB == 12 else "你设的值"
    figure = "论文列：vLLM 图 2 里存着 token 的比例（§6.2 实验的平均）" if paper else "论文列（vLLM 图 2）只在演示 2 的设置都是默认值时并排"
    caption = (f"KV 池 {KV_POOL_GIB:g} GiB = {show.num(pool)} 个 OPT-13B 的 token（{source}）；"
               f"{show.num(N_REQUESTS)} 个请求一开始就排队，长度仿 ShareGPT（网友分享的 ChatGPT 对话；种子 {SEQ_SEED}）。"
               "各列占 KV 池的比例，满载（还有请求在排队）时的时间平均：预留 = 分给请求、留给它以后的 token；内部碎片 = 分出去了、到结束也"
               "用不上；外部/空闲 = 没分出去的空隙。平均并发 = 平均同时在跑几个请求；- = 从没满载。Orca（OSDI'22，"
               f"vLLM §6.1 的基线）给每个请求预留一段连续的位置：(Max) {show.num(MAX_SEQ)} 个；(Pow2) 输入 + 不小于输出长度"
               f"的最小 2 的幂；(Oracle) 输入 + 输出。vLLM：分页，每块 {BLOCK_SIZE} 个 token，用到才分。{figure}。")
    show.table(headers, list(rows.values()), caption)
    mx, pg, stored = rows["Orca (Max)"], rows["vLLM"], [rows[k][1] for k in runs]
    show.claim(f"KV 池里存着 token 的比例：分页（每块 {BLOCK_SIZE} 个 token）{pg[1]}，Orca (Max) 只有 {mx[1]}；平均同时在跑 {pg[-1]} "
               f"个请求对 {mx[-1]} 个：按需分小块，同样的显存能同时跑更多请求。", "-" not in (mx[1], pg[1])
               and show.value(pg[1]) > show.value(mx[1]) and show.value(pg[-1]) > show.value(mx[-1]),
               f"存着 token：分页 {pg[1]}，Orca (Max) {mx[1]}；平均并发 {pg[-1]} 对 {mx[-1]}")
    same = "，和 vLLM 论文图 2 的顺序一样" if paper else ""
    show.claim("预留得越准，存着 token 的比例越高：" + " < ".join(f"{k} {c}" for k, c in zip(runs, stored)) + same + "。",
               "-" not in stored and all(show.value(a) < show.value(b) for a, b in zip(stored, stored[1:])),
               "存着 token：" + "，".join(f"{k} {c}" for k, c in zip(runs, stored)))
    return dict(headers=headers, rows=rows, caption=caption)


def demo_smaller_kv():
    """同一个模型形状，换一种注意力、或把 KV 存成 FP8，每个 token 的 KV 能小多少？一张卡能多放多少 token？"""
    m, rows, kv = LLAMA2_13B, {}, {}      # kv：名字 → [bf16 的字节数, FP8 的字节数]
    for name, kind in (("MHA", "MHA"), (f"GQA-{GQA_GROUPS}", "GQA"), ("MQA", "MQA"), ("MLA", "MLA")):
        kv[name] = [kv_bytes_per_token(kind, m.n_layers, m.n_heads, m.head_dim, n_kv_heads=GQA_GROUPS, dtype_bytes=b,
                                       kv_lora_rank=MLA_KV_LORA_RANK, rope_dim=MLA_ROPE_DIM) for b in (2, 1)]
        rows[name] = [name, show.num(kv[name][0] // (2 * m.n_layers)), kib(kv[name][0]), kib(kv[name][1]),
                      show.pct(kv[name][0] / kv["MHA"][0], 1)] + [tokens_fit(m, kv[name][0], cap) for _, cap in GPUS]
    headers = ["方式", "每层几个数", "KV KiB", "FP8 KiB", "相对 MHA"] + gpu_headers()
    caption = (f"MHA（多头注意力）：每个查询头一组 K、V；GQA-{GQA_GROUPS}（分组查询注意力）：查询头分成 {GQA_GROUPS} 组，"
               f"每组共用一组 K、V；MQA（多查询注意力）：全部查询头共用一组；MLA（DeepSeek-V2 的多头潜在注意力）：每层只存"
               f"一个 {MLA_KV_LORA_RANK} 维的压缩向量和一个 {MLA_ROPE_DIM} 维、带位置编码的 K。形状取 {m.name}（"
               f"{m.n_layers} 层、{m.n_heads} 个查询头 × {m.head_dim} 维）。每层几个数：每层每个 token 存几个数；KV 按 bf16"
               "（和 fp16 一样 2 字节），FP8：每个数 1 字节；token 数同演示 1。DeepSeek-V2 表 1：能力 MHA 强、GQA 中、"
               "MQA 弱、MLA 更强；摘要说 KV 比 DeepSeek 67B 少 93.3%：按两者公开的配置，"
               f"{show.size(DS67_KV)} 对 MLA 的 {show.size(DSV2_KV_6BIT)}（量化到平均 6 bit），"
               f"正是少 {show.pct(1 - DSV2_KV_6BIT / DS67_KV, 1)}。")
    show.table(headers, list(rows.values()), caption)
    mha, gqa, mqa, mla, gpu = rows["MHA"], rows[f"GQA-{GQA_GROUPS}"], rows["MQA"], rows["MLA"], GPUS[-1][0]
    show.claim(f"MLA 每层只存 {mla[1]} 个数，每个 token {mla[2]} KiB，是 MHA 的 {mla[4]}：一张 {gpu} 能放的"
               f" token 从 {mha[-1]} 个变成 {mla[-1]} 个。", "-" not in (mha[-1], mla[-1])
               and show.value(mla[2]) < show.value(mha[2]) and show.value(mla[-1]) > show.value(mha[-1]),
               f"每个 token：MLA {mla[2]} KiB，MHA {mha[2]} KiB；一张 {gpu}：MLA {mla[-1]}，MHA {mha[-1]}")
    paper = "；DeepSeek-V2 §2.1.4 表 1 也说 2.25 组" if (MLA_KV_LORA_RANK, MLA_ROPE_DIM) == (512, 64) else ""
    show.claim(f"MLA 每层的 {mla[1]} 个数比 GQA-{GQA_GROUPS} 每层的 {gqa[1]} 个还少，相当于 "
               f"{show.num(show.value(mla[1]) / show.value(mqa[1]), 2)} 组 K、V（一组 = MQA 行的 {mqa[1]} 个数）{paper}。",
               show.value(mla[1]) < show.value(gqa[1]), f"每层几个数：MLA {mla[1]}，GQA-{GQA_GROUPS} {gqa[1]}")
    return dict(headers=headers, rows=rows, caption=caption)


def demo_preemption():
    """显存不够、要抢占一个请求时，重算它的 KV 快，还是把 KV 换到 CPU 内存、轮到它时再换回来快？"""
    m, flops, us = OPT_13B, A100_TFLOPS * 1e12 * MFU, COPY_OVERHEAD_US
    recompute = m.prefill_flops(SWAP_LEN) / flops        # FAST'25 式 1：l·(a·n²·d + b·n·d²)
    rows = {b: [str(b), show.num(swap_seconds(m, SWAP_LEN, b, 1, us)[0]), show.num(recompute * 1e3, 1)]
            + [show.num(2 * swap_seconds(m, SWAP_LEN, b, g, us)[1] * 1e3, 1) for g in PCIE_GBPS]   # 来回 = 2 × 换出
            for b in SWAP_BLOCK_SIZES}
    headers = ["块大小", "拷贝数", "重算 ms"] + [f"{g:g} GB/s 来回 ms" for g in PCIE_GBPS]
    fast25 = "（16 = FAST'25 表 1 整机的 128 GB/s ÷ 8 卡；25–32 ≈ 独占 PCIe 4.0 ×16）" if PCIE_GBPS == (16, 25, 32) else ""
    cut = simulate_paged(*simulate(), BLOCK_SIZE)[2]      # 演示 2 的负载：[(请求号, 被抢占时已有几个 token)]
    all_recompute = show.num(sum(m.prefill_flops(n) for _, n in cut) / flops, 1)
    all_swap = show.num(sum(2 * swap_seconds(m, n, BLOCK_SIZE, PCIE_GBPS[0], us)[1] for _, n in cut), 1)
    n_cut, n_req = show.num(len(cut)), show.num(len({r for r, _ in cut}))
    mean_len = show.num(sum(n for _, n in cut) / len(cut)) if cut else "-"
    caption = (f"{m.name}、一张 A100（vLLM 论文用的 GPU）、一条 {show.num(SWAP_LEN)} token 的序列被抢占（显存不够时暂停它、腾出它的 KV）。"
               "块大小：每块几个 token。"
               f"重算 = Mooncake FAST'25 式 1 的计算量 l(an²d + bnd²)（l 层、n 个 token、隐藏维度 d；注意力项和线性层项的系数 "
               f"a = {EQ1_A}、b = {EQ1_B} 取自它的表 1）÷（峰值 {A100_TFLOPS} TFLOPS × {show.pct(MFU)}），与块大小无关；来回 = 换出到 CPU 内存"
               f"再换回，每层 K、V 每块各拷一次（拷贝数）：每次 {COPY_OVERHEAD_US:g} µs + 字节 ÷ 带宽。{show.pct(MFU)}、"
               f"{COPY_OVERHEAD_US:g} µs 和带宽都是我们的假设{fast25}。vLLM §7.3：块 16–64 时两者端到端相当。"
               f"演示 2 的负载下，分页（每块 {BLOCK_SIZE} 个 token）抢占 {n_cut} 次（{n_req} 个请求），被抢占时平均已有 "
               f"{mean_len} 个 token：合计重算 {all_recompute} s，{PCIE_GBPS[0]:g} GB/s 来回 {all_swap} s。")
    show.table(headers, list(rows.values()), caption)
    show.claim(f"演示 2 的负载下，分页抢占了 {n_cut} 次（{n_req} 个请求）：全部重算合计 {all_recompute} s，"
               f"全部换出再换回（{PCIE_GBPS[0]:g} GB/s）合计 {all_swap} s，重算更快。",
               len(cut) > 0 and show.value(all_recompute) < show.value(all_swap),
               f"抢占 {n_cut} 次，重算 {all_recompute} s，换出再换回 {all_swap} s")
    one, big = rows[SWAP_BLOCK_SIZES[0]], rows[SWAP_BLOCK_SIZES[-1]]
    show.claim(f"块小时重算更快，块大时换出再换回更快（vLLM §7.3）：{PCIE_GBPS[0]:g} GB/s 时，块 {one[0]} 重算 {one[2]} ms、"
               f"来回 {one[3]} ms；块 {big[0]} 重算 {big[2]} ms、来回 {big[3]} ms。",
               show.value(one[2]) < show.value(one[3]) and show.value(big[2]) > show.value(big[3]),
               f"块 {one[0]}：重算 {one[2]} ms，来回 {one[3]} ms；块 {big[0]}：重算 {big[2]} ms，来回 {big[3]} ms")
    return dict(headers=headers, rows=rows, caption=caption)


DEMOS = [("演示 1：每个 token 的 KV 有多大，一张卡放得下多少", demo_bytes_per_token),
         ("演示 2：连续预留（Orca）与分页（vLLM）：放 KV 的显存里多少存着 token", demo_fragmentation),
         ("演示 3：少存几组 K、V（GQA、MQA、MLA）或存成 FP8：让每个 token 的 KV 变小", demo_smaller_kv),
         ("演示 4：抢占时重算，还是换出到 CPU 内存再换回", demo_preemption)]


def check_settings():
    """每个设置一行检查：不合理的值一行拒绝（设置、值、允许的范围），退出码 2，在任何演示输出之前。"""
    show.check("GPUS", GPUS, isinstance(GPUS, tuple) and 0 < len(GPUS) < 3 and all(isinstance(g, tuple) and len(g) == 2
               and isinstance(g[0], str) and 0 < len(g[0]) < 13 and show.is_int(g[1], GiB, 2 ** 50) for g in GPUS)
               and len({g[0] for g in GPUS}) == len(GPUS), " 1–2 种 (名字, 显存字节数)，名字不同、≤ 12 字，1 GiB–1 PiB")
    show.check("GPU_MEM_UTIL", GPU_MEM_UTIL, show.is_number(GPU_MEM_UTIL, 0.01, 1), " 0.01 到 1 之间的数")
    show.check("TP_GPUS", TP_GPUS, show.is_int(TP_GPUS, 2, 8) and 8 % TP_GPUS == 0, " 2、4 或 8（平分 8 个 KV 头）")
    show.check("N_REQUESTS", N_REQUESTS, show.is_int(N_REQUESTS, 1, 10_000), " 1 到 10,000 的整数")
    show.check("SEQ_SEED", SEQ_SEED, show.is_int(SEQ_SEED, 0, 2 ** 32 - 1), " 0 到 2³² − 1 的整数")
    show.check("LEN_SIGMA", LEN_SIGMA, show.is_number(LEN_SIGMA, 0, 3), " 0 到 3 之间的数")
    show.check("MAX_SEQ", MAX_SEQ, show.is_int(MAX_SEQ, 2, 65_536), " 2 到 65,536 的整数")
    show.check("BLOCK_SIZE", BLOCK_SIZE, show.is_int(BLOCK_SIZE, 1, MAX_SEQ), f" 1 到 MAX_SEQ（{MAX_SEQ}）的整数")
    need = -(-MAX_SEQ // BLOCK_SIZE) * BLOCK_SIZE * OPT_13B.kv_bytes_per_token() / GiB     # 最长的请求要几 GiB
    show.check("KV_POOL_GIB", KV_POOL_GIB, show.is_number(KV_POOL_GIB, need, 1024), f" {need:.2f} 到 1,024 的数（GiB）")
    show.check("GQA_GROUPS", GQA_GROUPS, show.is_int(GQA_GROUPS, 1, 40) and 40 % GQA_GROUPS == 0, "能整除 40 的正整数")
    show.check("MLA_KV_LORA_RANK", MLA_KV_LORA_RANK, show.is_int(MLA_KV_LORA_RANK, 1, 65_536), " 1 到 65,536 的整数")
    show.check("MLA_ROPE_DIM", MLA_ROPE_DIM, show.is_int(MLA_ROPE_DIM, 0, 65_536), " 0 到 65,536 的整数")
    show.check("SWAP_LEN", SWAP_LEN, show.is_int(SWAP_LEN, 1, 65_536), " 1 到 65,536 的整数")
    show.check("SWAP_BLOCK_SIZES", SWAP_BLOCK_SIZES, show.is_ints(SWAP_BLOCK_SIZES, 1, 65_536), "从小到大、不重复的整数（1–65,536）")
    show.check("PCIE_GBPS", PCIE_GBPS, isinstance(PCIE_GBPS, tuple) and 1 <= len(PCIE_GBPS) <= 3 and all(show.is_number(
               g, 0.1, 10_000) for g in PCIE_GBPS) and all(a < b for a, b in zip(PCIE_GBPS, PCIE_GBPS[1:])),
               " 1–3 个从小到大、不重复的 0.1 到 10,000 的数（GB/s）")
    show.check("COPY_OVERHEAD_US", COPY_OVERHEAD_US, show.is_number(COPY_OVERHEAD_US, 0, 10_000), " 0 到 10,000 的数（µs）")
    show.check("MFU", MFU, show.is_number(MFU, 0.01, 1), " 0.01 到 1 之间的数")


def main(argv=None):
    args = show.parser(__doc__, DEMOS).parse_args(argv)
    check_settings()
    show.run(DEMOS, args)


if __name__ == "__main__":
    show.quietly(main)
