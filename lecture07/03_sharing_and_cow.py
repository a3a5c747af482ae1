"""CS349E 第 7 讲 · 03 共享 KV 与写时复制：几个输出共用一段 KV 能省多少显存？复制时怎样不写坏别人？

【问题】并行采样（一个提示要 n 个回答）和束搜索（保留 k 条候选）里，很多序列的开头相同。分页以后相同的块只存一份，
用引用计数记下几条序列在用；谁要往共享的、没写满的块里写，谁先复制一份（写时复制，copy-on-write）。
这样能省多少 KV 显存？复制的那一刻，块池里发生了什么？
【运行】python lecture07/03_sharing_and_cow.py   （约 2 秒，不需要 GPU；--demo N 只跑第 N 个，--step 先想一想、回车再看，
        --mine 用你在练习 2、3 里写的 gather_kv 和 PagedSequence）
【试一试】
  1. 把 COW_PROMPT 改成 8（演示 2）：最后一块正好写满时，还会发生写时复制吗？
  2. 把 COW_PROMPT 改成 14（演示 2）：共享的序列更长时，要复制的还是只有一块吗？
  3. 把 COW_BLOCK_SIZE 改成 1（演示 2）：每块只放一个 token 时，还需要写时复制吗？
  4. 把 BLOCK_SIZE 改成 64（演示 1）：块大了，并行采样还省得下吗？n = 1 时呢（WIDTHS = (1, 2, 4)）？
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))   # 仓库根目录：lab_common、exercises
import numpy as np  # noqa: E402

from lab_common import show  # noqa: E402
from lab_common.transformer_lab import TINY, KVCache, config_like, forward, init_params  # noqa: E402
from paged_kv import BlockPool, n_blocks, paged_step  # noqa: E402

# --mine：用你在 exercises/ 里写的（见 exercises/README.md）；不加就用讲义的实现
if "--mine" in sys.argv[1:]:
    from exercises.ex2_gather_kv import gather_kv
    from exercises.ex3_cow import PagedSequence
else:
    from paged_kv import gather_kv, PagedSequence

MODEL_SEED = 0             # 小模型（第 2 讲的 TINY）权重的随机种子
LEN_SEED = 0               # 演示 1 请求长度和提示的随机种子
N_REQUESTS = 12            # 演示 1：几个请求（每个请求一个提示）
WIDTHS = (2, 4, 6)         # 演示 1：并行采样的 n、束搜索的宽度
BLOCK_SIZE = 16            # 演示 1 的块大小（vLLM 默认 16，论文 §7.2）
MAX_PROMPT = 64            # 演示 1：提示长度的上限（束搜索在小模型上真的逐个 token 解码：越长越慢）
MAX_OUTPUT = 128           # 演示 1：输出长度的上限
COW_BLOCK_SIZE = 4         # 演示 2 的块大小
COW_PROMPT = 6             # 演示 2：共享序列的长度（6 = 一个满块 + 最后一块写了 2 个）
COW_SEED = 7               # 演示 2 的提示和两个新 token 的随机种子

ALPACA_MEAN = (19.31, 58.45)       # vLLM 论文（SOSP'23）图 11(b)：Alpaca 的平均输入 / 输出长度
SHAREGPT_MEAN = (161.31, 337.99)   # 同上图 11(a)：ShareGPT（总长截在 OPT 的 2,048）
MAX_WIDTH = 6                      # 每个请求总抽 6 个输出长度（样本 j 用第 j 个）：改 WIDTHS 不改请求
VLLM_63 = {("并行采样", "Alpaca"): "6.1–9.8%", ("并行采样", "ShareGPT"): "16.2–30.5%",   # vLLM 论文 §6.3：OPT-13B，
           ("束搜索", "Alpaca"): "37.6–55.2%"}    # n、束宽 2、4、6 合起来的省下比例


def check_settings():
    show.check("MODEL_SEED", MODEL_SEED, show.is_int(MODEL_SEED, 0, 2**32 - 1), " 0 到 2³² − 1 的整数")
    show.check("LEN_SEED", LEN_SEED, show.is_int(LEN_SEED, 0, 2**32 - 1), " 0 到 2³² − 1 的整数")
    show.check("COW_SEED", COW_SEED, show.is_int(COW_SEED, 0, 2**32 - 1), " 0 到 2³² − 1 的整数")
    show.check("N_REQUESTS", N_REQUESTS, show.is_int(N_REQUESTS, 1, 200), " 1 到 200 的整数")
    show.check("WIDTHS", WIDTHS, show.is_ints(WIDTHS, 1, MAX_WIDTH), f" 从小到大、不重复的 n（1 到 {MAX_WIDTH}），例如 (2, 4, 6)")
    show.check("BLOCK_SIZE", BLOCK_SIZE, show.is_int(BLOCK_SIZE, 1, 256), " 1 到 256 的整数")
    show.check("MAX_PROMPT", MAX_PROMPT, show.is_int(MAX_PROMPT, 2, 256), " 2 到 256 的整数")
    show.check("MAX_OUTPUT", MAX_OUTPUT, show.is_int(MAX_OUTPUT, 2, 256), " 2 到 256 的整数")
    show.check("COW_BLOCK_SIZE", COW_BLOCK_SIZE, show.is_int(COW_BLOCK_SIZE, 1, 64), " 1 到 64 的整数")
    show.check("COW_PROMPT", COW_PROMPT, show.is_int(COW_PROMPT, 1, 64) and n_blocks(COW_PROMPT, COW_BLOCK_SIZE) <= 10,
               f" 1 到 64 的整数，且最多占 10 块（块大小 {COW_BLOCK_SIZE}：表里逐块列出 ref_count）")


def draw_lengths(rng, mean, cap, size=None):
    """对数正态（σ = 0.8）的长度，均值约为 mean，截到 [2, cap]。"""
    return np.clip(np.round(rng.lognormal(np.log(mean) - 0.32, 0.8, size)), 2, cap).astype(int)


def make_requests(mean, max_prompt, max_output, max_total, vocab=None):
    """N_REQUESTS 个 (提示长度, MAX_WIDTH 个输出长度, 提示 token 或 None)：对数正态，均值 mean，各自截到上限。"""
    rng = np.random.default_rng(LEN_SEED)
    reqs = []
    for _ in range(N_REQUESTS):
        n, tokens = int(draw_lengths(rng, mean[0], max_prompt)), None
        if vocab is not None:
            tokens = rng.integers(0, vocab, n)
        reqs.append((n, np.minimum(draw_lengths(rng, mean[1], max_output, MAX_WIDTH), max_total - n), tokens))
    return reqs


def parallel_sampling(prompt_len, out_lens, n, block_size):
    """n 个样本共享提示的块，各自往后写 out_lens[j] 个 token。占几块只取决于长度、和采到哪个 token 无关：只在块池里重放
    fork、reserve、free（paged_step 对块做的也就是这些）。返回每一步的 (块池占用的块, 不共享时要的块, 累计 COW 次数)。"""
    pool = BlockPool(None, n * n_blocks(prompt_len + int(out_lens.max()), block_size), block_size)   # 只记账
    parent = PagedSequence(pool)
    parent.reserve(prompt_len)
    parent.length = prompt_len
    samples = [parent.fork() for _ in range(n)]
    parent.free()
    steps = []                                     # 提示的块现在由 n 个样本共同持有
    for t in range(int(out_lens[:n].max())):
        live = [j for j in range(n) if out_lens[j] > t]
        for j in live:                             # 每个样本写一个 token：没写满的共享块先复制
            samples[j].reserve(1)
            samples[j].length += 1
        steps.append((pool.num_used, sum(n_blocks(samples[j].length, block_size) for j in live), pool.n_cow))
        for j in live:
            if out_lens[j] == t + 1:               # 写完了（相当于遇到 EOS）：块还给块池
                samples[j].free()
    return steps


def beam_search(params, cfg, jobs, block_size):
    """束搜索：每步从 width × width 个候选（每条束的前 width 个 token）里按累计对数概率留下前 width 个；选中的从
    父束 fork（只加引用计数），父束全部 free。jobs = [(提示, 解码几步, width)]：几个请求一起解码，每步一次 paged_step
    （每条的 logits 和单独算逐位相同，只是快）。返回每个请求逐步的 (块池占用, 不共享时要的块, 累计 COW)。"""
    pools = [BlockPool(cfg, 2 * w * n_blocks(len(p) + n, block_size) + w, block_size) for p, n, w in jobs]
    roots = [PagedSequence(pool) for pool in pools]
    first = paged_step(params, cfg, roots, [p for p, _, _ in jobs], gather_kv)
    beams = [[(root, out[-1], 0.0)] for root, out in zip(roots, first)]     # 每个请求：[(序列, logits, 累计分数)]
    steps = [[] for _ in jobs]
    for t in range(max(n for _, n, _ in jobs)):
        live, picked = [k for k, (_, n, _) in enumerate(jobs) if t < n], {}    # 还在解码的请求、它们选中的候选
        for k in live:
            x = np.stack([logits for _, logits, _ in beams[k]])                  # (束数, vocab)
            x = x - x.max(axis=-1, keepdims=True)
            lp = x - np.log(np.exp(x).sum(axis=-1, keepdims=True))               # log softmax
            top = np.argsort(-lp, axis=-1, kind="stable")[:, :jobs[k][2]]      # 每条束的前 width 个 token
            cand = [(score + float(lp[i, x]), i, int(x)) for i, (_, _, score) in enumerate(beams[k]) for x in top[i]]
            cand.sort(key=lambda c: -c[0])        # 稳定排序：同分时按候选的先后
            picked[k] = [(beams[k][i][0].fork(), score, x) for score, i, x in cand[:jobs[k][2]]]
            for seq, _, _ in beams[k]:
                seq.free()
        news = [(child, [x]) for k in live for child, _, x in picked[k]]
        outs = iter(paged_step(params, cfg, [c for c, _ in news], [x for _, x in news], gather_kv))
        for k in live:
            beams[k] = [(child, next(outs)[-1], score) for child, score, _ in picked[k]]
            need = sum(n_blocks(child.length, block_size) for child, _, _ in picked[k])   # 不共享时要的块
            steps[k].append((pools[k].num_used, need, pools[k].n_cow))
    return steps


def demo_savings():
    """并行采样和束搜索时，共享 KV 块能省多少显存？"""
    cfg = config_like(TINY, max_seq=MAX_PROMPT + MAX_OUTPUT)
    params = init_params(cfg, seed=MODEL_SEED)
    reqs = make_requests(ALPACA_MEAN, MAX_PROMPT, MAX_OUTPUT, MAX_PROMPT + MAX_OUTPUT, cfg.vocab)
    long = make_requests(SHAREGPT_MEAN, 2046, 2048, 2048)                 # OPT 的最大序列长度 2,048
    beam = beam_search(params, cfg, [(toks, int(outs[0]), w) for w in WIDTHS for _, outs, toks in reqs], BLOCK_SIZE)
    rows = []                                      # 束搜索解码的步数 = 第一个样本的输出长度
    for j, w in enumerate(WIDTHS):
        runs = {("并行采样", "Alpaca"): [parallel_sampling(n, outs, w, BLOCK_SIZE) for n, outs, _ in reqs],
                ("并行采样", "ShareGPT"): [parallel_sampling(n, outs, w, BLOCK_SIZE) for n, outs, _ in long],
                ("束搜索", "Alpaca"): beam[j * len(reqs):(j + 1) * len(reqs)]}     # 每个请求逐步的数
        for (kind, lengths), per_req in runs.items():
            shared = sum(used for steps in per_req for used, _, _ in steps)
            private = sum(need for steps in per_req for _, need, _ in steps)
            paper = "-"
            if w in (2, 4, 6):                     # 论文只测了这三个
                paper = VLLM_63[(kind, lengths)]
            rows.append([w, kind, lengths, show.num(private), show.num(shared), show.pct(1 - shared / private, 1),
                         show.num(sum(steps[-1][2] for steps in per_req)), paper])
    outside = any(r[7] != "-" and not show.value(r[7].split("–")[0] + "%") <= show.value(r[5])
                  <= show.value(r[7].split("–")[1]) for r in rows)      # 有省下落在论文范围外的行
    show.table(["n", "方式", "负载", "不共享 块·步", "共享 块·步", "省下", "COW", "论文"], rows,
               caption=f"n：并行采样（一个提示要 n 个回答）或束搜索（每步留得分最高的 n 条候选）的宽度。负载：仿 Alpaca"
                       f"（短指令）/ ShareGPT（长对话），{N_REQUESTS} 个请求（种子 {LEN_SEED}），平均输入 "
                       f"{np.mean([r[0] for r in reqs]):.0f} / {np.mean([r[0] for r in long]):.0f} 个 token（vLLM 图 11 "
                       f"的均值）。块·步：每步占的块（每块 {BLOCK_SIZE} 个 token）逐步相加；"
                       "省下 = 1 − 共享 / 不共享；COW：写时复制（写共享的、没写满的块之前先复制它）的次数。束搜索在第 2 讲的小模型上真的解码，并行采样不跑"
                       "模型，只模拟块的分配。论文：vLLM §6.3、图 15，OPT-13B、块 16，n = 2、4、6 的范围；这里权重随机、"
                       "束不提前结束，和论文不同：只比量级"
                       + ("，有的行在论文的范围外。" if outside else "。"))
    beam = {r[0]: r[5] for r in rows if r[1] == "束搜索"}                  # n → 表里印的"省下"
    par = {r[0]: r[5] for r in rows if r[1:3] == ["并行采样", "Alpaca"]}
    w = WIDTHS[-1]
    long_par = next(r[5] for r in rows if r[0] == w and r[2] == "ShareGPT")
    show.claim(f"宽度 {w} 的束搜索省下 {beam[w]} 的 KV 块，n = {w} 的并行采样只省 {par[w]}：束搜索的候选共享的不只是提示，"
               "还有已经生成的一段共同前缀。", all(show.value(beam[x]) > show.value(par[x]) for x in WIDTHS),
               "束搜索 / 并行采样省下：" + "，".join(f"{beam[x]} / {par[x]}" for x in WIDTHS))
    show.claim(f"换成 ShareGPT 的长度（提示更长，写满的共享块更多），n = {w} 的并行采样从 {par[w]} 升到 {long_par}。",
               show.value(long_par) > show.value(par[w]), f"n = {w}：Alpaca {par[w]}，ShareGPT {long_par}")
    return dict(rows=rows, widest=runs, width=w, block_size=BLOCK_SIZE)     # runs：最宽的 n 时每个请求逐步的数


def demo_cow():
    """两条序列共享一个没写满的块，一条往里写时，块池里发生了什么，共享的块为什么不会被写坏？"""
    bs, L = COW_BLOCK_SIZE, COW_PROMPT
    cfg = config_like(TINY, max_seq=L + 1)
    params = init_params(cfg, seed=MODEL_SEED)
    rng = np.random.default_rng(COW_SEED)
    prompt = rng.integers(0, cfg.vocab, L)
    tok_a, tok_b = (int(t) for t in rng.integers(0, cfg.vocab, 2))
    pool = BlockPool(cfg, n_blocks(L, bs) + 2, bs)     # a 的块 + b、a 写时可能各要一块
    steps = []                                     # 每一步之后块池和块表的样子（表的一行、GIF 的一帧）

    def record(step, *seqs):                       # seqs：a，或 a、b
        steps.append(dict(step=step, tables={n: list(x.blocks) for n, x in zip("ab", seqs)}, free=pool.num_free,
                          lengths={n: x.length for n, x in zip("ab", seqs)}, ref_count=pool.ref_count.tolist(),
                          cow=pool.n_cow))

    a = PagedSequence(pool)
    paged_step(params, cfg, [a], [prompt], gather_kv)
    record(f"a：prefill {L} 个 token", a)
    b = a.fork()
    record("b = a.fork()", a, b)
    last, pos = a.blocks[-1], L % bs               # 共享的最后一块、下一个 token 写在块里的哪个位置
    before = pool.k[:, last].copy(), pool.v[:, last].copy()
    out_b = paged_step(params, cfg, [b], [[tok_b]], gather_kv)[0][-1]
    record(f"b 写第 {L + 1} 个 token", a, b)
    new, cow_b, rc_last = b.blocks[-1], pool.n_cow, int(pool.ref_count[last])
    d_block = max(float(np.max(np.abs(x[:, last] - x0))) for x, x0 in zip((pool.k, pool.v), before))   # 块 last 变了多少
    out_a = paged_step(params, cfg, [a], [[tok_a]], gather_kv)[0][-1]
    record(f"a 写第 {L + 1} 个 token", a, b)
    d_logits = max(float(np.max(np.abs(out - forward(params, cfg, np.append(prompt, tok)[None], cache=KVCache(cfg, 1))
                                       [0, -1]))) for out, tok in ((out_a, tok_a), (out_b, tok_b)))   # 和各自从头算比
    s_block, s_logits = ("0.0" if d == 0 else f"{d:.1e}" for d in (d_block, d_logits))      # 印出来的最大差
    show.table(["步", "a 块表", "b 块表", "ref_count", "空闲块", "COW"],
               [[st["step"], st["tables"]["a"], st["tables"].get("b", "-"), st["ref_count"], st["free"], st["cow"]]
                for st in steps],
               caption=f"prefill：一次写入整段输入；块表：序列的 KV 依次存在哪些物理块（每块 {bs} 个 token）。a.fork()："
                       f"新序列 b 共用 a 的块表，不复制 KV；ref_count（引用计数）：物理块 0–{pool.n_blocks - 1} 各有几条序列"
                       "在用；空闲块：块池还剩几块；COW：累计写时复制（写共享的块之前先复制它）的次数。模型 "
                       f"{cfg.n_layers} 层、种子 {MODEL_SEED}，输入种子 {COW_SEED}。块 {last} 在 b 写前后的最大差 {s_block}；"
                       f"a、b 写第 {L + 1} 个 token 的 logits 与各自从头算（连续存放）的最大差 {s_logits}。GPU 版（脚本 06，"
                       "lecture07/gpu/paged_decode.py）做法相同，一步里要复制的块一次拷完。")
    show.claim(f"b 写第 {L + 1} 个 token 时，共享的最后一块（块 {last}）只写了 {pos}/{bs}：先整块复制成块 {new}（"
               f"{cfg.n_layers} 层 × K、V），再写进它的第 {pos + 1} 个位置（下标 {pos}）；块 {last} 一位也没变（最大差 "
               f"{s_block}），ref_count 从 2 降到 {rc_last}。", new != last and cow_b == 1 and d_block == 0 and rc_last == 1,
               f"b 的最后一块 {last} → {new}，COW {cow_b} 次，块 {last} 的最大差 {s_block}、ref_count {rc_last}")
    show.claim(f"a 再写时块 {last} 只剩它一个使用者，原地写，COW 仍是 {pool.n_cow}；a、b 的 logits 与各自从头算的"
               f"最大差是 {s_logits}，逐位相同：写时复制从不写别的序列的块。",
               a.blocks[-1] == last and pool.n_cow == cow_b and d_logits == 0,
               f"a 的最后一块 {a.blocks[-1]}，COW {pool.n_cow} 次，logits 与从头算的最大差 {s_logits}")
    return dict(steps=steps, block_size=bs, n_pool=pool.n_blocks, mark=last)


DEMOS = [("演示 1：并行采样与束搜索——共享的块只存一份", demo_savings),
         ("演示 2：一次写时复制，一步一行", demo_cow)]


def main(argv=None):
    p = show.parser(__doc__, DEMOS)
    args = p.parse_args(argv)
    check_settings()
    show.run(DEMOS, args)


if __name__ == "__main__":
    show.quietly(main)
