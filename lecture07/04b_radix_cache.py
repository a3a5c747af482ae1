"""CS349E · 第 7 讲 · 04b_radix_cache.py —— 找前缀的另一种办法：基数树（SGLang 的 RadixAttention）。

【问题】SGLang（Zheng 等，"SGLang: Efficient Execution of Structured Language Model Programs"，NeurIPS 2024）把请求的
token 放进一棵基数树，按 token 匹配、只淘汰叶子。比 04 的链式块哈希（vLLM、Mooncake）多复用多少，代价是什么？
按叶子淘汰的树和按块淘汰的 LRU 命中一样吗？SGLang 自己的淘汰规则呢？
【运行】python lecture07/04b_radix_cache.py [--demo 4] [--step] [--mine]   （几秒，2 核，不要 GPU；--mine：用你在
        exercises/ex6_radix.py 里写的基数树）
【试一试】
  1. BLOCK_SIZE = 1（--demo 2）：块只有一个 token 时，按块和按 token 还差多少？索引呢？
  2. 把 kv_store/policies.py 里 LRUCache.evict 改成 popitem(last=True)（--demo 3）：修剪还等于块 LRU 吗？
  3. STEP_CAPACITY = 14（--demo 4）：SGLang 的规则删掉哪些叶子？修剪呢？
"""
import os
import signal
import sys
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))   # 仓库根目录：lab_common、exercises
from concurrent.futures import ProcessPoolExecutor  # noqa: E402
import numpy as np  # noqa: E402
from lab_common import show  # noqa: E402
from lab_common.transformer_lab import TINY  # noqa: E402
from kv_store.policies import LRUCache, hit_blocks  # noqa: E402
from kv_store.prefix import block_hashes, match_prefix  # noqa: E402
from kv_store.trace import Request, check_workload, make_trace  # noqa: E402

# --mine：用你在 exercises/ 里写的（见 exercises/README.md）；不加就用讲义的实现
if "--mine" in sys.argv[1:]:
    from exercises.ex6_radix import RadixCache
else:
    from kv_store.radix_tree import RadixCache

# ---- 设置（默认和 04 的一样：演示 1、2 的请求 = 04 演示 2 的，演示 3 的 trace 和容量 = 04 演示 4 的）----
TREE_MAX_CHILDREN = 2                       # 演示 1：每个节点最多画几个孩子（其余的并成一行）
BLOCK_SIZE = 16                             # 演示 2：按块匹配的块大小（token）
PROMPT_SEED = 5                             # 演示 1、2：随机前缀、后缀的种子
N_SHARING = 8                               # 演示 1、2：每段前缀有几个请求共用
FEW_SHOT = (("1-shot", 80), ("5-shot", 341))   # 演示 1、2 的前缀 (名字, token 数)：vLLM 论文 §6.4 图 16 的两个
SUFFIX_LEN = (10, 30)                       # 演示 1、2：每个请求自己的后缀长度，在 [10, 30) 里均匀随机
TRACE_SEED = 0                              # 演示 3：合成 trace 的种子
CAPACITIES = (None, 100_000, 50_000, 30_000, 10_000, 1_000)   # 演示 3：缓存容量（块）；None = 无限
STEP_CAPACITY = 22                          # 演示 4：树最多存几个 token
STEP_REQUESTS = (                           # 演示 4：英译法的 few-shot 提示（仿 GPT-3 论文的例子），一个词一个 token
    ("请求 A", "Translate English to French : sea otter => loutre de mer peppermint =>"),
    ("请求 B", "Translate English to French : sea otter => loutre de mer plush giraffe =>"),
    ("请求 C", "Translate English to French : cheese => fromage bread =>"),
    ("请求 D", "Translate English to French : sea otter => loutre de mer plush giraffe =>"),   # 和 B 一样：整段命中
    ("请求 E", "Translate English to French : cheese => fromage mint =>"))


def check_settings():
    def named(pairs, ok, most):   # ((名字, 值), ...)：1 到 most 对，名字是不重复的字符串，每个值 ok(值)
        return (isinstance(pairs, tuple) and 0 < len(pairs) <= most and all(isinstance(p, tuple) and len(p) == 2
                and isinstance(p[0], str) and ok(p[1]) for p in pairs) and len({p[0] for p in pairs}) == len(pairs))
    show.check("TREE_MAX_CHILDREN", TREE_MAX_CHILDREN, show.is_int(TREE_MAX_CHILDREN, 1, 64), " 1 到 64 的整数")
    show.check("BLOCK_SIZE", BLOCK_SIZE, show.is_int(BLOCK_SIZE, 1, 1024), " 1 到 1,024 的整数（token）")
    show.check("PROMPT_SEED", PROMPT_SEED, show.is_int(PROMPT_SEED, 0, 2**32), "非负整数")
    show.check("N_SHARING", N_SHARING, show.is_int(N_SHARING, 1, 64), " 1 到 64 的整数（请求数）")
    show.check("FEW_SHOT", FEW_SHOT, named(FEW_SHOT, lambda k: show.is_int(k, 1, 4096), 8),
               " 1 到 8 个 (名字, token 数 1..4,096)，名字不重复")
    show.check("SUFFIX_LEN", SUFFIX_LEN, show.is_ints(SUFFIX_LEN, 1, 4096) and len(SUFFIX_LEN) == 2,
               " (最短, 最长 + 1) 两个整数，1 ≤ 最短 < 最长 + 1 ≤ 4,096")
    show.check("TRACE_SEED", TRACE_SEED, show.is_int(TRACE_SEED, 0, 2**32), "非负整数")
    show.check("CAPACITIES", CAPACITIES, isinstance(CAPACITIES, tuple) and 0 < len(CAPACITIES) == len(set(CAPACITIES))
               and all(c is None or show.is_int(c, 1, 10**9) for c in CAPACITIES), "不重复的正整数（块）或 None")
    show.check("STEP_CAPACITY", STEP_CAPACITY, show.is_int(STEP_CAPACITY, 1, 10_000), " 1 到 10,000 的整数（token）")
    show.check("STEP_REQUESTS", STEP_REQUESTS, named(STEP_REQUESTS, lambda s: isinstance(s, str) and s.split(), 20),
               " 1 到 20 个 (名字, 至少一个词的句子)")
    check_workload()                             # kv_store/trace.py 里合成负载的参数：演示 3 的表头印出之前就查
    probe = [Request(0, 1536, 1, (1, 2, 3)), Request(1, 512, 1, (4,)), Request(2, 1024, 1, (1, 2))]   # 容量 2 要淘汰
    try:                                         # 改坏了的 LRUCache（evict 没删掉块、出错）：在任何输出之前一行说清楚
        hit_blocks(probe, LRUCache(2))
    except Exception as err:
        show.fail(f"kv_store/policies.py 的 LRUCache 跑不通（演示 3 要用它）：{type(err).__name__}: {err}")
    for rule in ("trim", "sglang"):              # --mine 的基数树出错也在输出之前，不在演示 3 的进程池里
        hit_blocks(probe, RadixCache(2, rule))


def cut(text, width):         # 超过 width 列就截短、以"…"结尾：学生起了很长的名字，表也不超出 80 列
    while show.cols(text) > width:
        text = text[:-2] + "…"
    return text


def usable(hit, n):           # n 个 token 命中开头 hit 个，用得上几个：最后一个总要重算（同 policies.usable_tokens）
    return min(hit, n - 1)


def shared_prompts():       # 04 演示 2 的请求：{(前缀名, 前缀长): [N_SHARING 个请求的 token 列表]}，按到达的先后
    rng, out = np.random.default_rng(PROMPT_SEED), {}
    for name, plen in FEW_SHOT:
        prefix = rng.integers(0, TINY.vocab, plen).tolist()
        out[name, plen] = [prefix + rng.integers(0, TINY.vocab, int(rng.integers(*SUFFIX_LEN))).tolist()
                           for _ in range(N_SHARING)]
    return out


def demo_tree():
    """04 演示 2 的请求依次插入一棵基数树（开头相同的 token 只存一次的前缀树）：它长什么样，存了多少个 token？"""
    reqs, tree, rows = [t for group in shared_prompts().values() for t in group], RadixCache(), []
    for toks in reqs:
        tree.insert(toks, lock=True)             # 请求都还在跑：走过的节点 ref + 1
    def walk(node, start, pad):                  # 一个节点一行，缩进画出树的形状
        kids = list(node.children.values())
        for k, c in enumerate(kids[:TREE_MAX_CHILDREN]):
            branch, more = ("└─ ", "   ") if k == len(kids) - 1 else ("├─ ", "│  ")
            rows.append([cut(f"{pad}{branch}[{start}, {start + len(c.key)})", 40), len(c.key), c.ref])
            walk(c, start + len(c.key), pad + more)
        rest = [len(c.key) for c in kids[TREE_MAX_CHILDREN:]]
        if rest:
            rows.append([cut(f"{pad}└─ …另外 {len(rest)} 个孩子，长 {min(rest)}–{max(rest)}", 40), "-", "-"])
    walk(tree.root, 0, "")
    total = sum(map(len, reqs))
    n, tokens, stored, splits = map(show.num, (len(reqs), total, tree.size, tree.n_splits))
    show.table(["树（[起点, 终点) 是节点在请求里的 token 区间）", "长度", "ref"], rows,
               caption=f"基数树（推理服务系统 SGLang 用它找前缀）：每个节点存一段 token，从根往下读是一个请求的开头，在"
                       f"分叉处拆开节点。长度：节点的 token 数；ref：几个还在跑的请求用着这个节点。请求：{len(FEW_SHOT)} 段 "
                       f"few-shot 前缀各被 {N_SHARING} 个请求共用，后面各接一段随机的 token，共 {n} 个请求、{tokens} 个 "
                       f"token；树里 {len(tree.nodes())} 个节点存 {stored} 个，拆过 {splits} 次节点。")
    show.claim(f"{n} 个请求共 {tokens} 个 token，树里只存 {stored} 个（{show.pct(tree.size / total)}）：共用的前缀各是"
               "根下的一个节点，KV 只存一份。", show.value(stored) < show.value(tokens), f"树里存 {stored} 个，没省")
    lengths = [r[1] for r in rows if r[1] != "-"]                        # 表里印出的节点长度
    show.claim(f"节点长短不一（表里 {min(lengths)} 到 {max(lengths)} 个 token）：后来的请求在哪个 token 分叉，"
               f"就在哪里拆开节点（拆过 {splits} 次）。", show.value(splits) > 0, f"拆过 {splits} 次节点")
    return dict(n_requests=len(reqs), total=total, stored=tree.size, splits=tree.n_splits,
                tree=[(depth, start, len(node.key), node.ref) for depth, start, node in tree.nodes()])


def demo_granularity():
    """按 token 匹配（基数树）比按块匹配（04 的链式块哈希，只认整块）少算多少 token，代价是什么？"""
    bs, rows, sums = BLOCK_SIZE, [], np.zeros(6, dtype=np.int64)
    for (name, plen), reqs in shared_prompts().items():    # 每段前缀单独一棵树、一张哈希表（同 04 演示 2）
        seen, tree, r = set(), RadixCache(), np.zeros(6, dtype=np.int64)
        for toks in reqs:
            hashes = block_hashes(toks, bs)
            by_block = usable(match_prefix(hashes, seen) * bs, len(toks))   # 按块：从第一块起连续命中的整块
            by_token = usable(tree.match(toks), len(toks))                   # 按 token：可以停在一块的中间
            seen.update(hashes)
            tree.insert(toks)
            tail = min(by_token, plen) - min(by_block, plen)                 # 多命中的、落在前缀零头里的
            r += [len(toks) - by_block, len(toks) - by_token, tail, by_token - by_block - tail, -(-len(toks) // bs),
                  len(toks)]                                                # 块表：每块一项（末尾不满的也占一项）
        sums += r
        rows.append([cut(name, 10), f"{plen} = {plen // bs}×{bs}+{plen % bs}", *map(show.num, r)])
    rows.append(["合计", "-", *map(show.num, sums)])
    show.table(["前缀", "前缀长", "按块", "按 token", "零头", "碰巧", "块表项", "token 项"], rows,
               caption=f"同演示 1 的请求，每段前缀单独一棵树、一张哈希表。前缀长 = 整块数 × 块大小（{bs}）+ 零头。按块、"
                       "按 token：要算的 token 数；按 token 少算的来自两处——零头：前缀不满一块的 token；碰巧：后缀开头碰巧"
                       f"和别的请求相同的 token。块表项、token 项：{len(FEW_SHOT) * N_SHARING} 个请求各自记 KV 在哪，共几项"
                       "（块表每块一项；按 token 每个 token 一项）。")
    t = rows[-1]
    show.claim(f"按 token 匹配少算 {show.num(show.value(t[2]) - show.value(t[3]))} 个 token（{t[2]} → {t[3]}）："
               f"{t[4]} 个是前缀不满一块的零头，{t[5]} 个是后缀开头碰巧相同的——块哈希只认整块。",
               show.value(t[3]) < show.value(t[2]), f"按块 {t[2]} 个、按 token {t[3]} 个")
    show.claim(f"代价：按 token 时每个请求逐 token 记 KV 位置（共 {t[7]} 项），按块只要 {t[6]} 项；SGLang 现在也能把"
               "一页（SGLang 对块的叫法）设成多个 token，那时只匹配整页，和按块一样。", show.value(t[7]) > show.value(t[6]),
               f"块表项 {t[6]}、token 项 {t[7]}")
    return dict(rows=rows)


def demo_trace():
    """在一小时的请求记录上，只从叶子淘汰的基数树和淘汰最久没用的块（块 LRU）命中一样吗？SGLang 自己的规则呢？"""
    trace = make_trace(TRACE_SEED)
    total = sum(len(r.blocks) for r in trace)
    caches = [c for cap in CAPACITIES for c in (LRUCache(cap), RadixCache(cap, "trim"), RadixCache(cap, "sglang"))]
    # 同一个 hit_blocks（命中的规则只写在那里）回放每个缓存，两个核分着算；工作进程不理 Ctrl-C，由这个进程停下它们
    pool = ProcessPoolExecutor(2, initializer=signal.signal, initargs=(signal.SIGINT, signal.SIG_IGN))
    hits = list(pool.map(hit_blocks, [trace] * len(caches), caches, chunksize=3))   # 一个容量的三个一起送
    pool.shutdown()                              # 不用 with：Ctrl-C 时 with 会等剩下的都算完
    rows = [[show.num(cap) if cap else "无限", *(show.num(sum(h) / total, 2) for h in (lru, trim, sglang)),
             show.num(sum(int(a != b) for a, b in zip(lru, trim))), show.num(sum(sglang) - sum(lru))]
            for cap, lru, trim, sglang in zip(CAPACITIES, hits[0::3], hits[1::3], hits[2::3])]
    show.table(["容量（块）", "块 LRU", "修剪", "SGLang", "修剪≠LRU 的请求", "SGLang − LRU（块）"], rows,
               caption=f"trace（请求记录）同 04 演示 4：仿 Mooncake（Kimi 的服务系统）公开负载的合成 trace，每块 512 个 "
                       f"token，树里一个单位是一块。块 LRU、修剪、SGLang 三列是命中率 = 用得上的命中块 / 全部 {show.num(total)} "
                       "次块访问。块 LRU：淘汰最久没用的块；修剪：从最久没用的叶子尾巴一块一块地剪，删到正好满；SGLang 的规则（照 "
                       "SGLang 0.5.23 的代码）：从最久没用的起，整个叶子节点一起删，删够为止。后两列：命中和块 LRU 不同的请求数、"
                       "SGLang 比块 LRU 多命中的块数。")
    differ = [r[0] for r in rows if show.value(r[4]) != 0]
    show.claim(f"修剪规则在 {len(rows)} 个容量下给每个请求的命中都和块 LRU 相同：块号由前缀决定（同一个号代表同一段"
               "开头）时，LRU 最久没用的块总是某个叶子节点的最后一块，修剪每步删的正是它。", not differ, f"在 {'、'.join(differ)} 块时有请求的命中不同")
    gaps = [r[5] for r in rows]                  # 印出来的 SGLang − LRU
    show.claim("SGLang 的规则从不比块 LRU 多命中，容量小了还少命中（表的最后一列）。原因在规则里（kv_store/radix_tree.py）："
               "整个叶子节点一起删、删够为止，树常停在容量以下；拆节点时，没用到的尾巴也被记成刚用过。", max(map(show.value, gaps)) <= 0 > min(map(show.value, gaps)),
               f"SGLang − LRU：{'、'.join(gaps)} 块")
    return dict(rows=rows, total=total)


def run_steps(rule):
    """STEP_REQUESTS 依次进一棵基数树（rule），每步 match、insert、淘汰到 STEP_CAPACITY：计数和淘汰前后的树。"""
    vocab, tree, steps = {}, RadixCache(None, rule), []
    def snapshot():                              # 树此刻的样子：一个节点一个 dict，深度优先
        return [dict(id=node.id, depth=depth, words=[words[t] for t in node.key], time=node.last_access)
                for depth, _, node in tree.nodes()]
    for name, text in STEP_REQUESTS:
        toks = [vocab.setdefault(w, len(vocab)) for w in text.split()]   # 一个词一个 token，按第一次出现编号
        words = {i: w for w, i in vocab.items()}
        splits, hit = tree.n_splits, tree.match(toks)
        tree.insert(toks)
        before, gone = snapshot(), tree.evict(tree.size - STEP_CAPACITY)   # 先拍下淘汰前的树，再淘汰（从左往右算）
        steps.append(dict(name=name, n=len(toks), hit=hit, usable=usable(hit, len(toks)), splits=tree.n_splits - splits,
                          size=tree.size, before=before, marks={leaf.id: len(key) for leaf, key in gone},
                          evicted=[" ".join(words[t] for t in key) for _, key in gone], after=snapshot()))
    return steps


def demo_steps():
    """插入、拆开、整段命中、超出容量：每一步树怎么变？SGLang 的规则删掉整个叶子节点，修剪（只从叶子尾巴上剪掉刚好够的 token）又删哪些？"""
    steps, trim = run_steps("sglang"), run_steps("trim")
    rows = [[cut(s["name"], 7), s["n"], s["hit"], s["usable"], s["splits"],
             cut("".join(f"「{e}」" for e in s["evicted"]) or "-", 17), s["size"], t["size"]] for s, t in zip(steps, trim)]
    name, text = STEP_REQUESTS[0]
    arrow = "（=> 也是词）" if "=>" in text.split() else ""
    show.table(["请求", "token 数", "命中", "用得上", "拆", "SGLang 淘汰", "SGLang 后", "修剪后"], rows,
               caption=f"每个请求是一句英译法的提示，一个词算一个 token，如{cut(name, 10)}：「{cut(text, 150)}」"
                       f"{arrow}。树最多存 {STEP_CAPACITY} 个 token。命中：开头有几个 token 已在树里；用得上："
                       "其中能不重算的（最后一个 token 总要重算）；拆：拆开几个节点；SGLang 淘汰：SGLang 的规则这一步删掉"
                       "的叶子上的词；SGLang 后、修剪后：这一步之后树里存几个 token（按 SGLang 的规则、按修剪）。")
    x = ([r for r in rows if r[2] == r[1]] + rows)[0]      # 第一个整段命中的请求（没有就是第一行）
    show.claim(f"整段命中也要重算最后一个 token（{x[0]}：{x[1]} 个 token 里 {x[2]} 个在树里，用得上 {x[3]} 个）。",
               x[2] == x[1] and x[3] == x[1] - 1, "没有哪个请求整段都在树里")
    y = ([r for r in rows if r[6] < r[7]] + rows)[0]       # 第一个两种规则留下的不一样多的请求
    show.claim(f"SGLang 的规则把整个叶子节点一起删，树常停在容量（{STEP_CAPACITY}）以下，修剪删到正好满：{y[0]} 之后 "
               f"SGLang 的树里 {y[6]} 个，修剪的 {y[7]} 个。", y[6] < y[7], f"每一步两种规则的树里都一样多（最后 {rows[-1][6]} 个）")
    return dict(steps=steps, capacity=STEP_CAPACITY)


DEMOS = [("演示 1：一棵基数树", demo_tree), ("演示 2：按 token 匹配还是按块匹配", demo_granularity),
         ("演示 3：一小时的负载上：基数树的两种淘汰规则与块 LRU", demo_trace), ("演示 4：一步一步看基数树", demo_steps)]


def main(argv=None):
    args = show.parser(__doc__, DEMOS).parse_args(argv)
    check_settings()
    show.run(DEMOS, args)


if __name__ == "__main__":
    show.quietly(main)
