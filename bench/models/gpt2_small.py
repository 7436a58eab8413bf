"""GPT-2 at the size of the smallest released one (12 layers, d=768), built from a config
(random weights, nothing downloaded), batch 8 x 256 tokens: GPU-bound."""

import torch
from transformers import GPT2Config, GPT2LMHeadModel


def get_model():
    torch.manual_seed(0)
    return GPT2LMHeadModel(GPT2Config(n_positions=256)).eval()


def get_inputs():
    return (torch.randint(0, 50257, (8, 256)),)
