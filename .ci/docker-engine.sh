#!/usr/bin/env bash
# Provision a local Docker Engine and the registry-free base image harness-base:bookworm.
#
#   bash .ci/docker-engine.sh          # install + start dockerd + build image (idempotent)
#   bash .ci/docker-engine.sh stop     # stop the dockerd this script started, cleanly
#
# Why it looks like this (measured on this machine kind: Debian bookworm VM, root, cgroup v1,
# no container registry reachable, only Debian/PyPI/npm):
#   * Debian's docker.io (20.10.24, API 1.41) is installed; no systemd here, so dockerd is
#     started by hand in the background.  The preinstalled /usr/local/bin/docker (28.x client)
#     also talks to it (negotiates API 1.41), but this script uses Debian's /usr/bin/docker.
#   * dockerd runs with --iptables=false --ip6tables=false --bridge=none: there is no default
#     bridge network, so containers AND `docker build` must use host networking
#     (`--network host` / network_mode="host"); without it a container only has `lo`.
#   * Storage driver overlay2 works on this ext4 root; vfs is used only if dockerd refuses
#     overlay2 (vfs works here too, but is far slower).
#   * Safe after a hard kill (as when a session ends): stale pid files / zombie pids are handled;
#     containers that were running come back as Exited, so tests should clean up by label.
#   * The base image is made without a registry: debootstrap (minbase) from the apt mirror
#     configured on the host -> `docker import` -> harness-base:bookworm-minbase, then a
#     `docker build --network host` layer adds Debian's nodejs + npm -> harness-base:bookworm.
#     (debootstrap --include=nodejs,npm does NOT work: its resolver cannot follow the virtual
#     packages npm depends on, e.g. node-has.)
#
# Env overrides: HARNESS_BASE_IMAGE (default harness-base:bookworm),
#                HARNESS_DOCKER_STORAGE (default: overlay2; vfs only if overlay2 is refused),
#                HARNESS_DOCKER_FORCE_REBUILD=1 (rebuild the images even if present).
set -euo pipefail

SUITE=bookworm
IMAGE=${HARNESS_BASE_IMAGE:-harness-base:bookworm}
MINBASE_IMAGE=${IMAGE}-minbase
LOG=/var/log/harness-dockerd.log
PIDFILE=/var/run/docker.pid
DOCKERD_FLAGS=(--iptables=false --ip6tables=false --bridge=none)
WAIT_MAX=60

say() { echo "[docker-engine] $*"; }
now() { echo "${EPOCHREALTIME/,/.}"; }
T_ALL=$(now)
step_begin() { STEP=$1; T0=$(now); }
step_end() { awk -v a="$T0" -v b="$(now)" -v s="$STEP" -v m="${1:-}" \
  'BEGIN { printf "[docker-engine] %-26s %7.1f s  %s\n", s, b - a, m }'; }

docker_bin() { if [ -x /usr/bin/docker ]; then echo /usr/bin/docker; else command -v docker; fi; }
docker_cli() { "$(docker_bin)" "$@"; }
daemon_up() { timeout 15 "$(docker_bin)" info >/dev/null 2>&1; }
# Is pid $1 a live (non-zombie) process named $2?  After a hard kill the old pids can linger as
# zombies (pid 1 here reaps slowly), and /run is on the root disk, so pid files survive reboots.
proc_alive() {
  [ -n "${1:-}" ] && [ "$(cat "/proc/$1/comm" 2>/dev/null)" = "$2" ] || return 1
  [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" != Z ]
}
dockerd_alive() { proc_alive "${1:-}" dockerd; }

# ---------------------------------------------------------------- stop
if [ "${1:-}" = stop ]; then
  if [ -f "$PIDFILE" ] && pid=$(cat "$PIDFILE") && dockerd_alive "$pid"; then
    say "stopping dockerd (pid $pid) with SIGTERM"
    kill -TERM "$pid"
    for _ in $(seq 1 30); do dockerd_alive "$pid" || break; sleep 1; done
    if dockerd_alive "$pid"; then say "dockerd still running after 30 s"; exit 1; fi
    umount /run/docker/netns/default 2>/dev/null || true
    say "dockerd stopped"
  else
    say "no dockerd running (pidfile $PIDFILE)"
  fi
  exit 0
fi

# Serialise concurrent runs (two test sessions provisioning at once).
exec 9>/var/lock/harness-docker-engine.lock
flock -w 600 9 || { say "another docker-engine.sh still holds /var/lock/harness-docker-engine.lock"; exit 1; }

# ---------------------------------------------------------------- 1. packages
step_begin "install packages"
missing=()
command -v dockerd >/dev/null 2>&1 || missing+=(docker.io)   # not `docker`: a client is preinstalled
command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
if [ ${#missing[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  step_end "installed: ${missing[*]} ($(dockerd --version))"
else
  step_end "already installed ($(dockerd --version))"
fi

# ---------------------------------------------------------------- 2. daemon
start_dockerd() {  # $1 = storage driver; sets DPID, OURS=1 if this call started it
  OURS=0
  if [ -f "$PIDFILE" ]; then
    local old; old=$(cat "$PIDFILE" 2>/dev/null || true)
    if dockerd_alive "$old"; then
      say "dockerd pid $old exists but does not answer yet; waiting for it"
      DPID=$old; return 0
    fi
    rm -f "$PIDFILE"   # stale (e.g. the machine's processes were killed)
  fi
  # dockerd reuses the containerd named in this pid file if kill -0 succeeds, which it does for a
  # zombie or a recycled pid: it then times out after 10 s and exits ("failed to start containerd").
  local cpf=/var/run/docker/containerd/containerd.pid
  if [ -f "$cpf" ] && ! proc_alive "$(cat "$cpf" 2>/dev/null)" containerd; then rm -f "$cpf"; fi
  mkdir -p "$(dirname "$LOG")"; touch "$LOG"
  LOGSTART=$(wc -l <"$LOG")
  echo "=== $(date -Is) starting dockerd ${DOCKERD_FLAGS[*]} --storage-driver=$1" >>"$LOG"
  # 9>&-: the daemon (and its containerd shims) must not inherit this script's flock fd.
  nohup setsid dockerd "${DOCKERD_FLAGS[@]}" --storage-driver="$1" >>"$LOG" 2>&1 </dev/null 9>&- &
  DPID=$! OURS=1
}
wait_dockerd() {  # returns 0 when `docker info` answers, 1 if dockerd died, 2 on timeout
  local t0=$SECONDS
  while [ $((SECONDS - t0)) -lt $WAIT_MAX ]; do
    daemon_up && return 0
    dockerd_alive "$DPID" || return 1
    sleep 0.5
  done
  return 2
}

step_begin "start dockerd"
if daemon_up; then
  step_end "already answering ($(docker_cli info --format '{{.ServerVersion}}, storage {{.Driver}}'))"
else
  rc=0
  driver=${HARNESS_DOCKER_STORAGE:-overlay2}
  start_dockerd "$driver"; wait_dockerd || rc=$?
  if [ $rc -eq 1 ] && [ $OURS = 0 ]; then   # the old daemon we waited for went away: start ours
    rc=0; start_dockerd "$driver"; wait_dockerd || rc=$?
  fi
  # Fall back to vfs only if overlay2 itself was refused (vfs works but is very slow:
  # measured 84 s instead of 40 s for the node layer, 40 s instead of 1 s to start a container).
  if [ $rc -eq 1 ] && [ "$driver" = overlay2 ] && [ $OURS = 1 ] &&
     tail -n +"$((LOGSTART + 1))" "$LOG" | grep -qiE 'graphdriver|overlay.*(not supported|invalid argument)'; then
    tail -n +"$((LOGSTART + 1))" "$LOG" | grep -iE 'level=(error|fatal)|failed to start' | tail -n 3 >&2 || true
    say "dockerd refused overlay2; retrying with vfs (log: $LOG)"
    driver=vfs rc=0
    start_dockerd vfs; wait_dockerd || rc=$?
  fi
  if [ $rc -ne 0 ]; then
    say "dockerd did not come up (rc=$rc); last log lines:"
    tail -n 30 "$LOG" >&2
    exit 1
  fi
  step_end "started pid $DPID, storage $driver, log $LOG"
fi

# ---------------------------------------------------------------- 3. base image
image_exists() { docker_cli image inspect "$1" >/dev/null 2>&1; }
# The host's own extra CAs (/usr/local/share/ca-certificates: a TLS-inspecting proxy's, a
# company's) go into the base image too, so npm (and apt over https) in `docker build` trust
# what the host trusts: without them `npm ci` in targets/node-gateway/Dockerfile fails with
# SELF_SIGNED_CERT_IN_CHAIN here. The image's label records which; when they change, the
# nodejs layer is built again (the apt layer comes from the build cache).
extra_ca_sum() { cat /usr/local/share/ca-certificates/*.crt 2>/dev/null | sha256sum | cut -c1-16; }
EXTRA_CA=$(extra_ca_sum)
image_current() {
  image_exists "$1" && [ "$(docker_cli image inspect \
    -f '{{index .Config.Labels "harness.base.extra-ca"}}' "$1" 2>/dev/null)" = "$EXTRA_CA" ]
}

apt_uri() {  # first deb URI the host's apt config uses for suite $1 (deb822 or one-line format)
  local suite=$1 uri="" f
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    uri=$(awk -v s="$suite" 'BEGIN { RS = ""; FS = "\n" }
      { u = ""; ok = 0; en = 1
        for (i = 1; i <= NF; i++) { l = $i
          if (l ~ /^URIs:/)    { sub(/^URIs:[ \t]*/, "", l); split(l, a, /[ \t]+/); u = a[1] }
          if (l ~ /^Suites:/)  { sub(/^Suites:[ \t]*/, "", l); n = split(l, b, /[ \t]+/)
                                 for (j = 1; j <= n; j++) if (b[j] == s) ok = 1 }
          if (l ~ /^Types:/ && l !~ /[ \t]deb([ \t]|$)/) en = 0
          if (l ~ /^Enabled:[ \t]*[Nn]o/) en = 0 }
        if (ok && en && u != "") { print u; exit } }' "$f")
    [ -n "$uri" ] && break
  done
  if [ -z "$uri" ]; then
    uri=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null | awk -v s="$suite" '
      $1 == "deb" { i = 2; if ($2 ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ }
                    if ($(i + 1) == s) { print $i; exit } }')
  fi
  echo "$uri"
}

WORK=""
cleanup() {
  [ -n "$WORK" ] && [ -d "$WORK" ] || return 0
  # debootstrap mounts proc/sys inside the target; never delete through a mount.
  findmnt -rn -o TARGET | grep -F "$WORK/" | sort -r | xargs -r -n1 umount -l 2>/dev/null || true
  rm -rf --one-file-system "$WORK"
}
trap cleanup EXIT

if [ "${HARNESS_DOCKER_FORCE_REBUILD:-0}" = 1 ]; then
  docker_cli image rm -f "$IMAGE" "$MINBASE_IMAGE" >/dev/null 2>&1 || true
fi

if image_current "$IMAGE"; then
  step_begin "base image"; step_end "$IMAGE present"
else
  if image_exists "$MINBASE_IMAGE"; then
    step_begin "debootstrap + import"; step_end "$MINBASE_IMAGE present"
  else
    MIRROR=$(apt_uri "$SUITE"); MIRROR=${MIRROR:-http://deb.debian.org/debian}
    SECURITY=$(apt_uri "$SUITE-security")
    WORK=$(mktemp -d /var/tmp/harness-base.XXXXXX)
    ROOTFS=$WORK/rootfs
    step_begin "debootstrap"
    if ! debootstrap --variant=minbase --include=ca-certificates "$SUITE" "$ROOTFS" "$MIRROR" \
        >"$WORK/debootstrap.out" 2>&1; then
      tail -n 20 "$WORK/debootstrap.out" >&2
      tail -n 40 "$ROOTFS/debootstrap/debootstrap.log" >&2 2>/dev/null || true
      exit 1
    fi
    step_end "$SUITE minbase from $MIRROR"
    step_begin "import minbase image"
    {
      echo "deb $MIRROR $SUITE main"
      echo "deb $MIRROR $SUITE-updates main"
      if [ -n "$SECURITY" ]; then echo "deb $SECURITY $SUITE-security main"; fi
    } >"$ROOTFS/etc/apt/sources.list"
    # As Debian's own Docker images do: no fsync in dpkg (measured: apt layer 41 s instead of 58-76 s).
    echo force-unsafe-io >"$ROOTFS/etc/dpkg/dpkg.cfg.d/docker-apt-speedup"
    rm -rf "$ROOTFS"/var/cache/apt/archives/*.deb "$ROOTFS"/var/lib/apt/lists/* "$ROOTFS/debootstrap"
    tar -C "$ROOTFS" -c . | docker_cli import -c 'CMD ["/bin/bash"]' -c 'ENV LANG=C.UTF-8' \
      -m "debootstrap --variant=minbase $SUITE $MIRROR" - "$MINBASE_IMAGE" >/dev/null
    cleanup; WORK=""
    step_end "$MINBASE_IMAGE"
  fi

  step_begin "build (nodejs + npm)"
  WORK=$(mktemp -d /var/tmp/harness-base.XXXXXX)
  mkdir -p "$WORK/extra-ca"
  cp /usr/local/share/ca-certificates/*.crt "$WORK/extra-ca/" 2>/dev/null || true
  cat >"$WORK/Dockerfile" <<EOF
FROM $MINBASE_IMAGE
RUN apt-get update -qq \\
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null \\
 && apt-get clean && rm -rf /var/lib/apt/lists/* \\
 && node --version && npm --version
COPY extra-ca/ /usr/local/share/ca-certificates/
RUN update-ca-certificates >/dev/null 2>&1
ENV NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt
LABEL org.opencontainers.image.title="harness-base" harness.base.suite="$SUITE" \\
      harness.base.extra-ca="$EXTRA_CA"
EOF
  # --network host: the daemon has no bridge, so apt in the build needs the host's network.
  if ! docker_cli build --network host -t "$IMAGE" "$WORK" >"$WORK/build.out" 2>&1; then
    cat "$WORK/build.out" >&2
    exit 1
  fi
  cleanup; WORK=""
  step_end "$IMAGE"
fi

step_begin "smoke test"
ver=$(docker_cli run --rm --network host "$IMAGE" sh -c 'echo "node $(node --version), npm $(npm --version)"')
step_end "$ver; image $(docker_cli image inspect -f '{{.Size}}' "$IMAGE" | awk '{printf "%.0f MB", $1/1e6}')"

awk -v a="$T_ALL" -v b="$(now)" 'BEGIN { printf "[docker-engine] %-26s %7.1f s\n", "total", b - a }'
