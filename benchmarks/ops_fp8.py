"""Benchmark: the W8A8 operators at the production centres (T = 38592 tokens over P ranks:
M = 4824, 9648, 19296, 38592) against the chains a user would assemble, in one run (CUDA-graph
replays, interleaved, median):

* ``fp8_pre_attention`` (out_mode bf16) vs the torch chain (RMSNorm + AdaLN + per-token FP8 +
  ``torch._scaled_mm`` row-wise + Q/K RMSNorm + RoPE), eager and torch.compile, and the bare
  ``_scaled_mm``;
* ``fp8_out_proj`` vs per-token FP8 + ``_scaled_mm`` + gated residual (eager, compile) and the bare
  ``_scaled_mm``;
* ``mlp_fp8`` vs prologue + FP8 + FC1 ``_scaled_mm`` + SwiGLU + FP8 + FC2 ``_scaled_mm`` + gated
  residual (eager, compile) and the two bare ``_scaled_mm``;
* ``nvfp4_pre_attention`` / ``nvfp4_out_proj`` (W4A4; ``--ops`` names them) vs the chain the
  issues name for Hopper: the activation quantized and dequantized (NVFP4, per 16 values) in
  torch, the weight dequantized once to bf16 outside the timing, cuBLAS bf16, the elementwise
  rest; and the bare bf16 GEMM.

    PYTHONPATH=. python3 benchmarks/ops_fp8.py --json out.json [--m 4824 38592] [--ops ...]
"""

from __future__ import annotations

import argparse
import datetime
import json

import numpy as np

D, ATTN, FFN, QKV = 5376, 7168, 14336, 21504
#: pre_attention.FP8_TILE's forms, as --other-tile prints them
TILE_FORMS = {"n192": "128 x 192 in N-tile pairs", "m192": "192 x 128", "m128": "128 x 128"}


def fp8_rows(t):
    """Per-token FP8 in torch: codes and fp32 [M, 1] scales (s = max(amax, 1e-12) / 448)."""
    import torch

    s = t.float().abs().amax(1, keepdim=True).clamp_min(1e-12) / 448
    return (t.float() / s).to(torch.float8_e4m3fn), s


def scaled_mm(aq, sa, wq, sw):
    import torch

    return torch._scaled_mm(aq, wq.t(), scale_a=sa, scale_b=sw.t(), out_dtype=torch.bfloat16)


def prologue(x, w, scale, shift, idx, eps=1e-5):
    import torch

    rows = scale.shape[0]
    xf = x.float()
    n = (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * w.float()).bfloat16()
    valid = (idx >= 0) & (idx < rows)
    i = idx.clamp(0, rows - 1)
    a = torch.addcmul(shift[i].float(), n.float(), (scale[i].float() + 1).bfloat16().float())
    return torch.where(valid[:, None], a.bfloat16(), torch.zeros_like(x))


def gated(o, gate, idx, residual):
    import torch

    rows = gate.shape[0]
    valid = (idx >= 0) & (idx < rows)
    g = gate[idx.clamp(0, rows - 1)]
    out = (residual.float() + (g.float() * o.float()).bfloat16().float()).bfloat16()
    return torch.where(valid[:, None], out, residual)


def chain_pre(x, w, scale, shift, idx, wq, ws, qn, kn, cs):
    aq, sa = fp8_rows(prologue(x, w, scale, shift, idx))
    return _norm_rope_qkv(scaled_mm(aq, sa, wq, ws), qn, kn, cs)


def _norm_rope_qkv(y, qn, kn, cs):
    """The chains' per-head Q/K RMSNorm + partial NeoX RoPE (identity positions) of the QKV
    projection y [M, 21504] (engine order [kind, head, dim]); returns q, k, v."""
    import torch

    m = y.shape[0]
    y = y.view(m, 3, 56, 128)
    c, s = cs[:m, None, :48].float(), cs[:m, None, 48:96].float()

    def norm_rope(t, g):
        tf = t.float()
        t = (tf * torch.rsqrt(tf.pow(2).mean(-1, keepdim=True) + 1e-5) * g.float()).bfloat16()
        lo, hi = t[..., :48].float(), t[..., 48:96].float()
        return torch.cat(
            [(lo * c - hi * s).bfloat16(), (hi * c + lo * s).bfloat16(), t[..., 96:]], -1
        )

    return norm_rope(y[:, 0], qn), norm_rope(y[:, 1], kn), y[:, 2]


def chain_out_proj(attn, wq, ws, gate, idx, residual):
    aq, sa = fp8_rows(attn)
    return gated(scaled_mm(aq, sa, wq, ws), gate, idx, residual)


def chain_mlp(x, w, scale, shift, idx, gate, residual, w1q, w1s, w2q, w2s):
    import torch

    aq, sa = fp8_rows(prologue(x, w, scale, shift, idx))
    h = scaled_mm(aq, sa, w1q, w1s)  # natural [gate; up] order for the chain
    g, u = h[:, :FFN].float(), h[:, FFN:].float()
    y = ((g / (1 + torch.exp(-g))).bfloat16().float() * u).bfloat16()
    yq, sy = fp8_rows(y)
    return gated(scaled_mm(yq, sy, w2q, w2s), gate, idx, residual)


def nvfp4_qdq(t, g):
    """NVFP4 quantize-dequantize of ``t`` [M, K] in torch (SPEC §1: per 16 values sf =
    ue4m3(amax / 6 * g), codes = e2m1(v * g / sf) with RNE, back as codes * sf / g), bf16 out."""
    import torch

    m, k = t.shape
    v = t.float().view(m, k // 16, 16)
    sf = (v.abs().amax(-1, keepdim=True) / 6 * g).to(torch.float8_e4m3fn).float()
    x = torch.where(sf > 0, v * (g / sf), torch.zeros_like(v))
    a = x.abs().clamp(max=6)
    q = torch.where(
        a < 2, torch.round(a * 2) / 2, torch.where(a < 4, torch.round(a), torch.round(a / 2) * 2)
    )
    return (torch.sign(x) * q * sf / g).view(m, k).bfloat16()


def chain_pre_nvfp4(x, w, scale, shift, idx, wt, qn, kn, cs, g):
    """The W4A4 pre-attention chain on Hopper: prologue, NVFP4 quantize-dequantize of a, bf16
    cuBLAS with the once-dequantized weight, Q/K RMSNorm + RoPE."""
    a = nvfp4_qdq(prologue(x, w, scale, shift, idx), g)
    return _norm_rope_qkv(a @ wt.t(), qn, kn, cs)


def chain_out_proj_nvfp4(attn, wt, gate, idx, residual, g):
    return gated(nvfp4_qdq(attn, g) @ wt.t(), gate, idx, residual)


def head_inputs(m: int, dev):
    """The pre-attention ops' per-head operands (Q/K RMSNorm weights near 1, the RoPE cache of
    m positions) and three bf16 [m, 56, 128] outputs."""
    import torch

    from h3cupy.reference import inputs

    qn = (torch.rand(128, device="cuda") * 0.2 + 0.9).bfloat16()
    kn = (torch.rand(128, device="cuda") * 0.2 + 0.9).bfloat16()
    outs = [torch.empty(m, 56, 128, dtype=torch.bfloat16, device="cuda") for _ in range(3)]
    return qn, kn, dev(inputs.rope_cache(m)), outs


def with_setting(module, name: str, value, fn):
    """``fn`` with the module setting ``module.name = value`` while it runs (read at call time,
    so also inside a graph capture)."""

    def call(i):
        old = getattr(module, name)
        setattr(module, name, value)
        try:
            return fn(i)
        finally:
            setattr(module, name, old)

    return call


def fused_quant(fn, value: bool = True):
    """``fn`` with ``out_proj.FUSED_QUANT`` and ``mlp.FUSED_QUANT`` set to ``value`` (True: the
    single-launch quantization forms; False: the quantization as a launch of its own)."""
    from h3cupy.ops import mlp, out_proj

    return with_setting(out_proj, "FUSED_QUANT", value, with_setting(mlp, "FUSED_QUANT", value, fn))


def tail_split(fn, value: bool = True):
    """``fn`` with ``gemm.TAIL_SPLIT`` set to ``value`` (True, the default: the FP8
    out_proj's and FC2's last partial round as split-K units)."""
    from h3cupy.ops import gemm

    return with_setting(gemm, "TAIL_SPLIT", value, fn)


def flags_for(m: int, k: int):
    """A workspace_flags long enough for every form of the FP8 GEMM with the gated residual at
    this M and K (the single-launch form's, the longest)."""
    import torch

    from h3cupy.ops import gemm, out_proj

    words = []
    old_from = gemm.FP8_OPS_CLUSTER2_FROM_M
    for cluster in (1, 2):  # both cluster sizes (the tail split's layout differs)
        old, gemm.FP8_CLUSTER = gemm.FP8_CLUSTER, cluster
        gemm.FP8_OPS_CLUSTER2_FROM_M = None
        try:
            words.append(out_proj._flags_words(m, k, True))
        finally:
            gemm.FP8_CLUSTER, gemm.FP8_OPS_CLUSTER2_FROM_M = old, old_from
    return torch.empty(max(words), dtype=torch.int32, device="cuda")


def other_cluster(fn, now: int, op: str = "out_proj"):
    """``fn`` with the other cluster size than ``now``, its default's (1 <-> 2: the FP8
    192-column tiles on single CTAs or in clusters of two multicasting the weight tile): through
    ``gemm.FP8_CLUSTER`` with ``gemm.FP8_OPS_CLUSTER2_FROM_M`` off (the engine, the out_proj,
    the MLP), or for ``op`` "pre_attention" (its n192 pairs' single launch) through
    ``pre_attention.FP8_PAIR_CLUSTER`` with ``FP8_PAIR_CLUSTER2_FROM_M`` off."""
    from h3cupy.ops import gemm, pre_attention

    if op == "pre_attention":
        module, base, threshold = pre_attention, "FP8_PAIR_CLUSTER", "FP8_PAIR_CLUSTER2_FROM_M"
    else:
        module, base, threshold = gemm, "FP8_CLUSTER", "FP8_OPS_CLUSTER2_FROM_M"
    fn = with_setting(module, base, 3 - now, fn)
    return with_setting(module, threshold, None, fn)


def cluster_now(op: str, m: int) -> int:
    """The cluster size the op's default runs at M = m: the FP8 pre-attention's single launch
    pre_attention.fp8_pair_cluster(m), the out_proj's and the MLP's gemm.fp8_ops_cluster(m)."""
    from h3cupy.ops import gemm, pre_attention

    if op == "pre_attention":
        return pre_attention.fp8_pair_cluster(m)
    return gemm.fp8_ops_cluster(m)


def skipping(fn, names: tuple[str, ...]):
    """``fn`` with its launches of the quantize.cu kernels ``names`` skipped (in the out_proj,
    MLP, GEMM and weights modules; the NVFP4 out_proj's two-launch form quantizes through
    ``weights._fp4_quantize_launch`` since e6381c9): with workspaces that an earlier call
    filled, the rest of the op on operands prepared already."""
    from h3cupy import weights
    from h3cupy.ops import gemm, mlp, out_proj
    from h3cupy.weights import _kernel

    def call(i):
        saved = {mod: mod.launch for mod in (gemm, mlp, out_proj, weights)}

        skipped = []

        def launch(kernel, *a, **kw):
            dev = kw["tensors"][0].device if kw.get("tensors") else 0
            if any(kernel is _kernel(n, dev) for n in names):
                skipped.append(kernel)
                return None
            return saved[out_proj](kernel, *a, **kw)

        for mod in saved:
            mod.launch = launch
        try:
            result = fn(i)
        finally:
            for mod, real in saved.items():
                mod.launch = real
        if not skipped:  # a launch moved to another module would be timed silently
            raise RuntimeError(f"skipping: no launch of {names} was made through a patched module")
        return result

    return call


def without_quant_launch(fn):
    """``fn`` with its per-token FP8 quantization launch skipped (the out_proj's of attn_out, the
    MLP's of y): the rest of the two-launch op on already-quantized operands, so that the
    single-launch form's quantization cost can be read off against it."""
    return skipping(fn, ("quantize_rows_fp8_smxx",))


def kernel_breakdown(fn, reps: int = 5) -> dict[str, float]:
    """GPU time of each kernel launch of one call of ``fn`` (median over ``reps`` calls, ms):
    every ``launch`` of the ops modules is wrapped with CUDA events on the current torch stream,
    and kernels are named from ``jit.get_kernel``. Repeated kernels get a ``#n`` suffix."""
    import torch

    from h3cupy.core import jit
    from h3cupy.ops import gemm, mlp, out_proj, pre_attention, prologue

    names: dict[int, str] = {}
    real_get = jit.get_kernel

    def get_kernel(spec, name, target):
        k = real_get(spec, name, target)
        names[id(k)] = name.split("<")[0].replace("h3::", "")
        return k

    records: list = []

    def wrap(real_launch):
        def launch(kernel, *a, **kw):
            ev = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            ev[0].record()
            real_launch(kernel, *a, **kw)
            ev[1].record()
            records.append((names.get(id(kernel), "?"), *ev))

        return launch

    mods = (gemm, mlp, out_proj, pre_attention, prologue)
    saved = {mod: mod.launch for mod in mods}
    jit.get_kernel = get_kernel
    for mod in mods:
        mod.launch = wrap(saved[mod])
    runs: list[dict[str, float]] = []
    try:
        for _ in range(reps + 1):
            records.clear()
            fn(0)
            torch.cuda.synchronize()
            seen: dict[str, float] = {}
            for name, a, b in records:
                key, n = name, 1
                while key in seen:
                    n += 1
                    key = f"{name}#{n}"
                seen[key] = a.elapsed_time(b)
            runs.append(seen)
    finally:
        jit.get_kernel = real_get
        for mod in mods:
            mod.launch = saved[mod]
    return {k: float(np.median([r[k] for r in runs[1:]])) for k in runs[-1]}


def forms(op: str, m: int, other_tile: bool = False, other_clusters: bool = False):
    """The forms of one op at M that :func:`run` times, on fresh inputs in the model's
    distributions: ``(fns, args, chain, flops)``, fns mapping a form's name to a callable of the
    replay index (``h3``: the op's default), ``chain(*args)`` the torch chain, ``flops`` the
    op's GEMM FLOPs (scripts/probe_engine.py runs the same forms under its diagnostic builds).
    ``other_clusters``: also ``h3_other_cluster`` (and the out_proj's ``engine_other_cluster``),
    the forms with the other :data:`h3cupy.ops.gemm.FP8_CLUSTER`."""
    import torch

    import h3cupy
    from h3cupy import formats
    from h3cupy.ops import gemm, mlp, out_proj, pre_attention
    from h3cupy.reference import inputs
    from h3cupy.testing import torch_cuda as dev

    rng = np.random.default_rng(0)
    host = inputs.prologue_inputs(m, rows=9, rng=rng)

    mod = dev(host["modulation"])
    x, w, idx = dev(host["x"]), dev(host["x_norm_weight"]), dev(host["adaln_index"])
    shift, scale, gate = mod[:, 0:D], mod[:, D : 2 * D], mod[:, 2 * D : 3 * D]
    residual = torch.randn(m, D, device="cuda").bfloat16()

    def wfp8(n, k):
        wt = (torch.randn(n, k, device="cuda") * 0.01).bfloat16()
        q, s = fp8_rows(wt)
        return q, s  # codes [n, k] e4m3, scales [n, 1]

    fns = {}
    if op == "pre_attention":
        wq, ws = wfp8(QKV, D)
        qn, kn, cs, outs = head_inputs(m, dev)
        aq_ws = torch.empty(m, D, dtype=torch.float8_e4m3fn, device="cuda")
        as_ws = torch.empty(m, dtype=torch.float32, device="cuda")
        ws1 = ws.reshape(-1).contiguous()
        fns["h3"] = lambda i: h3cupy.minimax_h3_fp8_pre_attention(
            x,
            w,
            scale,
            shift,
            idx,
            wq,
            ws1,
            qn,
            kn,
            cs,
            q=outs[0],
            k=outs[1],
            v=outs[2],
            act_q=aq_ws,
            act_scale=as_ws,
        )
        fns["h3"].outs = outs  # (scripts/probe_engine.py's A/Bs compare these bytes)
        if other_tile:  # the other tile forms (pre_attention.FP8_TILE), as h3_tile_{form}
            for tile in pre_attention.FP8_TILES:
                if tile != pre_attention.FP8_TILE:
                    h3 = with_setting(pre_attention, "FP8_TILE", tile, fns["h3"])
                    fns[f"h3_tile_{tile}"] = h3
        fns["h3_no_tail"] = tail_split(fns["h3"], False)
        # the n192 pairs with their tail split (session 24, pre_attention.FP8_PAIR_TAIL_SPLIT)
        fns["h3_pair_tail"] = with_setting(pre_attention, "FP8_PAIR_TAIL_SPLIT", True, fns["h3"])
        # the prologue as a launch of its own before the GEMM (pre_attention.FP8_FUSED_PROLOGUE
        # off; the single launch is the default since session 27)
        fns["h3_prologue_launch"] = with_setting(
            pre_attention, "FP8_FUSED_PROLOGUE", False, fns["h3"]
        )
        args = (x, w, scale, shift, idx, wq, ws, qn, kn, cs)
        chain = chain_pre
        a_in, s_in = fp8_rows(torch.randn(m, D, device="cuda").bfloat16())
        fns["gemm"] = lambda i: scaled_mm(a_in, s_in, wq, ws)
        flops = 2.0 * m * QKV * D
    elif op == "out_proj":
        wq, ws = wfp8(D, ATTN)
        attn = torch.randn(m, ATTN, device="cuda").bfloat16()
        out = torch.empty(m, D, dtype=torch.bfloat16, device="cuda")
        aq_ws = torch.empty(m, ATTN, dtype=torch.float8_e4m3fn, device="cuda")
        as_ws = torch.empty(m, dtype=torch.float32, device="cuda")
        ws1 = ws.reshape(-1).contiguous()
        flags = flags_for(m, ATTN)

        def out_proj_call(**kw):
            return h3cupy.minimax_h3_fp8_out_proj(
                attn, wq, ws1, gate, idx, residual, out=out, act_q=aq_ws, act_scale=as_ws, **kw
            )

        # the default is the single-launch form (out_proj.FUSED_QUANT)
        fns["h3"] = lambda i: out_proj_call(workspace_flags=flags)
        fns["h3_two_launch"] = fused_quant(lambda i: out_proj_call(), False)
        fns["h3_no_quant"] = without_quant_launch(fns["h3_two_launch"])
        fns["h3"].out = out  # (scripts/probe_engine.py --ab compares the bytes of two builds)
        fns["h3_no_tail"] = tail_split(fns["h3"], False)
        args = (attn, wq, ws, gate, idx, residual)
        chain = chain_out_proj
        a_in, s_in = fp8_rows(attn)
        fns["gemm"] = lambda i: scaled_mm(a_in, s_in, wq, ws)
        # the engine's plain FP8 GEMM at the same shape (issue #6: the fused form within 5% of it)
        eng_out = torch.empty(m, D, dtype=torch.bfloat16, device="cuda")
        s_row = s_in.reshape(-1).contiguous()
        fns["engine"] = lambda i: gemm.gemm_wgmma(
            a_in, wq, fmt="e4m3", row_scale=s_row, col_scale=ws1, out=eng_out
        )
        flops = 2.0 * m * D * ATTN
    elif op in ("nvfp4_pre_attention", "nvfp4_out_proj"):
        pre = op == "nvfp4_pre_attention"
        n, k = (QKV, D) if pre else (D, ATTN)
        wt = (torch.randn(n, k, device="cuda") * 0.01).bfloat16()
        quant = (
            h3cupy.quantize_minimax_h3_qkv_weight_nvfp4
            if pre
            else h3cupy.quantize_minimax_h3_o_weight_nvfp4
        )
        wq_nv, wsf, gw = quant(wt)
        a_src = prologue(x, w, scale, shift, idx) if pre else torch.randn(m, ATTN, device="cuda")
        amax = float(a_src.float().abs().max())
        g = 448 * 6 / max(amax, 1e-12)
        ga = h3cupy.nvfp4_global_scale_from_amax(amax)
        ws = {
            "act_q": torch.empty(m, k // 2, dtype=torch.uint8, device="cuda"),
            "act_sf": torch.empty(m, k // 16, dtype=torch.uint8, device="cuda"),
            "workspace_a": torch.empty(m, k, dtype=torch.bfloat16, device="cuda"),
            "workspace_w": torch.empty(n, k, dtype=torch.bfloat16, device="cuda"),
        }
        if pre:
            qn, kn, cs, outs = head_inputs(m, dev)
            fns["h3"] = lambda i: h3cupy.minimax_h3_nvfp4_pre_attention(  # Hopper path below
                x,
                w,
                scale,
                shift,
                idx,
                wq_nv,
                wsf,
                gw,
                ga,
                qn,
                kn,
                cs,
                q=outs[0],
                k=outs[1],
                v=outs[2],
                **ws,
            )
            args, chain = (x, w, scale, shift, idx, wt, qn, kn, cs, g), chain_pre_nvfp4
        else:
            attn = a_src.bfloat16()
            out = torch.empty(m, D, dtype=torch.bfloat16, device="cuda")
            fns["h3"] = lambda i: h3cupy.minimax_h3_nvfp4_out_proj(
                attn, wq_nv, wsf, gw, ga, gate, idx, residual, out=out, **ws
            )
            args, chain = (attn, wt, gate, idx, residual, g), chain_out_proj_nvfp4
        # the Hopper path (bf16 wgmma on dequantized operands) as "h3", the verified in-register
        # emulation (the sm_90a default until the Hopper path has passed) as "h3_emulation"
        op_mod = pre_attention if pre else out_proj
        h3 = fns["h3"]
        fns["h3"] = with_setting(op_mod, "BACKEND", "wgmma", h3)
        fns["h3_emulation"] = with_setting(op_mod, "BACKEND", "mma", h3)
        if not pre:
            # the default quantizes attn_out inside the GEMM launch (out_proj.NVFP4_FUSED_QUANT);
            # "h3_two_launch": the quantization and a' as launches of their own
            fns["h3_two_launch"] = with_setting(out_proj, "NVFP4_FUSED_QUANT", False, fns["h3"])
            # the GEMM launch alone (a' and w' from an earlier call), and the single launch
            # without the weight's dequantization: their difference is the in-launch
            # quantization's cost
            fns["h3_gemm_only"] = skipping(
                fns["h3_two_launch"], ("fp4_quantize_smxx", "nvfp4_dequant_bf16_smxx")
            )
            fns["h3_fused_only"] = skipping(fns["h3"], ("nvfp4_dequant_bf16_smxx",))
        a_in = torch.randn(m, k, device="cuda").bfloat16()
        fns["gemm"] = lambda i: a_in @ wt.t()
        flops = 2.0 * m * n * k
    else:
        w1q, w1s = wfp8(2 * FFN, D)  # natural order for the chain
        w2q, w2s = wfp8(D, FFN)
        src = torch.from_numpy(formats.fc1_prepack_source_rows(FFN)).cuda()
        w1q_p, w1s_p = w1q[src].contiguous(), w1s.reshape(-1)[src].contiguous()
        out = torch.empty(m, D, dtype=torch.bfloat16, device="cuda")
        wsp = {
            "workspace_a_q": torch.empty(m, D, dtype=torch.float8_e4m3fn, device="cuda"),
            "workspace_a_scale": torch.empty(m, dtype=torch.float32, device="cuda"),
            "workspace_y": torch.empty(m, FFN, dtype=torch.bfloat16, device="cuda"),
            "workspace_y_q": torch.empty(m, FFN, dtype=torch.float8_e4m3fn, device="cuda"),
            "workspace_y_scale": torch.empty(m, dtype=torch.float32, device="cuda"),
        }
        w2s1 = w2s.reshape(-1).contiguous()
        flags = flags_for(m, FFN)

        def mlp_call(**kw):
            return h3cupy.minimax_h3_mlp_fp8_sm120(
                x,
                w,
                scale,
                shift,
                idx,
                gate,
                residual,
                w1q_p,
                w1s_p,
                w2q,
                w2s1,
                out=out,
                **wsp,
                **kw,
            )

        fns["h3"] = lambda i: mlp_call()
        fns["h3"].out = out
        # The default quantizes y inside FC2's launch (mlp.FUSED_QUANT, since session 17): "h3"
        # with the op's own scratch counters, "h3_fused" the same form with the caller's
        # workspace_flags; "h3_two_launch" quantizes y in a launch of its own (four in all).
        fns["h3_fused"] = fused_quant(lambda i: mlp_call(workspace_flags=flags))
        fns["h3_two_launch"] = fused_quant(lambda i: mlp_call(), False)
        fns["h3_no_quant"] = without_quant_launch(fused_quant(fns["h3"], False))
        fns["h3_no_tail"] = tail_split(fns["h3"], False)
        # FC1 with the prologue inside its launch (session 27, mlp.FC1_FUSED_PROLOGUE)
        fns["h3_fc1_one_launch"] = with_setting(mlp, "FC1_FUSED_PROLOGUE", True, fns["h3"])
        args = (x, w, scale, shift, idx, gate, residual, w1q, w1s, w2q, w2s)
        chain = chain_mlp
        a_in, s_in = fp8_rows(torch.randn(m, D, device="cuda").bfloat16())
        y_in, sy_in = fp8_rows(torch.randn(m, FFN, device="cuda").bfloat16())

        def gemms(i):
            scaled_mm(a_in, s_in, w1q, w1s)
            scaled_mm(y_in, sy_in, w2q, w2s)

        fns["gemm"] = gemms
        flops = 2.0 * m * (2 * FFN * D + D * FFN)
    if op in ("pre_attention", "out_proj", "mlp"):
        from h3cupy.core import launch

        # the engine launched programmatically (launch.PDL, off by default), same run
        fns["h3_pdl"] = with_setting(launch, "PDL", True, fns["h3"])
    if other_clusters and op in ("pre_attention", "out_proj", "mlp"):
        from h3cupy.ops import gemm

        fns["h3_other_cluster"] = other_cluster(fns["h3"], cluster_now(op, m), op)
        if op == "mlp" and cluster_now(op, m) == 2:
            # FC1's single launch runs only on single CTAs: with the other cluster size it is
            # the single-CTA candidate against the clusters (session 34)
            fns["h3_fc1_one_launch_other_cluster"] = with_setting(
                mlp, "FC1_FUSED_PROLOGUE", True, fns["h3_other_cluster"]
            )
        if "engine" in fns:
            fns["engine_other_cluster"] = other_cluster(fns["engine"], gemm.FP8_CLUSTER)
    return fns, args, chain, flops


def run(
    op: str,
    m: int,
    compile_: bool,
    reps: int,
    breakdown: bool = False,
    other_tile: bool = False,
    energy: bool = False,
    other_clusters: bool = False,
    order: str = "balanced",
) -> dict:
    import torch

    from h3cupy.testing import bench_graphs, sustained_fields

    fns, args, chain, flops = forms(op, m, other_tile, other_clusters)
    fns["eager"] = lambda i: chain(*args)
    if compile_:
        compiled = torch.compile(chain, dynamic=False)
        compiled(*args)
        fns["compiled"] = lambda i: compiled(*args)
    t = bench_graphs(fns, reps=reps, energy=energy, order=order)
    row = {"op": op, "M": m, **{f"{k}_ms": v["median_ms"] for k, v in t.items()}}
    # each form's median after each predecessor (testing.bench_graphs: the carryover)
    row["after_ms"] = {k: v["after_ms"] for k, v in t.items()}
    row["order"] = order
    # energy and power under the names of session 9's energy pass ({form}_mj, {form}_w)
    for k, v in t.items():
        if "energy_mj" in v:
            row[f"{k}_mj"], row[f"{k}_w"] = v["energy_mj"], v["power_w"]
    row.update(sustained_fields(t, keys=("sustained_ms", "clock_mhz", "mcycles")))
    if breakdown:
        row["kernels_ms"] = kernel_breakdown(fns["h3"])
    row["tflops"] = flops / (row["h3_ms"] * 1e-3) / 1e12
    for k in (
        "eager",
        "compiled",
        "gemm",
        "h3_fused",
        "h3_two_launch",
        "h3_gemm_only",
        "h3_fused_only",
        "h3_no_quant",
        "h3_no_tail",
        "h3_pair_tail",
        "h3_prologue_launch",
        "h3_fc1_one_launch",
        "h3_pdl",
        "engine",
        "h3_emulation",
        "h3_tile_n192",
        "h3_tile_m192",
        "h3_tile_m128",
        "h3_other_cluster",
    ):
        if f"{k}_ms" in row:
            row[f"speedup_vs_{k}"] = row[f"{k}_ms"] / row["h3_ms"]
    return row


def main() -> None:
    from h3cupy.testing import add_order_argument

    ap = argparse.ArgumentParser()
    ap.add_argument("--m", type=int, nargs="+", default=[4824, 9648, 19296, 38592])
    ap.add_argument(
        "--ops",
        nargs="+",
        default=["pre_attention", "out_proj", "mlp"],
        choices=["pre_attention", "out_proj", "mlp", "nvfp4_pre_attention", "nvfp4_out_proj"],
    )
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument(
        "--breakdown", action="store_true", help="also time each kernel launch of the h3cupy op"
    )
    ap.add_argument(
        "--other-tile",
        action="store_true",
        help="also time fp8_pre_attention on each other tile form of pre_attention.FP8_TILE"
        " (n192: 128 x 192 in N-tile pairs, m192: 192 x 128, m128: 128 x 128)",
    )
    ap.add_argument(
        "--other-cluster",
        action="store_true",
        help="also time each FP8 op (and the out_proj's plain engine GEMM) with the other"
        " cluster size (1 <-> 2: gemm.FP8_CLUSTER / fp8_ops_cluster, the FP8 pre-attention's"
        " pre_attention.fp8_pair_cluster)",
    )
    ap.add_argument(
        "--energy",
        action="store_true",
        help="also replay each form back to back (1 s windows, twice) sampling NVML: sustained"
        " time, mean SM clock, clock cycles and energy per call (testing.bench_graphs)",
    )
    add_order_argument(ap)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()

    import torch

    from h3cupy.ops import gemm
    from h3cupy.testing import device_info

    info = device_info()
    print(f"{info['gpu']} ({info['target']})")
    print(
        f"{'op':<14}{'M':>7}{'h3 ms':>9}{'TFLOP/s':>9}{'eager':>9}{'compiled':>10}{'GEMM(s)':>9}"
        f"{'vs compile':>11}{'vs GEMM':>9}"
    )
    results = []
    nan = float("nan")
    for op in args.ops:
        for m in args.m:
            row = run(
                op,
                m,
                not args.no_compile,
                args.reps,
                args.breakdown,
                args.other_tile,
                args.energy,
                args.other_cluster,
                args.order,
            )
            results.append(row)
            print(
                f"{op:<14}{m:>7}{row['h3_ms']:>9.3f}{row['tflops']:>9.0f}{row['eager_ms']:>9.3f}"
                f"{row.get('compiled_ms', nan):>10.3f}{row['gemm_ms']:>9.3f}"
                f"{row.get('speedup_vs_compiled', nan):>11.2f}{row['speedup_vs_gemm']:>9.2f}"
            )
            forms = {
                "h3_fused_ms": "single-launch form with the caller's workspace_flags",
                "h3_two_launch_ms": "the quantization as a launch of its own",
                "h3_no_quant_ms": "that form without its quantization launch",
                "h3_gemm_only_ms": "its GEMM launch alone",
                "h3_fused_only_ms": "the single launch alone (no w' launch)",
                "h3_no_tail_ms": "without the tail split",
                "h3_pair_tail_ms": "with the pairs' tail split (two launches)",
                "h3_prologue_launch_ms": "the prologue as a launch of its own",
                "h3_fc1_one_launch_ms": "FC1 with the prologue inside its launch",
                "h3_pdl_ms": "with the programmatic launch",
            }
            extra = [f"{v} {row[k]:.3f} ms" for k, v in forms.items() if k in row]
            if "engine_ms" in row:
                extra.append(f"the plain engine GEMM {row['engine_ms']:.3f} ms")
            if extra:
                print("   " + "; ".join(extra))
            joules = [
                f"{k[:-3]} {row[k]:.1f} mJ at {row[k[:-3] + '_w']:.0f} W"
                + (
                    f", {row[k[:-3] + '_clock_mhz']:.0f} MHz, "
                    f"{row[k[:-3] + '_mcycles']:.3f} Mcycles"
                    if k[:-3] + "_mcycles" in row
                    else ""
                )
                for k in row
                if k.endswith("_mj")
            ]
            if joules:
                print("   energy per call: " + "; ".join(joules))
            if "sustained_speedup_vs_compiled" in row:
                print(
                    f"   sustained: h3 {row['h3_sustained_ms']:.3f} ms, compiled "
                    f"{row['compiled_sustained_ms']:.3f} ms, GEMM(s) {row['gemm_sustained_ms']:.3f}"
                    f" ms: {row['sustained_speedup_vs_compiled']:.2f}x compiled, "
                    f"{row['sustained_speedup_vs_gemm']:.2f}x GEMM(s)"
                )
            if "h3_other_cluster_ms" in row:
                line = (
                    f"   clusters of {3 - cluster_now(op, m)}: {row['h3_other_cluster_ms']:.3f} ms"
                )
                if "engine_other_cluster_ms" in row:
                    line += (
                        f", the plain engine GEMM (clusters of {3 - gemm.FP8_CLUSTER}) "
                        f"{row['engine_other_cluster_ms']:.3f} ms"
                    )
                print(line)
            for tile, what in TILE_FORMS.items():
                if f"h3_tile_{tile}_ms" in row:
                    print(f"   FP8_TILE = {tile!r} ({what}) {row[f'h3_tile_{tile}_ms']:.3f} ms")
            for k, v in row.get("kernels_ms", {}).items():
                print(f"   {k:<40}{v:>9.3f} ms")
            torch.cuda.empty_cache()
            # NOTE: rewritten after every row: a run cut short by a timeout keeps what it measured
            if args.json:
                doc = {
                    "date": datetime.datetime.now(datetime.timezone.utc).isoformat(
                        timespec="seconds"
                    ),
                    "device": info,
                    "torch": torch.__version__,
                    "results": results,
                }
                with open(args.json, "w") as f:
                    json.dump(doc, f, indent=1)


if __name__ == "__main__":
    main()
