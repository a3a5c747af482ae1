"""练习 3 · fork、写时复制、free：把 ref_count 的账记对（约 40 分钟 · ★★★ · 对应 03_sharing_and_cow.py）

【任务】写 PagedSequence 的三个方法。一条序列 = 块表 self.blocks（list：逻辑块 i → 物理块号）+ 已经写入的
token 数 self.length。块池 self.pool（paged_kv.BlockPool，现成的）提供：
  pool.alloc()        取一个空闲块，它的 ref_count 置为 1，返回块号
  pool.incref(b)、pool.decref(b)   块 b 多一个、少一个使用者（decref 降到 0 时块回到空闲表）
  pool.copy_block(b)  写时复制：分配一个新块、把 b 的 K/V 整块拷过去，返回新块号
  pool.ref_count[b]   块 b 现在有几个使用者；pool.block_size 每块几个 token

  1. fork()：复制出一条共享全部块的新序列（并行采样、束搜索）：不拷数据，每块多一个使用者。
     新序列要有自己的一份块表，之后它换块、添块时原来的序列不跟着变。
  2. reserve(n)：为接下来的 n 个 token（n ≥ 1）准备好可写的位置，返回它们的 (物理块号, 块内偏移)，
     两个长度 n 的整数数组。
     - 最后一块没写满、又被共享（ref_count > 1）：写时复制——换成一份自己的，旧块少一个使用者；
     - 再按需分配新块，直到块表放得下 self.length + n 个 token（块数 = ceil(token 数 / 块大小)）；
     - n 可以大于 1、跨过块边界：写时复制看的是写入前的最后一块；
     - 不改 self.length（调用者写完 K/V 后自己加）。
     例：块大小 4，length = 5，reserve(3) → 位置 5、6、7 → 块表第 1 块的偏移 1、2、3。
     例：块大小 2，a 写了 3 个 token（块表 [0, 1]），b = a.fork()，b.reserve(1) → 块 1 没写满又被共享，
     b 的块表变成 [0, 2]（块 2 是块 1 的副本），ref_count [2, 1, 1]。
  3. free()：每块少一个使用者，然后块表清空、length 归零。

【检查】make check EX=3：块号可以和讲义的不同（空闲表换个顺序也对），比的是谁和谁共享、ref_count、读出的内容。
【用在】lecture07/03_sharing_and_cow.py --mine   【参考】paged_kv.py 的 PagedSequence（写完再看）
"""
import numpy as np  # noqa: F401  （reserve 返回 numpy 数组时用得上）


class PagedSequence:
    """一条序列：块表 blocks（逻辑块 i → 物理块号）和已经写入的 token 数 length。"""

    def __init__(self, pool):
        self.pool, self.blocks, self.length = pool, [], 0

    def fork(self):
        """返回一条共享全部块的新 PagedSequence。"""
        # TODO
        raise NotImplementedError

    def reserve(self, n):
        """写时复制（需要时）+ 按需分配，返回接下来 n 个位置的 (物理块号, 块内偏移)。"""
        # TODO
        raise NotImplementedError

    def free(self):
        """每块少一个使用者；blocks 清空，length 归零。"""
        # TODO
        raise NotImplementedError
