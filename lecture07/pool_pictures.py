"""块池的逐步图：演示每走一步，给真正在用的 BlockPool 和 PagedSequence 拍一张快照，转成 lab_common.frames 的一帧。

    film = PoolFilm(pool)
    paged_step(params, cfg, [a], [prompt])
    film.snap("prefill a", {"a": a})           # 读 pool.ref_count、seq.blocks、seq.length：画的就是它们此刻的值
    b = a.fork()
    film.snap("b = a.fork()", {"a": a, "b": b})
    play(film.frames)                          # --step 时在终端上一步一屏；figures/plot_XX.py 把它写成 GIF

每帧几行（一列一个物理块）：
  物理块     块号；颜色 = 属于哪条序列（两条以上共用 = "共享"，灰 = 空闲）
  属于       哪条序列的第几个逻辑块（A1 = A 的逻辑块 1）
  已写       这一块写了几个 token 位置（最长的那个持有者算）
  ref_count  BlockPool.ref_count
  X 的块表   PagedSequence.blocks（逻辑块 0、1、2 … → 物理块号）
说明（帧下面一句）也由前后两张快照算出：谁拿到了新块、哪个块的 ref_count 变了、发生了几次写时复制。
"""
from lab_common.frames import Cell, Frame, Row

SHARED = "共享"      # 被两条以上序列共用的块的颜色组


class PoolFilm:
    def __init__(self, pool):
        self.pool = pool
        self.frames = []
        self._last = None          # 上一张快照：{"tables", "rc", "n_cow"}

    def snap(self, title, seqs, mark=()):
        """拍一张：seqs = {名字: PagedSequence 或 None（还不存在）}；mark = 想让全班盯住的物理块号。"""
        pool, bs = self.pool, self.pool.block_size
        owners, written = {}, {}                   # 物理块 → [(序列名, 逻辑块号)]、写了几个位置
        seqs = {n: s for n, s in seqs.items() if s is not None}      # 还没出现的序列（None）不画
        for name, s in seqs.items():
            for i, b in enumerate(s.blocks):
                owners.setdefault(b, []).append((name, i))
                written[b] = max(written.get(b, 0), min(bs, s.length - i * bs))
        group = {b: who[0][0] for b, who in owners.items()}
        for b, who in owners.items():
            if len(who) > 1:
                group[b] = SHARED
        blocks = range(pool.n_blocks)
        who = {b: "+".join(f"{n}{i}" for n, i in owners[b]) for b in owners}        # "A1"、"a0+b0"
        fill = {b: f"{w}/{bs}" for b, w in written.items()}                          # "2/4"
        rows = [Row("物理块", tuple(Cell(str(b), group.get(b), b in mark) for b in blocks)),
                Row("属于", tuple(Cell(who.get(b, "·"), group.get(b)) for b in blocks)),
                Row("已写", tuple(Cell(fill.get(b, "·"), group.get(b)) for b in blocks)),
                Row("ref_count", tuple(Cell(str(int(pool.ref_count[b])), group.get(b)) for b in blocks))]
        rows += [Row(f"{name} 的块表", tuple(Cell(str(b), group[b]) for b in s.blocks)) for name, s in seqs.items()]
        state = dict(tables={n: list(s.blocks) for n, s in seqs.items()}, rc=[int(x) for x in pool.ref_count],
                     n_cow=pool.n_cow)
        note = self._what_changed(state, mark, written)
        legend = ()
        if SHARED in group.values():
            legend = ((SHARED, "两条以上序列共用"),)
        self.frames.append(Frame(title, tuple(rows), note, legend))
        self._last = state

    def _what_changed(self, state, mark, written):
        """这一步和上一步的差别，一句话：写时复制（哪块拷到哪块）、新块、已在用的块的 ref_count 变化。"""
        bs, last, parts = self.pool.block_size, self._last, []
        if last is not None:
            copies = state["n_cow"] - last["n_cow"]
            for n, t in state["tables"].items():
                old = last["tables"].get(n)
                if old is None:
                    continue
                for x, y in [(x, y) for x, y in zip(old, t) if x != y]:
                    what = "换成"
                    if copies > 0:
                        what = "写时复制：整块拷到新块"
                    parts.append(f"{n} 的块 {x} {what} {y}")
                if len(t) > len(old):
                    full = ""
                    if old:
                        full = f"的块 {t[len(old) - 1]} 写满了，"
                    parts.append(f"{n} {full}拿到新块 {' '.join(map(str, t[len(old):]))}")
            parts += [f"块 {b} 的 ref_count {x} → {y}" for b, (x, y) in enumerate(zip(last["rc"], state["rc"]))
                      if x != y and x > 0]          # 新分配的块（0 → 1）上面已经说了
        for b in mark:
            parts.append(f"块 {b}：ref_count {state['rc'][b]}、已写 {written.get(b, 0)}/{bs}")
        if not parts and last is not None:
            parts.append("没有分配新块：新 token 写进已有块的空位")
        return "；".join(parts)
