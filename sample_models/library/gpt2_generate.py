"""transformers' generate() on a small GPT-2 made from a config (random weights, no
download): the whole of generate() compiled, as a user might try first. Its graph breaks
and recompiles are all inside transformers; the recompile advice is transformers' own
switch (a static KV cache), not a change to transformers' code."""

import torch
from transformers import GPT2Config, GPT2LMHeadModel


class Generate(torch.nn.Module):
    """Three new tokens after a prompt, greedy."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        config = GPT2Config(
            n_layer=1, n_head=2, n_embd=32, vocab_size=64, n_positions=32,
            bos_token_id=1, eos_token_id=2,
        )  # fmt: skip
        self.lm = GPT2LMHeadModel(config).eval()

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.lm.generate(ids, max_new_tokens=3, do_sample=False, pad_token_id=0)


def get_model() -> torch.nn.Module:
    return Generate()


def get_inputs() -> tuple:
    return (torch.tensor([[1, 5, 7]]),)
