"""A tiny Llama built from a config (no weights downloaded): 2 layers, d=64, GQA."""

import torch
from transformers import LlamaConfig, LlamaForCausalLM


def get_model():
    config = LlamaConfig(
        hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, vocab_size=1000, max_position_embeddings=128,
    )  # fmt: skip
    return LlamaForCausalLM(config).eval()


def get_inputs():
    return {"input_ids": torch.randint(0, 1000, (2, 32))}
