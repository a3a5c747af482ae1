"""测试的共用配置：
- 路径：仓库根目录（lab_common 包）、lecture07/（共用模块）、figures/（画图脚本）放进 sys.path；
  加载数字开头的脚本用 lab_common.script_tools.load_script。警告一律当错误（pytest.ini）。
- 两个 pytest 进程（make test 用 -n 2 --dist loadfile，xdist 自带的分法）：同一个文件的测试在同一个进程里，
  模块级的 fixture 只算一遍。跨文件、跨进程要同一样东西（一个脚本 main(argv) 的输出、04 命中表的一格、05 的
  集群模拟……）时整个会话只算一遍（shared：先要的进程算，pickle 进本次会话的临时目录，另一个进程读）；
  策略类被测试换过时不缓存。
- 真实 trace（../shared/traces/…）：用到它的测试标 real_trace，文件不在时跳过，并说明文件该放在哪里。
- 跑脚本：本进程里 main(argv)（run_main / call_main），或新的 Python 解释器里（start_fresh / finish_fresh）。
"""
import contextlib
import hashlib
import inspect
import io
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import time
import types
import uuid

# numpy 的 OpenBLAS 默认每个进程起"核数"个线程，启动时空转：每个 Python 进程多花约 0.07 s CPU（测试会起几十个新
# 解释器）。本课的 CPU 脚本不做 BLAS 运算（线性层用 einsum），一个线程不改变任何结果。在 import numpy 之前设好，
# pytest 的工作进程和测试起的新解释器都继承它。
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LECTURE = os.path.join(ROOT, "lecture07")
for _p in (os.path.join(ROOT, "figures"), LECTURE, ROOT):
    if _p not in sys.path:
        sys.path.insert(0, _p)

from lab_common.script_tools import load_script  # noqa: E402  测试文件 from conftest import load_script
from kv_store import eviction as _eviction  # noqa: E402

from kv_store import radix_tree as _radix_tree  # noqa: E402


def _policy_classes():
    """缓存会用到的类：注册表里的策略，加上 04b 直接交给 sweep 的 RadixCache。"""
    return {**_eviction.CACHE_POLICIES, "RadixCache (04b)": _radix_tree.RadixCache}


_POLICIES_AT_START = {name: (cls, [dict(vars(k)) for k in cls.__mro__]) for name, cls in _policy_classes().items()}

REAL_TRACE = os.path.normpath(os.path.join(ROOT, "..", "shared", "traces", "mooncake_fast25_synthetic_trace.jsonl"))
REAL_TRACE_MISSING = (f"没有真实 trace：把 Mooncake 的公开 trace mooncake_fast25_synthetic_trace.jsonl "
                      f"放到 {REAL_TRACE}（仓库旁边的 shared/traces/）")


# kernel 测试（Triton 解释器）没装 torch / triton 时跳过的理由
NO_KERNEL = ("没有安装 {}：kernel 测试跳过（可选）。make test 只在 pip 装得上 CPU 版 torch 和 triton 时才装"
             "（triton 3.6.0 只有 Linux 的 wheel），装法见 README 的\"kernel 测试\"；make test KERNEL=1 一定装")


def kernel_missing():
    """没装 torch 或 triton 时返回跳过的理由，都装了返回 None。只查找、不 import（import torch 要一秒多）。"""
    import importlib.util
    for name in ("torch", "triton"):
        if importlib.util.find_spec(name) is None:
            return NO_KERNEL.format(name)
    return None


_KERNEL_MODULES = {}


def kernel_module(name):
    """import torch / triton 或用到它们的模块（第一次用到时才 import）。没有 CUDA 时先设 TRITON_INTERPRET=1：
    triton 在 import 时读它，kernel 就在解释器里跑。"""
    if name not in _KERNEL_MODULES:
        import importlib
        import torch
        if not torch.cuda.is_available():
            os.environ.setdefault("TRITON_INTERPRET", "1")      # 必须在导入 triton 之前
        _KERNEL_MODULES[name] = importlib.import_module(name)
    return _KERNEL_MODULES[name]


class LazyModule:
    """kernel_module(name) 的替身：第一次读它的属性时才 import。两个 kernel 测试文件在模块顶层用它，收集测试时
    就不 import torch——两个 pytest 进程里只有跑这两个文件的那个付这一秒多（它们在同一个 xdist 组 kernel 里）。"""

    def __init__(self, name):
        self._name = name

    def __getattr__(self, attr):
        if attr.startswith("_") and self._name not in _KERNEL_MODULES:
            raise AttributeError(attr)           # pytest 收集时翻看模块里每个对象的 _pytest… 属性：不为这个 import
        return getattr(kernel_module(self._name), attr)

    def __setattr__(self, attr, value):          # kvc.TILE = 32 改的是真模块
        if attr == "_name":
            object.__setattr__(self, attr, value)
        else:
            setattr(kernel_module(self._name), attr, value)


def on_cuda():
    return kernel_module("torch").cuda.is_available()


def skip_without_kernel():
    """kernel 测试文件的第一行：没装 torch 或 triton 时整个文件跳过，理由写明。"""
    if kernel_missing():
        pytest.skip(kernel_missing(), allow_module_level=True)


@pytest.fixture(scope="module")
def kernel_stack():
    """文件的第一个测试之前 import torch、triton（没有 CUDA 时先设好 TRITON_INTERPRET=1）。"""
    kernel_module("triton")


# kernel 测试文件的 pytestmark：两个文件在同一个 pytest 进程里（只有它 import torch），先备好 torch、triton
KERNEL_MARKS = [pytest.mark.xdist_group("kernel"), pytest.mark.usefixtures("kernel_stack")]


# ---------------------------------------------------------------- 真实 trace；只在 make test-all 里跑的测试
TEST_ALL = os.environ.get("LAB_TEST_ALL") == "1"      # make test-all


def pytest_collection_modifyitems(config, items):
    """标了 real_trace 的测试：trace 文件不在时跳过，理由里写明文件该放在哪里。
    标了 test_all 的测试只在 make test-all 里跑（make test 是每天用的那一遍）。"""
    for item in items:
        if item.get_closest_marker("real_trace") and not os.path.exists(REAL_TRACE):
            item.add_marker(pytest.mark.skip(reason=REAL_TRACE_MISSING))
        if item.get_closest_marker("test_all") and not TEST_ALL:
            item.add_marker(pytest.mark.skip(reason="只在 make test-all 里跑"))


# ---------------------------------------------------------------- 两个 pytest 进程
def pytest_configure(config):
    if not hasattr(config, "workerinput") and getattr(config.option, "numprocesses", None):
        # 主进程：定下本次会话的 testrunuid（工作进程拿到的 PYTEST_XDIST_TESTRUNUID），结束时删掉共用的临时目录
        if config.option.testrunuid is None:
            config.option.testrunuid = uuid.uuid4().hex
        config.lab_shared_dir = os.path.join(tempfile.gettempdir(), f"lab07-tests-{config.option.testrunuid}")
    if hasattr(config, "workerinput") and config.workerinput.get("workercount", 1) > 1:
        # 每个 pytest 进程占一个核（gw0 → 第 1 个核，gw1 → 第 2 个……）。测试起的新解释器继承这一个核，脚本看到
        # 1 个核就不 fork 进程池（核早被 pytest 进程占满了，fork 只多花 CPU）；fork 的路径另有测试（workers=2）。
        if hasattr(os, "sched_setaffinity"):
            cores = sorted(os.sched_getaffinity(0))
            k = int(config.workerinput["workerid"][2:])
            if len(cores) >= config.workerinput["workercount"]:
                os.sched_setaffinity(0, {cores[k % len(cores)]})


# ---------------------------------------------------------------- 一次会话只算一遍：两个 pytest 进程共用
# 同一个东西（一个脚本 main(argv) 的输出、04 的命中表）不论哪个文件、哪个 pytest 进程要，整个会话只算一次：
# 先要的那个进程算，结果 pickle 进本次会话的临时目录（PYTEST_XDIST_TESTRUNUID 区分会话），另一个进程读它
# （正在算时等它算完）。只缓存没改过的代码的结果：策略类被测试换过（monkeypatch）时照常现算、不存。
_SHARED = {}
_LOCK_WAIT_S = 900


def _shared_dir():
    uid = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if not uid:
        return None                           # 只有一个 pytest 进程：本进程里的 _SHARED 就够了
    d = os.path.join(tempfile.gettempdir(), f"lab07-tests-{uid}")
    os.makedirs(d, exist_ok=True)
    return d


def _pristine_policies():
    """CACHE_POLICIES 还是 import 时的那几个类（加上 RadixCache），类里的方法也没被换过（测试常 monkeypatch 它们）。"""
    now = {name: (cls, [dict(vars(k)) for k in cls.__mro__]) for name, cls in _policy_classes().items()}
    return now.keys() == _POLICIES_AT_START.keys() and all(
        now[n][0] is _POLICIES_AT_START[n][0] and len(now[n][1]) == len(_POLICIES_AT_START[n][1])
        and all(a.keys() == b.keys() and all(a[k] is b[k] for k in a)
                for a, b in zip(now[n][1], _POLICIES_AT_START[n][1]))
        for n in now)


def shared(key, compute):
    """compute() 的结果，整个测试会话（两个 pytest 进程一起）每个 key 只算一遍。key：repr 稳定的元组。"""
    if not _pristine_policies():
        return compute()
    key = repr(key)
    if key in _SHARED:
        return _SHARED[key]
    d = _shared_dir()
    if d is None:
        _SHARED[key] = compute()
        return _SHARED[key]
    name = os.path.join(d, hashlib.sha1(key.encode()).hexdigest())
    lock, done = name + ".lock", name + ".pickle"
    start = time.monotonic()
    while not os.path.exists(done):
        try:
            os.close(os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:                           # 另一个进程正在算：等它
            if time.monotonic() - start > _LOCK_WAIT_S:
                break
            time.sleep(0.05)
            continue
        try:
            value = compute()
            try:
                data = pickle.dumps(value)
            except Exception:                             # 存不了（有不能 pickle 的对象）：只在本进程里记着
                data = None
            if data is not None:
                with open(name + ".tmp", "wb") as f:
                    f.write(data)
                os.replace(name + ".tmp", done)
        finally:
            if not os.path.exists(done):
                os.remove(lock)
        _SHARED[key] = value
        if data is None:
            return value
        break
    if key not in _SHARED:
        if os.path.exists(done):
            with open(done, "rb") as f:
                _SHARED[key] = pickle.load(f)
        else:
            _SHARED[key] = compute()
    return _SHARED[key]


def _shared_path(key):
    d = _shared_dir()
    return d and os.path.join(d, hashlib.sha1(key.encode()).hexdigest() + ".pickle")


def shared_get(key):
    """(True, 值)：这个 key 在本次会话里已经算过（本进程或另一个 pytest 进程）；否则 (False, None)。"""
    key = repr(key)
    if key not in _SHARED and _shared_path(key) and os.path.exists(_shared_path(key)):
        with open(_shared_path(key), "rb") as f:
            _SHARED[key] = pickle.load(f)
    return key in _SHARED, _SHARED.get(key)


def shared_put(key, value):
    key = repr(key)
    _SHARED[key] = value
    if _shared_path(key):
        tmp = f"{_shared_path(key)}.{os.getpid()}.tmp"
        with open(tmp, "wb") as f:
            pickle.dump(value, f)
        os.replace(tmp, _shared_path(key))


@contextlib.contextmanager
def shared_lock(key):
    """两个 pytest 进程之间的锁（O_EXCL 建一个文件）：同一时刻只有一个进程在里面。只有一个进程时什么也不做。
    拿锁的进程死了留下的锁文件：等 _LOCK_WAIT_S 秒以后不再等它。"""
    d = _shared_dir()
    if d is None:
        yield
        return
    lock = os.path.join(d, hashlib.sha1(repr(key).encode()).hexdigest() + ".lock")
    start, held = time.monotonic(), False
    while not held and time.monotonic() - start < _LOCK_WAIT_S:
        try:
            os.close(os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            held = True
        except FileExistsError:
            time.sleep(0.05)
    try:
        yield
    finally:
        if held:
            os.remove(lock)


def trace_digest(trace):
    from kv_store.traces import columns
    h = hashlib.sha1()
    for col in columns(trace):
        h.update(np.ascontiguousarray(col).tobytes())
    return h.hexdigest()


def shared_sweep(real):
    """kv_store.replay.sweep 的替身（装在脚本模块里那个名字上）：整个会话里每一格 (策略, 容量) 在同一份 trace 上
    只算一遍。还没算过的格子照常交给 sweep（一次调用），算出的和已有的按 sweep 的顺序拼成同样的 dict。
    策略类被测试换过时不缓存（_pristine_policies）。"""
    def memo(trace, capacities, policies, extra=(), workers=None):
        read = settings_read_by(real)
        if read is None or not _pristine_policies():
            return real(trace, capacities, policies, extra, workers)
        cells = list(dict.fromkeys([(p, c) for p in policies for c in capacities] + [tuple(e) for e in extra]))
        digest = trace_digest(trace)
        with shared_lock(("sweep", digest)):             # 另一个进程正在算这份 trace 的格子：等它算完再看缺哪些
            have = {cell: shared_get(("sweep cell", digest, cell, read)) for cell in cells}
            missing = [cell for cell in cells if not have[cell][0]]
            new = {}
            if missing:
                new = real(trace, (), (), extra=missing, workers=workers)
                for cell, hits in new.items():
                    shared_put(("sweep cell", digest, cell, read), hits)
        return {cell: new[cell] if cell in new else have[cell][1] for cell in cells}
    return memo


def _plain(v):
    return v is None or isinstance(v, (bool, int, float, str)) or (
        isinstance(v, (tuple, list, frozenset)) and all(_plain(x) for x in v)) or (
        isinstance(v, dict) and all(_plain(k) and _plain(x) for k, x in v.items()))


def settings_read_by(fn):
    """fn 和它调用的同一模块里的函数读到的设置（大写的模块常量）：[(名字, 值)]，缓存的 key 用它。
    它们调用的别的模块的函数被测试换掉了（不是那个模块里的那一个）时返回 None：这时不缓存。"""
    g, seen, todo, out = fn.__globals__, set(), [fn.__code__], {}
    while todo:
        code = todo.pop()
        todo += [c for c in code.co_consts if isinstance(c, types.CodeType)]
        for n in code.co_names:
            if n in seen or n not in g:
                continue
            seen.add(n)
            v = g[n]
            if isinstance(v, types.FunctionType) and v.__globals__ is g:
                todo.append(v.__code__)
            elif isinstance(v, types.FunctionType):
                if getattr(sys.modules.get(v.__module__), v.__name__, None) is not v:
                    return None
            elif n.isupper() and _plain(v):
                out[n] = v
    return sorted(out.items())


# 各脚本里最慢的、只由参数和设置决定的那一步（脚本改了名字就跳过它）：默认输出、--more、改设置的两遍共用一份
# 04、04b 的 sweep 按格共用（shared_sweep）：04 的默认、--more、改设置的各遍和 04b 的 LRU 一列在同一份合成 trace 上
SLOW_CALLS = {"03_sharing_and_cow": ("savings",), "05_kv_store": ("nic_fetch", "run_schedulers")}
# 脚本调用的别的模块里最慢的一步：06 演示 1 在 Triton 解释器里的每个校验用例（默认和 --more 校验的是同一批）
SLOW_CALLS_ELSEWHERE = {"06_triton_cow_clone": (("gpu.clone_bench", "check_cow_write"),)}


def shared_call(module, name):
    """module.name 的替身：同样的参数（pickle 后逐字节相同）、它读到的设置也一样时，整个会话只算一遍，结果就是原函数
    的结果。改源码得到的模块（test_student_edits）和原模块共用：key 是函数所在的文件、函数名、参数和设置的值。"""
    real = getattr(module, name)
    sig = inspect.signature(real)

    def memo(*a, **k):
        bound = sig.bind(*a, **k)
        bound.apply_defaults()
        read = settings_read_by(real)
        try:
            args = hashlib.sha1(pickle.dumps(sorted(bound.arguments.items()))).hexdigest()
        except Exception:                        # 参数里有生成器之类：照常算
            read = None
        if read is None:
            return real(*a, **k)
        res = shared(("call", os.path.relpath(real.__code__.co_filename, ROOT), real.__qualname__, args, read),
                     lambda: real(*a, **k))
        if isinstance(res, dict):                # 缓存的结果只读：谁改了结果里的数组就报错（调用方共用这一份）
            for v in res.values():
                if isinstance(v, np.ndarray):
                    v.flags.writeable = False
        return res
    return memo


def share_slow_calls(module, mp, script=None):
    """在 mp（MonkeyPatch）的这段时间里，脚本模块里 SLOW_CALLS 列的那几步换成 shared_call。"""
    script = script or os.path.basename(module.__file__)[:-3]
    for name in SLOW_CALLS.get(script, ()):
        if callable(getattr(module, name, None)):
            mp.setattr(module, name, shared_call(module, name))
    for modname, name in SLOW_CALLS_ELSEWHERE.get(script, ()):
        other = kernel_module(modname)
        mp.setattr(other, name, shared_call(other, name))
    from kv_store.replay import sweep
    if getattr(module, "sweep", None) is sweep:
        mp.setattr(module, "sweep", shared_sweep(sweep))


def pytest_unconfigure(config):
    if getattr(config, "lab_shared_dir", None):
        shutil.rmtree(config.lab_shared_dir, ignore_errors=True)


# ---------------------------------------------------------------- 跑一遍脚本：本进程里
TABLES = {}     # 脚本名 → 它打印过的每张表 [(表头, 各行)]：窄终端的测试拿它们重排，不必再跑一遍演示


@contextlib.contextmanager
def recording_tables(name):
    """在这段时间里 print_table 打印的每张表记进 TABLES[name]（print_table 每次都调 console.plan_column_widths）。"""
    from lab_common import console
    tables = TABLES.setdefault(name, [])
    plan = console.plan_column_widths

    def record(headers, rows, room):
        tables.append((list(headers), [list(r) for r in rows]))
        return plan(headers, rows, room)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(console, "plan_column_widths", record)
        yield tables


def _run_main_here(name, argv):
    m = load_script(name)
    got, tables = {}, []
    with pytest.MonkeyPatch.context() as mp, recording_tables(None) as tables:
        for k, fn in list(m.DEMOS.items()):
            mp.setitem(m.DEMOS, k, lambda *a, fn=fn, k=k: got.setdefault(k, fn(*a)))
        share_slow_calls(m, mp, name)
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            assert m.main(list(argv)) == 0
    TABLES.pop(None, None)
    return buf.getvalue(), got, tables


def run_main(name, argv=()):
    """main(argv) 在本进程里跑（整个会话每个脚本、每个 argv 只跑一次，两个 pytest 进程共用）：
    返回 (打印的文字, {演示号: 演示返回的 dict})；打印过的表记进 TABLES[name]（只记 argv=() 那一遍）。

    冒烟测试、标准输出（test_golden）、"换一个进程输出也一样"和窄终端的测试共用这一遍。
    """
    out, got, tables = shared(("run_main", name, tuple(argv)), lambda: _run_main_here(name, argv))
    if not argv:
        TABLES[name] = tables
    return out, got


def call_main(module, argv):
    """module.main(argv) 在本进程里跑，像命令行那样收下结果：(退出码, stdout, stderr)。

    SystemExit 的处理和解释器一样：整数是退出码，None 是 0，别的（文字）打印到 stderr、退出码 1。
    """
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = module.main(argv)
        except SystemExit as e:
            rc = e.code
            if rc is not None and not isinstance(rc, int):
                print(rc, file=sys.stderr)
                rc = 1
    return rc or 0, out.getvalue(), err.getvalue()


# ---------------------------------------------------------------- 跑一遍脚本：新的解释器里
def fresh_env(**extra):
    """新解释器的环境：NO_COLOR；去掉 COLUMNS 和 PYTHONIOENCODING（管道输出固定 80 列、UTF-8），再加上 extra。"""
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "PYTHONIOENCODING")}
    env.update(NO_COLOR="1", **extra)
    return env


def start_fresh(name, *args, env=None, text=True):
    """在新的 Python 解释器里启动脚本（新的哈希种子；NO_COLOR，管道输出 80 列），返回 Popen。"""
    return subprocess.Popen([sys.executable, os.path.join(LECTURE, name + ".py"), *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=text, cwd=ROOT, env=env or fresh_env())


def finish_fresh(proc):
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-2000:]
    return out


def assert_settings_refused(module, cases, argv):
    """cases = ((常量名, 不合理的值), …)：逐个改掉模块里的设置，main(argv) 必须一行拒绝（SystemExit 2），再改回去。"""
    for name, bad in cases:
        old = getattr(module, name)
        setattr(module, name, bad)
        try:
            with pytest.raises(SystemExit) as e:
                module.main(argv)
            assert e.value.code == 2, name
        finally:
            setattr(module, name, old)


def assert_observation_shape(lines, more=()):
    """一个演示的观察：默认至多 2 条、每条在 80 列上至多 3 行且不超出 80 列；所有条目（含 --more）没有
    tests/artefacts.py 找得出的假象（两端相同的范围、负零、"0 GiB"……）。"""
    from artefacts import find_artefacts
    from lab_common.console import observation_lines, wrap_cjk
    from rich.cells import cell_len
    assert 1 <= len(lines) <= 2, lines
    for line in lines:
        assert observation_lines(line) <= 3, line
        assert max(cell_len(x) for x in wrap_cjk(f"  1. {line}", 78, indent=5)) <= 80, line
    for line in list(lines) + list(more):
        assert not find_artefacts(line), (find_artefacts(line), line)


def load_plot(name):
    """figures/plot_XX.py 这个模块（figures/ 已在 sys.path 上），画图前先设好无界面后端和中文字体。"""
    import importlib
    from lab_common import plotting
    plotting.setup_matplotlib()
    return importlib.import_module(name)
