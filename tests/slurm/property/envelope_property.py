#!/usr/bin/env python3
"""Generated property test of GPU-hour enforcement on the live dev cluster (issue 13).

Draws random request shapes from a seeded RNG -- every sbatch/salloc/srun option that changes
nodes, tasks, GPUs, time, partition or exclusivity, plus het jobs, arrays, --train-* intent and
`scontrol update` after submission -- submits each as an ordinary user, held, and asks Slurm
(not the plugin) what the job may be granted:

    envelope = max nodes x GPUs per node x time limit       (per component, per array element)

read from `scontrol show job -d`, `scontrol show partition` and `scontrol show node` only.
Invariant: the submission (or update) is refused, or the envelope <= the cap; arrays also
elements x envelope <= the array cap when the policy has one; a partition with its own cap
(--partition-cap, e.g. spot) bounds the envelope in that partition whenever Slurm may run the
job there (its partition list, or the partition Slurm takes from a --reservation after
job_submit); and slurmctld stays alive.
A sample of accepted jobs is released and the allocation Slurm really makes (GRES IDX of
`scontrol show job -d`) x its time limit is checked against the cap too.
A pending job's node count in that view is slurmctld's estimate (ROUNDUP(tasks, CPUs of the
largest node) when no scheduler pass has set one), not the job's real limit: a shape over the
cap in that view is released (release_check) and what Slurm then does decides it.

Every failing shape is printed as the exact command line (SEED= reproduces the whole run).
Exit status: 0 when no violation and slurmctld alive, 1 otherwise, 2 on a setup error.

    SEED=123 tests/slurm/property/envelope_property.py --shapes 300 --cap 150

Needs: python3 (stdlib only), Slurm clients on PATH, SLURM_CONF of a running dev cluster,
root (submissions run as --user through runuser) or the test user itself.
"""
import argparse
import concurrent.futures
import contextlib
import math
import os
import random
import re
import shlex
import subprocess
import sys
import tempfile
import threading
import time

INF = math.inf
HELD_JOB = "sleep 600"  # what a released sample job runs until it is cancelled


# --- running commands -----------------------------------------------------------------------

class Runner:
    """Runs Slurm clients, as the test user when we are root."""

    def __init__(self, user, workdir):
        self.user = user
        self.workdir = workdir
        self.prefix = ["runuser", "-u", user, "--"] if user and os.geteuid() == 0 else []

    def __call__(self, argv, as_user=True, timeout=60, stdin=None):
        full = (self.prefix if as_user else []) + argv
        try:
            p = subprocess.run(full, cwd=self.workdir, capture_output=True, text=True,
                               timeout=timeout, input=stdin)
            return p.returncode, p.stdout, p.stderr
        except subprocess.TimeoutExpired as e:
            return 124, e.stdout or "", (e.stderr or "") + "\n(timed out)"

    def show(self, argv):
        """The exact command line, as the user would type it."""
        return " ".join(shlex.quote(a) for a in ((self.prefix) + argv))


# --- Slurm's view: parsing ------------------------------------------------------------------

WHOLE_LINE_KEYS = ("Comment=", "AdminComment=", "SystemComment=", "Command=", "WorkDir=",
                   "StdErr=", "StdIn=", "StdOut=", "Reason=", "Power=")


def parse_records(text):
    """`scontrol show job -d` output -> list of records {key: value, '_alloc': [(node, gres)]}.
    Lines holding free text (Comment, Command, ...) are taken whole; the first occurrence of a
    key wins."""
    records, rec = [], None
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        if line.startswith("JobId="):
            rec = {"_alloc": []}
            records.append(rec)
        if rec is None:
            continue
        if line.startswith(WHOLE_LINE_KEYS):
            k, _, v = line.partition("=")
            rec.setdefault(k, v)
            continue
        if line.startswith("Nodes=") and "CPU_IDs=" in line:  # -d detail of an allocation
            m = re.search(r"Nodes=(\S+).*?GRES=(\S+)", line)
            rec["_alloc"].append((m.group(1), m.group(2)) if m else (line.split()[0][6:], ""))
            continue
        for tok in line.split():
            k, eq, v = tok.partition("=")
            if eq:
                rec.setdefault(k, v)
    return records


SUFFIXES = {"": 1, "k": 1024, "kib": 1024, "kb": 1000, "m": 1024 ** 2, "mib": 1024 ** 2,
            "mb": 1000 ** 2, "g": 1024 ** 3, "gib": 1024 ** 3, "gb": 1000 ** 3,
            "t": 1024 ** 4, "tib": 1024 ** 4, "tb": 1000 ** 4, "p": 1024 ** 5,
            "pib": 1024 ** 5, "pb": 1000 ** 5}


def parse_count(text):
    """Slurm count with an optional suffix, as Slurm's suffix_mult reads it (k/kib = 1024,
    kb = 1000, ... up to p/pib/pb, any case)."""
    m = re.fullmatch(r"(\d+)([A-Za-z]*)", text)
    if not m or m.group(2).lower() not in SUFFIXES:
        raise ValueError(text)
    return int(m.group(1)) * SUFFIXES[m.group(2).lower()]


def gpu_count(tres):
    """GPUs in a TresPer* value ('gres:gpu:a100:8', 'gres/gpu:2', 'gres:gpu', 'gpu:a100=8',
    comma lists), read as slurm_get_next_tres does: the count follows the last '=', else the
    last ':'; a non-number after ':' is a type (count 1). None when the field names no GPU."""
    if not tres or tres == "(null)":
        return None
    total = None
    for entry in tres.split(","):
        e = entry
        for prefix in ("gres:", "gres/"):
            if e.startswith(prefix):
                e = e[len(prefix):]
        sep = e.rfind("=") if "=" in e else e.rfind(":")
        head, count = e, 1
        if sep >= 0:
            head = e[:sep]
            try:
                count = parse_count(e[sep + 1:])
            except ValueError:
                count = 1  # 'gpu:a100' names a type, count 1
        if head.split(":")[0] != "gpu":
            continue
        total = (total or 0) + count
    return total


def tres_gpus(rec):
    """GPUs in the job's TRES= (what slurmctld counted for the request, derived GPUs included:
    --ntasks-per-gpu without a GPU request shows only there)."""
    m = re.search(r"(?:^|,)gres/gpu=(\d+)", rec.get("TRES", "") or "")
    return int(m.group(1)) if m else None


def hostlist_len(spec):
    """Number of hosts in a Slurm hostlist: 'gpu-st-p4d-[1-2]' -> 2, 'a,b' -> 2."""
    n = 0
    for m in re.finditer(r"[^,\[]+(?:\[([^\]]*)\])?", spec or ""):
        if m.group(1) is None:
            n += 1
            continue
        for part in m.group(1).split(","):
            a, _, b = part.partition("-")
            n += int(b or a) - int(a) + 1
    return n


def alloc_gpus(gres):
    """GPUs of one -d allocation line's GRES: 'gpu:a100:2(IDX:0-1)' -> 2."""
    n = 0
    for m in re.finditer(r"gpu(?::[^:(,]+)?:?\d*\(IDX:([^)]*)\)", gres or ""):
        for part in m.group(1).split(","):
            if not part or part == "N/A":
                continue
            a, _, b = part.partition("-")
            n += int(b or a) - int(a) + 1
    return n


def parse_time_min(text):
    """Slurm time -> minutes; INF for UNLIMITED/INFINITE; None for Partition_Limit/NONE."""
    if text in ("UNLIMITED", "INFINITE"):
        return INF
    if text in ("Partition_Limit", "NONE", "", None):
        return None
    days = 0
    if "-" in text:
        d, text = text.split("-", 1)
        days = int(d)
    parts = [int(x) for x in text.split(":")]
    if len(parts) == 3:
        h, m, s = parts
    elif len(parts) == 2:
        h, m, s = (0, parts[0], parts[1]) if days == 0 else (parts[0], parts[1], 0)
    else:
        h, m, s = (parts[0], 0, 0) if days else (0, parts[0], 0)
    return days * 1440 + h * 60 + m + s / 60.0


def array_elements(spec):
    """'0-9%2' -> 10, '1,3,5' -> 3, '0-15:4' -> 4."""
    spec = spec.split("%")[0]
    n = 0
    for part in spec.split(","):
        rng, _, step = part.partition(":")
        a, _, b = rng.partition("-")
        n += (int(b or a) - int(a)) // int(step or 1) + 1
    return n


class Cluster:
    """Partitions and nodes as `scontrol show partition/node` report them."""

    def __init__(self, run):
        rc, out, err = run(["scontrol", "show", "node", "-o"], as_user=False)
        if rc:
            raise SystemExit(f"scontrol show node: {err}")
        self.nodes = {}
        for line in out.splitlines():
            f = dict(t.partition("=")[::2] for t in line.split() if "=" in t)
            self.nodes[f["NodeName"]] = {"gpus": gpu_count(re.sub(r"\(.*?\)", "", f.get("Gres", ""))) or 0,
                                         "sockets": int(f.get("Sockets", 1)),
                                         "cpus": int(f.get("CPUTot", 1)),
                                         "cores_per_socket": int(f.get("CoresPerSocket", 1))}
        rc, out, err = run(["scontrol", "show", "partition", "-o"], as_user=False)
        if rc:
            raise SystemExit(f"scontrol show partition: {err}")
        self.partitions = {}
        for line in out.splitlines():
            f = dict(t.partition("=")[::2] for t in line.split() if "=" in t)
            rc, names, _ = run(["scontrol", "show", "hostnames", f["Nodes"]], as_user=False)
            self.partitions[f["PartitionName"]] = {
                "nodes": names.split(),
                "max_nodes": INF if f.get("MaxNodes") == "UNLIMITED" else int(f["MaxNodes"]),
                "max_time": parse_time_min(f.get("MaxTime")),
                "default_time": parse_time_min(f.get("DefaultTime")),
                "default": f.get("Default") == "YES"}
        self.keeps_validated_gres = keeps_validated_gres(run)

    def describe(self):
        return ", ".join(f"{p}: {len(v['nodes'])} nodes, MaxTime={v['max_time']}"
                         for p, v in self.partitions.items())


# --- the oracle -----------------------------------------------------------------------------

def record_partitions(rec, cluster):
    """The partitions Slurm may run a record in: its list, else the default one."""
    parts = [p for p in rec.get("Partition", "").split(",") if p in cluster.partitions]
    return parts or [p for p, v in cluster.partitions.items() if v["default"]]


def component_envelope(rec, cluster):
    """Most GPU-hours Slurm may grant one job record (one het component / one array element),
    from Slurm's view only. Returns (gpu_hours, explanation)."""
    parts = record_partitions(rec, cluster)
    pnodes = sorted({n for p in parts for n in cluster.partitions[p]["nodes"]})
    pmax = min(len(pnodes), max(cluster.partitions[p]["max_nodes"] for p in parts))
    node_gpus = max(cluster.nodes[n]["gpus"] for n in pnodes)
    node_sockets = max(cluster.nodes[n]["sockets"] for n in pnodes)
    node_cpus = max(cluster.nodes[n]["cpus"] for n in pnodes)
    node_cores_per_socket = min(cluster.nodes[n]["cores_per_socket"] for n in pnodes)

    lo, dash, hi = rec.get("NumNodes", "1").partition("-")
    if dash and not hi:  # an open range (NumNodes=1-): as many as the partitions have
        max_nodes = pmax
    elif hi:
        max_nodes = int(hi)
    elif rec.get("JobState") != "PENDING":
        max_nodes = int(lo)
    else:
        # A pending job without a maximum shows one number. Slurm aims at the minimum but
        # spreads tasks over more nodes when CPUs are scarce: every node holds one of the
        # job's CPUs at least, and a per-job GPU count may need several nodes.
        max_nodes = max(int(lo), int(rec.get("NumCPUs", "1")),
                        math.ceil((gpu_count(rec.get("TresPerJob")) or 0) / max(1, node_gpus)))
    # Per-task GPUs x tasks beyond one node's GPUs spread the tasks whatever NumNodes says
    # (23.11 shows -n4 --gpus-per-task=4 pending as NumNodes=1-1 and runs it on 2 nodes).
    # Likewise a per-job count (23.11 shows --gpus=16 pending as NumNodes=1-1 and runs it on
    # 2 nodes of 8 GPUs).
    per_task_total = (gpu_count(rec.get("TresPerTask")) or 0) * int(rec.get("NumTasks", "1") or 1)
    per_job_total = gpu_count(rec.get("TresPerJob")) or 0
    max_nodes = max(max_nodes, math.ceil(max(per_task_total, per_job_total) / max(1, node_gpus)))
    max_nodes = min(max_nodes, pmax)

    per_node = []  # GPUs per node candidates
    total = []     # GPUs per job candidates
    n = gpu_count(rec.get("TresPerNode"))
    if n is not None:
        per_node.append(n)
    n = gpu_count(rec.get("TresPerJob"))
    if n is not None:
        total.append(n)
        if n > 0:  # every node of the job gets at least one (25.11: -n16 --gpus=1 got 2)
            total.append(max_nodes)
    n = tres_gpus(rec)
    if n is not None:  # Slurm's own count (with accounting of gres/gpu): derived GPUs too
        total.append(n)
    tpg = rec.get("NtasksPerTRES", "0")
    if tpg.isdigit() and int(tpg) > 0 and not any(
            gpu_count(rec.get(k)) for k in ("TresPerJob", "TresPerNode", "TresPerTask", "TresPerSocket")):
        # --ntasks-per-gpu without a GPU request: slurmctld creates gres/gpu:NumTasks/N
        # (gres_job_state_validate); pending, it shows only as NtasksPerTRES and NumTasks.
        total.append(int(rec.get("NumTasks", "1") or 1) // int(tpg))
    exclusive = rec.get("OverSubscribe") == "NO"
    tpn = rec.get("NtasksPerN:B:S:C", "0").split(":")[0]
    tpn = int(tpn) if tpn.isdigit() else 0
    n = gpu_count(rec.get("TresPerSocket"))
    if n is not None:
        # GPUs of the sockets that hold the job's CPUs on a node: at most the node's sockets,
        # --sockets-per-node, and (one core per socket here) the CPUs it may get on a node
        # (all when exclusive; else NumCPUs, which counts every task's CPUs).
        # --sockets-per-node is a minimum, not a cap (checked: --ntasks-per-node=2
        # --gpus-per-socket=4 --sockets-per-node=1 got 8 GPUs per node, one per core socket).
        cpus = node_cpus if exclusive else min(node_cpus, max(
            int(rec.get("NumCPUs", "1")), int(rec.get("MinCPUsNode", "1") or 1),
            tpn * int(rec.get("CPUs/Task", "1") or 1)))
        per_node.append(n * min(node_sockets, max(1, math.ceil(cpus / node_cores_per_socket))))
    n = gpu_count(rec.get("TresPerTask"))
    if n is not None:
        # Slurm wants -n or --gpus with --gpus-per-task, so NumTasks is the count, except
        # that --ntasks-per-node makes it grow with the nodes (checked: NumTasks=2 pending,
        # 4 on 2 nodes) unless -n was given (a NumTasks other than per-node x min nodes says
        # so on 22.05). Checked on 22.05: -n1 shows NumNodes=2 pending, runs on 1 with one task.
        # 23.11 gives every node its --ntasks-per-node tasks whatever -n says (checked:
        # -N2 --ntasks-per-node=8 -n1 --gpus-per-task=1 ran with 8 GPUs): the larger of the two.
        ntasks = int(rec.get("NumTasks", "1") or 1)
        tasks = max(ntasks, tpn * max_nodes) if tpn else ntasks
        total.append(n * tasks)
    if exclusive:
        per_node.append(node_gpus)  # whole nodes: every GPU on them
    gpus = max([min(g, node_gpus) * max_nodes for g in per_node] + total + [0])
    gpus = min(gpus, node_gpus * max_nodes)

    tmin = parse_time_min(rec.get("TimeLimit"))
    if tmin is None:  # Partition_Limit: the largest of the partitions' limits
        tmin = max((cluster.partitions[p]["default_time"] or cluster.partitions[p]["max_time"]
                    or INF) for p in parts)
    hours = tmin / 60.0
    gh = 0.0 if gpus == 0 else gpus * hours
    why = (f"nodes<={max_nodes} (NumNodes={rec.get('NumNodes')}, partitions {','.join(parts)}: "
           f"{pmax}) GPUs<={gpus} (TresPerNode={rec.get('TresPerNode')} TresPerJob={rec.get('TresPerJob')} "
           f"TresPerTask={rec.get('TresPerTask')} TresPerSocket={rec.get('TresPerSocket')} "
           f"NumTasks={rec.get('NumTasks')} NtasksPerN={rec.get('NtasksPerN:B:S:C')} "
           f"OverSubscribe={rec.get('OverSubscribe')}) TimeLimit={rec.get('TimeLimit')}")
    return gh, why


def partition_overs(records, cluster, caps):
    """Records of a plain job or array (het jobs: the plain cap, on their sum) that Slurm may
    run in a partition with its own cap for more GPU-hours than that cap:
    [(partition, GPU-hours, cap, explanation)]. Each partition's envelope is its own (nodes,
    limits), not the list's."""
    if not caps or any(rec.get("HetJobId") for rec in records):
        return []
    overs = []
    for rec in records:
        for p in record_partitions(rec, cluster):
            if p in caps:
                gh, why = component_envelope(dict(rec, Partition=p), cluster)
                if gh > caps[p] + 1e-6:
                    overs.append((p, gh, caps[p], why))
    return overs


def job_envelope(records, cluster):
    """Records of one submission -> (GPU-hours of one job, of the whole array, array elements,
    explanation). Het components add up to one job; an array's records (the pending meta
    record, elements split off by an update) are jobs of their own, each record counting
    its ArrayTaskId elements."""
    envs = [component_envelope(rec, cluster) for rec in records]
    why = " | ".join(w for _, w in envs)
    if any(rec.get("HetJobId") for rec in records):
        total = sum(gh for gh, _ in envs)
        return total, total, 1, why
    counts = [array_elements(rec["ArrayTaskId"]) if rec.get("ArrayTaskId") else 1
              for rec in records]
    per_job = max((gh for gh, _ in envs), default=0.0)
    return (per_job, sum(gh * n for (gh, _), n in zip(envs, counts)), sum(counts), why)


# --- the generator --------------------------------------------------------------------------

NODES = ["gpu-st-p4d-1", "gpu-st-p4d-2"]
RESERVATION = None  # --reservation: a reservation of the test user whose partition Slurm picks
INTENTS = [
    ["--train-model=350M", "--train-tokens=1.2B"],
    ["--train-model=1.3B", "--train-tokens=26B"],
    ["--train-model=7B", "--train-tokens=40B"],
    ["--train-model=125M", "--train-tokens=1B"],
    ["--train-model=350M", "--train-single-gpu-hours=200"],
    ["--train-model=350M", "--train-tokens=1.2B", "--train-deadline=2"],
    ["--train-model=1.3B", "--train-tokens=26B", "--train-strategy=ddp"],
]


def rand_time(rng):
    return rng.choice([
        lambda: None, lambda: None,
        lambda: str(rng.choice([1, 10, 30, 60, 90, 120, 600, 1440, 10000])),
        lambda: f"{rng.randint(0, 9)}-{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:00",
        lambda: f"{rng.randint(0, 30)}:{rng.randint(0, 59):02d}:00",
        lambda: "UNLIMITED", lambda: "INFINITE",
        lambda: rng.choice(["0", "00:00:00", "2-0", "1-12", "90:00", "3-"]),  # 0: no limit
    ])()


def rand_gpu_opts(rng, feats):
    """0-2 GPU request options."""
    opts = []
    for _ in range(rng.choice([0, 1, 1, 1, 1, 1, 2])):
        kind = rng.choice(["gpus", "gpus", "gpn", "gres", "gres", "gpt", "gps", "suffix",
                           "equals", "zero"])
        n = rng.choice([1, 1, 2, 4, 8, 8, 16])
        if kind == "gpus":
            opts.append(f"--gpus={rng.choice(['', 'a100:'])}{n}")
        elif kind == "gpn":
            opts.append(f"--gpus-per-node={min(n, 8)}")
        elif kind == "gres":
            opts.append(f"--gres={rng.choice(['gpu', 'gpu:a100', 'gres/gpu'])}"
                        f"{rng.choice(['', ':' + str(min(n, 8))])}")
        elif kind == "gpt":  # Slurm wants a task count with it (mostly given here)
            opts.append(f"--gpus-per-task={rng.choice([1, 1, 2, 4, 8])}")
            if rng.random() < 0.8:
                opts.append(f"-n{rng.choice([1, 2, 4, 8, 16])}")
            feats.add("tasks")
        elif kind == "gps":
            opts += [f"--gpus-per-socket={rng.choice([1, 2, 4])}",
                     f"--sockets-per-node={rng.choice([1, 2, 4, 8])}"]
            feats.add("sockets")
        elif kind == "suffix":
            opts.append(rng.choice(["--gres=gpu:1k", "--gres=gpu:a100:1k", "--gpus=1k",
                                    "--gpus-per-node=1k", "--gres=gpu:0", "--gres=gpu:1,gpu:1",
                                    "--gres=gpu:a100:4,gpu:a100:4", "--gpus=a100:1,a100:1",
                                    "--gpus-per-task=1k", "--gres=gpu:1kb", "--gres=gpu:1KiB",
                                    "--gpus=2mb", "--gpus-per-node=1kib", "--gres=gpu:a100:1Kb"]))
            feats.add("suffix")
        elif kind == "equals":  # Slurm reads the count after the last '=' (issue 25, class 3)
            opts.append(rng.choice([f"--gres=gpu:a100={min(n, 8)}", f"--gres=gpu={min(n, 8)}",
                                    f"--gpus=a100={n}", f"--gpus-per-node=a100={min(n, 8)}"]))
            feats.add("equals")
        elif kind == "zero":  # a zero-count typed entry before a real one
            opts += ["--gpus=a100:0", f"--gpus-per-node={rng.choice(['a100:', 'v100:', ''])}{min(n, 8)}"]
            feats.add("zero-typed")
    return opts


def rand_component(rng, feats, allow_intent=True):
    """Options of one job (or het component): nodes, tasks, GPUs, exclusivity, nodes list,
    time, partition, intent."""
    o = []
    r = rng.random()
    if r < 0.3:
        o.append(f"-N{rng.choice([1, 1, 2, 2, 3, 4])}")
    elif r < 0.55:
        lo = rng.choice([1, 1, 2])
        o.append(f"--nodes={lo}-{rng.choice([lo, 2, 4, 8])}")
        feats.add("node-range")
    r = rng.random()
    if r < 0.25:
        o.append(f"-n{rng.choice([1, 2, 4, 8, 16])}")
    elif r < 0.45:
        o.append(f"--ntasks-per-node={rng.choice([1, 2, 4, 8])}")
        feats.add("tasks")
    r = rng.random()
    if r < 0.12:  # CPUs per task spread tasks over nodes
        o.append(f"-c{rng.choice([2, 4, 8])}")
        feats.add("tasks")
    elif r < 0.24:  # without a GPU option Slurm derives GPUs from it (issue 25, class 1)
        o.append(f"--ntasks-per-gpu={rng.choice([1, 2, 4])}")
        feats.add("ntasks-per-gpu")
    elif r < 0.28:
        o.append(f"--cpus-per-gpu={rng.choice([1, 4])}")
    o += rand_gpu_opts(rng, feats)
    r = rng.random()
    if r < 0.04:
        o.append("--oversubscribe")
    elif r < 0.19:
        o.append("--exclusive")
        feats.add("exclusive")
    elif r < 0.24:
        o.append("--exclusive=user")
        feats.add("exclusive")
    if rng.random() < 0.12:
        o.append("-w" + rng.choice(["gpu-st-p4d-1", "gpu-st-p4d-2", "gpu-st-p4d-[1-2]",
                                    "gpu-st-p4d-1,gpu-st-p4d-2"]))
        feats.add("nodelist")
    t = rand_time(rng)
    if t is None:
        feats.add("no-time")
    else:
        o.append(rng.choice(["-t", "--time="]) + t)
        if t in ("UNLIMITED", "INFINITE"):
            feats.add("unlimited")
    r = rng.random()
    if RESERVATION and rng.random() < 0.12:
        # Slurm takes the reservation's partition after job_submit when none is named
        # (issue 25, class 10); sometimes a partition is named as well.
        o.append(f"--reservation={RESERVATION}")
        feats.add("reservation")
        r = r if rng.random() < 0.4 else 1.0
    if r < 0.25:
        o.append("-pgpu-od")
    elif r < 0.5:
        o.append("-pgpu-spot")
    elif r < 0.7:
        o.append("-p" + rng.choice(["gpu-spot,gpu-od", "gpu-od,gpu-spot"]))
        feats.add("partition-list")
    if allow_intent and rng.random() < 0.2:
        o += rng.choice(INTENTS)
        feats.add("intent")
    return o


UPDATES = [
    ("NumNodes", lambda rng: rng.choice(["2", "1-2", "1-4", "2-8", "4", "1-", "2-"])),
    ("MinNodes", lambda rng: rng.choice(["1", "2"])),
    ("TimeLimit", lambda rng: rng.choice(["UNLIMITED", "2-00:00:00", "10:00:00", "60", "30",
                                          "+600", "+10-00:00:00", "0"])),
    ("Gres", lambda rng: rng.choice(["gpu:8", "gpu:a100:8", "gpu:4", "gpu:1k", "gpu:a100=8",
                                     "gpu:1kb"])),
    ("TresPerNode", lambda rng: rng.choice(["gres:gpu:8", "gres/gpu:8", "gres:gpu:2"])),
    ("TresPerJob", lambda rng: rng.choice(["gres:gpu:16", "gres/gpu:16", "gres:gpu:4"])),
    ("TresPerTask", lambda rng: rng.choice(["gres:gpu:8", "gres/gpu:4"])),
    ("NumTasks", lambda rng: rng.choice(["16", "2", "8", "4"])),
    ("Partition", lambda rng: rng.choice(["gpu-spot", "gpu-od", "gpu-spot,gpu-od"])),
    ("OverSubscribe", lambda rng: rng.choice(["no", "NO", "user", "yes"])),
    ("ReqNodeList", lambda rng: rng.choice(["gpu-st-p4d-[1-2]", "gpu-st-p4d-2"])),
    ("NumCPUs", lambda rng: rng.choice(["16", "9"])),
    ("CpusPerTask", lambda rng: rng.choice(["8", "4"])),
    ("MinCPUsNode", lambda rng: rng.choice(["8", "2"])),
    ("ReqSockets", lambda rng: rng.choice(["8", "4"])),
    ("TresPerSocket", lambda rng: rng.choice(["gres:gpu:2", "gres/gpu:8"])),
    ("ArrayTaskThrottle", lambda rng: rng.choice(["0", "1"])),
    ("ExcNodeList", lambda rng: "gpu-st-p4d-1"),
]


class Shape:
    """One request shape: the command, its features, and (maybe) updates after submission."""

    def __init__(self, index, rng, tag, script_dir):
        self.index = index
        self.name = f"{tag}-{index}"
        self.feats = set()
        self.stdin = None
        r = rng.random()
        if r < 0.72:
            self.tool = "sbatch"
        elif r < 0.8:
            self.tool = "sbatch-array"
        elif r < 0.88:
            self.tool = "sbatch-het"
        elif r < 0.94:
            self.tool = "salloc"
        else:
            self.tool = "srun"
        self.feats.add(self.tool)
        base = ["-J", self.name, "-H"]
        if self.tool in ("sbatch", "sbatch-array"):
            argv = ["sbatch", "--parsable"] + base + rand_component(rng, self.feats)
            if self.tool == "sbatch-array":
                hi = rng.choice([1, 3, 9, 31, 99])
                argv.append("--array=" + rng.choice([
                    f"0-{hi}", f"0-{hi}%{rng.randint(1, 4)}", "1,3,5,7", f"0-{hi}:2", "0-3"]))
            argv += ["--wrap", HELD_JOB]
        elif self.tool == "sbatch-het":
            comps = [rand_component(rng, self.feats, allow_intent=False)
                     for _ in range(rng.choice([2, 2, 3]))]
            if rng.random() < 0.5:  # command-line components
                argv = ["sbatch", "--parsable"] + base + comps[0]
                for c in comps[1:]:
                    argv += [":"] + c
                argv += ["--wrap", HELD_JOB]
            else:  # '#SBATCH hetjob' script on stdin
                lines = ["#!/bin/sh", f"#SBATCH -J {self.name}", "#SBATCH -H"]
                for i, c in enumerate(comps):
                    if i:
                        lines.append("#SBATCH hetjob")
                    lines += [f"#SBATCH {opt}" for opt in c]
                self.stdin = "\n".join(lines + [HELD_JOB, ""])
                argv = ["sbatch", "--parsable"]
        elif self.tool == "salloc":
            argv = ["salloc", "--no-shell"] + base + rand_component(rng, self.feats)
        elif rng.random() < 0.8:
            argv = ["srun"] + base + rand_component(rng, self.feats) + ["true"]
        else:  # srun het job: components separated by ':' (each with its command)
            self.feats.add("sbatch-het")
            argv = ["srun"] + base + rand_component(rng, self.feats, allow_intent=False) + ["true"]
            argv += [":"] + rand_component(rng, self.feats, allow_intent=False) + ["true"]
        self.argv = argv
        self.updates = []  # each entry: the fields of one `scontrol update` call
        if rng.random() < 0.35:
            fields = [f"{key}={val(rng)}" for key, val in rng.sample(UPDATES, rng.choice([1, 1, 2, 3]))]
            self.updates = [fields] if rng.random() < 0.3 else [[f] for f in fields]
        if "sbatch-het" in self.feats and rng.random() < 0.5:
            # A het leader's TimeLimit applies to every component (issue 25, class 4).
            self.updates.append([f"TimeLimit={rng.choice(['10:00:00', '20:00:00', '+600', '2-00:00:00'])}"])
        # Which job the updates name: the job id, an array element or het component (split
        # off / addressed alone), or every job of the name.
        self.target = rng.choice(["id", "id", "id", "part", "name"])

    def command(self, run, applied=False):
        """The submission as a command line; with applied=True, followed by the updates
        Slurm accepted (job id as it was in this run)."""
        cmd = run.show(self.argv)
        if self.stdin is not None:
            cmd = f"printf %s {shlex.quote(self.stdin)} | " + cmd
        if applied:
            cmd += "".join(f"\n        then: {u}" for u in getattr(self, "applied", []))
        return cmd


# --- one shape, end to end ------------------------------------------------------------------

class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.c = {k: 0 for k in ("shapes", "refused_plugin", "refused_slurm", "accepted",
                                 "no_job", "updates", "updates_refused", "updates_accepted",
                                 "sampled", "sample_started", "never_starts",
                                 "ran_within")}
        self.violations = []
        self.by_class = {}
        self.notes = []
        self.reasons = {}

    def refusal(self, text, by_plugin):
        """Tallies refusal reasons (digits folded) for the summary."""
        lines = [l for l in (text or "").splitlines() if "error" in l or "scaleguard" in l]
        key = re.sub(r"\d+(\.\d+)?", "N", (lines or [text or "?"])[0])[:110]
        key = ("scaleguard: " if by_plugin else "slurm: ") + key
        with self.lock:
            self.reasons[key] = self.reasons.get(key, 0) + 1

    def add(self, key, n=1):
        with self.lock:
            self.c[key] += n

    def violation(self, shape, kind, text):
        with self.lock:
            cls = primary_class(shape, kind)
            self.by_class[cls] = self.by_class.get(cls, 0) + 1
            self.violations.append((cls, text))


def primary_class(shape, kind):
    if kind != "submit":
        return kind
    for f in ("reservation", "sbatch-het", "sbatch-array", "unlimited", "no-time", "intent", "exclusive", "node-range",
              "ntasks-per-gpu", "equals", "zero-typed", "tasks", "sockets", "suffix",
              "partition-list", "nodelist", "salloc", "srun"):
        if f in shape.feats:
            return f
    return "other"


def job_records(run, job_id):
    rc, out, _ = run(["scontrol", "show", "job", "-d", str(job_id)], as_user=False)
    if rc:
        return []
    return [r for r in parse_records(out) if r.get("JobState") != "CANCELLED"]


def submit(shape, run, args):
    """Returns (job id or None, refused text)."""
    if shape.tool in ("sbatch", "sbatch-array", "sbatch-het"):
        rc, out, err = run(shape.argv, stdin=shape.stdin)
        ids = re.findall(r"^(\d+)(?:;\S*)?$", out, re.M)
        if rc == 0 and ids:
            return int(ids[-1]), None
        return None, (err + out).strip()
    # salloc/srun block until granted: run in the background, find the job by its name.
    full = run.prefix + shape.argv
    p = subprocess.Popen(full, cwd=run.workdir, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    deadline = time.time() + args.alloc_wait
    job_id = None
    while time.time() < deadline and job_id is None:
        rc, out, _ = run(["squeue", "-h", "-n", shape.name, "-o", "%i"], as_user=False)
        ids = [int(x.split("+")[0].split("_")[0]) for x in out.split() if x[0].isdigit()]
        if ids:
            job_id = min(ids)
            break
        if p.poll() is not None:
            break
        time.sleep(0.1)
    if job_id is not None:
        shape.client = p  # stopped when the job is cancelled
        return job_id, None
    if p.poll() is None:
        p.kill()
    out, err = p.communicate()
    return None, (err + out).strip() or f"no job named {shape.name} after {args.alloc_wait} s"


NEVER_STARTS = {"BadConstraints", "PartitionNodeLimit"}
# Reasons that may clear when nodes free up: final only while no job holds a node. 25.11 gives
# PartitionConfig ("Requested partition configuration not available now") where 23.11 gives
# BadConstraints; a het job waits for Resources.
NEVER_WHEN_IDLE = {"Resources", "PartitionConfig"}


def allocation(recs, args):
    """What Slurm allocated to a started job: (GPU-hours = GRES IDX x TimeLimit summed over
    its records, description, the cap it answers to: its partition's own when it is one job
    in a partition with one, else the job cap)."""
    gh, detail = 0.0, []
    for r in recs:
        gpus = sum(hostlist_len(nodes) * alloc_gpus(g) for nodes, g in r["_alloc"])
        if not gpus:  # ended before its -d lines were read: the job's JOB_GRES (all nodes)
            gpus = sum(int(m.group(1)) for m in
                       re.finditer(r"(?:^|,)gpu(?::[^:,(]+)?:(\d+)", r.get("JOB_GRES", "")))
        tmin = parse_time_min(r.get("TimeLimit"))
        gh += 0.0 if gpus == 0 else gpus * (INF if tmin is None else tmin) / 60.0
        detail.append(f"{gpus} GPUs on {r.get('NodeList')} x TimeLimit={r.get('TimeLimit')}")
    cap = args.cap
    if len(recs) == 1 and recs[0].get("Partition") in args.partition_caps:
        cap = args.partition_caps[recs[0]["Partition"]]
    return gh, "; ".join(detail), cap


def release_check(run, job_id, args):
    """Slurm's view of a held job may show more nodes than it will ever run on: 23.11 shows
    -N1 -n16 on 8-CPU nodes, held, as NumNodes=2-2 (unheld, the same request is refused:
    "Requested node configuration is not available"), and --ntasks-per-gpu with -N1 as 2-2 or
    4-4 but runs it on one node. So a job over the cap in that view is released and what Slurm
    then does decides: ("never", reason) when it stays pending for a reason that never
    clears, ("ran", GPU-hours, detail, cap) when it runs (GRES IDX x TimeLimit, against the
    cap of the partition it runs in; the job is cancelled), None when it neither ran nor was
    refused within --run-wait (the envelope stands; held again).
    One release at a time (RELEASE_LOCK), in the reservation's copy when it names one."""
    with RELEASE_LOCK, reservation_now(run, job_id, args.run_wait) as ok:
        return _release_and_watch(run, job_id, args) if ok else None


@contextlib.contextmanager
def reservation_now(run, job_id, wait_s):
    """A job naming the test reservation (it starts in a year so that held shapes never run; a
    started reservation cannot be moved, nor a used one deleted) is moved into a copy that
    starts now, on the same nodes and partition, and back after; no shape is submitted or
    updated meanwhile. Yields False when the job cannot be released into one."""
    recs = job_records(run, job_id)
    resv = {r.get("Reservation") for r in recs} - {None, "(null)"}
    if not resv:
        yield True
        return
    name = next(iter(resv))
    if len(resv) > 1 or not (copy := reservation_copy_now(run, name)):
        yield False
        return
    NO_RESERVATION_COPY.clear()
    try:
        for r in recs:
            run(["scontrol", "update", f"JobId={r['JobId']}", f"ReservationName={copy}"], as_user=False)
        yield True
    finally:
        wait_gone(run, job_id, wait_s)
        for r in job_records(run, job_id):
            run(["scontrol", "update", f"JobId={r['JobId']}", f"ReservationName={name}"], as_user=False)
        drop_reservation(run, copy)
        NO_RESERVATION_COPY.set()


RELEASE_LOCK = threading.Lock()
# Cleared while a reservation copy holds gpu-spot's nodes: Slurm refuses updates that name
# reserved nodes then, so the other threads submit and update nothing meanwhile.
NO_RESERVATION_COPY = threading.Event()
NO_RESERVATION_COPY.set()


def reservation_copy_now(run, name):
    """Creates NAME-now: NAME's users, partition and nodes, from now for 300 days (it may not
    overlap NAME, which starts in a year; no job under the cap runs that long). Returns its name."""
    rc, out, _ = run(["scontrol", "show", "reservation", name], as_user=False)
    fields = dict(t.split("=", 1) for t in out.split() if "=" in t)
    if rc or not all(fields.get(k) for k in ("Users", "PartitionName", "Nodes")):
        print(f"envelope property: no reservation {name} to copy", file=sys.stderr, flush=True)
        return None
    copy = f"{name}-now"
    drop_reservation(run, copy)
    rc, out, err = run(["scontrol", "create", "reservation", f"ReservationName={copy}", "StartTime=now",
                        "Duration=300-00:00:00", f"Users={fields['Users']}",
                        f"PartitionName={fields['PartitionName']}", f"Nodes={fields['Nodes']}"],
                       as_user=False)
    if rc:
        print(f"envelope property: cannot create {copy}: {(err + out).strip()}", file=sys.stderr, flush=True)
        return None
    return copy


def drop_reservation(run, name):
    """Deletes a reservation; retried while a job that ran in it is still completing."""
    for _ in range(450):   # up to 90 s: a cancelled release may take that long to complete
        rc, out, err = run(["scontrol", "delete", f"ReservationName={name}"], as_user=False)
        if rc == 0 or "reservation is invalid" in err + out:
            return
        time.sleep(0.2)
    print(f"envelope property: could not delete reservation {name}", file=sys.stderr, flush=True)


def wait_gone(run, job_id, seconds):
    """Waits (bounded) until a job holds no node: held again, pending, or ended."""
    for _ in range(int(seconds * 5)):
        recs = job_records(run, job_id)
        if not recs or all(r.get("JobState") not in ("RUNNING", "COMPLETING") for r in recs):
            return
        time.sleep(0.2)


def _release_and_watch(run, job_id, args):
    # As the admin: 25.11 shows a job the user held after BadConstraints as JobHeldAdmin, which
    # the user cannot release; what Slurm would grant is the question either way.
    # Nodes a job still held when Slurm looked may explain Resources: idle verdicts only when
    # no job held a node from the release on (every other shape is held).
    for _ in range(int(args.run_wait * 5)):
        if not busy_jobs(run):
            break
        time.sleep(0.2)
    idle_at_release = not busy_jobs(run)
    run(["scontrol", "release", str(job_id)], as_user=False)
    recs = job_records(run, job_id)
    # A het job is placed by the backfill scheduler only (a cycle may take bf_interval, 30 s)
    # and never gets BadConstraints: it waits for Resources.
    deadline = time.time() + (max(args.run_wait, 45.0) if len(recs) > 1 else args.run_wait)
    while time.time() < deadline and recs:
        # srun shapes run `true` (or fail to start a step): the job may have ended already.
        ran = all(r.get("JobState") != "PENDING" and r.get("NodeList") not in (None, "", "(null)")
                  for r in recs)
        if ran:
            run(["scancel", str(job_id)], as_user=False)  # the shape ends here: no more updates
            return ("ran",) + allocation(recs, args)
        # One record that never starts keeps every record pending: het components start
        # together or not at all.
        reasons = {r.get("Reason", "").split()[0] for r in recs if r.get("Reason")}
        pending = all(r.get("JobState") == "PENDING" for r in recs)
        if pending and reasons & NEVER_STARTS:
            run(["scontrol", "hold", str(job_id)])
            return "never", ",".join(sorted(reasons & NEVER_STARTS))
        # Waiting although no job has held a node since the release (every other shape is
        # held, releases run one at a time): this cluster can never place it.
        if pending and reasons and reasons <= NEVER_WHEN_IDLE and idle_at_release and not busy_jobs(run):
            run(["scontrol", "hold", str(job_id)])
            return "never", ",".join(sorted(reasons)) + " on an idle cluster"
        time.sleep(0.2)
        recs = job_records(run, job_id)
    run(["scontrol", "hold", str(job_id)])
    return None


def busy_jobs(run):
    """Jobs that hold nodes now (running or completing), any user."""
    rc, out, _ = run(["squeue", "-h", "-t", "RUNNING,COMPLETING,CONFIGURING", "-o", "%i"], as_user=False)
    return out.split() if rc == 0 else ["?"]


def judge(shape, records, run, cluster, args, stats, kind, extra=""):
    """Checks the invariant on Slurm's view of the job; a shape counts once (an update is
    blamed only when the job was within the caps before it). Returns the envelope."""
    gh, array_gh, elements, why = job_envelope(records, cluster)
    cmd = shape.command(run) + extra
    text = None
    if gh > args.cap + 1e-6:
        text = f"Slurm may grant {gh:.1f} GPU-hours > cap {args.cap:g}: {why}"
    elif args.array_cap is not None and elements > 1 and array_gh > args.array_cap + 1e-6:
        text = (f"array of {elements} elements may be granted {array_gh:.1f} GPU-hours > "
                f"array cap {args.array_cap:g}: {why}")
        kind = "sbatch-array" if kind == "submit" else kind
    elif overs := partition_overs(records, cluster, args.partition_caps):
        p, pgh, pcap, pwhy = overs[0]
        text = f"Slurm may run it in {p} with {pgh:.1f} GPU-hours > {p}'s cap {pcap:g}: {pwhy}"
    if text and not shape.violated:
        verdict = release_check(run, shape.job_id, args)
        if verdict and verdict[0] == "never":
            stats.add("never_starts")
            stats.notes.append(f"not counted (released: Reason={verdict[1]}, Slurm never starts it): "
                               f"{cmd}\n      {text}")
            return gh
        if verdict and verdict[0] == "ran":
            shape.ended = True
            _, real, detail, cap = verdict
            if real <= cap + 1e-6:
                stats.add("ran_within")
                stats.notes.append(f"not counted (released, it ran with {detail} = {real:.1f} GPU-hours "
                                   f"<= cap {cap:g}): {cmd}\n      {text}")
                return gh
            kind = "allocation"
            text += f"; released, it ran with {detail} = {real:.1f} GPU-hours > cap {cap:g}"
        shape.violated = True
        stats.violation(shape, kind, f"{cmd}\n      {text}")
    return gh


def keeps_validated_gres(run):
    """Whether this Slurm keeps the GRES it validated when an update lowers NumTasks.
    22.05 does: a held -N2 -n16 --gpus-per-task=1 job updated to NumTasks=4 shows NumTasks=4
    and TRES=...,gres/gpu=16, and was allocated 16 GPUs (22.05.8). 23.11 through 25.11 do not:
    an update that changes the task count (NumTasks=, or NumNodes= of a --ntasks-per-node job,
    which sets it to nodes x per node) sets TASKS_CHANGED, and _update_job validates the GRES
    again with the new count: the same job then shows ReqTRES=...,gres/gpu=4 and was allocated
    4 GPUs (25.11.7; tests/slurm/budget_charges.bats). 23.02 was not checked: counted the
    22.05 way, which can only count more."""
    rc, out, _ = run(["scontrol", "--version"], as_user=False)
    m = re.search(r"(\d+)\.(\d+)", out or "")
    return rc != 0 or not m or (int(m.group(1)), int(m.group(2))) < (23, 11)


def keep_validated_tasks(records, before, cluster):
    """Where Slurm keeps the GRES it validated when an update lowers NumTasks
    (keeps_validated_gres: 22.05), each record keeps the largest NumTasks it has shown; where
    it validates them again (23.11+), NumTasks is what Slurm grants by, as shown."""
    if not cluster.keeps_validated_gres:
        return records
    old = {r.get("JobId"): r.get("NumTasks") for r in before}
    for r in records:
        try:
            r["NumTasks"] = str(max(int(r.get("NumTasks") or 0), int(old.get(r.get("JobId")) or 0)))
        except ValueError:
            pass
    return records


def one_shape(shape, run, cluster, args, stats):
    stats.add("shapes")
    shape.client = None
    shape.violated = False
    shape.ended = False  # cancelled by a release check: its remaining updates are not sent
    shape.applied = []  # accepted `scontrol update` command lines
    NO_RESERVATION_COPY.wait()
    job_id, refused = submit(shape, run, args)
    shape.job_id = job_id
    if job_id is None:
        by_plugin = "scaleguard" in (refused or "")
        stats.add("refused_plugin" if by_plugin else "refused_slurm")
        stats.refusal(refused, by_plugin)
        if args.verbose:
            print(f"[{shape.index}] refused: {shape.command(run)}\n      {refused}", flush=True)
        return
    records = job_records(run, job_id)
    if not records:
        stats.add("no_job")
        return
    stats.add("accepted")
    shape.envelope = judge(shape, records, run, cluster, args, stats, "submit")
    if args.verbose:
        print(f"[{shape.index}] job {job_id} envelope {shape.envelope:.1f}: "
              f"{shape.command(run)}", flush=True)
    shape.records = records
    for upd in shape.updates:
        if shape.ended:
            break
        stats.add("updates")
        if shape.target == "name":
            sel = f"JobName={shape.name}"
        elif shape.target == "part" and shape.tool == "sbatch-array":
            sel = f"JobId={job_id}_0"
        elif shape.target == "part" and "sbatch-het" in shape.feats:
            sel = f"JobId={job_id}+1"
        else:
            sel = f"JobId={job_id}"
        argv = ["scontrol", "update", sel] + upd
        NO_RESERVATION_COPY.wait()
        rc, out, err = run(argv)
        if rc:
            stats.add("updates_refused")
            continue
        stats.add("updates_accepted")
        shape.applied.append(run.show(argv))
        records = keep_validated_tasks(job_records(run, job_id), shape.records, cluster)
        shape.envelope = judge(shape, records, run, cluster, args, stats,
                               "update:" + "+".join(f.split("=")[0] for f in upd),
                               f"   # job id {job_id}, then:\n      {run.show(argv)}")
        shape.records = records


def cancel(run, shapes):
    ids = [str(s.job_id) for s in shapes if getattr(s, "job_id", None)]
    for i in range(0, len(ids), 200):
        run(["scancel"] + ids[i:i + 200], as_user=False)
    for s in shapes:
        c = getattr(s, "client", None)
        if c is not None:
            try:
                c.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                c.kill()
                c.communicate()


# --- released sample: the allocation Slurm really makes ------------------------------------

def sample_release(shape, run, cluster, args, stats):
    """Releases one accepted held sbatch job (in the reservation's copy when it names one),
    waits until it runs (bounded), checks the real allocation x time limit, cancels it."""
    stats.add("sampled")
    with RELEASE_LOCK, reservation_now(run, shape.job_id, args.run_wait) as ok:
        if ok:
            _sample_release(shape, run, args, stats)
        else:
            stats.notes.append(f"sample: job {shape.job_id} not released (no reservation copy): "
                               f"{shape.command(run, applied=True)}")


def _sample_release(shape, run, args, stats):
    job_id = shape.job_id
    run(["scontrol", "release", str(job_id)])
    deadline = time.time() + args.run_wait
    recs = []
    while time.time() < deadline:
        recs = job_records(run, job_id)
        states = {r.get("JobState") for r in recs}
        if recs and states == {"RUNNING"}:
            break
        reasons = {r.get("Reason", "").split()[0] for r in recs if r.get("Reason")}
        if recs and reasons and not reasons <= {"None", "Resources", "Priority", "Prolog",
                                                "BeginTime", "JobHeldUser"}:
            break  # can never start here (e.g. more nodes than exist)
        time.sleep(0.2)
    started = recs and all(r.get("JobState") == "RUNNING" for r in recs)
    if started:
        stats.add("sample_started")
        gh, detail, cap = allocation(recs, args)
        env = getattr(shape, "envelope", INF)
        line = (f"{shape.command(run, applied=True)}\n      released job {job_id}: allocated "
                f"{detail} = {gh:.1f} GPU-hours")
        if gh > cap + 1e-6:
            stats.violation(shape, "allocation", line + f" > cap {cap:g} of {recs[0].get('Partition')}")
        elif gh > env + 1e-6:
            stats.violation(shape, "oracle", line + f" > the oracle's envelope {env:.1f} "
                                                    "(the oracle under-estimates)")
        else:
            stats.notes.append(f"sample ok: job {job_id} {detail} = {gh:.1f} "
                               f"<= envelope {env:.1f}")
    else:
        state = ",".join(f"{r.get('JobState')}/{r.get('Reason')}" for r in recs) or "gone"
        stats.notes.append(f"sample: job {job_id} did not start ({state}; waited at most "
                           f"{args.run_wait:g} s): {shape.command(run, applied=True)}")
    run(["scancel", str(job_id)], as_user=False)
    wait_gone(run, job_id, args.run_wait)


# --- main -----------------------------------------------------------------------------------

def ctld_alive(run, pidfile):
    rc, out, _ = run(["scontrol", "ping"], as_user=False)
    ok = rc == 0 and "is UP" in out
    if pidfile:
        try:
            pid = int(open(pidfile).read().split()[0])
            os.kill(pid, 0)
        except PermissionError:
            pass
        except (OSError, ValueError):
            ok = False
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", type=int, default=300)
    ap.add_argument("--cap", type=float, default=150.0, help="max_job_gpu_hours in force")
    ap.add_argument("--array-cap", type=float, default=None,
                    help="max_array_gpu_hours in force (arrays judged per element without it)")
    ap.add_argument("--partition-cap", action="append", default=[], metavar="PARTITION=CAP",
                    help="a partition's own max_job_gpu_hours (repeatable)")
    ap.add_argument("--reservation", default=None,
                    help="a reservation of the user (with a partition) that shapes may name")
    ap.add_argument("--seed", type=int, default=None, help="default: $SEED, else random")
    ap.add_argument("--user", default=os.environ.get("SCALEGUARD_TEST_USER", "sguser"))
    ap.add_argument("--jobs", type=int, default=3, help="parallel submissions")
    ap.add_argument("--batch", type=int, default=150, help="shapes held at once, then cancelled")
    ap.add_argument("--sample", type=int, default=8, help="accepted jobs released and checked")
    ap.add_argument("--run-wait", type=float, default=8.0, help="seconds a sample may take to start")
    ap.add_argument("--alloc-wait", type=float, default=8.0,
                    help="seconds salloc/srun may take to queue their held job")
    ap.add_argument("--pidfile", default=None, help="slurmctld pid file (checked with ping)")
    ap.add_argument("--tag", default=None, help="job name prefix (default sgprop-SEED)")
    ap.add_argument("--max-print", type=int, default=40, help="violations printed in full")
    ap.add_argument("--reasons", type=int, default=8, help="most frequent refusal reasons shown")
    ap.add_argument("-v", "--verbose", action="store_true", help="one line per shape")
    ap.add_argument("--dry-run", action="store_true", help="print the shapes, submit nothing")
    args = ap.parse_args()
    try:
        args.partition_caps = {p: float(c) for p, _, c in (x.partition("=") for x in args.partition_cap)}
    except ValueError:
        ap.error("--partition-cap wants PARTITION=CAP")
    global RESERVATION
    RESERVATION = args.reservation
    seed = args.seed if args.seed is not None else int(os.environ.get("SEED") or
                                                        random.SystemRandom().randrange(1 << 31))
    rng = random.Random(seed)
    sample_rng = random.Random(seed + 1)  # outcomes never change the shapes drawn
    tag = args.tag or f"sgp{seed}"
    workdir = tempfile.mkdtemp(prefix="scaleguard-prop.")
    os.chmod(workdir, 0o777)
    run = Runner(args.user, workdir)
    if args.dry_run:
        for i in range(args.shapes):
            shape = Shape(i, rng, tag, workdir)
            print(shape.command(run) + "".join(f"\n    scontrol update JobId=ID {' '.join(u)}"
                                               for u in shape.updates))
        return 0
    print(f"envelope property: SEED={seed} shapes={args.shapes} cap={args.cap:g} "
          f"array_cap={args.array_cap} partition_caps={args.partition_caps or None} "
          f"reservation={args.reservation} user={args.user} jobs={args.jobs}", flush=True)
    if not ctld_alive(run, args.pidfile):
        print("slurmctld does not answer", file=sys.stderr)
        return 2
    cluster = Cluster(run)
    print(f"cluster: {cluster.describe()}", flush=True)

    stats = Stats()
    t0 = time.time()
    alive = True
    done = 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        while done < args.shapes and alive:
            n = min(args.batch, args.shapes - done)
            shapes = [Shape(done + i, rng, tag, workdir) for i in range(n)]
            list(pool.map(lambda s: one_shape(s, run, cluster, args, stats), shapes))
            # Sample: this batch's share of the releases, accepted sbatch jobs with GPUs first.
            quota = math.ceil(args.sample * (done + n) / args.shapes) - stats.c["sampled"]
            cand = [x for x in shapes if x.tool in ("sbatch", "sbatch-het")
                    and getattr(x, "job_id", None) and hasattr(x, "envelope")]
            sample_rng.shuffle(cand)
            cand.sort(key=lambda x: x.envelope == 0)
            for x in cand[:max(0, quota)]:
                sample_release(x, run, cluster, args, stats)
            cancel(run, shapes)
            done += n
            alive = ctld_alive(run, args.pidfile)
            el = time.time() - t0
            print(f"  {done} shapes, {el:.0f} s ({done / el:.1f}/s), accepted "
                  f"{stats.c['accepted']}, violations {len(stats.violations)}, slurmctld "
                  f"{'alive' if alive else 'GONE'}", flush=True)
    elapsed = time.time() - t0
    alive = alive and ctld_alive(run, args.pidfile)

    c = stats.c
    print(f"\nsummary SEED={seed}: {c['shapes']} shapes in {elapsed:.0f} s "
          f"({c['shapes'] / max(elapsed, 1e-9):.1f} shapes/s)")
    print(f"  refused: {c['refused_plugin'] + c['refused_slurm']} (by scaleguard "
          f"{c['refused_plugin']}, by Slurm {c['refused_slurm']}), accepted {c['accepted']}"
          + (f", vanished {c['no_job']}" if c['no_job'] else ""))
    for key, cnt in sorted(stats.reasons.items(), key=lambda kv: -kv[1])[:args.reasons]:
        print(f"    {cnt:5d}  {key}")
    print(f"  updates: {c['updates']} tried on accepted jobs, {c['updates_refused']} refused, "
          f"{c['updates_accepted']} accepted")
    print(f"  released sample: {c['sampled']} released, {c['sample_started']} started")
    print(f"  over the cap in Slurm's held view, released: never started (BadConstraints, "
          f"PartitionNodeLimit; Resources or PartitionConfig with no job on a node) "
          f"{c['never_starts']}, ran within the cap {c['ran_within']}")
    for note in stats.notes:
        print(f"    {note}")
    shapes_bad = sum(1 for cls, _ in stats.violations if cls not in ("allocation", "oracle"))
    print(f"  shapes over the cap: {shapes_bad} (at submission or after an update); released "
          f"allocations over the cap: {stats.by_class.get('allocation', 0)}; oracle "
          f"under-estimates: {stats.by_class.get('oracle', 0)}")
    print(f"  violations: {len(stats.violations)}"
          + (" by class: " + ", ".join(f"{k} {v}" for k, v in sorted(stats.by_class.items()))
             if stats.violations else ""))
    for cls, text in stats.violations[:args.max_print]:
        print(f"  VIOLATION [{cls}] {text}")
    if len(stats.violations) > args.max_print:
        print(f"  ... {len(stats.violations) - args.max_print} more")
    print(f"  slurmctld: {'alive' if alive else 'NOT ALIVE'}")
    return 0 if alive and not stats.violations else 1


if __name__ == "__main__":
    sys.exit(main())
