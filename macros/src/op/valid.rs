//! The checks of an operator: its signatures, arities and types, and the arguments its
//! form needs or refuses. Every problem is reported, at its span, before anything is
//! expanded.

use super::ast::{params, ImplFns};
use super::attr::Args;
use crate::errors::Errors;
use crate::names::{check_device_type, type_string};
use proc_macro2::TokenStream;
use quote::{quote, quote_spanned, ToTokens};
use syn::{Expr, FnArg, ImplItemFn, ItemFn, ItemImpl, Pat, ReturnType, Signature, Type};

/// A function-form operator with nothing to report: `fn name(a: T, b: T) -> T`.
pub(super) struct FnOp<'a> {
    pub(super) item: &'a ItemFn,
    /// Its two parameters.
    pub(super) params: Vec<(&'a Pat, &'a Type)>,
    /// The type of both arguments and the result: input, accumulator and output.
    pub(super) ty: Type,
    /// The `identity = EXPR` of the attribute.
    pub(super) identity: &'a Expr,
}

/// An impl-form operator with nothing to report, its types told by its functions.
pub(super) struct ImplOp<'a> {
    pub(super) item: &'a ItemImpl,
    /// The struct's name, for messages and the C++ name.
    pub(super) name: String,
    pub(super) identity: &'a ImplItemFn,
    pub(super) lift: Option<&'a ImplItemFn>,
    pub(super) combine: &'a ImplItemFn,
    pub(super) finish: Option<&'a ImplItemFn>,
    pub(super) in_ty: Type,
    pub(super) acc: Type,
    pub(super) out_ty: Type,
}

fn same_type(a: &Type, b: &Type) -> bool {
    a.to_token_stream().to_string() == b.to_token_stream().to_string()
}

pub(crate) fn ret_type(sig: &Signature, errors: &mut Errors) -> Option<Type> {
    match &sig.output {
        ReturnType::Type(_, t) => Some((**t).clone()),
        ReturnType::Default => {
            errors.at(
                sig,
                format!("`{}` must return a value: add `-> Type`", sig.ident),
            );
            None
        }
    }
}

/// Refuses what no operator function may have: generics, `async`, `unsafe`, ..., and any
/// receiver but `&self`, which only the impl form's functions may take (`self_ok`). `what`
/// is "operator" or "map", for the messages.
pub(crate) fn check_signature(sig: &Signature, self_ok: bool, what: &str, errors: &mut Errors) {
    if !sig.generics.params.is_empty() || sig.generics.where_clause.is_some() {
        errors.at(
            &sig.generics,
            format!("{what}s cannot be generic: write one per type"),
        );
    }
    if let Some(a) = &sig.asyncness {
        errors.at(a, format!("{what}s cannot be `async`"));
    }
    if let Some(u) = &sig.unsafety {
        errors.at(u, format!("{what}s cannot be `unsafe`"));
    }
    if let Some(v) = &sig.variadic {
        errors.at(v, format!("{what}s cannot be variadic"));
    }
    for arg in &sig.inputs {
        if let FnArg::Receiver(r) = arg {
            if self_ok {
                crate::params::check_receiver(r, what, errors);
            } else {
                errors.at(
                    r,
                    "operator functions take no `self`: they are called on the operator's values",
                );
            }
        }
    }
}

pub(crate) fn arity_span(sig: &Signature) -> TokenStream {
    let inputs = &sig.inputs;
    if inputs.is_empty() {
        let span = sig.paren_token.span.join();
        quote_spanned!(span=> ())
    } else {
        quote!(#inputs)
    }
}

pub(crate) fn check_u64(ty: &Type, what: &str, errors: &mut Errors) {
    if ty.to_token_stream().to_string() != "u64" {
        errors.at(ty, format!("the {what} is a `u64`"));
    }
}

/// Checks `#[op(identity = EXPR)] fn name(a: T, b: T) -> T { body }`, reporting to
/// `errors`; the operator, where there was nothing to report.
pub(super) fn fn_form<'a>(args: &'a Args, f: &'a ItemFn, errors: &mut Errors) -> Option<FnOp<'a>> {
    let sig = &f.sig;
    check_signature(sig, false, "operator", errors);
    let ps = params(sig);
    let ret = ret_type(sig, errors);
    if ps.len() != 2 {
        errors.at(
            arity_span(sig),
            format!(
                "an operator combines two values: `fn {}(a: T, b: T) -> T` (found {} argument{})",
                sig.ident,
                ps.len(),
                if ps.len() == 1 { "" } else { "s" }
            ),
        );
    }
    let ty = ps
        .first()
        .map(|(_, t)| (*t).clone())
        .or_else(|| ret.clone());
    if let Some(ty) = &ty {
        if let Err(e) = check_device_type(ty) {
            errors.push(e);
        }
        if let Some((_, t)) = ps.get(1) {
            if !same_type(t, ty) {
                errors.at(
                    t,
                    format!(
                        "both arguments of an operator have one type, the accumulator's: expected `{}` \
                         (the first argument's type)",
                        type_string(ty)
                    ),
                );
            }
        }
        if let Some(r) = &ret {
            if ps.len() == 2 && !same_type(r, ty) {
                errors.at(
                    r,
                    format!(
                        "an operator returns its arguments' type: expected `{}`",
                        type_string(ty)
                    ),
                );
            }
        }
    }
    if args.identity.is_none() {
        errors.at(
            quote!(#sig),
            format!(
                "missing `identity = EXPR`: the value `v` with `{0}(v, x) == x == {0}(x, v)`, \
                 as in #[cufold::op(identity = 0.0)]",
                sig.ident
            ),
        );
    }
    let (Some(ty), Some(identity), true, true) =
        (ty, &args.identity, ps.len() == 2, errors.is_empty())
    else {
        return None;
    };
    Some(FnOp {
        item: f,
        params: ps,
        ty,
        identity,
    })
}

/// Checks `#[op] impl Name { fn identity() -> A; fn lift(x: I, i: u64) -> A; fn combine(a: A,
/// b: A) -> A; fn finish(a: A, n: u64) -> O }`, reporting to `errors`; the operator, with
/// its types, where there was nothing to report.
pub(super) fn impl_form<'a>(
    args: &Args,
    imp: &'a ItemImpl,
    fns: ImplFns<'a>,
    errors: &mut Errors,
) -> Option<ImplOp<'a>> {
    if let Some(id) = &args.identity {
        errors.at(
            id,
            "in the impl form the identity is a function: write `fn identity() -> Acc { ... }` in the block",
        );
    }
    if let Some((_, path, _)) = &imp.trait_ {
        errors.at(
            path,
            "#[cufold::op] goes on an inherent `impl Name { ... }`, not a trait impl",
        );
    }
    if !imp.generics.params.is_empty() {
        errors.at(
            &imp.generics,
            "operators cannot be generic: write one per type",
        );
    }
    let self_ty = &imp.self_ty;
    let name = impl_struct_name(
        imp,
        "#[cufold::op] goes on the impl block of a struct, such as `impl LogSumExp`",
        errors,
    );
    for f in &fns.all {
        check_signature(&f.sig, true, "operator", errors);
    }
    let missing = |what: &str| format!("missing `{what}` in the operator's impl block");
    if fns.combine.is_none() {
        errors.at(self_ty, missing("fn combine(a: Acc, b: Acc) -> Acc"));
    }
    if fns.identity.is_none() {
        errors.at(self_ty, missing("fn identity() -> Acc"));
    }

    // The accumulator is combine's type; lift and finish relate it to In and Out.
    let mut acc = None;
    let mut acc_ok = true;
    if let Some(c) = fns.combine {
        let ps = params(&c.sig);
        let ret = ret_type(&c.sig, errors);
        if ps.len() != 2 {
            errors.at(
                arity_span(&c.sig),
                format!("`combine` combines two accumulators: `fn combine(a: Acc, b: Acc) -> Acc` (found {})", ps.len()),
            );
        }
        acc = ps.first().map(|(_, t)| (*t).clone()).or(ret.clone());
        // An accumulator that cannot be a device value is the one error: the other types
        // are not compared with it (`a: &f64` with `-> f64` is one mistake, not three).
        if let Some(Err(e)) = acc.as_ref().map(check_device_type) {
            errors.push(e);
            acc_ok = false;
        }
        if let (Some(a), true) = (&acc, acc_ok) {
            if let Some((_, t)) = ps.get(1) {
                if !same_type(t, a) {
                    errors.at(
                        t,
                        format!(
                            "both arguments of `combine` are accumulators: expected `{}`",
                            type_string(a)
                        ),
                    );
                }
            }
            if let (Some(r), 2) = (&ret, ps.len()) {
                if !same_type(r, a) {
                    errors.at(
                        r,
                        format!(
                            "`combine` returns an accumulator: expected `{}`",
                            type_string(a)
                        ),
                    );
                }
            }
        }
    }
    let expect_acc = |ty: &Type, what: &str, errors: &mut Errors| {
        if let (Some(a), true) = (&acc, acc_ok) {
            if !same_type(ty, a) {
                errors.at(
                    ty,
                    format!(
                        "{what} must be the accumulator type, `{}` (the type `combine` takes)",
                        type_string(a)
                    ),
                );
            }
        }
    };
    if let Some(f) = fns.identity {
        let ps = params(&f.sig);
        if !ps.is_empty() {
            errors.at(
                arity_span(&f.sig),
                "`identity` takes no arguments: `fn identity() -> Acc`",
            );
        }
        if let Some(r) = ret_type(&f.sig, errors) {
            expect_acc(&r, "`identity`'s return type", errors);
        }
    }
    let mut in_ty = acc.clone();
    if let Some(f) = fns.lift {
        let ps = params(&f.sig);
        if ps.is_empty() || ps.len() > 2 {
            errors.at(
                arity_span(&f.sig),
                format!("`lift` takes the input and, optionally, its index: `fn lift(x: In, index: u64) -> Acc` (found {} arguments)", ps.len()),
            );
        }
        if let Some((_, t)) = ps.get(1) {
            check_u64(t, "index of the input (`lift`'s second argument)", errors);
        }
        in_ty = ps.first().map(|(_, t)| (*t).clone());
        if let Some(r) = ret_type(&f.sig, errors) {
            expect_acc(&r, "`lift`'s return type", errors);
        }
    }
    let mut out_ty = acc.clone();
    if let Some(f) = fns.finish {
        let ps = params(&f.sig);
        if ps.is_empty() || ps.len() > 2 {
            errors.at(
                arity_span(&f.sig),
                format!("`finish` takes the accumulator and, optionally, the count: `fn finish(acc: Acc, n: u64) -> Out` (found {} arguments)", ps.len()),
            );
        }
        if let Some((_, t)) = ps.first() {
            expect_acc(t, "`finish`'s first argument", errors);
        }
        if let Some((_, t)) = ps.get(1) {
            check_u64(t, "count (`finish`'s second argument)", errors);
        }
        out_ty = ret_type(&f.sig, errors);
    }
    // The accumulator was checked above; the input and output types once each.
    let mut seen: Vec<String> = acc.iter().map(type_string).collect();
    for ty in [&in_ty, &out_ty].into_iter().flatten() {
        let key = type_string(ty);
        if seen.contains(&key) {
            continue;
        }
        seen.push(key);
        if let Err(e) = check_device_type(ty) {
            errors.push(e);
        }
    }

    let (Some(identity), Some(combine), Some(in_ty), Some(acc), Some(out_ty), true) = (
        fns.identity,
        fns.combine,
        in_ty,
        acc,
        out_ty,
        errors.is_empty(),
    ) else {
        return None;
    };
    Some(ImplOp {
        item: imp,
        name,
        identity,
        lift: fns.lift,
        combine,
        finish: fns.finish,
        in_ty,
        acc,
        out_ty,
    })
}

/// The name of the struct an impl block is on (`impl LogSumExp` -> "LogSumExp"), or an error
/// (`not_a_struct`) at the type and an empty name: the impl forms of `#[cufold::op]` and
/// `#[cufold::transform]` both need it.
pub(crate) fn impl_struct_name(imp: &ItemImpl, not_a_struct: &str, errors: &mut Errors) -> String {
    match &*imp.self_ty {
        Type::Path(p)
            if p.qself.is_none()
                && p.path
                    .segments
                    .last()
                    .is_some_and(|s| s.arguments.is_empty()) =>
        {
            p.path.segments.last().unwrap().ident.to_string()
        }
        other => {
            errors.at(other, not_a_struct);
            String::new()
        }
    }
}
