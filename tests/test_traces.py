"""kv_store.traces.load_trace：读 Mooncake JSONL trace；每种坏输入都是一行 "文件:行号: 说明"，脚本退出码 2。

更刁钻的坏文件（损坏的 gzip、恶意 JSON、超长的行……）在 test_trace_errors.py。
"""
import gzip
import json
import os
import re
import subprocess
import sys

import pytest
from conftest import LECTURE, REAL_TRACE as REAL, call_main, load_script

from kv_store.traces import load_trace
from kv_store.trace_file import BLOCK_SIZE, Request, TraceError

SCRIPT = os.path.join(LECTURE, "04_prefix_caching.py")


def line(ts=0, n_in=1000, n_out=5, ids=(1, 2), **extra):
    d = {"timestamp": ts, "input_length": n_in, "output_length": n_out,
         "hash_ids": ids if isinstance(ids, str) else list(ids)}
    d.update(extra)
    return json.dumps(d)


def write(tmp_path, text, name="t.jsonl"):
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return str(p)


def run_cli(*args):
    """新解释器里跑 04（真正的进程：退出码、两个输出）。"""
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True,
                          env=dict(os.environ, NO_COLOR="1"))


def run_here(*args):
    """和 run_cli 一样，但在本进程里调 04 的 main(argv)（省一个新解释器）；真正的进程由 run_cli 的那一个用例
    （test_bad_file_cli_one_line_exit_2[invalid_json]）、test_cli_errors 和 test_trace_errors 覆盖。"""
    from types import SimpleNamespace
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("NO_COLOR", "1")
        rc, out, err = call_main(load_script("04_prefix_caching"), list(args))
    return SimpleNamespace(returncode=rc, stdout=out, stderr=err)


# ---------------------------------------------------------------- 真实 trace
@pytest.mark.real_trace
def test_real_mooncake_trace():
    tr = load_trace(REAL)
    assert len(tr) == 3_993
    assert sum(r.input_len for r in tr) / len(tr) == pytest.approx(15_325, abs=1)
    assert sum(r.output_len for r in tr) / len(tr) == pytest.approx(149, abs=0.5)
    assert tr[0] == Request(0.0, 40_160, 6, tuple(range(79)))
    assert all(len(r.blocks) == -(-r.input_len // BLOCK_SIZE) for r in tr)
    assert all(a.arrival <= b.arrival for a, b in zip(tr, tr[1:]))


@pytest.mark.real_trace
def test_real_trace_gz_gives_the_same_requests(tmp_path):
    gz = tmp_path / "t.jsonl.gz"
    with open(REAL, "rb") as f, gzip.open(gz, "wb") as g:
        g.write(f.read())
    assert load_trace(str(gz)) == load_trace(REAL)


@pytest.mark.real_trace
def test_columnar_loader_agrees_with_line_reader():
    """kv_store.traces.load_trace（列式）和逐行检查的读取器 kv_store.trace_file.iter_trace_records 给出同样的请求。"""
    from kv_store.trace_file import iter_trace_records
    assert load_trace(REAL) == [Request(ts / 1000, n_in, n_out, tuple(ids))
                                for ts, n_in, n_out, ids in iter_trace_records(REAL)]


# ---------------------------------------------------------------- 合法的输入
def test_small_file_fields_and_units(tmp_path):
    p = write(tmp_path, line(0, 1024, 7, (5, 6)) + "\n" + line(2500, 1025, 0, (5, 6, 9)) + "\n")
    assert load_trace(p) == [Request(0.0, 1024, 7, (5, 6)), Request(2.5, 1025, 0, (5, 6, 9))]


def test_accepted_quirks(tmp_path):
    """空白行跳过（行号照算）、多余字段忽略、output_length 0、同一时刻、小数时间戳、CRLF 都接受。"""
    text = ("\n" + line(1000.5, 10, 0, (1,), note="x") + "\r\n  \n" + line(1000.5, 512, 3, (2,)) + "\r\n")
    tr = load_trace(write(tmp_path, text))
    assert [(r.arrival, r.output_len, r.blocks) for r in tr] == [(1.0005, 0, (1,)), (1.0005, 3, (2,))]


def test_block_size_is_a_parameter(tmp_path):
    p = write(tmp_path, line(0, 40, 1, (1, 2, 3)) + "\n")
    assert load_trace(p, block_size=16)[0].blocks == (1, 2, 3)
    with pytest.raises(TraceError, match="块大小不对"):
        load_trace(p)                                   # 默认 512：40 个 token 应该是 1 块


@pytest.mark.parametrize("block", [0, -512, 1.5, True])
def test_impossible_block_size_is_value_error(tmp_path, block):
    p = write(tmp_path, line() + "\n")
    with pytest.raises(ValueError, match="块大小") as e:
        load_trace(p, block_size=block)
    assert not isinstance(e.value, TraceError)


def test_gz_file(tmp_path):
    p = tmp_path / "t.jsonl.gz"
    with gzip.open(p, "wt", encoding="utf-8") as f:
        f.write(line() + "\n" + line(1, ids=(1, 3)) + "\n")
    assert [r.blocks for r in load_trace(str(p))] == [(1, 2), (1, 3)]


# ---------------------------------------------------------------- 坏输入：(说明, 文件内容, 行号, 消息里要有的字)
OK = line(0, 1000, 5, (1, 2))
BAD = [
    ("empty", "", 0, "没有任何请求"),
    ("only_blank_lines", "\n  \n\n", 0, "没有任何请求"),
    ("invalid_json", OK + "\n" + '{"timestamp": 1, "input_length": 10,\n', 2, "不是合法的 JSON"),
    ("not_an_object", "[1, 2, 3]\n", 1, "JSON 对象"),
    ("missing_field", OK + "\n" + json.dumps({"timestamp": 1, "input_length": 10, "output_length": 1}), 2,
     "缺少字段 hash_ids"),
    ("input_length_string", line(n_in="1000"), 1, "input_length 应该是整数"),
    ("input_length_bool", line(n_in=True, ids=(1,)), 1, "input_length 应该是整数"),
    ("input_length_float", line(n_in=1000.0), 1, "input_length 应该是整数"),
    ("output_length_bool", line(n_out=False), 1, "output_length 应该是整数"),
    ("timestamp_string", line(ts="0"), 1, "timestamp 应该是数"),
    ("timestamp_bool", line(ts=True), 1, "timestamp 应该是数"),
    ("hash_ids_not_list", line(ids="12"), 1, "hash_ids 应该是整数列表"),
    ("hash_id_bool", line(ids=(1, True)), 1, "hash_ids 的第 2 个元素"),
    ("hash_id_float", line(ids=(1.0, 2)), 1, "hash_ids 的第 1 个元素"),
    ("hash_id_negative", line(ids=(1, -2)), 1, "hash_ids 的第 2 个元素"),
    ("input_length_negative", line(n_in=-5, ids=()), 1, "input_length 至少是 1"),
    ("input_length_zero", line(n_in=0, ids=()), 1, "input_length 至少是 1"),
    ("output_length_negative", line(n_out=-1), 1, "output_length 不能为负"),
    ("timestamp_negative", line(ts=-1), 1, "timestamp 不能为负"),
    ("too_few_hash_ids", OK + "\n\n" + line(5, 1025, 1, (1, 2)), 3, "应该是 3 块"),
    ("too_many_hash_ids", line(0, 512, 1, (1, 2)), 1, "应该是 1 块"),
    ("duplicate_hash_ids", line(0, 1024, 1, (7, 7)), 1, "重复"),
    ("timestamps_backwards", OK + "\n" + line(10) + "\n" + line(9), 3, "比上一个请求的 10 小"),
]


def check_message(msg, path, lineno, words):
    assert msg.startswith(f"{path}:{lineno}: "), msg
    assert re.fullmatch(r".+:\d+: .+", msg) and "\n" not in msg
    assert words in msg


@pytest.mark.parametrize("name,text,lineno,words", BAD, ids=[b[0] for b in BAD])
def test_bad_file_raises_trace_error(tmp_path, name, text, lineno, words):
    p = write(tmp_path, text)
    with pytest.raises(TraceError) as e:
        load_trace(p)
    assert (e.value.path, e.value.line) == (p, lineno)
    check_message(str(e.value), p, lineno, words)
    assert isinstance(e.value, ValueError)


CLI_CASES = {"invalid_json", "missing_field", "hash_id_negative", "too_few_hash_ids", "timestamps_backwards"}


@pytest.mark.parametrize("name,text,lineno,words", [b for b in BAD if b[0] in CLI_CASES], ids=sorted(CLI_CASES,
                         key=[b[0] for b in BAD].index))
def test_bad_file_cli_one_line_exit_2(tmp_path, name, text, lineno, words):
    p = write(tmp_path, text)
    r = (run_cli if name == "invalid_json" else run_here)("--trace", p)
    assert r.returncode == 2 and r.stdout == ""               # 什么表格都没打印
    assert "Traceback" not in r.stderr and len(r.stderr.splitlines()) == 1
    check_message(r.stderr.strip(), p, lineno, words)


def other_bad_paths(tmp_path):
    corrupt = tmp_path / "corrupt.jsonl.gz"
    corrupt.write_bytes(b"this is not gzip data\n")
    binary = tmp_path / "binary.jsonl"
    binary.write_bytes(b"\xff\xfe\x00\x81garbage\n")
    return {"missing": (str(tmp_path / "nope.jsonl"), "文件不存在"),
            "directory": (str(tmp_path), "目录"),
            "corrupt_gz": (str(corrupt), "不是 gzip 文件"),
            "not_utf8": (str(binary), "UTF-8")}


@pytest.mark.parametrize("kind", ["missing", "directory", "corrupt_gz", "not_utf8"])
def test_bad_path(tmp_path, kind):
    path, words = other_bad_paths(tmp_path)[kind]
    with pytest.raises(TraceError) as e:
        load_trace(path)
    assert re.fullmatch(re.escape(path) + r":\d+: .+", str(e.value)) and words in str(e.value)
    r = run_here("--trace", path)
    assert r.returncode == 2 and r.stdout == "" and len(r.stderr.splitlines()) == 1
    assert r.stderr.startswith(path + ":") and "Traceback" not in r.stderr


@pytest.mark.parametrize("args,words", [(["--block", "0"], "--block"), (["--block", "-3"], "--block"),
                                        (["--block", "x"], "--block"), (["--block", "256"], "--trace"),
                                        (["--block", str(2 ** 31), "--trace", "x.jsonl"], "1,048,576")])
def test_impossible_cli_arguments(args, words):
    """--block 大过 2**31：一行拒绝（曾经是 numpy 的 int32 溢出 traceback）。"""
    r = run_here(*args)
    assert r.returncode == 2 and r.stdout == "" and len(r.stderr.splitlines()) == 1
    assert words in r.stderr and "Traceback" not in r.stderr


def test_error_after_blank_line_counts_physical_lines(tmp_path):
    p = write(tmp_path, OK + "\n\n\n" + "oops\n")
    with pytest.raises(TraceError) as e:
        load_trace(p)
    assert e.value.line == 4
