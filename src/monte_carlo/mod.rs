//! Fused Monte Carlo: `n` samples drawn in the kernel from a counter-based generator,
//! mapped by a [`Transform`] with run-time parameters and reduced by any operator along the
//! canonical tree, with no sample ever stored.
//!
//! Sample `i` is `D` draws (uniform in (0, 1), or standard normal) of the Philox4x32-10
//! stream of the run's seed ([`crate::random`]): the draws `k = i*D .. i*D + D - 1` of the
//! run's flat sequence, draw `k` being draw `k % P` of Philox sample `k / P` (`P` = 4 for
//! f32, 2 for f64, the values one Philox block yields). So a sample depends on `(seed, i)`
//! alone, never on the launch shape, and the GPU and the CPU backend ([`Cpu::monte_carlo`])
//! draw the same bits: for maps and operators built from `+ - * /`, min, max and
//! comparisons their results are the same bits. Normal draws use `ln`, `sin` and `cos`,
//! which differ between CUDA and the host by a few ulps (see [`crate::random`]).
//!
//! The default operator is [`MeanVar`]: its [`MeanVarValue`] gives the estimate
//! ([`MeanVarValue::mean`]) and its standard error ([`MeanVarValue::std_error`]).
//!
//! This primitive is a reduction whose loader draws its input: it shares the reduction's
//! planner and grid kernel (`kernels/reduce.cuh`).
//!
//! ```
//! use cufold::monte_carlo::MonteCarlo;
//! use cufold::ops::Identity;
//! // The mean of U(0,1) from 2^16 samples, on the CPU backend (Gpu::monte_carlo on a GPU).
//! let mc = MonteCarlo::<f64, _>::new(Identity).seed(7);
//! let est = cufold::Cpu::new().monte_carlo(&mc, 1 << 16)?;
//! assert!((est.mean - 0.5).abs() < 4.0 * est.std_error());
//! # Ok::<(), cufold::Error>(())
//! ```

pub(crate) mod cpu;
pub(crate) mod gpu;

pub use gpu::{compile_kernel, kernel_source, Integrator};

use crate::element::{DeviceValue, Real};
use crate::error::{Error, ErrorKind, Result};
use crate::ops::{Mapped, MeanVar, Transform};
use std::marker::PhantomData;

#[allow(unused_imports)] // for the docs
use crate::{ops::MeanVarValue, Cpu};

mod sealed {
    pub trait Sealed {}
}

/// What each draw is.
///
/// ```
/// use cufold::monte_carlo::{Draws, MonteCarlo};
/// let mc = MonteCarlo::<f32, _>::new(cufold::ops::Identity).draws(Draws::Normal);
/// assert_eq!(mc.get_draws(), Draws::Normal);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Draws {
    /// Uniform in the open interval (0, 1) (never 0, never 1; [`crate::random`]).
    #[default]
    Uniform,
    /// Standard normal, by the Box–Muller transform of pairs of uniform draws.
    Normal,
}

impl Draws {
    fn cuda_id(self) -> u32 {
        use crate::gpu::jit::embedded::defines;
        match self {
            Draws::Uniform => defines::CF_DRAW_UNIFORM,
            Draws::Normal => defines::CF_DRAW_NORMAL,
        }
    }
}

/// The scalar of a draw: f32 or f64.
pub trait DrawScalar: Real + sealed::Sealed {
    /// Draws one Philox block gives.
    #[doc(hidden)]
    const PER_BLOCK: usize;
    /// Uniform `k` of a Philox block.
    #[doc(hidden)]
    fn uniform(block: &[u32; 4], k: usize) -> Self;
    /// The Box–Muller pair of two uniforms.
    #[doc(hidden)]
    fn box_muller(u1: Self, u2: Self) -> (Self, Self);
}

impl sealed::Sealed for f32 {}
impl sealed::Sealed for f64 {}

impl DrawScalar for f32 {
    const PER_BLOCK: usize = 4;
    fn uniform(block: &[u32; 4], k: usize) -> f32 {
        crate::random::open01_f32(block[k])
    }
    fn box_muller(u1: f32, u2: f32) -> (f32, f32) {
        crate::random::box_muller_f32(u1, u2)
    }
}

impl DrawScalar for f64 {
    const PER_BLOCK: usize = 2;
    fn uniform(block: &[u32; 4], k: usize) -> f64 {
        crate::random::open01_f64(block[2 * k], block[2 * k + 1])
    }
    fn box_muller(u1: f64, u2: f64) -> (f64, f64) {
        crate::random::box_muller_f64(u1, u2)
    }
}

/// A Monte Carlo sample: one draw (`f32`, `f64`) or `D` draws (`[f32; D]`, `[f64; D]`).
///
/// ```
/// use cufold::monte_carlo::Sample;
/// assert_eq!(<[f64; 4] as Sample>::DIMS, 4);
/// assert_eq!(<f32 as Sample>::DIMS, 1);
/// ```
pub trait Sample: DeviceValue + sealed::Sealed {
    /// The scalar of each draw.
    type Scalar: DrawScalar;
    /// Draws per sample.
    const DIMS: usize;
    /// The sample made of `DIMS` draws.
    #[doc(hidden)]
    fn from_draws(draws: &[Self::Scalar]) -> Self;
}

impl Sample for f32 {
    type Scalar = f32;
    const DIMS: usize = 1;
    fn from_draws(draws: &[f32]) -> f32 {
        draws[0]
    }
}

impl Sample for f64 {
    type Scalar = f64;
    const DIMS: usize = 1;
    fn from_draws(draws: &[f64]) -> f64 {
        draws[0]
    }
}

impl<const N: usize> sealed::Sealed for [f32; N] {}
impl<const N: usize> sealed::Sealed for [f64; N] {}

impl<const N: usize> Sample for [f32; N] {
    type Scalar = f32;
    const DIMS: usize = N;
    fn from_draws(draws: &[f32]) -> [f32; N] {
        std::array::from_fn(|j| draws[j])
    }
}

impl<const N: usize> Sample for [f64; N] {
    type Scalar = f64;
    const DIMS: usize = N;
    fn from_draws(draws: &[f64]) -> [f64; N] {
        std::array::from_fn(|j| draws[j])
    }
}

/// A Monte Carlo estimate to compute: samples of type `S` (drawn as [`Draws`] from a
/// seed), mapped by `F` (a [`Transform`], whose run-time parameters travel to the kernel),
/// reduced by `O` (default [`MeanVar`]). Builder style; cheap to copy.
///
/// ```
/// use cufold::monte_carlo::{Draws, MonteCarlo};
/// use cufold::ops::{Identity, Sum};
/// let mc = MonteCarlo::<[f32; 2], _>::new(Identity).seed(1).draws(Draws::Normal);
/// assert_eq!((mc.get_seed(), mc.get_draws()), (1, Draws::Normal));
/// let total = mc.reduce_with(Sum); // the same samples, another operator
/// # let _ = total;
/// ```
pub struct MonteCarlo<S, F, O = MeanVar> {
    map: F,
    op: O,
    seed: u64,
    draws: Draws,
    _sample: PhantomData<fn(S)>,
}

impl<S, F: Clone, O: Clone> Clone for MonteCarlo<S, F, O> {
    fn clone(&self) -> Self {
        MonteCarlo {
            map: self.map.clone(),
            op: self.op.clone(),
            seed: self.seed,
            draws: self.draws,
            _sample: PhantomData,
        }
    }
}

impl<S, F: Copy, O: Copy> Copy for MonteCarlo<S, F, O> {}

impl<S, F: std::fmt::Debug, O: std::fmt::Debug> std::fmt::Debug for MonteCarlo<S, F, O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MonteCarlo")
            .field("sample", &std::any::type_name::<S>())
            .field("map", &self.map)
            .field("op", &self.op)
            .field("seed", &self.seed)
            .field("draws", &self.draws)
            .finish()
    }
}

impl<S: Sample, F: Transform<S>> MonteCarlo<S, F, MeanVar> {
    /// Samples of type `S`, mapped by `map`, reduced by [`MeanVar`] (estimate and standard
    /// error); seed 0, uniform draws.
    ///
    /// ```
    /// let mc = cufold::monte_carlo::MonteCarlo::<f64, _>::new(cufold::ops::Identity);
    /// assert_eq!(mc.get_seed(), 0);
    /// ```
    pub fn new(map: F) -> Self {
        MonteCarlo {
            map,
            op: MeanVar,
            seed: 0,
            draws: Draws::Uniform,
            _sample: PhantomData,
        }
    }
}

impl<S, F, O> MonteCarlo<S, F, O> {
    /// The seed of the Philox stream (the key): runs with different seeds draw independent
    /// samples.
    ///
    /// ```
    /// let mc = cufold::monte_carlo::MonteCarlo::<f32, _>::new(cufold::ops::Identity).seed(42);
    /// assert_eq!(mc.get_seed(), 42);
    /// ```
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// The seed.
    ///
    /// ```
    /// assert_eq!(cufold::monte_carlo::MonteCarlo::<f32, _>::new(cufold::ops::Identity).get_seed(), 0);
    /// ```
    pub fn get_seed(&self) -> u64 {
        self.seed
    }

    /// What each draw is (default [`Draws::Uniform`]).
    ///
    /// ```
    /// use cufold::monte_carlo::{Draws, MonteCarlo};
    /// let mc = MonteCarlo::<f32, _>::new(cufold::ops::Identity).draws(Draws::Normal);
    /// # let _ = mc;
    /// ```
    pub fn draws(mut self, draws: Draws) -> Self {
        self.draws = draws;
        self
    }

    /// What each draw is.
    ///
    /// ```
    /// use cufold::monte_carlo::{Draws, MonteCarlo};
    /// assert_eq!(MonteCarlo::<f32, _>::new(cufold::ops::Identity).get_draws(), Draws::Uniform);
    /// ```
    pub fn get_draws(&self) -> Draws {
        self.draws
    }

    /// Another map (a new value of its parameters, in a sweep): kernels compiled for the
    /// map's type are reused.
    ///
    /// ```
    /// use cufold::monte_carlo::MonteCarlo;
    /// let mc = MonteCarlo::<f32, _>::new(cufold::ops::Identity).map(cufold::ops::Identity);
    /// # let _ = mc;
    /// ```
    pub fn map(mut self, map: F) -> Self {
        self.map = map;
        self
    }

    /// The map.
    ///
    /// ```
    /// let mc = cufold::monte_carlo::MonteCarlo::<f32, _>::new(cufold::ops::Identity);
    /// let _map: &cufold::ops::Identity = mc.get_map();
    /// ```
    pub fn get_map(&self) -> &F {
        &self.map
    }

    /// The same samples and map, reduced by `op` instead.
    ///
    /// ```
    /// use cufold::ops::{Identity, Max};
    /// let largest = cufold::monte_carlo::MonteCarlo::<f32, _>::new(Identity).reduce_with(Max);
    /// # let _ = largest;
    /// ```
    pub fn reduce_with<P>(self, op: P) -> MonteCarlo<S, F, P> {
        MonteCarlo {
            map: self.map,
            op,
            seed: self.seed,
            draws: self.draws,
            _sample: PhantomData,
        }
    }

    /// The operator over samples: the map, then the reduction's operator.
    ///
    /// ```
    /// use cufold::ops::{Identity, Operator};
    /// let mc = cufold::monte_carlo::MonteCarlo::<f64, _>::new(Identity);
    /// let acc = mc.operator().lift(0.25f64, 0);
    /// assert_eq!(acc.mean, 0.25);
    /// ```
    pub fn operator(&self) -> Mapped<F, O>
    where
        F: Copy,
        O: Copy,
    {
        Mapped::new(self.map, self.op)
    }
}

/// The most samples a run may draw: 2^62, the most positions the reduction's tree indexes
/// on either backend ([`crate::reduce::plan`]), and fewer where `S::DIMS` draws per sample
/// would run the flat draw index `i * DIMS` (a `u64`, the Philox counter's) past 2^64.
pub(crate) fn max_samples<S: Sample>() -> u64 {
    let by_draws = (1u128 << 64) / S::DIMS.max(1) as u128;
    (1u64 << 62).min(u64::try_from(by_draws).unwrap_or(u64::MAX))
}

/// An error ([`ErrorKind::TooLarge`]) for a run past [`max_samples`]: samples `first ..
/// first + n` (`first` is 0 but for a rank's chunk of a distributed run, which passes the
/// whole run: 0 and its length). The check every entry point makes before any work.
pub(crate) fn check_samples<S: Sample>(first: u64, n: u64) -> Result<()> {
    let max = max_samples::<S>();
    match first.checked_add(n) {
        Some(end) if end <= max => Ok(()),
        _ => Err(Error::new(
            ErrorKind::TooLarge,
            format!(
                "{n} Monte Carlo samples{}: a run draws at most {max} samples of {} draws \
                 (2^62 samples, the most the reduction tree indexes, and at most 2^64 draws, \
                 the Philox counter's range)",
                if first == 0 {
                    String::new()
                } else {
                    format!(" from sample {first}")
                },
                S::DIMS
            ),
        )),
    }
}

/// An error for a sample of no draws.
pub(crate) fn check_sample<S: Sample>() -> Result<()> {
    if S::DIMS == 0 {
        return Err(Error::new(
            ErrorKind::InvalidConfig,
            "a Monte Carlo sample needs at least one draw: the sample type has none ([T; 0])",
        ));
    }
    Ok(())
}
