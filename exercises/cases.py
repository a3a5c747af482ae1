"""检查器的用例表：练习号 → [(用例的名字, 函数)]。函数拿到 {名字: 学生的对象}，不对就 raise Fail。

每个练习先是能手算的小例子，再是和参考实现逐个比的随机用例和真实数据（cases_paged.py：练习 1–3；
cases_prefix.py：练习 4–6）。名字以"选做"开头的用例检查选做的部分：没写时跳过，不算没通过。
"""
from exercises.cases_paged import CASES_1, CASES_2, CASES_3
from exercises.cases_prefix import CASES_4, CASES_5, CASES_6
from exercises.checking import CLOCK, Crash, Fail  # noqa: F401  （check.py 从这里拿）

CASES = {1: CASES_1, 2: CASES_2, 3: CASES_3, 4: CASES_4, 5: CASES_5, 6: CASES_6}
STRETCH = "选做"        # 选做用例的名字的开头
