"""A tiny GPT-2 built from a config (no weights downloaded): 2 layers, d=64."""

import torch
from transformers import GPT2Config, GPT2LMHeadModel


def get_model():
    config = GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=1000, n_positions=128)
    return GPT2LMHeadModel(config).eval()


def get_inputs():
    return (torch.randint(0, 1000, (2, 32)),)  # input_ids, positional (so --shapes can vary it)
