"""GPU 上的写时复制克隆（06_triton_cow_clone.py 用）：

    clone_kernel.py   Triton kernel：每层一次 launch（B）、所有层一次 launch（C）、vLLM copy_blocks 式的 (层, 块对) grid（E）
    paged_decode.py   GPU 上的分页 KV 缓存（簿记是 paged_kv.BlockPool）和一步 torch decode
    clone_bench.py    逐位校验与 GPU 上的计时（CUDA graph replay）
    saved_results.py  读保存的 GPU 结果（JSON），不 import torch
    stack.py          import torch、triton：缺了、太旧一行说清；import 时按的 Ctrl-C 等 import 完才中断
    GPU.md            安装、测量方法、H200 上的结果
"""
