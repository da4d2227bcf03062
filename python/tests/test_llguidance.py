"""On JSON Schema, stencil's allowed sets equal llguidance's (its Python package,
a test dependency) where the two are configured alike.

Like with like, as src/cli/peers.rs does for `stencil bench`: llguidance gets the
very token bytes stencil reads (special tokens marked with a leading 0xFF byte, its
convention, EOS the same id), and its whitespace is turned off
(`whitespace_flexible: false`) to match stencil's default `compact`; properties in
the schema's order on both sides (`property_order="schema"`: llguidance writes
declared properties in schema order), integers without a fraction on both sides
(`plain_integers=True`: llguidance's integers; stencil's default is the spec's,
where `1.0` is an integer). Plain integers are also bounded to +-(2^53 - 1) where
the schema sets no bound and llguidance's are not: a step where the only
difference is llguidance allowing more digits is that, and nothing else. And
RFC 8259 lets DEL (0x7F) stand unescaped in a string and a backslash escape a
solidus, which llguidance refuses: tokens holding either are left out.

On the MaskBench sample the engines differ in more places: unicode escapes in
property names (stencil narrows them), property-name prefixes, `-` where a number
has `minimum: 0` (stencil allows `-0`, which equals 0), the key order of an object
whose `properties` merge with `oneOf` branches under `property_order="schema"`;
not all are explained yet,
so there the test compares verdicts: every token of an instance accepted by both
engines or refused by both at the same step, on at least 90% of the schemas both
compile; the disagreements are printed. Closing that gap is open work.
"""

import numpy as np
import pytest

import stencil
from conftest import maskbench_sample

llguidance = pytest.importorskip("llguidance")
import llguidance.numpy as llg_numpy  # noqa: E402


def llg_tokenizer(tok):
    special = dict(tok.special_tokens)
    tokens = []
    for i in range(tok.vocab_size):
        if i in special:
            tokens.append(b"\xff" + special[i].encode())
        else:
            raw = tok.decode_bytes([i])
            tokens.append(raw if raw else b"\xff<[%d]>" % i)

    class Wrapped:
        eos_token_id = tok.eos_token_ids[0]
        bos_token_id = None

        def __init__(self):
            self.tokens = tokens
            self.special_token_ids = sorted(special)

        def __call__(self, text):
            if isinstance(text, bytes):
                text = text.decode("utf-8", errors="replace")
            return tok.encode(text)

    return llguidance.LLTokenizer(llguidance.TokenizerWrapper(Wrapped()))


def compare_schema(tok, compiler, llg_tok, schema, texts, masks=True):
    """None if either engine declines the schema; else the steps compared (masks
    and verdicts, or verdicts alone)."""
    try:
        g = compiler.compile_json_schema(
            schema, whitespace="compact", property_order="schema", plain_integers=True
        )
    except ValueError:
        return None
    grammar = llguidance.LLMatcher.grammar_from_json_schema(
        schema, overrides={"whitespace_flexible": False}
    )
    is_error, _ = llguidance.LLMatcher.validate_grammar_with_warnings(grammar, llg_tok)
    if is_error:
        return None
    compared = 0
    long_integer_steps = []
    mine = stencil.allocate_token_bitmask(1, tok.vocab_size)
    theirs = llg_numpy.allocate_token_bitmask(1, llg_tok.vocab_size)
    for text in texts:
        m = stencil.Matcher(g)
        peer = llguidance.LLMatcher(llg_tok, grammar, log_level=0)
        if peer.is_error():
            return None
        for step, token in enumerate(tok.encode(text) + [tok.eos_token_ids[0]]):
            if not masks:
                compared += 1
                if not m.accept_token(token):
                    assert not peer.consume_token(token), f"step {step}: llguidance accepts"
                    break
                assert peer.consume_token(token), f"step {step}: llguidance refuses"
                continue
            m.fill_next_token_bitmask(mine)
            llg_numpy.fill_next_token_bitmask(peer, theirs, 0)
            if peer.is_error():
                return None  # a resource limit of llguidance's, not a verdict
            forced = bool(peer.compute_ff_bytes())
            a = np.unpackbits(mine[0].view(np.uint8), bitorder="little")
            b = np.unpackbits(theirs[0].view(np.uint8), bitorder="little")
            only_mine = np.flatnonzero(a & ~b).tolist()
            only_theirs = np.flatnonzero(b & ~a).tolist()
            if forced:
                only_mine = []  # llguidance: canonical tokens of forced text only
            elif only_theirs and all(tok.decode_bytes([t]).isdigit() for t in only_theirs):
                # A long integer's digits: stencil's plain integers stop at 2^53 - 1
                # where the schema sets no bound, llguidance's integers never do.
                long_integer_steps.append(step)
                only_theirs = []
            # RFC 8259 lets U+007F stand unescaped in a string, and `\/` escape a
            # solidus; llguidance refuses both.
            only_mine = [
                t for t in only_mine if not (b"\x7f" in tok.decode_bytes([t]) or b"\\/" in tok.decode_bytes([t]))
            ]
            if only_mine or only_theirs:
                only_mine, only_theirs = only_mine[:5], only_theirs[:5]
                raise AssertionError(
                    f"step {step} of {text[:80]!r}: only stencil allows "
                    f"{[tok.decode_bytes([t]) for t in only_mine]}, only llguidance "
                    f"{[tok.decode_bytes([t]) for t in only_theirs]}"
                )
            compared += 1
            if not m.accept_token(token):
                assert not peer.consume_token(token), f"step {step}: llguidance accepts"
                break
            assert peer.consume_token(token), f"step {step}: llguidance refuses"
    return compared


SCHEMAS = [
    {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "boolean"}}, "required": ["a"]},
    {"type": "array", "items": {"type": "string", "maxLength": 5}, "maxItems": 3},
    {"enum": ["red", "green", 3, None]},
    {"type": "object", "properties": {"n": {"type": "number", "minimum": 1}}, "additionalProperties": False},
]
DOCS = [
    ['{"a":12,"b":true}', '{"a":-3}'],
    ['["abc","de"]', "[]"],
    ['"green"', "3", "null"],
    ['{"n":1.5e3}', "{}"],
]


def test_hand_schemas_equal_llguidance(gpt2):
    compiler = stencil.Compiler(gpt2)
    llg_tok = llg_tokenizer(gpt2)
    total = 0
    for schema, docs in zip(SCHEMAS, DOCS):
        n = compare_schema(gpt2, compiler, llg_tok, schema, docs)
        assert n, f"both engines compile {schema}"
        total += n
    assert total > 30


def test_maskbench_sample_verdicts_equal_llguidance(llama3):
    compiler = stencil.Compiler(llama3)
    llg_tok = llg_tokenizer(llama3)
    compared = declined = 0
    failures = []
    for name, schema, tests in maskbench_sample(every=20):
        texts = [text for _, text in tests[:2]]
        try:
            n = compare_schema(llama3, compiler, llg_tok, schema, texts, masks=False)
        except AssertionError as e:
            failures.append(f"{name}: {e}")
            continue
        if n is None:
            declined += 1
        else:
            compared += 1
    print(f"{compared} schemas agree, {len(failures)} disagree, {declined} declined")
    print("\n".join(failures))
    assert len(failures) * 10 <= compared + len(failures), "\n".join(failures)
    assert compared > 3 * declined, (compared, declined)
