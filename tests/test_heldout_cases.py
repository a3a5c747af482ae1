"""学生会碰到的边角（改设置、改策略类、怪 trace、满了的盘）：每个一个手做的小例子，断言走了哪条路、用了哪些值。
措辞由 tests/golden/ 守住，这里不逐字比句子。"""
import errno
import io
import os
import threading
from contextlib import redirect_stdout

from conftest import load_script
from lab_common import endings
from lab_common.say import fixed

s01 = load_script("01_kv_cache_memory")
s02 = load_script("02_paged_attention")
s04 = load_script("04_prefix_caching")
s4b = load_script("04b_radix_cache")
s05 = load_script("05_kv_store")


def quiet(fn, *args):
    with redirect_stdout(io.StringIO()) as out:
        fn(*args)
    return out.getvalue()


# ---------------------------------------------------------------- 02 演示 3：块和连续存放读的段一样多
def _reads_data(ref_segments):
    stats = {k: {b: dict(waste=1.0, waste_frac=f) for b in (1, 16)} for k, f in (("ShareGPT", 0.01), ("Alpaca", 0.05))}
    return dict(stats=stats, reads={1: dict(segments=20_480, segment_bytes=256), 16: dict(segments=ref_segments, segment_bytes=4096)},
                contiguous=dict(segments=1_280), block_sizes=(1, 16), paper=dict(default_block=16),
                mean_len={"ShareGPT": 500, "Alpaca": 80})


def test_02_reads_tie_with_contiguous_is_not_called_fewer():
    tie = s02.observations_3(_reads_data(1_280))[0][1]
    more = s02.observations_3(_reads_data(2_560))[0][1]
    assert "20,480" in tie and "只要" not in tie and "一样" in tie      # 块 16 和连续存放都是 1,280 段
    assert "只要 1,280" in more and "2,560" in more


# ---------------------------------------------------------------- 05 演示 3：并列看 TTFT 和 ×全局 两列
def _sched(means):
    names = dict(random="随机", load_balancing="负载均衡", local_cache="本地缓存感知", global_cache="全局缓存感知")
    res = {s: dict(mean=v, hit=0.4, util=0.7, pulled_share=0.1, pulled=5) for s, v in zip(names, means)}
    paper = dict(random=19.65, load_balancing=5.27, local_cache=3.58, global_cache=3.07)
    return dict(results=res, names=names, paper=paper, seconds=fixed(2), nodes=8, burst=False)


def test_05_ties_need_both_columns_to_print_the_same():
    text = s05.observations_3(_sched([2.35, 0.514, 0.5149, 0.5101]))[0][0]   # TTFT 都印 0.51，×全局 1.01× / 1.01× / 1.00×
    assert "负载均衡 = 本地缓存感知 > 全局缓存感知" in text and "低 1%" in text
    text = s05.observations_3(_sched([2.35, 0.51, 0.5101, 0.5101]))[0][0]    # 两列都一样：并列
    assert "负载均衡 = 本地缓存感知 = 全局缓存感知" in text and "0.51 s" in text
    assert s05.tied_rank([("a", 1.0), ("b", 3.0), ("c", 2.999)], lambda x, y: abs(x - y) < 0.01) == "b = c > a"


def test_05_pd_hit_zero_gives_no_last_token_reason(monkeypatch):
    monkeypatch.setattr(s05, "PD_HIT", 0.0)
    out = quiet(s05.demo4_pd_transfer).replace("\n     ", "")
    assert "总要算" not in out.split("观察")[-1] and "0% 时" in out


# ---------------------------------------------------------------- 04b：自己的叶子、修剪的说明、请求是不是 04 的那一批
def test_04b_own_leaf_evicted_in_the_same_insert_is_named(monkeypatch):
    monkeypatch.setattr(s4b, "STEP_CAPACITY", 1)
    d = s4b.run_steps("sglang")
    assert [x["evicted"] for x in d["steps"]][0] == ["请求 A 刚插入的 13 个 token"] and d["steps"][0]["size"] == 0
    line = s4b.observations_4(dict(d, alt_steps=s4b.run_steps("trim")["steps"]))[0][0]
    assert "「」" not in line and "13" in line


def test_04b_trim_equals_lru_only_while_every_capacity_matches():
    assert s4b.trim_why(dict(same={None: True, 10: True})) == s4b.TRIM_WHY
    assert s4b.trim_why(dict(same={None: True, 10: False})) != s4b.TRIM_WHY


def test_04b_requests_are_04s_only_with_04s_settings(monkeypatch):
    assert "04 演示 2" in quiet(s4b.demo1_tree).splitlines()[2]
    monkeypatch.setattr(s4b, "N_SHARING", 1)
    assert "04 演示 2" not in quiet(s4b.demo1_tree).splitlines()[2]


# ---------------------------------------------------------------- 04：前缀的出处、FIFO 的 trace、命中率不到 1
def test_04_few_shot_source_holds_only_the_papers_prefixes():
    assert s04.FEW_SHOT_SOURCE.holds(s04.FEW_SHOT) and not s04.FEW_SHOT_SOURCE.holds((("tiny", 1),))


def test_04_known_file_does_not_reopen_a_fifo(tmp_path):
    fifo = tmp_path / "t.jsonl"
    os.mkfifo(fifo)
    got = []
    t = threading.Thread(target=lambda: got.append(s04.known_file(str(fifo))), daemon=True)
    t.start()
    t.join(5)
    assert got == [None]                 # 没有写的一方：再打开就会一直等


def test_04_hit_ratio_below_one_is_not_printed_as_one():
    assert s04.f2(0.9983) == "0.998" and s04.f2(1.0) == "1.00" and s4b.f2(0.9983) == "0.998"


# ---------------------------------------------------------------- 01 演示 1：观察点名的模型都在表里
def test_01_models_named_by_the_observations_are_listed():
    assert s01.extra_rows_note([]) == ""
    note = s01.extra_rows_note([s01.OPT_13B, s01.LLAMA2_70B])
    assert "OPT-13B" in note and "LLaMA2-70B" in note


def test_01_one_model_table_still_has_the_named_rows(monkeypatch):
    monkeypatch.setattr(s01, "MODELS", (s01.LLAMA2_7B,))
    table = quiet(s01.demo1_bytes_per_token).split("观察")[0]
    assert all(name in table for name in ("LLaMA2-7B", "OPT-13B", "LLaMA2-70B"))        # 演示 1 的观察点名的两个也列出
    assert "LLaMA2-13B" not in table                                                     # 观察不提它：不硬塞进表


# ---------------------------------------------------------------- 满了的盘：标准输出没有文件名
def test_full_disk_on_stdout_names_the_output_not_a_directory():
    line = endings._unwritable(OSError(errno.ENOSPC, "No space left on device"))
    assert "目录" not in line and "输出" in line
    assert "目录" in endings._unwritable(OSError(errno.EROFS, "ro", "/x/y.png")) and "/x/y.png" in endings._unwritable(
        OSError(errno.EROFS, "ro", "/x/y.png"))
