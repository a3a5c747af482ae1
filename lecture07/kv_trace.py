"""合成的请求 trace：模仿 Mooncake 公开的 Tool&Agent trace（FAST'25 表 2）的几个统计量。

真实 trace 的格式（每行一个 JSON）：{"timestamp": 毫秒, "input_length", "output_length",
"hash_ids": [...]}，hash_ids 是每 512 个 token 一块的链式哈希 id。这里生成同样的东西：

    tr = make_trace(seed=0)
    tr[0]          # Request(arrival=0.409, input_len=7179, output_len=102, blocks=(0, 1, 2, 3, 4, 9, 64, ..., 72))

负载的结构（工具调用 / 智能体场景）：
- 系统提示：几个"框架"各有一段公共前缀（工具说明），每个框架下又有若干具体模板；
  最热的框架被大多数请求共用 → 它的第一块被访问上万次；
- 会话：智能体一轮一轮地调用模型，每一轮的输入 = 上一轮的输入 + 上一轮的输出 + 新的工具结果，
  所以相邻两轮共享前缀；两轮之间隔几秒到几分钟（时间局部性：LRU 擅长的情况）；
- 一次性请求：系统提示 + 一大段只出现一次的内容（文档、网页），这些块之后再没人用。

换成真实 trace：load_trace(路径) 读 Mooncake 公开的 JSONL（见 kv_trace_io.py：格式、哪些算错误）。
"""

import numpy as np

# Request、BLOCK 和读真实 trace 的 load_trace 在 kv_trace_io.py 里，这里一并导出
from kv_trace_io import BLOCK, Request, TraceError, load_trace  # noqa: F401

N_REQUESTS = 23_608         # Mooncake arXiv v3 §4 / FAST'25 表 2：一小时 23,608 个请求
DURATION_S = 3600.0

# ---- 负载参数（学生可以改：改完看演示 3 的统计量和命中率怎么变）----
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


def _lognormal(rng, mean, sigma, size=None):
    return rng.lognormal(np.log(mean) - sigma ** 2 / 2, sigma, size)


def make_trace(seed=0, n_requests=N_REQUESTS, duration_s=DURATION_S):
    """生成 n_requests 个请求，按到达时间排好，最后一个在 duration_s 秒到达。固定 seed → 同样的 trace。"""
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
            templates.append((fam_ids + new_ids(extra // BLOCK), fb * BLOCK + extra))
    zipf = 1.0 / np.arange(1, TEMPLATES_PER_FAMILY + 1) ** 1.2
    tmpl_p = np.concatenate([w * zipf / zipf.sum() for w in FAMILY_WEIGHTS])

    # 先生成"会话"的骨架（开始时刻、轮数），多生成一些，再截取前 n_requests 个请求
    per_session = P_ONE_SHOT * 1 + (1 - P_ONE_SHOT) * MEAN_TURNS
    n_sessions = int(n_requests / per_session * 1.15) + 10
    starts = rng.uniform(0, duration_s, n_sessions)
    one_shot = rng.random(n_sessions) < P_ONE_SHOT
    turns = np.where(one_shot, 1, rng.geometric(1 / MEAN_TURNS, n_sessions))
    tmpl = rng.choice(len(templates), n_sessions, p=tmpl_p)

    events = []                              # (到达时刻, 会话号, 第几轮)
    for s in range(n_sessions):
        t = starts[s] + np.concatenate([[0.0], np.cumsum(rng.exponential(TURN_GAP_MEAN_S, turns[s] - 1))])
        events.extend((float(x), s, k) for k, x in enumerate(t))
    events.sort()
    events = events[:n_requests]
    scale = duration_s / events[-1][0]       # 把最后一个请求放在 duration_s：正好一小时

    ctx = {}                                 # 会话号 → (上一轮输入的完整块 id, 上一轮输入长度 + 输出长度)
    out = []
    for t, s, k in events:
        sys_ids, sys_len = templates[tmpl[s]]
        if k == 0:
            mean = ONE_SHOT_MEAN if one_shot[s] else FIRST_TURN_MEAN
            n_in = sys_len + int(_lognormal(rng, mean, 0.9))
            prev_ids = sys_ids
        else:
            prev_ids, prev_total = ctx[s]
            n_in = prev_total + int(_lognormal(rng, TOOL_RESULT_MEAN, 0.9))
        n_in = min(n_in, MAX_INPUT)
        nb = -(-n_in // BLOCK)
        keep = prev_ids[:min(len(prev_ids), n_in // BLOCK)]   # 共享前缀：之前的完整块原样复用
        blocks = keep + new_ids(nb - len(keep))               # 其余（含不满的最后一块）是新块
        n_out = max(1, int(_lognormal(rng, OUTPUT_MEAN, 0.8)))
        ctx[s] = (blocks[:n_in // BLOCK], n_in + n_out)
        out.append(Request(round(t * scale, 3), n_in, n_out, blocks))
    return out
