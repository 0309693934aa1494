//! Reductions: every input element combined into one result along the canonical tree.
//!
//! One place for the primitive: its launch planner ([`plan`], [`ReduceShape`],
//! [`ReducePlan`]), the GPU launch ([`Reducer`], built by [`Gpu::reducer`](crate::Gpu::reducer)
//! and [`Gpu::reducer_with`](crate::Gpu::reducer_with)), and its CPU twin
//! ([`Cpu::reduce`](crate::Cpu::reduce)). [`kernel_source`] and [`compile_kernel`] show and
//! check the generated CUDA without a device.
//!
//! ```
//! let m = cufold::Cpu::new().reduce(&[1.0f64, 2.0, 3.0, 4.0], cufold::ops::Mean)?;
//! assert_eq!(m, 2.5);
//! # Ok::<(), cufold::Error>(())
//! ```

mod cpu;
mod gpu;
mod plan;

pub(crate) use gpu::launch_grid;
pub use gpu::{compile_kernel, kernel_source, Reducer};
pub use plan::{plan, ReducePlan, ReduceShape};

/// How a [`Reducer`] is built, builder style (`NAME(value)` sets, `get_NAME()` reads).
/// It changes the speed, never the result.
///
/// ```
/// let config = cufold::reduce::ReduceConfig::default().block(512);
/// assert_eq!(config.get_block(), 512);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ReduceConfig {
    block: u32,
}

impl Default for ReduceConfig {
    fn default() -> Self {
        ReduceConfig { block: 1024 }
    }
}

impl ReduceConfig {
    /// Threads per block: a power of two from 32 to 1024 (default 1024, the fastest for sums
    /// on an H100 in BENCHMARKS.md); checked when the reducer is built.
    ///
    /// ```
    /// let config = cufold::reduce::ReduceConfig::default().block(128);
    /// assert_eq!(config.get_block(), 128);
    /// ```
    pub fn block(mut self, block: u32) -> Self {
        self.block = block;
        self
    }

    /// The block size this configuration asks for.
    ///
    /// ```
    /// assert_eq!(cufold::reduce::ReduceConfig::default().get_block(), 1024);
    /// ```
    pub fn get_block(&self) -> u32 {
        self.block
    }
}
