import torch

def pad_to(x, dim, sizes):
    """x padded with zeros at the end of `dim` up to the next of `sizes`: mask the padding
    (attention_mask 0), and slice the outputs back to the request's sizes."""
    extra = min(s for s in sizes if s >= x.size(dim)) - x.size(dim)
    if not extra:
        return x
    return torch.nn.functional.pad(x, [0, 0] * (x.dim() - dim - 1) + [0, extra])


compiled = torch.compile(model, mode='reduce-overhead', dynamic=False)


def serve(input_ids, attention_mask):
    """One request, in torch.inference_mode() like the warm-up (a graph compiled in one mode
    recompiles in another), whatever mode the caller is in. Make its tensors outside
    inference_mode, as a tokenizer does: one made inside it is another kind to
    torch's guards."""
    if input_ids.size(0) > 8 or input_ids.size(1) > 136 or attention_mask.size(0) > 8 or attention_mask.size(1) > 136:
        with torch.inference_mode():  # above the largest bucket: eager, no compile
            return model(input_ids, attention_mask)
    input_ids = pad_to(input_ids, 0, [4, 8])
    input_ids = pad_to(input_ids, 1, [50, 136])
    attention_mask = pad_to(attention_mask, 0, [4, 8])
    attention_mask = pad_to(attention_mask, 1, [50, 136])
    with torch.inference_mode():
        return compiled(input_ids, attention_mask)


# warm-up: a call for each size its CUDA graphs record (the shapes before any padding)
dtypes = [torch.int64, torch.int64]
for shapes in [[(4, 50), (4, 50)], [(4, 136), (4, 136)], [(8, 50), (8, 50)], [(8, 136), (8, 136)]]:
    for _ in range(2):  # CUDA graphs: a size's first call warms up, its second records
        serve(*(torch.zeros(s, dtype=d, device='cuda') for s, d in zip(shapes, dtypes)))
# from here a request that would compile raises instead (torch >= 2.6)
torch.compiler.set_stance("fail_on_recompile")

