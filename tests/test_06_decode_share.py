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
                      skip_without_kernel)                      # on_cuda：skipif 的字符串条件里用

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
    assert "不是克隆" in "".join(lines) and not more
    for r in swapped["decode"]["rows"]:
        r["kv_identical"] = False                                      # KV 也不同：怪克隆写出的数据
    lines, _ = s06.decode_observations(swapped, s06.decode_rows(swapped))
    assert "KV 缓存不同：克隆写出的数据不一样" in "".join(lines) and "不是克隆" not in "".join(lines)


def test_blog_comparison_is_a_table_of_printed_numbers(monkeypatch, capsys):
    """博客三次的区间确实重叠（表注这么说）；--more 的对照表把博客的平均和我们单独的 A 克隆并排印出来。"""
    ft = s06.BLOG["first_token_p99_ms"]
    assert max(min(ft["之前"]), min(ft["之后"])) <= min(max(ft["之前"]), max(ft["之后"]))       # 区间重叠
    monkeypatch.setattr(console, "SHOW_MORE", True)
    s06.demo_4(SAVED)
    out = capsys.readouterr().out
    assert re.search(r"^博客：之前 +0\.59、0\.55、0\.51 +550$", out, flags=re.M)
    assert re.search(r"^博客：之后 +0\.52、0\.49、0\.47 +493$", out, flags=re.M)
    a1 = s06.fmt_us(s06.get(SAVED, "gpt2-small", 1, "A"))
    assert re.search(rf"^本实验：单独一次 A 克隆（N=1） +- +{a1}$", out, flags=re.M) and "区间重叠" in out


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


def test_bound_observations_name_the_change_that_mattered():
    """逐步改 kernel：作用最大的一步按各形状里最小的提升选；变慢的步骤点名；对照行的数字照表印。"""
    d = copy.deepcopy(SAVED)
    for name in d["shapes"]:
        for r in d["tuning"][name]["ladder"]["steps"]:
            r["c_over_d"] = dict(before=0.90, hints=0.90, big_tiles=0.85, evict=0.91, layer_major=0.92, sorted=0.96,
                                 final=0.96, contiguous_blocks=0.99, triton_contiguous=0.995,
                                 torch_gather=0.3)[r["key"]]
    lines, more = s06.bound_observations(d)
    assert "作用最大的一步是“块对按 dst 排序”" in lines[0] and "+4.0" in lines[0]
    assert "“大 tile 多 warp（8192、8 warp）”反而更慢" in lines[0] and "evict" not in lines[0]
    assert "99.0%" in lines[1] and "30.0%" in lines[1]
    assert len(lines) <= 3 and any("99.5%" in m for m in more)
    for name in d["shapes"]:                        # 没有一步让每种形状都变快：不点名"作用最大"
        for r in d["tuning"][name]["ladder"]["steps"]:
            if r["base"] is not None and r["key"] not in ("contiguous_blocks", "triton_contiguous", "torch_gather"):
                r["c_over_d"] = 0.90
    lines, _ = s06.bound_observations(d)
    assert lines[0].startswith("没有哪一步让每种形状都变快") and "+0.0" not in lines[0] and "作用最大" not in lines[0]


def test_timing_observations_say_what_bounds_c_from_the_numbers():
    """受什么限制看 C 的时间跟不跟着块数涨：N 最小的两档几乎不涨 → 受 launch 开销限制；N 最大的两档跟着涨、带宽贴近 D
    → 受显存带宽限制。反过来的数据（学生把 NS 改成都很大 / 都很小、C 写得慢）句子跟着变。"""
    lines, _ = s06.timing_observations(SAVED)
    assert "受 launch 开销限制" in lines[0] and "：受显存带宽限制" in lines[1] and "受主机开销限制" in lines[0]
    assert "N 从 256 到 2048（块数 × 8），C 的时间 × 6.4" in lines[1]
    small = copy.deepcopy(SAVED)                                       # 只量了 N = 1、8：N 大的一头也是固定开销
    small["results"] = [r for r in small["results"] if r["N"] in (1, 8)]
    lines, _ = s06.timing_observations(small)
    assert "仍受调用开销限制" in lines[1] and "显存带宽" not in lines[1]
    slow = copy.deepcopy(SAVED)                                        # C 跟着块数涨，却只有 D 的两成：怪 kernel
    for r in slow["results"]:
        if r["method"] == "C":
            r["us"] *= 5
    lines, _ = s06.timing_observations(slow)
    assert "带宽却不到 D 的一半：受 kernel 本身的写法限制" in lines[1]
    big = copy.deepcopy(SAVED)                                         # 只量了 N 大的几档：N 小的一头也跟着涨
    big["results"] = [r for r in big["results"] if r["N"] >= 256]
    lines, _ = s06.timing_observations(big)
    assert "已跟着块数涨" in lines[0] and "受 launch 开销限制" not in lines[0]


_CPU_OUT = {}     # {(argv, width): 输出}：输出是确定的，同一条命令在本进程里只跑一遍（演示 1 要在解释器里校验）
_CHECKS = {}      # 演示 1 的每个校验用例（参数 → 结果）：默认和 --more 校验的是同一批用例，解释器里各跑一遍就够


def _cpu_output(argv, monkeypatch, capsys, width=80):
    key = (tuple(argv), width)
    if key not in _CPU_OUT:
        bench = kernel_module("gpu.clone_bench")
        check = bench.check_cow_write

        def check_once(*args):
            if args not in _CHECKS:
                _CHECKS[args] = check(*args)
            return _CHECKS[args]
        monkeypatch.setattr(bench, "check_cow_write", check_once)
        monkeypatch.setattr(console, "DEFAULT_WIDTH", width)
        capsys.readouterr()
        assert s06.main(argv) == 0
        _CPU_OUT[key] = capsys.readouterr().out
    return _CPU_OUT[key]


@pytest.mark.skipif(ON_GPU, reason="GPU 上 main() 会重新测量")
def test_main_on_cpu_validates_then_prints_every_saved_table(monkeypatch, capsys):
    out = _cpu_output([], monkeypatch, capsys)
    flat = "".join(out.split())
    assert "Triton解释器" in flat and "15个用例、75项检查都逐位正确" in flat
    m = SAVED["meta"]
    assert "".join(f"{m['gpu']}，torch{m['torch']}，triton{m['triton']}，{m['date']}".split()) in flat
    assert "保存的结果" in flat
    for head in ("演示 2", "演示 3", "演示 4"):
        assert head in out
    a1 = s06.get(SAVED, "gpt2-small", 1, "A")
    assert s06.fmt_us(a1) in out                                          # 演示 2 的一个数
    r = s06.ratios(SAVED, "llama3-8b")
    assert f"llama3-8b{100 * r['c_over_d_bw']:.1f}%" in flat               # 演示 2 的观察
    row = s06.decode_rows(SAVED)[0]
    assert s06.fmt_us(row["us"]["none"]) in out and s06.pct1(row["share_C"]) in out   # 演示 4


@pytest.mark.skipif(ON_GPU, reason="GPU 上 main() 会重新测量")
def test_cpu_output_budget_and_no_pass_fail_words(monkeypatch, capsys):
    """默认输出（80 列、管道）至多 80 行、每个演示至多 3 条观察、每条至多 3 行；没有目标和达标与否的字样。"""
    out = _cpu_output([], monkeypatch, capsys)
    assert len(out.splitlines()) <= 80, len(out.splitlines())
    for word in ("目标", "达标", "大头", "小头", "prefix", "通过", "失败", "未达"):
        assert word not in out, word
    for part in out.split("观察\n")[1:]:
        items = [ln for ln in part.split("═")[0].splitlines() if ln.startswith("  ") and ln[2:3].isdigit()]
        assert len(items) <= 3
    more = _cpu_output(["--more", "--demo", "3"], monkeypatch, capsys)
    assert "launch（通用路径）" in more and "Triton 拷一整段连续内存" in more
    for head in ("受主机开销限制", "受 launch 开销限制", "受显存带宽限制", "几乎看不出来"):     # 每种做法受什么限制、要记住什么
        assert head.replace(" ", "") in "".join(out.split()), head


@pytest.mark.skipif(ON_GPU, reason="GPU 上 main() 会重新测量")
def test_more_keeps_the_facts_moved_out_of_sentences(monkeypatch, capsys):
    """--more：以前句子里的数挪进了表格单元格（各轮范围、通用路径的 launch、估算的占比、注意力后端），都还在。"""
    more = _cpu_output(["--more"], monkeypatch, capsys)
    flat = "".join(more.split())
    for fact in ("9.4–10.3", "13.3–18.4", "23.4", "不在主机上逐个launch", "0.04%", "0.7%", "不用cuDNN",
                 "不确定的就是cuDNN的注意力kernel", "区间重叠", "ref_count回到1", "kernel的写法本身不是瓶颈"):
        assert fact in flat, fact
    assert len(more.splitlines()) <= 126


@pytest.mark.parametrize("width", [80, 100])
def test_tables_never_break_inside_a_number(width, monkeypatch, capsys):
    monkeypatch.setattr(console, "DEFAULT_WIDTH", width)
    s06.demo_2(SAVED)
    s06.demo_3(SAVED)
    s06.demo_4(SAVED)
    out = capsys.readouterr().out
    assert max(console.cell_len(x) for x in out.splitlines()) <= width
    cells = [s06.fmt_us(r["us"]) for r in SAVED["results"] if r["method"] in ("A", "B", "C", "D", "C图")]
    for r in s06.decode_rows(SAVED):
        cells += [s06.fmt_us(v) for v in r["us"].values()] + [s06.pct1(r[k]) for k in ("share_A", "spread")]
    missing = [c for c in cells if c not in out]
    assert not missing, missing[:5]


def test_what_students_read_has_no_build_process_words():
    files = [os.path.join(LECTURE, f) for f in ("06_triton_cow_clone.py", "gpu/clone_kernel.py", "gpu/clone_bench.py",
                                                "gpu/paged_decode.py", "gpu/GPU.md")]
    files.append(os.path.join(ROOT, "figures", "plot_06.py"))
    for f in files:
        with open(f, encoding="utf-8") as fh:
            text = fh.read()
        for word in ("issue", "种子文章", "种子原样", "锚点", "没有查明"):
            assert word not in text, (f, word)
