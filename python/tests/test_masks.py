"""Masks filled from Python equal the Rust library's, bit for bit.

The Rust side is python/examples/mask_dump.rs: the library's Compiler and
TokenMatcher called directly, no binding in between, writing every mask of a token
sequence to a file. The Python side fills the same masks through stencil.Matcher
(rows of a shared bitmask, each at a different index) and the test compares the
bytes. Grammars: the shipped ones in grammars/ over the repository's GPT-2
vocabulary, along seeded random walks of allowed tokens; and a MaskBench sample
(../shared/data) over Llama-3 along the instances' own tokenizations.
"""

import json
import random
import subprocess

import numpy as np
import pytest

import stencil
from conftest import FIXTURES, REPO, maskbench_sample

GPT2 = FIXTURES / "tokenizers" / "gpt2" / "tokenizer.json.gz"


def rust_masks(mask_dump, tokenizer_path, requests, tmp_path, words):
    requests_path = tmp_path / "requests.jsonl"
    out_path = tmp_path / "masks.bin"
    requests_path.write_text("".join(json.dumps(r) + "\n" for r in requests))
    run = subprocess.run(
        [str(mask_dump), str(tokenizer_path), str(requests_path), str(out_path)],
        capture_output=True,
        text=True,
        check=True,
    )
    reports = [json.loads(line) for line in run.stdout.splitlines()]
    assert len(reports) == len(requests)
    masks = np.fromfile(out_path, dtype="<u4").reshape(-1, words)
    return reports, masks


def compile_request(compiler, request):
    kind, grammar = request["kind"], request["grammar"]
    if kind == "json":
        return compiler.compile_json_schema(
            grammar,
            whitespace=request.get("whitespace", "compact"),
            property_order=request.get("property_order", "any"),
        )
    return {"gbnf": compiler.compile_gbnf, "lark": compiler.compile_lark, "regex": compiler.compile_regex}[
        kind
    ](grammar)


def python_masks(compiler, request, vocab_size):
    """The dumper's protocol through the binding: fill, consume, stop at a refusal."""
    try:
        g = compile_request(compiler, request)
    except ValueError as e:
        return {"error": str(e)}, []
    m = stencil.Matcher(g)
    tokens = request["tokens"]
    # Rows of one bitmask at varying indices, so that row addressing is checked too.
    bitmask = stencil.allocate_token_bitmask(3, vocab_size)
    rows, accepted = [], 0
    for step, token in enumerate(tokens + [None]):
        index = step % 3
        m.fill_next_token_bitmask(bitmask, index)
        rows.append(bitmask[index].view(np.uint32).copy())
        if token is None or not m.accept_token(token):
            break
        accepted += 1
    return {"masks": len(rows), "accepted": accepted, "accepting": m.is_accepting()}, rows


def compare(mask_dump, tokenizer_path, tok, requests, tmp_path):
    words = (tok.vocab_size + 31) // 32
    reports, masks = rust_masks(mask_dump, tokenizer_path, requests, tmp_path, words)
    compiler = stencil.Compiler(tok)
    at, compared = 0, 0
    for request, report in zip(requests, reports):
        mine, rows = python_masks(compiler, request, tok.vocab_size)
        name = request.get("name", request["kind"])
        if "error" in report:
            assert "error" in mine, f"{name}: Rust refused to compile: {report['error']}"
            assert mine["error"] == report["error"]
            continue
        assert mine == report, name
        for step, row in enumerate(rows):
            assert np.array_equal(row, masks[at + step]), f"{name}: mask {step} differs"
        at += len(rows)
        compared += len(rows)
    assert at == len(masks)
    return compared


def random_walk(tok, compiler, request, steps, seed):
    """Tokens chosen at random among those the mask allows (EOS excluded)."""
    m = stencil.Matcher(compile_request(compiler, request))
    rng = random.Random(seed)
    mask = stencil.allocate_token_bitmask(1, tok.vocab_size)
    eos = set(tok.eos_token_ids)
    tokens = []
    for _ in range(steps):
        m.fill_next_token_bitmask(mask)
        flat = np.unpackbits(mask[0].view(np.uint8), bitorder="little")
        allowed = [t for t in np.flatnonzero(flat).tolist() if t not in eos]
        if not allowed:
            break
        token = rng.choice(allowed)
        assert m.accept_token(token)
        tokens.append(token)
    return tokens


def test_shipped_grammars_bit_for_bit(mask_dump, gpt2, tmp_path):
    grammars = REPO / "grammars"
    compiler = stencil.Compiler(gpt2)
    requests = []
    for name in ("json.gbnf", "json-bounded.gbnf", "tool-call.gbnf"):
        requests.append({"name": name, "kind": "gbnf", "grammar": (grammars / name).read_text()})
    schema = json.loads((grammars / "city.schema.json").read_text())
    for order in ("schema", "any"):
        requests.append(
            {"name": f"city.schema.json/{order}", "kind": "json", "grammar": schema, "property_order": order}
        )
    requests.append({"name": "regex", "kind": "regex", "grammar": r"\d{1,3}(\.\d{1,3}){3}"})
    walks = []
    for request in requests:
        for seed in range(3):
            walk = dict(request, tokens=random_walk(gpt2, compiler, request, 40, seed))
            walk["name"] += f"/seed{seed}"
            walks.append(walk)
    # A walk that leaves the grammar: a refused token ends the sequence on both sides.
    walks.append(dict(requests[2], name="tool-call refused", tokens=gpt2.encode('{"name": "rm -rf"}')))
    assert compare(mask_dump, GPT2, gpt2, walks, tmp_path) > 400


def test_maskbench_sample_bit_for_bit(mask_dump, llama3, llama3_path, tmp_path):
    requests = []
    for name, schema, tests in maskbench_sample(every=20):
        for valid, text in tests[:2]:
            tokens = llama3.encode(text)[:40]
            requests.append(
                {"name": f"{name} valid={valid}", "kind": "json", "grammar": schema, "tokens": tokens}
            )
    assert len(requests) > 40
    assert compare(mask_dump, llama3_path, llama3, requests, tmp_path) > 1000
