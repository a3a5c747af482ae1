"""06 的演示 2–4 与演示 4 用的 torch decode。

- paged_decode 的一步 decode 就是 transformer_lab 的模型：float64 下与 paged_kv.paged_step 的 logits 相差 ≤ 1e-12；
- 演示 4 的算术（占比、估算、波动）和观察的措辞随数字变；
- CPU 上 main()：演示 1 在解释器里通过，演示 2–4 打印保存的表，标明 GPU、版本、日期；
- 80 列和 100 列下，表格都不会在数字中间折行；学生读到的文字里没有构建过程的词。
"""
import copy
import os
import re

import numpy as np
import pytest
from conftest import (KERNEL_MARKS, LECTURE, ROOT, LazyModule, kernel_module, load_script, on_cuda,  # noqa: F401
                      run_main, skip_without_kernel)                      # on_cuda：skipif 的字符串条件里用
from golden import MODES, mismatch

skip_without_kernel()

from lab_common import console  # noqa: E402
from lab_common.transformer_lab import TINY, config_like, init_params  # noqa: E402
from paged_kv import BlockPool, PagedSequence, gather_kv, paged_step  # noqa: E402

pytestmark = KERNEL_MARKS                          # 和 test_kv_clone_triton 同一个进程：只有它 import torch
torch = LazyModule("torch")                        # 收集测试时不 import（第一次用到时才 import）
paged_decode = LazyModule("gpu.paged_decode")
s06 = load_script("06_triton_cow_clone")
SAVED = s06.load_results(s06.DEFAULT_JSON)
ON_GPU = "on_cuda()"                               # skipif 的字符串条件：跑到这个测试时才求值（才 import torch）


def test_torch_decode_is_the_transformer_lab_model():
    """同一份权重、同一段 prefix、同样的 fork + 写时复制：torch 分页 decode 与 numpy 的 paged_step 一致。"""
    cfg = config_like(TINY, max_seq=32)
    params = init_params(cfg, seed=0)
    pool = BlockPool(cfg, 16, 4)
    a = PagedSequence(pool)
    paged_step(params, cfg, [a], [np.arange(1, 8)])                 # 7 个 token：最后一块写了 3 个
    toks = [5, 9, 11]
    ref = np.stack([x[0] for x in paged_step(params, cfg, [a.fork() for _ in toks], [[t] for t in toks])])
    cache = paged_decode.PagedKVCache(cfg.n_layers, cfg.n_kv_heads, cfg.head_dim, 4, 16, dtype=torch.float64)
    p = cache.new_sequence()
    kv = [np.stack([gather_kv(pool, li, a.blocks, a.length)[j].transpose(1, 0, 2) for li in range(cfg.n_layers)])
          for j in (0, 1)]                                          # [L, T, H_kv, hd]
    cache.prefill(p, torch.as_tensor(kv[0]), torch.as_tensor(kv[1]))
    kids = [p.fork() for _ in toks]
    pairs, _, _ = cache.reserve(kids, 1)                            # 3 个块对，一次克隆（解释器里的 kernel）
    for k in kids:
        k.length += 1
    tp = paged_decode.torch_params(params, "cpu", torch.float64)
    out = paged_decode.decode_step(tp, cfg, cache.kv, torch.tensor(toks),
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
    text = "\n".join(s06.decode_observations(d := _data(), s06.decode_rows(d))[0])
    assert "A 的克隆占一步 decode 的 2.4%–13.0%，C 占 0.2%–0.4%" in text and "各轮最多相差 1.0%" in text
    assert "几乎看不出来" in text and "逐位相同" in text and "cuDNN" not in text
    big = _data(c=(1100.0, 1300.0))                                   # C 占 9.1%、7.7%：看得出来
    text = "\n".join(s06.decode_observations(big, s06.decode_rows(big))[0])
    assert "C 占 7.7%–9.1%" in text and "仍看得出来" in text
    swapped = _data(attention="不用 cuDNN", identical=False)
    lines, more = s06.decode_observations(swapped, s06.decode_rows(swapped))
    assert "KV 缓存却逐位相同：差别来自之后的计算" in "".join(lines) and "最多差 0.5" in "".join(lines)
    assert "不是克隆" in "".join(lines) and "B=1 不用 cuDNN" in more[0]
    for r in swapped["decode"]["rows"]:
        r["kv_identical"] = False                                      # KV 也不同：怪克隆写出的数据
    lines, _ = s06.decode_observations(swapped, s06.decode_rows(swapped))
    assert "KV 缓存不同：克隆写出的数据不一样" in "".join(lines) and "不是克隆" not in "".join(lines)


def test_blog_comparison_sits_next_to_our_own_number():
    """博客三次的区间确实重叠（句子这么说）；--more 的出处对照把博客的三次、平均和我们单独的一次 A 克隆并排写出来。"""
    ft = s06.BLOG["first_token_p99_ms"]
    assert max(min(ft["之前"]), min(ft["之后"])) <= min(max(ft["之前"]), max(ft["之后"]))       # 区间重叠
    text = s06.blog_sentence(SAVED)
    assert "之前 0.59、0.55、0.51 ms（平均 550 µs）" in text and "之后 0.52、0.49、0.47 ms（平均 493 µs）" in text
    a1 = s06.fmt_us(s06.row(SAVED, "gpt2-small", 1, "A")["us"])
    assert f"本实验单独一次 A 克隆（N=1）{a1} µs" in text and "区间重叠" in text


def test_saved_results_meet_the_decode_targets():
    """保存的 H200 结果：每种做法几轮的波动 ≤ 5%，C 的差分与估算相差 ≤ 2 个百分点，三种做法 logits 逐位相同。"""
    rows = s06.decode_rows(SAVED)
    assert [r["B"] for r in rows] == list(s06.DECODE_BATCHES)
    assert all(r["spread"] <= 0.05 for r in rows)
    assert all(abs(r["share_C"] - r["est_C"]) <= 0.02 for r in rows)
    assert all(r["logits_identical"] and r["kv_identical"] for r in SAVED["decode"]["rows"])


def test_validation_observations_cover_both_paths_and_failures():
    ok = dict(cases=15, passed=15, checks=75, arg_pairs=8, ns=[0, 1, 5, 8, 9])
    lines, more = s06.validation_observations(ok)
    assert "15 个用例、75 项检查都逐位正确" in lines[0] and "N = 8 块号当 kernel 参数传，N = 9 起" in lines[1]
    assert "ref_count 回到 1" in more[0]
    lines, _ = s06.validation_observations(dict(ok, ns=[0, 1, 5]))          # 没跨过分界：不说分界
    assert len(lines) == 1
    lines, _ = s06.validation_observations(dict(ok, passed=14, ns=[1]))
    assert lines == ["1 个用例写错了（共 15 个）：后面的计时没有意义。"]


def _steady_copy():
    """SAVED 的一份拷贝，每一格的各轮都改成相同（都稳定）：观察只看数本身。"""
    d = copy.deepcopy(SAVED)
    for r in d["results"] + [x for s in d["shapes"] for x in d["tuning"][s]["ladder"]]:
        r["rounds_us"] = [r["us"]] * 3
    return d


def test_bound_observations_say_where_the_gap_is():
    """只量 kernel 的 C/D 范围、整步 C 最低的一格和它比只量 kernel 多的 µs；E 的两种线程形状；各轮不稳的格子不进句子。"""
    d = _steady_copy()
    cells = s06.ladder_cells(d)
    worst = min(cells, key=lambda k: cells[k]["zero_copy"]["c_over_d"])
    lines, more = s06.bound_observations(d)
    w = cells[worst]
    assert f"整步的 C 最低是 {s06.pct1(w['zero_copy']['c_over_d'])}（{worst[0]}，N={worst[1]}）" in lines[0]
    assert f"每步多 {s06.fmt_us(w['zero_copy']['us'] - w['kernel']['us'])} µs" in lines[0]
    kern = [v["kernel"]["c_over_d"] for v in cells.values()]
    assert f"C 是 D 的 {s06.pct1(min(kern))}–{s06.pct1(max(kern))}" in lines[0]
    assert "vLLM 的线程形状" in lines[1] and "48–64 KB" in lines[1] and "2 KB" in lines[1] and len(lines) == 2
    assert "通用的 kernel[grid] 路径" in more[0]
    w["zero_copy"]["rounds_us"] = [1.0, 2.0, 3.0]                    # 这一格不稳：不再是"最低"的那一格
    lines, _ = s06.bound_observations(d)
    assert f"（{worst[0]}，N={worst[1]}）" not in lines[0]


def test_timing_observations_use_only_steady_numbers():
    """N 最小的一档：A/B 受主机开销限制，印 A/B/C/D；N 最大：C、E 各是 D 的多少。不稳的数换一档或不说。"""
    d = _steady_copy()
    lines, _ = s06.timing_observations(d)
    c1 = s06.fmt_us(s06.row(d, "gpt2-small", 1, "C")["us"])
    assert lines[0].startswith("N=1（gpt2-small，µs）") and "受主机开销限制（每步 72、36 次驱动调用）" in lines[0]
    assert f"C {c1}" in lines[0]
    r = {m: s06.row(d, "llama3-8b", 2048, m)["us"] for m in "CDE"}
    assert f"llama3-8b {s06.pct1(r['D'] / r['C'])}" in lines[1] and s06.pct1(r["D"] / r["E"]) in lines[1]
    s06.row(d, "gpt2-small", 1, "C")["rounds_us"] = [10.0, 20.0, 15.0]   # N=1 的 C 不稳：换到 N=8
    lines, _ = s06.timing_observations(d)
    assert lines[0].startswith("N=8（gpt2-small，µs）")
    for n in d["Ns"]:                                               # 每档的 C 都不稳：不说 N 小的那句
        s06.row(d, "gpt2-small", n, "C")["rounds_us"] = [10.0, 20.0, 15.0]
    lines, _ = s06.timing_observations(d)
    assert len(lines) == 1 and lines[0].startswith("N=2,048 时 C 的带宽是 D 的 llama3-8b")


def test_demo_2_says_what_a_to_e_are_above_the_table(capsys):
    """表头只有 A–E：表上方每种做法一句（投影仪上看得到），都在 80 列里。"""
    s06.demo_2(SAVED)
    out = capsys.readouterr().out
    legend = out[:out.index("gpt2-small：")]
    for m, words in zip("ABCDE", ("每层 index_select", "每层一次 Triton launch", "所有层一次 launch", "同样字节的一次连续拷贝",
                                  "vLLM copy_blocks")):
        assert f"{m} {words}" in legend, m
    assert max(console.cell_len(x) for x in legend.splitlines()) <= 80


def test_unsteady_cells_are_marked_in_the_table(capsys):
    d = _steady_copy()
    s06.row(d, "gpt2-small", 64, "C")["rounds_us"] = [50.0, 60.0, 55.0]
    s06.demo_2(d)
    out = capsys.readouterr().out
    assert out.count("≈") == 2 and "≈" + s06.fmt_us(s06.row(d, "gpt2-small", 64, "C")["us"]) in out   # 格子和表注




def _cpu_output(argv, monkeypatch, capsys):
    """CPU 上 main(argv) 的输出（80 列、管道）：conftest.run_main，整个会话只跑一遍，本文件的测试共用（标准输出也在这里比）；
    演示 1 的每个校验用例在解释器里只跑一遍（conftest.SLOW_CALLS_ELSEWHERE）。"""
    return run_main("06_triton_cow_clone", argv)[0]


@pytest.mark.skipif(ON_GPU, reason="GPU 上 main() 会重新测量")
@pytest.mark.parametrize("suffix,argv", sorted(MODES.items()), ids=["default", "more"])
def test_cpu_output_matches_golden_file(suffix, argv, monkeypatch, capsys):
    """06 的标准输出（tests/golden/06_triton_cow_clone*.txt），和 test_golden 比别的脚本一样；在这个进程里比，
    用的是这里的测试共用的那一遍输出。"""
    problem = mismatch("06_triton_cow_clone", suffix, _cpu_output(argv, monkeypatch, capsys))
    if problem:
        pytest.fail(problem)


@pytest.mark.skipif(ON_GPU, reason="GPU 上 main() 会重新测量")
def test_main_on_cpu_validates_then_prints_every_saved_table(monkeypatch, capsys):
    out = _cpu_output([], monkeypatch, capsys)
    flat = "".join(out.split())
    assert "Triton解释器" in flat and "24个用例、92项检查都逐位正确" in flat
    m = SAVED["meta"]
    assert "".join(f"{m['gpu']}，torch{m['torch']}，triton{m['triton']}，{m['date']}".split()) in flat
    assert out.count("triton_cow_clone_h200.json") == 1 and "../" not in out          # 路径只印一次、相对仓库
    assert "设置和这里不同" not in out
    for head in ("演示 2", "演示 3", "演示 4"):
        assert head in out
    assert "2,048" in out and "2048" not in out.replace("2048 元素", "")                 # N 处处带千分位
    assert s06.fmt_us(s06.row(SAVED, "gpt2-small", 2048, "E")["us"]) in out             # 演示 2 的 E
    row = s06.decode_rows(SAVED)[0]
    assert s06.fmt_us(row["us"]["none"]) in out and s06.pct1(row["share_C"]) in out   # 演示 4


@pytest.mark.skipif(ON_GPU, reason="GPU 上 main() 会重新测量")
def test_cpu_output_budget_and_no_pass_fail_words(monkeypatch, capsys):
    """默认输出（80 列、管道）：每个演示至多 28 行、至多 2 条观察；没有目标和达标与否的字样。"""
    out = _cpu_output([], monkeypatch, capsys)
    for word in ("目标", "达标", "大头", "小头", "prefix", "通过", "失败", "未达"):
        assert word not in out, word
    demos = out.split("═" * 80)[1:]
    assert len(demos) == 4
    for part in demos:
        assert len(part.strip("\n").splitlines()) <= 28, part[:200]
        items = [ln for ln in part.split("观察\n")[-1].splitlines() if ln.startswith("  ") and ln[2:3].isdigit()]
        assert len(items) <= 2


@pytest.mark.skipif(ON_GPU, reason="GPU 上 main() 会重新测量")
def test_cpu_says_when_a_setting_differs_from_the_saved_measurement(monkeypatch, capsys):
    monkeypatch.setattr(s06, "DECODE_PREFIX_LEN", 17)
    monkeypatch.setattr(console, "DEFAULT_WIDTH", 200)
    assert s06.main(["--demo", "4"]) == 0
    out = capsys.readouterr().out
    assert "设置和这里不同：DECODE_PREFIX_LEN = 200（这里 17）" in out and "前缀 200 个 token" in out


@pytest.mark.skipif(ON_GPU, reason="GPU 上 main() 会重新测量")
def test_more_keeps_the_facts_moved_out_of_sentences(monkeypatch, capsys):
    """--more：graph 版本和各轮范围的表、N=1 主机开销的拆分、注意力后端、出处对照。"""
    more = _cpu_output(["--more"], monkeypatch, capsys)
    flat = "".join(more.split())
    c = s06.row(SAVED, "gpt2-small", 2048, "C图")
    for fact in ("捕获进CUDAgraph", s06.fmt_us(c["us"]), "通用的kernel[grid]路径", "不用cuDNN", "区间重叠",
                 "ref_count回到1"):
        assert fact in flat, fact


@pytest.mark.parametrize("width", [80, 100])
def test_tables_never_break_inside_a_number(width, monkeypatch, capsys):
    monkeypatch.setattr(console, "DEFAULT_WIDTH", width)
    s06.demo_2(SAVED)
    s06.demo_3(SAVED)
    s06.demo_4(SAVED)
    out = capsys.readouterr().out
    assert max(console.cell_len(x) for x in out.splitlines()) <= width
    cells = [s06.fmt_us(r["us"]) for r in SAVED["results"] if r["method"] in ("A", "B", "C", "D", "E")]
    for r in s06.decode_rows(SAVED):
        cells += [s06.fmt_us(v) for v in r["us"].values()] + [s06.pct1(r[k]) for k in ("share_A", "spread")]
    missing = [c for c in cells if c not in out]
    assert not missing, missing[:5]


def test_06_fits_its_line_budget():
    with open(os.path.join(LECTURE, "06_triton_cow_clone.py"), encoding="utf-8") as f:
        assert len(f.read().splitlines()) <= 350


def test_what_students_read_has_no_build_process_words():
    files = [os.path.join(LECTURE, f) for f in ("06_triton_cow_clone.py", "gpu/clone_kernel.py", "gpu/clone_bench.py",
                                                "gpu/paged_decode.py", "gpu/GPU.md")]
    files.append(os.path.join(ROOT, "figures", "plot_06.py"))
    for f in files:
        with open(f, encoding="utf-8") as fh:
            text = fh.read()
        for word in ("issue", "种子文章", "种子原样", "锚点", "没有查明"):
            assert word not in text, (f, word)
