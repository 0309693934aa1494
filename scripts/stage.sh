#!/usr/bin/env bash
# Builds the tests (in the light gpu-test profile), the examples and the benches (in release),
# with the nccl feature, on a
# machine without a GPU and gathers the binaries, stripped, in .gpu/bin of the repository,
# with two runners, so that a CUDA machine with no Rust toolchain can run them:
#
#   bash scripts/stage.sh            tests, benches and examples
#   bash scripts/stage.sh --tests    tests and examples only (faster)
#   bash scripts/stage.sh --tests NAME,NAME   the test files named only (no examples)
#   bash scripts/stage.sh --benches [NAME,NAME]   benches only (all, or the ones named)
#   bash scripts/stage.sh --candle   the candle adapter's tests, example and bench, with CUDA
#                                    (built inside scripts/candle-toolkit.sh, in target/cuda;
#                                    each binary carries candle's kernels: stage them apart)
#
# Then, on the CUDA machine, from the repository root:
#   bash scripts/gpu-session.sh tests     every test binary with --include-ignored, then
#                                         every example (see that script for other modes)
#   bash .gpu/run.sh NAME [ARGS...]       one staged binary by name
#
# Names: .gpu/bin/test-NAME, bench-NAME, example-NAME. Binaries past 60 MiB in all are
# gzipped, largest first (gpu-session.sh and run.sh unpack them).
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
what=${1:-all}
grep -qxF '/.gpu/' .gitignore || { echo "stage: .gitignore must list /.gpu/" >&2; exit 2; }
rm -rf .gpu && mkdir -p .gpu/bin
list=$(mktemp)
trap 'rm -f "$list"' EXIT
collect() { python3 -c '
import json, sys
for line in sys.stdin:
    try: m = json.loads(line)
    except ValueError: continue
    if m.get("reason") == "compiler-artifact" and m.get("executable"):
        kinds = m["target"]["kind"]
        # a bench built by `cargo test --no-run` has the test profile: it stays a bench
        kind = "bench" if "bench" in kinds else ("test" if m["profile"]["test"] else kinds[0])
        # Benches come from their own release build (collect bench) only.
        if (sys.argv[1] == "bench") != (kind == "bench"): continue
        print(kind, m["target"]["name"], m["executable"])
' "${1:-$what}" >>"$list"; }
if [[ $what == --candle ]]; then
  export CARGO_TARGET_DIR=target/cuda
  tk=scripts/candle-toolkit.sh
  bash $tk cargo test -p cufold-candle --features cuda --release --no-run --message-format=json | collect
  bash $tk cargo build -p cufold-candle --features cuda --release --examples \
    --message-format=json | collect
  bash $tk cargo build -p cufold-candle --features cuda --release --benches \
    --message-format=json | collect bench
else
  # The candle adapter is staged apart (--candle): its binaries carry candle's kernels.
  # Tests in the light gpu-test profile (Cargo.toml), examples and benches in release.
  if [[ $what == --tests && -n ${2:-} ]]; then
    cargo test -p cufold --features nccl --profile gpu-test --no-run \
      $(printf -- '--test %s ' ${2//,/ }) --message-format=json | collect
  elif [[ $what != --benches ]]; then
    cargo test --workspace --exclude cufold-candle --features nccl --profile gpu-test --no-run \
      --message-format=json | collect
    # Examples in release: some time long sequential loops (pi's up to 10^9 intervals).
    cargo build --workspace --exclude cufold-candle --features nccl --release --examples \
      --message-format=json | collect
  fi
  if [[ $what != --tests ]]; then
    benches=(--benches)
    [[ -n ${2:-} ]] && benches=($(printf -- '--bench %s ' ${2//,/ }))
    cargo build -p cufold --features nccl --release "${benches[@]}" --message-format=json | collect bench
  fi
fi
sort -u "$list" | while read -r kind name exe; do
  # Not for the CUDA machine: the proc-macro crate's tests (they link the toolchain's
  # libstd), the report generator's, and the debug builds' law check (off in release).
  case $name in cufold_macros | cufold-report | law_debug_check) continue ;; esac
  # Tests with nothing for a GPU (no test ignored as needing one) run in CI, not there: the
  # libraries' unit tests and the CPU-only test files.
  if [[ $kind == test ]]; then
    case $name in cufold | cufold_candle) continue ;; esac
    src=tests/$name.rs
    [[ $what == --candle ]] && src=candle/tests/$name.rs
    [[ -e $src ]] && ! grep -q 'ignore = "needs' "$src" && continue
  fi
  dest=.gpu/bin/$kind-$name
  [[ -e $dest ]] && continue
  cp "$exe" "$dest" && strip "$dest" 2>/dev/null || true
done
cat > .gpu/run.sh <<'RUN'
#!/usr/bin/env bash
# Runs one staged binary by name: bash .gpu/run.sh NAME [ARGS...]
cd "$(dirname "$0")/.." || exit 2
for z in .gpu/bin/*.gz; do [[ -e $z ]] && gunzip -f "$z" && chmod +x "${z%.gz}"; done
name=$1; shift
for p in ".gpu/bin/$name" .gpu/bin/*-"$name"; do [[ -x $p ]] && exec "$p" "$@"; done
echo "run.sh: no staged binary named $name; staged: $(ls .gpu/bin | tr '\n' ' ')" >&2; exit 2
RUN
chmod +x .gpu/run.sh
# candle's binaries are large and their PTX compresses well: the best compression makes
# three of them fit.
level=-1
[[ $what == --candle ]] && level=-9
while (( $(du -sm .gpu | cut -f1) >= 60 )); do
  big=$(find .gpu/bin -type f ! -name '*.gz' -printf '%s %p\n' | sort -rn | head -1 | cut -d' ' -f2-)
  [[ -n $big ]] || { echo "stage: over 60 MiB with everything gzipped: stage --tests" >&2; exit 1; }
  gzip "$level" "$big"
done
echo "stage: $(ls .gpu/bin | wc -l) binaries, $(du -sm .gpu | cut -f1) MiB in .gpu/"
