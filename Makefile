# CS349E 第 7 讲：常用命令
#   make demo    建 .venv（第一次）并运行 lecture07/04_prefix_caching.py
#   make test    跑测试（第一次先装 pytest 等；KERNEL=1 再装 CPU 版 torch 和 triton，跑 Triton 解释器下的 kernel 校验）
#   make check   检查 exercises/ 里的练习（EX=3 只查练习 3）
#   make all     重新生成 figures/ 里的图（增量）
#   make golden  重新生成 tests/golden/ 里每个脚本的标准输出（改了句子以后；再看 git diff）
#   make bench   和固定的旧版本（BASE）并排计时，印出比值
# 要求：Python 3.10–3.13 和 pip。换 Python：make demo PY=python3.12（.venv 是别的版本建的就删掉重建）。
PY ?= python3
VENV ?= .venv
VPY := $(VENV)/bin/python
PIP := $(VPY) -m pip install -q --disable-pip-version-check
KERNEL ?= 0
JOBS ?= 2
BASE ?= eeff79c

.PHONY: demo test check all golden bench clean

# 给了 PY、而 .venv 是别的 Python 版本建的：删掉重建
ifneq ($(filter command line environment,$(origin PY)),)
ifneq ($(shell $(VPY) -c "import sys; print(sys.version_info[:2])" 2>/dev/null),$(shell $(PY) -c "import sys; print(sys.version_info[:2])" 2>/dev/null))
$(shell rm -rf $(VENV))
endif
endif

$(VENV)/.demo: requirements.txt
	@$(PY) -c "import sys; sys.exit(sys.version_info < (3, 10))" || { echo "make: 要 Python 3.10–3.13，$(PY) 不是；换一个：make demo PY=python3.12" >&2; exit 2; }
	@echo "建 $(VENV)，装 numpy、matplotlib 和中文字体（约 200 MB，约 1 分钟）"
	@$(PY) -m venv $(VENV)
	@$(PIP) -r requirements.txt
	@touch $@

$(VENV)/.dev: requirements-dev.txt $(VENV)/.demo
	@echo "装测试工具 pytest、pytest-xdist、hypothesis、libCacheSim（约 90 MB，约 20 秒）"
	@$(PIP) -r requirements-dev.txt
	@touch $@

$(VENV)/.kernel: requirements-triton.txt $(VENV)/.dev
	@echo "装 CPU 版 torch 2.13.0 和 triton 3.6.0（kernel 测试用，约 1.5 GB，约 1.5 分钟）"
	@$(PIP) -r requirements-triton.txt
	@touch $@

ifeq ($(KERNEL),1)
TEST_ENV := $(VENV)/.kernel
else
TEST_ENV := $(VENV)/.dev
endif

demo: $(VENV)/.demo
	$(VPY) lecture07/04_prefix_caching.py

test: $(TEST_ENV)
	$(VPY) -m pytest -q -n $(JOBS) --dist worksteal tests

check: $(VENV)/.demo
	$(VPY) exercises/check.py $(EX)

golden: $(VENV)/.dev
	$(VPY) tests/golden.py

bench: $(VENV)/.dev
	$(VPY) tests/bench.py $(BASE)

# ---- 图：每个 figures/plot_NN.py 画一组图（PNG + 同名 SVG，02、03、04b 另有 GIF）；改了它用到的代码才重画 ----
LAB := lab_common/show.py lab_common/plotting.py figures/figlib.py $(VENV)/.demo
PAGED := lecture07/paged_kv.py lab_common/transformer_lab.py figures/frames.py
STORE := $(wildcard lecture07/kv_store/*.py)
figures/.01: figures/plot_01.py lecture07/01_kv_cache_memory.py lecture07/allocation.py $(STORE) $(PAGED) $(LAB)
figures/.02: figures/plot_02.py lecture07/02_paged_attention.py $(PAGED) $(LAB)
figures/.03: figures/plot_03.py lecture07/03_sharing_and_cow.py $(PAGED) $(LAB)
figures/.04: figures/plot_04.py lecture07/04_prefix_caching.py $(STORE) $(PAGED) $(LAB)
figures/.04b: figures/plot_04b.py lecture07/04b_radix_cache.py figures/frames.py $(STORE) $(LAB)
figures/.05: figures/plot_05.py lecture07/05_kv_store.py $(STORE) $(LAB)
figures/.06: figures/plot_06.py $(wildcard lecture07/gpu/*.py) $(wildcard figures/data/*.json) $(LAB)
figures/.%:
	$(VPY) figures/plot_$*.py
	@touch $@

all: figures/.01 figures/.02 figures/.03 figures/.04 figures/.04b figures/.05 figures/.06

clean:
	rm -f figures/.0* figures/*.png figures/*.svg figures/*.gif
