#!/usr/bin/env bash
# Device calls on the CUDA machine, after ../shared/gpu/stage on the build machine. Results
# go to $OUT (or /tmp/cufold-out).
#   bash scripts/gpu-session.sh tests    every test binary, GPU ones included (run-tests.sh)
#   bash scripts/gpu-session.sh bench    scan benchmark beside torch/CuPy cumsum from the same
#                                        call, the algorithm comparison, then the examples
#   bash scripts/gpu-session.sh mc       fused Monte Carlo samples/s beside PyTorch's
#                                        (scripts/mc_peers.py), same call
set -uo pipefail
out=${OUT:-/tmp/cufold-out}
mkdir -p "$out"
export CUFOLD_CACHE_DIR=/tmp/cufold-cache
# Benches are staged as test-* binaries (cargo builds them in the test profile); they are not
# tests, so take them out of the test run.
for b in reduce gpu_reduce gpu_scan gpu_monte_carlo; do
  [[ -e .gpu/bin/test-$b ]] && mv ".gpu/bin/test-$b" ".gpu/bin/bench-$b"
done
# The proc-macro crate's own unit tests link the Rust toolchain's libstd dynamically, which
# the CUDA machine does not have; they are CPU tests, run by `cargo test --workspace`.
rm -f .gpu/bin/test-cufold_macros
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/gpu.txt"
case "${1:-tests}" in
tests)
  bash .gpu/run-tests.sh > "$out/tests.txt" 2>&1
  grep -E '^(test-|binaries|[0-9]+ passed)|FAILED|panicked' "$out/tests.txt" | head -60
  ;;
bench)
  .gpu/bin/test-gpu_macros --include-ignored 2>&1 | grep -E '^test result|FAILED|panicked' -A2
  python3 .gpu/peers.py --ops cumsum --dtypes float32,float64,int32 --json "$out/peers.json" > "$out/peers.txt" 2>&1
  .gpu/bin/bench-gpu_scan --json "$out/scan.json" > "$out/scan.txt" 2>&1
  .gpu/bin/bench-gpu_scan --ops cumsum --dtypes f32 --log2 28 --algos warp,blelloch,hillis --staging 1,0 \
    --json "$out/algos.json" > "$out/algos.txt" 2>&1
  grep -E '^(cufold|torch|cupy|copy)|MISMATCH|rror' "$out/peers.txt" "$out/scan.txt" "$out/algos.txt"
  for e in normal_cdf linear_recurrence custom_op; do
    timeout 120 bash .gpu/run.sh "$e" > "$out/$e.txt" 2>&1; echo "$e exit $?"; cat "$out/$e.txt"
  done
  ;;
mc)
  .gpu/bin/bench-gpu_monte_carlo --json "$out/mc.json" 2>&1 | tee "$out/mc.txt"
  python3 scripts/mc_peers.py --json "$out/mc_peers.json" 2>&1 | tee "$out/mc_peers.txt"
  ;;
esac
