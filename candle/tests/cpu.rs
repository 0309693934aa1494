//! The adapter on CPU tensors: against candle's own ops, against cufold's CPU bits, along
//! every dim and through strided layouts, gradients, errors.

use candle_core::{DType, Device, IndexOp, Tensor, Var, D};
use cufold::ops::{Max, Operator, Sum};
use cufold::Cpu;
use cufold_candle::ops::{exp32, exp64, ln64, ArgIndex, LogSumExp, MeanOf, VarOf};
use cufold_candle::TensorExt;
use half::{bf16, f16};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

type R = candle_core::Result<()>;

fn data(n: usize, seed: u64) -> Vec<f32> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..n).map(|_| rng.random_range(-4.0f32..4.0)).collect()
}

fn close(a: &[f32], b: &[f32], tol: f32) {
    assert_eq!(a.len(), b.len());
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        let scale = 1f32.max(x.abs()).max(y.abs());
        assert!((x - y).abs() <= tol * scale, "at {i}: {x} vs {y}");
    }
}

fn flat(t: &Tensor) -> Vec<f32> {
    t.to_dtype(DType::F32)
        .unwrap()
        .flatten_all()
        .unwrap()
        .to_vec1()
        .unwrap()
}

/// Rows of the last dim of a contiguous tensor, each reduced by cufold's CPU backend.
fn per_row<O: Operator<f32>>(t: &Tensor, op: O) -> Vec<O::Out> {
    let n = t.dim(D::Minus1).unwrap();
    let v = flat(t);
    v.chunks(n)
        .map(|r| Cpu::new().reduce(r, op).unwrap())
        .collect()
}

#[test]
fn reductions_match_candle_along_every_dim() -> R {
    let x = Tensor::from_vec(data(4 * 5 * 6, 1), (4, 5, 6), &Device::Cpu)?;
    for d in 0..3 {
        let f = x.cufold();
        close(&flat(&f.sum_keepdim(d)?), &flat(&x.sum_keepdim(d)?), 1e-5);
        close(&flat(&f.sum(d)?), &flat(&x.sum(d)?), 1e-5);
        assert_eq!(flat(&f.max_keepdim(d)?), flat(&x.max_keepdim(d)?));
        assert_eq!(flat(&f.min(d)?), flat(&x.min(d)?));
        assert_eq!(
            f.argmax_keepdim(d)?.flatten_all()?.to_vec1::<u32>()?,
            x.argmax_keepdim(d)?.flatten_all()?.to_vec1::<u32>()?
        );
        assert_eq!(
            f.argmin(d)?.flatten_all()?.to_vec1::<u32>()?,
            x.argmin(d)?.flatten_all()?.to_vec1::<u32>()?
        );
        close(&flat(&f.mean_keepdim(d)?), &flat(&x.mean_keepdim(d)?), 1e-5);
        close(&flat(&f.var_keepdim(d)?), &flat(&x.var_keepdim(d)?), 1e-5);
        close(&flat(&f.log_sum_exp(d)?), &flat(&x.log_sum_exp(d)?), 1e-6);
        assert_eq!(f.sum_keepdim(d)?.dims(), x.sum_keepdim(d)?.dims());
        assert_eq!(f.log_sum_exp(d)?.dims(), x.log_sum_exp(d)?.dims());
    }
    Ok(())
}

#[test]
fn scans_match_candle_along_every_dim() -> R {
    let x = Tensor::from_vec(data(3 * 7 * 5, 2), (3, 7, 5), &Device::Cpu)?;
    for d in 0..3 {
        let f = x.cufold();
        let want = x.cumsum(d)?;
        close(&flat(&f.cumsum(d)?), &flat(&want), 1e-5);
        let excl = (&want - &x)?;
        close(&flat(&f.cumsum_exclusive(d)?), &flat(&excl), 1e-5);
        let total = x.sum_keepdim(d)?;
        let rev = (total.broadcast_sub(&want)? + &x)?;
        close(&flat(&f.cumsum_reverse(d)?), &flat(&rev), 1e-5);
        assert_eq!(f.cumsum(d)?.dims(), x.dims());
    }
    let c = Tensor::new(&[3f32, 1., 4., 1., 5., 9., 2.], &Device::Cpu)?;
    assert_eq!(
        c.cufold().cummax(0)?.to_vec1::<f32>()?,
        [3., 3., 4., 4., 5., 9., 9.]
    );
    assert_eq!(
        c.cufold().cummin(D::Minus1)?.to_vec1::<f32>()?,
        [3., 1., 1., 1., 1., 1., 1.]
    );
    Ok(())
}

#[test]
fn results_are_cufolds_cpu_bits() -> R {
    let x = Tensor::from_vec(data(9 * 1000, 3), (9, 1000), &Device::Cpu)?;
    let f = x.cufold();
    let bits = |v: Vec<f32>| v.into_iter().map(f32::to_bits).collect::<Vec<_>>();
    assert_eq!(bits(f.sum(1)?.to_vec1()?), bits(per_row(&x, Sum)));
    assert_eq!(bits(f.max(1)?.to_vec1()?), bits(per_row(&x, Max)));
    assert_eq!(bits(f.mean(1)?.to_vec1()?), bits(per_row(&x, MeanOf)));
    assert_eq!(bits(f.var(1)?.to_vec1()?), bits(per_row(&x, VarOf)));
    assert_eq!(
        bits(f.log_sum_exp(1)?.to_vec1()?),
        bits(per_row(&x, LogSumExp))
    );
    assert_eq!(
        f.argmax(1)?.to_vec1::<u32>()?,
        per_row(&x, ArgIndex::<true>)
    );
    // A scan's rows are whole-array scans of each row.
    let row = flat(&x.i(4)?);
    let want = Cpu::new()
        .scan(&row, Sum, cufold::ScanKind::Inclusive)
        .unwrap();
    assert_eq!(bits(f.cumsum(1)?.i(4)?.to_vec1()?), bits(want));
    Ok(())
}

#[test]
fn strided_inputs_give_the_bits_of_their_contiguous_copies() -> R {
    let x = Tensor::from_vec(data(6 * 40, 4), (6, 40), &Device::Cpu)?;
    let views = [
        x.narrow(1, 3, 30)?,                      // rows at a stride, read in place
        x.t()?,                                   // transposed: copied
        x.narrow(0, 1, 4)?.t()?,                  // both
        x.i((.., 5))?.unsqueeze(1)?,              // a column
        x.narrow(1, 0, 1)?.broadcast_as((6, 9))?, // broadcast: stride 0
    ];
    for v in &views {
        let c = v.contiguous()?;
        for d in 0..2 {
            assert_eq!(
                flat(&v.cufold().sum_keepdim(d)?),
                flat(&c.cufold().sum_keepdim(d)?)
            );
            assert_eq!(flat(&v.cufold().cumsum(d)?), flat(&c.cufold().cumsum(d)?));
            assert_eq!(
                v.cufold().argmax(d)?.to_vec1::<u32>()?,
                c.cufold().argmax(d)?.to_vec1::<u32>()?
            );
        }
    }
    Ok(())
}

#[test]
fn half_sums_accumulate_in_f32() -> R {
    // 2048 + 1 + 1 + ...: an f16 sum rounding after each add stays at 2048.
    let mut v = vec![f16::from_f32(2048.0)];
    v.extend(std::iter::repeat_n(f16::ONE, 64));
    let x = Tensor::new(v.as_slice(), &Device::Cpu)?;
    assert_eq!(
        x.cufold().sum(0)?.to_scalar::<f16>()?,
        f16::from_f32(2112.0)
    );
    let c = x.cufold().cumsum(0)?.to_vec1::<f16>()?;
    assert_eq!(c[64], f16::from_f32(2112.0));
    let b: Vec<bf16> = v.iter().map(|h| bf16::from_f32(h.to_f32())).collect();
    let y = Tensor::new(b.as_slice(), &Device::Cpu)?;
    assert_eq!(
        y.cufold().sum(0)?.to_scalar::<bf16>()?,
        bf16::from_f32(2112.0)
    );
    assert_eq!(Cpu::new().reduce(&b, Sum).unwrap(), bf16::from_f32(2112.0));
    Ok(())
}

#[test]
fn arg_indices_lowest_on_ties_first_nan() -> R {
    let x = Tensor::new(
        &[
            [1f32, 5., 5., 0.],
            [2., f32::NAN, 9., f32::NAN],
            [-0., 0., -1., -1.],
        ],
        &Device::Cpu,
    )?;
    assert_eq!(x.cufold().argmax(1)?.to_vec1::<u32>()?, [1, 1, 0]);
    assert_eq!(x.cufold().argmin(1)?.to_vec1::<u32>()?, [3, 1, 2]);
    assert_eq!(x.cufold().argmax_keepdim(1)?.dtype(), DType::U32);
    Ok(())
}

#[test]
fn portable_exp_and_ln_are_accurate() {
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    for _ in 0..100_000 {
        let x = rng.random_range(-103.0f32..88.7);
        let (a, b) = (exp32(x), (x as f64).exp() as f32);
        let ulps = (a.to_bits() as i64 - b.to_bits() as i64).abs();
        assert!(ulps <= 1, "exp32({x}) = {a}, libm {b}");
        let y = rng.random_range(-708.0f64..709.0);
        let (a, b) = (exp64(y), y.exp());
        assert!(
            ((a - b) / b).abs() < 8.0 * f64::EPSILON,
            "exp64({y}) = {a}, libm {b}"
        );
        let s = rng.random_range(0.5f64..1e9);
        let (a, b) = (ln64(s), s.ln());
        assert!(
            (a - b).abs() <= 4.0 * f64::EPSILON * b.abs().max(1.0),
            "ln64({s}) = {a}, libm {b}"
        );
    }
    assert_eq!(exp32(f32::NEG_INFINITY), 0.0);
    assert_eq!(exp32(f32::INFINITY), f32::INFINITY);
    assert!(exp32(f32::NAN).is_nan());
    assert!(exp32(-103.5) > 0.0); // subnormal results kept
                                  // Subnormal results: within an ulp of the subnormal grid.
    for y in [-710.0f64, -720.5, -740.0, -744.4] {
        let (a, b) = (exp64(y), y.exp());
        assert!(
            (a.to_bits() as i64 - b.to_bits() as i64).abs() <= 1,
            "exp64({y}) = {a:e}, libm {b:e}"
        );
    }
    assert_eq!(exp64(f64::NEG_INFINITY), 0.0);
    assert!(exp64(-745.0) > 0.0);
    assert_eq!(ln64(1.0), 0.0);
    assert_eq!(ln64(0.0), f64::NEG_INFINITY);
    assert!(ln64(-1.0).is_nan());
    assert!((ln64(5e-324) - (5e-324f64).ln()).abs() < 1e-12);
}

#[test]
fn exp_constants_have_their_bits() {
    // exp32's reduction x - k ln2 relies on ln 2's high part having trailing zeros.
    assert_eq!(
        cufold_candle::ops::ln2_parts(),
        (0x3fe62e42fee00000, 0x3dea39ef35793c76)
    );
}

#[test]
fn log_sum_exp_edge_values() -> R {
    let x = Tensor::new(
        &[
            [f32::NEG_INFINITY, f32::NEG_INFINITY],
            [f32::INFINITY, 1.],
            [f32::NAN, 1.],
            [88., 88.],
        ],
        &Device::Cpu,
    )?;
    let v = x.cufold().log_sum_exp(1)?.to_vec1::<f32>()?;
    assert_eq!(v[0], f32::NEG_INFINITY);
    assert_eq!(v[1], f32::INFINITY);
    assert!(v[2].is_nan());
    assert!((v[3] - (88. + 2f32.ln())).abs() < 1e-4); // no overflow past the max
    Ok(())
}

#[test]
fn gradients_match_candles_own() -> R {
    let w = Tensor::from_vec(data(4 * 6, 7), (4, 6), &Device::Cpu)?;
    let x = Var::from_tensor(&Tensor::from_vec(data(4 * 6, 6), (4, 6), &Device::Cpu)?)?;
    type F = fn(&Tensor) -> candle_core::Result<Tensor>;
    let cases: [(&str, F, F); 7] = [
        ("cumsum", |t| t.cufold().cumsum(1), |t| t.cumsum(1)),
        ("cumsum dim 0", |t| t.cufold().cumsum(0), |t| t.cumsum(0)),
        (
            "exclusive",
            |t| t.cufold().cumsum_exclusive(1),
            |t| t.cumsum(1)? - t,
        ),
        (
            "sum",
            |t| t.cufold().sum_keepdim(1)?.broadcast_as((4, 6)),
            |t| t.sum_keepdim(1)?.broadcast_as((4, 6)),
        ),
        (
            "mean",
            |t| t.cufold().mean_keepdim(0)?.broadcast_as((4, 6)),
            |t| t.mean_keepdim(0)?.broadcast_as((4, 6)),
        ),
        (
            "var",
            |t| t.cufold().var_keepdim(1)?.broadcast_as((4, 6)),
            |t| t.var_keepdim(1)?.broadcast_as((4, 6)),
        ),
        (
            "lse",
            |t| t.cufold().log_sum_exp_keepdim(1)?.broadcast_as((4, 6)),
            |t| t.log_sum_exp(1)?.unsqueeze(1)?.broadcast_as((4, 6)),
        ),
    ];
    for (name, ours, theirs) in cases {
        let g1 = (ours(x.as_tensor())? * &w)?.sum_all()?.backward()?;
        let g2 = (theirs(x.as_tensor())? * &w)?.sum_all()?.backward()?;
        let (a, b) = (g1.get(&x).unwrap(), g2.get(&x).unwrap());
        close(&flat(a), &flat(b), 1e-4);
        println!("{name}: ok");
    }
    // max: the gradient goes to the maximum.
    let g = x.cufold().max(1)?.sum_all()?.backward()?;
    let hits = g.get(&x).unwrap().sum_all()?.to_scalar::<f32>()?;
    assert_eq!(hits, 4.0);
    Ok(())
}

#[test]
fn any_operator_segments_and_keys() -> R {
    #[cufold::op(identity = 0.0, commutative)]
    fn add(a: f64, b: f64) -> f64 {
        a + b
    }
    let x = Tensor::new(&[[1f64, 2., 3.], [4., 5., 6.]], &Device::Cpu)?;
    assert_eq!(
        x.cufold()
            .reduce_keepdim::<f64, _>(1, add)?
            .to_vec2::<f64>()?,
        [[6.], [15.]]
    );
    let p = x
        .cufold()
        .scan::<f64, _>(0, cufold::ops::Prod, cufold::ScanKind::Exclusive)?;
    assert_eq!(p.to_vec2::<f64>()?, [[1., 1., 1.], [1., 2., 3.]]);

    let v = Tensor::new(&[3f32, 1., 4., 1., 5., 9.], &Device::Cpu)?;
    for offsets in [
        Tensor::new(&[0u32, 2, 2, 6], &Device::Cpu)?,
        Tensor::new(&[0i64, 2, 2, 6], &Device::Cpu)?,
    ] {
        let s = v.cufold().segment_reduce::<f32, _>(&offsets, Max)?;
        assert_eq!(s.to_vec1::<f32>()?, [3., 0., 9.]); // the empty segment: zero bits
    }
    let keys = Tensor::new(&[1i64, 1, 2, 1, 1, 1], &Device::Cpu)?;
    let (k, s, n) = v.cufold().reduce_by_key::<f32, _>(&keys, Sum)?;
    assert_eq!(k.to_vec1::<i64>()?, [1, 2, 1]);
    assert_eq!(s.to_vec1::<f32>()?, [4., 4., 15.]);
    assert_eq!(n.to_vec1::<i64>()?, [2, 1, 3]);
    Ok(())
}

#[test]
fn bad_input_is_an_error() -> R {
    let x = Tensor::new(&[[1u32, 2], [3, 4]], &Device::Cpu)?;
    let f = x.cufold();
    assert!(f.mean(1).is_err(), "no integer means: they would truncate");
    assert!(f.var(0).is_err());
    assert!(f.log_sum_exp(0).is_err());
    assert!(f.sum(2).is_err(), "a dim out of range");
    assert!(
        f.reduce_keepdim::<f32, _>(0, Sum).is_err(),
        "the wrong dtype"
    );
    let v = Tensor::new(&[1f32, 2.], &Device::Cpu)?;
    let bad = [
        Tensor::new(&[0f32, 2.], &Device::Cpu)?, // offsets of a float dtype
        Tensor::new(&[0i64, 3], &Device::Cpu)?,  // past the end
        Tensor::new(&[1i64, -1], &Device::Cpu)?, // negative
        Tensor::new(&[[0i64, 1]], &Device::Cpu)?, // not 1-D
        Tensor::zeros(0, DType::I64, &Device::Cpu)?, // no offsets
    ];
    for o in &bad {
        assert!(v.cufold().segment_reduce::<f32, _>(o, Sum).is_err(), "{o}");
    }
    let keys = Tensor::new(&[1u32, 2, 3], &Device::Cpu)?;
    assert!(
        v.cufold().reduce_by_key::<f32, _>(&keys, Sum).is_err(),
        "lengths differ"
    );
    let fkeys = Tensor::new(&[1f32, 2.], &Device::Cpu)?;
    assert!(
        v.cufold().reduce_by_key::<f32, _>(&fkeys, Sum).is_err(),
        "float keys"
    );
    let e = Tensor::zeros((3, 0), DType::F32, &Device::Cpu)?;
    assert!(e.cufold().max(1).is_err(), "the max of nothing");
    assert_eq!(e.cufold().sum(1)?.to_vec1::<f32>()?, [0., 0., 0.]);
    Ok(())
}
