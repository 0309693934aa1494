// Loops are not translated: the reduction tree does the looping.
#[cufold::op(identity = 1)]
fn power(a: u32, b: u32) -> u32 {
    let mut r: u32 = 1;
    for _ in 0..b {
        r = r.wrapping_mul(a);
    }
    while r > 1000 {
        r /= 2;
    }
    loop {
        break;
    }
    r
}

fn main() {}
