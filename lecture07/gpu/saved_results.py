"""读 06 保存的 GPU 结果（figures/data/triton_cow_clone_h200.json），查齐演示 2–4 和图要用的字段。不 import torch：
没有 GPU 的机器上 06 和 figures/plot_06.py 只靠它。"""
import json
import statistics

METHODS = ("A", "B", "C", "D", "E", "C_graph", "D_graph", "C_same", "C_side", "C_kernel", "C_contig", "E_kernel")


def read_results(path):
    """→ (data, {(形状, N, 做法): 那一行})；读不了、不是 JSON、缺字段 → ValueError，一句话说哪里不对。"""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        st, t = data["settings"], {(r["shape"], r["N"], r["method"]): r for r in data["results"]}
        assert len(st["NS"]) >= 2 and st["SHAPES"], "NS 至少要两个 N、SHAPES 不能是空的"
        for key in ((s, n, m) for s in st["SHAPES"] for n in st["NS"] for m in METHODS):
            assert key in t, f"缺少 {key}"
            assert min(t[key]["us"], t[key]["bytes"], *t[key]["rounds_us"]) > 0, f"{key} 的数不对"
        assert [r["B"] for r in data["decode"]["rows"]] == st["DECODE_BATCHES"], "decode 的行和 DECODE_BATCHES 对不上"
        for r in data["decode"]["rows"]:
            assert min(*(r["us"][m] for m in ("none", "A", "C")), *sum(r["rounds_us"].values(), [])) > 0 and {
                r["logits_identical"], r["kv_identical"]} <= {True, False}, "decode 的行不对"
        assert all(isinstance(data["meta"][k], str) for k in ("gpu", "torch", "triton", "date")), "meta 不全"
    except (OSError, ValueError, KeyError, TypeError, AssertionError, AttributeError) as exc:
        raise ValueError(f"{type(exc).__name__}：{str(exc)[:80]}") from None
    return data, t


def spread(values):
    """各轮中位数的 (最大 − 最小) / 中位数。spread([10, 11, 12]) → 0.1818…"""
    return (max(values) - min(values)) / statistics.median(values)
