// The function form needs the identity element.
#[cufold::op(commutative)]
fn add(a: f32, b: f32) -> f32 {
    a + b
}

fn main() {}
