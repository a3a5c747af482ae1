# CS349E 第 7 讲：常用命令
#   make demo      —— 建好环境（若没有）并运行 04_prefix_caching.py
#   make test      —— 建好环境（若没有）并跑全部测试（2 核约 45 秒；Linux x86_64 上含 Triton 解释器下的 kernel 校验）
#   make test-all  —— 同上，再加完整的改设置矩阵（每条改动都既改属性、又改源码、又在新解释器里跑；几分钟）
#   make bench     —— 测每个脚本的耗时（中位数 / 5 次）、大 trace 的内存和每个脚本的篇幅，对照预算
#   make check     —— 检查 exercises/ 里的练习（EX=3 只查练习 3）
#   make all       —— 重新生成 figures/ 里的图（增量；要 GNU make ≥ 4.3）
#   make clean     —— 只删除生成的图
# 要求：Python ≥ 3.10 和 pip（环境装在 .venv/ 里约 0.4 GB，加 torch、triton 约 1.8 GB；第一次安装几分钟，没有进度输出）。
PY ?= python3
VENV := .venv
ifeq ($(OS),Windows_NT)
VPY := $(VENV)/Scripts/python
else
VPY := $(VENV)/bin/python
endif
STAMP := $(VENV)/.installed-cpu
TRITON_STAMP := $(VENV)/.installed-triton
JOBS ?= 2          # make test 用几个 pytest 进程（-n）；核多的机器上可以 make test JOBS=4
PIP := $(VPY) -m pip install -q --disable-pip-version-check

# kernel 校验（Triton 解释器，CPU 上跑）要 torch + triton。triton 3.6.0 只有 Linux 的 wheel；torch 2.13.0 在
# 别的机器上可能拉来几个 GB 的 CUDA 版。KERNEL=auto（默认）：只在 Linux x86_64 上装；KERNEL=0：不装；
# KERNEL=1：一定装。没装时 kernel 测试跳过，pytest 末尾的 SKIPPED 行写明原因。
KERNEL ?= auto
ifeq ($(KERNEL),auto)
KERNEL := $(shell $(PY) -c "import platform, sys; print(int(sys.platform.startswith('linux') and platform.machine() == 'x86_64'))" 2>/dev/null)
endif
ifeq ($(KERNEL),1)
TEST_ENV := $(STAMP) $(TRITON_STAMP)
else
TEST_ENV := $(STAMP)
endif

.PHONY: venv demo test test-all bench all clean

$(STAMP): requirements.txt requirements-dev.txt
	test -x $(VPY) || $(PY) -m venv $(VENV)
	$(PIP) -r requirements-dev.txt
	touch $@

# torch（CPU 版）和 triton 只有 kernel 测试才需要：CPU 演示本身不装它们
$(TRITON_STAMP): $(STAMP) requirements-triton.txt
	$(PIP) -r requirements-triton.txt
	touch $@

venv: $(STAMP)

demo: $(STAMP)
	cd lecture07 && ../$(VPY) 04_prefix_caching.py

# make test 不改写 assert（--assert=plain）：两个 pytest 进程各省约 1.5 s 的收集（改写要把每个测试文件重新编译一遍，
# PYTHONDONTWRITEBYTECODE=1 时每次都要）。检查一条不少；只是失败时看不到 assert 两边的值——用 make test ASSERT=rewrite，
# 或 .venv/bin/python -m pytest 文件::测试名 单独重跑那一个（pytest 默认改写）。
ASSERT ?= plain
test: $(TEST_ENV)
	$(VPY) -m pytest -q -n $(strip $(JOBS)) --dist loadgroup --assert=$(ASSERT) tests

test-all: $(TEST_ENV)
	LAB_TEST_ALL=1 $(VPY) -m pytest -q -n $(strip $(JOBS)) --dist loadgroup tests

bench: $(STAMP)
	@rc=0; $(VPY) tests/bench_speed.py || rc=1; $(VPY) tests/budget_lines.py || rc=1; exit $$rc

# 练习：make check 检查 exercises/ 里的全部练习，make check EX=3 只查练习 3（不需要 torch、triton）
.PHONY: check
check: $(STAMP)
	$(VPY) exercises/check.py $(EX)

# ---- 图：make all / make clean ----
# 每个 figures/plot_XX.py 一次生成几张图（&: 是 make ≥ 4.3 的"一条命令出几个文件"）：每张 PNG 旁边一个同名 SVG
# （矢量，放进幻灯片），02、03 另有一步一帧的 GIF（块表怎样长出来、一次写时复制）。依赖写全：
# 画图脚本、它加载的 lecture07 脚本和共用模块；改了哪个，只重画用到它的图，什么都没改时不做任何事。
LAB := lab_common/say.py lab_common/console.py lab_common/frames.py lab_common/settings.py lab_common/plotting.py lab_common/script_tools.py figures/figlib.py $(STAMP)
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
F04B := figures/04b_radix_tree.png \
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
$(F06) &: figures/plot_06.py lecture07/06_triton_cow_clone.py lecture07/gpu/clone_kernel.py lecture07/gpu/clone_bench.py figures/data/triton_cow_clone_h200.json $(LAB)
	$(VPY) figures/plot_06.py

all: $(FIGS)

# 只删生成的图（PNG、SVG、GIF）；figures/data/*.json 是 H200 上的实测结果，CPU 上重新生成不了，不删
clean:
	rm -f $(FIGS)
