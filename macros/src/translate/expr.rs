//! Expressions: literals and constants, unary and binary operators, casts, `if` and
//! blocks used as values, struct literals and fields.

use super::{path_name, Cpp, Translator};
use crate::names::{cpp_ident, primitive_cpp};
use quote::{quote, quote_spanned, ToTokens};
use syn::spanned::Spanned;
use syn::{BinOp, Block, Expr, Lit, Member, Stmt, Type, UnOp};

impl Translator {
    /// Whether `e`'s value is an untyped literal (or computed from such only), whose C++
    /// type is `cfm::FLit` / `cfm::ILit`.
    pub(super) fn is_untyped(&self, e: &Expr) -> bool {
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

    pub(super) fn untyped_shift(&mut self, left: &Expr) {
        self.error(
            left,
            "give this literal a suffix (`1u32 << n`): the type Rust infers for a shifted untyped \
             literal is not visible to the translation",
        );
    }

    /// The C++ expression of `e`. `expect` is the C++ type the value goes into, where known
    /// (it types the lambdas of block-valued expressions).
    pub(super) fn expr(&mut self, e: &Expr, expect: Option<&Cpp>) -> Cpp {
        match e {
            Expr::Lit(l) => self.lit(&l.lit, false),
            Expr::Path(p) if is_self(e) => {
                self.error(
                    p,
                    "`self` alone is not translated: a translated body reads the run-time parameters \
                     field by field, as `self.field`",
                );
                Cpp::default()
            }
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
            Expr::Field(f) if is_self(&f.base) => {
                let name = self.member(&f.member);
                if let Member::Named(id) = &f.member {
                    let rust = id.to_string();
                    if self.members.contains(&rust.as_str()) {
                        self.error(
                            &f.member,
                            format!(
                                "a parameter field named `{rust}` cannot be read in CUDA, where the \
                                 operator's function `{rust}` hides it: rename the field"
                            ),
                        );
                    }
                }
                Cpp::text(format!("this->{name}"))
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
            Expr::Index(ix) => {
                // `[T; N]` values (a Monte Carlo sample's draws) are `cf::Array<T, N>`.
                let mut base = Cpp::text("(");
                base.append(self.expr(&ix.expr, None));
                base.push(").v[(unsigned long long)(");
                base.append(self.expr(&ix.index, None));
                base.push(")]");
                base
            }
            Expr::Array(_) | Expr::Repeat(_) => {
                self.error(
                    e,
                    "array values are not translated: read the elements of an array input \
                     (`x[0]`), or use a struct with named fields",
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

    /// The C++ type of a struct literal and its fields' values, in the order written;
    /// `var` is the local the fields are assigned to (it types block-valued fields).
    pub(super) fn struct_parts(
        &mut self,
        s: &syn::ExprStruct,
        var: &str,
    ) -> (Cpp, Vec<(String, Cpp)>) {
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

    pub(super) fn member(&mut self, m: &Member) -> String {
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
}

/// Whether `e` is `self` (in parentheses or not).
pub(super) fn is_self(e: &Expr) -> bool {
    match e {
        Expr::Path(p) => p.qself.is_none() && p.path.is_ident("self"),
        Expr::Paren(p) => is_self(&p.expr),
        Expr::Group(g) => is_self(&g.expr),
        _ => false,
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
