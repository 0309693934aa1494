//! The translation of an operator's Rust body into CUDA C++.
//!
//! Every Rust operator and method becomes a call of a helper in the C++ namespace `cfm`
//! (kernels/macro_support.cuh in cufold), so that C++ overload resolution, which sees the
//! types, gives each the meaning Rust gives it; the macro only has to respect the syntax.
//! The output is a list of pieces: C++ text, and Rust expressions evaluated when the
//! operator's source is built (the C++ names of user types, exact literals of constants).
//!
//! Run-time parameters: in a function that takes `&self`, `self.field` (and
//! `self.field.sub`) reads a field of the operator's (or map's) value, whose C++ twin the
//! generated struct derives from: it becomes `this->field`. `self` alone and
//! `self.method()` are refused.
//!
//! Control flow: a function's tail `if`/`else` becomes C++ `if`/`else` with `return`s;
//! an `if` used as a value becomes `c ? a : b` when its branches are single expressions
//! and an immediately invoked lambda otherwise; struct literals become a local that is
//! assigned field by field. Rust's shadowing becomes fresh C++ names.
//!
//! By concern: this module holds the translator's state (the names in scope, the output's
//! indentation, the errors) and its entry, `Translator::function`; `stmt` translates
//! blocks and statements, `expr` expressions, `call` method and `T::f(..)` calls (with the
//! table of supported methods), and `cpp` is the output under construction.

mod call;
mod cpp;
mod expr;
mod stmt;

pub(crate) use cpp::Cpp;

use crate::errors::Errors;
use crate::names::cpp_ident;
use quote::ToTokens;
use std::collections::HashSet;
use syn::{Block, Expr, Pat};

/// One parameter of a translated member function: its C++ type and its Rust pattern (a
/// name, `_`, or absent).
pub(crate) struct Param<'a> {
    pub(crate) cpp_type: &'static str,
    pub(crate) pat: Option<&'a Pat>,
}

/// The body of a translated member function.
pub(crate) enum Body<'a> {
    /// A Rust block, its tail expression the result.
    Block(&'a Block),
    /// A single Rust expression (the `identity = EXPR` of the function form).
    Expr(&'a Expr),
}

struct Binding {
    rust: String,
    cpp: String,
    /// Bound to an unsuffixed literal with no annotation: its C++ type is `cfm::FLit` or
    /// `cfm::ILit`, whose Rust type only the rest of the body decides.
    untyped: bool,
}

/// Translates bodies into C++, collecting every unsupported construct as a spanned error.
pub(crate) struct Translator {
    errors: Errors,
    scopes: Vec<Vec<Binding>>,
    declared: HashSet<String>,
    /// Inside an expression lambda: Rust's `return` cannot be expressed there.
    lambda_depth: usize,
    indent: usize,
    /// The member functions of the C++ struct, which hide fields of the same name in the
    /// struct of run-time parameters it derives from.
    members: &'static [&'static str],
}

/// A path as written (`a::b::c`), for messages.
fn path_name(p: &syn::Path) -> String {
    p.segments
        .iter()
        .map(|s| s.ident.to_string())
        .collect::<Vec<_>>()
        .join("::")
}

impl Translator {
    pub(crate) fn new() -> Self {
        Translator {
            errors: Errors::default(),
            scopes: Vec::new(),
            declared: HashSet::new(),
            lambda_depth: 0,
            indent: 0,
            members: &[],
        }
    }

    /// The names of the C++ struct's member functions (`identity`, `lift`, ...): a body
    /// that reads a parameter field of one of these names is refused, as C++ would hide
    /// the field behind the function.
    pub(crate) fn members(mut self, names: &'static [&'static str]) -> Self {
        self.members = names;
        self
    }

    /// All errors so far, combined, or `Ok`.
    pub(crate) fn finish(self) -> syn::Result<()> {
        self.errors.into_result()
    }

    fn error(&mut self, at: impl ToTokens, msg: impl std::fmt::Display) {
        self.errors.at(at, msg);
    }

    /// A C++ member function `__device__ RET NAME(PARAMS) const { BODY }`, indented for
    /// the inside of a struct. `self.field` in the body reads the field of the run-time
    /// parameters the struct derives from (`this->field`).
    pub(crate) fn function(&mut self, ret: &str, name: &str, params: &[Param], body: Body) -> Cpp {
        self.scopes = vec![Vec::new()];
        self.declared.clear();
        self.lambda_depth = 0;
        let mut out = Cpp::text(format!("    __device__ {ret} {name}("));
        for (i, p) in params.iter().enumerate() {
            if i > 0 {
                out.push(", ");
            }
            out.push(p.cpp_type);
            match p.pat {
                Some(Pat::Ident(id)) if id.by_ref.is_none() && id.subpat.is_none() => {
                    let cpp = self.declare(&id.ident.to_string(), false);
                    out.push(&format!(" {cpp}"));
                }
                Some(Pat::Wild(_)) | None => {}
                Some(other) => self.error(
                    other,
                    "only plain names (or `_`) are translated as parameters; destructure in the body instead",
                ),
            }
        }
        out.push(") const {");
        self.indent = 2;
        match body {
            Body::Block(b) => self.tail_block(b, &mut out),
            Body::Expr(e) => self.tail_expr(e, &mut out),
        }
        out.push("\n    }\n");
        out
    }

    /// Binds `rust` to a C++ name not yet used in this function (Rust may shadow; C++ may
    /// not redeclare in one scope, and `auto x = f(x);` would read the new `x`).
    fn declare(&mut self, rust: &str, untyped: bool) -> String {
        let cpp = self.fresh(rust);
        self.bind(rust, &cpp, untyped);
        cpp
    }

    fn fresh(&mut self, rust: &str) -> String {
        let base = cpp_ident(rust);
        let mut cpp = base.clone();
        let mut k = 2;
        while self.declared.contains(&cpp) {
            cpp = format!("{base}_{k}");
            k += 1;
        }
        self.declared.insert(cpp.clone());
        cpp
    }

    fn bind(&mut self, rust: &str, cpp: &str, untyped: bool) {
        self.scopes.last_mut().expect("a scope").push(Binding {
            rust: rust.to_string(),
            cpp: cpp.to_string(),
            untyped,
        });
    }

    fn lookup(&self, rust: &str) -> Option<&Binding> {
        self.scopes
            .iter()
            .rev()
            .flat_map(|s| s.iter().rev())
            .find(|b| b.rust == rust)
    }

    /// A statement separator: a new line at the current indentation, or a space inside
    /// a lambda (lambdas are written on one line).
    fn newline(&self, out: &mut Cpp) {
        if self.lambda_depth > 0 {
            out.push(" ");
        } else {
            out.push(&format!("\n{}", "    ".repeat(self.indent)));
        }
    }
}
