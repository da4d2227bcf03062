"""stencil: grammar-constrained structured output for inference engines.

This package is the pure-Python face of the native module ``stencil._stencil``
(Rust, pyo3): it re-exports the classes and functions engines call and adds
``apply_token_bitmask_inplace``, which works on numpy arrays and, when torch is
installed, on torch tensors. Nothing here imports torch unless it is handed a
torch tensor.

The bitmask layout is XGrammar's and llguidance's: int32 words, shape
``[batch, ceil(vocab_size / 32)]``, token ``t`` is bit ``t % 32`` of word ``t // 32``.
"""

from ._stencil import (
    Compiler,
    Grammar,
    Matcher,
    Tokenizer,
    allocate_token_bitmask,
    fill_next_token_bitmask_batch,
)

__all__ = [
    "Compiler",
    "Grammar",
    "Matcher",
    "Tokenizer",
    "allocate_token_bitmask",
    "apply_token_bitmask_inplace",
    "fill_next_token_bitmask_batch",
]


def _is_torch_tensor(x):
    # Checked by the type's module, so that torch is never imported here.
    return type(x).__module__.startswith("torch")


def apply_token_bitmask_inplace(logits, bitmask, vocab_size=None):
    """Sets ``logits[..., t]`` to -inf wherever token ``t``'s bit is 0, in place.

    ``logits``: ``[batch, V]`` or ``[V]`` floats (numpy array, or torch tensor when
    torch is installed); ``bitmask``: ``[batch, words]`` or ``[words]`` int32.
    Columns past the bitmask's ``32 * words`` bits, or past ``vocab_size`` when it
    is given, are masked too (padding ids are never allowed).
    """
    if _is_torch_tensor(logits) or _is_torch_tensor(bitmask):
        return _apply_torch(logits, bitmask, vocab_size)
    import numpy as np

    if not isinstance(logits, np.ndarray):
        raise TypeError("logits must be a numpy array or a torch tensor")
    mask = np.ascontiguousarray(bitmask)
    if mask.dtype not in (np.int32, np.uint32):
        raise TypeError("the bitmask must be int32 (or uint32)")
    # Little-endian words: bit t % 32 of word t // 32 is bit t % 8 of byte t // 8.
    allowed = np.unpackbits(
        mask.astype("<u4", copy=False).view(np.uint8), axis=-1, bitorder="little"
    ).astype(bool)
    width = logits.shape[-1]
    if logits.ndim != allowed.ndim:
        if allowed.ndim == 2 and allowed.shape[0] == 1:
            allowed = allowed[0]
        else:
            raise ValueError(
                f"logits {logits.shape} and bitmask {mask.shape} have different batch shapes"
            )
    if logits.ndim == 2 and allowed.shape[0] != logits.shape[0]:
        raise ValueError(f"logits has {logits.shape[0]} rows, the bitmask {allowed.shape[0]}")
    limit = width if vocab_size is None else min(width, vocab_size)
    keep = np.zeros(logits.shape, dtype=bool)
    n = min(limit, allowed.shape[-1])
    keep[..., :n] = allowed[..., :n]
    logits[~keep] = -np.inf


def _apply_torch(logits, bitmask, vocab_size):
    import torch

    if not isinstance(bitmask, torch.Tensor):
        bitmask = torch.from_numpy(bitmask)
    bitmask = bitmask.to(logits.device)
    width = logits.shape[-1]
    limit = width if vocab_size is None else min(width, vocab_size)
    words = bitmask.shape[-1]
    shifts = torch.arange(32, device=logits.device, dtype=torch.int32)
    allowed = ((bitmask.unsqueeze(-1) >> shifts) & 1).bool().flatten(-2)
    if logits.dim() == 1 and allowed.dim() == 2 and allowed.shape[0] == 1:
        allowed = allowed[0]
    keep = torch.zeros(logits.shape, dtype=torch.bool, device=logits.device)
    n = min(limit, words * 32)
    keep[..., :n] = allowed[..., :n]
    logits.masked_fill_(~keep, float("-inf"))
