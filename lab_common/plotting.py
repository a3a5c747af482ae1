"""全课程共用的画图设置：无界面（Agg）、中文字体、可复现的 PNG。

    from lab_common.plotting import SLIDE, plt, setup_matplotlib, save_png, font_description
    setup_matplotlib()                 # 选好中文字体，返回字体名
    print(font_description())          # 例如："中文字体：Noto Sans CJK SC（PyPI 包 noto-cjk-sans-otc，…/NotoSansCJK-Regular.ttc）"
    fig, ax = plt.subplots(figsize=SLIDE)   # 16:9 的一页幻灯片，13.33 × 7.5 英寸；字号 ≥ 16 pt
    ...
    save_png(fig, "figures/xxx.png")   # 200 dpi 的 PNG + 同名 SVG，不写时间戳和 Software，同样的输入 → 同样的字节

中文字体从哪来：requirements.txt 里的 PyPI 包 noto-cjk-sans-otc（Google 的 Noto Sans CJK，
SIL Open Font License 1.1，wheel 约 15 MB、装好约 19 MB）。它是一个 .ttc 字体集，里面有
SC（简体）、TC、HK、JP、KR 五种字形（各有等宽版），只有常规粗细（没有粗体）；matplotlib ≥ 3.11
能分别注册这几个字形，这里用 SC，等宽字体用 Noto Sans Mono CJK SC。
没装这个包时，退而使用系统里已有的中文字体（CJK_CANDIDATES 的顺序）；一个都没有时在 stderr
说清楚，并返回 None（调用者可以改用英文标签，见 06 脚本）。
"""
import os
import sys
import warnings

import matplotlib

matplotlib.use("Agg")  # 无界面：在服务器、CI、没有显示器的笔记本上都能画
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib import font_manager  # noqa: E402
from matplotlib.text import Text  # noqa: E402

CJK_CANDIDATES = ("Noto Sans CJK SC", "Noto Sans SC", "Source Han Sans SC", "WenQuanYi Zen Hei",
                  "WenQuanYi Micro Hei", "SimHei", "Microsoft YaHei", "PingFang SC", "Heiti SC",
                  "Arial Unicode MS",
                  "Noto Sans CJK JP")   # 老版本 matplotlib 只注册 .ttc 的第一个字形（JP）：也有全部简体字
BUNDLED_PACKAGE = "noto-cjk-sans-otc"   # requirements.txt 里的字体包（PyPI 名字）
DPI = 200          # 8 英寸宽 × 200 dpi = 1600 像素：投影仪上够清楚
MIN_WIDTH_PX = 1600
SLIDE = (13.33, 7.5)   # 16:9 幻灯片一页的大小（英寸）：图就画成这么大，铺满一页时字号就是这里写的字号
FONT_SIZE = 16     # 默认字号
MIN_FONT_PT = 16   # 图铺满一页 13.33 英寸宽的幻灯片时，任何文字都不小于 16 pt（save_png 把更小的放大到这个字号）
OTHER_MIN_PT = 12  # 还没画成一页幻灯片（SLIDE）大小的图：任何文字不小于 12 pt（放大到 16 pt 会挤坏它们的版面）
GLYPH_WARNING = r"Glyph \d+ .*missing from"   # matplotlib 缺字时的警告（测试和 make all 把它变成错误）

_font = None       # 选中的字体名
_font_path = None  # 它的文件
_font_source = None


def _bundled_font_path():
    """requirements.txt 装的 Noto Sans CJK 字体集的路径；没装时返回 None。"""
    try:
        import noto_cjk_sans_otc
    except ImportError:
        return None
    path = str(noto_cjk_sans_otc.FONT_PATH)
    return path if os.path.exists(path) else None


def _pick_font():
    global _font, _font_path, _font_source
    bundled = _bundled_font_path()
    if bundled:
        font_manager.fontManager.addfont(bundled)     # 注册 .ttc 里的各个字形（≥ 3.11：SC、TC、JP…）
    by_name = {}
    for f in font_manager.fontManager.ttflist:
        by_name.setdefault(f.name, f.fname)
    _font = next((n for n in CJK_CANDIDATES if n in by_name), None)
    if _font is None:
        print(f"plotting.py：没有找到中文字体，图里的中文会是方框。请 pip install {BUNDLED_PACKAGE}"
              "（见 requirements.txt）或安装系统的 Noto Sans CJK 字体。", file=sys.stderr)
        return
    _font_path = by_name[_font]
    _font_source = (f"PyPI 包 {BUNDLED_PACKAGE}" if bundled and os.path.samefile(_font_path, bundled)
                    else "系统字体")


def setup_matplotlib():
    """选一个能显示中文的字体并设为默认，设好字号；返回字体名（找不到时返回 None）。"""
    if _font is None:
        _pick_font()
    plt.rcParams.update({
        "font.size": FONT_SIZE, "axes.titlesize": FONT_SIZE + 2, "axes.labelsize": FONT_SIZE,
        "xtick.labelsize": FONT_SIZE, "ytick.labelsize": FONT_SIZE, "legend.fontsize": FONT_SIZE,
        "figure.titlesize": FONT_SIZE + 4, "axes.unicode_minus": False,
        "svg.hashsalt": "cs349e", "svg.fonttype": "path", "figure.dpi": 100, "savefig.dpi": DPI,
        "mathtext.fontset": "dejavusans",
    })
    if _font:
        # 中文字体在前；它缺的个别符号由 DejaVu Sans 补（matplotlib 的逐字回退）
        plt.rcParams["font.sans-serif"] = [_font, "DejaVu Sans"]
        plt.rcParams["font.family"] = "sans-serif"
        mono = _font.replace("Sans CJK", "Sans Mono CJK")       # 等宽的中文字形（字体集里有就用）
        if mono != _font and any(f.name == mono for f in font_manager.fontManager.ttflist):
            plt.rcParams["font.monospace"] = [mono, "DejaVu Sans Mono"]
        else:
            plt.rcParams["font.monospace"] = ["DejaVu Sans Mono", _font]
    return _font


def font_description(with_path=True):
    """一句话说明用的是哪个字体、从哪来（make all 会打印它）。"""
    setup_matplotlib()
    if _font is None:
        return f"中文字体：没有找到（请 pip install {BUNDLED_PACKAGE}），中文会显示成方框"
    return f"中文字体：{_font}（{_font_source}" + (f"，{_font_path}）" if with_path else "）")


def glyph_warnings_as_errors():
    """让"Glyph … missing"警告变成异常：缺字的图不会悄悄生成。"""
    warnings.filterwarnings("error", message=GLYPH_WARNING)


def is_slide(fig):
    """图是不是一页 16:9 幻灯片（SLIDE）的大小。"""
    return all(abs(a - b) < 0.01 for a, b in zip(fig.get_size_inches(), SLIDE))


def min_font_pt(fig):
    """这张图里的文字至少要多大：SLIDE 大小的图是 MIN_FONT_PT（铺满幻灯片时就是这么大）；别的图 OTHER_MIN_PT。"""
    if is_slide(fig):
        return MIN_FONT_PT
    return OTHER_MIN_PT


def save_png(fig, path):
    """写 PNG 和旁边同名的 SVG（矢量，幻灯片上放大不糊），去掉 Software / 日期这些元数据：
    同样的图两次写出的字节相同（SVG 里的 id 由 svg.hashsalt 定）。返回 PNG 的路径。

    图宽不足 1600 像素（8 英寸 × 200 dpi）时报错：投影到幻灯片上会糊。
    SLIDE 大小的图里小于 16 pt 的文字（比如某个 legend(fontsize=10)）放大到 16 pt；别的图放大到 12 pt。
    """
    width = fig.get_figwidth() * DPI
    if width < MIN_WIDTH_PX:
        plt.close(fig)
        raise ValueError(f"{path}：图宽 {width:.0f} 像素 < {MIN_WIDTH_PX}；figsize 的宽至少 "
                         f"{MIN_WIDTH_PX / DPI:g} 英寸")
    fig.draw_without_rendering()                 # 先排一次版，刻度标签这些文字才存在
    least = min_font_pt(fig)
    for t in fig.findobj(Text):
        if t.get_fontsize() < least - 1e-9:
            t.set_fontsize(least)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=DPI, metadata={"Software": None}, bbox_inches=None)
    fig.savefig(os.path.splitext(path)[0] + ".svg", format="svg", metadata={"Date": None}, bbox_inches=None)
    plt.close(fig)
    return path


if __name__ == "__main__":      # python lab_common/plotting.py：看看用的是哪个字体
    print(font_description())
