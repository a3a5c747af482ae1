"""练习 1–3 的用例（分页 KV：每个 token 的字节数、按块表取回 K/V、fork 和写时复制）：每个练习一个 play 和 groups_N。"""
from types import SimpleNamespace

import numpy as np

import paged_kv
from exercises.cases_common import hand, play_decode, text


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
