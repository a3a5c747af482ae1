"""Mooncake 论文里的数，04 把它们印在本实验的数旁边（只用来对照，不参与计算）。

arXiv v3 = "Mooncake: A KVCache-centric Disaggregated Architecture for LLM Serving"（arXiv:2407.00079v3）；
FAST'25 = 同一系统在 USENIX FAST'25 的论文 "Mooncake: Trading More Storage for Less Computation – A KVCache-centric
Architecture for Serving LLM Chatbot"。两篇都是 Moonshot AI（Kimi）和清华的。
"""
PAPER_TABLE1 = {   # Mooncake arXiv v3 表 1（§4.2）的命中率，按容量（块；None = 论文的 Inf）
    "LRU": {None: 0.51, 100_000: 0.51, 50_000: 0.50, 30_000: 0.48, 10_000: 0.40, 1_000: 0.30},
    "LFU": {None: 0.51, 100_000: 0.51, 50_000: 0.49, 30_000: 0.43, 10_000: 0.35, 1_000: 0.30},
    "LengthAware": {None: 0.51, 100_000: 0.50, 50_000: 0.48, 30_000: 0.42, 10_000: 0.35, 1_000: 0.30},
}
PAPER_TRACES = ("arXiv v3", "Tool&Agent", "对话", "FAST'25 合成")   # arXiv v3 §4、§4.2；FAST'25 表 2 的三个负载
PAPER_ROWS = {     # 演示 3 的行 → 四个 trace 的数。前三个是 Kimi 线上一小时的采样（arXiv v3 §4、FAST'25 §5.2.1），
    "请求数": ("23,608", "23,608", "12,031", "3,993"),   # "合成"（Synthetic）由公开数据集拼成、泊松到达
    "时长（分钟）": ("60", "60", "60", "-"),
    "平均输入 token": ("7,590", "8,596", "12,035", "15,325"),
    "平均输出 token": ("182", "182", "343", "149"),
    "cache ratio": ("-", "59%", "40%", "66%"),
    "只用过一次的块": ("超过 50%", "-", "-", "-"),
    "最热的块的访问次数": ("数万次", "-", "-", "-"),
    "最热 1% 的块占的访问": ("-", "-", "-", "-"),
}
