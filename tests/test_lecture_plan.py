"""LECTURE.md（90 分钟的课堂路线）：各部分的分钟数加起来是 90，每部分里各段的分钟数加起来是这一部分的；
提到的图都是 make all 生成的，提到的脚本都在 lecture07/ 里。"""
import os
import pathlib
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TEXT = pathlib.Path(ROOT, "LECTURE.md").read_text(encoding="utf-8")


def sections():
    """[(标题, 分钟, 正文)]：'## N. …（M 分钟）' 的每一部分。"""
    parts = re.split(r"^## ", TEXT, flags=re.M)[1:]
    out = []
    for p in parts:
        head, _, body = p.partition("\n")
        m = re.search(r"（(\d+) 分钟）$", head)
        if m:
            out.append((head, int(m.group(1)), body))
    return out


def test_timings_add_up_to_90_minutes():
    secs = sections()
    assert len(secs) >= 5 and sum(m for _, m, _ in secs) == 90
    for head, minutes, body in secs:
        inner = [int(x) for x in re.findall(r"^- [^\n]*?（(\d+) 分钟）", body, flags=re.M)]
        assert not inner or sum(inner) == minutes, (head, inner)
    table = dict(re.findall(r"^\| (.+?) \| +(\d+) \|$", TEXT, flags=re.M))
    assert int(table["合计"]) == 90 and sum(int(v) for k, v in table.items() if k != "合计") == 90


def test_every_figure_and_script_it_names_exists():
    make = pathlib.Path(ROOT, "Makefile").read_text(encoding="utf-8")
    figs = set(re.findall(r"figures/([\w.]+\.(?:png|gif))", TEXT))
    assert figs and all(f"figures/{f}" in make for f in figs), figs - set(re.findall(r"figures/([\w.]+)", make))
    scripts = set(re.findall(r"python (\w+\.py)", TEXT))
    assert scripts and all(os.path.exists(os.path.join(ROOT, "lecture07", s)) for s in scripts)
