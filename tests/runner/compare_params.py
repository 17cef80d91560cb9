#!/usr/bin/python3
"""Compares two parameter dumps of `scaleguard-run train --dump-params FILE`.

usage: compare_params.py A B MAX_ABS_DIFF
Prints the largest absolute difference and the parameter it is in; exits 1 when it is
above MAX_ABS_DIFF or when the files do not hold the same parameters and shapes.
"""
import struct
import sys

import numpy as np


def load(path):
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"SGPARAMS":
        sys.exit(f"{path}: not a parameter dump")
    (count,) = struct.unpack_from("<I", data, 8)
    pos, params = 12, {}
    for _ in range(count):
        (n,) = struct.unpack_from("<I", data, pos)
        name = data[pos + 4:pos + 4 + n].decode()
        pos += 4 + n
        (ndim,) = struct.unpack_from("<I", data, pos)
        shape = struct.unpack_from(f"<{ndim}q", data, pos + 4)
        pos += 4 + 8 * ndim
        size = int(np.prod(shape)) if ndim else 1
        params[name] = np.frombuffer(data, dtype="<f4", count=size, offset=pos).reshape(shape)
        pos += 4 * size
    return params


a, b, limit = load(sys.argv[1]), load(sys.argv[2]), float(sys.argv[3])
if a.keys() != b.keys():
    sys.exit(f"different parameters: {sorted(a.keys() ^ b.keys())}")
worst, where = 0.0, ""
for name in a:
    if a[name].shape != b[name].shape:
        sys.exit(f"{name}: shape {a[name].shape} vs {b[name].shape}")
    d = float(np.max(np.abs(a[name].astype(np.float64) - b[name]))) if a[name].size else 0.0
    if d > worst:
        worst, where = d, name
print(f"{len(a)} parameters, {sum(v.size for v in a.values())} values, max abs diff {worst:.3g}"
      + (f" (in {where})" if where else ""))
sys.exit(0 if worst <= limit else 1)
