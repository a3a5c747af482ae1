"""练习 4 · 链式块哈希和前缀匹配（约 20 分钟 · ★☆☆ · 对应 04_prefix_caching.py 的演示 1、2）

前缀缓存问："这个请求开头的几个块，KV 已经算过了？"vLLM 和 Mooncake：每个完整的块一个哈希，第 i 块的哈希把前一块的
哈希也算进去——于是"第 i 块的哈希相同"就等于"从开头到第 i 块全都相同"。

【任务 1】block_hashes(tokens, block)：每个完整块的哈希，返回字符串的 list。
  第 i 块的哈希 = SHA-256(前一块哈希的 32 字节 digest ‖ 这一块 token 的字节)，取十六进制的前 12 位；
  第 0 块的"前一块哈希"是空字节串 b""；这一块 token 的字节 = np.asarray(块, dtype=np.int64).tobytes()。
  结尾不满一块的 token 不算哈希（vLLM 只缓存完整的块）。
  tokens 可能是 list、tuple 或 numpy 的整数数组（dtype 不一定是 int64）；不要改它（调用者之后还要用）。
  hashlib.sha256(...).digest() 接着往下链，.hex()[:12] 是要返回的那一段。

    >>> block_hashes([1, 2, 3, 4, 5, 6], block=4)     # 只有一个完整块
    ['73e200e2b048']

【任务 2】match_prefix(hashes, cache)：从第一块起，连续有几个哈希在 cache 里。hashes 是 list 或 tuple
  （块哈希，或 trace 里的块号）；cache 可以是 {块哈希: 物理块} 的 dict，也可以是 set：只用 `h in cache`。
  第一次没命中就停——中间缺了一块，后面的块即使还在缓存里也用不上（KV 依赖前面的全部内容）。

    >>> match_prefix(["a1", "b2", "c3"], {"a1": 7, "b2": 4})
    2

【检查】make check EX=4   【用在】lecture07/04_prefix_caching.py --mine   【参考】kv_store/prefix.py（写完再看）
"""
import hashlib  # noqa: F401

import numpy as np  # noqa: F401


def block_hashes(tokens, block):
    """每个完整块的链式哈希（十六进制前 12 位）的 list。"""
    # TODO
    raise NotImplementedError


def match_prefix(hashes, cache):
    """从第一块起连续命中几块。"""
    # TODO
    raise NotImplementedError
