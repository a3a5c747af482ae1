"""06_triton_cow_clone.py 演示 4：克隆在一次 decode step 里的占比。

CPU 上用很小的模型检查分页 decode 的数值（对照 float64 的稠密注意力）、三种克隆做法结果一致、
占比的算术与观察的措辞；演示 4 在 CPU 上只打印已保存的 GPU 结果；保存的 JSON 里占比能从 µs 重算出来。
"""
import json
import os

import pytest

torch = pytest.importorskip("torch", reason="没有安装 torch：pip install -r requirements-triton.txt")
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")      # 必须在导入 triton 之前
pytest.importorskip("triton", reason="没有安装 triton：pip install -r requirements-triton.txt")

from conftest import ROOT, load_script  # noqa: E402

script = load_script("06_triton_cow_clone")
script._import_torch()
SAVED = os.path.join(ROOT, "figures", "data", "triton_cow_clone_h200.json")
TINY = dict(n_layers=2, d_model=12, n_heads=3, d_ff=20, vocab=11, n_pos=32, block_size=4, dtype="float32")


def _dense_reference(params, cfg, case):
    """float64、逐条序列、连续 K/V 的 decode：prefix 的 K/V 从 prefix 条目（父序列）读，新 token 的 K/V 现算。"""
    import torch.nn.functional as F
    P = {k: v for k, v in params.items()}
    d, H = cfg["d_model"], cfg["n_heads"]
    D = d // H
    pref = case["mgr"].gather_sequence("prefix").double()           # [L, 2, T, H, D]
    f64 = lambda t: t.double()                                       # noqa: E731
    x = f64(P["wte"][case["tokens"]] + P["wpe"][case["pos"]])
    B = x.shape[0]
    for l, p in enumerate(P["layers"]):
        h = F.layer_norm(x, (d,), f64(p["ln1"][0]), f64(p["ln1"][1]))
        q, k, v = (h @ f64(p["qkv_w"]).T + f64(p["qkv_b"])).view(B, 3, H, D).unbind(1)
        outs = []
        for b in range(B):
            K = torch.cat([pref[l, 0], k[b:b + 1]])                  # [T+1, H, D]
            V = torch.cat([pref[l, 1], v[b:b + 1]])
            att = torch.softmax(torch.einsum("hd,thd->ht", q[b], K) / D ** 0.5, dim=-1)
            outs.append(torch.einsum("ht,thd->hd", att, V).reshape(d))
        x = x + torch.stack(outs) @ f64(p["o_w"]).T + f64(p["o_b"])
        h = F.layer_norm(x, (d,), f64(p["ln2"][0]), f64(p["ln2"][1]))
        x = x + F.gelu(h @ f64(p["fc_w"]).T + f64(p["fc_b"]), approximate="tanh") @ f64(p["pr_w"]).T + f64(p["pr_b"])
    x = F.layer_norm(x, (d,), f64(P["lnf"][0]), f64(P["lnf"][1]))
    return x @ f64(P["wte"]).T


def test_decode_case_does_one_cow_per_sequence():
    case = script.make_decode_case(TINY, 3, 7, "cpu", seed=1)
    mgr = case["mgr"]
    parent_last = mgr.block_tables["prefix"][-1]
    assert case["src"] == [parent_last] * 3                          # 都从 prefix 条目的半满块克隆
    assert len(set(case["dst"])) == 3 and parent_last not in case["dst"]
    assert case["table"][:, -1].tolist() == case["dst"]
    assert case["slot"] == 7 % 4 and case["seq_len"] == 8
    assert mgr.ref_counts[parent_last] == 1                          # 只剩 prefix 条目持有
    with pytest.raises(ValueError, match="整数倍"):
        script.make_decode_case(TINY, 2, 8, "cpu")


def test_paged_decode_matches_dense_reference_and_methods_agree():
    params = script.init_decoder(TINY, "cpu", seed=0)
    case = script.make_decode_case(TINY, 3, 7, "cpu", seed=1)
    parent = case["mgr"].gather_sequence("prefix").clone()
    logits = {}
    for m in ("C", "A", "none"):
        fn = script.decode_step_fn(params, TINY, case, m)
        fn()
        logits[m] = fn.logits
    ref = _dense_reference(params, TINY, case)
    assert torch.allclose(logits["C"].double(), ref, atol=1e-5, rtol=1e-4)
    assert torch.equal(logits["A"], logits["C"]) and torch.equal(logits["none"], logits["C"])
    assert torch.equal(case["mgr"].gather_sequence("prefix"), parent)      # prefix 条目没被写


def test_decode_share_rows_arithmetic():
    r = script.decode_share_rows([{"B": 1, "N_pairs": 1, "us_none": 100.0, "us_A": 150.0, "us_C": 101.0}])[0]
    assert r["clone_us_A"] == 50.0 and r["clone_us_C"] == 1.0
    assert r["share_A"] == pytest.approx(1 / 3) and r["share_C"] == pytest.approx(1 / 101)
    assert r["A_to_C_reduction"] == pytest.approx(49 / 150)


def _fake_ds(us_a, none=(1000.0, 1008.0, 1064.0)):
    t = [{"B": b, "N_pairs": b, "us_none": n, "us_A": us_a + b, "us_C": n + 10.0}
         for b, n in zip((1, 8, 64), none)]
    return {"config": dict(script.DECODE_MODEL, prefix_len=200, batches=[1, 8, 64], rounds=3),
            "rows": script.decode_share_rows(t), "max_abs_logit_diff": 0.0}


def _fake_results(a_us, c_us):
    return [{"shape": "gpt2-small", "N": n, "method": m, "us": v}
            for n in (1, 8, 64) for m, v in (("A", a_us), ("C", c_us))]


def test_estimates_arithmetic():
    ds = _fake_ds(2000.0)
    e = script.decode_estimates(ds, _fake_results(1000.0, 10.0))[0]
    assert e["est_share_A"] == pytest.approx(1000 / 2000) and e["est_share_C"] == pytest.approx(10 / 1010)
    assert e["est_reduction"] == pytest.approx(990 / 2000)
    assert script.decode_estimates(ds, None) == [None, None, None]


def test_observations_follow_numbers():
    big = script.decode_observations(_fake_ds(2000.0), _fake_results(1000.0, 10.0))   # A 约 50%、C 约 1%
    assert any("差分法（有克隆 − 无克隆）：A +1,001 µs（50.0%）" in x for x in big)
    assert any("→ 50.0%（大头）" in x and "→ 1.0%（小头）" in x for x in big)
    assert any("C 把克隆从一步的大头变成了小头" in x for x in big)
    assert any("看不出明显的计时抖动" in x for x in big)                      # 无克隆的一步随 B 单调变长
    assert any("逐位相同" in x for x in big)
    small = script.decode_observations(_fake_ds(1050.0), _fake_results(50.0, 10.0))    # A 约 4.8%：小头
    assert not any("（大头）" in x for x in small) and not any("变成了小头" in x for x in small)
    # 无克隆的一步随 B 变快了 500 µs：报告抖动，C 的 10 µs 远小于它 → 差分占比只是噪声
    noisy = script.decode_observations(_fake_ds(2000.0, none=(1500.0, 1200.0, 1000.0)),
                                       _fake_results(1000.0, 10.0))
    assert script.decode_noise(_fake_ds(2000.0, none=(1500.0, 1200.0, 1000.0)))[0] == 500.0
    assert any("至少有约 500 µs 的抖动" in x and "只是噪声" in x and "大于这个抖动" in x for x in noisy)


def _saved_like(tmp_path, with_share=True):
    data = {"meta": {"gpu": "FAKE GPU", "date": "2000-01-02", "torch": "x"}}
    if with_share:
        data["decode_share"] = _fake_ds(2000.0)
    p = tmp_path / "r.json"
    p.write_text(json.dumps(data))
    return str(p)


def test_demo_4_on_cpu_prints_saved_results(tmp_path, capsys):
    r = script.demo_4(False, saved_json=_saved_like(tmp_path))
    out = capsys.readouterr().out
    assert not r["ran"] and r["saved"] and r["date"] == "2000-01-02" and r["gpu"] == "FAKE GPU"
    assert "要在 NVIDIA GPU 上计时" in out
    flat = "".join(out.split())                                     # 表格/换行的位置随终端宽度变化
    assert "已保存的FAKEGPU结果（2000-01-02" in flat and "不是本机测的" in flat
    assert "50.0%" in out and "估算" in out


def test_demo_4_on_cpu_without_saved_results(tmp_path, capsys):
    assert script.demo_4(False, saved_json=_saved_like(tmp_path, with_share=False)) == {"ran": False, "saved": False}
    assert script.demo_4(False, saved_json=str(tmp_path / "missing.json")) == {"ran": False, "saved": False}
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert script.demo_4(False, saved_json=str(bad)) == {"ran": False, "saved": False}
    assert "还没有保存的 GPU 结果" in capsys.readouterr().out


@pytest.mark.skipif(not os.path.exists(SAVED), reason="还没有保存的 H200 结果")
def test_saved_decode_share_is_consistent():
    """保存的 decode_share：占比、克隆耗时、降幅都能从保存的 µs 重新算出；B 与配置一致。"""
    d = script.load_json(SAVED)
    ds = d["decode_share"]
    assert [r["B"] for r in ds["rows"]] == ds["config"]["batches"]
    assert all(r["N_pairs"] == r["B"] for r in ds["rows"])
    again = script.decode_share_rows([{k: r[k] for k in ("B", "N_pairs", "us_none", "us_A", "us_C")}
                                      for r in ds["rows"]])
    for saved, re in zip(ds["rows"], again):
        for k, v in re.items():
            assert saved[k] == pytest.approx(v), k
    for k in ("n_layers", "d_model", "n_heads", "block_size", "dtype"):
        assert ds["config"][k] == script.DECODE_MODEL[k]
    assert ds["config"]["prefix_len"] % ds["config"]["block_size"] != 0     # 最后一块没写满：真的要 COW
    # 演示 4 在 CPU 上打印的就是这些数字
    est = script.decode_estimates(ds, d["results"])                 # 演示 2 里有 N = 1/8/64 的单独克隆耗时
    assert all(e is not None for e in est)
    lines = script.decode_observations(ds, d["results"])
    r0 = ds["rows"][0]
    assert any(f"A +{r0['clone_us_A']:,.0f} µs（{100 * r0['share_A']:.1f}%）" in x for x in lines)
