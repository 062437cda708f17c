"""The GEMM engine (issue #3) — first step: the MMA atoms and their fragment maps.

``mma_probe`` runs one warp-level MMA atom on a 16 x 8 output tile with operands gathered from
row-major memory by the fragment maps of ``cuda_src/include/h3/mma_sync.cuh``; the GPU test
compares it with NumPy, and CI disassembles the cubins for sm_120a / sm_90a / sm_89 to check
which tensor-core instruction each kind issues. The persistent TMA + mbarrier GEMM builds on
these atoms.
"""

from __future__ import annotations

import numpy as np

from ..core import arch, interop, jit
from ..core.launch import launch, ptr

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
