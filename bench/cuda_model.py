"""A bench model file (`get_model()`, `get_inputs()`) loaded onto the GPU, in eval mode."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any


def load_cuda_model(path: str) -> tuple[Any, tuple, dict]:
    """(model, positional args, keyword args), all on CUDA."""
    spec = importlib.util.spec_from_file_location("m", path)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(Path(path).parent))
    spec.loader.exec_module(module)
    model = module.get_model().cuda().eval()
    inputs = module.get_inputs()
    if isinstance(inputs, dict):
        return model, (), {k: v.cuda() for k, v in inputs.items()}
    return model, tuple(t.cuda() for t in inputs), {}
