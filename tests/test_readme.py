"""The README names things that exist: every module setting is an attribute of its module,
every environment variable in its table is read by the package or the tests (and every one they
read is in the table, as STYLE.md asks), every GPU-round mode is a case of scripts/gpu_round.sh
(which parses), and every repository path it names is there. (Session 38 found README text naming
probe A/Bs the script never had; these are the parts a newcomer copies from.)"""

from __future__ import annotations

import importlib
import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
README = (REPO / "README.md").read_text()


def _section(start: str, end: str) -> str:
    a = README.index(start)
    return README[a : README.index(end, a)]


def test_module_settings_exist():
    table = _section("Module settings (plain attributes", "\n## ")
    names = re.findall(r"^\| `(h3cupy\.[a-z_.]+)\.([A-Z0-9_]+)` \|", table, re.M)
    assert len(names) >= 15, f"found only {len(names)} settings rows; has the table moved?"
    missing = [
        f"{mod}.{attr}" for mod, attr in names if not hasattr(importlib.import_module(mod), attr)
    ]
    assert not missing, f"README names module settings that do not exist: {missing}"


def test_environment_variables_are_read():
    table = _section("| variable | effect |", "Module settings")
    names = re.findall(r"^\| `(H3CUPY_[A-Z_]+)", table, re.M)
    assert names
    sources = "\n".join(
        p.read_text()
        for d in ("h3cupy", "tests")
        for p in (REPO / d).rglob("*.py")
        if p.name != Path(__file__).name  # not this file's own strings
    )
    unread = [n for n in names if n not in sources]
    assert not unread, f"README lists environment variables nothing reads: {unread}"
    # STYLE.md: every H3CUPY_* knob is in the README
    read = set(re.findall(r"H3CUPY_[A-Z_]+", sources))
    assert read <= set(names), f"not in the README's table: {sorted(read - set(names))}"


def test_gpu_round_modes_exist():
    table = _section("| mode | what it runs | time |", "\n\n")
    modes = set()
    for row in table.splitlines()[2:]:
        modes.update(re.findall(r"`([a-z0-9-]+)`", row.split("|")[1]))
    assert {"tests", "memcheck", "bars", "h200"} <= modes
    script = (REPO / "scripts" / "gpu_round.sh").read_text()
    cases = set(re.findall(r"^  ([a-z0-9|-]+)\)", script, re.M))
    cases = {c for group in cases for c in group.split("|")}
    assert modes <= cases, f"README's GPU-round modes not in gpu_round.sh: {sorted(modes - cases)}"


def test_paths_exist():
    paths = set(
        re.findall(r"\b((?:scripts|benchmarks|examples|tests|h3cupy|cuda_src)/[\w./-]+)", README)
    )
    assert len(paths) >= 20, f"found only {len(paths)} paths; has the README's form changed?"
    missing = sorted(p for p in paths if not (REPO / p.rstrip(".")).exists())
    assert not missing, f"README names files that do not exist: {missing}"


def test_gpu_round_parses():
    if shutil.which("bash") is None:
        pytest.skip("no bash on this machine")
    proc = subprocess.run(
        ["bash", "-n", str(REPO / "scripts" / "gpu_round.sh")], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
