// An operator combines exactly two values.
#[cufold::op(identity = 0.0)]
fn add3(a: f32, b: f32, c: f32) -> f32 {
    a + b + c
}

#[cufold::op(identity = 0.0)]
fn twice(a: f32) -> f32 {
    a + a
}

fn main() {}
