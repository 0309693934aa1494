// Constants enter the CUDA half by value: they must have a number type.
const SCALE: f32 = 0.5;
const LABEL: &str = "scale";

#[cufold::op(identity = 0.0)]
fn scaled(a: f32, b: f32) -> f32 {
    let _ = LABEL;
    (a + b) * SCALE
}

fn main() {}
