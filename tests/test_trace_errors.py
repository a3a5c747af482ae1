"""坏 trace 文件的边角：损坏的 gzip、恶意 JSON、超长的行、坏 UTF-8 的行号、空文件名、文件名里的换行、BOM、FIFO。

每种情况：要么一行 "文件:行号: 说明"（TraceError；脚本里退出码 2），要么按说明接受。大部分直接测
kv_store.trace_file.iter_trace_records / kv_store.traces.load_trace；只有几个有代表性的情况起子进程跑 04 / 05。
"""
import gzip
import json
import os
import re
import subprocess
import sys
import threading
import time
import zlib

import pytest
from conftest import LECTURE, ROOT, load_script

import kv_store.trace_file as tio
from kv_store.traces import load_trace
from kv_store.trace_file import MAX_DEPTH, MAX_EXACT, MAX_LINE_BYTES, Request, TraceError, iter_trace_records


def line(ts=0, n_in=1000, n_out=5, ids=(1, 2), raw_ts=None, **extra):
    """一行 JSON；raw_ts 给了就原样放进 timestamp（用来写 JSON 里才有的写法，比如 400 位的整数）。"""
    d = {"timestamp": ts, "input_length": n_in, "output_length": n_out, "hash_ids": list(ids)}
    d.update(extra)
    text = json.dumps(d)
    if raw_ts is not None:
        text = text.replace(f'"timestamp": {json.dumps(ts)}', f'"timestamp": {raw_ts}', 1)
    return text


def trace_lines(n):
    """n 行合法的 trace（每行的 hash id 都不一样，压缩后不会太小，损坏的位置才有意义）。"""
    return [line(10 * i, 1000, i % 7, ((i * 7919) % 100_003 * 2, (i * 7919) % 100_003 * 2 + 1)) for i in range(n)]


def write_bytes(tmp_path, data, name="t.jsonl"):
    p = tmp_path / name
    p.write_bytes(data)
    return str(p)


def gz(text):
    return gzip.compress(text.encode(), mtime=0)


def error_of(path, **kw):
    """读到出错为止：返回 (出错前读到的请求数, TraceError)。"""
    got = []
    with pytest.raises(TraceError) as e:
        for rec in iter_trace_records(path, **kw):
            got.append(rec)
    msg = str(e.value)
    assert "\n" not in msg and re.fullmatch(r".+:\d+: .+", msg), msg
    assert msg == f"{e.value.path}:{e.value.line}: {e.value.what}"
    return len(got), e.value


def run(script, *args):
    return subprocess.run([sys.executable, os.path.join(LECTURE, script), *args], capture_output=True, text=True,
                          env=dict(os.environ, NO_COLOR="1", LAB_NO_TIMING="1"), timeout=60)


def run_here(script, *args):
    """和 run 一样，但在本进程里调 main(argv)（省一个新解释器）；命令行本身由 run 的测试和 test_cli_errors 覆盖。"""
    from types import SimpleNamespace
    from conftest import call_main
    m = load_script(script[:-3])
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("NO_COLOR", "1")
        mp.setenv("LAB_NO_TIMING", "1")
        rc, out, err = call_main(m, list(args))
    return SimpleNamespace(returncode=rc, stdout=out, stderr=err)


def check_cli(r, path_shown, lineno, words):
    """脚本出错：退出码 2、stdout 空、stderr 恰好一行 "文件:行号: …"、没有 traceback。"""
    assert r.returncode == 2, r.stderr
    assert r.stdout == "" and "Traceback" not in r.stderr
    assert len(r.stderr.splitlines()) == 1 and r.stderr.endswith("\n")
    assert r.stderr.startswith(f"{path_shown}:{lineno}: ") and words in r.stderr, r.stderr


# ---------------------------------------------------------------- 流式接口
def test_iter_trace_records_types_and_order(tmp_path):
    p = write_bytes(tmp_path, (line(0, 1024, 7, (5, 6)) + "\n" + line(2500.5, 1025, 0, (5, 6, 9)) + "\n").encode())
    recs = list(iter_trace_records(p))
    assert recs == [(0.0, 1024, 7, [5, 6]), (2500.5, 1025, 0, [5, 6, 9])]
    assert [tuple(type(x) for x in r) for r in recs] == [(float, int, int, list)] * 2
    assert load_trace(p) == [Request(0.0, 1024, 7, (5, 6)), Request(2.5005, 1025, 0, (5, 6, 9))]


def test_records_before_a_bad_line_are_streamed(tmp_path):
    """流式：坏的第 3 行之前的两条已经给出来了，错误才抛出（不是先把整个文件读完）。"""
    p = write_bytes(tmp_path, "\n".join(trace_lines(2) + ["oops"] + trace_lines(5)).encode())
    n, e = error_of(p)
    assert (n, e.line) == (2, 3) and "不是合法的 JSON" in e.what


@pytest.mark.parametrize("bad", [0, -1, 2.0, True, "512"])
def test_bad_block_size_is_value_error_at_call_time(tmp_path, bad):
    with pytest.raises(ValueError, match="块大小") as e:
        iter_trace_records(str(tmp_path / "never_opened.jsonl"), bad)     # 还没开始迭代就报
    assert not isinstance(e.value, TraceError)


def test_block_size_names_and_path_types(tmp_path):
    assert tio.BLOCK_SIZE == 512 and not hasattr(tio, "BLOCK")        # 一个概念一个名字
    p = tmp_path / "t.jsonl"
    p.write_text(line(0, 40, 1, (1, 2, 3)) + "\n")
    assert list(iter_trace_records(p, block_size=16)) == list(iter_trace_records(os.fsencode(p), 16))


def test_kv_trace_io_doctests():
    import doctest
    assert doctest.testmod(tio).failed == 0


# ---------------------------------------------------------------- 损坏的 gzip
TEXT = "\n".join(trace_lines(3000)) + "\n"


def gzip_complete_lines(data):
    """截断的 gzip 字节里能解压出几行完整的（和 zcat 一样：zlib 解出截断之前的全部数据，数其中的换行）。"""
    out = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(data)
    return out.count(b"\n")


@pytest.mark.parametrize("cut", [5, 0.1, 0.5, 0.9, -8, -1])
def test_truncated_gzip(tmp_path, cut):
    """截断的 .gz（下载不完整）：报"被截断"，行号 = 第一条没读出来的行；之前的行都读出来了（只截掉末尾 8 字节的
    校验和、长度时，3,000 行全读出来了，报第 3,001 行）。zcat 读得出几行完整的，这里就读出几行。"""
    data = gz(TEXT)
    keep = cut
    if isinstance(cut, float):
        keep = int(len(data) * cut)
    p = write_bytes(tmp_path, data[:keep], "t.jsonl.gz")
    n, e = error_of(p)
    assert "gzip 文件被截断了" in e.what and e.line == n + 1
    assert n == gzip_complete_lines(data[:keep])


def test_corrupted_gzip_mid_stream(tmp_path):
    """第二段 gzip 的数据块类型不合法（zlib.error）：第一段的 1000 行读得出来，报"gzip 数据损坏"。"""
    first = gz("\n".join(trace_lines(1000)) + "\n")
    second = bytearray(gz(line(1e9) + "\n"))
    second[10] = 0xFF                                     # deflate 块头：BTYPE = 11（保留值）
    p = write_bytes(tmp_path, first + bytes(second), "t.jsonl.gz")
    n, e = error_of(p)
    assert "gzip 数据损坏" in e.what and e.line == n + 1 and 1 < e.line <= 1001


def test_flipped_bytes_anywhere_in_gzip_body_are_one_line_errors(tmp_path):
    """deflate 数据中间任何位置坏了：要么解压出错，要么解出来的行不合法，要么 CRC 不对——总是一行 TraceError。"""
    data = gz(TEXT)
    for off in range(10, len(data) - 8, max(1, (len(data) - 18) // 25)):
        bad = bytearray(data)
        for i in range(off, min(off + 4, len(data) - 8)):
            bad[i] ^= 0x55
        p = write_bytes(tmp_path, bytes(bad), "t.jsonl.gz")
        error_of(p)


def test_bad_line_in_damaged_gzip_says_so(tmp_path):
    """压缩数据坏了却解出了"像样"的乱码：报那一行的错误，再说明 gzip 本身也坏了；gzip 完好时不加这句。"""
    lines = trace_lines(3000)
    lines[999] = "oops"                                    # 坏行不在最后一块（CRC 在读最后一块时才查）
    data = gz("\n".join(lines) + "\n")
    _, e = error_of(write_bytes(tmp_path, data, "ok.jsonl.gz"))
    assert e.line == 1000 and "不是合法的 JSON" in e.what and "乱码" not in e.what
    bad = bytearray(data)
    bad[-6] ^= 1                                           # CRC 不对
    _, e = error_of(write_bytes(tmp_path, bytes(bad), "bad.jsonl.gz"))
    assert e.line == 1000 and "不是合法的 JSON" in e.what and "这个 .gz 文件本身也坏了" in e.what


def test_gzip_crc_and_trailing_garbage(tmp_path):
    data = bytearray(gz(TEXT))
    data[-6] ^= 1                                          # CRC32 字段
    _, e = error_of(write_bytes(tmp_path, bytes(data), "crc.jsonl.gz"))
    assert "gzip 校验失败" in e.what
    _, e = error_of(write_bytes(tmp_path, gz(TEXT) + b"garbage!", "tail.jsonl.gz"))
    assert "gzip 数据后面还有不是 gzip 的字节" in e.what


def test_gzip_accepted_forms(tmp_path):
    """多段 gzip（cat a.gz b.gz）和末尾补的零字节都能读；空的 .gz 是"没有请求"。"""
    two = gz("\n".join(trace_lines(3)) + "\n") + gz("\n".join(trace_lines(6)[3:]) + "\n") + b"\0" * 8
    assert len(list(iter_trace_records(write_bytes(tmp_path, two, "two.jsonl.gz")))) == 6
    _, e = error_of(write_bytes(tmp_path, gz(""), "empty.jsonl.gz"))
    assert (e.line, e.what) == (0, "文件里没有任何请求（空文件？）")


def test_not_gzip_named_gz_and_gzip_not_named_gz(tmp_path):
    _, e = error_of(write_bytes(tmp_path, b"this is not gzip data\n", "t.jsonl.gz"))
    assert e.line == 1 and "不是 gzip 文件" in e.what
    _, e = error_of(write_bytes(tmp_path, gz(TEXT), "t.jsonl"))
    assert e.line == 1 and "文件名要以 .gz 结尾" in e.what


# ---------------------------------------------------------------- 恶意 JSON
def bad_line(tmp_path, text, lineno=2, **kw):
    """好的第 1 行 + 这一行：返回 TraceError 的说明，并检查行号。"""
    p = write_bytes(tmp_path, (line(0) + "\n" + text + "\n").encode())
    n, e = error_of(p, **kw)
    assert (n, e.line) == (lineno - 1, lineno), e
    return e.what


def test_deep_nesting(tmp_path):
    """10 万个 "["（issue 里的 RecursionError）→ 一行错误；字符串里的括号不算嵌套。"""
    assert f"嵌套超过 {MAX_DEPTH} 层" in bad_line(tmp_path, "[" * 100_000)
    assert f"嵌套超过 {MAX_DEPTH} 层" in bad_line(tmp_path, line(1, x=json.loads("[" * 70 + "]" * 70)))
    ok = line(1, x=json.loads("[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1)), note="[[[[{{{{" * 40)
    assert len(list(iter_trace_records(write_bytes(tmp_path, (ok + "\n").encode())))) == 1
    assert "不是合法的 JSON" in bad_line(tmp_path, "[]" * 100 + "]" * 1000)       # 括号不配对：交给 json
    # 一长串 \" 的字符串没有结尾：数括号时是线性的（回溯的正则要几小时），交给 json 报错
    assert "不是合法的 JSON" in bad_line(tmp_path, '["' + '\\"' * 300_000 + "[" * 70)
    assert f"嵌套超过 {MAX_DEPTH} 层" in bad_line(tmp_path, '["' + '\\"' * 300_000 + '", ' + "[" * 70)


BIG = "9" * 401                                           # issue 里 401 位的整数


@pytest.mark.parametrize("field,text,words", [
    ("timestamp", line(raw_ts=BIG), "timestamp 太大"),
    ("timestamp", line(raw_ts=str(MAX_EXACT)), "timestamp 太大"),
    ("timestamp", line(raw_ts="9007199254740992.0"), "timestamp 太大"),
    ("timestamp", line(raw_ts="1e308"), "timestamp 太大"),
    ("timestamp", line(raw_ts="1e400"), "timestamp 应该是数"),                 # 解析成 inf
    ("timestamp", line(raw_ts="NaN"), "不是合法的 JSON 数"),
    ("timestamp", line(raw_ts="Infinity"), "不是合法的 JSON 数"),
    ("timestamp", line(raw_ts="-Infinity"), "不是合法的 JSON 数"),
    ("input_length", line(n_in=int(BIG)), "input_length 太大"),
    ("input_length", line(n_in=MAX_EXACT), "input_length 太大"),
    ("output_length", line(n_out=int(BIG)), "output_length 太大"),
    ("output_length", line(n_out=MAX_EXACT), "output_length 太大"),
    ("hash_ids", line(ids=(1, int(BIG))), "hash_ids 的第 2 个元素应该是 [0, 2^53) 里的整数"),
    ("hash_ids", line(ids=(MAX_EXACT, 1)), "hash_ids 的第 1 个元素"),
    ("hash_ids", line(ids=(1, 2 ** 63)), "hash_ids 的第 2 个元素"),
    ("extra", line(note=float("nan")), "不是合法的 JSON 数"),                   # NaN 不是 JSON，哪个字段都不行
    ("extra", line(note=0).replace('"note": 0', '"note": ' + "9" * 5000), "JSON 里的数太长"),                         # Python 只解析 4300 位以内
])
def test_number_limits(tmp_path, field, text, words):
    assert words in bad_line(tmp_path, text)


def test_largest_accepted_numbers(tmp_path):
    """2^53 - 1 还接受；多余字段里的大数、1e400 不检查（忽略的字段不影响任何统计量）。"""
    top = MAX_EXACT - 1
    text = line(raw_ts=str(top), n_in=top, n_out=top, ids=(top, 0), big=10 ** 400, huge=1e300)
    text = text.replace("1e+300", "1e400")
    p = write_bytes(tmp_path, (text + "\n").encode())
    _, e = error_of(p)
    assert e.what.startswith("hash_ids 有 2 个") and "应该是 17592186044416 块" in e.what    # 只剩块数对不上


def test_long_values_are_cut_in_the_message(tmp_path):
    what = bad_line(tmp_path, line(ts="x" * 100_000))
    assert what.startswith("timestamp 应该是数") and len(what) < 100


@pytest.mark.parametrize("text,key", [
    ('{"timestamp": 0, "timestamp": 5, "input_length": 1000, "output_length": 5, "hash_ids": [1, 2]}', "'timestamp'"),
    (line(1, meta={"a": 1}).replace('"a": 1', '"a": 1, "a": 2'), "'a'"),      # 多余字段里的对象也不行
])
def test_duplicate_keys_are_errors(tmp_path, text, key):
    assert f"JSON 对象里键 {key} 出现了两次" in bad_line(tmp_path, text)


# ---------------------------------------------------------------- 超长的行、空白、换行炸弹
def test_line_cap(tmp_path):
    """恰好 MAX_LINE_BYTES 字节（不含换行）的合法行接受；多 1 个字节就是这一行的错误。"""
    good = line(0)
    good += " " * (MAX_LINE_BYTES - len(good))
    p = write_bytes(tmp_path, (line(0) + "\n" + good + "\n" + good + " \n").encode())
    n, e = error_of(p)
    assert (n, e.line) == (2, 3) and "这一行超过 1 MiB 还没有换行" in e.what


def test_endless_line_from_a_device():
    """/dev/zero：一个永远没有换行的"文件"，读 1 MiB 就报错（不会把内存吃光）。"""
    if not os.path.exists("/dev/zero"):
        pytest.skip("没有 /dev/zero")
    n, e = error_of("/dev/zero")
    assert (n, e.line) == (0, 1) and "超过 1 MiB" in e.what


def test_whitespace_runs_count_lines(tmp_path):
    """整块都是空白的地方只数换行：行号照样对；空白跨块后接着的 JSON 也读得出来。"""
    p = write_bytes(tmp_path, b"\n" * 200_000 + b" \t\r\n" * 30_000 + b"oops\n")
    _, e = error_of(p)
    assert e.line == 230_001
    p = write_bytes(tmp_path, b" " * (tio._CHUNK - 10) + (line(7) + "\r\n").encode() + b"\n" * 70_000)
    assert list(iter_trace_records(p)) == [(7.0, 1000, 5, [1, 2])]
    _, e = error_of(write_bytes(tmp_path, b"\n" * 100 + b" " * (MAX_LINE_BYTES + 1)))
    assert e.line == 101 and "超过 1 MiB" in e.what


def test_memory_stays_bounded_on_bombs(tmp_path):
    """1 MB 的 gzip 炸弹（解压后是 1 GB 的一行）和 /dev/zero：峰值内存只比导入后多几 MB。
    恶意但合法的 1 MiB 行（35 万个 []）解析后也只多几十 MB。子进程里量 ru_maxrss（峰值，KB）。"""
    member = gzip.compress(b"[" * 2 ** 20, mtime=0)                # 1 MiB 的 "[" 压缩后约 1 KB
    bomb = write_bytes(tmp_path, member * 1024, "bomb.jsonl.gz")   # 1024 段首尾相接：解压后 1 GB、没有换行
    body = "[]," * ((MAX_LINE_BYTES - 200) // 3)
    wide = write_bytes(tmp_path, (line(0)[:-1] + ', "x": [' + body + "0]}\n").encode())
    code = f"""
import resource, sys
sys.path[:0] = [{LECTURE!r}, {ROOT!r}]
from kv_store.traces import load_trace
from kv_store.trace_file import TraceError
def peak():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
base = peak()
for p in ({bomb!r}, "/dev/zero"):
    try:
        load_trace(p)
    except TraceError as e:
        assert "超过 1 MiB" in str(e), e
bombs = peak() - base
assert len(load_trace({wide!r})) == 1
print(round(bombs, 1), round(peak() - base, 1))
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    bombs_mb, wide_mb = map(float, r.stdout.split())
    assert bombs_mb < 16 and wide_mb < 64, r.stdout


# ---------------------------------------------------------------- 编码、BOM、换行符
@pytest.mark.parametrize("bad_at", [30, 5000])
def test_bad_utf8_reports_the_real_line(tmp_path, bad_at):
    lines = [s.encode() for s in trace_lines(6000)]
    lines[bad_at - 1] = lines[bad_at - 1][:20] + b"\xff" + lines[bad_at - 1][20:]
    n, e = error_of(write_bytes(tmp_path, b"\n".join(lines) + b"\n"))
    assert (n, e.line) == (bad_at - 1, bad_at) and "第 21 个字节不合法" in e.what
    n, e = error_of(write_bytes(tmp_path, gzip.compress(b"\n".join(lines)), "t.jsonl.gz"))
    assert e.line == bad_at


def test_bom_on_line_1_accepted_elsewhere_rejected(tmp_path):
    bom = "\ufeff"
    p = write_bytes(tmp_path, (bom + line(0) + "\r\n" + line(1) + "\r\n").encode())
    assert len(list(iter_trace_records(p))) == 2
    p = write_bytes(tmp_path, gz(bom + line(0) + "\n"), "t.jsonl.gz")
    assert len(list(iter_trace_records(p))) == 1
    assert "不是合法的 JSON" in bad_line(tmp_path, bom + line(1))


def test_cr_only_line_ends_are_one_line(tmp_path):
    """只用 \r 换行（老式 Mac）不支持：整个文件是一行，报 JSON 错误（不会悄悄读错）。"""
    p = write_bytes(tmp_path, ("\r".join(trace_lines(3)) + "\r").encode())
    n, e = error_of(p)
    assert (n, e.line) == (0, 1) and "不是合法的 JSON" in e.what


def test_unicode_blank_line_is_blank(tmp_path):
    p = write_bytes(tmp_path, ("\u3000\n" + line(0) + "\n").encode())
    assert len(list(iter_trace_records(p))) == 1


# ---------------------------------------------------------------- 文件名和特殊文件
def test_file_name_with_newline_is_escaped(tmp_path):
    p = write_bytes(tmp_path, b"oops\n", "a\nb.jsonl")
    _, e = error_of(p)
    assert e.path == p.replace("\n", "\\n") and str(e).startswith(e.path + ":1: ")


def test_empty_path():
    _, e = error_of("")
    assert str(e) == '"":0: 文件名是空的'


@pytest.mark.skipif(os.geteuid() == 0, reason="root 不受文件权限限制")
def test_unreadable_file(tmp_path):
    p = write_bytes(tmp_path, (line(0) + "\n").encode())
    os.chmod(p, 0)
    _, e = error_of(p)
    assert (e.line, e.what) == (0, "没有读权限")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="没有 FIFO")
def test_fifo_waits_for_a_writer(tmp_path):
    """FIFO（命名管道）：没有写端时 open 一直等（和 cat 一样，README 里写明了）；写端来了就流式读完。"""
    fifo = str(tmp_path / "pipe.jsonl")
    os.mkfifo(fifo)
    out = []
    reader = threading.Thread(target=lambda: out.append(load_trace(fifo)), daemon=True)
    reader.start()
    time.sleep(0.3)
    assert reader.is_alive() and out == []                  # 还在等写端
    with open(fifo, "w") as w:
        w.write("\n".join(trace_lines(3)) + "\n")
    reader.join(10)
    assert len(out[0]) == 3


# ---------------------------------------------------------------- 脚本：几个有代表性的情况
def test_cli_truncated_gzip_04(tmp_path):
    p = write_bytes(tmp_path, gz(TEXT)[:2000], "t.jsonl.gz")
    n, e = error_of(p)
    check_cli(run_here("04_prefix_caching.py", "--trace", p), p, e.line, "gzip 文件被截断了")


def test_cli_deep_nesting_and_big_integer_04(tmp_path):
    p = write_bytes(tmp_path, (line(0) + "\n" + "[" * 100_000 + "\n").encode())
    check_cli(run_here("04_prefix_caching.py", "--trace", p), p, 2, "嵌套超过")
    p = write_bytes(tmp_path, (line(raw_ts=BIG) + "\n").encode())
    check_cli(run_here("04_prefix_caching.py", "--trace", p), p, 1, "timestamp 太大")


def test_cli_bad_utf8_and_newline_in_name_04(tmp_path):
    p = write_bytes(tmp_path, b"\n".join(s.encode() for s in trace_lines(40)[:29]) + b"\n\xff\n", "a\nb.jsonl")
    check_cli(run_here("04_prefix_caching.py", "--trace", p), p.replace("\n", "\\n"), 30, "不是 UTF-8")


@pytest.mark.parametrize("script", ["04_prefix_caching.py", "05_kv_store.py"])
def test_cli_empty_trace_argument(script):
    """--trace ""（和 --trace=）是一个空的文件名：一行错误，不悄悄换成合成 trace。"""
    check_cli(run(script, "--trace="), '""', 0, "文件名是空的")


def test_cli_05_damaged_gzip(tmp_path):
    p = write_bytes(tmp_path, gz(TEXT)[:2000], "t.jsonl.gz")
    n, e = error_of(p)
    check_cli(run("05_kv_store.py", "--trace", p), p, e.line, "gzip 文件被截断了")
