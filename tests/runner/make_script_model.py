#!/usr/bin/python3
"""Writes the files of tests/runner/torchscript_arrays.sh into the current directory.

cnn.pt        torch.jit.script of a small CNN (conv, GroupNorm-free, ReLU, linear): 4 classes
traced.pt     the same CNN from torch.jit.trace (must be refused)
frozen.pt     torch.jit.freeze of the scripted CNN (must be refused)
bn.pt         a scripted CNN with BatchNorm (buffers: must be refused)
drop.pt       the CNN with dropout before its head (evaluated in inference mode)
reg.pt        a scripted MLP regressor: (B, 64) -> (B, 2), for float y (MSE)
images.h5     x float32 (96, 1, 8, 8), y int64 (96,): class = brightest quadrant
npy/x.npy, npy/y.npy   the same arrays as .npy
reg/x.npy, reg/y.npy   x float64 (40, 64), y float32 (40, 2)
"""
import os

import h5py
import numpy as np
import torch


class CNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 4, 3, padding=1)
        self.conv2 = torch.nn.Conv2d(4, 8, 3, padding=1)
        self.head = torch.nn.Linear(8 * 4 * 4, 4)

    def forward(self, x):
        x = torch.relu(self.conv1(x))
        x = torch.nn.functional.max_pool2d(torch.relu(self.conv2(x)), 2)
        return self.head(x.flatten(1))


class BN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(1, 4, 3)
        self.bn = torch.nn.BatchNorm2d(4)
        self.head = torch.nn.Linear(4 * 6 * 6, 4)

    def forward(self, x):
        return self.head(torch.relu(self.bn(self.conv(x))).flatten(1))


class Drop(CNN):
    def __init__(self):
        super().__init__()
        self.drop = torch.nn.Dropout(0.5)

    def forward(self, x):
        x = torch.relu(self.conv1(x))
        x = torch.nn.functional.max_pool2d(torch.relu(self.conv2(x)), 2)
        return self.head(self.drop(x.flatten(1)))


class Reg(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(64, 16)
        self.out = torch.nn.Linear(16, 2)

    def forward(self, x):
        return self.out(torch.tanh(self.fc(x)))


torch.manual_seed(3)
cnn = CNN()
torch.jit.script(cnn).save("cnn.pt")
torch.jit.trace(cnn, torch.randn(2, 1, 8, 8)).save("traced.pt")
torch.jit.freeze(torch.jit.script(cnn).eval()).save("frozen.pt")
torch.jit.script(BN()).save("bn.pt")
torch.jit.script(Drop()).save("drop.pt")
torch.jit.script(Reg()).save("reg.pt")

rng = np.random.default_rng(11)
n = 96
x = rng.normal(0, 0.3, size=(n, 1, 8, 8)).astype(np.float32)
y = rng.integers(0, 4, size=n).astype(np.int64)
for i in range(n):  # the labelled quadrant is brighter
    r, c = divmod(int(y[i]), 2)
    x[i, 0, 4 * r:4 * r + 4, 4 * c:4 * c + 4] += 1.0
with h5py.File("images.h5", "w") as f:
    f["x"] = x
    f["y"] = y
os.makedirs("npy", exist_ok=True)
np.save("npy/x.npy", x)
np.save("npy/y.npy", y)
os.makedirs("reg", exist_ok=True)
xr = rng.normal(size=(40, 64))
np.save("reg/x.npy", xr)  # float64: converted to float32
np.save("reg/y.npy", np.stack([xr[:, :8].sum(1), xr[:, 8:16].mean(1)], 1).astype(np.float32))

os.makedirs("regbad", exist_ok=True)  # float y (40, 3) for a model that outputs (B, 2)
np.save("regbad/x.npy", xr.astype(np.float32))
np.save("regbad/y.npy", np.zeros((40, 3), np.float32))

# Bad files, one problem each.
with h5py.File("mismatch.h5", "w") as f:
    f["x"] = x
    f["y"] = y[:90]
with h5py.File("noy.h5", "w") as f:
    f["x"] = x
with h5py.File("strings.h5", "w") as f:
    f["x"] = x
    f["y"] = np.array([b"a"] * n)
os.makedirs("cplx", exist_ok=True)
np.save("cplx/x.npy", x)
np.save("cplx/y.npy", y.astype(np.complex64))
os.makedirs("trunc", exist_ok=True)
np.save("trunc/x.npy", x)
np.save("trunc/y.npy", y)
with open("trunc/y.npy", "r+b") as f:
    f.truncate(20)  # inside the header
os.makedirs("short", exist_ok=True)
np.save("short/x.npy", x)
np.save("short/y.npy", y)
with open("short/x.npy", "r+b") as f:
    f.truncate(os.path.getsize("short/x.npy") - 4)  # the data ends early
