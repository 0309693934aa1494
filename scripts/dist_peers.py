#!/usr/bin/env python3
"""PyTorch's distributed sum beside cufold's `gpu_dist_processes` bench: one process per GPU
(NCCL backend), each holding its share of an f32 array of ones on its GPU, `torch.sum` of the
share then `torch.distributed.all_reduce` of the local sums, the result on the host.

  python3 scripts/dist_peers.py [--ranks 1,2,3,4] [--log2 28,30,32] [--reps 10] [--json OUT.json]

Shares as `ChunkLayout::new` deals them (within 1% of n / k). A time is the median over
repetitions of the slowest rank's call, from a barrier (outside the timing) to the sum on
the host, as the bench times cufold's."""
import argparse, json, os, statistics, sys, tempfile
import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def worker(rank, k, args, init, queue):
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", init_method=init, rank=rank, world_size=k,
                            device_id=torch.device("cuda", rank))
    import time
    rows = []
    for lg in args.log2:
        n = 1 << lg
        share = n // k + (1 if rank < n % k else 0)
        x = torch.ones(share, dtype=torch.float32, device="cuda")
        times = []
        for _ in range(args.reps + 1):
            dist.barrier()
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            s = x.sum()
            dist.all_reduce(s)
            v = s.item()
            times.append((time.perf_counter() - t0) * 1e3)
        t = torch.tensor(times, device="cuda", dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        if rank == 0:
            rows.append({"lib": "torch.distributed", "op": "sum", "log2": lg, "ranks": k,
                         "ms": statistics.median(t.tolist()[1:]), "value": v})
        del x
        torch.cuda.empty_cache()
    if rank == 0:
        queue.put(rows)
    dist.barrier()
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--ranks", default="1,2,3,4")
    p.add_argument("--log2", default="28,30,32")
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--json")
    args = p.parse_args()
    args.ranks = [int(v) for v in args.ranks.split(",")]
    args.log2 = [int(v) for v in args.log2.split(",")]
    ctx = mp.get_context("spawn")
    rows = []
    for k in args.ranks:
        if k > torch.cuda.device_count():
            print(f"{k} ranks: only {torch.cuda.device_count()} GPUs", file=sys.stderr)
            continue
        with tempfile.TemporaryDirectory() as d:
            queue = ctx.Queue()
            procs = [ctx.Process(target=worker, args=(r, k, args, f"file://{d}/init", queue))
                     for r in range(k)]
            for pr in procs:
                pr.start()
            rows += queue.get(timeout=600)
            for pr in procs:
                pr.join(timeout=120)
    print(f"torch {torch.__version__}, NCCL {'.'.join(map(str, torch.cuda.nccl.version()))}, "
          f"{torch.cuda.get_device_name(0)}")
    print("| op | N | GPUs (processes) | ms | GB/s | vs one GPU |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        one = next((o["ms"] for o in rows if o["log2"] == r["log2"] and o["ranks"] == 1), None)
        vs = f"{r['ms'] / one:.3f}x" if one else "-"
        gbs = (4 << r["log2"]) / r["ms"] / 1e6
        print(f"| torch sum + all_reduce | 2^{r['log2']} | {r['ranks']} | {r['ms']:.3f} | "
              f"{gbs:.0f} | {vs} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
