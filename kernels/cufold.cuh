// cufold: the building blocks for kernels of your own, in one header (what
// `cufold::cuda_header()` returns, flattened): element types (types.cuh), thread-level trees
// and scans (thread.cuh), warp shuffles, reductions and scans (warp.cuh), block reductions
// and scans (block.cuh), the built-in operators (ops.cuh) and Philox random numbers
// (random.cuh). Everything is in namespace cf.
#pragma once

#include "cufold/types.cuh"
#include "cufold/thread.cuh"
#include "cufold/warp.cuh"
#include "cufold/block.cuh"
#include "cufold/ops.cuh"
#include "cufold/random.cuh"
