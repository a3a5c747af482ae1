"""CS349E · 第 7 讲 · 02_paged_attention.py —— PagedAttention：KV 不连续地存，注意力还算得对吗？块该多大？

【问题】01 脚本说明了：按最大长度预留连续显存，大部分都浪费了。vLLM 的办法是像操作系统的虚拟内存
那样分页：KV 池切成固定大小的物理块，每条序列有一张块表（逻辑块 → 物理块），写满一块才分配下一块。
那么：块表长什么样？按块表把 KV 拼回来做注意力，结果和连续存放的一样吗？块取多大合适？

  演示 1：几条长度不同的序列（默认三条）交替解码，逐步看块表怎样按需增长、物理块怎样交错。
  演示 2：同一批序列逐 token 解码，paged_step 与连续 KVCache 的 forward 逐位比较 logits。
  演示 3：块大小 1–128 的取舍：最后一块的浪费、块表长度、每解码一步要按块表读几段、每段多长
          （对照 vLLM 论文 §7.1 的 kernel 开销和 §7.2 的块大小实验）。全部由配置算出，不计时。

【运行】python lecture07/02_paged_attention.py          （约 0.4 秒，2 核笔记本，不需要 GPU；两次输出逐字节相同）
        python lecture07/02_paged_attention.py --demo 3 （只跑演示 3；--more 印出全部观察，--list 列出演示）
【依赖】numpy、rich；本目录的 paged_kv、kv_store.tiers（LLaMA2-70B 的配置）；lab_common 的 transformer_lab、console、say。

【练习】exercises/ex2_gather_kv.py：自己写 gather_kv（按块表取回 K/V）；make check EX=2，再加 --mine 运行本脚本。
【试一试】改下面"学生可以改的设置"里的一个值，再运行（不合理的值会被一行拒绝，并说明允许的范围）：
  1. 把 `WALK_BLOCK_SIZE` 改成 2（--demo 1）：块表变长了多少？解码时多久要分配一个新块？
  2. 把 `EQ_BLOCK_SIZE` 改成 64（--demo 2）：物理块还交错吗？logits 还逐位相同吗？
  3. 把 `BLOCK_SIZES` 改成 (8, 16, 32)（--demo 3）：这三个里哪个浪费最少、哪个每步读的段最少？
  4. 把 `READ_LEN` 改成 128（--demo 3）：序列比块短时，块 128 和连续存放每步读的段一样多吗？
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.realpath(__file__))))  # 仓库根目录：让 lab_common 包可以 import
from lab_common.endings import quiet_endings  # noqa: E402
quiet_endings()  # 最先做（还没 import numpy）：这之后按 Ctrl-C、管道被关都只打一行，不打印 traceback
from lab_common import console  # noqa: E402
from lab_common.console import print_header, print_observations, print_table  # noqa: E402
from lab_common.say import count, fixed, integer, listed, listing, order, pct1, sci, size, span, words  # noqa: E402
from lab_common.script_tools import run_lecture  # noqa: E402
from lab_common.settings import Source, check_setting, is_int, is_number, is_sorted_ints  # noqa: E402
import numpy as np  # noqa: E402
from kv_store.tiers import LLAMA2_70B  # noqa: E402
from paged_kv import BlockPool, PagedSequence, n_blocks, paged_step  # noqa: E402
from pool_pictures import PoolFilm  # noqa: E402
from lab_common.frames import play  # noqa: E402
from lab_common.transformer_lab import TINY, KVCache, config_like, forward, init_params  # noqa: E402

# ---- 学生可以改的设置（每个演示运行时才读）----
MODEL_SEED = 0                       # 小模型权重的随机种子
PROMPT_SEED = 1                      # 随机输入 token 的种子
WALK_BLOCK_SIZE = 4                  # 演示 1 的块大小（小一点，块表才看得清）
WALK_PROMPTS = {"A": 6, "B": 3, "C": 9}   # 演示 1：每条序列的名字和输入长度（1–6 条）
WALK_DECODE = 4                      # 演示 1：每条序列再解码几个 token
EQ_PROMPTS = (3, 7, 12, 20)          # 演示 2：一批序列的输入长度
EQ_DECODE = 12                       # 演示 2：逐 token 解码几步
EQ_BLOCK_SIZE = 4                    # 演示 2 的块大小
BLOCK_SIZES = (1, 4, 8, 16, 32, 64, 128)   # 演示 3 比较的块大小
LEN_SEED = 0                         # 演示 3 长度分布的种子
N_LENGTHS = 10_000                   # 演示 3 抽多少条序列的长度
READ_LEN = 1024                      # 演示 3：算"每步读几段"时序列已有的 token 数
LENGTH_MEANS = {"ShareGPT": (161.31, 337.99), "Alpaca": (19.31, 58.45)}   # 演示 3：两种长度的平均输入 / 输出

# ---- 论文的数字（只用来对照，标明出处）----
MEANS_SOURCE = {"ShareGPT": Source((161.31, 337.99), "vLLM 论文图 11(a)", "ShareGPT 的均值"),
                "Alpaca": Source((19.31, 58.45), "vLLM 论文图 11(b)", "Alpaca 的均值")}   # LENGTH_MEANS 的出处
VLLM_DEFAULT_BLOCK = 16              # vLLM 论文 §7.2：默认块大小 16
VLLM_BEST_SHAREGPT = (16, 128)       # vLLM 论文 §7.2：ShareGPT 上 16–128 最好（Alpaca 上 16、32 好，更大明显变差）
VLLM_KERNEL_OVERHEAD = (20, 26)      # vLLM 论文 §7.1、图 18(a)：注意力 kernel 延迟比 FasterTransformer 高 20–26%
READ_MODEL = LLAMA2_70B              # 演示 3 数"每步读几段"用的模型（kv_store.tiers 里的配置）
VLLM_7_NOTE = (f"vLLM 论文 §7.2：默认块 {VLLM_DEFAULT_BLOCK}，ShareGPT 上 {VLLM_BEST_SHAREGPT[0]}–{VLLM_BEST_SHAREGPT[1]} 最好，"
               f"Alpaca 上大于 32 明显变差；§7.1：查块表让注意力 kernel 比 FasterTransformer 慢 "
               f"{VLLM_KERNEL_OVERHEAD[0]}–{VLLM_KERNEL_OVERHEAD[1]}%。")
VLLM_71_NOTE = "vLLM 论文 §7.1、图 18(a)：开销来自查块表、多出的分支、处理变长序列；论文认为不大，因为只影响注意力算子。"
GATHER_NOTE = ("本讲的 numpy 版为了和连续版逐位比较，先按块表把块拼回连续的 K/V（gather_kv）再算；真实的 PagedAttention "
               "kernel 不拼接，直接按块表逐块读进来算（vLLM 论文 §4.1）。段越短，每次能连续读的字节越少，查块表的次数也越多。")
SAME_LAYERS_NOTE = "两边共用同一份层计算（run_layers），只有\"K/V 存在哪、从哪取\"不同，注意力的结果也就相同。"
PAPER = dict(default_block=VLLM_DEFAULT_BLOCK, best_sharegpt=VLLM_BEST_SHAREGPT, kernel_overhead=VLLM_KERNEL_OVERHEAD,
             means={k: src.value for k, src in MEANS_SOURCE.items()})


WALK_SPARE_BLOCKS = 3                # 演示 1 的块池比刚好够用多留几块（表里能看到"空闲"）


def blocks_str(seq):
    return "[" + " ".join(str(b) for b in seq.blocks) + "]"


def is_contiguous(blocks):
    """物理块号是不是一段连续递增的数：is_contiguous([3, 4, 5]) → True；is_contiguous([0, 1, 7]) → False。"""
    return list(blocks) == list(range(blocks[0], blocks[0] + len(blocks)))


# =============================================================================
def demo1_block_table():
    """块表长什么样？块是怎样按需分配的？"""
    block_size, prompts, n_decode, seeds = WALK_BLOCK_SIZE, dict(WALK_PROMPTS), WALK_DECODE, (MODEL_SEED, PROMPT_SEED)
    print_header(f"演示 1：{len(prompts)} 条序列的块表——块大小 {block_size}，写满一块才分配下一块")
    cfg = config_like(TINY, max_seq=max(prompts.values()) + n_decode)
    params = init_params(cfg, seed=seeds[0])
    rng = np.random.default_rng(seeds[1])
    need = sum(n_blocks(p + n_decode, block_size) for p in prompts.values())   # 块池按设置算：刚好够用 + 几块空闲
    pool = BlockPool(cfg, n_blocks=need + WALK_SPARE_BLOCKS, block_size=block_size)
    seqs = {n: PagedSequence(pool) for n in prompts}
    last = {}
    rows, events = [], []
    film = PoolFilm(pool)                            # 每一步块池的快照：--step 时一步一屏，make all 画成 GIF

    def snapshot(step, what):
        rows.append([step, what] + [f"{blocks_str(s)} {s.length}" for s in seqs.values()] + [pool.num_free])
        film.snap(f"{step}（{what}）", seqs)

    for n, plen in prompts.items():                 # 依次 prefill：每条序列一次写入整段输入
        before = list(seqs[n].blocks)
        last[n] = paged_step(params, cfg, [seqs[n]], [rng.integers(0, cfg.vocab, plen)])[0][-1]
        events.append((f"prefill {n}", n, [b for b in seqs[n].blocks if b not in before]))
        snapshot(f"prefill {n}", f"+{len(seqs[n].blocks) - len(before)} 块")
    for t in range(1, n_decode + 1):                # 一起解码：每条序列各写一个 token（贪心取下一个 token）
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
    play(film.frames)
    print_table(["步", "分配", *(f"{n} 块表 长度" for n in seqs), "空闲"], rows,
                caption=f"[..]：物理块号，按逻辑块的顺序；后面是序列长度；空闲：块池（共 {pool.n_blocks} 块）还剩几块。")
    alloc_order = [b for _, _, new in events for b in new]
    if console.SHOW_MORE:
        rows = []
        for n, s in seqs.items():
            for i, b in enumerate(s.blocks):
                used = min(block_size, s.length - i * block_size)
                rows.append([n, i, b, span([i * block_size, i * block_size + used - 1], integer), f"{used}/{block_size}",
                             alloc_order.index(b) + 1])
        print_table(["序列", "逻辑块", "物理块", "token 位置", "已用", "第几个分配"], rows,
                    caption="逻辑块 i 存第 i·B 到 (i+1)·B − 1 个 token 的 K/V；第几个分配：块池先来先取空闲表的头。")
    decode_events = [e for e in events if e[0].startswith("解码")]
    first_grow = None
    if decode_events:
        first_grow = decode_events[0]
    d = dict(tables={n: list(s.blocks) for n, s in seqs.items()}, lengths={n: s.length for n, s in seqs.items()},
             alloc_order=alloc_order,
             interleaved=not all(is_contiguous(s.blocks) for s in seqs.values()),
             waste=sum(len(s.blocks) * block_size - s.length for s in seqs.values()),
             total=sum(s.length for s in seqs.values()), first_grow=first_grow,
             n_decode_alloc=sum(len(b) for _, _, b in decode_events), n_free=pool.num_free, n_pool=pool.n_blocks,
             events=events, block_size=block_size, prompts=prompts, n_decode=n_decode, seeds=seeds, frames=film.frames)
    print_observations(*observations_1(d))
    return d


def observations_1(d):
    """演示 1 的观察 → (默认印的, --more 才印的)。每个数都取自 d（和上面的表同一份数据）。"""
    block_size, tables = d["block_size"], d["tables"]
    lines = [layout_sentence(tables)]
    text = f"解码 {d['n_decode']} 步、共写 {count(d['n_decode'] * len(tables), '个 token')}，"
    if d["n_decode"] == 0:
        text = "这次没有解码（WALK_DECODE = 0），块都是 prefill 时按输入长度分配的。"
    elif d["first_grow"]:
        step, name, new = d["first_grow"]
        text += (f"分配了 {count(d['n_decode_alloc'], '块')}：最后一块写满、又要写下一个 token 时才分配（第一次：第 "
                 f"{step.split()[1]} 步解码时 {name} 拿到物理块 {new[0]}）。")
    else:
        text += "每条序列的新 token 都还落在已有的块里，没有分配新块。"
    lines.append(text)
    n_used = sum(len(t) for t in tables.values())
    more = [f"{count(len(tables), '条序列')}一共 {count(d['total'], '个 token')}，占 {count(n_used, '块')} = "
                 f"{integer(n_used * block_size)} 个位置；空着的只是各条最后一块没写满的 {integer(d['waste'])} 个"
                 f"（每条至多 {block_size - 1} 个）。"]
    return lines, more


def layout_sentence(tables):
    """物理块是否交错：按块表判断，不假定（演示 1、2 共用）。tables = {名字: 块表}。"""
    split = [n for n, t in tables.items() if not is_contiguous(t)]
    if split:
        return (f"同一序列的物理块并不相邻（{split[0]} 的块表 [{' '.join(map(str, tables[split[0]]))}]）："
                "逻辑上连续、物理上分散，全靠块表对应。")
    return ("这次每条序列的物理块都连成一段（块表 " + " ".join(f"[{' '.join(map(str, t))}]" for t in tables.values())
            + "）：块表允许它们散在块池的任何地方，几条序列交替分配新块时才会交错。")


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


def demo2_equivalence():
    """按块表拼回来的 KV 做注意力，结果和连续存放的一样吗？"""
    prompts_len, n_decode, block_size, seeds = tuple(EQ_PROMPTS), EQ_DECODE, EQ_BLOCK_SIZE, (MODEL_SEED, PROMPT_SEED)
    print_header(f"演示 2：paged_step 与连续 KVCache 逐位比较（块 {block_size}，解码 {n_decode} 步）")
    cfg = config_like(TINY, max_seq=max(prompts_len) + n_decode)
    params = init_params(cfg, seed=seeds[0])
    rng = np.random.default_rng(seeds[1])
    prompts = [rng.integers(0, cfg.vocab, n) for n in prompts_len]
    diff, seqs, pool = decode_both(params, cfg, prompts, n_decode, block_size)
    more_caption = ""
    if console.SHOW_MORE:                            # 模型和"为什么相同"：不随数据变，--more 时写在表下
        more_caption = f"。模型：第 2 讲的 TINY（float64，max_seq = {cfg.max_seq}）。" + SAME_LAYERS_NOTE
    print_table(["序列", "输入", "最终长度", "块数", "块表", "最大差"],
                [[i, len(p), s.length, len(s.blocks), blocks_str(s), sci(x)]
                 for i, (p, s, x) in enumerate(zip(prompts, seqs, diff))],
                caption=f"最大差：prefill 和每步解码的全部 logits 与连续版的 max |diff|（模型种子 {seeds[0]}、提示种子 {seeds[1]}）"
                        + more_caption)
    tables = [list(s.blocks) for s in seqs]
    d = dict(diff=diff, worst=float(diff.max()), used=pool.num_used, tables=tables, n_seqs=len(prompts_len),
             n_steps=n_decode + 1, interleaved=not all(is_contiguous(t) for t in tables),
             decode_alloc=pool.num_used - sum(n_blocks(n, block_size) for n in prompts_len), max_seq=cfg.max_seq)
    print_observations(*observations_2(d))
    return d


def observations_2(d):
    """演示 2 的观察 → (默认印的, --more 才印的)。"""
    verdict = {True: "逐位相同，按块表拼回的 K/V 和连续存放的一样", False: "不是 0，和连续存放的不完全一样"}
    lines = [f"{count(d['n_seqs'], '条序列')}、{d['n_steps']} 步的 logits 最大差 {sci(d['worst'])}："
             f"{verdict[d['worst'] == 0.0]}。",
             f"块池用了 {count(d['used'], '块')}。" + layout_sentence({f"序列 {i}": t for i, t in enumerate(d["tables"])})]
    return lines, []


# =============================================================================
def sample_lengths(means, n, seed, sigma=1.0, max_seq=2048):
    """对数正态的输入 + 输出长度（均值取 vLLM 论文图 11），返回每条序列的总长度（与 01 脚本同一种分布）。

    sigma、max_seq 是这个分布的形状（和 01 的 LEN_SIGMA、MAX_SEQ 的默认值相同），不是设置。
    """
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


def read_segments(model, length, block_size):
    """解码一个 token 时，注意力要读的 K/V 被分成几段连续内存、每段多少字节。

    每一层、每个 KV 头、K 和 V 各自按块表读 n_blocks(length, block_size) 段，每段是一个块里这个头的
    block_size × head_dim 个数。block_size=None 表示连续存放：每层每头 K、V 各一段。

    >>> r = read_segments(LLAMA2_70B, 1024, 16)      # 80 层 × 8 个 KV 头 × K、V × 64 块
    >>> r["table_len"], r["segments"], r["segment_bytes"]
    (64, 81920, 4096)
    >>> read_segments(LLAMA2_70B, 1024, None)["segments"]
    1280
    """
    if block_size is None:
        table_len, seg_tokens = 1, length
    else:
        table_len, seg_tokens = n_blocks(length, block_size), min(block_size, length)   # 序列比块短：只有一段
    return dict(table_len=table_len, segments=model.n_layers * model.n_kv_heads * 2 * table_len,
                segment_bytes=seg_tokens * model.head_dim * model.dtype_bytes)


def demo3_block_size():
    """块该多大？小块浪费少，但块表长、读得碎；大块反过来。"""
    sizes, n, seed, read_len, m = tuple(BLOCK_SIZES), N_LENGTHS, LEN_SEED, READ_LEN, READ_MODEL
    print_header("演示 3：块大小的取舍——最后一块的浪费、块表长度、每步读几段（vLLM 论文 §7）")
    means = {k: tuple(v) for k, v in LENGTH_MEANS.items()}
    lens = {name: sample_lengths(m_, n, seed) for name, m_ in means.items()}
    stats = {name: {b: block_stats(L, b) for b in sizes} for name, L in lens.items()}
    sg, al = stats["ShareGPT"], stats["Alpaca"]
    reads = {b: read_segments(m, read_len, b) for b in sizes}
    contiguous = read_segments(m, read_len, None)
    rows = [[b, fixed(1)(sg[b]["waste"]), pct1(sg[b]["waste_frac"]), pct1(al[b]["waste_frac"]), fixed(1)(sg[b]["blocks"]),
             fixed(1)(al[b]["blocks"]), size(reads[b]["segment_bytes"]), integer(reads[b]["segments"])] for b in sizes]
    rows.append(["连续", "-", "-", "-", "-", "-", size(contiguous["segment_bytes"]), integer(contiguous["segments"])])
    print_table(["块", "浪费/条", "S 浪费", "A 浪费", "S 块表", "A 块表", "每段", "一步读几段"], rows,
                caption=f"S / A：ShareGPT / Alpaca 式长度（各 {integer(n)} 条，{means_note(means)}）；浪费：最后一块空着的"
                        f"位置。每段、一步读几段：{m.name} 上 {integer(read_len)} 个 token 解码一步按块表读的连续段。"
                        + VLLM_7_NOTE)
    if console.SHOW_MORE:                            # 长度分布和读法的来历：配置和论文的数，放进表里
        print_table(["长度", "设的均值（输入 / 输出）", "论文图 11 的均值", "这里的平均总长"],
                    [[k, " / ".join(f"{x:g}" for x in means[k]), " / ".join(f"{x:g}" for x in MEANS_SOURCE[k].value),
                      integer(lens[k].mean())] for k in means],
                    caption=f"这里：各 {integer(n)} 条（种子 {seed}），输入、输出都是对数正态，均值取 LENGTH_MEANS。"
                            "上表的浪费/条：块比序列短得多时约 (B − 1)/2。总长截在 2,048（OPT 的最大序列长度）。")
        print_table(["模型", "层", "KV 头", "头维度", "每个数", "序列长"],
                    [[m.name, m.n_layers, m.n_kv_heads, m.head_dim, size(m.dtype_bytes), integer(read_len)]],
                    caption="块表长 = ⌈序列长 / B⌉；每段 = 一个块里一个头的 K（或 V）= B × 头维度 × 每个数；一步读几段 = 层 × "
                            "KV 头 × K、V × 块表长。全部由配置算出，不计时。" + GATHER_NOTE + VLLM_71_NOTE
                            + f"§7.2：默认取 {VLLM_DEFAULT_BLOCK}——足够大能用满 GPU，又足够小不至于浪费。")
    d = dict(stats=stats, reads=reads, contiguous=contiguous, mean_len={k: float(v.mean()) for k, v in lens.items()},
             read_len=read_len, read_model=m.name, block_sizes=sizes, n_lengths=n, seed=seed, means=means,
             shape=(m.n_layers, m.n_kv_heads, m.head_dim), paper=dict(PAPER))
    print_observations(*observations_3(d))
    return d


def means_note(means):
    """两种长度的均值出自哪里：都还是论文图 11 的值时说出处；改过的说是自己设的。"""
    own = [k for k in means if not MEANS_SOURCE[k].holds(means[k])]
    if not own:
        return "均值取 vLLM 论文图 11"
    return "、".join(own) + " 的均值是你设的"


def observations_3(d):
    """演示 3 的观察 → (默认印的, --more 才印的)。每个数都取自 d（和上表同一份数据）。"""
    sg, al = d["stats"]["ShareGPT"], d["stats"]["Alpaca"]
    reads, c, sizes, paper = d["reads"], d["contiguous"], d["block_sizes"], d["paper"]
    bmin, bmax = sizes[0], sizes[-1]
    ref = sizes[len(sizes) // 2]
    if paper["default_block"] in sizes:
        ref = paper["default_block"]                 # 拿 vLLM 的默认块大小作对照
    text = f"块 {ref} 时 ShareGPT 每条浪费 {fixed(1)(sg[ref]['waste'])} 个位置（{pct1(sg[ref]['waste_frac'])}），Alpaca {pct1(al[ref]['waste_frac'])}"
    if ref != bmax:
        text += words("；块", bmax, "时", listed([sg[bmax]["waste_frac"], al[bmax]["waste_frac"]], pct1).replace("、", " 和 "))
    short, long_ = sorted(("Alpaca", "ShareGPT"), key=lambda k: d["mean_len"][k])   # 哪个更短按设置算，不按名字
    shorter = {1: f"更短的 {short} 浪费的比例更高", 0: "两种长度浪费的比例一样", -1: f"更短的 {short} 反而浪费得少"}
    st = d["stats"]                                  # 比的是最后说到的块 bmax
    lines = [text + f"：{shorter[order(st[short][bmax]['waste_frac'], st[long_][bmax]['waste_frac'], pct1)]}。"]
    seg = f"块 {bmin} 时每步要读 {integer(reads[bmin]['segments'])} 段、每段 {size(reads[bmin]['segment_bytes'])}"
    if ref != bmin:
        seg += f"，块 {ref} 时 {integer(reads[ref]['segments'])} 段、{size(reads[ref]['segment_bytes'])}"
    if order(reads[bmin]["segments"], c["segments"], integer) == 0:
        lines.append(seg + f"；连续存放也是 {integer(c['segments'])} 段：序列不比块长时，分页不多读段。")
    elif ref != bmin and order(reads[ref]["segments"], c["segments"], integer) == 0:
        lines.append(f"小块的代价在读：{seg}，和连续存放一样（序列不比块 {ref} 长）。")
    else:
        lines.append(f"小块的代价在读：{seg}；连续存放只要 {integer(c['segments'])} 段。")
    return lines, []


# =============================================================================
def check_settings(args=None):
    """设置块里每个常量：不合理的值一行拒绝（退出码 2），其余的值都能跑。"""
    for name, value in (("MODEL_SEED", MODEL_SEED), ("PROMPT_SEED", PROMPT_SEED), ("LEN_SEED", LEN_SEED)):
        check_setting(name, value, is_int(value, 0), "非负整数")
    check_setting("WALK_BLOCK_SIZE", WALK_BLOCK_SIZE, is_int(WALK_BLOCK_SIZE, 1, 64), " 1–64 的整数")
    check_setting("WALK_PROMPTS", WALK_PROMPTS, isinstance(WALK_PROMPTS, dict) and 1 <= len(WALK_PROMPTS) <= 6 and all(
        isinstance(k, str) and k and is_int(v, 1, 64) for k, v in WALK_PROMPTS.items()),
        " 1–6 条序列的 {名字: 输入长度}，长度 1–64，例如 {\"A\": 6, \"B\": 3}")
    check_setting("WALK_DECODE", WALK_DECODE, is_int(WALK_DECODE, 0, 32), " 0–32 的整数")
    check_setting("EQ_PROMPTS", EQ_PROMPTS, isinstance(EQ_PROMPTS, (tuple, list)) and 1 <= len(EQ_PROMPTS) <= 8
                  and all(is_int(n, 1, 200) for n in EQ_PROMPTS), " 1–8 条序列的输入长度，每条 1–200，例如 (3, 7, 12)")
    check_setting("EQ_DECODE", EQ_DECODE, is_int(EQ_DECODE, 0, 50), " 0–50 的整数")
    check_setting("EQ_BLOCK_SIZE", EQ_BLOCK_SIZE, is_int(EQ_BLOCK_SIZE, 1, 256), " 1–256 的整数")
    check_setting("BLOCK_SIZES", BLOCK_SIZES, is_sorted_ints(BLOCK_SIZES, 1, 4096) and len(BLOCK_SIZES) <= 10,
                  " 1–10 个从小到大、不重复的块大小（1–4096），例如 (8, 16, 32)")
    check_setting("N_LENGTHS", N_LENGTHS, is_int(N_LENGTHS, 1, 1_000_000), " 1–1,000,000 的整数")
    check_setting("READ_LEN", READ_LEN, is_int(READ_LEN, 1, 1 << 20), " 1–1,048,576 的整数")
    check_setting("LENGTH_MEANS", LENGTH_MEANS, isinstance(LENGTH_MEANS, dict) and set(LENGTH_MEANS) == {"ShareGPT", "Alpaca"}
                  and all(isinstance(v, (tuple, list)) and len(v) == 2 and all(is_number(x, 1, 2048) for x in v)
                          for v in LENGTH_MEANS.values()),
                  ' {"ShareGPT": (输入, 输出), "Alpaca": (输入, 输出)}，平均长度 1–2,048（总长截在 2,048；表里 S、A 两列就是这两个）')


DEMOS = {1: demo1_block_table, 2: demo2_equivalence, 3: demo3_block_size}


def main(argv=None):
    return run_lecture(DEMOS, "第 7 讲 · PagedAttention：块表、等价性、块大小", argv, check=check_settings)


if __name__ == "__main__":
    sys.exit(main())
