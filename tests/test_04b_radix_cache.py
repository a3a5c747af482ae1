"""04b_radix_cache.py 和 kv_store/radix_tree.py：基数树的结构、按 token 匹配的得失、叶子 LRU = 块哈希 LRU。"""
import doctest
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from conftest import assert_observation_shape, assert_settings_refused, load_script, run_main
from helpers_04 import demo2_results, m as m04, synthetic_data

import kv_store.radix_tree
from kv_store.replay import simulate
from kv_store.radix_tree import RadixCache, radix_lru_hits
from kv_store.prefix_match import usable_hits

pytestmark = pytest.mark.xdist_group("s04")   # 04 的三个测试文件在同一个 pytest 进程里：命中表只算一遍

r = load_script("04b_radix_cache")


@pytest.fixture(scope="module")
def run():
    """main() 跑一遍全部演示：(每个演示返回的字典, 打印的全部输出)，和换进程的测试共用。"""
    out, results = run_main("04b_radix_cache")
    return results, out


def flat(s):
    return "".join(s.split())


# ---------------------------------------------------------------- kv_store/radix_tree.py：手算得出的小例子
def test_radix_cache_doctests():
    assert doctest.testmod(kv_store.radix_tree).failed == 0


def test_split_and_match_are_token_granular():
    t = RadixCache()
    assert t.insert([5, 6, 7, 8, 9]) == (0, 0)
    assert t.insert([5, 6, 7, 1]) == (3, 1)           # 在第 3 个 token 后分叉：拆 1 次
    assert t.match([5, 6, 7, 8, 2]) == 4 and t.match([5, 6]) == 2 and t.match([4]) == 0
    assert t.size == 6 and [len(n.key) for _, _, n in t.nodes()] == [3, 2, 1]


def test_eviction_trims_the_oldest_leaf_from_its_tail():
    t = RadixCache(capacity=5, rule="trim")
    t.insert([1, 2, 3])          # 时刻 0
    t.insert([1, 2, 4, 5])       # 时刻 1：共 2 + 1 + 2 = 5
    t.insert([9])                # 超 1 个：最旧的叶子是 [3]（时刻 0），删掉它
    assert t.size == 5 and t.match([1, 2, 3]) == 2 and t.match([1, 2, 4, 5]) == 4
    t.insert([8, 7])             # 再超 2 个：最旧的叶子是 [4 5]（时刻 1），从尾巴删 2 个
    assert t.match([1, 2, 4, 5]) == 2 and t.match([8, 7]) == 2 and t.size == 5


def test_sglang_rule_evicts_whole_leaves_until_enough_is_freed():
    """SGLang 的 evict(n)：整片叶子，从旧到新，删够 n 个为止。手算：[1 2 3 4 5]（时刻 0）、[6 7]（1）、[8]（2），
    容量 7：第三个请求超 1 个，最旧的叶子 [1 2 3 4 5] 整个删掉，树停在 3 个；修剪只删它尾巴上的 [5]。"""
    for rule, hit, size in (("sglang", 0, 3), ("trim", 3, 7)):
        t = RadixCache(capacity=7, rule=rule)
        for seq in ([1, 2, 3, 4, 5], [6, 7], [8]):
            t.insert(seq)
        assert (t.match([1, 2, 3]), t.size) == (hit, size), rule


def test_sglang_rule_stamps_the_split_tail_as_just_used():
    """请求在节点中间分叉：SGLang 先给节点记上现在的时刻再拆，原来的对象成了尾巴，也像刚用过。手算，容量 5：
    [1 2 3]（时刻 0）、[4]（1）、[1 2 9]（2：拆成 [1 2] → [3]、[9]；SGLang 的 [3] 记成 2，修剪的 [3] 还是 0）、
    [5]（3：超 1 个）。SGLang 删最旧的叶子 [4]，[1 2 3] 还在；修剪删 [3]，只剩 [1 2]。"""
    for rule, hit in (("sglang", 3), ("trim", 2)):
        t = RadixCache(capacity=5, rule=rule)
        for seq in ([1, 2, 3], [4], [1, 2, 9], [5]):
            t.insert(seq)
        assert t.match([1, 2, 3]) == hit, rule


def test_unknown_rule_is_refused():
    with pytest.raises(ValueError, match="rule"):
        RadixCache(rule="lfu")


def test_locked_nodes_are_not_evicted():
    t = RadixCache(capacity=3)
    t.insert([1, 2, 3], lock=True)
    t.insert([4, 5])             # 只能删没锁的：[1 2 3] 的 ref = 1，留着；新叶子自己也只能留到容量以内
    assert t.match([1, 2, 3]) == 3 and t.root.children[1].ref == 1


@pytest.mark.parametrize("capacity", [1, 2, 3, 5, 8, 20, None])
def test_trim_rule_equals_block_lru_on_random_chain_traces(capacity):
    """随机的链式 trace（每个请求 = 以前某个请求的前缀 + 新块）：修剪规则逐个请求的命中数和块哈希 LRU 相同。"""
    rng = np.random.default_rng(capacity or 0)
    reqs, nxt = [], 0
    for _ in range(300):
        base = list(reqs[int(rng.integers(len(reqs)))]) if reqs and rng.random() < 0.8 else []
        base = base[:int(rng.integers(len(base) + 1))]
        new = int(rng.integers(1, 4))
        reqs.append(tuple(base + list(range(nxt, nxt + new))))
        nxt += new
    assert radix_lru_hits(reqs, capacity, "trim") == simulate(reqs, capacity, "lru").tolist()


# ---------------------------------------------------------------- 演示 1：树的样子
def test_demo1_prefix_nodes_carry_all_requests(run):
    d1 = run[0][1]
    n = m04.N_SHARING
    assert d1["n_requests"] == n * len(m04.FEW_SHOT) and d1["n_leaves"] == d1["n_requests"]
    assert (80, n) in d1["top"] and (341, n) in d1["top"] and d1["ref_sum_leaves"] == d1["n_requests"]
    assert d1["tree_tokens"] < d1["total_tokens"] and d1["n_splits"] >= len(m04.FEW_SHOT)


# ---------------------------------------------------------------- 演示 2：按 token 和按块
def test_demo2_by_block_equals_04_demo2_and_gain_is_the_tail(run):
    d2 = run[0][2]
    r5 = d2["5-shot"]
    assert r5["by_block"] == 523 and r5["by_block"] - r5["by_token"] == 7 * (341 % 16) == 35
    for name, res in demo2_results().items():                    # 和 04 演示 2 的"实际算"是同一个数
        assert d2[name]["by_block"] == res["computed"]
    assert r5["token_entries"] == 2875 and r5["block_entries"] == 183
    assert (r5["gain_tail"], r5["gain_other"]) == (7 * 5, 0)                   # 后面 7 个请求各省 5 个零头
    r1 = d2["1-shot"]
    assert (r1["gain_tail"], r1["gain_other"]) == (0, 1)                        # 80 = 5 个整块：只有碰巧相同的 1 个
    out = flat(run[1])
    assert "5-shot341=21×16+55234883501832,875" in out and "1-shot80=5×16+0231230015479" in out
    assert "一共少算36个token（从754降到718）——35个是前缀不满一块的零头" in out and "1个来自后缀开头碰巧相同" in out
    assert "3,666项，按块只要237项" in out


# ---------------------------------------------------------------- 演示 3：trace 上的叶子 LRU
def test_demo3_trim_equals_block_lru_and_sglang_hits_less(run):
    d3 = run[0][3]
    assert set(d3["same"]) == set(m04.CAPACITIES) and all(d3["same"].values()) and d3["breaks"] == 0
    data = synthetic_data()
    tr = data["trace"]
    for c in m04.CAPACITIES:                                     # 块哈希那一列 = 04 演示 3 的 LRU 行（同一个命中）
        assert d3["lru"][c] == int(usable_hits(data["hits"][("lru", c)], tr.input_len, 512).sum())
        assert d3["radix"]["trim"][c] == d3["lru"][c]
    gap = {c: d3["radix"]["sglang"][c] - d3["lru"][c] for c in m04.CAPACITIES}
    assert gap == {None: 0, 100_000: 0, 50_000: -98, 30_000: -312, 10_000: -419, 1_000: -257}
    out = flat(run[1])
    assert "逐个相同" in out and "LRU最久没用的块总是某片叶子的最后一块" in out and "-419" in out
    lines, more = r.observations_3(d3)
    assert len(lines) == 2 and "逐个相同" in lines[0] and "链式哈希" in lines[0] and "同一段前缀" in more[0]
    assert "在4个容量下比块哈希LRU少命中98–419块，10,000块时相对最多（少了0.2%，块哈希LRU在那里命中191,881块）" in flat(lines[1])


def test_demo3_prints_04s_hit_ratio(run):
    """04b 的 LRU 行和 04 演示 3 印的是同一个数，同样两位小数。"""
    d3 = run[0][3]
    assert f"{d3['lru'][None] / d3['total']:.2f}" == "0.61" and "0.61" in run[1]


def test_main_prints_a_number_from_each_demo(run):
    results, out = run
    assert f"{results[1]['tree_tokens']:,}" in out                          # 演示 1：树里的 token
    assert f"{results[2]['5-shot']['by_token']}" in out                       # 演示 2：按 token 算
    assert f"{results[3]['lru'][10_000] / results[3]['total']:.2f}" in out     # 演示 3：命中率
    assert "peppermint =>" in out and "Translate English to French :（id 0 1 2 3 4，时刻 4）" in out   # 演示 4：淘汰的叶子、最后的树


# ---------------------------------------------------------------- 观察函数：手造的退化情况
def test_default_output_is_short(run):
    from lab_common.console import observation_lines
    out = run[1]
    demos = out.split("═" * 80)[1:]
    assert len(demos) == len(r.DEMOS) and all(len(x.strip("\n").splitlines()) <= 28 for x in demos)   # 每个演示一屏
    for k, fn in ((1, r.observations_1), (3, r.observations_3)):
        lines, _ = fn(run[0][k])
        assert 1 <= len(lines) <= 3 and all(observation_lines(x) <= 3 for x in lines)
    lines, _ = r.observations_2(r.summed(run[0][2]), 16)
    assert len(lines) <= 3 and all(observation_lines(x) <= 3 for x in lines)


def test_observations_1_one_request_and_nothing_shared():
    """一个请求：没有拆节点、没有共享的前缀节点；不说"第二个请求"。"""
    d = dict(n_requests=1, total_tokens=100, tree_tokens=100, n_splits=0, groups=[("长文档", 80, 1)],
             top=[(100, 1)], ref_sum_leaves=1)
    lines, _ = r.observations_1(d)
    text = "".join(lines)
    assert "1 个请求一共 100 个 token，树里存了 100 个（100%）" in text and "只" not in text
    assert "没有哪段前缀被两个以上的请求共用" in text and "一次也没有拆节点" in text and "第二个请求" not in text
    assert "共同的开头" not in text                # 没拆节点也可能有共同的开头（一个请求是另一个的前缀）


def test_observations_2_no_gain_and_block_size_one():
    """按 token 和按块一样时说"一样多"，不说"少算 0 个（从 x 降到 x）"；块 1 时索引一样多；少算的只有一种来源时
    只说那一种（不说"0 个是零头"）。"""
    t = dict(by_block=50, by_token=50, gain_tail=0, gain_other=0, token_entries=200, block_entries=13,
             min_node=5, max_node=5)
    lines, more = r.observations_2(t, 16)
    assert "一样多（都是 50 个 token）" in lines[0] and "从 50 降到 50" not in lines[0] and "少算" not in lines[0]
    assert "节点长 5 个 token" in lines[-1] and "5–5" not in lines[-1]
    assert_observation_shape(lines, more)
    lines, _ = r.observations_2(dict(t, block_entries=200), 1)
    assert "块大小 1 时按块也是每个 token 一项索引（200 项）" in lines[-1]
    lines, _ = r.observations_2(dict(t, by_token=38, gain_tail=12), 16)
    assert "少算 12 个 token（从 50 降到 38）——12 个是前缀不满一块的零头" in lines[0] and "碰巧" not in lines[0]
    lines, _ = r.observations_2(dict(t, by_token=47, gain_other=3), 16)
    assert "——3 个来自后缀开头碰巧相同" in lines[0] and "零头" not in lines[0]


def test_observations_3_differs_when_the_chain_is_broken():
    d = dict(same={None: True, 10: False}, breaks=3, caps=[None, 10], cap_names=["无限", "10"], distinct=40,
             lru={None: 50, 10: 20}, radix={"sglang": {None: 50, 10: 20}, "trim": {None: 50, 10: 21}})
    lines, more = r.observations_3(d)
    assert lines[0].startswith("修剪规则下，10 块时基数树和块哈希 LRU 不同（表里 2 个容量中的 1 个）") and more == [r.CHAIN_NOTE]
    assert "有 3 个块 id" in lines[0] and "前提不满足" in lines[0] and "同一块" not in lines[0]
    assert lines[1] == "SGLang 的规则在每个容量下命中都和块哈希 LRU 一样多。"
    lines, _ = r.observations_3(dict(d, radix={"sglang": {None: 50, 10: 23}, "trim": {None: 50, 10: 20}}))
    assert lines[1].startswith("SGLang 的规则在 10 块时命中比块哈希 LRU 多：") and "时少" not in lines[1]
    lines, _ = r.observations_3(dict(d, radix={"sglang": {None: 49, 10: 23}, "trim": {None: 50, 10: 20}}))
    assert "10 块时命中比块哈希 LRU 多，容量无限时少" in lines[1]


def test_render_folded_children_with_equal_lengths_print_one_length():
    """折起来的孩子长度都一样时，只写一个长度（不写 "2–2"）；不一样时写范围。"""
    t = RadixCache()
    for seq in ([1, 2, 3], [4, 5], [6, 7], [8, 9]):
        t.insert(seq)
    assert r.tree_lines(t, max_children=1)[-1].endswith("…另外 3 个孩子（长度 2）")
    t.insert([9, 9, 9, 9])
    assert r.tree_lines(t, max_children=1)[-1].endswith("…另外 4 个孩子（长度 2–4）")


def test_observations_1_splits_without_a_shared_prefix_group():
    """每个前缀只有一个请求、却拆过节点（开头碰巧相同）：不说"第二个请求在前缀末尾分叉"。"""
    d = dict(n_requests=2, total_tokens=200, tree_tokens=190, n_splits=1, groups=[("a", 80, 1), ("b", 90, 1)],
             top=[(10, 2)], ref_sum_leaves=2)
    text = "".join(r.observations_1(d)[0])
    assert "拆过 1 次节点" in text and "第二个请求" not in text and "前缀末尾" not in text
    assert "没有哪段前缀被两个以上的请求共用" in text


def test_demo1_counts_splits_where_they_happen(monkeypatch, capsys):
    """拆分按它真正发生的位置分：在共用前缀的末尾，还是在别处（后缀开头碰巧相同）。手算：
    [1 2 3 4]、[1 2 3 5]（前缀 2，在 3 之后分叉：别处）、[1 2 6]（在前缀末尾 2 之后分叉）。"""
    monkeypatch.setattr(r, "demo2_requests", lambda: [("p", 2, [1, 2, 3, 4]), ("p", 2, [1, 2, 3, 5]), ("p", 2, [1, 2, 6])])
    d = r.demo1_tree()
    out = capsys.readouterr().out
    assert (d["n_splits"], d["splits_at_prefix"], d["ref_sum_leaves"]) == (2, 1, 3)
    assert "树里存了6个（55%）：共用的前缀（p的2个token）各是一个节点" in flat(out)
    assert re.search(r"^ +3 +11 +6 +5 +3 +3 +1 +1$", out, flags=re.M)         # 请求 token 树里 节点 叶子 ref 和 拆分


def test_observations_1_names_each_shared_prefix_with_cjk_spacing():
    """前缀名是中文时不空格（"短的 1 个 token"），是英文时空一格（"1-shot 的 80 个 token"）。"""
    d = dict(n_requests=16, total_tokens=300, tree_tokens=120, n_splits=2, groups=[("短", 1, 8), ("1-shot", 80, 8)],
             top=[(1, 8), (80, 8)], ref_sum_leaves=16)
    lines, more = r.observations_1(d)
    assert "共用的前缀（短的 1 个 token、1-shot 的 80 个 token）各是一个节点" in lines[0]
    assert_observation_shape(lines, more)


# ---------------------------------------------------------------- 性质：容量和锁
RADIX_OPS = st.lists(st.tuples(st.sampled_from(["insert", "lock", "unlock"]), st.integers(0, 10 ** 6),
                               st.lists(st.integers(0, 3), min_size=1, max_size=6)), max_size=40)


def tree_nodes_consistent(t):
    """size = 全部节点的长度之和；每个孩子按它 key 的第一个单位挂在父节点下；ref 不为负。"""
    nodes = [n for _, _, n in t.nodes()]
    assert t.size == sum(len(n.key) for n in nodes)
    for n in nodes:
        assert n.key and n.parent.children[n.key[0]] is n and n.ref >= 0 and n.alive


@pytest.mark.parametrize("rule", ["sglang", "trim"])
@settings(max_examples=80, deadline=None)
@given(capacity=st.integers(1, 12), ops=RADIX_OPS)
def test_tree_never_exceeds_capacity_nor_evicts_a_locked_node(rule, capacity, ops):
    """随机的插入、加锁插入、解锁（词表 4 个 token，常有相同的开头、常拆节点）：只要锁着的 token 不超过容量，
    每一步之后树都不超容量；锁着的请求从头到尾都还整段在树里。"""
    t, locked = RadixCache(capacity, rule), []
    for op, pick, seq in ops:
        if op == "unlock" and locked:
            t.unlock(locked.pop(pick % len(locked)))
        elif op == "lock" and sum(map(len, locked)) + len(seq) <= capacity:   # 锁着的最多占满容量
            t.insert(seq, lock=True)
            locked.append(seq)
        else:
            t.insert(seq)
        assert t.size <= capacity
        assert all(t.match(s) == len(s) for s in locked)
        tree_nodes_consistent(t)
    while locked:                                   # 全部解锁以后，每个节点的 ref 都回到 0
        t.unlock(locked.pop())
    assert all(n.ref == 0 for _, _, n in t.nodes())


# ---------------------------------------------------------------- 演示 4：一步一步
def test_demo4_steps_insert_split_hit_and_evict_a_whole_leaf(run):
    """手算（一个词一个 token，容量 22）：A 13 个；B 命中 11（拆 1）；C 命中 5（拆 1，21 个）；D = B，整段 14 个都在，
    用得上 13；E 命中 8（拆 1）到 23 个，超 1 个：SGLang 删整片最旧的叶子 [peppermint =>]（时刻 1），停在 21；
    修剪只删它的最后 1 个，正好 22。"""
    d = run[0][4]
    got = [(x["hit"], x["usable"], x["splits"], x["size"], x["evicted"]) for x in d["steps"]]
    assert got == [(0, 0, 0, 13, []), (11, 11, 1, 16, []), (5, 5, 1, 21, []), (14, 13, 0, 21, []),
                   (8, 8, 1, 21, ["peppermint =>"])]
    assert (d["alt_steps"][-1]["trimmed"], d["alt_size"]) == (1, 22) and len(d["frames"]) == 5
    lines, _ = r.observations_4(d)
    assert len(lines) == 2 and "请求D：整段14个token都在树里，用得上13个" in flat(lines[0])
    assert "删掉整片最旧的叶子「peppermint=>」，树停在21个；修剪规则只删1个，树正好22个" in flat(lines[1])
    last = d["frames"][-1]
    assert [row.label for row in last.rows][:2] == ["Translate English to French :", "sea otter => loutre de mer"]
    assert [c.mark for row in last.rows for c in row.cells[:1]] == [True, False, False, True, False, False]


def test_observations_4_without_eviction_or_full_hit():
    d = dict(steps=[dict(name="请求 A", n=3, hit=0, usable=0, evicted=[], size=3)],
             alt_steps=[dict(trimmed=0, size=3)], alt_size=3)
    lines, _ = r.observations_4(d)
    assert lines == [f"这几个请求一次也没有超出容量（{r.STEP_CAPACITY} 个 token），也没有整段命中的请求。"]


def test_observations_3_without_any_eviction_says_so_once():
    """每个容量都放得下 trace 的全部块：一次也不淘汰，只说这一句（不说"每一步删的是同一块"）；表下也不讲淘汰规则。"""
    d = dict(same={None: True, 50: True}, breaks=0, caps=[None, 50], cap_names=["无限", "50"], distinct=40,
             lru={None: 30, 50: 30}, radix={"sglang": {None: 30, 50: 30}, "trim": {None: 30, 50: 30}})
    lines, more = r.observations_3(d)
    assert lines == ["表里每个容量都放得下 trace 的全部 40 个不同的块，一次也不淘汰：块哈希 LRU、修剪和 SGLang 的规则"
                     "给每个请求的命中都一样。"] and more == [r.CHAIN_NOTE]
    assert "谁也不淘汰" in r.sglang_why(d) and r.sglang_why(dict(d, distinct=60)) == r.SGLANG_WHY
    lines, _ = r.observations_3(dict(d, distinct=45, caps=[None, 44], same={None: True, 44: True},
                                     lru={None: 30, 44: 29}, radix={"sglang": {None: 30, 44: 29}, "trim": {None: 30, 44: 29}}))
    assert len(lines) == 2 and "删的是同一块" in lines[0]                      # 44 块放不下 45 块：有淘汰


def test_demo3_with_room_for_every_block(monkeypatch, capsys):
    monkeypatch.setattr(r, "CAPACITIES", (200_000,))
    assert r.main(["--demo", "3"]) == 0
    out = "".join(capsys.readouterr().out.split())                  # 折行不算
    assert "一次也不淘汰" in out and "删够为止" not in out and "删的是同一块" not in out


@pytest.mark.parametrize("cap,row,gone,size", [
    (13, "请求 B", ["peppermint =>", "请求 B 刚插入的 3 个 token"], 11),     # 拆开的节点只删尾巴，连自己的新叶子也删
    (14, "请求 C", ["plush giraffe =>", "sea otter => loutre de mer"], 10),   # 叶子删空，父节点成了叶子，接着删
    (22, "请求 E", ["peppermint =>"], 21),
])
def test_step_evictions_name_exactly_the_tokens_deleted(monkeypatch, cap, row, gone, size):
    """演示 4 的"淘汰的叶子"列：删掉的正是这几段（按删的先后），树里剩下的 = 原来的 + 新插入的 − 删掉的。"""
    monkeypatch.setattr(r, "STEP_CAPACITY", cap)
    d = r.run_steps("sglang")
    x = next(x for x in d["steps"] if x["name"] == row)
    assert x["evicted"] == gone and x["size"] == size
    before = 0
    for x in d["steps"]:
        assert before + x["n"] - x["hit"] - x["trimmed"] == x["size"]
        before = x["size"]


def test_step_settings_are_checked():
    assert_settings_refused(r, [("STEP_CAPACITY", 22.5), ("STEP_CAPACITY", 0), ("STEP_CAPACITY", None),
                                ("STEP_REQUESTS", ()), ("STEP_REQUESTS", (("a", "x"), ("a", "y"))),
                                ("STEP_REQUESTS", (("a", " "),))], ["--demo", "4"])


def test_step_tree_emptied_by_eviction_says_so(monkeypatch, capsys):
    monkeypatch.setattr(r, "STEP_CAPACITY", 5)
    assert r.main(["--demo", "4"]) == 0
    assert "最后的树（缩进 = 深度）：\n  （空：全被淘汰了）" in capsys.readouterr().out
