"""六个练习的用例：每个练习按顺序几组（手算的例子、随机输入、讲义的工作量），一组 = (阶段, 名字, 提示, 输入, play)。

play(impl, inp) 是生成器：先 yield 一次调用的写法（字符串：照着它能在 python 里重现），调用之后 yield 看到的
东西 {名字: 值}。check.py 拿同一个 play 跑讲义的实现和你的，逐项比；提示说这一组考的是哪个想法。
名字以"调用之后的"开头的项看你有没有改调用者的参数。随机数的种子固定。
"""
import copy
import importlib
from collections import namedtuple
from types import SimpleNamespace

import numpy as np

Exercise = namedtuple("Exercise", "file names title module groups")
KEY_HINTS = {"返回值的类型": "字节数是整数：留意哪一步的除法得到了 float",
             "match 之后树没变": "match 只读：不拆节点、不改时刻（只有 insert 才算用过）"}


def text(x):
    """参数、值的写法：numpy 数组写成 np.array([...])（不是 int64 / float64 时带上 dtype）。"""
    if isinstance(x, np.ndarray):
        return f"np.array({x.tolist()}{'' if x.dtype in (np.int64, np.float64) else f', dtype=np.{x.dtype}'})"
    if isinstance(x, BaseException):
        return f"{type(x).__name__}: {x}"
    return x if isinstance(x, str) else repr(x)


def call(name, *args, **kw):
    return f"{name}({', '.join([text(a) for a in args] + [f'{k}={v!r}' for k, v in kw.items()])})"


def hand(play, *items):
    """手算的例子：每个 (名字, 提示, 输入) 一组。"""
    return [("手算的例子", name, hint, [inp], play) for name, hint, inp in items]


def play_trace(impl, inp):
    """讲义的合成 trace（make_trace 种子 0）的前 n 个请求喂给你的代码，每 500 个请求比一次命中的块数合计。"""
    from kv_store.trace import make_trace
    what, n, start, step = inp
    state = start(impl)
    for i, r in enumerate(make_trace(seed=0, n_requests=n)):
        if i % 500 == 0:
            hits = 0
            yield f"合成 trace（make_trace 种子 0）第 {i}–{i + 499} 个请求：{what}"
        hits += step(state, r.blocks)
        if i % 500 == 499:
            yield {"命中的块数合计": hits}


def play_decode(impl, bs):
    """讲义的小模型 TINY：4 条序列 prefill，第 0 条 fork 出一条（并行采样），再逐 token 解码。paged_step 用你的
    gather_kv、PagedSequence（写了哪个用哪个），每步和连续的 KV 缓存逐位比。"""
    import paged_kv
    from lab_common import transformer_lab as lab
    cfg = lab.config_like(lab.TINY, max_seq=48)
    params, rng = lab.init_params(cfg, seed=0), np.random.default_rng(1)
    feed = [rng.integers(0, cfg.vocab, n) for n in (3, 7, 12, 20)]
    pool = paged_kv.BlockPool(cfg, n_blocks=48, block_size=bs)
    seqs = [impl.get("PagedSequence", paged_kv.PagedSequence)(pool) for _ in feed]
    caches = [lab.KVCache(cfg, 1) for _ in feed]
    for step in range(6):                           # 第 0 步 prefill，之后每步一个 token；各序列的块在池里交错
        yield f"小模型 TINY（种子 0），块大小 {bs}，{len(seqs)} 条序列：第 {step} 步 paged_step" + "（第 4 条是 fork 出来的）" * (
            len(seqs) > 4)
        outs = paged_kv.paged_step(params, cfg, seqs, feed, gather_kv=impl.get("gather_kv", paged_kv.gather_kv))
        want = [lab.forward(params, cfg, np.asarray(f)[None], cache=c)[0] for f, c in zip(feed, caches)]
        yield {"max |logits 分页 − 连续|": max(float(np.max(np.abs(o - w))) for o, w in zip(outs, want)),
               "空闲块数": pool.num_free}
        feed = [[int(np.argmax(w[-1]))] for w in want]
        if step == 1:
            yield "第 0 条序列 fork()（并行采样：和它共用全部块）"
            seqs.append(seqs[0].fork())
            caches.append(copy.deepcopy(caches[0]))
            feed.append([(feed[0][0] + 1) % cfg.vocab])
            yield {"空闲块数": pool.num_free}
    yield "每条序列 free()"
    for s in seqs:
        s.free()
    yield {"空闲块数": pool.num_free}


# ============================================================ 练习 1：每个 token 的 KV 字节数
def play_kv(impl, inp):
    args, kw = inp
    yield call("kv_bytes_per_token", *args, **kw)
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
        for att, kv, group, layers, dim in zip(rng.choice(kinds, n), rng.choice([1, 2, 4, 8], n), rng.choice([1, 2, 4], n),
                                               rng.integers(1, 97, n), rng.choice([64, 128], n)):
            kw = {"kv_lora_rank": int(rng.choice([256, 512])), "rope_dim": int(rng.choice([32, 64]))} if att == "MLA" else {}
            kw.update({"n_kv_heads": int(kv)} if att == "GQA" else {}, **{k: int(rng.choice(v)) for k, v in extra.items()})
            out.append(((str(att), int(layers), int(kv * group), int(dim)), kw))
        return out
    return hand(play_kv,
                ("MHA：LLaMA2-7B 的形状", "K、V 各一份：每层存 2 × 头数 × head_dim 个数，再乘层数和每个数的字节数",
                 (("MHA", 32, 32, 128), {})),
                ("GQA：32 个查询头共用 8 组 K、V", "GQA 存的是 n_kv_heads 组 K、V（几个查询头共用一组）",
                 (("GQA", 32, 32, 128), {"n_kv_heads": 8})),
                ("MQA", "MQA：全部查询头共用一组 K、V", (("MQA", 40, 40, 128), {})),
                ("MLA：DeepSeek-V2 的形状", "MLA 每层只存一个压缩向量和一个带 RoPE 的 key：K、V 由同一个压缩向量还原，"
                 "和头数无关", (("MLA", 60, 128, 128), {"kv_lora_rank": 512, "rope_dim": 64})),
                ("FP8：每个数 1 字节", "每个数几字节由 dtype_bytes 决定", (("GQA", 80, 64, 128), {"n_kv_heads": 8, "dtype_bytes": 1})),
                ("不认识的注意力种类", "不认识的 attention 不能算出一个数：写错的名字会悄悄得到一个错的字节数",
                 (("FOO", 32, 32, 128), {}))) + [
        ("随机输入", "MHA、GQA、MQA 的随机形状", "对照上面手算的例子", shapes(60, ["MHA", "GQA", "MQA"]), play_kv),
        ("随机输入", "MHA、MQA 也给了 n_kv_heads", "只有 GQA 看 n_kv_heads：MHA 每个查询头一组，MQA 只有一组",
         shapes(40, ["MHA", "MQA"], n_kv_heads=[2, 4, 8]), play_kv),
        ("随机输入", "MLA 的随机形状", "MLA 每层存 kv_lora_rank + rope_dim 个数，不分 K、V", shapes(40, ["MLA"]), play_kv),
        ("随机输入", "dtype_bytes 是 1、2、4", "每个数几字节由 dtype_bytes 决定",
         shapes(60, ["MHA", "GQA", "MQA", "MLA"], dtype_bytes=[1, 2, 4]), play_kv)]


# ============================================================ 练习 2：按块表取回 K/V
def make_pool(n_layers=1, n_blocks=3, heads=1, block_size=2, head_dim=1, dtype=np.float64):
    """k[层, 块, 头, 位置, 维] = 1000·层 + 100·块 + 10·头 + 位置 + 1 + 0.1·维（一眼看出取的是哪儿），v = −k。"""
    i = np.indices((n_layers, n_blocks, heads, block_size, head_dim))
    k = (1000 * i[0] + 100 * i[1] + 10 * i[2] + i[3] + 1 + 0.1 * i[4]).astype(dtype)
    return SimpleNamespace(k=k, v=-k, block_size=block_size)


def play_gather(impl, inp):
    pool, layer, blocks, length = inp
    yield (f"pool.k 的形状 {pool.k.shape}（层, 块, 头, 位置, 维），{pool.k.dtype}；v = −k\n值 = 1000·层 + 100·块 + "
           f"10·头 + 位置 + 1 + 0.1·维\n{call('gather_kv', 'pool', layer, blocks, length)}".replace("'pool'", "pool"))
    got = impl["gather_kv"](pool, layer, blocks, length)
    k, v = (list(got) if isinstance(got, (tuple, list)) and len(got) == 2 else [got, None])
    yield {"返回值是 (k, v) 一对": v is not None, "k 的形状": np.shape(k), "k": k, "v 的形状": np.shape(v), "v": v,
           "调用之后的 pool.k": pool.k, "调用之后的 pool.v": pool.v, "调用之后的 blocks": blocks}


def random_gather(rng, n, full=False, longer=False, table=list, bs=None, dtype=np.float64):
    out = []
    for _ in range(n):
        size, used = bs or int(rng.integers(2, 17)), int(rng.integers(1, 4))      # 块大小；这条序列用到几块
        pool = make_pool(*rng.integers([1, 4, 1], [4, 10, 4]).tolist(), size, int(rng.integers(1, 4)), dtype)
        length = used * size if full or size == 1 else (used - 1) * size + int(rng.integers(1, size))
        blocks = rng.permutation(pool.k.shape[1])[:used + longer * int(rng.integers(1, 3))]
        out.append((pool, int(rng.integers(0, pool.k.shape[0])), blocks.tolist() if table is list else blocks.astype(table),
                    length))
    return out


def groups_2():
    rng = np.random.default_rng(2)
    return hand(play_gather,
                ("块表 [2, 0]、长度 3", "第 t 个 token 在块表第 t // block_size 项所指的物理块里，块内第 t % block_size 个",
                 (make_pool(), 0, [2, 0], 3)),
                ("两个 KV 头、head_dim 2", "结果的第一维是 KV 头：同一个头的 token 按顺序排在一起，不同头的不混",
                 (make_pool(heads=2, n_blocks=4, head_dim=2), 0, [3, 1, 2], 5)),
                ("两层的块池", "只取第 layer 层", (make_pool(n_layers=2), 1, [0, 2], 3)),
                ("最后一块正好写满", "length 是块大小的整数倍时，最后一块是满的：它的每个位置都属于这条序列",
                 (make_pool(), 0, [1, 2], 4)),
                ("块表比需要的长", "块表可能比 length 需要的长：用到几块、最后一块取几个，都由 length 决定",
                 (make_pool(n_blocks=4), 0, [2, 0, 3], 3)),
                ("块大小 3、只有一块", "块大小不一定是 2 的幂；也可能只有一块，还没写满", (make_pool(block_size=3), 0, [1], 2))) + [
        ("随机输入", "块表是 list、正好够用、最后一块没写满", "对照上面手算的例子", random_gather(rng, 50), play_gather),
        ("随机输入", "最后一块正好写满", "length 是块大小的整数倍时，最后一块整块都属于这条序列",
         random_gather(rng, 40, full=True), play_gather),
        ("随机输入", "块表比需要的长", "用到几块由 length 决定，不由块表的长度决定", random_gather(rng, 40, longer=True), play_gather),
        ("随机输入", "块表是 numpy 数组（int64、int32）", "块表也可能是整数数组，dtype 不一定是 int64",
         random_gather(rng, 20, table=np.int64) + random_gather(rng, 20, table=np.int32, longer=True), play_gather),
        ("随机输入", "块大小 1", "块大小 1：每个 token 一块", random_gather(rng, 20, bs=1), play_gather),
        ("随机输入", "float32 的块池", "块池是什么 dtype，取回来的就是什么 dtype（分页版要和连续版逐位相同）",
         random_gather(rng, 20, dtype=np.float32), play_gather),
        ("讲义的工作量", "小模型解码（块大小 3、4）", "分页版要和连续版逐位相同：每个位置都取对、不转换类型", [3, 4], play_decode)]


# ============================================================ 练习 3：fork、写时复制、free
def play_cow(impl, inp):
    """inp = (块大小, 操作)：("new", 名)、("fork", 原, 新)、("free", 名)、("append", 名, n) = reserve(n)、写进 n 个
    token、length += n。每步之后看块池：块号按在块表里第一次出现的先后改名（空闲表的顺序随你）。"""
    import paged_kv
    bs, ops = inp
    mem, tok, seqs = np.full((64, bs), -1), 100, {}      # mem[块, 位置] = 写进去的 token；写时复制整块搬
    pool = paged_kv.BlockPool(None, n_blocks=64, block_size=bs, copy_fn=lambda s, d: mem.__setitem__(d, mem[s]))
    yield f"pool = BlockPool(None, n_blocks=64, block_size={bs})"
    for op in ops:
        name, seen = op[-1] if op[0] == "fork" else op[1], {}
        yield {"new": f"{name} = PagedSequence(pool)", "fork": f"{name} = {op[1]}.fork()", "free": f"{name}.free()",
               "append": f"{name}.reserve({op[-1]})；写进 {op[-1]} 个 token；{name}.length += {op[-1]}"}[op[0]]
        if op[0] == "new":
            seqs[name] = impl["PagedSequence"](pool)
        elif op[0] == "fork":
            seqs[name] = seqs[op[1]].fork()
        elif op[0] == "free":
            seqs[name].free()
        else:
            s, n = seqs[name], op[2]
            blk, off = (np.asarray(x).astype(np.int64) for x in s.reserve(n))
            seen["reserve 之后的 length"] = s.length
            if blk.shape == off.shape == (n,) and np.all((blk >= 0) & (blk < 64) & (off >= 0) & (off < bs)):
                mem[blk, off] = np.arange(tok, tok + n)
            s.length, tok = s.length + n, tok + n
        names = {}
        for s in seqs.values():
            for b in s.blocks:
                names.setdefault(int(b), len(names))
        if op[0] == "append":
            seen["reserve 返回的 (块, 偏移)"] = ([names.get(b, "?") for b in blk.tolist()], off.tolist())
        at = {k: np.arange(s.length) for k, s in seqs.items()}
        yield {"写时复制次数": pool.n_cow, "块表（块号按出现的先后改名）": {k: [names[int(b)] for b in s.blocks]
                                                               for k, s in seqs.items()},
               "ref_count（按改名后的块号）": [int(pool.ref_count[b]) for b in names], "空闲块数": pool.num_free,
               "和别的序列共用一个块表 list 的": [k for k, s in seqs.items()
                                      if any(o.blocks is s.blocks for o in seqs.values() if o is not s)],
               **seen, "length": {k: s.length for k, s in seqs.items()},
               "每条序列读出的 token": {k: mem[np.asarray(s.blocks, dtype=np.int64)[at[k] // bs], at[k] % bs].tolist()
                                  if len(s.blocks) * bs >= s.length else "块表放不下" for k, s in seqs.items()}}


def random_cow(rng, n, sizes, counts):
    out = []
    for _ in range(n):
        bs, ops, live = int(rng.choice(sizes)), [("new", "s0")], ["s0"]
        for i in range(1, 15):
            r, s = rng.random(), str(rng.choice(live))
            if r < 0.25 and len(live) < 5:
                live.append(f"s{i}")
                ops.append(("fork", s, f"s{i}"))
            elif r < 0.33 and len(live) > 1:
                live.remove(s)
                ops.append(("free", s))
            else:
                ops.append(("append", s, max(1, int(rng.choice(counts(bs))))))
        out.append((bs, ops))
    return out


def groups_3():
    rng, a = np.random.default_rng(3), [("new", "a")]
    return hand(play_cow,
                ("reserve：按需分配、返回位置", "n 个新 token 要有地方放：不够才分配新块；位置 p 在块表第 p // 块大小 项、块内"
                 "第 p % 块大小 个；length 由调用者加", (4, a + [("append", "a", 5), ("append", "a", 2)])),
                ("fork", "fork 不拷数据：新序列和原来的共用每一块（每块多一个使用者），块表却是它自己的一份",
                 (2, a + [("append", "a", 3), ("fork", "a", "b")])),
                ("写时复制", "往一个没写满、又有别的序列共用的块里写之前，先复制一份自己的；旧块少一个使用者",
                 (2, a + [("append", "a", 3), ("fork", "a", "b"), ("append", "b", 1)])),
                ("最后一块写满了", "最后一块已经写满：新 token 进新块，共用的块用不着复制",
                 (2, a + [("append", "a", 4), ("fork", "a", "b"), ("append", "b", 1)])),
                ("只有自己在用的块", "复制是为了不写坏别人的数据：只有自己在用的块直接写",
                 (2, a + [("append", "a", 3), ("fork", "a", "b"), ("append", "b", 1), ("append", "a", 1)])),
                ("一次写几个 token、跨过块边界", "一次写几个 token：写进共用的最后一块之前也要先复制它，新块添在它后面",
                 (4, a + [("append", "a", 5), ("fork", "a", "b"), ("append", "b", 6)])),
                ("free", "free：每块少一个使用者（还有人用的块不回空闲表），块表清空、length 归零",
                 (2, a + [("append", "a", 3), ("fork", "a", "b"), ("free", "a"), ("free", "b")]))) + [
        ("随机输入", "fork / reserve(1) / free 的随机脚本", "对照上面手算的例子",
         random_cow(rng, 30, range(1, 17), lambda bs: [1]), play_cow),
        ("随机输入", "reserve(n) 一次写几个 token（跨块边界）", "一次写几个 token：先处理共用的最后一块，再添新块",
         random_cow(rng, 30, range(1, 17), lambda bs: [2, bs - 1, bs, bs + 1, 2 * bs + 1]), play_cow),
        ("随机输入", "块大小 1", "块大小 1：每个 token 一块，最后一块总是满的",
         random_cow(rng, 10, [1], lambda bs: [1, 2, 3]), play_cow),
        ("讲义的工作量", "小模型解码，其中一条 fork 出来（块大小 3、4）", "对照上面的小例子：fork、写时复制、free",
         [3, 4], play_decode)]


# ============================================================ 练习 4：链式块哈希和前缀匹配
def play_hash(impl, inp):
    tokens, block = inp
    yield call("block_hashes", tokens, block)
    yield {"返回值": impl["block_hashes"](tokens, block), "调用之后的 tokens": tokens}


def play_match(impl, inp):
    hashes, cache = inp
    yield call("match_prefix", hashes, cache)
    yield {"返回值": impl["match_prefix"](hashes, cache), "调用之后的 hashes": hashes, "调用之后的 cache": cache}


def step_match(state, blocks):
    """块号是 7 的倍数的块不进缓存（像被淘汰了）：于是有请求"后面的块在、前面的不在"。"""
    impl, cache = state
    hits = impl["match_prefix"](blocks, cache)
    cache.update(b for b in blocks if b % 7)
    return hits


def groups_4():
    rng = np.random.default_rng(4)

    def tokens(n, form, dtype=np.int64):
        cut = [(rng.integers(0, 50_000, int(rng.integers(0, 5 * bs + 1))), int(bs)) for bs in rng.integers(1, 17, n)]
        return [(form(t.tolist()) if form in (list, tuple) else t.astype(dtype), bs) for t, bs in cut]

    def matches(n, form, cache):
        out = []
        for _ in range(n):
            name = (lambda i: f"h{i}") if form is list else int
            names = [name(i) for i in rng.permutation(12)[:int(rng.integers(0, 7))]]
            inside = [x for x in names if rng.random() < 0.75] + [name(i) for i in rng.integers(0, 12, 2)]
            out.append((form(names), set(inside) if cache is set else dict.fromkeys(inside, 0)))
        return out
    stop = "第一次没命中就停：前面缺了一块，后面的块在缓存里也用不上"
    return hand(play_hash,
                ("一个整块", "一块的哈希：SHA-256(空字节串 ‖ 这一块 token 的 int64 字节)，十六进制的前 12 位", ([1, 2, 3, 4], 4)),
                ("结尾不满一块", "只有完整的块有哈希：结尾不满一块的 token 不算", ([1, 2, 3, 4, 5, 6], 4)),
                ("两块：链式", "第 2 块的哈希要把第 1 块的完整哈希（32 字节的 digest）接在前面一起算",
                 ([1, 2, 3, 4, 5, 6, 7, 8], 4)),
                ("int32 的 numpy 数组", "tokens 的 dtype 不一定是 int64：不管传进来的是什么，都按 int64 的字节算",
                 (np.arange(1, 9, dtype=np.int32), 4)),
                ("tuple", "tokens 也可能是 tuple", ((1, 2, 3, 4, 5, 6, 7, 8, 9), 3))) + hand(
        play_match,
        ("全部命中", "数从第一块起连续有几个哈希在 cache 里", (["a", "b"], {"a": 0, "b": 1})),
        ("第一块就没命中", stop, (["a", "b", "c"], {"b": 1, "c": 2})),
        ("中间断了", stop, (["a", "b", "c", "d"], {"a", "b", "d"})),
        ("空的", "没有块：命中 0 块", ([], {})),
        ("块号的 tuple 和 set", "hashes 也可能是块号的 tuple，cache 是集合：只用 h in cache", ((5, 8, 2), {5, 8}))) + [
        ("随机输入", "tokens 是 list（块大小 1–16，长 0 到 5 块）", "对照上面手算的例子", tokens(60, list), play_hash),
        ("随机输入", "tokens 是 tuple", "tokens 也可能是 tuple", tokens(30, tuple), play_hash),
        ("随机输入", "tokens 是 int64 的 numpy 数组", "tokens 也可能是 numpy 数组", tokens(30, np.ndarray), play_hash),
        ("随机输入", "tokens 是 int32 的 numpy 数组", "不管 tokens 是什么 dtype，都按 int64 的字节算",
         tokens(30, np.ndarray, np.int32), play_hash),
        ("随机输入", "hashes 是字符串的 list，cache 是 dict", "对照上面手算的例子", matches(60, list, dict), play_match),
        ("随机输入", "hashes 是块号的 tuple，cache 是 set", "只用 h in cache", matches(60, tuple, set), play_match),
        ("讲义的工作量", "合成 trace 的前 2,000 个请求", stop, [("match_prefix(块号的 tuple, cache)，再把块号放进 cache"
                                                          "（7 的倍数除外）", 2000, lambda impl: (impl, set()), step_match)],
         play_trace)]


# ============================================================ 练习 5：LRU（选做 S3-FIFO）
def play_cache(impl, inp):
    name, cap, ops = inp
    yield f"c = {name}({cap})"
    c = impl[name](cap)
    for op, blocks in ops:
        yield f"c.{op}({blocks})" if blocks is not None else f"c.{op}()"
        got = c.evict() if blocks is None else getattr(c, op)(blocks)
        yield {"返回值": got, "缓存里的块": sorted(c.entries), "调用之后的 blocks": blocks}


def step_cache(c, blocks):
    hits = c.match(blocks)
    c.insert(blocks)
    return hits


def random_ops(rng, n, name, caps, p_match, universe=12, n_ops=30):
    return [(name, int(rng.choice(caps)), [("match" if rng.random() < p_match else "insert",
                                            rng.permutation(universe)[:int(rng.integers(1, 6))].tolist())
                                           for _ in range(n_ops)]) for _ in range(n)]


def groups_5():
    rng = np.random.default_rng(5)
    on_trace = [(f"c = {name}({cap})，每个请求 c.match(块号) 再 c.insert(块号)", 2000,
                 lambda impl, name=name, cap=cap: impl[name](cap), step_cache)
                for name, cap in (("LRUCache", 300), ("LRUCache", 3000), ("S3FIFOCache", 300))]
    lru = lambda cap, *ops: ("LRUCache", cap, list(ops))        # noqa: E731
    return hand(play_cache,
                ("放进来的块能命中", "touch 把不在缓存里的块放进来", lru(3, ("insert", [1, 2, 3]), ("match", [1, 2, 9]))),
                ("超出容量", "超出容量时淘汰最久没被碰过的块（insert 从最后一块往前碰：块 3 最旧）",
                 lru(3, ("insert", [1, 2, 3]), ("insert", [4]))),
                ("evict 的返回值", "evict 删掉一块，返回它的块号", lru(3, ("insert", [1, 2]), ("evict", None))),
                ("碰过的块变成最新的", "已经在缓存里的块又被碰了一次，也要变成最新的",
                 lru(2, ("insert", [1]), ("insert", [2]), ("insert", [1]), ("insert", [3]))),
                ("match 不算使用", "match 只读：查一下命中几块，不改谁新谁旧",
                 lru(2, ("insert", [1]), ("insert", [2]), ("match", [1]), ("insert", [3])))) + [
        ("随机输入", "只有 insert 的随机脚本（容量 1–8）", "对照上面手算的例子",
         random_ops(rng, 30, "LRUCache", range(1, 9), 0.0), play_cache),
        ("随机输入", "insert 和 match 混着", "match 只读：不改谁新谁旧", random_ops(rng, 30, "LRUCache", range(1, 9), 0.4),
         play_cache),
        ("讲义的工作量", "合成 trace 的前 2,000 个请求（容量 300、3,000 块）", "对照上面的小例子", on_trace[:2], play_trace),
        ("选做", "S3-FIFO：docstring 的例子", "照 docstring 的规则：小队列、主队列、幽灵队列",
         [("S3FIFOCache", 10, [("insert", [b]) for b in list(range(10)) + [0, 0, 10]])], play_cache),
        ("选做", "S3-FIFO：随机脚本（容量 10、20）", "照 docstring 的规则一步一步对",
         random_ops(rng, 20, "S3FIFOCache", [10, 20], 0.3, 40, 60), play_cache),
        ("选做", "S3-FIFO：合成 trace 的前 2,000 个请求（容量 300）", "照 docstring 的规则一步一步对", on_trace[2:], play_trace)]


# ============================================================ 练习 6：基数树
def tree(t):
    """树 → {从根出发的路径 '[1 2]→[3 4]': (时刻, ref)}：和孩子的先后无关。"""
    out, stack = {}, [("", t.root)]
    while stack:
        path, node = stack.pop()
        for child in node.children.values():
            p = path + "→" * bool(path) + "[" + " ".join(map(str, child.key)) + "]"
            out[p] = (child.last_access, child.ref)
            stack.append((p, child))
    return out


def play_radix(impl, inp):
    cap, rule, ops = inp
    yield f"t = RadixCache({cap}, rule={rule!r})"
    t = impl["RadixCache"](cap, rule)
    for op, seq, lock in ops:
        yield f"t.{op}({seq}{', lock=True' * lock})"
        before = tree(t)
        got = t.insert(seq, lock=lock) if op == "insert" else t.match(seq)
        now = tree(t)
        yield {**({"match 之后树没变": now == before} if op == "match" else {}), "返回值": got, "树里的节点": sorted(now),
               "size": t.size, "n_splits": t.n_splits, "各节点的时刻 last_access": {p: a for p, (a, r) in now.items()},
               "各节点的 ref": {p: r for p, (a, r) in now.items()}, "调用之后的 seq": seq}


def random_radix(rng, n, caps, rules, lock_p, vocab=4):
    out = []
    for _ in range(n):
        bases, ops = [rng.integers(0, vocab, int(rng.integers(3, 9))).tolist() for _ in range(3)], []
        for _ in range(14):
            b, r = bases[int(rng.integers(0, 3))], rng.random()
            seq = b[:int(rng.integers(1, len(b) + 1))] if r < 0.6 else list(b)
            seq += rng.integers(0, vocab, int(rng.integers(1, 4))).tolist() if r > 0.7 else []
            ops.append(("match", seq, False) if rng.random() < 0.3 else ("insert", seq, bool(rng.random() < lock_p)))
        out.append((rng.choice(caps), str(rng.choice(rules)), ops))
    return out


def groups_6():
    rng = np.random.default_rng(6)
    ins = lambda *seqs, cap=None, lock=False: (cap, "sglang", [("insert", s, lock) for s in seqs])   # noqa: E731
    return hand(play_radix,
                ("讲义的例子：[1 2 3 4] 再 [1 2 9]", "分叉点在节点中间：把节点拆成两段，剩下的挂成一片新叶子",
                 ins([1, 2, 3, 4], [1, 2, 9])),
                ("match 停在节点中间", "match 可以停在一个节点的中间：孩子的 key 只有前一部分相同，也算上那部分",
                 (None, "sglang", [("insert", [1, 2, 3, 4], False)]
                  + [("match", s, False) for s in ([1, 2, 5], [1, 2, 3, 4, 5], [7], [])])),
                ("拆分的位置", "拆开的两段接起来正好是原来的 key：前一段是和 seq 相同的部分", ins([5, 6, 7, 8, 9], [5, 6, 7, 1])),
                ("插入已有序列的前缀", "seq 走完了就停：只拆节点，不长新叶子", ins([1, 2, 3, 4], [1, 2])),
                ("同一个序列插两次", "整段都在树里：不拆也不长叶子", ins([3, 1, 4, 1, 5], [3, 1, 4, 1, 5])),
                ("再拆一次拆出来的后半段", "拆开以后后半段挂在新的前半段下面，它记着的父节点也要跟着变：以后再拆它，"
                 "新节点要接回它真正的父节点下面", ins([1, 2, 3, 4], [1, 2, 9], [1, 2, 3, 7])),
                ("拆一个有孩子的节点", "拆一个有孩子的节点：原来的孩子一个不少，跟着后半段走", ins([1, 2, 3, 4], [1, 2, 3, 5], [1, 9])),
                ("lock=True", "lock=True：走过的每个节点和新叶子都多一个锁；拆出来的前半段和原来的锁一样多",
                 ins([1, 2, 3, 4], [1, 2, 9], [1, 2, 3], lock=True)),
                ("容量 4：超出就淘汰", "超出容量时淘汰最久没用的叶子：新叶子要让淘汰找得到，size 要记对",
                 ins([1, 2, 3], [4, 5], [1, 2, 3, 6], cap=4)),
                ("整段命中也算用过", "整段命中的节点也刚用过：它的时刻要更新", ins([1, 2, 3], [4, 5], [1, 2, 3], [6], cap=5))) + [
        ("随机输入", "容量无限，序列反复出现（整段命中、停在节点中间、拆节点）", "对照上面手算的例子",
         random_radix(rng, 40, [None], ["sglang"], 0.0), play_radix),
        ("随机输入", "lock=True", "lock=True：走过的每个节点和新叶子都多一个锁", random_radix(rng, 20, [None], ["sglang"], 0.5),
         play_radix),
        ("随机输入", "容量 3–13：超出就淘汰", "超出容量时淘汰最久没用的叶子：时刻、size 都要记对",
         random_radix(rng, 40, range(3, 14), ["sglang", "trim"], 0.2), play_radix),
        ("讲义的工作量", "合成 trace 的前 2,000 个请求按块建树（容量 1,000 块）", "对照上面的小例子",
         [("t = RadixCache(1000)，每个请求 t.insert(块号的 list)", 2000, lambda impl: impl["RadixCache"](1000),
           lambda t, blocks: t.insert(list(blocks)))], play_trace)]


EXERCISES = {
    1: Exercise("ex1_kv_bytes", ("kv_bytes_per_token",), "每个 token 的 KV 字节数", "paged_kv", groups_1),
    2: Exercise("ex2_gather_kv", ("gather_kv",), "按块表取回 K/V", "paged_kv", groups_2),
    3: Exercise("ex3_cow", ("PagedSequence",), "fork、写时复制、free", "paged_kv", groups_3),
    4: Exercise("ex4_block_hashes", ("block_hashes", "match_prefix"), "链式块哈希和前缀匹配", "kv_store.prefix", groups_4),
    5: Exercise("ex5_lru", ("LRUCache", "S3FIFOCache"), "淘汰策略 LRU", "kv_store.policies", groups_5),
    6: Exercise("ex6_radix", ("RadixCache",), "基数树的 match 和 insert", "kv_store.radix_tree", groups_6),
}


def reference(number):
    """讲义的实现：({名字: 对象}, 它所在的文件)。"""
    module = importlib.import_module(EXERCISES[number].module)
    return {name: getattr(module, name) for name in EXERCISES[number].names if hasattr(module, name)}, module.__file__
