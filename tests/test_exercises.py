"""exercises/check.py：讲义的实现全部通过；起始代码每个练习一行"还没写"、没有 traceback；buggy_answers.py 的每个
错误写法在它该没过的那一组没过、提示说的是它错的想法（至多 15 行、80 列，不给改法），正确的写法都通过；死循环几秒
就停、说出停在哪一行；print 只说几行；出错说出你文件的哪一行；工作量的数不同时说差多少。"""
import os
import subprocess
import sys

import pytest

from conftest import ROOT

import buggy_answers
from exercises import cases, check
from lab_common import show

CHECK = os.path.join(ROOT, "exercises", "check.py")
FIXES = ("[:, :length]", "move_to_end", "popitem", "incref(", "decref(", ".transpose", "heappush", "child.parent =",
         "% bs", "dtype=np.int64", "+= 1")       # 提示里不该出现的写法（说想法，不给代码）


def run_check(number, overrides):
    impl = {**cases.reference(number)[0], **overrides}
    return check.check(number, impl, buggy_answers.__file__)


def hint_of(out):
    """说明里"提示："那一段（折行接起来，去掉空格）。"""
    start = [i for i, x in enumerate(out) if x.startswith("  提示：")][0]
    end = next((i for i in range(start + 1, len(out)) if not out[i].startswith(" " * 8)), len(out))
    return "".join(x.strip() for x in out[start:end]).replace(" ", "")[3:]


@pytest.mark.parametrize("number", sorted(cases.EXERCISES))
def test_the_lecture_passes_its_own_checker(number):
    state, out = check.check(number, *cases.reference(number))
    assert state == "通过", "\n".join(out)
    assert "手算的例子" in out[1] and "随机输入" in out[1]


def test_starters_say_not_written_without_traceback():
    p = subprocess.run([sys.executable, CHECK], capture_output=True, text=True, cwd=ROOT)
    assert p.returncode == 1 and p.stderr == "" and "Traceback" not in p.stdout
    for number, ex in cases.EXERCISES.items():
        assert f"练习 {number} 还没写（exercises/{ex.file}.py 的 " in p.stdout
    assert p.stdout.rstrip().endswith("合计：练习 1、2、3、4、5、6 还没写。")


def test_a_bad_exercise_number_is_one_line():
    p = subprocess.run([sys.executable, CHECK, "7"], capture_output=True, text=True, cwd=ROOT)
    assert p.returncode == 2 and p.stdout == "" and "没有练习 7：练习号是 1–6" in p.stderr.splitlines()[-1]


@pytest.mark.parametrize("name", sorted(buggy_answers.WRONG))
def test_a_wrong_answer_fails_its_case_with_its_hint(name, monkeypatch):
    monkeypatch.setattr(check, "LIMIT", 2)         # 死循环的那个 2 秒就停；别的每步只要几毫秒
    number, overrides, case, hint = buggy_answers.WRONG[name]
    state, out = run_check(number, overrides)
    report = "\n".join(out)
    assert state == "没通过", report
    assert out[1].split("：", 1)[1].startswith(case), report
    assert hint.replace(" ", "") in hint_of(out), report
    assert len(out) <= 15 and all(show.cols(x) <= 80 for x in out), report


def test_hints_name_the_idea_not_the_code():
    hints = [g[2] for ex in cases.EXERCISES.values() for g in ex.groups()] + list(cases.KEY_HINTS.values())
    hints.append(check.ARGS_HINT)
    assert not [h for h in hints for code in FIXES if code in h]


@pytest.mark.parametrize("name", sorted(buggy_answers.RIGHT))
def test_an_answer_in_another_style_passes(name):
    number, overrides, _, _ = buggy_answers.RIGHT[name]
    state, out = run_check(number, overrides)
    assert state == "通过", "\n".join(out)


def test_prints_are_counted_not_shown():
    state, out = run_check(5, buggy_answers.RIGHT["NewestFirst"][1])
    assert state == "通过"
    said = "".join(out[2:])
    assert out[2].startswith("  print：你的代码 print 了") and "行（检查时收起来了），最先的：淘汰" in said.replace(" ", "")
    assert len(out) <= 4


def test_a_hang_names_the_line(monkeypatch):
    monkeypatch.setattr(check, "LIMIT", 1)
    state, out = run_check(5, buggy_answers.WRONG["EvictSpins"][1])
    line = [x for x in out if "秒还没完" in x][0]
    assert "1 秒还没完（多半是死循环），停在 buggy_answers.py 第" in line and "（evict）" in line


def test_a_crash_names_the_students_line():
    def crashes(tokens, block):
        return [tokens[block * 99]]
    state, out = check.check(4, {**cases.reference(4)[0], "block_hashes": crashes}, __file__)
    got = "".join(x.strip() for x in out if x.startswith("  你的：") or x.startswith(" " * 8))
    assert state == "没通过" and got.startswith("你的：出错 IndexError") and "test_exercises.py 第" in got
    assert "（crashes）" in got


def test_a_workload_difference_says_which_number_and_by_how_much():
    class Almost(buggy_answers.policies.LRUCache):      # 只在容量 3,000、请求多了以后才不同
        def evict(self):
            if len(self.entries) > 3000 and len(self.entries) % 97 == 0:
                return self.entries.popitem(last=True)[0]
            return super().evict()
    state, out = run_check(5, {"LRUCache": Almost})
    report = "\n".join(out)
    assert "讲义的工作量" in out[1] and "命中的块数合计" in report and "（差 −" in report, report


def test_a_set_prints_in_the_same_order_every_run():
    assert cases.text({"b", "c", "a"}) == "{'a', 'b', 'c'}" and cases.text(set()) == "set()"
