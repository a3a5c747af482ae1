"""六个练习的用例：按顺序几组（手算的例子、随机输入、讲义的工作量），一组 = (阶段, 名字, 提示, 输入, play)。play(impl, inp)
是生成器：yield 一次调用的写法，调用之后 yield 看到的 {名字: 值}；check.py 拿它跑讲义的实现和你的，逐项比。"""
import copy
import importlib
from collections import namedtuple
from types import SimpleNamespace

import numpy as np

import paged_kv
from kv_store.policies import hit_blocks      # 讲义的命中规则：04、04b 的命中率都这样数

Exercise = namedtuple("Exercise", "file names title module groups")
KEY_HINTS = {   # 这一项不同、它前面的项都相同：错在哪个想法是确定的（否则给这一组的提示）
    "返回值的类型": "字节数是整数：留意哪一步的除法得到了 float",
    "k 的类型": "返回 numpy 数组，dtype 和块池的一样：不转换类型，分页版才和连续版逐位相同",
    "v": "k 对了、v 不对：v 的取法和 k 一样，只是取自 pool.v",
    "和别的序列共用一个块表 list 的": "fork 出的序列要有自己的一份块表：之后它换块、添块，原来的序列不跟着变",
    "insert 的返回值": "树都对了，返回值不对：insert 返回插入之前已经在树里的长度（一个数）",
    "size": "树都对了，size 不对：挂上新叶子时加上它的长度", "n_splits": "树都对了，n_splits 不对：每拆一次节点加 1",
    "各节点的时刻 last_access": "树都对了，时刻不对：match 只读；每次 insert 的 now 加 1，走过的节点、新叶子都记 now；"
                             "sglang 规则下先记再拆",
    "各节点的 ref": "lock=True：走过的每个节点和新叶子都多一个锁；拆出来的前半段和原来的锁一样多"}


def text(x):
    """值的写法：numpy 数组写成 np.array([...])（不是 int64 / float64 时带上 dtype）。"""
    if isinstance(x, np.ndarray):
        return f"np.array({x.tolist()}{'' if x.dtype in (np.int64, np.float64) else f', dtype=np.{x.dtype}'})"
    return x if isinstance(x, str) else repr(x)


def hand(play, *items):      # 手算的例子：每个 (名字, 提示, 输入) 一组
    return [("手算的例子", name, hint, [inp], play) for name, hint, inp in items]


def play_call(name, *argnames):     # 调用一个函数：看返回值和调用之后的每个参数
    def play(impl, args):
        yield f"{name}({', '.join(repr(a) if isinstance(a, str) else text(a) for a in args)})"
        yield {"返回值": impl[name](*args), **{f"调用之后的 {a}": x for a, x in zip(argnames, args)}}
    return play


def play_trace(impl, inp):
    """合成 trace（种子 0）的前 n 个请求喂给你的代码，逐段比命中块数合计；step(state, 请求) = 命中几块。"""
    from kv_store.trace import make_trace
    what, n, start, step = inp
    state, trace = start(impl), make_trace(seed=0, n_requests=n)
    for i in range(0, n, 100):             # 每步 100 个请求：慢一些的写法（每次淘汰扫一遍全部的块）也远不到 LIMIT
        yield f"合成 trace（make_trace 种子 0）第 {i}–{i + 99} 个请求：{what}"
        yield {"命中的块数合计": sum(step(state, r) for r in trace[i:i + 100])}


def play_decode(impl, bs):
    """小模型 TINY 解码 4 条序列（第 2 步 fork 出第 5 条）；paged_step 用你写的，每步和连续的 KV 缓存逐位比。"""
    from lab_common import transformer_lab as lab
    cfg = lab.config_like(lab.TINY, max_seq=48)
    params, rng, pool = lab.init_params(cfg, seed=0), np.random.default_rng(1), paged_kv.BlockPool(cfg, 48, bs)
    feed = [rng.integers(0, cfg.vocab, n) for n in (3, 7, 12, 20)]
    seqs = [impl.get("PagedSequence", paged_kv.PagedSequence)(pool) for _ in feed]
    caches = [lab.KVCache(cfg, 1) for _ in feed]
    for step in range(6):                           # 第 0 步 prefill，之后每步一个 token；各序列的块在池里交错
        if step == 2:
            yield "第 0 条序列 fork()：第 4 条和它共用全部块，接着生成不同的 token"
            seqs, caches, feed = seqs + [seqs[0].fork()], caches + [copy.deepcopy(caches[0])], feed + [[feed[0][0] + 1]]
        yield f"小模型 TINY（种子 0），块大小 {bs}，{len(seqs)} 条序列：第 {step} 步 paged_step"
        outs = paged_kv.paged_step(params, cfg, seqs, feed, gather_kv=impl.get("gather_kv", paged_kv.gather_kv))
        want = [lab.forward(params, cfg, np.asarray(f)[None], cache=c)[0] for f, c in zip(feed, caches)]
        yield {"max |logits 分页 − 连续|": max(float(np.abs(o - w).max()) for o, w in zip(outs, want)),
               "空闲块数": pool.num_free}
        feed = [[int(np.argmax(w[-1]))] for w in want]


# ============================================================ 练习 1：每个 token 的 KV 字节数
def play_kv(impl, inp):
    args, kw = inp
    yield f"kv_bytes_per_token({', '.join([repr(args[0]), *map(str, args[1:]), *(f'{k}={v}' for k, v in kw.items())])})"
    try:
        got = impl["kv_bytes_per_token"](*args, **kw)
    except ValueError:
        got = "raise ValueError"
    yield {"字节数": int(got) if isinstance(got, float) and got.is_integer() else got,
           "返回值的类型": "int" if isinstance(got, (int, np.integer)) else type(got).__name__}


def groups_1():
    rng = np.random.default_rng(1)

    def shapes(n, kinds, **extra):
        out = []
        for att, kv, layers in zip(rng.choice(kinds, n), rng.choice([1, 2, 4, 8], n), rng.integers(1, 97, n)):
            kw = {k: int(rng.choice(v)) for k, v in extra.items()}
            if att == "GQA":
                kw["n_kv_heads"] = int(kv)
            if att == "MLA":
                kw.update(kv_lora_rank=int(rng.choice([256, 512])), rope_dim=int(rng.choice([32, 64])))
            out.append(((str(att), int(layers), int(kv * rng.choice([1, 2, 4])), int(rng.choice([64, 128]))), kw))
        return out
    return hand(play_kv,   # LLaMA2-7B、LLaMA3-8B、LLaMA2-13B、DeepSeek-V2、LLaMA2-70B 的形状
                ("MHA", "K、V 各一份：每层存 2 × 头数 × head_dim 个数，再乘层数和每个数的字节数", (("MHA", 32, 32, 128), {})),
                ("GQA", "GQA 存的是 n_kv_heads 组 K、V（几个查询头共用一组）", (("GQA", 32, 32, 128), {"n_kv_heads": 8})),
                ("MQA", "MQA：全部查询头共用一组 K、V", (("MQA", 40, 40, 128), {})),
                ("MLA", "MLA 每层只存一个压缩向量和一个带 RoPE 的 key：K、V 由它还原，和头数无关",
                 (("MLA", 60, 128, 128), {"kv_lora_rank": 512, "rope_dim": 64})),
                ("FP8", "每个数几字节由 dtype_bytes 决定", (("GQA", 80, 64, 128), {"n_kv_heads": 8, "dtype_bytes": 1})),
                ("不认识的种类", "不认识的 attention 不能算出一个数：写错的名字会悄悄得到一个错的字节数", (("FOO", 32, 32, 128), {}))) + [
        ("随机输入", "四种注意力的随机形状，dtype_bytes 1、2、4", "对照上面手算的例子",
         shapes(140, ["MHA", "GQA", "MQA", "MLA"], dtype_bytes=[1, 2, 4]), play_kv),
        ("随机输入", "MHA、MQA 也给了 n_kv_heads", "只有 GQA 看 n_kv_heads：MHA 每个查询头一组，MQA 只有一组",
         shapes(40, ["MHA", "MQA"], n_kv_heads=[2, 4, 8]), play_kv)]


# ============================================================ 练习 2：按块表取回 K/V
def make_pool(n_blocks=3, n_layers=1, heads=1, block_size=2, head_dim=1, dtype=np.float64):
    """k[层, 块, 头, 位置, 维] = 1000·层 + 100·块 + 10·头 + 位置 + 1 + 0.1·维（一眼看出取的是哪儿），v = −k。"""
    i = np.indices((n_layers, n_blocks, heads, block_size, head_dim))
    k = (1000 * i[0] + 100 * i[1] + 10 * i[2] + i[3] + 1 + 0.1 * i[4]).astype(dtype)
    return SimpleNamespace(k=k, v=-k, block_size=block_size)


def play_gather(impl, inp):
    pool, layer, blocks, length = inp
    yield (f"pool.k 的形状 {pool.k.shape}（层, 块, 头, 位置, 维），{pool.k.dtype}；v = −k\n值 = 1000·层 + 100·块 + "
           f"10·头 + 位置 + 1 + 0.1·维\ngather_kv(pool, {layer}, {text(blocks)}, {length})")
    got = impl["gather_kv"](pool, layer, blocks, length)
    k, v = list(got) if isinstance(got, (tuple, list)) and len(got) == 2 else [got, None]
    yield {"返回值是 (k, v) 一对": v is not None, "k 的形状": np.shape(k), "k 的类型": f"{type(k).__name__} "
           f"{getattr(k, 'dtype', '')}", "k": k, "v": v, "调用之后的 pool.k": pool.k, "调用之后的 pool.v": pool.v,
           "调用之后的 blocks": blocks}


def random_gather(rng, n, full=False, longer=False, table=list, dtype=np.float64):
    out = []
    for size, used in zip(rng.integers(1, 17, n), rng.integers(1, 4, n)):     # 块大小 1–16；这条序列用到几块
        pool = make_pool(*rng.integers([4, 1, 1], [10, 4, 4]).tolist(), int(size), int(rng.integers(1, 4)), dtype)
        length = int(used * size if full or size == 1 else (used - 1) * size + rng.integers(1, size))
        blocks = rng.permutation(pool.k.shape[1])[:used + longer * int(rng.integers(1, 3))]
        blocks = blocks.tolist() if table is list else blocks.astype(table)
        out.append((pool, int(rng.integers(0, pool.k.shape[0])), blocks, length))
    return out


def groups_2():
    rng = np.random.default_rng(2)
    return hand(play_gather,
                ("块表 [2, 0]", "k[h, t] 是第 t 个 token 的 key：在块表第 t // block_size 项所指的物理块里，块内第 "
                 "t % block_size 个", (make_pool(), 0, [2, 0], 3)),
                ("两个 KV 头", "结果的第一维是 KV 头：同一个头的 token 按顺序排在一起，不同头的不混",
                 (make_pool(heads=2, n_blocks=4, head_dim=2), 0, [3, 1, 2], 5)),
                ("两层的块池", "只取第 layer 层", (make_pool(n_layers=2), 1, [0, 2], 3)),
                ("最后一块正好写满", "length 是块大小的整数倍时，最后一块是满的：它的每个位置都属于这条序列", (make_pool(), 0, [1, 2], 4)),
                ("块表比需要的长", "块表可能比 length 需要的长：用到几块、最后一块取几个，都由 length 决定", (make_pool(4), 0, [2, 0, 3], 3)),
                ("块大小 3", "块大小不一定是 2 的幂；也可能只有一块，还没写满", (make_pool(block_size=3), 0, [1], 2))) + [
        ("随机输入", "块表是 list、正好够用（块大小 1–16）", "对照上面手算的例子", random_gather(rng, 60), play_gather),
        ("随机输入", "最后一块正好写满", "length 是块大小的整数倍时，最后一块整块都属于这条序列", random_gather(rng, 40, full=True),
         play_gather),
        ("随机输入", "块表比需要的长", "用到几块由 length 决定，不由块表的长度决定", random_gather(rng, 40, longer=True), play_gather),
        ("随机输入", "块表是 numpy 数组（int64、int32）", "块表也可能是整数数组，dtype 不一定是 int64",
         random_gather(rng, 20, table=np.int64) + random_gather(rng, 20, table=np.int32, longer=True), play_gather),
        ("随机输入", "float32 的块池", "块池是什么 dtype，取回来的就是什么 dtype", random_gather(rng, 20, dtype=np.float32),
         play_gather),
        ("讲义的工作量", "小模型解码（块大小 3、4）", "分页版要和连续版逐位相同：每个位置都取对、不转换类型", [3, 4], play_decode)]


# ============================================================ 练习 3：fork、写时复制、free
def play_cow(impl, inp):
    """inp = (块大小, 操作)，操作 (种类, 名, 参数)：new、fork（参数 = 原序列）、free、append（参数 n = reserve(n)、
    写进 n 个 token、length += n）。每步之后看块池：块号按在块表里第一次出现的先后改名（空闲表的顺序随你）。"""
    bs, ops = inp
    mem, tok, seqs = np.full((64, bs), -1), 100, {}      # mem[块, 位置] = 写进去的 token；写时复制整块搬
    pool = paged_kv.BlockPool(None, n_blocks=64, block_size=bs, copy_fn=lambda s, d: mem.__setitem__(d, mem[s]))
    yield f"pool = BlockPool(None, n_blocks=64, block_size={bs})"
    for kind, name, arg in ops:
        yield {"new": f"{name} = PagedSequence(pool)", "fork": f"{name} = {arg}.fork()", "free": f"{name}.free()",
               "append": f"{name}.reserve({arg})；写进 {arg} 个 token；{name}.length += {arg}"}[kind]
        if kind == "new":
            seqs[name] = impl["PagedSequence"](pool)
        elif kind == "fork":
            seqs[name] = seqs[arg].fork()
        elif kind == "free":
            seqs[name].free()
        else:
            blk, off = (np.asarray(x).astype(np.int64) for x in seqs[name].reserve(arg))
            if blk.shape == off.shape == (arg,) and np.all((blk >= 0) & (blk < 64) & (off >= 0) & (off < bs)):
                mem[blk, off] = np.arange(tok, tok + arg)
            seqs[name].length, tok = seqs[name].length + arg, tok + arg
        names = {}
        for b in [int(b) for s in seqs.values() for b in s.blocks]:
            names.setdefault(b, len(names))
        at = {k: np.arange(s.length) for k, s in seqs.items()}
        shared = [k for k in seqs if any(seqs[j].blocks is seqs[k].blocks for j in seqs if j != k)]
        yield {"写时复制次数": pool.n_cow, "块表（块号按出现的先后改名）": {k: [names[b] for b in map(int, s.blocks)] for k, s in
                                                               seqs.items()},
               "ref_count（按改名后的块号）": [int(pool.ref_count[b]) for b in names], "空闲块数": pool.num_free,
               "和别的序列共用一个块表 list 的": shared,
               "length": {k: s.length for k, s in seqs.items()},
               "每条序列读出的 token": {k: mem[np.asarray(s.blocks, dtype=np.int64)[at[k] // bs], at[k] % bs].tolist()
                                  if len(s.blocks) * bs >= s.length else "块表放不下" for k, s in seqs.items()}}


def random_cow(rng, n, sizes, counts):
    out = []
    for bs in rng.choice(sizes, n):
        ops, live = [("new", "s0", None)], ["s0"]
        for i, r, s in zip(range(1, 15), rng.random(14), rng.integers(0, 99, 14)):
            s = live[s % len(live)]
            if r < 0.25 and len(live) < 5:
                ops, live = ops + [("fork", f"s{i}", s)], live + [f"s{i}"]
            elif r < 0.33 and len(live) > 1:
                ops, live = ops + [("free", s, None)], [x for x in live if x != s]
            else:
                ops.append(("append", s, max(1, int(rng.choice(counts(int(bs)))))))
        out.append((int(bs), ops))
    return out


def groups_3():
    rng, a, fork = np.random.default_rng(3), [("new", "a", 0)], ("fork", "b", "a")
    return hand(play_cow,
                ("reserve", "n 个新 token 要有地方放：块数 = ceil(token 数 / 块大小)；位置 p 在块表第 p // 块大小 项、块内"
                 "第 p % 块大小 个；reserve 不改 length", (4, a + [("append", "a", 5)])),
                ("最后一块还有空位", "位置从 length 接着往后；最后一块只有自己在用、还有空位就直接写满它，不够才分配新块",
                 (4, a + [("append", "a", 5), ("append", "a", 2)])),
                ("fork", "fork 不拷数据：新序列和原来的共用每一块，每块多一个使用者", (2, a + [("append", "a", 3), fork])),
                ("写时复制", "往一个没写满、又有别的序列共用的块里写之前，先复制一份自己的；旧块少一个使用者",
                 (2, a + [("append", "a", 3), fork, ("append", "b", 1)])),
                ("最后一块写满了", "最后一块已经写满：新 token 进新块，共用的块用不着复制",
                 (2, a + [("append", "a", 4), fork, ("append", "b", 1)])),
                ("一次写几个 token、跨过块边界", "一次写几个 token：写进共用的最后一块之前也要先复制它，新块添在它后面",
                 (4, a + [("append", "a", 5), fork, ("append", "b", 6)])),
                ("free", "free：每块少一个使用者（还有人用的块不回空闲表），块表清空、length 归零",
                 (2, a + [("append", "a", 3), fork, ("free", "a", 0), ("free", "b", 0)]))) + [
        ("随机输入", "fork / reserve(n) / free（块大小 1–16，一次写 1 个到 2 块多）", "对照上面手算的例子",
         random_cow(rng, 70, range(1, 17), lambda bs: [1, 1, 2, bs - 1, bs, bs + 1, 2 * bs + 1]), play_cow),
        ("讲义的工作量", "小模型解码，一条 fork 出来（块大小 3、4）", "对照上面的小例子：fork、写时复制、free", [3, 4], play_decode)]


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


EXERCISES = {1: Exercise("ex1_kv_bytes", ("kv_bytes_per_token",), "每个 token 的 KV 字节数", "paged_kv", groups_1),
             2: Exercise("ex2_gather_kv", ("gather_kv",), "按块表取回 K/V", "paged_kv", groups_2),
             3: Exercise("ex3_cow", ("PagedSequence",), "fork、写时复制、free", "paged_kv", groups_3),
             4: Exercise("ex4_block_hashes", ("block_hashes", "match_prefix"), "链式块哈希和前缀匹配", "kv_store.prefix",
                         groups_4),
             5: Exercise("ex5_lru", ("LRUCache",), "淘汰策略 LRU", "kv_store.policies", groups_5),
             6: Exercise("ex6_radix", ("RadixCache",), "基数树的 match 和 insert", "kv_store.radix_tree", groups_6)}


def reference(number):
    """讲义的实现：({名字: 对象}, 它所在的文件)。"""
    module = importlib.import_module(EXERCISES[number].module)
    return {name: getattr(module, name) for name in EXERCISES[number].names}, module.__file__
