"""认前缀：链式块哈希 block_hashes，和从第一块起连续命中几块 match_prefix。

vLLM、Mooncake 都这样认前缀：每个完整块一个哈希，哈希链上前一块，所以"第 i 块的哈希相同"就是
"从开头到第 i 块全都相同"。

    >>> block_hashes([1, 2, 3, 4, 5, 6], block=4)     # 只有一个完整块；结尾 2 个 token 不算哈希
    ['73e200e2b048']
"""
import hashlib

import numpy as np


def block_hashes(tokens, block):
    """每个完整块的哈希 = SHA-256(前一块的哈希 ‖ 这一块的 token)，取前 12 位十六进制。
    结尾不满一块的 token 不算哈希（vLLM 只缓存完整的块）。

    >>> a = block_hashes([1, 2, 3, 4, 5, 6, 7, 8], block=4)
    >>> b = block_hashes([1, 2, 3, 4, 9, 9, 9, 9], block=4)
    >>> a[0] == b[0], a[1] == b[1]
    (True, False)
    """
    out, prev = [], b""
    for i in range(len(tokens) // block):
        chunk = np.asarray(tokens[i * block:(i + 1) * block], dtype=np.int64).tobytes()
        prev = hashlib.sha256(prev + chunk).digest()       # 链上前一块：包含了第 0..i 块的全部内容
        out.append(prev.hex()[:12])
    return out


def match_prefix(hashes, cache):
    """从第一块起，连续有几个哈希在 cache 里（cache：{块哈希: 物理块}，或哈希的集合）。

    第一次没命中就停：KV 依赖前面的全部内容，中间缺了一块，后面的块即使还在缓存里也用不上。

    >>> match_prefix(["a1", "b2", "c3"], {"a1": 7, "b2": 4}), match_prefix(["a1", "b2", "c3"], {"b2", "c3"})
    (2, 0)
    """
    n = 0
    for h in hashes:
        if h not in cache:
            break
        n += 1
    return n
