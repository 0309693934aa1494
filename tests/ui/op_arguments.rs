// Unknown attribute arguments are named, with the ones that exist.
#[cufold::op(identity = 0, comutative, empty = zero)]
fn add(a: i32, b: i32) -> i32 {
    a.wrapping_add(b)
}

fn main() {}
