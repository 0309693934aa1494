//! Counter-based random numbers (Philox4x32-10) with the same bits on the CPU and the GPU.
//!
//! Philox4x32-10 is the generator of Salmon, Moraes, Dror and Shaw, *Parallel random
//! numbers: as easy as 1, 2, 3* (SC11), as in Random123, cuRAND's Philox, JAX and PyTorch's
//! CUDA generator: a keyed bijection of a 128-bit counter, so any value of any stream is
//! computed directly from its coordinates. Here every value depends on `(seed, sample,
//! draw)` alone, never on a launch shape or on which thread computes it: a Monte Carlo
//! kernel's sample `i` (up to 2^64) draws the same numbers on any GPU and on the CPU.
//!
//! The CUDA twin is `kernels/random.cuh`, part of [`cuda_header`](crate::cuda_header):
//! `cf::philox4x32_10`, `cf::philox_block`, `cf::random_u32`, `cf::uniform<T>`,
//! `cf::normal<T>` (and `_f32` / `_f64` names), and the kernel helpers
//! `cf::draw_uniform<T, D>(seed, sample, T (&out)[D], first = 0)` and `cf::draw_normal`,
//! which fill `out[k]` with draw `first + k`, as [`fill_uniform`] and [`fill_normal`] do.
//!
//! # Stream layout
//!
//! For seed `s`, sample `i` and block `b`:
//!
//! ```text
//! block(s, i, b) = philox4x32_10([lo32(i), hi32(i), b, 0], [lo32(s), hi32(s)])  // words w[0..4]
//! u32 draw j      = word j % 4 of block j / 4                        (4 per block)
//! f32 uniform j   = open01_f32(u32 draw j)                           (4 per block)
//! f64 uniform j   = open01_f64(lo = w[2(j%2)], hi = w[2(j%2)+1]) of block j / 2   (2 per block)
//! normal j        = Box–Muller on the uniforms 2(j/2) and 2(j/2)+1 of the same type:
//!                   r = sqrt(-2 ln u1), t = 2π·u2; r·cos t for even j, r·sin t for odd j
//! ```
//!
//! Draw `j` of every kind of one type lies in the same block (`j / 4` for f32, `j / 2` for
//! f64), so kinds that share draw indices share bits: a computation that needs several
//! kinds for one sample gives them disjoint draw ranges (the `first` of [`fill_uniform`]).
//!
//! # Uniforms: the open interval (0, 1), exactly
//!
//! * f32: `((w >> 8) | 1) · 2^-24`, which is `((w >> 9) + 0.5) · 2^-23`: the centres of
//!   2^23 equal cells. Smallest `2^-24` (5.96e-8), largest `1 - 2^-24` (0.99999994, the
//!   largest f32 below 1).
//! * f64: `((x >> 11) | 1) · 2^-53` with `x = hi · 2^32 + lo`: 2^52 values, smallest
//!   `2^-53` (1.1e-16), largest `1 - 2^-53` (the largest f64 below 1).
//!
//! The odd integer is below 2^24 (2^53), so the conversion and the scaling by a power of
//! two are exact: 0 and 1 never occur, and the GPU gives the same bits (no rounding, and
//! nothing a multiply-add contraction could change). Each cell's centre is its mean, so the
//! mean is exactly 1/2. (`((w >> 8) + 0.5) · 2^-24` would need 25 bits and round the top
//! value up to 1.)
//!
//! # Normals: a stated tolerance between devices
//!
//! Normals use `ln`, `sqrt`, `sin` and `cos`. `sqrt` is correctly rounded everywhere, but
//! CUDA's `logf`/`log` are within 1 ulp and its `sinf`/`cosf`/`sin`/`cos` within 2 ulps of
//! the exact values, the host's libm within about 1, so a GPU normal is within **16 ulps**
//! of the CPU one (a relative difference below 2^-20 for f32, 2^-49 for f64), and usually
//! equal or 1 ulp away. On the host the C++ twin calls the same libm and gives the same
//! bits. Uniforms and words agree bit for bit everywhere. `|z|` is at most 5.8 (f32) or
//! 8.6 (f64), since `u1 >= 2^-24` (`2^-53`).
//!
//! ```
//! use cufold::random::{fill_normal, normal_f64, uniform_f32};
//! let (seed, sample) = (42, 1u64 << 40);
//! let u = uniform_f32(seed, sample, 0);
//! assert!(u > 0.0 && u < 1.0);
//! let mut z = [0.0f64; 3];
//! fill_normal(seed, sample, 0, &mut z); // draws 0, 1, 2
//! assert_eq!(z[2], normal_f64(seed, sample, 2));
//! assert!(cufold::cuda_header().contains("draw_normal"));
//! ```

/// The Philox4x32 multipliers (Random123's `PHILOX_M4x32_0`, `PHILOX_M4x32_1`).
const M: [u32; 2] = [0xD251_1F53, 0xCD9E_8D57];
/// The Weyl key increments (Random123's `PHILOX_W32_0`, `PHILOX_W32_1`).
const W: [u32; 2] = [0x9E37_79B9, 0xBB67_AE85];

/// One Philox4x32 round.
#[inline(always)]
fn round(c: [u32; 4], k: [u32; 2]) -> [u32; 4] {
    let p0 = u64::from(M[0]) * u64::from(c[0]);
    let p1 = u64::from(M[1]) * u64::from(c[2]);
    [
        (p1 >> 32) as u32 ^ c[1] ^ k[0],
        p1 as u32,
        (p0 >> 32) as u32 ^ c[3] ^ k[1],
        p0 as u32,
    ]
}

/// Philox4x32-10 of `counter` under `key`: ten rounds, the key bumped by the Weyl
/// constants (0x9E3779B9, 0xBB67AE85) before every round after the first, as Random123's
/// `philox4x32_R(10, ctr, key)` and `cf::philox4x32_10` compute.
///
/// ```
/// // Random123's known answer for the zero counter and key.
/// assert_eq!(
///     cufold::random::philox4x32_10([0; 4], [0; 2]),
///     [0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8]
/// );
/// ```
pub fn philox4x32_10(counter: [u32; 4], key: [u32; 2]) -> [u32; 4] {
    let mut c = round(counter, key);
    let mut k = key;
    for _ in 1..10 {
        k = [k[0].wrapping_add(W[0]), k[1].wrapping_add(W[1])];
        c = round(c, k);
    }
    c
}

/// Block `block` of sample `sample` of the stream `seed`: Philox4x32-10 of the counter
/// `[lo32(sample), hi32(sample), block, 0]` under the key `[lo32(seed), hi32(seed)]`
/// (`cf::philox_block`).
///
/// ```
/// use cufold::random::{block, philox4x32_10};
/// let (seed, sample) = (0x0123_4567_89ab_cdef_u64, 0xfedc_ba98_7654_3210_u64);
/// assert_eq!(
///     block(seed, sample, 5),
///     philox4x32_10([0x7654_3210, 0xfedc_ba98, 5, 0], [0x89ab_cdef, 0x0123_4567])
/// );
/// ```
pub fn block(seed: u64, sample: u64, block: u32) -> [u32; 4] {
    philox4x32_10(
        [sample as u32, (sample >> 32) as u32, block, 0],
        [seed as u32, (seed >> 32) as u32],
    )
}

/// The 32-bit draw `draw` of sample `sample`: word `draw % 4` of block `draw / 4`
/// (`cf::random_u32`).
///
/// ```
/// use cufold::random::{block, random_u32};
/// assert_eq!(random_u32(7, 3, 6), block(7, 3, 1)[2]);
/// ```
pub fn random_u32(seed: u64, sample: u64, draw: u32) -> u32 {
    block(seed, sample, draw / 4)[(draw % 4) as usize]
}

/// A word to an f32 in the open interval (0, 1): `((w >> 8) | 1) · 2^-24`, exactly. The
/// extremes are `2^-24` (for words below 2^9) and `1 - 2^-24` (words from `0xffffff00`).
///
/// ```
/// use cufold::random::open01_f32;
/// assert_eq!(open01_f32(0), 2f32.powi(-24));
/// assert_eq!(open01_f32(u32::MAX), 1.0 - 2f32.powi(-24));
/// assert_eq!(open01_f32(u32::MAX), f32::from_bits(1.0f32.to_bits() - 1)); // the float below 1
/// ```
pub fn open01_f32(word: u32) -> f32 {
    ((word >> 8) | 1) as f32 * TWO_POW_M24
}

/// Two words to an f64 in the open interval (0, 1): `((x >> 11) | 1) · 2^-53` with
/// `x = hi · 2^32 + lo`, exactly. The extremes are `2^-53` and `1 - 2^-53`.
///
/// ```
/// use cufold::random::open01_f64;
/// assert_eq!(open01_f64(0, 0), 2f64.powi(-53));
/// assert_eq!(open01_f64(u32::MAX, u32::MAX), f64::from_bits(1.0f64.to_bits() - 1));
/// ```
pub fn open01_f64(lo: u32, hi: u32) -> f64 {
    let x = (u64::from(hi) << 32) | u64::from(lo);
    ((x >> 11) | 1) as f64 * TWO_POW_M53
}

const TWO_POW_M24: f32 = 1.0 / (1u32 << 24) as f32;
const TWO_POW_M53: f64 = 1.0 / (1u64 << 53) as f64;

/// The uniform f32 draw `draw` of sample `sample`: [`open01_f32`] of [`random_u32`] (the
/// same draw). In (0, 1); the GPU's `cf::uniform_f32` gives the same bits.
///
/// ```
/// use cufold::random::{open01_f32, random_u32, uniform_f32};
/// let u = uniform_f32(1, 2, 3);
/// assert!(0.0 < u && u < 1.0);
/// assert_eq!(u, open01_f32(random_u32(1, 2, 3)));
/// ```
pub fn uniform_f32(seed: u64, sample: u64, draw: u32) -> f32 {
    open01_f32(random_u32(seed, sample, draw))
}

/// The uniform f64 draw `draw` of sample `sample`: [`open01_f64`] of words `2(draw % 2)`
/// (low half) and `2(draw % 2) + 1` (high half) of block `draw / 2`. In (0, 1); the GPU's
/// `cf::uniform_f64` gives the same bits.
///
/// ```
/// use cufold::random::{block, open01_f64, uniform_f64};
/// let w = block(1, 2, 1);
/// assert_eq!(uniform_f64(1, 2, 3), open01_f64(w[2], w[3]));
/// ```
pub fn uniform_f64(seed: u64, sample: u64, draw: u32) -> f64 {
    let w = block(seed, sample, draw / 2);
    let k = 2 * (draw % 2) as usize;
    open01_f64(w[k], w[k + 1])
}

/// The standard normal f32 draw `draw`: Box–Muller on the f32 uniforms `2(draw/2)` and
/// `2(draw/2) + 1`, `r·cos(2π·u2)` for even draws and `r·sin(2π·u2)` for odd ones, with
/// `r = sqrt(-2 ln u1)`. The GPU's `cf::normal_f32` is within 16 ulps (see the module
/// documentation).
///
/// ```
/// use cufold::random::{normal_f32, uniform_f32};
/// let (u1, u2) = (uniform_f32(9, 0, 4), uniform_f32(9, 0, 5));
/// let r = (-2.0 * u1.ln()).sqrt();
/// assert_eq!(normal_f32(9, 0, 4), r * (std::f32::consts::TAU * u2).cos());
/// assert_eq!(normal_f32(9, 0, 5), r * (std::f32::consts::TAU * u2).sin());
/// ```
pub fn normal_f32(seed: u64, sample: u64, draw: u32) -> f32 {
    let pair = draw & !1;
    let (z0, z1) = box_muller_f32(
        uniform_f32(seed, sample, pair),
        uniform_f32(seed, sample, pair + 1),
    );
    if draw & 1 == 0 {
        z0
    } else {
        z1
    }
}

/// The standard normal f64 draw `draw`: Box–Muller on the f64 uniforms `2(draw/2)` and
/// `2(draw/2) + 1` (block `draw / 2`), as [`normal_f32`] on f32. The GPU's
/// `cf::normal_f64` is within 16 ulps (see the module documentation).
///
/// ```
/// use cufold::random::{normal_f64, uniform_f64};
/// let (u1, u2) = (uniform_f64(9, 0, 0), uniform_f64(9, 0, 1));
/// let r = (-2.0 * u1.ln()).sqrt();
/// assert_eq!(normal_f64(9, 0, 1), r * (std::f64::consts::TAU * u2).sin());
/// ```
pub fn normal_f64(seed: u64, sample: u64, draw: u32) -> f64 {
    let pair = draw & !1;
    let (z0, z1) = box_muller_f64(
        uniform_f64(seed, sample, pair),
        uniform_f64(seed, sample, pair + 1),
    );
    if draw & 1 == 0 {
        z0
    } else {
        z1
    }
}

pub(crate) fn box_muller_f32(u1: f32, u2: f32) -> (f32, f32) {
    let r = (-2.0 * u1.ln()).sqrt();
    let t = std::f32::consts::TAU * u2;
    (r * t.cos(), r * t.sin())
}

pub(crate) fn box_muller_f64(u1: f64, u2: f64) -> (f64, f64) {
    let r = (-2.0 * u1.ln()).sqrt();
    let t = std::f64::consts::TAU * u2;
    (r * t.cos(), r * t.sin())
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for f64 {}
}

/// The floating-point types that can be drawn, f32 and f64: `T::uniform` and `T::normal`
/// are [`uniform_f32`] / [`uniform_f64`] and [`normal_f32`] / [`normal_f64`], like
/// `cf::uniform<T>` and `cf::normal<T>` on the GPU. Sealed.
///
/// ```
/// use cufold::random::Draw;
/// fn first_two<T: Draw>(seed: u64) -> (T, T) { (T::uniform(seed, 0, 0), T::normal(seed, 0, 0)) }
/// assert_eq!(first_two::<f32>(5).0, cufold::random::uniform_f32(5, 0, 0));
/// ```
pub trait Draw: sealed::Sealed + Copy {
    /// The uniform draw `draw` of sample `sample`, in (0, 1).
    ///
    /// ```
    /// use cufold::random::Draw;
    /// assert_eq!(f64::uniform(1, 2, 3), cufold::random::uniform_f64(1, 2, 3));
    /// ```
    fn uniform(seed: u64, sample: u64, draw: u32) -> Self;

    /// The standard normal draw `draw` of sample `sample`.
    ///
    /// ```
    /// use cufold::random::Draw;
    /// assert_eq!(f32::normal(1, 2, 3), cufold::random::normal_f32(1, 2, 3));
    /// ```
    fn normal(seed: u64, sample: u64, draw: u32) -> Self;
}

impl Draw for f32 {
    fn uniform(seed: u64, sample: u64, draw: u32) -> f32 {
        uniform_f32(seed, sample, draw)
    }
    fn normal(seed: u64, sample: u64, draw: u32) -> f32 {
        normal_f32(seed, sample, draw)
    }
}

impl Draw for f64 {
    fn uniform(seed: u64, sample: u64, draw: u32) -> f64 {
        uniform_f64(seed, sample, draw)
    }
    fn normal(seed: u64, sample: u64, draw: u32) -> f64 {
        normal_f64(seed, sample, draw)
    }
}

/// `out[k] = T::uniform(seed, sample, first + k)` (draw indices wrap modulo 2^32), as
/// `cf::draw_uniform(seed, sample, out, first)` fills a kernel's array.
///
/// ```
/// let mut u = [0.0f32; 6];
/// cufold::random::fill_uniform(3, 8, 2, &mut u); // draws 2..8
/// assert_eq!(u[5], cufold::random::uniform_f32(3, 8, 7));
/// ```
pub fn fill_uniform<T: Draw>(seed: u64, sample: u64, first: u32, out: &mut [T]) {
    for (k, o) in out.iter_mut().enumerate() {
        *o = T::uniform(seed, sample, first.wrapping_add(k as u32));
    }
}

/// `out[k] = T::normal(seed, sample, first + k)` (draw indices wrap modulo 2^32), as
/// `cf::draw_normal(seed, sample, out, first)` fills a kernel's array.
///
/// ```
/// let mut z = [0.0f64; 3];
/// cufold::random::fill_normal(3, 8, 1, &mut z); // draws 1, 2, 3
/// assert_eq!(z[0], cufold::random::normal_f64(3, 8, 1));
/// ```
pub fn fill_normal<T: Draw>(seed: u64, sample: u64, first: u32, out: &mut [T]) {
    for (k, o) in out.iter_mut().enumerate() {
        *o = T::normal(seed, sample, first.wrapping_add(k as u32));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Random123's published known answers for Philox4x32-10 (its tests/kat_vectors, as
    // cut and pasted into Random123-Boost's libs/random/test/test_philox.cpp,
    // github.com/DEShawResearch/Random123-Boost at 916db91ae4c6fd8324ef054a518851321ab41f91,
    // test_kat_philox4x32; the same three lines are in TensorFlow's XLA stateful random
    // tests). Columns: counter (4 words), key (2 words), expected (4 words).
    //   philox4x32 10 00000000 00000000 00000000 00000000 00000000 00000000   6627e8d5 e169c58d bc57ac4c 9b00dbd8
    //   philox4x32 10 ffffffff ffffffff ffffffff ffffffff ffffffff ffffffff   408f276d 41c83b0e a20bc7c6 6d5451fd
    //   philox4x32 10 243f6a88 85a308d3 13198a2e 03707344 a4093822 299f31d0   d16cfe09 94fdcceb 5001e420 24126ea1
    const KAT: [([u32; 4], [u32; 2], [u32; 4]); 3] = [
        (
            [0, 0, 0, 0],
            [0, 0],
            [0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8],
        ),
        (
            [0xffffffff; 4],
            [0xffffffff; 2],
            [0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd],
        ),
        (
            [0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344],
            [0xa4093822, 0x299f31d0],
            [0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1],
        ),
    ];

    #[test]
    fn philox_gives_random123_known_answers() {
        for (ctr, key, want) in KAT {
            assert_eq!(
                philox4x32_10(ctr, key),
                want,
                "counter {ctr:08x?} key {key:08x?}"
            );
        }
    }

    #[test]
    fn block_places_sample_and_seed_words_low_first() {
        // The pi-digit vector as a stream coordinate: counter [lo(i), hi(i), b, 0] only
        // reaches counters whose last word is 0, so check the layout on a reachable one.
        let (seed, sample) = (0x299f31d0_a4093822u64, 0x85a308d3_243f6a88u64);
        assert_eq!(
            block(seed, sample, 0x13198a2e),
            philox4x32_10(
                [0x243f6a88, 0x85a308d3, 0x13198a2e, 0],
                [0xa4093822, 0x299f31d0]
            )
        );
        assert_eq!(block(0, 0, 0), KAT[0].2);
    }

    #[test]
    fn constants_are_the_rounded_ones_the_cuda_twin_spells_out() {
        assert_eq!(TWO_POW_M24, 5.960_464_5e-8);
        assert_eq!(TWO_POW_M53.to_bits(), 0x3ca0_0000_0000_0000);
        assert_eq!(std::f32::consts::TAU.to_bits(), 0x40c9_0fdb);
        assert_eq!(std::f64::consts::TAU.to_bits(), 0x4019_21fb_5444_2d18);
    }

    #[test]
    fn uniform_extremes_are_inside_the_open_interval() {
        let lo32 = open01_f32(0);
        let hi32 = open01_f32(u32::MAX);
        assert!(lo32 > 0.0 && hi32 < 1.0);
        assert_eq!((lo32, hi32), (2f32.powi(-24), 1.0 - 2f32.powi(-24)));
        assert_eq!(hi32, f32::from_bits(1.0f32.to_bits() - 1));
        // Words that share the kept 23 bits give the same value.
        assert_eq!(open01_f32(0x1ff), lo32);
        assert_eq!(open01_f32(0xffff_ff00), hi32);
        let lo64 = open01_f64(0, 0);
        let hi64 = open01_f64(u32::MAX, u32::MAX);
        assert!(lo64 > 0.0 && hi64 < 1.0);
        assert_eq!((lo64, hi64), (2f64.powi(-53), 1.0 - 2f64.powi(-53)));
        assert_eq!(hi64, f64::from_bits(1.0f64.to_bits() - 1));
        // The high word carries the top bits.
        assert_eq!(open01_f64(0, 0x8000_0000), 0.5 + 2f64.powi(-53));
        assert_eq!(open01_f64(u32::MAX, 0x7fff_ffff), 0.5 - 2f64.powi(-53));
        // Symmetric about 1/2: w and !w give u and 1 - u.
        for w in [0u32, 1, 0x1234_5678, 0x8000_0000, 0xdead_beef] {
            assert_eq!(open01_f32(w) + open01_f32(!w), 1.0);
            assert_eq!(open01_f64(w, !w) + open01_f64(!w, w), 1.0);
        }
        // The largest radius, from the smallest u1, bounds |z|.
        let r32 = (-2.0 * lo32.ln()).sqrt();
        let r64 = (-2.0 * lo64.ln()).sqrt();
        assert!(r32 < 5.8 && r64 < 8.6, "{r32} {r64}");
    }

    #[test]
    fn draws_follow_the_documented_layout() {
        let (s, i) = (0xfeed_f00d_u64, (1u64 << 40) + 3);
        for j in [0u32, 1, 2, 3, 4, 5, 6, 7, 1001, u32::MAX - 1, u32::MAX] {
            let w = block(s, i, j / 4);
            assert_eq!(random_u32(s, i, j), w[(j % 4) as usize]);
            assert_eq!(uniform_f32(s, i, j), open01_f32(w[(j % 4) as usize]));
            let w = block(s, i, j / 2);
            let k = 2 * (j % 2) as usize;
            assert_eq!(uniform_f64(s, i, j), open01_f64(w[k], w[k + 1]));
            let p = j & !1;
            let (a, b) = box_muller_f32(uniform_f32(s, i, p), uniform_f32(s, i, p + 1));
            assert_eq!(normal_f32(s, i, j), if j % 2 == 0 { a } else { b });
            let (a, b) = box_muller_f64(uniform_f64(s, i, p), uniform_f64(s, i, p + 1));
            assert_eq!(normal_f64(s, i, j), if j % 2 == 0 { a } else { b });
        }
        let mut u = [0.0f32; 5];
        fill_uniform(s, i, u32::MAX - 1, &mut u); // wraps to draws 0, 1, 2
        assert_eq!(u[2], uniform_f32(s, i, 0));
    }

    #[test]
    fn seeds_samples_and_blocks_give_different_words() {
        let base = block(1, 1, 1);
        assert_ne!(block(2, 1, 1), base);
        assert_ne!(block(1 | 1 << 32, 1, 1), base);
        assert_ne!(block(1, 2, 1), base);
        assert_ne!(block(1, 1 | 1 << 32, 1), base);
        assert_ne!(block(1, 1, 2), base);
    }
}
