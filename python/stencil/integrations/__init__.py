"""Adapters that plug stencil into serving engines and libraries.

Each submodule imports its engine lazily: ``stencil.integrations.vllm`` subclasses
vLLM's ``StructuredOutputBackend`` / ``StructuredOutputGrammar`` when vLLM is
importable, ``stencil.integrations.sglang`` SGLang's ``BaseGrammarBackend`` /
``BaseGrammarObject``, ``stencil.integrations.transformers`` is a Hugging Face
``LogitsProcessor``. Without the engine installed, the same classes stand on
local stand-ins with the engine's method names, so they can be driven (and
tested) by anything that makes the engine's calls.
"""


def _tokenizer(tokenizer, eos_token_ids=None):
    """A stencil.Tokenizer from an engine's tokenizer (or a stencil.Tokenizer)."""
    import stencil

    tok = tokenizer if isinstance(tokenizer, stencil.Tokenizer) else stencil.Tokenizer.from_huggingface(tokenizer)
    extra = [t for t in (eos_token_ids or ()) if 0 <= t < tok.vocab_size]
    if extra:
        tok.add_eos(sorted(extra))
    return tok


def _escape_literal(text):
    """`text` as a regex matching itself (the regex-syntax metacharacters escaped)."""
    meta = set("\\.+*?()|[]{}^$#&-~")
    return "".join("\\" + c if c in meta else c for c in text)


def _full_bitmask(batch, vocab_size):
    """An all-allowed int32 bitmask: a torch CPU tensor when torch is importable."""
    try:
        import torch
    except ImportError:
        import stencil

        return stencil.allocate_token_bitmask(batch, vocab_size)
    return torch.full((batch, (vocab_size + 31) // 32), -1, dtype=torch.int32)
