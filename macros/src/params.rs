//! Run-time parameters, shared by `#[op]` and `#[transform]`: functions that take `&self`
//! read the value's fields, so the value travels to every kernel as its bytes.
//!
//! What the generated code needs of the parameters' type (that it is a padding-free
//! `DeviceValue`, its bytes, its C++ twin) is asked for in one place, a constant: a type
//! that is no device value, or has padding, is one error there, at the `impl`'s type.

use crate::errors::Errors;
use proc_macro2::TokenStream;
use quote::quote_spanned;
use syn::spanned::Spanned;
use syn::{FnArg, Receiver, Signature, Type};

/// Whether `sig` has a receiver (`&self`, once checked).
pub(crate) fn takes_self(sig: &Signature) -> bool {
    matches!(sig.inputs.first(), Some(FnArg::Receiver(_)))
}

/// Refuses receivers other than `&self`; `what` is "operator" or "map".
pub(crate) fn check_receiver(r: &Receiver, what: &str, errors: &mut Errors) {
    let found = if r.colon_token.is_some() {
        Some("a typed `self`")
    } else if r.reference.is_none() {
        Some("`self` by value")
    } else if r.mutability.is_some() {
        Some("`&mut self`")
    } else {
        None
    };
    if let Some(found) = found {
        errors.at(
            r,
            format!(
                "{}'s functions take `&self` (to read its run-time parameters) or no receiver, not \
                 {found}",
                with_article(what)
            ),
        );
    }
}

/// `const __CUFOLD_PARAMS: ::cufold::__private::Params<T>`, for the code beside it: the only place
/// that needs `T` to be a dense device value, spanned at `T`. `name` is `T`'s name and
/// `what` "operator" or "map", for the message.
pub(crate) fn holder(self_ty: &Type, name: &str, what: &str) -> TokenStream {
    let padding = format!(
        "cufold: `{name}` has padding bytes, so its values cannot be {}'s run-time parameters \
         (which travel to every kernel as their bytes): reorder the fields or add explicit padding \
         fields",
        with_article(what)
    );
    quote_spanned! {self_ty.span()=>
        const __CUFOLD_PARAMS: ::cufold::__private::Params<#self_ty> = {
            let params = ::cufold::__private::params::<#self_ty>();
            ::core::assert!(params.dense(), #padding);
            params
        };
    }
}

/// "an operator", "a map".
fn with_article(what: &str) -> String {
    let article = if what.starts_with(['a', 'e', 'i', 'o', 'u']) {
        "an"
    } else {
        "a"
    };
    format!("{article} {what}")
}
