"""scripts/bars.py on hand-made benchmark JSON: each bar's ratio is the baseline's time over
ours, held at or above the bar (the fused quantization's cost at or below 5%), missed below it
(above it); the other cluster size is printed beside; a run without the optional forms prints
without them. The figures are chosen so that every ratio is exact in binary (no rounding at the
printed digits)."""

from __future__ import annotations

import importlib.util
from pathlib import Path


def _bars():
    path = Path(__file__).resolve().parents[1] / "scripts" / "bars.py"
    spec = importlib.util.spec_from_file_location("bars", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


DEVICE = {"gpu": "NVIDIA H200", "compute_capability": "90"}


def test_bf16_bars_every_centre():
    bars = _bars()
    doc = {
        "date": "2026-12-06",
        "device": DEVICE,
        "results": [  # 1.25x and 1.125x torch.compile: one centre under 1.15x
            {"P": 8, "M": 4824, "h3_ms": 1.0, "compiled_ms": 1.25, "gemm_ms": 0.875},
            {"P": 1, "M": 38592, "h3_ms": 8.0, "compiled_ms": 9.0, "gemm_ms": 8.0},
        ],
    }
    lines = bars.bf16_bars(doc)
    assert (
        lines[0] == "#4 BF16 pre-attention (NVIDIA H200, 2026-12-06): MISSED at one centre or more"
    )
    assert "vs compile 1.250x ok, vs cuBLAS GEMM 0.875x" in lines[1]
    # QKV 2 * 5376 * 21504 = 231211008 FLOP per token, x 4824 = 1.11536e12 FLOP in the 1.25 / 1.15
    # ms the bar allows: 1026.1 TFLOP/s, 131.6% of 780; the bare GEMM's 0.875 ms: 1274.7, 163.4%
    assert lines[1].endswith(
        "[asks 1026 TFLOP/s, 132% of the H200's ceiling; the bare GEMM ran at 163%]"
    )
    assert "vs compile 1.125x MISSED, vs cuBLAS GEMM 1.000x (the bar asks 1.022x)" in lines[2]
    doc["results"].pop()
    assert bars.bf16_bars(doc)[0].endswith("over 1.15x at every centre")


def test_fp8_bars():
    bars = _bars()
    doc = {
        "date": "2026-12-06",
        "device": DEVICE,
        "results": [
            {  # 1.5x compile, 0.875x _scaled_mm; the other cluster size 0.9375x
                "op": "pre_attention",
                "M": 4824,
                "h3_ms": 1.0,
                "compiled_ms": 1.5,
                "gemm_ms": 0.875,
                "h3_other_cluster_ms": 0.9333333333333333,
            },
            {  # 1.25x compile; the fused quantization 6.25% over 1.0 ms on quantized input
                "op": "out_proj",
                "M": 4824,
                "h3_ms": 1.0625,
                "compiled_ms": 1.328125,
                "h3_no_quant_ms": 1.0,
                "engine_ms": 0.5,
            },
            {
                "op": "out_proj",
                "M": 38592,
                "h3_ms": 1.0,
                "compiled_ms": 1.25,
                "h3_no_quant_ms": 1.0,
            },
            {"op": "mlp", "M": 4824, "h3_ms": 2.0, "compiled_ms": 2.25, "gemm_ms": 1.75},
        ],
    }
    lines = bars.fp8_bars(doc)
    assert lines[0] == "FP8 ops (NVIDIA H200, 2026-12-06)"
    # the longer allowed time is the bare GEMM's 0.875 ms (1.5 / 1.15 = 1.304 ms): 1274.7
    # TFLOP/s, 91.0% of 1400, at which the bare GEMM ran
    assert lines[1].endswith(
        "vs compile 1.500x ok, vs _scaled_mm 0.875x (other cluster 0.938x) MISSED"
        " [asks 1275 TFLOP/s, 91% of the H200's ceiling; the bare GEMM ran at 91%]"
    )
    assert lines[2].endswith(
        "vs compile 1.250x ok; fused quantization 6.2% MISSED (12.5% of the plain engine GEMM)"
    )
    assert lines[3].endswith("vs compile 1.250x ok; fused quantization 0.0% ok")
    # the bar asks 1.15 * 1.75 / 2.25 = 0.894x the two bare GEMMs
    # FC1 + FC2 = 2 * 5376 * 28672 + 2 * 14336 * 5376 = 462422016 FLOP per token, x 4824 =
    # 2.23072e12 in 2.25 / 1.15 ms: 1140.1 TFLOP/s, 81.4% of 1400; in 1.75 ms: 1274.7, 91.0%
    assert lines[4].endswith(
        "vs compile 1.125x MISSED, vs its two _scaled_mm 0.875x (the bar asks 0.894x)"
        " [asks 1140 TFLOP/s, 81% of the H200's ceiling; the bare GEMM ran at 91%]"
    )


def test_balanced_means_decide_too():
    """With after_ms (the balanced order) the balanced means' ratio is printed beside the
    medians', and a bar holds only if both hold it."""
    bars = _bars()
    after_h3 = {"compiled": 1.0, "eager": 0.75}  # balanced mean 0.875
    doc = {
        "date": "2026-12-06",
        "device": DEVICE,
        "results": [
            {  # medians 1.25x; balanced means 1.0 / 0.875 = 1.142857x: missed
                "P": 1,
                "M": 38592,
                "h3_ms": 1.0,
                "compiled_ms": 1.25,
                "gemm_ms": 1.0,
                "after_ms": {
                    "h3": after_h3,
                    "compiled": {"h3": 1.25, "eager": 0.75},
                    "gemm": {"h3": 1.0, "eager": 0.75},
                },
            },
        ],
    }
    line = bars.bf16_bars(doc)[1]
    assert "vs compile 1.250x (balanced 1.143x) MISSED" in line
    assert "vs cuBLAS GEMM 1.000x (balanced 1.000x)" in line
    doc["results"][0]["after_ms"]["compiled"] = {"h3": 1.25, "eager": 0.875}  # 1.0625 / 0.875
    assert "vs compile 1.250x (balanced 1.214x) ok" in bars.bf16_bars(doc)[1]
    # the fused quantization's cost: the larger of the two figures decides
    out = {
        "op": "out_proj",
        "M": 4824,
        "h3_ms": 1.03125,
        "compiled_ms": 1.5,
        "h3_no_quant_ms": 1.0,
        "after_ms": {
            "h3": {"compiled": 1.0625, "h3_no_quant": 1.0625},
            "h3_no_quant": {"compiled": 1.0, "h3": 1.0},
            "compiled": {"h3": 1.5, "h3_no_quant": 1.5},
        },
    }
    line = bars.fp8_bars({"date": "d", "device": DEVICE, "results": [out]})[1]
    assert line.endswith("fused quantization 3.1% (balanced 6.2%) MISSED")
