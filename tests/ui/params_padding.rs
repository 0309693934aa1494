// Run-time parameters travel to the kernel as their bytes: a struct with padding is refused.
#[derive(Clone, Copy, cufold::DeviceType)]
#[repr(C)]
struct Gapped {
    scale: f32,
    // 4 bytes of padding before `shift`
    shift: f64,
}

#[cufold::op(commutative)]
impl Gapped {
    fn identity() -> f64 {
        0.0
    }
    fn lift(&self, x: f64) -> f64 {
        x * self.scale as f64 + self.shift
    }
    fn combine(a: f64, b: f64) -> f64 {
        a + b
    }
}

#[derive(Clone, Copy, cufold::DeviceType)]
#[repr(C)]
struct Window {
    lo: f32,
    hi: f32,
}

/// No gap of its own, but a field with one.
#[derive(Clone, Copy, cufold::DeviceType)]
#[repr(C)]
struct Clip {
    window: Window,
    inner: Gapped,
}

#[cufold::transform]
impl Clip {
    fn apply(&self, x: f32) -> f32 {
        x.clamp(self.window.lo, self.window.hi) * self.inner.scale
    }
}

fn main() {}
