// The impl form: identity and combine are required, and the types must agree.
#[derive(Clone, Copy, cufold::DeviceType)]
#[repr(C)]
struct Sums {
    sum: f64,
    n: u64,
}

#[derive(Clone, Copy, Debug, Default)]
struct NoCombine;

#[cufold::op]
impl NoCombine {
    fn lift(x: f32) -> Sums {
        Sums { sum: x as f64, n: 1 }
    }
}

#[derive(Clone, Copy, Debug, Default)]
struct Mean;

#[cufold::op(identity = 0.0)]
impl Mean {
    fn identity() -> f64 {
        0.0
    }
    fn lift(x: f32, _index: u32, _extra: u8) -> Sums {
        Sums { sum: x as f64, n: 1 }
    }
    fn combine(a: Sums, b: Sums) -> Sums {
        Sums { sum: a.sum + b.sum, n: a.n + b.n }
    }
    fn finish(acc: f64, n: u64) -> f64 {
        acc / n as f64
    }
}

fn main() {}
