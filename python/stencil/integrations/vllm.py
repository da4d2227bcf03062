"""vLLM structured-output backend: ``StencilBackend`` (engine level: compiles
grammars, allocates the bitmask) and ``StencilGrammar`` (one request's matcher).

vLLM's request types map to stencil's compilers: JSON (a schema), JSON_OBJECT (any
object), REGEX, GRAMMAR (Lark when the text defines ``start:``, else GBNF), CHOICE
(a JSON list of strings: exactly one of them), STRUCTURAL_TAG (XGrammar's format, or
the legacy ``structures`` + ``triggers``). ``accept_tokens`` is all or nothing: on a
refusal the request's state is as before the call.
"""

import json
import re
from abc import ABC, abstractmethod
from dataclasses import dataclass
import enum

import stencil

from . import _escape_literal, _full_bitmask, _tokenizer

try:  # the engine's own base classes when it is installed
    from vllm.v1.structured_output.backend_types import (
        StructuredOutputBackend,
        StructuredOutputGrammar,
        StructuredOutputOptions,
    )
except ImportError:  # stand-ins with the same names and methods

    class StructuredOutputOptions(enum.Enum):
        JSON = enum.auto()
        JSON_OBJECT = enum.auto()
        REGEX = enum.auto()
        GRAMMAR = enum.auto()
        CHOICE = enum.auto()
        STRUCTURAL_TAG = enum.auto()

    class StructuredOutputGrammar(ABC):
        @abstractmethod
        def accept_tokens(self, request_id, tokens): ...

        @abstractmethod
        def validate_tokens(self, tokens): ...

        @abstractmethod
        def rollback(self, num_tokens): ...

        @abstractmethod
        def fill_bitmask(self, bitmask, batch_index): ...

        @abstractmethod
        def is_terminated(self): ...

        @abstractmethod
        def reset(self): ...

    @dataclass
    class StructuredOutputBackend(ABC):
        vllm_config: object
        tokenizer: object
        vocab_size: int

        @abstractmethod
        def compile_grammar(self, request_type, grammar_spec): ...

        @abstractmethod
        def allocate_token_bitmask(self, max_num_seqs): ...

        @abstractmethod
        def destroy(self): ...


class StencilGrammar(StructuredOutputGrammar):
    """One request: a stencil.Matcher behind vLLM's grammar interface."""

    def __init__(self, matcher):
        self.matcher = matcher

    def accept_tokens(self, request_id, tokens):
        n = self.matcher.accept_tokens(list(tokens))
        if n < len(tokens):
            self.matcher.rollback(n)
            return False
        return True

    def validate_tokens(self, tokens):
        return list(tokens[: self.matcher.validate_tokens(list(tokens))])

    def rollback(self, num_tokens):
        self.matcher.rollback(num_tokens)

    def fill_bitmask(self, bitmask, batch_index):
        self.matcher.fill_next_token_bitmask(bitmask, batch_index)

    def is_terminated(self):
        return self.matcher.is_terminated()

    def reset(self):
        self.matcher.reset()


def _is_lark(text):
    return re.search(r"^\s*start\s*:", text, re.M) is not None and "::=" not in text


@dataclass
class StencilBackend(StructuredOutputBackend):
    """Engine level: one stencil.Compiler for the model's vocabulary."""

    def __post_init__(self):
        self.stencil_tokenizer = _tokenizer(self.tokenizer)
        self.compiler = stencil.Compiler(self.stencil_tokenizer)

    def compile_grammar(self, request_type, grammar_spec):
        c = self.compiler
        kind = request_type.name
        if kind == "JSON":
            g = c.compile_json_schema(grammar_spec, property_order="any")
        elif kind == "JSON_OBJECT":
            g = c.compile_json_schema({"type": "object"}, property_order="any")
        elif kind == "REGEX":
            g = c.compile_regex(grammar_spec)
        elif kind == "GRAMMAR":
            g = c.compile_lark(grammar_spec) if _is_lark(grammar_spec) else c.compile_gbnf(grammar_spec)
        elif kind == "CHOICE":
            choices = json.loads(grammar_spec)
            g = c.compile_regex("|".join(f"({_escape_literal(str(x))})" for x in choices))
        elif kind == "STRUCTURAL_TAG":
            g = c.compile_structural_tag(json.loads(grammar_spec))
        else:
            raise ValueError(f"unsupported request type {request_type}")
        return StencilGrammar(stencil.Matcher(g))

    def allocate_token_bitmask(self, max_num_seqs):
        return _full_bitmask(max_num_seqs, self.vocab_size)

    def destroy(self):
        self.compiler.clear()
