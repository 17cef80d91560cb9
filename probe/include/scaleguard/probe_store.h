// The probe store (issue 16): a directory on shared storage where `scaleguard probe` leaves one
// small record per (model fingerprint, instance type, layout, writer), and from which
// `scaleguard decide` and job_submit/scaleguard (inside slurmctld) read the measurements the
// policy acts on. I/O lives here; the planner's decide() only receives the records as data.
//
// Trust comes from the file's owner, never from its contents (docs/policy.md, "Probes"):
// files of root, SlurmUser and the policy's trusted_users apply to every job (Trust::admin);
// a user's own files apply to that user's jobs only (Trust::own, decide() lets them only
// tighten); everybody else's are ignored.
#pragma once
#include <sys/types.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "scaleguard/measurement.h"
#include "scaleguard/result.h"

namespace scaleguard::probe {

constexpr std::size_t kMaxRecordBytes = 4096;   // a record is ~500 bytes
constexpr std::size_t kMaxOwnerEntries = 1024;  // names in one owner's directory; more: that owner's records are not used
constexpr std::size_t kMaxOwnerRecords = 256;   // records kept per owner and model
constexpr int kMaxRescansPerSecond = 8;         // per model; a churning directory is served from the cache

// key=value lines, one record (format_record writes exactly what parse_record accepts).
std::string format_record(const Measurement& m, const std::string& model_spec = "");
Result<Measurement> parse_record(std::string_view text);

// "<fingerprint>.<instance>.r<ranks>n<nodes>.u<uid>.rec": one file per key and writer, replaced
// atomically by each new probe of that writer.
std::string record_name(const Measurement& m, uid_t uid);

// Each writer's records live in its own directory `<store>/u<uid>` (probe/README.md): only its
// owner can add names there, so nobody's files can hide or slow down another owner's records.
std::string owner_dir(const std::string& store, uid_t uid);

// Writes the record into the calling user's directory of `store` (made 0755 on first use, used
// only if it is the caller's and not writable by others): a temporary file in that directory
// (O_CREAT|O_EXCL|O_NOFOLLOW), fsync, rename over the record, fsync of the directory. Readers
// never see a partial record. Returns the record's path.
Result<std::string> write_record(const std::string& store, const Measurement& m, const std::string& model_spec = "");

// Why a store or a record was not used (for logs); empty when all was well.
struct ReadReport {
  std::vector<std::string> problems;
};

// Bounded, exception-free reading with a cache keyed by each owner directory's identity and
// mtime: a lookup costs one lstat() per owner that counts (the admins and the job's user) when
// their directories did not change; the store's own listing is never read. Thread-safe.
class StoreReader {
 public:
  StoreReader();
  ~StoreReader();
  StoreReader(const StoreReader&) = delete;
  StoreReader& operator=(const StoreReader&) = delete;
  // The records of `fingerprint` that a job of `job_uid` may use, each with its Trust set from
  // its file's owner: read from `<dir>/u<uid>` of each uid in `admins` (-> admin) and of
  // `job_uid` (-> own); others' directories are never opened. A store that others could tamper
  // with (writable by group/others without the sticky bit, or owned by a user not in `admins`)
  // is not used at all; an owner directory not owned by its uid, writable by others or with more
  // than kMaxOwnerEntries names is not used (that owner's records only).
  std::vector<Measurement> lookup(const std::string& dir, const std::string& fingerprint, uid_t job_uid,
                                  const std::vector<uid_t>& admins, ReadReport* report = nullptr) noexcept;
  // How many directory scans the reader made (tests check the cache).
  long scans() const noexcept;

 private:
  struct Owned {
    Measurement m;
    uid_t owner;
  };
  static void scan_owner(int store_fd, const std::string& store, uid_t owner, const std::string& fingerprint,
                         std::vector<Owned>* records, std::vector<std::string>* problems);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace scaleguard::probe
