"""快速引擎什么时候可以替策略类算：只在策略类和本讲发布的那一版一字不差的时候（fast_engine）。

kv_store.sim_lru（LRU 的栈距离）和 kv_store.sim_lfu（LFU 类）比逐请求跑 kv_store.eviction 里的类快好几倍，但它们是另写的
代码。你改了那里的一个类（或注册了自己的类），看到的数字就必须来自你改过的类。所以 simulate、sweep 每次先问
fast_engine(cls)：

- fingerprint(cls)：cls 的 MRO 上每个类（object 除外）的每个方法的源码、每个类属性的值、方法里用到的
  模块级常量（和同一文件里的函数的源码），按顺序串起来算 SHA-256。看的是此刻的类：改了文件、
  在测试里替换了一个方法、写了一个子类，指纹都会变。源码是从文件里读的，所以再核对一遍：它编译出来
  用到的名字、变量和常量就是正在跑的代码的（import 之后文件又改过，就对不上，当成改过的类）；
- 指纹和 SHIPPED 里记下的（发布时的）相同 → 返回快速引擎的名字（"lru" 或 "lfu"）；否则返回 None，
  调用者照原样逐请求跑这个类。NAME、SHORT 只是显示的名字，不算在指纹里。

tests/test_cache_policies.py 检查 SHIPPED 和发布的类一致、快速引擎和类逐请求相同；改了发布的类又想要
快速引擎的，照那个测试打印的新指纹更新 SHIPPED（先确认快速引擎和改过的类仍然相同）。

    >>> from kv_store.eviction import LRUCache, S3FIFOCache
    >>> fast_engine(LRUCache), fast_engine(S3FIFOCache)      # S3-FIFO 没有快速引擎：总是跑类本身
    ('lru', None)
    >>> class MyLRU(LRUCache):                                # 子类：哪怕什么都没改，也照原样跑它
    ...     pass
    >>> fast_engine(MyLRU) is None
    True
"""
import hashlib
import inspect
import sys
import textwrap
import types

SHIPPED = {   # 类名 → (快速引擎, 发布时的指纹)：kv_store.eviction 里的这几个类一字不差时才用快速引擎
    "LRUCache": ("lru", "81730343a48495d8"),
    "LFUCache": ("lfu", "3f318e3159d8071d"),
    "LengthAwareCache": ("lfu", "c962507b63e7aa67"),
    "LengthAwareEarlyCache": ("lfu", "3ebcc492c0ccb98d"),
}
DISPLAY_ONLY = ("NAME", "SHORT")   # 只是显示的名字：改了不影响数字
POLICY_MODULE = "kv_store.eviction"


def fast_engine(cls):
    """cls 是发布时的那个类（指纹相同）：返回快速引擎的名字（"lru" / "lfu"）；否则 None（跑类本身）。"""
    shipped = SHIPPED.get(getattr(cls, "__qualname__", None))
    if shipped is None or cls.__module__ != POLICY_MODULE:
        return None
    engine, print_ = shipped
    if fingerprint(cls) != print_:
        return None
    return engine


def fingerprint(cls):
    """cls 此刻的代码的指纹（16 位十六进制）：MRO 上每个类的方法源码、类属性、用到的模块级常量。

    源码读不到（比如在交互式解释器里定义的方法）时，指纹里记下一个每次都不同的标记：不会被当成发布的类。
    同一个类再来时，只要它（和 MRO 上各类、各类所在模块）的每个属性都还是同一个对象，就直接给上次的结果。
    """
    key = _live_key(cls)
    memo = _MEMO.get(cls)
    if memo is not None and len(memo[0]) == len(key) and all(a is b for a, b in zip(memo[0], key)):
        return memo[1]
    parts = []
    for klass in cls.__mro__:
        if klass is object:
            continue
        parts.append(f"class {klass.__module__}.{klass.__qualname__}({', '.join(b.__qualname__ for b in klass.__bases__)})")
        for name, value in sorted(vars(klass).items()):
            if name in DISPLAY_ONLY or (name.startswith("__") and not _is_code(value)):
                continue        # __module__、__doc__、__firstlineno__……：不影响数字（有的还随 Python 版本变）
            parts.append(f"{name} = {_describe(value, set())}")
    result = hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]
    _MEMO[cls] = (key, result)
    return result


_MEMO = {}    # 类 → (_live_key, 指纹)；记着对象本身（不只是 id），它们就不会被回收、id 也不会被别的对象重用


def _live_key(cls):
    """类此刻的样子：MRO 上各类和它们所在模块的每个属性（名字和对象）。有一个换了，就重新算指纹。"""
    key = []
    for klass in cls.__mro__:
        key += [klass, *vars(klass).keys(), *vars(klass).values()]
        module = sys.modules.get(klass.__module__)
        if module is not None and klass is not object:
            key += [module, *vars(module).keys(), *vars(module).values()]
    return key


def _is_code(value):
    return isinstance(value, (types.FunctionType, staticmethod, classmethod, property))


def _describe(value, seen):
    """一个类属性或模块级名字的描述：函数 → 源码 + 它用到的模块级名字；常量 → repr；其他 → 类型名。"""
    if isinstance(value, (staticmethod, classmethod)):
        value = value.__func__
    if isinstance(value, property):
        return " / ".join(_describe(f, seen) for f in (value.fget, value.fset, value.fdel) if f is not None)
    if isinstance(value, types.FunctionType):
        if value in seen:
            return value.__qualname__
        seen.add(value)
        try:
            src = inspect.getsource(value)
        except (OSError, TypeError):
            return f"<没有源码 {id(value)}>"
        if not _compiles_to(src, value):
            return f"<文件里的源码不是正在运行的代码 {id(value)}>"     # 比如 import 之后文件又改过
        used = []
        for name in sorted(_global_names(value.__code__)):
            if name in value.__globals__:
                g = value.__globals__[name]
                if isinstance(g, types.FunctionType) and g.__module__ != value.__module__:
                    used.append(f"{name}: {g.__module__}.{g.__qualname__}")   # 别的模块的函数（heapq……）
                else:
                    used.append(f"{name}: {_describe(g, seen)}")
        return src + "\n".join(used)
    if isinstance(value, (int, float, str, bytes, bool, type(None), tuple, frozenset)):
        return repr(value)
    if isinstance(value, type):
        return f"{value.__module__}.{value.__qualname__}"
    if isinstance(value, types.ModuleType):
        return f"module {value.__name__}"
    return type(value).__name__           # 可变的容器（比如缓存表）：只记类型


def _compiles_to(src, func):
    """src（从文件里读的）编译出来的和 func 正在运行的代码用的是同样的名字、变量和常量：指纹说的是真正在跑的代码
    （import 之后文件又改过时对不上）。不比字节码本身：同一段源码，各版本的 Python 编出的字节码细节不同。"""
    owner = func.__qualname__.rpartition(".")[0]          # 在类里定义的方法："LRUCache.insert" → LRUCache
    if not owner.isidentifier():
        return False                                       # 函数里定义的函数、lambda：当成对不上
    try:
        body = compile(f"class {owner}:\n" + textwrap.indent(textwrap.dedent(src), "    "), "<fingerprint>", "exec")
    except SyntaxError:
        return False
    codes = [c for k in body.co_consts if isinstance(k, types.CodeType) for c in k.co_consts
             if isinstance(c, types.CodeType) and c.co_name == func.__code__.co_name]
    return any(_shape(c) == _shape(func.__code__) for c in codes)


def _shape(code):
    """代码对象用到的名字、局部变量和常量（嵌套的函数、推导式递归地比）。"""
    consts = []
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            consts.append(_shape(c))
        else:
            consts.append(repr(c))
    return code.co_names, code.co_varnames, tuple(consts)


def _global_names(code):
    """code 及其嵌套的函数、推导式里用到的全部名字（co_names 里的：全局名和属性名，多算几个无妨）。"""
    names = set(code.co_names)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            names |= _global_names(c)
    return names
