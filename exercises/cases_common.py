"""用例共用的写法：值怎样写给学生看（text）、手算的例子怎样成组（hand）、一次调用怎样跑（play_call）、讲义的工作量
怎样跑（play_trace：合成 trace；play_decode：小模型解码），和按"哪一项不同"给的提示 KEY_HINTS（check.py 用）。"""
import copy

import numpy as np

import paged_kv

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
    """值的写法：numpy 数组写成 np.array([...])（不是 int64 / float64 时带上 dtype）；集合按排好的顺序。"""
    if isinstance(x, np.ndarray):
        return f"np.array({x.tolist()}{'' if x.dtype in (np.int64, np.float64) else f', dtype=np.{x.dtype}'})"
    if isinstance(x, (set, frozenset)) and x:     # 集合排好序再写：字符串的集合每次运行的顺序不同，输出要逐字节相同
        return "{" + ", ".join(map(repr, sorted(x))) + "}"
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
