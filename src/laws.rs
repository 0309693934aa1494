//! A law checker for operators: call it from your own tests.
//!
//! cufold combines elements along a tree whose shape depends on N alone, so the result is
//! the sequential one only if `combine` is associative and `identity` is a true identity.
//! [`check`] tries those laws (and commutativity, where the operator claims it) on sample
//! values and reports the first counterexample:
//!
//! ```
//! use cufold::laws::{self, Law, Tolerance};
//!
//! /// The midpoint: commutative, but not associative.
//! #[cufold::op(identity = 0.0, commutative)]
//! fn midpoint(a: f64, b: f64) -> f64 {
//!     (a + b) / 2.0
//! }
//!
//! let err = laws::check(midpoint, &[1.0, 2.0, 3.0], Tolerance::Exact).unwrap_err();
//! assert_eq!(err.law(), Law::LeftIdentity); // (0 + 1) / 2 is not 1
//! println!("{err}");
//!
//! // Sums of small integers are exact in f32, so Exact is the right tolerance there.
//! laws::check(cufold::ops::Sum, &[1.0f32, -2.0, 8.0, 0.5], Tolerance::Exact)?;
//! # Ok::<(), laws::LawViolation>(())
//! ```
//!
//! Floating-point addition and multiplication are associative only up to rounding: check
//! them on integer-valued (or dyadic) samples with [`Tolerance::Exact`], or on general
//! samples with [`Tolerance::Relative`] or [`Tolerance::Ulps`].
//!
//! The laws are checked for every order of the samples (`combine(s[2], s[0])` included),
//! as algebra states them; each sample is lifted with its own index.

use crate::element::DeviceValue;
use crate::ops::{Affine, Indexed, Mat2, MeanVarValue, MinMaxValue, Operator};
use half::{bf16, f16};
use std::fmt;

/// How close two accumulators must be to count as equal.
///
/// ```
/// use cufold::laws::{Approx, Tolerance};
/// assert!(1.0f32.approx_eq(&1.0000001, Tolerance::Ulps(1)));
/// assert!(!1.0f32.approx_eq(&1.0000001, Tolerance::Exact));
/// assert!(100.0f64.approx_eq(&100.01, Tolerance::Relative(1e-3)));
/// assert!(f64::NAN.approx_eq(&f64::NAN, Tolerance::Exact)); // NaN equals NaN here
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Tolerance {
    /// Equal values: `==` for numbers, except that NaN equals NaN (so `-0.0` equals `0.0`).
    Exact,
    /// Floats within `eps` times the larger magnitude of the two; other types exactly.
    Relative(f64),
    /// Floats at most this many units in the last place apart (and of the same sign, unless
    /// both are zero); other types exactly.
    Ulps(u64),
    /// The same bits: `-0.0` differs from `0.0`, and NaNs are equal only with the same bit
    /// pattern. What [`check`] uses, whatever it is given, for an operator that claims to be
    /// [order-free](crate::ops::Operator::ORDER_FREE).
    ///
    /// ```
    /// use cufold::laws::{Approx, Tolerance};
    /// assert!(!(-0.0f32).approx_eq(&0.0, Tolerance::Bits));
    /// assert!(!f64::NAN.approx_eq(&-f64::NAN, Tolerance::Bits));
    /// ```
    Bits,
}

/// Equality up to a [`Tolerance`], field by field: how [`check`] compares accumulators.
///
/// Implemented for the element types, `bool`, cufold's value types, and by
/// `#[derive(cufold::DeviceType)]` for your structs (every field must be within the
/// tolerance; integers compare exactly).
///
/// ```
/// use cufold::laws::{Approx, Tolerance};
/// let a = cufold::ops::Affine { a: 1.0f32, b: 0.5 };
/// assert!(a.approx_eq(&cufold::ops::Affine { a: 1.0, b: 0.5 }, Tolerance::Exact));
/// assert!(!7u32.approx_eq(&8, Tolerance::Relative(0.5)));
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` has no `cufold::laws::Approx`, which #[derive(cufold::DeviceType)] needs for every field",
    label = "no `Approx` for this field's type",
    note = "derive DeviceType for `{Self}` too, or implement cufold::laws::Approx for it"
)]
pub trait Approx {
    /// Whether `self` and `other` are equal within `tol`.
    fn approx_eq(&self, other: &Self, tol: Tolerance) -> bool;
}

macro_rules! approx_exact {
    ($($t:ty),*) => {$(
        impl Approx for $t {
            fn approx_eq(&self, other: &Self, _: Tolerance) -> bool {
                self == other
            }
        }
    )*};
}
approx_exact!(bool, u8, u16, u32, u64, u128, i8, i16, i32, i64, i128);

/// `(a, b)` as f64 and their ordered integer images (for ulps), compared under `tol`.
fn float_eq(a: f64, b: f64, ordered: (i64, i64), tol: Tolerance) -> bool {
    if a.is_nan() || b.is_nan() {
        return a.is_nan() && b.is_nan();
    }
    if a == b {
        return true;
    }
    if a.is_infinite() || b.is_infinite() {
        return false;
    }
    match tol {
        Tolerance::Exact | Tolerance::Bits => false,
        Tolerance::Relative(eps) => (a - b).abs() <= eps * a.abs().max(b.abs()),
        Tolerance::Ulps(n) => ordered.0.abs_diff(ordered.1) <= n,
    }
}

/// The bits of a float as an integer that grows with the value (`-0.0` and `0.0` adjacent).
fn ordered(bits: u64, sign: u64) -> i64 {
    if bits & sign != 0 {
        -((bits & !sign) as i64) - 1
    } else {
        bits as i64
    }
}

macro_rules! approx_float {
    ($t:ty, $bits:ident, $sign:expr) => {
        impl Approx for $t {
            fn approx_eq(&self, other: &Self, tol: Tolerance) -> bool {
                if tol == Tolerance::Bits {
                    return self.$bits() == other.$bits();
                }
                let o = (
                    ordered(self.$bits() as u64, $sign),
                    ordered(other.$bits() as u64, $sign),
                );
                float_eq(self.to_f64(), other.to_f64(), o, tol)
            }
        }
    };
}
approx_float!(f32, to_bits, 1 << 31);
approx_float!(f64, to_bits, 1 << 63);
approx_float!(f16, to_bits, 1 << 15);
approx_float!(bf16, to_bits, 1 << 15);

/// Float conversions for [`approx_float`].
trait ToF64 {
    fn to_f64(self) -> f64;
}
impl ToF64 for f32 {
    fn to_f64(self) -> f64 {
        self as f64
    }
}
impl ToF64 for f64 {
    fn to_f64(self) -> f64 {
        self
    }
}
impl ToF64 for f16 {
    fn to_f64(self) -> f64 {
        f16::to_f64(self)
    }
}
impl ToF64 for bf16 {
    fn to_f64(self) -> f64 {
        bf16::to_f64(self)
    }
}

macro_rules! approx_fields {
    ($name:ident<$t:ident> { $($f:ident),* }) => {
        impl<$t: Approx> Approx for $name<$t> {
            fn approx_eq(&self, other: &Self, tol: Tolerance) -> bool {
                $(self.$f.approx_eq(&other.$f, tol))&&*
            }
        }
    };
}
approx_fields!(Indexed<T> { value, index });
approx_fields!(MinMaxValue<T> { min, max });
approx_fields!(Affine<T> { a, b });
approx_fields!(Mat2<T> { m00, m01, m10, m11 });

impl Approx for MeanVarValue {
    fn approx_eq(&self, other: &Self, tol: Tolerance) -> bool {
        self.count.approx_eq(&other.count, tol)
            && self.mean.approx_eq(&other.mean, tol)
            && self.m2.approx_eq(&other.m2, tol)
    }
}

/// One of the laws [`check`] tries.
///
/// ```
/// assert_eq!(cufold::laws::Law::Associativity.to_string(), "associativity");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Law {
    /// `combine(identity, a) == a`, and `combine(identity, identity) == identity`.
    LeftIdentity,
    /// `combine(a, identity) == a`.
    RightIdentity,
    /// `combine(combine(a, b), c) == combine(a, combine(b, c))`.
    Associativity,
    /// `combine(a, b) == combine(b, a)`, checked only for operators that claim it
    /// ([`Operator::COMMUTATIVE`]).
    Commutativity,
    /// Not a law of the operator: [`check`] was given no sample, so it checked nothing.
    NoSamples,
}

impl fmt::Display for Law {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Law::LeftIdentity => "left identity",
            Law::RightIdentity => "right identity",
            Law::Associativity => "associativity",
            Law::Commutativity => "commutativity",
            Law::NoSamples => "a non-empty sample",
        })
    }
}

/// A counterexample to one of an operator's laws, found by [`check`]. Its `Display` names
/// the law, the samples (by index and value) and the two accumulators that differ.
///
/// ```
/// use cufold::laws::{check, Law, Tolerance};
/// #[cufold::op(identity = 0)]
/// fn minus(a: i64, b: i64) -> i64 { a - b }
/// let err = check(minus, &[5i64, 3, 1], Tolerance::Exact).unwrap_err();
/// assert_eq!(err.law(), Law::LeftIdentity);
/// assert_eq!(err.samples(), &[0]);
/// assert!(err.to_string().contains("left identity fails"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LawViolation {
    law: Law,
    samples: Vec<usize>,
    message: String,
}

impl LawViolation {
    /// The law that fails.
    ///
    /// ```
    /// # use cufold::laws::*;
    /// #[cufold::op(identity = 1)]
    /// fn avg(a: u32, b: u32) -> u32 { (a + b) / 2 }
    /// assert_eq!(check(avg, &[4u32, 6], Tolerance::Exact).unwrap_err().law(), Law::LeftIdentity);
    /// ```
    pub fn law(&self) -> Law {
        self.law
    }

    /// The indices of the samples in the counterexample, in the order the law combines them
    /// (empty where the identity alone fails).
    ///
    /// ```
    /// # use cufold::laws::*;
    /// #[cufold::op(identity = 0.0, commutative)]
    /// fn first(a: f64, b: f64) -> f64 { if a == 0.0 { b } else { a } }
    /// let e = check(first, &[1.0, 2.0], Tolerance::Exact).unwrap_err();
    /// assert_eq!((e.law(), e.samples()), (Law::Commutativity, &[0, 1][..]));
    /// ```
    pub fn samples(&self) -> &[usize] {
        &self.samples
    }
}

impl fmt::Display for LawViolation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for LawViolation {}

/// Beyond these many samples, triples (and pairs) are drawn rather than enumerated.
const ALL_TRIPLES_UP_TO: usize = 40;
const ALL_PAIRS_UP_TO: usize = 300;
/// How many triples (pairs) are drawn then, besides every run of consecutive samples.
const DRAWN: usize = 50_000;

/// Checks that `op` is a monoid on `samples` (each lifted with its index): `identity` is a
/// left and right identity of every sample and of itself, `combine` is associative on
/// every triple (for more than 40 samples: every consecutive triple and 50,000 more drawn
/// by a fixed generator), and, if the operator claims [`Operator::COMMUTATIVE`], on every
/// pair (past 300 samples: consecutive and drawn pairs) `combine(a, b) == combine(b, a)`.
/// Accumulators are compared with [`Approx`] under `tol`; an operator that claims to be
/// [order-free](Operator::ORDER_FREE) is held to every law, commutativity included, under
/// [`Tolerance::Bits`]. Returns the first counterexample, or, for an empty `samples`, an
/// error of [`Law::NoSamples`] (no law can be checked on no value).
///
/// Choose samples that exercise the operator's branches (ties, NaN, infinities, the
/// identity's own value) and, for floats, either exact data with [`Tolerance::Exact`] or a
/// tolerance that covers rounding.
///
/// **This is the test to write for every operator**: nothing else checks its claims, and a
/// wrong identity or a false `order_free` compiles and gives wrong results. (Debug builds
/// try the same laws, by the same rules, on the first eight values of each CPU reduction
/// and scan, and fail them with an [`ErrorKind::InvalidConfig`](crate::ErrorKind) error;
/// that sees only the data a run happens to have.) A test of your crate:
///
/// ```
/// use cufold::laws::{self, Tolerance};
///
/// /// The largest count.
/// #[cufold::op(identity = 0, order_free)]
/// fn max_count(a: u32, b: u32) -> u32 { a.max(b) }
///
/// // #[test]
/// fn max_count_keeps_its_laws() {
///     let samples = [0, 1, 7, 7, u32::MAX, 3];
///     laws::check(max_count, &samples, Tolerance::Exact).unwrap();
/// }
/// # max_count_keeps_its_laws();
/// ```
///
/// ```
/// use cufold::laws::{check, Tolerance};
/// let xs: Vec<f32> = (0..100).map(|i| ((i * 37) % 101) as f32 - 50.0).collect();
/// check(cufold::ops::Sum, &xs, Tolerance::Exact)?;    // small integers add exactly
/// check(cufold::ops::ArgMax, &xs, Tolerance::Exact)?;
/// let noisy: Vec<f64> = (1..50).map(|i| 1.0 / i as f64).collect();
/// check(cufold::ops::Sum, &noisy, Tolerance::Relative(1e-15))?;
/// let none: &[f32] = &[];
/// let e = check(cufold::ops::Sum, none, Tolerance::Exact).unwrap_err();
/// assert_eq!(e.law(), cufold::laws::Law::NoSamples);
/// # Ok::<(), cufold::laws::LawViolation>(())
/// ```
pub fn check<In: DeviceValue, O: Operator<In>>(
    op: O,
    samples: &[In],
    tol: Tolerance,
) -> Result<(), LawViolation>
where
    O::Acc: Approx,
{
    if samples.is_empty() {
        // Every law would hold vacuously: say that nothing was checked.
        return Err(LawViolation {
            law: Law::NoSamples,
            samples: Vec::new(),
            message: format!(
                "no samples: nothing about {} was checked (give at least one value)",
                O::NAME
            ),
        });
    }
    // An order-free operator promises the same bits in every order.
    let tol = if O::ORDER_FREE { Tolerance::Bits } else { tol };
    check_laws(&op, samples, &|x, y| x.approx_eq(y, tol), Scope::Full)
}

/// Which laws [`check_laws`] tries, and on which pairs and triples of the samples (the
/// quick scopes are the debug builds' only).
#[derive(Clone, Copy, PartialEq, Eq)]
#[cfg_attr(not(debug_assertions), allow(dead_code))]
enum Scope {
    /// [`check`]'s: the identity on every sample; associativity on every triple (or every
    /// consecutive triple and drawn ones); commutativity, where claimed, on every pair (or
    /// consecutive and drawn pairs).
    Full,
    /// The debug-build check of the CPU backend ([`debug_check`]): the identity on every
    /// sample; for an order-free operator only, associativity on every triple of the first
    /// three samples and on the consecutive triples, and commutativity on the consecutive
    /// pairs. A few hundred combines at most.
    Quick,
    /// `Quick` for an operator that is not order-free: the identity only, on the samples
    /// whose accumulators are finite (see [`debug_check`]).
    QuickFinite,
}

/// The laws of `op` on `samples` (not empty), each lifted with its index, with `same` as
/// the equality: the one checker behind [`check`] and [`debug_check`].
fn check_laws<In: DeviceValue, O: Operator<In>>(
    op: &O,
    samples: &[In],
    same: &dyn Fn(&O::Acc, &O::Acc) -> bool,
    scope: Scope,
) -> Result<(), LawViolation> {
    let label = match scope {
        Scope::Full => "samples",
        Scope::Quick | Scope::QuickFinite => "x",
    };
    let acc: Vec<O::Acc> = samples
        .iter()
        .enumerate()
        .map(|(i, &x)| op.lift(x, i as u64))
        .collect();
    let id = op.identity();
    let fail = |law: Law, idx: &[usize], what: String| {
        let inputs: Vec<String> = idx
            .iter()
            .zip(["a", "b", "c"])
            .map(|(&i, name)| {
                format!(
                    "{name} = lift({label}[{i}] = {:?}) = {:?}",
                    samples[i], acc[i]
                )
            })
            .collect();
        let shown = if inputs.is_empty() {
            String::new()
        } else {
            format!("\n  {}", inputs.join("\n  "))
        };
        Err(LawViolation {
            law,
            samples: idx.to_vec(),
            message: format!("{law} fails for {}:{shown}\n  {what}", O::name()),
        })
    };

    let ii = op.combine(id, id);
    if !same(&ii, &id) {
        return fail(
            Law::LeftIdentity,
            &[],
            format!("combine(identity, identity) = {ii:?} but identity = {id:?}"),
        );
    }
    for (i, a) in acc.iter().enumerate() {
        if scope == Scope::QuickFinite && !finite(a) {
            continue;
        }
        let l = op.combine(id, *a);
        if !same(&l, a) {
            return fail(
                Law::LeftIdentity,
                &[i],
                format!("combine(identity, a) = {l:?} but a = {a:?} (identity = {id:?})"),
            );
        }
        let r = op.combine(*a, id);
        if !same(&r, a) {
            return fail(
                Law::RightIdentity,
                &[i],
                format!("combine(a, identity) = {r:?} but a = {a:?} (identity = {id:?})"),
            );
        }
    }
    if scope == Scope::QuickFinite {
        return Ok(());
    }

    let n = acc.len();
    let mut rng = 0x853c_49e6_748f_ea9bu64;
    let mut draw = move || {
        rng = rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        ((z ^ (z >> 31)) % n as u64) as usize
    };
    let consecutive = (0..n.saturating_sub(2)).map(|i| [i, i + 1, i + 2]);
    let triples: Box<dyn Iterator<Item = [usize; 3]>> = match scope {
        Scope::Full if n <= ALL_TRIPLES_UP_TO => {
            Box::new((0..n * n * n).map(move |t| [t / (n * n), t / n % n, t % n]))
        }
        Scope::Full => {
            let mut d = draw;
            let drawn = (0..DRAWN).map(move |_| [d(), d(), d()]);
            Box::new(consecutive.chain(drawn))
        }
        Scope::Quick | Scope::QuickFinite => {
            let m = n.min(3);
            let first = (0..m * m * m).map(move |t| [t / (m * m), t / m % m, t % m]);
            Box::new(first.chain(consecutive.skip(1)))
        }
    };
    for [i, j, k] in triples {
        let (a, b, c) = (acc[i], acc[j], acc[k]);
        let l = op.combine(op.combine(a, b), c);
        let r = op.combine(a, op.combine(b, c));
        if !same(&l, &r) {
            return fail(
                Law::Associativity,
                &[i, j, k],
                format!("combine(combine(a, b), c) = {l:?} but combine(a, combine(b, c)) = {r:?}"),
            );
        }
    }

    if O::COMMUTATIVE || O::ORDER_FREE {
        let consecutive = (0..n.saturating_sub(1)).map(|i| [i, i + 1]);
        let pairs: Box<dyn Iterator<Item = [usize; 2]>> = match scope {
            Scope::Full if n <= ALL_PAIRS_UP_TO => {
                Box::new((0..n * n).map(move |t| [t / n, t % n]))
            }
            Scope::Full => {
                let drawn = (0..DRAWN).map(move |_| [draw(), draw()]);
                Box::new(consecutive.chain(drawn))
            }
            Scope::Quick | Scope::QuickFinite => Box::new(consecutive),
        };
        for [i, j] in pairs {
            let ab = op.combine(acc[i], acc[j]);
            let ba = op.combine(acc[j], acc[i]);
            if !same(&ab, &ba) {
                return fail(
                    Law::Commutativity,
                    &[i, j],
                    format!(
                        "combine(a, b) = {ab:?} but combine(b, a) = {ba:?} (the operator claims to be {})",
                        if O::ORDER_FREE { "order-free" } else { "commutative" }
                    ),
                );
            }
        }
    }
    Ok(())
}

/// How many of an input's first values [`debug_check`] lifts.
#[cfg(debug_assertions)]
const DEBUG_VALUES: usize = 8;

/// In debug builds, the laws an operator must keep for the CPU backend's result to be the
/// one its claims promise, tried on the first eight values of the input that `entry` (as
/// `"Cpu::reduce"`) is given: the identity (`combine(identity, a)` and `combine(a,
/// identity)` are `a`), and, for an operator that claims to be
/// [order-free](Operator::ORDER_FREE), associativity and commutativity on a few triples and
/// pairs of them. The rules are [`check`]'s: under [`Tolerance::Bits`] for an order-free
/// operator, on every value (its claim covers NaN payloads and signed zeros); else under
/// [`Tolerance::Exact`] (`-0.0` equals `0.0`, a NaN any NaN), on the values whose
/// accumulators hold no NaN or infinity (float arithmetic keeps an identity there only up
/// to what they mean: `inf * 0.0` is NaN in `identity ∘ f` of an affine map with an
/// infinite slope, and a NaN input of a log-sum-exp leaves a NaN in one field or another;
/// such samples are for [`check`] to choose). Operators that
/// are not monoids (not [`SCANNABLE`](Operator::SCANNABLE): `Div2Mean`, whose identity is a
/// padding value) are not checked. A violation is an
/// [`ErrorKind::InvalidConfig`](crate::ErrorKind::InvalidConfig) error that shows it.
///
/// Accumulators are compared without [`Approx`] (the entry points do not require it): by
/// their bytes where [`DeviceValue::DENSE`], else (or, under `Exact`, where the bytes
/// differ) by their `Debug` text, in which NaNs print alike, so that NaN payloads in a
/// type with padding go unchecked.
///
/// Cost: at most 17 combines and 8 lifts (about 150 more combines for an order-free
/// operator), whatever the input's length. Release builds compile none of it.
#[cfg(debug_assertions)]
pub(crate) fn debug_check<In: DeviceValue, O: Operator<In>>(
    op: &O,
    x: &[In],
    entry: &str,
) -> crate::error::Result<()> {
    if !O::SCANNABLE || x.is_empty() || SUSPENDED.with(|s| s.get() > 0) {
        return Ok(());
    }
    let (tol, scope) = if O::ORDER_FREE {
        (Tolerance::Bits, Scope::Quick)
    } else {
        (Tolerance::Exact, Scope::QuickFinite)
    };
    let x = &x[..x.len().min(DEBUG_VALUES)];
    check_laws(op, x, &|a, b| same_value(a, b, tol), scope).map_err(|v| {
        crate::error::Error::new(
            crate::error::ErrorKind::InvalidConfig,
            format!(
                "{v}\n(the debug-build check of {entry} on the input's first values{}; \
                 laws::check is the test to write for every operator: see cufold::laws)",
                if O::ORDER_FREE {
                    ": an order-free operator must keep every law bit for bit"
                } else {
                    ""
                }
            ),
        )
    })
}

#[cfg(debug_assertions)]
thread_local! {
    /// How many [`without_debug_check`] calls this thread is inside.
    static SUSPENDED: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// `f()` with [`debug_check`] off on this thread: for test probes that break the laws on
/// purpose (an operator that records the tree it is combined along). Re-exported as
/// `cufold::__private::without_law_check`.
pub(crate) fn without_debug_check<R>(f: impl FnOnce() -> R) -> R {
    #[cfg(debug_assertions)]
    {
        struct Resume;
        impl Drop for Resume {
            fn drop(&mut self) {
                SUSPENDED.with(|s| s.set(s.get() - 1));
            }
        }
        SUSPENDED.with(|s| s.set(s.get() + 1));
        let _resume = Resume;
        f()
    }
    #[cfg(not(debug_assertions))]
    f()
}

/// Release builds: nothing.
#[cfg(not(debug_assertions))]
#[inline(always)]
pub(crate) fn debug_check<In: DeviceValue, O: Operator<In>>(
    _: &O,
    _: &[In],
    _: &str,
) -> crate::error::Result<()> {
    Ok(())
}

/// `a` and `b` equal under `tol` (`Bits` or `Exact`), for any device value: see
/// [`debug_check`].
#[cfg(debug_assertions)]
fn same_value<A: DeviceValue>(a: &A, b: &A, tol: Tolerance) -> bool {
    if A::DENSE {
        // SAFETY: a dense value has no padding, so all its bytes are initialised.
        let bytes = |v: &A| unsafe {
            std::slice::from_raw_parts((v as *const A).cast::<u8>(), std::mem::size_of::<A>())
        };
        if bytes(a) == bytes(b) {
            return true;
        }
        if tol == Tolerance::Bits {
            return false;
        }
    }
    let (da, db) = (format!("{a:?}"), format!("{b:?}"));
    if tol == Tolerance::Exact {
        unsigned_zeros(&da) == unsigned_zeros(&db)
    } else {
        da == db
    }
}

/// Whether no field of `a` is a NaN or an infinity, as its `Debug` text shows them.
fn finite<A: DeviceValue>(a: &A) -> bool {
    !format!("{a:?}")
        .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '.'))
        .any(|t| t == "NaN" || t == "inf")
}

/// `Debug` text with every `-0.0` written `0.0`, as `Exact` compares.
#[cfg(debug_assertions)]
fn unsigned_zeros(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut prev = ' ';
    for (i, c) in s.char_indices() {
        let rest = &s[i..];
        let negative_zero = c == '-'
            && rest.starts_with("-0.0")
            && !(prev.is_ascii_alphanumeric() || prev == '.')
            && !matches!(rest.as_bytes().get(4), Some(d) if d.is_ascii_digit() || *d == b'e');
        if !negative_zero {
            out.push(c);
        }
        prev = c;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::{Compose, Max, Sum};

    #[test]
    fn ulps_and_relative_tolerances() {
        let one = 1.0f32;
        let next = f32::from_bits(one.to_bits() + 2);
        assert!(one.approx_eq(&next, Tolerance::Ulps(2)));
        assert!(!one.approx_eq(&next, Tolerance::Ulps(1)));
        assert!((-0.0f64).approx_eq(&0.0, Tolerance::Exact));
        assert!(f32::from_bits(1).approx_eq(&-f32::from_bits(1), Tolerance::Ulps(3)));
        assert!(!f32::INFINITY.approx_eq(&f32::MAX, Tolerance::Relative(0.5)));
        assert!(f32::INFINITY.approx_eq(&f32::INFINITY, Tolerance::Relative(0.0)));
        assert!(!f64::NAN.approx_eq(&1.0, Tolerance::Relative(1e9)));
        assert!(f16::from_f32(1.0).approx_eq(&f16::from_f32(1.001), Tolerance::Ulps(1)));
        assert!(!5i32.approx_eq(&6, Tolerance::Ulps(10)));
    }

    #[test]
    fn builtins_pass_on_exact_data() {
        let xs: Vec<i32> = (0..60).map(|i| (i * 7919) % 113 - 56).collect();
        check(Sum, &xs, Tolerance::Exact).unwrap();
        check(Max, &xs, Tolerance::Exact).unwrap();
        let maps: Vec<Affine<f64>> = (0..50)
            .map(|i| Affine {
                a: (i % 3) as f64 - 1.0,
                b: (i % 5) as f64,
            })
            .collect();
        check(Compose, &maps, Tolerance::Exact).unwrap();
    }

    #[test]
    fn float_sums_fail_exactly_but_pass_within_rounding() {
        let xs: Vec<f32> = (1..30).map(|i| 1.0 / i as f32).collect();
        let e = check(Sum, &xs, Tolerance::Exact).unwrap_err();
        assert_eq!(e.law(), Law::Associativity);
        let [i, j, k] = e.samples() else {
            panic!("{e}")
        };
        let (a, b, c) = (xs[*i], xs[*j], xs[*k]);
        assert_ne!((a + b) + c, a + (b + c), "{e}");
        check(Sum, &xs, Tolerance::Relative(1e-6)).unwrap();
    }
}
