"""The CUDA kernels of examples/torch_compile.py's block, eager and compiled
(``mode="reduce-overhead"``), from torch.profiler: each kernel's count and total time over the
profiled calls, per form, and the two forms' times per block in alternating rounds (so that
an order or clock drift shows). For reading where the two forms differ.

    PYTHONPATH=. python3 scripts/torch_compile_kernels.py [--m 4824] [--calls 5]
"""

from __future__ import annotations

import argparse
import importlib.util
from collections import defaultdict
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--m", type=int, default=4824)
    ap.add_argument("--calls", type=int, default=5)
    args = ap.parse_args()

    import torch
    from torch.profiler import ProfilerActivity, profile

    path = Path(__file__).resolve().parent.parent / "examples" / "torch_compile.py"
    spec = importlib.util.spec_from_file_location("torch_compile_example", path)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    module, inputs = example.build(args.m)
    compiled = torch.compile(module, fullgraph=True, mode="reduce-overhead")
    forms = {"eager": module, "compiled": compiled}
    for fn in forms.values():
        for _ in range(3):
            fn(*inputs)
    torch.cuda.synchronize()

    for name, fn in forms.items():
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(args.calls):
                fn(*inputs)
            torch.cuda.synchronize()
        per = defaultdict(lambda: [0, 0.0])
        for ev in prof.events():
            if ev.device_type == torch.autograd.DeviceType.CUDA:
                per[ev.name][0] += 1
                per[ev.name][1] += ev.device_time_total
        total = sum(v[1] for v in per.values()) / args.calls
        print(f"== {name}: {total / 1000:.3f} ms of kernel time per block")
        for k, (n, us) in sorted(per.items(), key=lambda kv: -kv[1][1])[:20]:
            print(f"  {us / args.calls:9.1f} us  x{n / args.calls:4.1f}  {k[:110]}")

    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for r in range(4):
        line = []
        for name, fn in forms.items():
            start.record()
            for _ in range(10):
                fn(*inputs)
            stop.record()
            stop.synchronize()
            line.append(f"{name} {start.elapsed_time(stop) / 10:.3f} ms")
        print(f"round {r}: " + ", ".join(line))


if __name__ == "__main__":
    main()
