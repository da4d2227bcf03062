"""``python -m stencil.bench``: `stencil bench`'s MaskBench protocol from Python,
with peer engines' Python packages in the same process.

For each sampled record (every N-th) and each of its instances (serialized
compactly, UTF-8 kept, tokenized without special tokens): compile the schema and
fill the first mask (time to first mask), then for every token fill the mask
(time between masks), check the token is allowed, consume it; at the end the
instance passes when every token was allowed and the grammar accepts. Reported
per engine: TTFM and TBM percentiles, valid instances rejected, invalid
instances accepted, schemas that failed to compile.

Engines: stencil (one Compiler for the run, properties in any order, compact
whitespace, as `stencil bench`), llguidance (its defaults, as `stencil bench`
runs it; fed stencil's own token bytes, special tokens marked with 0xFF).
xgrammar is named in the issue but not wired here yet: asking for it says so.

    python -m stencil.bench --tokenizer tokenizer.json --maskbench A.jsonl.gz B.jsonl.gz --every 20
"""

import argparse
import gzip
import json
import time

import stencil


def percentile(values, q):
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(q / 100 * len(values)))]


def llguidance_tokenizer(tok):
    import llguidance

    special = dict(tok.special_tokens)
    tokens = []
    for i in range(tok.vocab_size):
        if i in special:
            tokens.append(b"\xff" + special[i].encode())
        else:
            raw = tok.decode_bytes([i])
            tokens.append(raw if raw else b"\xff<[%d]>" % i)

    class Wrapped:
        eos_token_id = tok.eos_token_ids[0] if tok.eos_token_ids else 0
        bos_token_id = None

        def __init__(self):
            self.tokens = tokens
            self.special_token_ids = sorted(special)

        def __call__(self, text):
            if isinstance(text, bytes):
                text = text.decode("utf-8", errors="replace")
            return tok.encode(text)

    return llguidance.LLTokenizer(llguidance.TokenizerWrapper(Wrapped()))


class Stencil:
    name = "stencil"

    def __init__(self, tok):
        self.compiler = stencil.Compiler(tok)

    def compile(self, schema):
        m = stencil.Matcher(self.compiler.compile_json_schema(schema, property_order="any"))
        return m.fill_next_token_bitmask, m.accept_token, m.is_accepting


class Llguidance:
    name = "llguidance"

    def __init__(self, tok):
        import llguidance
        import llguidance.numpy as llg_numpy

        self.llguidance, self.fill = llguidance, llg_numpy.fill_next_token_bitmask
        self.tok = llguidance_tokenizer(tok)

    def compile(self, schema):
        llg = self.llguidance
        m = llg.LLMatcher(self.tok, llg.LLMatcher.grammar_from_json_schema(schema), log_level=0)
        if m.is_error():
            raise ValueError(m.get_error())
        return (lambda mask: self.fill(m, mask, 0)), m.consume_token, m.is_accepting


def records(paths, every):
    for path in paths:
        with gzip.open(path, "rt", encoding="utf-8") as f:
            for i, line in enumerate(f):
                if i % every == 0:
                    record = json.loads(json.loads(line)["record"])
                    yield record["schema"], record.get("tests", [])


def run(engine, tok, sampled):
    mask = stencil.allocate_token_bitmask(1, tok.vocab_size)
    ttfm, tbm = [], []
    failed = valid_rejected = invalid_accepted = instances = 0
    for schema, tests in sampled:
        for test in tests:
            tokens = tok.encode(json.dumps(test["data"], separators=(",", ":"), ensure_ascii=False))
            t0 = time.perf_counter_ns()
            try:
                fill, consume, accepting = engine.compile(schema)
            except (ValueError, NotImplementedError):
                failed += 1  # the schema's instances are not counted
                break
            instances += 1
            fill(mask)
            ttfm.append(time.perf_counter_ns() - t0)
            passed = True
            for i, token in enumerate(tokens):
                if i:
                    t0 = time.perf_counter_ns()
                    fill(mask)
                    tbm.append(time.perf_counter_ns() - t0)
                if not (int(mask[0, token // 32]) >> (token % 32)) & 1 or not consume(token):
                    passed = False
                    break
            passed = passed and accepting()
            valid_rejected += test["valid"] and not passed
            invalid_accepted += (not test["valid"]) and passed
    return {
        "engine": engine.name,
        "instances": instances,
        "schemas failed": failed,
        "valid rejected": valid_rejected,
        "invalid accepted": invalid_accepted,
        **{f"TTFM p{q} us": percentile(ttfm, q) / 1000 for q in (50, 99)},
        **{f"TBM p{q} us": percentile(tbm, q) / 1000 for q in (50, 90, 99, 99.9)},
        "TBM max us": max(tbm, default=0) / 1000,
    }


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m stencil.bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--tokenizer", required=True)
    p.add_argument("--maskbench", nargs="+", required=True)
    p.add_argument("--every", type=int, default=10)
    p.add_argument("--peers", default="llguidance")
    p.add_argument("--no-peers", action="store_true")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    tok = stencil.Tokenizer.from_file(args.tokenizer)
    engines = [Stencil(tok)]
    for peer in [] if args.no_peers else [x for x in args.peers.split(",") if x]:
        if peer == "llguidance":
            engines.append(Llguidance(tok))
        else:
            raise SystemExit(f"peer {peer!r} is not supported by python -m stencil.bench yet")
    sampled = list(records(args.maskbench, args.every))
    results = [run(engine, tok, sampled) for engine in engines]
    if args.json:
        print(json.dumps(results))
        return
    keys = list(results[0])
    print(" | ".join(keys))
    for r in results:
        print(" | ".join(f"{r[k]:.1f}" if isinstance(r[k], float) else str(r[k]) for k in keys))


if __name__ == "__main__":
    main()
