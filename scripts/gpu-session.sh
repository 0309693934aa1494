#!/usr/bin/env bash
# One call on the CUDA machine, after ../shared/gpu/stage on the build machine:
#   every test (GPU ones included), then the reduction benchmark beside PyTorch/CuPy in the
#   same call, then the paper example. Results go to $OUT (or /tmp/cufold-out).
# Usage, from the project root on the CUDA machine: bash scripts/gpu-session.sh
set -uo pipefail
out=${OUT:-/tmp/cufold-out}
mkdir -p "$out"
export CUFOLD_CACHE_DIR=/tmp/cufold-cache
# Benches are staged as test-* binaries (cargo builds them in the test profile); they are not
# tests, so take them out of the test run.
for b in reduce gpu_reduce; do
  [[ -e .gpu/bin/test-$b ]] && mv ".gpu/bin/test-$b" ".gpu/bin/bench-$b"
done
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$out/gpu.txt"
bash .gpu/run-tests.sh > "$out/tests.txt" 2>&1
python3 .gpu/peers.py --ops sum,max,argmax,mean --json "$out/peers.json" > "$out/peers.txt" 2>&1
bash .gpu/run.sh gpu_reduce --json "$out/cufold.json" > "$out/cufold.txt" 2>&1
bash .gpu/run.sh paper > "$out/paper.txt" 2>&1
cat "$out/gpu.txt"
grep -E '^(test-|binaries|[0-9]+ passed)' "$out/tests.txt"
grep -E 'MISMATCH|Error' "$out/cufold.txt"
tail -40 "$out/paper.txt"
