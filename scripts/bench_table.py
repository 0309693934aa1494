#!/usr/bin/env python3
"""Markdown table of cufold's GB/s beside the peers measured in the same call.

  python3 scripts/bench_table.py cufold.json peers.json
"""
import json, sys

ours = json.load(open(sys.argv[1]))
peers = json.load(open(sys.argv[2]))
names = {"f32": "float32", "f16": "float16", "f64": "float64", "i32": "int32"}
def peer(lib, op, dtype, n):
    for r in peers:
        if r["lib"] == lib and r["op"] == op and r["dtype"] == dtype and r["n"] == n:
            return r["gbs"]
    return None
print("| op | dtype | N | cufold GB/s | torch GB/s | cupy (CUB) GB/s | copy GB/s | cufold / torch |")
print("|---|---|---|---|---|---|---|---|")
for r in ours:
    d = names[r["dtype"]]
    op = "mean" if r["op"] == "div2mean" else r["op"]
    t = peer("torch", op, d, r["n"]); c = peer("cupy", op, d, r["n"]); cp = peer("copy", "copy", d, r["n"])
    f = lambda v: f"{v:.0f}" if v else "—"
    ratio = f"{r['gbs'] / t:.2f}" if t else "—"
    label = r["op"] + (" (vs torch mean)" if r["op"] == "div2mean" else "")
    print(f"| {label} | {r['dtype']} | 2^{r['n'].bit_length() - 1} | {r['gbs']:.0f} | {f(t)} | {f(c)} | {f(cp)} | {ratio} |")
