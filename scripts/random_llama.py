"""Writes a random-weight Llama checkpoint (model.safetensors, config.json,
tokenizer.json, tokenizer_config.json) in the shape of SmolLM2-135M, for measuring
decode speed where the real weights cannot travel (the GPU machine has no network).
The text such a model writes is noise; its work per token is the real model's.

usage: python3 scripts/random_llama.py OUT_DIR TOKENIZER_JSON[.gz] [EOS_TOKEN]
Needs numpy only (the safetensors file is written by hand: a little-endian u64
header length, a JSON header, then the raw tensors).
"""
import gzip, json, os, struct, sys

import numpy as np

out, tokenizer_path = sys.argv[1], sys.argv[2]
eos = sys.argv[3] if len(sys.argv) > 3 else "<|endoftext|>"
opener = gzip.open if tokenizer_path.endswith(".gz") else open
with opener(tokenizer_path, "rt", encoding="utf-8") as f:
    tokenizer = json.load(f)
ids = list(tokenizer["model"]["vocab"].values()) + [t["id"] for t in tokenizer.get("added_tokens", [])]
vocab = max(ids) + 1

# SmolLM2-135M-Instruct's shape.
hidden, intermediate, layers, heads, kv_heads = 576, 1536, 30, 9, 3
head_dim = hidden // heads
config = {
    "model_type": "llama", "vocab_size": vocab, "hidden_size": hidden,
    "intermediate_size": intermediate, "num_hidden_layers": layers,
    "num_attention_heads": heads, "num_key_value_heads": kv_heads,
    "max_position_embeddings": 8192, "rms_norm_eps": 1e-5, "rope_theta": 100000.0,
    "tie_word_embeddings": True, "hidden_act": "silu",
}
rng = np.random.default_rng(0)
def w(*shape):
    return (rng.standard_normal(shape, dtype=np.float32) * 0.02).astype(np.float16)
def ones(n):
    return np.ones(n, dtype=np.float16)
tensors = {"model.embed_tokens.weight": w(vocab, hidden), "model.norm.weight": ones(hidden)}
for i in range(layers):
    p = f"model.layers.{i}."
    tensors.update({
        p + "input_layernorm.weight": ones(hidden),
        p + "post_attention_layernorm.weight": ones(hidden),
        p + "self_attn.q_proj.weight": w(hidden, hidden),
        p + "self_attn.k_proj.weight": w(kv_heads * head_dim, hidden),
        p + "self_attn.v_proj.weight": w(kv_heads * head_dim, hidden),
        p + "self_attn.o_proj.weight": w(hidden, hidden),
        p + "mlp.gate_proj.weight": w(intermediate, hidden),
        p + "mlp.up_proj.weight": w(intermediate, hidden),
        p + "mlp.down_proj.weight": w(hidden, intermediate),
    })

os.makedirs(out, exist_ok=True)
header, offset = {}, 0
for name, t in tensors.items():
    header[name] = {"dtype": "F16", "shape": list(t.shape), "data_offsets": [offset, offset + t.nbytes]}
    offset += t.nbytes
text = json.dumps(header).encode()
text += b" " * (-len(text) % 8)
with open(os.path.join(out, "model.safetensors"), "wb") as f:
    f.write(struct.pack("<Q", len(text)))
    f.write(text)
    for t in tensors.values():
        f.write(t.astype("<f2").tobytes())
with open(os.path.join(out, "config.json"), "w") as f:
    json.dump(config, f)
with open(os.path.join(out, "tokenizer.json"), "w", encoding="utf-8") as f:
    json.dump(tokenizer, f)
with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
    json.dump({"eos_token": eos, "bos_token": eos}, f)
print(f"{out}: {sum(t.size for t in tensors.values()) / 1e6:.1f}M parameters, vocab {vocab}")
