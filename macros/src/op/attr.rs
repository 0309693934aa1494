//! The arguments of `#[cufold::op(...)]`: `identity = EXPR`, `commutative`, `order_free`,
//! `empty = error`.

use crate::errors::Errors;
use syn::parse::{Parse, ParseStream};
use syn::{Expr, Token};

/// The attribute's arguments: `identity = EXPR`, `commutative`, `order_free`, `empty = error`.
pub(super) struct Args {
    pub(super) identity: Option<Expr>,
    pub(super) commutative: bool,
    /// Exactly associative and commutative, bit for bit (implies `commutative`).
    pub(super) order_free: bool,
    pub(super) empty_is_error: bool,
}

impl Parse for Args {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let mut args = Args {
            identity: None,
            commutative: false,
            order_free: false,
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
                "order_free" => {
                    args.order_free = true;
                    args.commutative = true;
                }
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
                         form), `commutative`, `order_free` and `empty = error`"
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
