//! `#[cufold::op]`: an operator's Rust half as written, its CUDA half translated.

use crate::errors::Errors;
use crate::names::check_device_type;
use crate::translate::{Body, Cpp, Param, Translator};
use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned, ToTokens};
use syn::parse::{Parse, ParseStream};
use syn::{
    Expr, FnArg, ImplItem, ImplItemFn, Item, ItemFn, ItemImpl, Pat, ReturnType, Signature, Token,
    Type,
};

/// The attribute's arguments: `identity = EXPR`, `commutative`, `empty = error`.
struct Args {
    identity: Option<Expr>,
    commutative: bool,
    empty_is_error: bool,
}

impl Parse for Args {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let mut args = Args {
            identity: None,
            commutative: false,
            empty_is_error: false,
        };
        let mut errors = Errors::default();
        while !input.is_empty() {
            let key: syn::Ident = input.parse()?;
            match key.to_string().as_str() {
                "identity" => {
                    input.parse::<Token![=]>()?;
                    args.identity = Some(input.parse()?);
                }
                "commutative" => args.commutative = true,
                "empty" => {
                    input.parse::<Token![=]>()?;
                    let v: syn::Ident = input.parse()?;
                    if v == "error" {
                        args.empty_is_error = true;
                    } else {
                        errors.push(syn::Error::new(
                            v.span(),
                            "`empty = error` is the one choice: an empty input is an EmptyInput error \
                             (without it, an empty input gives finish(identity, 0))",
                        ));
                    }
                }
                other => errors.push(syn::Error::new(
                    key.span(),
                    format!(
                        "unknown argument `{other}`: #[cufold::op] takes `identity = EXPR` (the function \
                         form), `commutative` and `empty = error`"
                    ),
                )),
            }
            if input.is_empty() {
                break;
            }
            input.parse::<Token![,]>()?;
        }
        errors.into_result().map(|()| args)
    }
}

pub(crate) fn expand(attr: TokenStream, item: TokenStream) -> TokenStream {
    let args = match syn::parse2::<Args>(attr) {
        Ok(a) => a,
        Err(e) => {
            let mut out = e.into_compile_error();
            out.extend(item);
            return out;
        }
    };
    match syn::parse2::<Item>(item.clone()) {
        Ok(Item::Fn(f)) => fn_form(args, f),
        Ok(Item::Impl(i)) => impl_form(args, i),
        _ => {
            let mut out = syn::Error::new(
                Span::call_site(),
                "#[cufold::op] goes on a function `fn name(a: T, b: T) -> T`, or on an `impl` block \
                 of a unit struct with `fn identity`, `fn combine` and optionally `fn lift` and `fn finish`",
            )
            .into_compile_error();
            out.extend(item);
            out
        }
    }
}

fn same_type(a: &Type, b: &Type) -> bool {
    a.to_token_stream().to_string() == b.to_token_stream().to_string()
}

fn ret_type(sig: &Signature, errors: &mut Errors) -> Option<Type> {
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

/// Refuses what no operator function may have: generics, `self`, `async`, `unsafe`, ...
fn check_signature(sig: &Signature, errors: &mut Errors) {
    if !sig.generics.params.is_empty() || sig.generics.where_clause.is_some() {
        errors.at(
            &sig.generics,
            "operators cannot be generic: write one per type",
        );
    }
    if let Some(a) = &sig.asyncness {
        errors.at(a, "operators cannot be `async`");
    }
    if let Some(u) = &sig.unsafety {
        errors.at(u, "operators cannot be `unsafe`");
    }
    if let Some(v) = &sig.variadic {
        errors.at(v, "operators cannot be variadic");
    }
    for arg in &sig.inputs {
        if let FnArg::Receiver(r) = arg {
            errors.at(
                r,
                "operator functions take no `self`: they are called on the operator's values",
            );
        }
    }
}

/// The typed parameters of a signature (receivers are reported by `check_signature`).
fn params(sig: &Signature) -> Vec<(&Pat, &Type)> {
    sig.inputs
        .iter()
        .filter_map(|a| match a {
            FnArg::Typed(t) => Some((&*t.pat, &*t.ty)),
            FnArg::Receiver(_) => None,
        })
        .collect()
}

fn arity_span(sig: &Signature) -> TokenStream {
    let inputs = &sig.inputs;
    if inputs.is_empty() {
        let span = sig.paren_token.span.join();
        quote_spanned!(span=> ())
    } else {
        quote!(#inputs)
    }
}

fn check_u64(ty: &Type, what: &str, errors: &mut Errors) {
    if ty.to_token_stream().to_string() != "u64" {
        errors.at(ty, format!("the {what} is a `u64`"));
    }
}

/// What both forms produce: the operator's types and the pieces of its two halves.
struct Spec {
    self_ty: TokenStream,
    name: String,
    in_ty: Type,
    acc_ty: Type,
    out_ty: Type,
    commutative: bool,
    empty_is_error: bool,
    /// The Rust trait methods' bodies (`combine`: the whole method).
    identity: TokenStream,
    lift: TokenStream,
    combine: TokenStream,
    finish: TokenStream,
    /// The C++ member functions, or the translation's errors.
    cuda: syn::Result<[Cpp; 4]>,
}

fn operator_impl(s: &Spec) -> TokenStream {
    let Spec {
        self_ty,
        name,
        in_ty,
        acc_ty,
        out_ty,
        commutative,
        empty_is_error,
        identity,
        lift,
        combine,
        finish,
        cuda,
    } = s;
    let cuda_body = match cuda {
        Ok(fns) => {
            let fns = fns.iter().map(Cpp::build);
            quote! {
                const __CUFOLD_MODULE: u32 = ::cufold::__private::fnv(::core::module_path!());
                let name = ::cufold::__private::type_name(#name, __CUFOLD_MODULE);
                let functions: [::std::string::String; 4] = [#(#fns),*];
                ::cufold::ops::CudaOp {
                    source: ::cufold::__private::op_source::<#in_ty, #acc_ty, #out_ty>(&name, &functions),
                    type_name: name,
                }
            }
        }
        // The errors are reported; keep the rest of the impl so that they stand alone.
        Err(_) => quote!(::core::unreachable!(
            "the CUDA translation of this operator failed to compile"
        )),
    };
    let errors = cuda.as_ref().err().map(|e| e.to_compile_error());
    quote! {
        #errors
        impl ::cufold::ops::Operator<#in_ty> for #self_ty {
            type Acc = #acc_ty;
            type Out = #out_ty;
            const COMMUTATIVE: bool = #commutative;
            const EMPTY_IS_ERROR: bool = #empty_is_error;
            const NAME: &'static str = #name;
            fn identity(&self) -> #acc_ty { #identity }
            fn lift(&self, x: #in_ty, index: u64) -> #acc_ty { let _ = index; #lift }
            #combine
            fn finish(&self, acc: #acc_ty, n: u64) -> #out_ty { let _ = n; #finish }
            fn cuda(&self) -> ::cufold::ops::CudaOp { #cuda_body }
        }
    }
}

/// Translates the four functions; `None` bodies are the identity lift / finish.
fn translate(
    identity: Body,
    lift: Option<(&[(&Pat, &Type)], Body)>,
    combine: (&[(&Pat, &Type)], Body),
    finish: Option<(&[(&Pat, &Type)], Body)>,
) -> syn::Result<[Cpp; 4]> {
    let mut t = Translator::new();
    fn params<'a>(p: &[(&'a Pat, &Type)], types: &[&'static str]) -> Vec<Param<'a>> {
        types
            .iter()
            .enumerate()
            .map(|(i, ty)| Param {
                cpp_type: ty,
                pat: p.get(i).map(|(pat, _)| *pat),
            })
            .collect()
    }
    let f0 = t.function("Acc", "identity", &[], identity);
    let f1 = match lift {
        Some((p, body)) => t.function("Acc", "lift", &params(p, &["In", "cf::u64"]), body),
        None => Cpp::text("    __device__ Acc lift(In x, cf::u64) const { return x; }\n"),
    };
    let f2 = t.function(
        "Acc",
        "combine",
        &params(combine.0, &["Acc", "Acc"]),
        combine.1,
    );
    let f3 = match finish {
        Some((p, body)) => t.function("Out", "finish", &params(p, &["Acc", "cf::u64"]), body),
        None => Cpp::text("    __device__ Out finish(Acc a, cf::u64) const { return a; }\n"),
    };
    t.finish()?;
    Ok([f0, f1, f2, f3])
}

/// `#[op(identity = EXPR)] fn name(a: T, b: T) -> T { body }`: a unit struct `name`.
fn fn_form(args: Args, f: ItemFn) -> TokenStream {
    let mut errors = Errors::default();
    let sig = &f.sig;
    check_signature(sig, &mut errors);
    let ps = params(sig);
    let ret = ret_type(sig, &mut errors);
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
                        ty.to_token_stream()
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
                        ty.to_token_stream()
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

    let vis = &f.vis;
    let name = &sig.ident;
    let docs: Vec<_> = f
        .attrs
        .iter()
        .filter(|a| a.path().is_ident("doc"))
        .collect();
    let others: Vec<_> = f
        .attrs
        .iter()
        .filter(|a| !a.path().is_ident("doc"))
        .collect();
    let unit = quote! {
        #(#docs)*
        #[allow(non_camel_case_types)]
        #[derive(Clone, Copy, Debug, Default)]
        #vis struct #name;
    };
    let (Some(ty), Some(identity), true, true) =
        (ty, &args.identity, ps.len() == 2, errors.is_empty())
    else {
        let err = errors.into_result().err().map(|e| e.into_compile_error());
        return quote!(#err #unit);
    };
    let cuda = translate(
        Body::Expr(identity),
        None,
        (&ps, Body::Block(&f.block)),
        None,
    );
    let (pa, pb) = (ps[0].0, ps[1].0);
    let block = &f.block;
    let spec = Spec {
        self_ty: quote!(#name),
        name: name.to_string().trim_start_matches("r#").to_string(),
        in_ty: ty.clone(),
        acc_ty: ty.clone(),
        out_ty: ty.clone(),
        commutative: args.commutative,
        empty_is_error: args.empty_is_error,
        identity: quote!(#identity),
        lift: quote!(x),
        // The body as written, with the parameters' patterns and attributes.
        combine: quote! {
            #(#others)*
            fn combine(&self, #pa: #ty, #pb: #ty) -> #ty #block
        },
        finish: quote!(acc),
        cuda,
    };
    let imp = operator_impl(&spec);
    quote!(#unit #imp)
}

/// The functions of the impl form, found by name.
#[derive(Default)]
struct ImplFns<'a> {
    identity: Option<&'a ImplItemFn>,
    lift: Option<&'a ImplItemFn>,
    combine: Option<&'a ImplItemFn>,
    finish: Option<&'a ImplItemFn>,
}

/// `#[op] impl Name { fn identity() -> A; fn lift(x: I, i: u64) -> A; fn combine(a: A, b: A) -> A;
/// fn finish(a: A, n: u64) -> O }`: the impl as written, and `Operator<I>` for `Name`.
fn impl_form(args: Args, imp: ItemImpl) -> TokenStream {
    let mut errors = Errors::default();
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
    let name = match &**self_ty {
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
            errors.at(
                other,
                "#[cufold::op] goes on the impl block of a unit struct, such as `impl LogSumExp`",
            );
            String::new()
        }
    };
    let mut fns = ImplFns::default();
    for item in &imp.items {
        if let ImplItem::Fn(f) = item {
            let slot = match f.sig.ident.to_string().as_str() {
                "identity" => &mut fns.identity,
                "lift" => &mut fns.lift,
                "combine" => &mut fns.combine,
                "finish" => &mut fns.finish,
                _ => continue,
            };
            check_signature(&f.sig, &mut errors);
            *slot = Some(f);
        }
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
    if let Some(c) = fns.combine {
        let ps = params(&c.sig);
        let ret = ret_type(&c.sig, &mut errors);
        if ps.len() != 2 {
            errors.at(
                arity_span(&c.sig),
                format!("`combine` combines two accumulators: `fn combine(a: Acc, b: Acc) -> Acc` (found {})", ps.len()),
            );
        }
        acc = ps.first().map(|(_, t)| (*t).clone()).or(ret.clone());
        if let Some(a) = &acc {
            if let Some((_, t)) = ps.get(1) {
                if !same_type(t, a) {
                    errors.at(
                        t,
                        format!(
                            "both arguments of `combine` are accumulators: expected `{}`",
                            a.to_token_stream()
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
                            a.to_token_stream()
                        ),
                    );
                }
            }
        }
    }
    let expect_acc = |ty: &Type, what: &str, errors: &mut Errors| {
        if let Some(a) = &acc {
            if !same_type(ty, a) {
                errors.at(
                    ty,
                    format!(
                        "{what} must be the accumulator type, `{}` (the type `combine` takes)",
                        a.to_token_stream()
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
        if let Some(r) = ret_type(&f.sig, &mut errors) {
            expect_acc(&r, "`identity`'s return type", &mut errors);
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
            check_u64(
                t,
                "index of the input (`lift`'s second argument)",
                &mut errors,
            );
        }
        in_ty = ps.first().map(|(_, t)| (*t).clone());
        if let Some(r) = ret_type(&f.sig, &mut errors) {
            expect_acc(&r, "`lift`'s return type", &mut errors);
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
            expect_acc(t, "`finish`'s first argument", &mut errors);
        }
        if let Some((_, t)) = ps.get(1) {
            check_u64(t, "count (`finish`'s second argument)", &mut errors);
        }
        out_ty = ret_type(&f.sig, &mut errors);
    }
    for ty in [&in_ty, &acc, &out_ty].into_iter().flatten() {
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
        let err = errors.into_result().err().map(|e| e.into_compile_error());
        return quote!(#err #imp);
    };
    let lift_params = fns.lift.map(|f| params(&f.sig));
    let finish_params = fns.finish.map(|f| params(&f.sig));
    let combine_params = params(&combine.sig);
    let cuda = translate(
        Body::Block(&identity.block),
        fns.lift
            .map(|f| (&lift_params.as_ref().unwrap()[..], Body::Block(&f.block))),
        (&combine_params, Body::Block(&combine.block)),
        fns.finish
            .map(|f| (&finish_params.as_ref().unwrap()[..], Body::Block(&f.block))),
    );
    let ty = quote!(#self_ty);
    let call = |f: &ImplItemFn, args: TokenStream| {
        let id = &f.sig.ident;
        quote_spanned!(f.sig.ident.span()=> <#ty>::#id(#args))
    };
    let spec = Spec {
        self_ty: ty.clone(),
        name,
        in_ty,
        acc_ty: acc.clone(),
        out_ty,
        commutative: args.commutative,
        empty_is_error: args.empty_is_error,
        identity: call(identity, quote!()),
        lift: match (fns.lift, lift_params.as_ref().map(Vec::len)) {
            (Some(f), Some(1)) => call(f, quote!(x)),
            (Some(f), _) => call(f, quote!(x, index)),
            (None, _) => quote!(x),
        },
        combine: {
            let c = call(combine, quote!(a, b));
            quote!(fn combine(&self, a: #acc, b: #acc) -> #acc { #c })
        },
        finish: match (fns.finish, finish_params.as_ref().map(Vec::len)) {
            (Some(f), Some(1)) => call(f, quote!(acc)),
            (Some(f), _) => call(f, quote!(acc, n)),
            (None, _) => quote!(acc),
        },
        cuda,
    };
    let op = operator_impl(&spec);
    quote!(#imp #op)
}
