# Sourced by .ci/run and scripts/test.sh: `phase NAME` closes the phase
# before it (printing how long it took) and opens NAME; at exit the last
# phase is closed and every phase's time is listed again, so a slow CI run
# says where its time went.
_phase_name=""
_phase_start=0
_phase_log=()
_phase_t0=$(date +%s)
_phase_close() {
  if [ -n "$_phase_name" ]; then
    local took=$(($(date +%s) - _phase_start))
    echo "== phase '$_phase_name': ${took} s"
    _phase_log+=("$(printf '%6d s  %s' "$took" "$_phase_name")")
    _phase_name=""
  fi
}
phase() {
  _phase_close
  _phase_name=$1
  _phase_start=$(date +%s)
  echo "== phase '$1' (started $(date -u +%H:%M:%S) UTC)"
}
_phase_summary() {
  local rc=$?
  _phase_close
  echo "== phases of ${0##*/} ($(($(date +%s) - _phase_t0)) s in all, exit $rc):"
  printf '%s\n' "${_phase_log[@]}"
  return $rc
}
trap _phase_summary EXIT
