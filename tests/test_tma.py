"""CPU: the tensor-map argument type and the encoder's argument checks."""

from __future__ import annotations

import pytest

from h3cupy.core import tma


def test_descriptor_is_128_bytes_64_aligned():
    assert tma.DESC_DTYPE.itemsize == 128
    assert tma.DESC_DTYPE.alignment >= 8  # NumPy caps alignment; CuPy aligns kernel params


@pytest.mark.parametrize(
    ("kw", "msg"),
    [
        (dict(ptr=8), "16-byte aligned"),
        (dict(row_stride_bytes=1000), "16-byte aligned"),
        (dict(box_cols=512), "box dims"),
        (dict(swizzle=16), "swizzle"),
        (dict(dtype="float64"), "dtype"),
    ],
)
def test_bad_arguments_are_refused_before_the_driver(kw, msg):
    args = dict(
        ptr=0x1000,
        dtype="uint8",
        cols=1024,
        rows=64,
        row_stride_bytes=1024,
        box_cols=64,
        box_rows=32,
        swizzle=0,
    )
    args.update(kw)
    with pytest.raises(ValueError, match=msg):
        tma.encode_2d(**args)
