#!/usr/bin/env python3
"""Train your own PyTorch script under scaleguard's plan.

On a cluster with the scaleguard SPANK plugin every task of a planned job gets the plan as a
JSON file ($SCALEGUARD_PLAN_FILE) next to the torchrun variables (RANK, WORLD_SIZE,
LOCAL_RANK, MASTER_ADDR, MASTER_PORT). This example reads the file and builds what the plan
says with plain torch.distributed:

  * pp > 1         -> a pipeline: the model's layers split into pp stages, GPipe over
                      `accumulation` micro-batches (send/recv of activations and gradients),
                      gradients all-reduced over the stage's data-parallel group;
  * zero >= 1      -> FSDP where this torch has it, else DDP + ZeroRedundancyOptimizer
                      (ZeRO-1: the optimizer state sharded over data parallel);
  * otherwise      -> DDP with the plan's gradient bucket (bucket_cap_mb).

Tensor parallel (tp > 1) is not built here: the example says so and stops (exit 2).

The ranks form the plan's mesh in its `mesh_order` (outermost first, the last one innermost):
with ["pp", "dp", "tp"] world rank r has tp_rank r % tp, dp_rank (r // tp) % dp and pp_rank
r // (tp * dp), as scaleguard-run forms its grid.

    srun python3 plan_train.py [--steps N] [--plan FILE] [--backend gloo|nccl]

Rank 0 prints the layout it took from the plan, every rank its place in the mesh, and rank 0
the loss of each step; at the end the ranks check that their replicas agree.
"""
import argparse
import gc
import json
import os
import socket
import sys

import torch
import torch.distributed as dist
import torch.nn as nn

HIDDEN = 32


def load_plan(path):
    if not path:
        sys.exit("plan_train.py: no plan: $SCALEGUARD_PLAN_FILE is unset (not a planned job?); use --plan FILE")
    with open(path) as f:
        plan = json.load(f)
    for key in ("strategy", "degrees", "mesh_order", "micro_batch", "accumulation"):
        if key not in plan:
            sys.exit(f"plan_train.py: {path}: no '{key}'")
    return plan


def mesh_coords(rank, degrees, order):
    """{dim: index} of `rank` in the mesh, the last dimension of `order` innermost."""
    coords, stride = {}, 1
    for dim in reversed(order):
        coords[dim] = (rank // stride) % degrees[dim]
        stride *= degrees[dim]
    return coords


def groups_along(dim, degrees, order, world):
    """Every rank's group along `dim` (ranks differing only in that coordinate); new_group
    is collective, so every rank creates every group and keeps its own."""
    mine, rank = None, dist.get_rank()
    seen = set()
    for r in range(world):
        c = mesh_coords(r, degrees, order)
        key = tuple(c[d] for d in order if d != dim)
        if key in seen:
            continue
        seen.add(key)
        ranks = [q for q in range(world)
                 if tuple(mesh_coords(q, degrees, order)[d] for d in order if d != dim) == key]
        g = dist.new_group(ranks)
        if rank in ranks:
            mine = (g, ranks)
    return mine


def make_layers(n_layers):
    torch.manual_seed(0)  # every rank builds the same model; stages keep their slice
    layers = []
    for _ in range(n_layers):
        layers += [nn.Linear(HIDDEN, HIDDEN), nn.Tanh()]
    return layers


def batch(step, micro, dp_rank, size):
    """The same data for a given (step, micro-batch, dp rank) whatever the layout."""
    g = torch.Generator().manual_seed(1000003 * step + 1009 * micro + dp_rank)
    x = torch.randn(size, HIDDEN, generator=g)
    return x, torch.sin(x)


def train_pipeline(plan, coords, degrees, order, world, steps):
    pp, pp_rank, dp_rank = degrees["pp"], coords["pp"], coords["dp"]
    layers = make_layers(2 * pp)
    stage = nn.Sequential(*layers[4 * pp_rank:4 * (pp_rank + 1)])  # 2 Linear + 2 Tanh per stage
    _, pp_ranks = groups_along("pp", degrees, order, world)
    dp_group, _ = groups_along("dp", degrees, order, world)
    prev = pp_ranks[pp_rank - 1] if pp_rank > 0 else None
    nxt = pp_ranks[pp_rank + 1] if pp_rank + 1 < pp else None
    opt = torch.optim.AdamW(stage.parameters(), lr=1e-2)
    m, acc = plan["micro_batch"], plan["accumulation"]
    what = f"pipeline (GPipe): {pp} stages x {acc} micro-batches of {m}, gradients all-reduced over dp={degrees['dp']}"
    for step in range(steps):
        opt.zero_grad()
        kept, loss_sum = [], 0.0
        for u in range(acc):  # all forwards
            x, y = batch(step, u, dp_rank, m)
            if prev is not None:
                x = torch.empty(m, HIDDEN)
                dist.recv(x, prev)
                x.requires_grad_(True)
            out = stage(x)
            if nxt is not None:
                dist.send(out.detach(), nxt)
            kept.append((x, out, y))
        for x, out, y in kept:  # all backwards, same order
            if nxt is None:
                loss = nn.functional.mse_loss(out, y) / acc
                loss_sum += loss.item()
                loss.backward()
            else:
                g = torch.empty_like(out)
                dist.recv(g, nxt)
                out.backward(g)
            if prev is not None:
                dist.send(x.grad, prev)
        for p in stage.parameters():
            dist.all_reduce(p.grad, group=dp_group)
            p.grad /= degrees["dp"]
        opt.step()
        yield what, stage, loss_sum if nxt is None else None


def train_data_parallel(plan, coords, degrees, steps):
    from torch.nn.parallel import DistributedDataParallel as DDP
    model = nn.Sequential(*make_layers(2))
    m, acc, dp_rank = plan["micro_batch"], plan["accumulation"], coords["dp"]
    if plan.get("zero", 0) >= 1:
        try:
            from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
            model = FSDP(model)
            opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
            what = f"FSDP over dp={degrees['dp']} (plan: ZeRO-{plan['zero']})"
        except Exception as e:  # torch 1.13 on Python 3.11 cannot import FSDP; CPU FSDP needs torch >= 2.1
            from torch.distributed.optim import ZeroRedundancyOptimizer
            model = DDP(model, bucket_cap_mb=plan.get("bucket_mb") or 25)
            opt = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.AdamW, lr=1e-2)
            what = (f"DDP + ZeroRedundancyOptimizer (ZeRO-1) over dp={degrees['dp']} "
                    f"(plan: ZeRO-{plan['zero']}; FSDP unavailable here: {type(e).__name__})")
    else:
        bucket = plan.get("bucket_mb") or 25
        model = DDP(model, bucket_cap_mb=bucket)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
        what = f"DDP over dp={degrees['dp']}, bucket_cap_mb={bucket:g}"
    what += f", {acc} micro-batches of {m} per step"
    for step in range(steps):
        opt.zero_grad()
        total = 0.0
        for u in range(acc):
            x, y = batch(step, u, dp_rank, m)
            sync = u == acc - 1
            ctx = model.no_sync() if hasattr(model, "no_sync") and not sync else _null()
            with ctx:
                loss = nn.functional.mse_loss(model(x), y) / acc
                loss.backward()
            total += loss.item()
        opt.step()
        yield what, model, total


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--plan", default=os.environ.get("SCALEGUARD_PLAN_FILE"))
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--backend", default="gloo")
    ap.add_argument("--max-accumulation", type=int, default=16,
                    help="cap on micro-batches per step (an example need not run a 7B plan's batch)")
    args = ap.parse_args()
    plan = load_plan(args.plan)
    plan["accumulation"] = max(1, min(plan["accumulation"], args.max_accumulation))
    degrees = {d: int(plan["degrees"].get(d, 1)) for d in ("pp", "dp", "tp")}
    order = plan["mesh_order"]
    if sorted(order) != sorted(degrees):
        sys.exit(f"plan_train.py: mesh_order {order} is not an order of {sorted(degrees)}")

    dist.init_process_group(args.backend)  # env://: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT
    rank, world = dist.get_rank(), dist.get_world_size()
    want = degrees["pp"] * degrees["dp"] * degrees["tp"]
    if world != want:
        sys.exit(f"plan_train.py: the plan needs pp*dp*tp = {want} ranks, this step has {world}")
    if degrees["tp"] > 1:
        if rank == 0:
            print("plan_train.py: tensor parallel (tp > 1) is not built by this example", file=sys.stderr)
        sys.exit(2)
    coords = mesh_coords(rank, degrees, order)
    if rank == 0:
        print(f"plan {plan.get('plan', '?')} from {args.plan}: strategy={plan['strategy']} "
              f"pp={degrees['pp']} dp={degrees['dp']} tp={degrees['tp']} zero={plan.get('zero', 0)} "
              f"mesh={'x'.join(order)} micro_batch={plan['micro_batch']} accumulation={plan['accumulation']} "
              f"bucket_mb={plan.get('bucket_mb')} ckpt_dir={plan.get('ckpt_dir')} "
              f"restart_count={plan.get('restart_count')} "
              f"torchelastic_run={os.environ.get('TORCHELASTIC_RUN_ID')}", flush=True)
    dist.barrier()
    print(f"rank {rank} on {socket.gethostname()} ({os.environ.get('SLURMD_NODENAME', '?')}): "
          f"pp_rank={coords['pp']} dp_rank={coords['dp']} tp_rank={coords['tp']}", flush=True)
    dist.barrier()

    steps = (train_pipeline(plan, coords, degrees, order, world, args.steps) if degrees["pp"] > 1
             else train_data_parallel(plan, coords, degrees, args.steps))
    for step, (what, module, loss) in enumerate(steps):
        if step == 0 and rank == 0:
            print(f"layout: {what}", flush=True)
        if loss is not None and coords["dp"] == 0:
            print(f"step {step} loss {loss:.6f} (pp_rank {coords['pp']})", flush=True)

    # Replicas must agree: each parameter's sum, max minus min over the data-parallel group.
    flat = torch.cat([p.detach().reshape(-1) for p in module.parameters()]).sum().reshape(1)
    hi, lo = flat.clone(), -flat.clone()
    dist.all_reduce(hi, op=dist.ReduceOp.MAX)
    dist.all_reduce(lo, op=dist.ReduceOp.MAX)
    if degrees["pp"] == 1 and not what.startswith("FSDP") and rank == 0:  # FSDP holds shards
        print(f"replicas agree: {bool(hi.item() == -lo.item())}", flush=True)
    # Release the wrappers (DDP, ZeroRedundancyOptimizer, held by the finished generator)
    # before the process group: a group they still reference is destroyed at interpreter
    # exit instead, where torch 1.13's gloo threads abort ("terminate called without an
    # active exception", 1 run in 8 of the ZeRO-1 job under load).
    steps.close()
    del module
    gc.collect()
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
