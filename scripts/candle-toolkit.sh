#!/usr/bin/env bash
# A CUDA 13.0 toolkit without a root install, from NVIDIA's Python wheels, enough to build
# candle-core's `cuda` feature (nvcc for its kernels, cuBLAS and cuRAND to link) on a
# machine with no GPU and no CUDA:
#
#   bash scripts/candle-toolkit.sh                      install (once), then print the exports
#   bash scripts/candle-toolkit.sh cargo build -p cufold-candle --features cuda --release
#                                                       run a command inside it
#
# It installs into $CUFOLD_CUDA_DIR (default: target/cuda-13.0 of this repository) and keeps
# it there. The versions are pinned to CUDA 13.0, the one a 580 driver runs: PyPI's newest
# nvcc emits PTX that an older driver refuses. What the wheels lack is made here: a folder
# laid out as CUDA_HOME (bin, include, lib64, nvvm), unversioned library names, and a
# `libcuda.so` stub for the link (soname libcuda.so.1, so the program loads the real driver
# at run time). Set CUDA_COMPUTE_CAP for another GPU than an H100/H200 (default 90).
#
# At run time the program needs libcublas.so.13 and libcurand.so.10 on the library path: on a
# machine with PyTorch for CUDA 13 they are in site-packages/nvidia/cu13/lib (or
# nvidia/*/lib); elsewhere, the lib64 folder made here.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${CUFOLD_CUDA_DIR:-$root/target/cuda-13.0}
wheels=(
  nvidia-cuda-nvcc==13.0.88 nvidia-cuda-crt==13.0.88 nvidia-nvvm==13.0.88
  nvidia-cuda-runtime==13.0.96 nvidia-cuda-cccl==13.0.85 nvidia-cuda-nvrtc==13.0.88
  nvidia-cublas==13.0.2.14 nvidia-curand==10.4.0.35
)
if [[ ! -e $dir/.done ]]; then
  mkdir -p "$dir"
  python3 -m pip install --quiet --no-deps --target "$dir/site" "${wheels[@]}" >&2
  cu=$dir/site/nvidia/cu13
  [[ -x $cu/bin/nvcc ]] || { echo "candle-toolkit: no nvcc in $cu/bin" >&2; exit 1; }
  home=$dir/home
  rm -rf "$home" && mkdir -p "$home/lib64"
  ln -s "$cu/bin" "$home/bin"
  ln -s "$cu/include" "$home/include"
  [[ -d $cu/nvvm ]] && ln -s "$cu/nvvm" "$home/nvvm"
  # Unversioned names for the linker (libcublas.so -> libcublas.so.13, ...).
  for lib in "$cu"/lib/lib*.so.*; do
    base=$(basename "$lib")
    ln -sf "$lib" "$home/lib64/$base"
    ln -sf "$lib" "$home/lib64/${base%%.so.*}.so"
  done
  # The driver stub: every cu* function cudarc's bindings declare, as an empty symbol.
  stub=$dir/stub
  mkdir -p "$stub"
  grep -rhoE '\bcu[A-Z][A-Za-z0-9_]*\b' "$cu/include/cuda.h" | sort -u \
    | awk '{ printf "void %s(void) {}\n", $1 }' > "$stub/cuda_stub.c"
  gcc -shared -fPIC -Wl,-soname,libcuda.so.1 -o "$home/lib64/libcuda.so" "$stub/cuda_stub.c"
  touch "$dir/.done"
fi
home=$dir/home
export CUDA_HOME=$home CUDA_PATH=$home CUDA_ROOT=$home
export PATH=$home/bin:$PATH
export LIBRARY_PATH=$home/lib64${LIBRARY_PATH:+:$LIBRARY_PATH}
export LD_LIBRARY_PATH=$home/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export CUDA_COMPUTE_CAP=${CUDA_COMPUTE_CAP:-90}
if (( $# )); then
  exec "$@"
fi
cat <<EOF
export CUDA_HOME=$home CUDA_PATH=$home CUDA_ROOT=$home
export PATH=$home/bin:\$PATH
export LIBRARY_PATH=$home/lib64\${LIBRARY_PATH:+:\$LIBRARY_PATH}
export CUDA_COMPUTE_CAP=$CUDA_COMPUTE_CAP
EOF
