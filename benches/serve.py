#!/usr/bin/env python3
"""Serving benchmark: aggregate output tokens/s and time to first token (p50,
p99) at several concurrencies, JSON-Schema constrained, default model, CPU.
Runs `stencil serve` and, when given, llama.cpp's `llama-server` on the same
GGUF with its JSON-schema grammar, one after the other on the same machine.

    python3 benches/serve.py --stencil target/release/stencil \
        [--llama-server PATH --gguf MODEL.gguf] [--concurrency 1,4,8,16] [--rounds 2]

Every request streams (`stream_options.include_usage`); time to first token is
the first content chunk; throughput is the output tokens of all requests of a
level over the level's wall time. Prints a Markdown table."""

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import httpx

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 24},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "city": {"type": "string", "maxLength": 24},
        "hobbies": {"type": "array", "items": {"type": "string", "maxLength": 16}, "maxItems": 3},
    },
    "required": ["name", "age", "city", "hobbies"],
    "additionalProperties": False,
}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_healthy(url, process, seconds=900):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if process.poll() is not None:
            sys.exit(f"server exited with {process.returncode}")
        try:
            with urllib.request.urlopen(url + "/health", timeout=1) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.3)
    sys.exit("server did not come up")


def one(client, i, max_tokens):
    body = {
        "model": "m",
        "messages": [{"role": "user", "content": f"Invent person number {i} as JSON."}],
        "max_tokens": max_tokens,
        "temperature": 0.7,
        "seed": i,
        "stream": True,
        "stream_options": {"include_usage": True},
        "response_format": {"type": "json_schema", "json_schema": {"name": "person", "schema": SCHEMA, "strict": True}},
    }
    started = time.perf_counter()
    first = None
    tokens = None
    chunks = 0
    with client.stream("POST", "/v1/chat/completions", json=body) as r:
        r.raise_for_status()
        for line in r.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            for c in chunk.get("choices") or []:
                if (c.get("delta") or {}).get("content"):
                    chunks += 1
                    if first is None:
                        first = time.perf_counter() - started
            if chunk.get("usage"):
                tokens = chunk["usage"]["completion_tokens"]
    return (first if first is not None else time.perf_counter() - started), (tokens if tokens is not None else chunks)


def percentile(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def level(url, concurrency, requests, max_tokens):
    # A fresh connection per request for both servers (llama-server closes a
    # kept-alive connection after a few requests, which a reused one trips on).
    limits = httpx.Limits(max_keepalive_connections=0)
    with httpx.Client(base_url=url, timeout=900, limits=limits) as client:
        # Warm up; a server may answer /health before it takes requests.
        for attempt in range(30):
            try:
                one(client, 10_000 + concurrency, 8)
                break
            except httpx.HTTPError:
                time.sleep(1)
        started = time.perf_counter()
        with ThreadPoolExecutor(concurrency) as pool:
            results = list(pool.map(lambda i: one(client, i, max_tokens), range(requests)))
        wall = time.perf_counter() - started
    ttft = [r[0] for r in results]
    tokens = sum(r[1] for r in results)
    return {"tokens_per_s": tokens / wall, "ttft_p50_ms": 1000 * statistics.median(ttft),
            "ttft_p99_ms": 1000 * percentile(ttft, 99), "tokens": tokens, "wall_s": wall}


def run_server(name, command, url, levels, rounds, max_tokens, per_client):
    log = open(f"/tmp/bench-{name}.log", "w")
    process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_healthy(url, process)
        rows = {}
        for c in levels:
            runs = [level(url, c, max(per_client * c, 8), max_tokens) for _ in range(rounds)]
            best = max(runs, key=lambda r: r["tokens_per_s"])
            rows[c] = best
            print(f"{name} c={c}: {best['tokens_per_s']:.1f} tok/s, ttft p50 {best['ttft_p50_ms']:.0f} ms,"
                  f" p99 {best['ttft_p99_ms']:.0f} ms", file=sys.stderr)
        return rows
    finally:
        process.terminate()
        process.wait(timeout=60)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--stencil", default="target/release/stencil")
    ap.add_argument("--llama-server")
    ap.add_argument("--gguf", help="the GGUF both servers load (default: stencil's default model)")
    ap.add_argument("--concurrency", default="1,4,8,16")
    ap.add_argument("--rounds", type=int, default=1, help="runs per level; the best is kept")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--requests-per-client", type=int, default=2,
                    help="requests per level: this many per concurrent client (at least 8); more"
                         " measure the steady state, fewer weigh the batch's ramp-down at the end")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    args = ap.parse_args()
    levels = [int(c) for c in args.concurrency.split(",")]
    results = {}
    port = free_port()
    command = [args.stencil, "serve", "--port", str(port), "--max-batch", str(max(levels))]
    if args.gguf:
        command += ["--model", args.gguf]
    results["stencil"] = run_server("stencil", command, f"http://127.0.0.1:{port}", levels, args.rounds, args.max_tokens,
                                  args.requests_per_client)
    if args.llama_server:
        if not args.gguf:
            sys.exit("--llama-server needs --gguf")
        port = free_port()
        command = [args.llama_server, "-m", args.gguf, "--port", str(port), "--parallel", str(max(levels)),
                   "-c", str(4096 * max(levels)), "-t", str(args.threads), "--no-webui"]
        results["llama-server"] = run_server("llama-server", command, f"http://127.0.0.1:{port}", levels,
                                             args.rounds, args.max_tokens, args.requests_per_client)
    print("| server | concurrency | output tok/s | vs own c=1 | TTFT p50 ms | TTFT p99 ms |")
    print("|---|---|---|---|---|---|")
    for name, rows in results.items():
        base = rows[levels[0]]["tokens_per_s"]
        for c in levels:
            r = rows[c]
            print(f"| {name} | {c} | {r['tokens_per_s']:.1f} | {r['tokens_per_s'] / base:.2f}x |"
                  f" {r['ttft_p50_ms']:.0f} | {r['ttft_p99_ms']:.0f} |")


if __name__ == "__main__":
    main()
