#!/usr/bin/env bash
# check-needed.sh SO...: every shared object's readelf -d NEEDED is the C/C++ runtime only
# (libc, libstdc++, libm, libgcc_s, and the dynamic loader itself). A plugin dlopen'd into
# slurmctld or slurmstepd must not need Boost or any library a Slurm node may lack.
set -euo pipefail
allowed='^(libc\.so\.6|libstdc\+\+\.so\.6|libm\.so\.6|libgcc_s\.so\.1|ld-linux-x86-64\.so\.2)$'
rc=0
for so in "$@"; do
  [[ -f $so ]] || { echo "FAIL: $so does not exist" >&2; rc=1; continue; }
  needed=$(readelf -d "$so" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
  bad=$(grep -Ev "$allowed" <<<"$needed" || true)
  if [[ -n $bad ]]; then
    echo "FAIL: $so needs non-system libraries: $(echo $bad)" >&2
    rc=1
  else
    echo "ok: $so needs $(echo $needed)"
  fi
done
exit $rc
