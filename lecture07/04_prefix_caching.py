"""第 7 讲 · 04 前缀缓存：算过的 KV 存下来，给开头相同的请求用。

【问题】很多请求的开头相同（系统提示、few-shot 例子、多轮对话的历史），这些前缀的 KV 只需算一次。
        怎样认出"这段前缀算过"？真的能省多少？缓存要多大、用什么淘汰策略？省下多少 GPU 时间？
【运行】python lecture07/04_prefix_caching.py      （约 7 秒，2 核，不要 GPU；--demo 4 --step：只看演示 4，先想再看）
        python lecture07/04_prefix_caching.py --trace 文件.jsonl   （演示 3–5 改用 Mooncake 格式的 trace，见 TRACES.md）
【试一试】
  1. N_SHARING = 1（--demo 2）：只有一个请求时，前缀缓存还省得下计算吗？
  2. 把 LRUCache.evict 改成 popitem(last=True)（kv_store/policies.py，--demo 4）：先扔最新的块会怎样？
  3. 把 LengthAwareCache.rank 改成 return pos（--demo 4）：先扔靠前的块，为什么前缀命中掉得这么多？
  4. POLICIES 里加上 S3FIFOCache（Yang 等，SOSP'23，--demo 4）：它和 LRU、MIN 比怎样？
  5. SAVED_CAPS = (1_000, 100)（--demo 5）：缓存只有几百块时，prefill 的 GPU 时间还能省多少？
"""
import os
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from collections import Counter  # noqa: E402
from concurrent.futures import ProcessPoolExecutor  # noqa: E402
import numpy as np  # noqa: E402
from lab_common import show  # noqa: E402
from lab_common.transformer_lab import TINY, KVCache, config_like, forward, init_params  # noqa: E402
from kv_store.belady import min_hits  # noqa: E402
from kv_store.policies import LFUCache, LengthAwareCache, S3FIFOCache, hit_blocks, usable_tokens  # noqa: E402,F401
from kv_store.tiers import A800_X8, EQ1_A, EQ1_B, LLAMA3_70B, TIERS, hit_tier, trace_prefill_time  # noqa: E402
from kv_store.mooncake_paper import PAPER_ROWS, PAPER_TABLE1, PAPER_TRACES  # noqa: E402
from kv_store.trace import BLOCK_SIZE as TRACE_BLOCK, load_trace, make_trace  # noqa: E402
from paged_kv import BlockPool, PagedSequence, paged_step  # noqa: E402

# --mine：用你在 exercises/ 里写的（见 exercises/README.md）；不加就用讲义的实现
if "--mine" in sys.argv[1:]:
    from exercises.ex4_block_hashes import block_hashes, match_prefix
    from exercises.ex5_lru import LRUCache
else:
    from kv_store.prefix import block_hashes, match_prefix
    from kv_store.policies import LRUCache

# ---- 设置 ----
TRACE_SEED = 0              # 合成 trace 的随机种子
MODEL_SEED = 0              # 演示 2：小模型权重的种子
PROMPT_SEED = 5             # 演示 2：随机前缀、后缀的种子
N_SHARING = 8               # 演示 2：共享前缀的请求数
FEW_SHOT = (("1-shot", 80), ("5-shot", 341))   # 演示 2 的前缀 (名字, token 数)：vLLM 论文 §6.4 图 16 的两个
SUFFIX_LEN = (10, 30)       # 演示 2：每个请求自己的后缀长度，在 [10, 30) 里均匀随机
BLOCK_SIZE = 16             # 演示 2 的块大小（token；vLLM 默认 16）。trace 的块是 512 个 token
CAPACITIES = (None, 100_000, 50_000, 30_000, 10_000, 1_000)   # 演示 4 的容量（块）：论文表 1 的六列；None = 无限
POLICIES = (LRUCache, LFUCache, LengthAwareCache)   # 演示 4 的策略类（kv_store/policies.py），第一个是观察的主角
HOT_ACCESSES = 1_000        # 演示 3：最热的块至少被访问这么多次，才值得复制到多台机器上
SAVED_CAPS = (None, 10_000, 1_000)   # 演示 5：LRU 缓存的容量（块）
LOCAL_KV_BYTES = 10 ** 12   # 演示 5：一台机器放前缀缓存的 DRAM（FAST'25 §5.3.1：约 1 TB）；超出的在别的机器上

TRACE = None      # 演示 3–5 的 (名字, 请求列表)：main 读一次


def the_trace():
    if TRACE is None:                       # 测试、画图直接调用演示
        return f"合成 trace（种子 {TRACE_SEED}）", make_trace(TRACE_SEED)
    return TRACE


def demo1_hashing():
    """两个请求开头相同，它们的块哈希有几块相同？改了一个 token 呢？"""
    prompt = [101, 7, 7, 3, 55, 2, 9, 14]                      # 两块长的"系统提示"（块大小 4）
    reqs = {"A": prompt + [21, 22, 23, 24, 25, 26, 27, 28, 29],  # 4 个满块 + 1 个零头
            "B": prompt + [21, 22, 23, 24, 31, 32, 33, 34],
            "C（第 2 块改 1 个 token）": prompt[:7] + [99, 21, 22, 23, 24, 25, 26, 27, 28]}
    h = {k: block_hashes(t, 4) for k, t in reqs.items()}
    show.table(["请求", "token 数", "每个完整块的哈希（前 8 个十六进制位）"],
               [[k, len(reqs[k]), " ".join(x[:8] for x in h[k])] for k in reqs],
               caption="块大小 4。A 最后 1 个 token 不满一块，不算哈希：vLLM 只缓存完整的块（Mooncake 公开的请求记录"
                       "给不满的块也编了号）。")
    a, b, c = h.values()
    same_ab = match_prefix(b, set(a))
    same_c = [i + 1 for i, (x, y) in enumerate(zip(a, c)) if x == y]
    show.claim(f"A 和 B 的前 {same_ab} 块哈希相同：B 直接用 A 算好的这 {same_ab} 块 KV，从第 {same_ab + 1} 块起自己算。",
               same_ab == 3, f"A、B 前 3 块的 token 相同，哈希只有前 {same_ab} 块相同")
    show.claim("C 只改了第 2 块的一个 token，第 2 块起的哈希全变了：哈希链住了前面的全部内容，只有从开头起"
               "连续相同的块能复用。", same_c == [1], f"C 和 A 相同的哈希在第 {same_c} 块")
    return dict(hashes=h, same_ab=same_ab, same_c=same_c)


def reuse_prefix(params, cfg, prefix, suffixes):
    """请求一个个到达，缓存 = {块哈希 → 物理块}：命中的整块映射进块表（只加引用计数），只算剩下的 token，再登记
    自己的完整块（缓存也持一份引用）。最后一个 token 总要算，最多映射 (n − 1) // 块大小 块（nano-vllm 也只查前 k − 1 块）。"""
    longest = len(prefix) + max(len(s) for s in suffixes)
    pool = BlockPool(cfg, n_blocks=2 * len(suffixes) * -(-longest // BLOCK_SIZE), block_size=BLOCK_SIZE)
    cache, computed, worst, private = {}, 0, 0.0, 0
    for suffix in suffixes:
        tokens = np.concatenate([prefix, suffix])
        hashes = block_hashes(tokens, BLOCK_SIZE)
        seq = PagedSequence(pool)
        for h in hashes[:min(match_prefix(hashes, cache), (len(tokens) - 1) // BLOCK_SIZE)]:
            seq.blocks.append(cache[h])
            pool.incref(cache[h])
        seq.length = len(seq.blocks) * BLOCK_SIZE
        computed += len(tokens) - seq.length
        logits = paged_step(params, cfg, [seq], [tokens[seq.length:]])[0][-1]
        for h, b in zip(hashes, seq.blocks):
            if h not in cache:
                cache[h] = b
                pool.incref(b)
        full = forward(params, cfg, tokens[None], cache=KVCache(cfg, 1))[0, -1]   # 从头算一遍来核对
        worst = max(worst, float(np.max(np.abs(logits - full))))
        private += -(-len(tokens) // BLOCK_SIZE)
    total = len(prefix) * len(suffixes) + sum(len(s) for s in suffixes)
    return dict(total=total, computed=computed, cached=len(cache), private=private, shared=pool.num_used, worst=worst)


def demo2_shared_prefix():
    """在小模型上真的复用 few-shot 前缀：能省多少计算？结果和从头算一样吗？"""
    longest = max(n for _, n in FEW_SHOT) + SUFFIX_LEN[1]
    cfg = config_like(TINY, max_seq=-(-longest // BLOCK_SIZE) * BLOCK_SIZE)
    params, rng = init_params(cfg, seed=MODEL_SEED), np.random.default_rng(PROMPT_SEED)
    res = {}
    for name, n in FEW_SHOT:
        prefix = rng.integers(0, cfg.vocab, n)
        suffixes = [rng.integers(0, cfg.vocab, int(rng.integers(*SUFFIX_LEN))) for _ in range(N_SHARING)]
        res[name] = reuse_prefix(params, cfg, prefix, suffixes)
    head = ["前缀", "长度", "总输入", "实际算", "省下", "缓存块", "不共享", "共享", "最大差"]
    rows = [[k, show.num(n), show.num(r["total"]), show.num(r["computed"]), show.pct(1 - r["computed"] / r["total"]),
             show.num(r["cached"]), show.num(r["private"]), show.num(r["shared"]), show.num(r["worst"], 1)]
            for (k, n), r in zip(FEW_SHOT, res.values())]
    show.table(head, rows, caption=f"每行 {N_SHARING} 个请求共用一段 few-shot 前缀，各接 {SUFFIX_LEN[0]}–"
               f"{SUFFIX_LEN[1] - 1} 个随机 token；块大小 {BLOCK_SIZE}，第 2 讲的小模型（权重种子 {MODEL_SEED}、token 种子 "
               f"{PROMPT_SEED}）。长度：前缀的 token 数；总输入、实际算：全部的、真正算了的 token；省下 = 1 − 实际算 / 总输入；缓存块：缓存里登记的块；不共享 / 共享：请求都还"
               "在时占的物理块；最大差：最后一个 token 的 logits 和从头算的最大绝对差。")
    last = dict(zip(head, rows[-1]))                            # 最长的前缀那一行
    k, saved, private, shared, worst = (last[x] for x in ("前缀", "省下", "不共享", "共享", "最大差"))
    show.claim(f"{k} 省下 {saved} 要算的 token，logits 和从头算逐位相同（最大差 {worst}）：后来的请求把前缀的满块映射到缓存里"
               "的物理块，只加引用计数。", show.value(saved) > 0 and show.value(worst) == 0,
               f"{k} 省下 {saved}，最大差 {worst}")
    show.claim(f"显存也省了：{k} 不共享要 {private} 块，共享只要 {shared} 块——前缀的块只存一份。",
               show.value(shared) < show.value(private), f"{k} 不共享 {private} 块、共享 {shared} 块")
    return res


def demo3_block_heat():
    """少数块被反复用到、多数块只用一次吗？和论文的请求记录（trace）比呢？"""
    name, trace = the_trace()
    counts = sorted(Counter(b for r in trace for b in r.blocks).values(), reverse=True)   # 每个块被访问几次
    ours = [show.num(len(trace)), show.num((trace[-1].arrival - trace[0].arrival) / 60),
            show.num(np.mean([r.input_len for r in trace])), show.num(np.mean([r.output_len for r in trace])), "-",
            show.pct(sum(c == 1 for c in counts) / len(counts)), show.num(counts[0]),
            show.pct(sum(counts[:max(1, len(counts) // 100)]) / sum(counts))]
    show.table(["", "本实验"] + list(PAPER_TRACES), [[k, x, *p] for (k, p), x in zip(PAPER_ROWS.items(), ours)],
               caption=f"本实验：{name}，{show.num(sum(counts))} 次块访问、{show.num(len(counts))} 个不同的块（每块 "
                       f"{TRACE_BLOCK} token）；trace 是请求记录：每个请求的到达时间、长度、用到的块。论文列：Mooncake（Kimi 的"
                       "服务系统）论文的 arXiv 第 3 版 §4、§4.2，和它的会议版 FAST'25 表 2 的三个负载（Tool&Agent：调用工具的智能体请求）。cache ratio（FAST'25 表 2 的叫法，§5.2.1 称 "
                       "prefix caching ratio）：输入里能从前缀缓存复用的比例。-：没有这个数。")
    once, hottest, top = ours[5:]
    show.claim(f"{once} 的块只用过一次（论文：超过 50%），最热 1% 的块却占了 {top} 的块访问：热度极不均匀。",
               show.value(once) > 0.5 and show.value(top) >= 0.1, f"只用过一次的块 {once}，最热 1% 占 {top}")
    show.claim(f"最热的块被访问了 {hottest} 次：这样的块值得复制到多台机器上，不然都去一台机器拉 KV，网卡会堵"
               "（arXiv v3 §4.2；05 演示 2）。", show.value(hottest) >= HOT_ACCESSES,
               f"最热的块只被访问了 {hottest} 次（不到 {HOT_ACCESSES:,}）")
    return dict(name=name, counts=counts, cells=ours)


def capacity(c):
    """句子里的容量：'容量无限'、'容量 10,000 块'。"""
    return "容量无限" if c is None else f"容量 {c:,} 块"


def demo4_policies():
    """缓存要多大、用什么淘汰策略？离知道未来的 MIN 还差多少？"""
    _, trace = the_trace()
    caches = [cls(c) for cls in POLICIES for c in CAPACITIES]
    k = len(CAPACITIES)
    # 两个核一起算：每格 = hit_blocks(trace, 策略类(容量))。工作进程不理 Ctrl-C：由这个进程停下它们、印一行
    pool = ProcessPoolExecutor(2, initializer=signal.signal, initargs=(signal.SIGINT, signal.SIG_IGN))
    hits = pool.map(hit_blocks, [trace] * len(caches), caches, chunksize=-(-k // 2))   # 半行一包：trace 一包传一次
    best = pool.submit(min_hits, trace, CAPACITIES)        # MIN：逐块命中的上界，所有容量一包
    hits, best = list(hits), best.result()
    pool.shutdown()                           # 不用 with：Ctrl-C 时 with 会等剩下的格子都算完
    accesses = sum(len(r.blocks) for r in trace)
    ratio = [show.num(sum(h) / accesses, 2) for h in hits + best]
    rows = [[cls.NAME] + ratio[i * k:(i + 1) * k] for i, cls in enumerate(POLICIES)]
    rows.append(["MIN（逐块）"] + ratio[-k:])
    for cls in [p for p in POLICIES if p.NAME in PAPER_TABLE1]:         # 论文表 1 有的策略、有的容量
        rows.append([f"论文 {cls.NAME}"] + [f"{PAPER_TABLE1[cls.NAME][c]:.2f}" if c in PAPER_TABLE1[cls.NAME] else "-"
                                             for c in CAPACITIES])
    show.table(["策略 \\ 容量（块）"] + [f"{c:,}" if c else "无限" for c in CAPACITIES], rows,
               caption="前缀命中率 = 用得上的命中块（从第一块起连续命中，最后一个 token 总要重算）/ 全部块访问。LRU："
                       "淘汰最久没用的块；LFU：淘汰用得最少的；LengthAware（Mooncake 的）：像 LFU，次数相同时先淘汰请求里"
                       "靠后的块。MIN：Belady 的离线最优（知道以后的全部访问，淘汰下次用到最晚的块），数逐块命中（不要求从第一块起连续，也不扣最后一个 token），是上界，"
                       "真实系统做不到。论文行：Mooncake arXiv v3 表 1，在另一个 trace 上算的。")
    lru, best_row = (dict(zip(CAPACITIES, rows[i][1:])) for i in (POLICIES.index(LRUCache), len(POLICIES)))   # LRU、MIN
    small, big = min(CAPACITIES, key=lambda c: c or float("inf")), max(CAPACITIES, key=lambda c: c or float("inf"))
    lru_hits = dict(zip(CAPACITIES, hits[POLICIES.index(LRUCache) * k:]))    # "保住了"按命中数算（印出的可能是 "< 0.01"）
    kept = show.pct(sum(lru_hits[small]) / max(1, sum(lru_hits[big])))
    paper, t1 = "", PAPER_TABLE1["LRU"]
    if small in t1 and big in t1:             # 论文表 1 也有这两个容量
        paper = f"（论文 {t1[small]:.2f} / {t1[big]:.2f} = {show.pct(t1[small] / t1[big])}）"
    show.claim(f"{capacity(big)}时，LRU 的命中率是 {lru[big]}；{capacity(small)}时降到 {lru[small]}，保住了 {kept}{paper}；"
               f"知道未来的 MIN 这时还有 {best_row[small]}。", show.value(lru[small]) < show.value(lru[big]),
               f"LRU {capacity(big)}时 {lru[big]}，{capacity(small)}时 {lru[small]}")
    others = [row for row in rows[:len(POLICIES)] if row[0] != LRUCache.NAME]
    gaps = [(show.value(lru[c]) - show.value(x), c, row[0], x) for row in others for c, x in zip(CAPACITIES, row[1:])]
    _, c, name, theirs = max(gaps, key=lambda g: g[0])        # LRU 领先最多的一格（都用印出来的值）
    below = [f"{n} 在{capacity(c)}时 {x}（LRU {lru[c]}）" for g, c, n, x in gaps if g < 0]
    show.claim(f"LRU 在每个容量都不低于 {'、'.join(row[0] for row in others)}，{capacity(c)}时比 {name} 高得最多"
               f"（{lru[c]} 对 {theirs}）：复用多在时间上相近的请求之间（同论文表 1）。",
               not below and show.value(lru[c]) > show.value(theirs),
               "；".join(below) or f"LRU 在每个容量都和 {'、'.join(row[0] for row in others)} 一样（{capacity(c)}时 {lru[c]}）")
    return dict(capacities=CAPACITIES, rows=rows, hits=hits, min_hits=best, accesses=accesses)


def demo5_prefill_time():
    """命中能省多少 prefill 的 GPU 时间？缓存又要多大的存储？"""
    (_, trace), model, node = the_trace(), LLAMA3_70B, A800_X8
    n_in = np.array([r.input_len for r in trace])
    distinct = len({b for r in trace for b in r.blocks})
    base = trace_prefill_time(model, n_in, np.zeros_like(n_in), TIERS[1]) / 3600
    rows, row, stored = [["不缓存", "-", "0%", show.num(base, 2), "1.00×"]], {}, {}
    for c in SAVED_CAPS:                      # 每个请求用得上的命中 token（hit_blocks 给的是块数）
        n_hit = np.array([usable_tokens(u, r.input_len) for u, r in zip(hit_blocks(trace, LRUCache(c)), trace)])
        stored[c] = min(c or distinct, distinct) * TRACE_BLOCK * model.kv_bytes_per_token()
        tier = hit_tier(stored[c], TIERS[1], TIERS[2], LOCAL_KV_BYTES)   # 放不下本机 DRAM 的部分从远端读
        hours = trace_prefill_time(model, n_in, n_hit, tier) / 3600
        row[c] = [f"LRU，{capacity(c)}", show.size(stored[c]), show.pct(n_hit.sum() / n_in.sum()),
                  show.num(hours, 2), show.times(base / hours, 2)]
        rows.append(row[c])
    show.table(["缓存", "存储", "命中的 token", "GPU 时间（小时）", "快了"], rows,
               caption=f"{len(trace):,} 个请求的 prefill 在一台 {node.name} 上的总时间（{model.name}）。命中的 token：用得上的命中 "
                       "token / 全部输入 token（按 token 数，所以和演示 4 按块数的命中率略有不同）；存储：缓存里全部 KV 的字节数；快了 = 不缓存的时间 ÷ 这一行的时间。计算量按 Mooncake FAST'25 式 1："
                       f"l(an²d + bnd²)（l 层、n 个 token、隐藏维度 d；系数 a = {EQ1_A}、b = {EQ1_B}，表 1）；算力按峰值（表 1：{node.n_gpus}×"
                       f"{node.tflops_per_gpu:g} TFLOPS）的 {show.pct(node.mfu)} 算，这是本实验的假设。命中的 KV 从{TIERS[1].name}读（"
                       f"{TIERS[1].bandwidth()}，表 1）；缓存超出本机 {LOCAL_KV_BYTES / 1e12:g} TB DRAM 的部分放在远端，命中按这个比例从"
                       f"{TIERS[2].name}读（{TIERS[2].bandwidth()}，表 1；RDMA：经网卡直接读别的机器的内存）；读和算逐层重叠，见 arXiv v3 §5.2。")
    big = max(SAVED_CAPS, key=lambda c: c or float("inf"))
    _, _, frac, hours, faster = row[big]
    show.claim(f"{capacity(big)}的缓存命中 {frac} 的输入 token，prefill 的 GPU 时间从 {rows[0][3]} 降到 {hours} 小时"
               f"（快了 {faster}，少了 {show.pct(1 - 1 / show.value(faster))}）。", show.value(faster) > 1,
               f"{capacity(big)}：{hours} 小时，不缓存 {rows[0][3]} 小时，快了 {faster}")
    c = max(c for c in SAVED_CAPS if c is not None)
    times_hbm, hbm = show.num(stored[c] / node.hbm_bytes, 1), show.size(node.hbm_bytes)
    show.claim(f"{capacity(c)}的缓存存 {row[c][1]}，是一台 8 卡机器全部显存（HBM，{hbm}）的 {times_hbm} 倍："
               "前缀缓存得放进 CPU 内存、SSD 或整个集群的内存池（05 的 Mooncake 就这样做）。", show.value(times_hbm) > 1,
               f"{capacity(c)}的缓存存 {row[c][1]}，一台机器的 HBM 有 {hbm}")
    return dict(base=base, rows=rows, stored=stored)


def is_capacities(caps):
    """非空、不重复的容量（块）：正整数，或 None（无限）。"""
    return (isinstance(caps, tuple) and len(caps) > 0 and all(c is None or show.is_int(c, 1, 10 ** 9) for c in caps)
            and len(set(caps)) == len(caps))


def check_settings():
    ints = show.is_int
    for name in ("TRACE_SEED", "MODEL_SEED", "PROMPT_SEED"):
        show.check(name, globals()[name], ints(globals()[name], 0, 2 ** 32 - 1), " 0 到 2^32 − 1 的整数")
    show.check("N_SHARING", N_SHARING, ints(N_SHARING, 1, 64), " 1 到 64 的整数（请求数）")
    show.check("FEW_SHOT", FEW_SHOT, isinstance(FEW_SHOT, tuple) and len(FEW_SHOT) > 0 and all(
        isinstance(e, tuple) and len(e) == 2 and isinstance(e[0], str) and ints(e[1], 1, 700) for e in FEW_SHOT)
        and len(dict(FEW_SHOT)) == len(FEW_SHOT), "非空的 ((名字, 1 到 700 个 token), ...)，名字不重复")
    show.check("SUFFIX_LEN", SUFFIX_LEN, show.is_ints(SUFFIX_LEN, 1, 300) and len(SUFFIX_LEN) == 2,
               " (最短, 最长 + 1) 两个 1 到 300 的整数，前一个小")
    show.check("BLOCK_SIZE", BLOCK_SIZE, ints(BLOCK_SIZE, 1, 1024), " 1 到 1,024 的整数（token）")
    show.check("CAPACITIES", CAPACITIES, is_capacities(CAPACITIES) and len(CAPACITIES) >= 2,
               "至少两个不重复的容量（块，正整数；None = 无限）")
    show.check("POLICIES", POLICIES, isinstance(POLICIES, tuple) and LRUCache in POLICIES and len(POLICIES) >= 2
               and len(set(POLICIES)) == len(POLICIES), "含 LRUCache 的、至少两个不重复的策略类")
    show.check("HOT_ACCESSES", HOT_ACCESSES, ints(HOT_ACCESSES, 2, 10 ** 9), " 2 到 10^9 的整数（访问次数）")
    show.check("SAVED_CAPS", SAVED_CAPS, is_capacities(SAVED_CAPS) and any(c is not None for c in SAVED_CAPS),
               "不重复的容量（块，正整数；None = 无限），至少一个有限")
    show.check("LOCAL_KV_BYTES", LOCAL_KV_BYTES, ints(LOCAL_KV_BYTES, 1, 10 ** 18), "正整数（字节）")
    for cls in POLICIES:                      # 改坏了的策略类（比如 evict 什么也不删）：在任何输出之前一行拒绝
        try:                                  # insert 发现 evict 没删掉块时抛 RuntimeError
            cls(2).insert([1, 2, 3])
        except NotImplementedError:           # 练习还没写完：照常抛出，quietly 指出文件和行
            raise
        except RuntimeError as err:
            show.fail(str(err))


DEMOS = [("演示 1：链式哈希——每块的哈希由前一块的哈希和这一块的 token 一起算出", demo1_hashing),
         ("演示 2：在小模型上复用 few-shot 前缀（vLLM 论文 §6.4 图 16 的前缀长度）", demo2_shared_prefix),
         ("演示 3：块的热度（Mooncake arXiv v3 §4.2）", demo3_block_heat),
         ("演示 4：缓存容量与淘汰策略——命中率（Mooncake arXiv v3 表 1 的实验）", demo4_policies),
         ("演示 5：命中省下的 prefill 时间（Mooncake FAST'25 式 1、表 1）", demo5_prefill_time)]


def main(argv=None):
    global TRACE
    p = show.parser(__doc__, DEMOS)
    p.add_argument("--trace", metavar="PATH", help="演示 3–5 改用这个 Mooncake 格式的 trace（JSONL，.gz 也行）")
    args = p.parse_args(argv)
    check_settings()
    TRACE = None
    if args.trace is not None:
        TRACE = f"你给的 trace（{os.path.basename(args.trace)}）", load_trace(args.trace)   # 坏文件在任何输出之前一行拒绝
    elif args.demo in (None, 3, 4, 5):
        TRACE = f"合成 trace（种子 {TRACE_SEED}）", make_trace(TRACE_SEED)               # 演示 3–5 共用这一份
    show.run(DEMOS, args)


if __name__ == "__main__":
    show.quietly(main)
