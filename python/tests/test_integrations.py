"""The engine adapters driven the way the engines drive them: a fake scheduler
makes vLLM's and SGLang's calls in their order (compile, allocate, fill a batch
row, sample, accept; speculative drafts validated, accepted, partly rolled back;
jump-forward), over the repository's GPT-2 vocabulary. When an engine is
importable, the adapters subclass its real base classes and these tests run
against them unchanged."""

import gzip
import json

import numpy as np
import pytest

import stencil
from conftest import FIXTURES
from stencil.integrations import sglang as sg
from stencil.integrations import transformers as tf
from stencil.integrations import vllm as vl

SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
    "required": ["city", "days"],
}
DOC = '{"city":"Paris","days":3}'
EOS = 50256
PADDED_VOCAB = 50304  # the model's logits width: padding past the tokenizer


class HfTokenizer:
    """What the engines hand over: a transformers fast tokenizer's surface."""

    def __init__(self):
        with gzip.open(FIXTURES / "tokenizers" / "gpt2" / "tokenizer.json.gz", "rt") as f:
            text = f.read()

        class Backend:
            def to_str(self):
                return text

        self.backend_tokenizer = Backend()
        self.eos_token_id = EOS
        self._tok = stencil.Tokenizer.from_json(text)

    def encode(self, text):
        return self._tok.encode(text)

    def decode(self, ids):
        return self._tok.decode_bytes(ids).decode("utf-8", errors="replace")


def allowed(bitmask, row, token):
    return bool((int(bitmask[row, token // 32]) >> (token % 32)) & 1)


def test_vllm_scheduler_order():
    hf = HfTokenizer()
    backend = vl.StencilBackend(vllm_config=None, tokenizer=hf, vocab_size=PADDED_VOCAB)
    assert backend.stencil_tokenizer.eos_token_ids == [EOS]
    grammar = backend.compile_grammar(vl.StructuredOutputOptions.JSON, json.dumps(SCHEMA))
    bitmask = backend.allocate_token_bitmask(4)
    assert bitmask.shape == (4, PADDED_VOCAB // 32)
    tokens = hf.encode(DOC) + [EOS]
    row, i = 2, 0
    while i < len(tokens):
        # Speculative step: a draft of the next three tokens with a wrong last one
        # (a padding id: never allowed).
        draft = tokens[i : i + 2] + [PADDED_VOCAB - 1]
        valid = grammar.validate_tokens(draft)
        assert valid == draft[: len(valid)] and len(valid) <= 2
        grammar.fill_bitmask(bitmask, row)
        assert allowed(bitmask, row, tokens[i])
        assert not any(allowed(bitmask, row, t) for t in range(EOS + 1, PADDED_VOCAB))  # padding
        assert grammar.accept_tokens("req-1", valid or [tokens[i]])
        step = len(valid) or 1
        if step == 2:  # the verifier rejects the second draft token: roll it back
            grammar.rollback(1)
            step = 1
        i += step
    assert grammar.is_terminated()
    grammar.fill_bitmask(bitmask, row)
    assert [t for t in range(PADDED_VOCAB) if allowed(bitmask, row, t)] == [EOS]
    grammar.reset()
    assert not grammar.is_terminated()
    # accept_tokens is all or nothing.
    assert not grammar.accept_tokens("req-1", hf.encode('{"city"') + [EOS])
    assert grammar.accept_tokens("req-1", hf.encode('{"city"'))
    backend.destroy()


@pytest.mark.parametrize(
    "kind, spec, good, bad",
    [
        ("JSON_OBJECT", "", '{"a":[1]}', "[1]"),
        ("REGEX", r"\d{3}-\d{4}", "555-1234", "5555"),
        ("GRAMMAR", 'root ::= "yes" | "no"', "yes", "maybe"),
        ("GRAMMAR", 'start: "yes" | "no"', "no", "nah"),
        ("CHOICE", json.dumps(["a.b", "c|d (x)"]), "c|d (x)", "a"),
    ],
)
def test_vllm_request_types(kind, spec, good, bad):
    hf = HfTokenizer()
    backend = vl.StencilBackend(vllm_config=None, tokenizer=hf, vocab_size=PADDED_VOCAB)
    grammar = backend.compile_grammar(vl.StructuredOutputOptions[kind], spec)
    assert grammar.accept_tokens("r", hf.encode(good) + [EOS])
    assert grammar.is_terminated()
    grammar.reset()
    assert not grammar.accept_tokens("r", hf.encode(bad) + [EOS])


def test_vllm_structural_tag():
    hf = HfTokenizer()
    backend = vl.StencilBackend(vllm_config=None, tokenizer=hf, vocab_size=PADDED_VOCAB)
    tag = {"type": "structural_tag", "format": {"type": "triggered_tags", "triggers": ["<call>"],
           "tags": [{"begin": "<call>", "end": "</call>",
                     "content": {"type": "json_schema", "json_schema": {"type": "integer"}}}]}}
    grammar = backend.compile_grammar(vl.StructuredOutputOptions.STRUCTURAL_TAG, json.dumps(tag))
    assert grammar.accept_tokens("r", hf.encode("ok <call>42</call> done") + [EOS])
    assert grammar.is_terminated()
    grammar.reset()
    # A trigger always starts a tag: free text cannot swallow a bad call.
    assert not grammar.accept_tokens("r", hf.encode("ok <call>x</call>") + [EOS])
    with pytest.raises(ValueError, match="/format"):
        backend.compile_grammar(vl.StructuredOutputOptions.STRUCTURAL_TAG, '{"format": {}}')


def test_sglang_scheduler_order():
    hf = HfTokenizer()
    backend = sg.StencilGrammarBackend(hf, PADDED_VOCAB, eos_token_ids={EOS})
    one = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
           "additionalProperties": False}
    prototype = backend.dispatch_json(json.dumps(one))
    grammar = prototype.copy()  # SGLang copies the cached prototype per request
    mask = grammar.allocate_vocab_mask(PADDED_VOCAB, 3, "cpu")
    doc = '{"city":"Paris"}'
    tokens = hf.encode(doc)
    out, jumped = [], 0
    while not grammar.finished:
        jump = grammar.try_jump_forward(hf)
        if jump is not None:
            text, state = grammar.jump_forward_str_state(jump)
            assert hf.encode(text) == jump[0]
            # SGLang retokenizes output + jumped text and hands both lists back.
            new = out + jump[0]
            grammar.jump_and_retokenize(out, new, state)
            out, jumped = new, jumped + len(jump[0])
            continue
        grammar.fill_vocab_mask(mask, 1)
        mask = sg.StencilGrammarObject.move_vocab_mask(mask, "cpu")
        logits = np.zeros((3, PADDED_VOCAB), dtype=np.float32)
        sg.StencilGrammarObject.apply_vocab_mask(logits, mask)
        token = tokens[len(out)] if len(out) < len(tokens) else EOS
        assert logits[1, token] == 0 and np.isinf(logits[1, EOS + 1 :]).all()
        grammar.accept_token(token)
        out.append(token)
        if grammar.is_terminated():
            grammar.finished = True
    assert hf.decode(out[:-1]) == doc
    assert jumped > 0  # the schema forces `{"city":"`: jump-forward committed it
    # A speculative rollback, then a refused token raises.
    grammar.rollback(2)
    assert not grammar.is_terminated()
    with pytest.raises(ValueError):
        grammar.accept_token(EOS)  # inside the string again: EOS is refused
    assert prototype.matcher.tokens_consumed == 0  # the prototype is untouched
    assert backend.dispatch_regex("a+") is not None
    assert backend.dispatch_ebnf('root ::= "x"') is not None
    # A bad grammar: SGLang's InvalidGrammarObject when SGLang is there, else None.
    bad = backend.dispatch_ebnf("root ::= (")
    assert bad is None or type(bad).__name__ == "InvalidGrammarObject"


def test_transformers_logits_processor():
    hf = HfTokenizer()
    compiler = stencil.Compiler(stencil.Tokenizer.from_huggingface(hf))
    processor = tf.StencilLogitsProcessor(compiler.compile_regex("(yes|no)!"), batch_size=2)
    ids = np.array([[1, 2, 3], [4, 5, 6]])  # the prompt: never consumed
    for _ in range(8):
        scores = processor(ids, np.zeros((2, PADDED_VOCAB), dtype=np.float32))
        # Row 0 takes the lowest allowed id, row 1 the highest.
        choice = [int(np.flatnonzero(scores[0] == 0)[0]), int(np.flatnonzero(scores[1] == 0)[-1])]
        ids = np.concatenate([ids, np.array(choice)[:, None]], axis=1)
        if choice == [EOS, EOS]:
            break
    for row in range(2):
        out = ids[row, 3:].tolist()
        assert out[-1] == EOS
        assert hf.decode(out[:-1]) in ("yes!", "no!")
        assert processor.matchers[row].is_accepting()  # EOS is sampled, never fed back
