"""CS349E 第 7 讲 · 02 PagedAttention：KV 不连续地存，注意力还算得对吗？块该多大？

【问题】按最大长度预留连续显存，大部分都浪费了（01）。vLLM 像操作系统的虚拟内存那样分页：KV 池切成固定大小的
物理块，每条序列一张块表（逻辑块 → 物理块），写满一块才分配下一块。块表怎样长出来？按块表拼回来的 K/V 做注意力，
和连续存放的一样吗？块取多大合适？
【运行】python lecture07/02_paged_attention.py   （约 0.3 秒，不需要 GPU；--demo N 只跑第 N 个，--step 先想一想、回车再看，
        --mine 用你在练习 2、3 里写的 gather_kv 和 PagedSequence）
【试一试】
  1. 把 WALK_BLOCK_SIZE 改成 2（演示 1）：块表变长了多少？解码时多久分配一个新块？
  2. 把 EQ_BLOCK_SIZE 改成 64（演示 2）：物理块还交错吗？logits 还逐位相同吗？
  3. 把 BLOCK_SIZES 改成 (8, 16, 32)（演示 3）：哪个浪费最少、哪个每步读的段最少？
  4. 把 READ_LEN 改成 128（演示 3）：序列比块还短时，块 128 和连续存放每步读的段一样多吗？
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))   # 仓库根目录：lab_common、exercises
import numpy as np  # noqa: E402

from lab_common import show  # noqa: E402
from lab_common.transformer_lab import TINY, KVCache, config_like, forward, init_params  # noqa: E402
from kv_store.tiers import LLAMA2_70B  # noqa: E402
from paged_kv import BlockPool, n_blocks, paged_step  # noqa: E402

# --mine：用你在 exercises/ 里写的（见 exercises/README.md）；不加就用讲义的实现
if "--mine" in sys.argv[1:]:
    from exercises.ex2_gather_kv import gather_kv
    from exercises.ex3_cow import PagedSequence
else:
    from paged_kv import gather_kv, PagedSequence

MODEL_SEED = 0                       # 小模型（第 2 讲的 TINY）权重的随机种子
PROMPT_SEED = 1                      # 随机输入 token 的种子
WALK_BLOCK_SIZE = 4                  # 演示 1 的块大小（小一点，块表才看得清）
WALK_PROMPTS = {"A": 6, "B": 3, "C": 9}    # 演示 1：每条序列的名字和输入长度（依次 prefill）
WALK_DECODE = 4                      # 演示 1：之后一起解码几步
EQ_PROMPTS = (3, 7, 12, 20)          # 演示 2：一批序列的输入长度
EQ_DECODE = 12                       # 演示 2：逐 token 解码几步
EQ_BLOCK_SIZE = 4                    # 演示 2 的块大小
BLOCK_SIZES = (1, 4, 8, 16, 32, 64, 128)   # 演示 3 比较的块大小
LEN_SEED = 0                         # 演示 3 长度分布的种子
N_LENGTHS = 10_000                   # 演示 3 每种长度抽多少条序列
READ_LEN = 1024                      # 演示 3：数"解码一步读几段"时序列已有的 token 数

FIG11_MEANS = {"ShareGPT": (161.31, 337.99), "Alpaca": (19.31, 58.45)}   # vLLM 论文（SOSP'23）图 11：平均输入 / 输出长度


def check_settings():
    show.check("MODEL_SEED", MODEL_SEED, show.is_int(MODEL_SEED, 0, 2**32 - 1), " 0 到 2³² − 1 的整数")
    show.check("PROMPT_SEED", PROMPT_SEED, show.is_int(PROMPT_SEED, 0, 2**32 - 1), " 0 到 2³² − 1 的整数")
    show.check("WALK_BLOCK_SIZE", WALK_BLOCK_SIZE, show.is_int(WALK_BLOCK_SIZE, 1, 64), " 1 到 64 的整数")
    show.check("WALK_PROMPTS", WALK_PROMPTS, isinstance(WALK_PROMPTS, dict) and 1 <= len(WALK_PROMPTS) <= 6 and all(
        isinstance(k, str) and 1 <= len(k) <= 4 and show.is_int(v, 1, 64) for k, v in WALK_PROMPTS.items()),
        ' 1 到 6 条序列的 {名字: 输入长度}，名字 1 到 4 个字，长度 1 到 64，例如 {"A": 6, "B": 3}')
    show.check("WALK_DECODE", WALK_DECODE, show.is_int(WALK_DECODE, 0, 32), " 0 到 32 的整数")
    show.check("EQ_PROMPTS", EQ_PROMPTS, show.is_ints(EQ_PROMPTS, 1, 200) and len(EQ_PROMPTS) <= 8,
               " 1 到 8 个从小到大、不重复的输入长度（1 到 200），例如 (3, 7, 12)")
    show.check("EQ_DECODE", EQ_DECODE, show.is_int(EQ_DECODE, 0, 50), " 0 到 50 的整数")
    show.check("EQ_BLOCK_SIZE", EQ_BLOCK_SIZE, show.is_int(EQ_BLOCK_SIZE, 1, 256), " 1 到 256 的整数")
    show.check("BLOCK_SIZES", BLOCK_SIZES, show.is_ints(BLOCK_SIZES, 1, 4096) and len(BLOCK_SIZES) >= 2,
               " 2 个以上从小到大、不重复的块大小（1 到 4,096），例如 (8, 16, 32)")
    show.check("LEN_SEED", LEN_SEED, show.is_int(LEN_SEED, 0, 2**32 - 1), " 0 到 2³² − 1 的整数")
    show.check("N_LENGTHS", N_LENGTHS, show.is_int(N_LENGTHS, 1, 1_000_000), " 1 到 1,000,000 的整数")
    show.check("READ_LEN", READ_LEN, show.is_int(READ_LEN, 1, 1 << 20), " 1 到 1,048,576 的整数")


def demo_block_table():
    """几条序列交替解码时，块表怎样长出来，一条序列的物理块挨在一起吗？"""
    bs, prompts = WALK_BLOCK_SIZE, WALK_PROMPTS
    cfg = config_like(TINY, max_seq=max(prompts.values()) + WALK_DECODE)
    params = init_params(cfg, seed=MODEL_SEED)
    rng = np.random.default_rng(PROMPT_SEED)
    pool = BlockPool(cfg, sum(n_blocks(n + WALK_DECODE, bs) for n in prompts.values()) + 3, bs)   # 多 3 块：看得到空闲
    seqs = {name: PagedSequence(pool) for name in prompts}
    steps, last = [], {}                           # 每一步之后块池和块表的样子（表的一行、GIF 的一帧）；各条的 logits

    def record(step):
        before = steps[-1]["tables"] if steps else {}
        got = [f"{n} +{len(s.blocks) - len(before.get(n, []))}" for n, s in seqs.items()
               if len(s.blocks) > len(before.get(n, []))]
        steps.append(dict(step=step, got="、".join(got) or "不分配", free=pool.num_free, ref_count=pool.ref_count.tolist(),
                          tables={n: list(s.blocks) for n, s in seqs.items()},
                          lengths={n: s.length for n, s in seqs.items()},        # tight：块数 = ⌈长度 / 块⌉
                          tight=all(len(s.blocks) == n_blocks(s.length, bs) for s in seqs.values())))

    for name, n in prompts.items():                # 依次 prefill：一次写入整段输入
        last[name] = paged_step(params, cfg, [seqs[name]], [rng.integers(0, cfg.vocab, n)], gather_kv)[0][-1]
        record(f"prefill {name}")
    for t in range(1, WALK_DECODE + 1):            # 一起解码：每条各写一个 token（贪心取下一个）
        outs = paged_step(params, cfg, list(seqs.values()), [[int(np.argmax(last[n]))] for n in seqs], gather_kv)
        last = {name: out[-1] for name, out in zip(seqs, outs)}
        record(f"解码 {t}")
    show.table(["步", "分配", *(f"{n} 块表 长度" for n in seqs), "空闲块"],
               [[st["step"], st["got"], *(f"{st['tables'][n]} {st['lengths'][n]}" for n in seqs), st["free"]]
                for st in steps],
               caption=f"块：{bs} 个 token 的 KV；块池：显存里的全部块（共 {pool.n_blocks} 块，编号是物理块号）；块表：一条"
                       "序列的第 1、2、3…… 个逻辑块各存在哪个物理块。prefill：一次写入整段输入；解码：每条写一个 token。"
                       "分配：这一步给谁新分了几块；[..] 后面是序列长度；空闲块：块池还剩几块。"
                       f"第 2 讲的小模型（权重随机），模型种子 {MODEL_SEED}、输入种子 {PROMPT_SEED}。")
    split = [n for n, s in seqs.items() if s.blocks != list(range(s.blocks[0], s.blocks[0] + len(s.blocks)))]
    who = (split + list(seqs))[0]                  # 第一条物理块不相邻的序列
    show.claim(f"同一条序列的物理块并不相邻（{who} 的块表 {seqs[who].blocks}）：逻辑上连续、物理上分散，全靠块表对应。",
               bool(split), "每条序列的物理块都连成一段：" + "，".join(f"{n} {s.blocks}" for n, s in seqs.items()))
    n_new = sum(len(s.blocks) for s in seqs.values()) - sum(n_blocks(n, bs) for n in prompts.values())
    show.claim(f"解码 {WALK_DECODE} 步、写了 {WALK_DECODE * len(seqs)} 个 token，只分配了 {n_new} 块：一条序列只在"
               "最后一块写满、又要写下一个 token 时才拿新块。", n_new > 0 and all(st["tight"] for st in steps),
               f"分配了 {n_new} 块；块数不等于 ⌈长度 / {bs}⌉ 的步：{[st['step'] for st in steps if not st['tight']]}")
    return dict(steps=steps, block_size=bs, n_pool=pool.n_blocks)


def demo_equivalence():
    """按块表拼回来的 K/V 做注意力，和连续存放的 KV 缓存算出的 logits 一样吗？"""
    bs = EQ_BLOCK_SIZE
    cfg = config_like(TINY, max_seq=max(EQ_PROMPTS) + EQ_DECODE)
    params = init_params(cfg, seed=MODEL_SEED)
    rng = np.random.default_rng(PROMPT_SEED)
    feed = [rng.integers(0, cfg.vocab, n) for n in EQ_PROMPTS]      # 第一轮喂整段输入（prefill）
    pool = BlockPool(cfg, len(feed) * n_blocks(cfg.max_seq, bs), bs)
    seqs = [PagedSequence(pool) for _ in feed]
    caches = [KVCache(cfg, 1) for _ in feed]
    diff = [0.0] * len(feed)
    for _ in range(EQ_DECODE + 1):                 # 第一轮是 prefill，之后每轮一个 token
        outs = paged_step(params, cfg, seqs, feed, gather_kv)      # 分页：一次处理整批
        for i, out in enumerate(outs):             # 连续：每条一个 KVCache，喂同样的 token
            ref = forward(params, cfg, np.asarray(feed[i])[None], cache=caches[i])[0]
            diff[i] = max(diff[i], float(np.max(np.abs(out - ref))))
        feed = [[int(np.argmax(out[-1]))] for out in outs]
    rows = [[i, n, s.length, len(s.blocks), s.blocks, "0.0" if d == 0 else f"{d:.1e}"]
            for i, (n, s, d) in enumerate(zip(EQ_PROMPTS, seqs, diff))]
    show.table(["序列", "输入", "最终长度", "块数", "块表", "最大差"], rows,
               caption=f"输入、最终长度：输入、prefill 加解码后的 token 数；最大差：prefill（一次处理整段输入）和之后每步解码的全部 logits 与连续存放时的最大绝对差（块大小 "
                       f"{bs}，模型种子 {MODEL_SEED}、输入种子 {PROMPT_SEED}）。两边每层的计算是同一份代码，只有 K/V 存在哪、"
                       "从哪取不同。这里按块表把块拼回连续的 K/V 再算（本讲练习 2 要写的就是它）；vLLM 的 GPU kernel（在 GPU 上并行跑的函数）不拼，按块表逐块读进来"
                       "直接算（vLLM 论文 §5.1）。")
    show.claim(f"{len(seqs)} 条序列、{EQ_DECODE + 1} 轮（prefill 加 {EQ_DECODE} 步解码）的 logits 与连续存放逐位相同"
               "（最大差都是 0.0）：K/V 放在哪些块里，不改变算出的任何一位。",
               all(show.value(r[5]) == 0 for r in rows), "最大差 " + "、".join(r[5] for r in rows))
    return dict(diff=diff, tables=[list(s.blocks) for s in seqs])


def sample_lengths(means, n, seed):
    """n 条序列的总长度：输入、输出各是对数正态（σ = 1，均值 means），相加后截到 2,048（OPT 的最大序列长度）。"""
    rng = np.random.default_rng(seed)
    total = 0
    for m in means:
        total = total + np.clip(np.round(rng.lognormal(np.log(m) - 0.5, 1.0, n)), 1, None)
    return np.minimum(total, 2048).astype(int)


def read_segments(length, block_size):
    """LLaMA2-70B 解码一步按块表读 K/V：(几段连续内存, 每段几字节)。每层、每个 KV 头、K 和 V 各读 ⌈length / 块⌉ 段，
    每段是一块里这个头的 块 × head_dim 个数。连续存放 = 整条序列一块（block_size = length）：每层每头 K、V 各一段。"""
    m = LLAMA2_70B
    segments = m.n_layers * m.n_kv_heads * 2 * n_blocks(length, block_size)
    return segments, min(block_size, length) * m.head_dim * m.dtype_bytes


def demo_block_size():
    """块越小，最后一块浪费得越少，可块表越长、解码一步读的段越碎：块该多大？"""
    lens = {name: sample_lengths(m, N_LENGTHS, LEN_SEED) for name, m in FIG11_MEANS.items()}
    rows = []
    for b in BLOCK_SIZES:
        nb = {name: n_blocks(L, b) for name, L in lens.items()}
        waste = {name: nb[name] * b - L for name, L in lens.items()}       # 每条最后一块空着的位置
        segs, seg_bytes = read_segments(READ_LEN, b)
        rows.append([b, show.num(waste["ShareGPT"].mean(), 1)]
                    + [show.pct(waste[n].sum() / (nb[n] * b).sum(), 1) for n in lens]
                    + [show.num(nb[n].mean(), 1) for n in lens] + [show.size(seg_bytes), show.num(segs)])
    segs, seg_bytes = read_segments(READ_LEN, READ_LEN)
    rows.append(["连续", "-", "-", "-", "-", "-", show.size(seg_bytes), show.num(segs)])
    m = LLAMA2_70B
    show.table(["块大小", "S 浪费/条", "S 浪费", "A 浪费", "S 块/条", "A 块/条", "每段", "一步读几段"], rows,
               caption=f"块大小：每块几个 token。S / A：仿 ShareGPT（长对话）/ Alpaca（短指令）的序列长度，各 "
                       f"{N_LENGTHS:,} 条（种子 {LEN_SEED}；均值取 vLLM 论文图 11，对数正态，总长截在 2,048）。浪费：最后"
                       "一块空着的位置，每条平均几个、占全部位置的比例；块/条：每条平均几块。每段、一步读几段：LLaMA2-70B 上 "
                       f"{READ_LEN:,} 个 token 解码一步按块表读的连续段；每层、每个 KV 头的 K、V 各自连续：连续存放也要读 "
                       f"{m.n_layers} × {m.n_kv_heads} × 2 = {show.num(m.n_layers * m.n_kv_heads * 2)} 段。vLLM 论文 §7.2、"
                       "图 18b：ShareGPT 上块 16–128 最好，Alpaca 上 16、32 好、更大明显变差，默认 16；§7.1、图 18a："
                       "注意力 kernel 比 FasterTransformer（KV 连续存放的推理库）慢 20–26%，来自查块表、多出的分支、处理变长"
                       "序列三项开销之和。")
    s_waste, a_waste = [show.value(r[2]) for r in rows[:-1]], [show.value(r[3]) for r in rows[:-1]]
    first, big = rows[0], rows[-2]
    show.claim(f"块从 {first[0]} 到 {big[0]}，ShareGPT 的浪费从 {first[2]} 升到 {big[2]}，Alpaca 从 {first[3]} 升到 "
               f"{big[3]}：块越大，最后一块空着的越多；序列更短的 Alpaca 浪费的比例更高。",
               s_waste == sorted(s_waste) and a_waste == sorted(a_waste) and s_waste[-1] > s_waste[0]
               and all(a > s for s, a in zip(s_waste, a_waste) if s + a > 0), "S / A 浪费 " + "、".join(f"{r[2]} / {r[3]}" for r in rows[:-1]))
    reads = [show.value(r[7]) for r in rows]
    show.claim(f"小块的代价在读：块 {first[0]} 时解码一步要读 {first[7]} 段、每段 {first[6]}，块 {big[0]} 时 {big[7]} 段、"
               f"{big[6]}；连续存放只要 {rows[-1][7]} 段。", reads[0] > reads[-2] >= reads[-1],
               "一步读几段 " + "、".join(f"块 {r[0]} {r[7]}" for r in rows))
    return dict(rows=rows, block_sizes=BLOCK_SIZES)


DEMOS = [("演示 1：块表——一条序列的 KV 存在哪些物理块，序列变长时怎样分配", demo_block_table),
         ("演示 2：分页与连续存放的 logits 逐位比较", demo_equivalence),
         ("演示 3：块大小的取舍——最后一块的浪费、块表长度、每步读几段", demo_block_size)]


def main(argv=None):
    p = show.parser(__doc__, DEMOS)
    args = p.parse_args(argv)
    check_settings()
    show.run(DEMOS, args)


if __name__ == "__main__":
    show.quietly(main)
