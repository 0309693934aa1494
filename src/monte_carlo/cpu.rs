//! Fused Monte Carlo on the CPU: the same samples (the same Philox words), the same map and
//! operator, the same canonical tree, on all cores.

use super::{check_sample, check_samples, DrawScalar, Draws, MonteCarlo, Sample};
use crate::cpu::Cpu;
use crate::error::{Error, ErrorKind, Result};
use crate::ops::check::check_empty;
use crate::ops::{Mapped, Operator, Transform};
use crate::tree::Leaves;

/// Samples per group: four, as on the GPU (every group takes whole Philox blocks).
const GROUP: usize = 4;

/// The lifted samples of a run, or of a rank's chunk of one (samples `first .. first + n`,
/// any `first`): position `i` is `lift(map(sample first + i), first + i)`.
struct Samples<'a, S, F, O> {
    mc: &'a MonteCarlo<S, F, O>,
    first: u64,
    n: usize,
}

impl<S: Sample, F: Transform<S>, O: Operator<F::Out>> Samples<'_, S, F, O> {
    /// The `GROUP * S::DIMS` draws of the group of samples starting at global sample `i` (a
    /// multiple of GROUP), into `v`.
    fn draws(&self, i: u64, v: &mut [S::Scalar]) {
        let per = <S::Scalar as DrawScalar>::PER_BLOCK;
        let first = i * S::DIMS as u64 / per as u64;
        for (b, chunk) in v.chunks_mut(per).enumerate() {
            let block = crate::random::block(self.mc.get_seed(), first + b as u64, 0);
            for k in (0..per).step_by(2) {
                let u1 = S::Scalar::uniform(&block, k);
                let u2 = S::Scalar::uniform(&block, k + 1);
                let (a, b) = match self.mc.get_draws() {
                    Draws::Uniform => (u1, u2),
                    Draws::Normal => S::Scalar::box_muller(u1, u2),
                };
                chunk[k] = a;
                chunk[k + 1] = b;
            }
        }
    }
}

impl<S: Sample, F: Transform<S>, O: Operator<F::Out>> Leaves<S, Mapped<F, O>>
    for Samples<'_, S, F, O>
{
    fn len(&self) -> usize {
        self.n
    }

    fn fill(&self, op: &Mapped<F, O>, lo: usize, hi: usize, out: &mut Vec<O::Acc>) {
        let d = S::DIMS;
        let mut v = vec![<S::Scalar as crate::element::Real>::HALF; GROUP * d];
        // Global sample numbers: a chunk may start inside a group (of a distributed run).
        let (lo, hi) = (self.first + lo as u64, self.first + hi as u64);
        let mut g = lo - lo % GROUP as u64;
        while g < hi {
            self.draws(g, &mut v);
            for s in 0..GROUP {
                let i = g + s as u64;
                if i >= lo && i < hi {
                    let sample = S::from_draws(&v[s * d..(s + 1) * d]);
                    out.push(op.lift(sample, i));
                }
            }
            g += GROUP as u64;
        }
    }
}

impl Cpu {
    /// Draws `n` samples of `mc`, maps and reduces them along the canonical tree: the
    /// GPU's [`Gpu::monte_carlo`](crate::Gpu::monte_carlo) on the CPU, with the same samples,
    /// so for maps and operators built from `+ - * /`, min, max and comparisons the same bits.
    ///
    /// Errors: `n = 0` for an operator without an empty value, a sample of no draws, and
    /// ([`ErrorKind::TooLarge`](crate::ErrorKind::TooLarge)) `n` past 2^62 (the most
    /// positions the tree indexes, as on the GPU) or past 2^64 draws in all (the Philox
    /// counter's range: `n * DIMS <= 2^64`), or past what a `usize` counts; checked before
    /// any work.
    ///
    /// ```
    /// use cufold::monte_carlo::MonteCarlo;
    /// use cufold::ops::Identity;
    /// let est = cufold::Cpu::new().monte_carlo(&MonteCarlo::<f32, _>::new(Identity), 4096)?;
    /// assert!((est.mean - 0.5).abs() < 0.05);
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn monte_carlo<S: Sample, F: Transform<S>, O: Operator<F::Out>>(
        &self,
        mc: &MonteCarlo<S, F, O>,
        n: u64,
    ) -> Result<O::Out> {
        check_sample::<S>()?;
        check_empty::<S, Mapped<F, O>>(n)?;
        check_samples::<S>(0, n)?;
        let count = usize::try_from(n).map_err(|_| {
            Error::new(
                ErrorKind::TooLarge,
                format!("{n} samples: more than this machine's usize counts"),
            )
        })?;
        let op = mc.operator();
        let acc = self.tree(
            &op,
            &Samples {
                mc,
                first: 0,
                n: count,
            },
        );
        Ok(op.finish(acc, n))
    }
}

/// The unfinished tree over samples `first .. first + n` of `mc`'s run (n > 0; a rank's
/// chunk of a distributed estimate, `dist`), each lifted at its global sample number; the
/// caller checks the run's size.
pub(crate) fn chunk_tree<S: Sample, F: Transform<S>, O: Operator<F::Out>>(
    cpu: &Cpu,
    mc: &MonteCarlo<S, F, O>,
    first: u64,
    n: usize,
) -> O::Acc {
    cpu.tree(&mc.operator(), &Samples { mc, first, n })
}
