//! `#[derive(DeviceType)]`: a `#[repr(C)]` struct's CUDA twin and the traits it needs.
//!
//! By phase, as `op` is: `check` refuses what has no CUDA twin (reporting every problem at
//! once) and `generate` writes the impls.

use crate::errors::Errors;
use crate::names::{check_device_type, cpp_ident};
use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{Data, DeriveInput, Field, Fields, Ident, Token};

pub(crate) fn expand(input: TokenStream) -> TokenStream {
    match syn::parse2::<DeriveInput>(input) {
        Ok(d) => check(&d)
            .map(|(fields, align)| generate(&d.ident, fields, align))
            .unwrap_or_else(|e| e.into_compile_error()),
        Err(e) => e.into_compile_error(),
    }
}

/// `#[repr(C)]`'s presence and its `align(N)`, or why the representation does not do.
fn repr(d: &DeriveInput) -> syn::Result<(bool, usize)> {
    let (mut c, mut align) = (false, 0);
    for attr in d.attrs.iter().filter(|a| a.path().is_ident("repr")) {
        attr.parse_nested_meta(|m| {
            if m.path.is_ident("C") {
                c = true;
            } else if m.path.is_ident("align") {
                let content;
                syn::parenthesized!(content in m.input);
                align = content.parse::<syn::LitInt>()?.base10_parse()?;
            } else if m.path.is_ident("packed") {
                return Err(m.error(
                    "#[repr(packed)] is not supported: CUDA requires aligned fields; use #[repr(C)]",
                ));
            } else if m.path.is_ident("transparent") {
                return Err(m.error("use #[repr(C)]: the derive writes a C++ struct with the same fields"));
            } else {
                return Err(m.error("unsupported representation for a DeviceType; use #[repr(C)]"));
            }
            Ok(())
        })?;
    }
    Ok((c, align))
}

/// The struct's named fields and its `#[repr(align(N))]` (0 without), or every reason it
/// cannot be a DeviceType.
fn check(d: &DeriveInput) -> syn::Result<(&Punctuated<Field, Token![,]>, usize)> {
    let mut errors = Errors::default();
    let ident = &d.ident;
    let fields = match &d.data {
        Data::Struct(s) => match &s.fields {
            Fields::Named(f) if !f.named.is_empty() => Some(&f.named),
            Fields::Named(_) | Fields::Unit => {
                errors.push(syn::Error::new(
                    ident.span(),
                    "a DeviceType needs at least one field (an empty C++ struct has size 1, an empty Rust struct size 0)",
                ));
                None
            }
            Fields::Unnamed(f) => {
                errors.push(syn::Error::new(
                    f.span(),
                    "tuple structs are not supported: name the fields, which become the C++ struct's members",
                ));
                None
            }
        },
        Data::Enum(e) => {
            errors.push(syn::Error::new(
                e.enum_token.span,
                "a DeviceType is a struct: enums have no CUDA twin (use an integer field)",
            ));
            None
        }
        Data::Union(u) => {
            errors.push(syn::Error::new(
                u.union_token.span,
                "a DeviceType is a struct: unions are not supported",
            ));
            None
        }
    };
    if !d.generics.params.is_empty() {
        errors.push(syn::Error::new_spanned(
            &d.generics,
            "a DeviceType cannot be generic: its C++ twin is one concrete struct",
        ));
    }
    let align_attr = match repr(d) {
        Ok((true, align)) => align,
        Ok((false, _)) => {
            errors.push(syn::Error::new(
                ident.span(),
                "#[derive(DeviceType)] needs #[repr(C)] on the struct: without it Rust may reorder the \
                 fields, and the CUDA struct would not match",
            ));
            0
        }
        Err(e) => {
            errors.push(e);
            0
        }
    };
    if let Some(fields) = fields {
        for f in fields {
            if let Err(e) = check_device_type(&f.ty) {
                errors.push(e);
            }
        }
    }
    errors.into_result()?;
    Ok((fields.expect("checked above"), align_attr))
}

/// `DeviceValue` (with the C++ struct), cudarc's `DeviceRepr` and `ValidAsZeroBits`,
/// `Debug` and `Approx` for a checked struct.
fn generate(
    ident: &Ident,
    fields: &Punctuated<Field, Token![,]>,
    align_attr: usize,
) -> TokenStream {
    let name = ident.to_string();
    let name = name.trim_start_matches("r#");
    let tys: Vec<_> = fields.iter().map(|f| &f.ty).collect();
    let idents: Vec<_> = fields
        .iter()
        .map(|f| f.ident.as_ref().expect("named"))
        .collect();
    let rust_names: Vec<String> = idents
        .iter()
        .map(|i| i.to_string().trim_start_matches("r#").to_string())
        .collect();
    let cpp_names: Vec<String> = rust_names.iter().map(|n| cpp_ident(n)).collect();
    // Spanned at each field's type, so that a field type without a CUDA twin (or without
    // Approx) is reported there, once: the constant `__CUFOLD_FIELDS` is the only place that needs
    // the field types to be device values.
    let field_types = tys
        .iter()
        .map(|ty| quote_spanned!(ty.span()=> ::cufold::__private::field::<#ty>()));
    let n_fields = tys.len();
    let approx = idents.iter().zip(&tys).map(|(f, ty)| {
        quote_spanned!(ty.span()=> <#ty as ::cufold::laws::Approx>::approx_eq(&self.#f, &other.#f, tol))
    });
    let debug_fields = idents
        .iter()
        .zip(&rust_names)
        .map(|(f, n)| quote!(.field(#n, &self.#f)));

    quote! {
        const _: () = {
            const __CUFOLD_FIELDS: [::cufold::__private::FieldType; #n_fields] = [#(#field_types),*];

            // SAFETY: the struct is #[repr(C)] and every field is a DeviceValue (__CUFOLD_FIELDS
            // does not compile otherwise), whose types are themselves DeviceRepr: plain
            // data that can be copied to the device.
            unsafe impl ::cufold::__private::cudarc::driver::DeviceRepr for #ident {}

            // SAFETY: every field is a DeviceValue, which requires ValidAsZeroBits; a
            // #[repr(C)] struct of such fields (padding included) is valid as all zeros.
            unsafe impl ::cufold::__private::cudarc::driver::ValidAsZeroBits for #ident {}

            // SAFETY: cuda_decl() declares a C++ struct with the same fields, of the fields'
            // C++ twins, in declaration order, as C lays out #[repr(C)]; the static_assert
            // in it makes NVRTC refuse the kernel if size or alignment differ. DENSE holds
            // only when the fields' sizes add up to the struct's and each field is dense.
            unsafe impl ::cufold::DeviceValue for #ident {
                const DENSE: bool =
                    ::cufold::__private::dense(::core::mem::size_of::<Self>(), &__CUFOLD_FIELDS);
                fn cuda_name() -> ::std::string::String {
                    const __CUFOLD_MODULE: u32 = ::cufold::__private::fnv(::core::module_path!());
                    ::cufold::__private::type_name(#name, __CUFOLD_MODULE)
                }
                fn cuda_decl() -> ::std::string::String {
                    let mut s = ::std::string::String::new();
                    let fields = ::cufold::__private::fields(&__CUFOLD_FIELDS, &[#(#cpp_names),*], &mut s);
                    s.push_str(&::cufold::__private::struct_decl(
                        &<Self as ::cufold::DeviceValue>::cuda_name(),
                        ::core::concat!(::core::module_path!(), "::", #name),
                        &fields,
                        ::core::mem::size_of::<Self>(),
                        ::core::mem::align_of::<Self>(),
                        #align_attr,
                    ));
                    s
                }
            }

            impl ::core::fmt::Debug for #ident {
                fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                    f.debug_struct(#name) #(#debug_fields)* .finish()
                }
            }

            impl ::cufold::laws::Approx for #ident {
                fn approx_eq(&self, other: &Self, tol: ::cufold::laws::Tolerance) -> bool {
                    #(#approx)&&*
                }
            }
        };
    }
}
