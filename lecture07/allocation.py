"""KV 池怎样分给请求：连续预留（Orca 的三种）与分页（vLLM），一步一步模拟；抢占时换出再换入要多久。

模拟（01_kv_cache_memory 演示 2、4）：全部请求一开始就排队；每一步每个在跑的请求生成一个 token。只在服务器
满载（队列里还有人在等）的那些步里统计 KV 池的构成：token 状态（已经写进去的）、预留（留给以后的 token）、
内部碎片（分出去了、到结束也用不到）、外部碎片 / 空闲（没分出去）。

- 连续预留（vLLM 论文 §6.1 的三个 Orca 基线）：请求进来时要一整段连续的位置（first-fit），严格先来先服务。
  Max 按最大长度预留；Pow2 把输出长度向上取到 2 的幂（最多多留 1 倍）；Oracle 事先知道输出长度，正好预留。
- 分页（vLLM）：KV 池切成 block_size 个 token 一块，写到新块时才分配；块不够时抢占最后进来的请求
  （释放它的块、放回队首，再进来时已有的 token 当作输入重算）。

    >>> share, running = simulate_contiguous("Oracle", [2, 2, 2], [2, 2, 2], pool=10, max_seq=2048)
    >>> [round(float(x), 2) for x in share], running     # token 状态、预留、内部碎片、外部 / 空闲；平均在跑几个
    ([0.5, 0.3, 0.0, 0.2], 2.0)
"""
from collections import deque

import numpy as np

from paged_kv import n_blocks


def make_lengths(n, seed, means, sigma, max_seq):
    """n 个请求的 (输入长度, 输出长度)：各自服从对数正态分布（均值 means），每个请求总长不超过 max_seq。"""
    rng = np.random.default_rng(seed)
    mu = [np.log(m) - sigma ** 2 / 2 for m in means]          # 对数正态的均值 = exp(μ + σ²/2)
    p = np.clip(np.round(rng.lognormal(mu[0], sigma, n)), 1, max_seq - 1).astype(int)
    o = np.clip(np.round(rng.lognormal(mu[1], sigma, n)), 1, None).astype(int)
    return p.tolist(), np.minimum(o, max_seq - p).tolist()


def reservation(kind, p, o, max_seq):
    """Orca 给一个输入 p、输出 o 的请求预留几个位置（vLLM 论文 §6.1）。"""
    if kind == "Max":
        return max_seq
    if kind == "Pow2":
        return min(max_seq, p + (1 << (o - 1).bit_length()))   # 25 → 32：不小于 o 的 2 的幂
    return p + o                                                # Oracle


def simulate_contiguous(kind, prompts, outputs, pool, max_seq):
    """连续预留：返回 (满载时 KV 池各部分的时间平均占比 [4], 满载时平均在跑的请求数)；从没满载过时 (None, None)。"""
    queue = deque(range(len(prompts)))
    running = []                  # 在跑的请求：[起点, 预留的位置数, 请求号, 结束的那一步]，按起点排序
    tokens = future = reserved = t = 0
    total, n_full, n_running = [0, 0, 0, 0], 0, 0     # total：满载的各步加起来的 4 个部分
    while queue or running:
        while queue:
            r = queue[0]
            need, at = reservation(kind, prompts[r], outputs[r], max_seq), 0
            for i, seg in enumerate(running + [[pool, 0]]):    # first-fit：从低地址找第一个够大的空隙
                if seg[0] - at >= need:
                    break
                at = seg[0] + seg[1]
            else:                 # 没有够大的空隙：先来先服务，队首放不下，后面的也不放
                break
            running.insert(i, [at, need, queue.popleft(), t + outputs[r]])
            tokens, future, reserved = tokens + prompts[r], future + outputs[r], reserved + need
        if queue:                 # 满载：记下这一步 KV 池的构成
            parts = (tokens, future, reserved - tokens - future, pool - reserved)
            total = [a + b for a, b in zip(total, parts)]
            n_full += 1
            n_running += len(running)
        t += 1                    # 解码一步：每个请求写一个 token；写完输出的请求放掉它的整段
        tokens += len(running)
        future -= len(running)
        for seg in [seg for seg in running if seg[3] == t]:
            running.remove(seg)
            tokens, reserved = tokens - prompts[seg[2]] - outputs[seg[2]], reserved - seg[1]
    if n_full == 0:
        return None, None
    return np.array(total) / (n_full * pool), n_running / n_full


def simulate_paged(prompts, outputs, pool, block_size):
    """分页：返回 (占比 [4], 平均在跑的请求数, 抢占记录 [(请求号, 被抢占时的长度)])；前两项同 simulate_contiguous。"""
    n_total = pool // block_size  # 池里一共几个块
    free = n_total
    queue = deque([r, p, o] for r, (p, o) in enumerate(zip(prompts, outputs)))   # [请求号, 长度, 还要生成几个]
    running, preempted = [], []
    total, n_full, n_running = [0, 0, 0, 0], 0, 0
    while queue or running:
        while queue and n_blocks(queue[0][1] + 1, block_size) <= free:   # 放得下已有的 token 和下一个
            free -= n_blocks(queue[0][1], block_size)
            running.append(queue.popleft())
        if queue:
            tokens = sum(length for _, length, _ in running)
            held = (n_total - free) * block_size
            total = [a + b for a, b in zip(total, (tokens, 0, held - tokens, free * block_size))]
            n_full += 1
            n_running += len(running)
        i = 0                     # 解码一步，按进来的先后
        while i < len(running):
            seq = running[i]
            if seq[1] % block_size == 0:       # 最后一块写满了：要一个新块
                while free == 0:               # 没有空闲块：抢占最后进来的（可能就是它自己）
                    victim = running.pop()
                    preempted.append((victim[0], victim[1]))
                    free += n_blocks(victim[1], block_size)
                    queue.appendleft(victim)
                if i == len(running):
                    break
                free -= 1
            seq[1] += 1
            seq[2] -= 1
            if seq[2] == 0:                    # 生成完了：放掉它的块
                free += n_blocks(seq[1], block_size)
                running.pop(i)
            else:
                i += 1
    if n_full == 0:
        return None, None, preempted
    return np.array(total) / (n_full * pool), n_running / n_full, preempted


def swap_seconds(model, n_tokens, block_size, gbps, overhead_us):
    """把一条 n_tokens 长的序列的 KV 换出（或换入）：每层、K 和 V 各对每个块调一次拷贝（vLLM 的 swap_blocks），
    每次 overhead_us 微秒的固定开销，字节按 gbps（GB/s，1 GB = 10⁹ B）传。返回 (拷贝次数, 秒)。

    >>> from kv_store.tiers import ModelSpec
    >>> opt_13b = ModelSpec("OPT-13B", n_layers=40, d_model=5120, n_heads=40, n_kv_heads=40, n_params=13e9)
    >>> n, t = swap_seconds(opt_13b, 512, 16, 16.0, 10.0)    # 40 层 × K、V × 32 块；512 × 800 KiB
    >>> n, round(t * 1e3, 1)
    (2560, 51.8)
    """
    blocks = n_blocks(n_tokens, block_size)
    copies = model.n_layers * 2 * blocks
    nbytes = blocks * block_size * model.kv_bytes_per_token()   # 整块搬：最后一块没写满也一样大
    return copies, copies * overhead_us * 1e-6 + nbytes / (gbps * 1e9)
