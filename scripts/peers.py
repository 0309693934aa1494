#!/usr/bin/env python3
"""PyTorch and CuPy (CUB) on the work cufold's benches time, plus a device copy, for tables
and plots beside cufold's numbers from the same device call.

  python3 scripts/peers.py [--ops sum,prod,min,max,minmax,argmin,argmax,widesum,mean,meanvar,cumsum]
                           [--dtypes f32,f64,f16,bf16,i32,i64,u8] [--log2 20,24,28]
                           [--libs torch,cupy,copy] [--reps 50] [--json OUT.json]

Each row: library, family (reduce, scan or copy), op, dtype, n, median milliseconds of CUDA
events around one call (after 5 warm-up calls; cufold's benches time the same way) and GB/s
of compulsory traffic: n * size for a reduction, 2 * n * size for a scan or a copy.

What each cufold operator is set beside (the closest call each library has):
  sum, prod, min, max, argmin, argmax: x.sum() etc. in both libraries (lowest index on ties)
  minmax:  torch.aminmax(x); CuPy has none
  widesum: x.sum(dtype=float64 or int64), cufold's WideSum accumulates in those types
  mean:    x.mean() (integers: torch x.mean(dtype=float64), CuPy x.mean(), both in f64)
  meanvar: torch.var_mean(x, correction=0) (floats only); CuPy x.var() and x.mean() are two
           passes, so none is listed
  cumsum:  torch.cumsum(x, 0, out=y), cupy.cumsum(x, out=y)
CuPy has no bfloat16. Data as cufold's benches draw it: uniform [0, 1) floats, integers in
0..1000, bytes in 0..256."""
import argparse, json, os, statistics, sys
os.environ.setdefault("CUPY_ACCELERATORS", "cub")
import torch
try:
    import cupy as cp
except ImportError:
    cp = None

DTYPES = {"f32": torch.float32, "f64": torch.float64, "f16": torch.float16,
          "bf16": torch.bfloat16, "i32": torch.int32, "i64": torch.int64, "u8": torch.uint8}

def time_ms(fn, reps, warm=5):
    for _ in range(warm): fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        a = torch.cuda.Event(enable_timing=True); b = torch.cuda.Event(enable_timing=True)
        a.record(); fn(); b.record(); b.synchronize()
        ts.append(a.elapsed_time(b))
    return statistics.median(ts)

def cases(op, x, y, cx, cy, floating):
    """(lib, family, fn) for each library that has this op."""
    wide_t = torch.float64 if floating else torch.int64
    wide_c = "float64" if floating else "int64"
    t, c = [], []
    if op in ("sum", "prod", "argmin", "argmax"):
        t = [lambda: getattr(x, op)()]; c = [lambda: getattr(cx, op)()]
    elif op in ("min", "max"):
        t = [lambda: getattr(torch, "a" + op)(x)]; c = [lambda: getattr(cx, op)()]
    elif op == "minmax":
        t = [lambda: torch.aminmax(x)]
    elif op == "widesum":
        t = [lambda: x.sum(dtype=wide_t)]; c = [lambda: cx.sum(dtype=wide_c)]
    elif op == "mean":
        t = [lambda: x.mean()] if floating else [lambda: x.mean(dtype=torch.float64)]
        c = [lambda: cx.mean()]
    elif op == "meanvar":
        if floating: t = [lambda: torch.var_mean(x, correction=0)]
    elif op == "cumsum":
        t = [lambda: torch.cumsum(x, 0, out=y)]; c = [lambda: cp.cumsum(cx, out=cy)]
    else:
        raise SystemExit(f"unknown op {op}")
    fam = "scan" if op == "cumsum" else "reduce"
    return [("torch", fam, f) for f in t] + ([("cupy", fam, f) for f in c] if cx is not None else [])

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ops", default="sum,prod,min,max,minmax,argmin,argmax,widesum,mean,meanvar,cumsum")
    ap.add_argument("--dtypes", default="f32,f64,f16,bf16,i32,i64,u8")
    ap.add_argument("--log2", default="20,24,28")
    ap.add_argument("--libs", default="torch,cupy,copy")
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--json")
    a = ap.parse_args()
    libs = set(a.libs.split(",")); rows = []
    dev = torch.cuda.get_device_name()
    print(f"# {dev}, torch {torch.__version__}, cupy {cp.__version__ if cp else 'absent'}", flush=True)
    for dname in a.dtypes.split(","):
        tdt = DTYPES[dname]; floating = tdt.is_floating_point
        for lg in map(int, a.log2.split(",")):
            n = 1 << lg
            if floating:
                x = torch.rand(n, device="cuda", dtype=torch.float32).to(tdt)
            else:
                x = torch.randint(0, 256 if dname == "u8" else 1000, (n,), device="cuda", dtype=tdt)
            es = x.element_size(); y = torch.empty_like(x)
            use_cp = cp is not None and "cupy" in libs and dname != "bf16"
            cx = cp.from_dlpack(x) if use_cp else None
            cy = cp.empty_like(cx) if use_cp else None
            todo = [("copy", "copy", "copy", lambda: y.copy_(x))] if "copy" in libs else []
            for op in a.ops.split(","):
                todo += [(lib, fam, op, f) for lib, fam, f in cases(op, x, y, cx, cy, floating) if lib in libs]
            for lib, fam, op, fn in todo:
                try:
                    ms = time_ms(fn, a.reps)
                except Exception as e:  # a dtype a library lacks for this op
                    print(f"{lib:6s} {op:8s} {dname:5s} 2^{lg:<3d} unsupported: {str(e).splitlines()[0][:80]}", flush=True)
                    continue
                passes = 1 if fam == "reduce" else 2
                gbs = passes * n * es / (ms * 1e-3) / 1e9
                rows.append(dict(lib=lib, family=fam, op=op, dtype=dname, n=n, ms=ms, gbs=gbs, device=dev))
                print(f"{lib:6s} {op:8s} {dname:5s} 2^{lg:<3d} {ms:9.4f} ms {gbs:8.1f} GB/s", flush=True)
            del x, y, cx, cy, todo
            torch.cuda.empty_cache()
    if a.json:
        with open(a.json, "w") as f: json.dump(rows, f, indent=1)

if __name__ == "__main__":
    sys.exit(main())
