#!/usr/bin/env python3
"""torch.var_mean beside cufold's MeanVar on the same data (benches/gpu_meanvar_accuracy.rs).

    python3 scripts/meanvar_accuracy.py DIR

DIR holds the bench's cases.json (each case: the data's file, the reference mean and population
variance, and cufold's) and the data. For each case this runs torch.var_mean(x, correction=0)
on the GPU in the data's own dtype and prints the relative errors of both libraries' means and
variances against the reference, as a Markdown table.
"""
import json
import os
import sys

import torch


def main():
    d = sys.argv[1]
    cases = json.load(open(os.path.join(d, "cases.json")))
    dev = torch.device("cuda")
    print(f"# {torch.cuda.get_device_name(0)}, torch {torch.__version__}")
    print("| dtype | data | N | variance | cufold mean err | torch mean err | cufold var err | torch var err |")
    print("|---|---|---|---:|---:|---:|---:|---:|")
    for c in cases:
        dtype = {"f32": torch.float32, "f64": torch.float64}[c["dtype"]]
        x = torch.from_file(os.path.join(d, c["file"]), dtype=dtype, size=c["n"]).to(dev)
        var, mean = torch.var_mean(x, correction=0)
        tm, tv = float(mean), float(var)
        rel = lambda got, want: abs((got - want) / want)
        log2 = c["n"].bit_length() - 1
        print(
            f"| {c['dtype']} | {c['dist']} | 2^{log2} | {c['var']:.6g} "
            f"| {rel(c['cufold_mean'], c['mean']):.1e} | {rel(tm, c['mean']):.1e} "
            f"| {rel(c['cufold_var'], c['var']):.1e} | {rel(tv, c['var']):.1e} |"
        )
        del x


if __name__ == "__main__":
    main()
