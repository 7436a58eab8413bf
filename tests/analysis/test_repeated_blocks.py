"""The model's repeated blocks (regional compilation's candidates): a container's children
of one build, each child's class and its submodules' the same."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")


def test_blocks_of_one_class_but_other_layers_are_not_repeated_blocks() -> None:
    """A seventeenth look's torchvision detection heads: six Sequentials of other layers
    read as "6 identical blocks ... which all 6 reuse". Blocks are repeated where each
    child's class and its submodules' are the same."""
    from torch import nn

    from compilediag.analysis.build import repeated_blocks

    def modules(model: nn.Module) -> dict[str, str]:
        return {n: type(m).__name__ for n, m in model.named_modules() if n}

    heads = nn.ModuleList(
        [nn.Sequential(nn.Conv2d(8, 8, 3), nn.ReLU()) for _ in range(3)]
        + [nn.Sequential(nn.Conv2d(8, 8, 1)) for _ in range(3)]
    )
    assert repeated_blocks(modules(nn.Sequential(heads))) is None
    same = nn.ModuleList([nn.Sequential(nn.Linear(4, 4), nn.GELU()) for _ in range(6)])
    found = repeated_blocks(modules(nn.Sequential(same)))
    assert found is not None and (found.path, found.cls, found.count) == ("0", "Sequential", 6)
