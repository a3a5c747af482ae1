"""六个练习的用例：按顺序几组（手算的例子、随机输入、讲义的工作量），一组 = (阶段, 名字, 提示, 输入, play)。play(impl, inp)
是生成器：yield 一次调用的写法，调用之后 yield 看到的 {名字: 值}；check.py 拿它跑讲义的实现和你的，逐项比。

这个文件是 check.py 读的登记表：EXERCISES（每个练习的文件、名字、标题、讲义的模块、分组）和 reference。分组写在
cases_paged.py（练习 1–3）和 cases_prefix.py（练习 4–6）；共用的写法（text、hand、play_call、play_trace、
play_decode、KEY_HINTS）在 cases_common.py，text 和 KEY_HINTS 从这里也拿得到（check.py 用 cases.text、cases.KEY_HINTS）。"""
import importlib
from collections import namedtuple

from exercises.cases_common import KEY_HINTS, text      # noqa: F401  check.py 用
from exercises.cases_paged import groups_1, groups_2, groups_3
from exercises.cases_prefix import groups_4, groups_5, groups_6

Exercise = namedtuple("Exercise", "file names title module groups")


EXERCISES = {1: Exercise("ex1_kv_bytes", ("kv_bytes_per_token",), "每个 token 的 KV 字节数", "paged_kv", groups_1),
             2: Exercise("ex2_gather_kv", ("gather_kv",), "按块表取回 K/V", "paged_kv", groups_2),
             3: Exercise("ex3_cow", ("PagedSequence",), "fork、写时复制、free", "paged_kv", groups_3),
             4: Exercise("ex4_block_hashes", ("block_hashes", "match_prefix"), "链式块哈希和前缀匹配", "kv_store.prefix",
                         groups_4),
             5: Exercise("ex5_lru", ("LRUCache",), "淘汰策略 LRU", "kv_store.policies", groups_5),
             6: Exercise("ex6_radix", ("RadixCache",), "基数树的 match 和 insert", "kv_store.radix_tree", groups_6)}


def reference(number):
    """讲义的实现：({名字: 对象}, 它所在的文件)。"""
    module = importlib.import_module(EXERCISES[number].module)
    return {name: getattr(module, name) for name in EXERCISES[number].names}, module.__file__
