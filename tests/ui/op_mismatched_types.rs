// Both arguments and the result have the accumulator's type.
#[cufold::op(identity = 0.0)]
fn mixed(a: f32, b: f64) -> f32 {
    a + b as f32
}

#[cufold::op(identity = 0)]
fn widened(a: i32, b: i32) -> i64 {
    a as i64 + b as i64
}

fn main() {}
