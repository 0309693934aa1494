//! The operator as written: the two forms `#[cufold::op]` goes on, read from the item.

use proc_macro2::{Span, TokenStream};
use syn::{FnArg, ImplItem, ImplItemFn, Item, ItemFn, ItemImpl, Pat, Signature, Type};

/// What `#[cufold::op]` goes on.
pub(super) enum Form {
    /// `fn name(a: T, b: T) -> T { body }`.
    Fn(ItemFn),
    /// `impl Name { fn identity() ...; fn combine(...) ...; ... }`.
    Impl(ItemImpl),
}

impl Form {
    pub(super) fn parse(item: TokenStream) -> syn::Result<Form> {
        match syn::parse2::<Item>(item) {
            Ok(Item::Fn(f)) => Ok(Form::Fn(f)),
            Ok(Item::Impl(i)) => Ok(Form::Impl(i)),
            _ => Err(syn::Error::new(
                Span::call_site(),
                "#[cufold::op] goes on a function `fn name(a: T, b: T) -> T`, or on an `impl` block \
                 of a struct with `fn identity`, `fn combine` and optionally `fn lift` and `fn finish`",
            )),
        }
    }
}

/// The functions of the impl form, found by name.
#[derive(Default)]
pub(super) struct ImplFns<'a> {
    /// Every function named as one of the four, in the order written (a name written
    /// twice is here twice; its slot below holds the last).
    pub(super) all: Vec<&'a ImplItemFn>,
    pub(super) identity: Option<&'a ImplItemFn>,
    pub(super) lift: Option<&'a ImplItemFn>,
    pub(super) combine: Option<&'a ImplItemFn>,
    pub(super) finish: Option<&'a ImplItemFn>,
}

impl<'a> ImplFns<'a> {
    /// The block's `identity`, `lift`, `combine` and `finish`; its other items are left
    /// as written.
    pub(super) fn of(imp: &'a ItemImpl) -> Self {
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
                *slot = Some(f);
                fns.all.push(f);
            }
        }
        fns
    }
}

/// The typed parameters of a signature (receivers are reported by
/// `valid::check_signature`).
pub(crate) fn params(sig: &Signature) -> Vec<(&Pat, &Type)> {
    sig.inputs
        .iter()
        .filter_map(|a| match a {
            FnArg::Typed(t) => Some((&*t.pat, &*t.ty)),
            FnArg::Receiver(_) => None,
        })
        .collect()
}
