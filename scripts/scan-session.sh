#!/usr/bin/env bash
# One call on the CUDA machine, after ../shared/gpu/stage: the scan benchmark sweep and the
# peers, then the scan tests. Results go to $OUT (or /tmp/cufold-out).
set -uo pipefail
out=${OUT:-/tmp/cufold-out}
mkdir -p "$out"
export CUFOLD_CACHE_DIR=/tmp/cufold-cache
for b in reduce gpu_reduce gpu_scan; do
  [[ -e .gpu/bin/test-$b ]] && mv ".gpu/bin/test-$b" ".gpu/bin/bench-$b"
done
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/gpu.txt"
timeout 200 .gpu/bin/bench-gpu_scan "$@" --json "$out/sweep.json" > "$out/sweep.txt" 2>&1; echo "sweep exit $?"
grep -E 'MISMATCH|rror' "$out/sweep.txt" | head
grep -E '^cufold' "$out/sweep.txt"
