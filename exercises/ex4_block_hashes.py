"""练习 4 · 链式块哈希和前缀匹配（约 20 分钟 · 难度 ★☆☆ · 对应 04_prefix_caching.py 的演示 1、2）

前缀缓存要回答："这个请求开头的多少个块，KV 已经算过了？"vLLM 和 Mooncake 的办法：每个完整的块算一个哈希，
而且第 i 块的哈希把前一块的哈希也算进去——于是"第 i 块的哈希相同"就等于"从开头到第 i 块全都相同"。

【任务 1】block_hashes(tokens, block)：每个完整块的哈希，返回字符串列表。
  第 i 块的哈希 = SHA-256(前一块哈希的 32 字节 digest ‖ 这一块 token 的字节)，取十六进制的前 12 位；
  第 0 块的"前一块哈希"是空字节串 b""；这一块 token 的字节 = np.asarray(块, dtype=np.int64).tobytes()。
  结尾不满一块的 token 不算哈希（vLLM 只缓存完整的块）。Mooncake 的 trace 不一样：不满的最后一块也有一个
  ID（FAST'25 附录 A：6,955 个 token → 14 个 ID，块大小 512）；这里照 vLLM 的做法。
  tokens 可能是 list、tuple 或 numpy 数组；不要改它（调用者之后还要用）。
  用 hashlib.sha256(...).digest() 接着往下链，.hex()[:12] 是要返回的那一段。

    >>> block_hashes([1, 2, 3, 4, 5, 6], block=4)     # 只有一个完整块
    ['73e200e2b048']

【任务 2】match_prefix(hashes, cache)：从第一块起，连续有几个哈希在 cache 里（cache 可以是
  {块哈希: 物理块} 的字典，也可以是哈希的集合：只用 `h in cache`）。第一次没命中就停——
  中间缺了一块，后面的块即使还在缓存里也用不上（KV 依赖前面的全部内容）。

    >>> match_prefix(["a1", "b2", "c3"], {"a1": 7, "b2": 4})
    2

【检查】make check EX=4：手算的几个例子，再是随机的 tokens（块大小 1、3、5、16；不满一块、正好几块；list、
  tuple、numpy 数组）和随机的缓存（dict、set），最后是合成 trace 的 3,000 个请求。
【时间预算】每个用例里你的代码最多用参考实现的 10 倍时间（至少 1 秒）；超出时检查器会说用了多久、预算多少。
【--mine 用在】04_prefix_caching.py（演示 1、2）、04b_radix_cache.py（演示 2）：
  python lecture07/04_prefix_caching.py --mine --demo 1（表里的哈希和观察都用你的函数算）
参考实现：lecture07/kv_store/prefix_match.py 的 block_hashes 和 match_prefix（写完之前别看）。
"""
import hashlib  # noqa: F401

import numpy as np  # noqa: F401


def block_hashes(tokens, block):
    """每个完整块的链式哈希（十六进制前 12 位）的列表。"""
    # TODO
    raise NotImplementedError


def match_prefix(hashes, cache):
    """从第一块起连续命中几块。"""
    # TODO
    raise NotImplementedError
