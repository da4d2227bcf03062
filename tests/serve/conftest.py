"""Starts `stencil serve` (the binary in $STENCIL_BIN) on the default model for
the tests, on free loopback ports, and stops it after them."""

import os
import socket
import subprocess
import time
import urllib.request

import pytest


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, *flags):
        binary = os.environ.get("STENCIL_BIN", "target/release/stencil")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = open(f"/tmp/stencil-serve-{self.port}.log", "w")
        self.process = subprocess.Popen(
            [binary, "serve", "--port", str(self.port), *flags],
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.time() + 600  # the first start may fetch the model
        while time.time() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"stencil serve exited: {open(self.log.name).read()}")
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=1) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(0.2)
        raise RuntimeError("stencil serve did not come up")

    def metrics(self, headers=None):
        request = urllib.request.Request(self.url + "/metrics", headers=headers or {})
        with urllib.request.urlopen(request, timeout=10) as r:
            return r.read().decode()

    def stop(self):
        self.process.terminate()
        try:
            return self.process.wait(timeout=60)
        finally:
            self.log.close()


@pytest.fixture(scope="session")
def server():
    s = Server("--max-batch", "16")
    yield s
    assert s.stop() == 0, "stencil serve did not exit cleanly on SIGTERM"


@pytest.fixture(scope="session")
def guarded():
    """A second server: an API key, a batch of one and a queue of one."""
    s = Server("--api-key", "sekret", "--max-batch", "1", "--max-queue", "1")
    yield s
    s.stop()


@pytest.fixture
def client(server):
    from openai import OpenAI

    return OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0, timeout=600)
