#!/usr/bin/env python3
"""PyTorch on benches/gpu_monte_carlo.rs's work, timed the same way (CUDA events around each
call, median after warm-up): samples per second for (a) the mean of U(0,1),
torch.rand(n).mean(), and (b) E[exp(-|x|^2)] over U(0,1)^4, torch.rand(n, 4) then the
expression then mean. Samples are generated in chunks of at most 2^28 (PyTorch needs the
whole tensor and its temporaries in memory), each chunk's mean weighted in float64; one
timed call covers all chunks.

    python3 scripts/mc_peers.py [--log2 24,26,28,30,32] [--reps 10] [--json OUT.json]
"""
import argparse
import json
import math

import torch

CHUNK = 1 << 28


def uniform(n):
    acc = torch.zeros((), dtype=torch.float64, device="cuda")
    left = n
    while left > 0:
        c = min(left, CHUNK)
        acc += torch.rand(c, device="cuda").mean().double() * c
        left -= c
    return acc / n


def uniform_single(n):
    return torch.rand(n, device="cuda").mean()


def gauss4(n):
    acc = torch.zeros((), dtype=torch.float64, device="cuda")
    left = n
    while left > 0:
        c = min(left, CHUNK)
        x = torch.rand(c, 4, device="cuda")
        acc += torch.exp(-(x * x).sum(dim=1)).mean().double() * c
        left -= c
    return acc / n


def median_ms(f, n, reps):
    for _ in range(3):
        f(n)
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        r = f(n)
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b))
    ts.sort()
    return ts[len(ts) // 2], float(r)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--log2", default="24,26,28,30,32")
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--json")
    a = p.parse_args()
    rows = []
    print(f"device: {torch.cuda.get_device_name()}  torch {torch.__version__}")
    print(f"{'work':<8} {'variant':<36} {'log2':>5} {'ms':>10} {'samples/s':>14} {'estimate':>12}")
    for work, variants in (
        ("uniform", (("torch.rand(n).mean() (one tensor)", uniform_single, 30),
                     ("torch.rand(c).mean(), 2^28 chunks", uniform, 32))),
        ("gauss4", (("torch.rand(c,4), exp, mean, 2^28 chunks", gauss4, 32),)),
    ):
        for name, f, top in variants:
            for l in map(int, a.log2.split(",")):
                if l > top:
                    continue
                ms, est = median_ms(f, 1 << l, a.reps if l < 30 else min(a.reps, 5))
                rate = (1 << l) / (ms * 1e-3)
                print(f"{work:<8} {name:<36} {l:>5} {ms:>10.4f} {rate:>14.4e} {est:>12.9f}")
                rows.append(dict(lib="torch", workload=work, variant=name, log2=l, ms=ms,
                                 samples_per_s=rate, estimate=est))
                torch.cuda.empty_cache()
    print(f"exact: uniform 0.5, gauss4 {(math.sqrt(math.pi) / 2 * math.erf(1)) ** 4:.9f}")
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()
