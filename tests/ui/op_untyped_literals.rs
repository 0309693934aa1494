// Where Rust's inference decides a literal's type from later code, ask for the type.
#[cufold::op(identity = 0)]
fn bits(a: u64, b: u64) -> u64 {
    let mut acc = 0;
    acc += a;
    let m = if a > b {
        let t = a - b;
        t
    } else {
        0
    };
    (1 << (b % 64)) | acc | m
}

fn main() {}
