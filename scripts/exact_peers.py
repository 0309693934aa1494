#!/usr/bin/env python3
"""The peers of cufold's ExactSum: how fast PyTorch's and CuPy's (CUB's) sums are, and how far
each lands from the exact sum of the same data, for the benchmark report.

  python3 scripts/exact_peers.py [--dtypes f32,f64,f16,bf16] [--log2 20,24,28]
                                 [--data uniform,normal,wide,illcond] [--reps 50] [--json OUT]

Measured, for each dtype, size and data kind:
  torch sum      torch.sum(x)                          (f32 input: an f32 result)
  torch widesum  torch.sum(x, dtype=torch.float64)     (f32 input only; for f64 it is sum)
  (f16 and bf16: torch's and CuPy's sums in the element type, which accumulate in f32; CuPy has
  no bf16; their data uniform and normal only)
  cupy  sum      cupy.sum on a zero-copy view of x     (CuPy reduces through CUB)
  cupy  widesum  the same with dtype=float64           (f32 input only; CUB or CuPy's own kernel)
Time as scripts/peers.py takes it: median of --reps calls, each between two CUDA events, after
5 warm-up calls; GB/s = n * itemsize / time. Error: rel err = |result - exact| / |exact|, and ulps
= (result - exact rounded to the result's dtype) / ulp of that rounded value, so 0 means the
result is the correctly rounded sum in its own dtype (an f64 result for widesum).

The exact sum is computed on the GPU with integers: every element is sign * m * 2^(e-p) with m
an integer below 2^p (torch.frexp, the mantissa scaled by 2^24 or 2^53); m is split in 26-bit
pieces (f64) and each piece summed per exponent in int64 by index_add_ (spread over 64 lanes
per exponent to ease atomic contention), which cannot overflow for n <= 2^30; the bucket sums
go to the host and are combined exactly with Python ints into a Fraction. It is checked at
start-up against Fraction sums and math.fsum on small arrays of every kind; any disagreement
aborts.

Data, drawn on the GPU by torch from a fixed seed per (dtype, kind, size):
  uniform  U(0, 1)
  normal   N(0, 1)
  wide     random signs, exponents uniform over 2^-100..2^100 (f32) or 2^-600..2^600 (f64),
           significand bits uniform
  illcond  condition number sum|x| / |sum x| of about 1e12 (f32) or 1e30 (f64): half the
           elements a with random signs, exponents uniform over [0, L], L = 41 or 101 (one
           more than log2 of the target) and random significand bits; the other half their
           negatives perturbed by less than 1, -(a + u) with u in U(0, 1), i.e. -a * (1 + u * eps)
           with eps = 1 / a; shuffled. The pairs with a above 2^p cancel exactly, the others
           leave about -1/2 each, all of one sign, so sum x is about -n * p / (4 * (L + 1)),
           sum |x| about 3 * n * 2^L / (L + 1), and the condition number near the target
           whatever n is (each data set's is printed).

Rows as peers.py writes them, with family "exact", shape "whole", the data kind, rel_err, ulps
and the data's condition number. Only for a machine with a CUDA GPU: without one the script
says so and exits 0.
"""
import argparse, json, math, os, sys, zlib
from fractions import Fraction

os.environ.setdefault("CUPY_ACCELERATORS", "cub")

# p: significand bits; emin/emax: range of torch.frexp's exponent (value = mant * 2^e, mant in
# [0.5, 1)) for finite values, subnormals included; nmin: the least normal binade 2^nmin.
FMT = {"f32": dict(p=24, emin=-148, emax=128, nmin=-126, ebias=127, mbits=23, wide=100, L=41),
       "f64": dict(p=53, emin=-1073, emax=1024, nmin=-1022, ebias=1023, mbits=52, wide=600, L=101)}
# The halves' rounding formats (their sums are exact in f32's, which exact_sum takes).
HALF = {"f16": dict(p=11, nmin=-14), "bf16": dict(p=8, nmin=-126)}
PIECE = 26   # bits of a significand piece: a piece < 2^27, n <= 2^30 of them sum below 2^57
LANES = 64   # int64 accumulators per exponent, element i into lane i % LANES
CHUNK = 1 << 26
DEVICE = "cuda"


def tdtype(torch, dname):
    return {"f32": torch.float32, "f64": torch.float64, "f16": torch.float16, "bf16": torch.bfloat16}[dname]


def dname_of(torch, dt):
    return {torch.float32: "f32", torch.float64: "f64"}[dt]


def rounding_format(dname):
    """p and nmin of dname, the halves included."""
    return FMT.get(dname) or HALF[dname]


def pow2(k):
    return Fraction(1 << k) if k >= 0 else Fraction(1, 1 << -k)


def exact_sum(torch, x, chunk=CHUNK):
    """The exact sum of the f32 or f64 tensor x (any device) as a Fraction."""
    f = FMT[dname_of(torch, x.dtype)]
    p, emin, emax = f["p"], f["emin"], f["emax"]
    if not bool(torch.isfinite(x).all()):
        raise ValueError("exact_sum: non-finite input")
    nb = emax - emin + 1
    npieces = 1 if p <= PIECE + 1 else 2
    acc = torch.zeros(npieces, nb * LANES, dtype=torch.int64, device=x.device)
    lane = torch.arange(min(chunk, x.numel()), device=x.device, dtype=torch.int64) & (LANES - 1)
    flat = x.reshape(-1)
    for s in range(0, flat.numel(), chunk):
        c = flat[s:s + chunk]
        mant, e = torch.frexp(c)
        m = (mant * float(1 << p)).to(torch.int64)            # exact: |m| < 2^p
        idx = (e.to(torch.int64) - emin) * LANES + lane[:c.numel()]
        del mant, e
        if npieces == 1:
            acc[0].index_add_(0, idx, m)
        else:
            am = m.abs(); neg = m < 0
            hi = am >> PIECE; lo = am & ((1 << PIECE) - 1)
            acc[0].index_add_(0, idx, torch.where(neg, -hi, hi))
            acc[1].index_add_(0, idx, torch.where(neg, -lo, lo))
            del am, neg, hi, lo
        del m, idx
    sums = acc.view(npieces, nb, LANES).sum(2).tolist()      # per-exponent sums, < 2^57 each
    total = 0
    for b in range(nb):
        v = sums[0][b] if npieces == 1 else (sums[0][b] << PIECE) + sums[1][b]
        if v:
            total += v << b
    # element value m * 2^(e - p) = m * 2^b * 2^(emin - p) with b = e - emin
    return Fraction(total) * pow2(emin - p)


def round_to(q, dname):
    """q rounded to nearest, ties to even, in the format dname (subnormals kept; no overflow)."""
    if q == 0:
        return Fraction(0)
    f = rounding_format(dname)
    a = abs(q)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if a < pow2(e):
        e -= 1
    e = max(e, f["nmin"])
    t = a * pow2(f["p"] - 1 - e)
    n, r = divmod(t.numerator, t.denominator)
    if 2 * r > t.denominator or (2 * r == t.denominator and n & 1):
        n += 1
    v = Fraction(n) * pow2(e - f["p"] + 1)
    return v if q > 0 else -v


def ulp_of(v, dname):
    """The ulp of the value v (a Fraction representable in dname)."""
    f = rounding_format(dname)
    e = f["nmin"]
    if v != 0:
        a = abs(v)
        e = a.numerator.bit_length() - a.denominator.bit_length()
        if a < pow2(e):
            e -= 1
        e = max(e, f["nmin"])
    return pow2(e - f["p"] + 1)


def errors(result, exact, out_dname):
    """(relative error, ulps from the exact sum correctly rounded to out_dname) of a float."""
    if not math.isfinite(result):
        return math.inf, math.inf
    r = Fraction(result)
    rel = float(abs(r - exact) / abs(exact)) if exact != 0 else (0.0 if r == 0 else math.inf)
    ex = round_to(exact, out_dname)
    return rel, float((r - ex) / ulp_of(ex, out_dname))


def gen(torch, kind, n, dname, device, seed):
    """n elements of the data kind in dtype dname, on device, from seed (halves: uniform and
    normal only)."""
    dt = tdtype(torch, dname); f = FMT.get(dname)
    g = torch.Generator(device=device); g.manual_seed(seed)
    if kind == "uniform":
        return torch.rand(n, generator=g, device=device, dtype=dt)
    if kind == "normal":
        return torch.randn(n, generator=g, device=device, dtype=dt)

    def signed_pow(m, lo, hi):
        """m values sign * 2^k * (1 + f), k uniform in [lo, hi], significand bits uniform."""
        k = torch.randint(lo, hi + 1, (m,), generator=g, device=device, dtype=torch.int64)
        frac = torch.randint(0, 1 << f["mbits"], (m,), generator=g, device=device, dtype=torch.int64)
        bits = ((k + f["ebias"]) << f["mbits"]) | frac
        v = bits.to(torch.int32).view(torch.float32) if dname == "f32" else bits.view(torch.float64)
        sign = torch.randint(0, 2, (m,), generator=g, device=device).to(dt) * 2 - 1
        return v * sign

    if kind == "wide":
        return signed_pow(n, -f["wide"], f["wide"])
    if kind == "illcond":
        half = n // 2
        a = signed_pow(half, 0, f["L"])
        u = torch.rand(half, generator=g, device=device, dtype=dt)
        b = -(a + u)
        x = torch.cat([a, b, torch.zeros(n - 2 * half, device=device, dtype=dt)])
        return x[torch.randperm(n, generator=g, device=device)]
    raise SystemExit(f"unknown data kind {kind}")


def self_check(torch, device):
    """Check exact_sum against Fraction sums and math.fsum; raise on any disagreement."""
    for dname in FMT:
        dt = tdtype(torch, dname)
        fi = torch.finfo(dt)
        specials = torch.tensor([0.0, -0.0, fi.tiny, -fi.tiny / 4, fi.smallest_normal * 2 ** -(FMT[dname]["p"] - 1),
                                 fi.max / 4, -fi.max / 4, 1.0, -1.0 + fi.eps], dtype=dt).to(device)
        for kind in ("uniform", "normal", "wide", "illcond"):
            for n, chunk in ((1000, 97), (100000, 1 << 14)):
                x = gen(torch, kind, n, dname, device, seed=zlib.crc32(f"check/{dname}/{kind}/{n}".encode()))
                if n == 1000:
                    x = torch.cat([x, specials])
                got = exact_sum(torch, x, chunk=chunk)
                vals = x.cpu().tolist()
                if n == 1000:
                    want = sum((Fraction(v) for v in vals), Fraction(0))
                    if got != want:
                        raise SystemExit(f"exact-sum self-check FAILED ({dname} {kind} n={n}): {got} != {want}")
                if float(got) != math.fsum(vals):
                    raise SystemExit(f"exact-sum self-check FAILED ({dname} {kind} n={n}): "
                                     f"{float(got)!r} != fsum {math.fsum(vals)!r}")
    # the rounding helper against Python's own correctly rounded float(Fraction) and f32 casts
    for q in (Fraction(1, 3), Fraction(-10**30 - 7, 3**40), Fraction(2**60 + 2**7, 1), Fraction(3, 2**1074 * 4)):
        if float(round_to(q, "f64")) != float(q):
            raise SystemExit(f"round_to self-check FAILED for {q}")
    for v in (1 + 2 ** -24, 1 + 3 * 2 ** -24, -(1 + 2 ** -24 + 2 ** -40), 2 ** -149 * 1.5, 2 ** -149 * 2.5):
        want = torch.tensor(v, dtype=torch.float64).to(torch.float32).item()
        if round_to(Fraction(v), "f32") != Fraction(want):
            raise SystemExit(f"round_to self-check FAILED for f32 {v!r}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dtypes", default="f32,f64")
    ap.add_argument("--log2", default="20,24,28")
    ap.add_argument("--data", default="uniform,normal,wide,illcond")
    ap.add_argument("--libs", default="torch,cupy")
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--json")
    a = ap.parse_args()
    try:
        import torch
    except ImportError:
        print("exact_peers: no torch here; run it on the CUDA machine (/opt/torch/.venv)")
        return 0
    if not torch.cuda.is_available():
        print("exact_peers: no CUDA device here; it measures GPU peers, run it on the CUDA machine")
        return 0
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from peers import time_ms   # the same event timing as scripts/peers.py
    try:
        import cupy as cp
    except ImportError:
        cp = None
    libs = set(a.libs.split(","))
    if "cupy" in libs and cp is None:
        print("# cupy absent: its rows are skipped", flush=True)
    dev = torch.cuda.get_device_name()
    self_check(torch, DEVICE)
    print(f"# {dev}, torch {torch.__version__}, cupy {cp.__version__ if cp else 'absent'}; "
          f"exact-sum self-check passed; median of {a.reps} calls", flush=True)
    rows = []
    for dname in a.dtypes.split(","):
        dt = tdtype(torch, dname)
        for kind in a.data.split(","):
            for lg in map(int, a.log2.split(",")):
                n = 1 << lg
                x = gen(torch, kind, n, dname, DEVICE, seed=zlib.crc32(f"{dname}/{kind}/{lg}".encode()))
                # A half converts to f32 exactly.
                exact = exact_sum(torch, x.float() if dname in HALF else x)
                l1 = torch.sum(x.abs(), dtype=torch.float64).item()
                cond = l1 / abs(float(exact)) if exact != 0 else math.inf
                print(f"# {dname} {kind} 2^{lg}: exact sum {float(exact):.17g}, condition number {cond:.3g}",
                      flush=True)
                # CuPy has no bf16.
                cx = cp.from_dlpack(x) if cp is not None and "cupy" in libs and dname != "bf16" else None
                todo = []
                if "torch" in libs:
                    todo.append(("torch", "sum", lambda: torch.sum(x)))
                    if dname == "f32":
                        todo.append(("torch", "widesum", lambda: torch.sum(x, dtype=torch.float64)))
                if cx is not None:
                    todo.append(("cupy", "sum", lambda: cx.sum()))
                    if dname == "f32":
                        todo.append(("cupy", "widesum", lambda: cx.sum(dtype="float64")))
                for lib, op, fn in todo:
                    out = fn()
                    res = float(out.item())
                    out_dname = "f64" if op == "widesum" else dname
                    rel, ulps = errors(res, exact, out_dname)
                    ms = time_ms(fn, a.reps)
                    gbs = n * x.element_size() / (ms * 1e-3) / 1e9
                    rows.append(dict(lib=lib, family="exact", op=op, dtype=dname, data=kind, shape="whole", n=n,
                                     ms=ms, gbs=gbs, rel_err=rel, ulps=ulps, cond=cond, device=dev))
                    print(f"{lib:8s} {op:8s} {dname:4s} {kind:8s} 2^{lg:<3d} {ms:8.4f} ms {gbs:7.1f} GB/s  "
                          f"rel err {rel:.1e}  ulps {ulps:+.3g}", flush=True)
                del x, cx, todo
                torch.cuda.empty_cache()
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
