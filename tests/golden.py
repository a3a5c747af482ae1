"""每个脚本一份标准输出（tests/golden/脚本.txt），守住措辞。改了句子以后：

    make golden                           # 重新生成全部，再看 git diff
    .venv/bin/python tests/golden.py 04   # 只重新生成 04 的
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from conftest import ROOT, run  # noqa: E402

GOLDEN = os.path.join(ROOT, "tests", "golden")
SCRIPTS = ("01_kv_cache_memory", "02_paged_attention", "03_sharing_and_cow", "04_prefix_caching",
           "04b_radix_cache", "05_kv_store")


def path(script):
    return os.path.join(GOLDEN, script + ".txt")


def main(only):
    for script in SCRIPTS:
        if only and not any(script.startswith(o) for o in only):
            continue
        code, out, err = run(script)
        if code != 0:
            print(f"{script}: 退出码 {code}，没有写入：{err.strip()[-300:]}", file=sys.stderr)
            return 1
        with open(path(script), "w", encoding="utf-8", newline="\n") as f:
            f.write(out)
        print(f"写好 tests/golden/{script}.txt（{len(out.splitlines())} 行）")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
