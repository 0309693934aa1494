//! Calls: the methods of the number types (`x.sqrt()`) and their associated functions
//! (`f32::sqrt(x)`, `T::from`, `T::from_bits`, `f16::from_f32`), and the table of the
//! supported methods with their arities.

use super::{path_name, Cpp, Translator};
use crate::names::value_type_cpp;
use quote::ToTokens;
use syn::Expr;

const FLOAT_METHODS: &[(&str, usize)] = &[
    ("abs", 0),
    ("sqrt", 0),
    ("cbrt", 0),
    ("exp", 0),
    ("exp2", 0),
    ("exp_m1", 0),
    ("ln", 0),
    ("ln_1p", 0),
    ("log2", 0),
    ("log10", 0),
    ("log", 1),
    ("powi", 1),
    ("powf", 1),
    ("sin", 0),
    ("cos", 0),
    ("tan", 0),
    ("asin", 0),
    ("acos", 0),
    ("atan", 0),
    ("atan2", 1),
    ("sinh", 0),
    ("cosh", 0),
    ("tanh", 0),
    ("hypot", 1),
    ("mul_add", 2),
    ("floor", 0),
    ("ceil", 0),
    ("round", 0),
    ("round_ties_even", 0),
    ("trunc", 0),
    ("fract", 0),
    ("recip", 0),
    ("to_degrees", 0),
    ("to_radians", 0),
    ("signum", 0),
    ("copysign", 1),
    ("min", 1),
    ("max", 1),
    ("clamp", 2),
    ("rem_euclid", 1),
    ("div_euclid", 1),
    ("is_nan", 0),
    ("is_finite", 0),
    ("is_infinite", 0),
    ("is_sign_negative", 0),
    ("is_sign_positive", 0),
    ("to_bits", 0),
    ("to_f32", 0),
    ("to_f64", 0),
];

const INT_METHODS: &[(&str, usize)] = &[
    ("count_ones", 0),
    ("count_zeros", 0),
    ("leading_zeros", 0),
    ("trailing_zeros", 0),
    ("rotate_left", 1),
    ("rotate_right", 1),
    ("swap_bytes", 0),
    ("reverse_bits", 0),
    ("is_power_of_two", 0),
    ("pow", 1),
    ("wrapping_add", 1),
    ("wrapping_sub", 1),
    ("wrapping_mul", 1),
    ("wrapping_neg", 0),
    ("wrapping_abs", 0),
    ("wrapping_pow", 1),
    ("wrapping_shl", 1),
    ("wrapping_shr", 1),
    ("saturating_add", 1),
    ("saturating_sub", 1),
    ("abs_diff", 1),
    ("is_positive", 0),
    ("is_negative", 0),
];

/// The number of arguments (besides the receiver) of a supported method.
fn method_arity(name: &str) -> Option<usize> {
    FLOAT_METHODS
        .iter()
        .chain(INT_METHODS)
        .find(|(n, _)| *n == name)
        .map(|&(_, a)| a)
}

/// Where the supported methods are listed, for messages (which name it rather than repeat
/// the list).
const SEE_DOCS: &str = "the supported methods are listed in the `cufold::op` docs";

/// Levenshtein distance between two short names.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diag = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let next = (diag + usize::from(ca != cb))
                .min(row[j] + 1)
                .min(row[j + 1] + 1);
            diag = row[j + 1];
            row[j + 1] = next;
        }
    }
    row[b.len()]
}

/// `"; did you mean `a` or `b`?"` for the (at most three) supported methods closest to
/// `name`, within a third of its length in edits; empty when none is.
fn closest(name: &str) -> String {
    let limit = (name.chars().count() / 3).max(1);
    let mut near: Vec<(usize, &str)> = FLOAT_METHODS
        .iter()
        .chain(INT_METHODS)
        .map(|&(m, _)| (edit_distance(name, m), m))
        .filter(|&(d, _)| d <= limit)
        .collect();
    near.sort();
    near.dedup_by(|a, b| a.1 == b.1);
    let names: Vec<String> = near.iter().take(3).map(|(_, m)| format!("`{m}`")).collect();
    match names.len() {
        0 => String::new(),
        1 => format!("; did you mean {}?", names[0]),
        n => format!(
            "; did you mean {} or {}?",
            names[..n - 1].join(", "),
            names[n - 1]
        ),
    }
}

impl Translator {
    pub(super) fn method_call(&mut self, m: &syn::ExprMethodCall) -> Cpp {
        let name = m.method.to_string();
        if super::expr::is_self(&m.receiver) {
            self.error(
                &m.method,
                format!(
                    "`self`'s methods (`self.{name}()`) are not translated: a translated body calls \
                     only the number types' methods; read the run-time parameters as `self.field` \
                     and write the computation inline"
                ),
            );
            return Cpp::default();
        }
        if let Some(t) = &m.turbofish {
            self.error(t, "turbofish method calls are not translated");
            return Cpp::default();
        }
        match method_arity(&name) {
            None => {
                self.error(
                    &m.method,
                    format!(
                        "the method `{name}` is not supported in CUDA translation ({SEE_DOCS}){}",
                        closest(&name)
                    ),
                );
                Cpp::default()
            }
            Some(n) if n != m.args.len() => {
                self.error(
                    &m.method,
                    format!("`{name}` takes {n} argument(s) besides its receiver"),
                );
                Cpp::default()
            }
            Some(_) => {
                let mut c = Cpp::text(format!("cfm::{name}("));
                c.append(self.expr(&m.receiver, None));
                for a in &m.args {
                    c.push(", ");
                    c.append(self.expr(a, None));
                }
                c.push(")");
                c
            }
        }
    }

    /// `T::f(args)` for a number type `T`: its methods called as functions, `T::from`,
    /// `T::from_bits` and the halves' `from_f32`.
    pub(super) fn call(&mut self, c: &syn::ExprCall) -> Cpp {
        let unsupported = |t: &mut Self, at: &dyn ToTokens, what: String| {
            t.error(
                at,
                format!(
                    "{what} is not supported in CUDA translation: a body may call only the number \
                     types' methods, `T::from`, `T::from_bits` and `f16::from_f32` ({SEE_DOCS})"
                ),
            );
            Cpp::default()
        };
        let Expr::Path(p) = &*c.func else {
            return unsupported(self, &c.func, "this call".into());
        };
        let segs: Vec<_> = p.path.segments.iter().collect();
        let n = segs.len();
        let name = path_name(&p.path);
        if p.qself.is_some() || n < 2 {
            return unsupported(self, &p.path, format!("the function `{name}`"));
        }
        let (ty_seg, f_seg) = (segs[n - 2], segs[n - 1]);
        let ty_name = ty_seg.ident.to_string();
        let f = f_seg.ident.to_string();
        let Some(cpp_ty) = value_type_cpp(&ty_name) else {
            return unsupported(self, &p.path, format!("the function `{name}`"));
        };
        if !ty_seg.arguments.is_empty() || !f_seg.arguments.is_empty() {
            return unsupported(self, &p.path, format!("the generic call `{name}`"));
        }
        let args: Vec<&Expr> = c.args.iter().collect();
        let is_float = matches!(ty_name.as_str(), "f32" | "f64");
        let is_half = matches!(ty_name.as_str(), "f16" | "bf16");
        let (head, wrap_first) = match (f.as_str(), args.len()) {
            ("from", 1) if !is_half => (format!("cfm::cast<{cpp_ty}>("), false),
            ("from_bits", 1) if is_float || is_half => (format!("cfm::{ty_name}_bits("), false),
            ("from_f32", 1) if is_half => (format!("cfm::from_f32<{cpp_ty}>("), false),
            (m, k) if method_arity(m) == Some(k.wrapping_sub(1)) => (format!("cfm::{m}("), true),
            // A std method of a primitive called with the wrong number of arguments: the CPU
            // half, compiled as written, reports it (an inherent method, which no trait's
            // can shadow), so a second error here would only repeat it.
            (m, _) if method_arity(m).is_some() && !is_half => return Cpp::default(),
            (m, k) => {
                let msg = match method_arity(m) {
                    Some(a) => format!("`{name}` takes {} argument(s), not {k}", a + 1),
                    None => format!(
                        "the function `{name}` is not supported in CUDA translation ({SEE_DOCS}){}",
                        closest(m)
                    ),
                };
                self.error(&p.path, msg);
                return Cpp::default();
            }
        };
        let mut out = Cpp::text(head);
        for (i, a) in args.iter().enumerate() {
            if i > 0 {
                out.push(", ");
            }
            if i == 0 && wrap_first {
                out.push(&format!("cfm::to<{cpp_ty}>("));
                out.append(self.expr(a, None));
                out.push(")");
            } else {
                out.append(self.expr(a, None));
            }
        }
        out.push(")");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edit_distance_counts_insertions_deletions_substitutions() {
        assert_eq!(edit_distance("sqrt", "sqrt"), 0);
        assert_eq!(edit_distance("sqr", "sqrt"), 1);
        assert_eq!(edit_distance("mx", "max"), 1);
        assert_eq!(edit_distance("is_nam", "is_nan"), 1);
        assert_eq!(edit_distance("", "abs"), 3);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }

    #[test]
    fn closest_names_at_most_three_supported_methods() {
        assert_eq!(closest("sqr"), "; did you mean `sqrt`?");
        assert_eq!(closest("asinh"), "; did you mean `asin` or `sinh`?");
        assert_eq!(closest("twice"), "");
        assert_eq!(closest("helper"), "");
        let many = closest("cos_");
        assert!(many.matches('`').count() <= 6, "{many}");
    }
}
