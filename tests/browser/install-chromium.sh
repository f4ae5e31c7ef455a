#!/usr/bin/env bash
# Installs what the search page's browser tests (TestSearchPage) need: Debian's Chromium, driven
# headless by chromedp. Idempotent: a no-op when /usr/bin/chromium is there (KUBESEARCH_CHROMIUM
# names another binary). No browser is downloaded by a test tool: the machine's package manager is
# the only source, so the tests run where the network reaches only the package registries.
set -euo pipefail
chromium=${KUBESEARCH_CHROMIUM:-/usr/bin/chromium}
if [[ -x $chromium ]]; then
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "install-chromium: no apt-get; install Chromium and set KUBESEARCH_CHROMIUM to its binary" >&2
  exit 1
fi
sudo=""
[[ $(id -u) == 0 ]] || sudo=sudo
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
"$chromium" --version
