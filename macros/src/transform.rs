//! `#[transform]`: a map's Rust half as written (`fn apply`), its CUDA half translated,
//! and `cufold::ops::Transform` for the type.
//!
//! By phase, as `op` is: `check` reads and checks the impl block, reporting every problem
//! at once; `generate` writes the `Transform` impl, its `cuda()` and, when `apply` takes
//! `&self`, its run-time parameters.

use crate::errors::Errors;
use crate::names::check_device_type;
use crate::op::ast::params;
use crate::op::valid::{arity_span, check_signature, check_u64, impl_struct_name, ret_type};
use crate::params::takes_self;
use crate::translate::{Body, Param, Translator};
use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned};
use syn::{ImplItem, ImplItemFn, Item, ItemImpl, Type};

pub(crate) fn expand(attr: TokenStream, item: TokenStream) -> TokenStream {
    let mut errors = Errors::default();
    if !attr.is_empty() {
        errors.at(
            &attr,
            "#[cufold::transform] takes no arguments: the map is `fn apply` in the block",
        );
    }
    let imp = match syn::parse2::<Item>(item.clone()) {
        Ok(Item::Impl(i)) => i,
        _ => {
            let e = syn::Error::new(
                Span::call_site(),
                "#[cufold::transform] goes on an `impl` block with `fn apply(&self, x: In, index: u64) -> Out` \
                 (`&self` and `index` optional)",
            );
            let mut out = e.into_compile_error();
            out.extend(item);
            return out;
        }
    };
    match check(&imp, &mut errors) {
        Some(map) if errors.is_empty() => {
            let generated = generate(&map);
            quote!(#imp #generated)
        }
        _ => {
            let err = errors.into_result().err().map(|e| e.into_compile_error());
            quote!(#err #imp)
        }
    }
}

/// A map with nothing to report.
struct Map<'a> {
    self_ty: &'a Type,
    /// The type's name, for the C++ name and messages.
    name: String,
    apply: &'a ImplItemFn,
    in_ty: Type,
    out_ty: Type,
}

/// Checks `impl Name { fn apply(&self, x: In, index: u64) -> Out { ... } }`, reporting to
/// `errors`; the map, where there was nothing to report.
fn check<'a>(imp: &'a ItemImpl, errors: &mut Errors) -> Option<Map<'a>> {
    if let Some((_, path, _)) = &imp.trait_ {
        errors.at(
            path,
            "#[cufold::transform] goes on an inherent `impl Name { ... }`, not a trait impl",
        );
    }
    if !imp.generics.params.is_empty() {
        errors.at(&imp.generics, "maps cannot be generic: write one per type");
    }
    let self_ty = &*imp.self_ty;
    let name = impl_struct_name(
        imp,
        "#[cufold::transform] goes on the impl block of a struct, such as `impl Shift`",
        errors,
    );
    let apply = imp.items.iter().find_map(|item| match item {
        ImplItem::Fn(f) if f.sig.ident == "apply" => Some(f),
        _ => None,
    });
    let Some(apply) = apply else {
        errors.at(
            self_ty,
            "missing `fn apply(&self, x: In, index: u64) -> Out` in the map's impl block (`&self` and \
             `index` are optional)",
        );
        return None;
    };
    let sig = &apply.sig;
    check_signature(sig, true, "map", errors);
    let ps = params(sig);
    if ps.is_empty() || ps.len() > 2 {
        errors.at(
            arity_span(sig),
            format!(
                "`apply` takes the input and, optionally, its index: `fn apply(&self, x: In, index: u64) -> Out` \
                 (found {} argument{})",
                ps.len(),
                if ps.len() == 1 { "" } else { "s" }
            ),
        );
    }
    if let Some((_, t)) = ps.get(1) {
        check_u64(t, "index of the input (`apply`'s second argument)", errors);
    }
    let out_ty = ret_type(sig, errors);
    let in_ty = ps.first().map(|(_, t)| (*t).clone());
    for ty in [&in_ty, &out_ty].into_iter().flatten() {
        if let Err(e) = check_device_type(ty) {
            errors.push(e);
        }
    }
    Some(Map {
        self_ty,
        name,
        apply,
        in_ty: in_ty?,
        out_ty: out_ty?,
    })
}

/// `Transform<In>` for the map's type: `apply` calls the block's, `cuda` assembles the
/// translated `operator()`, `params` (when `apply` takes `&self`) gives the value's bytes.
fn generate(map: &Map) -> TokenStream {
    let Map {
        self_ty,
        name,
        apply,
        in_ty,
        out_ty,
    } = map;
    let ps = params(&apply.sig);
    let with_self = takes_self(&apply.sig);
    let mut t = Translator::new();
    let cpp_params: Vec<Param> = ["In", "cf::u64"]
        .iter()
        .enumerate()
        .map(|(i, ty)| Param {
            cpp_type: ty,
            pat: ps.get(i).map(|(pat, _)| *pat),
        })
        .collect();
    let function = t.function("Out", "operator()", &cpp_params, Body::Block(&apply.block));
    let cuda = t.finish().map(|()| function);

    let id = &apply.sig.ident;
    let args = match (with_self, ps.len()) {
        (true, 1) => quote!(self, x),
        (true, _) => quote!(self, x, index),
        (false, 1) => quote!(x),
        (false, _) => quote!(x, index),
    };
    let call = quote_spanned!(id.span()=> <#self_ty>::#id(#args));
    let cuda_body = match &cuda {
        Ok(f) => {
            let f = f.build();
            let source = if with_self {
                quote!(::cufold::__private::transform_source_with_params::<_, #in_ty, #out_ty>(&__CUFOLD_PARAMS, &name, &apply))
            } else {
                quote!(::cufold::__private::transform_source::<#in_ty, #out_ty>(&name, &apply))
            };
            quote! {
                const __CUFOLD_MODULE: u32 = ::cufold::__private::fnv(::core::module_path!());
                let name = ::std::format!("{}_map", ::cufold::__private::type_name(#name, __CUFOLD_MODULE));
                let apply: ::std::string::String = #f;
                ::cufold::ops::CudaOp { source: #source, type_name: name }
            }
        }
        // The errors are reported; keep the rest of the impl so that they stand alone.
        Err(_) => quote!(::core::unreachable!(
            "the CUDA translation of this map failed to compile"
        )),
    };
    let errors = cuda.as_ref().err().map(|e| e.to_compile_error());
    let params_fn = with_self.then(|| {
        quote!(
            fn params(&self) -> ::cufold::ops::OpParams {
                __CUFOLD_PARAMS.of(self)
            }
        )
    });
    let bounds = crate::names::device_bounds(&[in_ty, out_ty]);
    let imp = quote! {
        impl ::cufold::ops::Transform<#in_ty> for #self_ty #bounds {
            type Out = #out_ty;
            fn apply(&self, x: #in_ty, index: u64) -> #out_ty { let _ = index; #call }
            fn cuda(&self) -> ::cufold::ops::CudaOp { #cuda_body }
            #params_fn
        }
    };
    if with_self {
        let holder = crate::params::holder(self_ty, name, "map");
        quote! {
            #errors
            const _: () = {
                #holder
                #imp
            };
        }
    } else {
        quote!(#errors #imp)
    }
}
