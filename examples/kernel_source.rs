//! Prints the CUDA source cufold generates for a built-in operator, and with `--cubin FILE`
//! compiles it with NVRTC (no GPU needed) and writes the CUBIN, for `cuobjdump` or `nvdisasm`.
//! With no arguments, the scan of f32 sums.
//!
//! ```text
//! cargo run --example kernel_source -- [scan|reduce] [sum|max|argmax|mean|affine]
//!     [f32|f64|f16|bf16|i32]
//!     [--algo warp|blelloch|hillis] [--block N] [--bytes N] [--staging true|false]
//!     [--arch sm_90] [--cubin FILE]
//! ```
//!
//! Every operator takes every type, except `affine` (maps of f32 or f64). The output starts
//! with a comment naming the kernel, the operator and whether it is order-free (exactly
//! associative and commutative, so the reduction may use the cheaper order-free schedule,
//! as the `Reducer` does; scans always keep the canonical grouping).

use clap::{Parser, ValueEnum};
use cufold::ops::{Affine, ArgMax, Compose, CudaOp, Max, Mean, Operator, Sum};
use cufold::reduce::ReduceShape;
use cufold::scan::{ScanShape, TypeSizes};
use cufold::{bf16, f16, DeviceValue, ScanAlgorithm};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Kernel {
    Scan,
    Reduce,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Op {
    Sum,
    Max,
    Argmax,
    Mean,
    Affine,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Type {
    F32,
    F64,
    F16,
    Bf16,
    I32,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Algo {
    Warp,
    Blelloch,
    Hillis,
}

/// Prints (or compiles) the CUDA source of a built-in operator's scan or reduction kernel.
#[derive(Parser, Debug)]
#[command(name = "kernel_source")]
struct Args {
    /// Which kernel.
    #[arg(value_enum, default_value = "scan")]
    kernel: Kernel,
    /// The operator.
    #[arg(value_enum, default_value = "sum")]
    op: Op,
    /// The element type (`affine`: the maps' number type).
    #[arg(value_enum, default_value = "f32")]
    ty: Type,
    /// The scan's block-level algorithm (default: the scanner's).
    #[arg(long, value_enum)]
    algo: Option<Algo>,
    /// Threads per block (default: 256 for scans, 1024 for reductions).
    #[arg(long)]
    block: Option<u32>,
    /// The scan's input bytes per thread.
    #[arg(long, default_value_t = 128)]
    bytes: usize,
    /// The scan's staging through shared memory.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    staging: bool,
    /// The architecture to compile for with --cubin.
    #[arg(long, default_value = "sm_90")]
    arch: String,
    /// Compile with NVRTC and write the CUBIN here instead of printing the source.
    #[arg(long)]
    cubin: Option<std::path::PathBuf>,
}

/// What the kernels need of an operator over an input type.
struct Described {
    /// The CUDA half of the operator.
    op: CudaOp,
    /// The sizes the planners need.
    sizes: TypeSizes,
    /// The operator's name and the input's C++ type, for the header.
    name: String,
    input: String,
    /// `Operator::ORDER_FREE`: the reducer then plans the order-free schedule.
    order_free: bool,
}

/// `op` over `T`.
fn describe<T: DeviceValue, O: Operator<T>>(op: O) -> Described {
    Described {
        op: op.cuda(),
        sizes: TypeSizes::of::<T, O>(),
        name: O::name(),
        input: T::cuda_name(),
        order_free: O::ORDER_FREE,
    }
}

/// The operator `op` over elements of type `T`.
fn of_type<T: DeviceValue + cufold::Element + cufold::Widen>(op: Op) -> Described {
    match op {
        Op::Sum => describe::<T, _>(Sum),
        Op::Max => describe::<T, _>(Max),
        Op::Argmax => describe::<T, _>(ArgMax),
        Op::Mean => describe::<T, _>(Mean),
        Op::Affine => unreachable!("affine is dispatched on its own"),
    }
}

fn main() -> Res<()> {
    let args = Args::parse();
    let d = match (args.op, args.ty) {
        (Op::Affine, Type::F32) => describe::<Affine<f32>, _>(Compose),
        (Op::Affine, Type::F64) => describe::<Affine<f64>, _>(Compose),
        (Op::Affine, _) => return Err("affine maps are of f32 or f64".into()),
        (op, Type::F32) => of_type::<f32>(op),
        (op, Type::F64) => of_type::<f64>(op),
        (op, Type::F16) => of_type::<f16>(op),
        (op, Type::Bf16) => of_type::<bf16>(op),
        (op, Type::I32) => of_type::<i32>(op),
    };
    let (op, sizes) = (&d.op, d.sizes);
    let schedule = match (args.kernel, d.order_free) {
        (Kernel::Reduce, true) => "so the reduction uses the order-free schedule",
        (Kernel::Reduce, false) => "so the reduction follows the canonical tree",
        (Kernel::Scan, _) => "scans keep the canonical grouping whatever the operator",
    };
    // The generated source names the kernel and the operator's C++ type on its first line;
    // this line adds the Rust names and the operator's order-free property.
    let header = format!(
        "// {} over {}: order-free: {} ({schedule})",
        d.name,
        d.input,
        if d.order_free { "yes" } else { "no" },
    );
    let (src, bin) = match args.kernel {
        Kernel::Scan => {
            let algo = match args.algo {
                None => ScanAlgorithm::default(),
                Some(Algo::Warp) => ScanAlgorithm::WarpShuffle,
                Some(Algo::Blelloch) => ScanAlgorithm::Blelloch,
                Some(Algo::Hillis) => ScanAlgorithm::HillisSteele,
            };
            let block = args.block.unwrap_or(256);
            let shape = ScanShape::fitting(sizes, block, args.bytes, algo, args.staging)?;
            eprintln!("{shape:?}");
            let bin = match &args.cubin {
                Some(_) => Some(cufold::scan::compile_kernel(
                    op, 0, sizes, &shape, &args.arch,
                )?),
                None => None,
            };
            (cufold::scan::kernel_source(op, 0, sizes, &shape), bin)
        }
        Kernel::Reduce => {
            // As the Reducer plans it: the order-free schedule where the operator allows it.
            let shape = ReduceShape {
                order_free: d.order_free,
                ..ReduceShape::for_sizes(sizes.input, args.block.unwrap_or(1024))?
            };
            let vector = shape.vec as usize * sizes.input == 16;
            eprintln!("{shape:?}");
            let bin = match &args.cubin {
                Some(_) => Some(cufold::reduce::compile_kernel(
                    op, 0, &shape, vector, &args.arch,
                )?),
                None => None,
            };
            (cufold::reduce::kernel_source(op, 0, &shape, vector), bin)
        }
    };
    match (args.cubin, bin) {
        (Some(path), Some(bin)) => std::fs::write(path, bin)?,
        _ => println!("{header}\n{src}"),
    }
    Ok(())
}
