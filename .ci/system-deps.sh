#!/usr/bin/env bash
# Debian packages the tests use, installed only where missing (`make test` runs this):
#   chromium     renders report.html in a test (Debian's package, no browser download)
#   nginx-light  the load balancer in front of shop replicas (harness/run/kinds/replicas/balancer.py)
#   nodejs, npm  targets/node-gateway (seed 003's opossum target; command/url/docker builds)
#   postgresql   Debian's server, started per test session by tests/postgres.py (spring-shop
#                on PostgreSQL behind the harness's TCP proxy); no cluster of its own
#   docker.io    a Docker Engine for the docker builds, started by .ci/docker-engine.sh,
#                with the registry-free base image harness-base:bookworm
# Needs root (apt-get). Without root it says what is missing and stops there: the tests
# that need a missing part skip, each saying why.
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || missing+=(nginx-light)
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
compgen -G '/usr/lib/postgresql/*/bin/postgres' >/dev/null || missing+=(postgresql)

if [ "$(id -u)" != 0 ]; then
  if [ ${#missing[@]} -gt 0 ]; then
    echo "system-deps: not root; missing Debian packages: ${missing[*]} (their tests will skip)"
  fi
  exit 0
fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "system-deps: installing ${missing[*]}"
  apt-get update -qq
  # Debian's postgresql creates and starts a cluster on 5432 at install; the tests start
  # their own, so none is made (a file the package keeps: it never overwrites a changed one).
  if [[ " ${missing[*]} " == *" postgresql "* ]]; then
    mkdir -p /etc/postgresql-common/createcluster.d
    echo "create_main_cluster = false" >/etc/postgresql-common/createcluster.d/harness.conf
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
bash .ci/docker-engine.sh
