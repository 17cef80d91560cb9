#!/usr/bin/env python3
"""Writes the seed corpora of the FuzzedDataProvider harnesses (fuzz_decide, fuzz_job_submit)
from readable job shapes. FuzzedDataProvider reads strings from the front of the input and
numbers from the back; Encoder mirrors that (LLVM's FuzzedDataProvider.h), and job_decide /
job_submit mirror the order in which the harnesses draw their fields. After changing a
harness's draw order, change it here too and rerun: `fuzz/seeds.py` (old seeds still run,
they just stop meaning what their names say). Strings are always given as bytes, never as
an index into a harness's list, so editing those lists keeps the seeds meaningful.
The text corpora (fuzz_parsers, fuzz_policy) are plain files written by hand."""
import os

HERE = os.path.dirname(os.path.abspath(__file__))
NO_VAL, INFINITE, NO_VAL16, INFINITE16 = 0xFFFFFFFE, 0xFFFFFFFF, 0xFFFE, 0xFFFF


class Encoder:
    def __init__(self):
        self.front = bytearray()  # strings, in order
        self.back = []            # number bytes, in the order they are consumed

    def integral(self, lo, hi, value, bits):
        assert lo <= value <= hi, (lo, value, hi)
        rng, result = hi - lo, value - lo
        nbytes, offset = 0, 0
        while offset < bits and (rng >> offset) > 0:
            nbytes += 1
            offset += 8
        # The first byte consumed is the most significant.
        self.back += list(result.to_bytes(nbytes, "big")) if nbytes else []

    def int_range(self, lo, hi, value, bits=32):
        self.integral(lo, hi, value, bits)

    def boolean(self, value):
        self.integral(0, 255, 1 if value else 0, 8)

    def u32(self, value):
        self.integral(0, 2**32 - 1, value, 32)

    def u16(self, value):
        self.integral(0, 2**16 - 1, value, 16)

    def probability(self, p):
        self.integral(0, 2**64 - 1, min(2**64 - 1, round(p * (2**64 - 1))), 64)

    def float_range(self, lo, hi, value):
        self.probability((value - lo) / (hi - lo))

    def string(self, text, max_len):
        data = text.encode() if isinstance(text, str) else bytes(text)
        assert len(data) <= max_len
        for b in data:
            self.front += b"\\\\" if b == ord("\\") else bytes([b])
        if len(data) < max_len:
            self.front += b"\\n"  # a backslash and another byte end the string

    def bytes(self):
        return bytes(self.front) + bytes(reversed(self.back))


# --- fuzz_decide.cpp -----------------------------------------------------------------------

def draw_int(e, lo, hi, v):
    if v == 0 and lo <= 0:
        e.int_range(0, 3, 0)
    elif v <= min(hi, 64):
        e.int_range(0, 3, 1)
        e.int_range(lo, min(hi, 64), v)
    else:
        e.int_range(0, 3, 3)
        e.int_range(lo, hi, v)


def draw_double(e, hi, v):
    if v == 0:
        e.int_range(0, 2, 0)
    elif v <= 1000:
        e.int_range(0, 2, 1)
        e.float_range(0, 1000, v)
    else:
        e.int_range(0, 2, 2)
        e.float_range(0, hi, v)


def text_choice(e, text, max_len):  # pick_or_bytes, bytes branch
    e.boolean(False)
    e.string(text, max_len)


STRATEGIES = ["auto", "single", "ddp", "zero", "pipeline", "tensor", "hybrid"]
CKPT_DIRS = ["", "/scratch/run1", "/fsx/a/b", "/tmp/x"]


def job_decide(gpus=0, gpn=0, gpt=0, gps=0, gpu_type="", nodes_min=0, nodes_max=0, ntasks=0, time=0,
               partition="", model="", tokens=0, single_hours=0, strategy="auto", deadline=0, ckpt_dir="",
               ckpt_interval=0, nodes_listed=0, ntasks_per_node=0, sockets_per_node=0, exclusive=False,
               array_tasks=0, het_component=-1, het_prior_gpu_hours=0):
    e = Encoder()
    for v in (gpus, gpn, gpt, gps):
        draw_int(e, 0, 100000, v)
    text_choice(e, gpu_type, 64)
    draw_int(e, 0, 1000000, nodes_min)
    draw_int(e, 0, 1000000, nodes_max)
    draw_int(e, 0, 1000000, ntasks)
    e.boolean(time == -1)
    if time != -1:
        draw_int(e, 0, 5270400, time)
    text_choice(e, partition, 64)
    text_choice(e, model, 128)
    draw_double(e, 1e18, tokens)
    draw_double(e, 87840, single_hours)
    e.int_range(0, 6, STRATEGIES.index(strategy))
    draw_double(e, 87840, deadline)
    e.int_range(0, 3, CKPT_DIRS.index(ckpt_dir))
    draw_int(e, 0, 525600, ckpt_interval)
    # The envelope's fields come last (a harness built without envelope.h stops before them).
    draw_int(e, 0, 1000000, nodes_listed)
    draw_int(e, 0, 65533, ntasks_per_node)
    draw_int(e, 0, 65533, sockets_per_node)
    e.boolean(exclusive)
    draw_int(e, 0, 10000000, array_tasks)
    e.boolean(het_component != -1)
    if het_component != -1:
        e.integral(-2**31, 2**31 - 1, het_component, 32)
    draw_double(e, 1e12, het_prior_gpu_hours)
    return e.bytes()


DECIDE = {
    "no_intent_8gpu_1h": dict(gpus=8, time=60),
    "350m_8gpu": dict(gpus=8, time=120, model="350M", single_hours=11),
    "350m_1gpu": dict(gpus=1, time=720, model="350M", single_hours=11),
    "13b_4_h100": dict(gpus=4, gpu_type="h100", partition="gpu-h100", model="13B", tokens=260e9, time=4320),
    "1b_2weeks_1gpu": dict(gpus=1, model="1B", tokens=20e9, time=-1),
    "llama2_70b_hybrid": dict(gpn=8, nodes_min=8, nodes_max=8, model="llama2-70b", tokens=2e12, strategy="hybrid",
                              time=10080, ckpt_dir="/fsx/a/b", ckpt_interval=30),
    "spot_ckpt": dict(gpus=16, partition="gpu-spot", model="7B", tokens=40e9, time=1440, ckpt_dir="/scratch/run1"),
    "gpus_per_task": dict(gpt=1, ntasks=16, model="350M", tokens=7e9, deadline=12),
    "gpus_per_socket": dict(gps=2, nodes_min=2, nodes_max=4, model="bert-large", strategy="ddp"),
    "mixed_types": dict(gpus=8, gpu_type="a100,h100", model="7B"),
    "wrong_type": dict(gpus=8, gpu_type="v100", model="350M"),
    "unknown_partition": dict(gpus=8, partition="cpu"),
    "explicit_shape": dict(gpus=64, model="layers=48,hidden=8192,heads=64,precision=fp32", tokens=3e11,
                           strategy="pipeline"),
    "absurd_gpus": dict(gpus=100000, model="1.5T", tokens=1e18, time=5270400),
    "per_node_times_nodes": dict(gpn=100000, nodes_min=1000000),
    "bad_model": dict(gpus=2, model="llama9-1t"),
    "exclusive_node_range": dict(gpn=1, nodes_min=1, nodes_max=8, exclusive=True, model="7B", tokens=40e9),
    "nodelist_tasks_per_node": dict(gpt=1, ntasks=8, nodes_listed=4, ntasks_per_node=2, time=600),
    "sockets_per_node": dict(gps=1, sockets_per_node=2, nodes_min=2, nodes_max=2, model="350M"),
    "array_of_16": dict(gpus=8, array_tasks=16, time=600, model="350M", tokens=7e9),
    "het_second_component": dict(gpus=8, het_component=1, het_prior_gpu_hours=5000, time=1440),
    "unlimited_time_no_intent": dict(gpn=8, nodes_min=2, time=-1),
}


# --- fuzz_job_submit.cpp -------------------------------------------------------------------

def draw_field(e, text, max_len):  # draw_field: NULL, or the bytes branch
    if text is None:
        e.int_range(0, 3, 0)
    else:
        e.int_range(0, 3, 1)
        text_choice(e, text, max_len)


def draw_text(e, text, max_len):
    e.boolean(text is None)
    if text is not None:
        e.string(text, max_len)


def draw_u32(e, v):
    if v == NO_VAL:
        e.int_range(0, 4, 0)
    elif v == INFINITE:
        e.int_range(0, 4, 1)
    elif v <= 64:
        e.int_range(0, 4, 2)
        e.int_range(0, 64, v)
    else:
        e.int_range(0, 4, 4)
        e.u32(v)


def draw_u16(e, v):
    if v == NO_VAL16:
        e.int_range(0, 3, 0)
    elif v == INFINITE16:
        e.int_range(0, 3, 1)
    elif v <= 64:
        e.int_range(0, 3, 2)
        e.int_range(0, 64, v)
    else:
        e.int_range(0, 3, 3)
        e.u16(v)


def draw_env(e, entries):
    """entries: ("opt", name, value) for a forwarded option, or ("raw", text)."""
    e.int_range(0, 10, len(entries))
    for entry in entries:
        if entry[0] == "opt":
            e.int_range(0, 3, 0)
            text_choice(e, entry[1], 32)
            text_choice(e, entry[2], 300)
        else:
            e.int_range(0, 3, 3)
            e.string(entry[1], 128)


def job_submit(tres_job=None, tres_node=None, tres_task=None, tres_socket=None, partition=None, req_nodes=None,
               array_inx=None, comment=None, min_nodes=NO_VAL, max_nodes=NO_VAL, num_tasks=NO_VAL,
               time_limit=NO_VAL, user_id=1000, het_job_offset=NO_VAL, shared=NO_VAL16, ntasks_per_node=NO_VAL16,
               sockets_per_node=NO_VAL16, spank_env=(), environment=(), submit_uid=1000, update=False,
               admin_comment=None):
    e = Encoder()
    for text in (tres_job, tres_node, tres_task, tres_socket):
        draw_field(e, text, 128)
    draw_field(e, partition, 64)
    draw_text(e, req_nodes, 64)           # req_nodes
    draw_text(e, None, 64)                # exc_nodes
    draw_text(e, array_inx, 32)           # array_inx
    draw_text(e, admin_comment, 64)       # admin_comment
    draw_text(e, comment, 200)            # comment
    draw_text(e, "job", 32)               # name
    draw_text(e, None, 16)                # job_id_str
    draw_field(e, None, 32)               # cpus_per_tres
    draw_field(e, None, 32)               # mem_per_tres
    draw_text(e, None, 32)                # features
    draw_text(e, None, 32)                # licenses
    for v in (min_nodes, max_nodes, num_tasks, time_limit, NO_VAL, NO_VAL, NO_VAL, user_id, het_job_offset):
        draw_u32(e, v)                    # ... time_min, min_cpus, max_cpus, user_id, het_job_offset
    for v in (shared, ntasks_per_node, NO_VAL16, NO_VAL16, sockets_per_node, NO_VAL16, NO_VAL16, NO_VAL16,
              NO_VAL16, NO_VAL16, 0, 0, NO_VAL16):
        draw_u16(e, v)                    # shared ... requeue, warn_flags, warn_signal, warn_time, contiguous
    draw_env(e, spank_env)
    if not spank_env:
        e.boolean(False)
    draw_env(e, environment)
    if not environment:
        e.boolean(False)
    e.u32(submit_uid)
    e.boolean(update)
    e.int_range(0, 300, 256)              # max for the text helpers
    return e.bytes()


def opt(name, value):
    return ("opt", name, value)


SUBMIT = {
    "plain_gpus8": dict(tres_job="gres:gpu:8", time_limit=60),
    "gres_a100_8_two_nodes": dict(tres_node="gres:gpu:a100:8", min_nodes=2, max_nodes=2, time_limit=600,
                                  spank_env=[opt("train_model", "7B"), opt("train_tokens", "40B")]),
    "gres_slash_1k": dict(tres_job="gres/gpu:1k", spank_env=[opt("train_model", "350M")]),
    "shard_only": dict(tres_node="gres:shard:4", time_limit=30),
    "per_task": dict(tres_task="gres/gpu:1", num_tasks=16, ntasks_per_node=8,
                     spank_env=[opt("train_model", "350M"), opt("train_single_gpu_hours", "11")]),
    "per_socket": dict(tres_socket="gres/gpu:2", sockets_per_node=2, min_nodes=2, max_nodes=4),
    "node_range": dict(tres_node="gres/gpu:8", min_nodes=1, max_nodes=16, time_limit=INFINITE,
                       spank_env=[opt("train_model", "llama2-7b"), opt("train_deadline", "1-12:00:00")]),
    "batch_env_and_spank_env": dict(
        tres_job="gres:gpu:16", partition="gpu-spot", time_limit=1440,
        spank_env=[opt("train_model", "7B"), opt("train_ckpt_dir", "/scratch/run1"),
                   opt("train_ckpt_interval", "30")],
        environment=[("raw", "PATH=/usr/bin"), opt("train_model", "7B"), ("raw", "SCALEGUARD_STRATEGY=mine")]),
    "conflicting_intent": dict(tres_job="gres:gpu:8", spank_env=[opt("train_model", "7B")],
                               environment=[opt("train_model", "13B")]),
    "bad_ckpt_dir": dict(tres_job="gres:gpu:8", spank_env=[opt("train_model", "7B"),
                                                           opt("train_ckpt_dir", "/fsx/../etc")]),
    "strategy_pipeline": dict(tres_job="gres:gpu:h100:32", partition="gpu-h100",
                              spank_env=[opt("train_model", "70B"), opt("train_strategy", "pp"),
                                         opt("train_tokens", "1.5T")]),
    "het_job_array_shared": dict(tres_job="gres:gpu:2", het_job_offset=1, array_inx="0-15%4", shared=0,
                                 req_nodes="node[1-2]", comment="user comment", admin_comment="admin"),
    "update_time_only": dict(time_limit=4320, update=True),
    "update_gpus": dict(tres_job="gres:gpu:4", update=True, spank_env=[opt("train_model", "350M")]),
    "mixed_types": dict(tres_job="gres:gpu:h100:4,gres:gpu:a100:4"),
    "huge_per_node_times_nodes": dict(tres_node="gres:gpu:100000", min_nodes=1000000, max_nodes=1000000),
    "exclusive_one_gpu_per_node": dict(tres_node="gres:gpu:1", shared=0, min_nodes=2, max_nodes=2, time_limit=600),
    "nodelist_and_tasks": dict(tres_task="gres:gpu:1", num_tasks=8, ntasks_per_node=2, req_nodes="node[1-4]",
                               time_limit=120),
    "array_with_intent": dict(tres_job="gres:gpu:8", array_inx="0-15%4", time_limit=600,
                              spank_env=[opt("train_model", "350M"), opt("train_tokens", "7B")]),
}


def write(folder, seeds):
    path = os.path.join(HERE, "corpus", folder)
    os.makedirs(path, exist_ok=True)
    for name, data in seeds.items():
        with open(os.path.join(path, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    write("fuzz_decide", {k: job_decide(**v) for k, v in DECIDE.items()})
    write("fuzz_job_submit", {k: job_submit(**v) for k, v in SUBMIT.items()})
    print("fuzz/seeds.py: wrote", len(DECIDE), "fuzz_decide and", len(SUBMIT), "fuzz_job_submit seeds")
