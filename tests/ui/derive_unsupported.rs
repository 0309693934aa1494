// What cannot have a CUDA twin, with the reason and the supported types.
#[derive(Clone, Copy, cufold::DeviceType)]
#[repr(C)]
enum Sign {
    Plus,
    Minus,
}

#[derive(Clone, Copy, cufold::DeviceType)]
#[repr(C)]
struct Pair(f32, f32);

#[derive(Clone, Copy, cufold::DeviceType)]
#[repr(C)]
struct Generic<T> {
    value: T,
}

#[derive(Clone, Copy, cufold::DeviceType)]
#[repr(C)]
struct Fields<'a> {
    flag: bool,
    count: usize,
    first: &'a f32,
    both: (f32, f32),
}

fn main() {}
