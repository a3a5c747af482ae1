"""--step（投影仪上讲课）：终端上先清屏、印标题和表、问一句，回车后才印观察；02、03 的机制一步一帧。
管道输出和不加 --step 时逐字节相同；提示处 Ctrl-C 退出码 130、不打印 traceback。GIF 两次写出逐字节相同。"""
import builtins

import pytest

from conftest import call_main, run_main, share_slow_calls
from lab_common import console
from lab_common.frames import Cell, Frame, Row, changed_cells, play, render, save_gif
from lab_common.script_tools import load_script

CLEAR = "\x1b[H\x1b[2J"


@pytest.mark.parametrize("name", ["02_paged_attention", "03_sharing_and_cow"])
def test_piped_step_output_is_byte_identical(name):
    m = load_script(name)
    with pytest.MonkeyPatch.context() as mp:
        share_slow_calls(m, mp, name)            # 03 演示 1 的 savings 和 run_main 那一遍共用（只改打印，不改算什么）
        rc, out, err = call_main(m, ["--step"])
    assert rc == 0 and out == run_main(name)[0]
    assert CLEAR not in out and "回车" not in out


@pytest.fixture
def terminal(monkeypatch):
    """假装 stdin、stdout 都是终端：每次 input() 记一笔（当作按了回车）。返回记下的提示次数的列表。"""
    presses = []
    monkeypatch.setattr(console, "stepping", lambda: console.STEP)
    monkeypatch.setattr(builtins, "input", lambda *a: presses.append(1) or "")
    return presses


def test_step_reveals_observations_after_the_table(terminal):
    m = load_script("03_sharing_and_cow")
    rc, out, _ = call_main(m, ["--step", "--demo", "2"])
    assert rc == 0 and console.STEP is False                 # 跑完复原
    frames = run_main("03_sharing_and_cow")[1][2]["frames"]
    assert len(terminal) == len(frames) + 1                  # 每帧一次回车，观察之前一次
    last = out.rindex(CLEAR)                                 # 动画放完清屏：标题、表、问题、提示、观察
    tail = out[last:]
    title, table, ask = tail.index("演示 2"), tail.index("a 块表"), tail.index("想一想：写时复制的那一刻")
    assert title < table < ask < tail.index("（回车看观察）") < tail.index("观察\n")
    assert out.count("第 1/5 步") == 1 and "写时复制：整块拷到新块" in out


def test_step_waits_between_demos_and_clears_each(terminal):
    rc, out, _ = call_main(load_script("02_paged_attention"), ["--step"])
    assert rc == 0
    assert out.count("（回车看下一个演示）") == 2 and out.count("（回车看观察）") == 3
    for k in (2, 3):                                         # 每个演示从干净的一屏开始
        assert out.index(f"演示 {k}：") > out.rindex(CLEAR, 0, out.index(f"演示 {k}："))


def test_ctrl_c_at_the_prompt_exits_130_with_the_usual_line(monkeypatch, capsys):
    """提示处按 Ctrl-C：和别处一样，lab_common.endings 印一行"已中断"、退出码 130（以前不声不响地退出）。"""
    from lab_common import endings
    monkeypatch.setattr(console, "stepping", lambda: True)

    def interrupt(*a):
        raise KeyboardInterrupt
    monkeypatch.setattr(builtins, "input", interrupt)
    assert endings.ended_quietly(lambda: console.wait_enter("（回车看观察）"), "x.py") == 130
    assert capsys.readouterr().err == "x.py: 已中断（Ctrl-C）\n"                 # 不是终端：前面不空一行


def test_question_is_the_docstring_question_without_its_answer():
    assert console.question_of("块该多大？小块浪费少，但块表长。") == "块该多大？"
    assert console.question_of("怎样认出这段前缀？——链式块哈希。") == "怎样认出这段前缀？"
    assert console.question_of("没有问号的标题") is None


# ---------------------------------------------------------------- 帧
def tiny_frames():
    a = Frame("一", (Row("池", (Cell("0", "A"), Cell("·"))),))
    b = Frame("二", (Row("池", (Cell("0", "A"), Cell("1", "B"))), Row("B 的块表", (Cell("1", "B"),))),
              note="B 拿到新块 1", legend=(("B", "序列 B"),))
    return [a, b]


def test_changed_cells_are_the_ones_whose_text_or_group_moved():
    a, b = tiny_frames()
    assert changed_cells(None, a) == set()
    assert changed_cells(a, b) == {("池", 1), ("B 的块表", 0)}
    lines = [t.plain for t in render([a, b], 1)]
    assert lines[0] == "第 2/2 步 · 二" and "B 拿到新块 1" in lines


def test_render_fits_the_terminal_width():
    """80 列的投影仪：12 个块折成两段、每段 6 个，每个块号都在；长标签（含中文，占 2 列）截成"…"，格子原样。
    宽终端上一行放下、标签完整。"""
    from rich.cells import cell_len
    pool = Frame("池", (Row("ref_count", tuple(Cell(f"{b}/16", "A") for b in range(12))), Row("A 的块表", (Cell("0", "A"),))))
    lines = [t.plain for t in render([pool], 0, term_width=80)]
    assert max(cell_len(x) for x in lines) <= 80
    bands = [x.split() for x in lines if x.startswith("ref_count")]
    assert bands == [["ref_count"] + [f"{b}/16" for b in range(6)], ["ref_count"] + [f"{b}/16" for b in range(6, 12)]]
    assert sum(x.startswith("A 的块表") for x in lines) == 1          # 只有一格的行不在第二段重复
    wide = [t.plain for t in render([pool], 0, term_width=120)]
    assert [x.split() for x in wide if x.startswith("ref_count")] == [["ref_count"] + [f"{b}/16" for b in range(12)]]

    edge = "翻译成法语：sea otter => loutre de mer peppermint => menthe poivrée"
    tree = Frame("树", (Row(edge, (Cell("13 个", "token"), Cell("时刻 0", "时刻"))), Row("cheese =>", (Cell("2 个"),), 1)),
                 legend=(("token", "边上的 token 数"), ("时刻", "最近访问（第几次 insert）")))
    lines = [t.plain for t in render([tree], 0, term_width=60)]
    assert max(cell_len(x) for x in lines) <= 60
    assert lines[1].startswith("翻译成法语：sea otter") and "… " in lines[1] and lines[1].endswith(" 13 个    时刻 0 ")
    assert lines[2].startswith("  cheese =>") and "2 个" in lines[2]
    assert [t.plain for t in render([tree], 0, term_width=200)][1].startswith(edge)


def test_play_does_nothing_off_a_terminal(capsys):
    console.STEP = True
    try:
        play(tiny_frames())                                  # capsys 不是终端
    finally:
        console.STEP = False
    assert capsys.readouterr().out == ""


def test_gif_bytes_repeat(tmp_path):
    from PIL import Image
    a = save_gif(tiny_frames(), str(tmp_path / "a.gif"))
    b = save_gif(tiny_frames(), str(tmp_path / "b.gif"))
    with open(a, "rb") as fa, open(b, "rb") as fb:
        assert fa.read() == fb.read()
    with Image.open(a) as im:
        assert im.n_frames == 2 and im.size == (1333, 750)


def test_cow_frames_follow_the_pool():
    """03 演示 2 的帧是块池真实的快照：fork 后 ref_count 2，写时复制后共享的最后一块降回 1。"""
    d = run_main("03_sharing_and_cow")[1][2]
    rc = [[c.text for c in f.rows[3].cells] for f in d["frames"]]
    last, new = d["last_blk"], d["new_blk"]
    assert rc[1][last] == "2" and rc[3][last] == "1" and rc[3][new] == "1"
    assert "写时复制" in d["frames"][3].note and f"块 {last}" in d["frames"][3].note
    assert [c.text for c in d["frames"][-1].rows[-1].cells] == [str(b) for b in d["b_blocks"]]


def test_block_table_frames_grow_with_the_table():
    d = run_main("02_paged_attention")[1][1]
    frames = d["frames"]
    assert len(frames) == len(d["prompts"]) + d["n_decode"]
    final = {r.label: [c.text for c in r.cells] for r in frames[-1].rows}
    for n, t in d["tables"].items():
        assert final[f"{n} 的块表"] == [str(b) for b in t]
