"""The GEMM engine (issue #3) — work in progress.

* ``mma_probe`` runs one warp-level MMA atom on a 16 x 8 output tile with operands gathered from
  row-major memory by the fragment maps of ``cuda_src/include/h3/mma_sync.cuh``; the GPU test
  compares it with NumPy, and CI disassembles the cubins for sm_120a / sm_90a / sm_89 to check
  which tensor-core instruction each kind issues.
* ``gemm_mma_sync`` is the first draft of the portable mma.sync back end (cp.async ring, plain
  epilogue): correct on the H200 for bf16 and scaled e4m3 (tests/test_gemm_gpu.py), ~0.4x cuBLAS
  so far; the sm_120a ``e4m3_mx`` form is compile-checked only. The persistent TMA + mbarrier
  skeleton, wgmma and NVFP4 follow.
* ``gemm_wgmma`` is the sm_90a engine (persistent, grouped tile order, TMA + mbarrier ring,
  producer warpgroup, two wgmma consumer warpgroups, epilogue functor; FP8 promotion).
* ``gemm_wgmma_small_m`` is its bf16 small-M form (M <= 136): operands swapped so that the weight
  streams as the wgmma's 64-row side, split-K with a fixed-order reduction.
* ``tma_probe`` loads one tile through a driver-encoded tensor map and an mbarrier (verified on
  the H200, zeros past the edges).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np

from ..core import arch, checks, interop, jit
from ..core.launch import f32, i32, i64, launch, max_active_clusters, ptr

#: kind -> (template code, minimum sm, needs an 'a' feature target of sm_120)
PROBE_KINDS = {
    "bf16": (0, 80, False),
    "e4m3": (1, 89, False),
    "mxf8f6f4": (2, 120, True),
    "mxf4nvf4": (3, 120, True),
}

MMA_PROBE = jit.ModuleSpec(
    "kernels/mma_probe.cu",
    tuple(f"h3::mma_probe_smxx<{code}>" for code, _, _ in PROBE_KINDS.values()),
)


def mma_probe(kind: str, a_bytes, b_bytes, sfa: int = 0, sfb: int = 0):
    """``D[16, 8] = A[16, K] @ B[8, K]^T`` through one MMA atom of ``kind``.

    Args:
        kind: ``"bf16"`` (m16n8k16), ``"e4m3"`` (m16n8k32), ``"mxf8f6f4"`` (sm_120a, block-scaled
            e4m3 with ue8m0 scales) or ``"mxf4nvf4"`` (sm_120a, packed e2m1 k64 with ue4m3 scales).
        a_bytes: uint8 ``[16, 32]`` device array, the raw bytes of A's rows.
        b_bytes: uint8 ``[8, 32]`` device array, B stored ``[N][K]``.
        sfa, sfb: the 32-bit scale words of the block-scaled kinds (the same on every lane).

    Returns:
        fp32 ``[16, 8]`` device array.
    """
    if kind not in PROBE_KINDS:
        raise ValueError(f"kind: expected one of {', '.join(PROBE_KINDS)}, got {kind!r}")
    code, min_sm, needs_120 = PROBE_KINDS[kind]
    at = interop.as_tensor(a_bytes, "a_bytes")
    bt = interop.as_tensor(b_bytes, "b_bytes")
    target = arch.device_target(at.device)
    if arch.sm_number(target) < min_sm or (needs_120 and not target.startswith("sm_12")):
        raise RuntimeError(f"mma_probe kind {kind!r} does not run on {target}")
    d = interop.empty((16, 8), "float32", like=at)
    launch(
        jit.get_kernel(MMA_PROBE, f"h3::mma_probe_smxx<{code}>", target),
        1,
        32,
        (ptr(at), ptr(bt), np.uint32(sfa), np.uint32(sfb), ptr(d)),
        tensors=[at, bt, d],
    )
    return interop.export(d)


#: fmt -> (template code, minimum sm, needs sm_120a, operand format)
GEMM_FORMATS = {
    "bf16": (0, 80, False, "bf16"),
    "e4m3": (1, 89, False, "e4m3"),
    "e4m3_mx": (2, 120, True, "e4m3"),  # kind::mxf8f6f4 with unit ue8m0 scales (SM120 form 2)
}

GEMM_MMA = jit.ModuleSpec(
    "kernels/gemm_mma.cu",
    tuple(f"h3::gemm_mma_smxx<{code}>" for code, _, _, _ in GEMM_FORMATS.values()),
)
_BM, _BN, _BK_BYTES, _SMEM, _THREADS = 128, 128, 64, 4 * (128 + 128) * 64, 256


def _gemm_operands(a, b, fmt, row_scale, col_scale, out, formats_, k_align_bytes, n_align=_BN):
    """Wrap and check the operands shared by every GEMM back end."""
    if fmt not in formats_:
        raise ValueError(f"fmt: expected one of {', '.join(formats_)}, got {fmt!r}")
    opfmt = formats_[fmt][-1]
    fp8 = "e4m3" if opfmt == "e4m3" else None
    at = interop.as_tensor(a, "a", fp8_as=fp8)
    bt = interop.as_tensor(b, "b", fp8_as=fp8)
    dev = at.device
    checks.check_dtype(at, "a", opfmt)
    if len(at.shape) != 2 or at.shape[0] < 1:
        raise ValueError(f"a: expected shape [M, K] with M >= 1, got {list(at.shape)}")
    m, k = at.shape
    esize = 2 if opfmt == "bf16" else 1
    if (k * esize) % k_align_bytes:
        raise ValueError(
            f"a: expected K * {esize} bytes to be a multiple of {k_align_bytes}, got K = {k}"
        )
    checks.check_tensor(at, "a", opfmt, (m, k), dev)
    if len(bt.shape) != 2 or bt.shape[0] < 1 or bt.shape[0] % n_align or bt.shape[1] != k:
        raise ValueError(
            f"b: expected shape [N, {k}] with N a multiple of {n_align}, got {list(bt.shape)}"
        )
    n = bt.shape[0]
    checks.check_tensor(bt, "b", opfmt, (n, k), dev)
    rs = cs = None
    if row_scale is not None:
        rs = interop.as_tensor(row_scale, "row_scale")
        checks.check_tensor(rs, "row_scale", "float32", (m,), dev, align=4)
    if col_scale is not None:
        cs = interop.as_tensor(col_scale, "col_scale")
        checks.check_tensor(cs, "col_scale", "float32", (n,), dev, align=4)
    ot = checks.output_or_empty(out, "out", "bf16", (m, n), at)
    checks.check_disjoint(
        checks.given(("out",), (out,), (ot,)),
        [("a", at), ("b", bt), ("row_scale", rs), ("col_scale", cs)],
    )
    return at, bt, rs, cs, ot, m, n, k, esize


@arch.on_operand_device("a")
def gemm_mma_sync(a, b, *, fmt: str = "bf16", row_scale=None, col_scale=None, out=None):
    """``out = bf16((a @ b^T) * row_scale[:, None] * col_scale[None, :])`` (fp32 accumulation,
    scales applied to the fp32 accumulator in that order) on the mma.sync back end.

    Args:
        a: ``[M, K]`` bf16 (``fmt="bf16"``) or e4m3 / uint8 codes (``"e4m3"``, ``"e4m3_mx"``).
        b: ``[N, K]`` in the same format (one weight row per output column); N a multiple of 128.
        fmt: ``"bf16"``, ``"e4m3"`` (sm_89+), or ``"e4m3_mx"`` (sm_120a: the block-scaled
            ``kind::mxf8f6f4`` instruction with unit scales, bitwise equal to ``"e4m3"``).
        row_scale: optional fp32 ``[M]``; col_scale: optional fp32 ``[N]``.
        out: optional bf16 ``[M, N]`` output.

    K * element size must be a multiple of 64 bytes.
    """
    at, bt, rs, cs, ot, m, n, k, esize = _gemm_operands(
        a, b, fmt, row_scale, col_scale, out, GEMM_FORMATS, _BK_BYTES
    )
    code, min_sm, needs_120, _ = GEMM_FORMATS[fmt]
    target = arch.device_target(at.device)
    if arch.sm_number(target) < min_sm or (needs_120 and not target.startswith("sm_12")):
        raise RuntimeError(f"gemm_mma_sync fmt={fmt!r} does not run on {target}")
    launch(
        jit.get_kernel(GEMM_MMA, f"h3::gemm_mma_smxx<{code}>", target),
        (n // _BN, -(-m // _BM)),
        _THREADS,
        (ptr(at), ptr(bt), i32(m), i32(n), i32(k * esize), ptr(rs), ptr(cs), ptr(ot)),
        tensors=[t for t in (at, bt, rs, cs, ot) if t is not None],
        smem=_SMEM,
    )
    return interop.export(ot)


#: fmt -> (template code, operand format)
WGMMA_FORMATS = {"bf16": (0, "bf16"), "e4m3": (1, "e4m3")}
#: the instantiated (fmt, tile N, FP8 promotion, cluster size) variants of the sm_90a engine.
#: Promotion 0: none; 1: one fresh fragment per k-tile (the warpgroup waits before adding); 3 / 4:
#: one fresh fragment per two / four k-tiles (1/2 / 1/4 of the waits; opt-in until measured,
#: NOTES.md). The unpromoted n192 variant is benchmark-only (it isolates the cost of promotion).
#: The promoted FP8 n224 variant (two 112-register fragments: consumers at 240 registers, the
#: producer at 24) is benchmark-only: it measured 0.92-0.99x `_scaled_mm` against n192's
#: 0.87-1.03x on the H200 (2026-12-01, NOTES.md session 5), no better where its last wave is fuller.
#: (2 x 2 clusters, each CTA multicasting half of its A and half of its B tile, measured 0.68-0.85x
#: and were removed: NOTES.md session 5.)
#: (Mode 2, two fresh fragments used alternately, exists in the engine but measured 0.6x of
#: mode 1 on the H200: benchmarks/NOTES.md.)
#: Cluster 2 multicasts the B tile between two vertically adjacent tiles (large M); cluster 1 is
#: for M <= 256, where a second M-tile would compute nothing. The unpromoted FP8 n256 variant is
#: benchmark-only: its error exceeds the bound at K = 14336 (benchmarks/NOTES.md).
#: The fifth field selects the ping-pong schedule (each consumer warpgroup takes whole 128 x 128
#: tiles, alternately, so one warpgroup's epilogue overlaps the other's MMAs) instead of the
#: cooperative one (both warpgroups on one 128 x N tile).
#: The FP8 n192 tiles run on single CTAs by default above M = 256 (:data:`FP8_CLUSTER`), the
#: clustered form stays for the A/B. (bf16 224 / 256-column tiles on single CTAs measured level
#: or slower than in pairs, 0.96-1.01x, and the BF16 pre-attention's 128 x 256 tiles 0.94-0.99x:
#: not built; NOTES.md session 11.)
#: The FP8 128 x 128 single-CTA tiles have a 6-stage ring, cuBLAS's own FP8 shape (its
#: `_scaled_mm` kernel at these sizes: 128 x 128 tiles, 6 stages, no cluster); with promotion
#: mode 4 (benchmark-only) the 4-deep spans leave the ring two stages of slack, which the n192
#: ring's four stages did not (mode 4 starved it, session 6). Measured on the H200 (2026-12-02,
#: NOTES.md session 14): 0.86-0.94x `_scaled_mm`, 11-13% behind the n192 default.
WGMMA_VARIANTS = (
    ("bf16", 256, 0, 2, False),
    ("bf16", 224, 0, 2, False),
    ("bf16", 128, 0, 2, True),
    ("bf16", 128, 0, 2, False),
    ("bf16", 128, 0, 1, False),
    ("e4m3", 192, 1, 2, False),
    ("e4m3", 128, 1, 1, False),
    ("e4m3", 128, 3, 1, False),
    ("e4m3", 128, 4, 1, False),
    ("e4m3", 256, 0, 2, False),
    ("e4m3", 192, 3, 2, False),
    ("e4m3", 192, 4, 2, False),
    ("e4m3", 192, 0, 2, False),
    ("e4m3", 224, 3, 2, False),
    ("e4m3", 192, 3, 1, False),
)

#: Cluster size of the 192-column FP8 tiles above M = 256, in the engine's default and in the FP8
#: operators' kernels (out_proj, the MLP's FC1 and FC2, the FP8 pre-attention's 192 x 128 tiles):
#: 2, clusters of two CTAs multicasting the weight tile, or 1, single CTAs (1.4x the L2 bytes per
#: FLOP). Single CTAs since session 11, where they measured faster on the H200 in the same runs:
#: the engine GEMM 0.95-1.01x `_scaled_mm` against 0.92-0.98x, the FP8 pre-attention 5-7% above
#: M = 4824, the out_proj 0-2.6% (NOTES.md). A module setting, so that tests and benchmarks can
#: run both.
FP8_CLUSTER = 1
#: From this many tokens on, the FP8 out_proj and the MLP (FC1 and FC2) run their 192-column tiles
#: in clusters of two whatever :data:`FP8_CLUSTER` says (:func:`fp8_ops_cluster`; None: FP8_CLUSTER
#: at every M > 256). The multicast halves the weight tile's L2 traffic, which the single-launch
#: forms' in-launch quantization competes for. Measured on an H100 (session 31, NOTES.md), clusters
#: of two against single CTAs at M = 38592: the MLP +1.7 to +12% in graph replays, +5.8-6.8%
#: sustained with 10-11% less energy per call; the out_proj -0.4 to +3.7% in graph replays, +8-10%
#: sustained with 7% less energy. At 4824 the out_proj 3.3% slower and the MLP 0.3-1.6% slower, at
#: 9648 level to +1.4%; the confirmation run at 19296 / 38592: out_proj -1.1 / +2.1%, MLP +1.6 /
#: +5.0%.
FP8_OPS_CLUSTER2_FROM_M = 16384


def cluster_from_m(m: int, base: int, from_m: int | None) -> int:
    """2 from ``from_m`` tokens on (None: never), else ``base``: the clusters-of-two thresholds
    of :func:`fp8_ops_cluster` and ``pre_attention.fp8_pair_cluster``."""
    return 2 if from_m is not None and m >= from_m else base


def fp8_ops_cluster(m: int) -> int:
    """Cluster size of the FP8 out_proj's and the MLP's tiles at ``m`` tokens: 1 at M <= 256
    (128-column single CTAs), 2 from :data:`FP8_OPS_CLUSTER2_FROM_M` on, else
    :data:`FP8_CLUSTER`."""
    return 1 if m <= 256 else cluster_from_m(m, FP8_CLUSTER, FP8_OPS_CLUSTER2_FROM_M)


#: The engine's default FP8 promotion mode, the same as the operators' kernels
#: (``kOpsFp8Promote`` in gemm_sm90.cuh): mode 3 measured 3-5% faster than mode 1 on the H200.
FP8_PROMOTE = 3


def wgmma_has_tail(tile_n: int, promote: int, pingpong: bool) -> bool:
    """Whether the gemm_wgmma variant is built with the tail split (``kTailOk`` in
    gemm_wgmma.cu): cooperative, promotion mode other than 4, and no promotion above 192
    columns (those two spill with it)."""
    return not pingpong and promote != 4 and (promote == 0 or tile_n <= 192)


def _wgmma_name(
    fmt: str, tile_n: int, promote: int, cluster: int, pingpong: bool, wg: int = 2
) -> str:
    """The gemm_wgmma kernel of a variant; ``wg`` consumer warpgroups (3: the 192 x 192 tiles)."""
    kern = {1: "gemm_wgmma_sm90", 2: "gemm_wgmma_x2_sm90"}[cluster]
    code = WGMMA_FORMATS[fmt][0]
    return f"h3::{kern}<{code}, {tile_n}, {promote}, {str(pingpong).lower()}, {wg}>"


#: Benchmark-only: 192 x 192 bf16 tiles on three consumer warpgroups (each 64 x 192, one m64n192
#: wgmma per k-step; cuBLAS's own bf16 tile at the H3 shapes), on single CTAs (1) or in clusters
#: of two multicasting B (2): ``gemm_wgmma(..., tile_m=192)``. One 8 KiB epilogue staging box per
#: warpgroup keeps the ring at four 48 KiB stages. Built without the tail split (it spilled).
WGMMA_M192_CLUSTERS = (1, 2)

GEMM_WGMMA = jit.ModuleSpec(
    "kernels/gemm_wgmma.cu",
    tuple(_wgmma_name(*v) for v in WGMMA_VARIANTS)
    + tuple(_wgmma_name("bf16", 192, 0, c, False, wg=3) for c in WGMMA_M192_CLUSTERS),
)


def wgmma_smem_bytes(
    tile_n: int,
    full_staging: bool = False,
    wg: int = 2,
    vec: int = 0,
    boxes: int = 2,
    hook: int = 0,
) -> int:
    """Dynamic shared memory of the sm_90a engine (mirrors Sm90GemmCfg in gemm_sm90.cuh): the
    stage ring, the epilogue staging (``boxes`` 8 KiB boxes per consumer warpgroup, 2 unless the
    epilogue declares kStagingBoxes; with ``full_staging``, the prefetching epilogues, 64 x
    tile_n bf16 if that is more), the epilogue's vector area (``vec`` bytes per consumer
    warpgroup, its kVecBytes), the barriers, the producer hooks' area (``hook`` bytes, the
    hook's kSmemBytes) and 1 KiB of alignment slack. ``wg`` consumer warpgroups own 64 rows
    each of a ``64 * wg``-row tile."""
    stage = (64 * wg + tile_n) * 128
    box = boxes * 8192
    staging = wg * (max(box, 64 * tile_n * 2) if full_staging else box)
    stages = min(6, (232448 - 1024 - staging - wg * vec - 256 - hook) // stage)
    return stages * stage + staging + wg * vec + (2 * stages + 4) * 8 + hook + 1024


def scale_vec_bytes(cols: int) -> int:
    """Shared-memory bytes per consumer warpgroup of an epilogue that stages its 64 row scales
    and ``cols`` column scales (fp32; ``kVecBytes`` of EpiScaleBf16 / EpiSwiglu); 0 for 0."""
    return 4 * (64 + cols) if cols else 0


def wgmma_vec_cols(fmt: str, tile_n: int, pingpong: bool) -> int:
    """The plain epilogue's vector columns in a gemm_wgmma variant (``kVecCols`` in
    gemm_wgmma.cu): FP8 192-column cooperative tiles read their scales from shared memory and
    store in one pass (full staging); 0 elsewhere."""
    return tile_n if fmt == "e4m3" and tile_n == 192 and not pingpong else 0


#: Clusters of two resident on an H200 (132 SMs; cuOccupancyMaxActiveClusters measured 66).
_WAVE_CLUSTERS = 66


def bf16_tile_n(m: int, n: int, clusters: int = _WAVE_CLUSTERS) -> int:
    """Tile N of the bf16 engine for an [m, n] output: 256, or 224 where it fills the last
    wave of tile pairs better. Modelled time ~ waves x tile N (a tile's MMA time is linear in
    its width); 224 is taken only when that is over 2% shorter (its per-tile efficiency is a
    little lower). N = 5376 at M = 4824: 399 pairs of n256 tiles = 6.05 waves of 66 (7 run,
    86% full) against 456 pairs of n224 = 6.9 (7 run, 99% full). The model ignores the tail
    split (:func:`tail_split_grid`): counting a split last wave as 1 / S of one picked n256 at
    O / FC2, M = 4824, which measured 5% slower than n224 with the split (H200, session 10)."""
    m_tiles = -(-m // 128)
    pairs = -(-m_tiles // 2)

    def cost(tn: int) -> int:
        return -(-(pairs * -(-n // tn)) // clusters) * tn

    return 224 if cost(224) < 0.98 * cost(256) else 256


def wgmma_config(fmt: str, m: int, tile_n=None, promote=None, cluster=None, pingpong=None, n=None):
    """The engine variant for a problem, as (tile N, promotion mode, cluster, ping-pong).

    Defaults: FP8 always promotes (Hopper's FP8 wgmma keeps ~14 accumulator bits); M > 256 runs
    bf16 n256 or n224 (by :func:`bf16_tile_n` when ``n`` is given) in clusters of two, and FP8
    n192 in clusters of :data:`FP8_CLUSTER` CTAs (1 by default).
    M <= 256 runs n128 tiles on single CTAs, except bf16 at 128 < M <= 256, which runs them in
    clusters of two (both M-tiles share one weight stream: 3-10% faster at M = 129 on the H200;
    at M = 1 clusters measured 1.2-1.9x slower, half the weight bytes in flight per SM).
    ``promote`` may be a bool (True: promote) or a mode 0 / 1 / 3 / 4 (see
    :data:`WGMMA_VARIANTS`).
    """
    small = m <= 256
    large = not small and cluster is None  # the large-M default (FP8: FP8_CLUSTER CTAs)
    if cluster is None:
        wide = tile_n is not None and tile_n != 128
        if large:
            cluster = FP8_CLUSTER if fmt == "e4m3" else 2
        else:
            cluster = 2 if (fmt == "bf16" and m > 128) or wide else 1
    if tile_n is None:
        if small or (cluster == 1 and not large):
            tile_n = 128
        elif fmt == "bf16":
            tile_n = bf16_tile_n(m, n) if n is not None else 256
        else:
            tile_n = 192
    if promote is None or promote is True:
        promote = 0 if fmt == "bf16" or promote is None and tile_n == 256 else FP8_PROMOTE
    if pingpong is None:
        pingpong = False
    variant = (fmt, tile_n, int(promote), cluster, bool(pingpong))
    if variant not in WGMMA_VARIANTS:
        raise ValueError(
            f"tile_n/promote/cluster/pingpong: expected one of {WGMMA_VARIANTS}, got {variant}; "
            "leave them unset for the default"
        )
    return tile_n, int(promote), cluster, bool(pingpong)


def _engine_units(m: int, n: int, tile_n: int, cluster: int, wg: int) -> int:
    """The engine's output tiles (clusters: tile pairs) for an [m, n] output."""
    m_tiles = -(-m // (64 * wg))
    return -(-m_tiles // cluster) * (-(-n // tile_n))


def _engine_resident(kernel, cluster: int, smem: int, device: int, wg: int) -> int:
    """How many CTAs (clusters: clusters) of an engine kernel can be resident at once."""
    sms = arch.sm_count(device)
    if cluster > 1:
        return max_active_clusters(kernel, cluster, 128 * (wg + 1), smem, sms // cluster)
    return sms


def engine_grid(
    kernel, m: int, n: int, tile_n: int, cluster: int, smem: int, device: int, wg: int = 2
) -> int:
    """Persistent grid of the sm_90a engine: one CTA per output tile (clusters: per unit of
    tile pairs), at most as many as can be resident at once. ``wg``: consumer
    warpgroups (tiles of 64 * wg rows, 128 * (wg + 1) threads)."""
    units = _engine_units(m, n, tile_n, cluster, wg)
    return cluster * min(units, _engine_resident(kernel, cluster, smem, device, wg))


#: The most k-ranges one leftover tile is split into by tail_split_grid.
TAIL_MAX_SPLITS = 4
#: The least share of a launch the split may save for it to be taken: S ranges shorten the last
#: round by at most (1 - 1 / S) of a unit's time, out of (full rounds + 1) units. The rule rests
#: on that count: the BF16 pre-attention at P = 1 (M = 38592: 192 full rounds, at most 0.39%)
#: read 0.2-5.5% faster without the split in 7 of 9 runs, but that benchmark's identical forms
#: spread ~5% there; at P = 4 (48 rounds, at most 1.0%) the split ran 3.5% faster in three runs
#: (benchmarks/NOTES.md, sessions 30-31).
TAIL_MIN_GAIN = 0.005
#: Split-K of the last partial round (h3/gemm_sm90.cuh TailSplit) in the engine kernels built
#: with it: the FP8 out_proj's and the MLP's FC2 (gated residual), the BF16 pre-attention, the
#: FP8 pre-attention (both tile heights; its n192 pairs with
#: :data:`h3cupy.ops.pre_attention.FP8_PAIR_TAIL_SPLIT`), and the gemm_wgmma variants of
#: :func:`wgmma_has_tail`.
#: The tiles left over for the persistent grid's last round run as up to 4 k-ranges each on
#: otherwise idle clusters, summed in a fixed order by the last to finish: bitwise the same run to
#: run, eager or in a CUDA graph. On by default since session 9 (benchmarks/NOTES.md); its
#: counters and partials live in a caller's workspace or in scratch of the op's own
#: (:mod:`h3cupy.core.workspace`).
TAIL_SPLIT = True


def tail_split_grid(
    kernel,
    m: int,
    n: int,
    tile_n: int,
    cluster: int,
    smem: int,
    device: int,
    k_tiles: int,
    wg: int = 2,
) -> tuple[int, int, int]:
    """``(splits, grid, left)`` for an engine kernel built with ``kTail`` (h3/gemm_sm90.cuh
    TailSplit): the R = ``left`` tiles (pairs) left over for the persistent grid's last round
    (all of them when there are fewer tiles than resident clusters) run as S = min(4,
    clusters / R, k_tiles / 4) units over consecutive k-ranges, and the grid grows to hold them.
    ``(1, engine_grid(...), 0)`` when there is no partial round, no room to split, or too
    many full rounds for the split to save :data:`TAIL_MIN_GAIN` of the launch. ``wg``:
    consumer warpgroups (tiles of 64 * wg rows)."""
    units = _engine_units(m, n, tile_n, cluster, wg)
    resident = _engine_resident(kernel, cluster, smem, device, wg)
    s, clusters, r = tail_split_counts(units, resident, k_tiles)
    return s, cluster * clusters, r


def tail_split_counts(units: int, resident: int, k_tiles: int) -> tuple[int, int, int]:
    """The arithmetic of :func:`tail_split_grid`: ``(splits, grid clusters, left)`` for ``units``
    tiles (pairs) on ``resident`` clusters."""
    r = units % resident if units >= resident else units
    s = min(TAIL_MAX_SPLITS, resident // r, k_tiles // 4) if r else 1
    if s >= 2 and (1 - 1 / s) / (units // resident + 1) < TAIL_MIN_GAIN:
        s = 1  # too many full rounds for the split to pay (TAIL_MIN_GAIN)
    if s < 2:
        return 1, min(units, resident), 0
    return s, min(resident, units - r + r * s), r


class TailPlan(NamedTuple):
    """An engine launch's grid and tail split, and the layout of its uint32 workspace: ``ready``
    words of the caller's at the front (e.g. the single-launch out_proj's tile counters), the
    tail split's arrival counters at word ``count``, its fp32 partials at word ``part``; the first
    ``zero`` words are zeroed before each launch, ``words`` in all (0: no workspace)."""

    splits: int
    grid: int
    count: int
    part: int
    zero: int
    words: int


def tail_plan(
    kernel,
    m,
    n,
    tile_n,
    cluster,
    smem,
    device,
    k_tiles,
    *,
    ready: int = 0,
    split: bool = True,
    wg: int = 2,
) -> TailPlan:
    """The :class:`TailPlan` of an engine kernel (``split``: whether this variant is built with
    ``kTail``; ``wg`` consumer warpgroups), with ``ready`` words ahead of the tail's (256-byte
    aligned regions)."""
    grid = engine_grid(kernel, m, n, tile_n, cluster, smem, device, wg)
    splits, cnt, part = 1, 0, 0
    if TAIL_SPLIT and split:
        s, g, left = tail_split_grid(kernel, m, n, tile_n, cluster, smem, device, k_tiles, wg)
        if s > 1:
            splits, grid = s, g
            cnt, part = tail_split_words(s, left, tile_n, cluster, wg)
    count = -(-ready // 64) * 64 if cnt else ready
    zero = count + cnt
    part_at = -(-zero // 64) * 64
    return TailPlan(splits, grid, count, part_at, zero, part_at + part if part else zero)


def tail_args(plan: TailPlan, buf) -> tuple:
    """The kernels' three tail arguments (partials, counters, splits) for ``plan`` over ``buf``."""
    if plan.splits < 2:
        return (ptr(None), ptr(None), i32(1))
    base = buf.data.ptr
    return (np.uint64(base + 4 * plan.part), np.uint64(base + 4 * plan.count), i32(plan.splits))


def plan_workspace(plan: TailPlan, ft, dev: int, tensors: list, helper: str, flags: int = 0):
    """The plan's workspace: ``ft`` (a caller's int32 buffer, checked to hold ``plan.words``
    elements, sized by ``helper``), else the op's scratch for this stream or capture
    (:func:`h3cupy.core.workspace.scratch_words`); its first ``plan.zero`` words (a caller's
    buffer: at least ``flags``, the ready flags the ops document as zeroed) are zeroed on the
    stream (a memset, recorded into a graph when captured). None when the plan needs none."""
    from ..core import workspace
    from ..core.interop import current_stream_ptr
    from ..core.launch import stream

    if not plan.words:
        if ft is not None and flags:
            with stream(tensors):
                ft.raw[:flags].fill(0)
        return None
    zero = plan.zero
    if ft is not None:
        zero = max(zero, flags)
        n = ft.shape[0]
        if n < plan.words:
            raise ValueError(
                f"workspace_flags: expected at least {plan.words} int32 elements for this M on "
                f"this GPU, got {n}; size it with {helper}(M) (ready counters and the tail "
                f"split's counters and partial sums)"
            )
        buf = ft.raw.view(np.uint32)
    else:
        buf = workspace.scratch_words(dev, current_stream_ptr(tensors), plan.words)
    if zero:
        with stream(tensors):
            buf[:zero].fill(0)
    return buf


def tail_split_words(
    splits: int, left: int, tile_n: int, cluster: int, wg: int = 2
) -> tuple[int, int]:
    """``(counter words, partial words)`` of a TailSplit workspace: one arrival counter per
    consumer warpgroup of each leftover tile's CTAs, and one 64 x tile_n fp32 fragment per
    consumer warpgroup of every split unit (h3/gemm_sm90.cuh TailSplit)."""
    if splits < 2:
        return 0, 0
    return left * cluster * wg, left * splits * cluster * wg * 64 * tile_n


@functools.lru_cache(maxsize=256)
def _tensor_map(
    ptr_: int, dtype: str, cols: int, rows: int, stride: int, box_rows: int, box_bytes: int = 128
):
    """Swizzled tensor maps with ``box_bytes``-wide boxes (128: the 128B swizzle; 64: the 64B
    swizzle, the sm_120 plans' k-tiles). They are pure functions of (address, shape, box):
    cached, so a steady-state call encodes nothing."""
    from ..core import tma

    box_cols = box_bytes // 2 if dtype == "bfloat16" else box_bytes
    return tma.encode_2d(ptr_, dtype, cols, rows, stride, box_cols, box_rows, swizzle=box_bytes)


@functools.lru_cache(maxsize=256)
def _c_map_w32(ptr_: int, n: int, m: int):
    """The bf16 output map in 32-column x 64-row boxes with the 64B swizzle (n224 epilogue)."""
    from ..core import tma

    return tma.encode_2d(ptr_, "bfloat16", n, m, n * 2, 32, 64, swizzle=64)


@arch.on_operand_device("a")
def gemm_wgmma(
    a,
    b,
    *,
    fmt: str = "bf16",
    row_scale=None,
    col_scale=None,
    out=None,
    tile_n=None,
    promote=None,
    cluster=None,
    pingpong=None,
    workspace=None,
    tile_m=None,
):
    """The same contract as :func:`gemm_mma_sync` on the sm_90a engine: persistent, TMA loads
    into an mbarrier ring, a producer warpgroup and two wgmma consumer warpgroups, clusters of
    two CTAs multicasting B (``cuda_src/include/h3/gemm_sm90.cuh``).

    Args:
        a: ``[M, K]`` bf16 or e4m3 (uint8 codes accepted); K * element size a multiple of 128 B.
        b: ``[N, K]`` in the same format; N a multiple of 8 (any tile remainder is handled).
        fmt: ``"bf16"`` or ``"e4m3"`` (always with fp32 promotion unless ``promote=False``).
        row_scale, col_scale: optional fp32 ``[M]`` / ``[N]`` (col_scale 8-byte aligned).
        out: optional bf16 ``[M, N]``.
        tile_n, promote, cluster, pingpong: override the variant :func:`wgmma_config` picks
            (benchmarks, tests).
        workspace: optional fp32 split-K partials for the bf16 small-M path (M <= 136, no
            scales: :func:`gemm_wgmma_small_m`), ``[S * M * N]`` with S =
            ``small_m_splits(M, N, K, SMs)``; without it that path allocates one per call when it
            splits K. Ignored otherwise.
        tile_m: None or 128 (the variants above), or 192: the benchmark-only 192 x 192 bf16
            tiles on three consumer warpgroups (:data:`WGMMA_M192_CLUSTERS`; ``cluster`` 1 or
            2, default 2; ``tile_n`` 192 or unset; no promotion, no ping-pong).

    The cooperative variants split the last partial round's tiles over k (:data:`TAIL_SPLIT`),
    with counters and partials in scratch kept per stream (per capture inside a CUDA graph).
    """
    at, bt, rs, cs, ot, m, n, k, esize = _gemm_operands(
        a, b, fmt, row_scale, col_scale, out, WGMMA_FORMATS, 128, n_align=8
    )
    if cs is not None and cs.ptr % 8:
        raise ValueError(
            f"col_scale: expected an 8-byte aligned address, got {cs.ptr:#x}; pass a fresh array"
        )
    target = arch.device_target(at.device)
    if target != "sm_90a":
        raise RuntimeError(f"gemm_wgmma needs sm_90a (H100 / H200), this GPU is {target}")
    if tile_m not in (None, 128, 192):
        raise ValueError(f"tile_m: expected None, 128 or 192, got {tile_m!r}")
    wg = 3 if tile_m == 192 else 2  # consumer warpgroups, 64 tile rows each
    variant_given = any(v is not None for v in (tile_n, promote, cluster, pingpong, tile_m))
    scaled = rs is not None or cs is not None  # the swap-AB kernels apply no scales
    if SMALL_M_SWAP_AB and fmt == "bf16" and m <= 136 and not variant_given and not scaled:
        return _launch_small_m(at, bt, ot, m, n, k, None, workspace)
    if wg == 3:
        tile_n, promote, cluster, pingpong = _m192_config(fmt, tile_n, promote, cluster, pingpong)
    else:
        tile_n, promote, cluster, pingpong = wgmma_config(
            fmt, m, tile_n, promote, cluster, pingpong, n=n
        )
    tdt = "bfloat16" if fmt == "bf16" else "uint8"
    desc_a = _tensor_map(at.ptr, tdt, k, m, k * esize, 64 * wg)
    desc_b = _tensor_map(bt.ptr, tdt, k, n, k * esize, tile_n // cluster)
    # epilogue TMA-store boxes: 64 x 64 (128B swizzle), or 32 x 64 (64B) for n224 tiles
    if (tile_n // 2 // 4) % 8 == 0:
        desc_c = _tensor_map(ot.ptr, "bfloat16", n, m, n * 2, 64)
    else:
        desc_c = _c_map_w32(ot.ptr, n, m)
    name = _wgmma_name(fmt, tile_n, promote, cluster, pingpong, wg)
    kernel = jit.get_kernel(GEMM_WGMMA, name, target)
    vc = wgmma_vec_cols(fmt, tile_n, pingpong)
    # (the 192 x 192 tiles store through one staging box per warpgroup: gemm_wgmma.cu)
    smem = wgmma_smem_bytes(
        tile_n, full_staging=vc > 0, wg=wg, vec=scale_vec_bytes(vc), boxes=1 if wg == 3 else 2
    )
    # the last partial round split over k (in the variants built with it)
    has_tail = wg == 2 and wgmma_has_tail(tile_n, promote, pingpong)
    k_tiles = k * esize // 128
    plan = tail_plan(kernel, m, n, tile_n, cluster, smem, at.device, k_tiles, split=has_tail, wg=wg)
    buf = plan_workspace(plan, None, at.device, [at], "")
    launch(
        kernel,
        plan.grid,
        128 * (wg + 1),
        (desc_a, desc_b, desc_c, i32(m), i32(n), i32(k * esize), ptr(rs), ptr(cs))
        + tail_args(plan, buf),
        tensors=[t for t in (at, bt, rs, cs, ot) if t is not None],
        smem=smem,
        pdl=True,
    )
    return interop.export(ot)


def _m192_config(fmt, tile_n, promote, cluster, pingpong) -> tuple[int, int, int, bool]:
    """The variant of gemm_wgmma's benchmark-only 192 x 192 bf16 tiles (``tile_m=192``) as
    (tile N, promotion, cluster, ping-pong); a ValueError for anything else."""
    cluster = 2 if cluster is None else cluster
    if (
        fmt != "bf16"
        or tile_n not in (None, 192)
        or promote not in (None, 0, False)
        or pingpong not in (None, False)
        or cluster not in WGMMA_M192_CLUSTERS
    ):
        raise ValueError(
            "tile_m=192: expected fmt='bf16', tile_n 192 or unset, no promotion, no ping-pong, "
            f"cluster in {WGMMA_M192_CLUSTERS}; got fmt={fmt!r}, tile_n={tile_n!r}, "
            f"promote={promote!r}, pingpong={pingpong!r}, cluster={cluster!r}"
        )
    return 192, 0, cluster, False


#: The swap-AB small-M kernels (bf16): activation tile N 16 (M <= 16) or 136 (M <= 136), with
#: and without split-K, and the split-K reduction.
GEMM_SWAPAB = jit.ModuleSpec(
    "kernels/gemm_swapab.cu",
    tuple(
        f"h3::gemm_swapab_sm90<{bn}, {str(sk).lower()}>" for bn in (16, 136) for sk in (False, True)
    )
    + ("h3::splitk_reduce_bf16",),
)
#: Whether gemm_wgmma sends bf16 problems with M <= 136 (no row / column scales, no explicit
#: variant) to :func:`gemm_wgmma_small_m`. GPU time on the H200 (2026-12-01, graph replays):
#: 0.69-1.07x cuBLAS at M = 1 / 16 / 129, against 0.42-0.65x for the 128-row engine tiles. An
#: eager call pays two launches (~25 us of host time each), so in eager code the N = 5376
#: shapes (O, FC2) took 0.075 ms against the engine's 0.057.
SMALL_M_SWAP_AB = True
#: The per-SM weight stream the split choice assumes (bytes/s): cuBLAS's swap-AB kernel moved
#: 4.06 TB/s over 132 SMs at M = 1 on the H200 (Nsight Compute, 2026-12-01).
_SM_STREAM = 30e9


@functools.lru_cache(maxsize=256)
def small_m_splits(m: int, n: int, k: int, sms: int) -> int:
    """Split-K factor of the swap-AB GEMM: the one (1..8, at most one per 64-deep k-tile) that
    minimises a modelled time: rounds of units over the SMs x one unit's weight bytes at
    ``_SM_STREAM`` per SM, plus the fp32 partials written and read back (S x M x N x 8 bytes at
    4 TB/s) and a reduction launch (~3 us) when split."""
    tiles = -(-n // 128)
    k_tiles = k // 64

    def cost(s: int) -> float:
        units = tiles * s
        t = -(-units // sms) * (128 * k * 2 / s) / _SM_STREAM
        if s > 1:
            t += s * m * n * 8 / 4e12 + 3e-6
        return t

    return min(range(1, min(8, k_tiles) + 1), key=cost)


@arch.on_operand_device("a")
def gemm_wgmma_small_m(a, b, *, out=None, splits=None, workspace=None):
    """bf16 ``out = a @ b^T`` for small M (M <= 136) on the sm_90a engine with the operands
    swapped: the weight ``b`` [N, K] streams as the wgmma's 64-row side (128-row tiles), the
    activation ``a`` [M, K] is one n16 (M <= 16) or n136 tile, and split-K spreads each weight
    tile over ``splits`` units (chosen by :func:`small_m_splits`; the fp32 partials go to
    ``workspace`` and a second kernel sums them in split order, so results are bitwise
    deterministic).

    Args:
        a: bf16 ``[M, K]``, 1 <= M <= 136, K a multiple of 64.
        b: bf16 ``[N, K]``, N a multiple of 8.
        out: optional bf16 ``[M, N]``.
        splits: optional split-K factor (1 .. K / 64).
        workspace: optional fp32 ``[splits * M * N]`` for the partials (splits > 1); without it
            one is allocated per call.

    H200-verified (2026-12-01: M = 1 .. 136, N and K tails, uneven splits, bitwise repeatable);
    :func:`gemm_wgmma` routes bf16 M <= 136 here (``SMALL_M_SWAP_AB``).
    """
    at, bt, _, _, ot, m, n, k, _ = _gemm_operands(
        a, b, "bf16", None, None, out, WGMMA_FORMATS, 128, n_align=8
    )
    if m > 136:
        raise ValueError(f"a: expected M <= 136 for the swap-AB path, got M = {m}; use gemm_wgmma")
    target = arch.device_target(at.device)
    if target != "sm_90a":
        raise RuntimeError(f"gemm_wgmma_small_m needs sm_90a (H100 / H200), this GPU is {target}")
    return _launch_small_m(at, bt, ot, m, n, k, splits, workspace)


def _launch_small_m(at, bt, ot, m, n, k, splits, workspace):
    """The swap-AB launches on checked operands (sm_90a, M <= 136); ``splits`` None: the model's
    choice. Shared by :func:`gemm_wgmma_small_m` and :func:`gemm_wgmma`'s small-M route, so the
    route does not check its operands twice."""
    target = arch.device_target(at.device)
    sms = arch.sm_count(at.device)
    if splits is None:
        splits = small_m_splits(m, n, k, sms)
    if not 1 <= splits <= k // 64:
        raise ValueError(f"splits: expected 1 .. {k // 64} (K / 64), got {splits}")
    ws = None
    if splits > 1:
        ws = checks.output_or_empty(workspace, "workspace", "float32", (splits * m * n,), at)
        checks.check_disjoint(
            checks.given(("workspace",), (workspace,), (ws,)), [("a", at), ("b", bt), ("out", ot)]
        )
    bn = 16 if m <= 16 else 136
    desc_w = _tensor_map(bt.ptr, "bfloat16", k, n, k * 2, 128)
    desc_x = _tensor_map(at.ptr, "bfloat16", k, m, k * 2, bn)
    name = f"h3::gemm_swapab_sm90<{bn}, {str(splits > 1).lower()}>"
    kernel = jit.get_kernel(GEMM_SWAPAB, name, target)
    smem = wgmma_smem_bytes(bn)
    units = -(-n // 128) * splits
    launch(
        kernel,
        min(units, sms),
        384,
        (desc_w, desc_x, i32(n), i32(m), i32(k * 2), i32(splits), ptr(ot), ptr(ws)),
        tensors=[t for t in (at, bt, ot, ws) if t is not None],
        smem=smem,
    )
    if splits > 1:
        red = jit.get_kernel(GEMM_SWAPAB, "h3::splitk_reduce_bf16", target)
        count = m * n
        launch(
            red,
            min(-(-count // 256), 4 * sms),
            256,
            (ptr(ws), i32(splits), i64(count), ptr(ot)),
            tensors=[ws, ot],
        )
    return interop.export(ot)


GEMM_MMA_TMA = jit.ModuleSpec(
    "kernels/gemm_mma_tma.cu",
    tuple(
        f"h3::gemm_mma_tma_smxx<{code}{ws}>"
        for ws in ("", ", true", ", false, 1")
        for code, _, _, _ in GEMM_FORMATS.values()
    ),
)


def mt_smem(plan: tuple[int, int, int]) -> int:
    """Dynamic shared memory of the mma.sync skeleton under a plan ``(k-tile bytes, stages,
    scratch bytes)`` (h3/gemm_mma_tma.cuh's MtCfg::kSmemBytes)."""
    bk, stages, scratch = plan
    return stages * (128 + 256) * bk + scratch + 2 * stages * 8 + 1024


#: The mma.sync skeleton's shared-memory plans (h3/gemm_mma_tma.cuh): MT_BIG is Hopper-only
#: (225 KiB); the sm_120 plans fit the 99 KiB of sm_120 boards (arch.SM120_SMEM_LIMIT) and are
#: what every operator's mma.sync kernel runs, on the H200 too.
MT_BIG = (128, 4, 32 * 1024)
MT_SM120 = (64, 4, 0)
MT_SM120_SCRATCH = (64, 3, 16 * 1024)  # the pre-attention epilogue's RoPE exchange


def mt_maps(a_ptr: int, b_ptr: int, dtype: str, k: int, m: int, n: int, plan) -> tuple:
    """The A ``[m, k]`` / B ``[n, k]`` tensor maps of the mma.sync skeleton under ``plan``
    (boxes of the plan's k-tile bytes x 128 rows for A, x 256 rows for B)."""
    stride = k * (2 if dtype == "bfloat16" else 1)
    return (
        _tensor_map(a_ptr, dtype, k, m, stride, 128, plan[0]),
        _tensor_map(b_ptr, dtype, k, n, stride, 256, plan[0]),
    )


@arch.on_operand_device("a")
def gemm_mma_tma(
    a,
    b,
    *,
    fmt: str = "bf16",
    row_scale=None,
    col_scale=None,
    out=None,
    ws: bool | None = None,
    sm120_plan: bool | None = None,
):
    """The same contract as :func:`gemm_mma_sync` on the engine's TMA skeleton with mma.sync
    consumers (sm_90a and sm_120a; ``cuda_src/kernels/gemm_mma_tma.cu``): persistent, TMA
    loads into a 4-stage mbarrier ring, eight warps of 64 x 64 on a 128 x 256 tile.
    ``ws=True`` (default): a producer warpgroup's thread 0 issues the loads, up to four k-tiles
    ahead, 7-12% faster on the H200 (2026-12-02, NOTES.md session 15); ``ws=False``: thread 0
    of the consumers does, three k-tiles ahead (the form the operators' mma.sync kernels use).
    Both give the same bits.

    ``sm120_plan`` (None: when the device's opt-in shared memory is below the 225 KiB of the
    128-byte k-tile ring, as on sm_120 boards): the plan that fits 99 KiB (64-byte k-tiles, 4
    stages), built in the thread-0 form only (sm_120a has no setmaxnreg, and the producer
    warpgroup's 168-register cap spills its block-scaled form); True forces it on the H200,
    where it is tested. ``ws=None``: the producer warpgroup unless the sm_120 plan runs.

    K * element size must be a multiple of 128 bytes; N a multiple of 8. H200-verified
    (2026-12-01; sm_90a runs FP8 as f16 MMAs); the sm_120a form is compile- and SASS-checked.
    """
    at, bt, rs, cs, ot, m, n, k, esize = _gemm_operands(
        a, b, fmt, row_scale, col_scale, out, GEMM_FORMATS, 128, n_align=8
    )
    if cs is not None and cs.ptr % 8:
        raise ValueError(
            f"col_scale: expected an 8-byte aligned address, got {cs.ptr:#x}; pass a fresh array"
        )
    code, min_sm, needs_120, opfmt = GEMM_FORMATS[fmt]
    target = arch.device_target(at.device)
    if arch.sm_number(target) < 90 or (needs_120 and not target.startswith("sm_12")):
        raise RuntimeError(
            f"gemm_mma_tma fmt={fmt!r} needs sm_90a or sm_120a, this GPU is {target}"
        )
    if sm120_plan is None:
        sm120_plan = arch.smem_optin(at.device) < mt_smem(MT_BIG)
    if ws is None:
        ws = not sm120_plan
    if sm120_plan and ws:
        raise ValueError(
            "gemm_mma_tma: the sm_120 plan is built in the thread-0 form only; pass ws=False "
            "(or leave ws=None), or sm120_plan=False on a GPU with 225 KiB of shared memory"
        )
    plan = MT_SM120 if sm120_plan else MT_BIG
    tdt = "bfloat16" if opfmt == "bf16" else "uint8"
    desc_a, desc_b = mt_maps(at.ptr, bt.ptr, tdt, k, m, n, plan)
    suffix = ", false, 1" if sm120_plan else (", true" if ws else "")
    kernel = jit.get_kernel(GEMM_MMA_TMA, f"h3::gemm_mma_tma_smxx<{code}{suffix}>", target)
    tiles = -(-m // 128) * -(-n // 256)
    launch(
        kernel,
        min(tiles, arch.sm_count(at.device)),
        384 if ws else 256,
        (desc_a, desc_b, i32(m), i32(n), i32(k * esize), ptr(rs), ptr(cs), ptr(ot)),
        tensors=[t for t in (at, bt, rs, cs, ot) if t is not None],
        smem=mt_smem(plan),
    )
    return interop.export(ot)


def nvfp4_dequantize_bf16(codes, sf, out, *, swizzled: bool) -> None:
    """``out[r, k] = e2m1(codes[r, k]) * ue4m3(sf[r, k // 16])`` (no global scale; exact in bf16)
    for uint8 codes ``[R, K/2]``, scales linear ``[R, K/16]`` or 128x4-swizzled, bf16 ``out``
    ``[R, K]`` (checked by the caller); a launch on the current stream."""
    from ..weights import _THREADS, _codec_grid
    from ..weights import _kernel as quant_kernel

    r, k = out.shape
    launch(
        quant_kernel("nvfp4_dequant_bf16_smxx", out.device),
        _codec_grid(r, k, out.device),
        _THREADS,
        (ptr(codes), ptr(sf), i64(r), i32(k), i32(1 if swizzled else 0), ptr(out)),
        tensors=[codes, sf, out],
    )


def nvfp4_bf16_tile(m: int, n: int, wave_tile: bool) -> tuple[int, int]:
    """The Hopper NVFP4 path's engine variant ``(tile_n, cluster)``: 128 x 256 tiles (or 224,
    see :func:`nvfp4_bf16_operands`' ``wave_tile``) in clusters of two above M = 256, else
    128 x 128 alone."""
    cluster = 2 if m > 256 else 1
    return ((bf16_tile_n(m, n) if wave_tile else 256) if cluster == 2 else 128), cluster


def nvfp4_bf16_operands(
    aq, asf, wq, wsf, a_bf, w_bf, *, wave_tile: bool = False, dequant_a: bool = True
):
    """The Hopper NVFP4 path's operands (the pre-attention and out_proj ops): ``a' = e2m1 * sf``
    of the activation (linear scales) into ``a_bf`` [M, K] and of the weight (128x4-swizzled
    scales) into ``w_bf`` [N, K], both exact in bf16, then the bf16 engine's tile choice.

    Args:
        wave_tile: above M = 256, take tile N 224 where :func:`bf16_tile_n` says it fills the
            last wave better (the caller then has an n224 kernel); else 256 (the pre-attention's
            two heads per fragment).
        dequant_a: launch the dequantization of a' (False: the GEMM launch writes a' itself, the
            NVFP4 out_proj's single-launch form).

    Returns:
        ``(desc_a, desc_b, tile_n, cluster)``: the A / B tensor maps and the engine variant (128 x
        256 or 224 tiles in clusters of two above M = 256, else 128 x 128 alone).
    """
    (m, k), n = a_bf.shape, w_bf.shape[0]
    if dequant_a:
        nvfp4_dequantize_bf16(aq, asf, a_bf, swizzled=False)
    nvfp4_dequantize_bf16(wq, wsf, w_bf, swizzled=True)
    tile_n, cluster = nvfp4_bf16_tile(m, n, wave_tile)
    desc_a = _tensor_map(a_bf.ptr, "bfloat16", k, m, k * 2, 128)
    desc_b = _tensor_map(w_bf.ptr, "bfloat16", k, n, k * 2, tile_n // cluster)
    return desc_a, desc_b, tile_n, cluster


GEMM_NVFP4 = jit.ModuleSpec("kernels/gemm_nvfp4.cu", ("h3::gemm_nvfp4_smxx",))


def nv_smem(plan: tuple[int, int, int]) -> int:
    """Dynamic shared memory of the NVFP4 skeleton (h3/gemm_nvfp4.cuh's NvSmem) under a
    plan ``(k-tile code bytes, stages, scratch bytes)``."""
    bk, stages, scratch = plan
    return stages * (128 * bk + 256 * bk + 128 * 16 + 2 * 16 * bk) + scratch + 2 * stages * 8 + 1024


#: The NVFP4 kernels' plans: 64-byte k-tiles, 3 stages (kNvSm120*), fitting sm_120's 99 KiB;
#: the pre-attention epilogue adds 8 KiB of scratch.
NV_SM120 = (64, 3, 0)
NV_SM120_PA = (64, 3, 8 * 1024)


def nv_maps(aq_ptr: int, bq_ptr: int, kh: int, m: int, n: int) -> tuple:
    """The NVFP4 code maps (A ``[m, kh]``, B ``[n, kh]`` bytes) of the sm_120 plans."""
    return (
        _tensor_map(aq_ptr, "uint8", kh, m, kh, 128, NV_SM120[0]),
        _tensor_map(bq_ptr, "uint8", kh, n, kh, 256, NV_SM120[0]),
    )


def _scalar_arg(value, name: str, dev: int):
    """A scalar given as a Python float or a one-element fp32 device array: (host value, device
    tensor or None). Device scalars are read by the kernel, never on the host."""
    if value is None:
        return 0.0, None
    if isinstance(value, (int, float, np.floating)) and not isinstance(value, bool):
        v = float(value)
        if not checks.fp32_positive_finite(v):
            raise ValueError(
                f"{name}: expected a positive finite scale (also in fp32, as the kernels read "
                f"it), got {value!r}"
            )
        return v, None
    t = interop.as_tensor(value, name)
    checks.check_device_scalar(t, name, dev)
    return 0.0, t


def check_nvfp4_weight(w_q, w_sf, w_global_scale, act_global_scale, name: str, n: int, k: int, dev):
    """An NVFP4 op's weight operands and activation global scale: ``{name}_q`` uint8 codes
    ``[n, k/2]``, ``{name}_sf`` contiguous 128x4-swizzled ue4m3 scales (n * k/16 bytes, 16-byte
    aligned), the weight's global scale (a positive float or a one-element fp32 device array;
    required), ``act_global_scale`` a required one-element fp32 device array; all on the operands'
    device. Returns ``(wq, wsf, gw_host, gw_t, ga)``."""
    wq = interop.as_tensor(w_q, f"{name}_q")
    checks.check_tensor(wq, f"{name}_q", "uint8", (n, k // 2), dev)
    helper = f"quantize_minimax_h3_{name.split('_')[0]}_weight_nvfp4"
    wsf = interop.as_tensor(w_sf, f"{name}_sf")
    checks.check_dtype(wsf, f"{name}_sf", "uint8")
    checks.check_contiguous(wsf, f"{name}_sf")
    if wsf.size != n * (k // 16):
        raise ValueError(
            f"{name}_sf: expected {n * (k // 16)} bytes of 128x4-swizzled scales, got "
            f"{wsf.size}; pass the scales from {helper}"
        )
    # (sm_120a copies them with cp.async.bulk, which needs 16-byte aligned sources)
    checks.check_aligned(wsf, f"{name}_sf", 16)
    checks.check_device(wsf, f"{name}_sf", dev)
    if w_global_scale is None:  # (alpha would be 1 / (act_global_scale * 0): inf)
        raise TypeError(
            f"{name}_global_scale: expected a float or a one-element fp32 device array, got "
            f"None; pass the weight's global scale from {helper}"
        )
    gw_host, gw_t = _scalar_arg(w_global_scale, f"{name}_global_scale", dev)
    ga = checks.device_global_scale(act_global_scale, dev)
    return wq, wsf, gw_host, gw_t, ga


@arch.on_operand_device("a_q")
def gemm_nvfp4(
    a_q,
    a_sf,
    b_q,
    b_sf,
    *,
    alpha=None,
    a_global_scale=None,
    b_global_scale=None,
    out=None,
):
    """``out = bf16(acc * alpha)``, ``acc = sum_k (e2m1(a) * sf_a) (e2m1(b) * sf_b)`` in fp32:
    the NVFP4 x NVFP4 GEMM (``cuda_src/kernels/gemm_nvfp4.cu``).

    Args:
        a_q: uint8 ``[M, K/2]`` packed e2m1 codes (element 2j in the low nibble of byte j).
        a_sf: uint8 ``[M, K/16]`` linear ue4m3 block scales.
        b_q: uint8 ``[N, K/2]``; b_sf: uint8 128x4-swizzled scales, ``ceil(N/128)*128 * K/16``
            bytes (any contiguous uint8 array of that size), N a multiple of 128.
        alpha: fp32 scale of the accumulator (a float or a one-element device array); when
            omitted, ``1 / (a_global_scale * b_global_scale)`` is formed on the device.
        a_global_scale: one-element fp32 device array (with ``alpha`` omitted).
        b_global_scale: float or one-element fp32 device array (with ``alpha`` omitted).
        out: optional bf16 ``[M, N]``.

    K must be a multiple of 256. sm_120a runs the block-scaled ``kind::mxf4nvf4`` MMA; sm_90a
    dequantizes in registers to bf16 (exact) and runs bf16 MMAs — a correct but slow reference
    of the data path. H200-verified (2026-12-01); the sm_120a form is compile- and SASS-checked.
    """
    at = interop.as_tensor(a_q, "a_q")
    dev = at.device
    checks.check_dtype(at, "a_q", "uint8")
    if len(at.shape) != 2 or at.shape[0] < 1 or (2 * at.shape[1]) % 256:
        raise ValueError(
            f"a_q: expected packed codes [M, K/2] with K a multiple of 256, got {list(at.shape)}"
        )
    m, kh = at.shape
    k = 2 * kh
    checks.check_tensor(at, "a_q", "uint8", (m, kh), dev)
    ast = interop.as_tensor(a_sf, "a_sf")
    checks.check_tensor(ast, "a_sf", "uint8", (m, k // 16), dev)
    bt = interop.as_tensor(b_q, "b_q")
    checks.check_dtype(bt, "b_q", "uint8")
    if len(bt.shape) != 2 or bt.shape[1] != kh or bt.shape[0] < 1 or bt.shape[0] % 128:
        raise ValueError(
            f"b_q: expected packed codes [N, {kh}] with N a multiple of 128, got {list(bt.shape)}"
        )
    n = bt.shape[0]
    checks.check_tensor(bt, "b_q", "uint8", (n, kh), dev)
    bst = interop.as_tensor(b_sf, "b_sf")
    checks.check_dtype(bst, "b_sf", "uint8")
    checks.check_contiguous(bst, "b_sf")
    c4 = k // 64
    if bst.size != n * c4 * 4:
        raise ValueError(
            f"b_sf: expected {n * c4 * 4} bytes of 128x4-swizzled scales (N={n}, K/16={k // 16}), "
            f"got {bst.size}; pass the scales from quantize_minimax_h3_*_weight_nvfp4"
        )
    checks.check_aligned(bst, "b_sf", 16)
    checks.check_device(bst, "b_sf", dev)
    alpha_host, alpha_t = _scalar_arg(alpha, "alpha", dev)
    ga_t = gw_t = None
    gw_host = 0.0
    if alpha is None:
        if a_global_scale is None or b_global_scale is None:
            raise ValueError(
                "alpha: pass alpha, or both a_global_scale (device [1]) and b_global_scale"
            )
        _, ga_t = _scalar_arg(a_global_scale, "a_global_scale", dev)
        if ga_t is None:
            raise ValueError(
                "a_global_scale: expected a one-element fp32 device array (read on the device)"
            )
        gw_host, gw_t = _scalar_arg(b_global_scale, "b_global_scale", dev)
    ot = checks.output_or_empty(out, "out", "bf16", (m, n), at)
    checks.check_disjoint(
        checks.given(("out",), (out,), (ot,)),
        [
            ("a_q", at),
            ("a_sf", ast),
            ("b_q", bt),
            ("b_sf", bst),
            ("alpha", alpha_t),
            ("a_global_scale", ga_t),
            ("b_global_scale", gw_t),
        ],
    )
    target = arch.device_target(dev)
    if target not in ("sm_90a", "sm_120a"):
        raise RuntimeError(f"gemm_nvfp4 needs sm_90a or sm_120a, this GPU is {target}")
    from ..core import tma

    desc_a, desc_b = nv_maps(at.ptr, bt.ptr, kh, m, n)
    desc_sfa = tma.encode_2d(ast.ptr, "uint8", k // 16, m, k // 16, 16, 128)
    kernel = jit.get_kernel(GEMM_NVFP4, "h3::gemm_nvfp4_smxx", target)
    tiles = -(-m // 128) * -(-n // 256)
    launch(
        kernel,
        min(tiles, arch.sm_count(dev)),
        256,
        (
            desc_a,
            desc_b,
            desc_sfa,
            ptr(bst),
            i32(c4),
            i32(m),
            i32(n),
            i32(kh),
            ptr(alpha_t),
            ptr(ga_t),
            ptr(gw_t),
            f32(gw_host),
            f32(alpha_host),
            ptr(ot),
        ),
        tensors=[t for t in (at, ast, bt, bst, alpha_t, ga_t, gw_t, ot) if t is not None],
        smem=nv_smem(NV_SM120),
    )
    return interop.export(ot)


TMA_PROBE = jit.ModuleSpec("kernels/tma_probe.cu", ("h3::tma_probe_sm90",))


def tma_probe(mat, x0: int, y0: int, box_cols: int, box_rows: int, swizzle: int = 0):
    """Load the ``[box_rows, box_cols]`` box at column ``x0``, row ``y0`` of a uint8 matrix
    through one TMA tile load (zeros past the edges); a check of the tensor-map encoding and the
    mbarrier protocol. Needs sm_90+. Returns uint8 ``[box_rows, box_cols]`` (shared-memory order,
    i.e. swizzled when ``swizzle`` > 0)."""
    from ..core import tma

    t = interop.as_tensor(mat, "mat")
    checks.check_dtype(t, "mat", "uint8")
    if len(t.shape) != 2:
        raise ValueError(f"mat: expected a 2-D uint8 matrix, got shape {list(t.shape)}")
    checks.check_contiguous(t, "mat")
    target = arch.device_target(t.device)
    if arch.sm_number(target) < 90:
        raise RuntimeError(f"TMA needs sm_90 or newer, this GPU is {target}")
    rows, cols = t.shape
    if box_rows * box_cols > 16384:
        raise ValueError("box: at most 16384 bytes")
    desc = tma.encode_2d(t.ptr, "uint8", cols, rows, cols, box_cols, box_rows, swizzle)
    out = interop.empty((box_rows, box_cols), "uint8", like=t)
    launch(
        jit.get_kernel(TMA_PROBE, "h3::tma_probe_sm90", target),
        1,
        128,
        (desc, i32(x0), i32(y0), i32(box_rows * box_cols), ptr(out)),
        tensors=[t, out],
    )
    return interop.export(out)
