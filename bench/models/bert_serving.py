"""A tiny BERT classifier from its config (transformers; nothing downloaded) served a stream
of (batch, length) requests with their attention masks: bench/gpu_serving.sh runs it."""

import random

import torch
from transformers import BertConfig, BertForSequenceClassification


def get_model():
    cfg = BertConfig(
        vocab_size=1000,
        hidden_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=256,
        num_labels=3,
    )
    return BertForSequenceClassification(cfg).eval()


def get_inputs():
    return torch.randint(0, 1000, (2, 16)), torch.ones(2, 16, dtype=torch.int64)


def get_request_stream():
    rng = random.Random(0)
    out = []
    for _ in range(60):
        n = min(128, 4 + int(rng.expovariate(1 / 20)))
        b = rng.choice((1, 2, 4, 8))
        out.append({"shapes": [[b, n], [b, n]]})
    return out
