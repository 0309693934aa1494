// A translated body reads the run-time parameters field by field: `self.field`. `self`
// alone and the operator's own methods have no CUDA translation.
#[derive(Clone, Copy, cufold::DeviceType)]
#[repr(C)]
struct Scaled {
    k: f64,
    lift: f64,
}

impl Scaled {
    fn twice(&self) -> f64 {
        2.0 * self.k
    }
}

#[cufold::op(commutative)]
impl Scaled {
    fn identity(&self) -> f64 {
        self.twice()
    }
    fn lift(&self, x: f64) -> f64 {
        let me = self;
        x * me.k + self.lift
    }
    fn combine(a: f64, b: f64) -> f64 {
        a + b
    }
}

#[derive(Clone, Copy, cufold::DeviceType)]
#[repr(C)]
struct Shift {
    by: f64,
}

impl Shift {
    fn half(&self) -> f64 {
        self.by / 2.0
    }
}

#[cufold::transform]
impl Shift {
    fn apply(&self, x: f64) -> f64 {
        x + (self).by + Shift::half(self)
    }
}

fn main() {}
