# The tight policy of the envelope property test, shared by tests/slurm/envelope_property.bats
# and scripts/soak-envelope (source it; plain bash, no bats).
#
# prop_tighten_policy SETTINGS DIR CAP [PARTITION=PCAP]
#   Copies the policy that SETTINGS (the cluster's etc/job_submit_scaleguard.conf) names into
#   DIR/policy.ini with `max_job_gpu_hours = CAP reject`, `max_array_gpu_hours = CAP reject`
#   when `scaleguard policy check` accepts that rule, `mode = enforce` where the policy has a
#   mode, and no `trusted_users`; every other rule stays as shipped. With PARTITION=PCAP, that
#   partition's section (when the policy has one) gets its own `max_job_gpu_hours = PCAP
#   rewrite`: the plugin cuts the time there, and the other caps (the array cap, the other
#   partitions of a list) must still hold on what the cut leaves (issue 25, classes 5 and 6).
#   Points SETTINGS at the copy (the original is kept as DIR/settings.orig; restart slurmctld
#   afterwards). Prints the property script's arguments for it:
#   `--cap CAP [--array-cap CAP] [--partition-cap PARTITION=PCAP]`.
# prop_make_reservation USER / prop_drop_reservation
#   A reservation `sgprop` of USER on gpu-spot's nodes with PartitionName=gpu-spot, starting in
#   a year (so it holds no node now): a job naming it without -p runs in gpu-spot, which Slurm
#   decides after job_submit. The property script (reservation_now) moves such a job into a
#   copy that starts now, `sgprop-now`, while it releases it, and back after, so Slurm's
#   allocation decides those shapes too; prop_drop_reservation also drops a copy an
#   interrupted run left. Prints `--reservation sgprop`, or nothing (with the reason on
#   stderr) where the cluster has no gpu-spot or Slurm refuses.
# prop_restore_policy SETTINGS DIR
#   Puts the original SETTINGS back (restart slurmctld afterwards).
prop_tighten_policy() {
  local settings=$1 dir=$2 cap=$3 pcap=${4:-} policy catalog checker=${SCALEGUARD_BUILD_DIR:-build}/cli/scaleguard
  policy=$(sed -n 's/^policy=//p' "$settings" | tail -n 1)
  [ -r "$policy" ] || { echo "prop_tighten_policy: no readable policy= in $settings" >&2; return 1; }
  cp "$settings" "$dir/settings.orig"
  cp "$policy" "$dir/policy.ini"
  # The catalog stays where it is: its path made absolute (it is relative to the policy).
  catalog=$(sed -n 's/^catalog *= *\([^ #]*\).*/\1/p' "$policy" | head -n 1)
  [ -n "$catalog" ] && [ "${catalog:0:1}" != / ] &&
    sed -i "s|^catalog *=.*|catalog = $(cd "$(dirname "$policy")" && pwd)/$catalog|" "$dir/policy.ini"
  if grep -q '^max_job_gpu_hours *=' "$dir/policy.ini"; then
    sed -i "s/^max_job_gpu_hours *=.*/max_job_gpu_hours = $cap reject/" "$dir/policy.ini"
  else
    sed -i "/^\[rules\]/a max_job_gpu_hours = $cap reject" "$dir/policy.ini"
  fi
  sed -i -e 's/^mode *=.*/mode = enforce/' -e '/^trusted_users *=/d' "$dir/policy.ini"
  local args="--cap $cap"
  if ! grep -q '^max_array_gpu_hours *=' "$dir/policy.ini"; then
    cp "$dir/policy.ini" "$dir/policy.try"
    sed -i "/^\[rules\]/a max_array_gpu_hours = $cap reject" "$dir/policy.try"
    # The rule is new (issue 13): use it only where this build's checker knows it.
    if [ -x "$checker" ] && "$checker" policy check "$dir/policy.try" >/dev/null 2>&1; then
      mv "$dir/policy.try" "$dir/policy.ini"
    else
      rm -f "$dir/policy.try"
    fi
  fi
  if grep -q '^max_array_gpu_hours *=' "$dir/policy.ini"; then
    sed -i "s/^max_array_gpu_hours *=.*/max_array_gpu_hours = $cap reject/" "$dir/policy.ini"
    args+=" --array-cap $cap"
  fi
  if [ -n "$pcap" ] && grep -q "^\[partition ${pcap%%=*}\]" "$dir/policy.ini"; then
    sed -i -e "/^\[partition ${pcap%%=*}\]/,/^\[/{/^max_job_gpu_hours *=/d}" \
      -e "/^\[partition ${pcap%%=*}\]/a max_job_gpu_hours = ${pcap#*=} rewrite" "$dir/policy.ini"
    args+=" --partition-cap $pcap"
  fi
  local out
  if [ -x "$checker" ] && ! out=$("$checker" policy check "$dir/policy.ini" 2>&1); then
    echo "prop_tighten_policy: $dir/policy.ini does not pass the checker: $out" >&2
    return 1
  fi
  chmod -R a+rX "$dir"
  sed -i "s|^policy=.*|policy=$dir/policy.ini|" "$settings"
  echo "$args"
}

prop_restore_policy() {
  [ -f "$2/settings.orig" ] && cp "$2/settings.orig" "$1"
}

prop_make_reservation() {
  local out
  if ! out=$(scontrol create reservation ReservationName=sgprop StartTime=now+365days \
      Duration=1-00:00:00 Users="$1" PartitionName=gpu-spot Nodes=ALL 2>&1); then
    echo "prop_make_reservation: no reservation shapes: $out" >&2
    return 0
  fi
  echo "--reservation sgprop"
}

prop_drop_reservation() {
  # Slurm refuses to delete a reservation while a job that ran in it is still completing (a
  # cancelled release can take tens of seconds): retried for up to 90 s each. A copy left
  # behind holds both nodes for 300 days and every later file's jobs pend on "Resources".
  local r i
  for r in sgprop-now sgprop; do
    for ((i = 0; i < 180; i++)); do
      scontrol show reservation "$r" >/dev/null 2>&1 || break
      scontrol delete ReservationName="$r" >/dev/null 2>&1 && break
      sleep 0.5
    done
    if scontrol show reservation "$r" >/dev/null 2>&1; then
      echo "prop_drop_reservation: reservation $r is still there: $(squeue -h -R "$r" -o '%i %T' | tr '\n' ' ')" >&2
      return 1
    fi
  done
}
