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
pub(crate) use plan::per_16_bytes;
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
    large_block: u32,
    large_from_len: u64,
}

impl Default for ReduceConfig {
    fn default() -> Self {
        ReduceConfig {
            block: 1024,
            large_block: 128,
            large_from_len: 1 << 16,
        }
    }
}

/// An error ([`ErrorKind::InvalidConfig`](crate::ErrorKind::InvalidConfig)) unless `block`
/// (the setting `what` names) is a power of two from 32 to 1024: the one message every
/// configuration's `check` gives for a block size.
pub(crate) fn check_config_block(what: &str, block: u32) -> crate::Result<()> {
    if !(32..=1024).contains(&block) || !block.is_power_of_two() {
        return Err(crate::Error::new(
            crate::ErrorKind::InvalidConfig,
            format!(
                "{what}({block}): a block size must be a power of two from 32 to 1024 (CUDA \
                 allows at most 1024 threads per block)"
            ),
        ));
    }
    Ok(())
}

impl ReduceConfig {
    /// Checks the configuration without a device (what every entry point that takes one,
    /// [`Gpu::reducer_with`](crate::Gpu::reducer_with), does first): the block sizes are
    /// powers of two from 32 to 1024. Errors:
    /// [`ErrorKind::InvalidConfig`](crate::ErrorKind::InvalidConfig), naming the setting.
    ///
    /// ```
    /// use cufold::reduce::ReduceConfig;
    /// assert!(ReduceConfig::default().check().is_ok());
    /// let e = ReduceConfig::default().large_block(1000).check().unwrap_err();
    /// assert!(e.to_string().contains("ReduceConfig::large_block(1000)"));
    /// ```
    pub fn check(&self) -> crate::Result<()> {
        check_config_block("ReduceConfig::block", self.block)?;
        check_config_block("ReduceConfig::large_block", self.large_block)
    }

    /// Threads per block: a power of two from 32 to 1024 (default 1024, the fastest for sums
    /// on an H100 in BENCHMARKS.md); checked when the reducer is built. Order-free operators
    /// take [`ReduceConfig::large_block`] instead from [`ReduceConfig::large_from_len`]
    /// elements. Other operators whose accumulator takes 24 bytes or more (`MeanVar`) take
    /// at most 256: in 1024-thread blocks their trees do not fit in the registers a thread
    /// gets and spill to local memory (MeanVar over 2^28 f32 on an H200: 1796 GB/s in
    /// 1024-thread blocks, 1896 in 512, 2074 in 256; f16 1341, 1497, 1640).
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

    /// Threads per block of the second kernel that [order-free](crate::ops::Operator::ORDER_FREE)
    /// operators (min, max, the arg- operators, integer sums) take from
    /// [`ReduceConfig::large_from_len`] elements: a power of two from 32 to 1024 (default
    /// 128), checked when the reducer is built. Every order of combination gives such an
    /// operator the same bits, so only the speed changes; other operators never take it.
    ///
    /// Measured on an H100 (docs/performance-notes.md, "Reductions"): with
    /// 128-thread blocks, twice as many registers a thread and full occupancy, argmin and
    /// argmax at 2^24 elements run 20-54% faster than in 1024-thread blocks, and from 2^16
    /// elements on no order-free operator measured is slower; below that, 1024 is faster.
    ///
    /// ```
    /// let config = cufold::reduce::ReduceConfig::default().large_block(256);
    /// assert_eq!(config.get_large_block(), 256);
    /// ```
    pub fn large_block(mut self, block: u32) -> Self {
        self.large_block = block;
        self
    }

    /// The block size order-free operators take on large inputs.
    ///
    /// ```
    /// assert_eq!(cufold::reduce::ReduceConfig::default().get_large_block(), 128);
    /// ```
    pub fn get_large_block(&self) -> u32 {
        self.large_block
    }

    /// Elements from which order-free operators take [`ReduceConfig::large_block`]'s kernel
    /// (default 2^16; `u64::MAX`: never), compiled on first use. Inputs that one block of
    /// [`ReduceConfig::block`] reduces in a single tile (up to 65536 `u8`) keep that block:
    /// one launch of one block is the faster there (measured: 8.6 against 10.6 µs).
    ///
    /// ```
    /// let config = cufold::reduce::ReduceConfig::default().large_from_len(u64::MAX);
    /// assert_eq!(config.get_large_from_len(), u64::MAX);
    /// ```
    pub fn large_from_len(mut self, n: u64) -> Self {
        self.large_from_len = n;
        self
    }

    /// The length from which order-free operators take the large inputs' kernel.
    ///
    /// ```
    /// assert_eq!(cufold::reduce::ReduceConfig::default().get_large_from_len(), 1 << 16);
    /// ```
    pub fn get_large_from_len(&self) -> u64 {
        self.large_from_len
    }
}
