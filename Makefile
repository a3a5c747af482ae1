# CS349E 第 7 讲：常用命令
#   make demo      —— 建好环境（若没有）并运行 04_prefix_caching.py
#   make test      —— 建好环境（若没有）并跑全部测试（空闲的 2 核上约 2.5 分钟；pip 装得上 torch、triton 时含 Triton 解释器下的 kernel 校验）
#   make test-all  —— 同上，再加完整的改设置矩阵（每条改动都既改属性、又改源码、又在新解释器里跑；几分钟）
#   make bench     —— 测每个脚本的耗时（中位数 / 5 次）、大 trace 的内存和每个脚本的篇幅，对照预算
#   make check     —— 检查 exercises/ 里的练习（EX=3 只查练习 3）
#   make all       —— 重新生成 figures/ 里的图（增量；要 GNU make ≥ 4.3）
#   make golden    —— 重新生成 tests/golden/ 里每个脚本的标准输出（改了句子以后；再看 git diff）
#   make clean     —— 只删除生成的图
# 要求：Python 3.10–3.13 和 pip。make demo PY=python3.12 选 Python（.venv 已由别的版本建好时重建它）。
# 每一步安装之前印一行：装什么、多大、多久（3.11 上实测见 README 的"准备"）；pip 本身不出声（-q）。
PY ?= python3
VENV ?= .venv
ifeq ($(OS),Windows_NT)
VPY := $(VENV)/Scripts/python
else
VPY := $(VENV)/bin/python
endif
DEMO_STAMP := $(VENV)/.installed-demo
DEV_STAMP := $(VENV)/.installed-dev
KERNEL_STAMP := $(VENV)/.installed-kernel
KERNEL_NOTE := $(VENV)/.kernel-note
JOBS ?= 2          # make test 用几个 pytest 进程（-n）；核多的机器上可以 make test JOBS=4
PIP := $(VPY) -m pip install -q --disable-pip-version-check
PYVER := import sys; print('%d.%d' % sys.version_info[:2])

# 命令行上给了 PY：它要能运行、不低于 3.10；.venv 是别的版本建的就删掉重建（只删 .venv，别的不动）
ifneq ($(filter command line environment,$(origin PY)),)
WANT_VER := $(shell $(PY) -c "$(PYVER)" 2>/dev/null)
ifeq ($(WANT_VER),)
$(error 运行不了 $(PY)：先确认它在 PATH 上（pyenv 装的要先 pyenv global 或 pyenv shell 启用它，见 README 的"出了问题"）)
endif
ifeq ($(filter 3.10 3.11 3.12 3.13 3.14 3.15 3.16,$(WANT_VER)),)
$(error $(PY) 是 Python $(WANT_VER)，这里要 3.10–3.13)
endif
HAVE_VER := $(shell $(VPY) -c "$(PYVER)" 2>/dev/null)
ifneq ($(HAVE_VER),)
ifneq ($(HAVE_VER),$(WANT_VER))
$(info $(VENV) 是 Python $(HAVE_VER) 建的，PY=$(PY) 是 $(WANT_VER)：删掉 $(VENV)，用 $(PY) 重建)
$(shell rm -rf $(VENV))
endif
endif
endif

# kernel 校验（Triton 解释器，CPU 上跑）要 torch 2.13.0 + triton 3.6.0，只有 make test 用；演示和练习不要。
#   KERNEL=auto（默认）：先让 pip 试着解析（--dry-run）；解析不了（这个 Python / 平台没有配套的 wheel），或者只能拉来
#     几个 GB 的 CUDA 版 torch，就不装，印一行原因和装法，其余测试照跑，kernel 测试跳过（结论记在 $(KERNEL_NOTE)）。
#   KERNEL=1：一定装，装不上就失败（CI 用）；KERNEL=0：不装。
KERNEL ?= auto
CPU_TORCH := $(VPY) -m pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu，再 $(VPY) -m pip install triton==3.6.0（只有 Linux 的 wheel），然后 make test
ifeq ($(KERNEL),1)
TEST_ENV := $(KERNEL_STAMP)
else ifeq ($(KERNEL),auto)
TEST_ENV := $(KERNEL_NOTE)
else
TEST_ENV := $(DEV_STAMP)
endif

.PHONY: venv demo test test-all bench all clean

# 目标是 pyvenv.cfg（每个平台的 venv 都有；Windows 上的 python 叫 python.exe）
$(VENV)/pyvenv.cfg:
	@$(PY) -c "import sys; sys.exit(sys.version_info < (3, 10))" 2>/dev/null || { echo "make: 要 Python ≥ 3.10，$(PY) 不是或运行不了；换一个：make demo PY=python3.12" >&2; exit 2; }
	@echo "建 $(VENV)（Python $$($(PY) -c "$(PYVER)")，约 25 MB，约 10 秒）"
	@$(PY) -m venv $(VENV)

# 演示要的：numpy、rich、matplotlib 和中文字体
$(DEMO_STAMP): requirements.txt | $(VENV)/pyvenv.cfg
	@echo "装演示的依赖 numpy、rich、matplotlib 和中文字体（约 200 MB，约半分钟到 1 分钟）"
	@$(PIP) -r requirements.txt
	@touch $@

# 测试要的：pytest、pytest-xdist、hypothesis、libCacheSim
$(DEV_STAMP): requirements-dev.txt $(DEMO_STAMP)
	@echo "装测试工具 pytest、pytest-xdist、hypothesis、libCacheSim（约 90 MB，约 20 秒）"
	@$(PIP) -r requirements-dev.txt
	@touch $@

KERNEL_INSTALL_LINE := 装 kernel 测试用的 torch 2.13.0（CPU 版）和 triton 3.6.0（约 1.5 GB，约 1.5 分钟）
$(KERNEL_STAMP): requirements-triton.txt $(DEV_STAMP)
	@echo "$(KERNEL_INSTALL_LINE)"
	@$(PIP) -r requirements-triton.txt
	@touch $@

# KERNEL=auto 的判断（见上）。已经装好（比如照 README 手动装了 CPU 版）就直接用。
$(KERNEL_NOTE): requirements-triton.txt $(DEV_STAMP)
	@rm -f $@ $(VENV)/.kernel-report.json; \
	if $(VPY) -c "import torch, triton" 2>/dev/null; then touch $(KERNEL_STAMP) $@; exit 0; fi; \
	why=""; \
	if ! $(VPY) -c "import sys; sys.exit(not sys.platform.startswith('linux'))"; then \
	    why="triton 只有 Linux 的 wheel"; \
	else \
	    echo "问 pip 能不能装 torch 2.13.0 和 triton 3.6.0（kernel 测试用；只解析、不下载，约 5–30 秒）"; \
	    if ! $(PIP) --dry-run --report $(VENV)/.kernel-report.json -r requirements-triton.txt >/dev/null 2>&1; then \
	        why="pip 在这个 Python 上解析不出配套的 wheel"; \
	    elif ! $(VPY) -c "import json, sys; r = json.load(open(sys.argv[1])); sys.exit(any(i['metadata']['name'].lower().startswith('nvidia-') for i in r['install']))" $(VENV)/.kernel-report.json; then \
	        why="pip 只找得到 CUDA 版 torch，要多下几个 GB"; \
	    else \
	        echo "$(KERNEL_INSTALL_LINE)"; \
	        if $(PIP) -r requirements-triton.txt; then touch $(KERNEL_STAMP) $@; exit 0; fi; \
	        why="pip 安装失败（见上面的报错）"; \
	    fi; \
	fi; \
	echo "kernel 测试跳过：$$why。要跑它们：$(CPU_TORCH)" > $@

venv: $(DEMO_STAMP)

demo: $(DEMO_STAMP)
	$(VPY) lecture07/04_prefix_caching.py

test: $(TEST_ENV)
	@if [ -s $(KERNEL_NOTE) ] && ! $(VPY) -c "import torch, triton" 2>/dev/null; then cat $(KERNEL_NOTE); fi
	$(VPY) -m pytest -q -n $(strip $(JOBS)) --dist loadfile tests

test-all: $(TEST_ENV)
	LAB_TEST_ALL=1 $(VPY) -m pytest -q -n $(strip $(JOBS)) --dist loadfile tests

bench: $(DEV_STAMP)
	@rc=0; $(VPY) tests/bench_speed.py || rc=1; $(VPY) tests/budget_lines.py || rc=1; exit $$rc

# 每个脚本默认和 --more 的标准输出（tests/golden/，tests/test_golden.py 逐字比较）：改了句子以后 make golden，再看 git diff
.PHONY: golden
golden: $(TEST_ENV)
	$(VPY) tests/golden.py

# 练习：make check 检查 exercises/ 里的全部练习，make check EX=3 只查练习 3（不需要 torch、triton）
.PHONY: check
check: $(DEMO_STAMP)
	$(VPY) exercises/check.py $(EX)

# ---- 图：make all / make clean ----
# 每个 figures/plot_XX.py 一次生成几张图（&: 是 make ≥ 4.3 的"一条命令出几个文件"）：每张 PNG 旁边一个同名 SVG
# （矢量，放进幻灯片），02、03 另有一步一帧的 GIF（块表怎样长出来、一次写时复制）。依赖写全：
# 画图脚本、它加载的 lecture07 脚本和共用模块；改了哪个，只重画用到它的图，什么都没改时不做任何事。
LAB := lab_common/say.py lab_common/console.py lab_common/frames.py lab_common/settings.py lab_common/plotting.py lab_common/script_tools.py figures/figlib.py $(DEMO_STAMP)
PAGED := lecture07/paged_kv.py lecture07/pool_pictures.py lab_common/transformer_lab.py lab_common/settings.py
# 04、05 用到的 lecture07 共用模块：kv_store/ 整个包（前缀匹配、淘汰策略、回放、层级、trace、集群）
STORE := $(wildcard lecture07/kv_store/*.py) $(PAGED)

F01 := figures/01_kv_memory_breakdown.png figures/01_kv_per_token.png figures/01_recompute_vs_swap.png \
       figures/01_kv_memory_breakdown.svg figures/01_kv_per_token.svg figures/01_recompute_vs_swap.svg
F02 := figures/02_block_table.png figures/02_block_table_steps.gif \
       figures/02_block_table.svg
F03 := figures/03_blocks_over_steps.png figures/03_cow_steps.gif \
       figures/03_blocks_over_steps.svg
F04 := figures/04_block_popularity.png figures/04_hit_ratio.png figures/04_prefill_time.png \
       figures/04_block_popularity.svg figures/04_hit_ratio.svg figures/04_prefill_time.svg
F04B := figures/04b_radix_tree.png figures/04b_radix_steps.gif \
       figures/04b_radix_tree.svg
F05 := figures/05_load_vs_recompute.png figures/05_hot_nic.png figures/05_ttft_by_scheduler.png figures/05_pd_transfer.png \
       figures/05_load_vs_recompute.svg figures/05_hot_nic.svg figures/05_ttft_by_scheduler.svg figures/05_pd_transfer.svg
F06 := figures/06_triton_cow_clone.png figures/06_triton_cow_clone_detail.png \
       figures/06_triton_cow_clone.svg figures/06_triton_cow_clone_detail.svg
FIGS := $(F01) $(F02) $(F03) $(F04) $(F04B) $(F05) $(F06)

# &:（一条命令生成几张图）要 GNU make ≥ 4.3。更老的 make（macOS 自带 3.81）照样能 make test / make demo，
# 画图时在这里停下并说明
ifneq ($(filter all $(FIGS),$(MAKECMDGOALS)),)
ifeq ($(filter grouped-target,$(.FEATURES)),)
$(error 画图的规则要 GNU make ≥ 4.3，这里是 $(MAKE_VERSION)：macOS 上 brew install make，然后用 gmake all)
endif
endif

$(F01) &: figures/plot_01.py lecture07/01_kv_cache_memory.py lecture07/allocation.py $(STORE) $(LAB)
	$(VPY) figures/plot_01.py
$(F02) &: figures/plot_02.py lecture07/02_paged_attention.py $(STORE) $(LAB)
	$(VPY) figures/plot_02.py
$(F03) &: figures/plot_03.py lecture07/03_sharing_and_cow.py $(PAGED) $(LAB)
	$(VPY) figures/plot_03.py
$(F04) &: figures/plot_04.py lecture07/04_prefix_caching.py $(STORE) $(LAB)
	$(VPY) figures/plot_04.py
$(F04B) &: figures/plot_04b.py lecture07/04b_radix_cache.py lecture07/04_prefix_caching.py lecture07/kv_store/radix_tree.py $(STORE) $(LAB)
	$(VPY) figures/plot_04b.py
$(F05) &: figures/plot_05.py lecture07/05_kv_store.py lecture07/kv_store/cluster.py $(STORE) $(LAB)
	$(VPY) figures/plot_05.py
# 06 的图只从 H200 上实测的 JSON 画（CPU 上不能重新测）
$(F06) &: figures/plot_06.py lecture07/06_triton_cow_clone.py lecture07/gpu/saved_results.py figures/data/triton_cow_clone_h200.json $(LAB)
	$(VPY) figures/plot_06.py

all: $(FIGS)

# 只删生成的图（PNG、SVG、GIF）；figures/data/*.json 是 H200 上的实测结果，CPU 上重新生成不了，不删
clean:
	rm -f $(FIGS)
