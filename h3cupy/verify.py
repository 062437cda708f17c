"""Kernel-vs-reference checks, one function per operator family. Used by ``tests/`` (which
assert every returned :class:`~h3cupy.testing.Check` passed) and by ``python -m h3cupy.selftest``
(which prints them as a table).

Every check draws fresh random inputs in the model's distributions, poisons each output before
the launch, and compares against the NumPy references with the SPEC.md section 8 bounds.
"""

from __future__ import annotations

import numpy as np

from . import formats, reference, weights
from .ops import prologue as prologue_op
from .reference import inputs as ref_inputs
from .reference._common import rms_normalize
from .testing import Check, bf16_close, download, exact, graph_checks, poison, upload

D = 5376


def _device_inputs(m: int, rows: int, index_dtype, rng: np.random.Generator):
    host = ref_inputs.prologue_inputs(m, rows=rows, k=D, index_dtype=index_dtype, rng=rng)
    if np.dtype(index_dtype) == np.int64 and m >= 4:
        # NOTE: extreme int64 values must be guarded too (never truncated to a valid int32).
        host["adaln_index"][m - 1] = -(2**63)
        host["adaln_index"][m - 2] = 2**40 + 1
    keys = ("x", "x_norm_weight", "adaln_scale", "adaln_shift", "adaln_index")
    dev = {k: upload(host[k]) for k in keys}
    return host, dev


def check_prologue(
    m: int,
    rows: int,
    index_dtype=np.int64,
    rng: np.random.Generator | None = None,
    formats_: tuple[str, ...] = ("bf16", "fp8", "nvfp4"),
) -> list[Check]:
    """RMSNorm + AdaLN prologue in every output format at one shape.

    * bf16 activation: identical to the float64-rstd reference on >= 99.9% of elements, and
      elsewhere within one bf16 step at each rounding point:
      |a - ref| <= ulp(n_ref)*|s1| + ulp(max(|a|, |ref|)) (upstream's stage-1 form).
      (The kernel's MUFU rsqrt and fp32 summation order move rstd by ~1 fp32 ulp, which flips the
      bf16 rounding of n only near a tie; where n*s1 nearly cancels shift, that one ulp of n is
      many ulps of a, so the bound is stated at n's rounding point, as upstream's stage-1 tests
      do.)
    * FP8 / NVFP4: codes and scales bit-exact to formats.py applied to the kernel's own bf16
      activation (SPEC section 8: quantized intermediates are bit-exact to the host quantizer on
      the same bf16 values); the activation written in a quantized mode must equal the bf16 mode's;
    * rows with an invalid index: exactly zero.
    """
    import cupy

    rng = rng or np.random.default_rng()
    host, dev = _device_inputs(m, rows, index_dtype, rng)
    args = (
        dev["x"],
        dev["x_norm_weight"],
        dev["adaln_scale"],
        dev["adaln_shift"],
        dev["adaln_index"],
    )
    shape = f"M={m} rows={rows} {np.dtype(index_dtype).name}"
    ref_a = reference.prologue(
        host["x"],
        host["x_norm_weight"],
        host["adaln_scale"],
        host["adaln_shift"],
        host["adaln_index"],
        eps=1e-5,
    )
    idx = host["adaln_index"].astype(np.int64)
    invalid = (idx < 0) | (idx >= rows)
    # One bf16 step of n (rstd moved by ~1 fp32 ulp flips n's rounding near a tie) moves a by at
    # most ulp(n)*|s1| before a's own rounding; the two roundings of a (kernel, reference) add at
    # most ulp(max(|a|, |ref|)). Invalid rows are checked separately for exact zeros.
    n_ref = rms_normalize(host["x"], host["x_norm_weight"], 1e-5)
    s1 = formats.bf16_round(formats.bf16_round(host["adaln_scale"]) + np.float32(1.0))
    n_step = formats.bf16_ulp(n_ref) * np.abs(s1[np.clip(idx, 0, rows - 1)])
    del n_ref

    def bound(got: np.ndarray) -> np.ndarray:
        return n_step + formats.bf16_ulp(np.maximum(np.abs(got), np.abs(ref_a)))

    out: list[Check] = []

    a_bf16 = None
    if "bf16" in formats_:
        a = cupy.empty((m, D), dtype=formats.BF16)
        poison(a)
        prologue_op.norm_adaln(*args, out_format="bf16", a=a)
        a_bf16 = download(a).astype(np.float32)
        out += bf16_close("prologue bf16", shape, a_bf16, ref_a, bound(a_bf16))
        out.append(
            Check(
                "prologue bf16",
                shape,
                "invalid rows nonzero",
                int(np.count_nonzero(a_bf16[invalid])),
                0,
                not np.any(a_bf16[invalid]),
                f"{int(invalid.sum())} invalid rows",
            )
        )

    g = np.float32(formats.nvfp4_global_scale_from_amax(8.0))  # activation amax 8 (upstream)
    for fmt in formats_:
        if fmt == "bf16":
            continue
        a = cupy.empty((m, D), dtype=formats.BF16)
        if fmt == "fp8":
            q = cupy.empty((m, D), dtype=np.uint8)
            s = cupy.empty((m,), dtype=np.float32)
            gd = None
        else:
            q = cupy.empty((m, D // 2), dtype=np.uint8)
            s = cupy.empty((m, D // 16), dtype=np.uint8)
            gd = cupy.asarray(np.array([g], np.float32))
        poison(a, q, s)
        prologue_op.norm_adaln(*args, out_format=fmt, act_global_scale=gd, a=a, q=q, scale=s)
        ka = download(a).astype(np.float32)
        kq, ks = download(q), download(s)
        name = f"prologue {fmt}"
        if a_bf16 is not None:
            out.append(
                exact(name, shape, "a vs bf16-mode a", ka.view(np.uint32), a_bf16.view(np.uint32))
            )
        else:
            out += bf16_close(name, shape, ka, ref_a, bound(ka))
        if fmt == "fp8":
            rq, rs = formats.fp8_quantize_per_token(ka)
        else:
            rq, rs = formats.nvfp4_quantize(ka, g)
        out.append(exact(name, shape, "codes", kq, rq))
        out.append(exact(name, shape, "scales", ks, rs))
    return out


def check_weight_helpers(rng: np.random.Generator | None = None) -> list[Check]:
    """Device weight helpers against their NumPy twins, bit for bit, at the H3 shapes."""
    import cupy

    rng = rng or np.random.default_rng()
    out: list[Check] = []

    def bf16_dev(shape, std):
        h = formats.to_bf16(rng.normal(0.0, std, size=shape).astype(np.float32))
        return h, cupy.asarray(h)

    fp8_helpers = [
        ("quantize_minimax_h3_qkv_weight_fp8", (21504, D), 0.01),
        ("quantize_minimax_h3_o_weight_fp8", (D, 7168), 0.01),
        ("prepare_minimax_h3_fc2_weight_fp8", (D, 14336), 0.02),
        ("prepare_minimax_h3_fc1_weight_fp8", (28672, D), 0.02),
    ]
    for name, shape, std in fp8_helpers:
        wh, wd = bf16_dev(shape, std)
        q, s = getattr(weights, name)(wd)
        rq, rs = getattr(reference, name)(wh)
        sh = f"{shape[0]}x{shape[1]}"
        out.append(exact(name, sh, "codes", download(q).view(np.uint8), rq.view(np.uint8)))
        out.append(exact(name, sh, "scales", download(s), rs))
        del wd, q, s

    for name, shape in [
        ("quantize_minimax_h3_qkv_weight_nvfp4", (21504, D)),
        ("quantize_minimax_h3_o_weight_nvfp4", (D, 7168)),
    ]:
        wh, wd = bf16_dev(shape, 0.01)
        q, sf, g = getattr(weights, name)(wd)
        rq, rsf, rg = getattr(reference, name)(wh)
        sh = f"{shape[0]}x{shape[1]}"
        out.append(exact(name, sh, "global scale", download(g), np.array([rg], np.float32)))
        out.append(exact(name, sh, "codes", download(q), rq))
        out.append(exact(name, sh, "swizzled scales", download(sf), rsf))
        del wd, q, sf

    # fp4_quantize: linear and swizzled, float and device global scale, a ragged row count, and
    # rows that end inside a warp's 1024-value task (K = 5376: 5.25 tasks; K = 656: 0.64)
    for rows, k, swz, dev_g in [
        (300, 7168, True, True),
        (129, 7168, False, False),
        (4097, 7168, True, False),
        (257, 5376, True, False),
        (33, 656, False, True),
    ]:
        ah, ad = bf16_dev((rows, k), 0.5)
        gval = np.float32(
            formats.nvfp4_global_scale_from_amax(float(np.abs(ah.astype(np.float32)).max()))
        )
        gd = cupy.asarray(np.array([gval], np.float32)) if dev_g else float(gval)
        q, sf = weights.fp4_quantize(ad, gd, is_sf_swizzled_layout=swz)
        rq, rsf = reference.fp4_quantize(ah, gval, is_sf_swizzled_layout=swz)
        sh = f"{rows}x{k} swz={int(swz)} dev_g={int(dev_g)}"
        out.append(exact("fp4_quantize", sh, "codes", download(q), rq))
        out.append(exact("fp4_quantize", sh, "scales", download(sf), rsf))

    # e2m1 rounding at every tie and boundary: with g = 1 and a 6.0 in each block the block scale
    # is exactly 1.0 (ue4m3(6 * fp32(1/6)) = 1), so the codes are e2m1 of the values themselves.
    ties = [0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 5.5]
    tie_bits = formats.to_bf16(np.array(ties[:7], np.float32)).view(np.uint16)
    near = np.concatenate([tie_bits - 1, tie_bits + 1]).view(formats.BF16).astype(np.float32)
    vals = np.concatenate([np.array(ties + [6.0, 0.1, 0.26, 0.74], np.float32), near])
    vals = np.concatenate([vals, -vals])
    n_blocks = -(-vals.size // 15)
    blocks = np.zeros((n_blocks, 16), np.float32)
    blocks[:, 0] = 6.0
    flat = np.zeros(n_blocks * 15, np.float32)
    flat[: vals.size] = vals
    blocks[:, 1:] = flat.reshape(n_blocks, 15)
    th = formats.to_bf16(blocks.reshape(1, -1))
    q, sf = weights.fp4_quantize(cupy.asarray(th), 1.0, is_sf_swizzled_layout=False)
    rq, rsf = reference.fp4_quantize(th, np.float32(1.0), is_sf_swizzled_layout=False)
    out.append(exact("fp4_quantize", "e2m1 ties (g=1)", "codes", download(q), rq))
    out.append(exact("fp4_quantize", "e2m1 ties (g=1)", "scales", download(sf), rsf))

    # global scale from amax: host float and device array
    for amax in (3.7, 0.0, 1e-20, 448.0):
        want = np.array([formats.nvfp4_global_scale_from_amax(amax)], np.float32)
        got_h = download(weights.nvfp4_global_scale_from_amax(amax))
        got_d = download(
            weights.nvfp4_global_scale_from_amax(cupy.asarray(np.array([amax], np.float32)))
        )
        out.append(
            exact("nvfp4_global_scale_from_amax", f"amax={amax}", "host-float value", got_h, want)
        )
        out.append(
            exact("nvfp4_global_scale_from_amax", f"amax={amax}", "device value", got_d, want)
        )

    # QKV row order: a bf16 weight and its fp32 per-row scales
    wh, wd = bf16_dev((21504, D), 0.01)
    got = download(weights.qkv_rows_checkpoint_to_engine(wd))
    out.append(
        exact(
            "qkv_rows_checkpoint_to_engine",
            "21504x5376 bf16",
            "elements",
            got.view(np.uint16),
            formats.qkv_rows_checkpoint_to_engine(wh).view(np.uint16),
        )
    )
    sh_ = rng.random(21504, dtype=np.float32)
    got = download(weights.qkv_rows_checkpoint_to_engine(cupy.asarray(sh_)))
    out.append(
        exact(
            "qkv_rows_checkpoint_to_engine",
            "21504 fp32",
            "elements",
            got,
            formats.qkv_rows_checkpoint_to_engine(sh_),
        )
    )
    return out


def sample_rows(m: int, max_rows: int, rng: np.random.Generator) -> np.ndarray:
    """Rows a reference recomputes: all of them when M <= max_rows, else a random sample plus
    the first two, the last and the rows around the last full 128-row tile (the M tail). The ops
    are row-local, so a row subset of the reference is the reference of those rows."""
    if m <= max_rows:
        return np.arange(m)
    edge = (m // 128) * 128
    tail = np.array([0, 1, edge - 1, edge, m - 1])
    rows = np.unique(np.concatenate([rng.choice(m, max_rows, replace=False), tail]))
    return rows[(rows >= 0) & (rows < m)]


def pre_attention_bound(ref: np.ndarray) -> np.ndarray:
    """SPEC §8 bound of a bf16 op output: ``1e-2 + 1e-2*mag + 2*ulp_bf16(mag)``, with ``mag`` the
    max of |ref| and |partner| on the RoPE dims (a rotated pair can cancel). ``ref`` is
    ``[..., 128]`` per head."""
    mag = np.abs(ref.astype(np.float64))
    lo, hi = mag[..., :48], mag[..., 48:96]
    pair = np.maximum(lo, hi)
    mag = mag.copy()
    mag[..., :48] = pair
    mag[..., 48:96] = pair
    return 1e-2 + 1e-2 * mag + 2 * formats.bf16_ulp(mag)


def prologue_reference_args(host: dict, rows: np.ndarray) -> tuple:
    """The prologue's five arguments of a reference call on ``rows`` of ``host`` (x and the
    AdaLN index taken at those rows; the weight and the tables whole)."""
    return (
        host["x"][rows],
        host["x_norm_weight"],
        host["adaln_scale"],
        host["adaln_shift"],
        host["adaln_index"][rows],
    )


def bf16_pre_attention_reference(host: dict, rows: np.ndarray, positions=None) -> np.ndarray:
    """The float64 reference of ``minimax_h3_bf16_pre_attention`` on ``rows`` of ``host``
    (``reference.inputs.pre_attention_inputs``), unpacked: ``[rows, 56, 3, 128]``; ``positions``:
    the RoPE cache row of every token (None: identity)."""
    pos = rows if positions is None else np.asarray(positions)[rows]
    return reference.minimax_h3_bf16_pre_attention(
        *prologue_reference_args(host, rows),
        host["qkv_weight"],
        host["q_norm_weight"],
        host["k_norm_weight"],
        host["rope_cos_sin"],
        ulysses_degree=1,
        rope_positions=pos.astype(np.int64),
    )[0]


def check_pre_attention_bf16(
    m: int,
    ps: tuple[int, ...] = (1, 2, 4, 8),
    rng: np.random.Generator | None = None,
    *,
    positions: str = "identity",
    index_dtype=np.int64,
    max_ref_rows: int = 192,
) -> list[Check]:
    """``minimax_h3_bf16_pre_attention`` against the float64 reference (SPEC §3, bounds §8), for
    each Ulysses degree in ``ps`` on the same inputs.

    Production AdaLN segments with invalid entries (``production_index``), NaN-poisoned output
    and workspace, ``positions`` "identity" (None) or "random" (int32/int64 positions including
    values outside [0, S), which the kernel clamps). The reference recomputes everything from x
    (prologue included) on every row when M <= max_ref_rows, else on a random sample of rows
    plus the first, last and the M-tile tails (the epilogue is row-local, so a row subset of the
    reference is the reference of those rows). Rows with an invalid index must be exactly zero.
    """
    import cupy

    from .ops.pre_attention import minimax_h3_bf16_pre_attention

    rng = rng or np.random.default_rng()
    host = ref_inputs.pre_attention_inputs(m, rows=9, index_dtype=index_dtype, rng=rng)
    pos = None
    if positions == "random":
        host["rope_cos_sin"] = ref_inputs.rope_cache(max(m, 64))
        s_rows = host["rope_cos_sin"].shape[0]
        pos = rng.integers(-3, s_rows + 3, m).astype(index_dtype)
    keys = ref_inputs.PRE_ATTENTION_KEYS
    dev = {k: upload(host[k]) for k in keys}
    rows = sample_rows(m, max_ref_rows, rng)
    ref1 = bf16_pre_attention_reference(host, rows, pos)  # [rows, 56, 3, 128]
    idx = host["adaln_index"].astype(np.int64)
    invalid = np.nonzero((idx < 0) | (idx >= 9))[0]
    ws = cupy.empty((m, D), formats.BF16)
    checks: list[Check] = []
    for p in ps:
        hp = 56 // p
        out = cupy.empty((p, m, hp, 3, 128), formats.BF16)
        poison(out, ws)
        minimax_h3_bf16_pre_attention(
            *(dev[k] for k in keys),
            ulysses_degree=p,
            out=out,
            workspace=ws,
            rope_positions=None if pos is None else cupy.asarray(pos),
        )
        got = download(out).astype(np.float32)  # [P, M, hp, 3, 128]
        ref = ref1.reshape(len(rows), p, hp, 3, 128).transpose(1, 0, 2, 3, 4)
        shape = f"M={m} P={p} pos={positions} idx={np.dtype(index_dtype).name}"
        # NOTE: no identical-fraction floor: y comes from an fp32 tensor-core GEMM, the
        # reference from float64, so bf16 roundings of y legitimately differ.
        checks += bf16_close(
            "bf16_pre_attention",
            shape,
            got[:, rows],
            ref,
            pre_attention_bound(ref),
            min_identical=0.0,
        )[:1]
        if invalid.size:
            # NOTE: compared by value: the RoPE fma of zeros may give -0.0 (e.g. 0*c - 0*s with
            # c < 0), which is exactly zero.
            nonzero = got[:, invalid] != 0
            checks.append(
                exact(
                    "bf16_pre_attention",
                    shape,
                    "nonzero elements in invalid-index rows",
                    nonzero,
                    np.zeros_like(nonzero),
                )
            )
    return checks


def _e4m3_step(codes: np.ndarray) -> np.ndarray:
    """Spacing of the e4m3 grid at each code's magnitude (2^-9 in the subnormal range)."""
    mag = np.abs(formats.e4m3_decode(codes).astype(np.float64))
    e = np.floor(np.log2(np.maximum(mag, 2.0**-6)))
    return 2.0 ** (e - 3)


def _e2m1_step(codes: np.ndarray) -> np.ndarray:
    """Spacing of the e2m1 grid at each code's magnitude: 0.5 below 2, 1 below 4, else 2."""
    mag = np.abs(formats.e2m1_decode(codes).astype(np.float64))
    return np.where(mag < 2, 0.5, np.where(mag < 4, 1.0, 2.0))


# Out-mode scalars of the quantized pre-attention checks, near what calibration would give for
# these inputs (|q|, |k| up to ~4, |v| ~1.4): e4m3 descales and NVFP4 global scales of q, k, v.
_PA_DESCALE = (np.float32(0.014), 0.015, 0.006)
_PA_GSCALE = (np.float32(600.0), 550.0, 1800.0)


def _pa_mode_scalars(out_mode: str) -> tuple[dict, dict]:
    """The scalars an out mode needs: the op's keyword arguments (q's as a one-element device
    array, k's and v's as floats, so both forms are exercised) and the reference's (floats)."""
    import cupy

    if out_mode not in ("e4m3", "nvfp4"):
        return {}, {}
    kind = "descale" if out_mode == "e4m3" else "global_scale"
    vals = _PA_DESCALE if out_mode == "e4m3" else _PA_GSCALE
    names = [f"{n}_{kind}" for n in "qkv"]
    op_kw = {names[0]: cupy.asarray(np.array([vals[0]], np.float32))}
    op_kw.update({names[1]: vals[1], names[2]: vals[2]})
    return op_kw, {n: float(v) for n, v in zip(names, vals, strict=True)}


def fp8_pre_attention_runner(m: int, out_mode: str, rng: np.random.Generator):
    """Inputs of ``minimax_h3_fp8_pre_attention`` in the model's distributions (int32 AdaLN
    indices, some invalid) and ``run(**outputs)``, a call of the op on them with the act_q /
    act_scale workspaces (poisoned here) and the out mode's scalars: ``(host inputs, weight codes,
    weight scales, act_q, act_scale, run)``. The uploads are hoisted, so ``run`` can be captured
    in a CUDA graph."""
    import cupy

    from .ops.pre_attention import minimax_h3_fp8_pre_attention

    host = ref_inputs.pre_attention_inputs(m, rows=9, index_dtype=np.int32, rng=rng)
    wq, wsc = formats.fp8_quantize_per_channel(host["qkv_weight"])
    dev = {k: upload(host[k]) for k in ref_inputs.QUANT_PRE_ATTENTION_KEYS}
    act_q = cupy.empty((m, D), np.uint8)
    act_scale = cupy.empty((m,), np.float32)
    poison(act_q, act_scale)
    kw, _ = _pa_mode_scalars(out_mode)
    wq_d = cupy.asarray(wq)
    wsc_d = cupy.asarray(wsc)

    def run(**outs):
        return minimax_h3_fp8_pre_attention(
            dev["x"],
            dev["x_norm_weight"],
            dev["adaln_scale"],
            dev["adaln_shift"],
            dev["adaln_index"],
            wq_d,
            wsc_d,
            dev["q_norm_weight"],
            dev["k_norm_weight"],
            dev["rope_cos_sin"],
            out_mode=out_mode,
            act_q=act_q,
            act_scale=act_scale,
            **kw,
            **outs,
        )

    return host, wq, wsc, act_q, act_scale, run


def fp8_pre_attention_reference(host, wq, wsc, rows, act_q, act_scale, out_mode, scal):
    """The reference of ``minimax_h3_fp8_pre_attention`` on ``rows`` of ``host`` (identity
    positions), consuming the kernel's own per-token FP8 activation (``act_q`` / ``act_scale``,
    device arrays) as SPEC §8 prescribes; ``scal``: the out mode's scalars as floats."""
    return reference.minimax_h3_fp8_pre_attention(
        *prologue_reference_args(host, rows),
        wq,
        wsc,
        host["q_norm_weight"],
        host["k_norm_weight"],
        host["rope_cos_sin"][rows],
        out_mode=out_mode,
        act_q=download(act_q)[rows],
        act_scale=download(act_scale)[rows],
        **scal,
    )


def check_pre_attention_fp8(
    m: int,
    out_mode: str,
    rng: np.random.Generator | None = None,
    *,
    max_ref_rows: int = 160,
    graph: bool = False,
    extra_rows=(),
) -> list[Check]:
    """``minimax_h3_fp8_pre_attention`` against the reference that consumes the kernel's own
    quantized activation (SPEC §8, FP8/NVFP4 ops): ``|out - ref| <= 1e-2 + 1e-2*mag +
    2*ulp_bf16(mag)`` (mag with the RoPE partner on Q/K dims [0, 96)), plus one code step of the
    output format in "e4m3" / "nvfp4" modes (compared as decoded values); NVFP4 output scales
    within one ue4m3 code. Scalars mix Python floats and device arrays. ``extra_rows``: rows
    checked beside the random sample (e.g. the tiles of a tail split)."""
    rng = rng or np.random.default_rng()
    host, wq, wsc, act_q, act_scale, run = fp8_pre_attention_runner(m, out_mode, rng)
    _, scal = _pa_mode_scalars(out_mode)

    res = run()
    rows = np.union1d(sample_rows(m, max_ref_rows, rng), np.asarray(extra_rows, np.int64))
    ref = fp8_pre_attention_reference(host, wq, wsc, rows, act_q, act_scale, out_mode, scal)
    shape = f"M={m} out_mode={out_mode}"
    checks = _compare_qkv(
        "fp8_pre_attention", shape, res, ref, rows, out_mode, _PA_DESCALE, _PA_GSCALE
    )
    if graph:
        checks += _qkv_graph_checks(
            "fp8_pre_attention", shape, run, res, out_mode, act_q, act_scale
        )
    return checks


def _qkv_graph_checks(op, shape, run, res, out_mode, *workspaces, extra=None) -> list[Check]:
    """:func:`graph_checks` of a quantized pre-attention call with every output supplied, the
    ``extra`` keyword workspaces passed too; ``workspaces`` are compared with the outputs."""
    outs = {"q": res.q, "k": res.k, "v": res.v}
    if out_mode == "nvfp4":
        outs.update(q_sf=res.q_sf, k_sf=res.k_sf, v_sf=res.v_sf)
    extra = extra or {}
    return graph_checks(op, shape, lambda: run(**outs, **extra), [*outs.values(), *workspaces])


def _compare_qkv(op, shape, res, ref, rows, out_mode, descale, gscale) -> list[Check]:
    """q, k, v of a quantized pre-attention op against the reference (SPEC §8): values within
    ``1e-2 + 1e-2*mag + 2*ulp_bf16(mag)`` (RoPE partner on Q/K), plus one code step of the output
    format in e4m3 / nvfp4 modes; NVFP4 output scales within one ue4m3 code."""
    checks: list[Check] = []
    for i, name in enumerate("qkv"):
        got = download(res[i])[rows]
        want = ref[i]
        if out_mode == "bf16":
            g_val, r_val, extra = got.astype(np.float32), want.astype(np.float64), 0.0
        elif out_mode == "e4m3":
            d = float(np.float32(descale[i]))
            g_val = formats.e4m3_decode(got).astype(np.float64) * d
            r_val = formats.e4m3_decode(want).astype(np.float64) * d
            extra = _e4m3_step(want) * d
        else:
            gf = float(np.float32(gscale[i]))
            g_sf = download(res[3 + i])[rows]
            r_sf = ref[3 + i]
            diff = int(np.abs(g_sf.astype(np.int32) - r_sf.astype(np.int32)).max())
            checks.append(Check(op, shape, f"{name}_sf max code difference", diff, 1.0, diff <= 1))
            g_val = formats.nvfp4_dequantize(got, g_sf, gf).astype(np.float64)
            r_val = formats.nvfp4_dequantize(want, r_sf, gf).astype(np.float64)
            sfv = np.repeat(formats.ue4m3_decode(r_sf).astype(np.float64), 16, axis=-1)
            extra = _e2m1_step(formats.unpack_e2m1(want)) * sfv / gf
        g_val = np.asarray(g_val).reshape(len(rows), 56, 128)
        r_val = np.asarray(r_val).reshape(len(rows), 56, 128)
        if out_mode != "bf16":
            extra = np.asarray(extra).reshape(r_val.shape)
        bound = (
            pre_attention_bound(r_val)
            if name != "v"
            else 1e-2 + 1e-2 * np.abs(r_val) + 2 * formats.bf16_ulp(np.abs(r_val))
        )
        checks += bf16_close(op, f"{shape} {name}", g_val, r_val, bound + extra, min_identical=0.0)[
            :1
        ]
    return checks


def nvfp4_pre_attention_reference(host, wq, wsf, gw, ga, rows, act_q, act_sf, out_mode, scal):
    """The reference of ``minimax_h3_nvfp4_pre_attention`` on ``rows`` of ``host`` (identity
    positions), consuming the kernel's own NVFP4 activation (``act_q`` / ``act_sf``, device arrays
    of every row) as SPEC §8 prescribes; ``wq`` / ``wsf``: the weight's packed codes and swizzled
    scales on the host, ``gw`` / ``ga``: the weight and activation global scales (floats);
    ``scal``: the out mode's scalars as floats."""
    return reference.minimax_h3_nvfp4_pre_attention(
        *prologue_reference_args(host, rows),
        wq,
        wsf,
        float(gw),
        float(ga),
        host["q_norm_weight"],
        host["k_norm_weight"],
        host["rope_cos_sin"][rows],
        out_mode=out_mode,
        act_q=download(act_q)[rows],
        act_sf=download(act_sf)[rows],
        **scal,
    )


def check_pre_attention_nvfp4(
    m: int,
    out_mode: str,
    rng: np.random.Generator | None = None,
    *,
    max_ref_rows: int = 96,
    graph: bool = False,
) -> list[Check]:
    """``minimax_h3_nvfp4_pre_attention`` against the reference consuming the kernel's own
    act_q / act_sf (SPEC §8, as :func:`check_pre_attention_fp8`); act_q / act_sf must also be the
    host NVFP4 of the reference prologue's activation except near bf16 ties (not checked here:
    the prologue tests cover it). alpha is formed on the device from the global scales."""
    import cupy

    from .ops.pre_attention import minimax_h3_nvfp4_pre_attention

    rng = rng or np.random.default_rng()
    host = ref_inputs.pre_attention_inputs(m, rows=9, index_dtype=np.int32, rng=rng)
    w = host["qkv_weight"]
    gw = formats.nvfp4_global_scale_from_amax(np.abs(w.astype(np.float32)).max())
    wq, wsf = formats.nvfp4_quantize(w, gw)
    wsf = formats.swizzle_sf_128x4(wsf)
    a_ref = reference.prologue(
        host["x"],
        host["x_norm_weight"],
        host["adaln_scale"],
        host["adaln_shift"],
        host["adaln_index"],
    )
    ga = formats.nvfp4_global_scale_from_amax(np.abs(a_ref.astype(np.float32)).max())
    keys = ref_inputs.QUANT_PRE_ATTENTION_KEYS
    dev = {k: upload(host[k]) for k in keys}
    act_q = cupy.empty((m, D // 2), np.uint8)
    act_sf = cupy.empty((m, D // 16), np.uint8)
    poison(act_q, act_sf)
    kw, scal = _pa_mode_scalars(out_mode)

    wq_d = cupy.asarray(wq)
    wsf_d = cupy.asarray(wsf)
    ga_d = cupy.asarray(np.array([ga], np.float32))

    # uploads hoisted: run() is also captured in a CUDA graph (no copies there)
    def run(**outs):
        return minimax_h3_nvfp4_pre_attention(
            *(dev[k] for k in keys[:5]),
            wq_d,
            wsf_d,
            float(gw),
            ga_d,
            *(dev[k] for k in keys[5:]),
            out_mode=out_mode,
            act_q=act_q,
            act_sf=act_sf,
            **kw,
            **outs,
        )

    res = run()
    rows = sample_rows(m, max_ref_rows, rng)
    ref = nvfp4_pre_attention_reference(host, wq, wsf, gw, ga, rows, act_q, act_sf, out_mode, scal)
    checks = _compare_qkv(
        "nvfp4_pre_attention",
        f"M={m} out_mode={out_mode}",
        res,
        ref,
        rows,
        out_mode,
        _PA_DESCALE,
        _PA_GSCALE,
    )
    if graph:
        from .core import arch
        from .ops import pre_attention

        # the bf16 workspaces of the sm_90a path, so that nothing is allocated inside the capture;
        # compared only where that path writes them
        extra = {
            "workspace_a": cupy.empty((m, D), formats.BF16),
            "workspace_w": cupy.empty((21504, D), formats.BF16),
        }
        hopper = pre_attention.nvfp4_backend(arch.device_target(act_q.device.id)) == "wgmma"
        checks += _qkv_graph_checks(
            "nvfp4_pre_attention",
            f"M={m} out_mode={out_mode}",
            run,
            res,
            out_mode,
            act_q,
            act_sf,
            *(extra.values() if hopper else ()),
            extra=extra,
        )
    return checks


def _expected_flags(m: int) -> np.ndarray:
    """The first words of the MLP's workspace_flags after a call: those the op zeroes before
    FC2's launch (one ready flag per 128-row tile of y, with mlp.FC1_FUSED_PROLOGUE one per
    128-row tile of a after them, and gemm.TailPlan.zero). The ready counters at the front then
    hold the rows of each 128-row tile of y (the fused form), FC1's those of a; the tail split's
    arrival counters are back at zero (each tile's last arrival resets its own).
    On the mma.sync back end, which uses no flags: the zeroed ready flags."""
    from .core import arch
    from .ops import mlp, out_proj

    dev = arch.current_device()
    if out_proj.gemm_backend(arch.device_target(dev)) != "wgmma":
        return np.zeros(-(-m // 128), np.int32)
    fc1 = mlp._fc1_ready(m)
    plan = out_proj.plan_fp8_gemm_wgmma(m, mlp.FFN, mlp.FUSED_QUANT, dev, fc1)
    want = np.zeros(max(plan.tail.zero, -(-m // 128)), np.int32)
    tile_rows = np.minimum(128, m - 128 * np.arange(plan.ready))
    if mlp.FUSED_QUANT:
        want[: plan.ready] = tile_rows
    if fc1:  # the single-launch FC1's counters (rows of a per 128-row tile) after FC2's
        want[plan.ready : plan.ready + fc1] = tile_rows
    return want


def _download_rows(a, rows: np.ndarray, everything: bool = False) -> np.ndarray:
    """Rows ``rows`` of a device array, gathered on the device first (large outputs are not
    downloaded whole); ``everything``: the whole array (rows = all of them)."""
    import cupy

    if everything:
        return download(a)
    # NOTE: gathered as raw bytes (CuPy has no gather kernels for ml_dtypes' bf16 / float8)
    dt = np.dtype(np.uint8) if a.dtype == formats.E4M3 else np.dtype(a.dtype)
    raw = cupy.ascontiguousarray(a).reshape(a.shape[0], -1).view(cupy.uint8)
    sub = cupy.asnumpy(raw[cupy.asarray(np.asarray(rows, np.int64))])
    return sub.view(dt).reshape((len(rows),) + tuple(a.shape[1:]))


def mlp_fp8_operands(m: int, rng: np.random.Generator, index_dtype=np.int64):
    """The MLP op's inputs in the model's distributions (AdaLN indices of ``index_dtype``, some
    invalid) and its FP8 weights: ``(host inputs, (w1q, w1s, w2q, w2s) on the host, {name:
    device array} of the seven activations and tables in the op's argument order, the four
    weights on the device in the op's order)``."""
    import cupy

    host = ref_inputs.mlp_inputs(m, rows=9, index_dtype=index_dtype, rng=rng)
    w1q, w1s = formats.fp8_quantize_per_channel(formats.fc1_prepack_rows(host["fc1_weight"]))
    w2q, w2s = formats.fp8_quantize_per_channel(host["fc2_weight"])
    keys = ("x", "x_norm_weight", "adaln_scale", "adaln_shift", "adaln_index", "gate", "residual")
    dev = {k: upload(host[k]) for k in keys}
    weights = (w1q, w1s, w2q, w2s)
    return host, weights, dev, [cupy.asarray(w) for w in weights]


def mlp_fp8_reference(host, weights, rows, a_q, a_scale, y_q, y_scale):
    """The reference of ``minimax_h3_mlp_fp8_sm120`` on ``rows`` of ``host``
    (``reference.inputs.mlp_inputs``; ``weights``: the host ``(w1q, w1s, w2q, w2s)``), consuming
    the kernel's own quantized intermediates of those rows (``a_q`` / ``a_scale``, ``y_q`` /
    ``y_scale``, host arrays) as SPEC §8 prescribes; its ``.y`` and ``.out``."""
    return reference.minimax_h3_mlp_fp8_sm120(
        host["x"][rows],
        host["x_norm_weight"],
        host["adaln_scale"],
        host["adaln_shift"],
        host["adaln_index"][rows],
        host["gate"],
        host["residual"][rows],
        *weights,
        a_q=a_q,
        a_scale=a_scale,
        y_q=y_q,
        y_scale=y_scale,
    )


def mlp_close(op, shape, what, got, want, res=None) -> Check:
    """SPEC §8's MLP bound: ``|got - want| <= 1e-2 + 1.6e-2*mag + 2*ulp_bf16(mag)`` with at most
    max(4, 2e-7*numel) violations; ``mag = |want|``, or with ``res`` (the residual of a gated
    output) ``max(|want|, |want - res|)``, since the gated product can cancel the residual."""
    got = np.asarray(got, np.float64)
    want = np.asarray(want, np.float64)
    mag = np.abs(want) if res is None else np.maximum(np.abs(want), np.abs(want - res))
    bound = 1e-2 + 1.6e-2 * mag + 2 * formats.bf16_ulp(mag)
    bad = int(np.count_nonzero(~(np.abs(got - want) <= bound)))
    allowed = max(4, int(2e-7 * want.size))
    return Check(op, shape, f"{what} violations", bad, allowed, bad <= allowed)


def check_mlp_fp8(
    m: int,
    rng: np.random.Generator | None = None,
    *,
    alias: str | None = None,
    index_dtype=np.int64,
    max_ref_rows: int = 96,
    graph: bool = False,
) -> list[Check]:
    """``minimax_h3_mlp_fp8_sm120`` (SPEC §6) against the reference consuming the kernel's own
    quantized intermediates: y (from the kernel's a_q / a_scale) and out (from its y_q / y_scale)
    within ``1e-2 + 1.6e-2*mag + 2*ulp_bf16(mag)`` with at most max(4, 2e-7*numel) violations
    (SPEC §8, MLP); y_q / y_scale bit-exact to the host per-token FP8 of the kernel's own y
    (y_scale = RN(max(amax, 1e-12) / 448)); invalid-index rows equal residual exactly.
    ``alias``: None, "residual" or "x" (the buffer passed as ``out``)."""
    import cupy

    from .ops.mlp import minimax_h3_mlp_fc2_flags_sm120, minimax_h3_mlp_fp8_sm120

    rng = rng or np.random.default_rng()
    host, (w1q, w1s, w2q, w2s), dev, weights = mlp_fp8_operands(m, rng, index_dtype)
    keys = tuple(dev)
    ws = {
        "workspace_a_q": cupy.empty((m, D), np.uint8),
        "workspace_a_scale": cupy.empty((m,), np.float32),
        "workspace_y": cupy.empty((m, 14336), formats.BF16),
        "workspace_y_q": cupy.empty((m, 14336), np.uint8),
        "workspace_y_scale": cupy.empty((m,), np.float32),
        "workspace_flags": cupy.full((minimax_h3_mlp_fc2_flags_sm120(m),), 7, np.int32),
    }
    poison(*(v for k, v in ws.items() if k != "workspace_flags"))
    out = dev[alias] if alias else cupy.empty((m, D), formats.BF16)
    if not alias:
        poison(out)

    # uploads hoisted: run() is also captured in a CUDA graph (no copies there)
    def run(**outs):
        return minimax_h3_mlp_fp8_sm120(
            *(dev[k] for k in keys),
            *weights,
            out=out,
            **ws,
            **outs,
        )

    run()
    shape = f"M={m}{' out=' + alias if alias else ''}"
    rows = sample_rows(m, max_ref_rows, rng)
    # NOTE: y_q / y_scale are compared on every row up to 16384 rows; above, on 2048 random rows
    # plus the reference rows (a 149796-row y is 4.3 GB: only those rows are downloaded).
    full = m <= 16384
    er = np.arange(m) if full else np.union1d(sample_rows(m, 2048, rng), rows)
    pos = np.searchsorted(er, rows)  # the reference rows within er
    y = _download_rows(ws["workspace_y"], er, full)
    yq = _download_rows(ws["workspace_y_q"], er, full)
    ys = _download_rows(ws["workspace_y_scale"], er, full)
    want_yq, want_ys = formats.fp8_quantize_per_token(y)
    want_flags = _expected_flags(m)
    which = "" if full else f" ({er.size} sampled rows)"
    checks = [
        exact("mlp_fp8", shape, f"y_q vs host FP8 of the kernel's y{which}", yq, want_yq),
        exact("mlp_fp8", shape, f"y_scale vs host FP8 of the kernel's y{which}", ys, want_ys),
        exact(
            "mlp_fp8",
            shape,
            "flags (zeroed; rows per tile in the fused form, tail counters reset)",
            download(ws["workspace_flags"])[: want_flags.size],
            want_flags,
        ),
    ]
    aq = _download_rows(ws["workspace_a_q"], rows)
    asc = _download_rows(ws["workspace_a_scale"], rows)
    ref = mlp_fp8_reference(host, (w1q, w1s, w2q, w2s), rows, aq, asc, yq[pos], ys[pos])
    checks.append(mlp_close("mlp_fp8", shape, "y", y[pos].astype(np.float32), ref.y))
    res = host["residual"][rows].astype(np.float64)
    got_rows = _download_rows(out, rows).astype(np.float32)
    checks.append(mlp_close("mlp_fp8", shape, "out", got_rows, ref.out, res))
    idx = host["adaln_index"].astype(np.int64)
    invalid = np.nonzero((idx < 0) | (idx >= 9))[0]
    if invalid.size:
        checks.append(
            exact(
                "mlp_fp8",
                shape,
                "invalid-index rows vs residual",
                _download_rows(out, invalid),
                host["residual"][invalid],
            )
        )
    if graph and not alias:  # an aliased out changes the next run's input
        # NOTE: the flags start at 7 above (so the zeroing check means something); graph_checks
        # poisons its outputs (0xFF) between runs, so the words no form writes (the alignment gap
        # before the tail split's partials, at M = 4824) would differ from the first run's 7s.
        # They start poisoned here, as the out_proj's do.
        poison(ws["workspace_flags"])
        checks += graph_checks("mlp_fp8", shape, run, [out, *ws.values()])
    return checks


def _gated_checks(op, shape, got, ref, rows, idx, residual) -> list[Check]:
    """An out_proj output against the reference on ``rows`` (SPEC §8): ``|out - ref| <= 1e-2 +
    1e-2*mag + 2*ulp_bf16(mag)``, mag = max(|ref|, |gate*o|) with |gate*o| taken as |ref -
    residual| (the product can cancel the residual); and the rows whose gate index is outside
    [0, 9) equal ``residual`` bit for bit. ``got``: the whole downloaded output."""
    res = residual[rows].astype(np.float64)
    mag = np.maximum(np.abs(ref), np.abs(ref - res))
    bound = 1e-2 + 1e-2 * mag + 2 * formats.bf16_ulp(mag)
    checks = bf16_close(op, shape, got[rows].astype(np.float32), ref, bound, min_identical=0.0)[:1]
    invalid = np.nonzero((idx.astype(np.int64) < 0) | (idx.astype(np.int64) >= 9))[0]
    if invalid.size:
        checks.append(
            exact(op, shape, "invalid-index rows vs residual", got[invalid], residual[invalid])
        )
    return checks


def fp8_out_proj_reference(host, wq, wsc, rows, act_q, act_scale) -> np.ndarray:
    """The float64 reference of ``minimax_h3_fp8_out_proj`` on ``rows`` of ``host``
    (``reference.inputs.out_proj_inputs``, its ``gate_index`` as planted), on the per-token FP8
    codes and scales ``act_q`` / ``act_scale`` (host arrays of every row)."""
    return reference.minimax_h3_fp8_out_proj(
        host["attn_out"][rows],
        wq,
        wsc,
        host["gate"],
        host["gate_index"][rows],
        host["residual"][rows],
        act_q=act_q[rows],
        act_scale=act_scale[rows],
    ).astype(np.float64)


def check_out_proj_fp8(
    m: int,
    rng: np.random.Generator | None = None,
    *,
    alias: bool = False,
    index_dtype=np.int32,
    max_ref_rows: int = 160,
    graph: bool = False,
) -> list[Check]:
    """``minimax_h3_fp8_out_proj`` (SPEC §5): act_q / act_scale bit-exact to the host per-token
    FP8 of attn_out; out within ``1e-2 + 1e-2*mag + 2*ulp_bf16(mag)`` of the reference consuming
    those codes, mag = max(|ref|, |gate*o|) (|gate*o| taken as |ref - residual|); rows with an
    invalid index equal ``residual`` bit for bit. Guard indices -1, rows and 2^31-1 are planted;
    ``alias`` passes ``out=residual``."""
    import cupy

    from .ops.out_proj import minimax_h3_fp8_out_proj, minimax_h3_fp8_out_proj_flags

    rng = rng or np.random.default_rng()
    host = ref_inputs.out_proj_inputs(m, rows=9, index_dtype=index_dtype, rng=rng)
    # -0 and +0 planted: the quantizer keeps the sign of zero (codes 0x80 and 0x00)
    host["attn_out"][0, :2] = (-0.0, 0.0)
    idx = host["gate_index"]
    for pos, val in ((0, -1), (m // 2, 9), (m - 1, 2**31 - 1)):
        if m > 2:
            idx[pos] = val
    wq, wsc = formats.fp8_quantize_per_channel(host["o_weight"])
    dev = {k: upload(host[k]) for k in ("attn_out", "gate", "gate_index", "residual")}
    residual_host = host["residual"]
    act_q = cupy.empty((m, 7168), np.uint8)
    act_scale = cupy.empty((m,), np.float32)
    poison(act_q, act_scale)
    if alias:
        out = dev["residual"]
    else:
        out = cupy.empty((m, 5376), formats.BF16)
        poison(out)

    wq_d = cupy.asarray(wq)
    wsc_d = cupy.asarray(wsc)

    # uploads hoisted: run() is also captured in a CUDA graph (no copies there)
    def run(**outs):
        return minimax_h3_fp8_out_proj(
            dev["attn_out"],
            wq_d,
            wsc_d,
            dev["gate"],
            dev["gate_index"],
            dev["residual"],
            out=out,
            act_q=act_q,
            act_scale=act_scale,
            **outs,
        )

    run()
    shape = f"M={m}{' alias' if alias else ''}"
    want_q, want_s = formats.fp8_quantize_per_token(host["attn_out"])
    checks = [
        exact("fp8_out_proj", shape, "act_q", download(act_q), want_q),
        exact("fp8_out_proj", shape, "act_scale", download(act_scale), want_s),
    ]
    got = download(out)  # bf16: the invalid rows are compared by bytes
    rows = np.union1d(sample_rows(m, max_ref_rows, rng), [m // 2])  # m // 2: a planted row
    ref = fp8_out_proj_reference(host, wq, wsc, rows, want_q, want_s)
    checks += _gated_checks("fp8_out_proj", shape, got, ref, rows, idx, residual_host)
    if graph and not alias:  # an aliased out changes the next run's input
        # the single-launch form's counters and the tail split's as a workspace: nothing is
        # allocated inside the capture (-1: the poison value, so words a form leaves alone
        # compare equal)
        flags = cupy.full((minimax_h3_fp8_out_proj_flags(m),), -1, np.int32)
        checks += graph_checks(
            "fp8_out_proj",
            shape,
            lambda: run(workspace_flags=flags),
            [out, act_q, act_scale, flags],
        )
    return checks


def nvfp4_out_proj_reference(host, wq, wsf, gw, ga, rows, act_q, act_sf) -> np.ndarray:
    """The float64 reference of ``minimax_h3_nvfp4_out_proj`` on ``rows`` of ``host``
    (``reference.inputs.out_proj_inputs``, its ``gate_index`` as planted), on the NVFP4 codes and
    scales ``act_q`` / ``act_sf`` (host arrays of every row); ``wq`` / ``wsf``: the weight's packed
    codes and swizzled scales on the host, ``gw`` / ``ga``: the global scales (floats)."""
    return reference.minimax_h3_nvfp4_out_proj(
        host["attn_out"][rows],
        wq,
        wsf,
        float(gw),
        float(ga),
        host["gate"],
        host["gate_index"][rows],
        host["residual"][rows],
        act_q=act_q[rows],
        act_sf=act_sf[rows],
    ).astype(np.float64)


def check_out_proj_nvfp4(
    m: int, rng: np.random.Generator | None = None, *, max_ref_rows: int = 128, graph: bool = False
) -> list[Check]:
    """``minimax_h3_nvfp4_out_proj`` (SPEC §5, W4A4): act_q / act_sf bit-exact to the host NVFP4
    of attn_out under the device global scale; out within ``1e-2 + 1e-2*mag + 2*ulp_bf16(mag)``
    (mag = max(|ref|, |gate*o|)) of the reference consuming those codes; invalid-index rows equal
    residual exactly. The weight global scale is passed as a Python float."""
    import cupy

    from .core import arch
    from .ops import out_proj
    from .ops.out_proj import minimax_h3_nvfp4_out_proj

    rng = rng or np.random.default_rng()
    host = ref_inputs.out_proj_inputs(m, rows=9, rng=rng)
    idx = host["gate_index"]
    if m > 2:
        idx[0], idx[m - 1] = -1, 9
    w = host["o_weight"]
    gw = formats.nvfp4_global_scale_from_amax(np.abs(w.astype(np.float32)).max())
    wq, wsf = formats.nvfp4_quantize(w, gw)
    wsf = formats.swizzle_sf_128x4(wsf)
    ga = formats.nvfp4_global_scale_from_amax(np.abs(host["attn_out"].astype(np.float32)).max())
    dev = {k: upload(host[k]) for k in ("attn_out", "gate", "gate_index", "residual")}
    act_q = cupy.empty((m, 3584), np.uint8)
    act_sf = cupy.empty((m, 448), np.uint8)
    out = cupy.empty((m, 5376), formats.BF16)
    # the sm_90a path's a' workspace (its GEMM's A operand; written by the GEMM launch itself in
    # the single-launch form), poisoned too: a row it left unwritten cannot hold an earlier
    # call's values (ignored by the mma.sync back end)
    a_bf = cupy.empty((m, 7168), formats.BF16)
    poison(act_q, act_sf, out, a_bf)

    wq_d = cupy.asarray(wq)
    wsf_d = cupy.asarray(wsf)
    ga_d = cupy.asarray(np.array([ga], np.float32))

    # uploads hoisted: run() is also captured in a CUDA graph (no copies there)
    def run(**outs):
        return minimax_h3_nvfp4_out_proj(
            dev["attn_out"],
            wq_d,
            wsf_d,
            float(gw),
            ga_d,
            dev["gate"],
            dev["gate_index"],
            dev["residual"],
            out=out,
            act_q=act_q,
            act_sf=act_sf,
            **outs,
        )

    run(workspace_a=a_bf)
    shape = f"M={m}"
    want_q, want_sf = formats.nvfp4_quantize(host["attn_out"], ga)
    checks = [
        exact("nvfp4_out_proj", shape, "act_q", download(act_q), want_q),
        exact("nvfp4_out_proj", shape, "act_sf", download(act_sf), want_sf),
    ]
    rows = sample_rows(m, max_ref_rows, rng)
    ref = nvfp4_out_proj_reference(host, wq, wsf, gw, ga, rows, want_q, want_sf)
    got = download(out)
    checks += _gated_checks("nvfp4_out_proj", shape, got, ref, rows, idx, host["residual"])
    if graph:
        # the bf16 workspaces of the sm_90a path, so that nothing is allocated inside the capture
        # (compared only where that path writes them)
        ws_a, ws_w = cupy.empty((m, 7168), formats.BF16), cupy.empty((5376, 7168), formats.BF16)
        hopper = out_proj.nvfp4_backend(arch.device_target(out.device.id)) == "wgmma"
        checks += graph_checks(
            "nvfp4_out_proj",
            shape,
            lambda: run(workspace_a=ws_a, workspace_w=ws_w),
            [out, act_q, act_sf, *((ws_a, ws_w) if hopper else ())],
        )
    return checks
