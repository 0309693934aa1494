//! `#[cufold::op]`: an operator's Rust half as written, its CUDA half translated.
//!
//! By phase: `attr` parses the attribute's arguments and `ast` the item (the function
//! form or the impl form); `valid` checks it, reporting every problem at once; `expand`
//! writes the unit struct, the `Operator` impl and its `cuda()`, with the bodies
//! translated by `crate::translate`.

pub(crate) mod ast;
mod attr;
mod expand;
pub(crate) mod valid;

use crate::errors::Errors;
use ast::{Form, ImplFns};
use attr::Args;
use proc_macro2::TokenStream;
use quote::quote;

pub(crate) fn expand(attr: TokenStream, item: TokenStream) -> TokenStream {
    let args = match syn::parse2::<Args>(attr) {
        Ok(a) => a,
        Err(e) => {
            let mut out = e.into_compile_error();
            out.extend(item);
            return out;
        }
    };
    let form = match Form::parse(item.clone()) {
        Ok(f) => f,
        Err(e) => {
            let mut out = e.into_compile_error();
            out.extend(item);
            return out;
        }
    };
    let mut errors = Errors::default();
    match form {
        // `#[op(identity = EXPR)] fn name(a: T, b: T) -> T { body }`: a unit struct `name`.
        Form::Fn(f) => {
            let unit = expand::unit_struct(&f);
            let Some(op) = valid::fn_form(&args, &f, &mut errors) else {
                let err = errors.into_result().err().map(|e| e.into_compile_error());
                return quote!(#err #unit);
            };
            let imp = expand::fn_form(&args, op);
            quote!(#unit #imp)
        }
        // `#[op] impl Name { fn identity() -> A; fn lift(x: I, i: u64) -> A; fn combine(a: A,
        // b: A) -> A; fn finish(a: A, n: u64) -> O }`: the impl as written, and
        // `Operator<I>` for `Name`.
        Form::Impl(imp) => {
            let Some(op) = valid::impl_form(&args, &imp, ImplFns::of(&imp), &mut errors) else {
                let err = errors.into_result().err().map(|e| e.into_compile_error());
                return quote!(#err #imp);
            };
            let operator = expand::impl_form(&args, op);
            quote!(#imp #operator)
        }
    }
}
