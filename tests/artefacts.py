"""在打印出来的文字里找"句子的假象"：两端相同的范围或变化、负零、把非零的大小印成 0、自相矛盾的方向词。

    >>> find_artefacts("在 0.04–0.04 之间；每次 -0 µs；余量从 24.1 倍降到 24.1 倍；只有 0 GiB；高 5%")
    ['范围两端相同：0.04–0.04', '负零：-0 ', '变化两端相同：从 24.1 倍降到 24.1', '零大小：0 GiB']
"""
import re

_NUM = r"-?\d[\d,]*(?:\.\d+)?"
_PATTERNS = [
    ("范围两端相同", re.compile(rf"(?<![\d.,])({_NUM})(%|×| ?[A-Za-zµ]+)?[–~]\1\2?(?![\d.])")),
    ("负零", re.compile(r"(?<![\d\w.])[-−]0(?:\.0+)?(?![\d.])(?:%| |×|$)")),
    ("变化两端相同", re.compile(rf"从 ({_NUM})(\S*) ?\S*(?:降|升|增加|减少|变)到 \1(?![\d.])")),
    ("零大小", re.compile(r"(?<![\d.])0(?:\.0+)? (?:KiB|MiB|GiB|TiB|KB|MB|GB|TB)(?!/)")),
    ("少了负数", re.compile(rf"(?:少|低|省下?|快)了? [-−]\d")),
]


def find_artefacts(text):
    """返回找到的每处问题（"种类：原文"）。"""
    out = []
    for kind, pat in _PATTERNS:
        for m in pat.finditer(text):
            out.append(f"{kind}：{m.group(0)}")
    return out
