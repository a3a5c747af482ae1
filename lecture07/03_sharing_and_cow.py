"""CS349E · 第 7 讲 · 03_sharing_and_cow.py —— 多个输出共享同一段 KV：能省多少显存？写时复制怎样保证不写坏别人？

【问题】并行采样（一个提示要 n 个回答）和束搜索（保留 k 条候选）里，很多序列的开头完全相同。
分页以后，相同的块只存一份、用引用计数记下有几条序列在用；谁要往一个共享的、没写满的块里写，
谁就先复制一份（写时复制，copy-on-write）。那么：在真模型上这样能省多少 KV 显存？
复制发生的那一刻，块池里到底发生了什么？

  演示 1：并行采样 n = 2、4、6 与束搜索宽度 2、4、6，数共享时与不共享时占用的块（对照 vLLM 论文 §6.3）。
          束搜索在第 2 讲的小模型上真的解码；并行采样的块数只取决于长度，在块池里重放（前几个请求在真模型上
          核对逐步相同）；再按 ShareGPT 的长度重放一遍并行采样。
  演示 2：一次写时复制，逐步看块表、引用计数和块里的数据（06_triton_cow_clone.py 的 numpy 版）。

【运行】python lecture07/03_sharing_and_cow.py          （约 3 秒，2 核笔记本，不需要 GPU）
        python lecture07/03_sharing_and_cow.py --demo 2 （只跑演示 2；--more 印出全部观察，--list 列出演示）
【依赖】numpy、rich；本目录的 paged_kv；lab_common 的 transformer_lab、console。

【练习】exercises/ex3_cow.py：自己写 PagedSequence 的 fork、reserve（写时复制）、free；make check EX=3，再加 --mine 运行本脚本。
【试一试】改下面"学生可以改的设置"里的一个值，再运行（不合理的值会被一行拒绝，并说明允许的范围）：
  1. 把 `COW_PROMPT` 改成 8（--demo 2）：最后一块正好写满时，还会发生写时复制吗？
  2. 把 `COW_PROMPT` 改成 14（--demo 2）：共享的序列更长时，要复制的还是只有一块吗？
  3. 把 `COW_BLOCK_SIZE` 改成 1（--demo 2）：每块只放一个 token 时，还需要写时复制吗？
  4. 把 `WIDTHS` 改成 (1, 2, 4)（--demo 1）：只有一条序列（n = 1、宽度 1）时能省多少？
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.realpath(__file__))))  # 仓库根目录：让 lab_common 包可以 import
from lab_common.endings import quiet_endings  # noqa: E402
quiet_endings()  # 最先做（还没 import numpy）：这之后按 Ctrl-C、管道被关都只打一行，不打印 traceback
from lab_common import console  # noqa: E402
from lab_common.console import print_header, print_observations, print_table, print_text, status  # noqa: E402
from lab_common.say import change, count, integer, listing, order, pct, pct1, value, vs  # noqa: E402
from lab_common.script_tools import run_lecture  # noqa: E402
from lab_common.settings import Source, check_setting, is_int, is_number, is_sorted_ints  # noqa: E402
import numpy as np  # noqa: E402
from paged_kv import BlockPool, PagedSequence, n_blocks, paged_step  # noqa: E402
from pool_pictures import PoolFilm  # noqa: E402
from lab_common.frames import play  # noqa: E402
from lab_common.transformer_lab import TINY, KVCache, config_like, forward, init_params  # noqa: E402

# ---- 学生可以改的设置 ----
MODEL_SEED = 0                 # 小模型权重的随机种子
LEN_SEED = 0                   # 请求长度的随机种子
SAMPLE_SEED = 7                # 采样的随机种子（第 j 个样本用 SAMPLE_SEED + j：n=4 的前两个样本就是 n=2 的两个）
N_REQUESTS = 12                # 演示 1：并行采样用几个请求（提示）
N_CHECK = 3                    # 演示 1：并行采样在真模型上核对前几个请求（其余只在块池里重放，块数完全相同）
N_BEAM = 12                    # 演示 1：束搜索用其中前几个请求（比 N_REQUESTS 大时全用；束搜索要在模型上真跑，最慢）
WIDTHS = (2, 4, 6)             # 演示 1：并行采样的 n、束搜索的宽度（1 到 MAX_WIDTH）
BLOCK_SIZE = 16                # 块大小（vLLM 默认 16）
ALPACA_MEAN = (19.31, 58.45)   # vLLM 论文图 11(b)：Alpaca 平均输入 / 输出长度（长度按它抽）
MAX_PROMPT, MAX_OUTPUT = 64, 128  # 长度上限（束搜索在小模型上真的逐个 token 解码：越长越慢）
TEMPERATURE = 1.0              # 并行采样的温度
COW_BLOCK_SIZE = 4             # 演示 2 的块大小
COW_PROMPT = 6                 # 演示 2：共享序列的长度（6 = 一个满块 + 最后一块写了 2 个）

# ---- 论文的数字（只用来对照，标明出处）----
VLLM_63 = {"并行采样": (6.1, 9.8), "束搜索": (37.6, 55.2)}   # vLLM 论文（SOSP'23）§6.3、图 15：Alpaca、OPT-13B 的显存节省 %
VLLM_63_WIDTHS = (2, 4, 6)         # vLLM 论文图 14、15：n = 2、4、6（并行采样）和束宽 2、4、6；上面的范围是这三个合起来的
VLLM_63_SHAREGPT_PARALLEL = (16.2, 30.5)   # vLLM 论文 §6.3：同样的实验换成 ShareGPT，并行采样省 16.2–30.5%
SHAREGPT_MEAN = (161.31, 337.99)   # vLLM 论文图 11(a)：ShareGPT 平均输入 / 输出长度（演示 1 只在块池里重放）
SHAREGPT_MAX_SEQ = 2048            # OPT 的最大序列长度：ShareGPT 式长度的上限
MAX_WIDTH = 6                      # WIDTHS 允许的最大 n / 宽度（论文图 14、15 最宽 6）；每个请求总抽这么多个输出长度（改 WIDTHS 不改负载）
# 设置里出自论文的值：设置还是这个值时才印论文的名字（lab_common.settings.Source）
ALPACA_SOURCE = Source((19.31, 58.45), "vLLM 论文图 11(b)", "Alpaca 的均值")
BLOCK_SOURCE = Source(16, "vLLM 论文 §7.2", "的默认块大小")


def draw_lengths(rng, mean, cap, size=None):
    """对数正态（σ=0.8）的长度，均值约为 mean，截到 [2, cap]。"""
    return np.clip(np.round(rng.lognormal(np.log(mean) - 0.32, 0.8, size)), 2, cap).astype(int)


def make_requests(cfg, n, seed, mean):
    """Alpaca 式的请求：输入长度、每个样本的输出长度都是对数正态（σ=0.8，均值 mean = (输入, 输出)），截到上限。

    每个请求总抽 MAX_WIDTH 个输出长度（样本 j 用第 j 个），不管 WIDTHS 里最大是几：随机数流不随 WIDTHS 变，
    改 WIDTHS 时请求（提示和长度）一个不变，比的是同一批请求。"""
    rng = np.random.default_rng(seed)
    reqs = []
    for _ in range(n):
        prompt = rng.integers(0, cfg.vocab, int(draw_lengths(rng, mean[0], MAX_PROMPT)))
        reqs.append((prompt, draw_lengths(rng, mean[1], MAX_OUTPUT, MAX_WIDTH)))
    return reqs


def sharegpt_lengths(n, seed):
    """ShareGPT 式的长度（均值取论文图 11(a)），只给块池重放用：[(输入长度, 每个样本的输出长度)]，总长 ≤ 2048。
    和 make_requests 一样每个请求总抽 MAX_WIDTH 个输出长度：改 WIDTHS 不改长度。"""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        p = int(draw_lengths(rng, SHAREGPT_MEAN[0], SHAREGPT_MAX_SEQ - 2))
        out.append((p, np.minimum(draw_lengths(rng, SHAREGPT_MEAN[1], SHAREGPT_MAX_SEQ, MAX_WIDTH),
                                  SHAREGPT_MAX_SEQ - p)))
    return out


def fmt_list(xs):
    return "[" + " ".join(str(int(x)) for x in xs) + "]"


def log_softmax(x):
    """沿最后一维：x 是一条 logits (vocab,)，或几条叠在一起 (n, vocab)。"""
    x = x - x.max(axis=-1, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=-1, keepdims=True))


def rising(values):
    """严格递增：rising([1, 2, 3]) → True；rising([1, 1]) → False。"""
    return all(b > a for a, b in zip(values, values[1:]))


# =============================================================================
def parallel_sampling_steps(cfg, prompt, out_lens, n, block_size, sample_seed, temperature):
    """一个提示要 n 个回答：提示只算一次、只存一份，n 个样本 fork 出来各自往后采样。

    和 beam_search_steps 一样是生成器：每一步 yield (要往后算的序列, 各自的新 token)，收回它们的 logits。
    返回 (共享时每步块数之和, 不共享时每步块数之和, 写时复制次数, 每个样本生成的 token,
    逐步的 [(块池占用的块, 不共享时要的块, 累计 COW 次数)]——画图用)。
    """
    pool = BlockPool(cfg, n_blocks=n * n_blocks(len(prompt) + int(out_lens.max()), block_size),
                     block_size=block_size)
    parent = PagedSequence(pool)
    last = (yield [parent], [prompt])[0][-1]       # prefill
    samples = [parent.fork() for _ in range(n)]
    parent.free()                                  # 提示的块现在由 n 个样本共同持有
    rngs = [np.random.default_rng(sample_seed + j) for j in range(n)]
    logits = [last] * n
    left = [int(x) for x in out_lens[:n]]
    gen = [[] for _ in range(n)]
    steps = []
    live = list(range(n))
    while live:
        toks = []
        for j in live:
            p = np.exp(log_softmax(logits[j] / temperature))
            toks.append([int(rngs[j].choice(cfg.vocab, p=p))])
            gen[j].append(toks[-1][0])
        outs = yield [samples[j] for j in live], toks
        for j, o in zip(live, outs):
            logits[j] = o[-1]
            left[j] -= 1
        steps.append((pool.num_used, sum(n_blocks(samples[j].length, block_size) for j in live), pool.n_cow))
        for j in [j for j in live if left[j] == 0]:   # 生成完了（相当于遇到 EOS）：释放
            samples[j].free()
        live = [j for j in live if left[j] > 0]
    return sum(s[0] for s in steps), sum(s[1] for s in steps), pool.n_cow, gen, steps


def parallel_sampling(params, cfg, prompt, out_lens, n, block_size, sample_seed, temperature):
    """一个请求的并行采样（parallel_sampling_steps 单独解码）。"""
    return decode_together(params, cfg, [parallel_sampling_steps(cfg, prompt, out_lens, n, block_size, sample_seed,
                                                                 temperature)])[0]


def replay_sampling(cfg, prompt_len, out_lens, n, block_size):
    """只重放块池的操作（fork、reserve、free），不算模型：与 parallel_sampling 的前 n 个样本占用完全相同。

    第 j 个样本的随机数只由 SAMPLE_SEED + j 决定，KV 又与放在哪个块无关（02 脚本：逐位相同），
    所以 n=2、4 的样本就是 n=6 的前 2、4 个；它们的块数只取决于长度，重放一遍分配即可。
    返回 (共享时块数之和, 不共享时块数之和, 写时复制次数, 逐步的 [(块池占用, 不共享时要的块, 累计 COW)])。
    """
    pool = BlockPool(cfg, n_blocks=n * n_blocks(prompt_len + int(out_lens.max()), block_size), block_size=block_size)
    parent = PagedSequence(pool)
    parent.reserve(prompt_len)
    parent.length = prompt_len
    samples = [parent.fork() for _ in range(n)]
    parent.free()
    left = [int(x) for x in out_lens[:n]]
    steps = []
    live = list(range(n))
    while live:
        for j in live:                               # paged_step 里对内存做的就是这两步
            samples[j].reserve(1)
            samples[j].length += 1
            left[j] -= 1
        steps.append((pool.num_used, sum(n_blocks(samples[j].length, block_size) for j in live), pool.n_cow))
        for j in [j for j in live if left[j] == 0]:
            samples[j].free()
        live = [j for j in live if left[j] > 0]
    return sum(x[0] for x in steps), sum(x[1] for x in steps), pool.n_cow, steps


def common_prefix_len(toks):
    """toks: (width, steps)，每条束生成的 token。所有束从开头起完全相同的步数。

    >>> common_prefix_len(np.array([[1, 2, 3], [1, 2, 4]])), common_prefix_len(np.array([[5, 6], [5, 6]]))
    (2, 2)
    """
    same = np.all(toks == toks[0], axis=0)
    if same.all():
        return len(same)
    return int(np.argmin(same))


def beam_search_steps(cfg, prompt, steps, width, block_size):
    """束搜索：每步每条束取前 width 个 token，从 width² 个候选里按累计对数概率留下前 width 个。

    被选中的候选从它的父束 fork（只加引用计数），没被选中的父束整条释放；新 token 写进共享的
    不满块时写时复制。写成生成器，自己不调用模型：每一步 yield (要往后算的序列, 各自的新 token)，
    收回它们的 logits（decode_together 把好几个请求的同一步放进一次 paged_step）。
    返回 (共享时块数之和, 不共享时块数之和, 写时复制次数, 结束时各束共同前缀的长度,
    逐步的 [(块池占用的块, 不共享时要的块, 累计 COW 次数)]——画图用)。
    """
    pool = BlockPool(cfg, n_blocks=2 * width * n_blocks(len(prompt) + steps, block_size) + width,
                     block_size=block_size)
    root = PagedSequence(pool)
    outs = yield [root], [prompt]                  # prefill
    beams = [(root, outs[0][-1], 0.0, [])]
    per_step = []
    for _ in range(steps):
        lp = log_softmax(np.stack([lg for _, lg, _, _ in beams]))      # (束数, vocab)
        top = np.argsort(-lp, axis=-1, kind="stable")[:, :width]         # 每条束的前 width 个 token
        cand = [(score + float(lp[i, t]), i, int(t)) for i, (_, _, score, _) in enumerate(beams) for t in top[i]]
        cand.sort(key=lambda c: -c[0])             # 稳定排序：同分时按候选的先后
        chosen = cand[:width]
        children = [beams[i][0].fork() for _, i, _ in chosen]
        for seq, *_ in beams:                      # 父束全部释放：没被选中的块回到空闲表
            seq.free()
        outs = yield children, [[t] for _, _, t in chosen]
        beams = [(c, o[-1], s, beams[i][3] + [t]) for c, o, (s, i, t) in zip(children, outs, chosen)]
        per_step.append((pool.num_used, sum(n_blocks(c.length, block_size) for c, *_ in beams), pool.n_cow))
    common = common_prefix_len(np.array([b[3] for b in beams]))
    return sum(s[0] for s in per_step), sum(s[1] for s in per_step), pool.n_cow, common, per_step


def decode_together(params, cfg, searches):
    """几个请求一起解码（searches：每个请求一个生成器，beam_search_steps 或 parallel_sampling_steps），
    返回各自的结果（同样的顺序）。

    每一轮把所有还没结束的请求这一步要算的序列放进同一次 paged_step（推理服务也是这样成批解码的）。
    批里每条序列的 logits 与单独算时逐位相同（transformer_lab.run_layers），所以结果和一个一个请求地跑完全一样，
    只是少调用很多次模型。
    """
    results = [None] * len(searches)
    asks = {i: next(s) for i, s in enumerate(searches)}      # 请求 i 这一步要算的 (序列, 新 token)
    while asks:
        outs = iter(paged_step(params, cfg, [q for seqs, _ in asks.values() for q in seqs],
                               [t for _, toks in asks.values() for t in toks]))
        left = {}
        for i, (seqs, _) in asks.items():
            try:
                left[i] = searches[i].send([next(outs) for _ in seqs])
            except StopIteration as done:          # 这个请求解码完了：生成器的返回值就是它的结果
                results[i] = done.value
        asks = left
    return results


def beam_search(params, cfg, prompt, steps, width, block_size):
    """一个请求的束搜索（beam_search_steps 单独解码）。"""
    return decode_together(params, cfg, [beam_search_steps(cfg, prompt, steps, width, block_size)])[0]


def savings(cfg, params, reqs, long, widths, block_size, n_beam, n_check, sample_seed, temperature):
    """演示 1 的全部数：{(方式, n): dict(shared, private, cow, saved, common)}，外加逐步记录（画图用）。

    方式："并行采样"（Alpaca 长度，块池重放；前 n_check 个请求在真模型上核对）、"并行采样（ShareGPT）"（块池重放）、
    "束搜索"（真模型解码）。
    """
    nmax = max(widths)
    res, steps, replayed = {}, {}, {}
    for w in widths:
        sh = pr = cow = 0
        for k, (prompt, outs) in enumerate(reqs):
            s, p, c, per_step = replay_sampling(cfg, len(prompt), outs, w, block_size)
            if w == nmax:
                steps[("并行采样", k)] = per_step
                replayed[k] = (s, p, c, per_step)
            sh, pr, cow = sh + s, pr + p, cow + c
        res[("并行采样", w)] = dict(shared=sh, private=pr, cow=cow, saved=1 - sh / pr, common=0.0)
        sh = pr = cow = 0
        for plen, outs in long:
            s, p, c, _ = replay_sampling(cfg, plen, outs, w, block_size)
            sh, pr, cow = sh + s, pr + p, cow + c
        res[(SHAREGPT, w)] = dict(shared=sh, private=pr, cow=cow, saved=1 - sh / pr, common=0.0)
    # 在真模型上跑的一起解码：束搜索的每个宽度 × 每个请求，和前 n_check 个请求的并行采样（核对重放的逐步块数）
    runs = {("束搜索", w, k): beam_search_steps(cfg, prompt, int(outs[0]), w, block_size)
            for w in widths for k, (prompt, outs) in enumerate(reqs[:n_beam])}
    runs.update({("并行采样", nmax, k): parallel_sampling_steps(cfg, prompt, outs, nmax, block_size, sample_seed,
                                                                temperature)
                 for k, (prompt, outs) in enumerate(reqs[:n_check])})
    done = dict(zip(runs, decode_together(params, cfg, list(runs.values()))))
    checked = all(done[("并行采样", nmax, k)][:3] + (done[("并行采样", nmax, k)][4],) == replayed[k]
                  for k in range(len(reqs[:n_check])))
    for w in widths:
        sh = pr = cow = common = 0
        for k in range(len(reqs[:n_beam])):
            s, p, c, cm, per_step = done[("束搜索", w, k)]
            if w == nmax:
                steps[("束搜索", k)] = per_step
            sh, pr, cow, common = sh + s, pr + p, cow + c, common + cm
        res[("束搜索", w)] = dict(shared=sh, private=pr, cow=cow, saved=1 - sh / pr,
                                common=common / sum(int(o[0]) for _, o in reqs[:n_beam]))
    return res, steps, checked


SHAREGPT = "并行采样（ShareGPT 长度）"


def demo1_savings():
    """并行采样和束搜索时，共享 KV 能省多少显存？"""
    widths, block_size, n_req = WIDTHS, BLOCK_SIZE, N_REQUESTS
    print_header(f"演示 1：并行采样与束搜索——共享的块只存一份（块大小 {block_size}，vLLM 论文 §6.3）")
    cfg = config_like(TINY, max_seq=MAX_PROMPT + MAX_OUTPUT)
    params = init_params(cfg, seed=MODEL_SEED)
    reqs = make_requests(cfg, n_req, LEN_SEED, ALPACA_MEAN)
    n_beam = min(N_BEAM, n_req)
    n_check = min(N_CHECK, n_req)
    long = sharegpt_lengths(n_req, LEN_SEED)
    with status(f"束搜索在小模型上真的解码 {n_beam} 个请求 × {len(widths)} 种宽度…"):
        res, steps, checked = savings(cfg, params, reqs, long, widths, block_size, n_beam, n_check,
                                      SAMPLE_SEED, TEMPERATURE)
    d = dict(res=res, steps=steps, replay_matches_model=checked, n_checked=n_check, reqs=reqs, widths=widths,
             n_requests=n_req, n_beam=n_beam, block_size=block_size, model_seed=MODEL_SEED, paper=dict(VLLM_63),
             paper_sharegpt=VLLM_63_SHAREGPT_PARALLEL,
             mean_in=float(np.mean([len(p) for p, _ in reqs])), mean_out=float(np.mean([o for _, o in reqs])),
             long_mean_in=float(np.mean([p for p, _ in long])), long_mean_out=float(np.mean([o for _, o in long])),
             short_prompts=sum(len(p) < block_size for p, _ in reqs),
             beam_max_len=max(len(p) + int(o[0]) for p, o in reqs[:n_beam]),
             parallel=[res[("并行采样", w)]["saved"] for w in widths],
             beam=[res[("束搜索", w)]["saved"] for w in widths])
    d["parallel_rising"], d["beam_rising"] = rising(d["parallel"]), rising(d["beam"])
    d["share_long"] = {w: res[(SHAREGPT, w)] for w in widths}
    beam_note = ""
    if n_beam < n_req:
        beam_note = f"（束搜索只用前 {n_beam} 个）"
    print_text(f"{count(n_req, '个合成长度的请求')}{beam_note}（长度种子 {LEN_SEED}）：平均输入 {integer(d['mean_in'])}、输出 "
               f"{integer(d['mean_out'])} 个 token，按均值 {means_text(ALPACA_MEAN)} 抽"
               f"（{ALPACA_SOURCE.beside(ALPACA_MEAN, means_text)}）。")
    if console.SHOW_MORE:
        print_text(f"束搜索在第 2 讲的 TINY 模型（权重种子 {MODEL_SEED}）上真的解码；并行采样的块数只取决于长度，在块池里重放"
                   + check_text(n_check, checked) + "。"
                   f"输入 {'、'.join(str(len(p)) for p, _ in reqs)} 个 token；束搜索每个请求解码的步数 = 它第一个样本的"
                   f"输出长度（{'、'.join(str(o[0]) for _, o in reqs[:n_beam])}）。ShareGPT 长度按 vLLM 论文图 11(a) 的均值 "
                   f"{SHAREGPT_MEAN[0]} / {SHAREGPT_MEAN[1]} 抽（σ=0.8，总长 ≤ {SHAREGPT_MAX_SEQ}），平均输入 "
                   f"{integer(d['long_mean_in'])}、输出 {integer(d['long_mean_out'])}，只在块池里重放。")
    rows = []
    for kind, name, lengths in (("并行采样", "并行采样", "Alpaca"), (SHAREGPT, "并行采样", "ShareGPT"),
                                ("束搜索", "束搜索", "Alpaca")):
        lo, hi = VLLM_63_SHAREGPT_PARALLEL
        if kind in VLLM_63:
            lo, hi = VLLM_63[kind]
        for w in widths:
            r = res[(kind, w)]
            paper = "-"                              # 论文只测了 n = 2、4、6
            if w in VLLM_63_WIDTHS:
                paper = f"{lo}–{hi}%"
            rows.append([name, lengths, w, integer(r["private"]), integer(r["shared"]), pct1(r["saved"]),
                         integer(r["cow"]), paper])
    print_table(["方式", "长度", "n", "不共享", "共享", "省下", "COW", "论文"], rows, caption=table_caption_1(d))
    lines, more = observations_1(d)
    print_observations(lines, more)
    return d


def means_text(means):
    """(19.31, 58.45) → '19.31 / 58.45'（设置照原样印）。"""
    return " / ".join(f"{x:g}" for x in means)


def table_caption_1(d):
    """演示 1 的表注：列的意思，和论文那一列比的是什么（论文是真模型、真负载；块大小改过时说出来）。"""
    block = f"块 {d['block_size']}"
    if not BLOCK_SOURCE.holds(d["block_size"]):
        block += f"（论文的块是 {BLOCK_SOURCE.value}）"
    return ("不共享 / 共享：每一步占用的 KV 块加起来（块·步）；省下 = 1 − 共享 / 不共享；COW：写时复制的次数。论文：vLLM 论文"
            f" §6.3、图 15，真实的 OPT-13B 在负载下，n = 2、4、6 合起来的范围；这里是随机权重的 TINY 模型、没有 EOS、{block}"
            "：只比量级。")


def check_text(n_check, checked):
    """并行采样在真模型上核对了几个请求（返回接在句子后面的一段）。"""
    if n_check == 0:
        return "（这次没有在真模型上核对：N_CHECK = 0）"
    if checked:
        return f"，前 {n_check} 个请求另在真模型上采样，逐步的块数与重放完全相同"
    return f"；前 {n_check} 个请求在真模型上采样的块数与重放不同（见表后的观察）"


def observations_1(d):
    """演示 1 的观察 → (默认的至多 2 条, --more 的其余)。数都取自 d，按表里的格式（pct1、integer）比较。"""
    widths, res = d["widths"], d["res"]
    shareable = [w for w in widths if w >= 2]
    lines, more = [], []
    if not shareable:
        lines.append(f"WIDTHS 里只有宽度 1：每个请求只有一条序列，没有可共享的块，所有方式都省下 "
                     f"{pct1(res[('束搜索', 1)]['saved'])}。")
        return lines, more
    hi = shareable[-1]
    beam, par, long = res[("束搜索", hi)], res[("并行采样", hi)], res[(SHAREGPT, hi)]
    head = f"宽度 {hi} 的束搜索省下 {pct1(beam['saved'])} 的 KV 块，并行采样 n = {hi} 省下 {pct1(par['saved'])}"
    if order(beam["saved"], par["saved"], pct1) > 0:      # 束搜索省得多时才说为什么
        head += f"：各条束结束时生成部分的前 {pct(beam['common'])} 完全相同，并行采样只共享提示"
    lines.append(head + "。")
    paper = ""
    if hi in VLLM_63_WIDTHS:
        paper = f"（论文在 ShareGPT 上 {d['paper_sharegpt'][0]}–{d['paper_sharegpt'][1]}%）"
    if order(par["saved"], long["saved"], pct1) < 0:
        lines.append(f"换成 ShareGPT 的长度（平均输入 {integer(d['long_mean_in'])} 个 token），能共享的满块更多：并行采样 "
                     f"n = {hi} {change(par['saved'], long['saved'], pct1)}{paper}。")
    else:
        lines.append(f"换成 ShareGPT 的长度（平均输入 {integer(d['long_mean_in'])} 个 token），并行采样 n = {hi} 省下 "
                     f"{pct1(long['saved'])}，不比 Alpaca 长度时的 {pct1(par['saved'])} 多{paper}。")
    more.append(cow_sentence(beam["cow"], hi, d["block_size"], d["beam_max_len"]))
    for kind, vals in (("并行采样", d["parallel"]), ("束搜索", d["beam"])):
        if len(widths) > 1:
            trend = "不随 n / 宽度单调增加"
            if rising([value(pct1(x)) for x in vals]):
                trend = "n / 宽度越大省得越多"
            more.append(f"{kind}（Alpaca 长度）：n / 宽度 {widths[0]} 到 {widths[-1]}，省下的比例"
                        f"{change(vals[0], vals[-1], pct1, flat='都是')}，{trend}。")
    short = "每个请求的提示都至少有一个满块"
    if d["short_prompts"]:
        short = f"其中 {count(d['short_prompts'], '个请求')}的提示不满一块、没有可共享的满块"
    more.append(f"并行采样只有提示里写满的块能一直共享：Alpaca 长度的提示平均 {integer(d['mean_in'])} 个 token，{short}"
                f"（论文在 Alpaca 上 {d['paper']['并行采样'][0]}–{d['paper']['并行采样'][1]}%）。")
    wins = [w for w in shareable if order(res[("束搜索", w)]["saved"], res[("并行采样", w)]["saved"], pct1) > 0]
    lone = [w for w in widths if w < 2]              # 宽度 1：只有一条序列，两种方式都没有可共享的块
    if len(wins) == len(shareable) and lone:
        b1, p1 = res[("束搜索", 1)]["saved"], res[("并行采样", 1)]["saved"]
        more.append(f"宽度 ≥ 2 时（{listing(wins)}）束搜索都比同样 n 的并行采样省得多，和论文的顺序一致；宽度 1 只有一条序列，"
                    + vs("束搜索", b1, "并行采样", p1, pct1, more="省得多", less="省得少") + "。")
    elif len(wins) == len(shareable):
        more.append("每个宽度下束搜索都比同样 n 的并行采样省得多，和论文的顺序一致。")
    elif wins:
        more.append(f"束搜索比同样 n 的并行采样省得多的宽度只有 {listing(wins)}，和论文的顺序不同。")
    else:
        more.append("没有一个宽度下束搜索比同样 n 的并行采样省得多，和论文的顺序不同。")
    return lines, more


def cow_sentence(n_cow, width, block_size, max_len):
    """束搜索的写时复制：复制几次、每次多大；最长的序列也装得进一块时，复制一块就是复制整条序列。"""
    if n_cow == 0:
        return f"宽度 {width} 的束搜索没有发生写时复制：块大小 {block_size} 时，共享的块都已写满，新 token 总是写进新块。"
    text = (f"写时复制只复制\"共享、又没写满\"的最后一块：宽度 {width} 的束搜索复制了 {integer(n_cow)} 次，"
            f"每次一块（{block_size} 个 token 的位置）")
    if max_len > block_size:
        return text + "，不是整条序列。"
    return text + f"；这里最长的序列只有 {integer(max_len)} 个 token，一块就装得下，复制一块就是复制整条序列。"


# =============================================================================
def slots(pos):
    """块内位置 0..pos−1 的写法：slots(1) → "位置 0"，slots(3) → "位置 0–2"。"""
    if pos == 1:
        return "位置 0"
    return f"位置 0–{pos - 1}"


def demo2_cow_step_by_step():
    """写时复制的那一刻：块池里发生了什么？共享的块为什么不会被写坏？"""
    block_size, L = COW_BLOCK_SIZE, COW_PROMPT
    pos = L % block_size                            # 最后一块已经写了几个（0 = 正好写满）
    if pos:
        state = f"最后一块只写了 {pos} 个"
    else:
        state = "最后一块正好写满"
    print_header(f"演示 2：一次写时复制——块大小 {block_size}，共享序列长 {L}（{state}）")
    cfg = config_like(TINY, max_seq=L + 1)
    params = init_params(cfg, seed=MODEL_SEED)
    rng = np.random.default_rng(SAMPLE_SEED)
    prompt = rng.integers(0, cfg.vocab, L)
    tok_a, tok_b = (int(t) for t in rng.integers(0, cfg.vocab, 2))
    # 块池按设置算：a 的块 + b 写时要的一块（复制或新块）+ a 写时可能要的一块
    pool = BlockPool(cfg, n_blocks=n_blocks(L, block_size) + 2, block_size=block_size)
    rows = []
    film = PoolFilm(pool)                           # 每一步块池的快照：--step 时一步一屏，make all 画成 GIF

    def snap(what, a, b):
        b_table = "-"
        if b is not None:
            b_table = fmt_list(b.blocks)
        rows.append([what, fmt_list(a.blocks), b_table, fmt_list(pool.ref_count), pool.num_free, pool.n_cow])
        film.snap(what, {"a": a, "b": b})

    a = PagedSequence(pool)
    paged_step(params, cfg, [a], [prompt])
    snap(f"a：prefill {L} 个 token", a, None)
    b = a.fork()
    snap("b = a.fork()", a, b)
    last_blk = a.blocks[-1]
    full = a.blocks[:L // block_size]                # 写满的块：以后不会再被写
    rc_fork = int(pool.ref_count[last_blk])
    before = (pool.k[:, last_blk].copy(), pool.v[:, last_blk].copy())
    old_len = b.length
    film.snap(f"b 要写第 {old_len + 1} 个 token", {"a": a, "b": b}, mark=[b.blocks[-1]])
    out_b = paged_step(params, cfg, [b], [[tok_b]])[0]
    new_blk = b.blocks[-1]
    cow_after_b = pool.n_cow
    snap(f"b 写第 {old_len + 1} 个 token", a, b)
    after_b = (pool.k[:, last_blk].copy(), pool.v[:, last_blk].copy())
    out_a = paged_step(params, cfg, [a], [[tok_a]])[0]
    a_blk = a.blocks[-1]
    snap(f"a 写第 {old_len + 1} 个 token", a, b)
    play(film.frames)
    print_table(["步", "a 块表", "b 块表", "ref_count", "空闲", "COW"], rows,
                caption=f"ref_count：块池里每个物理块的引用计数（块 0–{pool.n_blocks - 1}）；COW：累计写时复制次数（BlockPool.n_cow）。")

    # 连续的参照：a、b 各自从头算（KVCache），第 old_len 个位置的 K/V 应当逐位等于块池里写进去的
    ref = {}
    for name, tok in (("a", tok_a), ("b", tok_b)):
        c = KVCache(cfg, 1)
        lg = forward(params, cfg, np.concatenate([prompt, [tok]])[None], cache=c)[0, -1]
        ref[name] = (c, lg)
    kv_b = (ref["b"][0].k[:, 0, :, old_len], ref["b"][0].v[:, 0, :, old_len])
    kv_a = (ref["a"][0].k[:, 0, :, old_len], ref["a"][0].v[:, 0, :, old_len])

    def written(blk, slot, kv):
        return np.array_equal(pool.k[:, blk, :, slot], kv[0]) and np.array_equal(pool.v[:, blk, :, slot], kv[1])

    unchanged = np.array_equal(after_b[0], before[0]) and np.array_equal(after_b[1], before[1])
    full_rc = all(pool.ref_count[x] == 2 for x in full)
    logits_same = np.array_equal(out_a[-1], ref["a"][1]) and np.array_equal(out_b[-1], ref["b"][1])
    if pos:
        checks = {
            f"写入前：最后一块 {last_blk} 没写满（{pos}/{block_size}）且被共享（ref_count = {rc_fork}）": rc_fork > 1,
            f"b 写完后共享块 {last_blk} 逐位不变（含位置 {pos}）": unchanged,
            f"新块 {new_blk} 的{slots(pos)} 与块 {last_blk} 逐位相同":
                np.array_equal(pool.k[:, new_blk, :, :pos], before[0][:, :, :pos])
                and np.array_equal(pool.v[:, new_blk, :, :pos], before[1][:, :, :pos]),
            f"b 的新 token 写在新块 {new_blk} 的位置 {pos}（= old_len {old_len} mod {block_size}）":
                written(new_blk, pos, kv_b),
            f"ref_count：块 {last_blk} 降到 1、新块 {new_blk} 为 1": (pool.ref_count[last_blk], pool.ref_count[new_blk]) == (1, 1),
            f"a 随后原地写进块 {last_blk} 的位置 {pos}，不再复制": a_blk == last_blk and pool.n_cow == 1 and written(a_blk, pos, kv_a),
        }
    else:
        checks = {
            f"写入前：最后一块 {last_blk} 已写满（{block_size}/{block_size}），被 a、b 共享（ref_count = {rc_fork}）": rc_fork == 2,
            f"b 的新 token 写进新分配的块 {new_blk} 的位置 0，没有复制（COW 次数 {cow_after_b}）":
                new_blk not in full and cow_after_b == 0 and written(new_blk, 0, kv_b),
            f"b 写完后共享的满块 {last_blk} 逐位不变": unchanged,
            f"a 也分配了自己的新块 {a_blk}，写在位置 0": a_blk not in (new_blk, last_blk) and pool.n_cow == 0
                and written(a_blk, 0, kv_a),
        }
    if full:
        checks[f"写满的块 {' '.join(map(str, full))} 的 ref_count 仍为 2（一直共享）"] = full_rc
    checks["a、b 的 logits 与各自从头算逐位相同"] = logits_same
    failed = [k for k, ok in checks.items() if not ok]
    if failed or console.SHOW_MORE:
        check_rows = []
        for k, ok in checks.items():
            verdict = "通过"
            if not ok:
                verdict = "失败"
            check_rows.append([k, verdict])
        print_table(["检查", "结果"], check_rows)
    else:
        print_text(f"逐位检查 {len(checks)} 项（共享块没被改写、新块是原块的副本、ref_count、logits 与从头算相同）："
                   "全部通过；--more 逐项列出。")
    d = dict(checks=checks, rows=rows, last_blk=last_blk, new_blk=new_blk, a_blk=a_blk, old_len=old_len, pos=pos,
             full=list(full), n_cow=pool.n_cow, ref_count=list(pool.ref_count), a_blocks=list(a.blocks),
             b_blocks=list(b.blocks), slot_was_zero=pos > 0 and bool(np.all(before[0][:, :, pos] == 0)),
             n_layers=cfg.n_layers, block_size=block_size, frames=film.frames)
    lines, more = observations_2(d)
    print_observations(lines, more)
    return d


def hint_question(block_size):
    """没有写时复制时问全班的一句（不断言什么）：块大小 1 时每块都是满的，先要把块调大。"""
    if block_size == 1:
        return "想一想：块大小 1 时每一块都一写就满，还会有写时复制吗？把 COW_BLOCK_SIZE 调大再看。"
    return "想一想：共享序列的最后一块只写了一部分（COW_PROMPT 不是 COW_BLOCK_SIZE 的倍数）时，b 写下一个 token 会怎样？"


def observations_2(d):
    """演示 2 的观察 → (默认的至多 2 条, --more 的其余)。最后一块正好写满时没有写时复制，另有说法。"""
    last_blk, new_blk, pos, full = d["last_blk"], d["new_blk"], d["pos"], d["full"]
    shared_table = d["rows"][1][1]
    n_shared = len(shared_table.strip("[]").split())
    rc_text = f"这 {n_shared} 个块的 ref_count 都是 2"
    if n_shared == 1:
        rc_text = "这个块的 ref_count 是 2"
    fork = f"fork 之后 a、b 的块表都是 {shared_table}，{rc_text}：b 没有复制任何数据。"
    full_text = "这条序列还没有写满的块。"
    if full:
        full_text = f"写满的块 {' '.join(map(str, full))} 以后不会再被写，所以一直共享、从不复制。"
    if pos == 0:
        lines = [f"共享序列长 {d['old_len']}，是块大小 {d['block_size']} 的整数倍：最后一块 {last_blk} 已经写满，"
                 f"b、a 写第 {d['old_len'] + 1} 个 token 时各自分配新块（{new_blk}、{d['a_blk']}），"
                 f"这次没有发生写时复制（COW 次数 {d['n_cow']}）。",
                 hint_question(d["block_size"])]
        return lines, [fork, full_text]
    lines = [f"b 写第 {d['old_len'] + 1} 个 token：最后一块 {last_blk} 没写满又被共享，于是先复制成块 {new_blk}"
             f"（{d['n_layers']} 层 × K、V），再写到位置 {pos}；块 {last_blk} 的 ref_count "
             f"{change(2, d['ref_count'][last_blk], integer)}。",
             f"a 再写时块 {last_blk} 只剩它一个使用者（ref_count = 1），原地写，COW 次数仍是 {d['n_cow']}："
             "最后一个持有者不必复制。"]
    old = "原来的值"
    if d["slot_was_zero"]:
        old = "原来的 0（空位）"
    more = [fork, f"共享块的位置 {pos} 在 b 写完后仍然是{old}：a 看到的 KV 没有被 b 改动。" + full_text,
            "GPU 版（06_triton_cow_clone.py 的 KVBlockManager.append_token_batch）步骤相同，"
            "只是把\"整块复制\"交给一个 Triton kernel。"]
    return lines, more


# =============================================================================
def check_settings(args=None):
    """设置块里每个常量：不合理的值一行拒绝（退出码 2），其余的值都能跑。"""
    for name, val in (("MODEL_SEED", MODEL_SEED), ("LEN_SEED", LEN_SEED), ("SAMPLE_SEED", SAMPLE_SEED)):
        check_setting(name, val, is_int(val, 0), "非负整数")
    check_setting("N_REQUESTS", N_REQUESTS, is_int(N_REQUESTS, 1, 200), " 1–200 的整数")
    check_setting("N_CHECK", N_CHECK, is_int(N_CHECK, 0, 200), " 0–200 的整数（0 = 不在真模型上核对）")
    check_setting("N_BEAM", N_BEAM, is_int(N_BEAM, 1, 200), " 1–200 的整数（比 N_REQUESTS 大时用全部请求）")
    check_setting("WIDTHS", WIDTHS, is_sorted_ints(WIDTHS, 1, MAX_WIDTH),
                  f"非空、从小到大、不重复的 n / 宽度（1–{MAX_WIDTH}），例如 (2, 4, 6)")
    check_setting("BLOCK_SIZE", BLOCK_SIZE, is_int(BLOCK_SIZE, 1, 256), " 1–256 的整数")
    check_setting("ALPACA_MEAN", ALPACA_MEAN, isinstance(ALPACA_MEAN, (tuple, list)) and len(ALPACA_MEAN) == 2
                  and all(is_number(x) and x > 0 for x in ALPACA_MEAN), "(平均输入长度, 平均输出长度)，两个正数")
    check_setting("MAX_PROMPT", MAX_PROMPT, is_int(MAX_PROMPT, 2, 256), " 2–256 的整数（长度至少 2）")
    check_setting("MAX_OUTPUT", MAX_OUTPUT, is_int(MAX_OUTPUT, 2, 256), " 2–256 的整数（长度至少 2）")
    check_setting("TEMPERATURE", TEMPERATURE, is_number(TEMPERATURE) and 0 < TEMPERATURE <= 100, " (0, 100] 之间的数")
    check_setting("COW_BLOCK_SIZE", COW_BLOCK_SIZE, is_int(COW_BLOCK_SIZE, 1, 64), " 1–64 的整数")
    check_setting("COW_PROMPT", COW_PROMPT, is_int(COW_PROMPT, 1, 64) and n_blocks(COW_PROMPT, COW_BLOCK_SIZE) <= 10,
                  f" 1–64 的整数，且最多占 10 个块（块大小 {COW_BLOCK_SIZE}：表里要逐块列出 ref_count）")


DEMOS = {1: demo1_savings, 2: demo2_cow_step_by_step}


def main(argv=None):
    return run_lecture(DEMOS, "第 7 讲 · 共享 KV 与写时复制", argv, check=check_settings)


if __name__ == "__main__":
    sys.exit(main())
