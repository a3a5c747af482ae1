"""make bench 的第二部分：每个编号脚本的篇幅预算——默认输出的行数、代码行数、观察（句子）代码的比例。

    .venv/bin/python tests/budget_lines.py

- 默认输出：COLUMNS=80、管道输出时打印的行数；01–05 和 04b 合计 ≤ 450 行；
- 代码行：去掉模块 docstring、空行和注释以后的行数，每个脚本 ≤ 550；
- 观察代码：只为造句而写的函数里的代码行，≤ 代码行的 20%。算作造句的：名字里有 observation，或以
  _sentence(s) / _text / _note / _word(s) / _phrase 结尾（造句的小帮手也照这个规矩起名，不换个名字藏起来）。
06_triton_cow_clone 只算代码（它的默认输出在没有 GPU 时另有预算：≤ 80 行，见 tests/test_06_decode_share.py）。
有一项超出时退出码为 1。不在单元测试里做（跑六个脚本要十几秒）。--code-only：只数代码，不跑脚本（几十毫秒）。
"""
import ast
import io
import os
import subprocess
import sys
import tokenize

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from lab_common.console import print_header, print_table  # noqa: E402

SCRIPTS = ("01_kv_cache_memory", "02_paged_attention", "03_sharing_and_cow", "04_prefix_caching", "04b_radix_cache",
           "05_kv_store")
CODE_ONLY = ("06_triton_cow_clone",)      # 要 GPU 的脚本：只数代码
SENTENCE_SUFFIXES = ("_sentence", "_sentences", "_text", "_note", "_word", "_words", "_phrase")
OUTPUT_BUDGET = 450        # 六个 CPU 脚本默认输出合计的行数
CODE_BUDGET = 550          # 每个脚本的代码行
OBS_SHARE = 0.20           # 观察代码占代码行的比例


def code_lines(src):
    """源码里算作"代码"的行号：不在模块 docstring 里、不是空行或纯注释。

    >>> sorted(code_lines('\"\"\"doc\"\"\"\\n# c\\n\\nx = 1\\n'))
    [4]
    """
    tree = ast.parse(src)
    doc_end = 0
    if tree.body and isinstance(tree.body[0], ast.Expr) and isinstance(tree.body[0].value, ast.Constant):
        doc_end = tree.body[0].end_lineno
    keep = set()
    skip = (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER)
    for tok in tokenize.generate_tokens(io.StringIO(src).readline):
        if tok.type not in skip:
            keep |= {n for n in range(tok.start[0], tok.end[0] + 1) if n > doc_end}
    return keep


def observation_lines(src, keep):
    """观察函数里的代码行（keep 里的行号）。"""
    out = set()
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, ast.FunctionDef) and ("observation" in node.name
                                                   or node.name.endswith(SENTENCE_SUFFIXES)):
            out |= {n for n in range(node.lineno, node.end_lineno + 1) if n in keep}
    return out


def main(argv=None):
    code_only = "--code-only" in (sys.argv[1:] if argv is None else argv)
    rows, total, ok = [], 0, True
    for name in SCRIPTS + CODE_ONLY:
        path = os.path.join(ROOT, "lecture07", name + ".py")
        with open(path, encoding="utf-8") as f:
            src = f.read()
        keep = code_lines(src)
        obs = observation_lines(src, keep)
        n_out = "-"
        if name not in CODE_ONLY and not code_only:
            out = subprocess.run([sys.executable, path], capture_output=True, text=True, check=True,
                                 env=dict(os.environ, COLUMNS="80", NO_COLOR="1")).stdout
            n_out = len(out.splitlines())
            total += n_out
        share = len(obs) / max(1, len(keep))
        good = len(keep) <= CODE_BUDGET and share <= OBS_SHARE
        ok = ok and good
        mark = "✓"
        if not good:
            mark = "✗ 超出"
        rows.append([name, n_out, f"{len(keep):,}", f"{len(obs)}（{share:.0%}）", mark])
    total_ok = code_only or total <= OUTPUT_BUDGET
    ok = ok and total_ok
    mark = "✓"
    if not total_ok:
        mark = "✗ 超出"
    shown = f"{total} / {OUTPUT_BUDGET}"
    if code_only:
        shown, mark = "-", ""
    rows.append(["合计（默认输出）", shown, "-", "-", mark])
    print_header("make bench：篇幅（默认输出 80 列；代码行 ≤ 550；观察代码 ≤ 20%）")
    print_table(["脚本", "输出行", "代码行", "观察代码", ""], rows)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
