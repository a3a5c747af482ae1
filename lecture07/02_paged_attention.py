"""CS349E · 第 7 讲 · 02_paged_attention.py —— PagedAttention：KV 不连续地存，注意力还算得对吗？块该多大？

【问题】01 脚本说明了：按最大长度预留连续显存，大部分都浪费了。vLLM 的办法是像操作系统的虚拟内存
那样分页：KV 池切成固定大小的物理块，每条序列有一张块表（逻辑块 → 物理块），写满一块才分配下一块。
那么：块表长什么样？按块表把 KV 拼回来做注意力，结果和连续存放的一样吗？块取多大合适？

  演示 1：三条长度不同的序列交替解码，逐步看块表怎样按需增长、物理块怎样交错。
  演示 2：同一批序列逐 token 解码，paged_step 与连续 KVCache 的 forward 逐位比较 logits。
  演示 3：块大小 1–128 的取舍：最后一块的浪费、块表长度、gather 的开销（对照 vLLM 论文 §7.2）。

【运行】python lecture07/02_paged_attention.py          （约 1–2 秒，2 核笔记本，不需要 GPU）
        python lecture07/02_paged_attention.py --demo 3 （只跑演示 3）
        LAB_NO_TIMING=1 python lecture07/02_paged_attention.py   （计时一栏打印 "-"：两次输出逐字节相同）
【依赖】numpy、rich；本目录的 paged_kv；lab_common 的 transformer_lab、console。
"""
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # 仓库根目录：让 lab_common 包可以 import
from lab_common.console import fmt_int, print_header, print_observations, print_table, print_text  # noqa: E402
from lab_common.script_tools import run_demos  # noqa: E402
from paged_kv import BlockPool, PagedSequence, gather_kv, n_blocks, paged_step  # noqa: E402
from lab_common.transformer_lab import TINY, KVCache, config_like, forward, init_params  # noqa: E402

# ---- 学生可以改的设置 ----
MODEL_SEED = 0                       # 小模型权重的随机种子
PROMPT_SEED = 1                      # 随机输入 token 的种子
WALK_BLOCK_SIZE = 4                  # 演示 1 的块大小（小一点，块表才看得清）
WALK_PROMPTS = {"A": 6, "B": 3, "C": 9}   # 演示 1：三条序列的输入长度
WALK_DECODE = 4                      # 演示 1：每条序列再解码几个 token
EQ_PROMPTS = (3, 7, 12, 20)          # 演示 2：一批序列的输入长度
EQ_DECODE = 12                       # 演示 2：逐 token 解码几步
EQ_BLOCK_SIZE = 4                    # 演示 2 的块大小
BLOCK_SIZES = (1, 4, 8, 16, 32, 64, 128)   # 演示 3 比较的块大小
LEN_SEED = 0                         # 演示 3 长度分布的种子
N_LENGTHS = 10_000                   # 演示 3 抽多少条序列的长度
TIME_LEN = 200                       # 演示 3 计时：序列已有的长度
TIME_DECODE = 16                     # 演示 3 计时：解码几步
TIME_REPEAT = 3                      # 演示 3 计时：重复几次取最快的一次
NO_TIMING = bool(os.environ.get("LAB_NO_TIMING"))   # 设了 LAB_NO_TIMING=1：不计时，计时栏打印 "-"

# ---- 论文的数字（只用来对照，标明出处）----
LENGTH_MEANS = {"ShareGPT": (161.31, 337.99), "Alpaca": (19.31, 58.45)}   # vLLM 论文图 11：平均输入 / 输出长度
VLLM_DEFAULT_BLOCK = 16              # vLLM 论文 §7.2：默认块大小 16
VLLM_BEST_SHAREGPT = (16, 128)       # vLLM 论文 §7.2：ShareGPT 上 16–128 最好（Alpaca 上 16、32 好，更大明显变差）


def blocks_str(seq):
    return "[" + " ".join(str(b) for b in seq.blocks) + "]"


# =============================================================================
def demo1_block_table():
    """块表长什么样？块是怎样按需分配的？"""
    block_size = WALK_BLOCK_SIZE
    print_header(f"演示 1：三条序列的块表——块大小 {block_size}，写满一块才分配下一块")
    cfg = config_like(TINY, max_seq=32)
    params = init_params(cfg, seed=MODEL_SEED)
    rng = np.random.default_rng(PROMPT_SEED)
    pool = BlockPool(cfg, n_blocks=12, block_size=block_size)
    seqs = {n: PagedSequence(pool) for n in WALK_PROMPTS}
    last = {}
    rows, events = [], []

    def snapshot(step, what):
        rows.append([step, what] + [f"{blocks_str(s)} {s.length}" for s in seqs.values()] + [pool.num_free])

    for n, plen in WALK_PROMPTS.items():            # 依次 prefill：每条序列一次写入整段输入
        before = list(seqs[n].blocks)
        last[n] = paged_step(params, cfg, [seqs[n]], [rng.integers(0, cfg.vocab, plen)])[0][-1]
        events.append((f"prefill {n}", n, [b for b in seqs[n].blocks if b not in before]))
        snapshot(f"prefill {n}", f"+{len(seqs[n].blocks) - len(before)} 块")
    for t in range(1, WALK_DECODE + 1):             # 一起解码：每条序列各写一个 token（贪心取下一个 token）
        before = {n: list(s.blocks) for n, s in seqs.items()}
        names = list(seqs)
        outs = paged_step(params, cfg, [seqs[n] for n in names], [[int(np.argmax(last[n]))] for n in names])
        new = {n: [b for b in seqs[n].blocks if b not in before[n]] for n in names}
        for n, o in zip(names, outs):
            last[n] = o[-1]
            if new[n]:
                events.append((f"解码 {t}", n, new[n]))
        grown = ", ".join(f"{n} +{len(b)}" for n, b in new.items() if b)
        if not grown:
            grown = "不分配"
        snapshot(f"解码 {t}", grown)
    print_table(["步", "分配", *(f"{n} 块表 长度" for n in seqs), "空闲"], rows,
                caption="块表 [..] 里是物理块号，按逻辑块的顺序排列；后面的数是序列长度；空闲：块池里还剩几个块"
                        f"（一共 {pool.n_blocks} 个）。")
    rows = []
    for n, s in seqs.items():
        for i, b in enumerate(s.blocks):
            used = min(block_size, s.length - i * block_size)
            rows.append([n, i, b, f"{i * block_size}–{i * block_size + used - 1}", f"{used}/{block_size}"])
    print_table(["序列", "逻辑块", "物理块", "token 位置", "已用"], rows,
                caption="逻辑块 i 存第 i·B 到 (i+1)·B − 1 个 token 的 K/V；注意力时按块表把这些块拼回连续的 K/V"
                        "（paged_kv.gather_kv）。")
    decode_events = [e for e in events if e[0].startswith("解码")]
    first_grow = None
    if decode_events:
        first_grow = decode_events[0]
    d = dict(tables={n: list(s.blocks) for n, s in seqs.items()}, lengths={n: s.length for n, s in seqs.items()},
             alloc_order=[b for _, _, new in events for b in new],
             interleaved=any(sorted(s.blocks) != list(range(min(s.blocks), min(s.blocks) + len(s.blocks)))
                             for s in seqs.values()),
             waste=sum(len(s.blocks) * block_size - s.length for s in seqs.values()),
             total=sum(s.length for s in seqs.values()), first_grow=first_grow,
             n_decode_alloc=sum(len(b) for _, _, b in decode_events), n_free=pool.num_free, n_pool=pool.n_blocks,
             events=events, block_size=block_size, prompts=dict(WALK_PROMPTS), n_decode=WALK_DECODE,
             seeds=(MODEL_SEED, PROMPT_SEED))
    print_observations(observations_1(d))
    return d


def observations_1(d):
    """演示 1 的观察：每个数都取自 d（和上面两张表同一份数据）。"""
    block_size = d["block_size"]
    if d["interleaved"]:
        adjacent = "不一定相邻"
    else:
        adjacent = "恰好相邻"
    obs = [f"物理块按请求的先后从空闲表里取（{' '.join(map(str, d['alloc_order']))}），同一条序列的块"
           + adjacent + "：逻辑上连续、物理上分散，全靠块表对应。"]
    if d["first_grow"]:
        step, name, new = d["first_grow"]
        obs.append(f"只有最后一块已经写满、又要写下一个 token 时才分配新块：{step} 步时 {name} 的最后一块"
                   f"已满，拿到物理块 {new[0]}。解码 {d['n_decode']} 步、共写 {d['n_decode'] * len(d['tables'])} 个 token，"
                   f"只分配了 {d['n_decode_alloc']} 块。")
    else:
        obs.append("解码期间没有序列写满一块，没有分配新块。")
    n_used = sum(len(t) for t in d["tables"].values())
    obs.append(f"三条序列一共 {d['total']} 个 token，占 {n_used} 块 = {n_used * block_size} 个位置，"
               f"浪费的只是每条最后一块没写满的 {d['waste']} 个位置（每条最多 {block_size - 1} 个）。")
    return obs


# =============================================================================
def decode_both(params, cfg, prompts, n_decode, block_size):
    """同一批序列：分页版（一次 paged_step 处理整批）和连续版（每条一个 KVCache）各自逐 token 解码。

    下一个 token 取分页版 logits 的 argmax，两边喂同样的 token。返回每条序列所有步的 max |diff| 和块池。
    """
    max_len = max(len(p) for p in prompts) + n_decode
    pool = BlockPool(cfg, n_blocks=len(prompts) * n_blocks(max_len, block_size), block_size=block_size)
    seqs = [PagedSequence(pool) for _ in prompts]
    caches = [KVCache(cfg, 1) for _ in prompts]
    diff = np.zeros(len(prompts))
    feed = [np.asarray(p) for p in prompts]
    for _ in range(n_decode + 1):                     # 第一轮是 prefill，之后每轮一个 token
        outs = paged_step(params, cfg, seqs, feed)
        for i, (o, c) in enumerate(zip(outs, caches)):
            ref = forward(params, cfg, feed[i][None], cache=c)[0]
            diff[i] = max(diff[i], float(np.max(np.abs(o - ref))))
        feed = [np.array([int(np.argmax(o[-1]))]) for o in outs]
    return diff, seqs, pool


def fmt_diff(x):
    """max |diff| 的一格：恰好 0 打印 "0.0"，否则科学计数法。"""
    if x == 0:
        return "0.0"
    return f"{x:.1e}"


def demo2_equivalence():
    """按块表拼回来的 KV 做注意力，结果和连续存放的一样吗？"""
    print_header(f"演示 2：paged_step 与连续 KVCache 的 forward 逐位比较（{len(EQ_PROMPTS)} 条序列，"
                 f"块大小 {EQ_BLOCK_SIZE}，逐 token 解码 {EQ_DECODE} 步）")
    cfg = config_like(TINY, max_seq=max(EQ_PROMPTS) + EQ_DECODE)
    params = init_params(cfg, seed=MODEL_SEED)
    rng = np.random.default_rng(PROMPT_SEED)
    prompts = [rng.integers(0, cfg.vocab, n) for n in EQ_PROMPTS]
    diff, seqs, pool = decode_both(params, cfg, prompts, EQ_DECODE, EQ_BLOCK_SIZE)
    rows = [[i, len(p), s.length, len(s.blocks), blocks_str(s), fmt_diff(x)]
            for i, (p, s, x) in enumerate(zip(prompts, seqs, diff))]
    print_table(["序列", "输入", "最终长度", "块数", "块表", "最大差"], rows,
                caption="最大差：这条序列 prefill 和每一步解码的全部 logits 与连续版的 max |diff|。"
                        f"模型：第 2 讲的 TINY（float64，max_seq={cfg.max_seq}，权重种子 {MODEL_SEED}）。")
    d = dict(diff=diff, worst=float(diff.max()), used=pool.num_used, tables=[list(s.blocks) for s in seqs],
             n_seqs=len(EQ_PROMPTS), n_steps=EQ_DECODE + 1)
    print_observations(observations_2(d))
    return d


def observations_2(d):
    """演示 2 的观察：每个数都取自 d。"""
    worst = d["worst"]
    if worst == 0.0:
        verdict = "：逐位相同。"
    elif worst <= 1e-12:
        verdict = "，在 1e-12 以内。"
    else:
        verdict = "，超过了 1e-12！"
    return [f"全部 {d['n_seqs']} 条序列、{d['n_steps']} 步的 logits 最大差 {worst!r}" + verdict
            + "两边共用同一份层计算（run_layers），只有\"K/V 存在哪、从哪取\"不同；"
            "按块表拼回来的 K/V 与连续存放的逐位相同，注意力的结果也就相同。",
            f"块池一共用了 {d['used']} 块；各序列的物理块交错分布（见块表），"
            "PagedAttention 不需要一条序列的 KV 在显存里连续。"]


# =============================================================================
def sample_lengths(means, n=N_LENGTHS, seed=LEN_SEED, sigma=1.0, max_seq=2048):
    """对数正态的输入 + 输出长度（均值取 vLLM 论文图 11），返回每条序列的总长度（与 01 脚本同一种分布）。"""
    rng = np.random.default_rng(seed)
    tot = 0
    for m in means:
        tot = tot + np.clip(np.round(rng.lognormal(np.log(m) - sigma ** 2 / 2, sigma, n)), 1, None)
    return np.minimum(tot, max_seq).astype(int)


def block_stats(lengths, block_size):
    """长度为 lengths 的序列按 block_size 分页：平均块表长度、最后一块平均浪费几个位置、浪费占分配出去的比例。"""
    nb = n_blocks(lengths, block_size)
    waste = nb * block_size - lengths
    return dict(blocks=float(nb.mean()), waste=float(waste.mean()),
                waste_frac=float(waste.sum() / (nb * block_size).sum()))


def time_decode(params, cfg, block_size):
    """长度 TIME_LEN 的序列再解码 TIME_DECODE 步：分页版 / 连续版每步的时间（秒），和一次 gather_kv 的时间。"""
    rng = np.random.default_rng(PROMPT_SEED)
    prompt = rng.integers(0, cfg.vocab, TIME_LEN)
    toks = rng.integers(0, cfg.vocab, TIME_DECODE)
    best = [np.inf, np.inf, np.inf]
    for _ in range(TIME_REPEAT):
        pool = BlockPool(cfg, n_blocks=n_blocks(TIME_LEN + TIME_DECODE, block_size), block_size=block_size)
        seq, cache = PagedSequence(pool), KVCache(cfg, 1)
        paged_step(params, cfg, [seq], [prompt])
        forward(params, cfg, prompt[None], cache=cache)
        t0 = time.perf_counter()
        for t in toks:
            paged_step(params, cfg, [seq], [[t]])
        t1 = time.perf_counter()
        for t in toks:
            forward(params, cfg, np.array([[t]]), cache=cache)
        t2 = time.perf_counter()
        blocks = np.asarray(seq.blocks)
        for _ in range(TIME_DECODE):
            gather_kv(pool, 0, blocks, seq.length)
        t3 = time.perf_counter()
        best = [min(best[0], (t1 - t0) / TIME_DECODE), min(best[1], (t2 - t1) / TIME_DECODE),
                min(best[2], (t3 - t2) / TIME_DECODE)]
    return best


def demo3_block_size():
    """块该多大？小块浪费少但块表长、读得碎；大块反过来。"""
    print_header("演示 3：块大小的取舍——最后一块的浪费、块表长度、gather 的开销（vLLM 论文 §7.2）")
    lens = {name: sample_lengths(m) for name, m in LENGTH_MEANS.items()}
    stats = {name: {b: block_stats(L, b) for b in BLOCK_SIZES} for name, L in lens.items()}
    cfg = config_like(TINY, max_seq=TIME_LEN + TIME_DECODE)
    reads = {b: cfg.n_layers * 2 * n_blocks(TIME_LEN + TIME_DECODE, b) for b in BLOCK_SIZES}
    sg, al = stats["ShareGPT"], stats["Alpaca"]
    rows = [[b, f"{sg[b]['waste']:.1f}", f"{sg[b]['waste_frac']:.1%}", f"{al[b]['waste_frac']:.1%}",
             f"{sg[b]['blocks']:.1f}", f"{al[b]['blocks']:.1f}", fmt_int(reads[b])] for b in BLOCK_SIZES]
    print_text(f"长度：各 {fmt_int(N_LENGTHS)} 条序列（种子 {LEN_SEED}），输入、输出长度都是对数正态，均值取 vLLM "
               f"论文图 11：ShareGPT 平均总长 {lens['ShareGPT'].mean():.0f}，Alpaca 平均总长 "
               f"{lens['Alpaca'].mean():.0f}（论文 {sum(LENGTH_MEANS['ShareGPT']):.0f} / "
               f"{sum(LENGTH_MEANS['Alpaca']):.0f}）。")
    print_table(["块", "浪费/条", "ShareGPT 浪费", "Alpaca 浪费", "块表长 S", "块表长 A", "读几段"], rows,
                caption="浪费/条：ShareGPT 每条序列最后一块平均空着的位置；浪费：空着的位置占分配出去的比例；"
                        "块表长：每条序列平均几块（S = ShareGPT，A = Alpaca）；读几段：小模型上长度 "
                        f"{TIME_LEN + TIME_DECODE} 的序列每解码一步，{cfg.n_layers} 层 × K、V 要按块表读的段数。")

    params = init_params(cfg, seed=MODEL_SEED)
    times, rows = {}, []
    for b in BLOCK_SIZES:
        if NO_TIMING:
            times[b] = None
            rows.append([b, "-", "-", "-"])
        else:
            times[b] = p, c, g = time_decode(params, cfg, b)
            rows.append([b, f"{p * 1e3:.2f}", f"{p / c:.1f}×", f"{g * 1e6:.0f}"])
    note = ""
    if NO_TIMING:
        note = "设置了 LAB_NO_TIMING，没有计时。"
    print_table(["块", "分页一步 ms", "分页 / 连续", "gather µs"], rows,
                caption=f"计时（本机 numpy，每次运行都会不同，{TIME_REPEAT} 次取最快）：长度 {TIME_LEN} 的序列再解码 "
                        f"{TIME_DECODE} 步，paged_step 每步的时间、它与连续 KVCache 的 forward 的比值、一层一次 "
                        "gather_kv 的时间。" + note)
    d = dict(stats=stats, reads=reads, times=times, mean_len={k: float(v.mean()) for k, v in lens.items()},
             alpaca_over_half=[b for b in BLOCK_SIZES if al[b]["waste_frac"] > 0.5])
    print_observations(observations_3(d))
    return d


def observations_3(d):
    """演示 3 的观察：每个数都取自 d。"""
    sg, al = d["stats"]["ShareGPT"], d["stats"]["Alpaca"]
    reads, worse = d["reads"], d["alpaca_over_half"]
    b16, bmax = VLLM_DEFAULT_BLOCK, BLOCK_SIZES[-1]
    obs = [f"最后一块平均空着约 (B − 1)/2 个位置：块 {b16} 时 ShareGPT 每条浪费 {sg[b16]['waste']:.1f} 个位置"
           f"（{sg[b16]['waste_frac']:.1%}），块 {bmax} 时 {sg[bmax]['waste']:.1f} 个（{sg[bmax]['waste_frac']:.1%}）。"]
    if worse:
        over = f"；块 ≥ {worse[0]} 时就超过一半。"
    else:
        over = "。"
    obs.append(f"短序列更怕大块：Alpaca 平均只有 {d['mean_len']['Alpaca']:.0f} 个 token，块 {bmax} 时 "
               f"{al[bmax]['waste_frac']:.0%} 的位置空着" + over + f"块 {b16} 时只有 {al[b16]['waste_frac']:.1%}。")
    obs.append(f"小块的代价是块表长、读得碎：块 1 时 ShareGPT 的块表平均 {sg[1]['blocks']:.0f} 项，每解码一步"
               f"要读 {fmt_int(reads[1])} 段（小模型），块 {b16} 时降到 {fmt_int(reads[b16])} 段。GPU 上每段太短，"
               "一个线程块读的数据太少，带宽和并行度用不满。")
    obs.append(f"vLLM 论文 §7.2：ShareGPT 上块大小 {VLLM_BEST_SHAREGPT[0]}–{VLLM_BEST_SHAREGPT[1]} 最好；Alpaca 上 16、32 "
               f"好，更大的块因为序列比块还短而明显变差；默认取 {b16}——足够大能用满 GPU，又足够小不至于浪费。"
               f"上表：ShareGPT 到块 {bmax} 浪费也只有 {sg[bmax]['waste_frac']:.1%}，Alpaca 在块 32、64、{bmax} 时是 "
               f"{al[32]['waste_frac']:.0%}、{al[64]['waste_frac']:.0%}、{al[bmax]['waste_frac']:.0%}。"
               "numpy 上的计时只说明 gather 是多出来的一次拷贝，不代表 GPU 上的开销。")
    return obs


# =============================================================================
DEMOS = {1: demo1_block_table, 2: demo2_equivalence, 3: demo3_block_size}


def main(argv=None):
    return run_demos(DEMOS, "第 7 讲 · PagedAttention：块表、等价性、块大小", argv)


if __name__ == "__main__":
    sys.exit(main())
