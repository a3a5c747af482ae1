"""--mine：用学生在 exercises/ 里写的函数跑讲义自己的演示，并和参考实现逐个数比较。

六个练习各对应讲义里的一个（或两个）函数 / 类（EXERCISES）。"写好了" = 在一个很小的输入上调用它，
不抛 NotImplementedError（PROBES）。绑定的办法：把所有已加载的模块里"就是参考对象"的属性（以及模块级
字典里的值，比如 CACHE_POLICIES["lru"]）换成学生的，跑完再换回来——所以 `from paged_kv import gather_kv`
之类的引用、paged_step 里对 gather_kv 的调用，都用上了学生的版本。检查器（exercises/check.py）也用这里的
加载和绑定。

    run_with_mine(run, "04_prefix_caching")    # run()：跑选中的演示（打印），返回 0

先用参考实现跑一遍（输出不显示，只留着比较），再用学生的代码跑一遍（照常打印），最后列出哪些行、
哪些数和参考不同，差多少（单位不同的数先换成同一个单位再减）；完全相同时说"和参考实现完全一致"。
"""
import contextlib
import difflib
import importlib
import importlib.util
import io
import os
import re
import signal
import sys
import threading
import time
import traceback
from dataclasses import dataclass

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LECTURE = os.path.join(ROOT, "lecture07")
EXERCISES_ENV = "LAB_EXERCISES_DIR"      # 练习文件放在别的目录时（测试、助教批改）用这个环境变量指过去
HARD_SECONDS = 10       # 学生的代码一次跑了这么久还没完就停下（多半是死循环）；只在有 SIGALRM 的系统（Linux、macOS）上
SHOW_PRINTS = 5         # 学生代码里留下的 print：报告里显示前几行

# 讲义里按概念命名的模块 → 现在的模块名（练习和检查器只用左边的名字；模块改名时只改这里）
MODULES = {
    "paged_kv": "paged_kv",                          # 块池、块表、fork、写时复制、gather_kv、kv_bytes_per_token
    "prefix_match": "kv_store.prefix_match",         # block_hashes
    "prefix_match_lookup": "kv_store.prefix_match",  # match_prefix
    "tiers": "kv_store.tiers",                           # ModelSpec（讲义的模型表）
    "eviction": "kv_store.eviction",                 # BlockCache、LRUCache、S3FIFOCache……
    "radix_tree": "kv_store.radix_tree",                     # RadixCache、RadixNode
    "traces": "kv_store.traces",                            # make_trace
    "transformer_lab": "lab_common.transformer_lab",
}


def lecture_module(concept):
    """讲义的一个模块（按概念的名字，见 MODULES）。"""
    setup_path()
    return importlib.import_module(MODULES[concept])


@dataclass(frozen=True)
class Exercise:
    number: int
    stem: str            # exercises/ 里的文件名（不含 .py）
    title: str
    scripts: tuple       # 用到它的脚本（--mine 时换上学生的代码；实测过：tests/test_exercises.py）
    names: tuple         # ((学生文件里的名字, 参考实现所在的模块的概念名), ...)：名字两边相同
    try_args: str = ""   # 检查通过以后建议跑的演示（"--demo 4"）
    optional: tuple = ()  # 选做的名字：没写不算"还没写"，写了就检查、--mine 也换上


EXERCISES = {e.number: e for e in (
    Exercise(1, "ex1_kv_bytes", "每个 token 的 KV 字节数（MHA、GQA、MQA、MLA）", ("01_kv_cache_memory",),
             (("kv_bytes_per_token", "paged_kv"),)),
    Exercise(2, "ex2_gather_kv", "按块表取回 K/V 再做注意力", ("02_paged_attention", "03_sharing_and_cow",
                                                             "04_prefix_caching"),
             (("gather_kv", "paged_kv"),), "--demo 2"),
    Exercise(3, "ex3_cow", "fork、写时复制、free：ref_count 的账", ("03_sharing_and_cow", "02_paged_attention",
                                                                  "04_prefix_caching", "06_triton_cow_clone"),
             (("PagedSequence", "paged_kv"),)),
    Exercise(4, "ex4_block_hashes", "链式块哈希和前缀匹配", ("04_prefix_caching", "04b_radix_cache"),
             (("block_hashes", "prefix_match"), ("match_prefix", "prefix_match_lookup")), "--demo 1"),
    Exercise(5, "ex5_lru", "LRU 淘汰策略（BlockCache 的子类）；选做 S3-FIFO",
             ("04_prefix_caching", "04b_radix_cache", "05_kv_store"),
             (("LRUCache", "eviction"), ("S3FIFOCache", "eviction")), "--demo 4", optional=("S3FIFOCache",)),
    Exercise(6, "ex6_radix", "基数树的 match 和 insert（含拆节点）；选做淘汰", ("04b_radix_cache",),
             (("RadixCache", "radix_tree"),)),
)}


def setup_path():
    """仓库根目录（lab_common）和 lecture07/（paged_kv 等）放进 sys.path，和脚本自己做的一样。"""
    for p in (LECTURE, ROOT):
        if p not in sys.path:
            sys.path.insert(0, p)


def reference(number):
    """练习 number 的参考实现：{名字: 讲义里的那个对象}。"""
    setup_path()
    return {name: getattr(lecture_module(mod), name) for name, mod in EXERCISES[number].names}


def exercises_dir():
    return os.environ.get(EXERCISES_ENV) or os.path.join(ROOT, "exercises")


def exercise_path(number, directory=None):
    return os.path.join(directory or exercises_dir(), EXERCISES[number].stem + ".py")


def short_path(path):
    """仓库里的文件写成相对路径（exercises/ex5_lru.py），别处的写绝对路径。"""
    rel = os.path.relpath(os.path.abspath(path), ROOT)
    if rel.startswith(".."):
        return path
    return rel.replace(os.sep, "/")


def where(exc, path=None):
    """异常发生在哪一行：优先找 path（学生的文件）里最深的一帧；'ex5_lru.py 第 17 行'。"""
    frames = traceback.extract_tb(exc.__traceback__)
    if path is not None:
        mine = [f for f in frames if os.path.abspath(f.filename) == os.path.abspath(path)]
        if mine:
            frames = mine
    if isinstance(exc, SyntaxError) and exc.lineno:
        return f"{os.path.basename(exc.filename or path or '?')} 第 {exc.lineno} 行"
    if not frames:
        return "?"
    return f"{os.path.basename(frames[-1].filename)} 第 {frames[-1].lineno} 行"


def one_line(exc, path=None):
    """'IndexError: list index out of range（ex5_lru.py 第 17 行）'：学生看到的一行错误。"""
    msg = " ".join(str(exc).split())
    if len(msg) > 120:
        msg = msg[:117] + "..."
    head = type(exc).__name__ + (f": {msg}" if msg else "")
    return f"{head}（{where(exc, path)}）"


def load_module(number, directory=None):
    """加载学生的练习文件：返回 (模块, None)，文件有错时返回 (None, 一行错误)。不注册进 sys.modules。"""
    setup_path()
    path = exercise_path(number, directory)
    if not os.path.exists(path):
        return None, f"找不到 {short_path(path)}"
    spec = importlib.util.spec_from_file_location(f"exercise_{number}_{EXERCISES[number].stem}", path)
    mod = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(mod)
    except Exception as e:                       # 语法错、import 错：一行说清，不要 traceback
        return None, f"{short_path(path)} 加载出错：{one_line(e, path)}"
    return mod, None


# ---------------------------------------------------------------- 调用学生的代码：限时、收起 print
class CaseTimeout(BaseException):
    """学生的代码跑太久（time_limit 的 SIGALRM）：BaseException，学生代码里的 except Exception 拦不住它。
    given：检查器当时的调用（checking.mine 填上；探针和 --mine 的演示里是 None）。"""
    given = None


def _on_alarm(signum, frame):
    raise CaseTimeout()


@contextlib.contextmanager
def time_limit(seconds):
    """with 里的代码跑了 seconds 秒还没完：抛 CaseTimeout。没有 SIGALRM（Windows）或不在主线程时不限时。
    学生代码的每一次调用（探针、检查器的用例、--mine 的演示）都在它里面：死循环不会让人干等。"""
    if not hasattr(signal, "SIGALRM") or threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


class Printed(io.TextIOBase):
    """检查时学生代码 print 的东西：只数行数、留前 SHOW_PRINTS 行（十几万行的调试输出也不占内存、不刷屏）。"""

    def __init__(self):
        super().__init__()
        self.first, self.n_lines, self._tail = [], 0, ""

    def writable(self):
        return True

    def write(self, s):
        if len(self.first) >= SHOW_PRINTS:          # 前几行已经留够：只数行（十几万次 print 也不拖慢用例）
            n = s.count("\n")
            self.n_lines += n
            self._tail = s[s.rfind("\n") + 1:][:200] if n else (self._tail + s)[:200]
            return len(s)
        *done, tail = (self._tail + s).split("\n")
        self._tail = tail[:200]                      # 没有换行的一长串：只留开头
        self.n_lines += len(done)
        room = SHOW_PRINTS - len(self.first)
        if room > 0:
            self.first += [line[:200] for line in done[:room]]
        return len(s)

    @property
    def count(self):
        """print 了几行（最后一行没有换行也算）。"""
        return self.n_lines + (1 if self._tail else 0)

    def shown(self):
        """报告里显示的前几行。"""
        lines = self.first + [self._tail] if self._tail else self.first
        return lines[:SHOW_PRINTS]


    def absorb(self, other):
        """把另一个用例 print 的并进来：行数相加，最先的几行接着补。"""
        self.first = (self.shown() + other.shown())[:SHOW_PRINTS]
        self.n_lines, self._tail = self.count + other.count, ""


def print_report(printed, indent="  "):
    """'你的代码 print 了 123,437 行……' 和最先的几行；没 print 过时 []。"""
    if printed.count == 0:
        return []
    shown = printed.shown()
    out = [f"{indent}你的代码 print 了 {printed.count:,} 行（检查时收起来了，不算在结果里；"
           f"检查完删掉调试用的 print）。最先的 {len(shown)} 行："]
    return out + [f"{indent}  | {line}" for line in shown]


def hang_text(exc, path, what):
    """'what跑了 10 秒还没完，停下了：多半是死循环……停在 ex3_cow.py 第 30 行：PagedSequence.reserve(...)'。"""
    call = _call_of(exc, path)
    stop = f"停在 {where(exc, path)}" + (f"：{call}" if call else "")
    return (f"{what}跑了 {HARD_SECONDS} 秒还没完，停下了：多半是死循环（while 循环里的下标或长度没有前进，"
            f"或者 continue 跳过了前进的那一句）。{stop}")


# ---------------------------------------------------------------- 写好了吗：在很小的输入上试一下
def _probe_gather(f):
    import numpy as np
    from types import SimpleNamespace
    k = np.arange(4.0).reshape(1, 2, 1, 2, 1)    # (层, 块, KV 头, 块内位置, 头维度)
    f(SimpleNamespace(k=k, v=-k, block_size=2), 0, [1, 0], 3)


def _probe_sequence(cls):
    from paged_kv import BlockPool
    pool = BlockPool(None, n_blocks=4, block_size=2, copy_fn=lambda src, dst: None)
    a = cls(pool)
    a.reserve(3)
    a.length = 3
    b = a.fork()
    b.reserve(1)
    b.free()
    a.free()


def _probe_lru(cls):
    c = cls(2)
    evict = c.evict

    def once():                      # 一块都不删的 evict 会让 BlockCache.insert 永远循环下去：先拦住
        n = len(c.entries)
        out = evict()
        if len(c.entries) >= n:
            raise RuntimeError("evict() 没有从 self.entries 里删掉任何块（BlockCache.insert 会一直调用它）")
        return out
    c.evict = once
    c.insert([1, 2, 3])
    c.match([1])


def _probe_radix(cls):
    t = cls()
    t.insert([1, 2])
    t.insert([1, 3])
    t.match([1, 2])


PROBES = {
    "kv_bytes_per_token": lambda f: f("MHA", 1, 1, 2),
    "gather_kv": _probe_gather,
    "PagedSequence": _probe_sequence,
    "block_hashes": lambda f: f([1, 2, 3], 2),
    "match_prefix": lambda f: f(["a"], {"a"}),
    "LRUCache": _probe_lru,
    "S3FIFOCache": _probe_lru,
    "RadixCache": _probe_radix,
}


@dataclass
class Impl:
    """一个练习的实现：objs = {名字: 对象}（写好了的），status = {名字: "写好了" / "还没写" / 一行错误}。"""
    number: int
    objs: dict
    status: dict
    path: str = None
    error: str = None     # 文件加载不了

    @property
    def written(self):
        return [n for n, s in self.status.items() if s == "写好了"]

    @property
    def problem(self):
        """文件加载不了、少了名字、或在很小的输入上就出错：第一条这样的一行说明；没有时 None。"""
        if self.error:
            return self.error
        for s in self.status.values():
            if s not in ("写好了", "还没写"):
                return s
        return None

    @property
    def untouched(self):
        return self.error is None and all(s == "还没写" for s in self.status.values())


def student_impl(number, directory=None):
    """学生的实现：每个名字先在 PROBES 的小输入上试一下，分成 写好了 / 还没写 / 出错。"""
    mod, err = load_module(number, directory)
    path = exercise_path(number, directory)
    if mod is None:
        return Impl(number, {}, {}, path, err)
    objs, status = {}, {}
    ref = reference(number)
    for name, home in EXERCISES[number].names:
        obj = getattr(mod, name, None)
        if obj is None and name in EXERCISES[number].optional:
            status[name] = "还没写"
            continue
        if obj is None:
            status[name] = f"{short_path(path)} 里没有 {name}"
            continue
        if obj is ref[name]:
            status[name] = f"{short_path(path)} 里的 {name} 是从 {MODULES[home]} import 的讲义实现，不是你写的"
            continue
        objs[name] = obj
        try:
            with time_limit(HARD_SECONDS), contextlib.redirect_stdout(Printed()):    # 探针里的 print 不显示
                PROBES[name](obj)
            status[name] = "写好了"
        except NotImplementedError:
            status[name] = "还没写"
        except CaseTimeout as e:                 # 不再跑它的用例：每个都会再等 HARD_SECONDS 秒
            del objs[name]
            status[name] = hang_text(e, path, f"{name} 在一个很小的输入上")
        except Exception as e:
            status[name] = f"{name} 在一个很小的输入上就出错：{one_line(e, path)}"
    return Impl(number, objs, status, path)


def reference_impl(number):
    ref = reference(number)
    return Impl(number, ref, {n: "写好了" for n in ref})


# ---------------------------------------------------------------- 绑定：把参考对象换成学生的
def _skip(name):
    return name.startswith("exercise_") or name.startswith("exercises") or name == __name__


def _lecture_modules():
    """[(名字, 模块)]：sys.modules 里的，加上 load_script 按文件加载的脚本（它们不在 sys.modules 里）。"""
    mods = [(n, m) for n, m in list(sys.modules.items()) if m is not None and not _skip(n)]
    tools = sys.modules.get("lab_common.script_tools")
    seen = {id(m) for _, m in mods}
    for m in list(getattr(tools, "_loaded", {}).values()):
        if id(m) not in seen:
            mods.append((m.__name__, m))
    return mods


@contextlib.contextmanager
def bind(pairs):
    """pairs：[(参考对象, 换成的对象)]。所有已加载模块里"是参考对象"的全局名字和模块级字典里的值都换掉；
    with 结束时原样换回。之后才 import 的模块从已经换过的模块里拿名字，也拿到换上的对象。"""
    swaps = [(ref, new) for ref, new in pairs if ref is not new]
    undo = []
    try:
        for mname, mod in _lecture_modules():
            space = getattr(mod, "__dict__", None)
            if not isinstance(space, dict):
                continue
            for key, val in list(space.items()):
                for ref, new in swaps:
                    if val is ref:
                        undo.append((space, key, ref))
                        space[key] = new
                if type(val) is dict and not key.startswith("__"):
                    for k2, v2 in list(val.items()):
                        for ref, new in swaps:
                            if v2 is ref:
                                undo.append((val, k2, ref))
                                val[k2] = new
        yield
    finally:
        for space, key, ref in reversed(undo):
            space[key] = ref


def bind_impls(impls):
    """{练习号: Impl} → [(参考对象, 学生的对象, (练习号, 名字))]，只取写好了的名字。"""
    out = []
    for number, impl in impls.items():
        ref = reference(number)
        out += [(ref[n], impl.objs[n], (number, n)) for n in impl.written]
    return out


@contextlib.contextmanager
def watch_calls(objs):
    """objs：[对象]。with 里把每个对象换成"被调用（函数）或被实例化（类）时记一笔"的样子，yield
    (换好的对象列表, used)，used() → 每个对象有没有被用到。标记放在共享内存里：演示 fork 出的子进程里
    用到的也算。类不换身份（只临时包住 __init__），函数换成包装函数。"""
    import functools
    from multiprocessing.sharedctypes import RawArray
    flags = RawArray("b", max(1, len(objs)))
    swapped, undo = [], []
    for i, obj in enumerate(objs):
        if isinstance(obj, type):
            had, old = "__init__" in vars(obj), obj.__init__

            def init(self, *args, _old=old, _i=i, **kwargs):
                flags[_i] = 1
                _old(self, *args, **kwargs)
            obj.__init__ = init
            undo.append((obj, had, old))
            swapped.append(obj)
        else:
            def call(*args, _f=obj, _i=i, **kwargs):
                flags[_i] = 1
                return _f(*args, **kwargs)
            swapped.append(functools.wraps(obj)(call))
    try:
        yield swapped, lambda: [bool(f) for f in flags[:len(objs)]]
    finally:
        for cls, had, old in undo:
            if had:
                cls.__init__ = old
            else:
                del cls.__init__


# ---------------------------------------------------------------- --mine
class _Tee(io.TextIOBase):
    """一边照常写到 out（None：不显示，参考那一遍），一边留一份给比较。不是终端（isatty False、没有 fileno）：
    表格按固定的 80 列排，两遍完全同样排版；演示也不会 fork 出子进程绕过它直接写文件。"""

    def __init__(self, out=None):
        self.out, self.buf = out, io.StringIO()

    @property
    def encoding(self):
        return getattr(self.out, "encoding", None) or "utf-8"

    def writable(self):
        return True

    def write(self, s):
        if self.out is not None:
            self.out.write(s)
        return self.buf.write(s)

    def flush(self):
        # 垃圾回收时 io.IOBase 会 close()→flush()；那时 out（比如 pytest 的捕获文件）可能已经关了
        if self.out is not None and not getattr(self.out, "closed", False):
            self.out.flush()

    def close(self):
        """只关自己，不关 out：out 是调用者的（通常是 sys.stdout）。"""
        self.out = None
        super().close()

    def isatty(self):
        return False

    def reconfigure(self, **kwargs):
        """脚本为 GBK 之类的终端调 sys.stdout.reconfigure(errors=...) 时，转给真正的输出。"""
        if self.out is not None and hasattr(self.out, "reconfigure"):
            self.out.reconfigure(**kwargs)


def _clear_caches():
    """讲义模块里带 cache_clear 的函数（functools.lru_cache）清空：两遍不能共用上一遍算好的结果。"""
    for _, mod in _lecture_modules():
        path = os.path.abspath(getattr(mod, "__file__", None) or "")
        if os.path.dirname(path) not in (LECTURE, os.path.join(ROOT, "lab_common")):
            continue
        for val in list(vars(mod).values()):
            if callable(val) and hasattr(type(val), "cache_clear"):     # functools.lru_cache / cache 包出来的函数
                val.cache_clear()


def _run_captured(run, out):
    """run() 的标准输出写到 out；返回 run 的返回值。标准输入换成空的：--step 不会在看不见的参考那一遍里等回车。"""
    _clear_caches()
    stdin = sys.stdin
    sys.stdin = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            return run()
    finally:
        sys.stdin = stdin


def student_impls(directory=None):
    return {n: student_impl(n, directory) for n in EXERCISES}


def script_exercises(script_name):
    """这个脚本用到的练习号（EXERCISES 的 scripts）。"""
    return [n for n, e in EXERCISES.items() if script_name in e.scripts]


def mine_line(impls, script_name):
    """一行："--mine：这个脚本用到练习 4、5；用了你在 exercises/ 里写的 LRUCache（练习 5）；练习 4 还没写，用参考实现。"。
    只说这个脚本用到的练习：别的练习写没写，和这次的输出无关。"""
    here = script_exercises(script_name)
    used = [f"{name}（练习 {n}）" for n in here if n in impls for name in impls[n].written]
    left = [n for n in here if not (n in impls and (impls[n].written or impls[n].problem))]   # 出错的另说，不算"还没写"
    broken = [f"练习 {n}（{impls[n].problem}）" for n in here if n in impls and impls[n].problem]
    paths = [i.path for i in impls.values() if i.path]
    where_dir = exercises_dir()
    if paths:
        where_dir = os.path.dirname(paths[0])
    numbers = "、".join(map(str, here))
    if not here:
        return "--mine：这个脚本不用任何练习的代码，下面全部是参考实现。"
    if used:
        text = f"--mine：这个脚本用到练习 {numbers}；用了你在 {short_path(where_dir)}/ 里写的 {'、'.join(used)}"
    else:
        text = f"--mine：这个脚本用到练习 {numbers}；{short_path(where_dir)}/ 里还没有写好的，下面全部是参考实现"
    if left and used:
        text += f"；练习 {'、'.join(map(str, left))} 还没写，用参考实现"
    if broken:
        text += "；没有用上、改用参考实现的：" + "；".join(broken)
    return text + "。"


REF_FIRST = ("--mine 先用参考实现把选中的演示跑一遍（不显示，留着和你的比），再用你的代码跑一遍："
             "要的时间约是平时的两倍。")


def _call_of(exc, path):
    """异常经过学生文件的最外面一帧：'PagedSequence.reserve(self=<blocks=[0, 1], length=5>, n=2)'（当时的参数）。"""
    tb, frame = exc.__traceback__, None
    while tb is not None:
        if path and os.path.abspath(tb.tb_frame.f_code.co_filename) == os.path.abspath(path):
            frame = tb.tb_frame
            break
        tb = tb.tb_next
    if frame is None:
        return None
    code = frame.f_code
    names = code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]
    parts, owner = [], ""
    for name in names:
        val = frame.f_locals.get(name)
        if name == "self":
            owner = type(val).__name__ + "."
            parts.append("self=" + _describe(val))
        else:
            parts.append(f"{name}={_short(val)}")
    return f"{owner}{code.co_name}({', '.join(parts)})"


def _short(val, limit=200):
    try:
        import numpy as np
        if isinstance(val, np.ndarray):
            val = val.tolist()
    except ImportError:
        pass
    s = repr(val)
    return s if len(s) <= limit else s[:limit - 3] + "..."


def _describe(obj):
    """self 的几个要紧的属性：序列的块表和长度、缓存的容量和块数、树的 size。"""
    fields = [f"{k}={_short(getattr(obj, k), 120)}" for k in ("blocks", "length", "capacity", "size")
              if hasattr(obj, k) and not callable(getattr(obj, k))]
    if hasattr(obj, "entries"):
        fields.append(f"len(entries)={len(obj.entries)}")
    return "<" + " ".join(fields) + ">"


def _checker_passes(number, impl):
    """make check EX=number 对这份代码的结论（只在 --mine 出错时跑，几秒）。"""
    try:
        from exercises.check import check_exercise
        return check_exercise(number, impl, out=lambda line: None, fail_fast=True) == "通过"
    except Exception:
        return False


def _report_crash(e, impls):
    """学生的代码在演示里出错：一行错误；检查器放过了这份代码时，再一行说出漏掉的输入（给助教补用例）。"""
    files = {os.path.abspath(f.filename) for f in traceback.extract_tb(e.__traceback__)}
    hit = [(n, i) for n, i in impls.items() if i.written and i.path and os.path.abspath(i.path) in files]
    if not hit:
        print(f"--mine：跑演示时出错：{one_line(e)}。先跑 make check 看看是哪一个用例没过。", file=sys.stderr)
        return
    number, impl = hit[-1]
    print(f"--mine：你的代码在跑演示时出错：{one_line(e, impl.path)}。", file=sys.stderr)
    call = _call_of(e, impl.path)
    if _checker_passes(number, impl):
        print(f"  make check EX={number} 全部通过，可是它没试过这个输入（检查器漏了它，请告诉助教）："
              f"{call or '见上面那一行'}", file=sys.stderr)
    else:
        print(f"  出错的调用：{call}；先跑 make check EX={number}：有用例没过，它会指出哪里不对。", file=sys.stderr)


def _report_hang(e, impls, limit, ref_s):
    """学生的代码在演示里跑得太久：一行说停在哪里（哪一行、当时的调用），一行说接下来做什么。"""
    files = {os.path.abspath(f.filename) for f in traceback.extract_tb(e.__traceback__)}
    hit = [(n, i) for n, i in impls.items() if i.written and i.path and os.path.abspath(i.path) in files]
    if not hit:
        print(f"--mine：演示跑了 {limit:.0f} 秒还没完（参考实现这一遍用了 {ref_s:.1f} 秒），停下了。",
              file=sys.stderr)
        return
    number, impl = hit[-1]
    call = _call_of(e, impl.path)
    print(f"--mine：你的代码跑演示跑了 {limit:.0f} 秒还没完（参考实现这一遍用了 {ref_s:.1f} 秒），停下了："
          f"多半是死循环。停在 {where(e, impl.path)}" + (f"：{call}" if call else "") + "。", file=sys.stderr)
    print(f"  先跑 make check EX={number}：它的每个用例也限时，会指出是哪一个输入。", file=sys.stderr)


def run_with_mine(run, script_name, directory=None, impls=None):
    """--mine 的入口：run() 跑选中的演示并返回 0。返回退出码（学生的代码出错时为 1）。"""
    script_name = os.path.splitext(os.path.basename(script_name))[0]      # "lecture07/04_x.py" → "04_x"
    if impls is None:
        folder = directory or exercises_dir()
        if not os.path.isdir(folder):
            print(f"--mine：找不到练习的目录 {folder}（环境变量 {EXERCISES_ENV}）", file=sys.stderr)
            return 2
        impls = student_impls(directory)
    here = script_exercises(script_name)
    impls = {n: i for n, i in impls.items() if n in here}
    from lab_common.console import terminal_width, wrap_hanging
    from lab_common.endings import is_terminal
    for line in wrap_hanging(mine_line(impls, script_name), terminal_width() - 2):     # 按终端的宽度折行
        print(line, flush=True)
    bound = bind_impls(impls)
    if not bound:
        return run()
    print(REF_FIRST, flush=True)
    ref_out = _Tee()
    t0 = time.perf_counter()
    code = _run_captured(run, ref_out)
    if code:
        return code
    ref_s = time.perf_counter() - t0
    if is_terminal(sys.stderr):              # 只在终端上说用了多久（管道输出每次都一样）
        print(f"（参考实现这一遍用了 {ref_s:.1f} 秒；下面是你的代码跑的）", file=sys.stderr)
    from exercises.check import BUDGET_FACTOR
    limit = HARD_SECONDS + BUDGET_FACTOR * ref_s        # 和检查器一样的预算：参考的 10 倍，再加上死循环的 10 秒
    tee = _Tee(sys.stdout)
    try:
        with watch_calls([new for _, new, _ in bound]) as (watched, used):
            with bind([(ref, w) for (ref, _, _), w in zip(bound, watched)]), time_limit(limit):
                code = _run_captured(run, tee)
            flags = used()
    except CaseTimeout as e:
        sys.stdout.flush()
        _report_hang(e, impls, limit, ref_s)
        return 1
    except Exception as e:
        sys.stdout.flush()
        _report_crash(e, impls)
        return 1
    for line in compare(ref_out.buf.getvalue(), tee.buf.getvalue()):
        print(line)
    idle = [f"{name}（练习 {n}）" for (_, _, (n, name)), hit in zip(bound, flags) if not hit]
    if idle:
        it = "它"
        if len(idle) > 1:
            it = "它们"
        print(f"注意：这一遍没有用到你写的 {'、'.join(idle)}——这次跑的演示不经过{it}，上面的比较说明不了{it}写得对不对。")
    return code


# ---------------------------------------------------------------- 比较两遍的输出
# 一个数，连带它的单位（有的话）：1,234  0.61  -3  1.0e-12  320 KiB  2.50 MiB  128 GB/s  12%  3.2 ms
NUMBER = re.compile(r"-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:e[-+]?\d+)?"
                    r"(?:\s?(?:[KMGT]i?B/s|B/s|[KMGT]iB|[KMGT]B|B|ns|µs|us|ms|s|毫秒|微秒|秒|%)(?![A-Za-z]))?")
UNITS = {                                   # 单位 → (哪一类, 换成这一类的基本单位乘几)
    "B": ("字节", 1), "KiB": ("字节", 2 ** 10), "MiB": ("字节", 2 ** 20), "GiB": ("字节", 2 ** 30),
    "TiB": ("字节", 2 ** 40), "KB": ("字节", 1e3), "MB": ("字节", 1e6), "GB": ("字节", 1e9), "TB": ("字节", 1e12),
    "B/s": ("带宽", 1), "KB/s": ("带宽", 1e3), "MB/s": ("带宽", 1e6), "GB/s": ("带宽", 1e9), "TB/s": ("带宽", 1e12),
    "KiB/s": ("带宽", 2 ** 10), "MiB/s": ("带宽", 2 ** 20), "GiB/s": ("带宽", 2 ** 30), "TiB/s": ("带宽", 2 ** 40),
    "ns": ("时间", 1e-9), "µs": ("时间", 1e-6), "us": ("时间", 1e-6), "ms": ("时间", 1e-3), "s": ("时间", 1),
    "微秒": ("时间", 1e-6), "毫秒": ("时间", 1e-3), "秒": ("时间", 1), "%": ("百分数", 1),
}
_SPLIT = re.compile(r"(-?[\d,]+(?:\.\d+)?(?:e[-+]?\d+)?)\s?(.*)")
MAX_ROWS = 12          # 差别表最多列几个数


def _numbers(line):
    return [(m.start(), m.group()) for m in NUMBER.finditer(line)]


def _split(text):
    """'2.50 MiB' → ('2.50', 'MiB')；'0.61' → ('0.61', '')。"""
    num, unit = _SPLIT.fullmatch(text).groups()
    return num, unit


def _decimals(s):
    if "e" in s:
        return None
    return len(s.split(".")[1]) if "." in s else 0


def _minus(x, y, d):
    text = f"{y - x:+,.{d}f}"
    if text.lstrip("+-").strip("0.,") == "":
        return "0"
    return text


def _diff(a, b):
    """'0.61', '0.12' → '-0.49'；'320 KiB', '2.50 MiB' → '+2.19 MiB'（先换成同一个单位：差别常常就在单位上）。
    小数位取两者中多的那个；科学计数法写成 .1e；单位换算不了（一个有一个没有、不是一类）时说"单位不同"。

    >>> _diff("320 KiB", "2.50 MiB"), _diff("12%", "3%"), _diff("1,000", "1,500"), _diff("3 ms", "2 s")
    ('+2.19 MiB', '-9%', '+500', '+2.00 s')
    """
    (na, ua), (nb, ub) = _split(a), _split(b)
    x, y = float(na.replace(",", "")), float(nb.replace(",", ""))
    da, db = _decimals(na), _decimals(nb)
    unit = ua
    if ua != ub:
        if ua not in UNITS or ub not in UNITS or UNITS[ua][0] != UNITS[ub][0]:
            return f"单位不同（{ua or '没有单位'} / {ub or '没有单位'}）"
        fa, fb = UNITS[ua][1], UNITS[ub][1]
        unit, f, d = (ua, fa, da) if abs(x * fa) >= abs(y * fb) else (ub, fb, db)
        x, y = x * fa / f, y * fb / f
        da = db = max(2, d or 0)                 # 在换成的单位里至少两位小数
    sep = "" if unit in ("", "%") else " "
    if da is None or db is None:
        return f"{y - x:+.1e}{sep}{unit}"
    text = _minus(x, y, max(da, db))
    if text == "0":
        return text
    return text + sep + unit


def logical_lines(text):
    """输出按"句子"分行：观察的一条折成几行时（后面的行缩进 5 格）先接回一行——换了行宽或换了说法，
    不会被当成几段碎片来比。

    >>> logical_lines("观察\\n  1. 第一句很长，\\n     折到了第二行。\\n  2. 第二句。")
    ['观察', '  1. 第一句很长，折到了第二行。', '  2. 第二句。']
    """
    out, in_item = [], False
    for line in text.splitlines():
        if in_item and re.match(r" {5}\S", line):
            prev = out[-1]
            glue = " " if prev[-1:].isascii() and prev[-1:].isalnum() and line.strip()[:1].isascii() else ""
            out[-1] = prev + glue + line.strip()
            continue
        in_item = bool(re.match(r" {2}\d+\. ", line))
        out.append(line)
    return out


def _context(line, k, before=18, after=10):
    """第 k 个数在这一行里的样子（空白压成一个，数字用【】标出，两头太长时截掉，但留着行首的行名）：

    >>> _context("LRU    0.61   0.61   0.60   0.58   0.46", 3)
    'LRU…0.61 0.60 【0.58】 0.46'
    """
    flat = " ".join(line.split())
    m = list(NUMBER.finditer(flat))[k]
    head, tail = flat[:m.start()], flat[m.end():]
    if len(head) > before:
        label = flat.split(" ", 1)[0]            # 表格的一行：第一格（行名）总留着
        if NUMBER.fullmatch(label) or len(label) > before // 2:
            label = ""
        cut = head[-(before - len(label)) + 1:]
        if " " in cut[:-1]:
            cut = cut[cut.index(" ") + 1:]      # 不从一个数的中间截开
        head = label + "…" + cut
    if len(tail) > after:
        tail = tail[:after - 1] + "…"
    return f"{head}【{m.group()}】{tail}"


def _skeleton(line):
    """去掉数字、压掉空白以后的样子：两行只有数不同（连带右对齐的空格不同）时，骨架相同。"""
    return " ".join(NUMBER.sub("#", line).split())


def _alike(a, b):
    """两行去掉数字以后大体相同（只差几个字，比如"逐个相同"和"不同"）：它们的数可以一一对照；
    换了一种说法的句子，数字的位置对不上，只当文字不同列出来。"""
    return difflib.SequenceMatcher(None, _skeleton(a), _skeleton(b), autojunk=False).ratio() >= 0.75


def _pad(text, width, right=False):
    """按显示宽度补空格（中文占 2 列）。"""
    from rich.cells import cell_len
    gap = " " * max(0, width - cell_len(text))
    return gap + text if right else text + gap


def compare(ref_text, mine_text):
    """两遍输出逐行比：一样就一句话；不一样就列出不同的数（哪一行、参考、你的、差）和只在文字上不同的行。"""
    ref, mine = logical_lines(ref_text), logical_lines(mine_text)
    head = ["", "── --mine：你的代码算出的结果和参考实现比 " + "─" * 20]
    if ref == mine:
        return head + [f"和参考实现完全一致（{len(ref)} 行输出逐字相同）。"]
    nums, texts, n_lines = [], [], 0
    sm = difflib.SequenceMatcher(None, ref, mine, autojunk=False)
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        if tag == "equal":
            continue
        n_lines += max(i2 - i1, j2 - j1)
        for k in range(max(i2 - i1, j2 - j1)):
            a = ref[i1 + k] if i1 + k < i2 else None
            b = mine[j1 + k] if j1 + k < j2 else None
            na, nb = _numbers(a or ""), _numbers(b or "")
            if a is not None and b is not None and len(na) == len(nb) and _alike(a, b):
                for idx, ((_, x), (_, y)) in enumerate(zip(na, nb)):
                    if x != y:
                        nums.append((i1 + k + 1, _context(a, idx), x, y, _diff(x, y)))
            if a is None or b is None or _skeleton(a) != _skeleton(b):
                texts.append((i1 + k + 1 if a is not None else j1 + k + 1, a, b))
    out = head + [f"有 {n_lines} 行和参考实现不同（参考共 {len(ref)} 行）："]
    if nums:
        from rich.cells import cell_len
        rows = [(str(ln), ctx, x, y, d) for ln, ctx, x, y, d in nums[:MAX_ROWS]]
        heads = ("行", "参考的这一行（【】里是不同的数）", "参考", "你的", "差")
        widths = [max(cell_len(r[c]) for r in rows + [heads]) for c in range(5)]
        for r in [heads] + rows:
            out.append("  " + "  ".join(_pad(v, w, right=c != 1) for c, (v, w) in enumerate(zip(r, widths))))
        if len(nums) > MAX_ROWS:
            out.append(f"  ……另外还有 {len(nums) - MAX_ROWS} 个数不同")
    for ln, a, b in texts[:3]:
        out.append(f"  第 {ln} 行的文字也不同：")
        out.append("    参考：" + (" ".join(a.split()) if a is not None else "（没有这一行）"))
        out.append("    你的：" + (" ".join(b.split()) if b is not None else "（没有这一行）"))
    if len(texts) > 3:
        out.append(f"  ……另外还有 {len(texts) - 3} 行文字不同")
    return out
