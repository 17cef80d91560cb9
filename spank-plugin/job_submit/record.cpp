#include "record.h"

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "text.h"

namespace sg_slurm {
namespace {

constexpr size_t kMaxAdminComment = 1024;
constexpr const char* kOpen = "[sg=";

std::string encode(const std::string& v) {
  std::string out;
  for (unsigned char c : v) {
    if (isalnum(c) || c == '.' || c == '_' || c == '-') {
      out += static_cast<char>(c);
    } else {
      char hex[4];
      snprintf(hex, sizeof hex, "%%%02X", c);
      out += hex;
    }
  }
  return out;
}

bool decode(const std::string& v, std::string* out) {
  out->clear();
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i] != '%') {
      *out += v[i];
      continue;
    }
    if (i + 2 >= v.size() || !isxdigit(static_cast<unsigned char>(v[i + 1])) ||
        !isxdigit(static_cast<unsigned char>(v[i + 2])))
      return false;
    *out += static_cast<char>(std::strtol(v.substr(i + 1, 2).c_str(), nullptr, 16));
    i += 2;
  }
  return true;
}

bool to_int(const std::string& v, int* out) {
  if (v.empty() || v.size() > 10) return false;
  char* end = nullptr;
  long n = std::strtol(v.c_str(), &end, 10);
  if (*end || n < -1 || n > 100000000) return false;
  *out = static_cast<int>(n);
  return true;
}

bool to_double(const std::string& v, double* out) {
  if (v.empty() || v.size() > 32) return false;
  char* end = nullptr;
  double n = std::strtod(v.c_str(), &end);
  if (*end || !(n >= 0 && n <= 1e18)) return false;
  *out = n;
  return true;
}

}  // namespace

std::string encode_record(const std::string& id, const scaleguard::JobRequest& j) {
  std::string r = kOpen + encode(id);
  auto add = [&](const char* k, const std::string& v) { r += std::string(";") + k + "=" + encode(v); };
  auto num = [&](const char* k, long long v) {
    if (v) add(k, std::to_string(v));
  };
  num("gj", j.gpus_total), num("gn", j.gpus_per_node), num("gt", j.gpus_per_task), num("gs", j.gpus_per_socket);
  if (!j.gpu_type.empty()) add("ty", j.gpu_type.substr(0, 64));
  num("n0", j.nodes_min), num("n1", j.nodes_max), num("nt", j.ntasks), num("tpn", j.ntasks_per_node);
  num("tpg", j.ntasks_per_gpu), num("h", j.het_component + 1);
  num("spn", j.sockets_per_node), num("nl", j.nodes_listed), num("x", j.exclusive), num("a", j.array_tasks);
  num("t", j.time_limit_min);
  num("rq", j.requeue), num("sig", j.checkpoint_signal_s);
  num("sp", j.spare_nodes);  // --train-spare-nodes: an update is planned without them too
  if (!j.partition.empty()) add("p", j.partition);  // whole: read bounded and deduplicated
  // The intent, when short enough to keep: an update is then judged with the same plan.
  if (!j.model.empty() && j.model.size() <= 64) {
    add("m", j.model);
    char buf[64];
    snprintf(buf, sizeof buf, "%.6g", j.tokens), add("tok", buf);
    snprintf(buf, sizeof buf, "%.6g", j.single_gpu_hours), add("sgh", buf);
    snprintf(buf, sizeof buf, "%.6g", j.deadline_hours), add("dl", buf);
    add("st", j.strategy.substr(0, 16));
    if (j.eval_interval > 0 || j.eval_tokens > 0) {
      snprintf(buf, sizeof buf, "%.10g", j.eval_interval), add("ev", buf);
      snprintf(buf, sizeof buf, "%.6g", j.eval_tokens), add("evt", buf);
    }
    if (j.probe) add("pr", "1");  // a probe job stays judged on the probe budget
  }
  return r + "]";
}

std::string encode_ungoverned_record(const std::string& id) { return kOpen + encode(id) + ";ng=1]"; }

namespace {
std::optional<scaleguard::JobRequest> decode_at(const std::string& text, size_t open, bool* ungoverned, std::string* id);
}

std::optional<scaleguard::JobRequest> decode_record(const std::string& text, bool* ungoverned, std::string* id) {
  // The last record that decodes counts: ours is always written last, and an admin's note
  // with a stray "[sg=" (or a cut copy) before or after it must not hide it (issue 25, class 9).
  // At most 8 tries: a hostile AdminComment full of "[sg=" costs bounded time under the job lock.
  size_t open = text.rfind(kOpen);
  for (int tries = 0; open != std::string::npos && tries < 8; ++tries) {
    if (auto j = decode_at(text, open, ungoverned, id)) return j;
    if (open == 0) break;
    open = text.rfind(kOpen, open - 1);
  }
  return std::nullopt;
}

std::string summary_of(const std::string& admin_comment) {
  const auto at = admin_comment.find("scaleguard: ");
  if (at == std::string::npos) return "";
  std::string s = admin_comment.substr(at);
  if (auto rec = s.rfind(kOpen); rec != std::string::npos) s = s.substr(0, rec);
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

namespace {
std::optional<scaleguard::JobRequest> decode_at(const std::string& text, size_t open, bool* ungoverned, std::string* id) {
  const auto close = text.find(']', open);
  if (close == std::string::npos) return std::nullopt;
  bool ng = false;
  scaleguard::JobRequest j;
  const std::string body = text.substr(open + 1, close - open - 1);
  size_t b = 0;
  bool first = true;
  while (b <= body.size()) {
    size_t e = body.find(';', b);
    if (e == std::string::npos) e = body.size();
    const std::string item = body.substr(b, e - b);
    b = e + 1;
    const auto eq = item.find('=');
    if (eq == std::string::npos) return std::nullopt;
    const std::string k = item.substr(0, eq);
    std::string v;
    if (!decode(item.substr(eq + 1), &v)) return std::nullopt;
    if (first) {
      if (k != "sg") return std::nullopt;
      first = false;
      if (id) *id = v;
      continue;
    }
    int n = 0;
    bool ok = true;
    if (k == "gj") ok = to_int(v, &j.gpus_total);
    else if (k == "gn") ok = to_int(v, &j.gpus_per_node);
    else if (k == "gt") ok = to_int(v, &j.gpus_per_task);
    else if (k == "gs") ok = to_int(v, &j.gpus_per_socket);
    else if (k == "ty") j.gpu_type = v;
    else if (k == "n0") ok = to_int(v, &j.nodes_min);
    else if (k == "n1") ok = to_int(v, &j.nodes_max);
    else if (k == "nt") ok = to_int(v, &j.ntasks);
    else if (k == "tpn") ok = to_int(v, &j.ntasks_per_node);
    else if (k == "spn") ok = to_int(v, &j.sockets_per_node);
    else if (k == "tpg") ok = to_int(v, &j.ntasks_per_gpu);
    else if (k == "h") ok = to_int(v, &n) && n > 0, j.het_component = n - 1;  // offset + 1
    else if (k == "nl") ok = to_int(v, &j.nodes_listed);
    else if (k == "x") ok = to_int(v, &n), j.exclusive = n != 0;
    else if (k == "a") ok = to_int(v, &j.array_tasks);
    else if (k == "t") ok = to_int(v, &j.time_limit_min);
    else if (k == "rq") ok = to_int(v, &n), j.requeue = n != 0;
    else if (k == "sig") ok = to_int(v, &j.checkpoint_signal_s);
    else if (k == "sp") ok = to_int(v, &j.spare_nodes) && j.spare_nodes <= scaleguard::kMaxSpareNodes;
    else if (k == "p") j.partition = v;
    else if (k == "m") j.model = v;
    else if (k == "tok") ok = to_double(v, &j.tokens);
    else if (k == "sgh") ok = to_double(v, &j.single_gpu_hours);
    else if (k == "dl") ok = to_double(v, &j.deadline_hours);
    else if (k == "st") j.strategy = v;
    else if (k == "ev") ok = to_double(v, &j.eval_interval);
    else if (k == "evt") ok = to_double(v, &j.eval_tokens);
    else if (k == "pr") ok = to_int(v, &n), j.probe = n != 0;
    else if (k == "ng") ok = to_int(v, &n), ng = n != 0;
    if (!ok) return std::nullopt;
    if (e == body.size()) break;
  }
  if (ungoverned) *ungoverned = ng;
  return j;
}
}  // namespace

std::string annotated_admin_comment(const std::string& existing, const std::string& summary,
                                    const std::string& record) {
  std::string admin = one_line(existing, kMaxAdminComment);
  // A record already there (a requeued or re-judged job) is replaced, not stacked.
  if (auto at = admin.find("scaleguard: "); at != std::string::npos) admin = admin.substr(0, at);
  // A bare record (shadow mode, ungoverned) has no summary before it.
  if (auto at = admin.rfind(kOpen); at != std::string::npos && decode_record(admin.substr(at))) admin = admin.substr(0, at);
  while (!admin.empty() && (admin.back() == ' ' || admin.back() == '|')) admin.pop_back();
  const std::string sep = admin.empty() ? "" : " | ";
  const size_t room = kMaxAdminComment - 1;
  if (admin.size() + sep.size() + record.size() + 16 > room) {
    admin = one_line(admin, room > record.size() + 64 ? room - record.size() - 64 : 0);
  }
  const size_t left = room - admin.size() - sep.size() - record.size() - 1;
  if (summary.empty()) return admin + sep + record;
  return admin + sep + one_line(summary, left) + " " + record;
}

}  // namespace sg_slurm
