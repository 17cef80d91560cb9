// prep/scaleguard: the same .so as job_submit/scaleguard, loaded a second time by slurmctld as
// a PrEp plugin (PrEpPlugins=script,scaleguard; prep_scaleguard.so is a link to
// job_submit_scaleguard.so, so both share one process image: one policy, one budget Gate).
// Its prolog_slurmctld checks every new run of a job against the budgets (issue 36, class 4).
#pragma once

namespace sg_slurm {

// init()/fini() are the same symbols for both plugin types. enter_init: true when this call
// must do nothing more (a second load in slurmctld, or any load outside slurmctld, e.g. slurmd
// loading prep/scaleguard), with *rc what init returns. leave_fini: true when this is the last
// fini in slurmctld (tear down).
bool enter_init(int* rc);
void init_failed();
bool leave_fini();

// Stops the rerun checker's thread (before the budgets go).
void stop_rerun_checks();

}  // namespace sg_slurm
