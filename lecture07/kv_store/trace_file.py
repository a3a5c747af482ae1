"""读真实的请求 trace（Mooncake 公开的 JSONL 格式），逐行检查，错误给出"文件:行号: 哪里不对"。

    from kv_store.traces import load_trace          # 列式的 Trace；建在下面的 iter_trace_records 上
    tr = load_trace("../shared/traces/mooncake_fast25_synthetic_trace.jsonl")
    len(tr), tr[0].input_len, len(tr[0].blocks)      # (3993, 40160, 79)

    for ts, n_in, n_out, ids in iter_trace_records(路径):   # 流式：一次只有一行在内存里
        ...                                                  # ts 毫秒（float），ids 是 list[int]

格式：每行一个 JSON 对象 {"timestamp": 毫秒, "input_length": 整数, "output_length": 整数,
"hash_ids": [整数, ...]}；hash_ids 是每 BLOCK_SIZE（512）个 token 一块的链式哈希 id。文件名以 .gz 结尾时
按 gzip 读。按字节分块读、逐行解码：内存里最多一行（行长有上限），不把整个文件读进来。
到达时刻 arrival = timestamp / 1000（秒）。

什么算错误、什么不算（错误 → 抛 TraceError，脚本打印一行 "文件:行号: 说明"，退出码 2）：
  整个文件的错误（行号 0）：文件不存在（文件名是空字符串也算，显示成 ""）；是目录；没有读权限；
        一个请求也没有（空文件、只有空白行、空的 .gz）。
  读文件的错误（行号 = 第一条没读出来的行，它之前的行都已读出）：
        这一行不是 UTF-8（说明第几个字节；每行单独解码，行号就是坏字节所在的行）；
        这一行超过 MAX_LINE_BYTES（1 MiB）还没换行（1 GB 的一行、gzip 炸弹都只读 1 MiB 就停）；
        .gz：其实不是 gzip；被截断；压缩数据损坏；校验和（CRC、长度）不对；gzip 数据后面还有别的字节。
        不以 .gz 结尾的 gzip 文件：第 1 行"不是 UTF-8"，并提示改文件名。
  一行的错误（行号 = 这一行）：
        JSON：不合法（包括 NaN、Infinity：JSON 里没有）；嵌套超过 MAX_DEPTH（64）层；整数超过 4300 位；
        同一个对象里一个键出现两次（不知道该用哪个，不悄悄取后一个）；不是 JSON 对象；缺字段。
        字段：长度和 hash id 必须是整数（true/false 和 3.0 都不算）；timestamp 是整数或有限的小数；
        timestamp、output_length、hash id 在 [0, 2^53) 里，input_length 在 [1, 2^53) 里
        （2^53 以上 float 表示不准；真实 trace 远到不了）；同一个请求里 hash id 重复；
        len(hash_ids) ≠ ceil(input_length / 块大小)（块大小不对时每一行都会这样，提示里会说）；
        timestamp 比上一行小（trace 必须按到达时间排好）。
        .gz 文件里某行不对、而 gzip 本身也坏了（往后最多再解压 256 MB 来查）：说明里加一句
        "这一行多半是损坏的压缩数据解出来的乱码"。
  接受（不影响任何统计量）：空白行（跳过，行号照算）；多出来的字段（内容不管，只要是合法 JSON）；
        output_length = 0（只做 prefill 的请求）；相邻请求 timestamp 相同（同时到达）；第一条的 timestamp
        不是 0（时长按最后一条减第一条算）；Windows 换行符 \r\n；第 1 行开头的 UTF-8 BOM（Windows 记事本
        会加；别的行开头的 BOM 算 JSON 错误）；多段拼接的 .gz（cat a.gz b.gz）和末尾补的零字节。
  消息永远只有一行：文件名里的换行等控制字符转义成 \n 之类；说明里引用的值超过 40 个字符就截断。
  不处理：只用 \r 换行的文件（老式 Mac）整个算一行，报 JSON 错误；没有写端的 FIFO（命名管道）
        一直等下去（open 本身就阻塞，和 cat 一样；有写端时照常流式读）。
  内存：按 64 KiB 一块读，任何时候最多一块加一行；坏文件最多比导入后多几十 MB（恶意的 1 MiB 合法行）。
  没有"警告"这一级：课堂上一闪而过的警告没人看。会让数字算错的一律报错，不会的一律接受。
参数错误（块大小 ≤ 0 或不是整数）抛普通的 ValueError。
"""
import gzip
import json
import math
import os
import re
import zlib
from dataclasses import dataclass


BLOCK_SIZE = 512            # 每块 token 数（和 Mooncake trace 一致）
FIELDS = ("timestamp", "input_length", "output_length", "hash_ids")
MAX_LINE_BYTES = 2 ** 20         # 一行最长 1 MiB（真实 trace 一行不到 3 KB）：1 GB 的一行只读 1 MiB 就报错；
                                # 合法但恶意的 1 MiB 行（几十万个 []）解析后也只占几十 MB
MAX_DEPTH = 64                  # JSON 最多嵌套几层（合法的一行是 2 层）：防 10 万个 "[" 把解析器递归爆
MAX_EXACT = 2 ** 53             # 整数上限（不含）：再大 float 就表示不准了
_CHUNK = 64 * 1024                # 每次从文件读 64 KiB
GZIP_CHECK_BYTES = 256 * 2 ** 20  # .gz 里某行不对时，再往后解压这么多看 gzip 本身坏没坏（约 1 秒）
_GZIP_MAGIC = b"\x1f\x8b"
# 一个完整的 JSON 字符串，或一个括号，或落单的引号。字符串体先在先行断言 (?=(...)) 里贪婪地匹配、再用 \1 吃掉：
# 断言一旦成立就不再回溯进去（Python 3.10 没有占有量词 *+），一长串 \" 上也是线性时间
_TOKEN = re.compile(r'"(?=([^"\\]*(?:\\.[^"\\]*)*))\1"|[\[\]{}"]', re.DOTALL)


@dataclass
class Request:
    arrival: float           # 到达时间（秒）
    input_len: int           # 输入 token 数
    output_len: int          # 输出 token 数
    blocks: tuple            # 每块的哈希 id（整数，同 Mooncake 的 hash_ids），共 ceil(input_len / 512) 个


def printable(text):
    """把控制字符转义，保证错误消息只有一行；空字符串显示成 ""。

    >>> printable("a\\nb.jsonl"), printable("数据/t.jsonl"), printable("")
    ('a\\\\nb.jsonl', '数据/t.jsonl', '""')
    """
    if not text:
        return '""'
    if text.isprintable():
        return text
    out = []
    for c in text:
        if not c.isprintable():
            c = ascii(c)[1:-1]                  # "\n" → "\\n"，"\udcff" → "\\udcff"
        out.append(c)
    return "".join(out)


def _show(v, width=40):
    """值的 repr，太长就截断（坏行里可能有几 MB 的字符串）。"""
    s = repr(v)
    if len(s) > width:
        s = s[:width - 3] + "..."
    return s


class TraceError(ValueError):
    """trace 文件有问题。str(e) == "文件:行号: 哪里不对"（行号 0 = 整个文件）；path 是转义过的文件名。"""

    def __init__(self, path, line, what):
        self.path, self.line, self.what = printable(str(path)), line, printable(what)
        super().__init__(f"{self.path}:{line}: {self.what}")


class _Bad(Exception):
    """一行里的问题（还不知道文件名和行号）：what = 说明。"""


def _object(pairs):
    """json 的 object_pairs_hook：同一个键出现两次就报错（默认是后一个悄悄覆盖前一个）。"""
    d = dict(pairs)
    if len(d) != len(pairs):
        seen = set()
        for k, _ in pairs:
            if k in seen:
                raise _Bad(f"JSON 对象里键 {_show(k)} 出现了两次（不知道该用哪一个）")
            seen.add(k)
    return d


def _constant(name):
    raise _Bad(f"{name} 不是合法的 JSON 数（JSON 里没有 NaN / Infinity）")


_DECODER = json.JSONDecoder(object_pairs_hook=_object, parse_constant=_constant)   # 建一次（每行新建一个很慢）
_INT_ONLY = {int}


def _check_depth(text):
    """嵌套超过 MAX_DEPTH 层就报错。先数括号（合法的一行只有 2 个），多了才逐个数（字符串里的括号不算）。

    >>> _check_depth('[' * 64 + ']' * 64)
    >>> _check_depth('["' + '[' * 100 + '"]')          # 字符串里的括号
    >>> _check_depth('[' * 65)
    Traceback (most recent call last):
    ...
    kv_store.trace_file._Bad: JSON 嵌套超过 64 层（合法的一行只有 2 层）
    """
    if text.count("[") + text.count("{") <= MAX_DEPTH:
        return
    depth = 0
    for m in _TOKEN.finditer(text):              # 每个括号、每个字符串只看一次：线性时间
        c = m.group()
        if c in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                raise _Bad(f"JSON 嵌套超过 {MAX_DEPTH} 层（合法的一行只有 2 层）")
        elif c in "]}":
            depth -= 1
        if depth < 0 or c == '"':                # 括号不配对、字符串没有结尾：交给 json 报"不是合法的 JSON"
            return


def _parse_line(text, block_size):
    """一行文本 → (timestamp 毫秒, input_length, output_length, hash_ids 列表)；有问题抛 _Bad(说明)。"""
    _check_depth(text)
    try:
        d = _DECODER.decode(text)
    except json.JSONDecodeError as e:
        raise _Bad(f"不是合法的 JSON（第 {e.colno} 列：{e.msg}）") from None
    except ValueError as e:                                   # 超过 4300 位的整数
        raise _Bad(f"JSON 里的数太长（{str(e).split(':')[0]}）") from None
    except RecursionError:                                    # _check_depth 之后不该发生，保险
        raise _Bad(f"JSON 嵌套超过 {MAX_DEPTH} 层") from None
    if type(d) is dict and len(d) == 4:           # 常见的一行：四个字段都对就直接返回（和下面逐项检查的结论相同）
        ts, n_in, n_out, ids = d.get("timestamp"), d.get("input_length"), d.get("output_length"), d.get("hash_ids")
        if (type(n_in) is int and type(n_out) is int and type(ids) is list and ids
                and (type(ts) is int or (type(ts) is float and math.isfinite(ts)))
                and 0 <= ts < MAX_EXACT and 1 <= n_in < MAX_EXACT and 0 <= n_out < MAX_EXACT
                and set(map(type, ids)) == _INT_ONLY and min(ids) >= 0 and max(ids) < MAX_EXACT
                and len(ids) == -(-n_in // block_size) and len(set(ids)) == len(ids)):
            return ts, n_in, n_out, ids
    if not isinstance(d, dict):
        raise _Bad(f"应该是 JSON 对象 {{...}}，读到的是 {type(d).__name__}")
    missing = [f for f in FIELDS if f not in d]
    if missing:
        raise _Bad(f"缺少字段 {', '.join(missing)}（需要 {', '.join(FIELDS)}）")
    ts, n_in, n_out, ids = (d[f] for f in FIELDS)
    if not (type(ts) is int or (type(ts) is float and math.isfinite(ts))):   # 大整数不能传给 isfinite（溢出）
        raise _Bad(f"timestamp 应该是数（毫秒），读到 {_show(ts)}")
    for name, v in (("input_length", n_in), ("output_length", n_out)):
        if type(v) is not int:                    # JSON 的整数读出来是 int；true/false 是 bool，不算
            raise _Bad(f"{name} 应该是整数，读到 {_show(v)}")
    if ts < 0:
        raise _Bad(f"timestamp 不能为负，读到 {_show(ts)}")
    if n_in < 1:
        raise _Bad(f"input_length 至少是 1，读到 {_show(n_in)}")
    if n_out < 0:
        raise _Bad(f"output_length 不能为负，读到 {_show(n_out)}")
    for name, v in (("timestamp", ts), ("input_length", n_in), ("output_length", n_out)):
        if v >= MAX_EXACT:
            raise _Bad(f"{name} 太大：要小于 2^53 = {MAX_EXACT}，读到 {_show(v)}")
    if not isinstance(ids, list):
        raise _Bad(f"hash_ids 应该是整数列表，读到 {type(ids).__name__}")
    # 快路径一次查完整行（type(True) 是 bool，不是 int）；有问题再逐个找出第一个坏元素
    if ids and not (set(map(type, ids)) == _INT_ONLY and min(ids) >= 0 and max(ids) < MAX_EXACT):
        for k, h in enumerate(ids):
            if not (type(h) is int and 0 <= h < MAX_EXACT):
                raise _Bad(f"hash_ids 的第 {k + 1} 个元素应该是 [0, 2^53) 里的整数，读到 {_show(h)}")
    want = -(-n_in // block_size)                 # 块数 = ceil(输入 token 数 / 块大小)
    if len(ids) != want:
        raise _Bad(f"hash_ids 有 {len(ids)} 个，但 input_length {n_in} 按每块 {block_size} 个 token 应该是 "
                   f"{want} 块（块大小不对？）")
    if len(set(ids)) != len(ids):
        raise _Bad("hash_ids 里有重复的 id（链式哈希下同一个请求的各块互不相同）")
    return ts, n_in, n_out, ids


def _decode(raw, lineno):
    if lineno == 1 and raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]                                        # 第 1 行的 UTF-8 BOM：接受
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        hint = "trace 要用 UTF-8 保存"
        if lineno == 1 and raw.startswith(_GZIP_MAGIC):
            hint = "这是 gzip 文件：文件名要以 .gz 结尾"
        raise _Bad(f"不是 UTF-8 文本：这一行第 {e.start + 1} 个字节不合法（{hint}）") from None


def _read_error(e, path, lineno):
    """读文件时的异常（OSError、EOFError、zlib.error）→ 一句说明；lineno = 已经读完的行数。"""
    if isinstance(e, FileNotFoundError):
        if path == "":
            return "文件名是空的"
        return "文件不存在"
    if isinstance(e, IsADirectoryError):
        return "这是一个目录，不是 trace 文件"
    if isinstance(e, PermissionError):
        return "没有读权限"
    if isinstance(e, EOFError):
        return "gzip 文件被截断了：从这一行起读不出来（下载或复制不完整？）"
    msg = str(e)
    if isinstance(e, gzip.BadGzipFile) and msg.startswith("Not a gzipped file"):
        if lineno == 0:
            return "不是 gzip 文件（文件名以 .gz 结尾，内容却不是 gzip）"
        return "gzip 数据后面还有不是 gzip 的字节（文件末尾多了东西？）"
    if isinstance(e, gzip.BadGzipFile) and (msg.startswith("CRC check") or msg.startswith("Incorrect length")):
        return f"gzip 校验失败：解压出来的数据和文件里记的不一致，文件损坏了（{msg}）"
    if isinstance(e, (zlib.error, gzip.BadGzipFile)):
        return f"gzip 数据损坏：从这一行起读不出来（{msg}）"
    return f"读不了：{getattr(e, 'strerror', None) or msg}"


def iter_trace_records(path, block_size=BLOCK_SIZE):
    """逐行给出 (timestamp 毫秒 float, input_length, output_length, hash_ids 列表)，文件里的顺序。

    流式：不把整个文件留在内存里。每行都检查（见模块说明），出错抛 TraceError("文件:行号: …")；
    一个请求也没有也抛 TraceError（行号 0）。块大小不是正整数：调用时就抛 ValueError。
    """
    if type(block_size) is not int or block_size < 1:
        raise ValueError(f"块大小必须是正整数，收到 {block_size!r}")
    path = os.fsdecode(path)
    return _records(path, block_size)


class _Lines:
    """把文件按 64 KiB 一块读、切成行：for raw in _Lines(f) 给出每行的字节（不含换行），self.lineno 是它的行号。

    内存里最多一块加一行（行超过 MAX_LINE_BYTES 就报错）；整块都是空白时只数换行（1 GB 的换行炸弹几秒读完）。
    """

    def __init__(self, f):
        self.f, self.lineno = f, 0

    def _check(self, raw, lineno):
        if len(raw) > MAX_LINE_BYTES:
            self.lineno = lineno
            raise _Bad(f"这一行超过 {MAX_LINE_BYTES // 2 ** 20} MiB 还没有换行（真实 trace 一行只有几 KB；"
                       "文件坏了，或者根本不是 JSONL？）")

    def __iter__(self):
        head = b""                                  # 上一块末尾还没读完的半行
        while True:
            chunk = self.f.read1(_CHUNK)             # read1：.gz 被截断时，截断前解压出的行也先交出来
            if not chunk:
                break
            if not chunk.strip() and not head.strip():        # 只有空白：不用切，数一下换行
                cut = chunk.rfind(b"\n")
                if cut >= 0:
                    self.lineno += chunk.count(b"\n")
                    head = chunk[cut + 1:]
                else:
                    head += chunk
                self._check(head, self.lineno + 1)
                continue
            lines = (head + chunk).split(b"\n")
            head = lines.pop()
            for raw in lines:
                self.lineno += 1
                self._check(raw, self.lineno)
                yield raw
            self._check(head, self.lineno + 1)
        if head:
            self.lineno += 1
            yield head


def _check_gzip_rest(f, what):
    """.gz 文件里某一行不对：把后面（最多 GZIP_CHECK_BYTES）解压完。如果 gzip 本身也坏了（校验和不对、被截断），
    这一行多半是损坏的压缩数据解出来的乱码——把这一点加进说明，抛 _Bad；gzip 没坏就什么也不做。"""
    try:
        left = GZIP_CHECK_BYTES
        while left > 0:
            got = len(f.read(_CHUNK))
            if got == 0:
                return
            left -= got
    except EOFError:
        why = "后面被截断了"
    except (OSError, zlib.error):
        why = "压缩数据损坏或校验和对不上"
    else:
        return                                               # 太大，没查完：不下结论
    raise _Bad(f"{what}；这个 .gz 文件本身也坏了（{why}），这一行多半是损坏的压缩数据解出来的乱码") from None


def _records(path, block_size):
    prev_ts, n, lines = None, 0, None
    opener = open
    if path.endswith(".gz"):
        opener = gzip.open
    try:
        with opener(path, "rb") as f:
            lines = _Lines(f)
            for raw in lines:
                try:
                    text = _decode(raw, lines.lineno)
                    if not text.strip():
                        continue                              # 空白行：跳过（行号照算）
                    ts, n_in, n_out, ids = _parse_line(text, block_size)
                    if prev_ts is not None and ts < prev_ts:
                        raise _Bad(f"timestamp {_show(ts)} 比上一个请求的 {_show(prev_ts)} 小：trace 必须按到达时间排好")
                except _Bad as e:
                    if opener is gzip.open:
                        _check_gzip_rest(f, str(e))
                    raise
                prev_ts = ts
                n += 1
                yield float(ts), n_in, n_out, ids
    except _Bad as e:
        raise TraceError(path, lines.lineno, str(e)) from None
    except (OSError, EOFError, zlib.error) as e:
        if lines is None:                                     # 打开文件就失败：整个文件（行号 0）
            raise TraceError(path, 0, _read_error(e, path, 0)) from None
        raise TraceError(path, lines.lineno + 1, _read_error(e, path, lines.lineno)) from None   # 从这一行起读不出来
    if n == 0:
        raise TraceError(path, 0, "文件里没有任何请求（空文件？）")

