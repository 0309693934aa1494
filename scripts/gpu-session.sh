#!/usr/bin/env bash
# Runs on the CUDA machine, after scripts/stage.sh on the build machine. Results go to
# /tmp/cufold-out, packed at the end into $OUT/cufold-out.tgz when $OUT names a folder.
#   bash scripts/gpu-session.sh tests    every test binary, GPU ones included (run-tests.sh), in
#                                        the default tier; each test's seconds in times.txt
#                                        (four binaries at a time; CUFOLD_JOBS=N: N)
#   bash scripts/gpu-session.sh full     the same in the full tier (CUFOLD_TEST_TIER=full)
#   bash scripts/gpu-session.sh reduce   every reduction operator and type at 2^24 and 2^28
#                                        beside torch, CuPy (CUB) and a copy, same call
#   bash scripts/gpu-session.sh report   every measurement of BENCHMARKS.md's report (reductions,
#                                        N sweeps, small inputs, scans) beside torch, CuPy (CUB)
#                                        and a copy, same call
#   bash scripts/gpu-session.sh examples every staged example on the GPU (each checks its
#                                        results); fails when one fails. The tests and full
#                                        modes run them too, after the test binaries
#   bash scripts/gpu-session.sh segment  segmented reductions across shapes beside PyTorch and
#                                        CuPy (scripts/segment_peers.py), CUB's reduction by
#                                        key (scripts/cub_by_key.cu) and its segmented
#                                        reductions and scan by key (scripts/cub_segments.cu),
#                                        same call
#   bash scripts/gpu-session.sh mc       fused Monte Carlo samples/s beside PyTorch's
#                                        (scripts/mc_peers.py), same call
#   bash scripts/gpu-session.sh exact    exact and compensated sums beside the plain sum, torch,
#                                        CuPy and CUB (plain and deterministic), with errors
#   bash scripts/gpu-session.sh accuracy MeanVar's errors beside torch.var_mean's on the same data
#                                        (benches/gpu_meanvar_accuracy.rs,
#                                        scripts/meanvar_accuracy.py)
#   bash scripts/gpu-session.sh candle   the candle adapter (scripts/stage.sh --candle): its
#                                        tests, the top-p example, and its bench beside candle's
#                                        own ops on the same tensors
set -uo pipefail
out=/tmp/cufold-out
mkdir -p "$out"
pack() { [[ -n ${OUT:-} ]] && tar czf "$OUT/cufold-out.tgz" -C "$out" .; }
trap pack EXIT
# A run ended by a time limit still packs what it has.
trap 'exit 143' TERM INT
export CUFOLD_CACHE_DIR=/tmp/cufold-cache
# Binaries gzipped by scripts/stage.sh.
for z in .gpu/bin/*.gz; do [[ -e $z ]] && gunzip -f "$z" && chmod +x "${z%.gz}"; done
# Benches are staged as test-* binaries (cargo builds them in the test profile); they are not
# tests, so take them out of the test run.
for b in reduce gpu_reduce gpu_scan gpu_monte_carlo gpu_segment gpu_dist gpu_dist_processes gpu_exact gpu_meanvar_accuracy; do
  [[ -e .gpu/bin/test-$b ]] && mv ".gpu/bin/test-$b" ".gpu/bin/bench-$b"
done
# The proc-macro crate's own unit tests link the Rust toolchain's libstd dynamically, which
# the CUDA machine does not have; they are CPU tests, run by `cargo test --workspace`.
rm -f .gpu/bin/test-cufold_macros
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/gpu.txt"
# Every staged example, with its default arguments, on the GPU: each checks its own results
# (against the CPU backend or a reference) and exits non-zero when they are wrong, so an
# example that is wrong on the GPU fails here. Prints a line an example and a total.
run_examples() {
  local ok=0 bad=()
  for e in .gpu/bin/example-*; do
    [[ -x $e ]] || continue
    local name=${e##*/example-}
    timeout 300 "$e" > "$out/example-$name.txt" 2>&1
    local code=$?
    if [[ $code == 0 ]]; then ok=$((ok + 1)); else bad+=("$name"); tail -20 "$out/example-$name.txt"; fi
    echo "example $name: exit $code"
  done
  echo "examples that failed: ${bad[*]:-none}"
  echo "examples: $ok passed, ${#bad[@]} failed"
  [[ ${#bad[@]} == 0 ]]
}
case "${1:-tests}" in
tests | full)
  [[ $1 == full ]] && export CUFOLD_TEST_TIER=full
  start=$(date +%s)
  # run-tests.sh's loop and summary, with libtest's --report-time (accepted by stable
  # binaries under RUSTC_BOOTSTRAP) so that each test's seconds are kept.
  # CUFOLD_JOBS=N runs N binaries at a time (default 4; 1: one after another, as cargo
  # test does); their outputs are summed in the same order either way.
  njobs=${CUFOLD_JOBS:-4}
  run_one() {
    RUSTC_BOOTSTRAP=1 "$1" --include-ignored -Z unstable-options --report-time > "$out/${1##*/}.txt" 2>&1
    echo $? > "$out/${1##*/}.code"
  }
  for t in .gpu/bin/test-*; do
    while (( $(jobs -rp | wc -l) >= njobs )); do wait -n; done
    run_one "$t" &
  done
  wait
  {
  pass=0 fail=0 bad=()
  for t in .gpu/bin/test-*; do
    code=$(cat "$out/${t##*/}.code")
    read -r bp bf < <(sed -n 's/^test result: .* \([0-9]*\) passed; \([0-9]*\) failed.*/\1 \2/p' "$out/${t##*/}.txt" | awk '{p+=$1; f+=$2} END {print p+0, f+0}')
    pass=$((pass + bp)); fail=$((fail + bf))
    if [[ $code != 0 ]]; then bad+=("${t##*/}"); grep -E '^(---- |thread |  left|  right|failures:|test .* FAILED|error)' "$out/${t##*/}.txt" | head -60; fi
    echo "${t##*/}: $bp passed, $bf failed (exit $code)"
  done
  echo "binaries that failed: ${bad[*]:-none}"
  echo "$pass passed, $fail failed"
  echo "tier ${CUFOLD_TEST_TIER:-default}: $(( $(date +%s) - start )) s"
  } | tee "$out/tests.txt"
  cat "$out"/test-*.txt | sed -n 's/^test \(.*\) \.\.\. ok <\([0-9.]*\)s>$/\2 \1/p' | sort -rn > "$out/times.txt"
  head -12 "$out/times.txt"
  # The examples are part of the test tiers: one that fails on the GPU fails the run
  # (CUFOLD_EXAMPLES=0 leaves them out, for repeated runs of the tests alone).
  examples_ok=0
  if [[ ${CUFOLD_EXAMPLES:-1} != 0 ]]; then
    run_examples | tee "$out/examples.txt"
    examples_ok=${PIPESTATUS[0]}
  fi
  grep -q '^0 passed, 0 failed$\|, [1-9][0-9]* failed$' "$out/tests.txt" && exit 1
  grep -q 'binaries that failed: none' "$out/tests.txt" || exit 1
  [[ $examples_ok == 0 ]] || exit 1
  ;;
segment)
  .gpu/bin/bench-gpu_segment --json "$out/segment.json" > "$out/segment.txt" 2>&1
  echo "cufold exit $?"; grep -E 'MISMATCH|rror|GB/s' "$out/segment.txt"
  python3 scripts/segment_peers.py --json "$out/peers_segment.json" > "$out/peers_segment.txt" 2>&1
  echo "peers exit $?"; cat "$out/peers_segment.txt"
  # CUB's reduction by key on the by-key shapes (C++: nvcc is on the CUDA machine).
  nvcc -O3 -std=c++17 -arch=sm_90 scripts/cub_by_key.cu -o /tmp/cub_by_key &&
    /tmp/cub_by_key short,powerlaw,narrow,mid,wide,square,long 20 | tee "$out/cub_by_key.txt"
  echo "cub exit $?"
  # CUB's segmented reductions by offsets and its scan by key, on the offsets shapes.
  nvcc -O3 -std=c++17 -arch=sm_90 scripts/cub_segments.cu -o /tmp/cub_segments &&
    /tmp/cub_segments short,powerlaw,long_offsets,few_offsets,offsets_4k 20 | tee "$out/cub_segments.txt"
  echo "cub segments exit $?"
  ;;
reduce)
  .gpu/bin/bench-gpu_reduce --log2 24,28 --json "$out/reduce.json" > "$out/reduce.txt" 2>&1
  echo "cufold exit $?"; grep -E 'MISMATCH|rror' "$out/reduce.txt"
  python3 scripts/peers.py --ops sum,prod,min,max,minmax,argmin,argmax,widesum,mean,meanvar \
    --log2 24,28 --json "$out/peers.json" > "$out/peers.txt" 2>&1
  echo "peers exit $?"
  ;;
report)
  # Everything BENCHMARKS.md's report shows, cufold and its peers in this one call; then, on
  # the build machine: cargo run -p cufold-report -- DIR --benchmarks BENCHMARKS.md
  R=.gpu/bin/bench-gpu_reduce S=.gpu/bin/bench-gpu_scan P=scripts/peers.py
  ops=sum,prod,min,max,minmax,argmin,argmax,widesum,mean,meanvar
  sweep=10,12,14,16,18,20,22,24,26,28,30
  run() { local name=$1; shift; "$@" > "$out/$name.txt" 2>&1; echo "$name exit $?"; }
  # The exact and compensated sums have their own section and call (exact, below).
  run reduce $R --ops $ops,div2mean --log2 24,28 --check-up-to 24 --json "$out/reduce.json"
  run peers python3 $P --ops $ops --log2 24,28 --json "$out/peers.json"
  run sweep $R --ops sum,max,minmax,argmax,mean,meanvar --dtypes f32 --log2 $sweep --check-up-to 26 \
    --json "$out/sweep.json"
  run peers_sweep python3 $P --ops sum,max,minmax,argmax,mean,meanvar --dtypes f32 --log2 $sweep \
    --json "$out/peers_sweep.json"
  run small $R --ops sum,max,argmax,mean --dtypes f32,f64 --log2 10,12,14,16,18 --reps 200 \
    --json "$out/small.json"
  run peers_small python3 $P --ops sum,max,argmax,mean --dtypes f32,f64 --log2 10,12,14,16,18 \
    --libs torch,cupy --reps 200 --json "$out/peers_small.json"
  run scan $S --ops cumsum,affine --dtypes f32,f64,i32 --log2 10,12,14,16,18,20,22,24,26,28 \
    --json "$out/scan.json"
  run peers_scan python3 $P --ops cumsum --dtypes f32,f64,i32 --log2 10,12,14,16,18,20,22,24,26,28 \
    --json "$out/peers_scan.json"
  grep -h 'MISMATCH' "$out"/*.txt || echo 'no MISMATCH'
  ;;
accuracy)
  # The data (up to 2^26 values of each kind) stays out of the packed results.
  .gpu/bin/bench-gpu_meanvar_accuracy --dir /tmp/cufold-meanvar | tee "$out/meanvar_accuracy.txt"
  python3 scripts/meanvar_accuracy.py /tmp/cufold-meanvar | tee "$out/meanvar_accuracy_torch.txt"
  rm -rf /tmp/cufold-meanvar
  ;;
examples)
  run_examples | tee "$out/examples.txt"
  [[ ${PIPESTATUS[0]} == 0 ]]
  ;;
candle)
  # cuBLAS, cuRAND and NVRTC 13 for candle's binaries: PyTorch's environment has them.
  for d in /opt/torch/.venv/lib/python3.12/site-packages/nvidia/*/lib; do
    LD_LIBRARY_PATH=$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  done
  export LD_LIBRARY_PATH
  [[ -e .gpu/bin/test-candle_ops ]] && mv .gpu/bin/test-candle_ops .gpu/bin/bench-candle_ops
  status=0
  for t in .gpu/bin/test-*; do
    # Each test's line as it ends, so that a run cut short still shows how far it got.
    "$t" --include-ignored 2>&1 | tee "$out/${t##*/}.txt" | grep -E '^test |panicked|left|right'
    code=${PIPESTATUS[0]}
    [[ $code == 0 ]] || status=1
    echo "${t##*/}: exit $code"
  done
  run_examples | tee "$out/examples.txt" || status=1
  .gpu/bin/bench-candle_ops 2>&1 | tee "$out/candle_ops.txt"
  exit $status
  ;;
exact)
  # Exact and compensated sums beside the plain one (benches/gpu_exact.rs), then the peers on
  # the same distributions: torch and CuPy (scripts/exact_peers.py) and CUB's plain and
  # deterministic sums (scripts/cub_exact.cu), each with its error against the exact sum.
  # EXACT_LOG2 / EXACT_DATA / EXACT_DTYPES narrow the runs (the peers take f32 and f64).
  lg=${EXACT_LOG2:-20,24,28} data=${EXACT_DATA:-uniform,normal,wide,illcond}
  .gpu/bin/bench-gpu_exact --dtypes "${EXACT_DTYPES:-f32,f64,f16,bf16}" --log2 "$lg" --data "$data" \
    --json "$out/exact.json" 2>&1 | tee "$out/exact.txt"
  echo "cufold exit ${PIPESTATUS[0]}"
  python3 scripts/exact_peers.py --log2 "$lg" --data "$data" --json "$out/exact_peers.json" 2>&1 |
    tee "$out/exact_peers.txt"
  echo "peers exit ${PIPESTATUS[0]}"
  # A newer CCCL than the toolkit's (for the deterministic sum, CCCL 3.1 on), when staged as
  # .gpu/cccl.tgz: a folder `cccl` holding CCCL's include folders cub, thrust, cuda and nv.
  inc=()
  if [[ -e .gpu/cccl.tgz ]]; then mkdir -p /tmp/cccl && tar xzf .gpu/cccl.tgz -C /tmp/cccl && inc=(-I/tmp/cccl/cccl); fi
  if nvcc -O3 -std=c++17 -arch=sm_90 "${inc[@]}" scripts/cub_exact.cu -o /tmp/cub_exact 2> "$out/cub_exact_build.txt"; then
    for t in f32 f64; do
      for l in ${lg//,/ }; do
        for d in ${data//,/ }; do /tmp/cub_exact $t "$l" "$d" 50; done
      done
    done 2>&1 | tee "$out/cub_exact.txt"
  else
    echo "cub_exact did not build:"; tail -20 "$out/cub_exact_build.txt"
  fi
  ;;
mc)
  .gpu/bin/bench-gpu_monte_carlo --json "$out/mc.json" 2>&1 | tee "$out/mc.txt"
  python3 scripts/mc_peers.py --json "$out/mc_peers.json" 2>&1 | tee "$out/mc_peers.txt"
  ;;
esac
