"""Write a large real structured trace: many distinct frames, each with graph breaks and a
recompile, compiled by Inductor. `python bench/make_big_trace.py OUT_DIR [--frames N]`.

The frames are generated functions written to a real file (so their lines are real user
lines); each does a little tensor work, prints (a graph break), and is called with two
batch sizes (a recompile, then automatic dynamic).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

TEMPLATE = """
def f{i}(x, w):
    y = torch.relu(x @ w) * {scale}
    print("frame {i}")
    z = y.sin() + y.cos() * {i}
    if z.mean() > 100:
        z = z - 1
    return z.tanh()
"""

DRIVER = """
import torch
from frames import *  # noqa
w = torch.randn(32, 32)
fns = [torch.compile(globals()[f"f{{i}}"]) for i in range({n})]
with torch.no_grad():
    for b in (4, 8):
        x = torch.randn(b, 32)
        for fn in fns:
            fn(x, w)
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--frames", type=int, default=60)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bigtrace-"))
    source = "import torch\n" + "".join(
        TEMPLATE.format(i=i, scale=1 + i / 10) for i in range(args.frames)
    )
    (work / "frames.py").write_text(source)
    (work / "driver.py").write_text(DRIVER.format(n=args.frames))
    env = {**os.environ, "TORCH_TRACE": str(Path(args.out).resolve()), "PYTHONPATH": str(work)}
    env.setdefault("TORCHINDUCTOR_FX_GRAPH_CACHE", "0")
    subprocess.run(
        [sys.executable, str(work / "driver.py")], env=env, check=True, stdout=subprocess.DEVNULL
    )
    total = sum(p.stat().st_size for p in Path(args.out).iterdir())
    print(f"{args.out}: {total / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
