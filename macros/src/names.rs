//! C++ names for Rust identifiers and types, and the check of device types, shared by
//! the derive, the operator's checks and the translation.

use syn::{spanned::Spanned, Type};

/// What a device value may be, for messages.
pub(crate) const SUPPORTED_TYPES: &str = "f32, f64, f16, bf16, i32, i64, u32, u64, u8, cufold's value \
    types (ops::Affine<f32>, ops::Indexed<f32>, ...) and #[repr(C)] structs with #[derive(cufold::DeviceType)]";

/// Words a Rust identifier may be that C++ (or CUDA, or the generated kernel) reserves.
const RESERVED: &[&str] = &[
    "alignas",
    "alignof",
    "and",
    "and_eq",
    "asm",
    "auto",
    "bitand",
    "bitor",
    "bool",
    "break",
    "case",
    "catch",
    "char",
    "char8_t",
    "char16_t",
    "char32_t",
    "class",
    "compl",
    "concept",
    "const",
    "consteval",
    "constexpr",
    "constinit",
    "const_cast",
    "continue",
    "co_await",
    "co_return",
    "co_yield",
    "decltype",
    "default",
    "delete",
    "do",
    "double",
    "dynamic_cast",
    "else",
    "enum",
    "explicit",
    "export",
    "extern",
    "false",
    "float",
    "for",
    "friend",
    "goto",
    "if",
    "inline",
    "int",
    "long",
    "mutable",
    "namespace",
    "new",
    "noexcept",
    "not",
    "not_eq",
    "nullptr",
    "operator",
    "or",
    "or_eq",
    "private",
    "protected",
    "public",
    "register",
    "reinterpret_cast",
    "requires",
    "return",
    "short",
    "signed",
    "sizeof",
    "static",
    "static_assert",
    "static_cast",
    "struct",
    "switch",
    "template",
    "this",
    "thread_local",
    "throw",
    "true",
    "try",
    "typedef",
    "typeid",
    "typename",
    "union",
    "unsigned",
    "using",
    "virtual",
    "void",
    "volatile",
    "wchar_t",
    "while",
    "xor",
    "xor_eq",
    "NULL",
    "INFINITY",
    "NAN",
    "HUGE_VAL",
    "HUGE_VALF",
    "threadIdx",
    "blockIdx",
    "blockDim",
    "gridDim",
    "warpSize",
    "In",
    "Acc",
    "Out",
    "cf",
    "cfm",
    "std",
    "memcpy",
    "uint4",
    "main",
];

/// The C++ name of a Rust identifier: itself, unless C++ reserves it or it could meet a
/// name the generated code uses (`cfm_*`, `cf_*`, `CF_*`, `__*`); those get `_cf` appended.
pub(crate) fn cpp_ident(name: &str) -> String {
    let name = name.strip_prefix("r#").unwrap_or(name);
    let clash = RESERVED.contains(&name)
        || name.starts_with("cfm")
        || name.starts_with("cf_")
        || name.starts_with("CF_")
        || name.starts_with("__")
        || name.ends_with("_cf");
    if clash {
        format!("{name}_cf")
    } else {
        name.to_string()
    }
}

/// The C++ type of a Rust primitive (the ones a translated body may compute with).
pub(crate) fn primitive_cpp(name: &str) -> Option<&'static str> {
    Some(match name {
        "f32" => "float",
        "f64" => "double",
        "i8" => "signed char",
        "i16" => "short",
        "i32" => "int",
        "i64" => "long long",
        "u8" => "unsigned char",
        "u16" => "unsigned short",
        "u32" => "unsigned",
        "u64" => "unsigned long long",
        "bool" => "bool",
        _ => return None,
    })
}

/// The C++ type of the types whose associated functions a body may call (`f32::max`,
/// `f16::from_f32`).
pub(crate) fn value_type_cpp(name: &str) -> Option<&'static str> {
    match name {
        "f16" => Some("cf::f16"),
        "bf16" => Some("cf::bf16"),
        "bool" => None,
        _ => primitive_cpp(name),
    }
}

/// The last segment's identifier of a plain path type (`cufold::ops::Affine<f32>` gives
/// `Affine`).
pub(crate) fn last_ident(ty: &Type) -> Option<String> {
    match ty {
        Type::Path(p) if p.qself.is_none() => p.path.segments.last().map(|s| s.ident.to_string()),
        Type::Paren(p) => last_ident(&p.elem),
        Type::Group(g) => last_ident(&g.elem),
        _ => None,
    }
}

/// Refuses, with a message that says why and what would work, the types that cannot be
/// device values. Other paths are left to the `DeviceValue` bound.
pub(crate) fn check_device_type(ty: &Type) -> syn::Result<()> {
    let why = match ty {
        Type::Paren(p) => return check_device_type(&p.elem),
        Type::Group(g) => return check_device_type(&g.elem),
        Type::Path(p) if p.qself.is_some() => "a qualified path type cannot be checked".to_string(),
        Type::Path(_) => match last_ident(ty).as_deref().unwrap_or("") {
            "bool" => "`bool` has no guaranteed CUDA layout; use u8 (0 or 1)".into(),
            t @ ("usize" | "isize") => {
                format!("`{t}` has the host's width; use u64 or i64")
            }
            t @ ("i8" | "i16" | "u16" | "i128" | "u128" | "char") => {
                format!("`{t}` is not a cufold element type")
            }
            t @ ("String" | "str" | "Vec" | "Box" | "Rc" | "Arc" | "Option" | "Result" | "Cell"
            | "RefCell" | "HashMap" | "BTreeMap") => {
                format!("`{t}` owns or points to host memory")
            }
            _ => return Ok(()),
        },
        Type::Reference(_) | Type::Ptr(_) => format!(
            "`{}`: references and pointers cannot cross to the device",
            type_string(ty)
        ),
        Type::Tuple(_) => format!(
            "`{}`: tuples have no fixed layout; use a #[repr(C)] struct with #[derive(cufold::DeviceType)]",
            type_string(ty)
        ),
        // [T; N] is a DeviceValue for element types T (cf::Array<T, N>): the bound checks T.
        Type::Array(a) => return check_device_type(&a.elem),
        _ => format!("`{}` cannot live in device memory", type_string(ty)),
    };
    Err(syn::Error::new(
        ty.span(),
        format!("unsupported type for the device: {why}; supported: {SUPPORTED_TYPES}"),
    ))
}

/// A type as a user writes it, for messages: `&f64`, `Vec<f32>`, `[f64; 4]`,
/// `cufold::ops::Affine<f32>`, not the token stream's `& f64` or `Vec < f32 >`.
pub(crate) fn type_string(ty: &Type) -> String {
    let text = quote::quote!(#ty).to_string();
    let ident_end = |s: &str| s.ends_with(|c: char| c.is_alphanumeric() || c == '_');
    let ident_start = |s: &str| s.starts_with(|c: char| c.is_alphanumeric() || c == '_');
    let spaced = |s: &str| s == "->" || s == "=" || s == "+";
    let mut out = String::new();
    let mut prev = "";
    for tok in text.split_whitespace() {
        let space = !prev.is_empty()
            && ((ident_end(prev) && ident_start(tok))
                || prev.ends_with([',', ';'])
                || spaced(prev)
                || spaced(tok));
        if space {
            out.push(' ');
        }
        out.push_str(tok);
        prev = tok;
    }
    out
}

/// The where clause of a generated impl: `where T: ::cufold::DeviceValue` for each
/// distinct type of `tys` (its input, accumulator, output), spanned at the type.
///
/// A type that is no device value then fails once, at this bound (a global bound that
/// does not hold is an error where it is written), and inside the impl the bound is
/// assumed: the associated types' bounds, the `cuda_name::<T>()` of every struct literal
/// in the translated bodies and the `op_source::<In, Acc, Out>` call do not repeat it,
/// which they would, one error each, without it.
pub(crate) fn device_bounds(tys: &[&Type]) -> proc_macro2::TokenStream {
    let mut seen: Vec<String> = Vec::new();
    let mut preds = Vec::new();
    for ty in tys {
        let key = quote::quote!(#ty).to_string();
        if !seen.contains(&key) {
            seen.push(key);
            preds.push(quote::quote_spanned!(ty.span()=> #ty: ::cufold::DeviceValue));
        }
    }
    quote::quote!(where #(#preds),*)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserved_words_are_renamed_others_kept() {
        assert_eq!(cpp_ident("x"), "x");
        assert_eq!(cpp_ident("new"), "new_cf");
        assert_eq!(cpp_ident("r#float"), "float_cf");
        assert_eq!(cpp_ident("cfm_s"), "cfm_s_cf");
        assert_eq!(cpp_ident("In"), "In_cf");
        assert_eq!(cpp_ident("a_cf"), "a_cf_cf");
    }

    #[test]
    fn types_print_as_written() {
        for ty in [
            "&f64",
            "&'a mut f32",
            "*const u8",
            "Vec<Vec<f32>>",
            "[f64; 4]",
            "(f32, f32)",
            "cufold::ops::Affine<f32>",
            "Option<&'static str>",
            "dyn Fn(f32) -> f32 + Send",
            "impl Iterator<Item = f32>",
        ] {
            assert_eq!(type_string(&syn::parse_str(ty).unwrap()), ty);
        }
    }

    #[test]
    fn obvious_host_types_are_refused() {
        for bad in [
            "bool",
            "usize",
            "&f32",
            "(f32, f32)",
            "Vec<f32>",
            "*const u8",
        ] {
            let ty: Type = syn::parse_str(bad).unwrap();
            let e = check_device_type(&ty).unwrap_err().to_string();
            assert!(e.contains("supported: f32"), "{bad}: {e}");
        }
        for good in [
            "f32",
            "cufold::ops::Affine<f64>",
            "MyStruct",
            "cufold::f16",
            "[f64; 4]",
        ] {
            check_device_type(&syn::parse_str(good).unwrap()).unwrap();
        }
    }
}
