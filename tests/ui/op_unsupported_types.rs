// Types with no CUDA twin are refused where they are written.
#[cufold::op(identity = 0)]
fn count(a: usize, b: usize) -> usize {
    a + b
}

#[cufold::op(identity = false)]
fn any(a: bool, b: bool) -> bool {
    a || b
}

#[cufold::op(identity = (0.0, 0.0))]
fn pair(a: (f32, f32), b: (f32, f32)) -> (f32, f32) {
    (a.0 + b.0, a.1 + b.1)
}

fn main() {}
