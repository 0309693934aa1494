//! Statements: blocks, `let` (with its type annotation), assignments, `if`/`else` as
//! statements, and `return`; a function's tail expression becomes its `return`.

use super::{path_name, Cpp, Translator};
use crate::names::primitive_cpp;
use quote::quote_spanned;
use syn::spanned::Spanned;
use syn::{BinOp, Block, Expr, Pat, Stmt, Type};

impl Translator {
    /// The statements of `b`, its tail expression returned.
    pub(super) fn tail_block(&mut self, b: &Block, out: &mut Cpp) {
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
    pub(super) fn tail_expr(&mut self, e: &Expr, out: &mut Cpp) {
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

    pub(super) fn condition(&mut self, c: &Expr) -> Cpp {
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
