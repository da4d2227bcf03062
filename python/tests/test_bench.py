"""`python -m stencil.bench` on a two-record MaskBench file written here: the
verdicts come out right and every column is reported."""

import gzip
import json

import pytest

from conftest import FIXTURES
from stencil import bench


def test_bench_verdicts(tmp_path, capsys):
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    tests = [
        {"valid": True, "data": {"n": 5}},
        {"valid": True, "data": {"n": 12345}},
        {"valid": False, "data": {"n": "five"}},
    ]
    bad = {"type": "array", "items": {"type": "string", "pattern": "a{2,1}"}}  # no such regex
    path = tmp_path / "maskbench.jsonl.gz"
    with gzip.open(path, "wt") as f:
        for s, t in ((schema, tests), (bad, [{"valid": True, "data": ["aa"]}])):
            f.write(json.dumps({"record": json.dumps({"schema": s, "tests": t})}) + "\n")
    tokenizer = str(FIXTURES / "tokenizers" / "gpt2" / "tokenizer.json.gz")
    peers = ["--no-peers"]
    try:
        import llguidance  # noqa: F401

        peers = ["--peers", "llguidance"]
    except ImportError:
        pass
    bench.main(["--tokenizer", tokenizer, "--maskbench", str(path), "--every", "1", "--json", *peers])
    results = json.loads(capsys.readouterr().out)
    for r in results:
        assert r["instances"] == 3, r
        assert r["schemas failed"] == 1, r
        assert r["valid rejected"] == 0 and r["invalid accepted"] == 0, r
        assert r["TBM p50 us"] > 0 and r["TTFM p50 us"] > 0
    assert results[0]["engine"] == "stencil"
    with pytest.raises(SystemExit, match="xgrammar"):
        bench.main(["--tokenizer", tokenizer, "--maskbench", str(path), "--peers", "xgrammar"])
