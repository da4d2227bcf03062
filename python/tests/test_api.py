"""The binding's API on the vocabulary shipped in the repository (GPT-2): shapes,
token answers checked against the mask, rollback / fork / reset, terminated
matchers, jump-forward, the batch fill, and applying masks to logits."""

import json
import random

import numpy as np
import pytest

import stencil

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 12},
        "age": {"type": "integer", "minimum": 0},
        "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}},
    },
    "required": ["name", "age"],
    "additionalProperties": False,
}
DOC = '{"name":"Ada Lovelace","age":36,"tags":["a","c"]}'


def bits(row):
    """The set of token ids whose bit is set in one mask row."""
    flat = np.unpackbits(np.asarray(row, dtype="<i4").view(np.uint8), bitorder="little")
    return set(np.flatnonzero(flat).tolist())


def mask_of(matcher, vocab_size):
    mask = stencil.allocate_token_bitmask(1, vocab_size)
    matcher.fill_next_token_bitmask(mask)
    return mask[0].copy()


def test_tokenizer(gpt2):
    assert gpt2.vocab_size == 50257
    assert gpt2.eos_token_ids == [50256]  # <|endoftext|>, from tokenizer_config.json
    assert (50256, "<|endoftext|>") in gpt2.special_tokens
    ids = gpt2.encode("Hello world")
    assert gpt2.decode_bytes(ids) == b"Hello world"
    assert len(ids) == 2


def test_add_eos_applies_to_later_compilers(gpt2):
    tok = stencil.Tokenizer.from_json(
        gpt2_text(), config=json.dumps({"eos_token": "<|endoftext|>"})
    )
    assert tok.eos_token_ids == [50256]
    before = stencil.Compiler(tok)
    newline = tok.encode("\n")[0]
    tok.add_eos([newline])
    assert tok.eos_token_ids == sorted([50256, newline])
    after = stencil.Compiler(tok)
    g_before = before.compile_regex("a")
    g_after = after.compile_regex("a")
    a = tok.encode("a")[0]
    for g, expect in ((g_before, {50256}), (g_after, {50256, newline})):
        m = stencil.Matcher(g)
        assert m.accept_token(a)
        assert bits(mask_of(m, tok.vocab_size)) == expect
    with pytest.raises(ValueError, match="outside the vocabulary"):
        tok.add_eos([tok.vocab_size])


def gpt2_text():
    import gzip
    from conftest import FIXTURES

    with gzip.open(FIXTURES / "tokenizers" / "gpt2" / "tokenizer.json.gz", "rt") as f:
        return f.read()


def test_from_huggingface_takes_an_object_with_to_str(gpt2):
    class Backend:
        def to_str(self):
            return gpt2_text()

    class HfTokenizer:
        backend_tokenizer = Backend()
        eos_token_id = 50256

    tok = stencil.Tokenizer.from_huggingface(HfTokenizer())
    assert tok.vocab_size == gpt2.vocab_size
    assert tok.eos_token_ids == [50256]
    with pytest.raises(TypeError):
        stencil.Tokenizer.from_huggingface(object())


def test_missing_file_is_oserror():
    with pytest.raises(OSError, match="no-such-tokenizer.json"):
        stencil.Tokenizer.from_file("no-such-tokenizer.json")


def test_allocate_token_bitmask():
    mask = stencil.allocate_token_bitmask(3, 50257)
    assert mask.dtype == np.int32
    assert mask.shape == (3, 1571)  # ceil(50257 / 32)
    assert (mask == -1).all()  # all allowed until filled, as llguidance and XGrammar
    assert stencil.allocate_token_bitmask(1, 64).shape == (1, 2)


def test_mask_matches_accept_token_for_every_token(gpt2, gpt2_compiler):
    """Bit t of the filled row is set iff accept_token(t) succeeds, for every token
    of the vocabulary, at several positions of a document (an independent check
    of the mask: one answer per token, through consume, not through the tables)."""
    g = gpt2_compiler.compile_json_schema(SCHEMA, property_order="schema")
    m = stencil.Matcher(g)
    tokens = gpt2.encode(DOC)
    for step, token in enumerate(tokens):
        if step in (0, 1, 3, 7, len(tokens) - 1):
            allowed = bits(mask_of(m, gpt2.vocab_size))
            probe = m.fork()
            accepted = set()
            for t in range(gpt2.vocab_size):
                if probe.accept_token(t):
                    accepted.add(t)
                    probe.rollback(1)
            assert allowed == accepted, f"step {step}"
            assert token in allowed
        assert m.accept_token(token)
    assert m.is_accepting()
    assert bits(mask_of(m, gpt2.vocab_size)) == {50256}


def test_accept_validate_counts(gpt2, gpt2_compiler):
    g = gpt2_compiler.compile_json_schema(SCHEMA, property_order="schema")
    tokens = gpt2.encode(DOC)
    bad = 50256  # EOS: refused while the document is open
    m = stencil.Matcher(g)
    draft = tokens[:5] + [bad] + tokens[5:]
    assert m.validate_tokens(draft) == 5
    assert m.tokens_consumed == 0  # validate leaves the state alone
    assert m.accept_tokens(draft) == 5
    assert m.tokens_consumed == 5
    assert not m.accept_token(bad)
    assert not m.accept_token(gpt2.vocab_size + 10)  # outside the vocabulary
    assert m.accept_tokens(tokens[5:]) == len(tokens) - 5
    assert m.is_accepting() and not m.is_terminated()
    assert m.accept_token(50256)
    assert m.is_terminated()
    assert not m.accept_token(tokens[0])
    assert bits(mask_of(m, gpt2.vocab_size)) == {50256}  # terminated: EOS only


def test_rollback_fork_reset(gpt2, gpt2_compiler):
    g = gpt2_compiler.compile_json_schema(SCHEMA, property_order="schema")
    tokens = gpt2.encode(DOC)
    m = stencil.Matcher(g)
    masks = [mask_of(m, gpt2.vocab_size)]
    for t in tokens:
        assert m.accept_token(t)
        masks.append(mask_of(m, gpt2.vocab_size))
    assert m.accept_token(50256) and m.is_terminated()
    m.rollback(1)  # EOS undone
    assert not m.is_terminated() and m.is_accepting()
    np.testing.assert_array_equal(mask_of(m, gpt2.vocab_size), masks[-1])
    for k in (1, 4, 9):
        m.rollback(k)
        np.testing.assert_array_equal(mask_of(m, gpt2.vocab_size), masks[m.tokens_consumed])
    at = m.tokens_consumed
    fork = m.fork()
    # The fork is independent: advancing it leaves the original where it was.
    assert fork.accept_tokens(tokens[at:]) == len(tokens) - at
    assert fork.is_accepting() and not m.is_accepting()
    np.testing.assert_array_equal(mask_of(m, gpt2.vocab_size), masks[at])
    m.rollback(1000)  # more than consumed: back to the start
    assert m.tokens_consumed == 0
    np.testing.assert_array_equal(mask_of(m, gpt2.vocab_size), masks[0])
    fork.reset()
    assert fork.tokens_consumed == 0 and not fork.is_accepting()
    np.testing.assert_array_equal(mask_of(fork, gpt2.vocab_size), masks[0])


def test_stop_policies(gpt2, gpt2_compiler):
    g = gpt2_compiler.compile_regex("yes|no")
    yes = gpt2.encode("yes")
    assert len(yes) == 1
    space = gpt2.encode(" ")[0]
    stop = stencil.Matcher(g)
    assert stop.stop_policy == "stop"
    assert stop.accept_tokens(yes) == 1
    assert bits(mask_of(stop, gpt2.vocab_size)) == {50256}
    assert not stop.accept_token(space)
    cont = stencil.Matcher(g, stop_policy="allow-continue")
    cont.accept_tokens(yes)
    assert len(bits(mask_of(cont, gpt2.vocab_size))) > 50000
    assert cont.accept_token(space)
    trailing = stencil.Matcher(g, stop_policy="trailing_whitespace_then_eos")
    trailing.accept_tokens(yes)
    assert space in bits(mask_of(trailing, gpt2.vocab_size))
    assert trailing.accept_token(space)
    assert bits(mask_of(trailing, gpt2.vocab_size)) == {50256}
    with pytest.raises(ValueError, match="stop_policy"):
        stencil.Matcher(g, stop_policy="never")


def test_forced_tokens(gpt2, gpt2_compiler):
    g = gpt2_compiler.compile_regex(r"The answer is: (yes|no)")
    m = stencil.Matcher(g)
    forced = m.forced_tokens()
    text = gpt2.decode_bytes(forced)
    # The canonical tokens of the forced text, all but the last (it could merge
    # with what follows), not consumed.
    assert forced == gpt2.encode("The answer is: ")[:-1]
    assert text == b"The answer is:"
    assert m.tokens_consumed == 0
    assert m.accept_tokens(forced) == len(forced)
    assert m.accept_tokens(gpt2.encode(" yes")) == 1
    assert m.forced_tokens() == []  # accepting: nothing is forced
    free = stencil.Matcher(gpt2_compiler.compile_regex(r"[a-z]+"))
    assert free.forced_tokens() == []
    # A token named by id, alone allowed where no byte may come: forced too.
    by_id = stencil.Matcher(gpt2_compiler.compile_lark("start: <[50]> <[60]> | <[50]> <[70]>"))
    assert by_id.forced_tokens() == [50]
    assert by_id.accept_token(50)
    assert by_id.forced_tokens() == []  # 60 or 70


def test_bitmask_rows_and_shapes(gpt2, gpt2_compiler):
    g = gpt2_compiler.compile_regex("[0-9]+")
    m = stencil.Matcher(g)
    mask = stencil.allocate_token_bitmask(4, gpt2.vocab_size)
    m.fill_next_token_bitmask(mask, index=2)
    assert (mask[[0, 1, 3]] == -1).all()  # other rows untouched
    assert len(bits(mask[2])) > 10 and 50256 not in bits(mask[2])
    one = np.zeros(mask.shape[1], dtype=np.int32)  # a 1-D row works too
    m.fill_next_token_bitmask(one)
    np.testing.assert_array_equal(one, mask[2])
    wide = np.full((1, mask.shape[1] + 3), -1, dtype=np.int32)  # padding comes out 0
    m.fill_next_token_bitmask(wide)
    assert (wide[0, -3:] == 0).all()
    assert wide[0, -4] == mask[2, -1]  # last real word: ids 50240..50256
    unsigned = np.zeros((1, mask.shape[1]), dtype=np.uint32)
    m.fill_next_token_bitmask(unsigned)
    np.testing.assert_array_equal(unsigned.view(np.int32)[0], mask[2])
    with pytest.raises(ValueError, match="row 4"):
        m.fill_next_token_bitmask(mask, index=4)
    with pytest.raises(ValueError, match="needs 1571"):
        m.fill_next_token_bitmask(np.zeros((1, 100), dtype=np.int32))
    with pytest.raises(TypeError, match="int32"):
        m.fill_next_token_bitmask(np.zeros((1, 1571), dtype=np.int64))
    with pytest.raises(TypeError):
        m.fill_next_token_bitmask([0] * 1571)
    readonly = np.zeros((1, 1571), dtype=np.int32)
    readonly.setflags(write=False)
    with pytest.raises(ValueError, match="writable"):
        m.fill_next_token_bitmask(readonly)
    with pytest.raises(ValueError, match="contiguous"):
        m.fill_next_token_bitmask(np.zeros((1571, 2), dtype=np.int32).T)


def test_batch_equals_serial(gpt2, gpt2_compiler):
    grammars = [
        gpt2_compiler.compile_json_schema(SCHEMA, property_order="schema"),
        gpt2_compiler.compile_regex("[0-9]+(\\.[0-9]+)?"),
        gpt2_compiler.compile_gbnf('root ::= "a" [b-d]* "e"'),
    ]
    rng = random.Random(7)
    matchers = []
    for i in range(24):
        m = stencil.Matcher(grammars[i % 3])
        # Advance each to a different place along a path its own mask allows.
        for _ in range(i % 6):
            allowed = sorted(bits(mask_of(m, gpt2.vocab_size)) - {50256})
            if not allowed:
                break
            assert m.accept_token(rng.choice(allowed))
        matchers.append(m)
    serial = stencil.allocate_token_bitmask(len(matchers), gpt2.vocab_size)
    for i, m in enumerate(matchers):
        m.fill_next_token_bitmask(serial, i)
    batch = stencil.allocate_token_bitmask(len(matchers), gpt2.vocab_size)
    stencil.fill_next_token_bitmask_batch(matchers, batch)
    np.testing.assert_array_equal(batch, serial)
    # With indices: rows reversed into a larger mask; the rest untouched.
    wide = stencil.allocate_token_bitmask(len(matchers) + 2, gpt2.vocab_size)
    indices = [len(matchers) + 1 - i for i in range(len(matchers))]
    stencil.fill_next_token_bitmask_batch(matchers, wide, indices)
    np.testing.assert_array_equal(wide[indices], serial)
    assert (wide[[0, 1]] == -1).all()
    with pytest.raises(ValueError, match="twice"):
        stencil.fill_next_token_bitmask_batch(matchers[:2], wide, [3, 3])
    with pytest.raises(ValueError, match="indices"):
        stencil.fill_next_token_bitmask_batch(matchers[:2], wide, [3])
    with pytest.raises(ValueError, match="outside"):
        stencil.fill_next_token_bitmask_batch(matchers[:1], wide, [99])
    stencil.fill_next_token_bitmask_batch([], wide)  # nothing to do


def test_batch_of_new_positions_equals_serial(gpt2):
    """Rows whose masks no compiler has built yet take long enough for the batch to
    wake the thread pool: the rows still equal a serial loop's."""

    def fresh_matchers():
        matchers = []
        for i in range(16):
            key = f"k{i}"
            schema = {
                "type": "object",
                "properties": {key: {"type": "string", "maxLength": i + 3}},
                "required": [key],
            }
            m = stencil.Matcher(stencil.Compiler(gpt2).compile_json_schema(schema))
            prefix = gpt2.encode(f'{{"{key}":"ab')
            assert m.accept_tokens(prefix) == len(prefix)
            matchers.append(m)
        return matchers

    serial = stencil.allocate_token_bitmask(16, gpt2.vocab_size)
    for i, m in enumerate(fresh_matchers()):
        m.fill_next_token_bitmask(serial, i)
    batch = stencil.allocate_token_bitmask(16, gpt2.vocab_size)
    stencil.fill_next_token_bitmask_batch(fresh_matchers(), batch)
    np.testing.assert_array_equal(batch, serial)


def test_apply_token_bitmask_inplace_numpy(gpt2, gpt2_compiler):
    m = stencil.Matcher(gpt2_compiler.compile_regex("[0-9]+"))
    mask = stencil.allocate_token_bitmask(2, gpt2.vocab_size)
    m.fill_next_token_bitmask(mask, 0)  # row 1 stays all-allowed
    width = gpt2.vocab_size + 50  # the model's logits may be wider (padding)
    logits = np.random.default_rng(0).standard_normal((2, width)).astype(np.float32)
    before = logits.copy()
    stencil.apply_token_bitmask_inplace(logits, mask)
    allowed = bits(mask[0])
    for t in range(width):
        if t in allowed:
            assert logits[0, t] == before[0, t]
        else:
            assert logits[0, t] == -np.inf
    # All-allowed row: kept up to the mask's 32 * words bits, masked past them.
    cut = 32 * mask.shape[1]
    np.testing.assert_array_equal(logits[1, :cut], before[1, :cut])
    assert (logits[1, cut:] == -np.inf).all()
    row = before[0].copy()
    stencil.apply_token_bitmask_inplace(row, mask[0])
    np.testing.assert_array_equal(row, logits[0])


def test_torch_optional(gpt2, gpt2_compiler):
    torch = pytest.importorskip("torch")
    m = stencil.Matcher(gpt2_compiler.compile_regex("[0-9]+"))
    mask = torch.full((1, (gpt2.vocab_size + 31) // 32), -1, dtype=torch.int32)
    m.fill_next_token_bitmask(mask)  # in place, through .numpy() (shared memory)
    expect = stencil.allocate_token_bitmask(1, gpt2.vocab_size)
    m.fill_next_token_bitmask(expect)
    np.testing.assert_array_equal(mask.numpy(), expect)
    logits = torch.zeros((1, gpt2.vocab_size))
    stencil.apply_token_bitmask_inplace(logits, mask)
    kept = set(torch.nonzero(logits[0] == 0).flatten().tolist())
    assert kept == bits(expect[0])


def test_numpy_alone():
    """`import stencil` imports numpy only: torch stays optional."""
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-c", "import stencil, sys; print('torch' in sys.modules)"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "False"


def test_type_stub_matches_the_module():
    """stencil/_stencil.pyi declares exactly the native module's classes and
    functions, and each class's public methods."""
    import ast
    from pathlib import Path

    from stencil import _stencil

    stub = ast.parse((Path(stencil.__file__).parent / "_stencil.pyi").read_text())
    declared = {}
    for node in stub.body:
        if isinstance(node, ast.ClassDef):
            declared[node.name] = {
                f.name for f in node.body if isinstance(f, ast.FunctionDef) and not f.name.startswith("__")
            }
        elif isinstance(node, ast.FunctionDef):
            declared[node.name] = None
    public = {n for n in dir(_stencil) if not n.startswith("__")}
    assert set(declared) == public
    for name, methods in declared.items():
        if methods is not None:
            actual = {m for m in dir(getattr(_stencil, name)) if not m.startswith("__")}
            assert methods == actual, name
