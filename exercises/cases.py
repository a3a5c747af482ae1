"""检查器的用例：每个练习先是几个能手算的小例子，再是真实数据（小模型、合成 trace）上和参考实现逐个比。

一个用例 = (名字, 函数)；函数拿到 {名字: 学生的对象}，不对就 raise Fail(输入, 应当, 实际, 一句提示)。
参考实现一律从讲义的模块里取（lab_common.mine.reference），这里不写第二份。
"""
import contextlib
from types import SimpleNamespace

import numpy as np

from lab_common.mine import PROBES, bind, reference


class Fail(Exception):
    def __init__(self, given, expected, got, hint):
        super().__init__(hint)
        self.given, self.expected, self.got, self.hint = given, expected, got, hint


class Crash(Exception):
    """学生的代码在一个手算的用例里抛了异常：记下当时的输入（异常本身是 __cause__）。"""

    def __init__(self, given):
        super().__init__(given)
        self.given = given


@contextlib.contextmanager
def calling(given):
    """with calling("输入的说明")：里面学生的代码抛异常时，带着这个说明报出去（没写、没通过照常往外抛）。"""
    try:
        yield
    except (Fail, NotImplementedError):
        raise
    except Exception as e:
        raise Crash(given) from e


def show(x):
    """用例里显示一个值：numpy 数组写成 list，太长的截断。"""
    if isinstance(x, np.ndarray):
        x = x.tolist()
    s = repr(x) if not isinstance(x, str) else x
    if len(s) > 160:
        s = s[:157] + "..."
    return s


def equal(a, b):
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = np.asarray(a), np.asarray(b)
        return a.shape == b.shape and np.array_equal(a, b)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(equal(x, y) for x, y in zip(a, b))
    return a == b


def need(m, *names):
    """真实数据的用例先在很小的输入上试一下要用的名字：还没写就马上停（不用先造 trace、跑参考实现）。"""
    for name in names:
        PROBES[name](m[name])


def same(got, expected, given, hint):
    if not equal(got, expected):
        raise Fail(given, show(expected), show(got), hint)


# ============================================================ 练习 1：每个 token 的 KV 字节数
def _kv_case(args, kwargs, expected, hint):
    def case(m):
        call = ", ".join([repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items()])
        given = f"kv_bytes_per_token({call})"
        with calling(given):
            got = m["kv_bytes_per_token"](*args, **kwargs)
        same(got, expected, given, hint)
    return case


def _kv_all_models(m):
    """讲义里的模型形状 × 四种注意力 × 两种字节数，和参考实现逐个比。"""
    need(m, "kv_bytes_per_token")
    import kv_store.tiers
    ref = reference(1)["kv_bytes_per_token"]
    shapes = [v for v in vars(kv_store.tiers).values() if isinstance(v, kv_store.tiers.ModelSpec)]
    for spec in shapes:
        for att in ("MHA", "GQA", "MQA", "MLA"):
            for nbytes in (2, 1):
                kw = dict(n_kv_heads=spec.n_kv_heads, kv_lora_rank=512, rope_dim=64, dtype_bytes=nbytes)
                args = (att, spec.n_layers, spec.n_heads, spec.head_dim)
                same(m["kv_bytes_per_token"](*args, **kw), ref(*args, **kw),
                     f"{spec.name} 的形状，{att}，dtype_bytes={nbytes}", "和参考实现不同：对照上面几个手算的用例")
    if not shapes:
        raise Fail("kv_store.tiers 的模型", "至少一个", "0 个", "kv_store.tiers 里没有 ModelSpec")


CASES_1 = [
    ("MHA：LLaMA2-7B（32 层，32 个头 × 128 维，fp16）= 512 KiB",
     _kv_case(("MHA", 32, 32, 128), {}, 524_288, "32 层 × 2（K 和 V）× 32 头 × 128 维 × 2 字节")),
    ("GQA：LLaMA3-8B（32 个查询头，8 组 K/V）= 128 KiB",
     _kv_case(("GQA", 32, 32, 128), {"n_kv_heads": 8}, 131_072, "GQA 只存 n_kv_heads 组 K/V，不是 n_heads 组")),
    ("MQA：LLaMA2-13B 的形状（40 层，40 个头 × 128 维）只存一组 K/V",
     _kv_case(("MQA", 40, 40, 128), {}, 20_480, "MQA：所有查询头共用一组 K 和 V → 每层 2 × head_dim 个数")),
    ("MLA：DeepSeek-V2（60 层，d_c = 512，d_h^R = 64）",
     _kv_case(("MLA", 60, 128, 128), {"kv_lora_rank": 512, "rope_dim": 64}, 69_120,
              "MLA 每层只存 c_KV 和 RoPE key：kv_lora_rank + rope_dim 个数，不乘 2，也和头数无关")),
    ("FP8：LLaMA2-70B（GQA 8 组）每个数 1 字节 = 160 KiB",
     _kv_case(("GQA", 80, 64, 128), {"n_kv_heads": 8, "dtype_bytes": 1}, 163_840, "字节数要乘 dtype_bytes")),
    ("讲义里的每个模型形状 × 四种注意力 × fp16/FP8：和参考实现相同", _kv_all_models),
]


# ============================================================ 练习 2：按块表取回 K/V
def _toy_pool(n_layers=1, n_blocks=3, heads=1, block_size=2, head_dim=1):
    """k[层, 块, 头, 位置, 维] = 1000·层 + 100·块 + 10·头 + 位置 + 0.1·维（一眼看出取的是哪儿）；v = -k。"""
    idx = np.indices((n_layers, n_blocks, heads, block_size, head_dim))
    k = 1000.0 * idx[0] + 100 * idx[1] + 10 * idx[2] + idx[3] + 0.1 * idx[4]
    return SimpleNamespace(k=k, v=-k, block_size=block_size)


def _contiguous(pool, layer, blocks, length):
    """手算的期望：逐个 token 从 (块表[t // 块大小], t % 块大小) 取——最慢、最直白的写法。"""
    bs = pool.block_size
    k = np.stack([pool.k[layer, blocks[t // bs], :, t % bs] for t in range(length)], axis=1)
    v = np.stack([pool.v[layer, blocks[t // bs], :, t % bs] for t in range(length)], axis=1)
    return k, v


def _gather_case(pool_kw, layer, blocks, length, hint, what="k"):
    def case(m):
        pool = _toy_pool(**pool_kw)
        given = (f"块池 {pool.k.shape}（层, 块, KV 头, 块内位置, 头维度），k = 1000·层 + 100·块 + 10·头 + 位置 "
                 f"+ 0.1·维，v = -k；gather_kv(pool, layer={layer}, blocks={blocks}, length={length})")
        with calling(given):
            got = m["gather_kv"](pool, layer, blocks, length)
        exp = _contiguous(pool, layer, blocks, length)
        if not isinstance(got, tuple) or len(got) != 2:
            raise Fail(given, "(k, v) 两个数组", show(got), "返回 (k, v)")
        i = 0 if what == "k" else 1
        if np.shape(got[i]) != exp[i].shape:
            raise Fail(given, f"{what} 的形状 {exp[i].shape}", f"{np.shape(got[i])}",
                       "形状应当是 (n_kv_heads, length, head_dim)：拼接的是块内位置那一维吗？最后一块没写满的部分切掉了吗？")
        same(got[i], exp[i], given, hint)
    return case


def _paged_equals_contiguous(m):
    """小模型（第 2 讲的 TINY）四条序列逐 token 解码：分页（用你的 gather_kv）和连续 KVCache 的 logits 逐位相同。"""
    need(m, "gather_kv")
    from lab_common.transformer_lab import TINY, KVCache, config_like, forward, init_params
    from paged_kv import BlockPool, PagedSequence, paged_step
    cfg = config_like(TINY, max_seq=48)
    params = init_params(cfg, seed=0)
    rng = np.random.default_rng(1)
    prompts = [rng.integers(0, cfg.vocab, n) for n in (3, 7, 12, 20)]
    pool = BlockPool(cfg, n_blocks=40, block_size=4)
    seqs = [PagedSequence(pool) for _ in prompts]
    caches = [KVCache(cfg, 1) for _ in prompts]
    worst, step = 0.0, 0
    with bind([(reference(2)["gather_kv"], m["gather_kv"])]):
        feed = prompts
        for step in range(8):                          # 第 0 步是 prefill，之后逐 token 解码；块在池里交错
            outs = paged_step(params, cfg, seqs, feed)
            refs = [forward(params, cfg, np.asarray(f)[None], cache=c)[0] for f, c in zip(feed, caches)]
            worst = max(worst, max(float(np.max(np.abs(o - r))) for o, r in zip(outs, refs)))
            if worst != 0.0:
                break
            feed = [[int(np.argmax(r[-1]))] for r in refs]
    if worst != 0.0:
        raise Fail(f"TINY 模型（种子 0），4 条序列（输入 3、7、12、20 个 token），块大小 4，第 {step} 步",
                   "max |logits 分页 − 连续| = 0.0", f"{worst:.3g}",
                   "按块表的顺序拼接；每个位置都要取对（提示：先 transpose 再 reshape）")


CASES_2 = [
    ("块表 [2, 0]、长度 3：按块表的顺序取，最后一块只要 1 个位置",
     _gather_case({}, 0, [2, 0], 3, "第 t 个 token 在物理块 blocks[t // block_size] 的第 t % block_size 个位置")),
    ("块表 [1, 2]、长度 4：两个满块", _gather_case({}, 0, [1, 2], 4, "要按块表 blocks 取，不是取物理块 0、1……")),
    ("两个 KV 头、头维度 2：每个头各自拼接",
     _gather_case(dict(heads=2, head_dim=2, n_blocks=4), 0, [3, 1, 2], 5,
                  "pool.k[layer, blocks] 的形状是 (块数, 头, 块内位置, 维)：先把头放到最前面（transpose），"
                  "再把块和块内位置并成一维")),
    ("v 也要取对（v = -k）", _gather_case(dict(heads=2), 0, [2, 0], 3, "v 和 k 一样按块表取", what="v")),
    ("两层的池：只取第 layer 层", _gather_case(dict(n_layers=2), 1, [0, 2], 4, "pool.k 的第一维是层")),
    ("小模型逐 token 解码 8 步：分页版和连续 KV 缓存的 logits 逐位相同", _paged_equals_contiguous),
]


# ============================================================ 练习 3：fork、写时复制、free
def _pool(n_blocks=4, block_size=2):
    """只做簿记的块池（cfg=None）：copies 记下每次写时复制的 (源块, 新块)。"""
    from paged_kv import BlockPool
    copies = []
    pool = BlockPool(None, n_blocks=n_blocks, block_size=block_size, copy_fn=lambda s, d: copies.append((s, d)))
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
    given = "块池 4 块、块大小 2；a 写了 3 个 token（块表 [0, 1]）；b = a.fork()"
    with calling(given):
        a = _filled(m["PagedSequence"], pool, 3)
        b = a.fork()
    same(_state(pool, a, b), dict(blocks=[[0, 1], [0, 1]], lengths=[3, 3], ref_count=[2, 2, 0, 0], n_free=2),
         given, "fork 不拷数据：新序列用同样的块表和 length，每块 pool.incref 一次")
    same(copies, [], given + " 之后的写时复制", "fork 时不复制任何块")
    b.blocks.append(99)
    same(list(a.blocks), [0, 1], given + "；b.blocks.append(99) 之后的 a.blocks",
         "新序列要有自己的块表：list(self.blocks)，不能和原序列共用一个 list")


def _case_reserve(m):
    pool, _ = _pool(n_blocks=4, block_size=4)
    given = "块池 4 块、块大小 4；a = PagedSequence(pool)；a.reserve(5)"
    with calling(given):
        a = m["PagedSequence"](pool)
        blk, off = a.reserve(5)
    same(list(a.blocks), [0, 1], given + " 之后的 a.blocks", "5 个 token 要 2 块：用 pool.alloc() 按需分配")
    same((np.asarray(blk).tolist(), np.asarray(off).tolist()), ([0, 0, 0, 0, 1], [0, 1, 2, 3, 0]),
         given + " 的返回值 (物理块, 偏移)", "位置 p = length + 0..n-1：物理块 = blocks[p // 块大小]，偏移 = p % 块大小")
    same(a.length, 0, given + " 之后的 a.length", "reserve 不改 length：写完 K/V 以后由调用者加")
    a.length = 5
    with calling(given + "；a.length = 5；a.reserve(3)"):
        blk, off = a.reserve(3)
    same((list(a.blocks), np.asarray(blk).tolist(), np.asarray(off).tolist()), ([0, 1], [1, 1, 1], [1, 2, 3]),
         given + "；a.length = 5；a.reserve(3)", "块 1 还有 3 个空位：不用分配新块")


def _case_cow(m):
    pool, copies = _pool()
    given = "块大小 2；a 写了 3 个 token（块 0 满、块 1 写了 1 个）；b = a.fork()；b.reserve(1)"
    with calling(given):
        a = _filled(m["PagedSequence"], pool, 3)
        b = a.fork()
        b.reserve(1)
    same(copies, [(1, 2)], given + " 时的写时复制 (源块, 新块)",
         "最后一块没写满、ref_count > 1：要 pool.copy_block(旧块) 换成自己的一份")
    same(_state(pool, a, b), dict(blocks=[[0, 1], [0, 2]], lengths=[3, 3], ref_count=[2, 1, 1, 0], n_free=1),
         given, "复制以后旧块要 pool.decref 一次（b 不再用它）；a 的块表不变")
    with calling(given + "；a.reserve(1)"):
        a.reserve(1)
    same((copies, list(a.blocks)), ([(1, 2)], [0, 1]), given + "；a.reserve(1)",
         "块 1 现在只有 a 在用（ref_count 1）：直接写，不再复制")


def _case_full_block(m):
    pool, copies = _pool()
    given = "块大小 2；a 写了 4 个 token（两块都满）；b = a.fork()；b.reserve(1)"
    with calling(given):
        a = _filled(m["PagedSequence"], pool, 4)
        b = a.fork()
        b.reserve(1)
    same(copies, [], given + " 时的写时复制", "最后一块已经写满：新 token 写进新块，不用复制共享的块")
    same(_state(pool, a, b), dict(blocks=[[0, 1], [0, 1, 2]], lengths=[4, 4], ref_count=[2, 2, 1, 0], n_free=1),
         given, "只给 b 分配一个新块")


def _case_free(m):
    pool, _ = _pool()
    given = "块大小 2；a 写了 3 个 token（块表 [0, 1]）；a.free()"
    with calling(given):
        a = _filled(m["PagedSequence"], pool, 3)
        a.free()
    same(_state(pool, a), dict(blocks=[[]], lengths=[0], ref_count=[0, 0, 0, 0], n_free=4),
         given, "free：每块 pool.decref（降到 0 的回到空闲表），然后 blocks = []、length = 0")
    given = "块大小 2；a 写了 4 个 token；b = a.fork()；a.free()"
    with calling(given):
        a = _filled(m["PagedSequence"], pool, 4)
        b = a.fork()
        a.free()
    same(_state(pool, a, b), dict(blocks=[[], [2, 3]], lengths=[0, 4], ref_count=[0, 0, 1, 1], n_free=2),
         given, "还有别的序列在用的块只 decref，不回空闲表")
    with calling(given + "；b.free()"):
        b.free()
    same(_state(pool, a, b), dict(blocks=[[], []], lengths=[0, 0], ref_count=[0, 0, 0, 0], n_free=4),
         given + "；b.free()", "全部释放以后所有块都回到空闲表")


def _sampling_run(cls, params, cfg, prompt, out_lens):
    """并行采样的一段：提示算一次，fork 出几个样本逐 token 解码，采完的 free。返回每步的 (logits, 块池状态)。"""
    from paged_kv import BlockPool, paged_step
    pool = BlockPool(cfg, n_blocks=24, block_size=4)
    parent = cls(pool)
    last = paged_step(params, cfg, [parent], [prompt])[0][-1]
    samples = [parent.fork() for _ in out_lens]
    parent.free()
    left, log = list(out_lens), []
    live = list(range(len(out_lens)))
    step = 0
    while live:
        toks = [[int((np.argmax(last) + 7 * j + step) % cfg.vocab)] for j in live]   # 每个样本走不同的路
        outs = paged_step(params, cfg, [samples[j] for j in live], toks)
        last = outs[0][-1]
        for j in live:
            left[j] -= 1
        log.append((np.concatenate([o.ravel() for o in outs]), pool.ref_count.tolist(), pool.num_free, pool.n_cow,
                    [list(samples[j].blocks) for j in live]))
        for j in [j for j in live if left[j] == 0]:
            samples[j].free()
        live = [j for j in live if left[j] > 0]
        step += 1
    log.append((None, pool.ref_count.tolist(), pool.num_free, pool.n_cow, []))
    return log


def _case_sampling(m):
    """小模型上并行采样：logits、ref_count、空闲块数、写时复制次数、块表，每一步都和参考实现相同。"""
    need(m, "PagedSequence")
    from lab_common.transformer_lab import TINY, config_like, init_params
    cfg = config_like(TINY, max_seq=32)
    params = init_params(cfg, seed=0)
    prompt = np.random.default_rng(2).integers(0, cfg.vocab, 9)
    out_lens = (3, 6, 5, 1)
    given = "TINY 模型，提示 9 个 token，块大小 4，块池 24 块，fork 出 4 个样本，各生成 3、6、5、1 个 token，采完就 free"
    ref = _sampling_run(reference(3)["PagedSequence"], params, cfg, prompt, out_lens)
    with calling(given):
        got = _sampling_run(m["PagedSequence"], params, cfg, prompt, out_lens)
    names = ("logits", "ref_count", "空闲块数", "写时复制次数", "各样本的块表")
    for step, (r, g) in enumerate(zip(ref, got)):
        for name, x, y in zip(names, r, g):
            if x is None:
                continue
            if not equal(x, y):
                where = f"第 {step + 1} 步解码之后" if step < len(ref) - 1 else "全部采完之后"
                raise Fail(f"{given}；{where}的{name}", show(x), show(y),
                           "对照前面几个小用例：fork 要 incref，写进共享的未满块前要复制，free 要 decref")
    if len(ref) != len(got):
        raise Fail(given, f"{len(ref)} 步", f"{len(got)} 步", "步数不对")


CASES_3 = [
    ("fork：共享全部块，每块 ref_count + 1，块表是自己的一份", _case_fork),
    ("reserve：按需分配，返回 (物理块, 偏移)，不改 length", _case_reserve),
    ("写时复制：最后一块没写满又被共享 → 复制，旧块 decref", _case_cow),
    ("最后一块写满了：不复制，只分配新块", _case_full_block),
    ("free：每块 decref，降到 0 的块回到空闲表", _case_free),
    ("小模型上并行采样（fork 4 个样本、逐 token 解码、采完就 free）：每一步都和参考实现相同", _case_sampling),
]


# ============================================================ 练习 4：链式块哈希和前缀匹配
SYS_PROMPT = [101, 7, 7, 3, 55, 2, 9, 14]         # 04 演示 1 的两块长的"系统提示"（块大小 4）


def _case_tail(m):
    toks = list(range(1, 11))
    given = f"block_hashes({toks}, block=4)"
    with calling(given):
        got = m["block_hashes"](toks, 4)
    same(len(got), 2, given + " 的个数", "10 个 token、块大小 4：两个完整块，结尾 2 个 token 不算哈希")
    if not all(isinstance(h, str) and len(h) == 12 for h in got):
        raise Fail(given, "两个 12 位的十六进制字符串", show(got), "返回 digest 的 .hex()[:12]")


def _case_prefix_same(m):
    a = SYS_PROMPT + [21, 22, 23, 24, 25, 26, 27, 28]
    b = SYS_PROMPT + [21, 22, 23, 24, 31, 32, 33, 34]
    with calling(f"block_hashes({a}, 4) 和 block_hashes({b}, 4)"):
        ha, hb = m["block_hashes"](a, 4), m["block_hashes"](b, 4)
    same([x == y for x, y in zip(ha, hb)], [True, True, True, False],
         f"A = {a}，B = {b}，块大小 4：A、B 的哈希逐块是否相同", "前 3 块 token 相同 → 前 3 个哈希相同；第 4 块不同")


def _case_chain(m):
    a = [1, 2, 3, 4, 5, 6, 7, 8]
    c = [9, 2, 3, 4, 5, 6, 7, 8]
    with calling(f"block_hashes({a}, 4) 和 block_hashes({c}, 4)"):
        ha, hc = m["block_hashes"](a, 4), m["block_hashes"](c, 4)
    same([x == y for x, y in zip(ha, hc)], [False, False], f"A = {a}，C = {c}，块大小 4：哈希逐块是否相同",
         "第 2 块的 token 虽然一样，但第 1 块不同：链式哈希要把前一块的哈希算进去（sha256(前一块的 digest + 这一块)）")


def _case_exact(m):
    ref = reference(4)["block_hashes"]
    rng = np.random.default_rng(0)
    for toks, block in ((SYS_PROMPT + [21, 22, 23, 24, 25], 4), (list(range(40)), 16),
                        (rng.integers(0, 32000, 100).tolist(), 8)):
        short = show(toks)
        same(m["block_hashes"](toks, block), ref(toks, block), f"block_hashes({short}, block={block})",
             "哈希要和讲义的一模一样：SHA-256(前一块的 32 字节 digest ‖ np.int64 的 token 字节)，第 0 块前面是 b\"\"，"
             "取 .hex()[:12]")


def _match_case(hashes, cache, expected, hint):
    def case(m):
        given = f"match_prefix({hashes}, {cache})"
        with calling(given):
            got = m["match_prefix"](hashes, cache)
        same(got, expected, given, hint)
    return case


def _case_requests(m):
    """几组共享前缀的请求依次到达：每个请求先按块哈希匹配缓存，再把自己的块登记进去；命中块数和参考相同。"""
    need(m, "block_hashes", "match_prefix")
    ref = reference(4)
    rng = np.random.default_rng(3)
    prefixes = [rng.integers(0, 1000, n).tolist() for n in (13, 26, 5)]
    cache_ref, cache_got, want, got = {}, {}, [], []
    for i in range(24):
        toks = prefixes[i % 3] + rng.integers(0, 1000, int(rng.integers(1, 12))).tolist()
        if i % 5 == 4:
            toks[0] += 1                               # 开头改了一个 token：一块也命中不了
        hr, hg = ref["block_hashes"](toks, 4), m["block_hashes"](toks, 4)
        want.append(ref["match_prefix"](hr, cache_ref))
        got.append(m["match_prefix"](hg, cache_got))
        cache_ref.update({h: 0 for h in hr})
        cache_got.update({h: 0 for h in hg})
    same(got, want, "24 个请求（3 种前缀，长 13、26、5 个 token，后面接随机后缀；每 5 个里有一个改了开头），"
                    "块大小 4：每个请求命中的块数", "先确认前面几个小用例都过了")


def _case_trace(m):
    """合成 trace（make_trace，种子 0）的前 3,000 个请求，缓存是容量 1,500 块的"先淘汰靠前的块"（04 的对照策略）：
    它先拆掉前缀的父块，于是有 45 个请求"后面的块还在、前面的不在"——正好考 match_prefix 会不会停。"""
    need(m, "match_prefix")
    from kv_store.eviction import LengthAwareEarlyCache
    ref = reference(4)["match_prefix"]
    tr = _trace()
    cache = LengthAwareEarlyCache(1500)
    for i in range(3000):
        blocks = tr.blocks(i)
        want = ref(blocks, cache.entries)
        got = m["match_prefix"](blocks, cache.entries)
        if got != want:
            raise Fail(f"合成 trace（make_trace 种子 0）第 {i} 个请求的 {len(blocks)} 块；缓存里有其中 "
                       f"{cache.count(blocks)} 块（先淘汰靠前的块，容量 1,500）", show(want), show(got),
                       "从第一块起连续命中几块：第一次没命中就停，后面的块在不在都不算")
        cache.insert(blocks)


_TRACE = []


def _trace():
    """合成 trace 只造一次（约 0.5 秒）。"""
    if not _TRACE:
        from kv_store.traces import make_trace
        _TRACE.append(make_trace(0))
    return _TRACE[0]


CASES_4 = [
    ("block_hashes：结尾不满一块的 token 不算哈希", _case_tail),
    ("block_hashes：开头相同的块，哈希相同", _case_prefix_same),
    ("block_hashes：链式——前面一块不同，后面的哈希全都不同", _case_chain),
    ("block_hashes：和讲义的哈希逐个相同（04 的表里打印的就是它）", _case_exact),
    ("match_prefix：全部命中", _match_case(["a", "b"], {"a": 0, "b": 1}, 2, "两个哈希都在缓存里")),
    ("match_prefix：第一块没命中 → 0，后面的块在缓存里也不算",
     _match_case(["a", "b", "c"], {"b": 1, "c": 2}, 0, "第一次没命中就停：中间断了，后面的 KV 用不上")),
    ("match_prefix：中间断了", _match_case(["a", "b", "c", "d"], {"a", "b", "d"}, 2, "第一次没命中就停")),
    ("match_prefix：空请求、空缓存", _match_case([], {}, 0, "没有块：命中 0 块")),
    ("共享前缀的 24 个请求：每个请求命中的块数和参考实现相同", _case_requests),
    ("合成 trace 的 3,000 个请求（缓存先淘汰父块，留下缺了父块的子块）：命中块数和参考实现相同", _case_trace),
]


# ============================================================ 练习 5：LRU
def _new_cache(cls, capacity, given):
    """学生的缓存，evict 外面包一层检查：它必须从 entries 里恰好删掉一块（否则 BlockCache.insert 会死循环）。"""
    c = cls(capacity)
    evict = c.evict

    def guarded():
        before = len(c.entries)
        out = evict()
        if len(c.entries) != before - 1:
            raise Fail(given, "evict() 之后 entries 少一块", f"从 {before} 块变成 {len(c.entries)} 块",
                       "evict 要从 self.entries 里删掉恰好一块（popitem）并返回它")
        return out
    c.evict = guarded
    return c


def _lru_ops(capacity, ops, expected, hint, what="match"):
    """ops：要 insert 的请求列表；最后比较 match(what 的请求) 或 entries 的顺序。"""
    def case(m):
        given = f"LRUCache({capacity})；" + "；".join(f"insert({o})" for o in ops)
        if what == "entries":
            with calling(given):
                c = _new_cache(m["LRUCache"], capacity, given)
                for o in ops:
                    c.insert(o)
            same(list(c.entries), expected, given + " 之后 entries（从旧到新）", hint)
        else:
            given += f"；match({what})"
            with calling(given):
                c = _new_cache(m["LRUCache"], capacity, given)
                for o in ops:
                    c.insert(o)
                got = c.match(what)
            same(got, expected, given, hint)
    return case


def _case_evict_returns(m):
    given = "LRUCache(3)；insert([1, 2, 3])；touch(4, 0)；evict()"
    with calling(given):
        c = _new_cache(m["LRUCache"], 3, given)
        c.insert([1, 2, 3])
        c.touch(4, 0)
        got = c.evict()
    same((got, sorted(c.entries)), (3, [1, 2, 4]), given + " 的返回值和剩下的块",
         "insert 从最后一块往前 touch，所以块 3 最旧；evict 删掉它并返回 3")


def _case_lru_trace(m):
    """合成 trace（make_trace，种子 0，全部 23,608 个请求），容量 1,000 和 10,000 块：每个请求的命中块数。"""
    need(m, "LRUCache")
    cls, ref_cls = m["LRUCache"], reference(5)["LRUCache"]
    tr = _trace()
    for cap in (1_000, 10_000):
        given = f"合成 trace（make_trace 种子 0，{len(tr):,} 个请求），容量 {cap:,} 块"
        c, r = _new_cache(cls, cap, given), ref_cls(cap)
        for i in range(len(tr)):
            blocks = tr.blocks(i)
            got, want = c.match(blocks), r.match(blocks)
            if got != want:
                raise Fail(f"{given}：第 {i} 个请求（{len(blocks)} 块）命中几块", show(want), show(got),
                           "前面的小用例都过了吗？再检查命中时有没有把块挪到最新的一端")
            c.insert(blocks)
            r.insert(blocks)


CASES_5 = [
    ("容量 3：[1 2 3] 之后，[1 2 9] 命中 2 块", _lru_ops(3, [[1, 2, 3]], 2, "touch 要把不在缓存里的块加进 entries",
                                              what=[1, 2, 9])),
    ("超出容量：淘汰最久没用的块（insert 从尾往前碰，块 3 最旧）",
     _lru_ops(3, [[1, 2, 3], [4]], [2, 1, 4], "evict 删最旧的一端：OrderedDict 的 popitem(last=False)",
              what="entries")),
    ("命中过的块变成最新的：容量 2，1 2 1 3 之后 1 还在",
     _lru_ops(2, [[1], [2], [1], [3]], 1, "块已经在缓存里时 touch 要把它挪到最新的一端（move_to_end），"
              "不然就成了 FIFO", what=[1])),
    ("evict 返回被淘汰的块，只删一块", _case_evict_returns),
    ("合成 trace 的全部请求，容量 1,000 和 10,000 块：每个请求的命中块数和参考实现相同", _case_lru_trace),
]


# ============================================================ 练习 6：基数树
def _tree_state(t):
    return dict(render=t.render(), size=t.size, n_splits=t.n_splits)


def _radix_case(inserts, checks, hint, capacity=None, lock=False):
    """inserts：依次插入的序列；checks：[(要 match 的序列, 期望)] 和最后的树（画出来比）。期望由参考实现算。"""
    def case(m):
        ref_cls = reference(6)["RadixCache"]
        r = ref_cls(capacity)
        given = f"t = RadixCache({capacity})"
        with calling(given):
            t = m["RadixCache"](capacity)
        flag = ""
        if lock:
            flag = ", lock=True"
        for s in inserts:
            given += f"；t.insert({s}{flag})"
            want = r.insert(list(s), lock=lock)
            with calling(given):
                got = t.insert(list(s), lock=lock)
            if isinstance(got, list):
                got = tuple(got)
            same(got, want, given + " 的返回值 (已经在树里的长度, 拆了几个节点)", hint)
        for q in checks:
            with calling(given + f"；t.match({q})"):
                got = t.match(list(q))
            same(got, r.match(list(q)), given + f"；t.match({q})", hint)
        st, sr = _tree_state(t), _tree_state(r)
        for key, label in (("size", "树里存的 token 数 size"), ("n_splits", "拆过几次 n_splits"),
                           ("render", "树的样子（render()）")):
            same(st[key], sr[key], given + f" 之后{label}", hint)
    return case


def _case_radix_trace(m):
    """合成 trace 的前 4,000 个请求按块放进树（容量 3,000 块）：每个请求先 match 再 insert，命中数和参考相同。"""
    need(m, "RadixCache")
    tr = _trace()
    ref_cls = reference(6)["RadixCache"]
    t, r = m["RadixCache"](3000), ref_cls(3000)
    for i in range(4000):
        seq = list(tr.blocks(i))
        got, want = t.match(seq), r.match(seq)
        if got != want:
            raise Fail(f"合成 trace（make_trace 种子 0）按块建树，容量 3,000 块：第 {i} 个请求（{len(seq)} 块）match",
                       show(want), show(got), "小用例都过了的话，检查 last_access、_push_leaf 和 size：淘汰靠它们")
        t.insert(seq)
        r.insert(seq)


def _case_radix_requests(m):
    """few-shot 式的请求（3 种前缀 + 随机后缀，token 级）：树的样子、size、拆分次数和参考相同。"""
    need(m, "RadixCache")
    rng = np.random.default_rng(4)
    prefixes = [rng.integers(0, 50, n).tolist() for n in (40, 90, 17)]
    reqs = [prefixes[i % 3] + rng.integers(0, 50, int(rng.integers(3, 30))).tolist() for i in range(30)]
    ref_cls = reference(6)["RadixCache"]
    t, r = m["RadixCache"](), ref_cls()
    for s in reqs:
        r.insert(s, lock=True)
        t.insert(list(s), lock=True)
    for key, label in (("size", "size"), ("n_splits", "n_splits"), ("render", "render()")):
        same(_tree_state(t)[key], _tree_state(r)[key],
             "30 个请求（前缀 40、90、17 个 token，后缀 3–29 个，词表 50，所以后缀之间也常有相同的开头），"
             f"lock=True 逐个插入之后的 {label}", "后缀之间碰巧相同的开头也要拆节点；ref 沿路径逐个加 1")


CASES_6 = [
    ("讲义的例子：[1 2 3 4] 再 [1 2 9] → 拆成 [1 2] [3 4] [9]",
     _radix_case([[1, 2, 3, 4], [1, 2, 9]], [[1, 2, 3, 7]], "在 2 之后分叉：_split(child, 2)，再挂新叶子 [9]")),
    ("match 可以停在节点中间，也可以一个都不中",
     _radix_case([[1, 2, 3, 4]], [[1, 2, 5], [1, 2, 3, 4, 5], [7], [], [1]],
                 "从根往下走：孩子的 key 只有前一部分相同时，命中到那个位置为止")),
    ("拆分的位置：[5 6 7 8 9] 再 [5 6 7 1] → [5 6 7] [8 9] [1]",
     _radix_case([[5, 6, 7, 8, 9], [5, 6, 7, 1]], [[5, 6, 7, 8], [5, 6, 9]],
                 "j = key 和 seq 相同的个数，在第 j 个位置拆：head = key[:j]，child 留 key[j:]")),
    ("插入已有序列的前缀：只拆节点，不长新叶子",
     _radix_case([[1, 2, 3, 4], [1, 2]], [[1, 2, 3]], "seq 在节点中间就结束了：照样拆开，但没有剩下的 token 要挂")),
    ("同样的序列插两次：全部命中，不拆",
     _radix_case([[3, 1, 4, 1, 5], [3, 1, 4, 1, 5]], [[3, 1, 4]], "整段相同就走过去（i += len(key)），不拆")),
    ("lock=True：路径上每个节点 ref + 1（拆出来的 head 继承 ref）",
     _radix_case([[1, 2, 3, 4], [1, 2, 9], [1, 2, 3]], [], "走过的每个节点 ref += 1；新叶子也要", lock=True)),
    ("容量 4：超出时淘汰最久没用的叶子的尾巴",
     _radix_case([[1, 2, 3], [4, 5], [1, 2, 3, 6]], [[1, 2, 3], [4, 5]],
                 "insert 要更新 last_access、size，新叶子要 _push_leaf，超容量时调用 self._evict", capacity=4)),
    ("30 个 few-shot 式请求（token 级）：树的样子、size、拆分次数和参考实现相同", _case_radix_requests),
    ("合成 trace 的 4,000 个请求按块建树（容量 3,000 块）：每个请求命中的块数和参考实现相同", _case_radix_trace),
]


CASES = {1: CASES_1, 2: CASES_2, 3: CASES_3, 4: CASES_4, 5: CASES_5, 6: CASES_6}
