#!/usr/bin/env python3
"""Compares our token file with the reference's ids, id for id, and prints the throughputs.

usage: compare_ids.py OURS HEADER_BYTES REFERENCE.u32 REFERENCE_JSON OURS_SECONDS [OURS_1_THREAD_SECONDS]
OURS holds little-endian uint32 ids after HEADER_BYTES (llm.c's 1024, Megatron's .bin 0).
Exit 1 on any mismatch (the first ones are printed in context)."""
import array
import json
import sys

ours_path, header, ref_path, ref_json, ours_s = sys.argv[1:6]
ours_1 = float(sys.argv[6]) if len(sys.argv) > 6 else None
ours = array.array("I")
with open(ours_path, "rb") as f:
    f.seek(int(header))
    ours.frombytes(f.read())
ref = array.array("I")
with open(ref_path, "rb") as f:
    ref.frombytes(f.read())
ref_info = json.loads(ref_json)
mismatched = sum(1 for a, b in zip(ours, ref) if a != b) + abs(len(ours) - len(ref))
mb = ref_info["megabytes"]
print(f"{len(ref)} reference ids over {mb:.3f} MB of text ({ref_info['documents']} documents), "
      f"{len(ours)} ours: {mismatched} mismatched")
line = (f"throughput: ours {mb / float(ours_s):.2f} MB/s (all cores)"
        + (f", ours {mb / ours_1:.2f} MB/s (1 thread)" if ours_1 else "")
        + f", {ref_info['reference']} {mb / ref_info['seconds']:.2f} MB/s; ratio ours/reference "
        + f"{ref_info['seconds'] / float(ours_s):.2f}" + (f" (1 thread {ref_info['seconds'] / ours_1:.2f})" if ours_1 else ""))
print(line)
if mismatched:
    for i, (a, b) in enumerate(zip(ours, ref)):
        if a != b:
            print(f"first mismatch at id {i}: ours {list(ours[max(0, i - 5):i + 8])} reference {list(ref[max(0, i - 5):i + 8])}")
            break
    sys.exit(1)
