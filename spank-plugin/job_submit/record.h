// What job_submit judged, kept in the job's AdminComment (users cannot edit it) so that
// job_modify can judge an update against the job's whole request: "[sg=ID;key=value;...]"
// after the plan summary. Values are percent-encoded; the record stays under 512 bytes.
#pragma once
#include <optional>
#include <string>

#include "scaleguard/decide.h"

namespace sg_slurm {

// The record of `job` (the request as the job now holds it, rewrites and bounds applied).
std::string encode_record(const std::string& id, const scaleguard::JobRequest& job);
// The record of a job judged in no governed partition: "[sg=ID;ng=1]". Every job gets a
// record, so a job without one (submitted before the plugin, or its AdminComment lost) is
// known as such and its updates fail closed.
std::string encode_ungoverned_record(const std::string& id);
// The request recorded in an AdminComment (the last record there that decodes), or nothing
// when it holds no valid record; *ungoverned (when given) says whether it is an ungoverned one,
// *id (when given) is the record's decision id.
std::optional<scaleguard::JobRequest> decode_record(const std::string& admin_comment, bool* ungoverned = nullptr,
                                                    std::string* id = nullptr);
// The plan summary in an AdminComment ("scaleguard: ..." up to the record), or "".
std::string summary_of(const std::string& admin_comment);
// AdminComment text: the admin's own text (kept), then our summary and record, within Slurm's
// 1,024 bytes; the record is never cut (the summary is shortened instead).
std::string annotated_admin_comment(const std::string& existing, const std::string& summary,
                                    const std::string& record);

}  // namespace sg_slurm
