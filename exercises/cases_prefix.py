"""练习 4–6 的用例（前缀缓存：链式块哈希、LRU、基数树；选做的 S3-FIFO 和基数树淘汰）。

先是能手算的小例子，再和参考实现逐个比：随机输入（块大小 1、3、5、16，list、tuple 和 numpy 数组），
只 match 不 insert 的 LRU 脚本，容量很小、序列反复出现的基数树脚本（整段命中、拆节点、淘汰都会发生），
合成 trace 的一段。树按"从根出发的每条路径"比（dict 比较，和孩子的先后无关），不按打印的顺序。
"""
import hashlib

import numpy as np

from exercises.checking import CLOCK, Fail, call_text, equal, mine, need, ref, same, show, student
from exercises.mine import PROBES, lecture_module, reference

BLOCK_SIZES = (1, 3, 5, 16)


def _trace():
    """合成 trace（make_trace 种子 0）只造一次（约 0.3 秒）；用例只用它的前几千个请求。"""
    if not _TRACE:
        _TRACE.append(lecture_module("traces").make_trace(0))
    return _TRACE[0]


_TRACE = []


# ============================================================ 练习 4：链式块哈希和前缀匹配
SYS_PROMPT = [101, 7, 7, 3, 55, 2, 9, 14]         # 04 演示 1 的两块长的"系统提示"（块大小 4）


def _hash_twins(tokens, block):
    """常见的错误写法算出来的哈希 → 提示（按学生返回的值找原因）。"""
    toks = list(np.asarray(tokens).tolist()) if len(tokens) else []
    full, ceil = len(toks) // block, -(-len(toks) // block)

    def chain(n, step):
        out, prev = [], b""
        for i in range(n):
            prev, h = step(prev, np.asarray(toks[i * block:(i + 1) * block], dtype=np.int64).tobytes())
            out.append(h)
        return out

    def good(prev, chunk):
        d = hashlib.sha256(prev + chunk).digest()
        return d, d.hex()[:12]
    return [
        ([hashlib.sha256(np.asarray(toks[i * block:(i + 1) * block], dtype=np.int64).tobytes()).hexdigest()[:12]
          for i in range(full)], "链式：第 i 块的哈希要把前一块的 digest 也算进去（sha256(前一块的 digest + 这一块)）"),
        (chain(ceil, good), "结尾不满一块的 token 不算哈希：块数 = len(tokens) // block"),
        (chain(full, lambda p, c: (hashlib.sha256(p + c).hexdigest().encode(), hashlib.sha256(p + c).hexdigest()[:12])),
         "接着往下链的是 32 字节的 digest()，不是十六进制字符串"),
        ([h for h in chain(full, lambda p, c: (hashlib.sha256(p + c).digest(), hashlib.sha256(p + c).hexdigest()))],
         "只要十六进制的前 12 位：.hex()[:12]"),
        (chain(full, lambda p, c: (hashlib.sha256(p + c).digest()[:12], hashlib.sha256(p + c).hexdigest()[:12])),
         "链的是完整的 32 字节 digest；只有返回的字符串才截成 12 位"),
        (chain(full, lambda p, c: (hashlib.sha256(p + c).digest()[:6], hashlib.sha256(p + c).hexdigest()[:12])),
         "链的是完整的 32 字节 digest，不是截短以后的 12 位十六进制（6 字节）"),
        (chain(full, lambda p, c: good(p, np.frombuffer(c, dtype=np.int64).astype(np.int32).tobytes())),
         "token 的字节要用 np.int64：np.asarray(块, dtype=np.int64).tobytes()（int32 的字节不一样）"),
        (chain(full + (len(toks) % block == 0 and full > 0), good) if len(toks) % block == 0 and toks else None,
         "块数 = len(tokens) // block：正好是整数倍时，后面没有一个空块"),
    ]


def _hash_check(m, tokens, block, hint):
    given = call_text("block_hashes", (tokens, block))
    got = student(m["block_hashes"], "block_hashes", tokens, block, given=given, what=("tokens", "block"))
    want = ref(lambda: reference(4)["block_hashes"](tokens, block))
    if not isinstance(got, (list, tuple)) or not equal(list(got), want):
        why = hint
        if isinstance(got, (list, tuple)):
            for twin, twin_why in _hash_twins(tokens, block):
                if twin is not None and equal(list(got), twin):
                    why = twin_why
                    break
            if any(not isinstance(h, str) for h in got):
                why = "每个哈希是一个字符串：digest 的 .hex()[:12]"
        raise Fail(given, show(want), show(got), why)


def _case_tail(m):
    toks = list(range(1, 11))
    given = call_text("block_hashes", (toks, 4))
    got = student(m["block_hashes"], "block_hashes", toks, 4, given=given, what=("tokens", "block"))
    same(len(got), 2, given + " 的个数", "10 个 token、块大小 4：两个完整块，结尾 2 个 token 不算哈希")
    if not all(isinstance(h, str) and len(h) == 12 for h in got):
        raise Fail(given, "两个 12 位的十六进制字符串", show(got), "返回 digest 的 .hex()[:12]")


def _case_prefix_same(m):
    a = SYS_PROMPT + [21, 22, 23, 24, 25, 26, 27, 28]
    b = SYS_PROMPT + [21, 22, 23, 24, 31, 32, 33, 34]
    given = f"{call_text('block_hashes', (a, 4))} 和 {call_text('block_hashes', (b, 4))}"
    ha = student(m["block_hashes"], "block_hashes", a, 4, given=given, what=("tokens", "block"))
    hb = student(m["block_hashes"], "block_hashes", b, 4, given=given, what=("tokens", "block"))
    same([x == y for x, y in zip(ha, hb)], [True, True, True, False], given + "：逐块是否相同",
         "前 3 块 token 相同 → 前 3 个哈希相同；第 4 块不同")


def _case_chain(m):
    a = [1, 2, 3, 4, 5, 6, 7, 8]
    c = [9, 2, 3, 4, 5, 6, 7, 8]
    given = f"{call_text('block_hashes', (a, 4))} 和 {call_text('block_hashes', (c, 4))}"
    ha = student(m["block_hashes"], "block_hashes", a, 4, given=given, what=("tokens", "block"))
    hc = student(m["block_hashes"], "block_hashes", c, 4, given=given, what=("tokens", "block"))
    same([x == y for x, y in zip(ha, hc)], [False, False], given + "：逐块是否相同",
         "第 2 块的 token 虽然一样，但第 1 块不同：链式哈希要把前一块的哈希算进去（sha256(前一块的 digest + 这一块)）")


def _case_exact(m):
    rng = np.random.default_rng(0)
    for toks, block in ((SYS_PROMPT + [21, 22, 23, 24, 25], 4), (list(range(40)), 16),
                        (rng.integers(0, 32000, 40).tolist(), 8)):
        _hash_check(m, toks, block, "哈希要和讲义的一模一样：SHA-256(前一块的 32 字节 digest ‖ np.int64 的 token 字节)，"
                                    "第 0 块前面是 b\"\"，取 .hex()[:12]")


def _case_hash_random(m):
    """块大小 1、3、5、16；长度 0、不满一块、正好一块、正好几块、多出 1 个；tokens 是 list、tuple、numpy 数组。"""
    rng = np.random.default_rng(40)
    for bs in BLOCK_SIZES:
        for n in sorted({0, 1, bs - 1, bs, 2 * bs, 3 * bs + 1, 4 * bs}):
            toks = rng.integers(0, 50_000, n)
            for form in (toks.tolist(), tuple(toks.tolist()), toks):
                _hash_check(m, form, bs, "和讲义的哈希不同：对照上面几个手算的用例")


def _match_twins(hashes, cache):
    hits = [h in cache for h in hashes]
    n = next((i for i, x in enumerate(hits) if not x), len(hits))
    return [(sum(hits), "第一次没命中就停：中间断了，后面的块即使还在缓存里也用不上"),
            (min(n + 1, len(hits)), "数的是命中的块：先判断 h in cache，命中了再加 1"),
            (n - 1, "全部命中时也要算上最后一块")]


def _match_check(m, hashes, cache, hint):
    given = call_text("match_prefix", (hashes, cache))
    got = student(m["match_prefix"], "match_prefix", hashes, cache, given=given, what=("hashes", "cache"))
    want = ref(lambda: reference(4)["match_prefix"](hashes, cache))
    if isinstance(got, bool) or not isinstance(got, (int, np.integer)) or got != want:
        why = hint
        for twin, twin_why in _match_twins(hashes, cache):
            if got == twin and twin != want:
                why = twin_why
                break
        raise Fail(given, show(want), show(got), why)


def _match_case(hashes, cache, hint):
    return lambda m: _match_check(m, hashes, cache, hint)


def _case_match_random(m):
    """随机的哈希列表和缓存：缓存是 dict 或 set；哈希是字符串，或块号（tuple、numpy 数组，像 trace 里那样）。"""
    rng = np.random.default_rng(41)
    for trial in range(40):
        n = int(rng.integers(0, 7))
        ids = rng.permutation(12)[:n]
        inside = {int(i) for i in ids if rng.random() < 0.7} | {int(x) for x in rng.integers(0, 12, 2)}
        names = [f"h{int(i)}" for i in ids]
        for hashes, cache in ((names, {f"h{i}": i for i in inside}), (names, {f"h{i}" for i in inside}),
                              (tuple(int(i) for i in ids), set(inside)), (ids.astype(np.int64), dict.fromkeys(inside))):
            _match_check(m, hashes, cache, "从第一块起连续命中几块：第一次没命中就停")


def _case_requests(m):
    """几组共享前缀的请求依次到达：每个请求先按块哈希匹配缓存，再把自己的块登记进去；命中块数和参考相同。"""
    need(PROBES, m, "block_hashes", "match_prefix")
    r = reference(4)
    rng = np.random.default_rng(3)
    prefixes = [rng.integers(0, 1000, n).tolist() for n in (13, 26, 5)]
    cache_ref, cache_got, want, got, reqs = {}, {}, [], [], []
    for i in range(24):
        toks = prefixes[i % 3] + rng.integers(0, 1000, int(rng.integers(1, 12))).tolist()
        if i % 5 == 4:
            toks[0] += 1                               # 开头改了一个 token：一块也命中不了
        reqs.append(toks)
        hr = ref(lambda: r["block_hashes"](toks, 4))
        want.append(ref(lambda: r["match_prefix"](hr, cache_ref)))
        hg = student(m["block_hashes"], "block_hashes", toks, 4)
        got.append(student(m["match_prefix"], "match_prefix", hg, cache_got))
        cache_ref.update({h: 0 for h in hr})
        cache_got.update({h: 0 for h in hg})
    same(got, want, "24 个请求（3 种前缀，长 13、26、5 个 token，后面接随机后缀；每 5 个里有一个改了开头），"
                    "块大小 4，cache = {} 起步，每个请求 match_prefix(block_hashes(tokens, 4), cache) 再登记：每个请求命中的块数",
         "先确认前面几个小用例都过了")


def _case_trace(m):
    """合成 trace（种子 0）的前 3,000 个请求，缓存是容量 1,500 块的"先淘汰靠前的块"（04 的对照策略）：
    它先拆掉前缀的父块，于是有请求"后面的块还在、前面的不在"——正好考 match_prefix 会不会停。"""
    need(PROBES, m, "match_prefix")
    eviction = lecture_module("eviction")
    refm = reference(4)["match_prefix"]
    tr = _trace()
    cache = eviction.LengthAwareEarlyCache(1500)
    for i in range(3000):
        blocks = tr.blocks(i)
        want = ref(lambda: refm(blocks, cache.entries))
        given = (f"合成 trace（make_trace 种子 0）第 {i} 个请求的 {len(blocks)} 块 {show(blocks, 200)}；缓存里有其中 "
                 f"{cache.count(blocks)} 块（先淘汰靠前的块，容量 1,500）；match_prefix(块号, cache.entries)")
        got = mine(given, lambda: m["match_prefix"](blocks, cache.entries))
        if got != want:
            raise Fail(given, show(want), show(got), "从第一块起连续命中几块：第一次没命中就停，后面的块在不在都不算")
        ref(lambda: cache.insert(blocks))


CASES_4 = [
    ("block_hashes：结尾不满一块的 token 不算哈希", _case_tail),
    ("block_hashes：开头相同的块，哈希相同", _case_prefix_same),
    ("block_hashes：链式——前面一块不同，后面的哈希全都不同", _case_chain),
    ("block_hashes：和讲义的哈希逐个相同（04 的表里打印的就是它）", _case_exact),
    ("block_hashes：随机的 tokens（块大小 1、3、5、16；list、tuple、numpy 数组）和参考实现相同", _case_hash_random),
    ("match_prefix：全部命中", _match_case(["a", "b"], {"a": 0, "b": 1}, "两个哈希都在缓存里")),
    ("match_prefix：第一块没命中 → 0，后面的块在缓存里也不算",
     _match_case(["a", "b", "c"], {"b": 1, "c": 2}, "第一次没命中就停：中间断了，后面的 KV 用不上")),
    ("match_prefix：中间断了", _match_case(["a", "b", "c", "d"], {"a", "b", "d"}, "第一次没命中就停")),
    ("match_prefix：空请求、空缓存", _match_case([], {}, "没有块：命中 0 块")),
    ("match_prefix：随机的哈希和缓存（dict、set；字符串、块号、numpy 数组）和参考实现相同", _case_match_random),
    ("共享前缀的 24 个请求：每个请求命中的块数和参考实现相同", _case_requests),
    ("合成 trace 的 3,000 个请求（缓存先淘汰父块，留下缺了父块的子块）：命中块数和参考实现相同", _case_trace),
]


# ============================================================ 练习 5：LRU（和选做的 S3-FIFO）
def _new_cache(cls, capacity, given, exactly_one=True):
    """学生的缓存，evict 外面包一层检查：LRU 的 evict 从 entries 里恰好删掉一块（一块不删，BlockCache.insert
    会死循环）；S3-FIFO 的至少删一块（从小队列升进主队列时，主队列可能也要腾一块）。"""
    c = mine(given, lambda: cls(capacity))
    evict = c.evict

    def guarded():
        before = len(c.entries)
        out = evict()
        gone = before - len(c.entries)
        if gone < 1 or (exactly_one and gone != 1):
            raise Fail(given, "evict() 之后 entries 少一块", f"从 {before} 块变成 {len(c.entries)} 块",
                       "evict 要从 self.entries 里删掉恰好一块（popitem）并返回它")
        return out
    c.evict = guarded
    return c


def _lru_twins():
    """常见的错误写法（参考 LRU 的子类，只改错的那一处）→ 提示。"""
    base = reference(5)["LRUCache"]
    bc = lecture_module("eviction").BlockCache

    class Fifo(base):
        insert = bc.insert

        def touch(self, block, pos):
            self.entries.setdefault(block, None)

    class Newest(base):
        insert = bc.insert

        def evict(self):
            return self.entries.popitem(last=True)[0]

    class MatchRefresh(base):
        def match(self, blocks):
            n = super().match(blocks)
            for b in reversed(list(blocks)[:n]):
                self.entries.move_to_end(b)
            return n

    class Forward(base):
        def insert(self, blocks):
            for pos, b in enumerate(blocks):
                self.touch(b, pos)
            while len(self.entries) > self.capacity:
                self.evict()
    return [(Fifo, "块已经在缓存里时 touch 要把它挪到最新的一端（move_to_end）：不然命中过的块照样按进来的先后被淘汰（成了 FIFO）"),
            (Newest, "evict 删掉的是刚用过的块：要删最久没用的——看你 touch 把刚用过的放在哪一端，evict 就从另一端删"),
            (MatchRefresh, "match 只读：查一下命中几块不算一次使用，不改 entries 的顺序（只有 insert 里的 touch 刷新）"),
            (Forward, "insert 从请求的最后一块往前 touch（BlockCache.insert 就是这样）：父块最后被碰、最新，先淘汰的是尾巴")]


def _run_cache_script(c, ops, call):
    """ops：[("insert", 块列表) / ("match", 块列表)]；返回每步之后的 (返回值, 缓存里的块)。"""
    out = []
    for op, blocks in ops:
        if op == "insert":
            res = call(lambda blocks=blocks: c.insert(list(blocks)))
        else:
            res = call(lambda blocks=blocks: c.match(list(blocks)))
        out.append((res, sorted(c.entries)))
    return out


def _ops_text(ops):
    return "；".join(f"{op}({blocks})" for op, blocks in ops)


def _cache_random(m, name, caps, n_scripts, n_ops, universe, seed, hint_twins=True):
    cls, ref_cls = m[name], reference(5)[name]
    rng = np.random.default_rng(seed)
    for cap in caps:
        for trial in range(n_scripts):
            ops = []
            for _ in range(n_ops):
                blocks = rng.permutation(universe)[:int(rng.integers(1, 6))].tolist()
                ops.append(("match" if rng.random() < 0.4 else "insert", blocks))
            want = ref(lambda: _run_cache_script(ref_cls(cap), ops, lambda f: f()))
            step = [0]

            def call(f):
                step[0] += 1
                return mine(f"c = {name}({cap})；" + _ops_text(ops[:step[0]]), f)
            c = _new_cache(cls, cap, f"c = {name}({cap})", exactly_one=name == "LRUCache")
            got = _run_cache_script(c, ops, call)
            for k, (w, g) in enumerate(zip(want, got)):
                if w != g:
                    given = f"c = {name}({cap})；" + _ops_text(ops[:k + 1])
                    hint = "和参考实现不同：对照上面几个手算的用例"
                    if hint_twins:
                        for twin, why in _lru_twins():
                            if _run_cache_script(twin(cap), ops[:k + 1], lambda f: f()) == got[:k + 1]:
                                hint = why
                                break
                    raise Fail(given + " 之后（返回值, sorted(c.entries)）", show(w), show(g), hint)


def _lru_ops(capacity, ops, expected, hint, what="match"):
    """ops：要 insert 的请求列表；最后比较 match(what 的请求) 或缓存里的块（集合，和 entries 的排法无关）。"""
    def case(m):
        given = f"c = LRUCache({capacity})；" + "；".join(f"insert({o})" for o in ops)
        def run(c, call):
            for o in ops:
                call(lambda o=o: c.insert(list(o)))
            if what == "entries":
                return sorted(c.entries)
            return call(lambda: c.match(list(what)))
        got = run(_new_cache(m["LRUCache"], capacity, given), lambda f: mine(given, f))
        if not equal(got, expected):
            why = hint
            for twin, twin_why in _lru_twins():          # 哪一种常见的错法正好算出这个值
                if run(twin(capacity), lambda f: f()) == got:
                    why = twin_why
                    break
            label = " 之后缓存里的块 sorted(c.entries)" if what == "entries" else f"；match({what})"
            raise Fail(given + label, show(expected), show(got), why)
    return case


def _case_evict_returns(m):
    given = "c = LRUCache(3)；insert([1, 2, 3])；touch(4, 0)；evict()"
    c = _new_cache(m["LRUCache"], 3, given)
    mine(given, lambda: c.insert([1, 2, 3]))
    mine(given, lambda: c.touch(4, 0))
    got = mine(given, c.evict)
    same((got, sorted(c.entries)), (3, [1, 2, 4]), given + " 的返回值和剩下的块",
         "insert 从最后一块往前 touch，所以块 3 最旧；evict 删掉它并返回 3")


def _case_match_no_refresh(m):
    given = "c = LRUCache(2)；insert([1])；insert([2])；match([1])；insert([3])；match([1])、match([2])"
    c = _new_cache(m["LRUCache"], 2, given)
    for blocks in ([1], [2]):
        mine(given, lambda b=blocks: c.insert(b))
    mine(given, lambda: c.match([1]))
    mine(given, lambda: c.insert([3]))
    got = mine(given, lambda: (c.match([1]), c.match([2])))
    same(got, (0, 1), given, "match 只读：查一下不算使用，块 1 仍然最旧，insert([3]) 时淘汰的是它")


def _case_lru_random(m):
    """容量 1、2、3、5、8，块号 0–11：insert 和只 match 不 insert 混在一起的随机脚本，每一步都和参考相同。"""
    _cache_random(m, "LRUCache", (1, 2, 3, 5, 8), 5, 30, 12, 50)


def _case_cache_trace(m, name, n_requests, caps):
    cls, ref_cls = m[name], reference(5)[name]
    tr = _trace()
    for cap in caps:
        given = f"合成 trace（make_trace 种子 0）的前 {n_requests:,} 个请求，c = {name}({cap:,})，每个请求先 match 再 insert"
        c, r = _new_cache(cls, cap, given, exactly_one=name == "LRUCache"), ref_cls(cap)
        want = ref(lambda: [(r.match(tr.blocks(i)), r.insert(tr.blocks(i)))[0] for i in range(n_requests)])
        for i in range(n_requests):
            blocks = tr.blocks(i)
            got = mine(given, lambda: c.match(blocks))
            if got != want[i]:
                raise Fail(f"{given}：第 {i} 个请求（{len(blocks)} 块）的 match", show(want[i]), show(got),
                           "前面的小用例都过了吗？再检查命中时有没有把块挪到最新的一端")
            mine(given, lambda: c.insert(blocks))


def _case_lru_trace(m):
    """合成 trace 的前 4,000 个请求，容量 300 和 3,000 块：每个请求的命中块数。"""
    need(PROBES, m, "LRUCache")
    _case_cache_trace(m, "LRUCache", 4000, (300, 3000))


def _stretch(name, fn):
    """选做的用例：学生还没写这个名字 → NotImplementedError（check.py 记作"选做·还没写"，不算没通过）。"""
    def case(m):
        if name not in m:
            raise NotImplementedError(name)
        fn(m)
    return case


def _case_s3fifo_hand(m):
    given = ("c = S3FIFOCache(10)；for b in range(10): insert([b])；insert([0])；insert([0])；insert([10])；"
             "块 0 在主队列、块 1 被淘汰进幽灵队列")
    c = _new_cache(m["S3FIFOCache"], 10, given, exactly_one=False)
    for b in list(range(10)) + [0, 0, 10]:
        mine(given, lambda b=b: c.insert([b]))
    same((sorted(c.entries), 0 in c.main, 1 in c.ghost), (sorted([0] + list(range(2, 11))), True, True), given,
         "超出容量：小队列的队尾是块 0，freq = 2 > 1 → 升进主队列；下一个块 1 没再被访问 → 踢出，记进幽灵队列")


def _case_s3fifo_random(m):
    _cache_random(m, "S3FIFOCache", (10, 20), 4, 60, 40, 51, hint_twins=False)


def _case_s3fifo_trace(m):
    _case_cache_trace(m, "S3FIFOCache", 2000, (300,))


CASES_5 = [
    ("容量 3：[1 2 3] 之后，[1 2 9] 命中 2 块", _lru_ops(3, [[1, 2, 3]], 2, "touch 要把不在缓存里的块加进 entries",
                                              what=[1, 2, 9])),
    ("超出容量：淘汰最久没用的块（insert 从尾往前碰，块 3 最旧）",
     _lru_ops(3, [[1, 2, 3], [4]], [1, 2, 4], "evict 要删最久没用的块：看你 touch 把刚用过的放在哪一端，"
              "evict 就从另一端删",
              what="entries")),
    ("命中过的块变成最新的：容量 2，1 2 1 3 之后 1 还在",
     _lru_ops(2, [[1], [2], [1], [3]], 1, "块已经在缓存里时 touch 要把它挪到最新的一端（move_to_end），"
              "不然就成了 FIFO", what=[1])),
    ("只 match 不 insert：不刷新（查一下不算使用）", _case_match_no_refresh),
    ("evict 返回被淘汰的块，只删一块", _case_evict_returns),
    ("随机脚本（容量 1–8；insert 和只 match 混着）：每一步的返回值和缓存里的块都和参考实现相同", _case_lru_random),
    ("合成 trace 的前 4,000 个请求，容量 300 和 3,000 块：每个请求的命中块数和参考实现相同", _case_lru_trace),
    ("选做 · S3-FIFO：讲义 docstring 里的例子", _stretch("S3FIFOCache", _case_s3fifo_hand)),
    ("选做 · S3-FIFO：随机脚本（容量 10、20）每一步都和参考实现相同", _stretch("S3FIFOCache", _case_s3fifo_random)),
    ("选做 · S3-FIFO：合成 trace 的前 2,000 个请求（容量 300）命中块数和参考实现相同",
     _stretch("S3FIFOCache", _case_s3fifo_trace)),
]


# ============================================================ 练习 6：基数树
def tree_map(node):
    """树 → {第一个 token: (key, last_access, ref, 子树)}：dict 比较和孩子的先后无关（树一样就相等）。"""
    return {int(first): (tuple(int(x) for x in c.key), c.last_access, c.ref, tree_map(c))
            for first, c in node.children.items()}


def _tree_diff(want, got, path=()):
    """第一处不同：(父节点的路径, 孩子的第一个 token, 哪一项, 应当, 你的)。哪一项："孩子"（有没有这个孩子）、
    "key"、"last_access"、"ref"。路径是从根往下的 key 的列表（这些节点两边相同）。"""
    for first in sorted(set(want) | set(got)):
        if first not in got:
            return path, first, "孩子", f"有以 {first} 开头的孩子 {list(want[first][0])}", "没有"
        if first not in want:
            return path, first, "孩子", f"没有以 {first} 开头的孩子", f"有 {list(got[first][0])}"
        (wk, wt, wr, wc), (gk, gt, gr, gc) = want[first], got[first]
        for label, a, b in (("key", list(wk), list(gk)), ("last_access", wt, gt), ("ref", wr, gr)):
            if a != b:
                return path, first, label, a, b
        sub = _tree_diff(wc, gc, path + (list(wk),))
        if sub:
            return sub
    return None


def _where(path, first, field):
    """'根的孩子'、'节点 [1, 2] 下面以 3 开头的孩子的 key'：学生在自己的树里照着这条路找得到。"""
    parent = f"节点 {' → '.join(str(k) for k in path)} " if path else "根"
    if field == "孩子":
        return f"{parent}的孩子"
    return f"{parent}下面以 {first} 开头的孩子的 {field}"


def _node_at(tree, path, first):
    """学生的树里，沿 path（每段 key）走下去、再以 first 开头的那个孩子；走不通时 None。"""
    node = tree.root
    for key in path:
        node = node.children.get(key[0])
        if node is None:
            return None
    return node.children.get(first)


def _tree_hint(diff, capacity, want_map, tree):
    """按第一处不同找提示。want_map：参考的 tree_map；tree：学生的树（看它的节点和淘汰队列 _leaves）。"""
    path, first, field, a, b = diff
    if field == "key":
        below = want_map
        for key in path:
            below = below[key[0]][3]
        tail = below[first][3].get(b[0]) if b else None          # 参考里 child 下面以 b[0] 开头的孩子
        if b and b[0] != first and tail is not None and list(tail[0]) == b:
            return (f"拆开以后要把 head 接回原来的位置：parent.children[key[0]] = head——现在父节点的 children[{first}] "
                    f"还指着拆出来的尾巴 {b}")
        if len(b) < len(a) and a[len(a) - len(b):] == b:
            return (f"拆出来的 child 的 key 少了开头的 {a[:len(a) - len(b)]}：head = key[:j]、child.key = key[j:]"
                    "（从第 j 个起，不是 j + 1），两段接起来正好是原来的 key")
        if capacity is not None:
            return ("淘汰：超出容量时先挂上新叶子、_push_leaf，再 self._evict(self.size - self.capacity)（按 "
                    "last_access 从旧到新删叶子）；或者拆节点的位置不对（j = key 和 seq 从头起相同的个数）")
        return "拆节点的位置：j = key 和 seq 从头起相同的个数，head = key[:j]、child 留 key[j:]"
    if field == "孩子":
        extra = _node_at(tree, path, first) if b != "没有" else None
        if extra is not None and capacity is not None:
            queued = any(entry[-1] is extra for entry in getattr(tree, "_leaves", ()) if isinstance(entry, tuple))
            if not extra.children and not queued:
                return (f"超出容量时叶子 {b[2:]} 没被淘汰：它不在淘汰队列 self._leaves 里。挂上新叶子以后要 "
                        "self._push_leaf(node)（insert 停在一个叶子上时也要）：_evict 只从 self._leaves 里找叶子")
            return ("超出容量时要淘汰：挂上新叶子、_push_leaf 以后 self._evict(self.size - self.capacity)（按 "
                    "last_access 从旧到新删叶子）；删空的叶子要从父节点的 children 里去掉")
        if extra is not None:
            return "多了一个孩子：走得下去的时候沿着已有的节点走（拆开的 head 接回父节点），只把剩下的挂成新叶子"
        why = "新叶子挂在走不下去的节点下面：node.children[seq[i]] = 新叶子（键是它的第一个 token）"
        if capacity is not None:
            why += "；或者淘汰删多了：从最久没用的叶子删起，删够 need 个单位就停"
        return why
    return {"last_access": "刷新的规则：insert 走过的每个节点 last_access = now——包括整段命中的节点、正好停在上面的节点；"
                           "拆之前先 child.last_access = now（rule=\"sglang\"：拆开的尾巴也算刚用过），head 继承它；新叶子也是 now",
            "ref": "lock=True：走过的每个节点和新叶子 ref += 1；拆出来的 head 继承 child 的 ref"}[field]


def _match_hint(tree, seq, want, got):
    if got > want:
        return "match 只数和 seq 相同的部分：走到孩子时逐个比，停在第一个不同的 token（可能在节点中间）"
    return "孩子的 key 只有前一部分和 seq 相同时，也要算上相同的那部分：命中可以停在一个节点的中间"


def _radix_script(m, ops, capacity, given0, hint=None, rule=None):
    """ops：[("insert", 序列, lock) / ("match", 序列)]。每一步之后和参考实现比返回值、match、树、size、n_splits。
    rule：None 用默认的规则（SGLang）；"trim"：逐单位修剪。"""
    ref_cls = reference(6)["RadixCache"]
    kw = {} if rule is None else {"rule": rule}
    r = ref(lambda: ref_cls(capacity, **kw))
    t = mine(given0, lambda: m["RadixCache"](capacity, **kw))
    given = given0
    for op in ops:
        if op[0] == "insert":
            seq, lock = op[1], op[2]
            flag = ", lock=True" if lock else ""
            given += f"；t.insert({list(seq)}{flag})"
            want = ref(lambda: r.insert(list(seq), lock=lock))
            got = mine(given, lambda: t.insert(list(seq), lock=lock))
            if isinstance(got, list):
                got = tuple(got)
            if not equal(got, want):
                want_map = tree_map(r.root)
                st = _tree_diff(want_map, tree_map(t.root))
                why = hint or (_tree_hint(st, capacity, want_map, t) if st else "返回 (插入前已经在树里的长度, 这次拆了几个节点)")
                raise Fail(given + " 的返回值 (已经在树里的长度, 拆了几个节点)", show(want), show(got), why)
        else:
            seq = op[1]
            given += f"；t.match({list(seq)})"
            before = tree_map(t.root)
            want = ref(lambda: r.match(list(seq)))
            got = mine(given, lambda: t.match(list(seq)))
            if tree_map(t.root) != before:
                raise Fail(given, "match 之后树不变", "树变了（拆了节点或改了 last_access / ref）",
                           "match 只读：不拆节点、不改 last_access（只有 insert 才算一次使用）")
            if got != want:
                raise Fail(given, show(want), show(got), _match_hint(r, seq, want, got))
        want_map = tree_map(r.root)
        d = _tree_diff(want_map, tree_map(t.root))
        if d:
            raise Fail(given + f" 之后的树：{_where(*d[:3])}", show(d[3]), show(d[4]),
                       hint or _tree_hint(d, capacity, want_map, t))
        for label, a, b, why in (("size（树里存的单位数）", r.size, t.size,
                                  "size 加上新叶子的长度（淘汰时 _evict 自己减）"),
                                 ("n_splits", r.n_splits, t.n_splits, "每拆一次 self.n_splits += 1（在 _split 里）")):
            if a != b:
                raise Fail(given + f" 之后的 {label}", show(a), show(b), hint or why)


def _radix_case(inserts, checks, hint, capacity=None, lock=False):
    """inserts：依次插入的序列；checks：要 match 的序列。每一步都和参考实现比。"""
    ops = [("insert", s, lock) for s in inserts] + [("match", q) for q in checks]
    return lambda m: _radix_script(m, ops, capacity, f"t = RadixCache({capacity})", hint)


def _radix_ops(rng, n_ops, universe, lock_p):
    """随机的树脚本：几条"基本序列"的前缀、整段重复、加上随机尾巴——整段命中、停在节点中间、拆节点都会出现。"""
    bases = [rng.integers(0, universe, int(rng.integers(3, 9))).tolist() for _ in range(3)]
    ops = []
    for _ in range(n_ops):
        b = bases[int(rng.integers(0, 3))]
        r = rng.random()
        if r < 0.3:
            seq = list(b)                                        # 整段重复：全部命中
        elif r < 0.6:
            seq = b[:int(rng.integers(1, len(b) + 1))]           # 前缀：停在节点上或节点中间
        else:
            seq = b[:int(rng.integers(0, len(b) + 1))] + rng.integers(0, universe, int(rng.integers(1, 4))).tolist()
        if rng.random() < 0.35:
            ops.append(("match", seq))
        else:
            ops.append(("insert", seq, bool(rng.random() < lock_p)))
    return ops


def _case_radix_random(m):
    """容量 None、3、5、8、13（token 级，词表 4），两种淘汰规则：随机脚本每一步都和参考实现相同。"""
    rng = np.random.default_rng(60)
    for rule in (None, "trim"):
        for cap in (None, 3, 5, 8, 13):
            for trial in range(6):
                ops = _radix_ops(rng, 14, 4, 0.2 if trial % 2 else 0.0)
                flag = "" if rule is None else f", rule={rule!r}"
                _radix_script(m, ops, cap, f"t = RadixCache({cap}{flag})", rule=rule)


def _case_radix_requests(m):
    """few-shot 式的请求（3 种前缀 + 随机后缀，token 级）：树、size、拆分次数和参考相同。"""
    rng = np.random.default_rng(4)
    prefixes = [rng.integers(0, 50, n).tolist() for n in (40, 90, 17)]
    reqs = [prefixes[i % 3] + rng.integers(0, 50, int(rng.integers(3, 30))).tolist() for i in range(30)]
    _radix_script(m, [("insert", s, True) for s in reqs], None,
                  "30 个请求（前缀 40、90、17 个 token，后缀 3–29 个，词表 50，rng = np.random.default_rng(4)）；"
                  "t = RadixCache(None)")


def _case_radix_trace(m):
    """合成 trace 的前 3,000 个请求按块放进树（容量 1,000 块）：每个请求先 match 再 insert，命中数和参考相同。"""
    need(PROBES, m, "RadixCache")
    tr = _trace()
    ref_cls = reference(6)["RadixCache"]
    given = "合成 trace（make_trace 种子 0）的前 3,000 个请求按块建树：t = RadixCache(1000)，每个请求 t.match(块) 再 t.insert(块)"
    t, r = mine(given, lambda: m["RadixCache"](1000)), ref_cls(1000)
    want = ref(lambda: [(r.match(list(tr.blocks(i))), r.insert(list(tr.blocks(i))))[0] for i in range(3000)])
    for i in range(3000):
        seq = list(tr.blocks(i))
        got = mine(given, lambda: t.match(seq))
        if got != want[i]:
            raise Fail(f"{given}：第 {i} 个请求（{len(seq)} 块）的 match", show(want[i]), show(got),
                       "小用例都过了的话，检查 last_access、_push_leaf 和 size：淘汰靠它们")
        mine(given, lambda: t.insert(seq))


def _own_evict(m):
    """选做：学生的类自己写了 _evict（不是继承来的）。"""
    cls = m["RadixCache"]
    base = reference(6)["RadixCache"]
    if getattr(cls, "_evict", None) is getattr(base, "_evict", None):
        raise NotImplementedError("_evict")


def _case_radix_evict(m):
    _own_evict(m)
    rng = np.random.default_rng(61)
    for cap, rule in ((1, None), (2, None), (4, None), (6, None), (2, "trim"), (5, "trim")):
        for trial in range(5):
            flag = "" if rule is None else f", rule={rule!r}"
            _radix_script(m, _radix_ops(rng, 16, 5, 0.15), cap, f"t = RadixCache({cap}{flag})", rule=rule,
                          hint=
                          "淘汰：从 self._leaves 弹出最旧的叶子（已删、不再是叶子、ref > 0 的跳过；被碰过的重新排队），"
                          "sglang 删整片叶子、trim 只删尾巴，删空了就从父节点摘掉，父节点成了叶子就 _push_leaf")


CASES_6 = [
    ("讲义的例子：[1 2 3 4] 再 [1 2 9] → 拆成 [1 2] [3 4] [9]",
     _radix_case([[1, 2, 3, 4], [1, 2, 9]], [[1, 2, 3, 7]], None)),
    ("match 可以停在节点中间，也可以一个都不中",
     _radix_case([[1, 2, 3, 4]], [[1, 2, 5], [1, 2, 3, 4, 5], [7], [], [1]], None)),
    ("拆分的位置：[5 6 7 8 9] 再 [5 6 7 1] → [5 6 7] [8 9] [1]",
     _radix_case([[5, 6, 7, 8, 9], [5, 6, 7, 1]], [[5, 6, 7, 8], [5, 6, 9]], None)),
    ("插入已有序列的前缀：只拆节点，不长新叶子", _radix_case([[1, 2, 3, 4], [1, 2]], [[1, 2, 3]], None)),
    ("同样的序列插两次：全部命中，不拆", _radix_case([[3, 1, 4, 1, 5], [3, 1, 4, 1, 5]], [[3, 1, 4]], None)),
    ("lock=True：路径上每个节点 ref + 1（拆出来的 head 继承 ref）",
     _radix_case([[1, 2, 3, 4], [1, 2, 9], [1, 2, 3]], [], None, lock=True)),
    ("容量 4：超出时淘汰最久没用的叶子",
     _radix_case([[1, 2, 3], [4, 5], [1, 2, 3, 6]], [[1, 2, 3], [4, 5]], None, capacity=4)),
    ("容量 4、一次插入 6 个：先挂上新叶子再淘汰（它是最久没用的叶子）",
     _radix_case([[1, 2, 3, 4, 5, 6]], [[1, 2, 3, 4, 5, 6]], None, capacity=4)),
    ("整段命中也刷新：[1 2 3]、[4 5]、再 [1 2 3]，容量 5 时插入 [6] 淘汰的是 [4 5]",
     _radix_case([[1, 2, 3], [4, 5], [1, 2, 3], [6]], [[1, 2, 3], [4, 5]], None, capacity=5)),
    ("随机脚本（容量 None、3、5、8、13；序列反复出现）：每一步的返回值、match 和树都和参考实现相同", _case_radix_random),
    ("30 个 few-shot 式请求（token 级，lock=True）：树、size、拆分次数和参考实现相同", _case_radix_requests),
    ("合成 trace 的前 3,000 个请求按块建树（容量 1,000 块）：每个请求命中的块数和参考实现相同", _case_radix_trace),
    ("选做 · 你写的 _evict：容量 1–6 的随机脚本，每一步都和参考实现相同", _case_radix_evict),
]

__all__ = ["CASES_4", "CASES_5", "CASES_6", "CLOCK", "tree_map"]
