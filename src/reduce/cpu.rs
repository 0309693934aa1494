//! The reduction's CPU twin: the canonical tree of `crate::tree`, its chunks on all cores.

use crate::cpu::Cpu;
use crate::element::DeviceValue;
use crate::error::Result;
use crate::ops::check::check_empty;
use crate::ops::Operator;
use crate::tree::Lifted;

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
        crate::laws::debug_check(&op, x, "Cpu::reduce")?;
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
        self.tree(&op, &Lifted(x, 0))
    }
}
