// Helpers for harnesses that build Slurm-owned job_desc_msg_t fields (slurm_stubs.cpp).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace sg_fuzz {

// A string / NULL-terminated env array from the stub allocator (what slurmctld would own).
char* slurm_alloc_string(const std::string& text);
char** slurm_alloc_env(const std::vector<std::string>& entries);
// Frees `size` entries and the array, as slurmctld frees a job_desc_msg_t's env arrays.
void slurm_free_env(char*** env, uint32_t size);

}  // namespace sg_fuzz
