//! The translation of an operator's Rust body into CUDA C++.
//!
//! Every Rust operator and method becomes a call of a helper in the C++ namespace `cfm`
//! (src/macro_support.cuh in cufold), so that C++ overload resolution, which sees the
//! types, gives each the meaning Rust gives it; the macro only has to respect the syntax.
//! The output is a list of pieces: C++ text, and Rust expressions evaluated when the
//! operator's source is built (the C++ names of user types, exact literals of constants).
//!
//! Control flow: a function's tail `if`/`else` becomes C++ `if`/`else` with `return`s;
//! an `if` used as a value becomes `c ? a : b` when its branches are single expressions
//! and an immediately invoked lambda otherwise; struct literals become a local that is
//! assigned field by field. Rust's shadowing becomes fresh C++ names.

use crate::errors::Errors;
use crate::names::{cpp_ident, primitive_cpp, value_type_cpp};
use proc_macro2::TokenStream;
use quote::{quote, quote_spanned, ToTokens};
use std::collections::HashSet;
use syn::spanned::Spanned;
use syn::{BinOp, Block, Expr, Lit, Member, Pat, Stmt, Type, UnOp};

/// A piece of the generated C++: text, or Rust code that evaluates to a `String`.
enum Piece {
    Text(String),
    Code(TokenStream),
}

/// C++ source under construction.
#[derive(Default)]
pub(crate) struct Cpp(Vec<Piece>);

impl Cpp {
    pub(crate) fn text(s: impl Into<String>) -> Cpp {
        let mut c = Cpp::default();
        c.push(&s.into());
        c
    }

    fn push(&mut self, s: &str) {
        if let Some(Piece::Text(t)) = self.0.last_mut() {
            t.push_str(s);
        } else {
            self.0.push(Piece::Text(s.to_string()));
        }
    }

    fn code(&mut self, ts: TokenStream) {
        self.0.push(Piece::Code(ts));
    }

    fn append(&mut self, other: Cpp) {
        for p in other.0 {
            match p {
                Piece::Text(t) => self.push(&t),
                Piece::Code(c) => self.code(c),
            }
        }
    }

    fn cloned(&self) -> Cpp {
        let mut c = Cpp::default();
        for p in &self.0 {
            match p {
                Piece::Text(t) => c.push(t),
                Piece::Code(t) => c.code(t.clone()),
            }
        }
        c
    }

    /// A Rust expression that builds this text as a `String`.
    pub(crate) fn build(&self) -> TokenStream {
        let pushes = self.0.iter().map(|p| match p {
            Piece::Text(t) => quote!(__cufold_s.push_str(#t);),
            Piece::Code(c) => quote!(__cufold_s.push_str(&#c);),
        });
        quote!({
            let mut __cufold_s = ::std::string::String::new();
            #(#pushes)*
            __cufold_s
        })
    }
}

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
}

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

fn supported_methods() -> String {
    let list = |m: &[(&str, usize)]| m.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ");
    format!(
        "float methods: {}; integer methods: {} (and abs, signum, min, max, clamp, rem_euclid, div_euclid)",
        list(FLOAT_METHODS),
        list(INT_METHODS)
    )
}

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
        }
    }

    /// All errors so far, combined, or `Ok`.
    pub(crate) fn finish(self) -> syn::Result<()> {
        self.errors.into_result()
    }

    fn error(&mut self, at: impl ToTokens, msg: impl std::fmt::Display) {
        self.errors.at(at, msg);
    }

    /// A C++ member function `__device__ RET NAME(PARAMS) const { BODY }`, indented for
    /// the inside of a struct.
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

    // ---- scopes ---------------------------------------------------------------------

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

    // ---- statements -----------------------------------------------------------------

    /// The statements of `b`, its tail expression returned.
    fn tail_block(&mut self, b: &Block, out: &mut Cpp) {
        self.scopes.push(Vec::new());
        let n = b.stmts.len();
        for (i, s) in b.stmts.iter().enumerate() {
            match s {
                Stmt::Expr(e, None) if i + 1 == n => self.tail_expr(e, out),
                _ => self.stmt(s, out),
            }
        }
        self.scopes.pop();
    }

    /// Statements that return the value of `e`.
    fn tail_expr(&mut self, e: &Expr, out: &mut Cpp) {
        match e {
            Expr::If(i) if i.else_branch.is_some() => self.if_stmt(i, out, true),
            Expr::Block(b) if b.label.is_none() => {
                self.newline(out);
                out.push("{");
                self.indent += 1;
                self.tail_block(&b.block, out);
                self.indent -= 1;
                self.newline(out);
                out.push("}");
            }
            Expr::Return(_) => self.stmt_expr(e, out),
            Expr::Struct(s) if s.rest.is_none() && s.qself.is_none() => {
                let (ty, fields) = self.struct_parts(s, "cfm_s");
                self.newline(out);
                out.append(ty);
                out.push(" cfm_s;");
                for (name, value) in fields {
                    self.newline(out);
                    out.push(&format!("cfm_s.{name} = "));
                    out.append(value);
                    out.push(";");
                }
                self.newline(out);
                out.push("return cfm_s;");
            }
            Expr::Paren(p) => self.tail_expr(&p.expr, out),
            _ => {
                let v = self.expr(e, None);
                self.newline(out);
                out.push("return ");
                out.append(v);
                out.push(";");
            }
        }
    }

    /// `if`/`else` as C++ statements; in tail position each branch returns its value.
    fn if_stmt(&mut self, i: &syn::ExprIf, out: &mut Cpp, tail: bool) {
        let cond = self.condition(&i.cond);
        self.newline(out);
        out.push("if (");
        out.append(cond);
        out.push(") {");
        self.branch(&i.then_branch, out, tail);
        let mut next = i.else_branch.as_ref().map(|(_, e)| &**e);
        while let Some(e) = next {
            match e {
                Expr::If(elif) => {
                    let cond = self.condition(&elif.cond);
                    self.newline(out);
                    out.push("} else if (");
                    out.append(cond);
                    out.push(") {");
                    self.branch(&elif.then_branch, out, tail);
                    next = elif.else_branch.as_ref().map(|(_, e)| &**e);
                }
                Expr::Block(b) => {
                    self.newline(out);
                    out.push("} else {");
                    self.branch(&b.block, out, tail);
                    next = None;
                }
                other => {
                    self.error(other, "expected a block after `else`");
                    next = None;
                }
            }
        }
        self.newline(out);
        out.push("}");
    }

    fn branch(&mut self, b: &Block, out: &mut Cpp, tail: bool) {
        self.indent += 1;
        if tail {
            self.tail_block(b, out);
        } else {
            self.stmt_block(b, out);
        }
        self.indent -= 1;
    }

    fn condition(&mut self, c: &Expr) -> Cpp {
        if let Expr::Let(l) = c {
            self.error(
                l,
                "`if let` is not translated: test the value with a comparison",
            );
            return Cpp::default();
        }
        self.expr(c, None)
    }

    /// A block whose value is not used.
    fn stmt_block(&mut self, b: &Block, out: &mut Cpp) {
        self.scopes.push(Vec::new());
        for s in &b.stmts {
            self.stmt(s, out);
        }
        self.scopes.pop();
    }

    fn stmt(&mut self, s: &Stmt, out: &mut Cpp) {
        match s {
            Stmt::Local(l) => self.local(l, out),
            Stmt::Expr(e, _) => self.stmt_expr(e, out),
            Stmt::Item(item) => self.error(
                item,
                "items inside an operator's body are not translated: move it out of the function \
                 (constants at module level can be used)",
            ),
            Stmt::Macro(m) => self.error(
                &m.mac,
                format!(
                    "macros are not translated (`{}!`): an operator's body is plain expressions",
                    path_name(&m.mac.path)
                ),
            ),
        }
    }

    fn local(&mut self, l: &syn::Local, out: &mut Cpp) {
        let Some(init) = &l.init else {
            self.error(
                l,
                "a `let` without a value is not translated: initialise it",
            );
            return;
        };
        if let Some((_, diverge)) = &init.diverge {
            self.error(diverge, "`let ... else` is not translated");
            return;
        }
        let (pat, ty) = match &l.pat {
            Pat::Type(t) => (&*t.pat, Some(&*t.ty)),
            p => (p, None),
        };
        let cpp_ty = ty.map(|t| self.type_name(t));
        match pat {
            Pat::Wild(_) => {
                let v = self.expr(&init.expr, cpp_ty.as_ref());
                self.newline(out);
                out.push("(void)(");
                out.append(v);
                out.push(");");
            }
            Pat::Ident(id) if id.by_ref.is_none() && id.subpat.is_none() => {
                let name = id.ident.to_string();
                let untyped = ty.is_none() && self.is_untyped(&init.expr);
                if untyped && id.mutability.is_some() {
                    self.error(
                        l,
                        format!(
                            "give `{name}` its type (`let mut {name}: u64 = ...`) or the literal a suffix \
                             (`0u64`, `0.0f32`): the type Rust infers for a mutable binding of an \
                             untyped literal is not visible to the translation"
                        ),
                    );
                }
                if let (Expr::Struct(s), None) = (&*init.expr, ty) {
                    if s.rest.is_none() && s.qself.is_none() {
                        let cpp = self.fresh(&name);
                        let (sty, fields) = self.struct_parts(s, &cpp);
                        self.bind(&name, &cpp, false);
                        self.newline(out);
                        out.append(sty);
                        out.push(&format!(" {cpp};"));
                        for (field, value) in fields {
                            self.newline(out);
                            out.push(&format!("{cpp}.{field} = "));
                            out.append(value);
                            out.push(";");
                        }
                        return;
                    }
                }
                let v = self.expr(&init.expr, cpp_ty.as_ref());
                let cpp = self.declare(&name, untyped);
                self.newline(out);
                match cpp_ty {
                    Some(t) => out.append(t),
                    None => out.push("auto"),
                }
                out.push(&format!(" {cpp} = "));
                out.append(v);
                out.push(";");
            }
            other => self.error(
                other,
                "only `let name = ...` (optionally `mut`, optionally typed) is translated, not patterns",
            ),
        }
    }

    /// An expression used as a statement.
    fn stmt_expr(&mut self, e: &Expr, out: &mut Cpp) {
        match e {
            Expr::If(i) => self.if_stmt(i, out, false),
            Expr::Block(b) if b.label.is_none() => {
                self.newline(out);
                out.push("{");
                self.indent += 1;
                self.stmt_block(&b.block, out);
                self.indent -= 1;
                self.newline(out);
                out.push("}");
            }
            Expr::Return(r) => {
                if self.lambda_depth > 0 {
                    self.error(
                        r,
                        "`return` inside a block used as a value is not translated: make the value \
                         the block's last expression",
                    );
                    return;
                }
                let Some(v) = &r.expr else {
                    self.error(r, "an operator function returns a value");
                    return;
                };
                let v = self.expr(v, None);
                self.newline(out);
                out.push("return ");
                out.append(v);
                out.push(";");
            }
            Expr::Assign(a) => {
                let place = self.place(&a.left);
                let v = self.expr(&a.right, None);
                self.newline(out);
                out.append(place);
                out.push(" = ");
                out.append(v);
                out.push(";");
            }
            Expr::Binary(b) if compound(&b.op).is_some() => {
                let f = compound(&b.op).unwrap();
                if matches!(f, "shl" | "shr") && self.is_untyped(&b.left) {
                    self.untyped_shift(&b.left);
                }
                let place = self.place(&b.left);
                let again = place.cloned();
                let v = self.expr(&b.right, None);
                self.newline(out);
                out.append(place);
                out.push(&format!(" = cfm::{f}("));
                out.append(again);
                out.push(", ");
                out.append(v);
                out.push(");");
            }
            _ => {
                let v = self.expr(e, None);
                self.newline(out);
                out.push("(void)(");
                out.append(v);
                out.push(");");
            }
        }
    }

    /// The target of an assignment: a local, or a field of one.
    fn place(&mut self, e: &Expr) -> Cpp {
        match e {
            Expr::Path(p) if p.path.get_ident().is_some() => self.expr(e, None),
            Expr::Field(f) => {
                let mut base = self.place(&f.base);
                base.push(".");
                base.push(&self.member(&f.member));
                base
            }
            Expr::Paren(p) => self.place(&p.expr),
            other => {
                self.error(other, "only locals and their fields can be assigned");
                Cpp::default()
            }
        }
    }

    fn member(&mut self, m: &Member) -> String {
        match m {
            Member::Named(id) => cpp_ident(&id.to_string()),
            Member::Unnamed(i) => {
                self.error(
                    i,
                    "tuple fields (`.0`) are not translated: tuples and tuple structs have no CUDA twin; \
                     use named fields",
                );
                String::new()
            }
        }
    }

    // ---- types ----------------------------------------------------------------------

    /// The C++ name of a type annotation: primitives by name, other types through their
    /// `DeviceValue::cuda_name()` when the source is built.
    fn type_name(&mut self, ty: &Type) -> Cpp {
        if let Type::Path(p) = ty {
            if let Some(id) = p.path.get_ident() {
                if let Some(c) = primitive_cpp(&id.to_string()) {
                    return Cpp::text(c);
                }
            }
        }
        if let Err(e) = crate::names::check_device_type(ty) {
            self.errors.push(e);
            return Cpp::default();
        }
        let mut c = Cpp::default();
        c.code(quote_spanned!(ty.span()=> ::cufold::__private::cuda_name::<#ty>()));
        c
    }

    /// The C++ type of a struct literal and its fields' values, in the order written;
    /// `var` is the local the fields are assigned to (it types block-valued fields).
    fn struct_parts(&mut self, s: &syn::ExprStruct, var: &str) -> (Cpp, Vec<(String, Cpp)>) {
        let path = &s.path;
        let mut ty = Cpp::default();
        ty.code(quote_spanned!(path.span()=> ::cufold::__private::cuda_name::<#path>()));
        let mut fields = Vec::new();
        for f in &s.fields {
            let name = self.member(&f.member);
            let expect = Cpp::text(format!("decltype({var}.{name})"));
            let v = self.expr(&f.expr, Some(&expect));
            fields.push((name, v));
        }
        (ty, fields)
    }

    // ---- expressions ----------------------------------------------------------------

    /// Whether `e`'s value is an untyped literal (or computed from such only), whose C++
    /// type is `cfm::FLit` / `cfm::ILit`.
    fn is_untyped(&self, e: &Expr) -> bool {
        match e {
            Expr::Lit(l) => match &l.lit {
                Lit::Float(f) => f.suffix().is_empty(),
                Lit::Int(i) => i.suffix().is_empty(),
                _ => false,
            },
            Expr::Unary(u) => !matches!(u.op, UnOp::Deref(_)) && self.is_untyped(&u.expr),
            Expr::Binary(b) => match b.op {
                BinOp::Add(_)
                | BinOp::Sub(_)
                | BinOp::Mul(_)
                | BinOp::Div(_)
                | BinOp::Rem(_)
                | BinOp::BitAnd(_)
                | BinOp::BitOr(_)
                | BinOp::BitXor(_) => self.is_untyped(&b.left) && self.is_untyped(&b.right),
                _ => false,
            },
            Expr::Paren(p) => self.is_untyped(&p.expr),
            Expr::Group(g) => self.is_untyped(&g.expr),
            Expr::Path(p) => p
                .path
                .get_ident()
                .and_then(|id| self.lookup(&id.to_string()))
                .is_some_and(|b| b.untyped),
            Expr::If(_) | Expr::Block(_) => {
                let mut tails = Vec::new();
                tails_of(e, &mut tails);
                !tails.is_empty() && tails.iter().all(|t| self.is_untyped(t))
            }
            _ => false,
        }
    }

    fn untyped_shift(&mut self, left: &Expr) {
        self.error(
            left,
            "give this literal a suffix (`1u32 << n`): the type Rust infers for a shifted untyped \
             literal is not visible to the translation",
        );
    }

    /// The C++ expression of `e`. `expect` is the C++ type the value goes into, where known
    /// (it types the lambdas of block-valued expressions).
    fn expr(&mut self, e: &Expr, expect: Option<&Cpp>) -> Cpp {
        match e {
            Expr::Lit(l) => self.lit(&l.lit, false),
            Expr::Path(p) => {
                if p.qself.is_some() {
                    self.error(p, "qualified paths (`<T as Trait>::X`) are not translated");
                    return Cpp::default();
                }
                if let Some(id) = p.path.get_ident() {
                    if let Some(b) = self.lookup(&id.to_string()) {
                        return Cpp::text(b.cpp.clone());
                    }
                }
                // A constant: its value, printed exactly, when the source is built.
                let path = &p.path;
                let mut c = Cpp::default();
                c.code(quote_spanned!(path.span()=>
                    ::cufold::__private::CudaLiteral::cuda_literal(&(#path))));
                c
            }
            Expr::Field(f) => {
                let mut base = self.expr(&f.base, None);
                base.push(".");
                base.push(&self.member(&f.member));
                base
            }
            Expr::Struct(s) => {
                if let Some(rest) = &s.rest {
                    self.error(
                        rest,
                        "struct update syntax (`..base`) is not translated: write every field",
                    );
                    return Cpp::default();
                }
                if s.qself.is_some() {
                    self.error(&s.path, "qualified paths are not translated");
                    return Cpp::default();
                }
                self.lambda_depth += 1;
                let (ty, fields) = self.struct_parts(s, "cfm_s");
                self.lambda_depth -= 1;
                let mut c = Cpp::text("[&]() { ");
                c.append(ty);
                c.push(" cfm_s;");
                for (name, value) in fields {
                    c.push(&format!(" cfm_s.{name} = "));
                    c.append(value);
                    c.push(";");
                }
                c.push(" return cfm_s; }()");
                c
            }
            // Every operator becomes a call (and `&&`, `||`, `?:` are parenthesized), so
            // Rust's grouping parentheses have nothing left to group.
            Expr::Paren(p) => self.expr(&p.expr, expect),
            Expr::Group(g) => self.expr(&g.expr, expect),
            Expr::Unary(u) => self.unary(u),
            Expr::Binary(b) => self.binary(b),
            Expr::Cast(c) => {
                let target = match &*c.ty {
                    Type::Path(p) => p.path.get_ident().map(|i| i.to_string()),
                    _ => None,
                };
                let cpp = target
                    .as_deref()
                    .filter(|t| *t != "bool")
                    .and_then(primitive_cpp);
                let Some(cpp) = cpp else {
                    self.error(
                        &c.ty,
                        "`as` is translated to f32, f64, i8, i16, i32, i64, u8, u16, u32 and u64 \
                         (usize and isize have the host's width: use u64 or i64)",
                    );
                    return Cpp::default();
                };
                let mut out = Cpp::text(format!("cfm::cast<{cpp}>("));
                out.append(self.expr(&c.expr, None));
                out.push(")");
                out
            }
            Expr::MethodCall(m) => self.method_call(m),
            Expr::Call(c) => self.call(c),
            Expr::If(i) => self.if_expr(e, i, expect),
            Expr::Block(b) => {
                if let Some(l) = &b.label {
                    self.error(l, "labeled blocks are not translated");
                    return Cpp::default();
                }
                match b.block.stmts.as_slice() {
                    [Stmt::Expr(inner, None)] => self.expr(inner, expect),
                    _ => self.lambda(e, expect),
                }
            }
            Expr::Unsafe(u) => {
                self.error(u.unsafe_token, "`unsafe` blocks are not translated");
                Cpp::default()
            }
            Expr::Assign(_) => {
                self.error(e, "an assignment is a statement here: end it with `;`");
                Cpp::default()
            }
            Expr::Return(_) => {
                self.error(
                    e,
                    "`return` is translated only as a statement of the function's body (`return x;`), \
                     not inside an expression",
                );
                Cpp::default()
            }
            Expr::Closure(c) => {
                self.error(
                    c.or1_token,
                    "closures are not translated: write the expression inline",
                );
                Cpp::default()
            }
            Expr::Loop(l) => self.no_loops(l.loop_token),
            Expr::While(w) => self.no_loops(w.while_token),
            Expr::ForLoop(f) => self.no_loops(f.for_token),
            Expr::Match(m) => {
                self.error(
                    m.match_token,
                    "`match` is not translated: use `if` / `else`",
                );
                Cpp::default()
            }
            Expr::Macro(m) => {
                self.error(
                    &m.mac,
                    format!(
                        "macros are not translated (`{}!`): an operator's body is plain expressions",
                        path_name(&m.mac.path)
                    ),
                );
                Cpp::default()
            }
            Expr::Reference(r) => {
                self.error(
                    r.and_token,
                    "references are not translated: operators take and return values",
                );
                Cpp::default()
            }
            Expr::Tuple(t) => {
                self.error(
                    t,
                    "tuples are not translated: use a #[repr(C)] struct with #[derive(cufold::DeviceType)]",
                );
                Cpp::default()
            }
            Expr::Array(_) | Expr::Repeat(_) | Expr::Index(_) => {
                self.error(
                    e,
                    "arrays and indexing are not translated: use a struct with named fields",
                );
                Cpp::default()
            }
            Expr::Try(t) => {
                self.error(
                    t.question_token,
                    "`?` is not translated: operators cannot fail",
                );
                Cpp::default()
            }
            Expr::Let(l) => {
                self.error(l, "`let` conditions are not translated");
                Cpp::default()
            }
            Expr::Range(r) => {
                self.error(r, "ranges are not translated");
                Cpp::default()
            }
            _ => {
                self.error(e, "this kind of expression is not translated to CUDA");
                Cpp::default()
            }
        }
    }

    fn no_loops(&mut self, at: impl ToTokens) -> Cpp {
        self.error(
            at,
            "loops are not translated: an operator combines two values in straight-line code \
             (`if`/`else` is fine); the reduction tree does the looping",
        );
        Cpp::default()
    }

    fn lit(&mut self, lit: &Lit, negate: bool) -> Cpp {
        let mut c = Cpp::default();
        match lit {
            Lit::Bool(b) => c.push(if b.value { "true" } else { "false" }),
            Lit::Float(f) if f.suffix().is_empty() => {
                let digits = f.base10_digits();
                let (Ok(v32), Ok(v64)) = (digits.parse::<f32>(), digits.parse::<f64>()) else {
                    self.error(f, "this float literal cannot be read");
                    return c;
                };
                let (v32, v64) = if negate { (-v32, -v64) } else { (v32, v64) };
                let (b32, b64) = (v32.to_bits(), v64.to_bits());
                c.code(quote!(::cufold::__private::flit(#b32, #b64)));
            }
            Lit::Int(i) if i.suffix().is_empty() => match i.base10_parse::<u64>() {
                Ok(v) => {
                    let text = quote!(::cufold::__private::ilit(#v));
                    if negate {
                        c.push("cfm::neg(");
                        c.code(text);
                        c.push(")");
                    } else {
                        c.code(text);
                    }
                }
                Err(_) => self.error(i, "integer literals above u64::MAX are not translated"),
            },
            Lit::Float(_) | Lit::Int(_) => {
                let suffix = match lit {
                    Lit::Float(f) => f.suffix(),
                    Lit::Int(i) => i.suffix(),
                    _ => unreachable!(),
                };
                if matches!(suffix, "usize" | "isize" | "i128" | "u128") {
                    self.error(
                        lit,
                        format!("`{suffix}` literals are not translated: use u64 or i64"),
                    );
                    return c;
                }
                let value = if negate { quote!(-#lit) } else { quote!(#lit) };
                c.code(quote_spanned!(lit.span()=>
                    ::cufold::__private::CudaLiteral::cuda_literal(&(#value))));
            }
            _ => self.error(lit, "only number and bool literals are translated"),
        }
        c
    }

    fn unary(&mut self, u: &syn::ExprUnary) -> Cpp {
        match u.op {
            UnOp::Neg(_) => {
                if let Expr::Lit(l) = &*u.expr {
                    if matches!(l.lit, Lit::Float(_) | Lit::Int(_)) {
                        return self.lit(&l.lit, true);
                    }
                }
                let mut c = Cpp::text("cfm::neg(");
                c.append(self.expr(&u.expr, None));
                c.push(")");
                c
            }
            UnOp::Not(_) => {
                let mut c = Cpp::text("cfm::not_(");
                c.append(self.expr(&u.expr, None));
                c.push(")");
                c
            }
            _ => {
                self.error(
                    u,
                    "references are not translated: operators take and return values",
                );
                Cpp::default()
            }
        }
    }

    fn binary(&mut self, b: &syn::ExprBinary) -> Cpp {
        let f = match b.op {
            BinOp::And(_) | BinOp::Or(_) => {
                let op = if matches!(b.op, BinOp::And(_)) {
                    " && "
                } else {
                    " || "
                };
                let mut c = Cpp::text("(");
                c.append(self.expr(&b.left, None));
                c.push(op);
                c.append(self.expr(&b.right, None));
                c.push(")");
                return c;
            }
            BinOp::Add(_) => "add",
            BinOp::Sub(_) => "sub",
            BinOp::Mul(_) => "mul",
            BinOp::Div(_) => "div",
            BinOp::Rem(_) => "rem",
            BinOp::BitAnd(_) => "bit_and",
            BinOp::BitOr(_) => "bit_or",
            BinOp::BitXor(_) => "bit_xor",
            BinOp::Shl(_) => "shl",
            BinOp::Shr(_) => "shr",
            BinOp::Eq(_) => "eq",
            BinOp::Ne(_) => "ne",
            BinOp::Lt(_) => "lt",
            BinOp::Le(_) => "le",
            BinOp::Gt(_) => "gt",
            BinOp::Ge(_) => "ge",
            _ => {
                self.error(b, "an assignment is a statement here: end it with `;`");
                return Cpp::default();
            }
        };
        if matches!(f, "shl" | "shr") && self.is_untyped(&b.left) {
            self.untyped_shift(&b.left);
        }
        let mut c = Cpp::text(format!("cfm::{f}("));
        c.append(self.expr(&b.left, None));
        c.push(", ");
        c.append(self.expr(&b.right, None));
        c.push(")");
        c
    }

    fn method_call(&mut self, m: &syn::ExprMethodCall) -> Cpp {
        let name = m.method.to_string();
        if let Some(t) = &m.turbofish {
            self.error(t, "turbofish method calls are not translated");
            return Cpp::default();
        }
        match method_arity(&name) {
            None => {
                self.error(
                    &m.method,
                    format!(
                        "the method `{name}` is not translated to CUDA; supported are the {}",
                        supported_methods()
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
    fn call(&mut self, c: &syn::ExprCall) -> Cpp {
        let unsupported = |t: &mut Self, at: &dyn ToTokens, what: String| {
            t.error(
                at,
                format!(
                    "{what} is not translated to CUDA: a translated body calls only the methods of \
                     the number types (as `x.sqrt()` or `f32::sqrt(x)`), `T::from(x)`, \
                     `T::from_bits(b)` and `f16::from_f32(x)` / `bf16::from_f32(x)`; the {}",
                    supported_methods()
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
            _ => return unsupported(self, &p.path, format!("the function `{name}`")),
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

    /// An `if` used as a value: a conditional expression when every branch is a single
    /// expression, else a lambda.
    fn if_expr(&mut self, whole: &Expr, i: &syn::ExprIf, expect: Option<&Cpp>) -> Cpp {
        if i.else_branch.is_none() {
            self.error(
                i.if_token,
                "an `if` without `else` has no value: add an `else` branch",
            );
            return Cpp::default();
        }
        if !simple_if(whole) {
            return self.lambda(whole, expect);
        }
        let cond = self.condition(&i.cond);
        let then = match i.then_branch.stmts.as_slice() {
            [Stmt::Expr(e, None)] => self.expr(e, expect),
            _ => unreachable!("checked by simple_if"),
        };
        let otherwise = match i.else_branch.as_ref().map(|(_, e)| &**e) {
            Some(Expr::If(elif)) => {
                self.if_expr(i.else_branch.as_ref().unwrap().1.as_ref(), elif, expect)
            }
            Some(Expr::Block(b)) => match b.block.stmts.as_slice() {
                [Stmt::Expr(e, None)] => self.expr(e, expect),
                _ => unreachable!("checked by simple_if"),
            },
            _ => unreachable!("checked by simple_if"),
        };
        let mut c = Cpp::text("(");
        c.append(cond);
        c.push(" ? ");
        c.append(then);
        c.push(" : ");
        c.append(otherwise);
        c.push(")");
        c
    }

    /// A block-valued expression as an immediately invoked lambda. Without a known result
    /// type, C++ deduces it from the `return`s, which must then agree: a branch of untyped
    /// literals beside a typed one is refused.
    fn lambda(&mut self, e: &Expr, expect: Option<&Cpp>) -> Cpp {
        if expect.is_none() {
            let mut tails = Vec::new();
            tails_of(e, &mut tails);
            let untyped: Vec<bool> = tails.iter().map(|t| self.is_untyped(t)).collect();
            if untyped.iter().any(|&u| u) && !untyped.iter().all(|&u| u) {
                let at = tails[untyped.iter().position(|&u| u).unwrap()];
                let (lit, ty) = if contains_float_literal(at) {
                    ("0.0f32", "f32")
                } else {
                    ("0u64", "u64")
                };
                self.error(
                    at,
                    format!(
                        "give this literal a suffix (`{lit}`) or the binding a type (`let x: {ty} = ...`): \
                         the branches of this block-valued `if` need one C++ type"
                    ),
                );
            }
        }
        let mut c = Cpp::text("[&]()");
        if let Some(t) = expect {
            c.push(" -> ");
            c.append(t.cloned());
        }
        c.push(" {");
        self.lambda_depth += 1;
        match e {
            Expr::Block(b) => self.tail_block(&b.block, &mut c),
            _ => self.tail_expr(e, &mut c),
        }
        self.lambda_depth -= 1;
        c.push(" }()");
        c
    }
}

/// Whether an untyped expression is made of float literals (else integer ones).
fn contains_float_literal(e: &Expr) -> bool {
    match e {
        Expr::Lit(l) => matches!(l.lit, Lit::Float(_)),
        Expr::Unary(u) => contains_float_literal(&u.expr),
        Expr::Binary(b) => contains_float_literal(&b.left),
        Expr::Paren(p) => contains_float_literal(&p.expr),
        Expr::Group(g) => contains_float_literal(&g.expr),
        _ => false,
    }
}

/// The compound assignment operators and their helpers.
fn compound(op: &BinOp) -> Option<&'static str> {
    Some(match op {
        BinOp::AddAssign(_) => "add",
        BinOp::SubAssign(_) => "sub",
        BinOp::MulAssign(_) => "mul",
        BinOp::DivAssign(_) => "div",
        BinOp::RemAssign(_) => "rem",
        BinOp::BitAndAssign(_) => "bit_and",
        BinOp::BitOrAssign(_) => "bit_or",
        BinOp::BitXorAssign(_) => "bit_xor",
        BinOp::ShlAssign(_) => "shl",
        BinOp::ShrAssign(_) => "shr",
        _ => return None,
    })
}

/// Whether an `if` (with `else`) has single-expression branches all the way down its
/// `else if` chain.
fn simple_if(e: &Expr) -> bool {
    match e {
        Expr::If(i) => {
            matches!(i.then_branch.stmts.as_slice(), [Stmt::Expr(_, None)])
                && match i.else_branch.as_ref().map(|(_, e)| &**e) {
                    Some(e @ Expr::If(_)) => simple_if(e),
                    Some(Expr::Block(b)) => {
                        matches!(b.block.stmts.as_slice(), [Stmt::Expr(_, None)])
                    }
                    _ => false,
                }
        }
        _ => false,
    }
}

/// The expressions a block-valued expression can yield (its branches' tails).
fn tails_of<'a>(e: &'a Expr, out: &mut Vec<&'a Expr>) {
    match e {
        Expr::If(i) => {
            tails_of_block(&i.then_branch, out);
            if let Some((_, e)) = &i.else_branch {
                tails_of(e, out);
            }
        }
        Expr::Block(b) => tails_of_block(&b.block, out),
        Expr::Paren(p) => tails_of(&p.expr, out),
        other => out.push(other),
    }
}

fn tails_of_block<'a>(b: &'a Block, out: &mut Vec<&'a Expr>) {
    if let Some(Stmt::Expr(e, None)) = b.stmts.last() {
        tails_of(e, out);
    }
}
