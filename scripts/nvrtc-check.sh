#!/usr/bin/env bash
# Compiles the generated kernels with NVRTC on a machine with no GPU and no CUDA install: the
# compile-only tests (the ones ignored as "needs NVRTC"), run against CUDA 13.0's NVRTC from
# NVIDIA's Python wheels, which scripts/candle-toolkit.sh installs into target/cuda-13.0 once.
# NVRTC refuses some C++ that nvcc takes (a generic lambda in device code, for one), so this
# catches what a local nvcc build of a kernel would not, before any time on a GPU:
#
#   bash scripts/nvrtc-check.sh                  every compile-only test
#   bash scripts/nvrtc-check.sh exact_gpu gpu    those of the test files named
#
# Prints a line a test and exits non-zero when one fails (its output is then shown).
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
bash scripts/candle-toolkit.sh > /dev/null
lib=$PWD/target/cuda-13.0/home/lib64
[[ -e $lib/libnvrtc.so.13 ]] || { echo "nvrtc-check: no libnvrtc.so.13 in $lib" >&2; exit 1; }
export LD_LIBRARY_PATH=$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
if [[ $# -gt 0 ]]; then
  files=("$@")
else
  mapfile -t files < <(grep -l 'ignore = "needs NVRTC' tests/*.rs | xargs -n1 basename | sed 's/\.rs$//')
fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
bad=0
for f in "${files[@]}"; do
  for t in $(grep -A1 'ignore = "needs NVRTC' "tests/$f.rs" | sed -n 's/^fn \([a-z0-9_]*\).*/\1/p'); do
    # A filter that matched no test would pass too: require the one test to have passed.
    if cargo test -q -p cufold --profile gpu-test --test "$f" "$t" -- --ignored --exact > "$log" 2>&1 &&
      grep -q '^test result: ok\. 1 passed' "$log"; then
      echo "ok      $f::$t"
    else
      echo "FAILED  $f::$t"
      tail -40 "$log"
      bad=1
    fi
  done
done
exit $bad
