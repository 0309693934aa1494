//! Shared by the GPU benches and the examples (which include it by path): sample data from a
//! seed, generated on all cores with rand's portable ChaCha8 (so a printed seed reproduces
//! the data on every machine, whatever its core count), CUDA-event timing and host timing.
#![allow(dead_code, unreachable_pub)]

use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

use cufold::ops::Affine;
use cufold::{bf16, f16, DeviceValue};

/// The flags every GPU bench takes: where to write its rows as JSON, and the flag `cargo
/// bench` passes.
#[derive(clap::Args, Debug)]
pub struct Output {
    /// Write the rows as JSON here.
    #[arg(long)]
    pub json: Option<String>,
    /// Passed by `cargo bench`; ignored.
    #[arg(long, hide = true)]
    pub bench: bool,
}

/// A value made from 64 random bits: uniform [0, 1) floats, integers in 0..1000 and bytes in
/// 0..256 (as the peers scripts draw them), affine maps near the identity.
pub trait Data: DeviceValue {
    fn from_bits(z: u64) -> Self;
}
impl Data for f32 {
    fn from_bits(z: u64) -> Self {
        (z >> 40) as f32 / (1u64 << 24) as f32
    }
}
impl Data for f64 {
    fn from_bits(z: u64) -> Self {
        (z >> 11) as f64 / (1u64 << 53) as f64
    }
}
impl Data for f16 {
    fn from_bits(z: u64) -> Self {
        f16::from_f32(<f32 as Data>::from_bits(z))
    }
}
impl Data for bf16 {
    fn from_bits(z: u64) -> Self {
        bf16::from_f32(<f32 as Data>::from_bits(z))
    }
}
impl Data for i32 {
    fn from_bits(z: u64) -> Self {
        (z % 1000) as i32
    }
}
impl Data for i64 {
    fn from_bits(z: u64) -> Self {
        (z % 1000) as i64
    }
}
/// Bytes over their whole range, as `torch.randint(0, 256)` draws them.
impl Data for u8 {
    fn from_bits(z: u64) -> Self {
        z as u8
    }
}
impl<T: Data + cufold::Real> Data for Affine<T> {
    fn from_bits(z: u64) -> Self {
        let u = T::from_f64((z >> 11) as f64 / (1u64 << 53) as f64);
        Affine {
            a: T::from_f64(0.999) + u * T::from_f64(0.002),
            b: u - T::HALF,
        }
    }
}

/// Values per generator stream: chunk `c` of the output draws from stream `c` of the seed's
/// ChaCha8 generator, so the data depend on the seed and `n` only.
const CHUNK: usize = 1 << 16;

/// `n` values made by `draw` from a seeded generator, on all cores: chunk `c` (of
/// 2^16 values) from ChaCha8 stream `c` of `seed`.
pub fn fill<T: Send + Clone>(
    n: usize,
    seed: u64,
    first: T,
    draw: impl Fn(&mut ChaCha8Rng) -> T + Sync,
) -> Vec<T> {
    let mut v = vec![first; n];
    let threads = std::thread::available_parallelism().map_or(1, |t| t.get());
    let parts = std::sync::Mutex::new(v.chunks_mut(CHUNK).enumerate().collect::<Vec<_>>());
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let Some((c, part)) = parts.lock().unwrap().pop() else {
                    break;
                };
                let mut rng = ChaCha8Rng::seed_from_u64(seed);
                rng.set_stream(c as u64);
                for x in part {
                    *x = draw(&mut rng);
                }
            });
        }
    });
    v
}

/// A uniform draw from [0, 1) with 53 random bits.
pub fn unit(rng: &mut ChaCha8Rng) -> f64 {
    rng.random::<f64>()
}

/// `n` values of `T` from `seed` (see [`Data`] for their distribution).
pub fn generate<T: Data>(n: usize, seed: u64) -> Vec<T> {
    fill(n, seed, T::from_bits(0), |rng| T::from_bits(rng.next_u64()))
}

/// Device 0, or `None` after printing why there is none: a GPU bench on a machine without
/// CUDA says so and succeeds.
pub fn open_gpu() -> Option<cufold::Gpu> {
    match cufold::Gpu::open(0) {
        Ok(g) => Some(g),
        Err(e) => {
            println!("no CUDA device: {e}");
            None
        }
    }
}

/// The median of `reps` event-timed runs of `launch` on `stream`, in milliseconds, after 5
/// warm-up runs: each run bracketed by its own CUDA events, as `.gpu/peers.py` times the
/// peers.
pub fn median_ms(
    stream: &std::sync::Arc<cudarc::driver::CudaStream>,
    reps: usize,
    mut launch: impl FnMut() -> Result<(), cufold::Error>,
) -> Result<f64, Box<dyn std::error::Error>> {
    use cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT;
    for _ in 0..5 {
        launch()?;
    }
    stream.synchronize()?;
    let ctx = stream.context();
    let mut ms = Vec::with_capacity(reps);
    for _ in 0..reps {
        // cudarc's default (None) makes events without timing.
        let a = ctx.new_event(Some(CU_EVENT_DEFAULT))?;
        let b = ctx.new_event(Some(CU_EVENT_DEFAULT))?;
        a.record(stream)?;
        launch()?;
        b.record(stream)?;
        b.synchronize()?;
        ms.push(a.elapsed_ms(&b)? as f64);
    }
    ms.sort_by(f64::total_cmp);
    Ok(ms[ms.len() / 2])
}

/// The median wall-clock milliseconds of `runs` (at least one) calls of `f` on the host,
/// after one untimed warm-up call (page faults, cold caches and the rayon pool's start are
/// not timed). For host code what [`median_ms`] is for launches.
pub fn median_host_ms(runs: usize, mut f: impl FnMut()) -> f64 {
    f();
    let mut ms: Vec<f64> = (0..runs.max(1))
        .map(|_| {
            let t = std::time::Instant::now();
            f();
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    ms.sort_by(f64::total_cmp);
    ms[ms.len() / 2]
}
