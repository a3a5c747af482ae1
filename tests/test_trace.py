"""trace：合成 trace 的数（和 eeff79c 相同）；读 Mooncake JSONL（.gz 也行）接受什么；每种坏输入都是一行
"文件:行号: 哪里不对"、退出码 2、没有 traceback。"""
import gzip
import json
import os

import pytest

from conftest import run
from kv_store import trace
from kv_store.trace import MAX_LINE, Request, load_trace, make_trace


def test_synthetic_trace_numbers():
    """和 eeff79c 的合成 trace 逐个请求相同：这里钉住几个总数。"""
    tr = make_trace(0)
    blocks = [b for r in tr for b in r.blocks]
    assert (len(tr), len(blocks), len(set(blocks))) == (23_608, 413_147, 163_070)
    assert (sum(r.input_len for r in tr), sum(r.output_len for r in tr), tr[-1].arrival) == (205_465_282, 4_259_932, 3600.0)
    assert make_trace(0, n_requests=50) == make_trace(0, n_requests=50) != make_trace(1, n_requests=50)
    assert all(len(r.blocks) == -(-r.input_len // 512) for r in tr)


def line(ts=0, n_in=1000, n_out=5, ids=(1, 2), **extra):
    return json.dumps(dict(timestamp=ts, input_length=n_in, output_length=n_out, hash_ids=list(ids), **extra))


def write(tmp_path, data, name="t.jsonl"):
    p = tmp_path / name
    p.write_bytes(data)
    return str(p)


def test_reads_what_it_should_accept(tmp_path):
    """空白行、\\r\\n、第 1 行的 BOM、多余的字段、output_length = 0、相同的 timestamp、拼接的 .gz。"""
    text = "\ufeff" + line(0, 1024, 7, (5, 6)) + "\r\n\n  \n" + line(2500.5, 1025, 0, (5, 6, 9), note=[1]) + "\n" + line(2500.5)
    want = [Request(0.0, 1024, 7, (5, 6)), Request(2.5005, 1025, 0, (5, 6, 9)), Request(2.5005, 1000, 5, (1, 2))]
    assert load_trace(write(tmp_path, text.encode())) == want
    gz = gzip.compress(text.encode()[:text.encode().index(b"\n\n") + 1], mtime=0) + gzip.compress(
        text.encode()[text.encode().index(b"\n\n") + 1:], mtime=0)
    assert load_trace(write(tmp_path, gz, "t.jsonl.gz")) == want


GOOD = (line(0) + "\n" + line(10) + "\n").encode()
CASES = {   # 名字 → (文件内容（None：不写文件）, 文件名, 报错的行号, 说明里的字)
    "missing": (None, "nope.jsonl", 0, "文件不存在"),
    "empty": (b"", "t.jsonl", 0, "没有任何请求"),
    "blank only": (b"\n \n\n", "t.jsonl", 0, "没有任何请求"),
    "bad utf-8": (GOOD + b"\xff\n", "t.jsonl", 3, "不是 UTF-8"),
    "gzip not named .gz": (gzip.compress(GOOD), "t.jsonl", 1, "文件名要以 .gz 结尾"),
    "not gzip named .gz": (GOOD, "t.jsonl.gz", 1, "gzip 数据坏了"),
    "truncated gzip": (gzip.compress(GOOD, mtime=0)[:20], "t.jsonl.gz", 1, "被截断"),
    "gzip crc": (gzip.compress(GOOD, mtime=0)[:-8] + b"\0" * 4 + gzip.compress(GOOD)[-4:], "t.jsonl.gz", 3, "gzip 数据坏了"),
    "garbage after gzip": (gzip.compress(GOOD) + b"garbage!", "t.jsonl.gz", 3, "gzip 数据坏了"),
    "line too long": (GOOD + b" " * (MAX_LINE + 1), "t.jsonl", 3, "超过 1 MiB"),
    "not json": (GOOD + b"oops\n", "t.jsonl", 3, "不是合法的 JSON"),
    "NaN": (GOOD + line(float("nan")).encode(), "t.jsonl", 3, "NaN 不是 JSON 的数"),
    "deep nesting": (GOOD + b"[" * 100_000, "t.jsonl", 3, "嵌套得太深"),
    "huge integer": (GOOD + line(0).replace('"timestamp": 0', '"timestamp": ' + "9" * 5000).encode(), "t.jsonl", 3, "4300"),
    "duplicate key": (GOOD + b'{"timestamp": 0, "timestamp": 5}', "t.jsonl", 3, "重复的键"),
    "not an object": (GOOD + b"[1, 2]", "t.jsonl", 3, "应该是 JSON 对象"),
    "missing field": (GOOD + b'{"timestamp": 20}', "t.jsonl", 3, "缺少字段 input_length, output_length, hash_ids"),
    "bool length": (GOOD + line(20, n_in=True).encode(), "t.jsonl", 3, "input_length 应该是 [1, 2^53) 里的整数"),
    "float length": (GOOD + line(20, n_in=1000.0).encode(), "t.jsonl", 3, "input_length 应该是"),
    "negative output": (GOOD + line(20, n_out=-1).encode(), "t.jsonl", 3, "output_length 应该是 [0, 2^53)"),
    "infinite timestamp": (GOOD + line(20).replace("20", "1e400", 1).encode(), "t.jsonl", 3, "timestamp 应该是"),
    "long value is cut": (GOOD + line("x" * 100_000).encode(), "t.jsonl", 3, "timestamp 应该是"),
    "id too big": (GOOD + line(20, ids=(1, 2 ** 53)).encode(), "t.jsonl", 3, "hash_ids 应该是"),
    "duplicate ids": (GOOD + line(20, ids=(1, 1)).encode(), "t.jsonl", 3, "重复的 id"),
    "wrong block count": (GOOD + line(20, ids=(1, 2, 3)).encode(), "t.jsonl", 3, "应该是 2 块"),
    "time goes back": (GOOD + line(5).encode(), "t.jsonl", 3, "比上一行的 10 小"),
    "newline in name": (b"oops\n", "a\nb.jsonl", 1, "不是合法的 JSON"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, case):
    data, name, lineno, words = CASES[case]
    path = str(tmp_path / name)
    if data is not None:
        path = write(tmp_path, data, name)
    with pytest.raises(SystemExit) as e:
        load_trace(path)
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.count("\n") == 1 and len(err) < 200, err
    shown = path.replace("\n", "\\n")                       # 文件名里的换行转义成 \n：消息永远一行
    assert f"{shown}:{lineno}: " in err and words in err, err


@pytest.mark.parametrize("path,shown,words", [("", '""', "文件名是空的"), ("/", "/", "目录"), ("/dev/zero", "/dev/zero", "1 MiB")])
def test_special_paths(capsys, path, shown, words):
    with pytest.raises(SystemExit):
        load_trace(path)
    err = capsys.readouterr().err
    assert f"{shown}:" in err and words in err and err.count("\n") == 1, err


def test_04_refuses_a_bad_trace_before_any_output(tmp_path):
    p = write(tmp_path, GOOD + b"[" * 100_000 + b"\n")
    code, out, err = run("04_prefix_caching", "--trace", p)
    assert (code, out) == (2, "") and err.count("\n") == 1 and f"{p}:3: JSON 嵌套得太深" in err, err


def test_04_runs_on_a_small_trace_file(tmp_path):
    rows = [line(1000 * i, 1024 + 300 * (i % 3), 5, tuple(range(i % 4, i % 4 + -(-(1024 + 300 * (i % 3)) // 512))))
            for i in range(60)]
    p = write(tmp_path, ("\n".join(rows) + "\n").encode())
    code, out, err = run("04_prefix_caching", "--trace", p, "--demo", "3")
    assert code == 0 and "你给的 trace（t.jsonl）" in out and "60" in out, err


@pytest.mark.parametrize("name,value", [("P_ONE_SHOT", 1.5), ("FAMILY_WEIGHTS", (0.5, 0.5, 0.5, 0.5)), ("MAX_INPUT", 0)])
def test_a_bad_workload_setting_is_one_line(monkeypatch, capsys, name, value):
    monkeypatch.setattr(trace, name, value)                 # 学生改了 kv_store/trace.py 顶上的负载参数
    with pytest.raises(SystemExit) as e:
        make_trace(0, n_requests=10)
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.count("\n") == 1 and f"kv_store/trace.py 的 {name} = {value!r}" in err, err
