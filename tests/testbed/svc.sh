#!/usr/bin/env bash
# svc.sh ACTION NAME controls one test bed service by its recorded PID, for fault tests and people:
#   start   start it again with the exact command up.sh used ($STATE_DIR/svc/NAME.sh)
#   stop    SIGTERM, a bounded wait, then SIGKILL
#   kill    SIGKILL at once (kill -9), returning once the process is gone
#   pause   SIGSTOP            resume  SIGCONT
#   pid     print its PID if it runs
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

action=${1:?usage: svc.sh start|stop|kill|pause|resume|pid NAME}
name=${2:?usage: svc.sh start|stop|kill|pause|resume|pid NAME}
cmd="$STATE_DIR/svc/$name.sh"
[[ -x $cmd ]] || die "no service $name in $STATE_DIR (known: $(cd "$STATE_DIR/svc" && ls | sed 's/\.sh$//' | tr '\n' ' '))"

# running_pid prints the recorded PID when that very process still runs.
running_pid() {
  local pid started
  [[ -f $PID_DIR/$name.pid ]] || return 0
  read -r pid started < "$PID_DIR/$name.pid"
  [[ $(proc_start "$pid") == "$started" ]] && echo "$pid"
  return 0
}

pid=$(running_pid)
case $action in
  start)
    [[ -z $pid ]] || die "$name already runs as PID $pid"
    start_service "$name" ;;
  stop) stop_service "$name" "${3:-10}" ;;
  kill)
    # SIGKILL is delivered at once but a large process takes a moment to go (a JVM's heap is
    # unmapped): wait for it, so a start right after never finds it still running.
    if [[ -n $pid ]]; then
      kill -KILL "$pid"
      for ((i = 0; i < 300; i++)); do [[ -n $(running_pid) ]] || break; sleep 0.1; done
    fi ;;
  pause) [[ -n $pid ]] || die "$name does not run"; kill -STOP "$pid" ;;
  resume) [[ -n $pid ]] || die "$name does not run"; kill -CONT "$pid" ;;
  pid) [[ -n $pid ]] && echo "$pid" ;;
  *) die "unknown action $action" ;;
esac
