//! The adapter on CUDA tensors: every method's bits equal those of the same tensor on the
//! CPU (cufold's CPU backend), for every dtype it takes, along every dim, through strided
//! layouts; segments and keys; errors. Ignored without a device; they need the `cuda`
//! feature to find one (without it `Device::new_cuda` is an error).

use candle_core::{DType, Device, IndexOp, Tensor};
use cufold::ops::{Max, Sum};
use cufold_candle::TensorExt;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

type R = candle_core::Result<()>;

fn gpu() -> Device {
    Device::new_cuda(0).expect("a CUDA device")
}

/// Random values in [-8, 8) with many ties (steps of 1/4), cast to `dtype`.
fn data(shape: &[usize], dtype: DType, seed: u64) -> Tensor {
    let n: usize = shape.iter().product();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let v: Vec<f32> = (0..n)
        .map(|_| rng.random_range(-32i32..32) as f32 / 4.0)
        .collect();
    let t = Tensor::from_vec(v, shape, &Device::Cpu).unwrap();
    match dtype {
        DType::U8 | DType::U32 => (t + 8.0).unwrap().to_dtype(dtype).unwrap(),
        DType::I64 => (t * 4.0).unwrap().to_dtype(dtype).unwrap(),
        _ => t.to_dtype(dtype).unwrap(),
    }
}

/// The raw bits of a tensor's elements, any dtype, as u64s.
fn bits(t: &Tensor) -> Vec<u64> {
    let t = t.to_device(&Device::Cpu).unwrap().flatten_all().unwrap();
    match t.dtype() {
        DType::U8 => t
            .to_vec1::<u8>()
            .unwrap()
            .into_iter()
            .map(u64::from)
            .collect(),
        DType::U32 => t
            .to_vec1::<u32>()
            .unwrap()
            .into_iter()
            .map(u64::from)
            .collect(),
        DType::I64 => t
            .to_vec1::<i64>()
            .unwrap()
            .into_iter()
            .map(|v| v as u64)
            .collect(),
        DType::F16 => t
            .to_vec1::<half::f16>()
            .unwrap()
            .into_iter()
            .map(|v| v.to_bits() as u64)
            .collect(),
        DType::BF16 => t
            .to_vec1::<half::bf16>()
            .unwrap()
            .into_iter()
            .map(|v| v.to_bits() as u64)
            .collect(),
        DType::F32 => t
            .to_vec1::<f32>()
            .unwrap()
            .into_iter()
            .map(|v| v.to_bits() as u64)
            .collect(),
        DType::F64 => t
            .to_vec1::<f64>()
            .unwrap()
            .into_iter()
            .map(|v| v.to_bits())
            .collect(),
        d => panic!("{d:?}"),
    }
}

type Method = fn(&Tensor, usize) -> candle_core::Result<Tensor>;

const ALL: [(&str, Method, bool); 14] = [
    ("cumsum", |t, d| t.cufold().cumsum(d), false),
    (
        "cumsum_exclusive",
        |t, d| t.cufold().cumsum_exclusive(d),
        false,
    ),
    ("cumsum_reverse", |t, d| t.cufold().cumsum_reverse(d), false),
    ("cummax", |t, d| t.cufold().cummax(d), false),
    ("cummin", |t, d| t.cufold().cummin(d), false),
    ("sum_keepdim", |t, d| t.cufold().sum_keepdim(d), false),
    ("max_keepdim", |t, d| t.cufold().max_keepdim(d), false),
    ("min", |t, d| t.cufold().min(d), false),
    ("argmax_keepdim", |t, d| t.cufold().argmax_keepdim(d), false),
    ("argmin", |t, d| t.cufold().argmin(d), false),
    ("mean_keepdim", |t, d| t.cufold().mean_keepdim(d), true),
    ("var", |t, d| t.cufold().var(d), true),
    ("log_sum_exp", |t, d| t.cufold().log_sum_exp(d), true),
    (
        "log_sum_exp_keepdim",
        |t, d| t.cufold().log_sum_exp_keepdim(d),
        true,
    ),
];

fn check_same(x_cpu: &Tensor, x_gpu: &Tensor, what: &str) {
    for (name, f, float_only) in ALL {
        let float = matches!(
            x_cpu.dtype(),
            DType::F16 | DType::BF16 | DType::F32 | DType::F64
        );
        if float_only && !float {
            continue;
        }
        for d in 0..x_cpu.rank() {
            let a = f(x_cpu, d).unwrap_or_else(|e| panic!("{what} {name} dim {d} (CPU): {e}"));
            let b = f(x_gpu, d).unwrap_or_else(|e| panic!("{what} {name} dim {d} (GPU): {e}"));
            assert_eq!(a.dims(), b.dims(), "{what} {name} dim {d}");
            assert_eq!(a.dtype(), b.dtype(), "{what} {name} dim {d}");
            let (ab, bb) = (bits(&a), bits(&b));
            if ab != bb {
                let at = ab.iter().zip(&bb).position(|(p, q)| p != q).unwrap();
                panic!(
                    "{what} {name} dim {d} {:?}: CPU and GPU differ at {at}: {:#x} vs {:#x}",
                    x_cpu.dtype(),
                    ab[at],
                    bb[at]
                );
            }
        }
    }
}

/// Every method on a few shapes of one dtype (one test a dtype, so that libtest runs them on
/// several threads and their kernels compile in parallel).
fn every_method(dtype: DType) {
    let g = gpu();
    let shapes: [&[usize]; 5] = [&[1], &[7, 1], &[3, 1000], &[5, 3, 129], &[2, 70000]];
    for (i, shape) in shapes.iter().enumerate() {
        let x = data(shape, dtype, i as u64);
        check_same(&x, &x.to_device(&g).unwrap(), &format!("{shape:?}"));
    }
}

macro_rules! every_method_of {
    ($($name:ident: $dtype:ident),*) => {$(
        #[test]
        #[ignore = "needs a CUDA device"]
        fn $name() {
            every_method(DType::$dtype);
        }
    )*};
}
every_method_of!(
    every_method_f32: F32, every_method_bf16: BF16, every_method_f16: F16, every_method_f64: F64,
    every_method_i64: I64, every_method_u32: U32, every_method_u8: U8
);

#[test]
#[ignore = "needs a CUDA device"]
fn strided_layouts_give_the_cpus_bits() -> R {
    let g = gpu();
    for dtype in [DType::F32, DType::BF16] {
        let x = data(&[12, 300], dtype, 9);
        let y = x.to_device(&g)?;
        let views: [fn(&Tensor) -> Tensor; 4] = [
            |t| t.narrow(1, 5, 200).unwrap(),
            |t| t.t().unwrap(),
            |t| t.i((.., 7)).unwrap().unsqueeze(1).unwrap(),
            |t| t.narrow(0, 2, 1).unwrap().broadcast_as((4, 300)).unwrap(),
        ];
        for (i, v) in views.iter().enumerate() {
            check_same(&v(&x), &v(&y), &format!("view {i}"));
        }
    }
    Ok(())
}

#[test]
#[ignore = "needs a CUDA device"]
fn long_rows_and_many_rows() -> R {
    let g = gpu();
    for shape in [[2usize, 1 << 20], [1 << 16, 32]] {
        let x = data(&shape, DType::F32, 11);
        let y = x.to_device(&g)?;
        for d in [0, 1] {
            assert_eq!(bits(&x.cufold().cumsum(d)?), bits(&y.cufold().cumsum(d)?));
            assert_eq!(
                bits(&x.cufold().log_sum_exp(d)?),
                bits(&y.cufold().log_sum_exp(d)?)
            );
            assert_eq!(bits(&x.cufold().argmax(d)?), bits(&y.cufold().argmax(d)?));
        }
    }
    Ok(())
}

#[test]
#[ignore = "needs a CUDA device"]
fn segments_and_keys_give_the_cpus_bits() -> R {
    let g = gpu();
    let x = data(&[100_000], DType::F32, 12);
    let mut rng = ChaCha8Rng::seed_from_u64(13);
    let mut offsets = vec![0i64];
    while *offsets.last().unwrap() < 100_000 {
        let next = (offsets.last().unwrap() + rng.random_range(0..300)).min(100_000);
        offsets.push(next);
    }
    let o = Tensor::new(offsets.as_slice(), &Device::Cpu)?;
    let o32 = o.to_dtype(DType::U32)?;
    for (oc, name) in [(&o, "i64"), (&o32, "u32")] {
        let a = x.cufold().segment_reduce::<f32, _>(oc, Sum)?;
        let b = x
            .to_device(&g)?
            .cufold()
            .segment_reduce::<f32, _>(&oc.to_device(&g)?, Sum)?;
        assert_eq!(bits(&a), bits(&b), "segment sums, {name} offsets");
        let a = x.cufold().segment_reduce::<f32, _>(oc, Max)?;
        let b = x
            .to_device(&g)?
            .cufold()
            .segment_reduce::<f32, _>(&oc.to_device(&g)?, Max)?;
        assert_eq!(
            bits(&a),
            bits(&b),
            "segment maxima (empty ones zero), {name} offsets"
        );
    }
    let keys: Vec<u32> = (0..100_000u32).map(|i| (i / 7 + i / 1000) % 5).collect();
    let k = Tensor::new(keys.as_slice(), &Device::Cpu)?;
    let (ka, va, na) = x.cufold().reduce_by_key::<f32, _>(&k, Sum)?;
    let (kb, vb, nb) = x
        .to_device(&g)?
        .cufold()
        .reduce_by_key::<f32, _>(&k.to_device(&g)?, Sum)?;
    assert_eq!(bits(&ka), bits(&kb));
    assert_eq!(bits(&va), bits(&vb));
    assert_eq!(bits(&na), bits(&nb));
    Ok(())
}

#[test]
#[ignore = "needs a CUDA device"]
fn gpu_errors_are_candle_errors() -> R {
    let g = gpu();
    let x = data(&[10], DType::F32, 1).to_device(&g)?;
    let offsets_cpu = Tensor::new(&[0u32, 10], &Device::Cpu)?;
    assert!(
        x.cufold()
            .segment_reduce::<f32, _>(&offsets_cpu, Sum)
            .is_err(),
        "devices differ"
    );
    let keys_cpu = Tensor::zeros(10, DType::U32, &Device::Cpu)?;
    assert!(
        x.cufold().reduce_by_key::<f32, _>(&keys_cpu, Sum).is_err(),
        "devices differ"
    );
    let e = Tensor::zeros((2, 0), DType::F32, &g)?;
    assert!(e.cufold().argmax(1).is_err(), "the argmax of nothing");
    assert!(x.to_dtype(DType::U32)?.cufold().mean(0).is_err());
    Ok(())
}

#[test]
#[ignore = "needs a CUDA device"]
fn gradients_on_the_gpu_match_the_cpus() -> R {
    let g = gpu();
    let x = data(&[6, 50], DType::F32, 21);
    let grads = |dev: &Device| -> candle_core::Result<Vec<u64>> {
        let v = candle_core::Var::from_tensor(&x.to_device(dev)?)?;
        let y = (v.as_tensor().cufold().cumsum(1)?.sum_all()?
            + v.as_tensor().cufold().log_sum_exp(1)?.sum_all()?)?;
        let gr = y.backward()?;
        Ok(bits(gr.get(&v).unwrap()))
    };
    let (a, b) = (grads(&Device::Cpu)?, grads(&g)?);
    // The softmax part uses candle's exp, whose CPU and GPU bits may differ by an ulp.
    let fa: Vec<f32> = a.iter().map(|&u| f32::from_bits(u as u32)).collect();
    let fb: Vec<f32> = b.iter().map(|&u| f32::from_bits(u as u32)).collect();
    for (p, q) in fa.iter().zip(&fb) {
        assert!((p - q).abs() <= 1e-5 * p.abs().max(1.0), "{p} vs {q}");
    }
    Ok(())
}

#[cfg(feature = "cuda")]
#[test]
#[ignore = "needs a CUDA device"]
fn calls_can_be_captured_in_a_cuda_graph() -> R {
    use cufold::cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};
    // A call that waited for the device, copied to the host or allocated outside the stream
    // would end the capture with an error.
    let g = gpu();
    let Device::Cuda(cd) = &g else { unreachable!() };
    let x = data(&[64, 5000], DType::F32, 3).to_device(&g)?;
    let calls = |x: &Tensor| -> candle_core::Result<Vec<Tensor>> {
        Ok(vec![
            x.cufold().cumsum(1)?,
            x.cufold().cumsum_exclusive(1)?,
            x.cufold().sum_keepdim(1)?,
            x.cufold().argmax(1)?,
            x.cufold().log_sum_exp(1)?,
            x.cufold().var(0)?,
            x.cufold().max(0)?,
        ])
    };
    // candle's protocol for graphs: its strided copies (the dim-0 calls go through
    // `contiguous`) upload their layouts from host memory, which a replay would read after it
    // was freed; with the cache on, the warm-up run uploads them once and the capture reuses
    // them. cufold's own calls upload nothing.
    let _cache = cd.enable_cuda_graph_htod_cache();
    let want: Vec<Vec<u64>> = calls(&x)?.iter().map(bits).collect(); // compiles the kernels
    g.synchronize()?;
    let stream = cd.cuda_stream();
    stream
        .begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
        .map_err(|e| candle_core::Error::Cuda(Box::new(e)))?;
    let captured = calls(&x);
    let graph = stream
        .end_capture(CUgraphInstantiate_flags(0))
        .map_err(|e| candle_core::Error::Cuda(Box::new(e)))?;
    let outs = captured?;
    let graph = graph.expect("a graph was captured");
    graph
        .launch()
        .map_err(|e| candle_core::Error::Cuda(Box::new(e)))?;
    g.synchronize()?;
    let wrong: Vec<usize> = (0..want.len())
        .filter(|&i| bits(&outs[i]) != want[i])
        .collect();
    assert!(
        wrong.is_empty(),
        "replayed calls {wrong:?} (of 0..{}) differ",
        want.len()
    );
    Ok(())
}
