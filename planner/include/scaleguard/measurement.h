// What `scaleguard probe` measured (issue 16): the real scaling of one doubling of a model on
// one instance type. Pure data: the probe store (probe/) reads and writes it, decide() judges
// with it (JobRequest::measurements); nothing here does I/O.
#pragma once
#include <string>

namespace scaleguard {

struct ModelSpec;

// Who vouches for a record, from the owner of its file (never from its contents):
// admin = root, SlurmUser or the policy's trusted_users: applies to every job, may loosen or
// tighten; own = the submitting user's own probe: applies to that user's jobs, may only tighten.
enum class Trust { admin, own };
const char* to_string(Trust);

struct Measurement {
  std::string fingerprint;    // model_fingerprint() of the model probed
  std::string instance;       // catalog instance type it ran on (the partition's `instance`)
  // The hardware the runs used (issue 37): a measurement applies only where the partition's
  // hardware is the same (measurement_matches()). device: "cuda" or "cpu"; gpu: the catalog GPU
  // type the ranks ran on (a CPU probe: the [host NAME] of a measured host, or "cpu").
  std::string device;
  std::string gpu;
  int ranks = 2;              // ranks of the scaled run (the baseline is 1 rank)
  int nodes = 1;              // nodes the scaled run spread over: 2 = across the node network
  int micro_batch = 1;        // per-rank micro-batch of both runs
  double step_s_1 = 0;        // median step time, 1 rank
  double step_s_n = 0;        // median step time, `ranks` ranks (`ranks` x the samples)
  double speedup = 0;         // throughput(ranks) / throughput(1) at the same per-rank micro-batch
  double comm_ratio = 0;      // exposed communication / compute of the scaled run
  double peak_bytes = 0;      // rank 0's parameters + gradients + optimizer state + step peak
  double gpu_hours = 0;       // what the probe cost: sum of ranks x wall time of its runs
  long long time = 0;         // unix seconds when it was measured
  std::string date;           // YYYY-MM-DD (UTC) of `time`
  std::string version;        // scaleguard version that measured
  std::string job_id;         // Slurm job id of the probe ("" outside Slurm)
  std::string user;           // who ran it (informational; trust comes from the file owner)
  Trust trust = Trust::own;   // set by the reader from the file's owner
};

// A stable hash of what decides the scaling of a model: shape (layers, hidden, heads),
// sequence length, vocabulary and precision. 16 hex digits. The micro-batch is not part of
// it: a job request carries none (the plan chooses it); the record keeps the probe's.
std::string model_fingerprint(const ModelSpec& model);

struct GpuType;
// The device a partition's "GPU" is: "cpu" for a measured host ([host NAME] of a catalog
// override: one rank = one "GPU"), else "cuda".
const char* device_of(const GpuType& gpu);
// Whether `m` was measured on the hardware of `gpu`: the same device and the same GPU type
// (name, case-insensitive). A CPU measurement never matches a GPU type, nor one GPU another.
bool measurement_matches(const Measurement& m, const GpuType& gpu);

}  // namespace scaleguard
