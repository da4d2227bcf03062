#!/usr/bin/env bash
# The `cuda` feature's checks on a machine with an NVIDIA GPU and no network, as one
# script: BIN (default .dev) holds `stencil` and the `decode_cuda` test binary, both
# built with `--features cuda` (README: "CUDA"), plain or xz-compressed (`NAME.xz`,
# to travel light); results go to $OUT (default /tmp/out). Run from the repository root.
set -u
BIN=${1:-.dev}
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
for packed in "$BIN"/*.xz; do
  [ -e "$packed" ] || continue
  python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' \
    "$packed" "${packed%.xz}" && chmod +x "${packed%.xz}"
done
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
nproc

# candle links cuBLAS, cuRAND, NVRTC and the CUDA runtime dynamically: use the
# machine's own copies (a CUDA toolkit, or the nvidia-* Python wheels).
dirs=$(python3 -c 'import nvidia; print(" ".join(nvidia.__path__))' 2>/dev/null)
libs=$(find $dirs /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
  \( -name 'libcublas*.so.*' -o -name 'libcurand.so.*' -o -name 'libnvrtc*.so.*' \
  -o -name 'libcudart.so.*' \) 2>/dev/null | xargs -r -n1 dirname | sort -u | tr '\n' ':')
export LD_LIBRARY_PATH="${libs}${LD_LIBRARY_PATH:-}"
if ldd "$BIN/stencil" | grep 'not found'; then echo "missing libraries"; exit 1; fi

# The test binary finds its fixtures under the folder it was built in (MANIFEST).
MANIFEST=${MANIFEST:-/work/main}
if [ ! -e "$MANIFEST" ]; then mkdir -p "$(dirname "$MANIFEST")" && ln -s "$PWD" "$MANIFEST"; fi
"$BIN/decode_cuda" --test-threads=1 --nocapture 2>&1 | tee "$OUT/decode_cuda.log"

python3 scripts/random_llama.py /tmp/smol tests/fixtures/tokenizers/gpt2/tokenizer.json.gz
for device in cuda cpu; do
  "$BIN/stencil" generate --device $device --model /tmp/smol --schema grammars/city.schema.json \
    --raw --prompt "Describe Paris." --max-tokens 64 --output-json | tee "$OUT/generate_$device.json"
  echo
done
"$BIN/stencil" bench-decode --device cuda --model /tmp/smol --prompts 4 --rounds 3 \
  --max-tokens 96 2>&1 | tee "$OUT/bench_cuda.txt"
"$BIN/stencil" bench-decode --device cpu --model /tmp/smol --prompts 2 --rounds 1 \
  --max-tokens 48 2>&1 | tee "$OUT/bench_cpu.txt"
