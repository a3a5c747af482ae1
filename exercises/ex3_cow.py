"""练习 3 · fork、写时复制、free：把 ref_count 的账记对（约 40 分钟 · 难度 ★★★ · 对应 03_sharing_and_cow.py）

【任务】写 PagedSequence 的三个方法。一条序列 = 块表 self.blocks（逻辑块 i → 物理块号）+ 已经写入的
token 数 self.length。块池 self.pool（paged_kv.BlockPool，现成的）提供：
  pool.alloc()        取一个空闲块，它的 ref_count 置为 1，返回块号
  pool.incref(b)      块 b 多一个使用者
  pool.decref(b)      块 b 少一个使用者；降到 0 时块回到空闲表
  pool.copy_block(b)  写时复制：分配一个新块、把 b 的 K/V 整块拷过去，返回新块号（pool.n_cow 加 1）
  pool.ref_count[b]   块 b 现在有几个使用者；pool.block_size 每块几个 token

  1. fork()：复制出一条共享全部块的新序列（并行采样、束搜索）：不拷数据，只给每个块 incref。
     新序列要有自己的一份块表（list），之后它换掉某一块时不能影响原来的序列。
  2. reserve(n)：为接下来的 n 个 token 准备好可写的位置，返回它们的 (物理块号数组, 块内偏移数组)。
     - 最后一块没写满（self.length 不是块大小的整数倍）、又被共享（ref_count > 1）：写时复制——
       换成 copy_block 出来的新块，再给旧块 decref（b 不再用它）。这两步谁先谁后结果一样：只有 ref_count > 1
       才复制，decref 以后旧块还有别的序列用着，不会回到空闲表；
     - 再按需分配新块，直到块表能放下 self.length + n 个 token；
     - n 可以大于 1、跨过块边界（prefill、一次写几个 token）：先做上面的写时复制（看的是写入前的最后一块
       self.blocks[-1]），再分配新块——先分配的话 blocks[-1] 已经是新块，共享的旧块会被悄悄写坏；
     - 不改 self.length（调用者 paged_step 写完 K/V 后自己加）。
     例：块大小 4，length = 5，reserve(3) → 位置 5、6、7 → 块表里第 1 块的偏移 1、2、3。
  3. free()：每个块 decref，然后块表清空、length 归零（请求结束、束被淘汰）。

    >>> from paged_kv import BlockPool
    >>> pool = BlockPool(None, n_blocks=4, block_size=2, copy_fn=lambda src, dst: None)
    >>> a = PagedSequence(pool); _ = a.reserve(3); a.length = 3     # 块 0 满、块 1 写了 1 个
    >>> b = a.fork(); _ = b.reserve(1)        # 块 1 没写满又被共享 → 复制成块 2
    >>> b.blocks, pool.ref_count.tolist()
    ([0, 2], [2, 1, 1, 0])

【检查】make check EX=3：手算的几个小例子，再是随机的 fork / reserve(n) / free 脚本（块大小 1、3、5、16），
  每一步都和参考实现比——块号可以不同（空闲表换个顺序也对），比的是谁和谁共享、ref_count、每条序列读出的内容。
【时间预算】每个用例里你的代码最多用参考实现的 10 倍时间（至少 1 秒）；超出时检查器会说用了多久、预算多少。
【--mine 用在】03_sharing_and_cow.py、02_paged_attention.py、04_prefix_caching.py（演示 2）、06_triton_cow_clone.py
  （GPU 上的写时复制用同一个类）：python lecture07/03_sharing_and_cow.py --mine
参考实现：lecture07/paged_kv.py 的 PagedSequence（写完之前别看）。
"""
import numpy as np  # noqa: F401  （reserve 返回 numpy 数组时用得上）

from paged_kv import n_blocks  # noqa: F401  n_blocks(n_tokens, block_size) = ceil(n_tokens / block_size)


class PagedSequence:
    """一条序列：块表 blocks（逻辑块 i → 物理块号）和已经写入的 token 数 length。"""

    def __init__(self, pool):
        self.pool, self.blocks, self.length = pool, [], 0

    def fork(self):
        """返回一条共享全部块的新 PagedSequence（每块 incref）。"""
        # TODO
        raise NotImplementedError

    def reserve(self, n):
        """写时复制（需要时）+ 按需分配，返回接下来 n 个位置的 (物理块号, 块内偏移)，都是长度 n 的整数数组。"""
        # TODO
        raise NotImplementedError

    def free(self):
        """每块 decref；blocks 清空，length 归零。"""
        # TODO
        raise NotImplementedError
