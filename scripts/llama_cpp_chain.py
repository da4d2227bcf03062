#!/usr/bin/env python3
"""Records what llama.cpp's sampler chain keeps, step by step, on a fixed logits sequence.

The fixture it writes (tests/fixtures/llama_cpp_chain.json) is what
`tests/sampling_llama_cpp.rs` compares stencil's `llama.cpp` preset against: for each
chain of settings and each step, the surviving token ids and their selection
probabilities. The test runs this script itself when `llama_cpp` imports
(STENCIL_LLAMA_CPP_PYTHON names the interpreter), so a newer llama.cpp is checked live.

The rows are a formula both sides compute (distinct logits over the whole vocabulary,
so no truncation boundary falls on a tie) plus boosted tokens that continue a repeated
phrase, so the penalties, DRY, XTC and every truncation change the outcome. The
history is fed to both chains token by token (`llama_sampler_accept`), prompt included,
as llama.cpp's server does.

    python scripts/llama_cpp_chain.py MODEL.gguf OUT.json
"""

import ctypes
import json
import math
import sys

import llama_cpp as lc

# The row formula: logit_i = OFFSET + ((i * STRIDE + step * SHIFT) mod width) / SCALE.
# STRIDE is coprime with the width, so every logit differs; all are exact in f32 and
# lie in [-6, 0), below the boosted tokens (1.0 to 3.0).
STRIDE, SHIFT, SCALE, OFFSET = 7919, 1031, 8192.0, -6.0

PROMPT = "The cat sat on the mat. The dog sat on the log.\nThe cat sat on the"
CONTINUATION = " mat. The dog sat on the log.\nThe cat: the cat sat"

# llama.cpp's parameter names and values; the chain is its default order
# (penalties, dry, top_n_sigma, top_k, typical, top_p, min_p, xtc, temperature).
CHAINS = [
    {
        "name": "llama.cpp defaults",
        "repeat_last_n": 64, "repeat_penalty": 1.1, "frequency_penalty": 0.0,
        "presence_penalty": 0.0, "dry_multiplier": 0.8, "dry_base": 1.75,
        "dry_allowed_length": 2, "dry_penalty_last_n": 64,
        "dry_sequence_breakers": ["\n", ":", "\"", "*"], "top_n_sigma": -1.0,
        "top_k": 40, "typical_p": 1.0, "top_p": 0.95, "min_p": 0.05,
        "xtc_probability": 0.0, "xtc_threshold": 0.1, "temperature": 0.8,
    },
    {
        "name": "strong penalties, short windows, typical",
        "repeat_last_n": 16, "repeat_penalty": 1.3, "frequency_penalty": 0.2,
        "presence_penalty": 0.4, "dry_multiplier": 1.5, "dry_base": 2.0,
        "dry_allowed_length": 1, "dry_penalty_last_n": 24,
        "dry_sequence_breakers": ["\n", "."], "top_n_sigma": -1.0,
        "top_k": 20, "typical_p": 0.9, "top_p": 0.9, "min_p": 0.02,
        "xtc_probability": 0.0, "xtc_threshold": 0.1, "temperature": 1.2,
    },
    {
        "name": "top-n-sigma and XTC",
        "repeat_last_n": 64, "repeat_penalty": 1.0, "frequency_penalty": 0.1,
        "presence_penalty": 0.0, "dry_multiplier": 0.8, "dry_base": 1.75,
        "dry_allowed_length": 2, "dry_penalty_last_n": 64,
        "dry_sequence_breakers": ["\n", ":", "\"", "*"], "top_n_sigma": 0.3,
        "top_k": 0, "typical_p": 1.0, "top_p": 1.0, "min_p": 0.0,
        "xtc_probability": 1.0, "xtc_threshold": 0.1, "temperature": 0.7,
    },
    {
        "name": "XTC after top-k",
        "repeat_last_n": 32, "repeat_penalty": 1.05, "frequency_penalty": 0.0,
        "presence_penalty": 0.3, "dry_multiplier": 0.0, "dry_base": 1.75,
        "dry_allowed_length": 2, "dry_penalty_last_n": 64,
        "dry_sequence_breakers": ["\n"], "top_n_sigma": -1.0,
        "top_k": 12, "typical_p": 1.0, "top_p": 1.0, "min_p": 0.0,
        "xtc_probability": 1.0, "xtc_threshold": 0.08, "temperature": 1.0,
    },
]


def tokenize(vocab, text):
    data = text.encode()
    buf = (lc.llama_token * (len(data) + 8))()
    n = lc.llama_tokenize(vocab, data, len(data), buf, len(buf), False, False)
    if n < 0:
        raise RuntimeError(f"tokenize {text!r}: {n}")
    return list(buf[:n])


def row(width, step):
    return [OFFSET + ((i * STRIDE + step * SHIFT) % width) / SCALE for i in range(width)]


def boosts(history, next_token, step):
    """The continuation's next token on top, recent history tokens and three strangers
    just below it: the tokens penalties and DRY act on compete with ones they don't."""
    recent = []
    for t in reversed(history):
        if t not in recent and t != next_token:
            recent.append(t)
        if len(recent) == 5:
            break
    out = {next_token: 3.0}
    for k, t in enumerate(recent):
        out[t] = 2.6 - 0.4 * k
    for k in range(3):
        out.setdefault(1000 + 97 * step + k, 2.8 - 0.4 * k)
    return sorted(out.items())


def build_chain(vocab, width, c):
    chain = lc.llama_sampler_chain_init(lc.llama_sampler_chain_default_params())
    add = lambda s: lc.llama_sampler_chain_add(chain, s)
    add(lc.llama_sampler_init_penalties(
        width, c["repeat_last_n"], c["repeat_penalty"], c["frequency_penalty"], c["presence_penalty"]))
    breakers = [b.encode() for b in c["dry_sequence_breakers"]]
    arr = (ctypes.c_char_p * len(breakers))(*breakers)
    add(lc.llama_sampler_init_dry(
        vocab, c["dry_multiplier"], c["dry_base"],
        c["dry_allowed_length"], c["dry_penalty_last_n"], arr, len(breakers)))
    add(lc.llama_sampler_init_top_n_sigma(c["top_n_sigma"]))
    add(lc.llama_sampler_init_top_k(c["top_k"]))
    add(lc.llama_sampler_init_typical(c["typical_p"], 1))
    add(lc.llama_sampler_init_top_p(c["top_p"], 1))
    add(lc.llama_sampler_init_min_p(c["min_p"], 1))
    add(lc.llama_sampler_init_xtc(c["xtc_probability"], c["xtc_threshold"], 1, 0))
    add(lc.llama_sampler_init_temp(c["temperature"]))
    return chain


def survivors(chain, logits):
    n = len(logits)
    data = (lc.llama_token_data * n)()
    for i, z in enumerate(logits):
        data[i].id, data[i].logit, data[i].p = i, z, 0.0
    arr = lc.llama_token_data_array(data=data, size=n, selected=-1, sorted=False)
    lc.llama_sampler_apply(chain, ctypes.byref(arr))
    # The survivors are where the array now points (XTC moves its start); some samplers
    # (top-n-sigma) drop a token by setting its logit to -inf instead.
    out = arr.data
    kept = sorted(
        (out[i].id, out[i].logit) for i in range(arr.size) if out[i].logit != -math.inf
    )
    top = max(z for _, z in kept)
    weights = [math.exp(z - top) for _, z in kept]
    total = sum(weights)
    return [t for t, _ in kept], [w / total for w in weights]


def main(model_path, out_path):
    lc.llama_backend_init()
    params = lc.llama_model_default_params()
    params.vocab_only = True
    model = lc.llama_model_load_from_file(model_path.encode(), params)
    if not model:
        raise SystemExit(f"{model_path}: llama.cpp could not load it")
    vocab = lc.llama_model_get_vocab(model)
    width = lc.llama_vocab_n_tokens(vocab)
    prompt = tokenize(vocab, PROMPT)
    continuation = tokenize(vocab, CONTINUATION)
    steps = []
    history = list(prompt)
    for t, token in enumerate(continuation):
        steps.append({"boosts": boosts(history, token, t), "accept": token})
        history.append(token)
    chains = []
    for c in CHAINS:
        chain = build_chain(vocab, width, c)
        for t in prompt:
            lc.llama_sampler_accept(chain, t)
        recorded = []
        for t, step in enumerate(steps):
            logits = row(width, t)
            for token, z in step["boosts"]:
                logits[token] = z
            ids, probs = survivors(chain, logits)
            recorded.append({"ids": ids, "probs": probs})
            lc.llama_sampler_accept(chain, step["accept"])
        lc.llama_sampler_free(chain)
        chains.append({"settings": c, "steps": recorded})
    fixture = {
        "recorded_with": {"llama_cpp_python": lc.__version__, "model": model_path.split("/")[-1]},
        "row": {"width": width, "stride": STRIDE, "shift": SHIFT, "scale": SCALE,
                "offset": OFFSET},
        "prompt_text": PROMPT,
        "prompt": prompt,
        "steps": steps,
        "chains": chains,
    }
    with open(out_path, "w") as f:
        json.dump(fixture, f, indent=1)
        f.write("\n")
    lc.llama_model_free(model)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    main(sys.argv[1], sys.argv[2])
