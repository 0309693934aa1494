//! Errors collected so that a macro reports all of them at once.

use quote::ToTokens;

/// Spanned errors, combined into one `syn::Error` (which reports each at its span).
#[derive(Default)]
pub(crate) struct Errors(Option<syn::Error>);

impl Errors {
    pub(crate) fn push(&mut self, e: syn::Error) {
        match &mut self.0 {
            Some(all) => all.combine(e),
            None => self.0 = Some(e),
        }
    }

    /// An error spanning `at`'s tokens.
    pub(crate) fn at(&mut self, at: impl ToTokens, msg: impl std::fmt::Display) {
        self.push(syn::Error::new_spanned(at, msg));
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_none()
    }

    pub(crate) fn into_result(self) -> syn::Result<()> {
        match self.0 {
            None => Ok(()),
            Some(e) => Err(e),
        }
    }
}
