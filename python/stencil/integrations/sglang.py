"""SGLang grammar backend: ``StencilGrammarBackend`` (compiles, caches through
SGLang's base class) and ``StencilGrammarObject`` (one request), registered under
the name "stencil" by ``register()`` (SGLang's ``register_grammar_backend``).

Masks are filled on the CPU (a torch tensor when torch is there, else numpy) and
moved to the device by ``move_vocab_mask``; jump-forward hands SGLang the forced
tokens stencil computes (the decode loop's canonical tokens).
"""

import stencil

from . import _full_bitmask, _tokenizer

try:  # the engine's own base classes when it is installed
    from sglang.srt.constrained.base_grammar_backend import BaseGrammarBackend, BaseGrammarObject
except ImportError:  # stand-ins with the same names and methods

    class BaseGrammarObject:
        def __init__(self):
            self._finished = False

        @property
        def finished(self):
            return self._finished

        @finished.setter
        def finished(self, finished):
            self._finished = finished

    class BaseGrammarBackend:
        def __init__(self):
            self.cache = {}


def _invalid(message):
    try:
        from sglang.srt.constrained.base_grammar_backend import InvalidGrammarObject
    except ImportError:
        return None
    return InvalidGrammarObject(message)


class StencilGrammarObject(BaseGrammarObject):
    def __init__(self, matcher, vocab_size):
        super().__init__()
        self.matcher = matcher
        self.vocab_size = vocab_size

    def accept_token(self, token):
        if not self.matcher.accept_token(token):
            raise ValueError(f"stencil: token {token} is not allowed here")

    def rollback(self, k):
        self.matcher.rollback(k)

    def is_terminated(self):
        return self.matcher.is_terminated()

    def allocate_vocab_mask(self, vocab_size, batch_size, device):
        return _full_bitmask(batch_size, vocab_size)

    def fill_vocab_mask(self, vocab_mask, idx):
        self.matcher.fill_next_token_bitmask(vocab_mask, idx)

    @staticmethod
    def move_vocab_mask(vocab_mask, device):
        return vocab_mask.to(device, non_blocking=True) if hasattr(vocab_mask, "to") else vocab_mask

    @staticmethod
    def apply_vocab_mask(logits, vocab_mask):
        stencil.apply_token_bitmask_inplace(logits, vocab_mask)

    def copy(self):
        return StencilGrammarObject(self.matcher.fork(), self.vocab_size)

    def try_jump_forward(self, tokenizer):
        tokens = self.matcher.forced_tokens()
        if not tokens:
            return None
        return tokens, tokenizer.decode(tokens)

    def jump_forward_str_state(self, helper):
        _, text = helper
        return text, -1

    def jump_and_retokenize(self, old_output_ids, new_output_ids, next_state):
        k = 0
        while k < min(len(old_output_ids), len(new_output_ids)) and old_output_ids[k] == new_output_ids[k]:
            k += 1
        self.matcher.rollback(len(old_output_ids) - k)
        for token in new_output_ids[k:]:
            self.accept_token(token)


class StencilGrammarBackend(BaseGrammarBackend):
    def __init__(self, tokenizer, vocab_size, eos_token_ids=None, whitespace="compact"):
        super().__init__()
        self.stencil_tokenizer = _tokenizer(tokenizer, eos_token_ids)
        self.compiler = stencil.Compiler(self.stencil_tokenizer)
        self.vocab_size = vocab_size
        self.whitespace = whitespace

    def _object(self, compile_, *args, **kwargs):
        try:
            grammar = compile_(*args, **kwargs)
        except (ValueError, NotImplementedError) as e:
            return _invalid(str(e))
        return StencilGrammarObject(stencil.Matcher(grammar), self.vocab_size)

    def dispatch_json(self, key_string):
        schema = {"type": "object"} if key_string == "$$ANY$$" else key_string
        return self._object(
            self.compiler.compile_json_schema, schema, whitespace=self.whitespace, property_order="any"
        )

    def dispatch_regex(self, key_string):
        return self._object(self.compiler.compile_regex, key_string)

    def dispatch_ebnf(self, key_string):
        return self._object(self.compiler.compile_gbnf, key_string)

    def dispatch_structural_tag(self, key_string):
        return self._object(self.compiler.compile_structural_tag, key_string)


def register(name="stencil"):
    """Registers the backend with SGLang (``--grammar-backend stencil``)."""
    from sglang.srt.constrained.base_grammar_backend import register_grammar_backend

    def create(server_args, tokenizer, vocab_size, eos_token_ids=None, *rest):
        return StencilGrammarBackend(tokenizer, vocab_size, eos_token_ids)

    register_grammar_backend(name, create)
