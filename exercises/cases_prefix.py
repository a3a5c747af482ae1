"""练习 4–6 的用例（前缀缓存：链式块哈希和前缀匹配、LRU、基数树）：每个练习一个 play 和 groups_N。"""
import numpy as np

from exercises.cases_common import hand, play_call, play_trace
from kv_store.policies import hit_blocks      # 讲义的命中规则：04、04b 的命中率都这样数


# ============================================================ 练习 4：链式块哈希和前缀匹配
def groups_4():
    rng, hashes = np.random.default_rng(4), play_call("block_hashes", "tokens")
    match = play_call("match_prefix", "hashes", "cache")
    tokens = lambda n, form, dtype=np.int64: [   # noqa: E731
        (form(t.tolist()) if form in (list, tuple) else t.astype(dtype), int(bs))
        for bs, t in ((bs, rng.integers(0, 50_000, int(rng.integers(0, 5 * bs + 1)))) for bs in rng.integers(1, 17, n))]

    def lookups(n, form, cache):       # 哈希（或块号）的序列，和一个装着其中大部分、再加两个别的的缓存
        name, out = (lambda i: f"h{i}") if form is list else int, []
        for ids, keep, extra in ((rng.permutation(12)[:rng.integers(0, 7)], rng.random(6), rng.integers(0, 12, 2))
                                 for _ in range(n)):
            inside = [name(i) for i, k in zip(ids, keep) if k < 0.75] + [name(i) for i in extra]
            out.append((form(name(i) for i in ids), set(inside) if cache is set else dict.fromkeys(inside, 0)))
        return out
    stop = "第一次没命中就停：前面缺了一块，后面的块在缓存里也用不上"
    return hand(hashes,
                ("一个整块", "一块的哈希：SHA-256(空字节串 ‖ 这一块 token 的 int64 字节)，十六进制的前 12 位", ([1, 2, 3, 4], 4)),
                ("结尾不满一块", "只有完整的块有哈希：结尾不满一块的 token 不算", ([1, 2, 3, 4, 5, 6], 4)),
                ("两块：链式", "第 2 块的哈希要把第 1 块的完整哈希（32 字节的 digest）接在前面一起算", ([1, 2, 3, 4, 5, 6, 7, 8], 4)),
                ("int32 的 numpy 数组", "tokens 的 dtype 不一定是 int64：不管传进来的是什么，都按 int64 的字节算",
                 (np.arange(1, 9, dtype=np.int32), 4))) + hand(
        match,
        ("全部命中", "数从第一块起连续有几个哈希在 cache 里", (["a", "b"], {"a": 0, "b": 1})),
        ("中间断了", stop, (["a", "b", "c", "d"], {"a", "b", "d"})),
        ("块号的 tuple 和 set", "hashes 也可能是块号的 tuple，cache 是集合：只用 h in cache", ((5, 8, 2), {5, 8}))) + [
        ("随机输入", "tokens 是 list、tuple、int64 的数组（块大小 1–16）", "对照上面手算的例子",
         tokens(40, list) + tokens(30, tuple) + tokens(30, np.ndarray), hashes),
        ("随机输入", "tokens 是 int32 的 numpy 数组", "不管 tokens 是什么 dtype，都按 int64 的字节算",
         tokens(30, np.ndarray, np.int32), hashes),
        ("随机输入", "hashes 是字符串的 list，cache 是 dict", "对照上面手算的例子", lookups(60, list, dict), match),
        ("随机输入", "hashes 是块号的 tuple，cache 是 set", "只用 h in cache", lookups(60, tuple, set), match),
        ("讲义的工作量", "合成 trace 的前 2,000 个请求", stop, [(   # 7 的倍数的块号不进缓存（像被淘汰了）：后面的在、前面的不在
            "match_prefix(块号的 tuple, cache)，再把块号放进 cache（7 的倍数除外）", 2000, lambda impl: (impl, set()),
            lambda st, r: (st[0]["match_prefix"](r.blocks, st[1]), st[1].update(b for b in r.blocks if b % 7))[0])],
         play_trace)]


# ============================================================ 练习 5：LRU
def play_cache(impl, inp):
    cap, ops = inp
    yield f"c = LRUCache({cap})"
    c = impl["LRUCache"](cap)
    for op, blocks in ops:
        yield f"c.{op}({blocks})" if blocks else f"c.{op}()"
        got = getattr(c, op)(blocks) if blocks else c.evict()
        yield {"返回值": got, "缓存里的块": sorted(c.entries), "调用之后的 blocks": blocks}


def groups_5():
    rng, lru = np.random.default_rng(5), (lambda cap, *ops: (cap, list(ops)))
    scripts = lambda n, p: [(int(rng.integers(1, 9)), [   # noqa: E731   容量 1–8，块号 0–11，一次 1–5 块
        ("match" if r < p else "insert", rng.permutation(12)[:rng.integers(1, 6)].tolist()) for r in rng.random(30)])
        for _ in range(n)]
    on_trace = [(f"c = LRUCache({cap})，hit_blocks([请求], c)：c.insert(块号)，它先 match", 2000, lambda impl, cap=cap:
                 impl["LRUCache"](cap), lambda c, r: hit_blocks([r], c)[0]) for cap in (300, 3000)]
    return hand(play_cache,
                ("能命中", "容量 3 放得下 3 块：不在缓存里的块，touch 时放进来", lru(3, ("insert", [1, 2, 3]), ("match", [1, 2, 9]))),
                ("超出容量", "超出容量就淘汰最久没碰过的块（insert 从后往前碰：3 最旧）", lru(3, ("insert", [1, 2, 3]), ("insert", [4]))),
                ("evict 的返回值", "evict 删掉一块，返回它的块号", lru(3, ("insert", [1, 2]), ("evict", None))),
                ("碰过的块变最新", "已经在缓存里的块又被碰了一次，也要变成最新的", lru(2, *[("insert", [b]) for b in (1, 2, 1, 3)])),
                ("match 不算使用", "match 只读：查一下命中几块，不改谁新谁旧",
                 lru(2, ("insert", [1]), ("insert", [2]), ("match", [1]), ("insert", [3])))) + [
        ("随机输入", "只有 insert（容量 1–8）", "对照上面手算的例子", scripts(30, 0), play_cache),
        ("随机输入", "insert 和 match 混着", "match 只读：不改谁新谁旧", scripts(30, 0.4), play_cache),
        ("讲义的工作量", "合成 trace 的前 2,000 个请求（容量 300、3,000 块）", "对照上面的小例子", on_trace, play_trace)]


# ============================================================ 练习 6：基数树
def tree(node, path="根"):
    """树 → {从根出发的路径 '根→[1 2]→[3 4]': (时刻, ref)}：和孩子的先后无关。"""
    out = {}
    for c in node.children.values():
        out[f"{path}→[{' '.join(map(str, c.key))}]"] = (c.last_access, c.ref)
        out.update(tree(c, f"{path}→[{' '.join(map(str, c.key))}]"))
    return out


def play_radix(impl, inp):
    cap, rule, ops = inp
    yield f"t = RadixCache({cap}, rule={rule!r})"
    t = impl["RadixCache"](cap, rule)
    for op, seq, lock in ops:
        yield f"t.{op}({seq}, lock=True)" if lock else f"t.{op}({seq})"
        got = t.insert(seq, lock=lock) if op == "insert" else t.match(seq)
        now = tree(t.root)
        yield {"树里的节点": sorted(now), f"{op} 的返回值": got, "size": t.size, "n_splits": t.n_splits,
               "各节点的时刻 last_access": {p: a for p, (a, r) in now.items()},
               "各节点的 ref": {p: r for p, (a, r) in now.items()}, "调用之后的 seq": seq}


def random_radix(rng, n, caps, rules, lock_p, vocab=4):
    out = []
    for _ in range(n):
        bases, ops = [rng.integers(0, vocab, int(rng.integers(3, 9))).tolist() for _ in range(3)], []
        for b, r in zip(rng.integers(0, 3, 14), rng.random(14)):      # 几条序列的前缀、整段、加上随机的尾巴
            seq = (bases[b][:int(rng.integers(1, len(bases[b]) + 1))] if r < 0.6 else list(bases[b])) + (
                rng.integers(0, vocab, int(rng.integers(1, 4))).tolist() if r > 0.7 else [])
            ops.append(("match", seq, False) if rng.random() < 0.3 else ("insert", seq, bool(rng.random() < lock_p)))
        out.append((rng.choice(caps), str(rng.choice(rules)), ops))
    return out


def groups_6():
    rng = np.random.default_rng(6)
    ins = lambda *seqs, cap=None, lock=False: (cap, "sglang", [("insert", s, lock) for s in seqs])   # noqa: E731
    return hand(play_radix,
                ("[1 2 3 4] 再 [1 2 9]", "分叉点在节点中间：把节点拆成两段，剩下的挂成一片新叶子", ins([1, 2, 3, 4], [1, 2, 9])),
                ("match 停在节点中间", "match 可以停在一个节点的中间：孩子的 key 只有前一部分相同，也算上那部分",
                 (None, "sglang", [("insert", [1, 2, 3, 4], 0)] + [("match", s, 0) for s in ([1, 2, 5], [1, 2, 3, 4, 5],
                                                                                             [7], [])])),
                ("插入已有序列的前缀", "seq 走完了就停：只拆节点，不长新叶子", ins([1, 2, 3, 4], [1, 2])),
                ("同一个序列插两次", "整段都在树里：不拆也不长叶子，走过的节点都刚用过", ins([3, 1, 4, 1, 5], [3, 1, 4, 1, 5])),
                ("再拆一次拆出来的后半段", "拆开以后后半段挂在新的前半段下面，它记着的父节点也要跟着变：以后再拆它，"
                 "新节点要接回它真正的父节点下面", ins([1, 2, 3, 4], [1, 2, 9], [1, 2, 3, 7])),
                ("拆一个有孩子的节点", "拆一个有孩子的节点：原来的孩子一个不少，跟着后半段走", ins([1, 2, 3, 4], [1, 2, 3, 5], [1, 9])),
                ("lock=True", "lock=True：走过的每个节点和新叶子都多一个锁", ins([1, 2, 3, 4], [1, 2, 9], [1, 2, 3], lock=True)),
                ("容量 4", "超出容量时淘汰最久没用的叶子：新叶子要让淘汰找得到", ins([1, 2, 3], [4, 5], [1, 2, 3, 6], cap=4))) + [
        ("随机输入", "容量无限，序列反复出现，有时 lock=True", "对照上面手算的例子", random_radix(rng, 60, [None], ["sglang"], 0.3),
         play_radix),
        ("随机输入", "容量 3–13：超出就淘汰", "超出容量时淘汰最久没用的叶子：时刻、size 都要记对",
         random_radix(rng, 40, range(3, 14), ["sglang", "trim"], 0.2), play_radix),
        ("讲义的工作量", "合成 trace 的前 2,000 个请求按块建树（容量 1,000 块）", "对照上面的小例子", [(
            "t = RadixCache(1000)，hit_blocks([请求], t)：t.insert(块号的 tuple)，用它返回的命中长度", 2000,
            lambda impl: impl["RadixCache"](1000), lambda t, r: hit_blocks([r], t)[0])], play_trace)]
