"""读真实的请求 trace（Mooncake 公开的 JSONL 格式），逐行检查，错误给出"文件:行号: 哪里不对"。

    from kv_trace import load_trace          # （kv_store 也导出同一个函数）
    tr = load_trace("../shared/traces/mooncake_fast25_synthetic_trace.jsonl")
    len(tr), tr[0].input_len, len(tr[0].blocks)      # (3993, 40160, 79)

格式：每行一个 JSON 对象 {"timestamp": 毫秒, "input_length": 整数, "output_length": 整数,
"hash_ids": [整数, ...]}；hash_ids 是每 BLOCK（512）个 token 一块的链式哈希 id。文件名以 .gz 结尾时
按 gzip 读。逐行读（流式），不把整个文件读进内存。到达时刻 arrival = timestamp / 1000（秒）。

什么算错误、什么不算（错误 → 抛 TraceError，脚本打印一行 "文件:行号: 说明"，退出码 2）：
  错误：文件不存在 / 是目录 / 读不了（行号记为 0，表示整个文件）；文件里一个请求也没有（空文件或
        只有空行，行号 0）；某行不是合法 JSON 或不是 JSON 对象；缺字段；类型不对（长度和 hash id
        必须是整数——true/false 和 3.0 都不算整数；timestamp 可以是整数或有限的小数）；
        timestamp、output_length 为负；input_length < 1；hash id 为负；同一个请求里 hash id 重复；
        len(hash_ids) ≠ ceil(input_length / block)（块大小不对时每一行都会这样，提示里会说）；
        timestamp 比上一行小（trace 必须按到达时间排好）。
  不算错误、静默接受（不影响任何统计量）：空白行（跳过，但行号照算）；多出来的字段（忽略）；
        output_length = 0（只做 prefill 的请求，合法）；相邻请求 timestamp 相同（同时到达）；
        第一条的 timestamp 不是 0（时长按最后一条减第一条算）；Windows 换行符。
  没有"警告"这一级：课堂上一闪而过的警告没人看。会让数字算错的一律报错，不会的一律接受。
参数错误（block ≤ 0 或不是整数）抛普通的 ValueError。
"""
import gzip
import json
import math
from dataclasses import dataclass

BLOCK = 512                 # 每块 token 数（和 Mooncake trace 一致）
FIELDS = ("timestamp", "input_length", "output_length", "hash_ids")


@dataclass
class Request:
    arrival: float           # 到达时间（秒）
    input_len: int           # 输入 token 数
    output_len: int          # 输出 token 数
    blocks: tuple            # 每块的哈希 id（整数，同 Mooncake 的 hash_ids），共 ceil(input_len / 512) 个


class TraceError(ValueError):
    """trace 文件有问题。str(e) == "文件:行号: 哪里不对"（行号 0 = 整个文件）。"""

    def __init__(self, path, line, what):
        self.path, self.line, self.what = str(path), line, what
        super().__init__(f"{self.path}:{line}: {what}")


def _is_int(x):
    return isinstance(x, int) and not isinstance(x, bool)       # bool 是 int 的子类，要排除


def _parse_line(text, block, bad):
    """一行 → (timestamp 毫秒, input_length, output_length, hash_ids 元组)；有问题就调用 bad(说明)。"""
    try:
        d = json.loads(text.rstrip())
    except json.JSONDecodeError as e:
        raise bad(f"不是合法的 JSON（第 {e.colno} 列：{e.msg}）") from None
    if not isinstance(d, dict):
        raise bad(f"应该是 JSON 对象 {{...}}，读到的是 {type(d).__name__}")
    missing = [f for f in FIELDS if f not in d]
    if missing:
        raise bad(f"缺少字段 {', '.join(missing)}（需要 {', '.join(FIELDS)}）")
    ts, n_in, n_out, ids = (d[f] for f in FIELDS)
    if not (_is_int(ts) or isinstance(ts, float)) or not math.isfinite(ts):
        raise bad(f"timestamp 应该是数（毫秒），读到 {ts!r}")
    for name, v in (("input_length", n_in), ("output_length", n_out)):
        if not _is_int(v):
            raise bad(f"{name} 应该是整数，读到 {v!r}")
    if ts < 0:
        raise bad(f"timestamp 不能为负，读到 {ts!r}")
    if n_in < 1:
        raise bad(f"input_length 至少是 1，读到 {n_in}")
    if n_out < 0:
        raise bad(f"output_length 不能为负，读到 {n_out}")
    if not isinstance(ids, list):
        raise bad(f"hash_ids 应该是整数列表，读到 {type(ids).__name__}")
    for k, h in enumerate(ids):
        if not _is_int(h) or not 0 <= h < 2 ** 63:
            raise bad(f"hash_ids 的第 {k + 1} 个元素应该是非负整数，读到 {h!r}")
    want = -(-n_in // block)
    if len(ids) != want:
        raise bad(f"hash_ids 有 {len(ids)} 个，但 input_length {n_in} 按每块 {block} 个 token 应该是 "
                  f"{want} 块（块大小不对？）")
    if len(set(ids)) != len(ids):
        raise bad("hash_ids 里有重复的 id（链式哈希下同一个请求的各块互不相同）")
    return ts, n_in, n_out, tuple(ids)


def load_trace(path, block=BLOCK):
    """读 Mooncake JSONL trace（.gz 也行），返回 Request 列表（文件里的顺序）。出错抛 TraceError。"""
    if not _is_int(block) or block <= 0:
        raise ValueError(f"块大小必须是正整数，收到 {block!r}")
    path = str(path)
    opener = gzip.open if path.endswith(".gz") else open
    out, prev_ts, lineno = [], None, 0
    try:
        with opener(path, "rt", encoding="utf-8") as f:
            for lineno, text in enumerate(f, 1):
                if not text.strip():
                    continue                                  # 空白行：跳过
                ts, n_in, n_out, ids = _parse_line(text, block, lambda what: TraceError(path, lineno, what))
                if prev_ts is not None and ts < prev_ts:
                    raise TraceError(path, lineno, f"timestamp {ts} 比上一个请求的 {prev_ts} 小："
                                                   "trace 必须按到达时间排好")
                prev_ts = ts
                out.append(Request(ts / 1000, n_in, n_out, ids))
    except FileNotFoundError:
        raise TraceError(path, 0, "文件不存在") from None
    except IsADirectoryError:
        raise TraceError(path, 0, "这是一个目录，不是 trace 文件") from None
    except UnicodeDecodeError:
        raise TraceError(path, lineno + 1, "不是 UTF-8 文本（二进制文件？.gz 文件要以 .gz 结尾）") from None
    except (OSError, EOFError) as e:                        # 没有读权限、gzip 文件损坏……
        raise TraceError(path, lineno, f"读不了：{e.strerror or e}") from None
    if not out:
        raise TraceError(path, 0, "文件里没有任何请求（空文件？）")
    return out
