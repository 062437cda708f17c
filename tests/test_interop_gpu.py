"""GPU: torch tensors in and out on torch's current stream, CUDA-graph capture, and the input
checks (each error names the argument, what was expected and what came)."""

from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.gpu


def _inputs(rng, m=129, rows=9):
    from h3cupy.reference import inputs
    from h3cupy.testing import upload

    h = inputs.prologue_inputs(m, rows=rows, k=5376, index_dtype=np.int64, rng=rng)
    return h, {k: upload(v) for k, v in h.items()}


def test_torch_in_torch_out_on_a_side_stream(rng):
    torch = pytest.importorskip("torch")
    import cupy

    from h3cupy.ops.prologue import norm_adaln

    h, d = _inputs(rng)
    want = norm_adaln(
        d["x"],
        d["x_norm_weight"],
        d["adaln_scale"],
        d["adaln_shift"],
        d["adaln_index"],
        out_format="fp8",
    )
    cupy.cuda.Device().synchronize()
    t = {
        k: torch.from_dlpack(
            v.view(cupy.int16) if v.dtype.itemsize == 2 and k != "adaln_index" else v
        )
        for k, v in d.items()
    }
    for k in ("x", "x_norm_weight", "adaln_scale", "adaln_shift"):
        t[k] = t[k].view(torch.bfloat16)
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        got = norm_adaln(
            t["x"],
            t["x_norm_weight"],
            t["adaln_scale"],
            t["adaln_shift"],
            t["adaln_index"],
            out_format="fp8",
        )
    side.synchronize()
    assert isinstance(got.q, torch.Tensor) and got.q.dtype == torch.float8_e4m3fn
    assert got.scale.dtype == torch.float32
    assert torch.equal(
        got.q.view(torch.uint8).cpu(), torch.from_numpy(cupy.asnumpy(want.q.view(cupy.uint8)))
    )
    assert torch.equal(got.scale.cpu(), torch.from_numpy(cupy.asnumpy(want.scale)))


def test_cuda_graph_capture_and_replay(rng):
    import cupy

    from h3cupy.formats import BF16
    from h3cupy.ops.prologue import norm_adaln
    from h3cupy.testing import poison

    h, d = _inputs(rng, m=4097)
    g = cupy.asarray(np.array([336.0], np.float32))
    a = cupy.empty((4097, 5376), BF16)
    q = cupy.empty((4097, 2688), np.uint8)
    s = cupy.empty((4097, 336), np.uint8)
    args = (d["x"], d["x_norm_weight"], d["adaln_scale"], d["adaln_shift"], d["adaln_index"])
    norm_adaln(*args, out_format="nvfp4", act_global_scale=g, a=a, q=q, scale=s)  # warm-up
    want = [cupy.asnumpy(v.view(np.uint8)) for v in (a, q, s)]
    poison(a, q, s)
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        stream.begin_capture()
        norm_adaln(*args, out_format="nvfp4", act_global_scale=g, a=a, q=q, scale=s)
        graph = stream.end_capture()
    graph.launch(stream)
    stream.synchronize()
    for got, w in zip((a, q, s), want, strict=True):
        assert np.array_equal(cupy.asnumpy(got.view(np.uint8)), w)


def test_errors_name_argument_expected_and_got(rng):
    import cupy

    from h3cupy.ops.prologue import norm_adaln

    h, d = _inputs(rng)
    args = [d["x"], d["x_norm_weight"], d["adaln_scale"], d["adaln_shift"], d["adaln_index"]]

    def call(i, value, **kw):
        a = list(args)
        a[i] = value
        return norm_adaln(*a, **kw)

    with pytest.raises(TypeError, match=r"x: expected dtype bf16, got float32"):
        call(0, d["x"].astype(np.float32))
    with pytest.raises(ValueError, match=r"x: expected shape \[\*, 5376\]"):
        call(0, d["x"][:, :5368])
    with pytest.raises(TypeError, match=r"x: expected a CUDA device array.*NumPy"):
        call(0, h["x"])
    with pytest.raises(TypeError, match=r"adaln_index: expected dtype int32 or int64, got float32"):
        call(4, d["adaln_index"].astype(np.float32))
    with pytest.raises(ValueError, match=r"adaln_index: expected shape \[129\]"):
        call(4, d["adaln_index"][:100])
    wide = cupy.zeros((9, 5376 * 2 + 4), d["x"].dtype)
    with pytest.raises(ValueError, match=r"adaln_scale: expected a row stride that is a multiple"):
        call(2, wide[:, :5376])
    with pytest.raises(ValueError, match=r"adaln_shift: expected the same rows"):
        call(3, cupy.ascontiguousarray(d["adaln_shift"][:5]))
    with pytest.raises(ValueError, match=r"x: expected a contiguous"):
        call(0, cupy.zeros((5376, 258), d["x"].dtype).T[:129])
    with pytest.raises(ValueError, match=r"out_format: expected one of"):
        call(0, d["x"], out_format="int8")
    with pytest.raises(ValueError, match=r"act_global_scale: required"):
        call(0, d["x"], out_format="nvfp4")
    with pytest.raises(ValueError, match=r"eps: expected a positive finite float"):
        call(0, d["x"], eps=0.0)
    with pytest.raises(ValueError, match=r"q: expected shape \[129, 5376\]"):
        call(0, d["x"], out_format="fp8", q=cupy.empty((129, 5375), np.uint8))


class _DLPackOnly:
    """An operand that speaks DLPack alone (no ``.device``, no ``__cuda_array_interface__``), as
    JAX arrays and other producers do."""

    def __init__(self, a):
        self._a = a

    def __dlpack__(self, **kw):
        return self._a.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self._a.__dlpack_device__()


class _CAIOnly:
    """An operand that speaks ``__cuda_array_interface__`` alone (Numba device arrays, say)."""

    def __init__(self, a):
        self._a = a

    @property
    def __cuda_array_interface__(self):
        return self._a.__cuda_array_interface__


def test_bare_dlpack_and_cuda_array_interface_operands(rng):
    """Operands as bare protocol objects. The bf16 ones come through DLPack from torch tensors
    (DLPack names bfloat16; the array interface cannot), the index through
    ``__cuda_array_interface__``, and the device guard reads ``x.__dlpack_device__()``.
    Checked as test_prologue_gpu checks the op (SPEC section 8): the FP8 codes and scales
    bit-exact to formats.py applied to the kernel's own bf16 activation, written in the same call;
    and every poisoned output byte-equal to the CuPy-operand call's (which test_prologue_gpu
    checks against the float64 reference)."""
    torch = pytest.importorskip("torch")
    import cupy

    from h3cupy import formats
    from h3cupy.ops.prologue import norm_adaln
    from h3cupy.testing import download, poison

    h, d = _inputs(rng)
    keys = ("x", "x_norm_weight", "adaln_scale", "adaln_shift")
    shapes = (((129, 5376), formats.BF16), ((129, 5376), np.uint8), ((129,), np.float32))
    outs = [tuple(cupy.empty(sh, dt) for sh, dt in shapes) for _ in "ab"]  # a, q, scale
    poison(*outs[0], *outs[1])
    a, q, scale = outs[0]
    norm_adaln(*(d[k] for k in keys), d["adaln_index"], out_format="fp8", a=a, q=q, scale=scale)
    t = {k: torch.from_dlpack(d[k].view(cupy.int16)).view(torch.bfloat16) for k in keys}
    a, q, scale = outs[1]
    norm_adaln(
        *(_DLPackOnly(t[k]) for k in keys),
        _CAIOnly(d["adaln_index"]),
        out_format="fp8",
        a=a,
        q=q,
        scale=scale,
    )
    cupy.cuda.Device().synchronize()
    got_a = download(a).astype(np.float32)
    assert np.isfinite(got_a).all(), "the activation was not written (poison left)"
    want_q, want_s = formats.fp8_quantize_per_token(got_a)
    assert np.array_equal(download(q), want_q)
    assert np.array_equal(download(scale).view(np.uint32), want_s.view(np.uint32))
    for want, got in zip(*outs, strict=True):
        assert np.array_equal(cupy.asnumpy(got.view(np.uint8)), cupy.asnumpy(want.view(np.uint8)))


def test_cuda_array_interface_first_operand(rng):
    """A bare ``__cuda_array_interface__`` first operand: the device guard asks the pointer's
    owner (cudaPointerGetAttributes). An e4m3 GEMM with A, B and the scales as interface objects,
    against a float64 host GEMM of the same quantized operands (issue #3's bounds,
    testing.assert_gemm_close), and byte-equal to the CuPy-operand call."""
    import cupy

    from h3cupy import formats
    from h3cupy.ops.gemm import gemm_mma_sync
    from h3cupy.testing import assert_gemm_close, download, poisoned_bf16_run

    a = formats.to_bf16(rng.normal(0, 0.5, (129, 512)).astype(np.float32))
    w = formats.to_bf16(rng.normal(0, 0.01, (256, 512)).astype(np.float32))
    (aq, as_), (wq, ws) = formats.fp8_quantize_per_token(a), formats.fp8_quantize_per_channel(w)
    ops = [cupy.asarray(v) for v in (aq, wq, as_, ws)]
    cai = [_CAIOnly(v) for v in ops]
    outs = [cupy.empty((129, 256), formats.BF16) for _ in "ab"]

    def call(args, out):
        return lambda: gemm_mma_sync(
            args[0], args[1], fmt="e4m3", row_scale=args[2], col_scale=args[3], out=out
        )

    (want,), _ = poisoned_bf16_run(call(ops, outs[0]), [outs[0]])
    (got,), written = poisoned_bf16_run(call(cai, outs[1]), [outs[1]])
    assert written, "the interface-operand call left poison in its output"
    ref = (
        (formats.e4m3_decode(aq).astype(np.float64) @ formats.e4m3_decode(wq).astype(np.float64).T)
        * as_[:, None]
        * ws[None, :]
    )
    assert_gemm_close(download(outs[1]).astype(np.float32), ref)
    assert np.array_equal(got, want)
