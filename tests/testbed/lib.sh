# Shared settings of the test bed scripts. Sourced, never run.
# Everything built or downloaded lives outside the clone, keyed by version, so a fresh clone reuses it.

K8S_VERSION=v1.37.2
ETCD_VERSION=v3.7.0   # the etcd server k8s.io/kubernetes $K8S_VERSION pins
KWOK_VERSION=v0.8.0
HELM_VERSION=v3.22.0  # the e2e's Helm client (build-helm.sh), not part of the running test bed
# The e2e's other real clients (TestRealClients), none part of the running test bed either.
K9S_VERSION=v0.50.16                 # build-k9s.sh
PYTHON_KUBERNETES_VERSION=37.0.2     # build-python-client.sh (tests/clients/python/requirements.txt pins it)
CONTROLLER_RUNTIME_VERSION=v0.25.2   # build-controller-runtime.sh (tests/clients/controllerruntime/go.mod)
KAFKA_VERSION=4.4.0
OPENSEARCH_VERSION=2.19.6

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
TOOLS_DIR="$ROOT/tests/tools"
CACHE_DIR=${KUBESEARCH_CACHE:-$HOME/.cache/kubesearch}
BIN_DIR="$CACHE_DIR/bin/k8s-$K8S_VERSION-etcd-$ETCD_VERSION-kwok-$KWOK_VERSION"
HELM_BIN_DIR="$CACHE_DIR/bin/helm-$HELM_VERSION" # apart from BIN_DIR: adding Helm rebuilds no Kubernetes
K9S_BIN_DIR="$CACHE_DIR/bin/k9s-$K9S_VERSION"
CLIENTS_DIR="$ROOT/tests/clients"
STATE_DIR=${KUBESEARCH_TESTBED_DIR:-$ROOT/.testbed}
LOG_DIR="$STATE_DIR/logs"
PID_DIR="$STATE_DIR/pids"

log() { printf '%s testbed: %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# run_service NAME ARGV... starts ARGV as the test bed service NAME in its own session, appending to
# $LOG_DIR/NAME.log and recording its PID. The command is kept in $STATE_DIR/svc/NAME.sh so the Go test
# helper (and a person) can restart exactly the same service after a kill.
run_service() {
  local name=$1; shift
  mkdir -p "$LOG_DIR" "$PID_DIR" "$STATE_DIR/svc"
  local cmd="$STATE_DIR/svc/$name.sh"
  { echo '#!/usr/bin/env bash'; printf 'exec'; printf ' %q' "$@"; echo; } > "$cmd"
  chmod +x "$cmd"
  start_service "$name"
}

# start_service NAME (re)starts the recorded command of service NAME.
start_service() {
  local name=$1
  echo "==== $(date -u +%FT%TZ) starting $name" >>"$LOG_DIR/$name.log"
  # Without job control, setsid does not fork, so $! is the service itself (its script execs it).
  setsid "$STATE_DIR/svc/$name.sh" >>"$LOG_DIR/$name.log" 2>&1 < /dev/null &
  local pid=$!
  echo "$pid $(proc_start "$pid")" > "$PID_DIR/$name.pid"
}

# stop_service NAME [WAIT] sends SIGTERM to the recorded PID, waits up to WAIT (10) seconds, then
# SIGKILLs it. The PID file also records the process start time, so a PID reused by an unrelated process
# after a crash is never signalled.
stop_service() {
  local name=$1 wait=${2:-10} pidfile="$PID_DIR/$1.pid" pid started
  [[ -f $pidfile ]] || return 0
  read -r pid started < "$pidfile"
  if [[ -n $pid && $(proc_start "$pid") == "$started" ]]; then
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < wait * 10; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then
      log "$name did not stop in ${wait}s, SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
    fi
  fi
  rm -f "$pidfile"
}

# proc_start PID prints the kernel's start time of PID (field 22 of /proc/PID/stat), empty if gone.
proc_start() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 0
  stat=${stat##*) }            # the command name may hold spaces; fields after it do not
  awk '{print $20}' <<<"$stat" # field 22 overall is the 20th after "pid (comm)"
}

# wait_for DESC TIMEOUT_SECONDS CMD... polls CMD until it succeeds.
wait_for() {
  local desc=$1 timeout=$2; shift 2
  local deadline=$(( $(date +%s) + timeout ))
  until "$@" >/dev/null 2>&1; do
    (( $(date +%s) < deadline )) || { log "timed out after ${timeout}s waiting for $desc"; return 1; }
    dead_services && return 1
    sleep 0.2
  done
}

# wait_service NAME DESC STALL CMD... polls CMD until it succeeds, while service NAME makes progress:
# it gives up at once when a started service has died, when NAME's log has not grown for STALL seconds,
# or after 4 × STALL in all. On a busy machine a service starts slower but keeps logging as it goes, so
# the bound follows the machine's pace instead of a wall clock a loaded machine overruns.
wait_service() {
  local name=$1 desc=$2 stall=$3; shift 3
  local log_file="$LOG_DIR/$name.log" start=$SECONDS last=$SECONDS size seen=-1
  until "$@" >/dev/null 2>&1; do
    dead_services && return 1
    size=$(stat -c %s "$log_file" 2>/dev/null || echo 0)
    if [[ $size != "$seen" ]]; then seen=$size last=$SECONDS; fi
    if (( SECONDS - last >= stall || SECONDS - start >= 4 * stall )); then
      log "gave up waiting for $desc after $((SECONDS - start))s ($name's log quiet for $((SECONDS - last))s); the end of $log_file:"
      tail -n 30 "$log_file" >&2
      return 1
    fi
    sleep 0.2
  done
}

# dead_services succeeds (and shows the end of its log) when a started service has died, so a wait
# fails at once with the reason instead of running into its timeout.
dead_services() {
  local pidfile name pid started
  for pidfile in "$PID_DIR"/*.pid; do
    [[ -e $pidfile ]] || continue
    name=$(basename "$pidfile" .pid)
    read -r pid started < "$pidfile"
    if [[ $(proc_start "$pid") != "$started" ]]; then
      log "$name died; the end of $LOG_DIR/$name.log:"
      tail -n 20 "$LOG_DIR/$name.log" >&2
      return 0
    fi
  done
  return 1
}

# free_port prints a loopback TCP port nobody listens on now. It picks below the kernel's ephemeral
# range: a port from that range (what binding port 0 returns) can be taken by any outgoing connection
# between this check and the service's own bind, which once made OpenSearch fail with "Address already
# in use". Ports handed out before are remembered in $STATE_DIR/ports, so two services started in one
# run never get the same port before either has bound it.
free_port() {
  mkdir -p "$STATE_DIR"
  PORTS_FILE="$STATE_DIR/ports" python3 - <<'PY'
import os, random, socket
path = os.environ["PORTS_FILE"]
taken = set(open(path).read().split()) if os.path.exists(path) else set()
low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
for _ in range(1000):
    port = random.randrange(10000, max(low, 10001))
    if str(port) in taken:
        continue
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
    except OSError:
        continue
    finally:
        s.close()
    with open(path, "a") as f:
        f.write(f"{port}\n")
    print(port)
    break
else:
    raise SystemExit("free_port: no free port below the ephemeral range")
PY
}

# go_install_tool NAME VERSION DIR LDFLAGS PACKAGE installs a Go command of its own module (its own
# dependency graph, like kwok, Helm and k9s) into DIR, a version-keyed cache folder, unless DIR
# holds it already; the binary is DIR/NAME. It builds into DIR.tmp and renames, so an interrupted
# build never leaves a half folder that looks done.
go_install_tool() {
  local name=$1 version=$2 dir=$3 ldflags=$4 pkg=$5
  [[ -x "$dir/$name" ]] && return 0
  local start
  start=$(date +%s)
  log "building $name $version from the Go module proxy"
  rm -rf "$dir.tmp" && mkdir -p "$dir.tmp"
  GOBIN="$dir.tmp" GOFLAGS=-trimpath go install -ldflags "$ldflags" "$pkg@$version"
  rm -rf "$dir" && mv "$dir.tmp" "$dir"
  log "built $name in $(( $(date +%s) - start ))s into $dir"
}
