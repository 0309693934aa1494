// DeviceType writes Debug itself: deriving it as well is a conflict.
#[derive(Clone, Copy, Debug, cufold::DeviceType)]
#[repr(C)]
struct Interval {
    lo: f32,
    hi: f32,
}

fn main() {}
