"""CS349E · 第 7 讲 · 04b_radix_cache.py —— 找前缀的另一种办法：基数树（SGLang 的 RadixAttention）。

【问题】04 用链式块哈希认前缀（vLLM 的自动前缀缓存、Mooncake）。SGLang（Zheng 等，"SGLang: Efficient Execution
of Structured Language Model Programs"，NeurIPS 2024）把所有请求的 token 放进一棵基数树：按 token 匹配、
只淘汰叶子（LRU）。按 token 匹配比按块匹配多复用多少？代价是什么？在 trace 上，按叶子淘汰的 LRU 和
按块淘汰的 LRU 命中率一样吗——为什么？

  演示 1：把 04 演示 2 的请求放进一棵基数树：树长什么样（每个节点的 token 区间、ref = 几个请求正在用它）。
  演示 2：同一批请求，按 token 匹配（基数树）和按块匹配（块大小同 04 演示 2）各要算多少 token；
          按 token 的代价：拆节点、节点长短不一（没有固定大小的页）、每个 token 一项索引。
  演示 3：04 演示 3 的 trace（块 id，所以按块匹配）和容量：基数树按叶子 LRU 淘汰，和块哈希的 LRU 逐个请求比命中。

【运行】python lecture07/04b_radix_cache.py           （约 2 秒，2 核笔记本，不需要 GPU）
        python lecture07/04b_radix_cache.py --demo 3  （只跑演示 3）
【依赖】numpy、rich；本目录的 radix_cache、kv_store、kv_cache_sim，以及 04_prefix_caching.py 的请求、trace 和设置
        （演示 2 的请求、演示 3 的 trace 和容量都从 04 取：改 04 的设置，这里跟着变）。

【试一试】
  1. 把 TREE_MAX_CHILDREN 改成 8（--demo 1）：把每个后缀叶子都画出来，ref 加起来是多少？
  2. 把 BLOCK_SIZE 改成 1（--demo 2）：块只有一个 token 时，按块和按 token 匹配还差多少？代价呢？
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.realpath(__file__))))  # 仓库根目录：让 lab_common 包可以 import
from lab_common.console import fmt_int, print_header, print_observations, print_table, print_text  # noqa: E402
from lab_common.script_tools import load_script, run_demos  # noqa: E402
from lab_common.settings import check_setting, is_int  # noqa: E402
from lab_common.transformer_lab import TINY  # noqa: E402
from kv_cache_sim import sweep  # noqa: E402
from kv_store import block_hashes, n_blocks  # noqa: E402
from radix_cache import RadixCache, radix_sweep  # noqa: E402

S04 = load_script("04_prefix_caching")    # 演示 2 的请求、演示 3 的 trace 和容量都用 04 的（同一份代码、同一组设置）

# ---- 学生可以改的设置 ----
TREE_MAX_CHILDREN = 3                     # 演示 1：每个节点最多画几个孩子（其余合成一行）
BLOCK_SIZE = S04.BLOCK_SIZE               # 演示 2：按块匹配的块大小（token；默认和 04 演示 2 一样）

# ---- 出处（只用来对照，标明出处）----
SGLANG = "SGLang（Zheng 等，NeurIPS 2024）"
SGLANG_PAGE = "LMSYS 博客 2024-01-17：RadixAttention 的 KV 按页存在 GPU 上，一页就是 1 个 token"


def check_settings():
    check_setting("TREE_MAX_CHILDREN", TREE_MAX_CHILDREN, is_int(TREE_MAX_CHILDREN, 1, 64), " 1 到 64 的整数")
    check_setting("BLOCK_SIZE", BLOCK_SIZE, is_int(BLOCK_SIZE, 1, 1024), " 1 到 1,024 的整数（token）")


# =============================================================================
def demo2_requests():
    """04 演示 2 的请求：[(前缀名, 前缀长度, 这个请求的 token 列表)]，按到达顺序。"""
    out = []
    for name, (prefix, suffixes) in S04.shared_prefix_requests(TINY.vocab).items():
        out += [(name, len(prefix), np.concatenate([prefix, s]).tolist()) for s in suffixes]
    return out


def demo1_tree():
    """04 演示 2 的请求放进一棵基数树，长什么样？"""
    reqs = demo2_requests()
    print_header(f"演示 1：04 演示 2 的 {len(reqs)} 个请求放进一棵基数树——RadixAttention，{SGLANG}")
    tree = RadixCache()
    for _, _, toks in reqs:
        tree.insert(toks, lock=True)                 # 请求都还在跑：路径上每个节点 ref + 1
    nodes = tree.nodes()
    leaves = [n for _, _, n in nodes if not n.children]
    print_text("每行一个节点：[起点, 终点) 是这段 token 在请求里的位置，后面是长度和 ref（几个还在跑的请求用着它，"
               "SGLang 叫 lock_ref；ref > 0 的节点不能淘汰）。")
    for line in tree.render(max_children=TREE_MAX_CHILDREN):
        print_text(line)
    total = sum(len(t) for _, _, t in reqs)
    print_table(["请求", "请求的 token", "树里的 token", "节点", "叶子", "拆过的节点"],
                [[len(reqs), fmt_int(total), fmt_int(tree.size), len(nodes), len(leaves), tree.n_splits]])
    top = [(start, n) for depth, start, n in nodes if depth == 0]
    print_observations(demo1_observations(reqs, tree, top, total))
    return dict(n_requests=len(reqs), total_tokens=total, tree_tokens=tree.size, n_nodes=len(nodes),
                n_leaves=len(leaves), n_splits=tree.n_splits,
                top=[(len(n.key), n.ref) for _, n in top], ref_sum_leaves=sum(n.ref for n in leaves))


def demo1_observations(reqs, tree, top, total):
    groups = {}
    for name, plen, _ in reqs:
        groups.setdefault((name, plen), 0)
        groups[(name, plen)] += 1
    obs = []
    for (name, plen), count in groups.items():
        same = [n for _, n in top if len(n.key) == plen and n.ref == count]
        if same:
            obs.append(f"{name} 的 {plen} 个 token 前缀在树里只有一个节点，ref = {count}：{count} 个请求都从它往下走，"
                       "KV 只存一份。")
        else:
            obs.append(f"{name} 的前缀没有单独成一个节点（它和别的请求开头碰巧有相同的 token，被拆到了更深处）。")
    obs.append(f"树里一共存了 {fmt_int(tree.size)} 个 token，是 {len(reqs)} 个请求输入总数 {fmt_int(total)} 的 "
               f"{tree.size / total:.0%}：共同的前缀只存一份，每个请求自己的后缀各是一片叶子。")
    s = (f"拆过 {tree.n_splits} 次节点：每组的第一个请求进来时整条是一个节点，第二个请求在前缀末尾分叉，"
         "把它拆成\"前缀 + 第一个请求的后缀\"两段")
    extra = tree.n_splits - len(groups)
    if extra > 0:
        s += f"（{len(groups)} 组各 1 次）；另外 {extra} 次是后缀开头碰巧有相同的 token，在那里又分了叉"
    obs.append(s + "。分叉点可以落在任何 token 上，所以节点长短不一。")
    return obs


# =============================================================================
def granularity(toks_list, block_size):
    """一组依次到达的请求：按块（链式哈希，块大小 block_size）和按 token（基数树）各要算多少 token，树拆了几次。"""
    seen, by_block, tree, by_token, lengths = set(), 0, RadixCache(), 0, []
    for toks in toks_list:
        hs = block_hashes(toks, block=block_size)
        hit = 0
        for h in hs:                                   # 从第一块起连续命中几块
            if h not in seen:
                break
            hit += 1
        seen.update(hs)
        by_block += len(toks) - min(hit * block_size, len(toks) - 1)     # 至少算最后一个 token
        by_token += len(toks) - min(tree.match(toks), len(toks) - 1)
        tree.insert(toks)
    lengths = [len(n.key) for _, _, n in tree.nodes()]
    return dict(total=sum(map(len, toks_list)), by_block=by_block, by_token=by_token, splits=tree.n_splits,
                nodes=len(lengths), min_node=min(lengths), max_node=max(lengths),
                block_entries=sum(n_blocks(len(t), block_size) for t in toks_list),
                token_entries=sum(map(len, toks_list)))


SAME_AS_04 = {True: "按块算 = 04 演示 2 的\"实际算\"（同样的块大小）；", False: "按块算：链式块哈希，从第一块起连续命中的整块不算；"}


def demo2_granularity():
    """按 token 匹配比按块匹配多复用多少？代价是什么？"""
    bs = BLOCK_SIZE
    print_header(f"演示 2：按 token 匹配（基数树）和按块匹配（块大小 {bs}）——同样是 04 演示 2 的请求")
    groups = {}
    for name, plen, toks in demo2_requests():
        groups.setdefault(name, (plen, []))[1].append(toks)
    res = {name: dict(granularity(tl, bs), prefix_len=plen, n=len(tl)) for name, (plen, tl) in groups.items()}
    rows = [[name, r["by_block"], r["by_token"], r["by_block"] - r["by_token"], r["splits"],
             f"{r['min_node']}–{r['max_node']}", r["block_entries"], r["token_entries"]] for name, r in res.items()]
    print_table(["前缀", "按块算", "按 token 算", "少算", "拆分", "节点长", "块表项", "token 项"], rows,
                caption=SAME_AS_04[bs == S04.BLOCK_SIZE] + "按 token 算：基数树命中多少 token 就少算多少（都至少算最后一个 token）。"
                        f"拆分、节点长：基数树拆过几次节点、节点有多少个 token。块表项：每 {bs} 个 token 一项；"
                        f"token 项：每个 token 一项（= 总输入；{SGLANG_PAGE}）。")
    print_observations(demo2_observations(res, bs))
    return res


def demo2_observations(res, bs):
    obs = []
    for name, r in res.items():
        gain, tail = r["by_block"] - r["by_token"], r["prefix_len"] % bs
        s = f"{name}：按 token 匹配少算 {gain} 个 token（{r['by_block']} → {r['by_token']}）"
        if gain == 0 and tail == 0:
            obs.append(s + f"——{r['prefix_len']} 正好是 {r['prefix_len'] // bs} 个整块，按块匹配也没有零头，两者一样。")
        elif tail == 0:
            obs.append(s + f"：前缀 {r['prefix_len']} 正好是 {r['prefix_len'] // bs} 个整块，没有零头；这 {gain} 个来自"
                           "后缀开头碰巧相同的 token——按 token 匹配连这种巧合也用得上，按块匹配要凑满一块才行。")
        elif gain == (r["n"] - 1) * tail:
            obs.append(s + f"，正好是后面 {r['n'] - 1} 个请求各自的 {tail} 个零头（{r['prefix_len']} = "
                           f"{r['prefix_len'] // bs} × {bs} + {tail}）：块哈希只认完整的块，基数树连零头也能复用。")
        else:
            extra = gain - (r["n"] - 1) * tail
            obs.append(s + f"：其中 {(r['n'] - 1) * tail} 个是前缀的零头（每个请求 {tail} 个），另外 {extra} 个来自"
                           "后缀开头碰巧相同的 token——按 token 匹配连这种巧合也用得上。")
    big = max(res.values(), key=lambda r: r["token_entries"])
    if big["block_entries"] == big["token_entries"]:
        obs.append(f"块大小是 {bs} 时，按块也是每个 token 一项索引（{big['token_entries']:,} 项），两种办法认出的前缀也一样长："
                   "块小到一个 token，块哈希就和基数树一样细，只是每个 token 都要算一次哈希。")
        return obs
    obs.append(f"代价：节点长度从 {big['min_node']} 到 {big['max_node']} 个 token 不等，分叉在哪就在哪拆节点"
               f"（拆了 {big['splits']} 次）；KV 不能按固定大小的块分配，只能按 token 分页——{SGLANG_PAGE}——"
               f"于是索引表每个 token 一项：{big['token_entries']:,} 项，按块只要 {big['block_entries']:,} 项"
               f"（{big['token_entries'] / big['block_entries']:.1f} 倍）。")
    return obs


# =============================================================================
def chain_breaks(trace):
    """有几个块 id 在不同的请求里跟在不同的前一块后面（链式哈希下应该是 0：同一个 id 的前缀总相同）。"""
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


SAME_WORD = {True: "逐个相同", False: "不同"}


def demo3_trace():
    """在 trace 上，按叶子 LRU 淘汰的基数树和按块 LRU 淘汰的块哈希缓存，命中一样吗？为什么？"""
    caps = S04.CAPACITIES
    tr = S04.read_trace()
    print_header(f"演示 3：04 演示 3 的合成 trace（种子 {S04.TRACE_SEED}）——基数树的叶子 LRU 和块哈希 LRU")
    lru = sweep(tr, caps, ("lru",))
    radix = radix_sweep(tr.iter_blocks(), caps)
    total = int(len(tr.hash_ids))
    same = {c: bool(np.array_equal(lru[("lru", c)], radix[c])) for c in caps}
    rows = [[S04.cap_name(c), f"{lru[('lru', c)].sum() / total:.4f}", f"{radix[c].sum() / total:.4f}",
             SAME_WORD[same[c]]] for c in caps]
    print_table(["容量（块）", "块哈希 LRU", "基数树叶子 LRU", f"{fmt_int(len(tr))} 个请求的命中块数"], rows,
                caption="块哈希 LRU = 04 演示 3 的 LRU 行（kv_cache_sim）；基数树：radix_cache.RadixCache，容量按块数，"
                        "超出时从最久没用的叶子的尾巴删。命中率 = 命中的块 / 全部块访问，保留 4 位小数。")
    breaks = chain_breaks(tr)
    print_observations(demo3_observations(caps, same, breaks))
    return dict(same=same, breaks=breaks, lru={c: float(lru[("lru", c)].sum() / total) for c in caps},
                radix={c: float(radix[c].sum() / total) for c in caps})


def demo3_observations(caps, same, breaks):
    if all(same.values()):
        obs = [f"{len(caps)} 个容量（{'、'.join(S04.cap_name(c) for c in caps)} 块）下，两种缓存给每个请求的命中块数"
               "都逐个相同，不只是命中率相同。"]
    else:
        diff = [S04.cap_name(c) for c in caps if not same[c]]
        obs = [f"{'、'.join(diff)} 块时两者不同——下面的道理有个前提没满足。"]
    obs.append("为什么一样：块哈希的 LRU 插入一个请求时从最后一块往前碰，父块（前一块）总比子块新，所以最久没用的块"
               "一定没有孩子在缓存里；基数树只淘汰叶子、先删叶子的尾巴。两边每一步删掉的是同一块：全局最久没用的块，"
               "总是最久没用的那片叶子的最后一块。说到底：LRU 碰父块不会晚于碰子块，它从不先丢父块。")
    if breaks == 0:
        obs.append("前提：这个 trace 的块 id 是严格的链式哈希——每个 id 前面永远是同一个 id（检查了全部请求，0 个例外），"
                   "所以\"同一个 id\"就等于\"同一段前缀\"，树和哈希表认的是同一组块。")
    else:
        obs.append(f"有 {breaks} 个块 id 跟在不同的前一块后面（不是严格的链式哈希）：哈希表把它们当成一块，"
                   "基数树当成不同的节点，两者可能不同。")
    return obs


# =============================================================================
DEMOS = {1: demo1_tree, 2: demo2_granularity, 3: demo3_trace}


def main(argv=None):
    check_settings()
    S04.check_settings()
    return run_demos(DEMOS, "第 7 讲 · 基数树前缀缓存（SGLang RadixAttention）", argv)


if __name__ == "__main__":
    sys.exit(main())
