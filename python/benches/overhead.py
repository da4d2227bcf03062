"""Overhead of the Python boundary (a benchmark, not a test; prints what it measures).

1. `Matcher.fill_next_token_bitmask` from Python against the same Rust call timed
   inside Rust (`_stencil._time_rust_fill_ns`), same matcher, same position, median
   of many calls each: the difference is what the binding adds per call.
2. `fill_next_token_bitmask_batch` over 64 matchers against a serial Python loop of
   single fills over the same matchers (median of rounds).

    python python/benches/overhead.py --tokenizer ../shared/data/tokenizers/llama3/tokenizer.json
"""

import argparse
import statistics
import time

import stencil
from stencil import _stencil

SCHEMA = {
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "name": {"type": "string"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "price": {"type": "number"},
    },
    "required": ["id", "name"],
}
DOC = '{"id":12345,"name":"A rather long product name, to sit inside a string","tags":["x","y"],"price":9.5}'


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--tokenizer", required=True)
    p.add_argument("--repeats", type=int, default=2000)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--rounds", type=int, default=50)
    p.add_argument("--maskbench", help="a maskbench.jsonl.gz: adds the uncached-mask batch run")
    p.add_argument("--cold-rounds", type=int, default=8)
    args = p.parse_args()
    tok = stencil.Tokenizer.from_file(args.tokenizer)
    compiler = stencil.Compiler(tok)
    grammar = compiler.compile_json_schema(SCHEMA, property_order="schema")
    tokens = tok.encode(DOC)
    mask = stencil.allocate_token_bitmask(args.batch, tok.vocab_size)

    # 1. Per-call overhead at a few positions (inside a string, between values).
    print(f"vocabulary {tok.vocab_size}; single fill, median of {args.repeats} calls")
    for at in (3, 12, len(tokens) - 2):
        m = stencil.Matcher(grammar)
        assert m.accept_tokens(tokens[:at]) == at
        m.fill_next_token_bitmask(mask)  # warm the tables for this position
        rust = statistics.median(_stencil._time_rust_fill_ns(m, mask, args.repeats))
        fill = m.fill_next_token_bitmask
        py = []
        for _ in range(args.repeats):
            t0 = time.perf_counter_ns()
            fill(mask, 0)
            py.append(time.perf_counter_ns() - t0)
        py = statistics.median(py)
        print(f"  after {at:2d} tokens: Rust {rust / 1000:7.2f} us, from Python {py / 1000:7.2f} us, "
              f"overhead {(py - rust) / 1000:5.2f} us")

    # 2. Batch over N matchers at different positions vs a serial loop.
    matchers = []
    for i in range(args.batch):
        m = stencil.Matcher(grammar)
        m.accept_tokens(tokens[: i % (len(tokens) - 1)])
        matchers.append(m)
    stencil.fill_next_token_bitmask_batch(matchers, mask)  # warm
    serial, batch = [], []
    for _ in range(args.rounds):
        t0 = time.perf_counter_ns()
        for i, m in enumerate(matchers):
            m.fill_next_token_bitmask(mask, i)
        serial.append(time.perf_counter_ns() - t0)
        t0 = time.perf_counter_ns()
        stencil.fill_next_token_bitmask_batch(matchers, mask)
        batch.append(time.perf_counter_ns() - t0)
    s, b = statistics.median(serial), statistics.median(batch)
    print(f"{args.batch} matchers, masks cached, median of {args.rounds} rounds: serial loop "
          f"{s / 1000:.1f} us, batch {b / 1000:.1f} us, speed-up {s / b:.2f}x")

    # 3. The same with masks not yet cached: each round compiles the grammars anew
    #    with a fresh compiler (not timed), one for the loop and one for the batch.
    if args.maskbench:
        import gzip
        import json

        records = []
        with gzip.open(args.maskbench, "rt", encoding="utf-8") as f:
            for line in f:
                record = json.loads(json.loads(line)["record"])
                if record.get("tests"):
                    text = json.dumps(record["tests"][0]["data"], separators=(",", ":"), ensure_ascii=False)
                    records.append((record["schema"], tok.encode(text)))
        serial, batch = [], []
        for r in range(args.cold_rounds):
            chosen = records[r * args.batch : (r + 1) * args.batch]
            times = []
            for _ in ("serial", "batch"):
                fresh = stencil.Compiler(tok)
                ms = []
                for schema, toks in chosen:
                    try:
                        m = stencil.Matcher(fresh.compile_json_schema(schema, property_order="any"))
                    except ValueError:
                        continue
                    m.accept_tokens(toks[: len(toks) // 2])
                    ms.append(m)
                times.append(ms)
            # Whichever runs first pays for growing the process's heap: alternate.
            for run in ("serial", "batch") if r % 2 == 0 else ("batch", "serial"):
                t0 = time.perf_counter_ns()
                if run == "serial":
                    for i, m in enumerate(times[0]):
                        m.fill_next_token_bitmask(mask, i)
                    serial.append(time.perf_counter_ns() - t0)
                else:
                    stencil.fill_next_token_bitmask_batch(times[1], mask)
                    batch.append(time.perf_counter_ns() - t0)
        s, b = statistics.median(serial), statistics.median(batch)
        print(f"{args.batch} MaskBench matchers, first mask at mid-instance, fresh compilers, median of "
              f"{args.cold_rounds} rounds: serial loop {s / 1000:.1f} us, batch {b / 1000:.1f} us, "
              f"speed-up {s / b:.2f}x")


if __name__ == "__main__":
    main()
