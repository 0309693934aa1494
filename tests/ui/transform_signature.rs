// #[cufold::transform]: one `fn apply(&self, x: In, index: u64) -> Out` in an inherent impl.
#[derive(Clone, Copy)]
struct NoApply;

#[cufold::transform]
impl NoApply {
    fn map(x: f32) -> f32 {
        x
    }
}

#[derive(Clone, Copy)]
struct NoInput;

#[cufold::transform]
impl NoInput {
    fn apply() -> f32 {
        1.0
    }
}

#[derive(Clone, Copy)]
struct TooMany;

#[cufold::transform]
impl TooMany {
    fn apply(x: f32, index: u32, extra: f32) -> f32 {
        x + extra
    }
}

#[derive(Clone, Copy)]
struct NoOutput;

#[cufold::transform(fast)]
impl NoOutput {
    fn apply(x: (f32, f32)) {}
}

#[derive(Clone, Copy)]
struct Generic<T>(T);

#[cufold::transform]
impl<T: Copy> Generic<T> {
    fn apply<U>(x: f32) -> f32 {
        x
    }
}

#[cufold::transform]
fn apply(x: f32) -> f32 {
    x
}

fn main() {}
