"""LECTURE.md 是一份讲得完的课堂计划：分钟数加起来 ≤ 75，停顿 ≤ 12，
它点名的每条命令、每个演示号、每张图都存在。"""
import os
import re

from conftest import LECTURE, ROOT, load

with open(os.path.join(ROOT, "LECTURE.md"), encoding="utf-8") as f:
    TEXT = f.read()


def test_minutes_add_up_to_at_most_75():
    numbered = re.findall(r"^## \d+\..*$", TEXT, flags=re.M)
    minutes = [int(m) for m in re.findall(r"^## \d+\. .+（(\d+) 分钟）$", TEXT, flags=re.M)]
    assert numbered and len(minutes) == len(numbered), "每个编号的节都要在标题里写「（M 分钟）」"
    assert sum(minutes) <= 75, f"计划 {sum(minutes)} 分钟"


def test_at_most_12_pauses():
    pauses = re.findall(r"^\s*- \*\*停：\*\*", TEXT, flags=re.M)
    assert 1 <= len(pauses) <= 12
    assert TEXT.count("**停：**") == len(pauses), "每个停顿都单独起一行「- **停：**」"


def test_activates_venv_first():
    assert "source .venv/bin/activate" in TEXT.split("## 1.")[0]


def test_every_command_names_a_real_demo():
    runs = re.findall(r"python lecture07/(\w+)\.py([^`\n]*)", TEXT)
    assert runs
    demos = {}
    for script, args in runs:
        assert os.path.exists(os.path.join(LECTURE, script + ".py")), script
        m = re.search(r"--demo (\d+)", args)
        if m:
            if script not in demos:
                demos[script] = len(load(script).DEMOS)
            assert 1 <= int(m.group(1)) <= demos[script], f"{script} --demo {m.group(1)}"


def test_live_runs_quote_the_demo_question():
    for script, n in re.findall(r"python lecture07/(\w+)\.py --step --demo (\d+)`", TEXT):
        question = load(script).DEMOS[int(n) - 1][1].__doc__.strip()
        assert question in TEXT, f"{script} 演示 {n} 的问题没写进计划：{question}"


def test_every_figure_exists():
    figures = re.findall(r"figures/[\w.-]+\.(?:png|gif|svg)", TEXT)
    assert figures
    for path in figures:
        assert os.path.exists(os.path.join(ROOT, path)), path
