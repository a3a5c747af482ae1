"""04b 和 kv_store/radix_tree.py：基数树的手算小例子、对照暴力解和块 LRU 的随机检查、脚本的每个演示、
改坏一个设置或 LRUCache 时印 ✗ 或一行拒绝。"""
import doctest
import random

import pytest
from hypothesis import given, settings, strategies as st

import kv_store.policies as policies
import kv_store.radix_tree
from conftest import load
from kv_store.radix_tree import RadixCache
from lab_common import show


def test_doctests():
    assert doctest.testmod(kv_store.radix_tree).failed == 0


def test_split_and_match_are_token_granular():
    t = RadixCache()
    assert t.insert([5, 6, 7, 8, 9]) == 0 and t.insert([5, 6, 7, 1]) == 3      # 在第 3 个 token 后分叉：拆 1 次
    assert t.match([5, 6, 7, 8, 2]) == 4 and t.match([5, 6]) == 2 and t.match([4]) == 0
    assert (t.size, t.n_splits, [len(n.key) for _, _, n in t.nodes()]) == (6, 1, [3, 2, 1])


def test_trim_deletes_the_oldest_leaf_from_its_tail():
    t = RadixCache(capacity=5, rule="trim")
    t.insert([1, 2, 3])          # 时刻 0
    t.insert([1, 2, 4, 5])       # 时刻 1：2 + 1 + 2 = 5 个
    t.insert([9])                # 超 1 个：最旧的叶子 [3]（时刻 0）删掉
    assert t.size == 5 and t.match([1, 2, 3]) == 2 and t.match([1, 2, 4, 5]) == 4
    t.insert([8, 7])             # 超 2 个：最旧的叶子 [4 5]（时刻 1），从尾巴删 2 个
    assert t.match([1, 2, 4, 5]) == 2 and t.match([8, 7]) == 2 and t.size == 5


def test_sglang_evicts_whole_leaves_until_enough_is_freed():
    """[1 2 3 4 5]（时刻 0）、[6 7]（1）、[8]（2），容量 7，超 1 个：SGLang 整片删最旧的叶子，停在 3 个；修剪只删 [5]。"""
    for rule, hit, size in (("sglang", 0, 3), ("trim", 3, 7)):
        t = RadixCache(capacity=7, rule=rule)
        for seq in ([1, 2, 3, 4, 5], [6, 7], [8]):
            t.insert(seq)
        assert (t.match([1, 2, 3]), t.size) == (hit, size), rule


def test_sglang_stamps_the_split_tail_as_just_used():
    """容量 5：[1 2 3]（0）、[4]（1）、[1 2 9]（2：拆成 [1 2] → [3]、[9]；SGLang 的 [3] 记成 2，修剪的还是 0）、
    [5]（3：超 1 个）。SGLang 删最旧的叶子 [4]，[1 2 3] 还在；修剪删 [3]。"""
    for rule, hit in (("sglang", 3), ("trim", 2)):
        t = RadixCache(capacity=5, rule=rule)
        for seq in ([1, 2, 3], [4], [1, 2, 9], [5]):
            t.insert(seq)
        assert t.match([1, 2, 3]) == hit, rule


def test_evict_returns_what_went_and_unknown_rule_is_refused():
    """[1 2 3]（时刻 0）、[1 4]（1）：最旧的叶子是拆出来的 [2 3]。淘汰 1 个：修剪删 [3]，SGLang 整片删 [2 3]。"""
    for rule, gone, size in (("trim", [3], 3), ("sglang", [2, 3], 2)):
        t = RadixCache(rule=rule)
        t.insert([1, 2, 3])
        t.insert([1, 4])
        assert [list(key) for _, key in t.evict(1)] == [gone] and t.size == size, rule
    with pytest.raises(ValueError, match="rule"):
        RadixCache(rule="lfu")


def chain_trace(seed, n=300):
    """随机的链式 trace：每个请求 = 以前某个请求的一段前缀 + 几个新块（一个块 id 永远跟在同一个 id 后面）。"""
    rng, reqs, nxt = random.Random(seed), [], 0
    for _ in range(n):
        base = []
        if reqs and rng.random() < 0.8:
            base = list(rng.choice(reqs))
            base = base[:rng.randint(0, len(base))]
        k = rng.randint(1, 3)
        reqs.append(tuple(base + list(range(nxt, nxt + k))))
        nxt += k
    return reqs


@pytest.mark.parametrize("capacity", [1, 2, 3, 5, 8, 20, None])
def test_trim_equals_block_lru_request_for_request(capacity):
    """修剪规则给每个请求的命中块数和 policies.LRUCache 相同（链式块 id）。"""
    reqs = chain_trace(capacity or 0)
    tree, lru, a, b = RadixCache(capacity, "trim"), policies.LRUCache(capacity), [], []
    for r in reqs:
        a.append(tree.match(r))
        b.append(lru.match(r))
        tree.insert(r)
        lru.insert(r)
    assert a == b


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.integers(0, 3), min_size=1, max_size=8), min_size=1, max_size=25))
def test_match_is_the_longest_common_prefix_with_anything_inserted(seqs):
    """不淘汰时，match = 和以前插入过的任何一个序列的最长公共前缀（暴力解）。"""
    t, seen = RadixCache(), []
    for s in seqs:
        lcp = max([next((k for k, (x, y) in enumerate(zip(s, p)) if x != y), min(len(s), len(p))) for p in seen] + [0])
        assert t.match(s) == lcp and t.insert(s) == lcp
        seen.append(s)
    assert t.size == sum(len(n.key) for _, _, n in t.nodes())


OPS = st.lists(st.tuples(st.sampled_from(["insert", "lock", "unlock"]), st.integers(0, 9),
                         st.lists(st.integers(0, 3), min_size=1, max_size=6)), max_size=40)


@pytest.mark.parametrize("rule", ["sglang", "trim"])
@settings(max_examples=60, deadline=None)
@given(capacity=st.integers(1, 12), ops=OPS)
def test_never_over_capacity_and_locked_requests_stay(rule, capacity, ops):
    """随机的插入、加锁插入、解锁：锁着的不超过容量时，树从不超容量，锁着的请求一直整段在树里，结构一致。"""
    t, locked = RadixCache(capacity, rule), []
    for op, pick, seq in ops:
        if op == "unlock" and locked:
            t.unlock(locked.pop(pick % len(locked)))
        elif op == "lock" and sum(map(len, locked)) + len(seq) <= capacity:
            t.insert(seq, lock=True)
            locked.append(seq)
        else:
            t.insert(seq)
        nodes = [n for _, _, n in t.nodes()]
        assert t.size <= capacity and t.size == sum(len(n.key) for n in nodes)
        assert all(n.key and n.parent.children[n.key[0]] is n and n.ref >= 0 for n in nodes)
        assert all(t.match(s) == len(s) for s in locked)


@pytest.fixture
def s04b():
    return load("04b_radix_cache")


def test_demo_data_by_hand(s04b, capsys):
    d1, d2 = s04b.demo_tree(), s04b.demo_granularity()
    assert (d1["n_requests"], d1["total"], d1["stored"], d1["splits"]) == (16, 3666, 718, 3)
    assert d2["rows"][-1][2:] == ["754", "718", "35", "1", "237", "3,666"]
    # 一个词一个 token，容量 22：A 13 个；B 命中 11（拆 1）；C 命中 5（拆 1，21 个）；D = B 整段在树里，用得上 13；
    # E 命中 8（拆 1）到 23 个：SGLang 删整片最旧的叶子 [peppermint =>]（时刻 1），停在 21
    d4 = s04b.demo_steps()
    got = [(s["hit"], s["usable"], s["splits"], s["size"], s["evicted"]) for s in d4["steps"]]
    assert got == [(0, 0, 0, 13, []), (11, 11, 1, 16, []), (5, 5, 1, 21, []), (14, 13, 0, 21, []),
                   (8, 8, 1, 21, ["peppermint =>"])]
    marked = [n["words"] for n in d4["steps"][-1]["before"] if n["id"] in d4["steps"][-1]["marks"]]
    assert marked == [["peppermint", "=>"]] and "✗" not in capsys.readouterr().out


def test_edited_lru_changes_its_column_and_breaks_the_claim(s04b, monkeypatch, capsys):
    """LRUCache.evict 改成先扔最新的块：块 LRU 一列正是改过的类算出的数，"修剪 = 块 LRU" 印 ✗。"""
    monkeypatch.setattr(policies.LRUCache, "evict", lambda self: self.entries.popitem(last=True)[0])
    monkeypatch.setattr(s04b, "CAPACITIES", (10_000,))
    d = s04b.demo_trace()
    trace = s04b.make_trace(0)
    assert d["rows"][0][1] == show.num(policies.hit_ratio(trace, policies.LRUCache(10_000)), 2) != "0.46"
    assert "✗在这组设置下不成立：在10,000块时有请求的命中不同" in "".join(capsys.readouterr().out.split())


@pytest.mark.parametrize("evict", [lambda self: None, lambda self: 1 / 0])
def test_broken_evict_is_one_line_before_any_output(s04b, monkeypatch, capsys, evict):
    monkeypatch.setattr(policies.LRUCache, "evict", evict)
    with pytest.raises(SystemExit) as e:
        s04b.main([])
    out, err = capsys.readouterr()
    assert e.value.code == 2 and out == "" and len(err.strip().splitlines()) == 1 and "LRUCache" in err


@pytest.mark.parametrize("name, value", [("BLOCK_SIZE", 0), ("CAPACITIES", (10, 10)), ("SUFFIX_LEN", (30, 10)),
                                         ("STEP_REQUESTS", (("A", "x y"), ("A", "z"))), ("FEW_SHOT", (("a", 0),)),
                                         ("STEP_CAPACITY", True)])
def test_bad_setting_is_one_line(s04b, monkeypatch, capsys, name, value):
    monkeypatch.setattr(s04b, name, value)
    with pytest.raises(SystemExit) as e:
        s04b.main([])
    out, err = capsys.readouterr()
    assert e.value.code == 2 and out == "" and len(err.strip().splitlines()) == 1 and name in err


@pytest.mark.parametrize("demo, name, value", [(1, "N_SHARING", 1), (2, "BLOCK_SIZE", 1), (4, "STEP_CAPACITY", 100)])
def test_a_changed_setting_prints_a_cross_not_a_false_sentence(s04b, monkeypatch, capsys, demo, name, value):
    monkeypatch.setattr(s04b, name, value)
    s04b.main(["--demo", str(demo)])
    assert "✗ 在这组设置下不成立" in capsys.readouterr().out


def test_long_names_are_cut_to_80_columns(s04b, monkeypatch, capsys):
    monkeypatch.setattr(s04b, "FEW_SHOT", (("前缀" * 30, 80),))
    monkeypatch.setattr(s04b, "STEP_REQUESTS", (("很长的请求名字" * 5, "一 二 三 " + "长词" * 30), ("B", "四 五")))
    monkeypatch.setattr(s04b, "STEP_CAPACITY", 3)
    s04b.main(["--demo", "2"])
    s04b.main(["--demo", "4"])
    assert max(show.cols(x) for x in capsys.readouterr().out.splitlines()) <= 80


def test_gif_marks_the_evicted_leaf_before_it_goes(s04b, capsys):
    import plot_04b                               # figures/ 在 sys.path 上（conftest）
    frames = plot_04b.step_frames(s04b.demo_steps())
    assert len(frames) == 6 and [r.label for r in frames[4].rows if r.cells[0].mark] == ["peppermint =>"]
    assert "peppermint =>" not in [r.label for r in frames[5].rows]
