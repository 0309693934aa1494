//! Run-time support for the code that `#[cufold::op]` and `#[derive(cufold::DeviceType)]`
//! generate. Not a public API: re-exported as the hidden module `cufold::__private`, and
//! free to change with the macros.
//!
//! The macros cannot know the C++ names of user types (they come from
//! [`DeviceValue::cuda_name`]), so they generate Rust code that assembles the CUDA source
//! when [`Operator::cuda`](crate::ops::Operator::cuda) is called, from the pieces here.

use crate::element::DeviceValue;
use crate::ops::OpParams;
use half::{bf16, f16};

pub use cudarc;

/// The C++ helpers translated operators call (`namespace cfm`), under an include guard.
pub const PRELUDE: &str = crate::gpu::jit::embedded::MACRO_SUPPORT_CUH;

/// A 32-bit hash of a module path (64-bit FNV-1a, folded), computed at compile time by the
/// generated code, which makes C++ names unique per Rust type.
pub const fn fnv(s: &str) -> u32 {
    let b = s.as_bytes();
    let mut h = 0xcbf29ce484222325u64;
    let mut i = 0;
    while i < b.len() {
        h ^= b[i] as u64;
        h = h.wrapping_mul(0x100000001b3);
        i += 1;
    }
    (h ^ (h >> 32)) as u32
}

/// The C++ name of a Rust item: its identifier and the hash of its module path.
pub fn type_name(ident: &str, module_hash: u32) -> String {
    format!("{ident}_{module_hash:08x}")
}

/// `f()` without the debug-build law check of the CPU backend on this thread (see
/// `laws::debug_check`): for test probes that break an operator's laws on purpose, such as
/// an operator that records the shape of the tree it is combined along. Not for operators
/// that are meant to be lawful: test those with [`laws::check`](crate::laws::check).
pub fn without_law_check<R>(f: impl FnOnce() -> R) -> R {
    crate::laws::without_debug_check(f)
}

/// `T`'s C++ type name.
pub fn cuda_name<T: DeviceValue>() -> String {
    T::cuda_name()
}

/// Appends the C++ declarations `T` needs to `s`, unless `s` has them already (each
/// declaration is guarded, so this only keeps sources short).
pub fn push_decl<T: DeviceValue>(s: &mut String) {
    let d = T::cuda_decl();
    if !s.contains(&d) {
        s.push_str(&d);
    }
}

/// What the derive needs of a field's type: its size, whether it is dense, and its C++ name
/// and declarations.
pub struct FieldType {
    size: usize,
    dense: bool,
    cuda_name: fn() -> String,
    cuda_decl: fn() -> String,
}

/// The field type `T`. The derive names each field type once, here, in one constant that
/// both `DeviceValue::DENSE` and `cuda_decl` read, so that a field type that is no device
/// value gives one error, at the field.
pub const fn field<T: DeviceValue>() -> FieldType {
    FieldType {
        size: std::mem::size_of::<T>(),
        dense: T::DENSE,
        cuda_name: T::cuda_name,
        cuda_decl: T::cuda_decl,
    }
}

/// Whether a struct of `size` bytes with these fields has no padding: the fields' sizes add
/// up to the struct's, and no field has padding of its own.
pub const fn dense(size: usize, fields: &[FieldType]) -> bool {
    let (mut sum, mut i) = (0, 0);
    while i < fields.len() {
        if !fields[i].dense {
            return false;
        }
        sum += fields[i].size;
        i += 1;
    }
    sum == size
}

/// The fields' (C++ type, C++ name) pairs, for [`struct_decl`]; their types' declarations go
/// to `decls` (each once).
pub fn fields<'a>(
    types: &[FieldType],
    names: &[&'a str],
    decls: &mut String,
) -> Vec<(String, &'a str)> {
    types
        .iter()
        .zip(names)
        .map(|(t, &name)| {
            let d = (t.cuda_decl)();
            if !decls.contains(&d) {
                decls.push_str(&d);
            }
            ((t.cuda_name)(), name)
        })
        .collect()
}

/// The guarded C++ twin of a `#[repr(C)]` struct: `fields` are (C++ type, C++ name) in
/// declaration order; the `static_assert` makes NVRTC refuse a layout that differs from
/// Rust's (`size` and `align` are `size_of` and `align_of` of the Rust struct; `align_attr`
/// is its `#[repr(align(N))]`, or 0).
pub fn struct_decl(
    name: &str,
    rust_name: &str,
    fields: &[(String, &str)],
    size: usize,
    align: usize,
    align_attr: usize,
) -> String {
    let mut s = format!("#ifndef CUFOLD_DECL_{name}\n#define CUFOLD_DECL_{name}\n// {rust_name}\n");
    if align_attr > 0 {
        s.push_str(&format!("struct alignas({align_attr}) {name} {{\n"));
    } else {
        s.push_str(&format!("struct {name} {{\n"));
    }
    for (ty, field) in fields {
        s.push_str(&format!("    {ty} {field};\n"));
    }
    s.push_str(&format!(
        "}};\nstatic_assert(sizeof({name}) == {size} && alignof({name}) == {align}, \
         \"cufold: the CUDA struct {name} does not have the layout of the Rust struct {rust_name}\");\n#endif\n"
    ));
    s
}

/// What the code generated for an operator or a map with run-time parameters needs of their
/// type `P` (the operator's own type): its bytes, its C++ twin's name and declarations. The
/// macros build it in one constant, so that a `P` that is no device value is one error.
pub struct Params<P> {
    dense: bool,
    params: fn(&P) -> OpParams,
    cuda_name: fn() -> String,
    cuda_decl: fn() -> String,
}

/// What the generated code needs of `P`, the one place that requires it to be a device
/// value.
pub const fn params<P: DeviceValue>() -> Params<P> {
    Params {
        dense: P::DENSE,
        params: OpParams::of::<P>,
        cuda_name: P::cuda_name,
        cuda_decl: P::cuda_decl,
    }
}

impl<P> Params<P> {
    /// Whether `P` has no padding ([`DeviceValue::DENSE`]), so that its bytes can be sent.
    pub const fn dense(&self) -> bool {
        self.dense
    }

    /// The run-time parameters of `value`: its bytes.
    pub fn of(&self, value: &P) -> OpParams {
        (self.params)(value)
    }
}

/// The struct `name` (under the include guard `CUFOLD_{guard}_{name}`), deriving from
/// `base` if any, with the typedefs and the member functions (complete C++ definitions,
/// indented by four spaces).
fn member_struct(
    s: &mut String,
    guard: &str,
    name: &str,
    base: Option<&str>,
    typedefs: &[(&str, String)],
    functions: &[String],
) {
    s.push_str(&format!(
        "#ifndef CUFOLD_{guard}_{name}\n#define CUFOLD_{guard}_{name}\n"
    ));
    match base {
        Some(b) => s.push_str(&format!("struct {name} : {b} {{\n")),
        None => s.push_str(&format!("struct {name} {{\n")),
    }
    for (alias, ty) in typedefs {
        s.push_str(&format!("    typedef {ty} {alias};\n"));
    }
    for f in functions {
        s.push_str(f);
    }
    s.push_str("};\n");
    if let Some(b) = base {
        s.push_str(&format!(
            "static_assert(sizeof({name}) == sizeof({b}), \"cufold: {name} adds data to its run-time \
             parameters {b}\");\n"
        ));
    }
    s.push_str("#endif\n");
}

/// The source of a translated operator: the helpers, the declarations of its types, and
/// the struct `name` with the typedefs and the four member functions (complete C++
/// definitions, indented by four spaces, in the order identity, lift, combine, finish).
pub fn op_source<In: DeviceValue, Acc: DeviceValue, Out: DeviceValue>(
    name: &str,
    functions: &[String; 4],
) -> String {
    op_source_on::<In, Acc, Out>(String::from(PRELUDE), name, None, functions)
}

/// [`op_source`] for an operator with run-time parameters: the struct `name` derives from
/// the parameters' C++ twin (declared first) and adds no data, so that its layout is theirs.
pub fn op_source_with_params<P, In: DeviceValue, Acc: DeviceValue, Out: DeviceValue>(
    params: &Params<P>,
    name: &str,
    functions: &[String; 4],
) -> String {
    let mut s = String::from(PRELUDE);
    s.push_str(&(params.cuda_decl)());
    op_source_on::<In, Acc, Out>(s, name, Some(&(params.cuda_name)()), functions)
}

fn op_source_on<In: DeviceValue, Acc: DeviceValue, Out: DeviceValue>(
    mut s: String,
    name: &str,
    base: Option<&str>,
    functions: &[String; 4],
) -> String {
    push_decl::<In>(&mut s);
    push_decl::<Acc>(&mut s);
    push_decl::<Out>(&mut s);
    let typedefs = [
        ("In", In::cuda_name()),
        ("Acc", Acc::cuda_name()),
        ("Out", Out::cuda_name()),
    ];
    member_struct(&mut s, "OP", name, base, &typedefs, functions);
    s
}

/// The source of a translated map ([`Transform`](crate::ops::Transform)): the helpers, the
/// declarations of its types, and the struct `name` with the typedefs `In` and `Out` and
/// `operator()` (a complete C++ definition, indented by four spaces).
pub fn transform_source<In: DeviceValue, Out: DeviceValue>(name: &str, apply: &str) -> String {
    transform_source_on::<In, Out>(String::from(PRELUDE), name, None, apply)
}

/// [`transform_source`] for a map with run-time parameters: the struct `name` derives from
/// the parameters' C++ twin (declared first) and adds no data.
pub fn transform_source_with_params<P, In: DeviceValue, Out: DeviceValue>(
    params: &Params<P>,
    name: &str,
    apply: &str,
) -> String {
    let mut s = String::from(PRELUDE);
    s.push_str(&(params.cuda_decl)());
    transform_source_on::<In, Out>(s, name, Some(&(params.cuda_name)()), apply)
}

fn transform_source_on<In: DeviceValue, Out: DeviceValue>(
    mut s: String,
    name: &str,
    base: Option<&str>,
    apply: &str,
) -> String {
    push_decl::<In>(&mut s);
    push_decl::<Out>(&mut s);
    let typedefs = [("In", In::cuda_name()), ("Out", Out::cuda_name())];
    member_struct(&mut s, "MAP", name, base, &typedefs, &[apply.to_string()]);
    s
}

/// A value as an exact C++ expression of its C++ type: how constants (`f32::INFINITY`,
/// `u64::MAX`, a user's `const`) and suffixed literals enter translated operators.
///
/// ```
/// use cufold::__private::CudaLiteral;
/// assert_eq!(0.5f32.cuda_literal(), "0.5f");
/// assert_eq!(0.1f32.cuda_literal(), "0xcccccdp-27f");
/// assert_eq!(f64::INFINITY.cuda_literal(), "cfm::f64_bits(0x7ff0000000000000ull)");
/// assert_eq!(u64::MAX.cuda_literal(), "18446744073709551615ull");
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` has no CUDA literal: a translated operator can only use constants of the primitive number types, f16, bf16 and bool",
    label = "not a constant of a primitive number type"
)]
pub trait CudaLiteral {
    /// The C++ expression.
    fn cuda_literal(&self) -> String;
}

/// `mant * 2^exp` (`mant` odd or zero) as a C++ literal: a decimal where that is exact and
/// short, a hexadecimal float otherwise. Decimal parsing is never relied on to round.
fn finite(neg: bool, mut mant: u64, mut exp: i32, suffix: &str) -> String {
    let sign = if neg { "-" } else { "" };
    if mant == 0 {
        return format!("{sign}0.0{suffix}");
    }
    while mant % 2 == 0 {
        mant /= 2;
        exp += 1;
    }
    if (0..64).contains(&exp) && (mant as u128) << exp <= u64::MAX as u128 {
        return format!("{sign}{}.0{suffix}", (mant as u128) << exp);
    }
    if (-12..0).contains(&exp) {
        let k = (-exp) as u32;
        let digits = format!(
            "{:0>width$}",
            mant as u128 * 5u128.pow(k),
            width = k as usize + 1
        );
        let (int, frac) = digits.split_at(digits.len() - k as usize);
        return format!("{sign}{int}.{frac}{suffix}");
    }
    format!("{sign}0x{mant:x}p{exp}{suffix}")
}

impl CudaLiteral for f32 {
    fn cuda_literal(&self) -> String {
        let b = self.to_bits();
        let (e, m) = ((b >> 23) & 0xff, b & 0x7f_ffff);
        match e {
            0xff => format!("cfm::f32_bits({b:#010x}u)"),
            0 => finite(b >> 31 != 0, m as u64, -149, "f"),
            _ => finite(b >> 31 != 0, (m | 1 << 23) as u64, e as i32 - 150, "f"),
        }
    }
}

impl CudaLiteral for f64 {
    fn cuda_literal(&self) -> String {
        let b = self.to_bits();
        let (e, m) = ((b >> 52) & 0x7ff, b & 0xf_ffff_ffff_ffff);
        match e {
            0x7ff => format!("cfm::f64_bits({b:#018x}ull)"),
            0 => finite(b >> 63 != 0, m, -1074, ""),
            _ => finite(b >> 63 != 0, m | 1 << 52, e as i32 - 1075, ""),
        }
    }
}

impl CudaLiteral for f16 {
    fn cuda_literal(&self) -> String {
        format!("cfm::f16_bits({:#06x})", self.to_bits())
    }
}

impl CudaLiteral for bf16 {
    fn cuda_literal(&self) -> String {
        format!("cfm::bf16_bits({:#06x})", self.to_bits())
    }
}

impl CudaLiteral for bool {
    fn cuda_literal(&self) -> String {
        self.to_string()
    }
}

impl CudaLiteral for i32 {
    fn cuda_literal(&self) -> String {
        match *self {
            i32::MIN => "(-2147483647 - 1)".into(),
            v => v.to_string(),
        }
    }
}

impl CudaLiteral for i64 {
    fn cuda_literal(&self) -> String {
        match *self {
            i64::MIN => "(-9223372036854775807ll - 1)".into(),
            v => format!("{v}ll"),
        }
    }
}

macro_rules! cast_literal {
    ($($t:ty => $fmt:literal),*) => {$(
        impl CudaLiteral for $t {
            fn cuda_literal(&self) -> String {
                format!($fmt, self)
            }
        }
    )*};
}
cast_literal!(
    u32 => "{}u",
    u64 => "{}ull",
    u8 => "((unsigned char){})",
    i8 => "((signed char){})",
    u16 => "((unsigned short){})",
    i16 => "((short){})"
);

/// An unsuffixed float literal, given its f32 and f64 roundings as bits (parsed from the
/// literal's text by the macro): the C++ `cfm::FLit` that takes the type of what it meets.
pub fn flit(f32_bits: u32, f64_bits: u64) -> String {
    format!(
        "cfm::flit({}, {})",
        f32::from_bits(f32_bits).cuda_literal(),
        f64::from_bits(f64_bits).cuda_literal()
    )
}

/// An unsuffixed integer literal: the C++ `cfm::ILit` that takes the type of what it meets.
pub fn ilit(v: u64) -> String {
    if v <= i32::MAX as u64 {
        format!("cfm::ilit({v})")
    } else {
        format!("cfm::ilit({v}ull)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Parses what `cuda_literal` printed (decimal or hexadecimal float) back to a value.
    fn parse(s: &str) -> f64 {
        let s = s.trim_end_matches('f');
        let (neg, s) = match s.strip_prefix('-') {
            Some(r) => (true, r),
            None => (false, s),
        };
        let v = if let Some(hex) = s.strip_prefix("0x") {
            let (m, e) = hex.split_once('p').unwrap();
            // Two exact scalings, so that subnormals are not flushed on the way.
            let e: i32 = e.parse().unwrap();
            u64::from_str_radix(m, 16).unwrap() as f64 * 2f64.powi(e / 2) * 2f64.powi(e - e / 2)
        } else {
            s.parse().unwrap()
        };
        if neg {
            -v
        } else {
            v
        }
    }

    #[test]
    fn float_literals_are_exact() {
        let mut x = 0x1234_5678_9abc_def0u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..20_000 {
            let d = f64::from_bits(next());
            if d.is_finite() {
                assert_eq!(parse(&d.cuda_literal()).to_bits(), d.to_bits(), "{d:e}");
            }
            let f = f32::from_bits(next() as u32);
            if f.is_finite() {
                let text = f.cuda_literal();
                assert!(text.ends_with('f'), "{text}");
                assert_eq!((parse(&text) as f32).to_bits(), f.to_bits(), "{f:e}");
            }
        }
        for v in [0.0, -0.0, 1.0, 0.5, 1.0e-45, 3.4028235e38, 0.1, -7.75] {
            let f = v as f32;
            assert_eq!((parse(&f.cuda_literal()) as f32).to_bits(), f.to_bits());
        }
    }

    #[test]
    fn literals_read_as_written_where_exact() {
        assert_eq!(0.5f32.cuda_literal(), "0.5f");
        assert_eq!((-1.25f64).cuda_literal(), "-1.25");
        assert_eq!(2.0f64.cuda_literal(), "2.0");
        assert_eq!(1024.0f32.cuda_literal(), "1024.0f");
        assert_eq!((1.0f32 / 4096.0).cuda_literal(), "0.000244140625f"); // exact, all digits
        assert_eq!((-0.0f32).cuda_literal(), "-0.0f");
        assert_eq!(0.1f64.cuda_literal(), "0xccccccccccccdp-55");
        assert_eq!(1e10f32.cuda_literal(), "10000000000.0f");
        assert_eq!(1e30f64.cuda_literal(), "0xc9f2c9cd04675p48");
        assert_eq!(
            f32::NEG_INFINITY.cuda_literal(),
            "cfm::f32_bits(0xff800000u)"
        );
        assert_eq!(f32::NAN.cuda_literal(), "cfm::f32_bits(0x7fc00000u)");
        assert_eq!(f16::ONE.cuda_literal(), "cfm::f16_bits(0x3c00)");
        assert_eq!(bf16::NEG_INFINITY.cuda_literal(), "cfm::bf16_bits(0xff80)");
        assert_eq!(i32::MIN.cuda_literal(), "(-2147483647 - 1)");
        assert_eq!((-5i64).cuda_literal(), "-5ll");
        assert_eq!(7u8.cuda_literal(), "((unsigned char)7)");
        assert_eq!(
            flit(0.1f32.to_bits(), 0.1f64.to_bits()),
            "cfm::flit(0xcccccdp-27f, 0xccccccccccccdp-55)"
        );
        assert_eq!(flit(1f32.to_bits(), 1f64.to_bits()), "cfm::flit(1.0f, 1.0)");
        assert_eq!(ilit(3), "cfm::ilit(3)");
        assert_eq!(ilit(u64::MAX), "cfm::ilit(18446744073709551615ull)");
    }

    #[test]
    fn names_are_the_ident_and_a_module_hash() {
        assert_eq!(type_name("Lse", 0xabc), "Lse_00000abc");
        assert_ne!(fnv("a::b"), fnv("a::c"));
        const H: u32 = fnv("crate::ops");
        assert_eq!(H, fnv("crate::ops"));
    }

    #[test]
    fn struct_declarations_are_guarded_and_checked() {
        let d = struct_decl(
            "P_1",
            "m::P",
            &[("float".into(), "x"), ("cf::u64".into(), "n")],
            16,
            8,
            0,
        );
        assert_eq!(
            d,
            "#ifndef CUFOLD_DECL_P_1\n#define CUFOLD_DECL_P_1\n// m::P\nstruct P_1 {\n    float x;\n    cf::u64 n;\n};\n\
             static_assert(sizeof(P_1) == 16 && alignof(P_1) == 8, \"cufold: the CUDA struct P_1 does not have \
             the layout of the Rust struct m::P\");\n#endif\n"
        );
        assert!(struct_decl("Q", "Q", &[("float".into(), "x")], 16, 16, 16)
            .contains("struct alignas(16) Q {"));
    }
}
