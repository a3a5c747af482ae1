"""认前缀：链式块哈希（block_hashes）、从第一块起连续命中几块（match_prefix），和全讲唯一的"命中"定义（usable_hit_tokens）。

vLLM、Mooncake 都这样认前缀：每个完整块一个哈希，哈希链上前一块，所以"哈希相同"就是"从开头到这里都相同"。

    >>> block_hashes([1, 2, 3, 4, 5, 6], block=4)   # 只有一个完整块；结尾 2 个 token 不算哈希
    ['73e200e2b048']
"""
import hashlib

import numpy as np


def block_hashes(tokens, block):
    """每个完整块的哈希 = SHA-256(前一块的哈希 ‖ 这一块的 token)，返回前 12 位十六进制。

    链式：第 i 块的哈希包含了第 0..i 块的全部内容，所以"哈希相同"就等于"从开头到这里都相同"。
    结尾不满一块的 token 不算哈希（vLLM、Mooncake 都只缓存完整的块）。

    >>> a = block_hashes([1, 2, 3, 4, 5, 6, 7, 8], block=4)
    >>> b = block_hashes([1, 2, 3, 4, 9, 9, 9, 9], block=4)
    >>> a[0] == b[0], a[1] == b[1]
    (True, False)
    """
    out, prev = [], b""
    for i in range(len(tokens) // block):
        chunk = np.asarray(tokens[i * block:(i + 1) * block], dtype=np.int64).tobytes()
        prev = hashlib.sha256(prev + chunk).digest()
        out.append(prev.hex()[:12])
    return out


def match_prefix(hashes, cache):
    """前缀缓存命中几块：从第一块起，连续有几个块哈希在 cache 里（cache：{块哈希: 物理块}，或哈希的集合）。

    第一次没命中就停：KV 依赖前面的全部内容，中间缺了一块，后面的块即使还在缓存里也用不上
    （链式哈希下，有容量、会淘汰的缓存里就会出现"父块被淘汰了、子块还在"）。

    >>> match_prefix(["a1", "b2", "c3"], {"a1": 7, "b2": 4}), match_prefix(["a1", "b2", "c3"], {"b2", "c3"})
    (2, 0)
    """
    n = 0
    for h in hashes:
        if h not in cache:
            break
        n += 1
    return n


# ---------------------------------------------------------------- 全讲唯一的"命中"定义
def usable_hit_tokens(hit_blocks, input_len, block_size):
    """命中的前缀里真正用得上的 token 数：最多 输入 − 1 个（最后一个 token 总要重算，才能得到第一个输出），
    而且按整块算。04 演示 3–5，04b，05 的"命中"都是这一条。hit_blocks、input_len 可以是数，也可以是数组。

    >>> usable_hit_tokens(np.array([2, 2, 1, 0]), np.array([2000, 1024, 1, 5]), 512).tolist()   # 1 个 token 的请求：一个也用不上
    [1024, 1023, 0, 0]
    >>> usable_hit_tokens(2, 2000, 512), usable_hit_tokens(0, 1, 512)    # 两个 Python 整数：答案也是 Python 整数
    (1024, 0)
    """
    if type(hit_blocks) is int and type(input_len) is int:     # 模拟里逐个请求问（几十万次）：不绕道 numpy，快 10 倍
        return max(min(hit_blocks * block_size, input_len - 1), 0)
    hit_tokens = np.multiply(np.asarray(hit_blocks, dtype=np.int64), block_size)   # int64：命中块数 × 块大小可能超出 int32
    return np.maximum(np.minimum(hit_tokens, np.subtract(input_len, 1)), 0)


def usable_hits(hit_blocks, input_len, block_size):
    """用得上的前缀命中块：装着至少一个用得上的 token 的块（= ceil(usable_hit_tokens / block_size)）。
    缓存里找到的块数不一定都用得上；这个数才是前缀命中率的分子。

    >>> usable_hits(np.array([2, 2, 1, 3]), np.array([2000, 1024, 1, 1025]), 512).tolist()   # 1,024 个 token 全命中：第 2 块还有 511 个能用
    [2, 2, 0, 2]
    """
    return -(-usable_hit_tokens(hit_blocks, input_len, block_size) // block_size)
