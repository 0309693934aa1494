#!/usr/bin/env python3
"""PyTorch and CuPy (CUB) on benches/gpu_segment.rs's shapes, timed the same way (CUDA
events around each call after warm-up, median), beside a device copy of the input.

  python3 scripts/segment_peers.py [--shapes short,square,long,powerlaw,mid,wide,narrow] [--reps 20] [--json OUT]

Shapes (the same lengths as the bench, from the same splitmix64 stream):
  short     2^24 segments of 4..32 elements (CSR offsets)    torch.segment_reduce (logsumexp: its
                                                              max, exp and sum, torch's own route)
  square    2^14 x 2^14 rows                                  torch/cupy .sum/.amax/.argmax/.cumsum
                                                              and torch.logsumexp (dim=-1),
                                                              cupyx.scipy.special.logsumexp
  long      16 x 2^24 rows                                    the same
  powerlaw  Pareto(1.2) lengths from 1, capped at 2^22, until 2^26 elements (offsets)
  mid       2^18 x 2^10 rows (a softmax's rows)                as square
  wide      2^15 x 2^13 rows                                  as square
  narrow    2^21 x 2^7 rows                                   as square
  rows2k    2^17 x 2^11 rows                                  as square
  rows4k    2^16 x 2^12 rows                                  as square
  long_offsets  16 segments of 2^24 (offsets)                  as short
  few_offsets   512 segments of 2^19 (offsets)                 as short
GB/s uses the bench's byte count for the same op and shape (input, offsets, outputs as
cufold writes them), so ratios of GB/s are ratios of time.
"""
import argparse, json, sys
import numpy as np
import torch

M64 = (1 << 64) - 1


def splitmix(seed, count):
    k = np.arange(1, count + 1, dtype=np.uint64)
    with np.errstate(over="ignore"):
        z = np.uint64(seed) + k * np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    return z


def shape(name):
    if name == "short":
        lengths = 4 + splitmix(0x5EED, 1 << 24) % np.uint64(29)
        return "offsets", lengths.astype(np.int64)
    if name == "square":
        return "rows", (1 << 14, 1 << 14)
    if name == "long":
        return "rows", (16, 1 << 24)
    if name == "mid":
        return "rows", (1 << 18, 1 << 10)
    if name == "wide":
        return "rows", (1 << 15, 1 << 13)
    if name == "narrow":
        return "rows", (1 << 21, 1 << 7)
    if name == "rows2k":
        return "rows", (1 << 17, 1 << 11)
    if name == "rows4k":
        return "rows", (1 << 16, 1 << 12)
    if name == "long_offsets":  # few long segments by offsets (the planner's long pass)
        return "offsets", np.full(16, 1 << 24, dtype=np.int64)
    if name == "few_offsets":
        return "offsets", np.full(512, 1 << 19, dtype=np.int64)
    if name == "powerlaw":
        draws = splitmix(0x5EED, 1 << 24)
        u = ((draws >> np.uint64(11)).astype(np.float64) + 0.5) / float(1 << 53)
        lengths = np.clip(np.floor(u ** (-1.0 / 1.2)), 1, 1 << 22).astype(np.int64)
        total = np.cumsum(lengths)
        cut = int(np.searchsorted(total, 1 << 26)) + 1  # first prefix with total >= 2^26
        return "offsets", lengths[:cut]
    raise SystemExit(f"unknown shape {name}")


def median_ms(fn, reps):
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    times.sort()
    return times[len(times) // 2]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--shapes", default="short,square,long,powerlaw,mid,wide,narrow")
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--json")
    a = p.parse_args()
    try:
        import cupy
        from cupy import _core
        _core.set_reduction_accelerators(["cub"])
    except Exception as e:  # noqa: BLE001
        cupy = None
        print(f"no CuPy: {e}", file=sys.stderr)
    out_size = {"sum": 4, "max": 4, "argmax": 16}
    # Ops whose byte count is not the reductions' (as benches/gpu_segment.rs counts them).
    def op_bytes(op, n, extra, segments):
        if op == "cumsum":
            return n * 8 + extra
        if op == "sum_by_key":
            return n * 8 + segments * 16
        return n * 4 + extra + segments * out_size.get(op, 4)
    rows = []
    dev = torch.cuda.get_device_name()
    for s in a.shapes.split(","):
        kind, spec = shape(s)
        if kind == "rows":
            r, c = spec
            segments, n, extra = r, r * c, 0
        else:
            lengths = spec
            segments, n, extra = len(lengths), int(lengths.sum()), (len(lengths) + 1) * 8
        x = torch.rand(n, device="cuda", dtype=torch.float32)

        def record(lib, op, ms):
            bytes_ = op_bytes(op, n, extra, segments)
            gbs = bytes_ / (ms * 1e-3) / 1e9
            print(f"{lib:6} {op:7} {s:9} {segments:>9} segs {n:>11} elems {ms:9.4f} ms {gbs:8.1f} GB/s")
            rows.append(dict(lib=lib, family="segment", op=op, shape=s, dtype="f32", segments=segments,
                             n=n, bytes=bytes_, ms=ms, gbs=gbs, device=dev))

        copy_ms = median_ms(lambda: x.clone(), a.reps)
        rows.append(dict(lib="copy", family="segment", op="copy", shape=s, dtype="f32", segments=segments,
                         n=n, bytes=2 * n * 4, ms=copy_ms, gbs=2 * n * 4 / (copy_ms * 1e-3) / 1e9, device=dev))
        print(f"copy   copy    {s:9} {2 * n * 4 / (copy_ms * 1e-3) / 1e9:8.1f} GB/s (read + write)")
        if kind == "rows":
            m = x.view(r, c)
            record("torch", "sum", median_ms(lambda: m.sum(dim=-1), a.reps))
            record("torch", "max", median_ms(lambda: m.amax(dim=-1), a.reps))
            record("torch", "argmax", median_ms(lambda: m.argmax(dim=-1), a.reps))
            record("torch", "cumsum", median_ms(lambda: m.cumsum(dim=-1), a.reps))
            record("torch", "logsumexp", median_ms(lambda: torch.logsumexp(m, dim=-1), a.reps))
            if cupy is not None:
                cm = cupy.asarray(m)
                def cp(fn):
                    return median_ms(lambda: fn(cm), a.reps)
                record("cupy", "sum", cp(lambda v: v.sum(axis=-1)))
                record("cupy", "max", cp(lambda v: v.max(axis=-1)))
                record("cupy", "argmax", cp(lambda v: v.argmax(axis=-1)))
                record("cupy", "cumsum", cp(lambda v: v.cumsum(axis=-1)))
                try:
                    from cupyx.scipy.special import logsumexp as cp_lse
                    record("cupy", "logsumexp", cp(lambda v: cp_lse(v, axis=-1)))
                except Exception as e:  # noqa: BLE001
                    print(f"no cupyx logsumexp: {e}", file=sys.stderr)
        else:
            off = torch.zeros(len(lengths) + 1, dtype=torch.int64, device="cuda")
            off[1:] = torch.from_numpy(np.cumsum(lengths)).cuda()
            for op, red in [("sum", "sum"), ("max", "max")]:
                record("torch", op, median_ms(lambda: torch.segment_reduce(x, red, offsets=off), a.reps))
            # torch has no segmented log-sum-exp: its dense logsumexp's route by segments (the
            # maxima, exp(x - max) and their sums, for finite inputs).
            lengths_dev = torch.from_numpy(lengths).cuda()

            def seg_lse():
                mx = torch.segment_reduce(x, "max", offsets=off)
                e = torch.exp(x - torch.repeat_interleave(mx, lengths_dev, output_size=n))
                return torch.log(torch.segment_reduce(e, "sum", offsets=off)) + mx
            record("torch", "logsumexp", median_ms(seg_lse, a.reps))
            del lengths_dev
        # By key: key i on segment i's elements (int32, as the bench's u32), the runs found by
        # unique_consecutive and summed by segment_reduce: torch's route to reduce_by_key.
        seg_lengths = torch.full((r,), c, dtype=torch.int64) if kind == "rows" else torch.from_numpy(lengths)
        keys = torch.repeat_interleave(torch.arange(segments, dtype=torch.int32), seg_lengths).cuda()

        def by_key():
            k, counts = torch.unique_consecutive(keys, return_counts=True)
            return k, torch.segment_reduce(x, "sum", lengths=counts), counts
        record("torch", "sum_by_key", median_ms(by_key, a.reps))
        del keys
        del x
        torch.cuda.empty_cache()
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
