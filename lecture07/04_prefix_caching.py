"""CS349E · 第 7 讲 · 04_prefix_caching.py —— 前缀缓存：算过的 KV 存下来，给后面的请求用。

【问题】很多请求的开头相同（系统提示、few-shot 例子、多轮对话的历史）。这些前缀的 KV 只需算一次——
前提是能"认出"这段前缀算过，而且"存得下"。怎样认出来？真的能省多少？缓存要多大、用什么淘汰策略？
省下的命中换成 GPU 时间是多少？

【运行】python lecture07/04_prefix_caching.py          （约 7 秒，2 核笔记本，不需要 GPU）
        python lecture07/04_prefix_caching.py --demo 3 --more   （只跑演示 3，印出全部观察）
        python lecture07/04_prefix_caching.py --trace 你的trace.jsonl   （演示 3–5 改用 Mooncake 格式的
              trace 文件，比如 Mooncake 仓库 FAST25-release/traces/ 下公开的三个；格式和报错规则见本目录的 TRACES.md）
  演示 1：怎样认出来——链式块哈希（Mooncake arXiv v3 图 3、vLLM 的自动前缀缓存）。
  演示 2：在第 2 讲的小模型上真的复用：N_SHARING 个请求共享 few-shot 前缀（长度取自 vLLM 论文 §6.4、图 16）。
  演示 3：仿 Mooncake Tool&Agent trace 的合成负载：块的热度。
  演示 4：缓存容量与命中率、LRU / LFU / LengthAwareCache
          （Mooncake arXiv v3 表 1），以及离线最优的 MIN（Belady）。
  演示 5：命中换算成 LLaMA3-70B 在 8×A800 上的 prefill GPU 时间（Mooncake FAST'25 表 1、式 1）。
  另一种认前缀的办法——SGLang 的基数树——在 04b_radix_cache.py。
【命中】本讲只有一种"命中"：真实的缓存用得上的前缀命中——从第一块起连续在缓存里的块，而且最后一个 token
        总要重算（只装着最后一个 token 的块不算命中；kv_store.prefix_match.usable_hits）。别的计数（块的复用）另有名字。
【改代码】设置都在下面"学生可以改的设置"里，不合理的值一行拒绝（退出码 2）；淘汰策略的类在 kv_store/eviction.py。

【练习】exercises/ex4_block_hashes.py（block_hashes、match_prefix，演示 1、2）和 exercises/ex5_lru.py（LRUCache，演示 4）；
        make check EX=4 / EX=5，再加 --mine 运行本脚本。
【试一试】
  1. 把 N_SHARING 改成 1（--demo 2）：只有一个请求时，前缀缓存还省得下计算和显存吗？
  2. 把 BLOCK_SIZE 改成 64（--demo 2）：块变大以后，前缀的零头变成多少，省下的比例怎样变？
  3. 把 CAPACITIES 改成 (10_000, 1)（--demo 4）：缓存只能放 1 块时，LRU 还剩多少命中？
  4. 把 POLICIES 改成 ("lru", "s3fifo")（--demo 4）：S3-FIFO（Yang 等，SOSP'23）离离线最优的 MIN 还差多少？
     自己的淘汰策略：照 kv_store/eviction.py 开头的说明写一个类、注册，再把名字加进 POLICIES。
  5. 把 SAVED_CAPS 改成 (5_000, 500)（--demo 5）：缓存只有几百块时，prefill 的 GPU 时间还能省多少？
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.realpath(__file__))))  # 仓库根目录：让 lab_common 包可以 import
from lab_common.endings import quiet_endings  # noqa: E402
quiet_endings()  # 最先做（还没 import numpy）：这之后按 Ctrl-C、管道被关都只打一行，不打印 traceback
import itertools  # noqa: E402
import numpy as np  # noqa: E402
from lab_common import console  # noqa: E402
from lab_common.console import ArgParser, fail, print_header, print_observations, print_table, print_text, status  # noqa: E402
from lab_common.say import (change, count, fixed, integer, listing, never_below, order, pct, pct_of, rel_change,  # noqa: E402
                            same, sci, share, size, span, times, value, vs, words)
from lab_common.script_tools import run_lecture  # noqa: E402
from lab_common.settings import Source, check_setting, is_int  # noqa: E402
from lab_common.transformer_lab import TINY, KVCache, config_like, forward, init_params  # noqa: E402
from kv_store.eviction import CACHE_POLICIES, LENGTHAWARE_DEFINITION, LENGTHAWARE_SOURCE, cap_name  # noqa: E402
from kv_store.replay import simulate, sweep  # noqa: E402
from kv_store.prefix_match import block_hashes, match_prefix, usable_hit_tokens, usable_hits  # noqa: E402
from kv_store.tiers import A800_X8, LLAMA2_70B, LLAMA3_70B, TIERS, hit_tier, trace_prefill_time  # noqa: E402
from kv_store.traces import dense_ids, load_trace, make_trace  # noqa: E402
from kv_store.traces import shared_prefix_requests as make_shared_prefix_requests  # noqa: E402
from kv_store.trace_file import BLOCK_SIZE as TRACE_BLOCK_SIZE  # noqa: E402  Mooncake trace 的块大小：512 token
from kv_store.trace_file import TraceError  # noqa: E402
from paged_kv import BlockPool, PagedSequence, n_blocks, paged_step  # noqa: E402

# ---- 学生可以改的设置 ----
TRACE_SEED = 0                      # 合成 trace 的随机种子
MODEL_SEED = 0                      # 小模型权重的随机种子
PROMPT_SEED = 5                     # 演示 2 里随机前缀 / 后缀的种子
N_SHARING = 8                       # 演示 2：共享前缀的请求数
FEW_SHOT = (("1-shot", 80), ("5-shot", 341))   # 演示 2 的前缀：(名字, token 数)；默认取 vLLM 论文图 16 的两个前缀
SUFFIX_LEN = (10, 30)               # 演示 2：每个请求自己的后缀长度，在 [10, 30) 里均匀随机（token）
BLOCK_SIZE = 16                     # 演示 2 的块大小（token；vLLM 默认 16）
CAPACITIES = (None, 100_000, 50_000, 30_000, 10_000, 1_000)   # 演示 4 的缓存容量（块；论文表 1 的六列）；None = 无限
POLICIES = ("lru", "lfu", "lengthaware")   # 演示 4 比较的策略（Mooncake arXiv v3 表 1 的三种）；可选的见
                                          # kv_store.eviction.CACHE_POLICIES（还有 "s3fifo"，以及你自己注册的）
CONTRAST = "lengthaware_early"      # 演示 4 的对照行（--more）：CACHE_POLICIES 里的任何一种（默认：LengthAware 的另一种读法）
CONTRAST_CAPS = (10_000,)           # 对照行算哪几个容量（每格约 0.6 秒，默认只算一格）；() = 不要对照行
BOUND = "min"                       # 演示 4 的上界：Belady 的 MIN（离线最优，逐块命中）
HOT_ACCESSES = 1_000                # 演示 3：最热的块至少被访问这么多次，才说"有特别热的块"
SAVED_CAPS = (None, 10_000, 1_000)  # 演示 5 比较的缓存容量（块）；None = 无限
SAVED_POLICY = "lru"                # 演示 5 用哪种淘汰策略（CACHE_POLICIES 里的任何一种，不必在 POLICIES 里）
TIER_FOR_HITS = 1                   # 演示 5：命中的 KV 从哪一层读（TIERS[1] = 本机 DRAM）
LOCAL_KV_BYTES = 10 ** 12           # 演示 5：一台机器能放前缀缓存的本机容量（字节）；超出的部分在别的机器上

# ---- 论文的数字（只用来对照，标明出处）----
PAPER_TABLE1 = {   # Mooncake arXiv 2407.00079v3 表 1，容量 Inf/100000/50000/30000/10000/1000
    "lru": {None: 0.51, 100_000: 0.51, 50_000: 0.50, 30_000: 0.48, 10_000: 0.40, 1_000: 0.30},
    "lfu": {None: 0.51, 100_000: 0.51, 50_000: 0.49, 30_000: 0.43, 10_000: 0.35, 1_000: 0.30},
    "lengthaware": {None: 0.51, 100_000: 0.50, 50_000: 0.48, 30_000: 0.42, 10_000: 0.35, 1_000: 0.30},
}
KIMI = "Kimi 线上一小时的采样"   # FAST'25 §5.2.1、附录 A.1；arXiv v3 §4
# Mooncake 公开的 trace 都在 GitHub 仓库 kvcache-ai/Mooncake 的 FAST25-release/ 下。两篇论文用的不是同一个：
# arXiv v3（§4、表 1）用 arxiv-trace/mooncake_trace.jsonl（2025 年 9 月以前在仓库根目录）；FAST'25 表 2 用 traces/ 下的三个。
KNOWN_TRACE_FILES = {   # git blob 哈希（git hash-object）→ PAPER_TRACES 里的名字；哈希取自 kvcache-ai/Mooncake 仓库的提交
    "b084f8fe8a01a50bbf2364de18a2d9fff896952d": "arXiv v3 的 trace",      # mooncake_trace.jsonl，提交 e6b405b1（2024-07-10）
    "d68d1c6ce27b35a168edc235d36d0202d233f0f2": "arXiv v3 的 trace",      # 同一文件的更新版，提交 edbca8e5（2024-07-31）起
    "b765599d1e0828b37f68d481563c385d3c11de54": "FAST'25 Tool&Agent",     # FAST25-release/traces/toolagent_trace.jsonl
    "5a371794b81d7fc7487ec8a02a2c631bcc7fbdf8": "FAST'25 Conversation",   # FAST25-release/traces/conversation_trace.jsonl
    "e4838049c0dcfc358a5f24ab08251279475cba94": "FAST'25 Synthetic",      # FAST25-release/traces/synthetic_trace.jsonl
}
PAPER_TRACES = [   # (名字, 请求数, 时长（分钟）, 平均输入, 平均输出, 无限容量的命中率, cache ratio, 是怎么来的)
    ("arXiv v3 的 trace", 23_608, 60, 7_590, 182, 0.51, None, KIMI),     # arXiv v3 §4、表 1 的 Inf 列
    ("FAST'25 Tool&Agent", 23_608, 60, 8_596, 182, None, 0.59, KIMI),    # FAST'25 表 2；§5.2.1："sampled over a 1-hour period"
    ("FAST'25 Conversation", 12_031, 60, 12_035, 343, None, 0.40, KIMI),   # §5.2.1："We sampled 1 hour of conversation traces"
    ("FAST'25 Synthetic", 3_993, None, 15_325, 149, None, 0.66,            # 论文没给时长（泊松到达，附录 A.1）
     "由 ShareGPT、Leval、LooGLE 三个公开数据集拼成、到达时间按泊松过程生成的合成负载，FAST'25 §5.2.1"),
]   # 默认只列前两个；用 --trace 时四个都列
VLLM_FIG16 = dict(   # vLLM 论文（Kwon et al., SOSP'23）§6.4、图 16：共享前缀的翻译负载
    model="LLaMA-13B", dataset="WMT16 英译德", baseline="Orca (Oracle)",
    prefix_tokens={"1-shot": 80, "5-shot": 341},    # 图 16 的图注：1 个例子 80 token、5 个例子 341 token
    throughput_x={"1-shot": 1.67, "5-shot": 3.58},   # vLLM 的吞吐是 Orca (Oracle) 的几倍（vLLM 整体，不只是共享）
)
_V = VLLM_FIG16
FEW_SHOT_SOURCE = Source((("1-shot", 80), ("5-shot", 341)), "vLLM 论文 §6.4 图 16", "的两个前缀")   # FEW_SHOT 的论文值
POOL_NOTES = ("和真实系统的三处不同。最后一块：vLLM v1 把命中截在 n − 1 个 token（按整块），nano-vllm 只查第 0 到"
              "倒数第 2 块——这里也一样，整段命中时最后一块重算。钉住：这里的缓存自己持有一份引用，请求走了块也留着"
              "（演示只数复用，不用管块什么时候被挤掉）；vLLM、nano-vllm 不钉，请求结束时块回到空闲表、哈希还在，"
              "被重新分配之前都还能命中。登记：nano-vllm 在一步算完以后才登记这一步的块哈希，同一批 prefill 的请求"
              "互相用不上；这里请求一个一个来，每个都在前一个登记之后。")
VLLM_FIG16_NOTE = (f"对照 vLLM 论文 §6.4 图 16（{_V['model']}、{_V['dataset']}，前缀 {_V['prefix_tokens']['1-shot']} / "
                   f"{_V['prefix_tokens']['5-shot']} token）：共享 1-shot、5-shot 前缀时 vLLM 的吞吐是 {_V['baseline']} 的 "
                   f"{_V['throughput_x']['1-shot']}、{_V['throughput_x']['5-shot']} 倍。那是 vLLM 整体（分页 + 共享）和 Orca "
                   "比，省下的显存换成了更大的批；这里数的是 prefill 少算的 token，不是同一个量。")
FAST25_SHAPE = 'FAST\'25 表 1：l = 80、d = 8192、gqa = 8（查询头数 / KV 头数）；§5.3.1：每 token 的 KV "320 KB"'
SRC_LOCAL_KV = Source(10 ** 12, "FAST'25 §5.3.1", "每台约 1 TB DRAM")       # LOCAL_KV_BYTES 的论文值
MOONCAKE_PARTIAL = "FAST'25 附录 A：6,955 个 token → 14 个 ID"   # 不满的最后一块也有 ID（arXiv v3 §4.1 同样）
MODEL = LLAMA3_70B        # 演示 5 的模型：式 (1)、128 GB/s 都出自 FAST'25，它的模型是 LLaMA3-70B（表 1）
f2 = fixed(2, top=1)           # 命中率的格式：和表格一样两位小数
MODEL_NOTE = (f"arXiv v3 用的 dummy LLaMA2-70B（§1.2）和 {MODEL.name} 的层数、d、KV 头数都相同，每 token 的 KV 也一样"
              * ((LLAMA2_70B.n_layers, LLAMA2_70B.d_model, LLAMA2_70B.n_kv_heads) == (MODEL.n_layers, MODEL.d_model,
                                                                                      MODEL.n_kv_heads))
              + "。存储用二进制单位（1 KiB = 1,024 字节），带宽用十进制（1 GB/s = 10⁹ 字节/秒）。")
LOCAL_NOTE = "不溢出：命中的 KV 全从{}读、不算放不下而改从下一层读的部分时的时间。"   # --more 的那一列
HIT_RULE = ("演示 3–5 按 trace 算时，不满的最后一块也算一块访问；命中只数真实缓存用得上的：最后一个 token 总要"
            "重算，只装着它的那块不算命中。")


# =============================================================================
def demo1_hashing():
    """怎样认出"这段前缀算过"？——链式块哈希。"""
    print_header("演示 1：链式哈希——每块的哈希 = hash(前一块的哈希 ‖ 这一块的 token)，块大小 4")
    sys_prompt = [101, 7, 7, 3, 55, 2, 9, 14]                    # 两块长的"系统提示"
    reqs = {
        "A": sys_prompt + [21, 22, 23, 24, 25, 26, 27, 28, 29],   # 17 个 token：4 个满块 + 1 个零头
        "B": sys_prompt + [21, 22, 23, 24, 31, 32, 33, 34],
        "C": [101, 7, 7, 3, 55, 2, 9, 99] + [21, 22, 23, 24, 25, 26, 27, 28],   # 系统提示的最后一个 token 改了
    }
    h = {name: block_hashes(toks, block=4) for name, toks in reqs.items()}
    names = {"A": "A", "B": "B", "C": "C（改了系统提示）"}
    print_table(["请求", "token 数", "每个完整块的哈希（前 8 位）"],
                [[names[n], len(reqs[n]), " ".join(x[:8] for x in h[n])] for n in reqs])
    d = dict(hashes=h, a_b_common=common_prefix(h["A"], h["B"]), a_c_common=common_prefix(h["A"], h["C"]),
             c_first_changed_block=common_prefix(reqs["A"], reqs["C"]) // 4, c_blocks=len(h["C"]),
             c_changed=changed_blocks(h["A"], h["C"]),
             a_tail=len(reqs["A"]) % 4)
    print_observations(*observations_1(d))
    return d


def common_prefix(x, y):
    """x、y 从开头起有几个元素相同：common_prefix("abc", "abd") → 2。"""
    return next((i for i, (p, q) in enumerate(zip(x, y)) if p != q), min(len(x), len(y)))


def changed_blocks(x, y):
    """x、y 的哈希逐块比，哪几块（从 1 数）不同：changed_blocks("abc", "axy") → [2, 3]。"""
    return [i + 1 for i, (p, q) in enumerate(zip(x, y)) if p != q]


def observations_1(d):
    """演示 1 的观察：数都来自 d（哈希比出来的块数）。"""
    ab, k, tail = d["a_b_common"], d["c_first_changed_block"] + 1, d["a_tail"]
    lines = [f"A 和 B 的前 {ab} 块哈希相同：B 直接用 A 算好的这 {ab} 块 KV，从第 {ab + 1} 块起自己算。"]
    if d["c_changed"] == list(range(k, d["c_blocks"] + 1)):
        lines.append(f"C 只改了第 {k} 块里的一个 token，与 A 相同的只剩前 {d['a_c_common']} 块，第 "
                     f"{span([k, d['c_blocks']], integer)} 块的哈希全变了：哈希链住了前面的全部内容，只有从开头起连续相同的块能复用。")
    else:                  # 哈希没有链上前一块（比如 --mine 用了这样写的 block_hashes）：表里后面的块哈希相同
        same_after = [i for i in range(k + 1, d["c_blocks"] + 1) if i not in d["c_changed"]]
        if not same_after:
            same_after = [i for i in range(1, d["c_blocks"] + 1) if i not in d["c_changed"]]
        lines.append(f"C 只改了第 {k} 块里的一个 token，可第 {listing([str(i) for i in same_after])} 块的哈希和 A 相同："
                     "这些哈希没有链住前面的内容，按它们匹配会把前缀不同的 KV 当成同一份。")
    more = []
    if tail:
        more.append(f"A 最后 {tail} 个 token 不满一块，不算哈希、不进缓存（vLLM 也只缓存完整的块）；Mooncake（Kimi 背后的推理系统，"
                    f"05 脚本讲它）公开的 trace 给不满的最后一块也编了号（{MOONCAKE_PARTIAL}）。")
    return lines, more


# =============================================================================
def run_shared_prefix(params, cfg, prefix, suffixes, block_size):
    """N 个请求依次到达，共享 prefix：前缀缓存 = {块哈希 → 物理块}，缓存自己也持有一份引用（ref_count +1）。
    命中按全讲唯一的定义（kv_store.prefix_match.usable_hit_tokens）：最后一个 token 总要算，所以一个请求整段都在
    缓存里（和前面某个请求一模一样、又正好是整块）时，最后一块照样重算。
    返回计数（repeats：整段都在缓存里的请求数），以及最后一个 token 的 logits 与从头算的最大差。"""
    max_len = len(prefix) + max(len(s) for s in suffixes)
    pool = BlockPool(cfg, n_blocks=2 * len(suffixes) * n_blocks(max_len, block_size), block_size=block_size)
    cache, computed, worst, mapped, repeats = {}, 0, 0.0, 0, 0
    for suf in suffixes:
        toks = np.concatenate([prefix, suf])
        hs = block_hashes(toks, block=block_size)
        seq = PagedSequence(pool)
        found = match_prefix(hs, cache)      # 从第一块开始，连续几块在缓存里
        hit = int(usable_hit_tokens(found, len(toks), block_size)) // block_size   # 映射用得上的整块：至少留最后一个 token 来算
        repeats += hit < found               # 整段都在缓存里（正好整块）：最后一块不映射，重算
        for hsh in hs[:hit]:
            seq.blocks.append(cache[hsh])
            pool.incref(cache[hsh])          # 共享：只加引用计数，不复制 KV
        mapped += hit
        seq.length = len(seq.blocks) * block_size
        new = toks[seq.length:]
        last = paged_step(params, cfg, [seq], [new])[0][-1]
        computed += len(new)
        for i, hsh in enumerate(hs):         # 把这个请求的完整块登记进缓存
            if hsh not in cache:
                cache[hsh] = seq.blocks[i]
                pool.incref(seq.blocks[i])
        ref = forward(params, cfg, toks[None], cache=KVCache(cfg, 1))[0, -1]
        worst = max(worst, float(np.max(np.abs(last - ref))))
    total = sum(len(prefix) + len(s) for s in suffixes)
    return dict(n=len(suffixes), prefix_len=len(prefix), total=total, computed=computed, worst=worst,
                cached_blocks=len(cache), mapped=mapped, repeats=repeats, used_shared=pool.num_used,
                used_private=sum(n_blocks(len(prefix) + len(s), block_size) for s in suffixes),
                saved=1 - computed / total, speedup=total / computed, prefix_share=len(prefix) * len(suffixes) / total,
                full_prefix_blocks=len(prefix) // block_size, prefix_tail=len(prefix) % block_size)


def shared_prefix_requests(vocab):
    """演示 2 的请求（种子 PROMPT_SEED）：{前缀名: (前缀, [N_SHARING 个后缀])}。"""
    return make_shared_prefix_requests(vocab, FEW_SHOT, N_SHARING, SUFFIX_LEN, PROMPT_SEED)


def demo2_shared_prefix():
    """在真模型上复用前缀：能省多少计算？结果和从头算一样吗？"""
    n, bs = N_SHARING, BLOCK_SIZE
    prefix_note = "前缀长度同 vLLM 论文 §6.4"
    if not FEW_SHOT_SOURCE.holds(FEW_SHOT):
        prefix_note = "前缀是你设的"
    print_header(f"演示 2：复用 few-shot 前缀（{n} 个请求、块大小 {bs}，{prefix_note}）")
    longest = max(plen for _, plen in FEW_SHOT) + SUFFIX_LEN[1] - 1
    cfg = config_like(TINY, max_seq=n_blocks(longest, bs) * bs)   # 模型的上下文按最长的请求定
    params = init_params(cfg, seed=MODEL_SEED)
    print_text(f"模型：第 2 讲的 TINY（{cfg.n_layers} 层、d_model={cfg.d_model}、GQA {cfg.n_heads}/{cfg.n_kv_heads}，"
               f"float64，权重种子 {MODEL_SEED}）；前缀和后缀是随机 token（种子 {PROMPT_SEED}），"
               f"后缀 {span([SUFFIX_LEN[0], SUFFIX_LEN[1] - 1], integer)} 个。")
    with status(f"在小模型上跑 {len(FEW_SHOT)} 种前缀 × {n} 个请求，每个请求再从头算一遍来核对…"):   # 终端上约 0.8 s
        res = {name: run_shared_prefix(params, cfg, prefix, suffixes, bs)
               for name, (prefix, suffixes) in shared_prefix_requests(cfg.vocab).items()}
    print_table(["前缀", "长度", "总输入", "实际算", "省下", "少算", "缓存块", "不共享", "共享", "最大差"],
                [[k, integer(r["prefix_len"]), integer(r["total"]), integer(r["computed"]), pct(r["saved"]),
                  f"{r['speedup']:.1f}×", integer(r["cached_blocks"]), integer(r["used_private"]), integer(r["used_shared"]),
                  sci(r["worst"])] for k, r in res.items()],
                caption=f"总输入 / 实际算：{n} 个请求的 token 数；不共享 / 共享：同时在场时占的物理块；"
                        "最大差：最后一个 token 的 logits 与从头算的 max |diff|。")
    if console.SHOW_MORE:
        print_table(["前缀", "满块", "零头", "前缀占输入", "映射次数"],
                    [[k, integer(r["full_prefix_blocks"]), integer(r["prefix_tail"]), pct(r["prefix_share"]),
                      integer(r["mapped"])] for k, r in res.items()],
                    caption="前缀里只有满块能复用；零头（不满一块的 token）每个请求都要和自己的后缀一起重算。"
                            "映射次数：后来的请求把缓存里的块放进自己的块表，只加引用计数。")
    print_observations(*observations_2(res, n, bs))
    return res


def observations_2(res, n, block_size):
    """演示 2 的观察：res 就是表格那一份数；n、block_size 是句子提到的设置。"""
    name = max(res, key=lambda k: res[k]["prefix_len"])          # 最长的前缀（同样长时取先出现的）
    big, worst = res[name], max(r["worst"] for r in res.values())
    repeats = sum(r["repeats"] for r in res.values())
    exact = f"logits 与从头算一致到 {sci(worst)}"
    if worst == 0:
        exact = "logits 与从头算逐位相同（最大差 0.0）"
    why = f"前缀不满一块（块大小 {block_size}），后面 {n - 1} 个请求什么也复用不了"
    if n == 1:
        why = "只有 1 个请求：没有后来的请求来用缓存里的块"
    more = [POOL_NOTES, VLLM_FIG16_NOTE]
    if not big["mapped"]:
        return [f"{why}；每个前缀都省下 0%，显存也没有省；{exact}。"], more
    formula = f"省下的比例 ≈ {n - 1}/{n} × 前缀占输入的比例（{name} {pct(big['prefix_share'])}）"
    if big["prefix_tail"]:
        formula += f"，再减去每个请求都要重算的零头（{big['prefix_tail']} 个 token）"
    shared = "共享的前缀块"
    first = (f"{name} 省下 {pct(big['saved'])} 的计算：后面 {n - 1} 个请求把前缀的 {big['full_prefix_blocks']:,} 个满块"
             f"映射到缓存里的物理块（只加引用计数），{exact}。")
    if not big["full_prefix_blocks"]:            # 前缀不满一块：映射上的只能是碰巧相同的整块（词表小，后缀开头会撞上）
        shared = "碰巧相同的块"
        first = (f"{name} 的前缀只有 {big['prefix_len']:,} 个 token，不满一块（块大小 {block_size}）：省下的 "
                 f"{pct(big['saved'])} 全来自 {count(big['mapped'], '次映射')}，映射的是碰巧相同的整块（前缀加上后缀开头"
                 f"碰巧相同的 token），{exact}。")
        formula = f"前缀的满块是 0 个，{formula}：按它算是 0%"
    memory = (f"显存也省了：{n} 个请求同时在场时，{name} 不共享要 {big['used_private']:,} 块，共享只要 "
              f"{big['used_shared']:,} 块（{pct(big['used_shared'] / big['used_private'])}）：{shared}只存一份。")
    if repeats:
        return [first, f"有 {count(repeats, '个请求')}和前面某个请求一模一样、正好是整块：整段都在缓存里，最后一块照样"
                       f"重算（{block_size} 个 token）——要最后一个 token 的 logits 才有第一个输出。"], [formula + "。", memory] + more
    return [first, formula + "。"], [memory] + more


# =============================================================================
def read_trace(trace_path=None, block_size=None):
    """trace_path=None：合成 trace（种子 TRACE_SEED）；否则读 trace 文件（出错抛 TraceError）。"""
    if trace_path is None:
        return make_trace(TRACE_SEED)
    return load_trace(trace_path, block_size or TRACE_BLOCK_SIZE)


def trace_sweep(trace, trace_path=None, block_size=None, capacities=None, demos=(3, 4, 5), with_contrast=True):
    """演示 3–5 共用的一份数据：trace 和命中表 {(策略, 容量): 每个请求的前缀命中块数}（含 MIN），只算一遍。
    demos：要跑哪几个演示，只算它们要的格子（演示 3 只要无限容量的一格，演示 5 只要 SAVED_CAPS 的几格，
    演示 4 要整张表）；with_contrast=False：不算对照行（它只在 --more 时印）。"""
    block_size = block_size or TRACE_BLOCK_SIZE
    cells = []                                                            # 演示 4 以外要的格子
    if 5 in demos:
        cells += [(SAVED_POLICY, c) for c in SAVED_CAPS]
    if 3 in demos:
        cells.append((lead_policy(), None))
    if 4 not in demos:
        with status("正在按 trace 模拟缓存……"):                        # 只在终端上显示
            hits = sweep(trace, (), (), extra=cells)
        return dict(trace=trace, hits=hits, path=trace_path, block_size=block_size, capacities=(), contrast_caps=())
    if capacities is None:
        capacities = CAPACITIES
    caps = tuple(capacities)
    grid = {(p, c) for p in POLICIES + (BOUND,) for c in caps}          # 演示 4 的整张表
    extra = [cell for cell in cells if cell not in grid]                  # 演示 3、5 另外要的格子：只算它们那一种策略
    contrast = ()
    if with_contrast and CONTRAST not in POLICIES:                        # 对照行只算表里有的这几格
        contrast = tuple(c for c in caps if c in CONTRAST_CAPS)
    extra += [(p, None) for p in POLICIES + (BOUND,)] + [(CONTRAST, c) for c in contrast]   # 无限容量总要算
    with status(f"正在按 trace 模拟各种缓存：{len(POLICIES)} 种策略和 MIN × {len(caps)} 个容量……"):
        hits = sweep(trace, caps, POLICIES + (BOUND,), extra=extra)       # 每格：策略类(容量)，逐请求 match、insert
    return dict(trace=trace, hits=hits, path=trace_path, block_size=block_size, capacities=caps, contrast_caps=contrast)


def lead_policy():
    """演示 3、4 的观察先说哪种策略：POLICIES 里有 LRU 就是 LRU，否则是第一种。"""
    if "lru" in POLICIES:
        return "lru"
    return POLICIES[0]


def hit_table(tr, hits, block_size):
    """{(策略, 容量): 命中率}：在线策略数用得上的前缀命中块 / 全部块访问；MIN 数逐块命中（上界，不截）。"""
    out = {}
    for (p, c), h in hits.items():
        if p != BOUND:
            h = usable_hits(h, tr.input_len, block_size)
        out[(p, c)] = int(h.sum()) / max(1, len(tr.hash_ids))
    return out


def trace_stats(tr):
    """trace 的统计量：请求数、时长、平均输入输出、块的热度（counts：每个块的访问次数，从多到少）、块的复用率。"""
    v = np.bincount(dense_ids(tr.hash_ids)[0])
    v = np.sort(v[v > 0])[::-1]
    total = int(v.sum())
    st = dict(n=len(tr), minutes=float(tr.arrival[-1] - tr.arrival[0]) / 60, mean_in=float(np.mean(tr.input_len)),
              mean_out=float(np.mean(tr.output_len)), total_blocks=total, distinct=len(v), once=float(np.mean(v == 1)),
              hottest=int(v[0]), top1pct=None, reuse=1 - len(v) / total, counts=v)
    if len(v) >= 100:                                     # 不到 100 个块时"最热的 1%"不到一块：不说
        st["top1pct"] = int(v[:len(v) // 100].sum()) / total
    return st


def _short(policy):
    """表格里的短名字（策略类的 SHORT；BOUND 是 MIN）。"""
    if policy == BOUND:
        return "MIN"
    return CACHE_POLICIES[policy].SHORT


def cell(x, fmt):
    """没有的数（None）写成 "-"：cell(None, f2) → '-'；cell(0.5, f2) → '0.50'。"""
    if x is None:
        return "-"
    return fmt(x)


def known_file(path):
    """按内容认 trace 文件：算出文件（.gz 先解压）的 git blob 哈希，在 KNOWN_TRACE_FILES 里查；不认识就返回 None。
    只看平均值会认错：arXiv v3 的 trace 文件平均输入 8,590 token，和 FAST'25 Tool&Agent 的 8,596 只差 0.1%。

    >>> import tempfile
    >>> with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
    ...     _ = f.write("hello\n")
    >>> known_file(f.name) is None, blob_sha1(f.name)          # git hash-object 算的是同一个数
    (True, 'ce013625030ba8dba906f756967f9e9ca394464a')
    """
    if not os.path.isfile(path):        # 管道、FIFO：已经读完了，再打开会一直等写的一方（不认）
        return None
    return KNOWN_TRACE_FILES.get(blob_sha1(path))


def blob_sha1(path):
    """git hash-object 的算法：sha1(b"blob <字节数>\0" + 内容)。.gz 文件按解压后的内容算。"""
    import gzip
    import hashlib
    opener = open
    if str(path).endswith(".gz"):
        opener = gzip.open
    with opener(path, "rb") as f:
        body = f.read()
    return hashlib.sha1(b"blob %d\0" % len(body) + body).hexdigest()


def trace_results(data):
    """演示 3、4 共用的一份数：命中率表、trace 的统计量、论文里对得上的 trace；只算一遍（存在 data 里）。"""
    if "results" in data:
        return data["results"]
    tr, bs, real = data["trace"], data["block_size"], data["path"] is not None
    src = f"合成 trace（种子 {TRACE_SEED}）"
    if real:
        src = f"你给的 trace（{os.path.basename(str(data['path']))}）"
    policies, caps, lead = POLICIES, data["capacities"], lead_policy()
    with status("正在统计 trace……"):
        ratio = hit_table(tr, data["hits"], bs)
        st = syn = trace_stats(tr)
        syn_hit = ratio[(lead, None)]
        if real:
            syn_tr = read_trace()
            syn = trace_stats(syn_tr)
            syn_hit = hit_table(syn_tr, {(lead, None): simulate(syn_tr, None, lead)}, TRACE_BLOCK_SIZE)[(lead, None)]
    gap = {(p, c): ratio[(BOUND, c)] - ratio[(p, c)] for p in policies for c in caps}
    match = None
    if real:
        name = known_file(data["path"])
        match = next((row for row in PAPER_TRACES if row[0] == name), None)
    d = dict(stats=st, syn_stats=syn, syn_hit=syn_hit, ratio=ratio, gap=gap, capacities=caps, lead=lead, real=real,
             contrast_caps=data["contrast_caps"], match=match, synthetic_stats=syn,
             bound_ok=all(x >= -1e-12 for x in gap.values()), policies=policies + (BOUND,),
             names={p: _short(p) for p in policies + (BOUND,)}, paper=PAPER_TABLE1, source=src, seed=TRACE_SEED,
             block_size=bs)
    data["results"] = d
    return d


def print_trace_tables(d):
    """演示 3 的两张表：trace 的统计量（和论文的 trace 并排，命中率和 cache ratio 分两列），块的热度。"""
    st, syn, real, m = d["stats"], d["syn_stats"], d["real"], d["match"]
    ours = [("本实验（合成）", syn, d["syn_hit"])]
    if real:
        ours.insert(0, ("你给的 trace", st, d["ratio"][(d["lead"], None)]))
    rows = [[n, integer(s["n"]), integer(s["minutes"]), integer(s["mean_in"]), integer(s["mean_out"]), f2(h), "-"]
            for n, s, h in ours]
    rows += [[n, integer(q), cell(t, integer), integer(i), integer(o), cell(h, f2), cell(c, f2)]
             for n, q, t, i, o, h, c, _ in PAPER_TRACES[:2 + 2 * real]]
    which = ""
    if m is not None:
        which = f"你给的文件按内容认出是 {m[0]} 的文件。"
    print_table(["trace", "请求数", "分钟", "输入", "输出", "前缀命中率", "cache ratio"], rows,
                caption=f"{which}输入 / 输出：平均 token 数。前缀命中率：容量无限时（论文的取自 arXiv v3 表 1）；"
                        "cache ratio：FAST'25 表 2 的名字，§5.2.1 叫它 prefix caching ratio。")
    heat = [("只被访问过一次的块", "once", share, "超过 50% 的块没有被再次使用"),   # share：不全是就不印 100%
            ("最热的块被访问的次数", "hottest", integer, "有的块被访问数万次"),
            ("最热 1% 的块占全部访问", "top1pct", share, "-")]
    reuse_caption = ""
    if console.SHOW_MORE:                    # 块复用率只在 --more 里：一行、一句说明
        heat.append(("块复用率", "reuse", f2, "-"))
        reuse_caption = "块复用率 = 1 − 不同的块 / 块访问：块访问里有多少次是重复出现的块。"
    cols = [("本实验", st)]
    if real:
        cols = [("你给的 trace", st), ("合成", syn)]
    print_table(["块的热度"] + [c for c, _ in cols] + ["论文（arXiv v3 §4.2）"],
                [[t] + [cell(x[k], f) for _, x in cols] + [p] for t, k, f, p in heat],
                caption=reuse_caption)


def print_policy_tables(ratio, gap, caps, policies, contrast, contrast_caps, match=None):
    """演示 4 的命中率表（论文表 1 的行；对照行和"离 MIN 还差多少"表只在 --more 时印）。"""
    rows = [[_short(p)] + [f2(ratio[(p, c)]) for c in caps] for p in policies + (BOUND,)]
    note = ""
    if contrast_caps and console.SHOW_MORE:
        rows.append([_short(contrast)] + [cell(ratio.get((contrast, c)), f2) for c in caps])
        doc = words(*(CACHE_POLICIES[contrast].__doc__ or CACHE_POLICIES[contrast].NAME).split("\n\n")[0].split())
        note = f"对照行（CONTRAST = \"{contrast}\"）：{doc.rstrip('。')}；只算了 {'、'.join(cap_name(c) for c in contrast_caps)} 块。"
    if console.SHOW_MORE:
        note += HIT_RULE
    if "lengthaware" in policies and console.SHOW_MORE:
        note += (f"LengthAware = LengthAwareCache，{LENGTHAWARE_SOURCE}只有一句定义：“{LENGTHAWARE_DEFINITION}”；"
                 "本课读作：访问次数相同时先淘汰请求里靠后的块。")
        probe = CACHE_POLICIES["lengthaware"](1)                # 问类本身：位置 1 的 rank 比位置 0 的小，才是靠后的先走
        if not probe.rank(1) < probe.rank(0):
            note += "（你改过的 LengthAwareCache.rank 不再让靠后的块先走：表里这一行按改过的 rank 算。）"
    papers = [p for p in policies if p in PAPER_TABLE1]    # 论文表 1 里有的策略才有论文行
    rows += [[f"论文 {_short(p)}"] + [cell(PAPER_TABLE1[p].get(c), f2) for c in caps] for p in papers]
    missing = [cap_name(c) for c in caps if c not in PAPER_TABLE1["lru"]]
    paper = "论文行：arXiv v3 表 1，在另一个 trace 上算的"
    if match is PAPER_TRACES[0]:                   # 你给的就是 arXiv v3 的 trace 文件：论文行和本实验同一个 trace
        paper = "论文行：arXiv v3 表 1，就是在这个 trace 文件上算的"
    if missing:
        paper += f"，没有 {'、'.join(missing)} 块"
    paper += "。"
    if not papers:
        paper = ""
    print_table(["策略 \\ 容量（块）"] + [cap_name(c) for c in caps], rows,
                caption="MIN：Belady 的离线最优，是前缀命中率的上界，真实系统做不到。" + paper + note)
    if console.SHOW_MORE:
        print_table(["MIN 减去 \\ 容量"] + [cap_name(c) for c in caps],
                    [[_short(p)] + [f2(gap[(p, c)]) for c in caps] for p in policies],
                    caption="每格 = MIN 的命中率 − 这种在线策略的命中率（用没取整的命中率相减，和上表两位小数相减"
                            "可能差 0.01）：换成最好的淘汰策略最多还能多命中多少。"
                            "MIN 数逐块命中（不要求从第一块起连续）。")


def demo3_block_heat(data=None):
    """块有多热门？少数块被反复用到，多数块只用一次吗？
    data：trace_sweep 的结果（main 传进来，和演示 4、5 共用）；None = 自己算一份。"""
    if data is None:
        data = trace_sweep(read_trace())
    print_header("演示 3：块的热度——块被访问的次数差得有多远")
    d = trace_results(data)
    st = d["stats"]
    print_text(f"{d['source']}，块大小 {d['block_size']}：{integer(st['total_blocks'])} 次块访问、"
               f"{integer(st['distinct'])} 个不同的块。")
    print_trace_tables(d)
    print_observations(*observations_3(d, HOT_ACCESSES))
    return d


def observations_3(d, hot):
    """演示 3 的观察：块的热度（和表格同一份 stats）；认出的 trace 文件。"""
    st, m = d["stats"], d["match"]
    s = f"{share(st['once'])} 的块只被访问过一次，最热的块却被访问了 {integer(st['hottest'])} 次"
    if st["hottest"] == 1:                                 # 没有一块被访问两次：说不上谁热
        s = f"每个块都只被访问过一次（{integer(st['distinct'])} 个块），没有一块被复用"
    elif st["top1pct"] is not None:
        s += f"；最热 1% 的块占了全部块访问的 {share(st['top1pct'])}"
    obs = [s + "。"]
    once, tens = order(st["once"], 0.5, share) > 0, st["hottest"] >= 20_000       # "数万次"：至少两万
    agree = {(True, True): "两条都和它一致", (True, False): "前一条一致，后一条不一致",
             (False, True): "前一条不一致，后一条一致", (False, False): "两条都和它不一致"}[(once, tens)]
    obs.append(f"论文（arXiv v3 §4.2）说“超过 50% 的块没有被再次使用”“有的块被访问数万次”：这个 trace {agree}。")
    heat = f"最热的块被访问了 {integer(st['hottest'])} 次"
    more = [heat + f"（不到 {hot:,} 次）：没有特别热的块。"]
    if st["hottest"] >= hot:
        more = [heat + "：热门块值得复制到多台机器上，否则都去一台机器拉 KV，网卡会堵（Mooncake arXiv v3 §4.2、§6.2；"
                "05 脚本演示 2）。"]
    more += [vs("无限容量的前缀命中率", d["ratio"][(d["lead"], None)], "块复用率", st["reuse"], f2)
            + "：前缀命中只数从开头起连续、又不只装着最后一个 token 的块，所以不会高于块复用率；两者越接近，重复的块越集中在"
              "请求的开头。"]
    more.append("这是合成负载，只模仿了论文的几个统计量；Mooncake 公开的 trace 可以用 --trace 换进来对比。")
    if d["real"]:
        more[-1] = "你给的文件和 Mooncake 发布的 trace 文件内容都不一样；论文的数只能看趋势，不能逐格比。"
        if m is not None:
            more[-1] = (f"你给的文件就是 {m[0]} 的文件（按内容认出，{m[7]}）：请求数 {integer(st['n'])}（论文 "
                        f"{integer(m[1])}），平均输入 {integer(st['mean_in'])}（论文 {integer(m[3])}），平均输出 "
                        f"{integer(st['mean_out'])}（论文 {integer(m[4])}）。")
    return obs, more


def demo4_policies(data=None):
    """缓存要多大、用什么淘汰策略？离最好的（离线最优 MIN）还差多少？
    data：同演示 3。"""
    if data is None:
        data = trace_sweep(read_trace())
    print_header("演示 4：缓存容量与淘汰策略——命中率（Mooncake arXiv v3 表 1 的实验）")
    d = trace_results(data)
    st = d["stats"]
    print_text(f"{d['source']}：{integer(st['distinct'])} 个不同的块；容量比它小就要淘汰。")
    print_policy_tables(d["ratio"], d["gap"], d["capacities"], POLICIES, CONTRAST, d["contrast_caps"], d["match"])
    print_observations(*observations_4(d, POLICIES))
    return d


def observations_4(d, policies):
    """演示 4 的观察：每句都由 d 里的 ratio / gap / stats（和表格同一份数）拼出来。默认：容量的影响、头一个对比。"""
    r, st, lead = d["ratio"], d["stats"], d["lead"]
    inf, L, at = r[(lead, None)], _short(lead), "{:,} 块时".format
    evict = sorted((c for c in d["capacities"] if c is not None and c < st["distinct"]), reverse=True)   # 一定要淘汰的容量
    live = bool(evict) and not same(inf, 0, f2)           # 有要淘汰的容量、也有命中：策略才分得出高低
    if same(inf, 0, f2):
        obs = ["前缀命中率 0：每种在线策略、每个容量都是 0，没有一个请求的开头（去掉最后一个 token）在缓存里。"]
    elif not evict:
        obs = [f"CAPACITIES 里没有比全部 {integer(st['distinct'])} 个不同的块更小的有限容量：从不淘汰，"
               f"每种策略都是 {f2(inf)}，比不出好坏。"]
    else:
        c, t = evict[-1], PAPER_TABLE1.get(lead, {})
        s = f"容量从无限降到 {c:,} 块，{L} 的命中率{change(inf, r[(lead, c)], f2)}，保住了 {pct_of(r[(lead, c)], inf, f2)}"
        if c in t:
            s += f"（论文 {c:,} 块时 {f2(t[c])} / {f2(t[None])} = {pct(t[c] / t[None])}）"
        if None not in d["capacities"]:
            s += "；无限容量是另外算的，CAPACITIES 里没有它"
        obs = [s + "。"]
    pairs, why = [], "：复用多在时间上相近的请求之间（论文表 1 也是 LRUCache performs best）"
    for p in [p for p in policies if live and p != lead]:
        ahead = {order(r[(lead, c)], r[(p, c)], f2) for c in evict}
        s = never_below(L, {c: r[(lead, c)] for c in evict}, _short(p), {c: r[(p, c)] for c in evict}, f2, at, "在每个要淘汰的容量")
        if lead == "lru" and p in PAPER_TABLE1 and 1 in ahead and -1 not in ahead and why:
            s, why = s + why, ""                          # 论文比的是 LRU 和 LFU、LengthAware；道理只说一次
        pairs.append(s + "。")
    if live:
        on = {(p, c): r[(p, c)] for p in policies for c in evict}
        s = never_below("MIN", {k: r[(BOUND, k[1])] for k in on}, "在线策略", on, f2,
                        lambda k: f"{_short(k[0])} 在 {k[1]:,} 块时", "在每个要淘汰的容量")
        if min(d["gap"].values()) < -1e-12:
            s += "（MIN 是上界，上界被违反，程序有错）"
        pairs.append(s + "。")
    lines = obs + pairs
    return lines[:2], lines[2:]


# =============================================================================
def gpu_hours(tr, hit_blocks, tier, block_size):
    """(全部请求的 prefill GPU 时间（小时）, 命中的 token 比例)：命中只数用得上的 token（最后一个总要算），
    时间按 FAST'25 式 (1) 逐个请求算、加起来（kv_store.tiers.trace_prefill_time）。token 数用 Python 整数求和，不会溢出。"""
    n_hit = usable_hit_tokens(hit_blocks, tr.input_len, block_size)
    return trace_prefill_time(MODEL, tr.input_len, n_hit, tier) / 3600, sum(n_hit.tolist()) / max(1, sum(tr.input_len.tolist()))


CAPPED_TIERS = (0, 1)     # TIERS 里有容量上限、放不下就溢出到下一层的：HBM（这台机器的显存）、本机 DRAM（LOCAL_KV_BYTES）


def hit_tier_for(stored, node):
    """命中的 KV 从哪儿读（一个等效的 Tier）：TIER_FOR_HITS 那一层；放不下的部分按比例从下一层读
    （HBM → 本机 DRAM → 远端 DRAM）。一台机器上的容量：HBM = 这台机器的全部显存（还没减去权重），本机 DRAM =
    LOCAL_KV_BYTES；远端 DRAM（整个集群的内存池）和本机 SSD 不设上限（本实验的假设）。

    >>> hit_tier_for(10 ** 9, A800_X8).name == TIERS[TIER_FOR_HITS].name          # 1 GB 哪一层都放得下
    True
    """
    if TIER_FOR_HITS not in CAPPED_TIERS:
        return TIERS[TIER_FOR_HITS]
    if TIER_FOR_HITS == 1:
        return hit_tier(stored, TIERS[1], TIERS[2], LOCAL_KV_BYTES)
    below = hit_tier(max(0, stored - node.hbm_bytes), TIERS[1], TIERS[2], LOCAL_KV_BYTES)
    return hit_tier(stored, TIERS[0], below, node.hbm_bytes)


def demo5_compute_saved(data=None, caps=None, policies=None):
    """命中能省多少 prefill 的 GPU 时间？缓存又要多大的存储？
    data 同演示 3；caps、policies：None = SAVED_CAPS、(SAVED_POLICY,)。"""
    if data is None:
        data = trace_sweep(read_trace())
    caps, policies = tuple(caps or SAVED_CAPS), tuple(policies or (SAVED_POLICY,))
    node, local, tr, bs = A800_X8, TIERS[TIER_FOR_HITS], data["trace"], data["block_size"]
    print_header(f"演示 5：命中省下的 prefill 时间（{MODEL.name}、{node.name}）")
    per_token = MODEL.kv_bytes_per_token()
    gqa = MODEL.n_heads // MODEL.n_kv_heads
    print_text(f"prefill 的计算量按 FAST'25 式 1（§2.2）；算力按峰值（表 1：{node.n_gpus}×{node.tflops_per_gpu:g} TFLOPS）的 "
               f"{pct(node.mfu)} 算，这是本实验的假设。每 token 的 KV {size(per_token)}。")
    if console.SHOW_MORE:
        print_text(f"{FAST25_SHAPE}。换算：{MODEL.n_heads} 个查询头 ÷ {gqa} = {MODEL.n_kv_heads} 个 KV 头，每 token 2 × "
                   f"{MODEL.n_layers} × {MODEL.d_model // gqa:,} × {MODEL.dtype_bytes} B = {size(per_token)}，"
                   f"一块 {bs} token = {size(bs * per_token)}。" + MODEL_NOTE)
    with status("正在按 trace 算 prefill 时间……"):
        base = gpu_hours(tr, np.zeros(len(tr), np.int64), local, bs)[0]
        distinct = tr.distinct_blocks()
        unit = ("小时", 1.0)
        if base < 0.5:                             # 小 trace：不到半小时就用秒，免得印成 0.00 小时
            unit = ("秒", 3600.0)
        rows, hours, frac, local_hours, stored = [["不缓存", "-", "0%", f2(base * unit[1]), "1.00×"]], {}, {}, {}, {}
        for p, c in itertools.product(policies, caps):
            h, stored[c] = data["hits"][(p, c)], min(c or distinct, distinct) * bs * per_token
            hours[(p, c)], frac[(p, c)] = gpu_hours(tr, h, hit_tier_for(stored[c], node), bs)
            local_hours[(p, c)] = gpu_hours(tr, h, local, bs)[0]
            rows.append([f"{_short(p)}，容量 {cap_name(c)}", size(stored[c]), pct(frac[(p, c)]),
                         f2(hours[(p, c)] * unit[1]), times(base / hours[(p, c)])])
    headers = ["缓存", "存储", "命中的 token", f"GPU 时间（{unit[0]}）", "快了"]
    note = ""
    if console.SHOW_MORE and TIER_FOR_HITS in CAPPED_TIERS:   # 没有容量上限的层不溢出：那一列和 GPU 时间一样
        headers.append("不溢出")
        note = LOCAL_NOTE.format(local.name)
        rows[0].append("-")
        for row, key in zip(rows[1:], itertools.product(policies, caps)):
            row.append(f2(local_hours[key] * unit[1]))
    which = ""
    if data["path"] is not None:
        which = "你给的 trace 里 "
    print_table(headers, rows,
                caption=f"{which}{integer(len(tr))} 个请求的 prefill 在一台 {node.name} 上的总时间。命中的 KV "
                        f"{words('从', local.name)}读（{local.bandwidth(with_gb_per_s=True)}），{overflow_text(TIER_FOR_HITS, node)}"
                        "和计算按层重叠（arXiv v3 §5.2）。" + note)
    method = (f"{MODEL.name}、{node.name} 张量并行、算力按峰值的 {pct(node.mfu)}（本实验的假设）；prefill 的计算量按 FAST'25 式 1；"
              f"命中的 KV 从{local.name}读（{local.bandwidth(with_gb_per_s=True)}），{overflow_text(TIER_FOR_HITS, node)}与计算按层重叠"
              "（arXiv v3 §5.2）")
    d = dict(base_hours=base, hours=hours, hit_frac=frac, local_hours=local_hours, stored=stored, unit=unit, distinct=distinct,
             need_bytes=10_000 * bs * per_token, hbm_bytes=node.hbm_bytes, kv_block_bytes=bs * per_token, caps=caps,
             policies=policies, model=MODEL.name, node=node.name, mfu=node.mfu, tier=local.name,
             tier_gb_per_s=local.gb_per_s, block_size=bs, n_requests=len(tr), method=method)
    print_observations(*observations_5(d, policies[0], caps))
    return d


def overflow_text(tier_i, node):
    """表注里说放不下的部分从哪儿读：跟着 TIER_FOR_HITS 选的那一层（HBM 的容量是这台机器的显存，不是 1 TB）。"""
    dram = size(LOCAL_KV_BYTES, binary=False)
    src = SRC_LOCAL_KV.beside(LOCAL_KV_BYTES, own="")
    if src:
        dram += f"（{src}）"
    if tier_i == 0:
        return (f"超过一台机器的 {size(node.hbm_bytes)} HBM（还没减去权重）的部分按比例从{TIERS[1].name}读，"
                + words("再超过", dram, "的从") + f"{TIERS[2].name}读（{TIERS[2].bandwidth(with_gb_per_s=True)}），")
    if tier_i not in CAPPED_TIERS:
        return "这一层不设容量上限（本实验的假设），"
    return words("缓存超过一台机器的", dram, "的部分按比例从") + f"{TIERS[2].name}读（{TIERS[2].bandwidth(with_gb_per_s=True)}），"


def observations_5(d, policy, caps):
    """演示 5 的观察（默认 2 条）：数都取自表格那一份 hours / hit_frac / stored；时间按 d["unit"] 换算，和表格一样。"""
    (name, k), hours, frac, base, stored, hbm = d["unit"], d["hours"], d["hit_frac"], d["base_hours"], d["stored"], d["hbm_bytes"]
    caps = sorted(caps, key=lambda c: c or float("inf"))      # 无限（None）排在最后
    big, finite = caps[-1], [c for c in caps if c is not None]
    big_name, h_big, f_big = words("容量", cap_name(big, " 块"), "的缓存"), hours[(policy, big)], frac[(policy, big)]
    lines = [f"{big_name}命中的输入 token 也是 {pct(f_big)}：没有真实缓存用得上的前缀，prefill 的 GPU 时间还是 "
             f"{fixed(2, name)(base * k)}，前缀缓存省不下计算。"]
    more = []
    if not same(f_big, 0, pct):
        why = {1: "高于命中的 token 比例：注意力随长度平方增长，命中的长前缀省得更多", 0: "和命中的 token 比例一样",
               -1: "低于命中的 token 比例：没命中的 token 仍要对全部前缀做注意力，读命中的 KV 也要时间"}
        lines = [f"{big_name}命中 {pct(f_big)} 的输入 token，prefill 的 GPU 时间{change(base * k, h_big * k, f2)} {name}"
                 f"（{rel_change(base, h_big)}）。"]
        more.append(f"省下的时间比例{why[order(1 - h_big / base, f_big, pct)]}。")
    if finite:
        s = words("容量", cap_name(finite[-1], " 块"), f"的缓存存 {size(stored[finite[-1]])}")
        lines.append(s + f"，放得进一台 8 卡机器的 HBM（{size(hbm)}），不过还要先减去权重和正在解码的请求的 KV。")
        if stored[finite[-1]] > hbm:
            lines[-1] = (s + f"，是一台 8 卡机器全部 HBM（{size(hbm)}）的 {stored[finite[-1]] / hbm:.1f} 倍：前缀缓存得"
                         "放进 CPU 内存、SSD 或整个集群的内存池（05 脚本的 Mooncake 就这样做）。")
    if finite and finite[0] != big and finite[0] < d["distinct"] and not same(f_big, 0, pct):   # 最小的缓存要淘汰
        part = pct_of(frac[(policy, finite[0])], f_big, pct)         # 按表里印出来的两个百分数算
        s = f"只有 {finite[0]:,} 块时命中的 token 是{big_name}的 {part}："
        more.append(s + "复用分散在许多前缀上，小缓存留不住。")
        if value(part) >= 50:
            more[-1] = s + "热门的前缀很集中，小缓存也留住了至少一半的复用。"
    return lines, more


# =============================================================================
DEMOS = {1: demo1_hashing, 2: demo2_shared_prefix, 3: demo3_block_heat, 4: demo4_policies, 5: demo5_compute_saved}
TRACE_DEMOS = (3, 4, 5)             # 用 trace 的演示：main 只读一次 trace、只算一遍命中表，传给它们
MAX_DEMO2_TOKENS = 1_024            # 演示 2 的一个请求（前缀 + 后缀）最多这么长：小模型在几秒内算完


def _capacities_ok(v):
    return (isinstance(v, tuple) and len(v) > 0 and len(set(v)) == len(v)
            and all(c is None or is_int(c, 1) for c in v))


def check_settings():
    """顶部"学生可以改的设置"：不合理的值在开始时一行拒绝（常量名、收到的值、允许的范围），退出码 2。"""
    ok_few = (isinstance(FEW_SHOT, tuple) and len(FEW_SHOT) > 0 and len({e[0] for e in FEW_SHOT}) == len(FEW_SHOT)
              and all(isinstance(e, tuple) and len(e) == 2 and isinstance(e[0], str) and is_int(e[1], 1) for e in FEW_SHOT))
    ok_suffix = (isinstance(SUFFIX_LEN, tuple) and len(SUFFIX_LEN) == 2 and is_int(SUFFIX_LEN[0], 1)
                 and is_int(SUFFIX_LEN[1], SUFFIX_LEN[0] + 1))
    ok_pol = isinstance(POLICIES, tuple) and 0 < len(set(POLICIES)) == len(POLICIES) and all(p in CACHE_POLICIES for p in POLICIES)
    names = ", ".join(CACHE_POLICIES)
    rules = [("TRACE_SEED", is_int(TRACE_SEED, 0), "非负整数"), ("MODEL_SEED", is_int(MODEL_SEED, 0), "非负整数"),
             ("PROMPT_SEED", is_int(PROMPT_SEED, 0), "非负整数"),
             ("N_SHARING", is_int(N_SHARING, 1, 64), " 1 到 64 的整数（请求数）"),
             ("BLOCK_SIZE", is_int(BLOCK_SIZE, 1, 1024), " 1 到 1,024 的整数（token）"),
             ("SUFFIX_LEN", ok_suffix, " (最短, 最长 + 1) 两个整数，1 ≤ 最短 < 最长 + 1"),
             ("FEW_SHOT", ok_few, "非空的 ((名字, 前缀 token 数), ...)，名字不重复，长度是正整数")]
    for name, ok, allowed in rules:
        check_setting(name, globals()[name], ok, allowed)
    longest = max(p for _, p in FEW_SHOT) + SUFFIX_LEN[1] - 1
    rules = [("FEW_SHOT", longest <= MAX_DEMO2_TOKENS,
              f"前缀 + 最长的后缀不超过 {MAX_DEMO2_TOKENS:,} 个 token（现在是 {longest:,}；小模型要在几秒内算完）"),
             ("CAPACITIES", _capacities_ok(CAPACITIES), "非空、不重复的容量（块，正整数；None = 无限）"),
             ("SAVED_CAPS", _capacities_ok(SAVED_CAPS), "非空、不重复的容量（块，正整数；None = 无限）"),
             ("POLICIES", ok_pol, f"非空、不重复，每个都在 {names} 里（kv_store.eviction.CACHE_POLICIES）"),
             ("BOUND", BOUND == "min", " \"min\"（Belady 的 MIN，唯一的离线上界）"),
             ("CONTRAST", CONTRAST in CACHE_POLICIES, f"{names} 之一"),
             ("CONTRAST_CAPS", isinstance(CONTRAST_CAPS, tuple) and all(is_int(c, 1) for c in CONTRAST_CAPS),
              "正整数容量组成的元组（不在 CAPACITIES 里的不显示；() = 不要对照行）"),
             ("HOT_ACCESSES", is_int(HOT_ACCESSES, 2), "至少 2 的整数（访问次数）"),
             ("SAVED_POLICY", SAVED_POLICY in CACHE_POLICIES, f"{names} 之一"),
             ("TIER_FOR_HITS", is_int(TIER_FOR_HITS, 0, len(TIERS) - 1),
              f" 0 到 {len(TIERS) - 1}（" + "、".join(f"{i} = {t.name}" for i, t in enumerate(TIERS)) + "）"),
             ("LOCAL_KV_BYTES", is_int(LOCAL_KV_BYTES, 1), "正整数（字节）")]
    for name, ok, allowed in rules:
        check_setting(name, globals()[name], ok, allowed)


MAX_TRACE_BLOCK = 2 ** 20          # --block 的上限（token）：Mooncake 的 trace 一块 512 个 token，比一百万大的块没有意义


def _add_args(ap):
    ap.add_argument("--trace", metavar="PATH", help="演示 3–5 改用你给的 trace 文件（Mooncake 的 JSONL，可以是 .gz）")
    ap.add_argument("--block", type=int, default=TRACE_BLOCK_SIZE, help=f"--trace 文件的块大小（token，默认 {TRACE_BLOCK_SIZE}）")


def _check(args):
    check_settings()
    if not 1 <= args.block <= MAX_TRACE_BLOCK:
        ArgParser().error(f"--block 必须是 1 到 {MAX_TRACE_BLOCK:,} 的整数（token；收到 {args.block:,}）")
    if args.block != TRACE_BLOCK_SIZE and args.trace is None:
        ArgParser().error(f"--block 只对 --trace 读入的文件有效（合成 trace 的块大小固定为 {TRACE_BLOCK_SIZE}）")


def _run(todo, args, step):
    """按顺序跑演示；演示 3–5 共用一份 trace 和命中表（先读完、查完 --trace 的文件，再打印任何东西）。"""
    trace, data = None, None
    if args.trace is not None:
        try:
            trace = read_trace(args.trace, args.block)
        except TraceError as e:
            fail(f"{e.path}:{e.line}", e.what)
    for k in todo:
        if k in TRACE_DEMOS:
            if trace is None:
                trace = read_trace()
            if data is None:
                data = trace_sweep(trace, args.trace, args.block, demos=todo, with_contrast=console.SHOW_MORE)
            DEMOS[k](data)
        else:
            DEMOS[k]()
        if k != todo[-1]:
            step()
    return 0


def main(argv=None):
    return run_lecture(DEMOS, "第 7 讲 · 前缀缓存：认出前缀、复用 KV、缓存多大、省多少 GPU 时间", argv,
                       run=_run, add_args=_add_args, check=_check)


if __name__ == "__main__":
    sys.exit(main())
