"""每个脚本一份"标准输出"：默认和 --more 各一个文件（tests/golden/），守住句子的措辞。

    make golden                           # 重新生成全部（改了句子之后，看一眼 git diff 再提交）
    .venv/bin/python tests/golden.py 02   # 只重新生成 02 的两份

tests/test_golden.py（06 在 tests/test_06_decode_share.py 里）把同样的命令的输出和文件逐字比较（mismatch）。输出是管道上的纯文本、80 列（console 的规则），
所以同一条命令逐字节相同。06 在没有 GPU 的机器上走 CPU 的路（读保存的测量），这里记下的就是那条路的输出。
"""
import difflib
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LECTURE = os.path.join(ROOT, "lecture07")
GOLDEN = os.path.join(ROOT, "tests", "golden")
SCRIPTS = ("01_kv_cache_memory", "02_paged_attention", "03_sharing_and_cow", "04_prefix_caching",
           "04b_radix_cache", "05_kv_store", "06_triton_cow_clone")
MODES = {"": [], ".more": ["--more"]}       # 文件名后缀 → 参数


def cases():
    """[(脚本, 后缀, 参数)]：每个脚本的默认和 --more。"""
    return [(s, suffix, args) for s in SCRIPTS for suffix, args in MODES.items()]


def path(script, suffix):
    return os.path.join(GOLDEN, f"{script}{suffix}.txt")


def mismatch(script, suffix, got):
    """got 和标准文件逐字相同：None；否则一段说明（文件不在，或前 60 行的 unified diff）。"""
    want_path = path(script, suffix)
    if not os.path.exists(want_path):
        return f"没有 {want_path}：make golden"
    with open(want_path, encoding="utf-8") as f:
        want = f.read()
    if got == want:
        return None
    diff = "".join(list(difflib.unified_diff(want.splitlines(True), got.splitlines(True), want_path, "现在的输出"))[:60])
    return f"输出和标准文件不同（改了句子就 make golden，再看 git diff）：\n{diff}"


def run(script, args):
    """在新的解释器里跑一个脚本（和学生在终端里敲的命令一样，只是输出进管道），返回 (退出码, stdout, stderr)。"""
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "FORCE_COLOR")}
    env.update(NO_COLOR="1", PYTHONHASHSEED="0", PYTHONIOENCODING="utf-8")
    p = subprocess.run([sys.executable, os.path.join(LECTURE, script + ".py"), *args], cwd=LECTURE, env=env,
                       capture_output=True, text=True, encoding="utf-8", timeout=600)
    return p.returncode, p.stdout, p.stderr


def main(argv):
    only = argv[1:]
    todo = [c for c in cases() if not only or any(c[0].startswith(o) for o in only)]
    os.makedirs(GOLDEN, exist_ok=True)
    for script, suffix, args in todo:
        code, out, err = run(script, args)
        if code != 0:
            print(f"{script} {' '.join(args)}: 退出码 {code}，没有写入：{err.strip().splitlines()[-1:]}", file=sys.stderr)
            return 1
        with open(path(script, suffix), "w", encoding="utf-8", newline="\n") as f:
            f.write(out)
        print(f"写好 {os.path.relpath(path(script, suffix), ROOT)}（{len(out.splitlines())} 行）")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
