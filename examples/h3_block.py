"""One whole MiniMax-H3 DiT block on the GPU, in BF16, FP8 and NVFP4 flavours:

    pre-attention  ->  attention (plain CuPy softmax attention)  ->  out_proj  ->  MLP

    python examples/h3_block.py [M]

Flavours (the ops the project has for each):
* bf16:  minimax_h3_bf16_pre_attention (P = 1 pack), FP8 out_proj, FP8 MLP;
* fp8:   minimax_h3_fp8_pre_attention, FP8 out_proj, FP8 MLP;
* nvfp4: minimax_h3_nvfp4_pre_attention, NVFP4 out_proj, FP8 MLP.

Weights are prepared on the device with the h3cupy helpers. Each h3cupy stage's output is
checked against the host reference of that stage fed with the GPU's own stage inputs (the
pre-attention and the MLP on 64 sampled rows, the ops being row-local; the out_proj on every
row): worst |err| over the SPEC §8 bound, <= 1 passes (the MLP with its own bound). As SPEC §8
prescribes, the references of the quantized stages consume the kernels' own quantized
activations, which the calls return through caller workspaces. Each stage is timed with CUDA
events.
Without an sm_90a GPU it says so and runs the host reference chain of one block for a few tokens.
"""

from __future__ import annotations

import sys
import time

import numpy as np

from h3cupy import formats, reference, verify
from h3cupy.reference import inputs
from h3cupy.testing import gpu_available

D, HEADS, HD, FFN = 5376, 56, 128, 14336


def host_attention(q, k, v):
    """softmax(q k^T / sqrt(128)) v per head in float32: q, k, v [M, 56, 128] -> [M, 7168]."""
    q, k, v = (np.asarray(t, np.float32).transpose(1, 0, 2) for t in (q, k, v))
    s = q @ k.transpose(0, 2, 1) / np.sqrt(HD)
    s = np.exp(s - s.max(-1, keepdims=True))
    o = (s / s.sum(-1, keepdims=True)) @ v
    return formats.to_bf16(o.transpose(1, 0, 2).reshape(q.shape[1], HEADS * HD))


def worst_ratio(got, ref, residual=None, mlp=False):
    """max |got - ref| / bound, SPEC §8: bound = 1e-2 + c*mag + 2*ulp_bf16(mag) with c = 1e-2
    (1.6e-2 for the MLP); mag = |ref|, or max(|ref|, |ref - residual|) for a gated residual
    output (the gated product can cancel the residual)."""
    got = np.asarray(got, np.float64)
    ref = np.asarray(ref, np.float64)
    mag = np.abs(ref)
    if residual is not None:
        mag = np.maximum(mag, np.abs(ref - np.asarray(residual, np.float64)))
    bound = 1e-2 + (1.6e-2 if mlp else 1e-2) * mag + 2 * formats.bf16_ulp(mag)
    return float((np.abs(got - ref) / bound).max())


def qkv_ratio(got, ref):
    """worst |err| / bound over q, k, v ([rows, 56, 128] each): SPEC §8's pre-attention bound,
    whose mag on the RoPE dims is the larger of a value and its rotation partner."""
    worst = 0.0
    for i in range(3):
        g = np.asarray(got[i], np.float64).reshape(-1, HEADS, HD)
        r = np.asarray(ref[i], np.float64).reshape(-1, HEADS, HD)
        bound = (
            verify.pre_attention_bound(r)
            if i < 2
            else 1e-2 + 1e-2 * np.abs(r) + 2 * formats.bf16_ulp(np.abs(r))
        )
        worst = max(worst, float((np.abs(g - r) / bound).max()))
    return worst


def on_gpu(m: int) -> None:
    import cupy

    import h3cupy
    from h3cupy.testing import device_info, download, upload

    print(f"GPU: {device_info()['gpu']}, M = {m} tokens")
    rng = np.random.default_rng(0)
    host = inputs.pre_attention_inputs(m, rows=9, rng=rng)
    mlp_host = inputs.mlp_inputs(1, rows=9, rng=rng)
    o_w = inputs.normal_bf16((D, HEADS * HD), 0.01, rng)
    dev = {k: upload(v) for k, v in host.items() if k != "modulation"}
    mod = upload(host["modulation"])  # the [rows, 6 * D] projection: chunks as strided views
    shift_a, scale_a, gate_a = mod[:, 0:D], mod[:, D : 2 * D], mod[:, 2 * D : 3 * D]
    shift_m, scale_m, gate_m = mod[:, 3 * D : 4 * D], mod[:, 4 * D : 5 * D], mod[:, 5 * D :]
    idx = dev["adaln_index"]
    x = dev["x"]
    w_qkv = dev["qkv_weight"]
    qkv_q, qkv_s = h3cupy.quantize_minimax_h3_qkv_weight_fp8(w_qkv)
    qkv_4, qkv_sf, qkv_g = h3cupy.quantize_minimax_h3_qkv_weight_nvfp4(w_qkv)
    o_q, o_s = h3cupy.quantize_minimax_h3_o_weight_fp8(upload(o_w))
    o_4, o_sf, o_g = h3cupy.quantize_minimax_h3_o_weight_nvfp4(upload(o_w))
    w1q, w1s = h3cupy.prepare_minimax_h3_fc1_weight_fp8(upload(mlp_host["fc1_weight"]))
    w2q, w2s = h3cupy.prepare_minimax_h3_fc2_weight_fp8(upload(mlp_host["fc2_weight"]))
    common = (host["x_norm_weight"], host["adaln_scale"], host["adaln_shift"])
    a_host = reference.prologue(host["x"], *common, host["adaln_index"])
    act_g = cupy.asarray(
        np.array(
            [formats.nvfp4_global_scale_from_amax(np.abs(a_host.astype(np.float32)).max())],
            np.float32,
        )
    )

    def timed(fn, *args, **kwargs):
        start, stop = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        out = fn(*args, **kwargs)
        stop.record()
        stop.synchronize()
        return out, cupy.cuda.get_elapsed_time(start, stop)

    rows = verify.sample_rows(m, 64, rng)  # the rows each stage's reference recomputes
    for flavour in ("bf16", "fp8", "nvfp4"):
        times = {}
        pre_args = (x, dev["x_norm_weight"], scale_a, shift_a, idx)
        rope = (dev["q_norm_weight"], dev["k_norm_weight"], dev["rope_cos_sin"])
        if flavour == "bf16":
            pack = cupy.empty((1, m, HEADS, 3, HD), formats.BF16)
            _, times["pre-attention"] = timed(
                h3cupy.minimax_h3_bf16_pre_attention,
                *pre_args,
                w_qkv,
                *rope,
                ulysses_degree=1,
                out=pack,
            )
            p = download(pack)[0]
            q, k, v = p[:, :, 0], p[:, :, 1], p[:, :, 2]
            ref = verify.bf16_pre_attention_reference(host, rows)  # [rows, 56, 3, 128]
            r_pre = qkv_ratio([t[rows] for t in (q, k, v)], [ref[:, :, i] for i in range(3)])
        elif flavour == "fp8":
            # the per-token FP8 activation comes back through caller workspaces
            act_q, act_s = cupy.empty((m, D), np.uint8), cupy.empty((m,), np.float32)
            res, times["pre-attention"] = timed(
                h3cupy.minimax_h3_fp8_pre_attention,
                *pre_args,
                qkv_q,
                qkv_s,
                *rope,
                act_q=act_q,
                act_scale=act_s,
            )
            q, k, v = (download(t) for t in res[:3])
            ref = verify.fp8_pre_attention_reference(
                host, download(qkv_q), download(qkv_s), rows, act_q, act_s, "bf16", {}
            )
            r_pre = qkv_ratio([t[rows] for t in (q, k, v)], ref)
        else:
            act_q, act_sf = cupy.empty((m, D // 2), np.uint8), cupy.empty((m, D // 16), np.uint8)
            res, times["pre-attention"] = timed(
                h3cupy.minimax_h3_nvfp4_pre_attention,
                *pre_args,
                qkv_4,
                qkv_sf,
                qkv_g,
                act_g,
                *rope,
                act_q=act_q,
                act_sf=act_sf,
            )
            q, k, v = (download(t) for t in res[:3])
            g_w, g_a = float(download(qkv_g)[0]), float(download(act_g)[0])
            ref = verify.nvfp4_pre_attention_reference(
                host, download(qkv_4), download(qkv_sf), g_w, g_a, rows, act_q, act_sf, "bf16", {}
            )
            r_pre = qkv_ratio([t[rows] for t in (q, k, v)], ref)
        # Attention: plain CuPy (float32 softmax), the stage h3cupy does not provide.
        qd, kd, vd = (cupy.asarray(np.asarray(t, np.float32)).transpose(1, 0, 2) for t in (q, k, v))

        def attention(qd=qd, kd=kd, vd=vd):
            s = qd @ kd.transpose(0, 2, 1) / np.float32(np.sqrt(HD))
            s = cupy.exp(s - s.max(-1, keepdims=True))
            o = (s / s.sum(-1, keepdims=True)) @ vd
            return o.transpose(1, 0, 2).reshape(m, HEADS * HD)

        att, times["attention"] = timed(attention)
        attn = cupy.asarray(formats.to_bf16(cupy.asnumpy(att)))
        resid = x.copy()
        out1 = cupy.empty((m, D), formats.BF16)
        if flavour == "nvfp4":
            att_g = cupy.asarray(
                np.array(
                    [formats.nvfp4_global_scale_from_amax(float(cupy.abs(att).max()))], np.float32
                )
            )
            _, times["out_proj"] = timed(
                h3cupy.minimax_h3_nvfp4_out_proj,
                attn,
                o_4,
                o_sf,
                o_g,
                att_g,
                gate_a,
                idx,
                resid,
                out=out1,
            )
        else:
            _, times["out_proj"] = timed(
                h3cupy.minimax_h3_fp8_out_proj, attn, o_q, o_s, gate_a, idx, resid, out=out1
            )
        out2 = cupy.empty((m, D), formats.BF16)
        # the MLP's quantized intermediates (a_q / a_scale of the prologue, y_q / y_scale of FC1's
        # output) come back through caller workspaces, for its reference
        mlp_ws = {
            "workspace_a_q": cupy.empty((m, D), np.uint8),
            "workspace_a_scale": cupy.empty((m,), np.float32),
            "workspace_y_q": cupy.empty((m, FFN), np.uint8),
            "workspace_y_scale": cupy.empty((m,), np.float32),
        }
        _, times["mlp"] = timed(
            h3cupy.minimax_h3_mlp_fp8_sm120,
            out1,
            dev["x_norm_weight"],
            scale_m,
            shift_m,
            idx,
            gate_m,
            out1,
            w1q,
            w1s,
            w2q,
            w2s,
            out=out2,
            **mlp_ws,
        )
        # The out_proj stage against its reference, fed with the GPU's own attention output.
        if flavour == "nvfp4":
            o4h, osfh, ogh = (download(t) for t in (o_4, o_sf, o_g))
            ref1 = reference.minimax_h3_nvfp4_out_proj(
                download(attn),
                o4h,
                osfh,
                float(ogh[0]),
                float(download(att_g)[0]),
                host["gate"],
                host["adaln_index"],
                host["x"],
            )
        else:
            ref1 = reference.minimax_h3_fp8_out_proj(
                download(attn),
                download(o_q),
                download(o_s),
                host["gate"],
                host["adaln_index"],
                host["x"],
            )
        o1 = download(out1)
        r_out = worst_ratio(o1.astype(np.float32), ref1, residual=host["x"])
        # The MLP stage against its reference, fed with the GPU's out_proj output (its x and
        # residual) and its own quantized intermediates (SPEC §8, the MLP bound).
        mod_h = host["modulation"]
        mlp_in = {
            "x": o1,
            "x_norm_weight": host["x_norm_weight"],
            "adaln_scale": mod_h[:, 4 * D : 5 * D],
            "adaln_shift": mod_h[:, 3 * D : 4 * D],
            "adaln_index": host["adaln_index"],
            "gate": mod_h[:, 5 * D :],
            "residual": o1,
        }
        ws = {k[len("workspace_") :]: download(v)[rows] for k, v in mlp_ws.items()}
        weights = tuple(download(w) for w in (w1q, w1s, w2q, w2s))
        ref2 = verify.mlp_fp8_reference(
            mlp_in, weights, rows, ws["a_q"], ws["a_scale"], ws["y_q"], ws["y_scale"]
        )
        got2 = download(out2)[rows].astype(np.float32)
        r_mlp = worst_ratio(got2, ref2.out, residual=o1[rows], mlp=True)
        line = ", ".join(f"{k} {v:.3f} ms" for k, v in times.items())
        print(f"{flavour:>6}: {line}")
        print(
            f"        worst |err| / bound: pre-attention {r_pre:.3f}, out_proj {r_out:.3f}, "
            f"mlp {r_mlp:.3f}"
        )


def without_gpu(m: int = 4) -> None:
    print("No sm_90a GPU here: running the host reference chain of one block instead.")
    t0 = time.time()
    host = inputs.pre_attention_inputs(m, rows=9)
    pack = reference.minimax_h3_bf16_pre_attention(
        *(host[k] for k in inputs.PRE_ATTENTION_KEYS),
        ulysses_degree=1,
    )[0]
    att = host_attention(pack[:, :, 0], pack[:, :, 1], pack[:, :, 2])
    print(
        f"reference pre-attention + attention for M={m}: attn_out {list(att.shape)} "
        f"({time.time() - t0:.1f} s)"
    )


def main() -> None:
    m = int(sys.argv[1]) if len(sys.argv) > 1 else 257
    if gpu_available():
        from h3cupy.core import arch

        if arch.current_target() == "sm_90a":
            on_gpu(m)
            return
    without_gpu()


if __name__ == "__main__":
    main()
