// envelope_of(): the most Slurm may grant a job in one partition, and the bounds that make
// the job stay within it. Counts are judged the way Slurm allocates, not the way they read:
// a node range may end at its maximum, tasks spread one per node, --exclusive hands over every
// GPU of each node, and a job without a time limit runs under whatever the partition allows.
#include "scaleguard/envelope.h"

#include <algorithm>
#include <cctype>

#include "parse_number.h"
#include "scaleguard/text.h"

namespace scaleguard {
namespace {

long long ceil_div(long long a, long long b) { return b <= 0 ? 0 : (a + b - 1) / b; }
constexpr long long kMaxNodes = 100000;

// Quotes at most 64 bytes of the user's text, control characters as '?': the message reaches
// sbatch's output and slurmctld's log.
Error list_error(const std::string& what, const std::string& text, const std::string& hint) {
  Error e;
  std::string shown = text.substr(0, 64);
  for (char& c : shown)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  e.message = what + " '" + shown + (text.size() > 64 ? "...'" : "'");
  e.hint = hint;
  return e;
}

// Digits only, bounded (no sign, no suffix): host list ranges and array indices.
bool small_number(const std::string& s, long long* out) {
  if (s.empty() || s.size() > 9) return false;
  for (char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  *out = std::stoll(s);
  return true;
}

// Count of one bracket body "1-4,7,09-12".
Result<long long> count_ranges(const std::string& body, const std::string& list) {
  long long n = 0;
  for (const auto& r : text::split(body, ',')) {
    const auto dash = r.find('-');
    long long a = 0, b = 0;
    if (dash == std::string::npos) {
      if (!small_number(r, &a)) return list_error("malformed host list", list, "e.g. node[1-4,7]");
      ++n;
    } else {
      if (!small_number(r.substr(0, dash), &a) || !small_number(r.substr(dash + 1), &b) || b < a)
        return list_error("malformed host list", list, "e.g. node[1-4,7]");
      n += b - a + 1;
    }
    if (n > 1000000) return list_error("host list too long", list, "name at most 1,000,000 nodes");
  }
  return n;
}

}  // namespace

Result<int> count_hostlist(const std::string& list) {
  if (list.size() > 65536 || text::has_control(list)) return list_error("malformed host list", list, "");
  long long total = 0;
  // Split on commas outside brackets; each name multiplies its bracket groups.
  size_t i = 0;
  while (i <= list.size()) {
    long long names = 1;
    bool any = false;
    while (i < list.size() && list[i] != ',') {
      if (list[i] == '[') {
        const auto close = list.find(']', i);
        if (close == std::string::npos) return list_error("unbalanced '[' in host list", list, "e.g. node[1-4]");
        auto n = count_ranges(list.substr(i + 1, close - i - 1), list);
        if (!n) return n.error();
        names *= n.value();
        if (names > 1000000) return list_error("host list too long", list, "name at most 1,000,000 nodes");
        i = close + 1;
      } else if (list[i] == ']') {
        return list_error("unbalanced ']' in host list", list, "e.g. node[1-4]");
      } else {
        ++i;
      }
      any = true;
    }
    if (any) total += names;
    if (total > 1000000) return list_error("host list too long", list, "name at most 1,000,000 nodes");
    ++i;  // past the comma (or the end)
  }
  return static_cast<int>(total);
}

Result<std::vector<std::string>> partition_names(const std::string& list) {
  if (list.size() > kMaxPartitionList)
    return list_error("partition list longer than " + std::to_string(kMaxPartitionList) + " bytes", list,
                      "name each partition once");
  if (text::has_control(list)) return list_error("control characters in the partition list", list, "");
  std::vector<std::string> names;
  for (auto& name : text::split(list, ',')) {
    // Slurm skips empty names too (strtok on ','): "a,,b," uses a and b.
    if (!name.empty() && std::find(names.begin(), names.end(), name) == names.end()) names.push_back(std::move(name));
  }
  return names;
}

Result<int> count_array_tasks(const std::string& index) {
  const std::string hint = "e.g. --array=0-15, 1,3,5-11:2 or 0-99%10";
  if (index.size() > 8192 || text::has_control(index)) return list_error("malformed array index", index, hint);
  std::string body = index.substr(0, index.find('%'));  // %N throttles, it does not bound the total
  long long n = 0;
  for (const auto& item : text::split(body, ',')) {
    if (item.empty()) continue;
    const auto colon = item.find(':');
    const std::string range = item.substr(0, colon);
    long long step = 1, a = 0, b = 0;
    if (colon != std::string::npos && (!small_number(item.substr(colon + 1), &step) || step < 1))
      return list_error("malformed array index", index, hint);
    const auto dash = range.find('-');
    if (dash == std::string::npos) {
      if (!small_number(range, &a)) return list_error("malformed array index", index, hint);
      n += 1;
    } else {
      if (!small_number(range.substr(0, dash), &a) || !small_number(range.substr(dash + 1), &b) || b < a)
        return list_error("malformed array index", index, hint);
      n += (b - a) / step + 1;
    }
    if (n > 10000000) return list_error("array too large", index, hint);
  }
  if (n == 0) return list_error("empty array index", index, hint);
  return static_cast<int>(n);
}

Envelope envelope_of(const JobRequest& job, const Partition& part) {
  Envelope env;
  const long long gpn = std::max(1, part.inst.gpus);
  const bool exclusive = job.exclusive || part.exclusive;

  // Nodes: at least what is named or needed; at most the range's end, else one per task.
  long long lo = std::max<long long>({1, job.nodes_min, job.nodes_listed, ceil_div(job.gpus_total, gpn),
                                      ceil_div(static_cast<long long>(job.gpus_per_task) * job.ntasks, gpn)});
  // Without a maximum Slurm picks the node count (tasks may spread one per node): bounded in the job.
  bool open_ended = job.nodes_max <= 0;
  long long hi = job.nodes_max > 0 ? std::max<long long>(lo, job.nodes_max)
                 : job.ntasks > 0  ? std::max<long long>(lo, job.ntasks)
                                   : lo;
  if (part.max_nodes > 0 && hi > part.max_nodes) hi = std::max<long long>(lo, part.max_nodes), open_ended = true;
  hi = std::min(hi, kMaxNodes);

  // GPUs on one node and in total, every form Slurm allows, whichever grants most.
  // --ntasks-per-node may outweigh -n: 23.11 gives each node its --ntasks-per-node tasks and
  // their --gpus-per-task GPUs (-N2 --ntasks-per-node=8 -n1 --gpus-per-task=1 got 8 GPUs).
  const long long tasks = std::max<long long>(
      job.ntasks, job.ntasks_per_node > 0 ? job.ntasks_per_node * hi : job.ntasks > 0 ? 0 : hi);
  // Tasks on one node: all of them, or with --ntasks-per-node that many, unless -n packs more
  // onto the fewest nodes.
  const long long tasks_on_node =
      job.ntasks_per_node > 0 ? std::max<long long>(job.ntasks_per_node, ceil_div(tasks, lo)) : tasks;
  // --sockets-per-node is a minimum: every socket holding one of the job's cores gets
  // --gpus-per-socket GPUs, and the policy does not know a node's sockets: judged as many as GPUs.
  const long long sockets = gpn;
  long long per_node = std::max<long long>({static_cast<long long>(job.gpus_per_node),
                                            static_cast<long long>(job.gpus_per_socket) * sockets,
                                            static_cast<long long>(job.gpus_per_task) * tasks_on_node,
                                            static_cast<long long>(job.gpus_total)});
  long long total = std::max<long long>({static_cast<long long>(job.gpus_total),
                                         static_cast<long long>(job.gpus_per_node) * hi,
                                         static_cast<long long>(job.gpus_per_socket) * sockets * hi,
                                         static_cast<long long>(job.gpus_per_task) * tasks});
  if (exclusive) {
    per_node = gpn;
    total = gpn * hi;
    env.how = "--exclusive: all " + std::to_string(gpn) + " GPUs of each of up to " + std::to_string(hi) + " node(s)";
    if (part.exclusive && !job.exclusive)
      env.how = "partition " + part.name + " allocates whole nodes: all " + std::to_string(gpn) +
                " GPUs of each of up to " + std::to_string(hi) + " node(s)";
  }
  // --gpus=N over more nodes than N: Slurm gives every node of the job at least one GPU
  // (25.11: -n16 --gpus=1 on two 8-CPU nodes ran with gpu:1 on each; with -N it refuses
  // "--gpus < -N" instead).
  const bool per_job_spreads = job.gpus_total > 0 && hi > job.gpus_total;
  if (per_job_spreads) total = std::max<long long>(total, hi);
  per_node = std::min(per_node, gpn);
  total = std::min(total, per_node * hi);
  // Whether Slurm's node count changes the GPUs: then an open node count is bounded.
  const bool tasks_per_node_count = job.gpus_per_task > 0 && (job.ntasks <= 0 || job.ntasks_per_node > 0);
  const bool per_node_counts =
      exclusive || job.gpus_per_node > 0 || job.gpus_per_socket > 0 || tasks_per_node_count || per_job_spreads;
  if (total > 0 && per_node_counts && open_ended) env.bound_max_nodes = static_cast<int>(hi);
  if (env.how.empty() && total > 0) {
    const bool literal = job.nodes_max <= 0 || job.nodes_max == job.nodes_min;
    if (tasks_per_node_count)
      env.how = std::to_string(job.gpus_per_task) + " GPU(s) per task x up to " + std::to_string(tasks) + " task(s)";
    else if (per_job_spreads)
      env.how = "--gpus=" + std::to_string(job.gpus_total) + " over up to " + std::to_string(hi) +
                " nodes: Slurm gives each node of the job at least one GPU";
    else if (!literal && per_node_counts)
      env.how = "up to " + std::to_string(hi) + " nodes (" + std::to_string(job.nodes_min) + "-" +
                std::to_string(job.nodes_max) + ") x " + std::to_string(per_node) + " GPUs";
    else if (job.nodes_max <= 0 && job.ntasks > 0 && per_node_counts && hi > lo)
      env.how = std::to_string(per_node) + " GPUs per node x up to " + std::to_string(hi) +
                " nodes (without --nodes, " + std::to_string(job.ntasks) + " tasks may spread one per node)";
    else if (job.gpus_per_socket > 0)
      env.how = "--gpus-per-socket: up to all " + std::to_string(gpn) + " GPUs of a node (any socket with the job's cores)";
  }
  env.nodes = static_cast<int>(hi);
  env.gpus_per_node = static_cast<int>(per_node);
  env.gpus = static_cast<int>(total);

  // Time: what the job gives, else what the partition would give (written into the job).
  if (job.time_limit_min > 0) {
    env.time_limit_min = job.time_limit_min;
  } else if (job.time_limit_min == 0) {
    env.time_limit_min = part.default_time_min;
    env.bound_time_min = part.default_time_min;
  } else if (part.max_time_min > 0) {  // UNLIMITED: the partition's maximum
    env.time_limit_min = part.max_time_min;
    env.bound_time_min = part.max_time_min;
  }
  return env;
}

}  // namespace scaleguard
