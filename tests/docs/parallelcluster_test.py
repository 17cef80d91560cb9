#!/usr/bin/env python3
"""configs/parallelcluster/cluster.yaml against the policy and the install script.

The YAML parses; every queue is a partition of configs/policy.ini (as `scaleguard policy
check` reads it) with the same instance type, capacity (ONDEMAND/SPOT) and fabric (EFA on,
placement group on), the first queue is the policy's default partition and every policy
partition has a queue; the FSx mount is one of the policy's checkpoint roots; the install
prefix is on shared storage; the OS is one current ParallelCluster releases support; the
CustomSlurmSettings hold what install.sh needs (JobSubmitPlugins with scaleguard, PrologFlags
with Alloc) and no key ParallelCluster deny-lists; every CustomActions script is install.sh
and its Args are accepted by scripts/parallelcluster/install.sh (a --dry-run below a temporary
--root holding ParallelCluster's slurm.conf with those CustomSlurmSettings rendered into its
include file, which install.sh checks and does not edit).
Environment: SCALEGUARD_SOURCE_DIR, SCALEGUARD_BIN (the scaleguard CLI).
"""
import os
import re
import subprocess
import sys
import tempfile

try:
    import yaml
except ImportError:
    print("SKIP: python3-yaml is not installed")
    sys.exit(77)

SRC = os.environ["SCALEGUARD_SOURCE_DIR"]
BIN = os.environ["SCALEGUARD_BIN"]
CONFIG = os.path.join(SRC, "configs", "parallelcluster", "cluster.yaml")
INSTALL = os.path.join(SRC, "scripts", "parallelcluster", "install.sh")
failures = []
# ParallelCluster 3.13+ (ubuntu2004 and alinux2 are gone).
SUPPORTED_OS = {"ubuntu2204", "ubuntu2404", "alinux2023", "rhel8", "rhel9", "rocky8", "rocky9"}
# pcluster/validators/slurm_settings_validator.py, SLURM_SETTINGS_DENY_LIST["SlurmConf"].
DENIED = {"communicationparameters", "epilog", "grestypes", "jobcomppass", "launchparameters",
          "prolog", "reconfigflags", "resumefailprogram", "resumeprogram", "resumetimeout",
          "slurmctldhost", "slurmctldlogfile", "slurmctldparameters", "slurmdlogfile", "slurmuser",
          "suspendexcnodes", "suspendprogram", "suspendtime", "taskplugin", "treewidth",
          "accountingstoragetype", "accountingstoragehost", "accountingstorageport",
          "accountingstorageuser", "jobacctgathertype"}


def fail(msg):
    failures.append(msg)
    print("FAIL: " + msg)


def policy_partitions():
    """{name: (instance, capacity, fabric, default)} and checkpoint roots, from policy check."""
    out = subprocess.run([BIN, "policy", "check", os.path.join(SRC, "configs", "policy.ini")],
                         capture_output=True, text=True, check=True).stdout
    parts = {}
    for m in re.finditer(r"^\[partition (\S+)\]( \(default\))?\n  (\S+): .*?, (on-demand|spot) .*fabric (\w+)$", out, re.M):
        parts[m.group(1)] = (m.group(3), m.group(4), m.group(5), bool(m.group(2)))
    roots = re.search(r"^checkpoint roots: (.*)$", out, re.M)
    return parts, (roots.group(1).split() if roots else [])


def arg_value(args, name):
    return args[args.index(name) + 1] if name in args else None


def check_actions(where, actions, shared_mounts, heads, computes):
    for event, action in (actions or {}).items():
        script, args = action.get("Script", ""), [str(a) for a in action.get("Args", [])]
        if not script.endswith("/install.sh"):
            fail(f"{where} {event}: Script {script} is not install.sh")
        role = arg_value(args, "--role")
        if role not in ("head", "compute"):
            fail(f"{where} {event}: Args must say --role head or --role compute, not {role}")
        prefix = arg_value(args, "--prefix")
        if not prefix or not any(prefix == m or prefix.startswith(m.rstrip("/") + "/") for m in shared_mounts):
            fail(f"{where} {event}: --prefix {prefix} is not on shared storage {shared_mounts}")
        (heads if role == "head" else computes).append((where + " " + event, args))


def dry_run(where, args, root):
    p = subprocess.run([INSTALL, *args, "--dry-run", "--root", root, "--build-dir", os.path.join(root, "build")],
                       capture_output=True, text=True, env={k: v for k, v in os.environ.items() if k != "SLURM_CONF"})
    if p.returncode != 0:
        fail(f"{where}: install.sh {' '.join(args)} --dry-run failed ({p.returncode}):\n{p.stdout}{p.stderr}")
    elif "dry run: nothing was changed" not in p.stdout:
        fail(f"{where}: install.sh dry run did not finish:\n{p.stdout}")
    elif "--role head" in " ".join(args) and "not edited: ParallelCluster manages it" not in p.stdout:
        fail(f"{where}: install.sh did not find the CustomSlurmSettings in ParallelCluster's slurm.conf:\n{p.stdout}")


def main():
    with open(CONFIG) as f:
        conf = yaml.safe_load(f)
    for key in ("Region", "Image", "HeadNode", "Scheduling", "SharedStorage"):
        if key not in conf:
            fail(f"cluster.yaml: no {key}")
    sched = conf["Scheduling"]
    if sched.get("Scheduler") != "slurm":
        fail("cluster.yaml: Scheduler is not slurm")
    os_name = conf.get("Image", {}).get("Os")
    if os_name not in SUPPORTED_OS:
        fail(f"Image Os {os_name}: not an OS current ParallelCluster releases support {sorted(SUPPORTED_OS)}")
    slurm_settings = sched.get("SlurmSettings", {})
    custom = slurm_settings.get("CustomSlurmSettings", [])
    if custom and slurm_settings.get("CustomSlurmSettingsIncludeFile"):
        fail("CustomSlurmSettings and CustomSlurmSettingsIncludeFile together: ParallelCluster refuses that")
    settings = {}
    for item in custom:
        for key, value in item.items():
            if key.lower() in DENIED:
                fail(f"CustomSlurmSettings {key}: deny-listed by ParallelCluster")
            settings[key.lower()] = str(value)
    if "scaleguard" not in [v.strip().lower() for v in settings.get("jobsubmitplugins", "").split(",")]:
        fail("CustomSlurmSettings: no JobSubmitPlugins with scaleguard (job_submit/scaleguard would not load)")
    if "alloc" not in [v.strip().lower() for v in settings.get("prologflags", "").split(",")]:
        fail("CustomSlurmSettings: no PrologFlags with Alloc (the SPANK plugin's srun/salloc plan needs it)")
    parts, roots = policy_partitions()
    if not parts:
        fail("scaleguard policy check printed no partitions")
    queues = sched.get("SlurmQueues", [])
    names = [q["Name"] for q in queues]
    for name in parts:
        if name not in names:
            fail(f"policy partition {name} has no queue in cluster.yaml (Slurm would refuse its jobs)")
    default = [n for n, p in parts.items() if p[3]]
    if not names or default != names[:1]:
        fail(f"the first queue ({names[:1]}) must be the policy's default partition {default}")

    storage = conf.get("SharedStorage", [])
    shared_mounts = [s["MountDir"] for s in storage]
    fsx = [s["MountDir"] for s in storage if s.get("StorageType") == "FsxLustre"]
    if not fsx:
        fail("cluster.yaml: no FsxLustre shared storage for checkpoints")
    for mount in fsx:
        if mount not in roots:
            fail(f"FSx mount {mount} is not one of the policy's checkpoint_roots {roots}")

    heads, computes = [], []
    check_actions("HeadNode", conf["HeadNode"].get("CustomActions"), shared_mounts, heads, computes)
    for q in queues:
        name = q["Name"]
        if name not in parts:
            fail(f"queue {name} is not a partition of configs/policy.ini ({sorted(parts)})")
            continue
        instance, capacity, fabric, _ = parts[name]
        want_capacity = "SPOT" if capacity == "spot" else "ONDEMAND"
        if q.get("CapacityType", "ONDEMAND") != want_capacity:
            fail(f"queue {name}: CapacityType {q.get('CapacityType', 'ONDEMAND')}, the policy says {capacity}")
        efa_fabric = fabric == "efa"
        if efa_fabric and not q.get("Networking", {}).get("PlacementGroup", {}).get("Enabled"):
            fail(f"queue {name}: EFA queue without PlacementGroup Enabled")
        resources = q.get("ComputeResources", [])
        if not resources:
            fail(f"queue {name}: no ComputeResources")
        for cr in resources:
            if cr.get("InstanceType") != instance:
                fail(f"queue {name} / {cr.get('Name')}: InstanceType {cr.get('InstanceType')}, the policy says {instance}")
            if bool(cr.get("Efa", {}).get("Enabled")) != efa_fabric:
                fail(f"queue {name} / {cr.get('Name')}: Efa Enabled must be {efa_fabric} (policy fabric {fabric})")
        actions = q.get("CustomActions")
        if not actions:
            fail(f"queue {name}: no CustomActions running install.sh")
        check_actions(f"queue {name}", actions, shared_mounts, heads, computes)
    if not heads:
        fail("HeadNode: no CustomActions with --role head")

    with tempfile.TemporaryDirectory() as root:
        etc = os.path.join(root, "opt", "slurm", "etc")
        os.makedirs(etc)
        # ParallelCluster's slurm.conf: its includes, the CustomSlurmSettings rendered as it
        # renders them (install.sh must find them there and edit nothing).
        os.makedirs(os.path.join(etc, "pcluster"))
        with open(os.path.join(etc, "slurm.conf"), "w") as f:
            f.write("ClusterName=parallelcluster\ninclude slurm_parallelcluster.conf\n"
                    "include pcluster/custom_slurm_settings_include_file_slurm.conf\n")
        open(os.path.join(etc, "slurm_parallelcluster.conf"), "w").close()
        with open(os.path.join(etc, "pcluster", "custom_slurm_settings_include_file_slurm.conf"), "w") as f:
            f.write("# This file is automatically generated by pcluster\n\n")
            for item in custom:
                f.write(" ".join(f"{k}={v}" for k, v in item.items()) + "\n")
        for where, args in heads:
            dry_run(where, args, root)
        # Compute nodes see what the head node installed under its prefix (shared storage).
        head_prefixes = {arg_value(a, "--prefix") for _, a in heads}
        for where, args in computes:
            prefix = arg_value(args, "--prefix")
            if prefix not in head_prefixes:
                fail(f"{where}: --prefix {prefix} is not the head node's {head_prefixes}")
                continue
            for path in (f"{prefix}/bin/scaleguard",
                         "/opt/slurm/lib/slurm/scaleguard.so", "/opt/slurm/etc/scaleguard/policy.ini"):
                os.makedirs(os.path.dirname(root + path), exist_ok=True)
                open(root + path, "a").close()
            dry_run(where, args, root)

    if failures:
        print(f"{len(failures)} problem(s)")
        return 1
    print(f"ok: {len(names)} queues, {len(heads)} head and {len(computes)} compute actions")
    return 0


if __name__ == "__main__":
    sys.exit(main())
