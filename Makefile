# CS349E 第 7 讲：常用命令
#   make demo   —— 建好环境（若没有）并运行 04_prefix_caching.py
#   make test   —— 建好环境（若没有）并跑全部测试（含 Triton 解释器下的 kernel 校验）
#   make bench  —— 测每个脚本的耗时（中位数 / 5 次）并对照预算
#   make all    —— 重新生成 figures/ 里的图（增量）
#   make clean  —— 只删除生成的图
PY ?= python3
VENV := .venv
VPY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-cpu
TRITON_STAMP := $(VENV)/.installed-triton

.PHONY: venv demo test bench all clean

$(STAMP): requirements.txt requirements-dev.txt
	test -x $(VPY) || $(PY) -m venv $(VENV)
	$(VPY) -m pip install -q --disable-pip-version-check -r requirements-dev.txt
	touch $@

# torch（CPU 版）和 triton 只有测试 GPU 脚本时才需要：CPU 演示本身不装它们
$(TRITON_STAMP): $(STAMP) requirements-triton.txt
	$(VPY) -m pip install -q --disable-pip-version-check -r requirements-triton.txt
	touch $@

venv: $(STAMP)

demo: $(STAMP)
	cd lecture07 && ../$(VPY) 04_prefix_caching.py

test: $(STAMP) $(TRITON_STAMP)
	$(VPY) -m pytest -q tests

bench: $(STAMP)
	$(VPY) tests/bench_speed.py

# ---- 图：make all / make clean ----
# 每个 figures/plot_XX.py 一次生成几张 PNG。它生成哪些图（FIGURES）、依赖哪些文件（它逐层 import 的
# figures/、lecture07/、lab_common/ 模块，加上 DATA_FILES），由 figures/figdeps.py 从源码里读出来，
# 写成一条分组规则（make ≥ 4.3 的 &:）：改了哪个脚本或模块，只重画用到它的图；什么都没改时不做任何事。
FIG_PY := $(firstword $(wildcard $(VPY)) $(PY))
define FIG_NL


endef
$(eval $(subst @NL@,$(FIG_NL),$(shell $(FIG_PY) figures/figdeps.py --make)))

all: $(FIGS)

# 只删生成的 PNG；figures/data/*.json 是 H200 上的实测结果，CPU 上重新生成不了，不删
clean:
	rm -f $(FIGS)
