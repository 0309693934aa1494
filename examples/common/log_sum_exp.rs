//! The log-sum-exp operator of `examples/row_logsumexp.rs` and `examples/custom_op.rs`, written
//! once with `#[cufold::op]`; `benches/gpu_segment.rs` times the same operator (its
//! `logsumexp`).

/// A side of a log-sum-exp: its largest value and the sum of `exp(x - max)` over it.
#[derive(Clone, Copy, cufold::DeviceType)]
#[repr(C)]
pub struct Lse {
    pub max: f32,
    pub sum: f32,
}

/// `ln(Σ exp(x_i))` without overflow: each side keeps its maximum and the sum of
/// `exp(x - max)`; combining rescales the side with the smaller maximum, one `exp` a combine.
#[derive(Clone, Copy, Debug, Default)]
pub struct LogSumExp;

#[cufold::op(commutative, empty = error)]
impl LogSumExp {
    fn identity() -> Lse {
        Lse {
            max: f32::NEG_INFINITY,
            sum: 0.0,
        }
    }
    fn lift(x: f32) -> Lse {
        Lse { max: x, sum: 1.0 }
    }
    fn combine(a: Lse, b: Lse) -> Lse {
        let m = a.max.max(b.max);
        if a.max == b.max {
            // Equal maxima need no rescaling (the factor would be exp(0) = 1: the same bits
            // as below on finite values), and two infinite maxima must not meet
            // exp(inf - inf), a NaN: [inf, inf] is inf, and two -inf sides (the identity
            // among them) add their sums, so the identity is exact on lift(-inf) too.
            Lse {
                max: m,
                sum: a.sum + b.sum,
            }
        } else {
            // Only the side with the smaller maximum is rescaled: the other's factor would
            // be exp(0) = 1, so one `exp` a combine gives the bits two would.
            let e = (-(a.max - b.max).abs()).exp();
            if a.max > b.max {
                Lse {
                    max: m,
                    sum: a.sum + b.sum * e,
                }
            } else {
                Lse {
                    max: m,
                    sum: a.sum * e + b.sum,
                }
            }
        }
    }
    fn finish(acc: Lse, _n: u64) -> f32 {
        acc.max + acc.sum.ln()
    }
}
