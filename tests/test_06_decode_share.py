"""06 的演示 2–4 与演示 4 用的 torch decode。

- paged_decode 的一步 decode 就是 transformer_lab 的模型：float64 下与 paged_kv.paged_step 的 logits 相差 ≤ 1e-12；
- 演示 4 的算术（占比、估算、波动）和观察的措辞随数字变；
- CPU 上 main()：演示 1 在解释器里通过，演示 2–4 打印保存的表，标明 GPU、版本、日期；
- 80 列和 100 列下，表格都不会在数字中间折行；学生读到的文字里没有构建过程的词。
"""
import copy
import os

import numpy as np
import pytest
from conftest import NO_KERNEL

torch = pytest.importorskip("torch", reason=NO_KERNEL.format("torch"))
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")      # 必须在导入 triton 之前
pytest.importorskip("triton", reason=NO_KERNEL.format("triton"))

from conftest import LECTURE, ROOT, load_script  # noqa: E402

from lab_common import console  # noqa: E402
from lab_common.transformer_lab import TINY, config_like, init_params  # noqa: E402
from paged_decode import PagedKVCache, decode_step, torch_params  # noqa: E402
from paged_kv import BlockPool, PagedSequence, gather_kv, paged_step  # noqa: E402

s06 = load_script("06_triton_cow_clone")
SAVED = s06.load_results(s06.DEFAULT_JSON)
ON_GPU = torch.cuda.is_available()


def test_torch_decode_is_the_transformer_lab_model():
    """同一份权重、同一段 prefix、同样的 fork + 写时复制：torch 分页 decode 与 numpy 的 paged_step 一致。"""
    cfg = config_like(TINY, max_seq=32)
    params = init_params(cfg, seed=0)
    pool = BlockPool(cfg, 16, 4)
    a = PagedSequence(pool)
    paged_step(params, cfg, [a], [np.arange(1, 8)])                 # 7 个 token：最后一块写了 3 个
    toks = [5, 9, 11]
    ref = np.stack([x[0] for x in paged_step(params, cfg, [a.fork() for _ in toks], [[t] for t in toks])])
    cache = PagedKVCache(cfg.n_layers, cfg.n_kv_heads, cfg.head_dim, 4, 16, dtype=torch.float64)
    p = cache.new_sequence()
    kv = [np.stack([gather_kv(pool, li, a.blocks, a.length)[j].transpose(1, 0, 2) for li in range(cfg.n_layers)])
          for j in (0, 1)]                                          # [L, T, H_kv, hd]
    cache.prefill(p, torch.as_tensor(kv[0]), torch.as_tensor(kv[1]))
    kids = [p.fork() for _ in toks]
    pairs, _, _ = cache.reserve(kids, 1)                            # 3 个块对，一次克隆（解释器里的 kernel）
    for k in kids:
        k.length += 1
    out = decode_step(torch_params(params, "cpu", torch.float64), cfg, cache.kv, torch.tensor(toks),
                      torch.tensor([k.blocks for k in kids]), kids[0].length)
    assert len(pairs) == 3 and cache.clone_calls == 1
    assert np.abs(out.numpy() - ref).max() <= 1e-12


def _data(none=(1000.0, 1200.0), a=(1150.0, 1230.0), c=(1004.0, 1203.0), a_alone=120.0, c_alone=5.0,
          identical=True, attention="默认", cudnn=False):
    d = copy.deepcopy(SAVED)
    d["Ns"] = [1, 8]
    d["results"] = [dict(shape="gpt2-small", N=n, method=m, us=v) for n in (1, 8)
                    for m, v in (("A", 1000.0), ("A图", a_alone), ("C图", c_alone))]
    rows = []
    for i, b in enumerate((1, 8)):
        rounds = {"none": [none[i]] * 3, "A": [a[i], a[i] * 1.01, a[i]], "C": [c[i]] * 3}
        rows.append(dict(B=b, N_pairs=b, rounds_us=rounds, us={m: float(np.median(v)) for m, v in rounds.items()},
                         attention=attention, repeatable={"默认": attention == "默认", "只用 cuDNN": cudnn,
                                                          "不用 cuDNN": True},
                         logits_identical=identical, logits_max_abs_diff=0.0 + 0.5 * (not identical),
                         kv_identical=True))
    d["decode"]["rows"] = rows
    return d


def test_decode_rows_arithmetic():
    r = s06.decode_rows(_data())[0]
    assert r["share_A"] == pytest.approx(150 / 1150) and r["share_C"] == pytest.approx(4 / 1004)
    assert r["est_A"] == pytest.approx(120 / 1120) and r["est_C"] == pytest.approx(5 / 1005)
    assert r["spread"] == pytest.approx(0.01 * 1150 / 1150)          # A 的三轮：1150、1161.5、1150


def test_decode_observations_follow_numbers():
    text = "\n".join(s06.decode_observations(d := _data(), s06.decode_rows(d)))
    assert "A 的克隆占一步的 13.0%（大头）" in text and "相差 0.1 个百分点（在 2 个百分点以内）" in text
    assert "最多相差 1.0%（不超过 5%）" in text and "逐位相同" in text and "cuDNN" not in text
    small = _data(a=(1050.0, 1230.0), c=(1040.0, 1203.0))             # A 4.8%：小头；C 的差分 3.8% vs 估算 0.5%
    text = "\n".join(s06.decode_observations(small, s06.decode_rows(small)))
    assert "4.8%（小头）" in text and "超过 2 个百分点" in text
    swapped = _data(attention="不用 cuDNN", identical=False)
    text = "\n".join(s06.decode_observations(swapped, s06.decode_rows(swapped)))
    assert "只用 cuDNN 的注意力后端时同样不可复现" in text and "选了不同的 kernel" in text and "最多差 0.5" in text


def test_saved_results_meet_the_decode_targets():
    """保存的 H200 结果：每种做法 3 轮的波动 ≤ 5%，C 的差分与估算相差 ≤ 2 个百分点，三种做法 logits 逐位相同。"""
    rows = s06.decode_rows(SAVED)
    assert [r["B"] for r in rows] == list(s06.DECODE_BATCHES)
    assert all(r["spread"] <= 0.05 for r in rows)
    assert all(abs(r["share_C"] - r["est_C"]) <= 0.02 for r in rows)
    assert all(r["logits_identical"] and r["kv_identical"] for r in SAVED["decode"]["rows"])


@pytest.mark.skipif(ON_GPU, reason="GPU 上 main() 会重新测量")
def test_main_on_cpu_validates_then_prints_every_saved_table(capsys):
    assert s06.main([]) == 0
    out = capsys.readouterr().out
    flat = "".join(out.split())
    assert "Triton解释器" in flat and "9个用例、45项检查，通过9个用例" in flat
    m = SAVED["meta"]
    assert "".join(f"{m['gpu']}，torch{m['torch']}，triton{m['triton']}，{m['date']}".split()) in flat
    assert "不是本机测的" in flat
    for head in ("演示 2", "演示 3", "演示 4"):
        assert head in out
    a1 = s06.get(SAVED, "gpt2-small", 1, "A")
    assert s06.fmt_us(a1) in out                                          # 演示 2 的一个数
    r = s06.ratios(SAVED, "llama3-8b")
    assert f"C 的带宽是 D 的 {100 * r['c_over_d_bw']:.1f}%" in "".join(out.split("\n"))   # 演示 3
    row = s06.decode_rows(SAVED)[0]
    assert s06.fmt_us(row["us"]["none"]) in out and s06.pct(row["share_C"]) in out   # 演示 4


@pytest.mark.parametrize("width", [80, 100])
def test_tables_never_break_inside_a_number(width, monkeypatch, capsys):
    monkeypatch.setattr(console, "DEFAULT_WIDTH", width)
    s06.demo_2(SAVED)
    s06.demo_3(SAVED)
    s06.demo_4(SAVED)
    out = capsys.readouterr().out
    assert max(console.cell_len(x) for x in out.splitlines()) <= width
    cells = [s06.fmt_us(r["us"]) for r in SAVED["results"]] + [f"{r['GBps']:,.0f}" for r in SAVED["results"]
                                                                if r["method"] in ("C", "D", "C图")]
    for r in s06.decode_rows(SAVED):
        cells += [s06.fmt_us(v) for v in r["us"].values()] + [s06.pct(r[k]) for k in ("share_A", "est_A", "spread")]
    missing = [c for c in cells if c not in out]
    assert not missing, missing[:5]


def test_what_students_read_has_no_build_process_words():
    files = [os.path.join(LECTURE, f) for f in ("06_triton_cow_clone.py", "kv_clone_triton.py", "kv_clone_bench.py",
                                                "paged_decode.py")] + [os.path.join(ROOT, "figures", "plot_06.py")]
    for f in files:
        with open(f, encoding="utf-8") as fh:
            text = fh.read()
        for word in ("issue", "种子文章", "种子原样", "锚点", "没有查明"):
            assert word not in text, (f, word)
