#!/usr/bin/env bash
# Stops exactly the processes the test bed started (by recorded PID and start time, never by name),
# then removes their state. Idempotent; safe after a crash.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

[[ -d $PID_DIR ]] || { rm -rf "$STATE_DIR"; exit 0; }
# Clients first (kwok, scheduler, controller-manager), then apiservers, then their stores, so nothing
# spends its shutdown retrying a dependency that is already gone. Each gets a bounded wait, then SIGKILL.
for pattern in '*-kwok' '*-scheduler' '*-controller-manager' '*-apiserver' '*-etcd' 'kafka*' 'opensearch*' '*'; do
  for pidfile in "$PID_DIR"/$pattern.pid; do
    [[ -e $pidfile ]] || continue
    name=$(basename "$pidfile" .pid)
    stop_service "$name" 10 &
  done
  wait
done
rm -rf "$STATE_DIR"
log "stopped and removed $STATE_DIR"
