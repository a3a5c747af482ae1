"""CS349E · 第 7 讲 · 04_prefix_caching.py —— 前缀缓存：算过的 KV 存下来，给后面的请求用。

【问题】很多请求的开头相同（系统提示、few-shot 例子、长文档、多轮对话的历史）。这些前缀的 KV
只需算一次——前提是能"认出"这段前缀算过，而且"存得下"。那么：怎样认出来？真的能省多少？
缓存要多大、用什么淘汰策略？省下的命中率换成 GPU 时间是多少？

  演示 1：怎样认出来——链式块哈希（Mooncake arXiv v3 图 3、vLLM 的自动前缀缓存）。
  演示 2：在第 2 讲的小模型上真的复用：8 个请求共享 few-shot 前缀（前缀长度取自 vLLM 论文 §6.4 / 图 16），
          后来的请求把前缀映射到缓存里的物理块，只算自己的后缀；logits 与从头算逐位比较。
  演示 3：仿 Mooncake Tool&Agent trace 的合成负载（或用 --trace 换成 Mooncake 公开的 trace）：块的热度、
          缓存容量与命中率、LRU / LFU / LengthAwareCache（Mooncake arXiv v3 表 1），
          以及离线最优的 MIN（Belady）——在线策略离最好还差多少。
  演示 4：命中率换算成 LLaMA3-70B 在 8×A800 上的 prefill GPU 时间（Mooncake FAST'25 表 1、式 1）。
  另一种认前缀的办法——SGLang 的基数树（按 token 匹配、按叶子 LRU 淘汰）——在 04b_radix_cache.py。

【运行】python lecture07/04_prefix_caching.py          （约 2.4 秒，2 核笔记本，不需要 GPU）
        python lecture07/04_prefix_caching.py --demo 3 （只跑演示 3）
        python lecture07/04_prefix_caching.py --trace ../shared/traces/mooncake_fast25_synthetic_trace.jsonl
              （约 1.7 秒；演示 3、4 改用你给的 trace 文件，这里是 Mooncake 公开的 FAST'25 Synthetic trace：
               JSONL 或 .gz，格式和报错规则见 kv_trace_io.py）
【依赖】numpy、rich；本目录的 paged_kv、kv_physics、kv_cache_policies；lab_common 的 transformer_lab、console、settings。
【改代码】设置都在下面"学生可以改的设置"里；不合理的值（负数、空元组、不认识的策略名……）在开始时一行拒绝，
          退出码 2。改完用 --demo N 只跑相关的演示，几秒就能看到结果。

【试一试】
  1. 把 N_SHARING 改成 1（--demo 2）：只有一个请求时，前缀缓存还省得下计算和显存吗？
  2. 把 BLOCK_SIZE 改成 64（--demo 2）：块变大以后，前缀的零头变成多少，省下的比例怎样变？
  3. 把 CAPACITIES 改成 (10_000, 1)（--demo 3）：缓存只能放 1 块时，LRU 还剩多少命中？
  4. 把 POLICIES 改成 ("lru", "s3fifo")（--demo 3）：S3-FIFO（Yang 等，SOSP'23）离离线最优的 MIN 还差多少？
     想试自己的淘汰策略：照 kv_cache_policies.py 开头的说明写一个类，在 CACHE_POLICIES 里注册，
     再把它的名字加进 POLICIES——命中率表和"MIN 减去"表里就多出它的一行。
  5. 把 DEMO4_CAPS 改成 (5_000, 500)（--demo 4）：缓存只有几百块时，prefill 的 GPU 时间还能省多少？
"""
import functools
import itertools
import operator
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.realpath(__file__))))  # 仓库根目录：让 lab_common 包可以 import
from lab_common.console import ArgParser, fail, fmt_int, print_header, print_observations, print_table, print_text  # noqa: E402
from lab_common.script_tools import run_in_child  # noqa: E402
from lab_common.settings import check_setting, is_int  # noqa: E402
from kv_trace_io import BLOCK_SIZE as TRACE_BLOCK_SIZE  # noqa: E402  Mooncake trace 的块大小：512 token
from kv_trace_io import TraceError  # noqa: E402
from kv_trace import load_trace, make_trace  # noqa: E402
from kv_physics import (A800_X8, LLAMA2_70B, LLAMA3_70B, TIERS, block_hashes, layer_overlap, load_time,  # noqa: E402
                        prefill_compute_time, prefill_time)
from kv_cache_policies import CACHE_POLICIES, LENGTHAWARE_DEFINITION, LENGTHAWARE_SOURCE, POLICY_NAMES  # noqa: E402
from kv_cache_sim import sweep  # noqa: E402
from kv_sim_base import dense_ids  # noqa: E402
from paged_kv import BlockPool, PagedSequence, n_blocks, paged_step  # noqa: E402
from lab_common.transformer_lab import TINY, KVCache, config_like, forward, init_params  # noqa: E402

# ---- 学生可以改的设置 ----
TRACE_SEED = 0                      # 合成 trace 的随机种子
MODEL_SEED = 0                      # 小模型权重的随机种子
PROMPT_SEED = 5                     # 演示 2 里随机前缀 / 后缀的种子
N_SHARING = 8                       # 演示 2：共享前缀的请求数
FEW_SHOT = (("1-shot", 80), ("5-shot", 341))   # 演示 2 的前缀：(名字, token 数)；默认取 vLLM 论文图 16 的两个前缀
SUFFIX_LEN = (10, 30)               # 演示 2：每个请求自己的后缀长度，在 [10, 30) 里均匀随机（token）
BLOCK_SIZE = 16                     # 演示 2 的块大小（token；vLLM 默认 16）
CAPACITIES = (None, 100_000, 50_000, 30_000, 10_000, 3_000, 1_000)   # 演示 3 的缓存容量（块）；None = 无限
POLICIES = ("lru", "lfu", "lengthaware")   # 演示 3 比较的策略（Mooncake arXiv v3 表 1 的三种）；可选的见
                                          # kv_cache_policies.CACHE_POLICIES（还有 "s3fifo"，以及你自己注册的）
CONTRAST = "lengthaware_early"      # 演示 3 的对照行：LengthAware 的另一种读法（次数相同时先淘汰靠前的块）
CONTRAST_CAPS = (10_000,)           # 对照行算哪几个容量（每格约 0.15 秒，默认只算一格）；() = 不要对照行
BOUND = "min"                       # 演示 3 的上界：Belady 的 MIN（离线最优，逐块命中）
HOT_ACCESSES = 1_000                # 演示 3：最热的块至少被访问这么多次，才说"有特别热的块"
DEMO4_CAPS = (None, 10_000, 1_000)  # 演示 4 比较的缓存容量（块）；None = 无限
DEMO4_POLICY = "lru"                # 演示 4 用哪种淘汰策略（要在 POLICIES 里）
TIER_FOR_HITS = 1                   # 演示 4：命中的 KV 从哪一层读（TIERS[1] = 本机 DRAM）

# ---- 论文的数字（只用来对照，标明出处）----
PAPER_TABLE1 = {   # Mooncake arXiv 2407.00079v3 表 1，容量 Inf/100000/50000/30000/10000/1000（没有 3000 这一列）
    "lru": {None: 0.51, 100_000: 0.51, 50_000: 0.50, 30_000: 0.48, 10_000: 0.40, 1_000: 0.30},
    "lfu": {None: 0.51, 100_000: 0.51, 50_000: 0.49, 30_000: 0.43, 10_000: 0.35, 1_000: 0.30},
    "lengthaware": {None: 0.51, 100_000: 0.50, 50_000: 0.48, 30_000: 0.42, 10_000: 0.35, 1_000: 0.30},
}
# Mooncake 公开的 trace 都在 GitHub 仓库 kvcache-ai/Mooncake 的 FAST25-release/ 下。两篇论文用的不是同一个：
# arXiv v3（§4、表 1）用的是 arxiv-trace/mooncake_trace.jsonl；FAST'25（表 2）用的是 traces/ 下的三个。
PAPER_TRACES = [   # (名字, 请求数, 时长（分钟）, 平均输入, 平均输出, 无限容量命中率, 出处)
    ("arXiv v3 的 trace", 23_608, 60, 7_590, 182, 0.51, "Mooncake arXiv v3 §4、表 1（mooncake_trace.jsonl）"),
    ("FAST'25 Tool&Agent", 23_608, 60, 8_596, 182, 0.59, "Mooncake FAST'25 表 2（cache ratio）"),
]
PAPER_TRACES_MORE = [   # 用 --trace 时再列出 FAST'25 表 2 的另外两个 trace（论文没给时长：记为 None）
    ("FAST'25 Conversation", 12_031, None, 12_035, 343, 0.40, "Mooncake FAST'25 表 2"),
    ("FAST'25 Synthetic", 3_993, None, 15_325, 149, 0.66, "Mooncake FAST'25 表 2"),
]
TRACE_KIND = {   # 每个论文 trace 是怎么来的（FAST'25 §5.2.1、附录 A；arXiv v3 §4）
    "arXiv v3 的 trace": "Kimi 线上一小时的采样",
    "FAST'25 Tool&Agent": "Kimi 线上一小时的采样",
    "FAST'25 Conversation": "Kimi 线上一小时的采样",
    "FAST'25 Synthetic": "由 ShareGPT、Leval、LooGLE 三个公开数据集拼成、到达时间按泊松过程生成的合成负载，FAST'25 §5.2.1",
}
VLLM_FIG16 = dict(   # vLLM 论文（Kwon et al., SOSP'23）§6.4、图 16：共享前缀的翻译负载
    model="LLaMA-13B", dataset="WMT16 英译德", baseline="Orca (Oracle)",
    prefix_tokens={"1-shot": 80, "5-shot": 341},    # 图 16 的图注：1 个例子 80 token、5 个例子 341 token
    throughput_x={"1-shot": 1.67, "5-shot": 3.58},   # vLLM 的吞吐是 Orca (Oracle) 的几倍（vLLM 整体，不只是共享）
)
MOONCAKE_MODELS = {   # 两篇 Mooncake 论文的模型（名字, 出处）：形状相同（80 层、d 8192、8 个 KV 头）
    "fast25": ("LLaMA3-70B", "FAST'25 表 1、§5.3.1"),
    "arxiv_v3": ("dummy LLaMA2-70B", "arXiv v3 §1.2"),
}
BLOCK_HOT_PAPER = "超过 50% 的块没有被再次使用，有的块被访问数万次（tens of thousands）"   # arXiv v3 §4.2


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
    print_table(["请求", "token 数", "每个完整块的哈希（前 12 位）"],
                [[names[n], len(reqs[n]), " ".join(h[n])] for n in reqs])

    def common(x, y):
        return next((i for i, (p, q) in enumerate(zip(x, y)) if p != q), min(len(x), len(y)))
    ab = common(h["A"], h["B"])
    changed = next(i for i, (p, q) in enumerate(zip(reqs["A"], reqs["C"])) if p != q) // 4
    ac = common(h["A"], h["C"])
    tail = len(reqs["A"]) % 4
    print_observations([
        f"A 和 B 的前 {ab} 块哈希相同（系统提示 + 共同的开头）：B 可以直接用 A 算好的这 {ab} 块 KV，"
        f"从第 {ab + 1} 块起自己算。",
        f"C 只在第 {changed + 1} 块改了一个 token，它与 A 相同的块只剩前 {ac} 块——从改动的第 {changed + 1} 块"
        f"到最后的第 {len(h['C'])} 块（共 {len(h['C']) - changed} 块）哈希都变了。KV 依赖前面的全部内容，链式哈希正好表达这一点，"
        "所以前缀缓存只能复用\"从开头起连续相同\"的部分。",
        f"A 最后 {tail} 个 token 不满一块，不算哈希、不进缓存（vLLM 和 Mooncake 都只缓存完整的块）。",
    ])
    return dict(hashes=h, a_b_common=ab, c_first_changed_block=changed, a_c_common=ac, a_tail=tail)


# =============================================================================
def run_shared_prefix(params, cfg, prefix, suffixes, block_size=BLOCK_SIZE):
    """N 个请求依次到达，共享 prefix。返回计数，以及最后一个 token 的 logits 与从头算的最大差。

    前缀缓存 = {块哈希 → 物理块}；缓存自己也持有一份引用（ref_count +1），请求结束了块也不会被回收。
    """
    max_len = len(prefix) + max(len(s) for s in suffixes)
    pool = BlockPool(cfg, n_blocks=2 * len(suffixes) * n_blocks(max_len, block_size), block_size=block_size)
    cache, seqs = {}, []
    computed, worst, mapped = 0, 0.0, 0
    for suf in suffixes:
        toks = np.concatenate([prefix, suf])
        hs = block_hashes(toks, block=block_size)
        seq = PagedSequence(pool)
        for hsh in hs:                       # 从第一块开始，连续命中几块就映射几块
            if hsh not in cache:
                break
            seq.blocks.append(cache[hsh])
            pool.incref(cache[hsh])          # 共享：只加引用计数，不复制 KV
            mapped += 1
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
        seqs.append(seq)
    total = sum(len(prefix) + len(s) for s in suffixes)
    used_shared = pool.num_used                                  # N 个请求都还在（比如正在解码）
    used_private = sum(n_blocks(len(prefix) + len(s), block_size) for s in suffixes)
    return dict(n=len(suffixes), prefix_len=len(prefix), suffix_tokens=sum(len(s) for s in suffixes),
                total=total, computed=computed, worst=worst, cached_blocks=len(cache), mapped=mapped,
                used_shared=used_shared, used_private=used_private, saved=1 - computed / total,
                speedup=total / computed, prefix_share=len(prefix) * len(suffixes) / total,
                full_prefix_blocks=len(prefix) // block_size, prefix_tail=len(prefix) % block_size)


def fmt_diff(x):
    """logits 的最大差：恰好 0 写 "0.0"，否则科学计数法。fmt_diff(0.0) → '0.0'；fmt_diff(3e-15) → '3.0e-15'。"""
    if x == 0:
        return "0.0"
    return f"{x:.1e}"


def _prefix_parts(name, r):
    """'5-shot 的 341 个 token = 21 个满块 + 5 个零头'；没有零头时照实说。"""
    if r["prefix_tail"] == 0:
        return f"{name} 的 {r['prefix_len']} 个 token 正好是 {r['full_prefix_blocks']} 个满块、没有零头"
    return f"{name} 的 {r['prefix_len']} 个 token = {r['full_prefix_blocks']} 个满块 + {r['prefix_tail']} 个零头"


def _saving_sentence(results):
    """观察 2：各前缀省下多少，差别从哪里来（前缀占输入的比例、零头），由数字决定措辞。"""
    order = sorted(results, key=lambda k: results[k]["prefix_len"])
    s = ("前缀里只有满块能复用：" + "；".join(_prefix_parts(k, results[k]) for k in order)
         + f"。零头每个请求都要和自己的后缀（{SUFFIX_LEN[0]}–{SUFFIX_LEN[1] - 1} 个 token）一起重算。")
    s += "前缀占全部输入的比例：" + "、".join(f"{k} {results[k]['prefix_share']:.0%}" for k in order)
    if N_SHARING == 1:
        return s + "。只有一个请求：这些满块登记进了缓存，却没有后来的请求复用，每个前缀都省下 0%。"
    s += "；省下：" + "、".join(f"{k} {results[k]['saved']:.0%}" for k in order) + "。"
    if N_SHARING > 1:
        s += (f"省下的比例 ≈ {N_SHARING - 1}/{N_SHARING} × 前缀占比（第一个请求要从头算），"
              "再减去每个请求重算的零头。")
    if len(order) < 2:
        return s
    short, long_ = results[order[0]], results[order[-1]]
    if long_["prefix_len"] == short["prefix_len"]:
        return s
    if long_["saved"] > short["saved"]:
        return s + (f"后缀长度的范围没变，前缀更长的 {order[-1]} 前缀占比更大，所以省得更多"
                    "（改 SUFFIX_LEN 可以看后缀长短的影响）。")
    if long_["saved"] < short["saved"]:
        return s + f"前缀更长的 {order[-1]} 反而省得少：它的零头或后缀占了更大的份额。"
    return s + "两者省下的比例相同。"


def demo2_observations(results):
    """演示 2 的观察：每句话的数字都取自 results（和表格同一份）。"""
    worst = max(r["worst"] for r in results.values())
    longest = max(results, key=lambda k: results[k]["prefix_len"])
    big = results[longest]
    if worst == 0.0:
        exact = "逐位相同（最大差 0.0）"
    else:
        exact = f"一致到 {worst:.1e}（≤ 1e-12）"
    if N_SHARING == 1:
        obs = [f"只有 1 个请求：它从头算、把完整的块登记进缓存，但没有后来的请求来用——什么也没省。"
               f"最后一个 token 的 logits 与从头算{exact}。"]
    elif big["mapped"] == 0:
        obs = [f"前缀不满一块（块大小 {BLOCK_SIZE}）：没有完整的块可以登记进缓存，后面 {N_SHARING - 1} 个请求"
               f"什么也复用不了。最后一个 token 的 logits 与从头算{exact}。"]
    else:
        obs = [f"第一个请求从头算，并把完整的块登记进缓存；后面 {N_SHARING - 1} 个请求把前缀映射到缓存里的物理块"
               f"（{longest} 时一共映射了 {big['mapped']} 次，只加引用计数、不复制），只算自己的部分。"
               f"最后一个 token 的 logits 与从头算{exact}。"]
    obs.append(_saving_sentence(results))
    if big["used_shared"] < big["used_private"]:
        obs.append(f"显存也省了：{N_SHARING} 个请求同时在场时，{longest} 不共享要 {big['used_private']} 块，共享只要 "
                   f"{big['used_shared']} 块（{big['used_shared'] / big['used_private']:.0%}），同样的显存能放下更多请求。")
    else:
        obs.append(f"显存没有省：{N_SHARING} 个请求同时在场时，{longest} 共享和不共享都占 {big['used_private']} 块"
                   "（没有别的请求来共享前缀的块）。")
    v = VLLM_FIG16
    obs.append(f"对照 vLLM 论文 §6.4 图 16（{v['model']}、{v['dataset']}；1-shot 前缀 {v['prefix_tokens']['1-shot']} "
               f"token、5-shot {v['prefix_tokens']['5-shot']} token）：共享 1-shot 前缀时 vLLM 的吞吐是 "
               f"{v['baseline']} 的 {v['throughput_x']['1-shot']} 倍，5-shot 时是 {v['throughput_x']['5-shot']} 倍。"
               "那是 vLLM 整体（分页 + 共享）和 Orca 比，省下的显存换成了更大的批；这里数的是 prefill 少算的 token，"
               "两者不是同一个量。")
    return obs


def shared_prefix_requests(vocab):
    """演示 2 的请求（随机 token，种子 PROMPT_SEED）：{前缀名: (前缀, [N_SHARING 个后缀])}，按 FEW_SHOT 的顺序。

    04b_radix_cache.py 用同一批请求建基数树，所以生成它们的代码只有这一份。
    """
    rng = np.random.default_rng(PROMPT_SEED)
    out = {}
    for name, plen in FEW_SHOT:
        prefix = rng.integers(0, vocab, plen)
        out[name] = (prefix, [rng.integers(0, vocab, int(rng.integers(*SUFFIX_LEN))) for _ in range(N_SHARING)])
    return out


def demo2_shared_prefix():
    """在真模型上复用前缀：能省多少计算？结果和从头算一样吗？"""
    print_header(f"演示 2：{N_SHARING} 个请求共享 few-shot 前缀（前缀长度同 vLLM 论文 §6.4），块大小 {BLOCK_SIZE}")
    longest = max(plen for _, plen in FEW_SHOT) + SUFFIX_LEN[1] - 1
    cfg = config_like(TINY, max_seq=n_blocks(longest, BLOCK_SIZE) * BLOCK_SIZE)   # 模型的上下文按最长的请求定
    params = init_params(cfg, seed=MODEL_SEED)
    print_text(f"模型：第 2 讲的 TINY（{cfg.n_layers} 层、d_model={cfg.d_model}、GQA {cfg.n_heads}/{cfg.n_kv_heads}，"
               f"float64，权重种子 {MODEL_SEED}）；前缀和后缀是随机 token（种子 {PROMPT_SEED}），"
               f"后缀 {SUFFIX_LEN[0]}–{SUFFIX_LEN[1] - 1} 个。")
    results = {name: run_shared_prefix(params, cfg, prefix, suffixes)
               for name, (prefix, suffixes) in shared_prefix_requests(cfg.vocab).items()}
    rows = []
    for name, plen in FEW_SHOT:
        r = results[name]
        rows.append([name, plen, r["total"], r["computed"], f"{r['saved']:.0%}", f"{r['speedup']:.1f}×",
                     r["cached_blocks"], r["used_private"], r["used_shared"], fmt_diff(r["worst"])])
    print_table(["前缀", "长度", "总输入", "实际算", "省下", "少算", "缓存块", "不共享", "共享", "最大差"], rows,
                caption=f"总输入 / 实际算：{N_SHARING} 个请求的 token 数；缓存块：前缀缓存里的块；不共享 / 共享："
                        f"{N_SHARING} 个请求同时在场时占用的物理块；最大差：最后一个 token 的 logits 与从头算的 max |diff|。")
    print_observations(demo2_observations(results))
    return results


# =============================================================================
def read_trace(trace_path=None, block_size=TRACE_BLOCK_SIZE):
    """trace_path=None：合成 trace（种子 TRACE_SEED）；否则读 trace 文件（出错抛 TraceError）。"""
    if trace_path is None:
        return make_trace(TRACE_SEED)
    return load_trace(trace_path, block_size)


def trace_sweep(trace, trace_path=None, block_size=TRACE_BLOCK_SIZE, capacities=CAPACITIES, demo3=True,
                background=False):
    """演示 3、4 共用的一份数据：trace 和整张命中表 {(策略, 容量): 每个请求的命中块数}（含 MIN），只算一遍。

    main() 算一次，再当参数传给演示 3 和演示 4；单独调用某个演示时，它自己算一份。
    demo3=False（只跑演示 4）：只算演示 4 要的那一种策略、那几个容量。
    background=True：命中表在后台的工作进程里算，data["hits"] 第一次被读时才等它（main 趁这段时间跑演示 1、2）。
    """
    if not demo3:
        hits = sweep(trace, DEMO4_CAPS, (DEMO4_POLICY,), background=background)
        return dict(trace=trace, hits=hits, path=trace_path, block_size=block_size, capacities=(), contrast_caps=())
    swept = tuple(capacities)
    if None not in swept:
        swept += (None,)                                                  # 无限容量总要算（很便宜）
    extra = [(DEMO4_POLICY, c) for c in DEMO4_CAPS if c not in swept]     # 演示 4 另外要的容量：只算它那一种策略
    contrast = tuple(c for c in capacities if c in CONTRAST_CAPS)        # 对照行只算表里有的这几格
    if CONTRAST in POLICIES:
        contrast = ()                                                     # 它已经是表里的一行了
    extra += [(CONTRAST, c) for c in contrast]
    hits = sweep(trace, swept, POLICIES + (BOUND,), extra=extra, background=background)   # 所有格子一起分给各个核
    return dict(trace=trace, hits=hits, path=trace_path, block_size=block_size, capacities=tuple(capacities),
                contrast_caps=contrast)


def trace_stats(tr):
    """trace 的统计量：请求数、时长、平均输入输出、块的热度（counts：每个块的访问次数，从多到少）。

    tr 是列式的 Trace（kv_trace.py）：直接对整列算，不逐个请求循环。
    """
    v = np.bincount(dense_ids(tr.hash_ids)[0])          # 每个块的访问次数（和 tr.block_counts() 是同一组数，
    v = np.sort(v[v > 0])[::-1]                           # 只是不用排序去重：编号不大时快得多），从多到少
    total = int(v.sum())
    return dict(n=len(tr), minutes=float(tr.arrival[-1] - tr.arrival[0]) / 60,
                mean_in=float(np.mean(tr.input_len)), mean_out=float(np.mean(tr.output_len)),
                total_blocks=total, distinct=len(v), once=float(np.mean(v == 1)), hottest=int(v[0]),
                top1pct=float(v[:max(1, len(v) // 100)].sum() / total), inf_ratio=1 - len(v) / total,
                counts=v)


def _short(policy):
    """表格里的短名字（策略类的 SHORT；"min" 是 MIN）。"""
    if policy == BOUND:
        return "MIN"
    return CACHE_POLICIES[policy].SHORT


def cap_name(c):
    """表头里的容量：cap_name(None) → '无限'；cap_name(10_000) → '10,000'。"""
    if c is None:
        return "无限"
    return f"{c:,}"


def fmt_or_dash(x, fmt):
    """没有的数（None）写成 "-"。fmt_or_dash(None, "{:.2f}") → '-'；fmt_or_dash(0.5, "{:.2f}") → '0.50'。"""
    if x is None:
        return "-"
    return fmt.format(x)


def _trace_row(name, st):
    return [name, fmt_int(st["n"]), f"{st['minutes']:.0f}", fmt_int(st["mean_in"]), f"{st['mean_out']:.0f}",
            f"{st['inf_ratio']:.2f}"]


def print_trace_tables(st, syn, real):
    """演示 3 的前两张表：trace 的统计量（和论文的 trace 并排），块的热度。"""
    rows = []
    papers = list(PAPER_TRACES)
    caption = ""
    if real:
        rows.append(_trace_row("你给的 trace", st))
        papers += PAPER_TRACES_MORE
        caption = "分钟：第一个到最后一个请求的时间跨度。"
    rows.append(_trace_row("本实验（合成）", syn))
    rows += [[n, fmt_int(q), fmt_or_dash(m, "{}"), fmt_int(i), o, f"{c:.2f}"] for n, q, m, i, o, c, _ in papers]
    print_table(["trace", "请求数", "分钟", "平均输入", "平均输出", "无限容量命中率"], rows,
                caption="出处：" + "；".join(f"{n}——{src}" for n, *_, src in papers) + "。" + caption)
    heat = [("只被访问过一次的块", "once", "{:.0%}", "超过 50% 的块没有被再次使用"),
            ("最热的块被访问的次数", "hottest", "{:,}", "有的块被访问数万次"),
            ("最热 1% 的块占全部访问", "top1pct", "{:.0%}", "-")]
    paper_col = "论文（arXiv v3 §4.2）"
    if real:
        print_table(["块的热度", "你给的 trace", "合成", paper_col],
                    [["不同的块", fmt_int(st["distinct"]), fmt_int(syn["distinct"]), "-"]]
                    + [[t, f.format(st[k]), f.format(syn[k]), pp] for t, k, f, pp in heat])
    else:
        print_table(["块的热度", "本实验", paper_col], [[t, f.format(st[k]), pp] for t, k, f, pp in heat])


def print_policy_tables(ratio, gap, capacities, contrast_caps):
    """演示 3 的命中率表（含对照行、论文表 1 的行）和"离 MIN 还差多少"表。"""
    rows = [[_short(p)] + [f"{ratio[(p, c)]:.2f}" for c in capacities] for p in POLICIES + (BOUND,)]
    la = ""
    if "lengthaware" in POLICIES:
        la = (f"LengthAware = LengthAwareCache，{LENGTHAWARE_SOURCE} 对它只有一句定义：“{LENGTHAWARE_DEFINITION}”；"
              "本课读作：访问次数相同时先淘汰请求里靠后的块。")
    if contrast_caps:
        rows.append([CACHE_POLICIES[CONTRAST].NAME] + [fmt_or_dash(ratio.get((CONTRAST, c)), "{:.2f}")
                                                       for c in capacities])
        la += (f"对照行：另一种读法，不是论文的策略；只算了 {'、'.join(cap_name(c) for c in contrast_caps)} 块"
               "（CONTRAST_CAPS）。")
    for p in POLICIES:
        if p in PAPER_TABLE1:
            rows.append([f"论文 {_short(p)}"] + [fmt_or_dash(PAPER_TABLE1[p].get(c), "{:.2f}") for c in capacities])
    arxiv, tool = PAPER_TRACES[0], PAPER_TRACES[1]
    missing = [cap_name(c) for c in capacities if c not in PAPER_TABLE1["lru"]]
    note = "论文没有 MIN。"
    if missing:
        note = f"论文没有 {'、'.join(missing)} 这{_count_word(missing)}，也没有 MIN。"
    print_table(["策略 \\ 容量（块）"] + [cap_name(c) for c in capacities], rows,
                caption="MIN：Belady 的离线最优（预知未来，淘汰下一次用到最晚的块），数逐块命中，是任何策略"
                        "前缀命中率的上界，真实系统做不到。"
                        f"论文行：Mooncake arXiv v3 表 1，算在 {arxiv[0]} 上（mooncake_trace.jsonl，平均输入 "
                        f"{arxiv[3]:,}），和 {tool[0]}（平均输入 {tool[3]:,}）不是同一个 trace；{note}" + la)
    print_table(["MIN 减去 \\ 容量"] + [cap_name(c) for c in capacities],
                [[_short(p)] + [f"{gap[(p, c)]:.2f}" for c in capacities] for p in POLICIES],
                caption="每格 = MIN 的命中率 − 这种在线策略的命中率：换成最好的淘汰策略最多还能多命中多少。")


def _count_word(items):
    """"这一列" / "这几列"。"""
    if len(items) == 1:
        return "一列"
    return "几列"


def _lru_vs_lfu_sentence(ratio, mid):
    """观察 3：在会淘汰的中等容量上 LRU 和 LFU 谁高，和论文的结论比；相等时照实说。"""
    lru, lfu = (lambda c: round(ratio[("lru", c)], 2)), (lambda c: round(ratio[("lfu", c)], 2))   # 按表里的两位小数比
    caps = "、".join(f"{c:,}" for c in mid)
    lfu_better = [c for c in mid if lfu(c) > lru(c)]
    lru_better = [c for c in mid if lru(c) > lfu(c)]
    if not lfu_better and not lru_better:
        return f"在 {caps} 块时 LRU 和 LFU 的命中率（两位小数）相同：这个 trace 上看不出两者的差别。"
    if not lfu_better:
        best = max(lru_better, key=lambda c: lru(c) - lfu(c))
        if len(mid) == 1:
            s = f"在 {caps} 块时 LRU 比 LFU 高（{lru(best):.2f} 对 {lfu(best):.2f}）"
        else:
            s = (f"在 {caps} 块时 LRU 都不低于 LFU，差得最多的是 {best:,} 块"
                 f"（{lru(best):.2f} 对 {lfu(best):.2f}）")
        return (s + "，和论文结论（LRUCache performs best）"
                "一致：复用多半发生在时间上相近的请求之间（同一个会话的下一轮），而 LFU 让以前很热、现在没人用的块"
                "赖着不走。")
    s = (f"在 {'、'.join(f'{c:,}' for c in lfu_better)} 块时 LFU 比 LRU 高（"
         + "，".join(f"{lfu(c):.2f} 对 {lru(c):.2f}" for c in lfu_better)
         + "），和论文结论（LRUCache performs best）不完全一致")
    if len(lfu_better) < len(mid):
        return s + f"；{'、'.join(f'{c:,}' for c in mid if c not in lfu_better)} 块时 LRU 不低于 LFU。"
    return s + "。"


def _lengthaware_sentence(ratio, ref, contrast_caps):
    """观察 4：ref 块时各策略的排序；LengthAware（论文的一句定义，本课的读法）和 LFU、和对照行比。"""
    order = sorted(POLICIES, key=lambda p: -ratio[(p, ref)])
    s = (f"{ref:,} 块时 {len(POLICIES)} 种策略从高到低：{_ranking(order, ratio, ref)}"
         f"（{'、'.join(f'{ratio[(p, ref)]:.2f}' for p in order)}）。")
    la, lfu = ratio[("lengthaware", ref)], ratio[("lfu", ref)]
    if lfu == 0:
        return s
    s += (f"LengthAwareCache 在论文里只有一句定义（见表注），本课读作\"次数相同时先淘汰靠后的块\"："
          f"链从尾巴拆起，留下的仍是从第一块起的完整前缀；{ref:,} 块时它是 LFU 的 {la / lfu:.0%}")
    paper = PAPER_TABLE1
    if ref in paper["lengthaware"] and ref in paper["lfu"]:
        s += (f"（论文表 1：{paper['lengthaware'][ref]:.2f} / {paper['lfu'][ref]:.2f} = "
              f"{paper['lengthaware'][ref] / paper['lfu'][ref]:.0%}）")
    s += "。"
    if ref not in contrast_caps:
        return s
    c = ratio[(CONTRAST, ref)]
    if round(c, 2) < round(la, 2):
        return s + (f"对照行是另一种读法（先淘汰靠前的块）：只有 {c:.2f}，是 LFU 的 {c / lfu:.0%}——它先拆掉前缀的"
                    "父块，而前缀命中要求从第一块起连续，父块没了，子块留着也用不上。在前缀缓存里，块在请求中的位置很要紧。")
    return s + f"对照行（先淘汰靠前的块）是 {c:.2f}，并不比本课的读法低：这个 trace 上块的位置影响不大。"


def _ranking(order, ratio, cap):
    """'LRU > LFU = LengthAwareCache'：按表里的两位小数，相等的写 "="。"""
    s = POLICY_NAMES[order[0]]
    for a, b in zip(order, order[1:]):
        if round(ratio[(a, cap)], 2) == round(ratio[(b, cap)], 2):
            s += " = " + POLICY_NAMES[b]
        else:
            s += " > " + POLICY_NAMES[b]
    return s


def _other_policy_sentence(p, ratio, gap, evicting, lead):
    """论文表 1 以外的策略（S3-FIFO、你自己注册的）：在会淘汰的容量上和 lead 比，离 MIN 最远多少。"""
    r = lambda q, c: round(ratio[(q, c)], 2)          # noqa: E731  按表里的两位小数比
    counts = [("高于", sum(r(p, c) > r(lead, c) for c in evicting)), ("持平", sum(r(p, c) == r(lead, c) for c in evicting)),
              ("低于", sum(r(p, c) < r(lead, c) for c in evicting))]
    far = max(evicting, key=lambda c: gap[(p, c)])
    return (f"{CACHE_POLICIES[p].NAME}：在 {len(evicting)} 个要淘汰的容量里，"
            + "、".join(f"{n} 个{w} {_short(lead)}" for w, n in counts if n)
            + f"；离 MIN 最远是 {far:,} 块时的 {gap[(p, far)]:.2f}。")


def _policies_word():
    """"三种在线策略" 的说法随 POLICIES 变：一种时直接说名字。"""
    if len(POLICIES) == 1:
        return _short(POLICIES[0])
    return f"{len(POLICIES)} 种在线策略"


def _min_sentence(ratio, gap, finite, lead):
    """观察 5：MIN 是上界；在线策略离它最远在哪里；lead 策略离 MIN 的差距随容量变化的形状。"""
    finite = sorted(finite, reverse=True)     # 从大到小
    if all(gap[(p, c)] >= -1e-12 for p in POLICIES for c in finite):
        s = f"MIN 在每个容量都不低于 {_policies_word()}"
    else:
        s = "MIN 竟然在某个容量低于在线策略（上界被违反，程序有错）"
    top = max(round(gap[(p, c)], 2) for p in POLICIES for c in finite)
    cells = [(p, c) for c in finite for p in POLICIES if round(gap[(p, c)], 2) == top]   # 两位小数上打平的都算
    s += "；差距最大（" + f"{top:.2f}）的是 " + "、".join(
        f"{_short(p)} 在 {c:,} 块（{ratio[(p, c)]:.2f} 对 MIN 的 {ratio[(BOUND, c)]:.2f}）" for p, c in cells[:3])
    if len(cells) > 3:
        s += f" 等 {len(cells)} 格"
    s += "。"
    g = [round(gap[(lead, c)], 2) for c in finite]          # 按表里的两位小数看形状
    if len(g) == 1:
        return s
    s += (f"{_short(lead)} 离 MIN 的差距（容量从 {finite[0]:,} 块降到 {finite[-1]:,} 块）："
          + "、".join(f"{x:.2f}" for x in g))
    peak = max(range(len(g)), key=lambda i: g[i])
    if round(g[peak], 2) == 0:
        return s + f"——每个容量都一样，{_short(lead)} 已经做到了最好。"
    if all(a <= b for a, b in zip(g, g[1:])):
        return s + "——缓存越小差距越大：缓存小时，\"留谁\"更要紧，预知未来的价值更大。"
    if peak == len(g) - 1:
        return s + f"——时大时小，在最小的 {finite[-1]:,} 块时最大。"
    if peak == 0:
        return s + f"——在最大的 {finite[0]:,} 块时差距最大，缓存变小时差距没有变大。"
    s += (f"——先变大、在 {finite[peak]:,} 块时最大（{g[peak]:.2f}），再到 {finite[-1]:,} 块时回落到 {g[-1]:.2f}："
          "中等大小的缓存里\"留谁\"最要紧")
    if ratio[(BOUND, finite[-1])] < ratio[(BOUND, finite[peak])]:
        return s + (f"；缓存再小，连 MIN 也留不住多少（{ratio[(BOUND, finite[peak])]:.2f} → "
                    f"{ratio[(BOUND, finite[-1])]:.2f}），两者一起往下掉。")
    return s + "。"


def _same_paper_trace(st):
    """st 的请求数、平均输入、平均输出（差 < 1%）和哪个论文 trace 对得上；都对不上返回 None。"""
    for row in PAPER_TRACES + PAPER_TRACES_MORE:
        if row[1] == st["n"] and abs(row[3] / st["mean_in"] - 1) < 0.01 and abs(row[4] / st["mean_out"] - 1) < 0.01:
            return row
    return None


def _source_sentence(st, syn, real):
    """最后一条观察：这个 trace 是什么，和论文的哪个 trace 对得上。"""
    if not real:
        return ("这是合成负载，只模仿了论文给出的几个统计量。Mooncake 公开了 FAST'25 的三个 trace（Conversation、"
                "Tool&Agent 是 Kimi 线上一小时的采样，Synthetic 由公开数据集拼成）和 arXiv v3 的 trace，"
                "可以用 --trace 换进来对比。")
    if st["inf_ratio"] > syn["inf_ratio"]:
        cmp = "高于"
    else:
        cmp = "不高于"
    s = (f"你给的 trace：{fmt_int(st['n'])} 个请求、{st['minutes']:.0f} 分钟，平均输入 "
         f"{fmt_int(st['mean_in'])} token；无限容量命中率 {st['inf_ratio']:.2f}，{cmp}合成负载的 "
         f"{syn['inf_ratio']:.2f}。")
    same = _same_paper_trace(st)
    if same is None:
        return s + "它和论文列出的 trace 都对不上；论文的表 1 是在另一个 trace 上算的，只能看趋势，不能逐格比。"
    s += (f"请求数、平均输入和输出都和 {same[0]} 一致，它就是那个 trace（{TRACE_KIND[same[0]]}）。"
          f"论文给的 cache ratio 是 {same[5]:.2f}，我们按块数算出 {st['inf_ratio']:.2f}"
          f"（差 {abs(same[5] - st['inf_ratio']):.2f}；论文没写明怎么算，可能按 token 或别的口径）。")
    if same[0] == PAPER_TRACES[0][0]:
        return s + "论文的表 1 就是在这个 trace 上算的，可以逐格比。"
    return s + f"论文的表 1 是在 {PAPER_TRACES[0][0]} 上算的，只能看趋势，不能逐格比。"


def _capacity_sentence(ratio, small, lead, inf):
    """观察 2：容量从无限降到最小时 lead 策略还保留多少命中（和论文表 1 的 LRU 比）。"""
    keep = ratio[(lead, small)] / inf
    s = (f"容量从无限降到 {small:,} 块，{_short(lead)} 的命中率从 {inf:.2f} 降到 {ratio[(lead, small)]:.2f}，"
         f"还保留了 {keep:.0%}")
    if lead in PAPER_TABLE1 and small in PAPER_TABLE1[lead]:
        t = PAPER_TABLE1[lead]
        s += f"（论文 {small:,} 块时 {t[small]:.2f} / {t[None]:.2f} = {t[small] / t[None]:.0%}）"
    if keep >= 0.5:
        return s + "：热门的系统提示很少几块就占了大量命中。"
    return s + "：小缓存留不住大部分复用。"


def _hot_sentence(st):
    """块的热度：有没有特别热的块（阈值 HOT_ACCESSES）。"""
    if st["hottest"] == 1:
        return "每个块都只出现过一次：没有一个块被再次访问，也就没有热门块。"
    if st["hottest"] >= HOT_ACCESSES:
        return (f"{st['once']:.0%} 的块只出现过一次，而最热的块被访问了 {fmt_int(st['hottest'])} 次：热门块值得复制到"
                "多台机器上，否则所有请求都去同一台机器拉 KV，网卡会堵（Mooncake arXiv v3 §6.2，05 脚本演示 2）。")
    return (f"{st['once']:.0%} 的块只出现过一次，最热的块也只被访问了 {fmt_int(st['hottest'])} 次"
            f"（不到 {HOT_ACCESSES:,} 次）：这个 trace 的复用分散在许多块上，没有特别热的块。")


def demo3_observations(st, syn, ratio, gap, capacities, contrast_caps, real):
    """演示 3 的观察：每句都由 ratio / gap / st（和表格同一份数）拼出来；没有复用、不用淘汰时照实说。"""
    lead = POLICIES[0]
    if "lru" in POLICIES:
        lead = "lru"
    inf = ratio[(lead, None)]                       # 无限容量总是算了（表里不一定有这一列）
    if inf == 0 and st["inf_ratio"] == 0:
        first = (f"无限容量时命中率也是 0（1 − 不同的块数 / 总块数 = 1 − {fmt_int(st['distinct'])} / "
                 f"{fmt_int(st['total_blocks'])}）：每个块都是第一次出现。")
    elif abs(inf - st["inf_ratio"]) < 1e-12:
        first = (f"无限容量时命中率 {inf:.3f} = 1 − 不同的块数 / 总块数（"
                 f"1 − {fmt_int(st['distinct'])} / {fmt_int(st['total_blocks'])}）：剩下的块是第一次出现，"
                 "再大的缓存也没用。")
    else:
        first = (f"无限容量时命中率 {inf:.3f}，低于 1 − 不同的块数 / 总块数 = {st['inf_ratio']:.3f}："
                 "有的块以前出现过，但它前面的块没出现过（hash_ids 不是严格的链式哈希），前缀命中用不上它。")
    if None not in capacities:
        first += "（CAPACITIES 里没有无限容量，这个数是另外算的。）"
    arxiv, tool = PAPER_TRACES[0], PAPER_TRACES[1]
    obs = [first + f"论文：{arxiv[0]} 在无限容量时是 {arxiv[5]:.2f}（arXiv v3 表 1），{tool[0]} 的 cache ratio 是 "
           f"{tool[5]:.2f}（FAST'25 表 2）。"]
    finite = sorted(c for c in capacities if c is not None)
    evicting = [c for c in finite if c < st["distinct"]]      # 比不同的块少：一定要淘汰，策略才有区别
    if inf == 0:
        obs.append("这个 trace 里没有一次前缀命中（没有哪个请求的开头和之前的请求相同）：每种策略、每个容量的"
                   "命中率都是 0，上面的表比不出策略的好坏。换一个有复用的 trace 才看得出来。")
    elif not finite:
        obs.append("CAPACITIES 里只有无限容量：从不淘汰，每种策略都一样，比不出好坏。")
    elif not evicting:
        obs.append(f"最小的容量 {finite[0]:,} 块也装得下这个 trace 全部 {fmt_int(st['distinct'])} 个不同的块："
                   f"从来不用淘汰，所以每种策略在每个容量都和无限容量一样（{inf:.2f}），比不出好坏。")
    else:
        obs.append(_capacity_sentence(ratio, finite[0], lead, inf))
        mid = [c for c in (50_000, 30_000, 10_000) if c in evicting] or evicting[::-1]   # 从大到小
        if "lru" in POLICIES and "lfu" in POLICIES:
            obs.append(_lru_vs_lfu_sentence(ratio, mid))
        if "lengthaware" in POLICIES and "lfu" in POLICIES:
            obs.append(_lengthaware_sentence(ratio, mid[-1], contrast_caps))
        for p in POLICIES:
            if p not in PAPER_TABLE1 and p != lead:
                obs.append(_other_policy_sentence(p, ratio, gap, evicting, lead))
        obs.append(_min_sentence(ratio, gap, finite, lead))
    obs.append(_hot_sentence(st))
    obs.append(_source_sentence(st, syn, real))
    return obs


def demo3_trace(data=None):
    """块有多热门？缓存要多大？LRU、LFU、LengthAwareCache 谁更好？离最好的（MIN）还差多少？

    data：trace_sweep(...) 的结果（main 传进来，和演示 4 共用）；None = 合成 trace，自己算一份。
    """
    if data is None:
        data = trace_sweep(read_trace())
    real = data["path"] is not None
    if real:
        print_header("演示 3：你给的 trace——块的热度、缓存容量与命中率（Mooncake arXiv v3 §4、表 1）")
        src = f"你给的 trace：{os.path.basename(str(data['path']))}"
    else:
        print_header("演示 3：仿 Mooncake trace 的合成负载——块的热度、缓存容量与命中率（Mooncake arXiv v3 §4、表 1）")
        src = f"合成 trace：种子 {TRACE_SEED}"
    st = trace_stats(data["trace"])
    syn = st
    if real:
        syn = trace_stats(read_trace())
    print_text(f"{src}，块大小 {data['block_size']}；一共 {fmt_int(st['total_blocks'])} 次块访问、"
               f"{fmt_int(st['distinct'])} 个不同的块。")
    print_trace_tables(st, syn, real)
    caps, total = data["capacities"], st["total_blocks"]
    ratio = {k: v.sum() / total for k, v in data["hits"].items()}
    gap = {(p, c): ratio[(BOUND, c)] - ratio[(p, c)] for p in POLICIES for c in caps}
    contrast = data.get("contrast_caps", ())
    print_policy_tables(ratio, gap, caps, contrast)
    print_observations(demo3_observations(st, syn, ratio, gap, caps, contrast, real))
    bound_ok = all(gap[(p, c)] >= -1e-12 for p in POLICIES for c in caps)
    return dict(stats=st, synthetic_stats=syn, ratio=ratio, gap=gap, bound_ok=bound_ok, capacities=caps,
                policies=POLICIES + (BOUND,), names={p: POLICY_NAMES[p] for p in POLICIES + (BOUND,)},
                paper=PAPER_TABLE1, source=src, seed=TRACE_SEED, block_size=data["block_size"])


# =============================================================================
MODEL = LLAMA3_70B        # 演示 4 的模型：式 (1)、128 GB/s 都出自 FAST'25，它的模型是 LLaMA3-70B（表 1）


def gpu_hours(tr, hits_blocks, tier=TIERS[TIER_FOR_HITS], block_size=TRACE_BLOCK_SIZE):
    """按 FAST'25 式 (1) 和本机 DRAM 的带宽，算全部请求的 prefill GPU 时间（小时）和命中的 token 比例。

    每个请求的时间 = kv_physics.prefill_time(MODEL, 输入, 命中, tier)：算和读 KV 两列用 numpy 整列算
    （整数 FLOPs 在 int64 里是精确的，见 _exact_in_int64），逐个请求按层重叠（layer_overlap），再从前往后
    一个一个加起来——和逐个请求调用 prefill_time、累加的结果一模一样（测试逐位比过）。
    """
    n_in = tr.input_len
    n_hit = np.minimum(np.asarray(hits_blocks, dtype=np.int64) * block_size, n_in - 1)   # 至少要算最后一个 token
    if _exact_in_int64(n_in):
        compute = prefill_compute_time(MODEL, n_in, n_hit).tolist()
        load = load_time(MODEL, n_hit, tier).tolist()
        total_s = _sum_in_order(map(layer_overlap, compute, load, itertools.repeat(MODEL.n_layers)))
    else:                                          # 输入长到 FLOPs 超出 int64：逐个请求用 Python 整数算
        total_s = _sum_in_order(map(prefill_time, itertools.repeat(MODEL), n_in.tolist(), n_hit.tolist(),
                                    itertools.repeat(tier)))
    return total_s / 3600, int(n_hit.sum()) / int(n_in.sum())


def prefill_hours_no_cache(tr):
    """不缓存时全部请求的 prefill GPU 时间（小时）：每个请求从头算，逐个加起来。"""
    if _exact_in_int64(tr.input_len):
        times = prefill_compute_time(MODEL, tr.input_len, 0).tolist()
    else:
        times = map(prefill_compute_time, itertools.repeat(MODEL), tr.input_len.tolist(), itertools.repeat(0))
    return _sum_in_order(times) / 3600


def _exact_in_int64(n_in):
    """最长的输入的 FLOPs（式 1，整数）放得进 int64：numpy 整列算和 Python 整数逐个算一模一样。"""
    return len(n_in) == 0 or MODEL.prefill_flops(int(n_in.max())) < 2 ** 63


def _sum_in_order(xs):
    """从前往后一个一个加（和 `total += x` 的循环相同；不用 numpy 的两两求和，末位才不会变）。"""
    return functools.reduce(operator.add, xs, 0.0)


def cache_label(policy, cap):
    """演示 4 表格的行名：cache_label("lru", None) → 'LRU，容量 无限'；("lru", 1_000) → 'LRU，容量 1,000 块'。"""
    if cap is None:
        return f"{_short(policy)}，容量 无限"
    return f"{_short(policy)}，容量 {cap:,} 块"


def cap_size(c):
    """排序用：无限（None）比任何有限容量都大。"""
    if c is None:
        return float("inf")
    return c


def gib(nbytes):
    """字节数 → 'N GiB'（1 GiB = 2³⁰ 字节）。gib(10 * 2**30) → '10 GiB'。"""
    return f"{nbytes / 2**30:,.0f} GiB"


def time_unit(base_hours):
    """GPU 时间用什么单位：总量不到半小时（小 trace）用秒，否则用小时。返回 (单位名, 每小时折合几个单位)。"""
    if base_hours < 0.5:
        return "秒", 3600.0
    return "小时", 1.0


def demo4_observations(base, hours, frac, policy, caps, kv_blk, hbm, unit):
    """演示 4 的观察：数字都取自表格那一份 hours / frac（键是 (策略, 容量)）；时间按 unit 换算，和表格一样。"""
    name, k = unit
    caps = sorted(caps, key=cap_size)
    big, finite = caps[-1], [c for c in caps if c is not None]
    h_big, f_big = hours[(policy, big)], frac[(policy, big)]
    if big is None:
        big_name = "无限缓存"
    else:
        big_name = f"容量 {big:,} 块的缓存"
    obs = []
    if f_big == 0:
        obs.append(f"{big_name}也一个 token 都没命中：这个 trace 里没有可以复用的前缀，prefill 的 GPU 时间还是 "
                   f"{base * k:.2f} {name}，前缀缓存省不下任何计算。")
    else:
        s = (f"{big_name}命中了 {f_big:.0%} 的输入 token，prefill 的 GPU 时间从 {base * k:.2f} {name}降到 "
             f"{h_big * k:.2f} {name}"
             f"（少了 {1 - h_big / base:.0%}）。")
        if 1 - h_big / base < f_big:
            s += ("省下的时间比例低于命中的 token 比例：命中的是开头，没命中的 token 仍要对全部前缀做注意力，"
                  "读 KV 也有一部分盖不住。")
        else:
            s += "省下的时间比例不低于命中的 token 比例：注意力随长度平方增长，命中的长前缀省得更多。"
        obs.append(s)
    if finite:
        cmax = finite[-1]
        need = cmax * kv_blk
        if need > hbm:
            obs.append(f"容量 {cmax:,} 块就需要 {gib(need)} 的存储，是一台 8 卡机器全部 HBM（{gib(hbm)}，"
                       f"还没减去权重）的 {need / hbm:.1f} 倍：这么大的前缀缓存只能放在 CPU 内存、SSD 或整个集群的"
                       "内存池里——这就是 Mooncake 把 KV 放到集群的 DRAM/SSD 上、按 KV 的位置调度请求的原因（05 脚本）。")
        else:
            obs.append(f"容量 {cmax:,} 块只要 {gib(need)}，放得进一台 8 卡机器的 HBM（{gib(hbm)}），"
                       "不过还要先减去权重和正在解码的请求的 KV。")
    if finite and finite[0] != big and f_big > 0:
        small = finite[0]
        h_s, f_s = hours[(policy, small)], frac[(policy, small)]
        s = (f"只有 {small:,} 块（{gib(small * kv_blk)}）时命中 {f_s:.0%} 的 token，"
             f"GPU 时间少 {1 - h_s / base:.0%}")
        if f_s >= f_big / 2:
            obs.append(s + f"（是{big_name}命中的 {f_s / f_big:.0%}）：热门的前缀很集中。")
        else:
            obs.append(s + f"（只有{big_name}命中的 {f_s / f_big:.0%}）：这个 trace 的复用分散在许多前缀上，"
                           "小缓存留不住。")
    return obs


def demo4_compute_saved(data=None, caps=DEMO4_CAPS, policies=(DEMO4_POLICY,)):
    """命中率能省多少 prefill 的 GPU 时间？缓存又要多大的存储？

    data：trace_sweep(...) 的结果（和演示 3 共用）；caps × policies 里的每一格都要在 data["hits"] 里。
    """
    if data is None:
        data = trace_sweep(read_trace())
    node, tier = A800_X8, TIERS[TIER_FOR_HITS]
    tr, block_size = data["trace"], data["block_size"]
    print_header(f"演示 4：命中率换算成 prefill 的 GPU 时间（{MODEL.name}、{node.name} 张量并行、"
                 f"{node.mfu:.0%} 峰值算力，Mooncake FAST'25 表 1、式 1）")
    base = prefill_hours_no_cache(tr)
    unit = time_unit(base)
    rows = [["不缓存", "0%", f"{base * unit[1]:.2f}", "1.00×"]]
    hours, frac = {}, {}
    for p in policies:
        for cap in caps:
            hours[(p, cap)], frac[(p, cap)] = gpu_hours(tr, data["hits"][(p, cap)], tier, block_size)
            rows.append([cache_label(p, cap), f"{frac[(p, cap)]:.0%}", f"{hours[(p, cap)] * unit[1]:.2f}",
                         f"{base / hours[(p, cap)]:.2f}×"])
    per_token = MODEL.kv_bytes_per_token()
    kv_blk = block_size * per_token
    (m25, src25), (mv3, srcv3) = MOONCAKE_MODELS["fast25"], MOONCAKE_MODELS["arxiv_v3"]
    if (LLAMA2_70B.n_layers, LLAMA2_70B.d_model, LLAMA2_70B.n_kv_heads) == (MODEL.n_layers, MODEL.d_model,
                                                                            MODEL.n_kv_heads):
        same = f"arXiv v3 用的 {mv3}（{srcv3}）形状相同，每 token 的 KV 也一样"
    else:
        same = f"arXiv v3 用的 {mv3}（{srcv3}）形状不同"
    print_text(f"模型：{m25}（{src25}：{MODEL.n_layers} 层、d_model {MODEL.d_model}、{MODEL.n_kv_heads} 个 KV 头，"
               f"每 token 的 KV {per_token / 2**10:g} KiB）；{same}。"
               f"命中的 KV 从{tier.name}读（{tier.gb_per_s:g} GB/s，1 GB = 10⁹ 字节；{tier.source}），和计算按层重叠；"
               f"一块 = {block_size} × {per_token / 2**10:g} KiB = {kv_blk / 2**20:g} MiB。")
    which = ""
    if data["path"] is not None:
        which = "你给的 trace 里 "
    print_table(["缓存", "命中的输入 token", f"prefill GPU 时间（{unit[0]}）", "快了"], rows,
                caption=f"GPU 时间：{which}{fmt_int(len(tr))} 个请求的 prefill 在一台 {node.name} 上的总时间。"
                        "存储用二进制单位：1 KiB = 1,024 字节，1 MiB = 1,024 KiB，1 GiB = 1,024 MiB。")
    hbm = node.hbm_bytes
    print_observations(demo4_observations(base, hours, frac, policies[0], caps, kv_blk, hbm, unit))
    return dict(base_hours=base, hours=hours, hit_frac=frac, need_bytes=10_000 * kv_blk, hbm_bytes=hbm,
                kv_block_bytes=kv_blk, caps=tuple(caps), policies=tuple(policies), model=MODEL.name, node=node.name,
                mfu=node.mfu, tier=tier.name, tier_gb_per_s=tier.gb_per_s, block_size=block_size,
                n_requests=len(tr))


# =============================================================================
DEMOS = {1: demo1_hashing, 2: demo2_shared_prefix, 3: demo3_trace, 4: demo4_compute_saved}
TRACE_DEMOS = (3, 4)                # 用 trace 的演示：main 只读一次 trace、只算一遍命中表，传给它们
MAX_DEMO2_TOKENS = 1_024            # 演示 2 的一个请求（前缀 + 后缀）最多这么长：小模型在几秒内算完


def _is_capacity(c):
    return c is None or is_int(c, 1)


def check_settings():
    """顶部"学生可以改的设置"：不合理的值在开始时一行拒绝（常量名、收到的值、允许的范围），退出码 2。"""
    for name in ("TRACE_SEED", "MODEL_SEED", "PROMPT_SEED"):
        check_setting(name, globals()[name], is_int(globals()[name], 0), "非负整数")
    check_setting("N_SHARING", N_SHARING, is_int(N_SHARING, 1, 64), " 1 到 64 的整数（请求数）")
    check_setting("BLOCK_SIZE", BLOCK_SIZE, is_int(BLOCK_SIZE, 1, 1024), " 1 到 1,024 的整数（token）")
    ok = (isinstance(SUFFIX_LEN, tuple) and len(SUFFIX_LEN) == 2 and is_int(SUFFIX_LEN[0], 1)
          and is_int(SUFFIX_LEN[1], SUFFIX_LEN[0] + 1))
    check_setting("SUFFIX_LEN", SUFFIX_LEN, ok, " (最短, 最长 + 1) 两个整数，1 ≤ 最短 < 最长 + 1")
    ok = (isinstance(FEW_SHOT, tuple) and len(FEW_SHOT) > 0
          and all(isinstance(e, tuple) and len(e) == 2 and isinstance(e[0], str) and is_int(e[1], 1) for e in FEW_SHOT)
          and len({e[0] for e in FEW_SHOT}) == len(FEW_SHOT))
    check_setting("FEW_SHOT", FEW_SHOT, ok, "非空的 ((名字, 前缀 token 数), ...)，名字不重复，长度是正整数")
    longest = max(p for _, p in FEW_SHOT) + SUFFIX_LEN[1] - 1
    check_setting("FEW_SHOT", FEW_SHOT, longest <= MAX_DEMO2_TOKENS,
                  f"前缀 + 最长的后缀不超过 {MAX_DEMO2_TOKENS:,} 个 token（现在是 {longest:,}；小模型要在几秒内算完）")
    ok = isinstance(CAPACITIES, tuple) and len(CAPACITIES) > 0 and all(map(_is_capacity, CAPACITIES))
    check_setting("CAPACITIES", CAPACITIES, ok and len(set(CAPACITIES)) == len(CAPACITIES),
                  "非空、不重复的容量（块，正整数；None = 无限）")
    ok = isinstance(POLICIES, tuple) and len(POLICIES) > 0 and all(p in CACHE_POLICIES for p in POLICIES)
    check_setting("POLICIES", POLICIES, ok and len(set(POLICIES)) == len(POLICIES),
                  f"非空、不重复，每个都在 {', '.join(CACHE_POLICIES)} 里（kv_cache_policies.CACHE_POLICIES）")
    check_setting("BOUND", BOUND, BOUND == "min", " \"min\"（Belady 的 MIN，唯一的离线上界）")
    check_setting("CONTRAST", CONTRAST, CONTRAST in CACHE_POLICIES, f"{', '.join(CACHE_POLICIES)} 之一")
    ok = isinstance(CONTRAST_CAPS, tuple) and all(is_int(c, 1) for c in CONTRAST_CAPS)
    check_setting("CONTRAST_CAPS", CONTRAST_CAPS, ok, "正整数容量组成的元组（不在 CAPACITIES 里的不显示；() = 不要对照行）")
    check_setting("HOT_ACCESSES", HOT_ACCESSES, is_int(HOT_ACCESSES, 2), "至少 2 的整数（访问次数）")
    ok = isinstance(DEMO4_CAPS, tuple) and len(DEMO4_CAPS) > 0 and all(map(_is_capacity, DEMO4_CAPS))
    check_setting("DEMO4_CAPS", DEMO4_CAPS, ok and len(set(DEMO4_CAPS)) == len(DEMO4_CAPS),
                  "非空、不重复的容量（块，正整数；None = 无限）")
    check_setting("DEMO4_POLICY", DEMO4_POLICY, DEMO4_POLICY in POLICIES, f" POLICIES 里的一个：{', '.join(POLICIES)}")
    check_setting("TIER_FOR_HITS", TIER_FOR_HITS, is_int(TIER_FOR_HITS, 0, len(TIERS) - 1),
                  f" 0 到 {len(TIERS) - 1}（" + "、".join(f"{i} = {t.name}" for i, t in enumerate(TIERS)) + "）")


def main(argv=None):
    ap = ArgParser(description="第 7 讲 · 前缀缓存的四个演示")
    ap.add_argument("--demo", type=int, choices=sorted(DEMOS), help="只跑某一个演示（默认全跑）")
    ap.add_argument("--trace", metavar="PATH",
                    help="演示 3、4 改用你给的 trace 文件（Mooncake 的 JSONL 格式，可以是 .gz），默认用合成 trace")
    ap.add_argument("--block", type=int, default=TRACE_BLOCK_SIZE,
                    help=f"--trace 文件的块大小（token，默认 {TRACE_BLOCK_SIZE}）")
    args = ap.parse_args(argv)
    check_settings()
    if args.block <= 0:
        ap.error(f"--block 必须是正整数（收到 {args.block}）")
    if args.block != TRACE_BLOCK_SIZE and args.trace is None:
        ap.error("--block 只对 --trace 读入的文件有效（合成 trace 的块大小固定为 "
                 f"{TRACE_BLOCK_SIZE}）")
    trace = None
    if args.trace is not None:
        try:
            trace = read_trace(args.trace, args.block)      # 先读完、查完整个文件，再打印任何东西
        except TraceError as e:
            fail(f"{e.path}:{e.line}", e.what)
    todo = sorted(DEMOS)
    if args.demo:
        todo = [args.demo]
    early = [k for k in todo if k not in TRACE_DEMOS]
    late = [k for k in todo if k in TRACE_DEMOS]
    wait = None
    if early and late:                             # 演示 1、2 在子进程里打印，主进程同时建 trace、算命中表
        wait = run_in_child([DEMOS[k] for k in early])
    data = None
    if late:                                       # 命中表最慢：在后台的工作进程里算，先跑演示 1、2
        if trace is None:
            trace = read_trace()
        data = trace_sweep(trace, args.trace, args.block, demo3=3 in todo, background=True)
    if wait is None:
        for k in early:
            DEMOS[k]()
    else:
        code = wait()                              # 演示 1、2 都打印完了，才打印演示 3、4
        if code:
            return code
    for k in late:
        DEMOS[k](data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
