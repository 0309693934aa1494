// A field of a struct without a CUDA twin is reported at the field.
#[derive(Clone, Copy, Debug)]
#[repr(C)]
struct Plain {
    x: f32,
}

#[derive(Clone, Copy, cufold::DeviceType)]
#[repr(C)]
struct Outer {
    inner: Plain,
    weight: f32,
}

fn main() {}
