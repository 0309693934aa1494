//! Prints the CUDA source cufold generates for a built-in operator, and with `--cubin FILE`
//! compiles it with NVRTC (no GPU needed) and writes the CUBIN, for `cuobjdump` or `nvdisasm`.
//!
//! ```text
//! cargo run --example kernel_source -- scan|reduce sum|max|argmax|mean|affine f32|f64|i32
//!     [--algo warp|blelloch|hillis] [--block N] [--bytes N] [--staging 0|1] [--arch sm_90]
//!     [--cubin FILE]
//! ```

use cufold::ops::{Affine, ArgMax, Compose, CudaOp, Max, Mean, Operator, Sum};
use cufold::reduce::ReduceShape;
use cufold::scan::{ScanShape, TypeSizes};
use cufold::{DeviceValue, ScanAlgorithm};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// The CUDA half of `op` over `T` and the sizes the planner needs.
fn describe<T: DeviceValue, O: Operator<T>>(op: O) -> (CudaOp, TypeSizes) {
    (op.cuda(), TypeSizes::of::<T, O>())
}

fn main() -> Res<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: kernel_source scan|reduce sum|max|argmax|mean|affine f32|f64|i32 [--algo A] [--block N] [--bytes N] [--arch sm_XY] [--cubin FILE]";
    if args.len() < 3 {
        return Err(usage.into());
    }
    let (mut algo, mut block, mut bytes, mut staging) =
        (ScanAlgorithm::default(), None, 128usize, true);
    let (mut arch, mut cubin) = ("sm_90".to_string(), None);
    let mut it = args[3..].iter();
    while let Some(k) = it.next() {
        let v = it.next().ok_or(usage)?;
        match k.as_str() {
            "--algo" => {
                algo = match v.as_str() {
                    "warp" => ScanAlgorithm::WarpShuffle,
                    "blelloch" => ScanAlgorithm::Blelloch,
                    "hillis" => ScanAlgorithm::HillisSteele,
                    _ => return Err(usage.into()),
                }
            }
            "--block" => block = Some(v.parse()?),
            "--bytes" => bytes = v.parse()?,
            "--staging" => staging = v != "0",
            "--arch" => arch = v.clone(),
            "--cubin" => cubin = Some(v.clone()),
            _ => return Err(usage.into()),
        }
    }
    let (op, sizes) = match (args[1].as_str(), args[2].as_str()) {
        ("sum", "f32") => describe::<f32, _>(Sum),
        ("sum", "f64") => describe::<f64, _>(Sum),
        ("sum", "i32") => describe::<i32, _>(Sum),
        ("max", "f32") => describe::<f32, _>(Max),
        ("argmax", "f32") => describe::<f32, _>(ArgMax),
        ("mean", "f32") => describe::<f32, _>(Mean),
        ("affine", "f32") => describe::<Affine<f32>, _>(Compose),
        ("affine", "f64") => describe::<Affine<f64>, _>(Compose),
        _ => return Err(usage.into()),
    };
    let (src, bin) = match args[0].as_str() {
        "scan" => {
            let shape = ScanShape::fitting(sizes, block.unwrap_or(256), bytes, algo, staging)?;
            eprintln!("{shape:?}");
            let bin = match &cubin {
                Some(_) => Some(cufold::scan::compile_kernel(&op, 0, sizes, &shape, &arch)?),
                None => None,
            };
            (cufold::scan::kernel_source(&op, 0, sizes, &shape), bin)
        }
        "reduce" => {
            let shape = ReduceShape::for_sizes(sizes.input, block.unwrap_or(1024))?;
            let vector = shape.vec as usize * sizes.input == 16;
            eprintln!("{shape:?}");
            let bin = match &cubin {
                Some(_) => Some(cufold::reduce::compile_kernel(
                    &op, 0, &shape, vector, &arch,
                )?),
                None => None,
            };
            (cufold::reduce::kernel_source(&op, 0, &shape, vector), bin)
        }
        _ => return Err(usage.into()),
    };
    match (cubin, bin) {
        (Some(path), Some(bin)) => std::fs::write(path, bin)?,
        _ => println!("{src}"),
    }
    Ok(())
}
