"""CPU: a NumPy emulation of the address arithmetic of kernels/gemm_mma.cu — the cp.async stores
into the swizzled shared-memory tile, the ldmatrix row addresses and what each lane receives —
checked against the fragment maps of mma_sync.cuh (which tests/test_mma_probe_gpu.py pins down
on the GPU). Also checks that every ldmatrix phase is free of bank conflicts.

The formulas below transcribe the kernel's; keep them in step with gemm_mma.cu.
"""

from __future__ import annotations

import numpy as np

BM = BN = 128
BK = 64  # bytes per tile row
THREADS = 256


def gemm_swz(r: int, c: int) -> int:
    return r * BK + ((c ^ ((r >> 1) & 3)) << 4)


def fill_tile(tile: np.ndarray) -> np.ndarray:
    """cp.async of a [128, 64]-byte tile: thread tid copies chunks idx = tid + i*256."""
    smem = np.full(BM * BK, 0xEE, np.uint8)
    for tid in range(THREADS):
        for i in range(2):
            idx = tid + i * THREADS
            r, c = idx // 4, idx % 4
            off = gemm_swz(r, c)
            smem[off : off + 16] = tile[r, c * 16 : c * 16 + 16]
    return smem


def ldmatrix_x4(smem: np.ndarray, row_addr: list[int]) -> np.ndarray:
    """What ldmatrix.x4 hands each lane: regs[lane, j] = word (lane % 4) of row (lane // 4) of
    matrix j, whose row i starts at row_addr[8 * j + i]."""
    regs = np.zeros((32, 4, 4), np.uint8)
    for lane in range(32):
        for j in range(4):
            a = row_addr[8 * j + lane // 4] + 4 * (lane % 4)
            regs[lane, j] = smem[a : a + 4]
    return regs


def banks_conflict_free(row_addr: list[int]) -> bool:
    """Each 8-lane phase reads 8 rows of 16 bytes: conflict-free when the 8 16-byte bank groups
    (address / 16 mod 8) differ."""
    return all(len({(row_addr[8 * j + i] // 16) % 8 for i in range(8)}) == 8 for j in range(4))


def test_fill_is_a_permutation():
    rng = np.random.default_rng()
    tile = rng.integers(0, 256, (BM, BK), dtype=np.uint8)
    smem = fill_tile(tile)
    assert np.array_equal(np.sort(smem), np.sort(tile.reshape(-1)))  # every byte written once


def test_a_fragments_and_banks():
    rng = np.random.default_rng()
    tile = rng.integers(0, 256, (BM, BK), dtype=np.uint8)
    smem = fill_tile(tile)
    for warp in range(8):
        wm = (warp // 4) * 64
        for ks in range(2):
            for mt in range(4):
                addr = [
                    gemm_swz(wm + mt * 16 + (lane & 15), ks * 2 + (lane >> 4)) for lane in range(32)
                ]
                assert banks_conflict_free(addr)
                regs = ldmatrix_x4(smem, addr)
                for lane in range(32):
                    g, q = lane // 4, lane % 4
                    base = wm + mt * 16
                    # mma_sync.cuh: a[0] (row g, bytes 4q), a[1] (row g+8, bytes 4q),
                    # a[2] (row g, bytes 16+4q), a[3] (row g+8, bytes 16+4q) of the 32-byte k-step
                    want = [(base + g, 0), (base + g + 8, 0), (base + g, 16), (base + g + 8, 16)]
                    for j, (row, b0) in enumerate(want):
                        k0 = ks * 32 + b0 + 4 * q
                        assert np.array_equal(regs[lane, j], tile[row, k0 : k0 + 4])


def test_b_fragments_and_banks():
    rng = np.random.default_rng()
    tile = rng.integers(0, 256, (BN, BK), dtype=np.uint8)
    smem = fill_tile(tile)
    for warp in range(8):
        wn = (warp % 4) * 32
        for ks in range(2):
            for npair in range(2):
                addr = [
                    gemm_swz(
                        wn + npair * 16 + (lane & 7) + ((lane >> 4) << 3),
                        ks * 2 + ((lane >> 3) & 1),
                    )
                    for lane in range(32)
                ]
                assert banks_conflict_free(addr)
                regs = ldmatrix_x4(smem, addr)
                for lane in range(32):
                    g, q = lane // 4, lane % 4
                    for nt_local in range(2):  # n-tile nt = 2 * npair + nt_local
                        n = wn + npair * 16 + nt_local * 8 + g
                        # b = {regs[2*nt_local], regs[2*nt_local + 1]}: (n g, bytes 4q / 16+4q)
                        for h in range(2):
                            k0 = ks * 32 + 16 * h + 4 * q
                            got = regs[lane, 2 * nt_local + h]
                            assert np.array_equal(got, tile[n, k0 : k0 + 4])


def test_epilogue_covers_the_tile_once():
    hits = np.zeros((BM, BN), np.int32)
    for warp in range(8):
        wm, wn = (warp // 4) * 64, (warp % 4) * 32
        for lane in range(32):
            for mt in range(4):
                for nt in range(4):
                    for r in range(4):
                        row = wm + mt * 16 + lane // 4 + 8 * (r // 2)
                        col = wn + nt * 8 + 2 * (lane % 4) + (r % 2)
                        hits[row, col] += 1
    assert np.all(hits == 1)


def test_nvfp4_emulation_k_permutation_and_scales():
    """The sm_90 path of gemm_nvfp4.cuh in NumPy: per lane, byte tt of every m16n8k64 e2m1
    fragment register (A: row g (+8), k 8q (+32) ..; B: column g, k 8q (+32) ..), scaled by its
    16-block's ue4m3 (block q/2 + 2*(r//2)), fills the bf16 m16n8k16 fragment slots (k 2q.., 2q+8..)
    of MMA tt; the four MMAs must equal the block-scaled product exactly."""
    from h3cupy import formats

    rng = np.random.default_rng(0)
    a = rng.integers(0, 16, (16, 64))
    b = rng.integers(0, 16, (8, 64))
    sa = rng.integers(0x20, 0x50, (16, 4))
    sb = rng.integers(0x20, 0x50, (8, 4))

    def dec(c):
        return formats.e2m1_decode(np.asarray(c, np.uint8)).astype(np.float64)

    def sc(s):
        return formats.ue4m3_decode(np.asarray(s, np.uint8)).astype(np.float64)

    ref = (dec(a) * np.repeat(sc(sa), 16, 1)) @ (dec(b) * np.repeat(sc(sb), 16, 1)).T
    d = np.zeros((16, 8))
    for tt in range(4):
        av, bv = np.zeros((16, 16)), np.zeros((8, 16))
        for lane in range(32):
            g, q = lane // 4, lane % 4
            for r in range(4):
                row, kk = g + 8 * (r % 2), 8 * q + 32 * (r // 2) + 2 * tt
                blk = q // 2 + 2 * (r // 2)  # the kernel's scale byte for register r
                assert blk == kk // 16
                vk = 2 * q + 8 * (r // 2)
                av[row, vk : vk + 2] = dec(a[row, kk : kk + 2]) * sc(sa[row, blk])
            for r in range(2):
                kk = 8 * q + 32 * r + 2 * tt
                vk = 2 * q + 8 * r
                bv[g, vk : vk + 2] = dec(b[g, kk : kk + 2]) * sc(sb[g, kk // 16])
        d += av @ bv.T
    assert np.array_equal(d, ref)


def test_e4m3_on_sm90_two_f16_mmas():
    """The sm_90 e4m3 path of gemm_mma_tma.cuh in NumPy: a k32 fragment register (4 bytes, k 4q..)
    split into f16 pairs (bytes 0-1 -> k 2q.., bytes 2-3 -> k 2q+8..), k 0-15 and 16-31 as two
    MMAs, the same permutation for A and B: the product is unchanged."""
    rng = np.random.default_rng(1)
    a = rng.normal(size=(16, 32))
    b = rng.normal(size=(8, 32))
    d = np.zeros((16, 8))
    for half in range(2):
        av, bv = np.zeros((16, 16)), np.zeros((8, 16))
        for lane in range(32):
            g, q = lane // 4, lane % 4
            k0 = 4 * q + 16 * half
            for r in range(2):
                row = g + 8 * r
                av[row, 2 * q : 2 * q + 2] = a[row, k0 : k0 + 2]
                av[row, 8 + 2 * q : 10 + 2 * q] = a[row, k0 + 2 : k0 + 4]
            bv[g, 2 * q : 2 * q + 2] = b[g, k0 : k0 + 2]
            bv[g, 8 + 2 * q : 10 + 2 * q] = b[g, k0 + 2 : k0 + 4]
        d += av @ bv.T
    np.testing.assert_allclose(d, a @ b.T, rtol=0, atol=1e-12)
