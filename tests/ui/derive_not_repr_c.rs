// Without #[repr(C)] Rust may reorder fields.
#[derive(Clone, Copy, cufold::DeviceType)]
struct Interval {
    lo: f32,
    hi: f32,
}

#[derive(Clone, Copy, cufold::DeviceType)]
#[repr(C, packed)]
struct Packed {
    lo: f32,
    hi: f64,
}

fn main() {}
