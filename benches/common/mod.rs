//! Shared by the GPU benches: test data like `.gpu/peers.py`'s, generated on all cores.
#![allow(dead_code)]

use cufold::ops::Affine;
use cufold::{bf16, f16, DeviceValue};

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

/// `n` values from splitmix64 streams seeded by `seed`, one stream per thread's part.
pub fn generate<T: Data>(n: usize, seed: u64) -> Vec<T> {
    let threads = std::thread::available_parallelism().map_or(1, |t| t.get());
    let chunk = n.div_ceil(threads).max(1);
    let mut v: Vec<T> = vec![T::from_bits(0); n];
    std::thread::scope(|s| {
        for (c, part) in v.chunks_mut(chunk).enumerate() {
            s.spawn(move || {
                let mut state = seed ^ (c as u64).wrapping_mul(0x9e3779b97f4a7c15);
                for x in part {
                    state = state.wrapping_add(0x9e3779b97f4a7c15);
                    let mut z = state;
                    z = (z ^ (z >> 30)).wrapping_mul(0xbf58476d1ce4e5b9);
                    z = (z ^ (z >> 27)).wrapping_mul(0x94d049bb133111eb);
                    *x = T::from_bits(z ^ (z >> 31));
                }
            });
        }
    });
    v
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
