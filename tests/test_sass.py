"""CPU: read the SASS of the kernels (NVRTC PTX -> ptxas -> cuobjdump) and check that each path
issues the instructions it was written for — in particular the block-scaled MMAs of sm_120a,
which no board here can run. Needs ptxas/cuobjdump/nvdisasm (pip install "h3cupy[sass]")."""

from __future__ import annotations

import re

import pytest

import h3cupy  # noqa: F401
from h3cupy.core import sass
from h3cupy.ops import gemm, prologue

pytestmark = pytest.mark.skipif(
    sass.find_tools() is None,
    reason="ptxas/cuobjdump/nvdisasm not found: pip install 'h3cupy[sass]'",
)

# kind -> target -> an opcode that must appear
MMA_EXPECTED = {
    "bf16": {
        "sm_120a": "HMMA.16816.F32.BF16",
        "sm_90a": "HMMA.16816.F32.BF16",
        "sm_89": "HMMA.16816.F32.BF16",
    },
    "e4m3": {
        "sm_120a": "QMMA.16832.F32.E4M3.E4M3",
        "sm_89": "QMMA.16832.F32.E4M3.E4M3",
        # NOTE: Hopper has no FP8 mma.sync: ptxas unpacks e4m3 to f16 and issues two f16
        # HMMAs per k32 step, so this path runs at the f16 mma.sync rate on an H200.
        "sm_90a": "HMMA.16816.F32",
    },
    "mxf8f6f4": {"sm_120a": "QMMA.SF.16832.F32.E4M3.E4M3.E8"},
    "mxf4nvf4": {"sm_120a": "OMMA.SF.16864.F32.E2M1.E2M1.UE4M3.4X"},
}


def _by_kind(ops: dict) -> dict:
    out = {}
    for kind, (code, _, _) in gemm.PROBE_KINDS.items():
        (name,) = [n for n in ops if f"mma_probe_smxxILi{code}E" in n]
        out[kind] = ops[name]
    return out


@pytest.mark.parametrize("target", ["sm_120a", "sm_90a", "sm_89"])
def test_mma_atoms_issue_their_instruction(target):
    kinds = _by_kind(sass.opcodes(sass.disassemble(gemm.MMA_PROBE, target)))
    for kind, want in MMA_EXPECTED.items():
        ops = kinds[kind]
        if target in want:
            assert ops[want[target]] >= 1, (kind, target, sorted(o for o in ops if "MMA" in o))
        else:  # a kind the target lacks traps instead of computing something else
            assert not any("MMA" in o for o in ops) and any("TRAP" in o for o in ops), (kind, ops)


@pytest.mark.parametrize("ctas", [2, 3])
@pytest.mark.parametrize("target", ["sm_120a", "sm_90a", "sm_89"])
def test_prologue_sass(target, ctas):
    """Both builds (2 and 3 CTAs per SM): no local memory, no trap, the saturating e4m3
    conversion for FP8."""
    spec = prologue.prologue_spec(ctas)
    ops = sass.opcodes(sass.disassemble(spec, target))
    assert len(ops) == len(spec.names)
    for name, c in ops.items():
        assert not any(o.startswith(("LDL", "STL")) for o in c), (name, "local memory")
        assert not any("TRAP" in o for o in c), name
        if "ILi5376ELi1E" in name:  # FP8 output: the hardware saturating e4m3 conversion
            assert any(o.startswith("F2FP.SATFINITE.E4M3") for o in c), sorted(c)


@pytest.mark.parametrize("target", ["sm_120a", "sm_90a", "sm_89"])
def test_gemm_mma_sass(target):
    ops = sass.opcodes(sass.disassemble(gemm.GEMM_MMA, target))
    want = {
        0: "HMMA.16816.F32.BF16",
        1: {"sm_90a": "HMMA.16816.F32"}.get(target, "QMMA.16832.F32.E4M3.E4M3"),
        2: "QMMA.SF.16832.F32.E4M3.E4M3.E8" if target == "sm_120a" else None,
    }
    for code, op in want.items():
        (name,) = [n for n in ops if f"gemm_mma_smxxILi{code}E" in n]
        c = ops[name]
        assert not any(o.startswith(("LDL", "STL")) for o in c), (name, "local memory")
        if op is None:
            assert any("TRAP" in o for o in c), name
        else:
            # 4 m-tiles x 4 n-tiles x 2 k-steps per stage in the loop body
            assert c[op] >= 32, (target, code, sorted(o for o in c if "MMA" in o))
            assert any(o.startswith("LDSM") for o in c), name  # fragments by ldmatrix
            assert any(o.startswith("LDGSTS") for o in c), name  # cp.async


@pytest.mark.parametrize("target", ["sm_120a", "sm_90a"])
def test_tma_probe_sass(target):
    (c,) = sass.opcodes(sass.disassemble(gemm.TMA_PROBE, target)).values()
    assert any(o.startswith("UTMALDG") for o in c), sorted(c)  # the TMA tile load
    assert any(o.startswith("SYNCS") for o in c), sorted(c)  # mbarrier operations


def test_gemm_wgmma_sass():
    text = sass.disassemble(gemm.GEMM_WGMMA, "sm_90a")
    ops = sass.opcodes(text)
    assert len(ops) == len(gemm.WGMMA_VARIANTS) + len(gemm.WGMMA_M192_CLUSTERS)
    # the benchmark-only 192 x 192 bf16 tiles: three consumer warpgroups, each one 64 x 192
    # HGMMA per k-step; no local memory, no tail split (its atomic), B multicast in clusters,
    # and the mainloop not serialized (fewer warpgroup waits than HGMMAs)
    for cluster in gemm.WGMMA_M192_CLUSTERS:
        kern = {1: "gemm_wgmma_sm90", 2: "gemm_wgmma_x2_sm90"}[cluster]
        (name,) = [n for n in ops if f"{kern}ILi0ELi192ELi0ELb0ELi3E" in n]
        c = ops[name]
        mmas = sum(k for o, k in c.items() if o.startswith("HGMMA"))
        waits = sum(k for o, k in c.items() if o.startswith("WARPGROUP.DEPBAR"))
        assert mmas >= 4 and waits < mmas, (name, mmas, waits)
        assert not any(o.startswith(("LDL", "STL", "ATOMG")) for o in c), sorted(c)
        assert any(o.startswith("USETMAXREG") for o in c)
        assert any(o.startswith("UTMALDG.2D.MULTICAST") for o in c) == (cluster == 2), sorted(c)
    assert "HGMMA.64x192x16" in text
    for fmt, tile_n, promote, cluster, pingpong in gemm.WGMMA_VARIANTS:
        code, op = {"bf16": (0, "HGMMA"), "e4m3": (1, "QGMMA")}[fmt]
        kern = {1: "gemm_wgmma_sm90", 2: "gemm_wgmma_x2_sm90"}[cluster]
        tag = f"{kern}ILi{code}ELi{tile_n}ELi{promote}ELb{int(pingpong)}ELi2E"
        (name,) = [n for n in ops if tag in n]
        c = ops[name]
        # 4 k-steps per stage, each one 64 x tile_n warpgroup MMA
        assert sum(k for o, k in c.items() if o.startswith(op)) >= 4, sorted(c)
        assert f"{op}.64x{tile_n}x{16 if fmt == 'bf16' else 32}" in text
        assert any(o.startswith("UTMALDG") for o in c)  # TMA producer
        if cluster == 2:  # B multicast to both CTAs of the cluster
            assert any(o.startswith("UTMALDG.2D.MULTICAST") for o in c), sorted(c)
        if cluster == 4:  # 2 x 2: A and B halves multicast, no plain loads
            assert c.get("UTMALDG.2D.MULTICAST", 0) == 2 and "UTMALDG.2D" not in c, sorted(c)
        assert any(o.startswith("USETMAXREG") for o in c)  # setmaxnreg took effect
        # NOTE: the three-fragment FP8 variant and the promoted n224 one (consumers at 240
        # registers, the producer at 24) keep a few scalars in local memory across setmaxnreg and
        # in the producer thread's loop (ptxas's save/restore, see test_jit); a spilled fragment
        # would be far more.
        local = sum(k for o, k in c.items() if o.startswith(("LDL", "STL")))
        tight = promote == 2 or (promote and tile_n == 224)
        assert local <= (32 if tight else 0), (name, local)
        # the tail split (its arrival counter's atomic add) is built exactly where the host uses
        # it (gemm.wgmma_has_tail mirrors kTailOk): a split the host never asks for is dead code,
        # one it asks for without the kernel's support would drop the tail tiles
        has_atom = any(o.startswith("ATOMG") for o in c)
        assert has_atom == gemm.wgmma_has_tail(tile_n, promote, pingpong), (name, has_atom)


def test_pre_attention_sass():
    """The fused pre-attention GEMM: bf16 warpgroup MMAs (64 x 256 in clusters, 64 x 128 single),
    B multicast, and the Ulysses pack written by 3-D TMA stores; no local memory."""
    from h3cupy.ops import pre_attention

    text = sass.disassemble(pre_attention.PRE_ATTENTION, "sm_90a")
    ops = sass.opcodes(text)
    assert len(ops) == len(pre_attention.PRE_ATTENTION.names)
    for name, c in ops.items():
        if "mma_smxx" in name:  # the mma.sync back end: tested in test_pre_attention_mma_sass
            continue
        assert any(o.startswith("HGMMA") for o in c), sorted(c)
        # NOTE: a serialized mainloop (ptxas C7514) waits after every HGMMA; these kernels did
        # until session 6 (one wait per k-step: 4 HGMMA, 4 waits; now 2 waits in all).
        mmas = sum(v for o, v in c.items() if o.startswith("HGMMA"))
        waits = sum(v for o, v in c.items() if o.startswith("WARPGROUP.DEPBAR"))
        assert waits < mmas, (name, mmas, waits)
        assert any(o.startswith("UTMASTG.3D") for o in c), sorted(c)
        if "x2" in name:
            assert any(o.startswith("UTMALDG.2D.MULTICAST") for o in c), sorted(c)
        # NOTE: no local memory: the 256-column kernel kept 24 bytes (15 LDL / STL per tile) in
        # session 20 until the engine formed its tile index from the tile count (session 21).
        local = sum(v for o, v in c.items() if o.startswith(("LDL", "STL")))
        assert local == 0, (name, local)
    assert "HGMMA.64x256x16.F32.BF16" in text and "HGMMA.64x128x16.F32.BF16" in text


@pytest.mark.parametrize("target", ["sm_90a", "sm_120a"])
def test_gemm_mma_tma_sass(target):
    """The TMA-fed mma.sync back end: TMA loads, ldmatrix, the MMA of each format (native e4m3
    and the block-scaled form on sm_120a; f16 MMAs fed by one e4m3 unpack per fragment on sm_90a),
    and no spills."""
    ops = sass.opcodes(sass.disassemble(gemm.GEMM_MMA_TMA, target))
    want = {
        ("sm_90a", 0): "HMMA.16816.F32.BF16",
        ("sm_90a", 1): "HMMA.16816.F32",
        ("sm_120a", 0): "HMMA.16816.F32.BF16",
        ("sm_120a", 1): "QMMA.16832.F32.E4M3.E4M3",
        ("sm_120a", 2): "QMMA.SF.16832.F32.E4M3.E4M3",
    }
    for (tgt, code), op in want.items():
        if tgt != target:
            continue
        # three builds: thread 0 of the consumers loads (kWS false) or a producer warpgroup
        # does, on the Hopper plan; and the sm_120 plan (64-byte k-tiles, thread 0)
        names = [n for n in ops if f"gemm_mma_tma_smxxILi{code}E" in n]
        assert len(names) == 3, names
        for name in names:
            if target == "sm_120a" and not re.search(r"ELi1EEEv", name):
                continue  # the 128-byte ring is Hopper-only: a trap on sm_120a
            c = ops[name]
            # a 128-byte k-tile unrolls 4 k-steps of 32 MMAs, the sm_120 plan's 64-byte one 2
            least = 64 if re.search(r"ELi1EEEv", name) else 128
            assert sum(k for o, k in c.items() if o.startswith(op)) >= least, (name, sorted(c))
            assert any(o.startswith("UTMALDG") for o in c), sorted(c)
            assert any(o.startswith("LDSM") for o in c), sorted(c)
            if target == "sm_90a":
                assert not any(o.startswith(("LDL", "STL")) for o in c), name


@pytest.mark.parametrize("target", ["sm_90a", "sm_120a"])
def test_pre_attention_mma_sass(target):
    """The pre-attention op on the TMA-fed mma.sync back end: bf16 HMMA fed by ldmatrix from TMA
    tiles, no spills."""
    from h3cupy.ops import pre_attention

    ops = sass.opcodes(sass.disassemble(pre_attention.PRE_ATTENTION, target))
    (name,) = [n for n in ops if "pre_attention_bf16_mma_smxx" in n]
    c = ops[name]
    # the sm_120 plan's 64-byte k-tile: 2 k-steps of 32 MMAs
    assert sum(k for o, k in c.items() if o.startswith("HMMA.16816.F32.BF16")) >= 64, sorted(c)
    assert any(o.startswith("UTMALDG") for o in c) and any(o.startswith("LDSM") for o in c)
    if target == "sm_90a":
        assert not any(o.startswith(("LDL", "STL")) for o in c), sorted(c)


def test_gemm_nvfp4_sass():
    """The NVFP4 GEMM: the block-scaled OMMA (kind::mxf4nvf4, ue4m3, 4X) on sm_120a fed by TMA
    code tiles and bulk-copied scales; on sm_90a bf16 HMMA on dequantized fragments; no spills."""
    for target, op in (("sm_120a", "OMMA.SF.16864.F32.E2M1.E2M1.UE4M3.4X"), ("sm_90a", "HMMA")):
        (c,) = sass.opcodes(sass.disassemble(gemm.GEMM_NVFP4, target)).values()
        assert sum(k for o, k in c.items() if o.startswith(op)) >= 32, (target, sorted(c))
        assert any(o.startswith("UTMALDG") for o in c) and any(o.startswith("UBLKCP") for o in c)


def test_pre_attention_fp8_sass():
    """The W8A8 pre-attention: FP8 warpgroup MMAs (64 x 128, promoted), TMA stores of the outputs
    (bf16 and e4m3 through swizzled staging), no local memory; the cluster kernels (128- and
    192-row tiles) multicast the weight tile, the single-CTA ones do not; the 192-row kernels
    give three consumer warpgroups 160 registers each (USETMAXREG), the others two at 232."""
    from h3cupy.ops import pre_attention

    text = sass.disassemble(pre_attention.PRE_ATTENTION_FP8, "sm_90a")
    ops = sass.opcodes(text)
    assert len(ops) == len(pre_attention.PRE_ATTENTION_FP8.names)
    parts = sass._FUNC.split(text)
    bodies = dict(zip(parts[1::2], parts[2::2], strict=True))
    for name, c in ops.items():
        assert any(o.startswith("QGMMA.64") for o in c), sorted(c)
        assert any(o.startswith("UTMASTG.2D") for o in c), sorted(c)
        assert not any(o.startswith(("LDL", "STL")) for o in c), name
        multicast = c.get("UTMALDG.2D.MULTICAST", 0)
        want = 1 if "_x2_" in name else 0
        assert multicast == want, (name, multicast)
        alloc = 160 if "m192" in name else 232
        got = re.findall(r"USETMAXREG\.TRY_ALLOC\.CTAPOOL \S+ (0x[0-9a-f]+)", bodies[name])
        assert [int(g, 16) for g in got] == [alloc], (name, got)


def _check_fp8_mma_forms(ops: dict, target: str) -> None:
    """Kernels ``..._smxx<1>`` (legacy e4m3 mma.sync) and ``..._smxx<2>`` (kind::mxf8f6f4 with unit
    scales): on sm_120a QMMA and QMMA.SF respectively, never the other; on sm_90a form 1 as f16
    HMMAs and no local memory (form 2 exists on sm_120a only); TMA loads and ldmatrix."""
    want = {1: "QMMA.16832.F32.E4M3.E4M3", 2: "QMMA.SF.16832.F32.E4M3.E4M3"}
    assert ops
    for name, c in ops.items():
        form = 1 if "smxxILi1E" in name else 2
        if target == "sm_90a":
            if form == 2:
                continue
            op = "HMMA.16816.F32"
            assert not any(o.startswith(("LDL", "STL")) for o in c), name
        else:
            op = want[form]
            assert not any(o.startswith(want[3 - form]) for o in c), (name, sorted(c))
        # the sm_120 plan's 64-byte k-tile: 2 k-steps of 32 MMAs
        assert sum(k for o, k in c.items() if o.startswith(op)) >= 64, (name, sorted(c))
        assert any(o.startswith("UTMALDG") for o in c) and any(o.startswith("LDSM") for o in c)


@pytest.mark.parametrize("target", ["sm_90a", "sm_120a"])
def test_fp8_ops_mma_sass(target):
    """The W8A8 ops on the mma.sync back end (their sm_120a path; issues #5-#7): the FP8
    pre-attention (3 out modes x 2 forms), out_proj's GEMM and the MLP's FC1 (2 forms each)."""
    from h3cupy.ops import mlp, out_proj, pre_attention

    for spec, key, n in (
        (pre_attention.PRE_ATTENTION_FP8_MMA, "pre_attention_fp8_mma_smxx", 6),
        (out_proj.OUT_PROJ, "out_proj_fp8_mma_smxx", 2),
        (mlp.MLP, "mlp_fc1_fp8_mma_smxx", 2),
    ):
        ops = {k: v for k, v in sass.opcodes(sass.disassemble(spec, target)).items() if key in k}
        assert len(ops) == n, (key, sorted(ops))
        _check_fp8_mma_forms(ops, target)


def test_out_proj_fp8_sass():
    """The FP8 out_proj GEMM: FP8 warpgroup MMAs, multicast B in the cluster variants only, TMA
    store of the gated residual, no local memory."""
    from h3cupy.ops import out_proj

    ops = sass.opcodes(sass.disassemble(out_proj.OUT_PROJ, "sm_90a"))
    assert len(ops) == len(out_proj.OUT_PROJ.names)
    for name, c in ops.items():
        if "nvfp4" in name or "mma" in name:  # test_out_proj_nvfp4_sass, test_fp8_ops_mma_sass
            continue
        assert any(o.startswith("QGMMA.64") for o in c), sorted(c)
        assert any(o.startswith("UTMASTG.2D") for o in c), sorted(c)
        multicast = any(o.startswith("UTMALDG.2D.MULTICAST") for o in c)
        assert multicast == ("x2" in name), (name, sorted(c))
        assert not any(o.startswith(("LDL", "STL")) for o in c), name


def test_mlp_fc1_sass():
    """FC1 with the SwiGLU epilogue: FP8 warpgroup MMAs, TMA store of y, no local memory."""
    from h3cupy.ops import mlp

    ops = sass.opcodes(sass.disassemble(mlp.MLP, "sm_90a"))
    assert len(ops) == len(mlp.MLP.names)
    for name, c in ops.items():
        if "mma" in name:  # the mma.sync back end: test_fp8_ops_mma_sass
            continue
        assert any(o.startswith("QGMMA.64") for o in c), sorted(c)
        assert any(o.startswith("UTMASTG.2D") for o in c), sorted(c)
        assert not any(o.startswith(("LDL", "STL")) for o in c), name


def test_out_proj_nvfp4_sass():
    """The NVFP4 out_proj: the block-scaled OMMA on sm_120a, bf16 HMMA emulation on sm_90a."""
    from h3cupy.ops import out_proj

    for target, op in (("sm_120a", "OMMA.SF.16864.F32.E2M1.E2M1.UE4M3.4X"), ("sm_90a", "HMMA")):
        ops = sass.opcodes(sass.disassemble(out_proj.OUT_PROJ, target))
        (name,) = [n for n in ops if "out_proj_nvfp4_smxx" in n]
        c = ops[name]
        assert sum(k for o, k in c.items() if o.startswith(op)) >= 32, (target, sorted(c))
    # the Hopper path: bf16 warpgroup MMAs on the dequantized operands, TMA-store epilogue
    text = sass.disassemble(out_proj.OUT_PROJ, "sm_90a")
    ops = sass.opcodes(text)
    wg = [n for n in ops if "out_proj_nvfp4_wg" in n]
    # n256 and n224 pairs, n128 single CTAs; each in the two-launch and the single-launch form
    assert len(wg) == 6
    for name in wg:
        c = ops[name]
        assert any(o.startswith("HGMMA.64") for o in c) and any(o.startswith("UTMASTG") for o in c)
        assert not any(o.startswith(("LDL", "STL")) for o in c), name
        # the single launch publishes each quantized row with a reduction on its tile's counter
        # (RED) and the TMA producer polls the counter with a sleep (NANOSLEEP); the two-launch
        # form has neither
        fused = "_fused" in name
        assert any(o.startswith("NANOSLEEP") for o in c) == fused, name
        assert any(o.startswith("RED") for o in c) == fused, name
    assert "HGMMA.64x224x16.F32.BF16" in text and "HGMMA.64x256x16.F32.BF16" in text


def test_pre_attention_nvfp4_sass():
    """The W4A4 pre-attention: the block-scaled OMMA on sm_120a, HMMA emulation on sm_90a (the
    mma back end); the Hopper path's bf16 warpgroup MMAs on the dequantized operands (sm_90a,
    TMA-store epilogue, no local memory)."""
    from h3cupy.ops import pre_attention

    for target, op in (("sm_120a", "OMMA.SF.16864.F32.E2M1.E2M1.UE4M3.4X"), ("sm_90a", "HMMA")):
        ops = sass.opcodes(sass.disassemble(pre_attention.PRE_ATTENTION_NVFP4, target))
        assert len(ops) == 9
        for name, c in ops.items():
            if "nvfp4_wg" in name:
                if target == "sm_90a":
                    assert any(o.startswith("HGMMA.64") for o in c), sorted(c)
                    assert any(o.startswith("UTMASTG.2D") for o in c), sorted(c)
                    assert not any(o.startswith(("LDL", "STL")) for o in c), name
                continue
            assert sum(k for o, k in c.items() if o.startswith(op)) >= 32, (target, sorted(c))


def test_gemm_swapab_sass():
    """The swap-AB small-M kernels (sm_90a): bf16 warpgroup MMAs (the weight as the 64-row side),
    TMA loads, the transposed epilogue's global stores (bf16, or fp32 partials with split-K), no
    local memory; the split-K reduction has no MMA."""
    ops = sass.opcodes(sass.disassemble(gemm.GEMM_SWAPAB, "sm_90a"))
    assert len(ops) == len(gemm.GEMM_SWAPAB.names)
    for name, c in ops.items():
        assert not any(o.startswith(("LDL", "STL")) for o in c), (name, "local memory")
        if "splitk_reduce" in name:
            assert not any("MMA" in o for o in c), name
            continue
        assert c.get("HGMMA.64", 0) >= 1 and c.get("UTMALDG.2D", 0) >= 1, sorted(c)
        store = "STG.E" if "Lb1E" in name else "STG.E.U16"
        assert c.get(store, 0) >= 1, (name, sorted(c))
