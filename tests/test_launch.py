"""CPU: the launch path's argument check (h3cupy.core.launch.check_params) refuses packed
arguments whose count or byte sizes differ from the kernel's parameter list."""

from __future__ import annotations

import numpy as np
import pytest

from h3cupy.core import launch


class _FakeKernel:
    name = "h3::fake_kernel"


def test_check_params_refuses_a_mismatch(monkeypatch):
    k = _FakeKernel()
    # a 128-byte tensor map, a pointer, an int, a float
    monkeypatch.setattr(launch, "kernel_param_sizes", lambda kernel: (128, 8, 4, 4))
    desc = np.zeros((), [("b", np.uint8, (128,))])
    good = [launch._param(v) for v in (desc, launch.ptr(None), launch.i32(3), launch.f32(1.0))]
    launch.check_params(k, good)  # no error
    for bad_args in (
        (desc, launch.ptr(None), launch.i32(3)),  # one argument short
        (desc, launch.ptr(None), launch.i64(3), launch.f32(1.0)),  # int64 where int32 is declared
        (launch.ptr(None), desc, launch.i32(3), launch.f32(1.0)),  # order swapped
    ):
        with pytest.raises(RuntimeError, match=r"h3::fake_kernel takes 4 parameters"):
            launch.check_params(k, [launch._param(v) for v in bad_args])


def test_check_params_without_driver_answer(monkeypatch):
    monkeypatch.setattr(launch, "kernel_param_sizes", lambda kernel: None)
    launch.check_params(_FakeKernel(), [launch._param(launch.i32(1))])  # nothing to compare


class _RefusingKernel:
    """Refuses any dynamic shared-memory size, as the driver does past the opt-in limit."""

    shared_size_bytes = 512  # static shared memory

    @property
    def max_dynamic_shared_size_bytes(self):
        return 0

    @max_dynamic_shared_size_bytes.setter
    def max_dynamic_shared_size_bytes(self, value):
        raise ValueError("CUDA_ERROR_INVALID_VALUE: invalid argument")


def test_unlock_smem_names_static_and_dynamic(monkeypatch):
    """A refused shared-memory request names the dynamic bytes, the kernel's static bytes and
    their sum against the device's limit (a request exactly at the limit fails only through
    its static part, which the message must show)."""
    from h3cupy.core import arch

    monkeypatch.setattr(arch, "current_device", lambda: 0)
    monkeypatch.setattr(arch, "smem_optin", lambda dev: 232448)
    with pytest.raises(
        RuntimeError,
        match=r"needs 232448 bytes of dynamic shared memory per block and 512 static, "
        r"232960 in all, and this GPU \(device 0\) allows at most 232448",
    ):
        launch._unlock_smem(_RefusingKernel(), 232448)


def test_prologue_ctas_per_sm_choice(monkeypatch):
    """The prologue's CTAs per SM: 3 on sm_90a and 2 elsewhere by default; an explicit 3 off
    sm_90a (where that build spills) and any other value are refused with the fix named."""
    from h3cupy.ops import prologue

    monkeypatch.setattr(prologue, "CTAS_PER_SM", None)
    assert prologue.ctas_per_sm("sm_90a") == 3
    assert prologue.ctas_per_sm("sm_120a") == 2
    assert prologue.ctas_per_sm("sm_89") == 2
    monkeypatch.setattr(prologue, "CTAS_PER_SM", 2)
    assert prologue.ctas_per_sm("sm_90a") == 2
    monkeypatch.setattr(prologue, "CTAS_PER_SM", 3)
    assert prologue.ctas_per_sm("sm_90a") == 3
    with pytest.raises(ValueError, match="sm_90a only"):
        prologue.ctas_per_sm("sm_120a")
    monkeypatch.setattr(prologue, "CTAS_PER_SM", 4)
    with pytest.raises(ValueError, match="expected 2, 3 or None"):
        prologue.ctas_per_sm("sm_90a")


def test_small_m_splits_model():
    """The swap-AB split choice: whole SM rounds for the N = 5376 shapes at M = 1 (42 weight tiles
    of 128 rows: 3 splits fill 126 of 132 SMs), no more splits than 64-deep k-tiles, and a
    wide N at M = 129 (where partials cost ~2 bytes of traffic per weight byte) kept unsplit or
    lightly split."""
    from h3cupy.ops import gemm

    assert gemm.small_m_splits(1, 5376, 7168, 132) == 3
    assert gemm.small_m_splits(1, 5376, 14336, 132) == 3
    assert gemm.small_m_splits(1, 512, 64, 132) == 1
    assert gemm.small_m_splits(129, 21504, 5376, 132) <= 3


def test_tail_split_grid(monkeypatch):
    """The engine's tail split (gemm.tail_split_grid) at the FP8 out_proj's N = 5376, residency
    fixed at the H200's (66 clusters of two, 132 single CTAs); expected (S, grid) worked by hand:
    R leftover tiles (pairs) take S = min(4, clusters // R, k_tiles // 4) ranges each, and the
    R * S split units of the last round fit in one round of the grid."""
    from h3cupy.ops import gemm

    monkeypatch.setattr(gemm, "_engine_resident", lambda k, cluster, smem, dev, wg: 132 // cluster)
    cases = [
        # (M, cluster, tile N, k-tiles), (S, grid CTAs)
        ((1, 1, 128, 56), (3, 126, 42)),  # 42 tiles, all left over: 3 ranges each, 126 CTAs
        ((1, 1, 128, 4), (1, 42, 0)),  # one k-range only: unsplit
        ((129, 1, 128, 56), (1, 84, 0)),  # 84 tiles: no room for two ranges each
        ((4097, 2, 192, 56), (4, 132, 14)),  # 17 pairs x 28 = 476 = 7 x 66 + 14
        ((4824, 2, 192, 56), (4, 132, 4)),  # 19 x 28 = 532 = 8 x 66 + 4
        ((4824, 2, 192, 8), (2, 132, 4)),  # 8 k-tiles: at most 2 ranges
        ((128 * 2 * 66, 2, 192, 56), (1, 132, 0)),  # 66 x 28 pairs: no partial round
    ]
    for (m, cluster, tile_n, k_tiles), want in cases:
        got = gemm.tail_split_grid(None, m, 5376, tile_n, cluster, 0, 0, k_tiles)
        assert got == want, (m, k_tiles, got, want)
        s, grid, r = got
        pairs = -(-m // (128 * cluster))  # M-tiles (clusters: pairs of them)
        units = pairs * (5376 // tile_n)
        clusters = grid // cluster
        left = units % clusters if units >= clusters else units
        assert s == 1 or (left == r and left * s <= clusters)
        # the workspace: a counter per consumer warpgroup of each leftover tile, a fragment per
        # consumer warpgroup of each split unit
        cnt, part = gemm.tail_split_words(s, r, tile_n, cluster)
        assert (cnt, part) == (
            (0, 0) if s == 1 else (r * cluster * 2, r * s * cluster * 128 * tile_n)
        )


def test_tail_split_min_gain():
    """The split is skipped where it could save less than gemm.TAIL_MIN_GAIN of the launch: the
    BF16 pre-attention's 128 x 256 tile pairs (N = 21504, 84 k-tiles) on 66 clusters, worked by
    hand: P = 1 (M = 38592) 302 / 2 x 84 = 12684 pairs = 192 x 66 + 12, 4 ranges would save at
    most 0.75 / 193 = 0.39%: unsplit; P = 4 (M = 9648) 3192 = 48 x 66 + 24, 2 ranges, at most
    0.5 / 49 = 1.0%: split; P = 8 (M = 4824) 1596 = 24 x 66 + 12, 4 ranges, 3%: split."""
    from h3cupy.ops import gemm

    assert gemm.TAIL_MIN_GAIN == 0.005
    assert gemm.tail_split_counts(12684, 66, 84) == (1, 66, 0)
    assert gemm.tail_split_counts(3192, 66, 84) == (2, 66, 24)
    assert gemm.tail_split_counts(1596, 66, 84) == (4, 66, 12)


def test_fp8_ops_cluster(monkeypatch):
    """The FP8 out_proj's and the MLP's cluster size by M (gemm.fp8_ops_cluster): single CTAs at
    M <= 256, gemm.FP8_CLUSTER below gemm.FP8_OPS_CLUSTER2_FROM_M, clusters of two from there;
    with the threshold off, FP8_CLUSTER above 256."""
    from h3cupy.ops import gemm

    assert gemm.FP8_CLUSTER == 1 and gemm.FP8_OPS_CLUSTER2_FROM_M == 16384
    got = [gemm.fp8_ops_cluster(m) for m in (1, 256, 257, 4824, 9648, 16383, 16384, 38592)]
    assert got == [1, 1, 1, 1, 1, 1, 2, 2]
    monkeypatch.setattr(gemm, "FP8_CLUSTER", 2)
    assert [gemm.fp8_ops_cluster(m) for m in (256, 257, 38592)] == [1, 2, 2]
    monkeypatch.setattr(gemm, "FP8_CLUSTER", 1)
    monkeypatch.setattr(gemm, "FP8_OPS_CLUSTER2_FROM_M", None)
    assert [gemm.fp8_ops_cluster(m) for m in (256, 257, 38592, 149796)] == [1, 1, 1, 1]


def test_fp8_pair_cluster(monkeypatch):
    """The FP8 pre-attention single launch's cluster size by M (pre_attention.fp8_pair_cluster):
    FP8_PAIR_CLUSTER below FP8_PAIR_CLUSTER2_FROM_M (32768: between 19296, where clusters read
    slower, and 38592, where they read faster), clusters of two from there; FP8_PAIR_CLUSTER
    everywhere with the threshold off; a bad FP8_PAIR_CLUSTER a ValueError at any M."""
    from h3cupy.ops import pre_attention

    assert pre_attention.FP8_PAIR_CLUSTER == 1
    assert pre_attention.FP8_PAIR_CLUSTER2_FROM_M == 32768
    got = [pre_attention.fp8_pair_cluster(m) for m in (4824, 9648, 19296, 32767, 32768, 38592)]
    assert got == [1, 1, 1, 1, 2, 2]
    monkeypatch.setattr(pre_attention, "FP8_PAIR_CLUSTER", 2)
    assert [pre_attention.fp8_pair_cluster(m) for m in (4824, 38592)] == [2, 2]
    monkeypatch.setattr(pre_attention, "FP8_PAIR_CLUSTER", 1)
    monkeypatch.setattr(pre_attention, "FP8_PAIR_CLUSTER2_FROM_M", None)
    assert [pre_attention.fp8_pair_cluster(m) for m in (4824, 38592)] == [1, 1]
    monkeypatch.setattr(pre_attention, "FP8_PAIR_CLUSTER", 3)
    with pytest.raises(ValueError, match=r"FP8_PAIR_CLUSTER: expected 1 or 2, got 3"):
        pre_attention.fp8_pair_cluster(38592)


def test_tail_plan_layout(monkeypatch):
    """The tail split's workspace layout (gemm.tail_plan) at the FP8 out_proj's shape, residency
    fixed at the H200's: the caller's ready words first, the arrival counters and the partials in
    256-byte aligned regions after them, nothing overlapping; the counter words (and the ready
    words) are the ones zeroed; without a split only the ready words remain. Worked by hand: at
    M = 4824 the 4 leftover tile pairs x 4 k-ranges x 2 CTAs x 2 warpgroups each hold a 64 x 192
    fp32 fragment, and 4 x 2 x 2 counters."""
    from types import SimpleNamespace

    from h3cupy.ops import gemm

    monkeypatch.setattr(gemm, "_engine_resident", lambda k, cluster, smem, dev, wg: 132 // cluster)
    monkeypatch.setattr(gemm, "TAIL_SPLIT", True)
    frag = 64 * 192
    for ready in (0, 38):
        p = gemm.tail_plan(None, 4824, 5376, 192, 2, 0, 0, 56, ready=ready)
        assert (p.splits, p.grid) == (4, 132)
        assert p.count == (64 if ready else 0) and p.zero == p.count + 16
        assert p.part == -(-p.zero // 64) * 64 and p.words == p.part + 4 * 4 * 2 * 2 * frag
        assert p.count >= ready and p.part >= p.zero
        buf = SimpleNamespace(data=SimpleNamespace(ptr=1 << 20))
        part, count, splits = gemm.tail_args(p, buf)
        assert (int(part), int(count), int(splits)) == (
            (1 << 20) + 4 * p.part,
            (1 << 20) + 4 * p.count,
            4,
        )
        assert isinstance(part, np.uint64)
    # no split: the variant has none, the switch is off, or there is no partial round
    unsplit = [
        gemm.tail_plan(None, 4824, 5376, 192, 2, 0, 0, 56, ready=38, split=False),
        gemm.tail_plan(None, 128 * 2 * 66, 5376, 192, 2, 0, 0, 56, ready=38),
    ]
    monkeypatch.setattr(gemm, "TAIL_SPLIT", False)
    unsplit.append(gemm.tail_plan(None, 4824, 5376, 192, 2, 0, 0, 56, ready=38))
    for p in unsplit:
        assert p.splits == 1 and p.words == p.zero == 38
        assert tuple(int(a) for a in gemm.tail_args(p, None)) == (0, 0, 1)
    assert gemm.tail_plan(None, 4824, 5376, 192, 2, 0, 0, 56).words == 0


class _PairTailModel:
    """A host mirror of the engine's decode for N-tile pairs with the tail split (h3/gemm_sm90.cuh:
    TileOrder, whole(), tsplit(), pair_iter), for the FP8 pre-attention's n192 pairs (M-tiles of
    128 rows, 56 pairs of 192-column tiles, groups of 8 M-tiles)."""

    def __init__(self, m, clusters, splits, k_tiles, group=8):
        self.num_m, self.num_n, self.group = -(-m // 128), 56, group
        self.count = self.num_m * self.num_n
        self.clusters, self.k_tiles = clusters, k_tiles
        self.ts = max(splits, 1)
        self.whole = self.count - self.count % clusters if self.ts > 1 else self.count

    def tile(self, t):  # TileOrder::tile
        first = (t // (self.group * self.num_n)) * self.group
        gm = min(self.num_m - first, self.group)
        local = t - first * self.num_n
        return first + local % gm, local // gm

    def pair_iter(self, c, k):  # (pair, sub, kt0, nk, tail) or None: gemm_sm90_body's pair_iter
        pair = c + (k >> 1) * self.clusters
        if pair < self.whole:
            return pair, k & 1, 0, self.k_tiles, False
        j = k - 2 * (self.whole // self.clusters)
        if self.ts < 2 or j > 2 or c >= (self.count - self.whole) * self.ts:
            return None
        s = c % self.ts
        kt0 = s * self.k_tiles // self.ts
        nk = (s + 1) * self.k_tiles // self.ts - kt0 if j < 2 else 0
        return self.whole + c // self.ts, j, kt0, nk, True


@pytest.mark.parametrize("resident", (132, 114, 78))
def test_pair_tail_split_covers_each_k_tile_once(resident, monkeypatch):
    """The FP8 pre-attention's n192 pairs with the tail split (pre_attention.FP8_PAIR_TAIL_SPLIT):
    with the host's plan (gemm.tail_plan in 384-column units) and the kernel's decode (mirrored
    above), every k-tile of every 128 x 192 tile is computed exactly once; every whole pair's two
    tiles run back to back on one CTA; every tail pair gets one arrival per k-range on its
    counter, each writing both tiles' partials into its own slot inside the plan's partials, then
    an empty third iteration (the finish), so that one warpgroup runs both of the pair's
    epilogues. At M = 4824 on 132 CTAs: 2128 pairs = 16 x 132 + 16, the 16 in 4 k-ranges."""
    from h3cupy.ops import gemm

    monkeypatch.setattr(gemm, "_engine_resident", lambda k, cluster, smem, dev, wg: resident)
    monkeypatch.setattr(gemm, "TAIL_SPLIT", True)
    k_tiles = 5376 // 128
    ms = [257, 385, 2100, 4097, 4824, 5200, 9648, 19296, 38592] + list(range(300, 12000, 397))
    split_seen = 0
    for m in ms:
        plan = gemm.tail_plan(None, m, 21504, 384, 1, 0, 0, k_tiles, wg=2)
        model = _PairTailModel(m, plan.grid, plan.splits, k_tiles)
        assert plan.grid == min(
            resident, model.count + (model.count - model.whole) * (model.ts - 1)
        )
        if plan.splits > 1:
            split_seen += 1
            assert model.whole % plan.grid == 0 and model.count - model.whole <= plan.grid
        left = model.count - model.whole
        done = np.zeros((model.num_m, 2 * model.num_n, k_tiles), np.int32)
        arrivals = np.zeros(max(left, 1), np.int32)
        slots = set()
        for c in range(plan.grid):
            k, prev = 0, None
            while (it := model.pair_iter(c, k)) is not None:
                pair, sub, kt0, nk, tail = it
                mt, pn = model.tile(pair)
                if sub < 2:
                    done[mt, 2 * pn + sub, kt0 : kt0 + nk] += 1
                if not tail:
                    assert sub == k % 2 and (sub == 0 or prev[0] == pair)
                else:
                    assert model.whole <= pair < model.count and (nk == 0) == (sub == 2)
                    tp, s = pair - model.whole, c % model.ts
                    assert sub == 0 or prev[:2] == (pair, sub - 1)  # tile 0, tile 1, the finish
                    if sub < 2:
                        slot = (2 * tp + sub) * model.ts + s
                        assert slot not in slots
                        slots.add(slot)
                    if sub == 1:
                        arrivals[tp] += 1
                prev = (pair, sub, tail)
                k += 1
            # a CTA's iterations end with a whole pair's second tile or a tail unit's finish
            assert prev is None or prev[1] == (2 if prev[2] else 1)
        assert (done == 1).all(), (m, np.argwhere(done != 1)[:4])
        if plan.splits > 1:
            assert (arrivals[:left] == model.ts).all()
            # the partials hold 2 * left * S fragments of 2 warpgroups x 64 x 192 fp32
            assert max(slots) < 2 * left * model.ts
            assert plan.words - plan.part == 2 * left * model.ts * 2 * 64 * 192
            assert plan.part - plan.count >= left * 2  # a counter per pair and warpgroup
    assert split_seen >= 5
    if resident == 132:
        p = gemm.tail_plan(None, 4824, 21504, 384, 1, 0, 0, k_tiles, wg=2)
        assert (p.splits, p.grid) == (4, 132)


def test_flags_helpers():
    """The workspace_flags lengths: at least one ready flag per 128-row tile (more on sm_90a,
    where the tail split's counters and partials follow); exactly that without a GPU, where the
    ops cannot run; M < 1 refused."""
    from h3cupy import minimax_h3_fp8_out_proj_flags, minimax_h3_mlp_fc2_flags_sm120
    from h3cupy.testing import gpu_available

    for helper in (minimax_h3_fp8_out_proj_flags, minimax_h3_mlp_fc2_flags_sm120):
        for m in (1, 128, 129, 4824):
            n = helper(m)
            assert n >= -(-m // 128)
            if not gpu_available():
                assert n == -(-m // 128)
        with pytest.raises(ValueError, match=r"m: expected M >= 1, got 0"):
            helper(0)


def test_launch_attribute_layout():
    """The ctypes mirrors of cuda.h's CUlaunchAttribute (an id, 4 bytes of padding, a 64-byte
    value union: 72 bytes) and CUlaunchConfig (grid, block, shared memory, stream, attrs,
    num_attrs: 56 bytes on 64-bit hosts) that the programmatic launches pass to
    cuLaunchKernelEx."""
    import ctypes

    assert ctypes.sizeof(launch._LaunchAttr) == 72
    assert launch._LaunchAttr.value.offset == 8
    assert ctypes.sizeof(launch._LaunchConfig) == 56
    assert launch._LaunchConfig.stream.offset == 32 and launch._LaunchConfig.attrs.offset == 40
