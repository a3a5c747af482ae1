"""06_triton_cow_clone.py 的 GPU 部分：kernel 与块号的交付、分页缓存、校验、计时、读保存的结果（见 GPU.md）。"""
