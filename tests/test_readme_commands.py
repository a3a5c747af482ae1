"""README.md 和 exercises/README.md 里代码块中的每条命令，在 make demo 之后照原样能跑。

代码块：```bash / ```sh 围起来的，和缩进 4 格的（```text 是输出，不算）。每行一条命令，`\\` 续行并起来，
行尾 `  # ` 之后是注释；同一块里前面的 source / cd / export 行带到后面的命令前（激活 venv 之后的 python …）。

每条命令在一个"影子仓库"里跑：临时目录里，仓库顶层的每一项都是指回仓库的符号链接，.venv 指向跑测试的这个 venv
（CI 在 .venv-3.12 里跑测试时也一样），旁边的 shared 指向仓库旁边的 ../shared。命令写下的文件（下载的 trace）
落在临时目录里。环境里去掉 make 传下来的变量（MAKEFLAGS、VENV、PY、KERNEL），命令看到的和新开的终端一样。

- 便宜的（一两秒：01、02、--list、make check）在 make test 里跑；跑一整个 03–05 的（make demo、--mine、--trace）
  在 CI（LAB_README_ALL=1）和 make test-all 里跑；
- 重建 venv（make demo PY=…）、重画全部图（make all）、测速（make bench）只在 make test-all 里跑；
- make test / make test-all 就是跑这个文件的命令，不在这里再跑；
- curl 下载：这台机器连不上时，用 ../shared 里同为 Mooncake 格式的 FAST'25 trace 代替下载的文件，后面读它的命令照跑。
每条命令：退出码是允许的（练习检查器在练习没写完时退出 1），输出里没有 Traceback。
"""
import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

from conftest import REAL_TRACE, ROOT

pytestmark = pytest.mark.spread

READMES = ("README.md", "exercises/README.md")
SELF = ("make test", "make test-all")          # 跑这个测试本身的命令
SLOW = ("make demo PY=", "make all", "make bench", "gmake all")
STATE = ("source ", ". ", "cd ", "export ")     # 带到同一块后面命令前的行
STATE_WORDS = {w.strip() for w in STATE}
TIMEOUT = 300                                   # 秒；忙的 2 核机器上 --mine --demo 3 要 20 秒
CHECK_NOT_DONE = 1                              # exercises/check.py：有练习没写完或没通过


def code_blocks(text):
    """Markdown 里的 shell 代码块，每块是一串行（```bash、```sh、``` 和缩进 4 格的；```text 等不算）。"""
    blocks, cur, fence, indented = [], None, None, False
    prev_blank = True
    for line in text.splitlines():
        if fence is not None:
            if line.strip().startswith("```"):
                if fence in ("", "bash", "sh", "shell", "console"):
                    blocks.append(cur)
                fence, cur = None, None
            else:
                cur.append(line)
            continue
        if line.strip().startswith("```"):
            fence, cur = line.strip()[3:].strip(), []
            continue
        if line.startswith("    ") and line.strip() and (indented or prev_blank) and not line.lstrip().startswith("- "):
            if not indented:
                blocks.append([])
                indented = True
            blocks[-1].append(line[4:])
        elif line.strip():
            indented = False
        prev_blank = not line.strip()
    return blocks


def commands(block):
    """一块里的命令：[(带上的状态行, 命令)]。续行并起来，去掉注释和空行。"""
    out, state, pending = [], [], ""
    for line in block:
        line = re.split(r"\s+#\s", " " + line, maxsplit=1)[0].strip() if not line.lstrip().startswith("#") else ""
        if pending:
            line = pending + " " + line
            pending = ""
        if line.endswith("\\"):
            pending = line[:-1].strip()
            continue
        if not line:
            continue
        if line.startswith(STATE):
            state.append(line)
        out.append((tuple(state[:-1] if line.startswith(STATE) else state), line))
    return out


def all_commands():
    seen = []
    for name in READMES:
        text = pathlib.Path(ROOT, name).read_text(encoding="utf-8")
        for block in code_blocks(text):
            for state, cmd in commands(block):
                if (state, cmd) not in [(s, c) for _, s, c in seen]:
                    seen.append((name, state, cmd))
    return seen


def kind(cmd):
    """self：就是跑这个测试的命令；download：curl；slow：重建 venv、画全部图、测速（只在 make test-all）；
    cheap：一两秒（make test 里跑）；其余 medium：跑一整个 04、05 之类的几秒（make test-all 和 CI 里跑）。"""
    words = cmd.split()
    if words[:2] in (["make", "test"], ["make", "test-all"]):
        return "self"
    if cmd.startswith(SLOW):
        return "slow"
    if words[0] == "curl":
        return "download"
    script = next((w for w in words if w.startswith("lecture07/")), None)
    if words[0] in STATE_WORDS or words[:2] == ["make", "check"]:
        return "cheap"
    if script and ({"--list", "--help"} & set(words) or os.path.basename(script)[:3] in ("01_", "02_")):
        return "cheap"
    return "medium"


def wanted(k):
    """这一类在这次运行里跑不跑：make test 只跑 cheap；LAB_README_ALL=1（CI）再加 medium；make test-all 全跑。"""
    if os.environ.get("LAB_TEST_ALL"):
        return True
    return k == "cheap" or (k in ("medium", "download") and bool(os.environ.get("LAB_README_ALL")))


COMMANDS = all_commands()


def test_the_readmes_show_commands():
    """两份 README 都有命令块；每一类都认得（解析坏了时这里先失败，而不是什么都不跑）。"""
    files = {name for name, _, _ in COMMANDS}
    assert files == set(READMES)
    cmds = [c for _, _, c in COMMANDS]
    assert "make demo" in cmds and any(c.startswith(".venv/bin/python lecture07/") for c in cmds), cmds
    assert any(kind(c) == "self" for c in cmds) and any(kind(c) == "cheap" for c in cmds)


@pytest.fixture(scope="module")
def shadow(tmp_path_factory):
    """影子仓库：顶层每一项链接回仓库，.venv 链接到跑测试的 venv，旁边的 shared 链接到 ../shared。"""
    top = tmp_path_factory.mktemp("readme")
    repo = top / "repo"
    repo.mkdir()
    for entry in os.listdir(ROOT):
        if entry in (".git", ".venv") or entry.startswith((".venv-", ".pytest_cache", ".ci-out")):
            continue
        os.symlink(os.path.join(ROOT, entry), repo / entry)
    os.symlink(sys.prefix, repo / ".venv")
    shared = os.path.dirname(os.path.dirname(REAL_TRACE))
    if os.path.isdir(shared):
        os.symlink(shared, top / "shared")
    for _, state, cmd in COMMANDS:          # 下载先做，读下载文件的命令才跑得了
        if kind(cmd) == "download" and wanted("download"):
            try:
                downloaded = run(repo, state, cmd.replace("curl ", "curl --max-time 60 ", 1)).returncode == 0
            except subprocess.TimeoutExpired:
                downloaded = False
            if not downloaded:
                stand_in_download(repo, cmd)
    return repo


def clean_env():
    env = {k: v for k, v in os.environ.items()
           if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES", "VENV", "PY", "KERNEL", "JOBS")}
    env.pop("VIRTUAL_ENV", None)
    return env


def run(shadow, state, cmd):
    script = "set -e\n" + "".join(f"{s}\n" for s in state) + cmd + "\n"
    return subprocess.run(["bash", "-c", script], cwd=shadow, env=clean_env(), capture_output=True, text=True,
                          encoding="utf-8", errors="replace", timeout=TIMEOUT, stdin=subprocess.DEVNULL)


def stand_in_download(shadow, cmd):
    """curl 下载不了（没有网络）时，用 ../shared 里的 Mooncake 格式 trace 代替 -o 指定的文件。"""
    target = re.search(r"-o\s+(\S+)", cmd).group(1)
    if os.path.exists(REAL_TRACE):
        shutil.copy(REAL_TRACE, shadow / target)


@pytest.mark.parametrize("readme,state,cmd", COMMANDS, ids=[f"{r}: {c}" for r, _, c in COMMANDS])
def test_command_runs_as_written(shadow, readme, state, cmd):
    k = kind(cmd)
    if k == "self":
        pytest.skip(f"{cmd} 就是跑这个测试的命令")
    if not wanted(k):
        pytest.skip("只在 make test-all 里跑" if k == "slow" else "只在 CI（LAB_README_ALL=1）和 make test-all 里跑")
    if k == "slow" and cmd.startswith("make demo PY="):
        py = cmd.split("PY=", 1)[1].split()[0]
        if shutil.which(py) is None or subprocess.run([py, "-c", ""], capture_output=True).returncode:
            pytest.skip(f"这台机器上运行不了 {py}")
    if k == "download":       # 在 shadow 里已经下载过（或代替好了）
        assert (shadow / re.search(r"-o\s+(\S+)", cmd).group(1)).stat().st_size > 0
        return
    r = run(shadow, state, cmd)
    out = r.stdout + r.stderr
    code = r.returncode
    if cmd.startswith("make ") and code == 2:     # make 失败时自己退出 2，命令的退出码在 "Error N" 里
        code = int(re.findall(r"\] Error (\d+)", r.stderr)[-1]) if "] Error " in r.stderr else code
    allowed = {0, CHECK_NOT_DONE} if "check" in cmd else {0}
    assert code in allowed, f"{cmd}：退出码 {r.returncode}\n{out[-2000:]}"
    assert "Traceback" not in out, f"{cmd}\n{out[-2000:]}"
    if code == CHECK_NOT_DONE:
        assert "还没写" in out or "没通过" in out, out[-2000:]
