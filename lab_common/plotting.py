"""全课程共用的画图设置：无界面（Agg）、中文字体、可复现的 PNG。

    from plotting import plt, setup_matplotlib, save_png
    setup_matplotlib()                 # 选好中文字体，返回字体名
    fig, ax = plt.subplots(figsize=(12, 6))
    ...
    save_png(fig, "figures/xxx.png")   # 200 dpi、不写时间戳，同样的输入 → 同样的字节

（这是最小版本；make all 的那个 issue 会补全字体的安装与检查。）
"""
import os

import matplotlib

matplotlib.use("Agg")  # 无界面：在服务器、CI、没有显示器的笔记本上都能画
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib import font_manager  # noqa: E402

CJK_CANDIDATES = ("Noto Sans CJK SC", "Noto Sans SC", "Source Han Sans SC", "WenQuanYi Zen Hei",
                  "SimHei", "Microsoft YaHei", "PingFang SC", "Heiti SC", "Arial Unicode MS")
DPI = 200          # 8 英寸宽 × 200 dpi = 1600 像素：投影仪上够清楚
FONT_SIZE = 13     # ≥ 12 pt：坐在后排也看得清

_font = None


def setup_matplotlib():
    """选一个能显示中文的字体并设为默认；返回它的名字（找不到时返回 None）。"""
    global _font
    if _font is None:
        have = {f.name for f in font_manager.fontManager.ttflist}
        _font = next((n for n in CJK_CANDIDATES if n in have), None)
    plt.rcParams.update({"font.size": FONT_SIZE, "axes.unicode_minus": False,
                         "svg.hashsalt": "cs349e", "figure.dpi": 100})
    if _font:
        plt.rcParams["font.sans-serif"] = [_font, "DejaVu Sans"]
        plt.rcParams["font.family"] = "sans-serif"
    return _font


def save_png(fig, path):
    """写 PNG，去掉 Software/时间戳等元数据，保证同样的图两次写出的字节相同。"""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=DPI, metadata={"Software": None}, bbox_inches=None)
    plt.close(fig)
    return path
