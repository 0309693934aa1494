//! `Cpp`, the C++ text under construction: text, and Rust code that builds text when the
//! operator's source is built.

use proc_macro2::TokenStream;
use quote::quote;

/// A piece of the generated C++: text, or Rust code that evaluates to a `String`.
enum Piece {
    Text(String),
    Code(TokenStream),
}

/// C++ source under construction.
#[derive(Default)]
pub(crate) struct Cpp(Vec<Piece>);

impl Cpp {
    pub(crate) fn text(s: impl Into<String>) -> Cpp {
        let mut c = Cpp::default();
        c.push(&s.into());
        c
    }

    pub(super) fn push(&mut self, s: &str) {
        if let Some(Piece::Text(t)) = self.0.last_mut() {
            t.push_str(s);
        } else {
            self.0.push(Piece::Text(s.to_string()));
        }
    }

    pub(super) fn code(&mut self, ts: TokenStream) {
        self.0.push(Piece::Code(ts));
    }

    pub(super) fn append(&mut self, other: Cpp) {
        for p in other.0 {
            match p {
                Piece::Text(t) => self.push(&t),
                Piece::Code(c) => self.code(c),
            }
        }
    }

    pub(super) fn cloned(&self) -> Cpp {
        let mut c = Cpp::default();
        for p in &self.0 {
            match p {
                Piece::Text(t) => c.push(t),
                Piece::Code(t) => c.code(t.clone()),
            }
        }
        c
    }

    /// A Rust expression that builds this text as a `String`.
    pub(crate) fn build(&self) -> TokenStream {
        let pushes = self.0.iter().map(|p| match p {
            Piece::Text(t) => quote!(__cufold_s.push_str(#t);),
            Piece::Code(c) => quote!(__cufold_s.push_str(&#c);),
        });
        quote!({
            let mut __cufold_s = ::std::string::String::new();
            #(#pushes)*
            __cufold_s
        })
    }
}
