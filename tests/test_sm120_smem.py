"""The shared memory of every kernel sm_120a runs fits an sm_120 board (CPU-only).

RTX 5090 / RTX PRO 6000 (compute capability 12.0) let a block opt into at most 101376 bytes of
shared memory (99 KiB); the H200 allows 232448. A kernel sized for Hopper fails to launch there,
and no SM120 board is available to this project, so the plans are checked here: the mma.sync
skeleton's and the NVFP4 skeleton's sm_120 plans (what every operator's mma.sync / NVFP4 kernel
and the sm_120 form of the plain GEMMs run, on the H200 too) against the limit, and the C++
plans (h3/gemm_mma_tma.cuh, h3/gemm_nvfp4.cuh, which static_assert the same limit) against the
host's mirrors of them.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from h3cupy.core import arch
from h3cupy.ops import gemm

INCLUDE = Path(gemm.__file__).resolve().parents[1] / "cuda_src" / "include" / "h3"


@pytest.mark.parametrize(
    "name,nbytes",
    [
        ("MT_SM120", gemm.mt_smem(gemm.MT_SM120)),
        ("MT_SM120_SCRATCH", gemm.mt_smem(gemm.MT_SM120_SCRATCH)),
        ("NV_SM120", gemm.nv_smem(gemm.NV_SM120)),
        ("NV_SM120_PA", gemm.nv_smem(gemm.NV_SM120_PA)),
        ("gemm_mma_sync", gemm._SMEM),
    ],
)
def test_sm120_plans_fit(name, nbytes):
    assert nbytes <= arch.SM120_SMEM_LIMIT, (name, nbytes)


def test_hopper_plan_does_not():
    # the reason the plans exist: the 128-byte k-tile ring is Hopper-only
    assert gemm.mt_smem(gemm.MT_BIG) > arch.SM120_SMEM_LIMIT


def test_cpp_plans_match_host():
    """The host's plan tuples are the C++ ones (a mismatch would launch with too little shared
    memory for the ring the kernel lays out)."""
    mt = (INCLUDE / "gemm_mma_tma.cuh").read_text()
    got = dict(re.findall(r"using (Mt\w+) = MtCfg<(\d+, \d+, [\w *]+)>;", mt))

    def plan(text):
        return tuple(eval(x, {"kMtScratchBytes": 32 * 1024}) for x in text.split(","))

    assert plan(got["MtBig"]) == gemm.MT_BIG
    assert plan(got["MtSm120"]) == gemm.MT_SM120
    assert plan(got["MtSm120Scratch"]) == gemm.MT_SM120_SCRATCH
    assert f"kSm120SmemLimit = {arch.SM120_SMEM_LIMIT};" in mt
    nv = (INCLUDE / "gemm_nvfp4.cuh").read_text()
    m = re.search(r"kNvSm120BK = (\d+), kNvSm120Stages = (\d+), kNvSm120PaScratch = ([\d *]+);", nv)
    bk, stages, scratch = int(m[1]), int(m[2]), eval(m[3])
    assert (bk, stages, 0) == gemm.NV_SM120
    assert (bk, stages, scratch) == gemm.NV_SM120_PA
