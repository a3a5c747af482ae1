"""给 Makefile 用：从 figures/plot_*.py 的源码里读出它生成哪些图、依赖哪些文件，写成 make 规则。

    python figures/figdeps.py --make          # Makefile 里 $(eval ...) 的就是这个输出
    python figures/figdeps.py figures/plot_04.py   # 人看的：输出和依赖

只读源码（ast），不 import 任何东西，所以很快（make all 什么都不用做时也要跑它一次），
也不需要 numpy / matplotlib。依赖 = 这个 plot 模块，加上它 import 的、以及用 load_script("名字")
加载的 figures/、lecture07/、lab_common/ 里的模块，逐层展开；再加上 DATA_FILES 里列的数据文件。
改了某个脚本的 import，规则自动跟着变，不用改 Makefile。
"""
import ast
import glob
import os
import sys

FIGDIR = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(FIGDIR)
SEARCH = [FIGDIR, os.path.join(ROOT, "lecture07"), os.path.join(ROOT, "lab_common")]
NL = "@NL@"          # Makefile 把它换成换行（$(shell) 会把换行变成空格）


def _literal(tree, name):
    """模块顶层 name = (...) 的字面值；没有就是 ()。"""
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return tuple(ast.literal_eval(node.value))
    return ()


def _local(name):
    for d in SEARCH:
        p = os.path.join(d, name + ".py")
        if os.path.exists(p):
            return p
    return None


def imported_files(path):
    """path 以及它（递归）import / load_script 的本地模块文件，排好序。"""
    seen, todo = set(), [os.path.abspath(path)]
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        with open(p, encoding="utf-8") as f:
            tree = ast.parse(f.read(), p)
        names = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module.split(".")[0])
            elif (isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None))
                  == "load_script" and node.args and isinstance(node.args[0], ast.Constant)):
                names.add(node.args[0].value)
        todo += [q for q in map(_local, names) if q]
    return sorted(seen)


def module_info(path):
    """(输出的 PNG, 依赖的文件, 缺少的数据文件)，路径相对于仓库根目录。"""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    rel = lambda p: os.path.relpath(p, ROOT)  # noqa: E731
    outs = [rel(os.path.join(FIGDIR, f)) for f in _literal(tree, "FIGURES")]
    data = [os.path.join(FIGDIR, f) for f in _literal(tree, "DATA_FILES")]
    deps = [rel(p) for p in imported_files(path)] + [rel(p) for p in data]
    return outs, deps, [rel(p) for p in data if not os.path.exists(p)]


def make_rules():
    """每个 plot 模块一条分组规则（make ≥ 4.3 的 &:）：几张图由一次运行一起生成。"""
    lines, figs = [], []
    for path in sorted(glob.glob(os.path.join(FIGDIR, "plot_*.py"))):
        outs, deps, missing = module_info(path)
        script = os.path.relpath(path, ROOT)
        if missing:
            lines.append(f"$(if $(filter all,$(MAKECMDGOALS)),$(info make all：跳过 {script}，缺少 {' '.join(missing)}))")
            continue
        figs += outs
        lines.append(f"{' '.join(outs)} &: {' '.join(deps)} $(STAMP) ; $(VPY) {script}")
    lines.insert(0, "FIGS := " + " ".join(figs))
    return f" {NL} ".join(lines)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv == ["--make"]:
        print(make_rules())
        return 0
    for path in argv:
        outs, deps, missing = module_info(path)
        print(f"{path}\n  生成：{' '.join(outs)}\n  依赖：{' '.join(deps)}"
              + (f"\n  缺少：{' '.join(missing)}" if missing else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
