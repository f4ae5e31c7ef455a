#!/usr/bin/env bash
# Installs what the packaging checks need beyond Go: Debian's docker-compose (1.29, Python), whose
# `docker-compose config` validates docker-compose.yml without a Docker engine. Idempotent: a no-op
# when it is installed. Helm needs nothing: the checks use its Go library (tests/packaging/tools).
set -euo pipefail
if command -v docker-compose >/dev/null 2>&1; then
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "install-tools: no apt-get; install docker-compose (pip install docker-compose, or Docker's compose plugin)" >&2
  exit 1
fi
sudo=""
[[ $(id -u) == 0 ]] || sudo=sudo
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends docker-compose >/dev/null
docker-compose version
