"""Shared fixtures of the Python package's tests: tokenizers, the MaskBench sample,
the Rust mask dumper (python/examples/mask_dump.rs).

Tests that need ../shared/data (or $STENCIL_SHARED_DATA) skip cleanly without it;
tests that need the dumper build it with cargo (or take $STENCIL_MASK_DUMP) and skip
when neither is available.
"""

import gzip
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

import stencil

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"


def shared_data():
    env = os.environ.get("STENCIL_SHARED_DATA")
    path = Path(env) if env else REPO.parent / "shared" / "data"
    return path if path.is_dir() else None


@pytest.fixture(scope="session")
def gpt2():
    return stencil.Tokenizer.from_file(str(FIXTURES / "tokenizers" / "gpt2" / "tokenizer.json.gz"))


@pytest.fixture(scope="session")
def gpt2_compiler(gpt2):
    return stencil.Compiler(gpt2)


@pytest.fixture(scope="session")
def llama3_path():
    data = shared_data()
    path = data / "tokenizers" / "llama3" / "tokenizer.json" if data else None
    if path is None or not path.is_file():
        pytest.skip("../shared/data/tokenizers/llama3 not found")
    return path


@pytest.fixture(scope="session")
def llama3(llama3_path):
    return stencil.Tokenizer.from_file(str(llama3_path))


def compact(value):
    # MaskBench's serialization (DESIGN.md): compact separators, UTF-8 kept.
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def maskbench_sample(every, sets=("Github_easy", "Github_medium", "Kubernetes"), limit=None):
    """Every `every`-th MaskBench record of `sets`: (name, schema, [(valid, text)])."""
    data = shared_data()
    if data is None:
        pytest.skip("../shared/data not found")
    out = []
    for name in sets:
        path = data / "jsonschemabench" / name / "maskbench.jsonl.gz"
        if not path.is_file():
            pytest.skip(f"{path} not found")
        with gzip.open(path, "rt", encoding="utf-8") as f:
            for i, line in enumerate(f):
                if i % every:
                    continue
                row = json.loads(line)
                record = json.loads(row["record"])
                tests = [(t["valid"], compact(t["data"])) for t in record.get("tests", [])]
                out.append((row["file"], record["schema"], tests))
                if limit and len(out) >= limit * (sets.index(name) + 1):
                    break
    return out


@pytest.fixture(scope="session")
def mask_dump():
    """The path of the mask_dump example binary (built here when cargo is at hand)."""
    env = os.environ.get("STENCIL_MASK_DUMP")
    if env:
        return Path(env)
    cargo = shutil.which("cargo")
    if cargo is None:
        pytest.skip("cargo not found and $STENCIL_MASK_DUMP not set")
    target = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
    subprocess.run(
        [cargo, "build", "--locked", "--release", "-p", "stencil-python", "--example", "mask_dump"],
        cwd=REPO,
        check=True,
    )
    return target / "release" / "examples" / "mask_dump"
