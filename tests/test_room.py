"""课堂上的 --step：在 80 列 × 30 行的伪终端里跑每个脚本、每次提示都按回车。每一屏（清屏到"回车看下一个演示"）
不超过 30 行、每行不超过 80 列；回车之前的一屏（标题和"想一想"）不含这个演示的观察里说的数；去掉只在终端上才有的
（清屏、问题和它的回车、"计算中…"），剩下的和管道里的输出——tests/golden/ 里的标准文件——逐字相同。"""
import difflib
import os
import re
import select
import struct
import sys
import time

import pytest

from conftest import LECTURE
from golden import SCRIPTS, path
from lab_common.show import cols

pty = pytest.importorskip("pty", reason="没有伪终端（Windows）")
fcntl = pytest.importorskip("fcntl")
termios = pytest.importorskip("termios")

ROWS, COLUMNS = 30, 80
CLEAR = "\033[2J\033[H"
NUMBER = re.compile(r"(?<![\w.§'])\d[\d,]*(?:\.\d+)?(?!\w)")      # 不算 fp16、v3、§4.2、FAST'25 里的数字
CITATION = re.compile(r"(演示|表|图|式|练习) \d+")                  # 引用的编号不是答案
KNOWN = {}   # 回车之前就印出观察里的数、又确实是题面的一部分的：(脚本, 演示) → 这些数


def step_transcript(script, timeout=120):
    """在 ROWS × COLUMNS 的伪终端里跑 script --step，每出现一次"（回车"就按一次回车；返回终端收到的全部文字。"""
    pid, fd = pty.fork()
    if pid == 0:                                   # 子进程：就是学生敲的那条命令
        os.environ.update(COLUMNS=str(COLUMNS), LINES=str(ROWS), PYTHONIOENCODING="utf-8")
        os.execv(sys.executable, [sys.executable, os.path.join(LECTURE, script + ".py"), "--step"])
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLUMNS, 0, 0))
    data, pressed, deadline = b"", 0, time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 1)
        if not ready:
            continue
        try:
            chunk = os.read(fd, 65536)
        except OSError:                            # 子进程退出、伪终端关了
            break
        if not chunk:
            break
        data += chunk
        prompts = data.decode("utf-8", "ignore").count("（回车")
        if prompts > pressed:
            os.write(fd, b"\n")
            pressed = prompts
    else:
        os.kill(pid, 9)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, f"{script} --step 没有正常结束"
    return data.decode("utf-8")


def screens(text):
    """按清屏切成一屏一屏；回车符（"计算中…"被表盖住）按终端的样子处理：后写的从行首盖住先写的。"""
    out = []
    for chunk in text.split(CLEAR)[1:]:
        lines = []
        for raw in chunk.replace("\r\n", "\n").split("\n"):
            parts = raw.split("\r")
            line = parts[0]
            for p in parts[1:]:
                line = p + line[len(p):]
            lines.append(line)
        end = next((i + 1 for i, x in enumerate(lines) if "（回车看下一个演示）" in x), len(lines))
        lines = lines[:end]
        while lines and not lines[-1].strip():
            lines.pop()
        out.append(lines)
    return out


def piped(text):
    """终端记录去掉只在终端上才有的：清屏、"想一想"到它的回车、"（计算中…）"、"（回车看下一个演示）"和它的回车。"""
    text = re.sub(r"想一想：.*?（回车看结果）\n", "", text.replace("\r\n", "\n"), flags=re.S)
    return text.replace(CLEAR, "").replace("（计算中…）\r", "").replace("（回车看下一个演示）\n", "")


@pytest.mark.parametrize("script", SCRIPTS)
def test_step_screens_fit_the_room_and_keep_the_answer_for_after_enter(script):
    transcript = step_transcript(script)
    with open(path(script), encoding="utf-8") as f:
        want = f.read()
    diff = "".join(list(difflib.unified_diff(want.splitlines(True), piped(transcript).splitlines(True), "标准", "现在"))[:60])
    assert piped(transcript) == want, "输出和标准文件不同（改了句子就 make golden）：\n" + diff
    shown = screens(transcript)
    assert shown, f"{script} --step 没有清屏"
    leaks = {}
    for i, lines in enumerate(shown, 1):
        assert len(lines) <= ROWS, f"{script} 演示 {i} 的一屏有 {len(lines)} 行"
        wide = [x for x in lines if cols(x) > COLUMNS]
        assert not wide, f"{script} 演示 {i} 有超过 {COLUMNS} 列的行：{wide[0]}"
        enter = next(k for k, x in enumerate(lines) if "（回车看结果）" in x)
        before = CITATION.sub("", " ".join(lines[:enter]))
        claims = " ".join(re.sub(r"^  \d\. ", "", x) for x in lines[lines.index("观察") + 1:] if "（回车" not in x)
        same = set(NUMBER.findall(before)) & set(NUMBER.findall(claims))
        if same:
            leaks[script, i] = same
    assert leaks == {k: v for k, v in KNOWN.items() if k[0] == script}, f"回车之前就印出了观察里的数：{leaks}"
