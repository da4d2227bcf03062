"""A Hugging Face ``LogitsProcessor``: each row of a generate() batch keeps its own
stencil.Matcher; at every step it consumes the row's last token (after the first
call, which sees the prompt), fills the rows in one batch call and masks the
scores. Subclasses transformers' class when transformers is installed.
"""

import stencil

try:
    from transformers import LogitsProcessor
except ImportError:

    class LogitsProcessor:
        pass


class StencilLogitsProcessor(LogitsProcessor):
    def __init__(self, grammar, batch_size=1, stop_policy="stop"):
        self.matchers = [stencil.Matcher(grammar, stop_policy=stop_policy) for _ in range(batch_size)]
        self.vocab_size = grammar.vocab_size
        self.prompt_len = None
        self.bitmask = stencil.allocate_token_bitmask(batch_size, self.vocab_size)

    def __call__(self, input_ids, scores):
        if self.prompt_len is None:
            self.prompt_len = input_ids.shape[-1]
        else:
            for matcher, row in zip(self.matchers, input_ids):
                if not matcher.is_terminated():
                    matcher.accept_token(int(row[-1]))
        stencil.fill_next_token_bitmask_batch(self.matchers, self.bitmask)
        stencil.apply_token_bitmask_inplace(scores, self.bitmask, vocab_size=self.vocab_size)
        return scores
