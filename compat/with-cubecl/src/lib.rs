//! One function that uses cufold and cudarc's own types together: the program this crate
//! stands for compiles.

/// The sum of `x` on the caller's stream, through cufold, on a buffer cudarc made.
pub fn sum_on(
    stream: &std::sync::Arc<cudarc::driver::CudaStream>,
    x: &[f32],
) -> cufold::Result<f32> {
    let gpu = cufold::Gpu::new(stream)?;
    let dev = stream.clone_htod(x)?;
    gpu.reduce(&dev, cufold::ops::Sum)
}
