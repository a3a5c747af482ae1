"""make all 的图：每个画图函数在小数据上无界面地画出非空 PNG；中文不缺字；≥ 1600 像素宽、字号 ≥ 12 pt；
PNG 字节可复现；Makefile 的依赖从 import 里读得出来。"""
import os
import pathlib
import re
import struct
import warnings

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIGDIR = os.path.join(ROOT, "figures")

from conftest import load_plot
from lab_common import plotting
from lab_common.script_tools import load_script
from matplotlib.text import Text


def png_size(path):
    with open(path, "rb") as f:
        head = f.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n", path
    return struct.unpack(">II", head[16:24])


@pytest.fixture
def strict(monkeypatch):
    """任何警告（包括 "Glyph … missing"）都让测试失败；每次 savefig 前检查每段文字的字号 ≥ 12 pt。
    返回保存过的文件的列表。"""
    from matplotlib.figure import Figure
    plotting.setup_matplotlib()
    saved, real = [], Figure.savefig

    def checking_savefig(fig, path, *a, **kw):
        fig.draw_without_rendering()
        small = [(t.get_text(), t.get_fontsize()) for t in fig.findobj(Text)
                 if t.get_visible() and t.get_text().strip() and t.get_fontsize() < 12]
        assert not small, f"{path}：字号小于 12 pt 的文字：{small[:5]}"
        if not str(path).endswith(".svg"):                 # save_png 在 PNG 旁边再写一个 SVG：只记 PNG
            saved.append(path)
        return real(fig, path, *a, **kw)

    monkeypatch.setattr(Figure, "savefig", checking_savefig)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        yield saved


@pytest.fixture
def slide(monkeypatch, strict):
    """在 strict 之上：save_png 不再把小字放大（图自己写的字号就要 ≥ 16 pt），每次保存记下 (图的英寸, 最小字号)。
    返回 {保存的路径: (宽, 高, 最小字号)}。"""
    from matplotlib.figure import Figure
    monkeypatch.setattr(plotting, "min_font_pt", lambda fig: 0)
    seen, real = {}, Figure.savefig

    def recording_savefig(fig, path, *a, **kw):
        fig.draw_without_rendering()
        sizes = [t.get_fontsize() for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]
        seen[str(path)] = (*(round(x, 2) for x in fig.get_size_inches()), min(sizes))
        return real(fig, path, *a, **kw)

    monkeypatch.setattr(Figure, "savefig", recording_savefig)
    return seen


def assert_slides(seen):
    """每张图（PNG 和旁边的 SVG）都是一页 16:9 幻灯片（13.33 × 7.5 英寸），自己写的字 ≥ 16 pt。"""
    assert seen and all(path.endswith((".png", ".svg")) for path in seen)
    for path, (w, h, least) in seen.items():
        assert (w, h) == plotting.SLIDE and least >= plotting.MIN_FONT_PT, (path, w, h, least)


def check_png(path):
    assert os.path.getsize(path) > 10_000, path
    w, h = png_size(path)
    assert w >= plotting.MIN_WIDTH_PX, (path, w)
    return w, h


# ---------------------------------------------------------------- 字体与 PNG
def test_bundled_cjk_font_is_used():
    # matplotlib 3.11 起才读 .ttc 里的每个字形（SC、TC、JP…）；更老的（Python 3.10 上的 3.10）只读第一个，JP
    first_face_only = tuple(int(x) for x in plotting.matplotlib.__version__.split(".")[:2]) < (3, 11)
    expected = "Noto Sans CJK JP" if first_face_only else "Noto Sans CJK SC"
    assert plotting.setup_matplotlib() == expected
    assert "noto-cjk-sans-otc" in plotting.font_description()


def test_missing_glyph_is_an_error(tmp_path):
    """检查机制本身：一个任何字体都没有的字符（私用区 U+E000）必须触发缺字警告。"""
    plotting.setup_matplotlib()
    fig, ax = plotting.plt.subplots(figsize=(8, 4))
    ax.set_title("\ue000")
    with warnings.catch_warnings():
        plotting.glyph_warnings_as_errors()
        with pytest.raises(UserWarning, match="missing from"):
            plotting.save_png(fig, str(tmp_path / "x.png"))


def test_chinese_and_symbols_render_without_missing_glyphs(tmp_path):
    plotting.setup_matplotlib()
    fig, ax = plotting.plt.subplots(figsize=(8, 4))
    ax.set_title("块的热度、命中率（无限容量）µs → × ≥ ≤ ∞ ◆ “引号”——·…")
    ax.set_xlabel("缓存容量（块）−1")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        plotting.save_png(fig, str(tmp_path / "zh.png"))


def test_png_bytes_are_reproducible_and_carry_no_metadata(tmp_path):
    def draw(path):
        fig, ax = plotting.plt.subplots(figsize=(8, 4))
        ax.plot([1, 2, 3], [3, 1, 2])
        ax.set_title("可复现")
        return plotting.save_png(fig, path)

    plotting.setup_matplotlib()
    a, b = draw(str(tmp_path / "a.png")), draw(str(tmp_path / "b.png"))
    data = pathlib.Path(a).read_bytes()
    assert data == pathlib.Path(b).read_bytes()
    assert b"tIME" not in data and b"Software" not in data and b"matplotlib" not in data.lower()
    svg = pathlib.Path(tmp_path / "a.svg").read_bytes()          # 旁边的 SVG：也逐字节相同，不写日期
    assert svg == pathlib.Path(tmp_path / "b.svg").read_bytes() and b"<dc:date>" not in svg


def test_small_text_is_raised_to_16pt_on_a_slide(tmp_path, strict):
    """一页 16:9 幻灯片（13.33 × 7.5 英寸）大小的图里任何文字 ≥ 16 pt，旁边有同名的 SVG。"""
    fig, ax = plotting.plt.subplots(figsize=plotting.SLIDE)
    ax.plot([1, 2], [1, 2], label="图例")
    ax.legend(fontsize=9)
    ax.text(1, 1, "小字", fontsize=8)
    ax.tick_params(labelsize=8)
    sizes = []
    real = plotting.plt.close

    def look(f):
        sizes.extend(t.get_fontsize() for t in f.findobj(Text) if t.get_text().strip())
        real(f)
    try:
        plotting.plt.close = look
        plotting.save_png(fig, str(tmp_path / "s.png"))
    finally:
        plotting.plt.close = real
    assert strict == [str(tmp_path / "s.png")] and (tmp_path / "s.svg").exists()
    assert min(sizes) >= 16


def test_narrow_figure_is_refused(tmp_path):
    fig, _ = plotting.plt.subplots(figsize=(6, 4))
    with pytest.raises(ValueError, match="1600"):
        plotting.save_png(fig, str(tmp_path / "narrow.png"))


# ---------------------------------------------------------------- 每个画图函数，小数据
def test_plot_01_functions(tmp_path, strict):
    m = load_plot("plot_01")
    shares = {"Orca (Max)": [0.2, 0.1, 0.6, 0.1], "vLLM": [0.96, 0.0, 0.02, 0.02]}
    check_png(m.plot_breakdown(shares, {"Orca (Max)": 7, "vLLM": 30}, {"Orca (Max)": 20.4, "vLLM": 96.3},
                               str(tmp_path / "a.png"), "小数据"))
    assert len(strict) == 1


def _make_rules():
    """Makefile 里的 "$(F0x) &: 依赖…" 规则展开成 {图: 依赖集合}（只展开本文件里的 := 变量）。"""
    text = pathlib.Path(ROOT, "Makefile").read_text(encoding="utf-8")
    var = dict(re.findall(r"^(\w+) := (.*)$", text, flags=re.M))

    def expand(s):  # 只展开 := 变量；别的（VENV ?= …）原样留下
        return re.sub(r"\$\((\w+)\)", lambda m: expand(var[m.group(1)]) if m.group(1) in var else m.group(0), s)
    rules = {}
    for outs, deps in re.findall(r"^(\$\(F0\d\)) &: (.*)$", text, flags=re.M):
        for out in expand(outs).split():
            rules[out] = set(expand(deps).split())
    return rules


def test_every_plot_module_has_a_make_rule_with_its_sources():
    """每个 plot_XX.py 声明的图都在 Makefile 里，依赖里有画图脚本、它加载的 lecture07 脚本和 plotting。"""
    rules = _make_rules()
    for path in sorted(p for p in os.listdir(FIGDIR) if re.fullmatch(r"plot_0\d\.py", p)):
        m = load_plot(path[:-3])
        src = pathlib.Path(FIGDIR, path).read_text(encoding="utf-8")
        scripts = {f"lecture07/{n}.py" for n in re.findall(r'load_script\("(\d\d_\w+)"\)', src)}
        assert scripts, path
        for fig in m.FIGURES:
            deps = rules[f"figures/{fig}"]
            assert {f"figures/{path}", "lab_common/plotting.py", "figures/figlib.py"} <= deps, fig
            assert scripts <= deps, (fig, scripts - deps)


def test_plot_02_functions(tmp_path, strict):
    m = load_plot("plot_02")
    events = [("prefill A", "A", [0, 1]), ("prefill B", "B", [2]), ("解码 1", "A", [3])]
    check_png(m.plot_block_table({"A": [0, 1, 3], "B": [2]}, {"A": 9, "B": 2}, 4, 6, events,
                                 str(tmp_path / "a.png"), "小数据"))
    assert len(strict) == 1


def test_plot_05_functions(tmp_path, strict):
    m = load_plot("plot_05")
    n = [256, 1024, 4096, 16384]
    curves = {"8×A800": dict(recompute=[0.01, 0.05, 0.3, 2.0], load={"DRAM": [0.001, 0.004, 0.016, 0.064],
                                                                    "SSD": [0.02, 0.08, 0.32, 1.28]},
                              break_even={"DRAM": -1.0, "SSD": 4096.0}, gbps={"DRAM": 128, "SSD": 6.9},
                              bandwidth={"DRAM": "128 GB/s", "SSD": "6.9 GB/s"})}
    check_png(m.plot_load_vs_recompute(n, curves, str(tmp_path / "a.png"), "小数据"))
    res = {s: dict(mean=v, p90=2 * v) for s, v in (("random", 4.0), ("load_balancing", 1.0), ("global_cache", 0.5))}
    names = {"random": "随机", "load_balancing": "负载均衡", "global_cache": "全局缓存感知"}
    check_png(m.plot_ttft(res, names, {"random": 19.65, "global_cache": 3.07}, str(tmp_path / "b.png"), "小数据"))
    assert len(strict) == 2
    assert [png_size(p) for p in strict] == [(2666, 1500)] * 2          # 一页 16:9 幻灯片：13.33 × 7.5 英寸、200 dpi


def test_plot_06_plots_the_saved_json(tmp_path, strict, slide):
    """06 的图只从保存的 JSON 画（plot_06.plot_results）；读 JSON 用 06 脚本的 load_results。这里喂一份很小的数据。"""
    m = load_plot("plot_06")
    s06 = m.figlib.load_script("06_triton_cow_clone")
    assert os.path.abspath(os.path.join(FIGDIR, m.DATA_FILES[0])) == os.path.abspath(s06.DEFAULT_JSON)
    shape = next(iter(s06.SHAPES))
    res = [dict(shape=shape, method=meth, N=n, us=us * n ** 0.5, GBps=gb * n ** 0.5, bytes=1000 * n)
           for meth, us, gb in (("A", 1000.0, 1.0), ("C", 20.0, 50.0), ("C图", 10.0, 55.0), ("D", 15.0, 60.0),
                                ("E", 25.0, 40.0))
           for n in (1, 8, 64)]
    data = dict(results=res, shapes={shape: s06.SHAPES[shape]},
                meta=dict(gpu="小数据", torch="0", triton="0", date="2026-01-01"))
    data["shapes"]["第二种"] = s06.SHAPES[shape]                   # 两种形状：细节图两列
    res += [dict(r, shape="第二种", GBps=r["GBps"] * 2) for r in res]
    check_png(m.plot_results(data, str(tmp_path / "a.png")))
    check_png(m.plot_slide(data, str(tmp_path / "b.png")))
    assert len(strict) == 2
    assert [png_size(p) for p in strict] == [(2666, 1500)] * 2
    assert_slides(slide)


def test_plot_03_functions(tmp_path, strict):
    m = load_plot("plot_03")
    series = {("并行采样", 2, 0): [(3, 4, 1), (3, 4, 2), (4, 6, 2)], ("束搜索", 2, 1): [(2, 2, 0), (3, 4, 0)]}
    check_png(m.plot_blocks_over_steps(series, {"并行采样": 0.1, "束搜索": 0.3}, str(tmp_path / "a.png"), "小数据", 2, 2))
    assert len(strict) == 1


def test_plot_03_numbers_come_from_the_demo(monkeypatch):
    """图 03 标题里的百分比就是演示 1 表里那一行（12 个请求合计），不是图自己算的。"""
    m = load_plot("plot_03")
    s03 = load_script("03_sharing_and_cow")
    fake = dict(reqs=[(np.arange(20), np.array([3, 3]))], block_size=16, widths=(2,), n_beam=1, model_seed=0,
                n_requests=1, steps={("并行采样", 0): [(2, 3, 1)], ("束搜索", 0): [(2, 2, 0)]},
                res={("并行采样", 2): dict(saved=0.123), ("束搜索", 2): dict(saved=0.456)})
    monkeypatch.setattr(s03, "demo1_savings", lambda: fake)
    d = m.compute()
    assert d["totals"] == {"并行采样": 0.123, "束搜索": 0.456}


def test_plot_04b_tree(tmp_path, strict, slide, monkeypatch):
    """04b 的基数树：画的就是 demo1_tree() 返回的那棵树（节点、区间、ref、标题里的数都从 dict 来，不重算）。"""
    m = load_plot("plot_04b")
    s04b = load_script("04b_radix_cache")
    fake = dict(tree=[(0, 0, 4, 2), (1, 4, 1, 1), (1, 4, 2, 1)], n_requests=2, total_tokens=11, tree_tokens=7,
                n_splits=1, groups=[("p", 4, 2)])
    monkeypatch.setattr(s04b, "demo1_tree", lambda: fake)
    d = m.compute()
    assert d["tree"] == fake["tree"] and (d["total"], d["stored"], d["splits"]) == (11, 7, 1)
    pos, parent = m.layout(d["tree"])
    assert parent == [-1, 0, 0] and pos == [(0.5, 0), (0.0, -1), (1.0, -1)]
    check_png(m.plot_tree(d, str(tmp_path / "t.png")))
    assert len(strict) == 1
    assert [png_size(p) for p in strict] == [(2666, 1500)]          # 一页 16:9 幻灯片
    assert_slides(slide)


def _numbers(text):
    """标题里的数（带千分位、小数、百分号），比如 "3,666"、"96.1%"。"""
    return re.findall(r"\d[\d,]*(?:\.\d+)?%?", text)


def _titles(monkeypatch):
    """每次保存 PNG 时记下图的标题（suptitle）：{文件名: 标题}。"""
    from matplotlib.figure import Figure
    seen, real = {}, Figure.savefig

    def recording_savefig(fig, path, *a, **kw):
        if str(path).endswith(".png"):
            seen[os.path.basename(str(path))] = fig.get_suptitle().replace("\n", "")
        return real(fig, path, *a, **kw)
    monkeypatch.setattr(Figure, "savefig", recording_savefig)
    return seen


def test_04b_and_06_titles_only_use_printed_numbers(tmp_path, monkeypatch, capsys):
    """04b、06 的图（真实数据）：标题里的每个数，脚本都印出来了（04b 演示 1；06 演示 2 读的是保存的 H200 JSON）。"""
    plotting.setup_matplotlib()
    titles = _titles(monkeypatch)
    p04b, p06 = load_plot("plot_04b"), load_plot("plot_06")
    s04b, s06 = load_script("04b_radix_cache"), load_script("06_triton_cow_clone")
    p04b.plot_tree(p04b.compute(), str(tmp_path / "04b.png"))
    data = s06.load_results(s06.DEFAULT_JSON)
    p06.plot_slide(data, str(tmp_path / "06.png"))
    p06.plot_results(data, str(tmp_path / "06_detail.png"))
    capsys.readouterr()
    s04b.demo1_tree()
    s06.demo_2(data)
    out = capsys.readouterr().out
    assert len(titles) == 3
    for name, title in titles.items():
        missing = [n for n in _numbers(title) if n not in out]
        assert _numbers(title) and not missing, (name, title, missing)
