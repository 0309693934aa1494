// Only the number types' methods are translated; other calls are named and refused.
fn helper(x: f32) -> f32 {
    x * 2.0
}

trait Twice {
    fn twice(self) -> Self;
}
impl Twice for f32 {
    fn twice(self) -> f32 {
        self * 2.0
    }
}

#[cufold::op(identity = 0.0)]
fn calls(a: f32, b: f32) -> f32 {
    helper(a) + b.twice() + f32::sqrt(a) + a.sqrt() + std::convert::identity(b)
}

// Methods of f32 that are not translated: the closest supported names are suggested.
#[cufold::op(identity = 0.0)]
fn hyperbolic(a: f32, b: f32) -> f32 {
    a.asinh() + f32::atanh(b) + f32::max(a)
}

fn main() {}
