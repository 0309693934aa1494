//! The procedural macros of [cufold](https://docs.rs/cufold): `#[op]`, `#[transform]` and
//! `#[derive(DeviceType)]`. Use them through cufold's re-exports, `cufold::op`,
//! `cufold::transform` and `cufold::DeviceType`, whose documentation has runnable
//! examples; the generated code names `::cufold`.
//!
//! `#[op]` keeps an operator's Rust functions as written (the CPU half) and translates
//! their bodies into a CUDA C++ struct (the GPU half). The translation covers literals and
//! constants, arithmetic, comparisons, logic, bit operations and shifts, `as` casts between
//! primitive types, `let` (with Rust's shadowing), `if`/`else` and blocks as values,
//! `return` statements, struct literals and field access, and the methods of the number
//! types that operators use; everything else is reported at compile time, at its span,
//! with as many errors at once as the body has.
//!
//! ## Modules
//!
//! This file holds the entry points only; the work is split by phase.
//!
//! - `op`: `#[op]`. `op::attr` parses the attribute's arguments and `op::ast` the item
//!   (the function form or the impl form); `op::valid` checks it, reporting every problem
//!   at once; `op::expand` writes the unit struct, the `Operator` impl and its `cuda()`.
//! - `transform`: `#[transform]`, checked (with `op::valid`'s signature checks), then the
//!   `Transform` impl generated.
//! - `params`: run-time parameters, shared by both: the `&self` receiver, and the constant
//!   that asks, in one place, that the value's type be a dense device value.
//! - `translate`: the translation of an operator's bodies into CUDA C++, by concern:
//!   `translate::stmt` (blocks and statements), `translate::expr` (expressions),
//!   `translate::call` (method and `T::f(..)` calls, the supported methods) and
//!   `translate::cpp` (the C++ under construction).
//! - `derive`: `#[derive(DeviceType)]`, checked, then generated.
//! - `names`: the C++ names of Rust identifiers and types, and the types that cannot be
//!   device values.
//! - `errors`: errors collected so that a macro reports all of them at once.
#![deny(missing_docs)]

use proc_macro::TokenStream;

mod derive;
mod errors;
mod names;
mod op;
mod params;
mod transform;
mod translate;

/// Makes an associative operator from Rust code: the CPU half is the code as written, the
/// CUDA half its translation.
///
/// Function form, for an operator whose input, accumulator and output are one type:
///
/// ```text
/// #[cufold::op(identity = Affine { a: 1.0, b: 0.0 })]
/// fn compose(f: Affine, g: Affine) -> Affine {
///     Affine { a: g.a * f.a, b: g.a * f.b + g.b }
/// }
/// // `compose` is now a unit struct implementing cufold::ops::Operator<Affine>.
/// ```
///
/// Impl form, on a struct, with a lift (input and index to accumulator) and a finish
/// (accumulator and count to output), both optional; functions that take `&self` read the
/// struct's fields, which become the operator's run-time parameters:
///
/// ```text
/// #[derive(Clone, Copy, Debug, Default)]
/// struct LogSumExp;
/// #[cufold::op(commutative)]
/// impl LogSumExp {
///     fn identity() -> Lse { ... }
///     fn lift(x: f32, index: u64) -> Lse { ... }
///     fn combine(a: Lse, b: Lse) -> Lse { ... }
///     fn finish(acc: Lse, n: u64) -> f32 { ... }
/// }
/// ```
///
/// Arguments: `identity = EXPR` (function form), `commutative`, `order_free` (exactly
/// associative and commutative on every value, bit for bit: the planner may then combine
/// in any order; `cufold::laws::check` tests the claim), `empty = error`. See
/// `cufold::op` for the full documentation and examples.
#[proc_macro_attribute]
pub fn op(attr: TokenStream, item: TokenStream) -> TokenStream {
    op::expand(attr.into(), item.into()).into()
}

/// Makes a map on the way into an operator (a `cufold::ops::Transform`) from Rust code:
/// `fn apply(&self, x: In, index: u64) -> Out` as written is the CPU half, its translation
/// the CUDA half; with `&self`, the value's fields are run-time parameters, so one compiled
/// kernel serves every value.
///
/// ```text
/// #[derive(Clone, Copy, cufold::DeviceType)]
/// #[repr(C)]
/// struct Standardize { mean: f64, inv_sd: f64 }
///
/// #[cufold::transform]
/// impl Standardize {
///     fn apply(&self, x: f32) -> f64 { (x as f64 - self.mean) * self.inv_sd }
/// }
/// // Standardize now implements cufold::ops::Transform<f32>.
/// ```
///
/// See `cufold::transform` for the full documentation and examples.
#[proc_macro_attribute]
pub fn transform(attr: TokenStream, item: TokenStream) -> TokenStream {
    transform::expand(attr.into(), item.into()).into()
}

/// Gives a `#[repr(C)]` struct of device values a CUDA twin: implements
/// `cufold::DeviceValue` (with the C++ struct and a layout check), cudarc's `DeviceRepr`
/// and `ValidAsZeroBits`, `Debug` and `cufold::laws::Approx`.
///
/// ```text
/// #[derive(Clone, Copy, cufold::DeviceType)]
/// #[repr(C)]
/// struct Lse { max: f32, sum: f32 }
/// ```
///
/// See `cufold::DeviceType` for the full documentation and examples.
#[proc_macro_derive(DeviceType)]
pub fn device_type(input: TokenStream) -> TokenStream {
    derive::expand(input.into()).into()
}
