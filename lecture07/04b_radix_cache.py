"""CS349E · 第 7 讲 · 04b_radix_cache.py —— 找前缀的另一种办法：基数树（SGLang 的 RadixAttention）。

【问题】04 用链式块哈希认前缀（vLLM 的自动前缀缓存、Mooncake）。SGLang（Zheng 等，"SGLang: Efficient Execution
of Structured Language Model Programs"，NeurIPS 2024）把所有请求的 token 放进一棵基数树：按 token 匹配、
只淘汰叶子（LRU）。按 token 匹配比按块匹配多复用多少？代价是什么？在 trace 上，按叶子淘汰的 LRU 和
按块淘汰的 LRU 命中率一样吗——SGLang 自己的淘汰规则呢，为什么？

  演示 1：把 04 演示 2 的请求放进一棵基数树：树长什么样（每个节点的 token 区间、ref = 几个请求正在用它）。
  演示 2：同一批请求，按 token 匹配（基数树）和按块匹配（块大小同 04 演示 2）各要算多少 token；
          按 token 的代价：拆节点、节点长短不一、每个 token 一项索引（SGLang 2024 年的论文和博客里一页就是
          1 个 token；今天的 SGLang 也可以设 page_size > 1，那时只匹配整页）。
  演示 3：04 演示 3、4 的 trace（块 id，所以按块匹配）和容量：基数树的两种淘汰规则——SGLang 0.5.23 的（整片叶子、
          拆开的尾巴记成刚用过）和修剪（从叶子尾巴删到刚好满）——和块哈希 LRU 逐个请求比命中。
  演示 4：一步一步看基数树：英译法的 few-shot 提示，一个词一个 token——插入、拆开、整段命中、淘汰整片叶子
          （--step 时一步一屏、回车看下一步，变了的格子加亮；make all 画成 figures/04b_radix_steps.gif）。

【运行】python lecture07/04b_radix_cache.py           （约 4 秒，2 核笔记本，不需要 GPU）
        python lecture07/04b_radix_cache.py --demo 3  （只跑演示 3；--more 印出全部观察，--list 列出演示）
【依赖】numpy、rich；本目录的 kv_store（radix_tree、replay、traces、prefix_match）和 paged_kv。默认设置和 04 的一样
        （演示 1、2 的请求 = 04 演示 2 的，演示 3 的 trace 和容量 = 04 演示 3、4 的）；脚本之间不互相 import，
        改 04 的设置不会改这里——要在这里改同名的设置。

【练习】exercises/ex6_radix.py：自己写基数树的 match、insert 和拆节点；make check EX=6，再加 --mine 运行本脚本。
【试一试】
  1. 把 TREE_MAX_CHILDREN 改成 8（--demo 1）：把每个后缀叶子都画出来，ref 加起来是多少？
  2. 把 BLOCK_SIZE 改成 1（--demo 2）：块只有一个 token 时，按块和按 token 匹配还差多少？代价呢？
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.realpath(__file__))))  # 仓库根目录：让 lab_common 包可以 import
from lab_common.endings import quiet_endings  # noqa: E402
quiet_endings()  # 最先做（还没 import numpy）：这之后按 Ctrl-C、管道被关都只打一行，不打印 traceback
import functools  # noqa: E402
import numpy as np  # noqa: E402
from lab_common import console  # noqa: E402
from lab_common.frames import Cell, Frame, Row, play  # noqa: E402
from lab_common.console import print_header, print_observations, print_table, print_text, status  # noqa: E402
from lab_common.say import change, count, fixed, integer, listing, pct, rel_change, signed, span, words  # noqa: E402
from lab_common.script_tools import run_lecture  # noqa: E402
from lab_common.settings import check_setting, is_int  # noqa: E402
from lab_common.transformer_lab import TINY  # noqa: E402
from kv_store.replay import sweep  # noqa: E402
from kv_store.prefix_match import block_hashes, match_prefix, usable_hit_tokens, usable_hits  # noqa: E402
from paged_kv import n_blocks  # noqa: E402
from kv_store.eviction import cap_name  # noqa: E402
from kv_store.radix_tree import RadixCache  # noqa: E402
from kv_store.traces import make_trace, shared_prefix_requests  # noqa: E402
from kv_store.trace_file import BLOCK_SIZE as TRACE_BLOCK_SIZE  # noqa: E402  trace 的块大小：512 token

# ---- 学生可以改的设置 ----
TREE_MAX_CHILDREN = 2                     # 演示 1：每个节点最多画几个孩子（其余合成一行）
BLOCK_SIZE = 16                           # 演示 2：按块匹配的块大小（token；默认和 04 演示 2 一样）
PROMPT_SEED = 5                           # 演示 1、2 的请求：随机前缀 / 后缀的种子（默认和 04 演示 2 一样）
N_SHARING = 8                             # 演示 1、2：共享前缀的请求数
FEW_SHOT = (("1-shot", 80), ("5-shot", 341))   # 演示 1、2 的前缀：(名字, token 数)（vLLM 论文图 16 的两个前缀）
SUFFIX_LEN = (10, 30)                     # 演示 1、2：每个请求自己的后缀长度，在 [10, 30) 里均匀随机（token）
TRACE_SEED = 0                            # 演示 3：合成 trace 的种子（默认和 04 演示 3 一样）
CAPACITIES = (None, 100_000, 50_000, 30_000, 10_000, 1_000)   # 演示 3 的缓存容量（块；和 04 演示 4 一样）
DEMO3_SEED_OF_04 = 0                      # 04 演示 3、4 的默认 TRACE_SEED
DEMO2_OF_04 = (16, 5, 8, (("1-shot", 80), ("5-shot", 341)), (10, 30))   # 04 演示 2 的默认设置：相同时按块 = 04 的"实际算"
STEP_CAPACITY = 22                        # 演示 4：树的容量（token）；默认最后一个请求超出 1 个
SYSTEM, SHOT_1, SHOT_2 = "Translate English to French :", "sea otter => loutre de mer", "cheese => fromage"
STEP_REQUESTS = (                         # 演示 4 的请求（英译法的 few-shot 提示，仿 GPT-3 论文的例子）：一个词一个 token
    ("请求 A", f"{SYSTEM} {SHOT_1} peppermint =>"),
    ("请求 B", f"{SYSTEM} {SHOT_1} plush giraffe =>"),
    ("请求 C", f"{SYSTEM} {SHOT_2} bread =>"),
    ("请求 D", f"{SYSTEM} {SHOT_1} plush giraffe =>"),   # 和 B 一模一样：整段命中
    ("请求 E", f"{SYSTEM} {SHOT_2} mint =>"),
)

# ---- 出处（只用来对照，标明出处）----
f2 = fixed(2, top=1)                           # 命中率的格式：和 04 演示 4 的表一样两位小数
SGLANG_SHORT = "SGLang 的 RadixAttention"   # Zheng 等，"SGLang: Efficient Execution of Structured Language Model Programs"，NeurIPS 2024
RULE_ORDER = ("trim", "sglang")           # 演示 3 的两种淘汰规则（kv_store.radix_tree.RULES）
TRIM_WHY = ("修剪 = 块 LRU：链式块 id 下，LRU 最久没用的块总是某片叶子的最后一块，修剪每一步删的正是它。")
SGLANG_WHY = ("SGLang（0.5.23 的 RadixCache）删的块不同：evict 整片删叶子、删够为止，树常停在容量以下；请求在节点"
              "中间分叉时先记时刻再拆，没用到的尾巴也像刚用过。")
CHAIN_NOTE = "链式哈希：每个块 id 前面永远是同一个 id，\"同一个 id\"就是\"同一段前缀\"，树和哈希表认的是同一组块。"
SGLANG_PAGE_NOTE = ("按 token 匹配，KV 就要按 token 分页（SGLang 论文（arXiv 2312.07104 §3）和 LMSYS 博客（2024-01-17）："
                    "一页 1 个 token）；今天的 SGLang 也可以设 page_size > 1，那时基数树只匹配整页，和按块一样要凑满一页。")


def check_settings():
    check_setting("TREE_MAX_CHILDREN", TREE_MAX_CHILDREN, is_int(TREE_MAX_CHILDREN, 1, 64), " 1 到 64 的整数")
    check_setting("BLOCK_SIZE", BLOCK_SIZE, is_int(BLOCK_SIZE, 1, 1024), " 1 到 1,024 的整数（token）")
    ok_few = (isinstance(FEW_SHOT, tuple) and len(FEW_SHOT) > 0 and len({e[0] for e in FEW_SHOT}) == len(FEW_SHOT)
              and all(isinstance(e, tuple) and len(e) == 2 and isinstance(e[0], str) and is_int(e[1], 1, 4096) for e in FEW_SHOT))
    ok_suffix = (isinstance(SUFFIX_LEN, tuple) and len(SUFFIX_LEN) == 2 and is_int(SUFFIX_LEN[0], 1)
                 and is_int(SUFFIX_LEN[1], SUFFIX_LEN[0] + 1, 4096))
    ok_steps = (isinstance(STEP_REQUESTS, tuple) and 0 < len(STEP_REQUESTS) <= 20
                and all(isinstance(e, tuple) and len(e) == 2 and isinstance(e[0], str) and isinstance(e[1], str)
                        and e[1].split() for e in STEP_REQUESTS)
                and len({e[0] for e in STEP_REQUESTS}) == len(STEP_REQUESTS))
    ok_caps = (isinstance(CAPACITIES, tuple) and 0 < len(set(CAPACITIES)) == len(CAPACITIES)
               and all(c is None or is_int(c, 1) for c in CAPACITIES))
    for name, ok, allowed in [("PROMPT_SEED", is_int(PROMPT_SEED, 0), "非负整数"), ("TRACE_SEED", is_int(TRACE_SEED, 0), "非负整数"),
                              ("N_SHARING", is_int(N_SHARING, 1, 64), " 1 到 64 的整数（请求数）"),
                              ("FEW_SHOT", ok_few, "非空的 ((名字, 前缀 token 数 1..4096), ...)，名字不重复"),
                              ("SUFFIX_LEN", ok_suffix, " (最短, 最长 + 1) 两个整数，1 ≤ 最短 < 最长 + 1 ≤ 4096"),
                              ("CAPACITIES", ok_caps, "非空、不重复的容量（块，正整数；None = 无限）"),
                              ("STEP_CAPACITY", is_int(STEP_CAPACITY, 1, 10_000), " 1 到 10,000 的整数（token）"),
                              ("STEP_REQUESTS", ok_steps, " 1 到 20 个 (名字, 一句话)：名字不重复，句子至少一个词")]:
        check_setting(name, globals()[name], ok, allowed)


# =============================================================================
def demo2_requests():
    """04 演示 2 的请求：[(前缀名, 前缀长度, 这个请求的 token 列表)]，按到达顺序。"""
    out = []
    for name, (prefix, suffixes) in shared_prefix_requests(TINY.vocab, FEW_SHOT, N_SHARING, SUFFIX_LEN, PROMPT_SEED).items():
        out += [(name, len(prefix), np.concatenate([prefix, s]).tolist()) for s in suffixes]
    return out


def tree_lines(tree, max_children=None):
    """树的文字图：每个节点一行 "[起点, 终点) 长度 ref"；max_children：每个节点最多画几个孩子，其余的折成一行。"""
    lines = []

    def walk(node, start, prefix):
        kids = list(node.children.values())
        shown = kids
        if max_children is not None and len(kids) > max_children:
            shown = kids[:max_children]
        for k, c in enumerate(shown):
            last = k == len(shown) - 1 and len(shown) == len(kids)
            branch, more = "├─ ", "│  "
            if last:
                branch, more = "└─ ", "   "
            end = start + len(c.key)
            lines.append(f"{prefix}{branch}[{start}, {end}) {len(c.key)} 个 ref {c.ref}")
            walk(c, end, prefix + more)
        if len(shown) < len(kids):
            rest = kids[len(shown):]
            lengths = span([len(c.key) for c in rest], integer)   # 两端相同时只写一个值
            lines.append(f"{prefix}└─ …另外 {len(rest)} 个孩子（长度 {lengths}）")

    walk(tree.root, 0, "")
    return lines


def demo1_tree():
    """04 演示 2 的请求放进一棵基数树，长什么样？"""
    reqs = demo2_requests()
    which = f"04 演示 2 默认的 {len(reqs)} 个请求"
    if (PROMPT_SEED, N_SHARING, FEW_SHOT, SUFFIX_LEN) != DEMO2_OF_04[1:]:       # 改了请求的设置：不再是 04 的那一批
        which = f"{len(reqs)} 个共享前缀的请求（按你的设置）"
    print_header(f"演示 1：{which}放进一棵基数树（{SGLANG_SHORT}）")
    tree = RadixCache()
    at_prefix = 0                                    # 在共用前缀末尾分叉的拆分（insert 最多拆一次，拆在匹配到的长度处）
    for _, plen, toks in reqs:
        matched, splits = tree.insert(toks, lock=True)   # 请求都还在跑：路径上每个节点 ref + 1
        at_prefix += splits * (matched == plen)
    nodes = tree.nodes()
    print_text("每行一个节点：[起点, 终点)、长度、ref（用着它的请求数，SGLang 的 lock_ref）。")
    for line in tree_lines(tree, TREE_MAX_CHILDREN):
        print_text(line)
    total = sum(len(t) for _, _, t in reqs)
    groups = {}
    for name, plen, _ in reqs:
        groups.setdefault((name, plen), 0)
        groups[(name, plen)] += 1
    leaves = [n for _, _, n in nodes if not n.children]
    d = dict(n_requests=len(reqs), total_tokens=total, tree_tokens=tree.size, n_nodes=len(nodes), n_leaves=len(leaves),
             n_splits=tree.n_splits, splits_at_prefix=at_prefix, ref_sum_leaves=sum(n.ref for n in leaves),
             groups=[(name, plen, k) for (name, plen), k in groups.items()],
             top=[(len(n.key), n.ref) for depth, _, n in nodes if depth == 0],
             tree=[(depth, start, len(n.key), n.ref) for depth, start, n in nodes])
    print_table(["请求", "token", "树里的 token", "节点", "叶子", "叶子 ref 和", "前缀末尾拆", "别处拆"],
                [[d["n_requests"], integer(total), integer(tree.size), d["n_nodes"], d["n_leaves"], d["ref_sum_leaves"],
                  at_prefix, tree.n_splits - at_prefix]],
                caption="叶子 ref 和：占着叶子的请求（每个请求都止于一片叶子时 = 请求数）；拆：插入时在共用前缀的末尾"
                        "分叉，或在别处（碰巧相同的 token 之后）。")
    print_observations(*observations_1(d))
    return d


def observations_1(d):
    """演示 1 的观察 → (默认, --more)。d["groups"] = [(前缀名, 前缀长度, 几个请求)]，d["top"] = [(根下节点长度, ref)]。"""
    total, stored = d["total_tokens"], d["tree_tokens"]
    shared = [words(name, "的", plen, "个 token") for name, plen, k in d["groups"] if (plen, k) in d["top"] and k > 1]
    text = f"{d['n_requests']} 个请求一共 {integer(total)} 个 token，树里存了 {integer(stored)} 个（{pct(stored / total)}）"
    if shared:
        text += f"：共用的前缀（{'、'.join(shared)}）各是一个节点，请求都从它往下走，KV 只存一份。"
    else:
        text += "：没有哪段前缀被两个以上的请求共用成一个节点。"
    split = "一次也没有拆节点：没有哪个请求在已有节点的中间分叉。"
    if d["n_splits"]:
        split = f"拆过 {count(d['n_splits'], '次')}节点：分叉点落在哪个 token 上，就在哪里拆，所以节点长短不一。"
    return [text, split], []


# =============================================================================
def granularity(toks_list, block_size, prefix_len=0):
    """一组依次到达的请求：按块（链式哈希，块大小 block_size）和按 token（基数树）各要算多少 token，树拆了几次。
    按 token 多命中的 token 分成两份：落在共用前缀（前 prefix_len 个 token）里的——前缀不满一块的零头；其余的——
    后缀开头碰巧相同、按块凑不满一块的。

    >>> r = granularity([[1, 2, 3, 4, 5], [1, 2, 3, 4, 6]], 2)    # 共同前缀 4 个 token = 2 个整块
    >>> r["by_block"], r["by_token"], r["splits"]                  # 第二个：按块命中 4 个，按 token 也命中 4 个
    (6, 6, 1)
    >>> r = granularity([[1, 2, 3, 4, 5, 7, 8], [1, 2, 3, 4, 5, 7, 9]], 4, prefix_len=5)   # 前缀 5 = 1 块 + 零头 1
    >>> r["by_block"] - r["by_token"], r["gain_tail"], r["gain_other"]                     # 后缀开头的 7 碰巧相同
    (2, 1, 1)
    """
    seen, by_block, tree, by_token, gain_tail = set(), 0, RadixCache(), 0, 0
    for toks in toks_list:
        hs = block_hashes(toks, block=block_size)
        hit_block = int(usable_hit_tokens(match_prefix(hs, seen), len(toks), block_size))   # 从第一块起连续命中的整块
        hit_token = int(usable_hit_tokens(tree.match(toks), len(toks), 1))                  # 按 token：一个 token 一"块"
        seen.update(hs)
        by_block += len(toks) - hit_block
        by_token += len(toks) - hit_token
        gain_tail += min(hit_token, prefix_len) - min(hit_block, prefix_len)
        tree.insert(toks)
    lengths = [len(n.key) for _, _, n in tree.nodes()]
    return dict(total=sum(map(len, toks_list)), by_block=by_block, by_token=by_token, splits=tree.n_splits,
                gain_tail=gain_tail, gain_other=by_block - by_token - gain_tail,
                nodes=len(lengths), min_node=min(lengths), max_node=max(lengths),
                block_entries=sum(n_blocks(len(t), block_size) for t in toks_list),
                token_entries=sum(map(len, toks_list)))


def summed(res, keys=("by_block", "by_token", "gain_tail", "gain_other", "block_entries", "token_entries")):
    """几组 granularity() 的结果合在一起：keys 相加，节点长取全部节点的最短、最长。

    >>> summed({"a": dict(by_block=3, min_node=2, max_node=5), "b": dict(by_block=4, min_node=1, max_node=3)}, ("by_block",))
    {'by_block': 7, 'min_node': 1, 'max_node': 5}
    """
    total = {k: sum(r[k] for r in res.values()) for k in keys}
    total.update(min_node=min(r["min_node"] for r in res.values()), max_node=max(r["max_node"] for r in res.values()))
    return total


def demo2_granularity():
    """按 token 匹配比按块匹配多复用多少？代价是什么？"""
    bs = BLOCK_SIZE
    print_header(f"演示 2：同样这些请求，按 token 匹配（基数树）还是按块匹配（块大小 {bs}）")
    groups = {}
    for name, plen, toks in demo2_requests():
        groups.setdefault(name, (plen, []))[1].append(toks)
    res = {name: dict(granularity(tl, bs, plen), prefix_len=plen, n=len(tl)) for name, (plen, tl) in groups.items()}
    keys = ("by_block", "by_token", "gain_tail", "gain_other", "block_entries", "token_entries")
    total = summed(res, keys)
    rows = [[name, f"{r['prefix_len']} = {r['prefix_len'] // bs}×{bs}+{r['prefix_len'] % bs}"] + [integer(r[k]) for k in keys]
            for name, r in res.items()]
    if len(res) > 1:
        rows.append(["合计", "-"] + [integer(total[k]) for k in keys])
    same = "按块：链式块哈希，从第一块起连续命中的整块不算"
    if (bs, PROMPT_SEED, N_SHARING, FEW_SHOT, SUFFIX_LEN) == DEMO2_OF_04:
        same = "按块 = 04 演示 2 默认设置下的\"实际算\""
    more = ""
    if console.SHOW_MORE:                            # 拆分次数、节点长和 SGLang 的分页：--more 时写在表下
        more = "".join(f"{name}：{r['n']} 个请求，拆分 {r['splits']} 次，节点长 {span([r['min_node'], r['max_node']], integer)} "
                       "个 token。" for name, r in res.items()) + SGLANG_PAGE_NOTE
    print_table(["前缀", "前缀长", "按块", "按 token", "零头", "碰巧", "块表项", "token 项"], rows,
                caption=f"按块 / 按 token：要算的 token（{same}）；前缀长 = 整块 × 块大小 + 零头。按 token 少算的——零头：前缀里"
                        f"不满一块的（后来的请求各省一份）；碰巧：后缀开头碰巧相同、凑不满一块的。块表项：每 {bs} 个 token 一项。"
                        + more)
    print_observations(*observations_2(total, bs))
    return res


def observations_2(t, bs):
    """演示 2 的观察 → (默认, --more)。t：全部前缀合计的 granularity() 结果（节点长取全部节点的最短、最长）。"""
    why = [(t["gain_tail"], "个是前缀不满一块的零头（块哈希只认整块）"),
           (t["gain_other"], "个来自后缀开头碰巧相同的 token（凑不满一块）")]
    text = (f"按 token 匹配一共少算 {integer(t['by_block'] - t['by_token'])} 个 token（"
            f"{change(t['by_block'], t['by_token'], integer)}）——" + "，".join(f"{integer(n)} {w}" for n, w in why if n) + "。")
    if t["by_block"] == t["by_token"]:
        text = (f"按 token 和按块匹配要算的一样多（都是 {integer(t['by_token'])} 个 token）：按块用不上的零头和碰巧相同的"
                "开头，这次一个也没有。")
    cost = (f"代价：索引每个 token 一项，{integer(t['token_entries'])} 项，按块只要 {integer(t['block_entries'])} 项；"
            f"节点长 {span([t['min_node'], t['max_node']], integer)} 个 token 不等。")
    if t["block_entries"] == t["token_entries"]:
        cost = (f"块大小 {bs} 时按块也是每个 token 一项索引（{integer(t['token_entries'])} 项）：块小到一个 token，"
                "块哈希就和基数树一样细，只是每个 token 都要算一次哈希。")
    return [text, cost], []


# =============================================================================
def chain_breaks(trace):
    """有几个块 id 在不同的请求里跟在不同的前一块后面（链式哈希下应该是 0：同一个 id 的前缀总相同）。

    >>> class T: iter_blocks = lambda self: iter([(1, 2), (3, 2), (1, 4)])
    >>> chain_breaks(T())                                   # 块 2 一次跟在 1 后面、一次跟在 3 后面
    1
    """
    parent = {}
    bad = set()
    for blocks in trace.iter_blocks():
        prev = None
        for b in blocks:
            p = parent.setdefault(b, prev)
            if p != prev:
                bad.add(b)
            prev = b
    return len(bad)


def demo3_trace():
    """在 trace 上，按叶子淘汰的基数树和按块淘汰的 LRU，命中一样吗？SGLang 自己的规则差多少、为什么？"""
    caps = CAPACITIES
    tr = make_trace(TRACE_SEED)
    trace_name = f"04 默认的合成 trace（种子 {TRACE_SEED}）"
    if TRACE_SEED != DEMO3_SEED_OF_04:
        trace_name = f"合成 trace（种子 {TRACE_SEED}，04 默认用种子 {DEMO3_SEED_OF_04}）"
    print_header(f"演示 3：{trace_name}——基数树的两种淘汰规则和块哈希 LRU")
    with status(f"{integer(len(tr))} 个请求 × {len(caps)} 个容量，块哈希 LRU 和两种规则的基数树各模拟一遍…"):
        trees = {rule: functools.partial(RadixCache, rule=rule) for rule in RULE_ORDER}   # trees[规则](容量) → 一棵树
        first = trees[RULE_ORDER[0]]                 # 容量无限时不淘汰，规则无关：只算第一种规则
        hits = sweep(tr, caps, ("lru", first), extra=[(t, c) for t in trees.values() for c in caps if c is not None])
    lru = {("lru", c): hits[("lru", c)] for c in caps}
    radix = {(rule, c): hits[(trees[rule], c)] for rule in RULE_ORDER for c in caps if c is not None}
    radix.update({(rule, None): hits[(first, None)] for rule in RULE_ORDER if None in caps})
    total = int(len(tr.hash_ids))

    def usable(h):                                   # 和 04 演示 3 同一个"命中"：最后一个 token 总要重算
        return int(usable_hits(h, tr.input_len, TRACE_BLOCK_SIZE).sum())
    d = dict(caps=list(caps), cap_names=[cap_name(c) for c in caps], breaks=chain_breaks(tr), total=total,
             distinct=tr.distinct_blocks(),
             same={c: bool(np.array_equal(lru[("lru", c)], radix[("trim", c)])) for c in caps},
             lru={c: usable(lru[("lru", c)]) for c in caps},
             radix={rule: {c: usable(radix[(rule, c)]) for c in caps} for rule in RULE_ORDER})
    same_as_04 = "同 04 演示 4"
    if TRACE_SEED == DEMO3_SEED_OF_04:
        same_as_04 = "同 04 演示 4，块哈希 LRU 就是它默认设置下的 LRU 行"
    rows = []
    for c, name in zip(caps, d["cap_names"]):
        verdict = "不同"
        if d["same"][c]:
            verdict = "逐个相同"
        rows.append([name, f2(d["lru"][c] / total), f2(d["radix"]["trim"][c] / total),
                     f2(d["radix"]["sglang"][c] / total), verdict, signed(d["radix"]["sglang"][c] - d["lru"][c], 0)])
    print_table(["容量（块）", "块哈希 LRU", "修剪", "SGLang", "修剪比 LRU", "SGLang − LRU"], rows,
                caption=f"命中率 = 用得上的命中块 / 全部块访问（{same_as_04}）；修剪比 LRU："
                        "逐个请求比命中块数；SGLang − LRU：命中块数之差。" + trim_why(d) + sglang_why(d))
    print_observations(*observations_3(d))
    return d


def roomy(d):
    """表里哪些容量放得下 trace 的全部不同块（None 也算）：块哈希 LRU 在这些容量下一次也不淘汰。"""
    return [c for c in d["caps"] if c is None or c >= d["distinct"]]


def sglang_why(d):
    """表下说 SGLang 的规则为什么不同；每个容量都放得下全部块时，谁也不淘汰，就只说这一点。"""
    if len(roomy(d)) == len(d["caps"]) and not d["breaks"]:
        return f"表里每个容量都放得下 trace 的全部 {integer(d['distinct'])} 个不同的块：谁也不淘汰，淘汰规则无从不同。"
    return SGLANG_WHY


def trim_why(d):
    """"修剪 = 块 LRU" 只在表里每个容量都逐个相同时说；LRUCache 被改过、对不上时说表里看到的。"""
    if all(d["same"].values()):
        return TRIM_WHY
    return "修剪和块哈希 LRU 在有的容量上不同：kv_store/eviction.py 的 LRUCache 不再是按最久没用淘汰的块 LRU 了吗？"


def observations_3(d):
    """演示 3 的观察 → (默认, --more)。d["lru"][容量]、d["radix"][规则][容量]：用得上的命中块数；
    d["same"][容量]：修剪规则和块 LRU 逐个请求相同；d["breaks"]：几个块 id 跟在不同的前一块后面。"""
    caps, names = d["caps"], dict(zip(d["caps"], d["cap_names"]))

    def at(c):                                       # "10,000 块" / "容量无限"
        if c is None:
            return "容量无限"
        return f"{names[c]} 块"
    diff = [at(c) for c in caps if not d["same"][c]]
    first = (f"修剪规则下，{count(len(caps), '个容量')}里基数树给每个请求的命中块数都和块哈希 LRU 逐个相同："
             "块 id 是链式哈希，两者每一步删的是同一块。")
    if diff:
        first = f"修剪规则下，{listing(diff)}时基数树和块哈希 LRU 不同（表里 {count(len(caps), '个容量')}中的 {len(diff)} 个）。"
    if d["breaks"]:
        first += (f"有 {integer(d['breaks'])} 个块 id 跟在不同的前一块后面（不是严格的链式哈希）：哈希表把它们当成一块，"
                  "基数树当成不同的节点，表下那条道理的前提不满足。")
    gap = {c: d["radix"]["sglang"][c] - d["lru"][c] for c in caps}
    less = [c for c in caps if gap[c] < 0]
    more = [c for c in caps if gap[c] > 0]
    if len(roomy(d)) == len(caps) and not d["breaks"] and not diff and not less and not more:
        return [f"表里每个容量都放得下 trace 的全部 {integer(d['distinct'])} 个不同的块，一次也不淘汰："
                "块哈希 LRU、修剪和 SGLang 的规则给每个请求的命中都一样。"], [CHAIN_NOTE]
    second = "SGLang 的规则在每个容量下命中都和块哈希 LRU 一样多。"
    if less and not more:
        worst = min(less, key=lambda c: gap[c] / max(1, d["lru"][c]))
        second = (f"SGLang 的规则在 {count(len(less), '个容量')}下比块哈希 LRU 少命中 {span([-gap[c] for c in less], integer)} 块，"
                  f"{at(worst)}时相对最多（{rel_change(d['lru'][worst], d['radix']['sglang'][worst], nd=1)}，"
                  f"块哈希 LRU 在那里命中 {integer(d['lru'][worst])} 块）："
                  "整片叶子删够为止，拆开的尾巴像刚用过（见表下）。")
    elif more:
        second = f"SGLang 的规则在 {listing([at(c) for c in more])}时命中比块哈希 LRU 多"
        if less:
            second += f"，{listing([at(c) for c in less])}时少"
        second += "：两条规则删的块不同，谁多谁少看 trace。"
    return [first, second], [CHAIN_NOTE]


# =============================================================================
def step_tokens(words, vocab):
    """一串词 → token id：一个词一个 token，id 按第一次出现的顺序编（vocab 就地添上新词）。

    >>> v = {}; step_tokens("a b a".split(), v), v
    ([0, 1, 0], {'a': 0, 'b': 1})
    """
    return [vocab.setdefault(w, len(vocab)) for w in words]


def tree_frame(tree, words_of, title, note, path=()):
    """树此刻的样子 → 一帧：一个节点一行（缩进 = 深度，标签 = 边上的词），格子 = 长度、最近访问的时刻；
    path 里的节点（这一步命中的路径）加框。"""
    rows = []
    for depth, _, node in tree.nodes():
        cells = (Cell(f"{len(node.key)} 个", "token", node.id in path), Cell(f"时刻 {node.last_access}", "时刻"))
        rows.append(Row(" ".join(words_of[t] for t in node.key), cells, depth))
    return Frame(title, tuple(rows), note, legend=(("token", "边上的 token 数"), ("时刻", "最近访问（第几次 insert）")))


def tree_units(tree):
    """树里存着的每个 token → 它所在的节点 (时刻, id)。一个 token 记成从根到它的那串 token（元组）：拆节点不改变
    这个集合，insert 前后一比就知道淘汰删掉了哪些 token——哪种淘汰规则、谁写的树都一样。"""
    units, prefix = {}, {-1: ()}
    for depth, _, node in tree.nodes():                         # 深度优先：父节点总在孩子前面
        head = prefix[depth - 1]
        prefix[depth] = head + tuple(node.key)
        for k in range(len(head) + 1, len(prefix[depth]) + 1):
            units[prefix[depth][:k]] = (node.last_access, node.id)
    return units


def run_steps(rule):
    """STEP_REQUESTS 依次进一棵容量 STEP_CAPACITY 的树（rule）：每个请求先 match、再 insert。返回每步的计数和帧。"""
    vocab, tree, steps, frames = {}, RadixCache(STEP_CAPACITY, rule), [], []
    for name, text in STEP_REQUESTS:
        toks = step_tokens(text.split(), vocab)
        words_of = {i: w for w, i in vocab.items()}
        before = tree_units(tree)
        hit = tree.match(toks)
        usable = int(usable_hit_tokens(hit, len(toks), 1))     # 全讲同一个"命中"：最后一个 token 总要算
        _, splits = tree.insert(toks)
        path, node, i = set(), tree.root, 0                     # 命中的路径（insert 已在命中的末尾拆开）：加框
        while i < hit:
            node = node.children[toks[i]]
            path.add(node.id)
            i += len(node.key)
        after = tree_units(tree)
        pieces = {}                                             # 插入前的节点 (时刻, id) → 它被删掉的 token（前缀）
        for unit, owner in before.items():
            if unit not in after:
                pieces.setdefault(owner, []).append(unit)
        order = sorted(pieces, key=lambda owner: (owner[0], -min(map(len, pieces[owner]))))   # 删的先后：旧的、深的先
        gone = [" ".join(words_of[u[-1]] for u in sorted(pieces[owner], key=len)) for owner in order]
        own = sum(tuple(toks[:k]) not in after for k in range(hit + 1, len(toks) + 1))   # 刚插进去又被删掉的
        if own:
            gone.append(f"{name} 刚插入的 {own} 个 token")
        steps.append(dict(name=name, n=len(toks), hit=hit, usable=usable, splits=splits, size=tree.size, evicted=gone,
                          trimmed=own + sum(len(units) for units in pieces.values())))
        note = f"{name}：{len(toks)} 个 token，{hit} 个已在树里（用得上 {usable} 个），拆 {splits} 个节点"
        if gone:
            note += f"；超出容量，淘汰叶子「{'」「'.join(gone)}」"
        frames.append(tree_frame(tree, words_of, f"{name}（树里 {tree.size} / {STEP_CAPACITY} 个 token）", note + "。", path))
    return dict(steps=steps, frames=frames, vocab=vocab, render=[
        f"{'':{2 * depth}}" + " ".join(words_of[t] for t in n.key) + f"（id {' '.join(map(str, n.key))}，时刻 {n.last_access}）"
        for depth, _, n in tree.nodes()], size=tree.size)


def demo4_steps():
    """基数树一步一步：插入、拆开、命中、淘汰——SGLang 的规则淘汰哪片叶子、删多少？"""
    print_header(f"演示 4：一步一步看基数树（SGLang 的规则，容量 {STEP_CAPACITY} 个 token）")
    d = run_steps("sglang")
    alt = run_steps("trim")
    play(d["frames"])                                           # --step 时一步一屏；make all 画成 GIF
    print_table(["请求", "token", "已在树里", "用得上", "拆", "淘汰的叶子", "树里"],
                [[x["name"], x["n"], x["hit"], x["usable"], x["splits"], "、".join(x["evicted"]) or "-", x["size"]]
                 for x in d["steps"]],
                caption="一个词一个 token，id 按第一次出现编；用得上：最后一个 token 总要算。")
    print_text("最后的树（缩进 = 深度）：")
    for line in d["render"]:
        print_text("  " + line)
    if not d["render"]:
        print_text("  （空：全被淘汰了）")
    d.update(alt_steps=alt["steps"], alt_size=alt["size"])
    print_observations(*observations_4(d))
    return d


def observations_4(d):
    """演示 4 的观察 → (默认, --more)。d["steps"] / d["alt_steps"]：SGLang 规则 / 修剪规则下每步的计数。"""
    lines = []
    full = [x for x in d["steps"] if x["n"] and x["hit"] == x["n"]]
    if full:
        x = full[0]
        lines.append(f"{x['name']}：整段 {x['n']} 个 token 都在树里，用得上 {x['usable']} 个——最后一个 token 总要算。")
    ev = [(x, y) for x, y in zip(d["steps"], d["alt_steps"]) if x["evicted"] or y["trimmed"]]
    if ev:
        x, y = ev[0]
        which = "整片最旧的叶子"
        if x["evicted"] and x["evicted"][-1].startswith(f"{x['name']} 刚插入的"):
            which = "整片叶子，连它自己的也删了"
        text = f"{x['name']} 来时超出容量：SGLang 的规则删掉{which}「{'」「'.join(x['evicted'])}」，树停在 {x['size']} 个"
        if y["trimmed"] and x["size"] < y["size"]:
            text += f"；修剪规则只删 {y['trimmed']} 个，树正好 {y['size']} 个"
        lines.append(text + f"（容量 {STEP_CAPACITY}）。")
    if not lines:
        lines = [f"这几个请求一次也没有超出容量（{STEP_CAPACITY} 个 token），也没有整段命中的请求。"]
    return lines[:2], []


# =============================================================================
DEMOS = {1: demo1_tree, 2: demo2_granularity, 3: demo3_trace, 4: demo4_steps}


def main(argv=None):
    def check(args):
        check_settings()
    return run_lecture(DEMOS, "第 7 讲 · 基数树前缀缓存（SGLang RadixAttention）", argv, check=check)


if __name__ == "__main__":
    sys.exit(main())
