-- The raw-request part of configs/policy.ini written as a job_submit/lua filter, for the
-- throughput comparison in submit_throughput.sh: count GPUs, take the time limit (partition
-- default when unset), refuse a multi-GPU job below the distributed minimum of GPU-hours,
-- annotate the job and tell the user.
local MIN_GPU_HOURS = 100      -- distributed_min_gpu_hours
local DEFAULT_MINUTES = 60     -- the partitions' default_time
local NO_VAL = 4294967294

local function gpu_count(tres)
  if tres == nil then return 0 end
  for entry in string.gmatch(tres, "[^,]+") do
    local n = string.match(entry, "^gres[:/]gpu:[%w%-_]*:?(%d+)$")
    if n then return tonumber(n) end
    if entry == "gres:gpu" or entry == "gres/gpu" then return 1 end
  end
  return 0
end

function slurm_job_submit(job_desc, part_list, submit_uid)
  local nodes = job_desc.min_nodes ~= NO_VAL and job_desc.min_nodes or 1
  local tasks = job_desc.num_tasks ~= NO_VAL and job_desc.num_tasks or 1
  local gpus = gpu_count(job_desc.tres_per_job) + gpu_count(job_desc.tres_per_node) * nodes
             + gpu_count(job_desc.tres_per_task) * tasks
  local minutes = job_desc.time_limit ~= NO_VAL and job_desc.time_limit or DEFAULT_MINUTES
  local gpu_hours = gpus * minutes / 60
  if gpus > 1 and gpu_hours < MIN_GPU_HOURS then
    slurm.log_user(string.format("policy: %d GPUs for %.1f GPU-hours < %d: use one GPU",
                                 gpus, gpu_hours, MIN_GPU_HOURS))
    return slurm.ERROR
  end
  local summary = string.format("policy: accept %d GPUs, %.1f GPU-hours", gpus, gpu_hours)
  job_desc.comment = summary
  slurm.log_user(summary)
  return slurm.SUCCESS
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
  return slurm.SUCCESS
end
