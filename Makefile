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
