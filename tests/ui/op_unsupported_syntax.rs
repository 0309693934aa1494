// Everything outside the translated subset is reported at its span, all at once.
#[derive(Clone, Copy, cufold::DeviceType)]
#[repr(C)]
struct P {
    x: f32,
    y: f32,
}

#[cufold::op(identity = P { x: 0.0, y: 0.0 })]
fn odd(a: P, b: P) -> P {
    let k = match a.x > 0.0 {
        true => 1.0,
        false => 2.0,
    };
    let f = |v: f32| v * k;
    let r = &b;
    let t = (a.x, b.y);
    println!("{}", f(a.x));
    P { x: r.x + t.0, ..b }
}

fn main() {}
