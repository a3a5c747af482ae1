"""连续预分配与分页的离散模拟（01_kv_cache_memory 演示 2、4 用）：一批请求一开始全部排队，每步每个在跑的
请求生成一个 token；统计服务器满载（队列里还有人等）的那些步里，KV 池被 token 状态、预留、内部碎片、
外部碎片 / 空闲各占多少。

- 连续预分配（Orca 的三种预留，vLLM 论文 §6.1）：每个请求进来时要一整段连续的空间（first-fit），
  严格先来先服务；Max 按最大长度预留，Pow2 把输出长度向上取到 2 的幂，Oracle 正好预留 p + o。
- 分页（vLLM）：KV 池切成 block_size 个 token 一块，写到新块时才分配；块不够时抢占最后进来的请求
  （释放它的块、放回队首，再进来时已生成的 token 当作输入重算）。
- 抢占的代价（vLLM 论文 §4.5、§7.3）：重算 = 重新 prefill（FAST'25 式 1）；换出 / 换入 = 每层、K 和 V 各对
  每个块调一次拷贝（vLLM 的 swap_blocks），每次一个固定开销 + 字节 ÷ 带宽。

    >>> share, conc = simulate_contiguous("Oracle", np.array([2, 2, 2]), np.array([2, 2, 2]), pool=10, max_seq=2048)
    >>> [round(float(x), 2) for x in share], conc      # token 状态、预留、内部碎片、外部 / 空闲；平均并发
    ([0.5, 0.3, 0.0, 0.2], 2.0)
"""
import heapq
from collections import deque

import numpy as np

from kv_store.tiers import EQ1_B, ModelSpec, prefill_compute_time
from paged_kv import n_blocks


def make_lengths(n, seed, means, sigma, max_seq):
    """ShareGPT 式的长度：输入、输出各自服从对数正态分布（均值取论文图 11 的值），总长截到 max_seq。"""
    rng = np.random.default_rng(seed)
    mu = [np.log(m) - sigma ** 2 / 2 for m in means]          # 对数正态的均值 = exp(μ + σ²/2)
    p = np.clip(np.round(rng.lognormal(mu[0], sigma, n)), 1, max_seq - 1).astype(int)
    o = np.clip(np.round(rng.lognormal(mu[1], sigma, n)), 1, None).astype(int)
    return p, np.minimum(o, max_seq - p)


def next_pow2(x):
    return 1 << (int(x) - 1).bit_length()


def reservation(kind, p, o, max_seq):
    """Orca 的三种预留（vLLM 论文 §6.1）：Max 按最大长度；Pow2 把输出长度向上取到 2 的幂（最多多留 1 倍）；
    Oracle 事先知道真实的输出长度，正好预留 p + o。"""
    if kind == "Max":
        return max_seq
    if kind == "Pow2":
        return min(max_seq, p + next_pow2(o))
    return p + o


def simulate_contiguous(kind, prompts, outputs, pool, max_seq):
    """连续预分配：每个请求到来时在池里找一段连续的空间（first-fit）放下整段预留，严格先来先服务。

    每一步所有在跑的请求各生成一个 token。只在队列非空（服务器满载）时统计，
    返回 (各类显存的时间平均占比, 平均同时在跑的请求数)。
    """
    queue = deque(range(len(prompts)))
    segs = []                     # 已分配的连续段 (起点, 大小)，按起点排序
    finish = []                   # (结束的步, 段的起点, 预留, 请求号)
    t, tok, fut, inner, reserved = 0, 0, 0, 0, 0
    n_run, running = 0, 0
    acc = np.zeros(4)             # token 状态、预留（将来的 token）、内部碎片、外部碎片 / 空闲
    steps = 0
    while queue or finish:
        while queue:              # 先来先服务：排在最前面的放不下，后面的也不放
            r = queue[0]
            p, o = int(prompts[r]), int(outputs[r])
            need = reservation(kind, p, o, max_seq)
            start, prev_end, at = None, 0, 0
            for i, (s, size) in enumerate(segs + [(pool, 0)]):
                if s - prev_end >= need:
                    start, at = prev_end, i
                    break
                prev_end = s + size
            if start is None:
                break
            queue.popleft()
            segs.insert(at, (start, need))
            heapq.heappush(finish, (t + o, start, need, r))
            tok += p
            fut += o
            inner += need - p - o
            reserved += need
            n_run += 1
        if queue:                 # 满载时统计这一步的显存构成
            acc += (tok, fut, inner, pool - reserved)
            running += n_run
            steps += 1
        t += 1                    # 解码一步：每个请求写一个 token
        tok += n_run
        fut -= n_run
        while finish and finish[0][0] == t:
            _, start, need, r = heapq.heappop(finish)
            segs.remove((start, need))
            p, o = int(prompts[r]), int(outputs[r])
            tok -= p + o
            inner -= need - p - o
            reserved -= need
            n_run -= 1
    if steps == 0:                # 从来没有人排队：没有满载的步可统计
        return None, None
    return acc / (steps * pool), running / steps


def simulate_paged(prompts, outputs, pool, block_size):
    """分页：KV 池切成 block_size 个 token 一块，写到新块时才分配。块不够时抢占最后进来的请求（vLLM 的重算策略：
    释放它的块、放回队首，再进来时已生成的 token 当作输入重算）。

    返回 (占比, 平均并发, 抢占记录)：前两项与 simulate_contiguous 相同；抢占记录是 [(请求号, 被抢占时的长度)]。
    """
    total = pool // block_size    # 池里一共几个块
    free = total
    queue = deque((r, int(p), int(o)) for r, (p, o) in enumerate(zip(prompts, outputs)))
    run = []                      # [请求号, 当前长度, 剩余要生成的 token 数]，按进入的先后
    preempted = []
    acc = np.zeros(4)
    steps, running = 0, 0
    while queue or run:
        while queue:              # 放得下输入（再加下一个 token 的一块）就进来
            r, p, o = queue[0]
            need = n_blocks(p + 1, block_size)
            if need > free:
                break
            queue.popleft()
            free -= n_blocks(p, block_size)
            run.append([r, p, o])
        if queue:
            tok = sum(L for _, L, _ in run)
            held = total - free
            acc += (tok, 0, held * block_size - tok, free * block_size)
            running += len(run)
            steps += 1
        i = 0                     # 解码一步
        while i < len(run):
            r, L, left = run[i]
            if L % block_size == 0:    # 写满了：要一个新块
                while free == 0:  # 没有空闲块：抢占最后进来的那个
                    r2, L2, left2 = run.pop()
                    preempted.append((r2, L2))
                    free += n_blocks(L2, block_size)
                    queue.appendleft((r2, L2, left2))
                if i >= len(run):
                    break
                free -= 1
            run[i][1] += 1
            run[i][2] -= 1
            if run[i][2] == 0:
                free += n_blocks(run[i][1], block_size)
                run.pop(i)
                continue
            i += 1
    if steps == 0:
        return None, None, preempted
    return acc / (steps * pool), running / steps, preempted


def swap_seconds(model, n_tokens, block_size, gbps, overhead_us):
    """换出（或换入）一条 n_tokens 长的序列的 KV：每层、K 和 V 各对每个块调一次 cudaMemcpyAsync（vLLM 的
    swap_blocks），每次有 overhead_us 的固定开销，字节按 gbps（GB/s）传。返回 (拷贝次数, 秒)。

    >>> opt_13b = ModelSpec("OPT-13B", n_layers=40, d_model=5120, n_heads=40, n_kv_heads=40, n_params=13e9)
    >>> n, t = swap_seconds(opt_13b, 512, 16, 16.0, 10.0)   # 40 层 × K、V × 32 块；512 × 800 KiB 过 PCIe
    >>> n, round(t * 1e3, 1)
    (2560, 51.8)
    """
    nb = n_blocks(n_tokens, block_size)
    copies = model.n_layers * 2 * nb
    nbytes = nb * block_size * model.kv_bytes_per_token()      # 整块搬：最后一块没写满也一样大
    return copies, copies * overhead_us * 1e-6 + nbytes / (gbps * 1e9)


def attention_share(model, n):
    """式 1 里注意力项（∝ n²）占 prefill FLOPs 的比例：a·n²·d / (a·n²·d + b·n·d²)。"""
    return 1 - model.n_layers * EQ1_B * n * model.d_model ** 2 / model.prefill_flops(n)


def recompute_seconds(model, n_tokens, node):
    """把 n_tokens 个 token 当作输入在 node 上重新 prefill 一遍（kv_store.tiers.prefill_compute_time，FAST'25 式 1）。"""
    return prefill_compute_time(model, n_tokens, 0, node=node)


def swap_row(model, node, n_tokens, block_size, gbps, overhead_us, alt_gbps=(), alt_overhead=()):
    """一行：拷贝次数、单程、来回、重算、重算 / 来回；alt：换一个带宽（或固定开销）时的重算 / 来回。"""
    copies, one_way = swap_seconds(model, n_tokens, block_size, gbps, overhead_us)
    rec = recompute_seconds(model, n_tokens, node)
    trip = {g: 2 * swap_seconds(model, n_tokens, block_size, g, overhead_us)[1] for g in alt_gbps}
    return dict(copies=copies, one_way=one_way, round_trip=2 * one_way, recompute=rec, ratio=rec / (2 * one_way),
                round_trip_gbps=trip, ratio_gbps={g: rec / t for g, t in trip.items()},
                ratio_overhead={u: rec / (2 * swap_seconds(model, n_tokens, block_size, gbps, u)[1])
                                for u in alt_overhead})
