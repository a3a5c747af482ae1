"""读 06 保存的 GPU 结果（figures/data/triton_cow_clone_h200.json），查齐演示 2–4 和图要用的每个字段；不 import torch：
没有 GPU 的机器上 06 和 figures/plot_06.py 只靠它。坏文件 → ValueError，一句话说哪里不对。"""
import json
import statistics

METHODS = ("A", "B", "C", "D", "E", "A_graph", "C_graph", "D_graph", "C_zero_copy", "C_side",
           "C_kernel", "C_contig", "E_kernel", "E_vllm")          # gpu/timing.py 的做法（说明在那里）


def _pos(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool) and x > 0


def check(data):
    assert all(isinstance(data["meta"][k], str) for k in ("gpu", "torch", "triton", "date")), "meta 不全"
    assert isinstance(data["shapes"], dict) and data["shapes"], "shapes 是空的"
    ns = data["Ns"]
    assert isinstance(ns, list) and len(ns) >= 2 and all(map(_pos, ns)) and ns == sorted(set(ns)), "Ns 至少要两个 N"
    have = {(r["shape"], r["N"], r["method"]): r for r in data["results"]}
    for key in ((s, n, m) for s in data["shapes"] for n in ns for m in METHODS):
        r = have.get(key)
        assert r is not None, f"缺少 {key}"
        assert all(map(_pos, [r["us"], r["bytes"], r["GBps"]] + r["rounds_us"])) and len(r["rounds_us"]) >= 2, key
    assert all(_pos(data["decode"]["model"][k]) for k in ("n_layers", "d_model", "vocab")), "decode 的模型"
    assert data["decode"]["rows"], "decode 没有行"
    for r in data["decode"]["rows"]:
        assert all(_pos(r["us"][m]) and all(map(_pos, r["rounds_us"][m])) for m in ("none", "A", "C")), "decode"
        assert all(isinstance(r[k], bool) for k in ("logits_identical", "kv_identical", "repeatable")), "decode 的核对"
    assert all(_pos(x) for x in (data["reps"], data["rounds"], data["decode"]["prefix_len"], data["decode"]["rounds"]))


def read_results(path):
    """读并检查一份保存的结果；读不了、不是 JSON、缺字段 → ValueError。"""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        check(data)
    except (OSError, ValueError, KeyError, TypeError, AssertionError, AttributeError) as exc:
        raise ValueError(f"{type(exc).__name__}：{str(exc)[:80]}") from None
    return data


def table(data):
    """{(形状, N, 做法): 那一行}。"""
    return {(r["shape"], r["N"], r["method"]): r for r in data["results"]}


def spread(values):
    """各轮中位数的 (最大 − 最小) / 中位数。spread([10, 11, 12]) → 0.1818…"""
    return (max(values) - min(values)) / statistics.median(values)
