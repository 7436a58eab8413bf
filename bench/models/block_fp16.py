"""The sample transformer block at a realistic size for a GPU: d=1024, 16 heads,
batch 8 x 512 tokens, float16. Used by the CUDA timing probe (bench/README.md)."""

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "sample_models"))
from transformer_block import Block  # noqa: E402


def get_model():
    return Block(d=1024, heads=16).half()


def get_inputs():
    return (torch.randn(8, 512, 1024, dtype=torch.float16),)
