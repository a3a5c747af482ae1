"""请求 trace：一个请求一个 Request，整个 trace 是 list[Request]。合成的 make_trace，读文件的 load_trace。

Mooncake 公开的 trace 每行一个 JSON：{"timestamp": 毫秒, "input_length", "output_length", "hash_ids": [...]}，
hash_ids 是每 512 个 token 一块的链式哈希 id（不满的最后一块也有一个 id）。make_trace 生成同样的东西，
模仿 Tool&Agent 负载（Mooncake FAST'25 表 2）的几个统计量：
- 系统提示：几个"框架"各有一段公共前缀（工具说明），每个框架下又有若干模板；最热的框架被大多数请求共用；
- 会话：智能体一轮一轮地调用模型，这一轮的输入 = 上一轮的输入 + 上一轮的输出 + 新的工具结果，
  所以相邻两轮共享前缀；两轮之间隔几秒到几分钟（时间局部性：LRU 擅长的情况）；
- 一次性请求：系统提示 + 一大段只出现一次的内容（文档、网页），这些块之后再没人用。

    >>> tr = make_trace(seed=0, n_requests=3)
    >>> len(tr), tr[-1].arrival, [len(r.blocks) == -(-r.input_len // BLOCK_SIZE) for r in tr]
    (3, 3600.0, [True, True, True])
"""
import gzip
import json
import os
import zlib
from typing import NamedTuple

import numpy as np

from lab_common import show
from kv_store.policies import BLOCK_SIZE   # 每块 token 数（和 Mooncake 的 trace 一样：512）



class Request(NamedTuple):
    arrival: float           # 到达时刻（秒）
    input_len: int           # 输入 token 数
    output_len: int          # 输出 token 数
    blocks: tuple            # 每块的 id：ceil(input_len / BLOCK_SIZE) 个整数


# ---- 合成负载的参数（改了看 04 演示 3、4 的数怎么变）----
N_REQUESTS = 23_608          # 一小时的请求数（Mooncake arXiv v3 §4、FAST'25 表 2 的 Tool&Agent）
DURATION_S = 3600.0          # 最后一个请求的到达时刻（秒）
FAMILY_WEIGHTS = (0.62, 0.18, 0.12, 0.08)   # 各"框架"被选中的概率：最热的那个 ≈ 62%
FAMILY_BLOCKS = (5, 3, 4, 2)                # 各框架公共前缀的块数
TEMPLATES_PER_FAMILY = 12    # 每个框架下的模板数（按 Zipf(1.2) 选用）
TEMPLATE_EXTRA = (128, 1536)  # 模板在框架前缀之后多出的 token 数（均匀分布）
P_ONE_SHOT = 0.50            # 一次性请求的比例
ONE_SHOT_MEAN = 5300         # 一次性请求独有内容的平均 token 数（对数正态，σ = 0.9）
FIRST_TURN_MEAN = 2500       # 会话第一轮用户内容的平均 token 数（σ = 0.9）
TOOL_RESULT_MEAN = 1800      # 之后每轮新增工具结果的平均 token 数（σ = 0.9）
MEAN_TURNS = 3.0             # 每个会话的平均轮数（几何分布）
TURN_GAP_MEAN_S = 200.0      # 相邻两轮的平均间隔（秒，指数分布）
OUTPUT_MEAN = 182            # 平均输出 token 数（对数正态，σ = 0.8）
MAX_INPUT = 128_000          # 上下文上限（token）


def _mu(mean, sigma):
    """对数正态的 μ，让均值正好是 mean：E = exp(μ + σ²/2)。"""
    return np.log(mean) - sigma ** 2 / 2


def check_workload(n_requests=N_REQUESTS, duration_s=DURATION_S):
    """上面的负载参数（和 make_trace 的两个参数）：不合理的一行拒绝，退出码 2。make_trace 生成之前先查。"""
    num, n, at = show.is_number, len(FAMILY_BLOCKS), "kv_store/trace.py 的 "
    show.check("n_requests", n_requests, show.is_int(n_requests, 1, 10 ** 7), " 1 到 10⁷ 的整数")
    show.check("duration_s", duration_s, num(duration_s, 1, 10 ** 7), " 1 到 10⁷ 的数（秒）")
    show.check(at + "FAMILY_BLOCKS", FAMILY_BLOCKS, isinstance(FAMILY_BLOCKS, tuple) and n > 0
               and all(show.is_int(b, 1, 1000) for b in FAMILY_BLOCKS), "非空的、1 到 1,000 的整数的元组")
    show.check(at + "FAMILY_WEIGHTS", FAMILY_WEIGHTS, isinstance(FAMILY_WEIGHTS, tuple) and len(FAMILY_WEIGHTS) == n
               and all(num(w, 1e-6, 1) for w in FAMILY_WEIGHTS) and abs(sum(FAMILY_WEIGHTS) - 1) < 1e-6,
               f" {n} 个（和 FAMILY_BLOCKS 一样多）0 到 1 之间、和为 1 的正数")
    show.check(at + "TEMPLATES_PER_FAMILY", TEMPLATES_PER_FAMILY, show.is_int(TEMPLATES_PER_FAMILY, 1, 1000),
               " 1 到 1,000 的整数")
    show.check(at + "TEMPLATE_EXTRA", TEMPLATE_EXTRA, show.is_ints(TEMPLATE_EXTRA, 0, 10 ** 5) and len(TEMPLATE_EXTRA) == 2,
               " (最少, 最多 + 1) 两个 0 到 100,000 的整数，前一个小")
    show.check(at + "P_ONE_SHOT", P_ONE_SHOT, num(P_ONE_SHOT, 0, 1), " 0 到 1 的数（比例）")
    show.check(at + "MEAN_TURNS", MEAN_TURNS, num(MEAN_TURNS, 1, 1000), " 1 到 1,000 的数")
    show.check(at + "TURN_GAP_MEAN_S", TURN_GAP_MEAN_S, num(TURN_GAP_MEAN_S, 0.001, 10 ** 6), " 0.001 到 10⁶ 的数（秒）")
    show.check(at + "MAX_INPUT", MAX_INPUT, show.is_int(MAX_INPUT, 1, 10 ** 7), " 1 到 10⁷ 的整数（token）")
    for name in ("ONE_SHOT_MEAN", "FIRST_TURN_MEAN", "TOOL_RESULT_MEAN", "OUTPUT_MEAN"):
        show.check(at + name, globals()[name], num(globals()[name], 1, 10 ** 6), " 1 到 10⁶ 的数（token）")


def make_trace(seed=0, n_requests=N_REQUESTS, duration_s=DURATION_S):
    """n_requests 个请求，按到达时刻排好，最后一个在 duration_s 秒。同一个 seed → 同一个 trace。
    （随机数的抽取顺序是固定的：改了顺序，trace 就变了。）"""
    check_workload(n_requests, duration_s)
    rng = np.random.default_rng(seed)
    next_id = [0]

    def new_ids(n):                          # n 个从没用过的块 id
        next_id[0] += n
        return tuple(range(next_id[0] - n, next_id[0]))

    templates = []                           # (系统提示的完整块 id, 系统提示的 token 数)
    for fam_blocks in FAMILY_BLOCKS:
        fam_ids = new_ids(fam_blocks)
        for _ in range(TEMPLATES_PER_FAMILY):
            extra = int(rng.integers(*TEMPLATE_EXTRA))
            templates.append((fam_ids + new_ids(extra // BLOCK_SIZE), fam_blocks * BLOCK_SIZE + extra))
    zipf = 1.0 / np.arange(1, TEMPLATES_PER_FAMILY + 1) ** 1.2
    template_p = np.concatenate([w * zipf / zipf.sum() for w in FAMILY_WEIGHTS])

    # 会话：开始时刻、是否一次性、轮数、模板。多生成一些，最后按到达时刻取前 n_requests 个请求
    n_sessions = int(n_requests / (P_ONE_SHOT + (1 - P_ONE_SHOT) * MEAN_TURNS) * 1.15) + 10
    starts = rng.uniform(0, duration_s, n_sessions)
    one_shot = rng.random(n_sessions) < P_ONE_SHOT
    turns = np.where(one_shot, 1, rng.geometric(1 / MEAN_TURNS, n_sessions)).tolist()
    template = rng.choice(len(templates), n_sessions, p=template_p).tolist()
    gaps = iter(rng.exponential(TURN_GAP_MEAN_S, sum(turns) - n_sessions).tolist())   # 轮间隔，按会话顺序
    turn_list = []                           # (到达时刻, 会话, 第几轮)
    for s in range(n_sessions):
        elapsed = 0.0
        turn_list.append((float(starts[s]), s, 0))
        for k in range(1, turns[s]):
            elapsed += next(gaps)
            turn_list.append((float(starts[s] + elapsed), s, k))
    turn_list = sorted(turn_list)[:n_requests]
    scale = duration_s / turn_list[-1][0]   # 把最后一个请求放在 duration_s

    # 每个请求两个对数正态：输入增量（第一轮是用户内容或一次性内容，之后是工具结果）和输出长度
    mu_one_shot, mu_first, mu_tool = _mu(ONE_SHOT_MEAN, 0.9), _mu(FIRST_TURN_MEAN, 0.9), _mu(TOOL_RESULT_MEAN, 0.9)
    mu, sigma = [], []
    for _, s, k in turn_list:
        mu_in = mu_tool
        if k == 0 and one_shot[s]:
            mu_in = mu_one_shot
        elif k == 0:
            mu_in = mu_first
        mu += [mu_in, _mu(OUTPUT_MEAN, 0.8)]
        sigma += [0.9, 0.8]
    draws = rng.lognormal(mu, sigma).tolist()

    trace, context = [], {}                  # context：会话 → (上一轮输入的完整块 id, 上一轮输入 + 输出的长度)
    for i, (t, s, k) in enumerate(turn_list):
        prev_ids, prev_len = templates[template[s]]
        if k > 0:
            prev_ids, prev_len = context[s]
        n_in = min(prev_len + int(draws[2 * i]), MAX_INPUT)
        keep = prev_ids[:n_in // BLOCK_SIZE]                   # 共享的前缀：之前的完整块原样复用
        blocks = keep + new_ids(-(-n_in // BLOCK_SIZE) - len(keep))   # 其余（含不满的最后一块）是新块
        n_out = max(1, int(draws[2 * i + 1]))
        context[s] = (blocks[:n_in // BLOCK_SIZE], n_in + n_out)
        trace.append(Request(round(t * scale, 3), n_in, n_out, blocks))
    return trace


# ---- 读 Mooncake 的 JSONL（.gz 也行）：坏的输入一行说清"文件:行号: 哪里不对"，退出码 2 ----
FIELDS = ("timestamp", "input_length", "output_length", "hash_ids")
MAX_LINE = 2 ** 20           # 一行最多 1 MiB（真实的一行只有几 KB）：/dev/zero、gzip 炸弹都只读 1 MiB 就停
MAX_EXACT = 2 ** 53          # 数的上限（不含）：再大 float 就表示不准了


def load_trace(path):
    """Mooncake 格式的 trace 文件 → list[Request]（arrival = timestamp / 1000 秒）。一行一行读、一行一行查。

    接受：空白行、多出来的字段、output_length = 0、相同的 timestamp、\\r\\n、第 1 行开头的 BOM、拼接的 .gz。
    其余的问题（文件打不开、gzip 坏了、不是 UTF-8、行太长、JSON 不对、字段缺了或类型、范围不对、块数对不上、
    同一请求里 id 重复、timestamp 倒退、一个请求也没有）都一行拒绝。"""
    path = os.fsdecode(path)
    shown = '""'
    if path:
        shown = "".join(c if c.isprintable() else ascii(c)[1:-1] for c in path)   # 文件名里的换行转义成 \n
    opener, trace, lineno, prev_ts = open, [], -1, 0       # lineno = -1：文件还没打开（报第 0 行 = 整个文件）
    if path.endswith(".gz"):
        opener = gzip.open
    try:
        with opener(path, "rb") as f:
            lineno = 0
            for raw in iter(lambda: f.readline(MAX_LINE + 1), b""):
                lineno += 1
                if len(raw) > MAX_LINE and not raw.endswith(b"\n"):
                    show.fail(f"{shown}:{lineno}: 这一行超过 1 MiB 还没有换行（文件坏了，或者不是 JSONL？）")
                if lineno == 1:
                    raw = raw.removeprefix(b"\xef\xbb\xbf")        # Windows 记事本加的 BOM
                try:
                    ts, n_in, n_out, ids = _parse(raw)
                except ValueError as e:
                    show.fail(f"{shown}:{lineno}: {e}")
                if ts is None:
                    continue                                       # 空白行
                if ts < prev_ts:
                    show.fail(f"{shown}:{lineno}: timestamp {ts} 比上一行的 {prev_ts} 小（trace 要按到达时刻排好）")
                prev_ts = ts
                trace.append(Request(ts / 1000, n_in, n_out, tuple(ids)))
    except (OSError, EOFError, zlib.error) as e:
        show.fail(f"{shown}:{lineno + 1}: {_read_error(e, path)}")       # 从这一行起读不出来
    if not trace:
        show.fail(f"{shown}:0: 文件里没有任何请求（空文件？）")
    return trace


def _parse(raw):
    """一行的字节 → (timestamp 毫秒, input_length, output_length, hash_ids)；空白行 → (None, …)；不对就 ValueError(说明)。"""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        hint = "trace 要用 UTF-8 保存"
        if raw.startswith(b"\x1f\x8b"):
            hint = "这是 gzip 文件：文件名要以 .gz 结尾"
        raise ValueError(f"不是 UTF-8 文本：第 {e.start + 1} 个字节不合法（{hint}）") from None
    if not text.strip():
        return None, None, None, None
    try:
        d = json.loads(text, object_pairs_hook=_object, parse_constant=_no_constant)
    except RecursionError:
        raise ValueError("JSON 嵌套得太深") from None
    except ValueError as e:                       # JSON 语法错、NaN、重复的键、超过 4300 位的整数
        raise ValueError(f"不是合法的 JSON：{_cut(str(e), 60)}") from None
    if type(d) is not dict:
        raise ValueError(f"应该是 JSON 对象 {{...}}，读到的是 {type(d).__name__}")
    missing = [k for k in FIELDS if k not in d]
    if missing:
        raise ValueError(f"缺少字段 {', '.join(missing)}（要有 {', '.join(FIELDS)}）")
    ts, n_in, n_out, ids = (d[k] for k in FIELDS)
    if type(ts) not in (int, float) or not 0 <= ts < MAX_EXACT:            # true/false 是 bool，不算数
        raise ValueError(f"timestamp 应该是 [0, 2^53) 里的数（毫秒），读到 {_cut(repr(ts))}")
    for name, v, lo in (("input_length", n_in, 1), ("output_length", n_out, 0)):
        if type(v) is not int or not lo <= v < MAX_EXACT:
            raise ValueError(f"{name} 应该是 [{lo}, 2^53) 里的整数，读到 {_cut(repr(v))}")
    if type(ids) is not list or not all(type(h) is int and 0 <= h < MAX_EXACT for h in ids):
        raise ValueError(f"hash_ids 应该是 [0, 2^53) 里的整数组成的列表，读到 {_cut(repr(ids))}")
    if len(ids) != -(-n_in // BLOCK_SIZE):
        raise ValueError(f"hash_ids 有 {len(ids)} 个，但 input_length {n_in} 按每块 {BLOCK_SIZE} 个 token "
                         f"应该是 {-(-n_in // BLOCK_SIZE)} 块")
    if len(set(ids)) < len(ids):
        raise ValueError("hash_ids 里有重复的 id（链式哈希下同一个请求的各块互不相同）")
    return ts, n_in, n_out, ids


def _object(pairs):
    """同一个 JSON 对象里一个键出现两次：不知道该用哪个，不悄悄取后一个。"""
    d = dict(pairs)
    if len(d) < len(pairs):
        raise ValueError("同一个对象里有重复的键")
    return d


def _no_constant(name):
    raise ValueError(f"{name} 不是 JSON 的数")


def _cut(text, width=40):
    """坏行里的值可能有几 MB：说明里只引用开头。"""
    if len(text) > width:
        return text[:width - 3] + "..."
    return text


def _read_error(e, path):
    """打不开、读不下去的原因（一句话）。"""
    if isinstance(e, FileNotFoundError) and not path:
        return "文件名是空的"
    if isinstance(e, FileNotFoundError):
        return "文件不存在"
    if isinstance(e, IsADirectoryError):
        return "这是一个目录，不是 trace 文件"
    if isinstance(e, PermissionError):
        return "没有读权限"
    if isinstance(e, EOFError):
        return "gzip 文件被截断了（下载或复制不完整？）"
    if isinstance(e, (gzip.BadGzipFile, zlib.error)):
        return f"gzip 数据坏了（{e}）"
    return f"读不了：{e.strerror or e}"
