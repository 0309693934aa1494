//! The generated Rust of an operator: the function form's unit struct, the
//! `cufold::ops::Operator` impl, and its `cuda()`, which assembles the translated C++.

use super::ast::params;
use super::attr::Args;
use super::valid::{FnOp, ImplOp};
use crate::params::takes_self;
use crate::translate::{Body, Cpp, Param, Translator};
use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::{ImplItemFn, ItemFn, Pat, Type};

/// What both forms produce: the operator's types and the pieces of its two halves.
struct Spec {
    self_ty: TokenStream,
    /// The impl form's type, when a function takes `&self`: the operator's value is its
    /// run-time parameters.
    params: Option<Type>,
    name: String,
    in_ty: Type,
    acc_ty: Type,
    out_ty: Type,
    commutative: bool,
    order_free: bool,
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
        params,
        name,
        in_ty,
        acc_ty,
        out_ty,
        commutative,
        order_free,
        empty_is_error,
        identity,
        lift,
        combine,
        finish,
        cuda,
    } = s;
    let cuda_body = match cuda {
        // With run-time parameters the C++ struct derives from their twin, whose name is
        // the type's: the operator's gets a suffix.
        Ok(fns) if params.is_some() => {
            let fns = fns.iter().map(Cpp::build);
            quote! {
                const __CUFOLD_MODULE: u32 = ::cufold::__private::fnv(::core::module_path!());
                let name = ::std::format!("{}_op", ::cufold::__private::type_name(#name, __CUFOLD_MODULE));
                let functions: [::std::string::String; 4] = [#(#fns),*];
                ::cufold::ops::CudaOp {
                    source: ::cufold::__private::op_source_with_params::<_, #in_ty, #acc_ty, #out_ty>(
                        &__CUFOLD_PARAMS, &name, &functions,
                    ),
                    type_name: name,
                }
            }
        }
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
    let params_fn = params.as_ref().map(|_| {
        quote!(
            fn params(&self) -> ::cufold::ops::OpParams {
                __CUFOLD_PARAMS.of(self)
            }
        )
    });
    let bounds = crate::names::device_bounds(&[in_ty, acc_ty, out_ty]);
    let imp = quote! {
        impl ::cufold::ops::Operator<#in_ty> for #self_ty #bounds {
            type Acc = #acc_ty;
            type Out = #out_ty;
            const COMMUTATIVE: bool = #commutative;
            const ORDER_FREE: bool = #order_free;
            const EMPTY_IS_ERROR: bool = #empty_is_error;
            const NAME: &'static str = #name;
            fn identity(&self) -> #acc_ty { #identity }
            fn lift(&self, x: #in_ty, index: u64) -> #acc_ty { let _ = index; #lift }
            #combine
            fn finish(&self, acc: #acc_ty, n: u64) -> #out_ty { let _ = n; #finish }
            fn cuda(&self) -> ::cufold::ops::CudaOp { #cuda_body }
            #params_fn
        }
    };
    match params {
        // The impl beside the constant its `params` and `cuda` read.
        Some(ty) => {
            let holder = crate::params::holder(ty, name, "operator");
            quote! {
                #errors
                const _: () = {
                    #holder
                    #imp
                };
            }
        }
        None => quote!(#errors #imp),
    }
}

/// Translates the four functions; `None` bodies are the identity lift / finish.
fn translate(
    identity: Body,
    lift: Option<(&[(&Pat, &Type)], Body)>,
    combine: (&[(&Pat, &Type)], Body),
    finish: Option<(&[(&Pat, &Type)], Body)>,
) -> syn::Result<[Cpp; 4]> {
    let mut t = Translator::new().members(&["identity", "lift", "combine", "finish"]);
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

/// The unit struct that the function form defines in the function's place, with its
/// documentation; emitted beside the errors too, so that they stand alone.
pub(super) fn unit_struct(f: &ItemFn) -> TokenStream {
    let vis = &f.vis;
    let name = &f.sig.ident;
    let docs: Vec<_> = f
        .attrs
        .iter()
        .filter(|a| a.path().is_ident("doc"))
        .collect();
    quote! {
        #(#docs)*
        #[allow(non_camel_case_types)]
        #[derive(Clone, Copy, Debug, Default)]
        #vis struct #name;
    }
}

/// `Operator<T>` for the function form's unit struct: `combine` is the function as
/// written, and its body translated.
pub(super) fn fn_form(args: &Args, op: FnOp) -> TokenStream {
    let FnOp {
        item: f,
        params: ps,
        ty,
        identity,
    } = op;
    let name = &f.sig.ident;
    let others: Vec<_> = f
        .attrs
        .iter()
        .filter(|a| !a.path().is_ident("doc"))
        .collect();
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
        params: None,
        name: name.to_string().trim_start_matches("r#").to_string(),
        in_ty: ty.clone(),
        acc_ty: ty.clone(),
        out_ty: ty.clone(),
        commutative: args.commutative,
        order_free: args.order_free,
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
    operator_impl(&spec)
}

/// `Operator<I>` for the impl form's struct, calling the block's functions, and
/// their bodies translated.
pub(super) fn impl_form(args: &Args, op: ImplOp) -> TokenStream {
    let ImplOp {
        item: imp,
        name,
        identity,
        lift,
        combine,
        finish,
        in_ty,
        acc,
        out_ty,
    } = op;
    let self_ty = &imp.self_ty;
    let lift_params = lift.map(|f| params(&f.sig));
    let finish_params = finish.map(|f| params(&f.sig));
    let combine_params = params(&combine.sig);
    let cuda = translate(
        Body::Block(&identity.block),
        lift.map(|f| (&lift_params.as_ref().unwrap()[..], Body::Block(&f.block))),
        (&combine_params, Body::Block(&combine.block)),
        finish.map(|f| (&finish_params.as_ref().unwrap()[..], Body::Block(&f.block))),
    );
    let ty = quote!(#self_ty);
    // A function that takes `&self` is called on the operator's value.
    let call = |f: &ImplItemFn, args: TokenStream| {
        let id = &f.sig.ident;
        let args = if takes_self(&f.sig) {
            quote!(self, #args)
        } else {
            args
        };
        quote_spanned!(f.sig.ident.span()=> <#ty>::#id(#args))
    };
    let with_self = [Some(identity), lift, Some(combine), finish]
        .into_iter()
        .flatten()
        .any(|f| takes_self(&f.sig));
    let spec = Spec {
        self_ty: ty.clone(),
        params: with_self.then(|| (**self_ty).clone()),
        name,
        in_ty,
        acc_ty: acc.clone(),
        out_ty,
        commutative: args.commutative,
        order_free: args.order_free,
        empty_is_error: args.empty_is_error,
        identity: call(identity, quote!()),
        lift: match (lift, lift_params.as_ref().map(Vec::len)) {
            (Some(f), Some(1)) => call(f, quote!(x)),
            (Some(f), _) => call(f, quote!(x, index)),
            (None, _) => quote!(x),
        },
        combine: {
            let c = call(combine, quote!(a, b));
            quote!(fn combine(&self, a: #acc, b: #acc) -> #acc { #c })
        },
        finish: match (finish, finish_params.as_ref().map(Vec::len)) {
            (Some(f), Some(1)) => call(f, quote!(acc)),
            (Some(f), _) => call(f, quote!(acc, n)),
            (None, _) => quote!(acc),
        },
        cuda,
    };
    operator_impl(&spec)
}
