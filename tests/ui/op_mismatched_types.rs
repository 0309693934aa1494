// Both arguments and the result have the accumulator's type.
#[cufold::op(identity = 0.0)]
fn mixed(a: f32, b: f64) -> f32 {
    a + b as f32
}

#[cufold::op(identity = 0)]
fn widened(a: i32, b: i32) -> i64 {
    a as i64 + b as i64
}

// Types are printed as written (`&f64`, not `& f64`).
#[derive(Clone, Copy, Debug, Default)]
struct ByRef;

#[cufold::op]
impl ByRef {
    fn identity() -> f64 {
        0.0
    }
    fn combine(a: &f64, b: &f64) -> f64 {
        a + b
    }
}

fn main() {}
