"""compilediag's time for a generated C++ kernel (a record_function put around its Python
call, as the kernel profile does) against Inductor's own range inside the kernel
(`cpp.enable_kernel_profile`), both in one torch.profiler session of one process:
`python bench/cpu_kernel_ranges.py`. The small language model of
tests/fixtures/run_jobs/lm_train.py (JOB_SMALL), Inductor on CPU, 4 forward and backward
calls. Prints each of the costliest kernels' µs a call in both, and the difference."""

from __future__ import annotations

import os
import sys
from collections import defaultdict

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "run_jobs"))
os.environ["JOB_SMALL"] = "1"

import torch  # noqa: E402
from torch._inductor import config  # noqa: E402

config.cpp.enable_kernel_profile = True
from lm_train import BATCH, LM, SEQ, VOCAB  # noqa: E402


def main() -> None:
    from torch._inductor.codecache import PyCodeCache
    from torch.autograd.profiler import record_function
    from torch.profiler import ProfilerActivity, profile

    torch.manual_seed(0)
    model = LM()
    compiled = torch.compile(model)
    data = torch.randint(0, VOCAB, (BATCH, SEQ + 1))
    for _ in range(3):
        compiled(data[:, :-1], data[:, 1:]).backward()
    modules = list(getattr(PyCodeCache, "modules", []) or [])
    modules += list((getattr(PyCodeCache, "modules_no_attr", {}) or {}).values())

    def wrapped(name: str, kernel):
        def timed(*args, **kwargs):
            with record_function("compilediag:" + name):
                return kernel(*args, **kwargs)

        return timed

    for module in set(modules):
        for name, obj in list(vars(module).items()):
            if name.startswith("cpp_fused") and callable(obj):
                setattr(module, name, wrapped(name, obj))
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(4):
            compiled(data[:, :-1], data[:, 1:]).backward()
    ours, theirs, calls = defaultdict(float), defaultdict(float), defaultdict(int)
    for e in prof.events():
        if e.name.startswith("compilediag:"):
            ours[e.name.split(":", 1)[1]] += e.cpu_time_total
        elif "cpp_fused" in e.name:  # Inductor's: graph_0_cpp_fused_...
            name = e.name[e.name.index("cpp_fused") :]
            theirs[name] += e.cpu_time_total
            calls[name] += 1
    print("kernel | calls | Inductor's range (µs a call) | compilediag's | difference")
    for name in sorted(theirs, key=lambda n: -theirs[n])[:10]:
        n = calls[name]
        a, b = theirs[name] / n, ours.get(name, 0.0) / n
        print(f"{name[:60]} | {n} | {a:.1f} | {b:.1f} | {b - a:+.1f}")


if __name__ == "__main__":
    main()
