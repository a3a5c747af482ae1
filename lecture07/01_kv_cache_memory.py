"""CS349E · 第 7 讲 · 01_kv_cache_memory.py —— 为什么 KV 缓存的显存是推理的瓶颈？

【问题】解码时每个 token 的 K/V 都要留在显存里，直到请求结束。那么：一个 token 的 KV 有多大？
一张卡放完权重以后还能放多少 token？如果像早期系统那样给每个请求按最大长度"预留"一段连续显存，
真正存着 token 的显存有多少？按需分配的小块（分页）又能到多少？

  演示 1：真实模型每个 token 的 KV 字节数，以及一张 GPU（默认 A800 80GB、H200 141GB）放完 fp16 权重后
          能放多少 token。
  演示 2：连续预分配（Orca 的 Max / Pow2 / Oracle 三种预留）与按块（默认 16 个 token 一块）分页，
          在 ShareGPT 式的长度分布下模拟：显存里真正存着 token 状态的比例（对照 vLLM 论文图 2）。

【运行】python lecture07/01_kv_cache_memory.py          （不到 1 秒，2 核笔记本，不需要 GPU）
        python lecture07/01_kv_cache_memory.py --demo 2 （只跑演示 2）
【依赖】numpy、rich；本目录的 kv_store（ModelSpec、LLAMA2_70B）、paged_kv（n_blocks）；lab_common 的 console。

【试一试】改下面"学生可以改的设置"里的一个值，再运行（不合理的值会被一行拒绝，并说明允许的范围）：
  1. 把 `GPU_MEM_UTIL` 改成 1.0：一张 H200 放得下 LLaMA2-70B 的 fp16 权重了吗？一张 A800 呢？
  2. 把 `BLOCK_SIZE` 改成 1 和 128（--demo 2）：分页时的内部碎片和平均并发怎样变？
  3. 把 `N_REQUESTS` 改成 20（--demo 2）：服务器还会满载吗？表里哪几行没有数，为什么？
  4. 把 `GPUS` 换成 `(("A100 40GB", 40_960 * MiB),)`：一张 A100 40GB 放得下几个 LLaMA2-13B 的 token？
"""
import heapq
import os
import sys
from collections import deque

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # 仓库根目录：让 lab_common 包可以 import
from lab_common.console import fmt_int, print_header, print_observations, print_table, print_text  # noqa: E402
from lab_common.script_tools import run_demos  # noqa: E402
from lab_common.settings import check_setting, is_int, is_number  # noqa: E402
from kv_store import LLAMA2_70B, ModelSpec  # noqa: E402
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
LEN_SIGMA = 1.0          # 长度的对数正态分布的 σ（越大尾巴越长）

# ---- 论文的数字（只用来对照，标明出处）----
SHAREGPT_MEAN = (161.31, 337.99)    # vLLM 论文（SOSP'23）图 11(a)：ShareGPT 平均输入 / 输出长度
VLLM_FIG2 = {"Orca (Max)": 20.4, "Orca (Pow2)": 26.8, "Orca (Oracle)": 38.2, "vLLM": 96.3}   # 图 2：token 状态占比 %
VLLM_TABLE1_KV_GB = 12              # vLLM 论文表 1：OPT-13B 在 A100 40GB 上留给 KV 的 12 GB
VLLM_TABLE1_SLOTS = 15.7e3          # vLLM 论文表 1：OPT-13B、A100 40GB、KV 12 GB → 最多 15.7K 个 KV slot
VLLM_REQ_GB = 1.6                   # vLLM 论文 §3：OPT-13B 一个 2048 token 的请求的 KV 可达 1.6 GB


# =============================================================================
def tokens_that_fit(model, hbm_bytes, util, n_gpus=1):
    """n_gpus 张卡（张量并行，权重和 KV 平均切开）放完 fp16 权重后还能放几个 token 的 KV；放不下权重返回 None。"""
    free = n_gpus * hbm_bytes * util - model.n_params * model.dtype_bytes
    if free <= 0:
        return None
    return int(free // model.kv_bytes_per_token())


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
        return head + "所以一张卡都放不下；"
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
    释放它的块、放回队首，再进来时已生成的 token 当作输入重算）。返回与 simulate_contiguous 相同的 (占比, 平均并发)。"""
    total = pool // block_size    # 池里一共几个块
    free = total
    queue = deque((int(p), int(o)) for p, o in zip(prompts, outputs))
    run = []                      # [当前长度, 剩余要生成的 token 数]，按进入的先后
    acc = np.zeros(4)
    steps, running = 0, 0
    while queue or run:
        while queue:              # 放得下输入（再加下一个 token 的一块）就进来
            p, o = queue[0]
            need = n_blocks(p + 1, block_size)
            if need > free:
                break
            queue.popleft()
            free -= n_blocks(p, block_size)
            run.append([p, o])
        if queue:
            tok = sum(L for L, _ in run)
            held = total - free
            acc += (tok, 0, held * block_size - tok, free * block_size)
            running += len(run)
            steps += 1
        i = 0                     # 解码一步
        while i < len(run):
            L, left = run[i]
            if L % block_size == 0:    # 写满了：要一个新块
                while free == 0:  # 没有空闲块：抢占最后进来的那个
                    L2, left2 = run.pop()
                    free += n_blocks(L2, block_size)
                    queue.appendleft((L2, left2))
                if i >= len(run):
                    break
                free -= 1
            run[i][0] += 1
            run[i][1] -= 1
            if run[i][1] == 0:
                free += n_blocks(run[i][0], block_size)
                run.pop(i)
                continue
            i += 1
    if steps == 0:
        return None, None
    return acc / (steps * pool), running / steps


def kv_pool_tokens():
    """KV 池能放几个 OPT-13B 的 token：KV_POOL_GIB GiB // 每个 token 的 KV 字节数。"""
    return int(KV_POOL_GIB * GiB) // OPT_13B.kv_bytes_per_token()


def pool_source():
    """KV 池大小的出处：只有取论文的值时才说是论文的。"""
    if KV_POOL_GIB == VLLM_TABLE1_KV_GB:
        return "（vLLM 论文表 1：OPT-13B 在 A100-40GB 上的 KV 空间）"
    return f"（vLLM 论文表 1 是 {VLLM_TABLE1_KV_GB} GB，这里改成了 {KV_POOL_GIB} GiB）"


def demo2_fragmentation():
    """按最大长度预留连续显存，真正存着 token 的显存占多少？分页能到多少？"""
    print_header(f"演示 2：连续预分配与分页（块 {BLOCK_SIZE}）——显存里有多少真正存着 token 的状态（vLLM 论文图 2）")
    prompts, outputs = make_lengths(N_REQUESTS)
    pool = kv_pool_tokens()
    print_text(f"设置：OPT-13B，KV 池 = {KV_POOL_GIB} GiB / {OPT_13B.kv_bytes_per_token() // KiB} KiB = "
               f"{fmt_int(pool)} 个 token{pool_source()}；{N_REQUESTS} 个请求开始时全部排队"
               f"（种子 {SEQ_SEED}），输入 / 输出长度是对数正态（σ={LEN_SIGMA}），平均 {prompts.mean():.0f} / "
               f"{outputs.mean():.0f}（论文 ShareGPT：{SHAREGPT_MEAN[0]:.0f} / {SHAREGPT_MEAN[1]:.0f}），"
               f"总长不超过 {MAX_SEQ}。每步每个请求生成一个 token；只统计队列里还有人等的那些步。")
    res = {}
    for kind in ("Max", "Pow2", "Oracle"):
        res[f"Orca ({kind})"] = simulate_contiguous(kind, prompts, outputs, pool)
    res["vLLM"] = simulate_paged(prompts, outputs, pool)
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


DEMOS = {1: demo1_bytes_per_token, 2: demo2_fragmentation}


def main(argv=None):
    check_settings()
    return run_demos(DEMOS, "第 7 讲 · KV 缓存的显存为什么是瓶颈", argv)


if __name__ == "__main__":
    sys.exit(main())
