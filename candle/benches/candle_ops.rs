//! cufold-candle against candle's own ops on the same CUDA tensors: cumsum along rows of
//! 2^10, 2^14 and 2^20 columns, and sum, max, argmax and log-sum-exp (keepdim, along the last
//! dim) over 2^14 x 2^14 and 2^24 x 32, in f32 and bf16. Prints a markdown table of the
//! median time of each and the input's GB/s.
//!
//! ```text
//! cargo bench -p cufold-candle --features cuda --bench candle_ops [-- --quick]
//! ```
//!
//! candle's cumsum multiplies by an n x n triangular matrix: at 2^20 columns that matrix does
//! not fit in memory and the cell says so.

#[cfg(not(feature = "cuda"))]
fn main() {
    eprintln!("candle_ops: build with --features cuda");
}

#[cfg(feature = "cuda")]
fn main() -> candle_core::Result<()> {
    use candle_core::{DType, Device, Tensor, D};
    use cufold_candle::TensorExt;
    use std::time::Instant;

    let quick = std::env::args().any(|a| a == "--quick");
    let dev = Device::new_cuda(0)?;
    let reps = if quick { 5 } else { 20 };

    // The median seconds of one call, after a warm-up call.
    let time = |f: &dyn Fn() -> candle_core::Result<Tensor>| -> candle_core::Result<f64> {
        f()?;
        dev.synchronize()?;
        let mut ts = Vec::with_capacity(reps);
        for _ in 0..reps {
            let t0 = Instant::now();
            let r = f()?;
            dev.synchronize()?;
            ts.push(t0.elapsed().as_secs_f64());
            drop(r);
        }
        ts.sort_by(|a, b| a.total_cmp(b));
        Ok(ts[reps / 2])
    };

    println!("| op | shape | dtype | candle ms | cufold ms | cufold GB/s | speed-up |");
    println!("|---|---|---|---|---|---|---|");
    type Op = fn(&Tensor) -> candle_core::Result<Tensor>;
    let cases: Vec<(&str, [usize; 2], Op, Op)> = vec![
        (
            "cumsum",
            [1 << 14, 1 << 10],
            |t| t.cumsum(D::Minus1),
            |t| t.cufold().cumsum(D::Minus1),
        ),
        (
            "cumsum",
            [1 << 10, 1 << 14],
            |t| t.cumsum(D::Minus1),
            |t| t.cufold().cumsum(D::Minus1),
        ),
        (
            "cumsum",
            [1 << 4, 1 << 20],
            |t| t.cumsum(D::Minus1),
            |t| t.cufold().cumsum(D::Minus1),
        ),
        (
            "sum_keepdim",
            [1 << 14, 1 << 14],
            |t| t.sum_keepdim(D::Minus1),
            |t| t.cufold().sum_keepdim(D::Minus1),
        ),
        (
            "sum_keepdim",
            [1 << 24, 32],
            |t| t.sum_keepdim(D::Minus1),
            |t| t.cufold().sum_keepdim(D::Minus1),
        ),
        (
            "max_keepdim",
            [1 << 14, 1 << 14],
            |t| t.max_keepdim(D::Minus1),
            |t| t.cufold().max_keepdim(D::Minus1),
        ),
        (
            "max_keepdim",
            [1 << 24, 32],
            |t| t.max_keepdim(D::Minus1),
            |t| t.cufold().max_keepdim(D::Minus1),
        ),
        (
            "argmax_keepdim",
            [1 << 14, 1 << 14],
            |t| t.argmax_keepdim(D::Minus1),
            |t| t.cufold().argmax_keepdim(D::Minus1),
        ),
        (
            "argmax_keepdim",
            [1 << 24, 32],
            |t| t.argmax_keepdim(D::Minus1),
            |t| t.cufold().argmax_keepdim(D::Minus1),
        ),
        (
            "log_sum_exp",
            [1 << 14, 1 << 14],
            |t| t.log_sum_exp(D::Minus1),
            |t| t.cufold().log_sum_exp(D::Minus1),
        ),
        (
            "log_sum_exp",
            [1 << 24, 32],
            |t| t.log_sum_exp(D::Minus1),
            |t| t.cufold().log_sum_exp(D::Minus1),
        ),
    ];
    for dtype in [DType::F32, DType::BF16] {
        for (name, shape, theirs, ours) in &cases {
            let x = Tensor::randn(0f32, 1f32, (shape[0], shape[1]), &dev)?.to_dtype(dtype)?;
            let bytes = (shape[0] * shape[1] * dtype.size_in_bytes()) as f64;
            let t_ours = time(&|| ours(&x))?;
            // candle's cumsum needs an n x n matrix: past 2^14 columns it cannot run.
            let t_theirs = if *name == "cumsum" && shape[1] > 1 << 14 {
                None
            } else {
                Some(time(&|| theirs(&x))?)
            };
            let (theirs_ms, speedup) = match t_theirs {
                Some(t) => (format!("{:.3}", t * 1e3), format!("{:.1}x", t / t_ours)),
                None => ("(n x n matrix: no)".to_string(), "-".to_string()),
            };
            println!(
                "| {name} | {} x {} | {dtype:?} | {theirs_ms} | {:.3} | {:.0} | {speedup} |",
                shape[0],
                shape[1],
                t_ours * 1e3,
                bytes / t_ours / 1e9
            );
        }
    }
    Ok(())
}
