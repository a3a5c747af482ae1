"""第 7 讲的练习：六个起始文件 ex1_…ex6_，检查器 check.py 和它的用例 cases*.py（cases.py 是登记表）。"""
