#!/usr/bin/env bash
# Builds llama.cpp's `llama-server` (the peer of benches/serve.py) from the
# llama.cpp source vendored in the llama-cpp-python 0.3.36 sdist (the release
# whose chat templates and tool-call vectors are in ../shared/data), CPU only.
#   benches/build_llama_server.sh [DIR]   -> DIR/build/bin/llama-server
set -euo pipefail
DIR="${1:-${TMPDIR:-/tmp}/stencil-llama-server}"
mkdir -p "$DIR"
cd "$DIR"
if [ ! -d llama_cpp_python-0.3.36 ]; then
  python3 -m pip download --no-deps --no-binary llama-cpp-python llama-cpp-python==0.3.36 -d .
  tar xzf llama_cpp_python-0.3.36.tar.gz
fi
command -v cmake >/dev/null || { python3 -m pip install --quiet cmake; }
cmake -S llama_cpp_python-0.3.36/vendor/llama.cpp -B build -DCMAKE_BUILD_TYPE=Release \
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON \
  -DLLAMA_BUILD_TOOLS=ON -DLLAMA_OPENSSL=OFF -DGGML_NATIVE=ON
cmake --build build --target llama-server -j "$(nproc)"
echo "$DIR/build/bin/llama-server"
