//! The correctly rounded f64 of an exact integer ratio: how [`Mean`](super::Mean) finishes
//! the 128-bit sums of integer elements. kernels/types.cuh (`cf::round_ratio`) computes the
//! same steps with two 64-bit words, so the GPU's means have the CPU's bits (both are the
//! correctly rounded quotient, which is unique).

/// The quiet NaN both halves return for a mean of no elements (`finish(identity, 0)`, the
/// first output of an exclusive scan): the bits of `f64::NAN`, written out so that neither
/// side depends on what its hardware's `0.0 / 0.0` gives.
const NAN_BITS: u64 = 0x7ff8_0000_0000_0000;

/// `m / n` rounded to the nearest f64, ties to even, negated if `negative`; NaN for
/// `n = 0`, `+0.0` for `m = 0`.
///
/// Where both fit in 53 bits the IEEE division of their exact f64 images is the answer (one
/// rounding). Otherwise the quotient is computed with 56 or 57 significant bits: `m` is
/// shifted so that `D = m·2^t` (or `floor(m / 2^-t)`, whose dropped bits go into a sticky
/// bit: `floor(floor(x) / n) = floor(x / n)`) has `56 + bitlen(n)` bits, so `q = floor(D / n)`
/// lies in `[2^55, 2^57)`; the remainder and the dropped bits, if any is non-zero, set q's
/// lowest bit, which lies below the rounding bit. Converting `q` to f64 then rounds once,
/// to nearest even, exactly as the exact quotient would, and the scaling by `2^-t` (a power
/// of two between 2^-119 and 2^71, the result at least 2^-64) is exact.
pub(crate) fn round_ratio(negative: bool, m: u128, n: u64) -> f64 {
    if n == 0 {
        return f64::from_bits(NAN_BITS);
    }
    if m == 0 {
        return 0.0;
    }
    const EXACT: u64 = 1 << f64::MANTISSA_DIGITS;
    let v = if m <= EXACT as u128 && n <= EXACT {
        m as f64 / n as f64
    } else {
        let l = 128 - m.leading_zeros() as i32;
        let b = 64 - n.leading_zeros() as i32;
        let t = 56 + b - l;
        let (d, dropped) = if t >= 0 {
            (m << t, false)
        } else {
            let s = -t;
            (m >> s, m & ((1u128 << s) - 1) != 0)
        };
        let q = d / n as u128;
        let r = d % n as u128;
        debug_assert!(
            (1u128 << 55..1u128 << 57).contains(&q),
            "{m} / {n}: q = {q}"
        );
        let q = q as u64 | (dropped || r != 0) as u64;
        (q as f64) * f64::from_bits(((1023 - t) as u64) << 52)
    };
    if negative {
        -v
    } else {
        v
    }
}

/// The f64 nearest to `sum / n` (ties to even): the exact quotient rounded once, which is
/// how [`Mean`](super::Mean) finishes the exact 128-bit sum of signed integer elements
/// (`(sum as f64) / (n as f64)` rounds twice and may be one ulp off). NaN for `n = 0`;
/// `+0.0` for a zero sum.
///
/// ```
/// use cufold::ops::round_ratio_to_f64;
/// assert_eq!(round_ratio_to_f64(7, 2), 3.5);
/// assert_eq!(round_ratio_to_f64(-2 * i64::MAX as i128, 2), -(2f64.powi(63)));
/// // 2^53 + 1 is between two f64s; the exact quotient (2^54 + 2) / 2 rounds to even:
/// assert_eq!(round_ratio_to_f64((1 << 54) + 2, 2), 2f64.powi(53));
/// // where (sum as f64) / 3.0 rounds twice and lands one ulp away:
/// let sum = (1i128 << 55) + 3;
/// assert_eq!(round_ratio_to_f64(sum, 3), 12009599006321324.0); // the exact 12009599006321323.67
/// assert_eq!((sum as f64) / 3.0, 12009599006321322.0);
/// assert!(round_ratio_to_f64(0, 0).is_nan());
/// ```
pub fn round_ratio_to_f64(sum: i128, n: u64) -> f64 {
    round_ratio(sum < 0, sum.unsigned_abs(), n)
}

/// [`round_ratio_to_f64`] for an unsigned sum: the f64 nearest to `sum / n` (ties to even),
/// how [`Mean`](super::Mean) finishes the exact 128-bit sum of unsigned integer elements.
///
/// ```
/// use cufold::ops::round_ratio_to_f64_unsigned;
/// assert_eq!(round_ratio_to_f64_unsigned(2 * u64::MAX as u128, 2), 2f64.powi(64));
/// assert_eq!(round_ratio_to_f64_unsigned(u128::MAX, u64::MAX), 2f64.powi(64));
/// assert_eq!(round_ratio_to_f64_unsigned(1, 3), 1.0 / 3.0);
/// ```
pub fn round_ratio_to_f64_unsigned(sum: u128, n: u64) -> f64 {
    round_ratio(false, sum, n)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reference: `m / n` by long division one bit at a time (no division instruction,
    /// no float arithmetic), rounded to 53 bits by hand and assembled from its bits.
    fn reference(m: u128, n: u64) -> f64 {
        assert!(n > 0);
        if m == 0 {
            return 0.0;
        }
        let n = n as u128;
        // Quotient bits, most significant first, from m's top bit down, then fraction bits.
        let mut rem: u128 = 0;
        let mut bits: Vec<bool> = Vec::new();
        let mut exp_of_first: Option<i32> = None; // the power of two of the first 1 bit
        let top = 127 - m.leading_zeros() as i32;
        let mut pos = top; // the power of two of the next quotient bit
        loop {
            let bit = if pos >= 0 { (m >> pos) & 1 } else { 0 };
            rem = 2 * rem + bit; // rem < n < 2^64 before the doubling
            let qbit = rem >= n;
            if qbit {
                rem -= n;
            }
            if exp_of_first.is_none() && qbit {
                exp_of_first = Some(pos);
            }
            if exp_of_first.is_some() {
                bits.push(qbit);
                if bits.len() == 54 {
                    break;
                }
            }
            pos -= 1;
        }
        // Bits of m below pos that are still unread make the sticky bit too (through rem).
        let rest_nonzero = pos > 0 && m & ((1u128 << pos) - 1) != 0;
        let sticky = rem != 0 || rest_nonzero;
        let mut mant: u64 = bits[..53].iter().fold(0, |a, &b| a << 1 | b as u64);
        let round = bits[53];
        let mut e = exp_of_first.unwrap();
        if round && (sticky || mant & 1 == 1) {
            mant += 1;
            if mant == 1 << 53 {
                mant = 1 << 52;
                e += 1;
            }
        }
        f64::from_bits(((e + 1023) as u64) << 52 | (mant & ((1 << 52) - 1)))
    }

    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let x = self.0;
            (x ^ (x >> 29)).wrapping_mul(0xbf58476d1ce4e5b9) ^ (x >> 32)
        }
    }

    #[test]
    fn round_ratio_is_the_reference_on_random_and_edge_values() {
        let mut r = Rng(1);
        let mut cases: Vec<(u128, u64)> = Vec::new();
        for _ in 0..20000 {
            let m = (r.next() as u128) << 64 | r.next() as u128;
            let m = m >> (r.next() % 128);
            let n = r.next() >> (r.next() % 64);
            cases.push((m, n.max(1)));
        }
        for k in 0..128 {
            for n in [
                1u64,
                2,
                3,
                5,
                7,
                10,
                1 << 53,
                (1 << 53) + 1,
                u64::MAX,
                u64::MAX - 1,
            ] {
                let p = 1u128 << k;
                for m in [p, p - 1, p + 1, p.wrapping_mul(3), u128::MAX >> (127 - k)] {
                    cases.push((m, n));
                }
            }
        }
        for (m, n) in cases {
            let want = reference(m, n);
            let got = round_ratio(false, m, n);
            assert_eq!(got.to_bits(), want.to_bits(), "{m} / {n}: {got} != {want}");
            if m != 0 {
                let neg = round_ratio(true, m, n);
                assert_eq!(neg.to_bits(), (-want).to_bits(), "-{m} / {n}");
            }
        }
    }

    #[test]
    fn ties_go_to_even() {
        let two = |k: i32| 2f64.powi(k);
        // Integer quotients halfway between two f64s above 2^53.
        assert_eq!(round_ratio(false, (1 << 54) + 2, 1), two(54));
        assert_eq!(round_ratio(false, (1 << 54) + 6, 1), two(54) + 8.0);
        assert_eq!(round_ratio(false, (1 << 54) + 10, 1), two(54) + 8.0);
        // Halves at 2^52, where the ulp is 1: (2^53 + 1) / 2 and (2^53 + 3) / 2, with n = 6.
        assert_eq!(round_ratio(false, ((1 << 53) + 1) * 3, 6), two(52));
        assert_eq!(round_ratio(false, ((1 << 53) + 3) * 3, 6), two(52) + 2.0);
        // Just above a tie rounds up, just below rounds down.
        assert_eq!(
            round_ratio(false, (((1 << 53) + 1) * 3) * 4 + 1, 24),
            two(52) + 1.0
        );
        assert_eq!(
            round_ratio(false, (((1 << 53) + 1) * 3) * 4 - 1, 24),
            two(52)
        );
        // Ties with a 64-bit n and a 128-bit sum: (2^53 + 1) * 2^63 * n / (2 n) ... .
        let n = u64::MAX;
        let m = ((1u128 << 53) + 1) * n as u128;
        assert_eq!(round_ratio(false, m, n), two(53)); // exact, 2^53 + 1 is a tie: to even
        let m = ((1u128 << 53) + 3) * n as u128;
        assert_eq!(round_ratio(false, m, n), two(53) + 4.0);
        assert_eq!(round_ratio(true, m, n), -(two(53) + 4.0));
    }

    #[test]
    fn the_two_roundings_of_the_float_division_differ_where_this_does_not() {
        // (sum as f64) / (n as f64) rounds the sum first: 2^55 + 3 becomes 2^55, and 2^55 / 3
        // is not the nearest f64 to (2^55 + 3) / 3.
        let sum = (1u128 << 55) + 3;
        let naive = sum as f64 / 3.0;
        let right = round_ratio(false, sum, 3);
        assert_eq!(right.to_bits(), reference(sum, 3).to_bits());
        assert_ne!(naive, right);
        assert_eq!(round_ratio(false, 5, 0).to_bits(), NAN_BITS);
        assert_eq!(round_ratio(false, 0, 9).to_bits(), 0);
    }
}
