// Functions of operators and maps take `&self` or no receiver.
#[derive(Clone, Copy, cufold::DeviceType)]
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
    fn combine(self, a: f64, b: f64) -> f64 {
        a + b
    }
    fn finish(&mut self, acc: f64) -> f64 {
        acc
    }
}

#[derive(Clone, Copy, cufold::DeviceType)]
#[repr(C)]
struct Shift {
    by: f64,
}

#[cufold::transform]
impl Shift {
    fn apply(self: &Self, x: f64) -> f64 {
        x + self.by
    }
}

fn main() {}
