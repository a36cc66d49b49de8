#!/usr/bin/env bash
# Smoke test of the container image: build it from a static binary built
# here (no registry needed), start it with a config and a data volume, send
# a signed delivery (202 expected), and find it with `hookbox events list`
# inside the container. Skips (exit 0) when podman is not installed, or
# when podman is installed but cannot run a container on this machine (a
# sandbox without the cgroups or rlimits it needs); HOOKBOX_SMOKE_REQUIRE=1
# turns both skips into failures.
set -euo pipefail
cd "$(dirname "$0")/../.."

skip() {
  echo "container smoke test skipped: $*"
  if [[ "${HOOKBOX_SMOKE_REQUIRE:-}" == 1 ]]; then exit 1; fi
  exit 0
}
command -v podman >/dev/null || skip "podman is not installed"

pod=(podman)
work=$(mktemp -d)
tag="localhost/hookbox-smoke:$$"
name="hookbox-smoke-$$"
volume="hookbox-smoke-$$"
cleanup() {
  "${pod[@]}" rm -f "$name" >/dev/null 2>&1 || true
  podman volume rm -f "$volume" >/dev/null 2>&1 || true
  podman rmi -f "$tag" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

# The image, from a binary built here.
mkdir -p "$work/ctx/out/data"
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=smoke" -o "$work/ctx/out/hookbox" ./cmd/hookbox
cp Containerfile "$work/ctx/Containerfile"
podman build -q --format docker --target prebuilt -t "$tag" "$work/ctx" >/dev/null
size=$(podman image inspect --format '{{.Size}}' "$tag")
user=$(podman image inspect --format '{{.Config.User}}' "$tag")
echo "image $tag: $((size / 1024 / 1024)) MiB, user $user"
[[ "$user" == 65532:65532 ]] || { echo "image runs as '$user', want 65532:65532"; exit 1; }

# Can this machine run a container at all? In a sandbox without
# CAP_SYS_RESOURCE and with hybrid cgroups, crun refuses (it raises the open
# files limit, and wants cgroup v2 alone); runc with cgroupfs and limits
# no higher than this shell's may still work.
pod=(podman)
run_opts=()
if ! probe=$(podman run --rm --no-healthcheck "$tag" version 2>&1); then
  case "$probe" in
  *"OCI runtime error"* | *"OCI permission denied"* | *"cgroups"* | *"setrlimit"*) ;;
  *) echo "hookbox version in the container failed: $probe"; exit 1 ;;
  esac
  first="$probe"
  pod=(podman --runtime runc --cgroup-manager cgroupfs)
  nofile=$(ulimit -n); nproc=$(ulimit -u)
  [[ "$nofile" == unlimited || "$nofile" -gt 4096 ]] && nofile=4096
  [[ "$nproc" == unlimited || "$nproc" -gt 4096 ]] && nproc=4096
  run_opts=(--ulimit "nofile=$nofile:$nofile" --ulimit "nproc=$nproc:$nproc")
  command -v runc >/dev/null || skip "podman cannot run containers here (and runc is not installed): $first"
  probe=$("${pod[@]}" run --rm --no-healthcheck "${run_opts[@]}" "$tag" version 2>&1) ||
    skip "podman cannot run containers here: with crun: $first; with runc: $probe"
  echo "crun cannot run containers here ($first); using runc with cgroupfs and lower limits"
fi
echo "in the container: $probe"

secret="whsec_$(head -c 24 /dev/urandom | base64)"
cat > "$work/hookbox.yaml" <<YAML
listen: ":8080"
sources:
  - name: smoke
    scheme: standard-webhooks
    secrets: ["\${SMOKE_SECRET}"]
    store_only: true
YAML
chmod 644 "$work/hookbox.yaml" # read by the container's user; the secret is in the environment

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
podman volume create "$volume" >/dev/null
"${pod[@]}" run -d "${run_opts[@]}" --name "$name" -p "127.0.0.1:$port:8080" -v "$volume:/data" \
  -v "$work/hookbox.yaml:/etc/hookbox/hookbox.yaml:ro" -e SMOKE_SECRET="$secret" "$tag" >/dev/null 2>"$work/run.err" ||
  { cat "$work/run.err"; exit 1; } # without systemd, podman complains it cannot time health checks: said on failure only

for _ in $(seq 1 100); do
  curl -sf "http://127.0.0.1:$port/readyz" >/dev/null && break
  sleep 0.2
done
curl -sf "http://127.0.0.1:$port/readyz" >/dev/null || { podman logs "$name"; echo "not ready"; exit 1; }
"${pod[@]}" healthcheck run "$name" >/dev/null 2>&1 || { echo "health check failed"; exit 1; }

reply=$("$work/ctx/out/hookbox" send --url "http://127.0.0.1:$port/webhooks/smoke" --scheme standard-webhooks \
  --secret "$secret" --delivery-id smoke-delivery-1 2>&1)
echo "send: $reply"
grep -q '202' <<<"$reply" || { podman logs "$name"; echo "want a 202"; exit 1; }

listed=$("${pod[@]}" exec "$name" /hookbox events list --json)
grep -q '"delivery_id": *"smoke-delivery-1"' <<<"$listed" || { echo "events list does not show the delivery: $listed"; exit 1; }
uid=$(podman inspect --format '{{.Config.User}}' "$name")
echo "container smoke test passed: 202, the event listed, process user $uid"
