"""请求 trace 的列式存储（Trace），读真实 trace（load_trace），以及合成 trace（make_trace）。

一个 trace 就是几列 numpy 数组（不是几十万个 Python 对象：12 万个请求也只占几十 MB）：

    tr = make_trace(seed=0)                 # 或 load_trace(路径)，返回的都是 Trace
    len(tr), tr.input_len[:3], tr.blocks(0)[:5]     # 列可以直接做向量运算
    for r in tr:                            # 兼容写法：逐个给出 Request（.arrival .input_len .output_len .blocks）
        ...

合成 trace 模仿 Mooncake 公开的 Tool&Agent trace（FAST'25 表 2）的几个统计量。真实 trace 的格式
（每行一个 JSON）：{"timestamp": 毫秒, "input_length", "output_length", "hash_ids": [...]}，
hash_ids 是每 512 个 token 一块的链式哈希 id。合成 trace 生成同样的东西。负载的结构（工具调用 / 智能体场景）：
- 系统提示：几个"框架"各有一段公共前缀（工具说明），每个框架下又有若干具体模板；
  最热的框架被大多数请求共用 → 它的第一块被访问上万次；
- 会话：智能体一轮一轮地调用模型，每一轮的输入 = 上一轮的输入 + 上一轮的输出 + 新的工具结果，
  所以相邻两轮共享前缀；两轮之间隔几秒到几分钟（时间局部性：LRU 擅长的情况）；
- 一次性请求：系统提示 + 一大段只出现一次的内容（文档、网页），这些块之后再没人用。

读真实 trace：load_trace(路径) 读 Mooncake 公开的 JSONL（格式、哪些算错误见 kv_store/trace_file.py）。
"""
import itertools
from array import array

import numpy as np

from lab_common.settings import check_setting, is_int, is_number
from kv_store.trace_file import BLOCK_SIZE, Request, iter_trace_records   # 逐行检查的读取器、Request、TraceError 都在 kv_store.trace_file

CHUNK = 4096                # 逐请求遍历时，每次把这么多个请求的块 id 转成 Python 列表（内存有上限）


class Trace:
    """n 个请求的 trace，按列存放。请求 i 的块是 hash_ids[offsets[i]:offsets[i + 1]]。

    arrival     float64 (n,)      到达时刻（秒）
    input_len   int64 (n,)        输入 token 数
    output_len  int64 (n,)        输出 token 数
    hash_ids    int64 (total,)    全部请求的块 id 首尾相接（total = 全部块访问次数）
    offsets     int64 (n + 1,)    offsets[0] = 0，offsets[n] = total

    >>> tr = Trace.from_requests([Request(0.0, 1000, 5, (7, 8)), Request(1.5, 600, 9, (7, 9))])
    >>> len(tr), tr.n_blocks.tolist(), tr.offsets.tolist(), tr.blocks(1)
    (2, [2, 2], [0, 2, 4], (7, 9))
    >>> tr[1]
    Request(arrival=1.5, input_len=600, output_len=9, blocks=(7, 9))
    >>> [r.input_len for r in tr], tr.block_counts().tolist()    # 块 7 出现 2 次，8、9 各 1 次
    ([1000, 600], [2, 1, 1])
    """

    __slots__ = ("arrival", "input_len", "output_len", "hash_ids", "offsets")

    def __init__(self, arrival, input_len, output_len, hash_ids, offsets):
        self.arrival = np.asarray(arrival, dtype=np.float64)
        self.input_len = np.asarray(input_len, dtype=np.int64)
        self.output_len = np.asarray(output_len, dtype=np.int64)
        self.hash_ids = np.asarray(hash_ids, dtype=np.int64)
        self.offsets = np.asarray(offsets, dtype=np.int64)
        n = len(self.arrival)
        if not (len(self.input_len) == len(self.output_len) == n and len(self.offsets) == n + 1
                and self.offsets[0] == 0 and self.offsets[-1] == len(self.hash_ids)
                and (np.diff(self.offsets) >= 0).all()):
            raise ValueError("Trace 的列长度对不上：要求 offsets 有 n + 1 个、从 0 开始、不减、以 len(hash_ids) 结尾")

    @classmethod
    def from_requests(cls, requests):
        """Request（或任何有 .arrival .input_len .output_len .blocks 的对象）的序列 → Trace。"""
        reqs = list(requests)
        lens = np.fromiter((len(r.blocks) for r in reqs), dtype=np.int64, count=len(reqs))
        offsets = np.zeros(len(reqs) + 1, dtype=np.int64)
        np.cumsum(lens, out=offsets[1:])
        ids = array("q")
        for r in reqs:
            ids.extend(r.blocks)
        return cls([r.arrival for r in reqs], [r.input_len for r in reqs], [r.output_len for r in reqs],
                   np.frombuffer(ids, dtype=np.int64), offsets)

    def __len__(self):
        return len(self.arrival)

    @property
    def n_blocks(self):
        """每个请求的块数 (n,)。"""
        return np.diff(self.offsets)

    @property
    def nbytes(self):
        """这个 trace 的数组一共占多少字节。"""
        return sum(getattr(self, k).nbytes for k in self.__slots__)

    def blocks(self, i):
        """请求 i 的块 id（元组，和 Request.blocks 一样）。"""
        return tuple(self.hash_ids[self.offsets[i]:self.offsets[i + 1]].tolist())

    def __getitem__(self, i):
        """tr[i] → Request；tr[a:b] → 一段请求组成的新 Trace（数组是拷贝）。"""
        if isinstance(i, slice):
            a, b, step = i.indices(len(self))
            if step != 1:
                raise ValueError("Trace 的切片只支持连续的一段（步长 1）")
            b = max(a, b)
            lo, hi = self.offsets[a], self.offsets[b]
            return Trace(self.arrival[a:b].copy(), self.input_len[a:b].copy(), self.output_len[a:b].copy(),
                         self.hash_ids[lo:hi].copy(), self.offsets[a:b + 1] - lo)
        n = len(self)
        if not -n <= i < n:
            raise IndexError(f"请求号 {i} 超出范围（共 {n} 个请求）")
        i %= n
        return Request(float(self.arrival[i]), int(self.input_len[i]), int(self.output_len[i]), self.blocks(i))

    def iter_blocks(self, chunk=CHUNK):
        """逐个请求给出它的块 id 列表（list[int]）。每次只把 chunk 个请求转成 Python 对象。"""
        return iter_block_lists(self.hash_ids, self.offsets, chunk)

    def __iter__(self):
        """逐个请求给出 Request（兼容旧代码；新代码直接用列更快）。"""
        n = len(self)
        for a in range(0, n, CHUNK):
            b = min(n, a + CHUNK)
            cols = zip(self.arrival[a:b].tolist(), self.input_len[a:b].tolist(), self.output_len[a:b].tolist(),
                       iter_block_lists(self.hash_ids, self.offsets[a:b + 1], CHUNK))
            for t, n_in, n_out, blocks in cols:
                yield Request(t, n_in, n_out, tuple(blocks))

    def block_lists(self):
        """每个请求的块 id 列表组成的"序列"（BlockLists）：可以反复 for、len、下标，但不把几百万个 id
        一次变成 Python 对象（每次遍历按段转换）。kv_store.replay 的函数直接认得它（用它的两列）。"""
        return BlockLists(self.hash_ids, self.offsets)

    def popularity(self):
        """(ids, counts)：每个不同的块 id（从小到大）和它被访问的次数（全是 int64 数组；代替 Counter）。"""
        return np.unique(self.hash_ids, return_counts=True)

    def block_counts(self):
        """每个不同的块被访问了几次（int64，按块 id 从小到大排列）。"""
        return self.popularity()[1]

    def distinct_blocks(self):
        """有几个不同的块（容量不小于它的缓存从不淘汰）。用 dense_ids 换好的小整数 id 数，不再排一遍序。"""
        dense, d = dense_ids(self.hash_ids)
        return int(np.count_nonzero(np.bincount(dense, minlength=d)))

    def __eq__(self, other):
        """和另一个 Trace 比每一列；和 Request 的列表比每个请求（兼容旧代码）。"""
        if isinstance(other, Trace):
            return all(np.array_equal(getattr(self, k), getattr(other, k)) for k in self.__slots__)
        try:
            return len(self) == len(other) and all(a == b for a, b in zip(self, other))
        except TypeError:
            return NotImplemented

    __hash__ = None

    def __repr__(self):
        return f"Trace({len(self)} 个请求, {len(self.hash_ids)} 次块访问, {self.nbytes / 2 ** 20:.1f} MiB)"


class BlockLists:
    """Trace.block_lists() 的结果：像 list[list[int]] 一样用，数据仍在两列数组里。

    >>> bl = Trace.from_requests([Request(0.0, 1000, 5, (7, 8)), Request(1.5, 600, 9, (7, 9))]).block_lists()
    >>> len(bl), bl[1], [len(b) for b in bl], [b for b in bl]
    (2, [7, 9], [2, 2], [[7, 8], [7, 9]])
    """

    __slots__ = ("hash_ids", "offsets")

    def __init__(self, hash_ids, offsets):
        self.hash_ids, self.offsets = hash_ids, offsets

    def __len__(self):
        return len(self.offsets) - 1

    def __getitem__(self, i):
        n = len(self)
        if not -n <= i < n:
            raise IndexError(f"请求号 {i} 超出范围（共 {n} 个请求）")
        i %= n
        return self.hash_ids[self.offsets[i]:self.offsets[i + 1]].tolist()

    def __iter__(self):
        return iter_block_lists(self.hash_ids, self.offsets)


def iter_block_lists(hash_ids, offsets, chunk=CHUNK):
    """按 offsets 切开 hash_ids，逐段给出 list[int]。一次只转换 chunk 段，Python 对象的内存有上限。

    >>> list(iter_block_lists(np.array([5, 6, 7]), np.array([0, 2, 2, 3])))
    [[5, 6], [], [7]]
    """
    n = len(offsets) - 1
    for a in range(0, n, chunk):
        b = min(n, a + chunk)
        base = int(offsets[a])
        flat = hash_ids[base:offsets[b]].tolist()
        cuts = (offsets[a:b + 1] - base).tolist()
        for k in range(b - a):
            yield flat[cuts[k]:cuts[k + 1]]


def columns(trace):
    """(hash_ids, offsets)：全部块 id 首尾相接 (total,)，请求 i 的块是 hash_ids[offsets[i]:offsets[i+1]]。

    trace：Trace 或 BlockLists（直接用它的两列），或块序列（或 Request）的列表。

    >>> ids, offsets = columns([(1, 2), (1, 2, 3), (4,)])
    >>> ids.tolist(), offsets.tolist()
    ([1, 2, 1, 2, 3, 4], [0, 2, 5, 6])
    """
    if hasattr(trace, "hash_ids"):
        return trace.hash_ids, trace.offsets
    seqs = [getattr(x, "blocks", x) for x in trace]
    offsets = np.zeros(len(seqs) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, seqs), dtype=np.int64, count=len(seqs)), out=offsets[1:])
    ids = np.fromiter(itertools.chain.from_iterable(seqs), dtype=np.int64, count=int(offsets[-1]))
    return ids, offsets


def dense_ids(ids):
    """把块 id 换成 0..D-1 的小整数（访问的模式不变），返回 (新 id, D)。id 本来就不大时原样用。

    同一个数组再来时直接给上次的结果（04 的统计、MIN、05 的块的"家"都要换同一个 trace 的 id）。

    >>> dense, d = dense_ids(np.array([10 ** 9, 7, 10 ** 9]))
    >>> dense.tolist(), d
    ([1, 0, 1], 2)
    """
    if len(ids) == 0:
        return ids, 0
    if ids.min() >= 0 and ids.max() < 4 * len(ids) + 1024:
        return ids, int(ids.max()) + 1
    if _DENSE[0] is ids:
        return _DENSE[1]
    # 新 id = 在排好序、去了重的 id 里的位置（就是 np.unique 的 return_inverse）。自己排序：np.unique 只要 uniq 时
    # （numpy ≥ 2.3）走哈希，几百万个不同的 id 慢 20 倍；要 return_inverse 时又多占几个 8 字节的整列（长 trace 上百 MB）
    ordered = np.sort(ids)
    uniq = ordered[np.concatenate(([True], ordered[1:] != ordered[:-1]))]
    del ordered
    dense = np.searchsorted(uniq, ids).astype(np.int32)     # 不同的块 < 2^31 个
    dense.flags.writeable = False
    _DENSE[:] = [ids, (dense, len(uniq))]
    return dense, len(uniq)


_DENSE = [None, None]     # (最近一次的 ids 数组, dense_ids 的结果)


def first_request(ids, offsets):
    """(dense, first)：dense 是 dense_ids(ids)[0]；first[d] = 块 d 第一次出现在第几个请求。

    >>> dense, first = first_request(np.array([5, 6, 5, 7]), np.array([0, 2, 4]))
    >>> first[dense].tolist()                  # 块 5、6 第一次在请求 0，块 7 在请求 1（没出现过的 id：请求数 + 1）
    [0, 0, 0, 1]
    """
    dense, n_ids = dense_ids(ids)
    request = np.repeat(np.arange(len(offsets) - 1), np.diff(offsets))     # 每次访问是第几个请求
    first = np.full(n_ids, len(offsets), dtype=np.int64)
    np.minimum.at(first, dense, request)
    return dense, first


def shared_prefix_requests(vocab, few_shot, n_sharing, suffix_len, seed):
    """共享前缀的一批请求（04 演示 2、04b 演示 1、2）：{前缀名: (前缀, [n_sharing 个后缀])}。
    few_shot：((名字, 前缀 token 数), ...)；后缀长度在 [suffix_len[0], suffix_len[1]) 里均匀随机；token 在 [0, vocab) 里。

    >>> r = shared_prefix_requests(100, (("a", 5),), 2, (1, 3), seed=0)
    >>> len(r["a"][0]), len(r["a"][1])
    (5, 2)
    """
    rng = np.random.default_rng(seed)
    out = {}
    for name, plen in few_shot:
        prefix = rng.integers(0, vocab, plen)
        out[name] = (prefix, [rng.integers(0, vocab, int(rng.integers(*suffix_len))) for _ in range(n_sharing)])
    return out


def load_trace(path, block_size=BLOCK_SIZE):
    """读 Mooncake JSONL trace（.gz 也行），返回 Trace。逐行检查，出错抛 TraceError("文件:行号: …")。

    流式：每行读完就追加到紧凑的数组里（每个块 id 8 字节），不保留每行的 Python 对象。
    """
    ts, n_in, n_out, ids, lens = array("d"), array("q"), array("q"), array("q"), array("q")
    for t, a, b, h in iter_trace_records(path, block_size):
        ts.append(t)
        n_in.append(a)
        n_out.append(b)
        lens.append(len(h))
        ids.extend(h)
    offsets = np.zeros(len(lens) + 1, dtype=np.int64)
    np.cumsum(np.frombuffer(lens, dtype=np.int64), out=offsets[1:])
    return Trace(np.frombuffer(ts, dtype=np.float64) / 1000, np.frombuffer(n_in, dtype=np.int64),
                 np.frombuffer(n_out, dtype=np.int64), np.frombuffer(ids, dtype=np.int64), offsets)


N_REQUESTS = 23_608         # Mooncake arXiv v3 §4 / FAST'25 表 2：一小时 23,608 个请求
DURATION_S = 3600.0

# ---- 负载参数（学生可以改：改完看 04 演示 3 的统计量、演示 4 的命中率怎么变）----
FAMILY_WEIGHTS = (0.62, 0.18, 0.12, 0.08)   # 各"框架"被选中的概率：最热的那个 ≈ 62%
FAMILY_BLOCKS = (5, 3, 4, 2)                # 各框架公共前缀的块数
TEMPLATES_PER_FAMILY = 12                   # 每个框架下的具体模板数（Zipf 分布选用）
TEMPLATE_EXTRA = (128, 1536)                # 模板在框架前缀之后多出的 token 数（均匀分布）
P_ONE_SHOT = 0.50                           # 一次性请求的比例
ONE_SHOT_MEAN = 5300                        # 一次性请求独有内容的平均 token 数（对数正态）
FIRST_TURN_MEAN = 2500                      # 会话第一轮用户内容的平均 token 数
TOOL_RESULT_MEAN = 1800                     # 之后每轮新增工具结果的平均 token 数
MEAN_TURNS = 3.0                            # 每个会话的平均轮数（几何分布）
TURN_GAP_MEAN_S = 200.0                     # 相邻两轮的平均间隔（秒，指数分布）
OUTPUT_MEAN = 182                           # 平均输出 token 数（对数正态，σ = 0.8）
MAX_INPUT = 128_000                         # 上下文上限


# make_trace 读的全部设置：结果按 (seed, n_requests, duration_s, 这些设置的值) 记在本进程里，改了任何一个都重新生成
TRACE_SETTINGS = ("BLOCK_SIZE", "N_REQUESTS", "DURATION_S", "FAMILY_WEIGHTS", "FAMILY_BLOCKS", "TEMPLATES_PER_FAMILY",
                  "TEMPLATE_EXTRA", "P_ONE_SHOT", "ONE_SHOT_MEAN", "FIRST_TURN_MEAN", "TOOL_RESULT_MEAN", "MEAN_TURNS",
                  "TURN_GAP_MEAN_S", "OUTPUT_MEAN", "MAX_INPUT")
_MADE = {}                  # 键 → Trace 的五列（只读数组）；最多记 MAX_MADE 个
MAX_MADE = 4


def _lognormal_mu(mean, sigma):
    """对数正态的 μ：让均值正好是 mean（σ 给定时 E = exp(μ + σ²/2)）。"""
    return np.log(mean) - sigma ** 2 / 2


def make_trace(seed=0, n_requests=None, duration_s=None):
    """生成 n_requests 个请求（Trace），按到达时间排好，最后一个在 duration_s 秒到达。固定 seed → 同样的 trace。

    n_requests、duration_s 不给时用 N_REQUESTS、DURATION_S。同一个进程里同样的参数和设置只生成一次：
    返回的 Trace 的列是只读的（要改就先 .copy()）。

    >>> tr = make_trace(seed=0, n_requests=5)
    >>> len(tr), float(tr.arrival[-1]), tr.n_blocks.tolist() == [len(r.blocks) for r in tr]
    (5, 3600.0, True)
    >>> tr.hash_ids.flags.writeable, make_trace(seed=0, n_requests=5) == tr
    (False, True)
    """
    if n_requests is None:
        n_requests = N_REQUESTS
    if duration_s is None:
        duration_s = DURATION_S
    key = (repr(seed), repr(n_requests), repr(duration_s)) + tuple(repr(globals()[k]) for k in TRACE_SETTINGS)
    if key not in _MADE:
        cols = _generate(seed, n_requests, duration_s)
        for a in cols:
            a.flags.writeable = False
        while len(_MADE) >= MAX_MADE:
            del _MADE[next(iter(_MADE))]       # 最早生成的先丢
        _MADE[key] = cols
    return Trace(*_MADE[key])


def check_workload(n_requests, duration_s):
    """生成 trace 之前检查上面的负载参数（生成时才读）：不合理的值一行拒绝（退出码 2），说清在哪个文件、允许什么。"""
    where = "kv_store/traces.py 的 "
    fams = FAMILY_BLOCKS
    check_setting(where + "FAMILY_BLOCKS", fams, isinstance(fams, (tuple, list)) and 1 <= len(fams) <= 64
                  and all(is_int(b, 0, 10_000) for b in fams), " 1–64 个 0–10,000 的整数（各框架公共前缀的块数）")
    w = FAMILY_WEIGHTS
    check_setting(where + "FAMILY_WEIGHTS", w, isinstance(w, (tuple, list)) and len(w) == len(fams)
                  and all(is_number(x, 0) for x in w) and abs(sum(w) - 1) < 1e-9,
                  f" {len(fams)} 个非负的概率（和 FAMILY_BLOCKS 一样多），加起来是 1")
    check_setting(where + "TEMPLATES_PER_FAMILY", TEMPLATES_PER_FAMILY, is_int(TEMPLATES_PER_FAMILY, 1, 10_000),
                  " 1–10,000 的整数")
    lo_hi = TEMPLATE_EXTRA
    check_setting(where + "TEMPLATE_EXTRA", lo_hi, isinstance(lo_hi, (tuple, list)) and len(lo_hi) == 2
                  and all(is_int(x, 0, MAX_INPUT) for x in lo_hi) and lo_hi[0] < lo_hi[1],
                  " (下限, 上限) 两个整数，0 ≤ 下限 < 上限（均匀分布的 token 数）")
    check_setting(where + "P_ONE_SHOT", P_ONE_SHOT, is_number(P_ONE_SHOT, 0, 1), " 0–1 之间的数")
    for name, v in (("ONE_SHOT_MEAN", ONE_SHOT_MEAN), ("FIRST_TURN_MEAN", FIRST_TURN_MEAN),
                    ("TOOL_RESULT_MEAN", TOOL_RESULT_MEAN), ("OUTPUT_MEAN", OUTPUT_MEAN),
                    ("TURN_GAP_MEAN_S", TURN_GAP_MEAN_S)):
        check_setting(where + name, v, is_number(v) and 0 < v <= 1e9, "正数")
    check_setting(where + "MEAN_TURNS", MEAN_TURNS, is_number(MEAN_TURNS, 1, 10_000),
                  " 1–10,000 的数（几何分布的均值，至少 1 轮）")
    check_setting(where + "MAX_INPUT", MAX_INPUT, is_int(MAX_INPUT, 1, 1 << 24), " 1–16,777,216 的整数")
    check_setting("n_requests", n_requests, is_int(n_requests, 1, 10_000_000), " 1–10,000,000 的整数")
    check_setting("duration_s", duration_s, is_number(duration_s) and duration_s > 0, "正数（秒）")


def _generate(seed, n_requests, duration_s):
    """make_trace 的实际生成：返回 Trace 的五列 (arrival, input_len, output_len, hash_ids, offsets)。

    随机数的抽取顺序是固定的（改动会改变 trace）：模板的长度逐个抽；会话的开始时刻、是否一次性、轮数、模板
    各抽一整列；各会话的轮间隔按会话顺序一次抽完；每个请求按到达顺序各抽一个输入增量、一个输出长度
    （交替排成一列一次抽完——和逐个抽的结果逐位相同）。
    """
    check_workload(n_requests, duration_s)
    block = BLOCK_SIZE
    rng = np.random.default_rng(seed)
    next_id = 0

    def new_ids(n):
        nonlocal next_id
        next_id += n
        return tuple(range(next_id - n, next_id))

    # 系统提示：框架公共前缀 + 模板自己的部分；模板按 Zipf(1.2) 被选用
    templates = []                           # (完整块的 id, 系统提示的 token 数)
    for fam, fb in enumerate(FAMILY_BLOCKS):
        fam_ids = new_ids(fb)
        for _ in range(TEMPLATES_PER_FAMILY):
            extra = int(rng.integers(*TEMPLATE_EXTRA))
            templates.append((fam_ids + new_ids(extra // block), fb * block + extra))
    zipf = 1.0 / np.arange(1, TEMPLATES_PER_FAMILY + 1) ** 1.2
    tmpl_p = np.concatenate([w * zipf / zipf.sum() for w in FAMILY_WEIGHTS])

    # 先生成"会话"的骨架（开始时刻、轮数），多生成一些，再截取前 n_requests 个请求
    per_session = P_ONE_SHOT * 1 + (1 - P_ONE_SHOT) * MEAN_TURNS
    n_sessions = int(n_requests / per_session * 1.15) + 10
    starts = rng.uniform(0, duration_s, n_sessions)
    one_shot = rng.random(n_sessions) < P_ONE_SHOT
    turns = np.where(one_shot, 1, rng.geometric(1 / MEAN_TURNS, n_sessions))
    tmpl = rng.choice(len(templates), n_sessions, p=tmpl_p)

    # 第 k 轮的到达时刻 = 开始时刻 + 前 k 个间隔之和（gaps 的第 s 行放会话 s 的 turns[s] − 1 个间隔）
    session = np.repeat(np.arange(n_sessions), turns)                    # 每一轮属于哪个会话 (总轮数,)
    turn = np.arange(len(session)) - np.repeat(np.cumsum(turns) - turns, turns)   # 第几轮（从 0 起）
    gaps = np.zeros((n_sessions, int(turns.max())))
    later = turn > 0
    gaps[session[later], turn[later]] = rng.exponential(TURN_GAP_MEAN_S, int(later.sum()))
    when = starts[session] + np.cumsum(gaps, axis=1)[session, turn]      # 逐行累加：和逐个会话 cumsum 相同
    order = np.lexsort((turn, session, when))[:n_requests]               # 按 (时刻, 会话, 轮) 排序
    times, sess, turn = when[order].tolist(), session[order].tolist(), turn[order].tolist()
    scale = duration_s / times[-1]           # 把最后一个请求放在 duration_s：正好一小时

    # 每个请求两个对数正态：输入增量（第一轮是用户内容或一次性内容，之后是工具结果；σ = 0.9）和输出长度（σ = 0.8）
    first_mu = np.where(one_shot, _lognormal_mu(ONE_SHOT_MEAN, 0.9), _lognormal_mu(FIRST_TURN_MEAN, 0.9))
    mu = np.empty(2 * len(times))
    mu[0::2] = np.where(np.asarray(turn) == 0, first_mu[sess], _lognormal_mu(TOOL_RESULT_MEAN, 0.9))
    mu[1::2] = _lognormal_mu(OUTPUT_MEAN, 0.8)
    draws = rng.lognormal(mu, np.tile([0.9, 0.8], len(times))).tolist()

    ctx = {}                                 # 会话号 → (上一轮输入的完整块 id, 上一轮输入长度 + 输出长度)
    arrival, n_ins, n_outs, lens, ids = [], [], [], [], array("q")
    tmpl = tmpl.tolist()                     # Python 整数：逐个取比 numpy 的元素快
    for i, (t, s, k) in enumerate(zip(times, sess, turn)):
        if k == 0:
            prev_ids, sys_len = templates[tmpl[s]]
            n_in = sys_len + int(draws[2 * i])
        else:
            prev_ids, prev_total = ctx[s]
            n_in = prev_total + int(draws[2 * i])
        n_in = min(n_in, MAX_INPUT)
        nb = -(-n_in // block)
        keep = prev_ids[:n_in // block]                       # 共享前缀：之前的完整块原样复用（切片不会超过它的长度）
        blocks = keep + new_ids(nb - len(keep))               # 其余（含不满的最后一块）是新块
        n_out = max(1, int(draws[2 * i + 1]))
        ctx[s] = (blocks[:n_in // block], n_in + n_out)
        arrival.append(round(t * scale, 3))
        n_ins.append(n_in)
        n_outs.append(n_out)
        lens.append(nb)
        ids.extend(blocks)
    offsets = np.zeros(len(lens) + 1, dtype=np.int64)
    np.cumsum(lens, out=offsets[1:])
    return (np.array(arrival, dtype=np.float64), np.array(n_ins, dtype=np.int64), np.array(n_outs, dtype=np.int64),
            np.frombuffer(ids, dtype=np.int64), offsets)
