"""06 保存的 GPU 结果（figures/data/triton_cow_clone_h200.json）：读进来时查齐每个字段，取一格的数，看它稳不稳。
不 import torch：没有 GPU 的机器上 06 和 figures/plot_06.py 只靠它读结果。

    data = read_results(path, METHODS)       # 缺字段、不是 JSON → ValueError（说缺什么）
    r = row(data, "gpt2-small", 64, "C")     # {"us": 中位数, "rounds_us": [每轮的中位数], ...}
    steady(0.10, r)                          # 各轮相差 ≤ 10%？
"""
import json
import statistics


def _num(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool) and x > 0


def _count(x):
    return isinstance(x, int) and not isinstance(x, bool) and x >= 1


def _rounds(r):
    return isinstance(r.get("rounds_us"), list) and len(r["rounds_us"]) >= 2 and all(map(_num, r["rounds_us"]))


def check_results(data, methods):
    """演示 2–4 和图要用的每个字段都在、都是正数；不齐时 AssertionError 说缺什么。"""
    assert all(isinstance(data["meta"][k], str) for k in ("gpu", "torch", "triton", "date")), "meta 不全"
    assert isinstance(data["shapes"], dict) and data["shapes"], "shapes 是空的"
    ns = data["Ns"]
    assert isinstance(ns, list) and len(ns) >= 2 and all(map(_count, ns)) and ns == sorted(set(ns)), "Ns 至少要两个 N"
    have = {(r["shape"], r["N"], r["method"]): r for r in data["results"]}
    for s, shape in data["shapes"].items():
        assert all(_count(shape[k]) for k in ("n_layers", "n_heads", "head_dim", "block_size")), f"{s} 的形状"
        for n in ns:
            for m in methods:
                r = have.get((s, n, m))
                assert r is not None, f"缺少 {(s, n, m)}"
                assert _num(r["us"]) and _num(r["bytes"]) and _num(r["GBps"]) and _rounds(r), f"{(s, n, m)} 的数不全"
        t = data["tuning"][s]
        assert all(_num(t["host_us_N1"][k]) for k in ("check", "upload", "launch", "launch_jit", "C", "D")), "host_us_N1"
        steps = {(r["N"], r["key"]): r for r in t["ladder"]}
        for n in data["ladder_ns"]:
            for st in data["ladder"]:
                r = steps.get((n, st["key"]))
                assert r and _num(r["c_over_d"]) and _num(r["us"]) and _rounds(r), f"缺少 {s} N={n} 的 {st['key']}"
    assert data["ladder_ns"] and set(data["ladder_ns"]) <= set(ns), "ladder_ns"
    assert all(isinstance(st["label"], str) for st in data["ladder"]) and data["ladder"], "ladder"
    dec = data["decode"]
    assert all(_count(dec["model"][k]) for k in ("n_layers", "d_model", "vocab")) and dec["rows"], "decode 没有行"
    for r in dec["rows"]:
        assert _count(r["B"]) and _count(r["N_pairs"]) and all(_num(r["us"][m]) for m in ("none", "A", "C")), "decode"
        assert all(isinstance(v, list) and v and all(map(_num, v)) for v in r["rounds_us"].values()), "decode 各轮"
        assert all(isinstance(r[k], bool) for k in ("logits_identical", "kv_identical")), "decode 的核对"
        assert isinstance(r["attention"], str) and isinstance(r["repeatable"], dict), "decode 的注意力后端"
    assert _count(data["reps"]) and _count(data["rounds"]) and _count(dec["prefix_len"]) and _count(dec["rounds"])


def read_results(path, methods):
    """读并检查一份保存的结果；读不了、不是 JSON、缺字段 → ValueError（一句话说哪里不对）。"""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        check_results(data, methods)
    except (OSError, ValueError, KeyError, TypeError, AssertionError, AttributeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{type(exc).__name__}：{exc}") from None
    return data


def row(data, shape, n, m):
    return next(r for r in data["results"] if r["shape"] == shape and r["N"] == n and r["method"] == m)


def spread(values):
    """各轮中位数的 (最大 − 最小) / 中位数。spread([10, 11, 12]) → 0.1818…"""
    return (max(values) - min(values)) / statistics.median(values)


def steady(limit, r):
    """这一格（有 rounds_us 的一行）各轮相差不超过 limit。"""
    return spread(r["rounds_us"]) <= limit


def differing_settings(data, here):
    """here（06 顶部的设置）里和保存的那次测量用的不一样的：["DECODE_PREFIX_LEN = 200（这里 17）", …]。"""
    saved = dict(SHAPES=data["shapes"], NS=tuple(data["Ns"]), REPS=data["reps"], ROUNDS=data["rounds"],
                 DECODE_BATCHES=tuple(r["B"] for r in data["decode"]["rows"]),
                 DECODE_PREFIX_LEN=data["decode"]["prefix_len"], DECODE_ROUNDS=data["decode"]["rounds"],
                 SEED=data.get("seed", 0))
    here = {k: tuple(v) if isinstance(v, list) else v for k, v in here.items()}
    out = []
    for k, v in saved.items():
        if here.get(k) != v:
            out.append(f"{k} = {v}（这里 {here.get(k)}）" if k != "SHAPES" else f"SHAPES（保存的是 {'、'.join(v)}）")
    return out
def ladder_cells(data):
    """{(形状, N): {key: 那一行}}：演示 3 每一格的数。"""
    return {(s, n): {r["key"]: r for r in data["tuning"][s]["ladder"] if r["N"] == n}
            for s in data["shapes"] for n in data["ladder_ns"]}


def decode_rows(data):
    """演示 4 的每一行：每步 µs、几轮之间的波动、克隆占比（差分）和按演示 2 单独测的 graph 耗时估算的占比。"""
    rows = []
    for r in data["decode"]["rows"]:
        row_ = dict(B=r["B"], us=r["us"], spread=max(spread(v) for v in r["rounds_us"].values()))
        for m in ("A", "C"):
            row_[f"share_{m}"] = (r["us"][m] - r["us"]["none"]) / r["us"][m]
            alone = [x["us"] for x in data["results"] if x["shape"] == "gpt2-small" and x["N"] == r["N_pairs"]
                     and x["method"] == m + "图"]
            row_[f"est_{m}"] = alone[0] / (r["us"]["none"] + alone[0]) if alone else None
        rows.append(row_)
    return rows
