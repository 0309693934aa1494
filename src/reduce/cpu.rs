//! The reduction's CPU twin: the canonical tree of `crate::tree`, its chunks on all cores.

use crate::cpu::Cpu;
use crate::element::DeviceValue;
use crate::error::Result;
use crate::ops::check::check_empty;
use crate::ops::Operator;
use crate::tree::{fold_levels, subtree, LEAF};

impl Cpu {
    /// Reduces `x` with `op`: `finish(tree(x), x.len())`.
    ///
    /// For N = 0 it returns `finish(identity, 0)`, or an
    /// [`ErrorKind::EmptyInput`](crate::ErrorKind::EmptyInput) error for the operators that
    /// have no value for an empty input (see [`crate::ops`]).
    ///
    /// ```
    /// let m = cufold::Cpu::new().reduce(&[2.0f64, 4.0], cufold::ops::Mean)?;
    /// assert_eq!(m, 3.0);
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn reduce<T: DeviceValue, O: Operator<T>>(&self, x: &[T], op: O) -> Result<O::Out> {
        check_empty::<T, O>(x.len() as u64)?;
        Ok(op.finish(self.reduce_acc(x, op), x.len() as u64))
    }

    /// The canonical-tree accumulator of `x`, before `finish` (the identity for N = 0).
    ///
    /// ```
    /// use cufold::ops::Div2Mean;
    /// // (1+2)/2 = 1.5 and (3+0)/2 = 1.5, then (1.5+1.5)/2: no correction yet.
    /// assert_eq!(cufold::Cpu::new().reduce_acc(&[1.0f32, 2.0, 3.0], Div2Mean), 1.5);
    /// ```
    pub fn reduce_acc<T: DeviceValue, O: Operator<T>>(&self, x: &[T], op: O) -> O::Acc {
        let n = x.len();
        if n == 0 {
            return op.identity();
        }
        let p = n.next_power_of_two();
        // A power of two, so that every chunk is a subtree of the canonical tree.
        let chunk = 1usize << (p / (self.threads() * 4)).max(LEAF).ilog2();
        if self.threads() == 1 || p <= chunk {
            return subtree(&op, x, 0, p, &mut Vec::new());
        }
        let mut parts = self.subtrees(&op, x, chunk, n.div_ceil(chunk));
        fold_levels(&op, &mut parts, p / chunk)
    }
}
