"""练习、检查器和 --mine：
- 绑定参考实现时检查器全部通过；原样的练习文件（起始代码）干净地失败（退出码 1，没有 traceback）；
- exercises/buggy.py 里的每个错误写法都被抓住，而且是被它名下的那个用例抓住；
- --mine 对写对的 LRU 说"完全一致"，对淘汰最新块的 LRU 列出不同的数；换上的对象跑完都换回来。
"""
import os
import pathlib
import subprocess
import sys

import pytest

from conftest import ROOT

from exercises.buggy import BUGGY
from exercises.check import check_exercise, main as check_main, variant_impl
from kv_store.eviction import BlockCache
from kv_store import eviction
import paged_kv
from exercises import check, mine
from exercises.mine import EXERCISES, Impl, bind, compare, run_with_mine
from lab_common.console import wrap_hanging

CHECK = os.path.join(ROOT, "exercises", "check.py")


def _check(argv, capsys):
    code = check_main(argv)
    return code, capsys.readouterr().out


def test_reference_passes_every_case(capsys):
    code, out = _check(["--reference"], capsys)
    assert code == 0, out
    assert "没通过" not in out and "还没写" not in out and "print 了" not in out
    assert out.strip().endswith("合计：练习 1、2、3、4、5、6 通过。")


def test_starters_fail_cleanly():
    """起始代码：每个练习一行"还没写"，退出码 1，stderr 是空的（没有 traceback）。"""
    env = {k: v for k, v in os.environ.items() if k != mine.EXERCISES_ENV}
    p = subprocess.run([sys.executable, CHECK], capture_output=True, text=True, cwd=ROOT, env=env)
    assert p.returncode == 1
    assert p.stderr == ""
    for n, ex in EXERCISES.items():
        assert f"练习 {n} 还没写（exercises/{ex.stem}.py）" in p.stdout
    assert "Traceback" not in p.stdout


def test_starters_are_unwritten_by_probe():
    for n in EXERCISES:
        impl = mine.student_impl(n, os.path.join(ROOT, "exercises"))
        assert impl.error is None and impl.untouched, (n, impl.status)


@pytest.mark.parametrize("name", sorted(BUGGY))
def test_buggy_variant_is_caught_by_its_case(name):
    number, impl = variant_impl(name)
    lines = []
    assert check_exercise(number, impl, out=lines.append, fail_fast=True) == "没通过"
    first = [x for x in lines if "第一个没过的用例" in x]
    assert first and first[0].split("：", 1)[1].startswith(BUGGY[name].caught_by), lines
    assert any(x.startswith("     提示：") or x.startswith("     出错：") for x in lines), lines
    hint = BUGGY[name].hint
    assert not hint or any(x.startswith("     提示：") and hint in x for x in lines), lines


def test_at_least_two_buggy_variants_per_exercise():
    for n in EXERCISES:
        assert sum(b.exercise == n for b in BUGGY.values()) >= 2, n


def test_bad_arguments_are_one_line(capsys):
    with pytest.raises(SystemExit) as e:
        check_main(["7"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "练习号是 1–6" in err


# ---------------------------------------------------------------- 学生写的文件：写了一半、写错、文件坏了
def _student_dir(tmp_path, files):
    """起始代码复制一份，再用 files = {文件名: 新内容} 覆盖几个。"""
    for ex in EXERCISES.values():
        src = os.path.join(ROOT, "exercises", ex.stem + ".py")
        (tmp_path / (ex.stem + ".py")).write_text(pathlib.Path(src).read_text(encoding="utf-8"), encoding="utf-8")
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    return str(tmp_path)


LRU_OK = '''
from collections import OrderedDict
from kv_store.eviction import BlockCache


class LRUCache(BlockCache):
    NAME, SHORT = "LRU", "LRU"

    def __init__(self, capacity):
        super().__init__(capacity, OrderedDict())

    def touch(self, block, pos):
        if block in self.entries:
            self.entries.move_to_end(block)
        else:
            self.entries[block] = None

    def evict(self):
        return self.entries.popitem(last=False)[0]
'''
LRU_NEWEST = LRU_OK.replace("popitem(last=False)", "popitem(last=True)")


LRU_NEWEST_FIRST = LRU_OK.replace("move_to_end(block)", "move_to_end(block, last=False)").replace(
    "self.entries[block] = None", "self.entries[block] = None\n            self.entries.move_to_end(block, last=False)"
).replace("popitem(last=False)", "popitem(last=True)")


@pytest.mark.parametrize("text", [LRU_OK, LRU_NEWEST_FIRST], ids=["oldest-first", "newest-first"])
def test_correct_student_lru_passes(tmp_path, capsys, text):
    """entries 里从旧到新还是从新到旧随学生：最新的放在前面、从后面删，也对。"""
    d = _student_dir(tmp_path, {"ex5_lru.py": text})
    code, out = _check(["5", "--dir", d], capsys)
    assert code == 0, out
    assert "全部 7 个用例通过" in out


def test_partly_written_class_names_the_missing_method(tmp_path, capsys):
    src = pathlib.Path(ROOT, "exercises", "ex3_cow.py").read_text(encoding="utf-8")
    fork = '''        """返回一条共享全部块的新 PagedSequence（每块 incref）。"""
        child = PagedSequence(self.pool)
        child.blocks, child.length = list(self.blocks), self.length
        for b in self.blocks:
            self.pool.incref(b)
        return child
'''
    start = src.index('        """返回一条共享全部块')
    end = src.index("    def reserve")
    d = _student_dir(tmp_path, {"ex3_cow.py": src[:start] + fork + "\n" + src[end:]})
    code, out = _check(["3", "--dir", d], capsys)
    assert code == 1
    assert "  通过    fork：" in out
    assert "用到的 PagedSequence.reserve 还没写" in out


def test_broken_file_is_one_line(tmp_path, capsys):
    d = _student_dir(tmp_path, {"ex1_kv_bytes.py": "def kv_bytes_per_token(:\n"})
    code, out = _check(["1", "--dir", d], capsys)
    assert code == 1
    assert "加载出错：SyntaxError" in out and "ex1_kv_bytes.py 第 1 行" in out
    assert "Traceback" not in out


def test_student_exception_names_file_and_line(tmp_path, capsys):
    text = "def kv_bytes_per_token(attention, n_layers, *a, **k):\n    return [][n_layers]\n"
    d = _student_dir(tmp_path, {"ex1_kv_bytes.py": text})
    code, out = _check(["1", "--dir", d], capsys)
    assert code == 1
    assert "IndexError: list index out of range（ex1_kv_bytes.py 第 2 行）" in out


# ---------------------------------------------------------------- --mine
def _hit_table():
    """一个小"演示"：make_cache("lru") 在几个容量下的命中块数（04 演示 3 的同一条路：CACHE_POLICIES）。"""
    trace = [(1, 2, 3), (1, 2, 4), (5,), (1, 2, 3), (6, 7), (1, 2, 4), (5, 6), (1, 2, 3)] * 3
    for cap in (2, 3, 5):
        c = eviction.make_cache(cap, "lru")
        hits = 0
        for blocks in trace:
            hits += c.match(blocks)
            c.insert(blocks)
        print(f"容量 {cap}：LRU 命中 {hits} 块，命中率 {hits / sum(map(len, trace)):.2f}")
    return 0


def _impl_from_source(tmp_path, text):
    d = _student_dir(tmp_path, {"ex5_lru.py": text})
    return {n: mine.student_impl(n, d) for n in EXERCISES}


def test_mine_identical_for_correct_lru(tmp_path, capsys):
    impls = _impl_from_source(tmp_path, LRU_OK)
    assert run_with_mine(_hit_table, "04_prefix_caching", impls=impls) == 0
    out = capsys.readouterr().out
    first = mine.mine_line(impls, "04_prefix_caching")
    assert first.startswith("--mine：这个脚本用到练习 2、3、4、5；用了你在 ") and first.endswith("里写的 LRUCache（练习 5）；练习 2、3、4 还没写，用参考实现。")
    head = wrap_hanging(first, 78)                       # 印出来时按 80 列折行，续行对齐到"--mine："之后
    assert out.splitlines()[:len(head) + 1] == head + [mine.REF_FIRST]
    assert "和参考实现完全一致（3 行输出逐字相同）。" in out


def test_mine_shows_differences_for_buggy_lru(tmp_path, capsys):
    impls = _impl_from_source(tmp_path, LRU_NEWEST)
    assert run_with_mine(_hit_table, "04_prefix_caching", impls=impls) == 0
    out = capsys.readouterr().out
    assert "有 3 行和参考实现不同（参考共 3 行）" in out
    table = out.split("有 3 行和参考实现不同")[1].splitlines()
    assert table[1].split()[0] == "行" and table[2].split()[0] == "1"
    assert eviction.CACHE_POLICIES["lru"] is eviction.LRUCache      # 换回来了
    assert [x for x in out.splitlines() if x.startswith("容量 2：")] == ["容量 2：LRU 命中 0 块，命中率 0.00"]
    # ↑ 只打印了学生那一遍（参考那一遍留着比较，不显示）


def test_mine_nothing_written_runs_once(capsys):
    impls = {n: mine.student_impl(n, os.path.join(ROOT, "exercises")) for n in EXERCISES}
    assert run_with_mine(_hit_table, "04_prefix_caching", impls=impls) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[:2] == ["--mine：这个脚本用到练习 2、3、4、5；exercises/ 里还没有写好的，下面全部是参考",
                                    "        实现。"]
    assert len([x for x in out.splitlines() if x.startswith("容量 2：")]) == 1 and "和参考实现" not in out


def test_mine_student_error_is_one_line(tmp_path, capsys):
    bad = LRU_OK.replace("return self.entries.popitem(last=False)[0]", "return [][0]")
    impls = _impl_from_source(tmp_path, bad)
    impls[5].status["LRUCache"] = "写好了"              # 探针只插 3 块，容量 2：也会淘汰——这里强行当作写好了
    assert run_with_mine(_hit_table, "04_prefix_caching", impls=impls) == 1
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and "IndexError" in err[0] and "ex5_lru.py 第 19 行" in err[0]
    assert err[1].startswith("  出错的调用：LRUCache.evict(self=<capacity=2 len(entries)=3>)") and "make check EX=5" in err[1]


def _nine_blocks_at_capacity_7():
    """一个小"演示"：容量 7 的 LRU 里插 9 块（检查器的用例没用过容量 7）。"""
    c = eviction.make_cache(7, "lru")
    for b in range(9):
        c.insert([b])
    return 0


def test_mine_says_the_checker_missed_an_input(tmp_path, capsys):
    """make check 通过了、演示里却出错：说检查器漏了这个输入，并给出当时的调用（容量 7 检查器没试过）。"""
    odd = LRU_OK.replace("    def evict(self):\n", "    def evict(self):\n        if self.capacity == 7:\n"
                         "            raise ZeroDivisionError('7')\n")
    impls = _impl_from_source(tmp_path, odd)
    assert run_with_mine(_nine_blocks_at_capacity_7, "04_prefix_caching", impls=impls) == 1
    err = capsys.readouterr().err.splitlines()
    assert "ZeroDivisionError: 7（ex5_lru.py" in err[0]
    assert err[1] == ("  make check EX=5 全部通过，可是它没试过这个输入（检查器漏了它，请告诉助教）："
                      "LRUCache.evict(self=<capacity=7 len(entries)=8>)")


def test_bind_swaps_every_reference_and_restores():
    class Mine(BlockCache):
        pass

    def gather(*a):
        return None
    ref_lru, ref_gather = eviction.LRUCache, paged_kv.gather_kv
    with bind([(ref_lru, Mine), (ref_gather, gather)]):
        assert eviction.LRUCache is Mine and eviction.CACHE_POLICIES["lru"] is Mine
        assert paged_kv.gather_kv is gather
    assert eviction.LRUCache is ref_lru and eviction.CACHE_POLICIES["lru"] is ref_lru
    assert paged_kv.gather_kv is ref_gather


def test_compare_lists_numbers_and_text():
    ref = "表\n容量 1,000：命中率 0.61，省下 12%\n结论：LRU 最好\n"
    same = compare(ref, ref)
    assert same[-1] == "和参考实现完全一致（3 行输出逐字相同）。"
    got = compare(ref, "表\n容量 1,000：命中率 0.12，省下 3%\n结论：FIFO 最好\n")
    text = "\n".join(got)
    assert "有 2 行和参考实现不同（参考共 3 行）" in text
    assert any(line.split()[-3:] == ["0.61", "0.12", "-0.49"] for line in got), got
    assert any(line.split()[-3:] == ["12%", "3%", "-9%"] for line in got), got
    assert "第 3 行的文字也不同" in text and "你的：结论：FIFO 最好" in text


def test_compare_converts_units_and_joins_wrapped_sentences():
    """320 KiB → 2.50 MiB 是单位变了，差按同一个单位算；观察换了折行的位置不算不同。"""
    got = "\n".join(compare("每 token：320 KiB\n", "每 token：2.50 MiB\n"))
    assert "320 KiB" in got and "2.50 MiB" in got and "+2.19 MiB" in got and "-317" not in got
    a = "观察\n  1. 第一句话说完了。\n  2. 这一句很长很长，\n     折成了两行。\n"
    b = "观察\n  1. 第一句话说完了。\n  2. 这一句很长很长，折成了\n     两行。\n"
    assert compare(a, b)[-1].startswith("和参考实现完全一致")


def test_mine_doctests():
    import doctest
    assert doctest.testmod(mine).failed == 0


GATHER_OK = '''
import numpy as np


def gather_kv(pool, layer, blocks, length):
    out = []
    for x in (pool.k, pool.v):
        parts = [x[layer, b] for b in blocks]                 # 每块 (KV 头, 块内位置, 头维度)
        out.append(np.concatenate(parts, axis=1)[:, :length])
    return out[0], out[1]
'''
GATHER_NO_TRANSPOSE = '''
def gather_kv(pool, layer, blocks, length):
    k, v = pool.k[layer, blocks], pool.v[layer, blocks]
    H, hd = k.shape[1], k.shape[3]
    return k.reshape(H, -1, hd)[:, :length], v.reshape(H, -1, hd)[:, :length]
'''


@pytest.mark.parametrize("text, same", [(GATHER_OK, True), (GATHER_NO_TRANSPOSE, False)], ids=["ok", "no_transpose"])
def test_mine_through_the_script_runner(tmp_path, monkeypatch, capsys, text, same):
    """02 --mine --demo 2（run_lecture 的 --mine）：写对的 gather_kv 和参考完全一致；写错的列出 logits 的差。"""
    from conftest import load_script
    monkeypatch.setenv(mine.EXERCISES_ENV, _student_dir(tmp_path, {"ex2_gather_kv.py": text}))
    s02 = load_script("02_paged_attention")
    assert s02.main(["--mine", "--demo", "2"]) == 0
    out = capsys.readouterr().out
    first = "".join(out.split(mine.REF_FIRST)[0].split())             # 第一段（按 80 列折过行）去掉空白接成一串
    assert "这个脚本用到练习2、3；" in first and "里写的gather_kv（练习2）；" in first
    if same:
        assert "和参考实现完全一致" in out
    else:
        assert "行和参考实现不同" in out and "+3.0e+00" in out
    assert paged_kv.gather_kv is mine.reference(2)["gather_kv"]


def test_mine_says_when_the_student_code_was_never_called(tmp_path, capsys):
    """跑的演示根本不经过学生写的类：输出当然一致，但要说明这说明不了什么。"""
    impls = _impl_from_source(tmp_path, LRU_NEWEST)

    def run():
        print("这个演示不用缓存")
        return 0
    assert run_with_mine(run, "04_prefix_caching", impls=impls) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-2] == "和参考实现完全一致（1 行输出逐字相同）。"
    assert out[-1].startswith("注意：这一遍没有用到你写的 LRUCache（练习 5）")
    assert impls[5].objs["LRUCache"].__init__.__qualname__ == "LRUCache.__init__"     # 包住的 __init__ 换回来了


@pytest.mark.parametrize("script, args, variant", [
    ("01_kv_cache_memory", ["--demo", "3"], "kv_mla_times_two"),
    ("03_sharing_and_cow", ["--demo", "2"], "cow_no_decref"),
    ("04b_radix_cache", ["--demo", "1"], "radix_split_off_by_one"),
], ids=["01-ex1", "03-ex3", "04b-ex6"])
def test_mine_on_the_lecture_scripts_shows_a_buggy_variant(capsys, script, args, variant):
    """讲义的脚本确实经过练习的函数：换上 buggy.py 里的错误写法，--mine 列出不同的数，也不说"没有用到"。"""
    from conftest import load_script
    m = load_script(script)
    v = BUGGY[variant]
    impls = {v.exercise: Impl(v.exercise, dict(v.objs), {n: "写好了" for n in v.objs},
                              os.path.join(ROOT, "exercises", "buggy.py"))}
    assert run_with_mine(lambda: m.main(args), script, impls=impls) == 0
    out = capsys.readouterr().out
    assert "行和参考实现不同" in out and "注意：这一遍没有用到" not in out, out[-2000:]


def test_importing_the_lecture_class_is_not_an_answer(tmp_path, capsys):
    d = _student_dir(tmp_path, {"ex5_lru.py": "from kv_store.eviction import LRUCache  # noqa: F401\n"})
    code, out = _check(["5", "--dir", d], capsys)
    assert code == 1
    assert f"ex5_lru.py 里的 LRUCache 是从 {mine.MODULES['eviction']} import 的讲义实现，不是你写的" in out


# ---------------------------------------------------------------- 不冤枉写对的、说清时间预算、说清用到哪些练习
GATHER_LIST = '''
def gather_kv(pool, layer, blocks, length):
    k, v = pool.k[layer, blocks], pool.v[layer, blocks]
    H, hd = k.shape[1], k.shape[3]
    return [k.transpose(1, 0, 2, 3).reshape(H, -1, hd)[:, :length], v.transpose(1, 0, 2, 3).reshape(H, -1, hd)[:, :length]]
'''


def _radix_reinserting_split():
    """讲义的 RadixCache，只是 _split 先删掉父节点的键再放回去：树一样，孩子的先后变了。"""
    src = pathlib.Path(ROOT, "exercises", "buggy.py").read_text(encoding="utf-8")   # 借它的 import 路径
    assert "kv_store.radix_tree" in src
    return '''
import kv_store.radix_tree
from kv_store.radix_tree import RadixNode


class RadixCache(kv_store.radix_tree.RadixCache):
    def _split(self, child, j):
        parent = child.parent
        del parent.children[child.key[0]]
        return super()._split(child, j)
'''


@pytest.mark.parametrize("name, text, number", [
    ("ex2_gather_kv.py", GATHER_LIST, 2), ("ex6_radix.py", _radix_reinserting_split(), 6)], ids=["gather-list", "split"])
def test_right_answers_written_differently_pass(tmp_path, capsys, name, text, number):
    code, out = _check([str(number), "--dir", _student_dir(tmp_path, {name: text})], capsys)
    assert code == 0, out


def test_over_budget_says_the_budget(monkeypatch, capsys):
    monkeypatch.setattr(check, "BUDGET_FACTOR", 0)
    monkeypatch.setattr(check, "BUDGET_FLOOR", 0.0)
    impl = mine.reference_impl(5)
    lines = []
    assert check_exercise(5, impl, out=lines.append, fail_fast=True) == "没通过"
    text = "\n".join(lines)
    assert "结果都对，但你的代码用了" in text and "时间预算是它的 0 倍" in text and "多半是死循环" not in text


@pytest.mark.parametrize("script", ["01_kv_cache_memory", "02_paged_attention"])
def test_mine_names_every_exercise_the_script_uses(script):
    """跑一遍脚本，记下哪些练习的参考对象被调用了：都在 EXERCISES 的 scripts 里（--mine 第一行说的就是它们）。"""
    import contextlib
    import io
    from conftest import load_script
    m = load_script(script)
    pairs = [(n, obj) for n in EXERCISES for obj in mine.reference(n).values()]
    with mine.watch_calls([o for _, o in pairs]) as (watched, used):
        with bind([(o, w) for (_, o), w in zip(pairs, watched)]), contextlib.redirect_stdout(io.StringIO()):
            m.main([])
        flags = used()
    called = {n for (n, _), hit in zip(pairs, flags) if hit}
    assert called and called <= set(mine.script_exercises(script)), called


# ---------------------------------------------------------------- 死循环、留下的 print：限时、不刷屏
SEQ_HANGS_ON_6 = '''
import paged_kv


class PagedSequence(paged_kv.PagedSequence):
    def reserve(self, n):
        while n == 6:                  # 一次写 6 个时死循环（探针只 reserve 3 和 1：它过得去）
            continue
        return super().reserve(n)
'''


@pytest.fixture
def short_hang(monkeypatch):
    """死循环 0.3 秒就停下（检查器、探针、--mine 用的都是同一个 HARD_SECONDS）。"""
    monkeypatch.setattr(mine, "HARD_SECONDS", 0.3)
    monkeypatch.setattr(check, "HARD_SECONDS", 0.3)


def test_hang_in_the_probe_is_one_screen(tmp_path, capsys, short_hang):
    """探针（reserve(3)）里的死循环：一行说停在哪一次调用，不再跑用例；--mine 的第一行也说出来。"""
    src = SEQ_HANGS_ON_6.replace("while n == 6:", "while n:")
    d = _student_dir(tmp_path, {"ex3_cow.py": src})
    code, out = _check(["3", "--dir", d], capsys)
    assert code == 1 and len([x for x in out.splitlines() if x]) == 2, out
    assert "PagedSequence 在一个很小的输入上跑了 0.3 秒还没完" in out and "多半是死循环" in out
    assert "停在 ex3_cow.py 第 8 行：PagedSequence.reserve(self=<blocks=[] length=0>, n=3)" in out
    impls = {3: mine.student_impl(3, d)}
    assert "多半是死循环" in mine.mine_line(impls, "03_sharing_and_cow") and not impls[3].written
    line = mine.mine_line(impls, "03_sharing_and_cow")
    assert "还没写" not in line and "没有用上、改用参考实现的：练习 3" in line      # 写了但出错：不说"还没写"


def test_hang_in_a_case_names_the_call_and_skips_the_rest(tmp_path, capsys, short_hang):
    d = _student_dir(tmp_path, {"ex3_cow.py": SEQ_HANGS_ON_6})
    code, out = _check(["3", "--dir", d], capsys)
    assert code == 1
    assert "  没通过  写时复制跨块" in out and "  没跑    最后一块写满了" in out
    explain = out.split("第一个没过的用例：")[1]
    assert explain.startswith("写时复制跨块") and "输入：" in explain
    assert "你的代码跑了 0.3 秒还没完，停下了：多半是死循环" in explain
    assert "停在 ex3_cow.py 第 8 行：PagedSequence.reserve(self=<blocks=[0, 1] length=5>, n=6)" in explain


def test_hang_in_a_mine_demo_stops_with_the_call(tmp_path, capsys, short_hang):
    """探针和检查器都过得去、演示里才死循环（容量 7）：--mine 停下，说停在哪一次调用，退出码 1。"""
    odd = LRU_OK.replace("    def evict(self):\n", "    def evict(self):\n        while self.capacity == 7:\n"
                         "            pass\n")
    impls = _impl_from_source(tmp_path, odd)
    assert run_with_mine(_nine_blocks_at_capacity_7, "04_prefix_caching", impls=impls) == 1
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and "还没完" in err[0] and "多半是死循环" in err[0]
    assert "LRUCache.evict(self=<capacity=7 len(entries)=8>)" in err[0] and "make check EX=5" in err[1]
    assert eviction.CACHE_POLICIES["lru"] is eviction.LRUCache


def test_leftover_prints_are_counted_not_shown(tmp_path, capsys):
    """__init__ 里留着 print：检查照常通过，print 的东西不刷屏：说一共几行，只给最先的 5 行。"""
    noisy = LRU_OK.replace("        super().__init__(capacity, OrderedDict())\n",
                           "        super().__init__(capacity, OrderedDict())\n        print('new cache', capacity)\n")
    d = _student_dir(tmp_path, {"ex5_lru.py": noisy})
    code, out = _check(["5", "--dir", d], capsys)
    lines = out.splitlines()
    assert len(lines) < 25, out
    report = [x for x in lines if "你的代码 print 了" in x]
    assert len(report) == 1 and "最先的 5 行" in report[0]
    assert code == 0 and int(report[0].split("print 了 ")[1].split(" 行")[0].replace(",", "")) > 5
    assert sum(x.startswith("    | new cache ") for x in lines) == 5


def test_prints_are_named_as_why_a_case_was_slow(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(check, "BUDGET_FACTOR", 0)
    monkeypatch.setattr(check, "BUDGET_FLOOR", 0.0)
    noisy = LRU_OK.replace("    def touch(self, block, pos):\n", "    def touch(self, block, pos):\n"
                           "        print('touch', block)\n")
    impl = mine.student_impl(5, _student_dir(tmp_path, {"ex5_lru.py": noisy}))
    lines = []
    assert check_exercise(5, impl, out=lines.append, fail_fast=True) == "没通过"
    text = "\n".join(lines)
    assert "结果都对" in text and "慢多半是因为 print" in text and "| touch 3" in text


def test_untouched_exercise_says_what_to_do(capsys):
    d = os.path.join(ROOT, "exercises")
    code, out = _check(["1", "--dir", d], capsys)
    assert code == 1 and out.splitlines()[0] == "练习 1 还没写（exercises/ex1_kv_bytes.py）"
    assert out.splitlines()[-1] == ("接下来：打开还没写的练习文件，把标着 TODO 的 raise NotImplementedError 换成你的代码，"
                                    "再跑 make check EX=1。")
    code, out = _check(["--dir", d], capsys)
    assert out.splitlines()[-1].endswith("再跑 make check EX=练习号。") and out.count("接下来") == 1


def test_tree_difference_names_the_place_in_words():
    """树的第一处不同说成"根的孩子"、"节点 [1, 2] 下面以 3 开头的孩子的 key"，学生照着能在自己的树里找到。"""
    for name, place in (("radix_no_push_leaf", "之后的树：根的孩子"),
                        ("radix_split_slice_off", "之后的树：节点 [1, 2] 下面以 3 开头的孩子的 key")):
        number, impl = variant_impl(name)
        lines = []
        check_exercise(number, impl, out=lines.append, fail_fast=True)
        given = [x for x in lines if x.startswith("     输入：")]
        assert given and given[0].endswith(place), lines
    assert "     你的：[4]" in lines
