// A struct without #[derive(cufold::DeviceType)] as an operator's or a map's value type:
// one error per type, at the type, saying what a device value is.
#[derive(Clone, Copy, Debug)]
#[repr(C)]
struct Pair {
    lo: f32,
    hi: f32,
}

#[derive(Clone, Copy, Debug, Default)]
struct Spread;

#[cufold::op(commutative)]
impl Spread {
    fn identity() -> Pair {
        Pair { lo: f32::INFINITY, hi: f32::NEG_INFINITY }
    }
    fn lift(x: f32) -> Pair {
        Pair { lo: x, hi: x }
    }
    fn combine(a: Pair, b: Pair) -> Pair {
        let c: Pair = Pair { lo: a.lo.min(b.lo), hi: a.hi.max(b.hi) };
        c
    }
    fn finish(acc: Pair) -> Pair {
        Pair { lo: acc.lo, hi: acc.hi }
    }
}

#[cufold::op(identity = Pair { lo: f32::INFINITY, hi: f32::NEG_INFINITY })]
fn widest(a: Pair, b: Pair) -> Pair {
    Pair { lo: a.lo.min(b.lo), hi: a.hi.max(b.hi) }
}

#[derive(Clone, Copy, Debug, Default)]
struct Point;

#[cufold::transform]
impl Point {
    fn apply(x: f32) -> Pair {
        Pair { lo: x, hi: x }
    }
}

fn main() {}
