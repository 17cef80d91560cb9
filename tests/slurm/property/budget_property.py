#!/usr/bin/env python3
"""Generated property test of budget enforcement on the live dev cluster (issue 36).

A seeded RNG draws a sequence of steps an ordinary user can take under one or two budgeted
accounts (small GPU-hour budgets, so that refusals happen):

    submit   a held request shape of envelope_property.py's generator (sbatch, arrays, het
             jobs; -A one of the budgeted accounts; time limits drawn so that budgets matter)
    update   `scontrol update` of one of the user's jobs: nodes, GPUs (TresPerNode, --gpus),
             Gres, tasks, time down, partition, Account=
    sync     `scaleguard budget sync` as root, then wait until slurmctld loaded that ledger
    run      release a held job for a short real run, then requeue it (`scontrol requeue`,
             sometimes started again at once so that prep/scaleguard judges the rerun, or
             `scontrol requeuehold`)
    cancel   scancel one of the user's jobs

and after every step checks, for every budget of the policy (gpu_hours budgets):

    used + held <= gpu_hours x (1 + grace)

  used: sacct's runs of the account inside the budget's period (allocated gres/gpu x the time
        of the run inside the period), the current run of a job Slurm still runs left out;
  held: for each job of the account Slurm holds (pending or running), the most GPU-hours Slurm
        may grant it: envelope_property.py's oracle on `scontrol show job -d` (job_envelope:
        het components summed, every array element counted; a running job at its allocation x
        its whole time limit), exactly as the enforcement property test counts it. When an
        account is over, its pending jobs are released one at a time as that test does
        (release_check): one Slurm never starts is cancelled and not counted, one that runs is
        counted by its real run (sacct). Still over: a violation.

Every violation prints the commands that made the account's jobs (submission, accepted
updates, runs and requeues) and the step that broke it; SEED= reproduces the step sequence.
The account's jobs are then cancelled and the run goes on. Exit status: 0 when no violation
and slurmctld alive, 1 otherwise, 2 on a setup error.

    SEED=1 tests/slurm/property/budget_property.py --steps 300 --policy P --ledger L \
        --ctld-log $SCALEGUARD_DEV_DIR/log/slurmctld.log

Needs: python3 (stdlib only), Slurm clients and `scaleguard` on PATH, SLURM_CONF of a running
dev cluster with slurmdbd accounting, root (the user's steps run through runuser).
"""
import argparse
import datetime
import os
import random
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import envelope_property as ep  # noqa: E402  the generator and the oracle, shared

LIVE = ("PENDING", "RUNNING", "CONFIGURING", "SUSPENDED", "REQUEUED", "REQUEUE_HOLD",
        "REQUEUE_FED", "RESIZING", "SIGNALING", "STAGE_OUT")
# Times as epoch seconds, for this test's own reads only (the sync reads sacct's default format).
EPOCH = ["env", "SLURM_TIME_FORMAT=%s"]
EPS = 1e-3  # GPU-hours: rounding of the plugin's and sacct's numbers


# --- the policy's budgets --------------------------------------------------------------------

def read_budgets(path):
    """[budget NAME] sections of a policy: {account: (name, gpu_hours, grace)} for GPU-hour
    budgets scoped to an account alone (the ones this test drives)."""
    budgets, sec, cur = {}, None, {}

    def flush():
        if sec and sec.startswith("budget ") and "account" in cur and "gpu_hours" in cur \
                and "user" not in cur and cur.get("mode", "enforce") != "shadow":
            budgets[cur["account"]] = (sec[7:].strip(), float(cur["gpu_hours"]),
                                       float(cur.get("grace", "0")))
    for raw in open(path):
        line = raw.split("#", 1)[0].strip()
        if line.startswith("["):
            flush()
            sec, cur = line.strip("[]").strip(), {}
        elif "=" in line:
            k, _, v = line.partition("=")
            cur[k.strip()] = v.strip()
    flush()
    return budgets


# --- the generator -----------------------------------------------------------------------------

def budget_time(rng):
    """Time limits that make 30-60 GPU-hour budgets matter (None: the partition's default)."""
    return rng.choice([None, "10", "30", "60", "90", "2:00:00", "3:00:00", "4:00:00",
                       "6:00:00", "8:00:00", "0-12", "1-0"])


ep.rand_time = budget_time  # rand_component draws its -t through this name

UPDATE_FIELDS = [
    ("NumNodes", lambda rng: rng.choice(["1", "2", "1-2", "2-4"])),
    ("TresPerNode", lambda rng: rng.choice(["gres:gpu:8", "gres:gpu:4", "gres:gpu:2", "gres/gpu:1"])),
    ("TresPerJob", lambda rng: rng.choice(["gres:gpu:16", "gres:gpu:8", "gres:gpu:4", "gres/gpu:1"])),
    ("Gres", lambda rng: rng.choice(["gpu:8", "gpu:a100:4", "gpu:2"])),
    ("NumTasks", lambda rng: rng.choice(["16", "8", "2"])),
    ("TimeLimit", lambda rng: rng.choice(["10", "30", "60", "2:00:00", "4:00:00", "-30"])),
    ("Partition", lambda rng: rng.choice(["gpu-spot", "gpu-od", "gpu-spot,gpu-od"])),
    ("OverSubscribe", lambda rng: rng.choice(["no", "yes"])),
    ("Account", None),  # one of the budgeted accounts: filled in by the step
]


class Step:
    """One step, drawn from the RNG alone (never from outcomes), so SEED= replays the same
    sequence; which live job it names is `pick` modulo the jobs there are then."""

    def __init__(self, index, rng, tag, accounts, workdir):
        self.index = index
        r = rng.random()
        self.pick = rng.randrange(1 << 30)
        if r < 0.36:
            self.kind = "submit"
            while True:  # sbatch shapes only: salloc/srun block until granted
                shape = ep.Shape(index, rng, tag, workdir)
                if shape.tool.startswith("sbatch"):
                    break
            self.shape = shape
            self.account = rng.choice(accounts)
            add_account(shape, self.account)
        elif r < 0.62:
            self.kind = "update"
            fields = rng.sample(UPDATE_FIELDS, rng.choice([1, 1, 1, 2]))
            self.fields = [f"{k}={rng.choice(accounts) if gen is None else gen(rng)}"
                           for k, gen in fields]
            self.target = rng.choice(["id", "id", "id", "part"])
        elif r < 0.74:
            self.kind = "sync"
        elif r < 0.88:
            self.kind = "run"
            self.run_s = rng.choice([0.5, 1.0, 2.0])
            self.requeue = rng.choice(["requeue", "requeue", "rerun", "requeuehold"])
        else:
            self.kind = "cancel"


def add_account(shape, account):
    """-A ACCOUNT on every component of a generated sbatch shape."""
    if shape.stdin is not None:  # '#SBATCH hetjob' script: each component gets its own line
        lines = []
        for line in shape.stdin.split("\n"):
            lines.append(line)
            if line in ("#SBATCH -H", "#SBATCH hetjob"):
                lines.append(f"#SBATCH -A {account}")
        shape.stdin = "\n".join(lines)
        return
    argv = []
    for i, a in enumerate(shape.argv):
        argv.append(a)
        if a == "-H" or (a == ":" and shape.tool == "sbatch-het"):
            argv += ["-A", account]
    shape.argv = argv


# --- Slurm's view ------------------------------------------------------------------------------

class State:
    """What the run knows about its jobs: history lines per job (for violation reports), the
    largest NumTasks each record showed (used where Slurm keeps the GRES it validated when
    NumTasks is lowered, 22.05; see envelope_property.keep_validated_tasks)."""

    def __init__(self):
        self.history = {}      # job id -> [command lines]
        self.max_tasks = {}    # record JobId -> largest NumTasks seen
        self.period_start = {}  # account -> epoch seconds

    def note(self, job_id, line):
        self.history.setdefault(str(job_id), []).append(line)


def all_records(run, state, cluster):
    rc, out, err = run(EPOCH + ["scontrol", "show", "job", "-d"], as_user=False)
    if rc and "No jobs in the system" not in (err + out):
        raise RuntimeError(f"scontrol show job: {err}")
    recs = ep.parse_records(out)
    if not cluster.keeps_validated_gres:
        # 23.11+ validate the GRES again when the task count changes (keeps_validated_gres):
        # a lowered NumTasks is what Slurm grants by. Counting the largest one seen there
        # reported jobs Slurm runs with 8 GPUs at 16 (SEED=703725473 on 25.11.7).
        return recs
    for r in recs:  # keep_validated_tasks over the whole run
        jid, n = r.get("JobId"), r.get("NumTasks")
        if jid and n and n.isdigit():
            state.max_tasks[jid] = max(int(n), state.max_tasks.get(jid, 0))
            r["NumTasks"] = str(state.max_tasks[jid])
    return recs


def job_key(rec):
    return rec.get("HetJobId") or rec.get("ArrayJobId") or rec.get("JobId")


def live_jobs(recs, accounts, user):
    """{job key: [live records]} of the user's jobs in the budgeted accounts."""
    jobs = {}
    for r in recs:
        if r.get("JobState") not in LIVE or r.get("Account") not in accounts:
            continue
        if not (r.get("UserId") or "").startswith(user + "("):
            continue
        jobs.setdefault(job_key(r), []).append(r)
    return jobs


def held_gpu_hours(records, cluster):
    """The oracle's worst case for one job as the enforcement test counts it: het components
    summed, every array element of every record counted."""
    _, array_gh, _, why = ep.job_envelope(records, cluster)
    return array_gh, why


def slurm_epoch(text):
    try:
        return int(text)
    except (TypeError, ValueError):
        return None


def used_gpu_hours(run, accounts, state, running):
    """{account: GPU-hours} of sacct's runs inside each budget's period, less the current run
    of jobs Slurm still holds running (counted by the oracle): `running` is {job id: start}."""
    start = min(state.period_start.values())
    rc, out, err = run(EPOCH + ["sacct", "-n", "-P", "-X", "-D", "-a", "-A", ",".join(accounts),
                        "-S", time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(start)),
                        "-E", "now", "-o", "JobIDRaw,State,AllocTRES,Start,End,Account"],
                       as_user=False)
    if rc:
        raise RuntimeError(f"sacct: {err}")
    now = time.time()
    used = {a: 0.0 for a in accounts}
    for line in out.splitlines():
        f = line.split("|")
        if len(f) < 6 or f[5] not in used:
            continue
        jid, st, tres, s, e = f[0], f[1].split()[0], f[2], slurm_epoch(f[3]), slurm_epoch(f[4])
        if st in ("PENDING", "RUNNING") or s is None:
            continue  # not started, or the run the oracle counts
        if running.get(jid) == s:
            continue  # the run the oracle counts (it ended between the two reads)
        m = re.search(r"(?:^|,)gres/gpu=(\d+)", tres)
        if not m:
            continue
        lo = max(s, state.period_start[f[5]])
        hi = e if e is not None else now
        if hi > lo:
            used[f[5]] += int(m.group(1)) * (hi - lo) / 3600.0
    return used


# --- steps -------------------------------------------------------------------------------------

class Prop:
    def __init__(self, args, run, cluster, budgets):
        self.args, self.run, self.cluster, self.budgets = args, run, cluster, budgets
        self.accounts = sorted(budgets)
        self.state = State()
        self.c = {k: 0 for k in (
            "submit", "submit_ok", "submit_refused_budget", "submit_refused_other", "update",
            "update_ok", "update_refused", "update_nojob", "sync", "run", "run_started",
            "run_not_started", "requeued", "rerun_started", "rerun_held", "cancel",
            "cancel_nojob", "checks", "release_never", "release_ran", "release_stays")}
        self.refusals = {}
        self.violations = []
        self.max_ratio = {a: 0.0 for a in self.accounts}
        self.log_pos = 0

    # what a step can name
    def user_jobs(self):
        recs = all_records(self.run, self.state, self.cluster)
        return recs, live_jobs(recs, self.accounts, self.args.user)

    def pick(self, step, jobs, want=None):
        keys = sorted((k for k, rs in jobs.items() if want is None or want(rs)), key=int)
        return keys[step.pick % len(keys)] if keys else None

    def do(self, step):
        self.c[step.kind] += 1
        return getattr(self, "step_" + step.kind)(step)

    def step_submit(self, step):
        shape = step.shape
        rc, out, err = self.run(shape.argv, stdin=shape.stdin)
        ids = re.findall(r"^(\d+)(?:;\S*)?$", out, re.M)
        cmd = shape.command(self.run)
        if rc == 0 and ids:
            self.c["submit_ok"] += 1
            self.state.note(ids[-1], cmd)
            return f"job {ids[-1]}: {cmd}"
        text = (err + out).strip()
        budget = re.search(r"scaleguard: budget \S+ \(account", text) is not None
        self.c["submit_refused_budget" if budget else "submit_refused_other"] += 1
        key = re.sub(r"\d+(\.\d+)?", "N", next((l for l in text.splitlines() if "error" in l), text))[:160]
        self.refusals[key] = self.refusals.get(key, 0) + 1
        return f"refused: {cmd}"

    def step_update(self, step):
        _, jobs = self.user_jobs()
        key = self.pick(step, jobs)
        if key is None:
            self.c["update_nojob"] += 1
            return "no job to update"
        recs = jobs[key]
        sel = f"JobId={key}"
        if step.target == "part" and any(r.get("HetJobId") for r in recs):
            sel = f"JobId={key}+1"
        elif step.target == "part" and any(r.get("ArrayTaskId") for r in recs):
            sel = f"JobId={key}_0"
        argv = ["scontrol", "update", sel] + step.fields
        rc, out, err = self.run(argv)
        if rc:
            self.c["update_refused"] += 1
            return f"refused: {self.run.show(argv)}"
        self.c["update_ok"] += 1
        self.state.note(key, self.run.show(argv))
        return self.run.show(argv)

    def step_sync(self, step):
        sync(self.run, self.args, self)
        self.state.note("_sync", "sync")
        return "scaleguard budget sync (loaded)"

    def step_cancel(self, step):
        _, jobs = self.user_jobs()
        key = self.pick(step, jobs)
        if key is None:
            self.c["cancel_nojob"] += 1
            return "no job to cancel"
        self.run(["scancel", key])
        self.state.note(key, f"scancel {key}")
        return f"scancel {key}"

    def step_run(self, step):
        """A held plain job released for a short real run, then requeued by its owner. A job
        requeued earlier to be rerun is started again first, once Slurm has it pending."""
        _, jobs = self.user_jobs()
        for key in list(self.to_rerun):
            rs = jobs.get(key)
            if not rs or rs[0].get("JobState") != "PENDING":
                if not rs:
                    self.to_rerun.remove(key)
                continue
            self.to_rerun.remove(key)
            # Past Slurm's requeue delay at once (as tests/slurm/helpers.bash start_requeued),
            # so that prep/scaleguard judges the next run now.
            self.run(["scontrol", "update", f"JobId={key}", "StartTime=now+2"], as_user=False)
            time.sleep(2.5)
            self.run(["scontrol", "update", f"JobId={key}", "StartTime=now"], as_user=False)
            self.state.note(key, f"scontrol update JobId={key} StartTime=now   # as root: the rerun")
            st = wait_state(self.run, key, ("RUNNING",), self.args.run_wait, held_ok=True)
            self.c["rerun_started" if st == "RUNNING" else "rerun_held"] += 1
            return f"job {key}: rerun {st or 'still pending'}"
        key = self.pick(step, jobs, lambda rs: len(rs) == 1 and not rs[0].get("ArrayTaskId")
                        and not rs[0].get("HetJobId") and rs[0].get("JobState") == "PENDING"
                        and (rs[0].get("Reason") or "").startswith("JobHeldUser")
                        and rs[0]["JobId"] not in self.unstartable)
        if key is None:
            return "no held job to run"
        self.run(["scontrol", "release", key])
        self.state.note(key, f"scontrol release {key}")
        if not wait_state(self.run, key, ("RUNNING",), self.args.run_wait):
            self.c["run_not_started"] += 1
            self.unstartable.add(key)  # never picked to run again
            _, why, _ = self.run(["squeue", "-h", "-j", key, "-o", "%T %r"], as_user=False)
            self.run(["scontrol", "hold", key])
            self.state.note(key, f"scontrol hold {key}   # did not start: {why.strip()}")
            return f"job {key} released, did not start ({why.strip()}): held again"
        self.c["run_started"] += 1
        time.sleep(step.run_s)
        verb = "requeuehold" if step.requeue == "requeuehold" else "requeue"
        rc, out, err = self.run(["scontrol", verb, key])
        self.state.note(key, f"sleep {step.run_s}; scontrol {verb} {key}")
        if rc:
            return f"job {key} ran; {verb} refused: {(err + out).strip()}"
        self.c["requeued"] += 1
        if step.requeue == "rerun":
            self.to_rerun.append(key)  # started again by a later run step, past the delay
        return f"job {key} ran {step.run_s} s, {verb}"

    # the invariant
    def check(self, step_line):
        self.c["checks"] += 1
        for attempt in range(10):
            self.last_ratio = {}
            over = self.over()
            if not over:
                self.note_ratio()
                return
            account, total, limit, used, held, detail = over[0]
            # Slurm's held view may show more than it ever grants: release the account's
            # largest pending job as envelope_property does, and count what Slurm does.
            cand = [(gh, key) for key, gh, _, st in detail if st == "PENDING" and key not in self.released]
            if not cand:
                break
            gh, key = max(cand)
            self.released.add(key)
            verdict = ep.release_check(self.run, key, self.rargs)
            print(f"  {account} at {total:.2f} > {limit:g} GPU-hours in Slurm's held view: released "
                  f"job {key} (worst case {gh:.2f}): {verdict[:2] if verdict else 'neither ran nor refused'}",
                  flush=True)
            if verdict and verdict[0] == "never":
                self.c["release_never"] += 1
                self.run(["scancel", key], as_user=False)
                self.state.note(key, f"   # released by the test: Slurm never starts it ({verdict[1]}); cancelled")
            elif verdict and verdict[0] == "ran":
                self.c["release_ran"] += 1
                self.state.note(key, f"   # released by the test: it ran with {verdict[2]}; cancelled")
                wait_gone(self.run, key, self.args.run_wait)
            else:
                self.c["release_stays"] += 1
        self.note_ratio()
        self.report(over[0], step_line)

    def note_ratio(self):
        """The highest (used + held) / allowed after a step, as finally counted."""
        for a, r in self.last_ratio.items():
            self.max_ratio[a] = max(self.max_ratio[a], r)

    released = set()
    unstartable = set()
    to_rerun = []

    def over(self):
        recs, jobs = self.user_jobs()
        running = {r["JobId"]: slurm_epoch(r.get("StartTime")) for rs in jobs.values() for r in rs
                   if r.get("JobState") != "PENDING"}
        used = used_gpu_hours(self.run, self.accounts, self.state, running)
        per = {a: [] for a in self.accounts}
        for key, rs in jobs.items():
            by_acct = {}
            for r in rs:
                by_acct.setdefault(r["Account"], []).append(r)
            for a, ars in by_acct.items():
                gh, why = held_gpu_hours(ars, self.cluster)
                st = "PENDING" if all(r.get("JobState") == "PENDING" for r in ars) else "RUNNING"
                per[a].append((key, gh, why, st))
        out = []
        for a in self.accounts:
            name, limit, grace = self.budgets[a]
            held = sum(gh for _, gh, _, _ in per[a])
            total = used[a] + held
            allowed = limit * (1 + grace)
            self.last_ratio[a] = total / allowed
            if total > allowed + EPS:
                out.append((a, total, allowed, used[a], held, per[a]))
        return out

    def report(self, over, step_line):
        account, total, allowed, used, held, detail = over
        name = self.budgets[account][0]
        lines = [f"budget {name} (account {account}): used {used:.2f} + held {held:.2f} = "
                 f"{total:.2f} GPU-hours > {allowed:g} after step: {step_line}"]
        for key, gh, why, st in sorted(detail, key=lambda d: -d[1]):
            lines.append(f"    job {key} ({st}) worst case {gh:.2f} GPU-hours: {why}")
            for h in self.state.history.get(key, []):
                lines.append(f"        {h}")
        self.violations.append("\n".join(lines))
        print("VIOLATION " + lines[0], flush=True)
        # Start the account afresh so that the run goes on finding other sequences.
        self.run(["scancel", "-A", account, "-u", self.args.user], as_user=False)
        time.sleep(0.5)


WAITING = {"None", "Resources", "Priority", "Prolog", "BeginTime", "JobHeldUser", ""}


def wait_state(run, key, states, seconds, held_ok=False):
    """Waits (bounded) for one of `states`; gives up at once on a pending reason that does
    not clear by waiting (BadConstraints, PartitionConfig, ...)."""
    deadline = time.time() + seconds
    st = None
    while time.time() < deadline:
        rc, out, _ = run(["squeue", "-h", "-j", key, "-o", "%T|%r"], as_user=False)
        st, _, reason = out.strip().partition("|")
        if st in states:
            return st
        if "RUNNING" in states and st == "PENDING" and reason not in WAITING and not held_ok:
            return None
        if held_ok and st == "PENDING" and "held" in reason:
            return "HELD"
        if rc or not st:
            return None
        time.sleep(0.1)
    return None


def wait_gone(run, key, seconds):
    deadline = time.time() + seconds
    while time.time() < deadline:
        rc, out, _ = run(["squeue", "-h", "-j", key, "-o", "%T"], as_user=False)
        if rc or out.strip() not in ("RUNNING", "COMPLETING", "CONFIGURING"):
            return
        time.sleep(0.1)


def sync(run, args, prop):
    """`scaleguard budget sync` as root; waits (bounded) until slurmctld's ledger thread logged
    loading it, then reads each budget's period start from the ledger."""
    with open(args.ctld_log, "rb") as f:
        f.seek(0, 2)
        pos = f.tell()
    rc, out, err = run(["scaleguard", "budget", "sync", "--policy", args.policy], as_user=False)
    if rc:
        raise RuntimeError(f"scaleguard budget sync failed: {(err + out).strip()}")
    needle = f"budget ledger {args.ledger} loaded".encode()
    deadline = time.time() + 15
    while time.time() < deadline:
        with open(args.ctld_log, "rb") as f:
            f.seek(pos)
            if needle in f.read():
                break
        time.sleep(0.1)
    else:
        raise RuntimeError("slurmctld did not load the new ledger within 15 s")
    for a in prop.accounts:
        rc, out, err = run(["scaleguard", "budget", "show", "--policy", args.policy, "--account", a,
                            "--json"], as_user=False)
        m = re.search(r'"start"\s*:\s*"([^"]+)"', out)
        if m:
            prop.state.period_start[a] = parse_utc(m.group(1))
        elif a not in prop.state.period_start:
            raise RuntimeError(f"budget show --account {a}: no period start: {out}{err}")


def parse_utc(text):
    t = text.strip().rstrip("Z").replace(" ", "T")
    for fmt in ("%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M", "%Y-%m-%d"):
        try:
            return int(datetime.datetime.strptime(t, fmt).replace(tzinfo=datetime.timezone.utc).timestamp())
        except ValueError:
            pass
    raise RuntimeError(f"period start {text!r}")


class ReleaseArgs:
    """What envelope_property.release_check reads from its args."""

    def __init__(self, run_wait):
        self.run_wait = run_wait
        self.cap = float("inf")
        self.partition_caps = {}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--policy", required=True, help="the policy slurmctld reads (its budgets)")
    ap.add_argument("--ledger", required=True, help="the ledger path of its [budgets]")
    ap.add_argument("--ctld-log", required=True, help="slurmctld's log (ledger loads)")
    ap.add_argument("--seed", type=int, default=None, help="default: $SEED, else random")
    ap.add_argument("--user", default=os.environ.get("SCALEGUARD_TEST_USER", "sguser"))
    ap.add_argument("--run-wait", type=float, default=6.0, help="seconds a released job may take to start")
    ap.add_argument("--pidfile", default=None, help="slurmctld pid file (checked with ping)")
    ap.add_argument("--progress", type=int, default=50, help="a progress line every N steps")
    ap.add_argument("--max-print", type=int, default=20, help="violations printed in full")
    ap.add_argument("-v", "--verbose", action="store_true", help="one line per step")
    ap.add_argument("--dry-run", action="store_true", help="print the steps, run nothing")
    args = ap.parse_args()
    budgets = read_budgets(args.policy)
    if not 1 <= len(budgets) <= 4:
        print(f"budget property: {args.policy} has {len(budgets)} account GPU-hour budgets", file=sys.stderr)
        return 2
    accounts = sorted(budgets)
    seed = args.seed if args.seed is not None else int(os.environ.get("SEED") or
                                                        random.SystemRandom().randrange(1 << 31))
    rng = random.Random(seed)
    tag = f"sgbp{seed}"
    workdir = tempfile.mkdtemp(prefix="scaleguard-bprop.")
    os.chmod(workdir, 0o777)
    run = ep.Runner(args.user, workdir)
    if args.dry_run:
        for i in range(args.steps):
            s = Step(i, rng, tag, accounts, workdir)
            extra = {"submit": lambda: s.shape.command(run), "update": lambda: " ".join(s.fields),
                     "run": lambda: f"{s.run_s} s, {s.requeue}"}.get(s.kind, lambda: "")()
            print(f"[{i}] {s.kind} {extra}")
        return 0
    print(f"budget property: SEED={seed} steps={args.steps} budgets="
          + ", ".join(f"{n} ({a}: {g:g} GPU-hours, grace {gr:g})" for a, (n, g, gr) in budgets.items())
          + f" user={args.user}", flush=True)
    if not ep.ctld_alive(run, args.pidfile):
        print("slurmctld does not answer", file=sys.stderr)
        return 2
    cluster = ep.Cluster(run)
    prop = Prop(args, run, cluster, budgets)
    prop.rargs = ReleaseArgs(args.run_wait)
    run(["scancel", "-u", args.user, "-A", ",".join(accounts)], as_user=False)
    time.sleep(0.5)
    try:
        sync(run, args, prop)
    except RuntimeError as e:
        print(f"budget property: {e}", file=sys.stderr)
        return 2
    t0 = time.time()
    alive = True
    for i in range(args.steps):
        step = Step(i, rng, tag, accounts, workdir)
        try:
            line = prop.do(step)
            prop.check(f"[{i}] {step.kind}: {line}")
        except RuntimeError as e:
            prop.violations.append(f"[{i}] {step.kind}: {e}")
            print(f"ERROR [{i}] {step.kind}: {e}", flush=True)
            alive = ep.ctld_alive(run, args.pidfile)
            if not alive:
                break
            continue
        if args.verbose:
            print(f"[{i}] {step.kind}: {line}", flush=True)
        if (i + 1) % args.progress == 0:
            alive = ep.ctld_alive(run, args.pidfile)
            el = time.time() - t0
            print(f"  {i + 1} steps, {el:.0f} s, submitted {prop.c['submit_ok']} (budget refused "
                  f"{prop.c['submit_refused_budget']}), violations {len(prop.violations)}, slurmctld "
                  f"{'alive' if alive else 'GONE'}", flush=True)
            if not alive:
                break
    elapsed = time.time() - t0
    alive = alive and ep.ctld_alive(run, args.pidfile)
    run(["scancel", "-u", args.user, "-A", ",".join(accounts)], as_user=False)
    c = prop.c
    print(f"\nsummary SEED={seed}: {c['checks']} steps in {elapsed:.0f} s")
    print(f"  submit {c['submit']}: accepted {c['submit_ok']}, refused by a budget "
          f"{c['submit_refused_budget']}, refused otherwise {c['submit_refused_other']}")
    for key, n in sorted(prop.refusals.items(), key=lambda kv: -kv[1])[:8]:
        print(f"    {n:5d}  {key}")
    print(f"  update {c['update']}: accepted {c['update_ok']}, refused {c['update_refused']}, "
          f"no job {c['update_nojob']}")
    print(f"  sync {c['sync']}; cancel {c['cancel']}")
    print(f"  run {c['run']}: started {c['run_started']} (not started {c['run_not_started']}), "
          f"requeued {c['requeued']}; reruns started by the test: ran {c['rerun_started']}, "
          f"held or pending {c['rerun_held']}")
    print(f"  over in Slurm's held view, released: never starts {c['release_never']}, ran "
          f"{c['release_ran']}, neither {c['release_stays']}")
    print("  highest (used + held) / limit: " + ", ".join(
        f"{budgets[a][0]} {prop.max_ratio[a]:.3f}" for a in accounts))
    print(f"  violations: {len(prop.violations)}")
    for v in prop.violations[:args.max_print]:
        print(f"  VIOLATION {v}")
    print(f"  slurmctld: {'alive' if alive else 'NOT ALIVE'}")
    return 0 if alive and not prop.violations else 1


if __name__ == "__main__":
    sys.exit(main())
