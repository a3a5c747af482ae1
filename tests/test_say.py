"""lab_common.say：句子的共用词汇，每个边界情况一个小测试（答案手算得出）。"""
import pytest

from lab_common import say
from lab_common.console import observation_lines


def test_no_negative_zero():
    assert say.fixed(0)(-0.0) == "0"
    assert say.fixed(1)(-0.0) == "0.0"
    assert say.pct(-0.0) == "0%"
    assert say.times(-0.0) == "0.00×"
    assert say.integer(-0.0) == "0"
    assert say.fixed(0, "µs")(-0.0) == "0 µs"
    assert say.fixed(2)(-0.01) == "-0.01"          # 真正的负数保留


def test_nonzero_never_prints_as_zero():
    """多给一位小数；还是 0 就写界限（"< 0.1"，负数 "> -0.1"）。"""
    assert say.fixed(0)(-0.3) == "-0.3" and say.fixed(0)(0.04) == "< 0.1" and say.fixed(0)(-0.04) == "> -0.1"
    assert say.fixed(1)(0.04) == "0.04" and say.fixed(1, "s")(0.004) == "< 0.01 s"
    assert say.pct(0.004) == "0.4%" and say.pct(0.0004) == "< 0.1%" and say.pct(-0.0004) == "> -0.1%"
    assert say.pct1(0.0004) == "0.04%" and say.pct1(0.00004) == "< 0.01%"
    assert say.times(0.004) == "0.004×" and say.times(0.0004) == "< 0.001×"
    assert say.integer(0.4) == "< 1" and say.integer(-0.4) == "> -1" and say.integer(0.5001) == "1"
    assert say.size(0.3) == "< 1 B"
    assert say.signed(0.04) == "+0.04" and say.signed(-0.04) == "-0.04" and say.signed(0.001) == "< 0.01"
    assert say.signed(0) == "0.0"


def test_below_one_never_prints_as_100_percent():
    assert say.pct(0.996) == "99.6%" and say.pct(0.9996) == "> 99.9%" and say.pct(1.0) == "100%"
    assert say.pct1(0.9996) == "99.96%" and say.pct1(0.99996) == "> 99.99%"
    assert say.pct(1.004) == "100%"                                 # 比 1 大：不是"不到全部"的问题


@pytest.mark.parametrize("x", [1e-12, 3e-7, 0.00049, 0.0049, 0.049, 0.49, 0.9951, 0.99951, 0.999999, 1 - 1e-12])
def test_printed_value_keeps_zero_one_and_order(x):
    """印出来的值：不是 0 就不等于 0，不到 1 就小于 100%；"< x"、"> x" 排在该排的位置。"""
    for fmt in (say.pct, say.pct1, say.fixed(0), say.fixed(2), say.times, say.share):
        assert say.value(fmt(x)) > 0 and say.value(fmt(-x)) < 0
    for fmt in (say.pct, say.pct1, say.share):
        assert say.value(fmt(x)) < 100
        assert say.order(x, 0, fmt) == 1 and say.order(x, 1, fmt) == -1 and say.order(x, x, fmt) == 0


def test_equal_printed_values_are_the_same():
    f2 = say.fixed(2)
    assert say.order(0.541, 0.538, f2) == 0
    assert say.vs("A", 0.541, "B", 0.538, say.fixed(2, "s")) == "A 和 B 一样（都是 0.54 s）"
    assert say.vs("LRU", 0.46, "LFU", 0.39, f2) == "LRU 比 LFU 高（0.46 对 0.39）"
    assert say.vs("LRU", 0.39, "LFU", 0.46, f2, less="少") == "LRU 比 LFU 少（0.39 对 0.46）"


def test_span_collapses_equal_ends():
    assert say.span([0.041, 0.044], say.fixed(2)) == "0.04"
    assert say.span([353, 353.2], say.integer) == "353"
    assert say.span([0.04, 0.3], say.fixed(2)) == "0.04–0.30"
    with pytest.raises(ValueError):
        say.span([], say.integer)


def test_change_collapses_equal_ends():
    f1 = say.fixed(1)
    assert say.change(24.12, 24.08, f1) == "保持在 24.1"
    assert say.change(24.1, 3.0, f1) == "从 24.1 降到 3.0"
    assert say.change(0.129, 0.1291, say.pct1) == "保持在 12.9%"
    assert say.change(8, 16, say.integer) == "从 8 升到 16"


def test_rel_change_direction_and_flat():
    assert say.rel_change(5.74, 2.35) == "少了 59%"
    assert say.rel_change(1.0, 20.23) == "多了 1,923%"     # 不会说"少 -1923%"
    assert say.rel_change(3.0, 3.001) == "多了不到 0.1%"         # 不是 0：不说"没变"
    assert say.rel_change(3.0, 3.0) == "没变（0%）"
    assert say.rel_change(1.0, 1.004) == "多了 0.4%"
    assert say.rel_change(0, 5, more="多") == "多（原来是 0）"


def test_size_picks_unit():
    assert say.size(160 * 2**20) == "160 MiB"               # 不是 "0 GiB"
    assert say.size(1562 * 2**30) == "1.53 TiB"
    assert say.size(512) == "512 B"
    assert say.size(0) == "0 B"
    assert say.size(128e9, binary=False) == "128 GB"
    assert say.value(say.size(160 * 2**20)) == 160 * 2**20


def test_counts_zero_and_one():
    assert say.count(0, "个请求") == "没有请求"
    assert say.count(1, "个请求") == "1 个请求"
    assert say.count(12_031, "个请求") == "12,031 个请求"


def test_ratio_and_rank_ties():
    assert say.ratio(1.02, 1.0) == "是 1.02 倍"                      # 不同的两个数：倍数印成 1.0 时多给一位
    assert say.ratio(133_054, 133_885) == "是 0.99 倍" and say.ratio(3, 3) == "一样（1.0 倍）"
    assert say.ratio(2.44, 1.0) == "是 2.4 倍"
    assert say.ratio(1, 0).startswith("无法相比") and "分母是 0" in say.ratio(1, 0)
    assert say.rank([("LRU", 0.46), ("LFU", 0.391), ("LA", 0.389)], say.fixed(2)) == "LRU > LFU = LA"
    assert say.rank([("A", 1)], say.fixed(2)) == "A"


def test_listing_and_words():
    assert say.listing([]) == ""
    assert say.listing(["LRU"]) == "LRU"
    assert say.listing(["LRU", "LFU"]) == "LRU 和 LFU"
    assert say.words("块", "16", "个") == "块 16 个"
    assert say.words("本地", "和", "全局") == "本地和全局"


def test_value_parses_what_was_printed():
    assert say.value("1,234.5") == 1234.5
    assert say.value("−3") == -3
    with pytest.raises(ValueError):
        say.value("-")


def test_observation_lines():
    assert observation_lines("短句。") == 1
    assert observation_lines("长句。" * 60) > 3


def test_listed_says_equal_printed_values_once():
    from lab_common.say import fixed, listed
    assert listed([1.231, 1.229], fixed(2)) == "都是 1.23"
    assert listed([26.21, 26.24, 26.2], fixed(1, "ms")) == "都是 26.2 ms"
    assert listed([0.04, 0.16], fixed(2)) == "0.04、0.16"
    assert listed([7], fixed(2)) == "7.00"          # 一个数：不说"都是"


def test_by_order_and_grouped_decide_on_printed_values():
    from lab_common.say import by_order, fixed, grouped
    r2 = fixed(2)
    assert by_order({1: 0.62, 16: 0.999, 256: 1.15}, 1, r2) == ([1], [16], [256])      # 0.999 印出来是 1.00：相同
    assert by_order({}, 1, r2) == ([], [], [])
    assert grouped([([1, 4], "快"), ([], "一样"), ([256], "慢")], "块") == "块 1、4 快，块 256 慢"     # 空的组不说
    assert grouped([([1, 4, 16], "快")], "块", every="全部") == "全部都是快"                              # 只有一组
    assert grouped([([16], "一样")], "块") == "块 16 一样"                                # 一个名字：不说"每个"


# ---------------------------------------------------------------- 04 加的：never_below、sci
def test_never_below_decides_on_printed_values():
    from lab_common.say import fixed, never_below
    f2, at = fixed(2), "{:,} 块时".format
    up = never_below("LRU", {10_000: 0.461, 1_000: 0.33}, "LFU", {10_000: 0.387, 1_000: 0.334}, f2, at)
    assert up.startswith("LRU ") and "不低于 LFU" in up and "10,000 块时" in up and up.endswith("（0.46 对 0.39）")  # 0.33 对 0.334：相同
    down = never_below("LRU", {1: 0.30, 2: 0.50}, "LFU", {1: 0.40, 2: 0.50}, f2, at, every="在每个容量")
    assert down.startswith("LFU 在每个容量") and "不低于 LRU" in down and "（0.40 对 0.30）" in down   # 反过来：换过来说
    tie = never_below("A", {1: 0.604, 2: 0.1}, "B", {1: 0.596, 2: 0.1}, f2, at)
    assert tie.startswith("A 和 B ") and tie.endswith("都一样") and "高" not in tie          # 处处印出来相同：不说谁高
    assert never_below("A", {5: 0.5}, "B", {5: 0.5}, f2, at) == "5 块时 A 和 B 一样（都是 0.50）"   # 一个点：就是 vs
    mixed = never_below("A", {1: 0.3, 2: 0.6}, "B", {1: 0.4, 2: 0.5}, f2, at)
    assert mixed == "A 和 B 互有高低：2 块时 A 比 B 高（0.60 对 0.50），1 块时 B 比 A 高（0.40 对 0.30）"
    keys = never_below("MIN", {("LRU", 1): 0.5, ("LFU", 1): 0.5}, "在线策略", {("LRU", 1): 0.4, ("LFU", 1): 0.3}, f2,
                       lambda k: f"{k[0]} 在 {k[1]} 块时")                                  # 点可以是任意的键
    assert keys.startswith("MIN ") and "LFU 在 1 块时" in keys and keys.endswith("（0.50 对 0.30）")
    tied = never_below("MIN", {"LFU": 0.45, "LA": 0.45}, "在线策略", {"LFU": 0.322, "LA": 0.318}, f2, "{} 时".format)
    assert tied.endswith("，LFU 时和 LA 时差得最多（都差 0.13）")                        # 印出来的差一样：都说出来


def test_sci_never_prints_negative_zero():
    from lab_common.say import sci
    assert (sci(0.0), sci(-0.0), sci(3.04e-15), sci(-2e-16)) == ("0.0", "0.0", "3.0e-15", "-2.0e-16")


def test_whole_counts_complete_units_and_never_says_zero():
    from lab_common.say import whole
    assert whole(62633, 2048, "个") == "30 个"
    assert whole(2048, 2048, "个请求") == "1 个请求"                    # 恰好一个
    assert whole(2047, 2048, "个请求") == "不到 1 个请求"               # 不到一个：不说"0 个"或"没有"
    assert whole(0, 16, "块") == "不到 1 块"
    assert whole(1_000_000, 3, "块") == "333,333 块"                   # 千分位


def test_rel_vs_says_same_for_equal_printed_values():
    from lab_common.say import fixed, rel_vs
    s2 = fixed(2, "s")
    assert rel_vs("A", 0.38, "B", 0.44, s2) == "A 比 B 低 14%"
    assert rel_vs("A", 0.5, "B", 0.5, s2) == "A 和 B 一样（都是 0.50 s）"              # 不说"低 0%""几乎没变"
    assert rel_vs("A", 0.501, "B", 0.499, s2) == "A 和 B 一样（都是 0.50 s）"          # 原始值不同，印出来相同
    assert rel_vs("A", 100.2, "B", 100.6, fixed(1)) == "A 比 B 低不到 1%"                 # 印出来不同，百分数是 0%
    assert rel_vs("A", 100.2, "B", 100.6, fixed(1), nd=1) == "A 比 B 低 0.4%"
    assert rel_vs("A", 2.0, "B", 1.0, fixed(1), more="慢") == "A 比 B 慢 100%"
    assert rel_vs("A", 3, "B", 0, fixed(1)) == "A 比 B 高（3.0 对 0.0）"                  # 分母是 0：不说百分数


def test_trend_one_value_is_just_the_value():
    from lab_common.say import pct, trend, words
    assert trend([0.2, 0.39, 1.51], pct) == "从 20% 升到 151%"
    assert trend([1.51], pct) == "151%"                                                  # 不说"从 151% 到 151%"
    assert trend([0.2, 0.2001], pct) == "保持在 20%"
    assert trend([0.5, 0.2], pct, down="减到") == "从 50% 减到 20%"
    assert words("负载", trend([1.51], pct)) == "负载 151%" and words("负载", trend([0.2, 1.5], pct)) == "负载从 20% 升到 150%"


def test_share_prints_100_and_0_only_when_exact():
    assert say.share(0.9996) == "> 99.9%" and say.share(1) == "100%"
    assert say.share(0.0004) == "< 0.1%" and say.share(0.0) == "0%" and say.share(0.5) == "50%"
