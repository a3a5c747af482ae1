"""画图的共同设置：无界面（Agg）、中文字体、一页 16:9 幻灯片的大小、逐字节可复现的 PNG 和 SVG。

    from lab_common import plotting
    plt = plotting.setup()                       # 选中文字体、设字号；返回 matplotlib.pyplot
    fig, ax = plt.subplots(figsize=plotting.SLIDE)
    plotting.save(fig, "figures/04_hit_ratio")   # 写 04_hit_ratio.png 和 .svg：同样的图，同样的字节

中文字体从哪来：requirements.txt 里的 PyPI 包 noto-cjk-sans-otc（Google 的 Noto Sans CJK，SIL Open Font
License 1.1）。它是一个 .ttc 字体集，matplotlib ≥ 3.11 分别注册其中的简体（SC）、日文（JP）等字形，更早的版本
只注册第一个字形 JP（也有全部简体字）。没装这个包时用系统里的中文字体；一个都没有时在 stderr 说一行，
照样画（中文成了方框，字节依然可复现）。
"""
import os
import sys
import warnings

import matplotlib

matplotlib.use("Agg")            # 无界面：服务器、CI、没有显示器的笔记本上都能画
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib import font_manager  # noqa: E402

SLIDE = (13.33, 7.5)   # 16:9 幻灯片一页（英寸）：图画成这么大，铺满一页时字号就是 FONT_PT
FONT_PT = 16           # 默认字号：投影仪上最后一排也看得清
DPI = 150              # 13.33 英寸 × 150 = 2,000 像素宽
CJK_FONTS = ("Noto Sans CJK SC", "Noto Sans CJK JP", "Noto Sans SC", "Source Han Sans SC", "WenQuanYi Zen Hei",
             "WenQuanYi Micro Hei", "SimHei", "Microsoft YaHei", "PingFang SC")
PACKAGE = "noto-cjk-sans-otc"
MISSING_GLYPH = r"Glyph \d+ .*missing from"   # matplotlib 缺字时的警告


def cjk_font():
    """能显示中文的字体名：先注册字体包里的 Noto Sans CJK，再按 CJK_FONTS 的顺序找；一个都没有时返回 None。"""
    try:
        import noto_cjk_sans_otc
        font_manager.fontManager.addfont(str(noto_cjk_sans_otc.FONT_PATH))
    except ImportError:
        pass
    installed = {f.name for f in font_manager.fontManager.ttflist}
    for name in CJK_FONTS:
        if name in installed:
            return name
    return None


def setup():
    """选字体、设字号和可复现的输出；返回 matplotlib.pyplot。有中文字体时缺字就报错（图不会悄悄缺字），
    没有时只在 stderr 说一行。"""
    font = cjk_font()
    fonts = ["DejaVu Sans"]                       # 中文字体缺的个别符号（≤、→）由 DejaVu Sans 补
    if font is None:
        print(f"plotting: 没有中文字体，图里的中文会是方框（pip install {PACKAGE}）", file=sys.stderr)
        warnings.filterwarnings("ignore", message=MISSING_GLYPH)
    else:
        fonts.insert(0, font)
        warnings.filterwarnings("error", message=MISSING_GLYPH)
    plt.rcParams.update({
        "font.family": "sans-serif", "font.sans-serif": fonts, "font.size": FONT_PT,
        "axes.titlesize": FONT_PT + 2, "axes.labelsize": FONT_PT, "legend.fontsize": FONT_PT,
        "xtick.labelsize": FONT_PT, "ytick.labelsize": FONT_PT, "figure.titlesize": FONT_PT + 6,
        "axes.unicode_minus": False,              # 负号用 ASCII 的 -：中文字体大多没有 U+2212
        "savefig.dpi": DPI, "svg.fonttype": "path", "svg.hashsalt": "cs349e",   # SVG 里的 id 每次都一样
    })
    return plt


def save(fig, path):
    """写 path.png 和 path.svg（path 不带扩展名），不写日期和软件版本：同样的图两次写出的字节相同。
    关掉 fig，返回两个文件的路径。"""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    png, svg = path + ".png", path + ".svg"
    fig.savefig(png, metadata={"Software": None})
    fig.savefig(svg, metadata={"Date": None, "Creator": None})
    plt.close(fig)
    return png, svg


if __name__ == "__main__":       # python lab_common/plotting.py：看看用的是哪个字体
    print(cjk_font() or "没有中文字体")
