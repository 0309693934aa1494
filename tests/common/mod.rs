//! Shared test helpers: seeded random data for every element type, a tree-shape operator.
#![allow(dead_code, unreachable_pub)]

use cudarc::driver::CudaSlice;
use cufold::ops::{Affine, CudaOp, Mat2, Operator};
use cufold::{bf16, f16, DeviceValue, Gpu};
use std::sync::OnceLock;

pub mod host;

/// Device 0, opened once per test binary (GPU tests only).
pub fn gpu() -> &'static Gpu {
    static GPU: OnceLock<Gpu> = OnceLock::new();
    GPU.get_or_init(|| Gpu::open(0).expect("a CUDA device"))
}

/// All bytes 0xA5: a valid value of every output type tested (numbers and structs of
/// numbers), and unlike any real result. Outputs are filled with it before a kernel runs.
pub fn poison<T: DeviceValue>() -> T {
    let mut v = std::mem::MaybeUninit::<T>::uninit();
    // SAFETY: the outputs tested are numbers and structs of numbers, for which every bit
    // pattern is valid.
    unsafe {
        std::ptr::write_bytes(v.as_mut_ptr() as *mut u8, 0xA5, std::mem::size_of::<T>());
        v.assume_init()
    }
}

/// The GPU test tier. By default every operator and element type runs at the boundary sizes
/// (one element, a warp, a block, a tile, many blocks): about a minute on an H100. With
/// `CUFOLD_TEST_TIER=full` the sweeps add 2^28-element inputs and the tests that need more
/// than 2^32 elements or a 2^28 scan run too: several minutes.
pub fn full_tier() -> bool {
    std::env::var("CUFOLD_TEST_TIER").is_ok_and(|t| t == "full")
}

/// `sizes`, plus `full_only` in the full tier.
pub fn tiered(sizes: &[usize], full_only: &[usize]) -> Vec<usize> {
    let mut v = sizes.to_vec();
    if full_tier() {
        v.extend_from_slice(full_only);
    }
    v
}

/// For a test that belongs to the full tier only: true there; in the default tier, false,
/// with a line on stderr saying the test did not run and how to run it.
pub fn in_full_tier(test: &str) -> bool {
    let full = full_tier();
    if !full {
        eprintln!("{test}: not run: full tier only (set CUFOLD_TEST_TIER=full)");
    }
    full
}

/// Whether a compile-only test (every kernel of a family built with NVRTC for sm_90, no
/// GPU needed) runs here: always where no CUDA device can be opened, which is what it is
/// for, and in the full tier; on a CUDA machine's default tier the GPU tests compile and run
/// those kernels anyway, so it says so on stderr and stops.
pub fn compile_only_test_runs(test: &str) -> bool {
    if full_tier() || Gpu::open(0).is_err() {
        return true;
    }
    eprintln!("{test}: not run: a CUDA device is present and the tier is not full (CUFOLD_TEST_TIER=full)");
    false
}

/// A job for [`run_parallel`].
pub type Job = Box<dyn FnOnce() + Send>;

/// Runs `jobs` on every core (kernel compiles, which take a quarter second each in NVRTC),
/// then panics with every job's panic message if any panicked.
pub fn run_parallel(jobs: Vec<Job>) {
    use std::sync::Mutex;
    let queue = Mutex::new(jobs.into_iter().map(Some).collect::<Vec<_>>());
    let failures = Mutex::new(Vec::new());
    let threads = std::thread::available_parallelism().map_or(1, |t| t.get());
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let job = match queue.lock().unwrap().pop() {
                    Some(job) => job.unwrap(),
                    None => break,
                };
                if let Err(p) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job)) {
                    let msg = p
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_else(|| "a job panicked".into());
                    failures.lock().unwrap().push(msg);
                }
            });
        }
    });
    let failures = failures.into_inner().unwrap();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A device copy of `host` on `g`'s stream (an empty buffer for an empty slice).
pub fn upload<T: DeviceValue>(g: &Gpu, host: &[T]) -> CudaSlice<T> {
    if host.is_empty() {
        g.stream().alloc_zeros::<T>(0).unwrap()
    } else {
        g.stream().clone_htod(host).unwrap()
    }
}

/// The seed for this run: `CUFOLD_SEED` if set, else the clock. Printed, so a failure can
/// be replayed.
pub fn seed(test: &str) -> u64 {
    let s = std::env::var("CUFOLD_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        });
    eprintln!("{test}: seed {s} (replay with CUFOLD_SEED={s})");
    s
}

/// splitmix64: fast, seedable, good enough for test data.
pub struct Rng(pub u64);
impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e3779b97f4a7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58476d1ce4e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d049bb133111eb);
        z ^ (z >> 31)
    }
    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Random values of a type: floats in [-1, 1) with some exact zeros and negative zeros,
/// integers over their whole range.
pub trait Gen: Sized + Copy {
    fn gen(r: &mut Rng) -> Self;
}
macro_rules! gen_int {
    ($($t:ty),*) => {$(impl Gen for $t { fn gen(r: &mut Rng) -> Self { r.next() as $t } })*};
}
gen_int!(i32, i64, u32, u64, u8);
fn float(r: &mut Rng) -> f64 {
    match r.next() % 64 {
        0 => 0.0,
        1 => -0.0,
        _ => r.unit() * 2.0 - 1.0,
    }
}
impl Gen for f32 {
    fn gen(r: &mut Rng) -> Self {
        float(r) as f32
    }
}
impl Gen for f64 {
    fn gen(r: &mut Rng) -> Self {
        float(r)
    }
}
impl Gen for f16 {
    fn gen(r: &mut Rng) -> Self {
        f16::from_f64(float(r))
    }
}
impl Gen for bf16 {
    fn gen(r: &mut Rng) -> Self {
        bf16::from_f64(float(r))
    }
}
/// Maps close to contractions, so long compositions neither overflow nor vanish.
impl<T: Gen + cufold::Real> Gen for Affine<T> {
    fn gen(r: &mut Rng) -> Self {
        let a = T::from_f64(0.9 + 0.2 * r.unit());
        Affine {
            a,
            b: T::from_f64(r.unit() - 0.5),
        }
    }
}
/// Rotations-and-scalings near the identity.
impl<T: Gen + cufold::Real> Gen for Mat2<T> {
    fn gen(r: &mut Rng) -> Self {
        let e = |r: &mut Rng| T::from_f64((r.unit() - 0.5) * 0.02);
        Mat2 {
            m00: T::from_f64(1.0) + e(r),
            m01: e(r),
            m10: e(r),
            m11: T::from_f64(1.0) + e(r),
        }
    }
}

pub fn data<T: Gen>(n: usize, seed: u64) -> Vec<T> {
    let mut r = Rng(seed);
    (0..n).map(|_| T::gen(&mut r)).collect()
}

/// CSR offsets starting at `base` for segments of these lengths.
pub fn csr_offsets(base: u64, lengths: &[usize]) -> Vec<u64> {
    let mut o = vec![base];
    for &l in lengths {
        o.push(o.last().unwrap() + l as u64);
    }
    o
}

/// Same bits (NaNs of any payload count as equal): Debug prints every other bit pattern
/// of our floats differently, -0.0 included. The scalars and cufold's value types are
/// compared by their bits under the same rule without printing them ([`SameBits`]): tests
/// compare millions of outputs, and two formatted strings per value cost more than the
/// GPU's work. Other types are compared by their Debug text.
pub fn same<X: std::fmt::Debug + 'static>(a: &X, b: &X) -> bool {
    use cufold::ops::{Affine, Indexed, Mat2, MeanVarValue, MinMaxValue};
    use cufold::{bf16, f16};
    use std::any::Any;
    let (da, db): (&dyn Any, &dyn Any) = (a, b);
    macro_rules! by_bits {
        ($($t:ty),*) => {$(
            if let (Some(x), Some(y)) = (da.downcast_ref::<$t>(), db.downcast_ref::<$t>()) {
                return x.same_bits(y);
            }
        )*};
    }
    macro_rules! with_elements {
        ($($t:ty),*) => {$(
            by_bits!($t, Indexed<$t>, MinMaxValue<$t>);
        )*};
    }
    with_elements!(f32, f64, f16, bf16, u8, i8, u16, i16, u32, i32, u64, i64);
    by_bits!(
        usize,
        bool,
        i128,
        u128,
        MeanVarValue,
        Affine<f32>,
        Affine<f64>,
        Mat2<f32>,
        Mat2<f64>
    );
    format!("{a:?}") == format!("{b:?}")
}

/// Equality of bits, NaNs of any payload equal (what [`same`] means), without formatting.
pub trait SameBits {
    fn same_bits(&self, other: &Self) -> bool;
}

macro_rules! float_same_bits {
    ($($t:ty),*) => {$(
        impl SameBits for $t {
            fn same_bits(&self, other: &Self) -> bool {
                self.to_bits() == other.to_bits() || (self.is_nan() && other.is_nan())
            }
        }
    )*};
}
float_same_bits!(f32, f64, cufold::f16, cufold::bf16);

macro_rules! int_same_bits {
    ($($t:ty),*) => {$(
        impl SameBits for $t {
            fn same_bits(&self, other: &Self) -> bool {
                self == other
            }
        }
    )*};
}
int_same_bits!(u8, i8, u16, i16, u32, i32, u64, i64, u128, i128, usize, bool);

impl<T: SameBits> SameBits for cufold::ops::Indexed<T> {
    fn same_bits(&self, o: &Self) -> bool {
        self.value.same_bits(&o.value) && self.index == o.index
    }
}
impl<T: SameBits> SameBits for cufold::ops::MinMaxValue<T> {
    fn same_bits(&self, o: &Self) -> bool {
        self.min.same_bits(&o.min) && self.max.same_bits(&o.max)
    }
}
impl<T: SameBits> SameBits for cufold::ops::Affine<T> {
    fn same_bits(&self, o: &Self) -> bool {
        self.a.same_bits(&o.a) && self.b.same_bits(&o.b)
    }
}
impl<T: SameBits> SameBits for cufold::ops::Mat2<T> {
    fn same_bits(&self, o: &Self) -> bool {
        self.m00.same_bits(&o.m00)
            && self.m01.same_bits(&o.m01)
            && self.m10.same_bits(&o.m10)
            && self.m11.same_bits(&o.m11)
    }
}
impl SameBits for cufold::ops::MeanVarValue {
    fn same_bits(&self, o: &Self) -> bool {
        self.count.same_bits(&o.count) && self.mean.same_bits(&o.mean) && self.m2.same_bits(&o.m2)
    }
}

/// A node of a reduction tree: the positions `lo .. lo + len` it covers, and whether any
/// combine below it broke the canonical tree's rules.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct Node {
    pub lo: u64,
    pub len: u64,
    pub bad: u64,
}
// SAFETY: #[repr(C)] struct of three u64, matching `struct Node` in SHAPE_CUDA.
unsafe impl cudarc::driver::DeviceRepr for Node {}
// SAFETY: all fields are integers.
unsafe impl cudarc::driver::ValidAsZeroBits for Node {}
// SAFETY: same layout as the C++ struct `Node` below.
unsafe impl DeviceValue for Node {
    fn cuda_name() -> String {
        "Node".into()
    }
}

/// Every rank's result of a distributed call against one device's (`what` says which call):
/// the same bits, or errors of the same kind.
pub fn assert_ranks_agree<X: std::fmt::Debug + 'static>(
    want: &cufold::Result<X>,
    got: &[cufold::Result<X>],
    what: &str,
) {
    for (r, g) in got.iter().enumerate() {
        match (want, g) {
            (Ok(w), Ok(g)) => assert!(same(w, g), "{what}, rank {r}: {g:?}, one device {w:?}"),
            (Err(w), Err(g)) => assert_eq!(w.kind(), g.kind(), "{what}, rank {r}"),
            _ => panic!("{what}, rank {r}: {g:?} against {want:?}"),
        }
    }
}

/// Records the shape of the tree it is reduced along. The canonical tree combines only
/// equal-sized aligned neighbours, or a node with the padding to its right (the identity,
/// `len == 0`), and never padding on the left; its root covers `0 .. next_pow2(N)`.
#[derive(Clone, Copy, Debug, Default)]
pub struct TreeShape;

pub const SHAPE_CUDA: &str = r#"
struct Node { unsigned long long lo, len, bad; };
struct TreeShapeOp {
    typedef unsigned In; typedef Node Acc; typedef Node Out;
    __device__ Acc identity() const { Node r; r.lo = ~0ull; r.len = 0; r.bad = 0; return r; }
    __device__ Acc lift(In, unsigned long long i) const { Node r; r.lo = i; r.len = 1; r.bad = 0; return r; }
    __device__ Acc combine(Acc a, Acc b) const {
        if (a.len == 0) { if (b.len != 0) b.bad = 1; return b; }
        Node r; r.lo = a.lo; r.len = 2 * a.len; r.bad = a.bad | b.bad;
        if (a.lo % (2 * a.len) != 0) r.bad = 1;
        if (b.len != 0 && (b.len != a.len || b.lo != a.lo + a.len)) r.bad = 1;
        return r;
    }
    __device__ Out finish(Acc a, unsigned long long) const { return a; }
};
"#;

impl Operator<u32> for TreeShape {
    type Acc = Node;
    type Out = Node;
    const COMMUTATIVE: bool = false;
    const EMPTY_IS_ERROR: bool = false;
    const NAME: &'static str = "TreeShape";
    fn identity(&self) -> Node {
        Node {
            lo: u64::MAX,
            len: 0,
            bad: 0,
        }
    }
    fn lift(&self, _: u32, i: u64) -> Node {
        Node {
            lo: i,
            len: 1,
            bad: 0,
        }
    }
    fn combine(&self, a: Node, mut b: Node) -> Node {
        if a.len == 0 {
            if b.len != 0 {
                b.bad = 1;
            }
            return b;
        }
        let mut r = Node {
            lo: a.lo,
            len: 2 * a.len,
            bad: a.bad | b.bad,
        };
        if a.lo % (2 * a.len) != 0 {
            r.bad = 1;
        }
        if b.len != 0 && (b.len != a.len || b.lo != a.lo + a.len) {
            r.bad = 1;
        }
        r
    }
    fn finish(&self, a: Node, _: u64) -> Node {
        a
    }
    fn cuda(&self) -> CudaOp {
        CudaOp {
            type_name: "TreeShapeOp".into(),
            source: SHAPE_CUDA.into(),
        }
    }
}

/// What TreeShape must return for N elements.
pub fn canonical_root(n: u64) -> Node {
    if n == 0 {
        Node {
            lo: u64::MAX,
            len: 0,
            bad: 0,
        }
    } else {
        Node {
            lo: 0,
            len: n.next_power_of_two(),
            bad: 0,
        }
    }
}

/// A node of a scan's combination: positions `lo .. lo + len`, the size of its last block,
/// whether a combine or a finish broke the canonical grouping's rules.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct Fold {
    pub lo: u64,
    pub len: u64,
    pub last: u64,
    pub bad: u64,
}
// SAFETY: #[repr(C)] struct of four u64, matching `struct Fold` in FOLD_CUDA.
unsafe impl cudarc::driver::DeviceRepr for Fold {}
// SAFETY: all fields are integers.
unsafe impl cudarc::driver::ValidAsZeroBits for Fold {}
// SAFETY: same layout as the C++ struct `Fold` below.
unsafe impl DeviceValue for Fold {
    fn cuda_name() -> String {
        "Fold".into()
    }
}

/// Records how a scan combines: a tree merges two equal aligned neighbouring trees; a prefix
/// starts at 0 and is extended only by a smaller aligned tree right after it (largest block
/// first); nothing is ever combined with the identity (`len == 0`); `finish` checks that the
/// count it is given is the prefix's length.
#[derive(Clone, Copy, Debug, Default)]
pub struct FoldShape;

pub const FOLD_CUDA: &str = r#"
struct Fold { unsigned long long lo, len, last, bad; };
struct FoldShapeOp {
    typedef unsigned In; typedef Fold Acc; typedef Fold Out;
    __device__ Acc identity() const { Fold r; r.lo = 0; r.len = 0; r.last = 0; r.bad = 0; return r; }
    __device__ Acc lift(In, unsigned long long i) const { Fold r; r.lo = i; r.len = 1; r.last = 1; r.bad = 0; return r; }
    __device__ Acc combine(Acc a, Acc b) const {
        Fold r; r.bad = a.bad | b.bad;
        if (a.len == 0 || b.len == 0) { r.lo = 0; r.len = 0; r.last = 0; r.bad = 1; return r; }
        bool trees = a.last == a.len && b.last == b.len;
        if (trees && a.len == b.len && a.lo % (2 * a.len) == 0 && b.lo == a.lo + a.len) {
            r.lo = a.lo; r.len = 2 * a.len; r.last = r.len; return r;
        }
        r.lo = a.lo; r.len = a.len + b.len; r.last = b.len;
        if (!(a.lo == 0 && b.last == b.len && b.len < a.last && b.lo == a.len)) r.bad = 1;
        return r;
    }
    __device__ Out finish(Acc a, unsigned long long n) const { if (a.len != n) a.bad = 1; return a; }
};
"#;

impl Operator<u32> for FoldShape {
    type Acc = Fold;
    type Out = Fold;
    const COMMUTATIVE: bool = false;
    const EMPTY_IS_ERROR: bool = false;
    const NAME: &'static str = "FoldShape";
    fn identity(&self) -> Fold {
        Fold {
            lo: 0,
            len: 0,
            last: 0,
            bad: 0,
        }
    }
    fn lift(&self, _: u32, i: u64) -> Fold {
        Fold {
            lo: i,
            len: 1,
            last: 1,
            bad: 0,
        }
    }
    fn combine(&self, a: Fold, b: Fold) -> Fold {
        let bad = a.bad | b.bad;
        if a.len == 0 || b.len == 0 {
            return Fold {
                lo: 0,
                len: 0,
                last: 0,
                bad: 1,
            };
        }
        let trees = a.last == a.len && b.last == b.len;
        if trees && a.len == b.len && a.lo % (2 * a.len) == 0 && b.lo == a.lo + a.len {
            return Fold {
                lo: a.lo,
                len: 2 * a.len,
                last: 2 * a.len,
                bad,
            };
        }
        let ok = a.lo == 0 && b.last == b.len && b.len < a.last && b.lo == a.len;
        Fold {
            lo: a.lo,
            len: a.len + b.len,
            last: b.len,
            bad: bad | !ok as u64,
        }
    }
    fn finish(&self, mut a: Fold, n: u64) -> Fold {
        if a.len != n {
            a.bad = 1;
        }
        a
    }
    fn cuda(&self) -> CudaOp {
        CudaOp {
            type_name: "FoldShapeOp".into(),
            source: FOLD_CUDA.into(),
        }
    }
}

/// What FoldShape's scan must give at position `i`.
pub fn canonical_prefix(i: u64, inclusive: bool) -> Fold {
    let len = if inclusive { i + 1 } else { i };
    if len == 0 {
        return FoldShape.identity();
    }
    Fold {
        lo: 0,
        len,
        last: 1 << len.trailing_zeros(),
        bad: 0,
    }
}

/// The bits of a result, for fast bit-for-bit comparison of large outputs: every field's
/// bits, NaNs of any payload made equal (as [`same`] does), padding ignored.
pub trait Bits {
    fn bits(&self) -> [u64; 4];
}
macro_rules! bits_int {
    ($($t:ty),*) => {$(impl Bits for $t { fn bits(&self) -> [u64; 4] { [*self as u64, 0, 0, 0] } })*};
}
bits_int!(i32, i64, u32, u64, u8);
macro_rules! bits_wide {
    ($($t:ty),*) => {$(impl Bits for $t {
        fn bits(&self) -> [u64; 4] { [*self as u64, (*self >> 64) as u64, 0, 0] }
    })*};
}
bits_wide!(i128, u128);
macro_rules! bits_float {
    ($($t:ty),*) => {$(impl Bits for $t {
        fn bits(&self) -> [u64; 4] {
            [if self.is_nan() { u64::MAX } else { self.to_bits() as u64 }, 0, 0, 0]
        }
    })*};
}
bits_float!(f32, f64, f16, bf16);
fn join(parts: &[u64]) -> [u64; 4] {
    let mut k = [0u64; 4];
    k[..parts.len()].copy_from_slice(parts);
    k
}
impl<T: Bits> Bits for cufold::ops::Indexed<T> {
    fn bits(&self) -> [u64; 4] {
        join(&[self.value.bits()[0], self.index])
    }
}
impl<T: Bits> Bits for cufold::ops::MinMaxValue<T> {
    fn bits(&self) -> [u64; 4] {
        join(&[self.min.bits()[0], self.max.bits()[0]])
    }
}
impl Bits for cufold::ops::MeanVarValue {
    fn bits(&self) -> [u64; 4] {
        join(&[self.count.bits()[0], self.mean.bits()[0], self.m2.bits()[0]])
    }
}
impl<T: Bits> Bits for Affine<T> {
    fn bits(&self) -> [u64; 4] {
        join(&[self.a.bits()[0], self.b.bits()[0]])
    }
}
impl<T: Bits> Bits for Mat2<T> {
    fn bits(&self) -> [u64; 4] {
        join(&[
            self.m00.bits()[0],
            self.m01.bits()[0],
            self.m10.bits()[0],
            self.m11.bits()[0],
        ])
    }
}
impl Bits for Fold {
    fn bits(&self) -> [u64; 4] {
        [self.lo, self.len, self.last, self.bad]
    }
}
