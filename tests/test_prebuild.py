"""CPU: ``python -m h3cupy.prebuild`` fills the disk cache that the run-time loader reads, reports
what is missing with ``--check``, names a module that fails to compile, and refuses a bad target.
Two small kernel modules stand in for the whole registry (every module's compile for every CI
target is tests/test_jit.py's)."""

from __future__ import annotations

import pytest

from h3cupy import prebuild, testing
from h3cupy.core import jit
from h3cupy.ops.codec import CODEC_PROBE
from h3cupy.weights import QUANTIZE


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("H3CUPY_CACHE_DIR", str(tmp_path))
    return tmp_path


def test_prebuild_fills_the_loader_cache(cache, monkeypatch, capsys):
    specs = [QUANTIZE, CODEC_PROBE]
    monkeypatch.setattr(prebuild, "load_all_specs", lambda: specs)
    assert prebuild.main(["--arch", "sm_89", "--check"]) == 1
    out = capsys.readouterr().out
    assert "0 cached, 2 to build" in out and "missing  kernels/quantize.cu" in out
    assert not any(cache.iterdir()), "--check must compile nothing"

    assert prebuild.main(["--arch", "sm_89", "--jobs", "2"]) == 0
    assert "2 built" in capsys.readouterr().out
    for spec in specs:
        # the files the run-time loader (jit.build) looks for, under the key it computes
        cubin, meta = jit.cache_paths(spec, "sm_89")
        assert cubin.parent == cache and cubin.read_bytes()[:4] == b"\x7fELF"
        assert jit.build(spec, "sm_89")[0] == cubin
        assert set(jit.build(spec, "sm_89")[1]) == set(spec.names)
    # other targets are other keys
    assert not jit.is_cached(QUANTIZE, "sm_90a")

    assert prebuild.main(["--arch", "sm_89", "--check"]) == 0
    assert "2 cached, 0 to build" in capsys.readouterr().out


def test_prebuild_names_a_module_that_does_not_compile(cache, monkeypatch, capsys):
    bad = jit.ModuleSpec("kernels/quantize.cu", ("h3::no_such_kernel<1>",))
    jit.REGISTRY.remove(bad)
    monkeypatch.setattr(prebuild, "load_all_specs", lambda: [QUANTIZE, bad])
    assert prebuild.main(["--arch", "sm_89", "--jobs", "1"]) == 1
    captured = capsys.readouterr()
    assert "1 built" in captured.out and "1 failed" in captured.out
    assert "kernels/quantize.cu did not compile for sm_89" in captured.err
    assert "no_such_kernel" in captured.err
    assert jit.is_cached(QUANTIZE, "sm_89") and not jit.is_cached(bad, "sm_89")


def test_prebuild_refuses_an_unknown_target(cache):
    with pytest.raises(SystemExit, match=r"--arch expected one of sm_120a, .*got 'sm_91'"):
        prebuild.main(["--arch", "sm_91"])


def test_prebuild_refuses_a_bad_job_count(cache, capsys):
    with pytest.raises(SystemExit):
        prebuild.main(["--arch", "sm_89", "--jobs", "0"])
    assert "--jobs expected a positive count, got 0" in capsys.readouterr().err


@pytest.mark.skipif(testing.gpu_available(), reason="a GPU is present: the default target is its")
def test_prebuild_without_a_gpu_asks_for_the_target(cache):
    with pytest.raises(SystemExit, match="no CUDA GPU found.*--arch"):
        prebuild.main([])


def test_load_all_specs_holds_every_kernel_file():
    files = {s.file for s in prebuild.load_all_specs()}
    on_disk = {
        str(p.relative_to(jit.cuda_src_dir()))
        for p in (jit.cuda_src_dir() / "kernels").glob("*.cu")
    }
    assert files == on_disk


@pytest.mark.skipif(not testing.gpu_available(), reason="needs a CUDA GPU (the default target)")
def test_prebuild_defaults_to_this_gpu(cache, capsys):
    from h3cupy.core import arch

    prebuild.main(["--check"])
    assert f"modules for {arch.device_target()}," in capsys.readouterr().out
