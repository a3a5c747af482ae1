"""练习 1–3 的用例（一块 GPU 里的块：字节数、按块表取回、fork / 写时复制 / free）。

每个练习先是几个能手算的小例子（它们教东西），再是和参考实现逐个比的随机用例（它们抓漏网的错误）：
块大小 1、3、5、16，长度正好是块大小的整数倍、只有一块，输入既有 list 也有 numpy 数组。随机数的种子固定。
参考实现一律从讲义的模块里取（exercises.mine.reference），这里不写第二份；提示按错出来的值对症下药。
"""
from types import SimpleNamespace

import numpy as np

from exercises.checking import CLOCK, Fail, call_text, equal, mine, ref, same, show, student
from exercises.mine import PROBES, bind, lecture_module, reference

BLOCK_SIZES = (1, 3, 5, 16)       # 随机用例的块大小：不是 2 的幂、只有 1、和常见的 16


# ============================================================ 练习 1：每个 token 的 KV 字节数
def _kv_twins(att, n_layers, n_heads, head_dim, n_kv_heads=None, kv_lora_rank=None, rope_dim=None, dtype_bytes=2):
    """常见的错误写法算出来的值 → 对应的提示（按学生返回的值找原因）。"""
    kv = n_kv_heads or 1
    heads = {"MHA": n_heads, "GQA": kv, "MQA": 1}.get(att)
    out = []
    if heads is not None:
        right = 2 * heads * head_dim
        if att == "GQA":
            out.append((n_layers * 2 * n_heads * head_dim * dtype_bytes,
                        "GQA 只有 n_kv_heads 组 K、V（查询头共用它们），不是 n_heads 组"))
            out.append((n_layers * 2 * (n_heads // kv) * head_dim * dtype_bytes,
                        "n_heads / n_kv_heads 是每组共用的查询头数；要存的是 n_kv_heads 组"))
        if att == "MHA" and n_kv_heads:
            out.append((n_layers * 2 * n_kv_heads * head_dim * dtype_bytes,
                        "MHA 每个查询头都有自己的 K、V：用 n_heads，不看 n_kv_heads"))
        if att == "MQA":
            out.append((n_layers * 2 * n_heads * head_dim * dtype_bytes, "MQA：所有查询头共用一组 K、V"))
            out.append((n_layers * 2 * kv * head_dim * dtype_bytes, "MQA 只有一组 K、V，不看 n_kv_heads"))
        out.append((n_layers * heads * head_dim * dtype_bytes, "K、V 各一份：每层存 2 × 头数 × head_dim 个数（这里正好少了一半）"))
    else:
        right = (kv_lora_rank or 0) + (rope_dim or 0)
        out.append((2 * n_layers * right * dtype_bytes, "MLA 不乘 2：K 和 V 都由同一个 c_KV 还原出来，只存一份"))
        out.append((n_layers * (kv_lora_rank or 0) * dtype_bytes, "MLA 还要存 rope_dim 维的带 RoPE 的 key"))
        out.append((n_layers * n_heads * right * dtype_bytes, "MLA 存的 c_KV 和 RoPE key 和头数无关（所有头共用）"))
    if dtype_bytes != 2:
        out.append((n_layers * right * 2, f"每个数的字节数是 dtype_bytes（这里是 {dtype_bytes}），不是固定的 2"))
    out.append((right * dtype_bytes, "还要乘层数 n_layers：每一层都有自己的 K、V"))
    return out


def _kv_check(m, args, kw, expected, hint):
    """调用一次学生的 kv_bytes_per_token，和 expected 比；不对时按返回值找提示。"""
    given = call_text("kv_bytes_per_token", args, kw)
    got = student(m["kv_bytes_per_token"], "kv_bytes_per_token", *args, given=given, **kw)
    number = isinstance(got, (int, float, np.integer, np.floating)) and not isinstance(got, bool)
    whole = number and isinstance(got, (int, np.integer))
    if not number:
        raise Fail(given, f"{expected}（整数）", show(got), "返回一个整数（字节数）")
    if not whole and got == expected:
        raise Fail(given, f"{expected}（整数）", show(got),
                   "值对了，但要返回整数（int）：n_heads / n_kv_heads 这样的 / 除法得到 float，用整数相乘或 //")
    if got != expected:
        whys = [why for value, why in _kv_twins(*args, **kw) if got == value and value != expected]
        if whys:
            hint = "；或者：".join(dict.fromkeys(whys))      # 几种错法算出同一个数时都说出来
        if not whole:                                       # 值不对时先说值；类型是顺带的一句
            hint += "（另外，要返回整数 int：/ 除法得到的是 float）"
        raise Fail(given, f"{expected}（整数）" if not whole else show(expected), show(got), hint)


def _kv_case(args, kwargs, expected, hint):
    return lambda m: _kv_check(m, args, kwargs, expected, hint)


def _kv_unknown(m):
    """未知的注意力种类：raise ValueError（讲义的模型表靠它拒绝写错的名字）。"""
    args = ("FOO", 32, 32, 128)
    given = call_text("kv_bytes_per_token", args)
    try:
        got = m["kv_bytes_per_token"](*args)
    except ValueError:
        return
    except NotImplementedError:
        raise
    except Exception as e:
        raise Fail(given, "raise ValueError", f"raise {type(e).__name__}",
                   "未知的 attention 要 raise ValueError（比如最后一个 else: raise ValueError(...)），不是别的异常")
    raise Fail(given, "raise ValueError", f"返回了 {show(got)}",
               "未知的 attention 不能返回一个数（一个写错的名字会悄悄算出 0 字节）：raise ValueError")


def _kv_all_models(m):
    """讲义里的每个模型形状 × 四种注意力 × dtype_bytes 1、2、4（FP8、fp16、fp32），和参考实现逐个比。"""
    tiers = lecture_module("tiers")
    refk = reference(1)["kv_bytes_per_token"]
    shapes = [v for v in vars(tiers).values() if isinstance(v, tiers.ModelSpec)]
    if not shapes:
        raise Fail("讲义的模型表", "至少一个 ModelSpec", "0 个", "讲义里没有 ModelSpec")
    for spec in shapes:
        for att in ("MHA", "GQA", "MQA", "MLA"):
            for nbytes in (1, 2, 4):
                kw = dict(n_kv_heads=spec.n_kv_heads, kv_lora_rank=512, rope_dim=64, dtype_bytes=nbytes)
                args = (att, spec.n_layers, spec.n_heads, spec.head_dim)
                _kv_check(m, args, kw, ref(lambda: refk(*args, **kw)),
                          f"和参考实现不同（{spec.name} 的形状）：对照上面几个手算的用例")


CASES_1 = [
    ("MHA：LLaMA2-7B（32 层，32 个头 × 128 维，fp16）= 512 KiB",
     _kv_case(("MHA", 32, 32, 128), {}, 524_288, "32 层 × 2（K 和 V）× 32 头 × 128 维 × 2 字节")),
    ("GQA：LLaMA3-8B（32 个查询头，8 组 K/V）= 128 KiB",
     _kv_case(("GQA", 32, 32, 128), {"n_kv_heads": 8}, 131_072, "GQA：每层 2 × n_kv_heads × head_dim 个数")),
    ("MQA：LLaMA2-13B 的形状（40 层，40 个头 × 128 维）只存一组 K/V",
     _kv_case(("MQA", 40, 40, 128), {}, 20_480, "MQA：所有查询头共用一组 K 和 V → 每层 2 × head_dim 个数")),
    ("MLA：DeepSeek-V2（60 层，d_c = 512，d_h^R = 64）",
     _kv_case(("MLA", 60, 128, 128), {"kv_lora_rank": 512, "rope_dim": 64}, 69_120,
              "MLA 每层只存 c_KV 和 RoPE key：kv_lora_rank + rope_dim 个数，不乘 2，也和头数无关")),
    ("FP8：LLaMA2-70B（GQA 8 组）每个数 1 字节 = 160 KiB",
     _kv_case(("GQA", 80, 64, 128), {"n_kv_heads": 8, "dtype_bytes": 1}, 163_840, "字节数要乘 dtype_bytes")),
    ("fp32：LLaMA2-7B 每个数 4 字节 = 1 MiB",
     _kv_case(("MHA", 32, 32, 128), {"dtype_bytes": 4}, 1_048_576, "字节数要乘 dtype_bytes")),
    ("未知的注意力种类：raise ValueError", _kv_unknown),
    ("讲义里的每个模型形状 × 四种注意力 × 1、2、4 字节：和参考实现相同", _kv_all_models),
]


# ============================================================ 练习 2：按块表取回 K/V
def _toy_pool(n_layers=1, n_blocks=3, heads=1, block_size=2, head_dim=1):
    """k[层, 块, 头, 位置, 维] = 1000·层 + 100·块 + 10·头 + (位置 + 1) + 0.1·维（一眼看出取的是哪儿）；v = -k。
    位置从 1 数起：没有一个值是 0.0，漏取的 token（输出里留着 np.zeros 的 0）一定显出来。"""
    idx = np.indices((n_layers, n_blocks, heads, block_size, head_dim))
    k = 1000.0 * idx[0] + 100 * idx[1] + 10 * idx[2] + (idx[3] + 1) + 0.1 * idx[4]
    return SimpleNamespace(k=k, v=-k, block_size=block_size)


def _contiguous(pool, layer, blocks, length):
    """手算的期望：逐个 token 从 (块表[t // 块大小], t % 块大小) 取——最慢、最直白的写法。"""
    bs = pool.block_size
    k = np.stack([pool.k[layer, blocks[t // bs], :, t % bs] for t in range(length)], axis=1)
    v = np.stack([pool.v[layer, blocks[t // bs], :, t % bs] for t in range(length)], axis=1)
    return k, v


def _gather_twins(pool, layer, blocks, length):
    """常见的错误写法取出来的 k → 提示。"""
    bs, nb = pool.block_size, len(blocks)
    H, hd = pool.k.shape[2], pool.k.shape[4]
    picked = pool.k[layer, list(blocks)]
    out = [(picked.reshape(H, -1, hd)[:, :length] if H * nb * bs * hd == picked.size else None,
            "没有 transpose 就 reshape：pool.k[layer, blocks] 是 (块, 头, 位置, 维)，先把头换到最前面，再把块和位置并成一维"),
           (picked.transpose(1, 0, 2, 3).reshape(H, -1, hd), "最后一块没写满：切到前 length 个位置（[:, :length]）"),
           (pool.k[layer, :nb].transpose(1, 0, 2, 3).reshape(H, -1, hd)[:, :length],
            "要按块表 blocks 取物理块，不是取物理块 0、1、……"),
           (pool.k[0, list(blocks)].transpose(1, 0, 2, 3).reshape(H, -1, hd)[:, :length], "只取第 layer 层（pool.k 的第一维是层）"),
           (pool.v[layer, list(blocks)].transpose(1, 0, 2, 3).reshape(H, -1, hd)[:, :length], "k 和 v 换了位置：返回 (k, v)")]
    return [(x, why) for x, why in out if x is not None]


def _gather_check(m, pool, layer, blocks, length, hint, given=None):
    given = given or (f"pool.k.shape = {pool.k.shape}（层, 块, KV 头, 块内位置, 头维度），k = 1000·层 + 100·块 + 10·头 "
                      f"+ (位置 + 1) + 0.1·维，v = -k，block_size = {pool.block_size}；"
                      + call_text("gather_kv", ("pool", layer, blocks, length)).replace("'pool'", "pool"))
    got = student(m["gather_kv"], "gather_kv", pool, layer, blocks, length, given=given,
                  what=("pool（它的 k、v）", "layer", "blocks", "length"))
    exp = _contiguous(pool, layer, blocks, length)
    try:
        k, v = got
    except (TypeError, ValueError):
        raise Fail(given, "(k, v) 两个数组", show(got, 200), "返回一对数组 (k, v)（tuple 或 list 都行）") from None
    for name, x, want in (("k", k, exp[0]), ("v", v, exp[1])):
        shape = np.shape(x)
        if shape != want.shape:
            why = "形状应当是 (n_kv_heads, length, head_dim)：拼接的是块内位置那一维吗？"
            if len(shape) == 3 and shape[1] == len(blocks) * pool.block_size != length:
                why = "最后一块没写满：切到前 length 个位置（[:, :length]）"
            if len(shape) == 3 and shape[1] == length // pool.block_size * pool.block_size < length:
                why = ("少了没写满的最后一块：块数是 ceil(length / block_size)（range(0, length, block_size)），"
                       "最后一块只取到 length")
            raise Fail(given, f"{name} 的形状 {want.shape}", f"{shape}", why)
        if not equal(np.asarray(x), want):
            why = hint
            full = length // pool.block_size * pool.block_size       # 满块里的 token 数；之后是没写满的最后一块
            if full < length and equal(np.asarray(x)[:, :full], want[:, :full]) and not np.asarray(x)[:, full:].any():
                why = (f"前 {full} 个 token 对，最后 {length - full} 个是 0（没取到）：没写满的最后一块也要取——"
                       "块数是 ceil(length / block_size)（range(0, length, block_size)），最后一块只取到 length")
            for twin, twin_why in _gather_twins(pool, layer, blocks, length):
                if name == "k" and equal(np.asarray(x), twin):
                    why = twin_why
                    break
            if name == "v" and equal(np.asarray(x), exp[0]):
                why = "v 和 k 一样按块表取，但取的是 pool.v"
            if np.asarray(x).dtype != want.dtype:
                why = f"dtype 变了（{np.asarray(x).dtype}）：不要转换类型，分页版要和连续版逐位相同"
            raise Fail(given, f"{name} = {show(want, 300)}", show(x, 300), why)


def _gather_case(pool_kw, layer, blocks, length, hint):
    return lambda m: _gather_check(m, _toy_pool(**pool_kw), layer, blocks, length, hint)


def _gather_random(m):
    """随机的块池和块表：块大小 1、3、5、16；长度正好满块、只有一块、最后一块只写了 1 个；块表是 list 也是 numpy 数组。"""
    rng = np.random.default_rng(20)
    for bs in BLOCK_SIZES:
        for n_layers, heads, hd in ((1, 1, 1), (2, 3, 2), (3, 2, 4)):
            nb = 6
            pool = _toy_pool(n_layers=n_layers, n_blocks=nb, heads=heads, block_size=bs, head_dim=hd)
            for length in sorted({1, bs, 2 * bs, 3 * bs - 1, 3 * bs, 1 + bs, min(nb, 4) * bs}):
                k = -(-length // bs)
                table = rng.permutation(nb)[:k]
                layer = int(rng.integers(0, n_layers))
                for blocks in (table.tolist(), table.astype(np.int64)):
                    _gather_check(m, pool, layer, blocks, length, "第 t 个 token 在物理块 blocks[t // block_size] 的第 "
                                  "t % block_size 个位置：对照上面几个手算的用例")


def _paged_equals_contiguous(m):
    """小模型（第 2 讲的 TINY）四条序列逐 token 解码：分页（用你的 gather_kv）和连续 KVCache 的 logits 逐位相同。"""
    lab = lecture_module("transformer_lab")
    pk = lecture_module("paged_kv")
    cfg = lab.config_like(lab.TINY, max_seq=48)
    params = lab.init_params(cfg, seed=0)
    rng = np.random.default_rng(1)
    prompts = [rng.integers(0, cfg.vocab, n) for n in (3, 7, 12, 20)]
    for bs in (3, 4):
        pool = pk.BlockPool(cfg, n_blocks=40, block_size=bs)
        seqs = [pk.PagedSequence(pool) for _ in prompts]
        caches = [lab.KVCache(cfg, 1) for _ in prompts]
        worst, step = 0.0, 0
        given = (f"TINY 模型（种子 0），4 条序列（输入 3、7、12、20 个 token），块大小 {bs}，paged_step 每一层调用 "
                 "gather_kv(pool, layer, np.array(块表), 长度)")
        with bind([(reference(2)["gather_kv"], m["gather_kv"])]):
            feed = prompts
            for step in range(6):                          # 第 0 步是 prefill，之后逐 token 解码；块在池里交错
                outs = mine(given + f"，第 {step} 步", lambda: pk.paged_step(params, cfg, seqs, feed))
                refs = ref(lambda: [lab.forward(params, cfg, np.asarray(f)[None], cache=c)[0]
                                    for f, c in zip(feed, caches)])
                worst = max(worst, max(float(np.max(np.abs(o - r))) for o, r in zip(outs, refs)))
                if worst != 0.0:
                    break
                feed = [[int(np.argmax(r[-1]))] for r in refs]
        if worst != 0.0:
            raise Fail(given + f"，第 {step} 步", "max |logits 分页 − 连续| = 0.0", f"{worst:.3g}",
                       "按块表的顺序拼接；每个位置都要取对；不要转换 dtype（提示：先 transpose 再 reshape）")


CASES_2 = [
    ("块表 [2, 0]、长度 3：按块表的顺序取，最后一块只要 1 个位置",
     _gather_case({}, 0, [2, 0], 3, "第 t 个 token 在物理块 blocks[t // block_size] 的第 t % block_size 个位置")),
    ("块表 [1, 2]、长度 4：两个满块", _gather_case({}, 0, [1, 2], 4, "要按块表 blocks 取，不是取物理块 0、1……")),
    ("两个 KV 头、头维度 2：每个头各自拼接",
     _gather_case(dict(heads=2, head_dim=2, n_blocks=4), 0, [3, 1, 2], 5,
                  "pool.k[layer, blocks] 的形状是 (块数, 头, 块内位置, 维)：先把头放到最前面（transpose），"
                  "再把块和块内位置并成一维")),
    ("v 也要取对（v = -k）", _gather_case(dict(heads=2), 0, [2, 0], 3, "v 和 k 一样按块表取")),
    ("两层的池：只取第 layer 层", _gather_case(dict(n_layers=2), 1, [0, 2], 4, "pool.k 的第一维是层")),
    ("只有一块、没满：块大小 3，块表 [1]，长度 2",
     _gather_case(dict(block_size=3), 0, [1], 2, "第 t 个 token 在 blocks[t // block_size] 的第 t % block_size 个位置"
                  "（块大小 3 不是 2 的幂：别用位运算）；只有一块时也要切到 length")),
    ("随机的块池和块表（块大小 1、3、5、16，list 和 numpy 的块表）：和逐个 token 取的结果相同", _gather_random),
    ("小模型逐 token 解码（块大小 3 和 4）：分页版和连续 KV 缓存的 logits 逐位相同", _paged_equals_contiguous),
]


# ============================================================ 练习 3：fork、写时复制、free
def _pool(n_blocks=4, block_size=2):
    """只做簿记的块池（cfg=None）：copies 记下每次写时复制的 (源块, 新块)。"""
    pk = lecture_module("paged_kv")
    copies = []
    pool = pk.BlockPool(None, n_blocks=n_blocks, block_size=block_size, copy_fn=lambda s, d: copies.append((s, d)))
    return pool, copies


def _state(pool, *seqs):
    return dict(blocks=[list(s.blocks) for s in seqs], lengths=[s.length for s in seqs],
                ref_count=pool.ref_count.tolist(), n_free=pool.num_free)


def _filled(cls, pool, n_tokens):
    """一条已经写了 n_tokens 个 token 的序列：块直接用 pool.alloc() 分配（不依赖你的 reserve）。"""
    seq = cls(pool)
    seq.blocks = [pool.alloc() for _ in range(-(-n_tokens // pool.block_size))]
    seq.length = n_tokens
    return seq


def _case_fork(m):
    pool, copies = _pool()
    given = "pool = BlockPool(None, n_blocks=4, block_size=2)；a 写了 3 个 token（块表 [0, 1]）；b = a.fork()"
    a = _filled(m["PagedSequence"], pool, 3)
    b = mine(given, a.fork)
    same(_state(pool, a, b), dict(blocks=[[0, 1], [0, 1]], lengths=[3, 3], ref_count=[2, 2, 0, 0], n_free=2),
         given, "fork 不拷数据：新序列用同样的块表和 length，每块 pool.incref 一次")
    same(copies, [], given + " 之后的写时复制", "fork 时不复制任何块")
    b.blocks.append(99)
    same(list(a.blocks), [0, 1], given + "；b.blocks.append(99) 之后的 a.blocks",
         "新序列要有自己的块表：list(self.blocks)，不能和原序列共用一个 list")


def _case_reserve(m):
    pool, _ = _pool(n_blocks=4, block_size=4)
    given = "pool = BlockPool(None, n_blocks=4, block_size=4)；a = PagedSequence(pool)；a.reserve(5)"
    a = m["PagedSequence"](pool)
    blk, off = mine(given, lambda: a.reserve(5))
    same(list(a.blocks), [0, 1], given + " 之后的 a.blocks", "5 个 token 要 2 块：用 pool.alloc() 按需分配")
    same((np.asarray(blk).tolist(), np.asarray(off).tolist()), ([0, 0, 0, 0, 1], [0, 1, 2, 3, 0]),
         given + " 的返回值 (物理块, 偏移)", "位置 p = length + 0..n-1：物理块 = blocks[p // 块大小]，偏移 = p % 块大小")
    same(a.length, 0, given + " 之后的 a.length", "reserve 不改 length：写完 K/V 以后由调用者加")
    a.length = 5
    given += "；a.length = 5；a.reserve(3)"
    blk, off = mine(given, lambda: a.reserve(3))
    got = (list(a.blocks), np.asarray(blk).tolist(), np.asarray(off).tolist())
    hint = "块 1 还有 3 个空位：不用分配新块"
    if len(got[0]) == 2 and got[0][1] != 1:
        hint = "块 1 只有 a 在用（ref_count 1）：直接写，不复制——只在 ref_count > 1（被共享）时才写时复制"
    same(got, ([0, 1], [1, 1, 1], [1, 2, 3]), given, hint)


def _case_cow(m):
    pool, copies = _pool()
    given = "块大小 2；a 写了 3 个 token（块 0 满、块 1 写了 1 个）；b = a.fork()；b.reserve(1)"
    a = _filled(m["PagedSequence"], pool, 3)
    b = mine(given, a.fork)
    mine(given, lambda: b.reserve(1))
    same(copies, [(1, 2)], given + " 时的写时复制 (源块, 新块)",
         "最后一块没写满、ref_count > 1：要 pool.copy_block(旧块) 换成自己的一份")
    same(_state(pool, a, b), dict(blocks=[[0, 1], [0, 2]], lengths=[3, 3], ref_count=[2, 1, 1, 0], n_free=1),
         given, "复制以后旧块要 pool.decref 一次（b 不再用它）；a 的块表不变")
    mine(given + "；a.reserve(1)", lambda: a.reserve(1))
    same((copies, list(a.blocks)), ([(1, 2)], [0, 1]), given + "；a.reserve(1)",
         "块 1 现在只有 a 在用（ref_count 1）：直接写，不再复制")


def _case_cow_multi(m):
    pool, copies = _pool(n_blocks=8, block_size=4)
    given = "块大小 4；a 写了 5 个 token（块 0 满、块 1 写了 1 个）；b = a.fork()；b.reserve(6)（跨过块边界）"
    a = _filled(m["PagedSequence"], pool, 5)
    b = mine(given, a.fork)
    blk, off = mine(given, lambda: b.reserve(6))
    same(copies, [(1, 2)], given + " 时的写时复制 (源块, 新块)",
         "一次写好几个 token 时，也要先对没写满、被共享的最后一块（self.blocks[-1]）做写时复制，再分配新块——"
         "先分配的话，blocks[-1] 已经是新块，共享的旧块被 b 写坏了，a 的 KV 也跟着变了")
    same(_state(pool, a, b), dict(blocks=[[0, 1], [0, 2, 3]], lengths=[5, 5], ref_count=[2, 1, 1, 1] + [0] * 4,
                                  n_free=4), given, "复制出块 2 换掉块 1（旧块 decref），再分配块 3")
    same((np.asarray(blk).tolist(), np.asarray(off).tolist()), ([2, 2, 2, 3, 3, 3], [1, 2, 3, 0, 1, 2]),
         given + " 的返回值 (物理块, 偏移)", "位置 5..10：物理块 = blocks[p // 4]（复制以后的块表），偏移 = p % 4")


def _case_full_block(m):
    pool, copies = _pool()
    given = "块大小 2；a 写了 4 个 token（两块都满）；b = a.fork()；b.reserve(1)"
    a = _filled(m["PagedSequence"], pool, 4)
    b = mine(given, a.fork)
    mine(given, lambda: b.reserve(1))
    same(copies, [], given + " 时的写时复制", "最后一块已经写满：新 token 写进新块，不用复制共享的块")
    same(_state(pool, a, b), dict(blocks=[[0, 1], [0, 1, 2]], lengths=[4, 4], ref_count=[2, 2, 1, 0], n_free=1),
         given, "只给 b 分配一个新块")


def _case_free(m):
    pool, _ = _pool()
    given = "块大小 2；a 写了 3 个 token（块表 [0, 1]）；a.free()"
    a = _filled(m["PagedSequence"], pool, 3)
    mine(given, a.free)
    same(_state(pool, a), dict(blocks=[[]], lengths=[0], ref_count=[0, 0, 0, 0], n_free=4),
         given, "free：每块 pool.decref（降到 0 的回到空闲表），然后 blocks = []、length = 0")
    given = "块大小 2；a 写了 4 个 token；b = a.fork()；a.free()"
    a = _filled(m["PagedSequence"], pool, 4)
    b = mine(given, a.fork)
    mine(given, a.free)
    same(_state(pool, a, b), dict(blocks=[[], [2, 3]], lengths=[0, 4], ref_count=[0, 0, 1, 1], n_free=2),
         given, "还有别的序列在用的块只 decref，不回空闲表")
    mine(given + "；b.free()", b.free)
    same(_state(pool, a, b), dict(blocks=[[], []], lengths=[0, 0], ref_count=[0, 0, 0, 0], n_free=4),
         given + "；b.free()", "全部释放以后所有块都回到空闲表")


class _Memory:
    """块池里"写了什么"：mem[块, 位置] = token（-1 没写过）。写时复制由 copy_fn 搬一整块——和真的 K/V 一样。"""

    def __init__(self, n_blocks, bs):
        self.mem = np.full((n_blocks, bs), -1, dtype=np.int64)

    def copy(self, src, dst):
        self.mem[dst] = self.mem[src]


def _script(rng, bs, n_ops):
    """一串随机操作：("append", 序列, n) / ("fork", 序列) / ("free", 序列)。append = reserve(n)、写入、length += n。"""
    ops, live, made = [], [0], 1
    for _ in range(n_ops):
        r = rng.random()
        if r < 0.25 and len(live) < 6:
            ops.append(("fork", int(rng.choice(live)), made))
            live.append(made)
            made += 1
        elif r < 0.33 and len(live) > 1:
            s = int(rng.choice(live))
            ops.append(("free", s))
            live.remove(s)
        else:
            n = int(rng.choice([1, 1, 2, bs - 1, bs, bs + 1, 2 * bs + 1]))
            ops.append(("append", int(rng.choice(live)), max(1, n)))
    return ops


def _op_text(op):
    if op[0] == "append":
        return f"s{op[1]}.reserve({op[2]}) 并写入、length += {op[2]}"
    if op[0] == "fork":
        return f"s{op[2]} = s{op[1]}.fork()"
    return f"s{op[1]}.free()"


def _run_script(cls, ops, bs, n_blocks, timed):
    """在一个新块池上跑 ops，每一步之后记下能比较的状态（块号换成"第几次出现"的名字，空闲表的顺序不比）。"""
    pk = lecture_module("paged_kv")
    memory = _Memory(n_blocks, bs)
    pool = pk.BlockPool(None, n_blocks=n_blocks, block_size=bs, copy_fn=memory.copy)
    seqs, content, states, tok = {0: cls(pool)}, {0: []}, [], 100
    for step, op in enumerate(ops):
        kind, s = op[0], op[1]
        if kind == "fork":
            new = op[2]
            seqs[new] = timed(step, lambda s=s: seqs[s].fork())
            content[new] = list(content[s])
        elif kind == "free":
            timed(step, seqs[s].free)
            content[s] = []
        else:
            n = op[2]
            seq = seqs[s]
            blk, off = timed(step, lambda seq=seq, n=n: seq.reserve(n))
            blk, off = np.asarray(blk).astype(np.int64), np.asarray(off).astype(np.int64)
            pos = seq.length + np.arange(n)
            table = np.asarray(seq.blocks, dtype=np.int64)
            ok = blk.shape == (n,) and off.shape == (n,) and len(table) * bs >= seq.length + n
            ok = ok and np.array_equal(blk, table[pos // bs]) and np.array_equal(off, pos % bs)
            toks = list(range(tok, tok + n))
            tok += n
            if ok:
                memory.mem[blk, off] = toks
            seq.length += n
            content[s] += toks
            states.append(("reserve", ok))
        states.append(_canon(pool, seqs, content, memory, bs))
    return states


def _canon(pool, seqs, content, memory, bs):
    """块池的状态，和块号无关：块按在各序列块表里第一次出现的顺序改名；另记每条序列读出来的内容。"""
    names = {}
    for i in sorted(seqs):
        for b in seqs[i].blocks:
            names.setdefault(int(b), len(names))
    tables = {i: [names[int(b)] for b in seqs[i].blocks] for i in sorted(seqs)}
    refs = {names[b]: int(pool.ref_count[b]) for b in names}
    used_elsewhere = int(sum(1 for b in range(pool.n_blocks) if pool.ref_count[b] > 0 and b not in names))
    reads = {}
    for i in sorted(seqs):
        s = seqs[i]
        if s.length and len(s.blocks) * bs >= s.length:
            pos = np.arange(s.length)
            reads[i] = memory.mem[np.asarray(s.blocks, dtype=np.int64)[pos // bs], pos % bs].tolist()
        else:
            reads[i] = []
    return dict(tables=tables, lengths={i: seqs[i].length for i in sorted(seqs)}, ref_count=refs,
                n_free=pool.num_free, leaked=used_elsewhere, n_cow=pool.n_cow, content=reads,
                expected=dict(content))


def _ex3_hint(op, want, got, bs):
    """第一处不同 → 提示（按是哪一项不同、这一步是什么操作）。"""
    if got.get("reserve") is False:
        return ("reserve 返回的 (物理块, 偏移) 要对应位置 length .. length+n-1：物理块 = blocks[p // 块大小]、"
                "偏移 = p % 块大小，两个都是长度 n 的整数数组；块表要够放 length + n 个 token")
    if got["n_cow"] < want["n_cow"]:
        if op[0] == "append" and op[2] > 1:
            return (f"这一步 reserve({op[2]}) 应当写时复制却没有：最后一块没写满又被共享时，先 copy_block 换掉它，"
                    "再分配新块——先分配的话，self.blocks[-1] 已经是新块了，共享的旧块会被写坏")
        return "最后一块没写满、ref_count > 1：要 pool.copy_block(旧块) 换成自己的一份，再给旧块 decref"
    if got["n_cow"] > want["n_cow"]:
        return "只在最后一块没写满、而且 ref_count > 1 时才复制：写满了的块不用复制，只有自己在用的块直接写"
    if got["content"] != got["expected"]:
        return ("有一条序列读出来的 token 不是它自己写的：写进了别的序列还在用的块（写时复制没做对），"
                "或者 fork 出的序列和原来的共用了一个块表 list")
    if op[0] == "fork" and got["ref_count"] != want["ref_count"]:
        return "fork：新序列的每一块都要 pool.incref 一次"
    if op[0] == "free" and (got["n_free"] != want["n_free"] or got["ref_count"] != want["ref_count"]):
        return "free：每一块 pool.decref 一次（降到 0 的回到空闲表），然后 blocks = []、length = 0"
    if got["tables"] != want["tables"]:
        return "按需分配：块表正好放下 length + n 个 token（n_blocks(length + n, 块大小) 块），不多也不少"
    return "ref_count 要等于用着这个块的序列数：fork 加、写时复制后旧块减、free 减"


def _case_random_scripts(m):
    """随机的 fork / reserve(n) / free 脚本（块大小 1、3、5、16）：每一步之后和参考实现比（块号可以不同）。"""
    cls, ref_cls = m["PagedSequence"], reference(3)["PagedSequence"]
    rng = np.random.default_rng(30)
    for bs in BLOCK_SIZES:
        for trial in range(6):
            ops = _script(rng, bs, 14)
            n_blocks = 64 + 8 * bs
            want = ref(lambda: _run_script(ref_cls, ops, bs, n_blocks, lambda step, f: f()))
            done = []

            def timed(step, f):
                text = f"pool = BlockPool(None, n_blocks={n_blocks}, block_size={bs})；s0 = PagedSequence(pool)；" \
                       + "；".join(_op_text(o) for o in ops[:step + 1])
                done[:] = [text]
                return mine(text, f)
            got = _run_script(cls, ops, bs, n_blocks, timed)
            step = 0
            for w, g in zip(want, got):
                if w != g:
                    op = ops[step]
                    keys = [k for k in ("tables", "lengths", "ref_count", "n_free", "leaked", "n_cow", "content")
                            if isinstance(w, dict) and w[k] != g[k]]
                    what = "、".join(keys) or "reserve 的返回值"
                    text = (f"pool = BlockPool(None, n_blocks={n_blocks}, block_size={bs})；s0 = PagedSequence(pool)；"
                            + "；".join(_op_text(o) for o in ops[:step + 1]))
                    shown = {k: w[k] for k in keys} if isinstance(w, dict) else w
                    got_shown = {k: g[k] for k in keys} if isinstance(g, dict) else g
                    raise Fail(f"{text}\n     （块号按在块表里第一次出现的顺序改名为 0、1、2……；这一步之后的 {what}）",
                               show(shown), show(got_shown), _ex3_hint(op, w, g if isinstance(g, dict) else
                                                                        {"reserve": False}, bs))
                if isinstance(w, dict):
                    step += 1


def _sampling_run(cls, params, cfg, prompt, out_lens, timed):
    """并行采样的一段：提示算一次，fork 出几个样本逐 token 解码，采完的 free。返回每步的 (logits, 块池状态)。"""
    pk = lecture_module("paged_kv")
    pool = pk.BlockPool(cfg, n_blocks=24, block_size=4)
    parent = cls(pool)
    last = timed(lambda: pk.paged_step(params, cfg, [parent], [prompt])[0][-1])
    samples = timed(lambda: [parent.fork() for _ in out_lens])
    timed(parent.free)
    left, log = list(out_lens), []
    live = list(range(len(out_lens)))
    step = 0
    while live:
        toks = [[int((np.argmax(last) + 7 * j + step) % cfg.vocab)] for j in live]   # 每个样本走不同的路
        outs = timed(lambda: pk.paged_step(params, cfg, [samples[j] for j in live], toks))
        last = outs[0][-1]
        for j in live:
            left[j] -= 1
        log.append((np.concatenate([o.ravel() for o in outs]), pool.ref_count.tolist(), pool.num_free, pool.n_cow))
        for j in [j for j in live if left[j] == 0]:
            timed(samples[j].free)
        live = [j for j in live if left[j] > 0]
        step += 1
    log.append((None, pool.ref_count.tolist(), pool.num_free, pool.n_cow))
    return log


def _case_sampling(m):
    """小模型上并行采样：logits、ref_count、空闲块数、写时复制次数，每一步都和参考实现相同。"""
    lab = lecture_module("transformer_lab")
    cfg = lab.config_like(lab.TINY, max_seq=32)
    params = lab.init_params(cfg, seed=0)
    prompt = np.random.default_rng(2).integers(0, cfg.vocab, 9)
    out_lens = (3, 6, 5, 1)
    given = "TINY 模型，提示 9 个 token，块大小 4，块池 24 块，fork 出 4 个样本，各生成 3、6、5、1 个 token，采完就 free"
    want = ref(lambda: _sampling_run(reference(3)["PagedSequence"], params, cfg, prompt, out_lens, lambda f: f()))
    got = _sampling_run(m["PagedSequence"], params, cfg, prompt, out_lens, lambda f: mine(given, f))
    names = ("logits", "ref_count", "空闲块数", "写时复制次数")
    for step, (r, g) in enumerate(zip(want, got)):
        for name, x, y in zip(names, r, g):
            if x is not None and not equal(x, y):
                where = f"第 {step + 1} 步解码之后" if step < len(want) - 1 else "全部采完之后"
                raise Fail(f"{given}；{where}的{name}", show(x, 200), show(y, 200),
                           "对照前面几个小用例：fork 要 incref，写进共享的未满块前要复制，free 要 decref")


CASES_3 = [
    ("fork：共享全部块，每块 ref_count + 1，块表是自己的一份", _case_fork),
    ("reserve：按需分配，返回 (物理块, 偏移)，不改 length", _case_reserve),
    ("写时复制：最后一块没写满又被共享 → 复制，旧块 decref", _case_cow),
    ("写时复制跨块：fork 之后一次 reserve(6)，先复制共享的未满块，再分配新块", _case_cow_multi),
    ("最后一块写满了：不复制，只分配新块", _case_full_block),
    ("free：每块 decref，降到 0 的块回到空闲表", _case_free),
    ("随机的 fork / reserve(n) / free 脚本（块大小 1、3、5、16）：每一步都和参考实现相同（块号可以不同）",
     _case_random_scripts),
    ("小模型上并行采样（fork 4 个样本、逐 token 解码、采完就 free）：每一步都和参考实现相同", _case_sampling),
]

__all__ = ["CASES_1", "CASES_2", "CASES_3", "CLOCK", "PROBES"]
