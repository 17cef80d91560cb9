#!/usr/bin/python3
"""PyTorch DDP (gloo) baseline for bench/runner: the model, data, optimizer and batch of
`scaleguard-run train --config configs/examples/mlp.ini`, started by torchrun.

usage: torchrun --nproc_per_node 2 ... ddp_baseline.py TOKENS.bin STEPS GLOBAL_BATCH THREADS OUT.json
Rank 0 writes {"samples_per_s": median over steps after 5 warm-up steps, ...} to OUT.json.
"""
import json
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

tokens_path, steps, global_batch, threads, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
T, C, H, V = 64, 64, 512, 256  # seq-len, n-embd, hidden, vocab: configs/examples/mlp.ini
torch.set_num_threads(threads)
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
torch.manual_seed(1337)


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(V, C)
        self.fc = nn.Linear(T * C, H)
        self.proj = nn.Linear(H, V)

    def forward(self, idx):  # (B, T) -> (B, V)
        return self.proj(F.gelu(self.fc(self.wte(idx).flatten(1))))


model = nn.parallel.DistributedDataParallel(Mlp())  # default 25 MB buckets, like scaleguard-run
decay = [p for p in model.parameters() if p.dim() >= 2]
no_decay = [p for p in model.parameters() if p.dim() < 2]
opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                        lr=1e-3, betas=(0.9, 0.95), eps=1e-8)
data = np.memmap(tokens_path, dtype=np.uint8, mode="r", offset=32)
n_samples = (len(data) - 1) // T
rng = np.random.default_rng(1337 + rank)
micro = global_batch // world
times = []
for step in range(steps):
    t0 = time.perf_counter()
    ids = rng.integers(0, n_samples, micro)
    window = torch.from_numpy(np.stack([data[i * T:i * T + T + 1] for i in ids]).astype(np.int64))  # (B, T+1)
    x, y = window[:, :T], window[:, T]
    loss = F.cross_entropy(model(x), y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    loss_value = loss.item()
    times.append(time.perf_counter() - t0)
if rank == 0:
    step_s = float(np.median(times[5:]))
    with open(out, "w") as f:
        json.dump({"samples_per_s": global_batch / step_s, "step_ms": step_s * 1e3, "last_loss": loss_value}, f)
dist.destroy_process_group()
