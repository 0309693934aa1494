//! The adapter's CUDA halves compiled for the host (cufold's shim of the CUDA headers) give
//! the bits of their Rust halves: the portable `exp` and `ln`, the log-sum-exp combine and
//! finish, the mean's and variance's finish, and the index-only arg-operator's private runs.
//! This checks on any machine with a C++ compiler what the GPU tests check on a device.

#[path = "../../tests/common/host.rs"]
mod host;

use cufold::ops::{Indexed, MeanVarValue, Operator};
use cufold_candle::ops::{exp32, exp64, ln64, ArgIndex, LogSumExp, Lse, MeanOf, VarOf};
use half::bf16;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::fmt::Write as _;

fn name<T: cufold::DeviceValue, O: Operator<T>>(op: O) -> (String, String) {
    let c = op.cuda();
    (c.type_name, c.source)
}

#[test]
fn the_cuda_halves_compiled_for_the_host_have_the_rust_bits() {
    let (lse32, s1) = name::<f32, _>(LogSumExp);
    let (lse64, s2) = name::<f64, _>(LogSumExp);
    let (lseb, s3) = name::<bf16, _>(LogSumExp);
    let (mean32, s4) = name::<f32, _>(MeanOf);
    let (var32, s5) = name::<f32, _>(VarOf);
    let (varb, s6) = name::<bf16, _>(VarOf);
    let (arg, s7) = name::<f32, _>(ArgIndex::<true>);
    let mut src = String::new();
    for s in [s1, s2, s3, s4, s5, s6, s7] {
        src.push_str(&s);
        src.push('\n');
    }
    write!(
        src,
        r#"
static double d(unsigned long long b) {{ return __longlong_as_double((long long)b); }}
static float f(unsigned b) {{ return __uint_as_float(b); }}
static unsigned long long db(double x) {{ return (unsigned long long)__double_as_longlong(x); }}
int main() {{
    char k[8];
    while (scanf("%7s", k) == 1) {{
        if (!strcmp(k, "e32")) {{ unsigned x; scanf("%x", &x); printf("%x\n", __float_as_uint(cfc::exp32(f(x)))); }}
        else if (!strcmp(k, "e64")) {{ unsigned long long x; scanf("%llx", &x); printf("%llx\n", db(cfc::exp64(d(x)))); }}
        else if (!strcmp(k, "l64")) {{ unsigned long long x; scanf("%llx", &x); printf("%llx\n", db(cfc::ln64(d(x)))); }}
        else if (!strcmp(k, "c32")) {{
            unsigned a, b, c, e; scanf("%x %x %x %x", &a, &b, &c, &e);
            {lse32} op; {lse32}::Acc x, y; x.max = f(a); x.sum = f(b); y.max = f(c); y.sum = f(e);
            {lse32}::Acc r = op.combine(x, y);
            printf("%x %x %x\n", __float_as_uint(r.max), __float_as_uint(r.sum), __float_as_uint(op.finish(r, 0)));
        }}
        else if (!strcmp(k, "c64")) {{
            unsigned long long a, b, c, e; scanf("%llx %llx %llx %llx", &a, &b, &c, &e);
            {lse64} op; {lse64}::Acc x, y; x.max = d(a); x.sum = d(b); y.max = d(c); y.sum = d(e);
            {lse64}::Acc r = op.combine(x, y);
            printf("%llx %llx %llx\n", db(r.max), db(r.sum), db(op.finish(r, 0)));
        }}
        else if (!strcmp(k, "fb")) {{
            unsigned a, b; scanf("%x %x", &a, &b);
            {lseb} op; {lseb}::Acc x; x.max = f(a); x.sum = f(b);
            printf("%x\n", (unsigned)op.finish(x, 0).bits);
        }}
        else if (!strcmp(k, "mv")) {{
            unsigned long long c, m, q, n, t; scanf("%llx %llx %llx %llx %llx", &c, &m, &q, &n, &t);
            cf::MeanVarV v; v.count = d(c); v.mean = d(m); v.m2 = d(q);
            {var32} o1; {varb} o2; {mean32} o3;
            printf("%x %x %x\n", __float_as_uint(o1.finish(v, n)), (unsigned)o2.finish(v, n).bits,
                   __float_as_uint(o3.finish(d(t), n)));
        }}
        else if (!strcmp(k, "arg")) {{
            int n; scanf("%d", &n);
            std::vector<float> v(n);
            for (int i = 0; i < n; ++i) {{ unsigned b; scanf("%x", &b); v[i] = f(b); }}
            {arg} op;
            typedef cf::Run<{arg}> R;
            R::State s = R::start(op);
            for (int i = 0; i < n; ++i) R::add(op, s, v[i], (cf::u64)i);
            typedef cf::ShortRun<{arg}> S;
            S::State t = S::start(op);
            for (int i = 0; i < n; ++i) S::add(op, t, v[i], (unsigned)i);
            printf("%u %u\n", op.finish(R::end(op, s), n), op.finish(S::end(op, t), n));
        }}
    }}
    return 0;
}}
"#
    )
    .unwrap();

    // After the shim (cufold's types.cuh and ops.cuh for the host).
    let Some(driver) = host::Driver::build("candle-adapter", &[], &src) else {
        return;
    };

    let mut rng = ChaCha8Rng::seed_from_u64(0xada);
    let (mut input, mut want) = (String::new(), Vec::<String>::new());
    let specials32 = [
        0.0f32,
        -0.0,
        1.0,
        -1.0,
        88.7,
        88.8,
        -103.9,
        -104.5,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
    ];
    let xs32: Vec<f32> = specials32
        .into_iter()
        .chain((0..3000).map(|_| rng.random_range(-110.0f32..90.0)))
        .collect();
    for &x in &xs32 {
        writeln!(input, "e32 {:x}", x.to_bits()).unwrap();
        want.push(format!("{:x}", exp32(x).to_bits()));
    }
    let xs64: Vec<f64> = [
        0.0,
        -0.0,
        709.78,
        -745.1,
        -708.5,
        1e-300,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
    ]
    .into_iter()
    .chain((0..3000).map(|_| rng.random_range(-750.0f64..710.0)))
    .collect();
    for &x in &xs64 {
        writeln!(input, "e64 {:x}", x.to_bits()).unwrap();
        want.push(format!("{:x}", exp64(x).to_bits()));
    }
    let ls: Vec<f64> = [
        1.0,
        0.0,
        5e-324,
        2.2e-308,
        1e300,
        f64::INFINITY,
        -1.0,
        f64::NAN,
    ]
    .into_iter()
    .chain((0..3000).map(|_| 10f64.powf(rng.random_range(-300.0..300.0))))
    .collect();
    for &s in &ls {
        writeln!(input, "l64 {:x}", s.to_bits()).unwrap();
        want.push(format!("{:x}", ln64(s).to_bits()));
    }
    let pick32 = |r: &mut ChaCha8Rng| match r.random_range(0..8) {
        0 => f32::NEG_INFINITY,
        1 => f32::INFINITY,
        2 => 3.5,
        _ => r.random_range(-50.0f32..50.0),
    };
    for _ in 0..3000 {
        let (a, c) = (pick32(&mut rng), pick32(&mut rng));
        let (b, e) = (
            rng.random_range(1.0f32..100.0),
            rng.random_range(1.0f32..100.0),
        );
        writeln!(
            input,
            "c32 {:x} {:x} {:x} {:x}",
            a.to_bits(),
            b.to_bits(),
            c.to_bits(),
            e.to_bits()
        )
        .unwrap();
        let r = <LogSumExp as Operator<f32>>::combine(
            &LogSumExp,
            Lse { max: a, sum: b },
            Lse { max: c, sum: e },
        );
        let fin: f32 = LogSumExp.finish(r, 0);
        want.push(format!(
            "{:x} {:x} {:x}",
            r.max.to_bits(),
            r.sum.to_bits(),
            fin.to_bits()
        ));
        let fb: bf16 = LogSumExp.finish(Lse { max: a, sum: b }, 0);
        writeln!(input, "fb {:x} {:x}", a.to_bits(), b.to_bits()).unwrap();
        want.push(format!("{:x}", fb.to_bits()));
    }
    for _ in 0..3000 {
        let (a, c) = (
            rng.random_range(-700.0f64..700.0),
            rng.random_range(-700.0f64..700.0),
        );
        let (b, e) = (rng.random_range(1.0f64..1e6), rng.random_range(1.0f64..1e6));
        writeln!(
            input,
            "c64 {:x} {:x} {:x} {:x}",
            a.to_bits(),
            b.to_bits(),
            c.to_bits(),
            e.to_bits()
        )
        .unwrap();
        let r = <LogSumExp as Operator<f64>>::combine(
            &LogSumExp,
            Lse { max: a, sum: b },
            Lse { max: c, sum: e },
        );
        let fin: f64 = LogSumExp.finish(r, 0);
        want.push(format!(
            "{:x} {:x} {:x}",
            r.max.to_bits(),
            r.sum.to_bits(),
            fin.to_bits()
        ));
    }
    for _ in 0..2000 {
        let n: u64 = rng.random_range(1..1000);
        let v = MeanVarValue {
            count: n as f64,
            mean: rng.random_range(-1e3..1e3),
            m2: rng.random_range(0.0..1e6),
        };
        let total = v.mean * n as f64; // a sum in f32's wide accumulator, f64
        let (c, m, q) = (v.count.to_bits(), v.mean.to_bits(), v.m2.to_bits());
        writeln!(input, "mv {c:x} {m:x} {q:x} {n:x} {:x}", total.to_bits()).unwrap();
        let a: f32 = VarOf.finish(v, n);
        let b: bf16 = VarOf.finish(v, n);
        let m: f32 = MeanOf.finish(total, n);
        want.push(format!(
            "{:x} {:x} {:x}",
            a.to_bits(),
            b.to_bits(),
            m.to_bits()
        ));
    }
    for n in [1usize, 2, 7, 100, 1000] {
        for _ in 0..20 {
            let v: Vec<f32> = (0..n)
                .map(|_| match rng.random_range(0..20) {
                    0 => f32::NAN,
                    1 => -0.0,
                    _ => (rng.random_range(-8i32..8)) as f32,
                })
                .collect();
            write!(input, "arg {n}").unwrap();
            for x in &v {
                write!(input, " {:x}", x.to_bits()).unwrap();
            }
            input.push('\n');
            let acc = v.iter().enumerate().fold(
                <ArgIndex<true> as Operator<f32>>::identity(&ArgIndex),
                |a, (i, &x)| {
                    ArgIndex::<true>.combine(
                        a,
                        Indexed {
                            value: x,
                            index: i as u64,
                        },
                    )
                },
            );
            let idx = <ArgIndex<true> as Operator<f32>>::finish(&ArgIndex, acc, n as u64);
            want.push(format!("{idx} {idx}"));
        }
    }

    let got = driver.run(input);
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        // A NaN's payload is not specified across the two sides: compare NaNs as NaNs.
        let nan = |s: &str| {
            s.split(' ').all(|h| {
                let b = u64::from_str_radix(h, 16).unwrap();
                ((0x7f80_0001..=0xffff_ffff).contains(&b) && f32::from_bits(b as u32).is_nan())
                    || f64::from_bits(b).is_nan()
            })
        };
        assert!(g == w || (nan(g) && nan(w)), "case {i}: C++ {g}, Rust {w}");
    }
    driver.remove();
}
