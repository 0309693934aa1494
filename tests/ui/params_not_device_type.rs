// A value read through `&self` is the operator's run-time parameters: its type needs a
// CUDA twin, #[derive(cufold::DeviceType)].
#[derive(Clone, Copy, Debug)]
#[repr(C)]
struct Scaled {
    k: f64,
}

#[cufold::op(commutative)]
impl Scaled {
    fn identity() -> f64 {
        0.0
    }
    fn lift(&self, x: f64) -> f64 {
        x * self.k
    }
    fn combine(a: f64, b: f64) -> f64 {
        a + b
    }
}

#[derive(Clone, Copy, Debug)]
struct Shift {
    by: f32,
}

#[cufold::transform]
impl Shift {
    fn apply(&self, x: f32) -> f32 {
        x + self.by
    }
}

fn main() {}
