#!/usr/bin/env bash
# Offline toolchain for the tfk8s kind tests.
#
# Builds everything a real kind cluster needs from sources reachable here (Go module
# proxy, Debian mirror): kind, helm, kubectl, the Kubernetes binaries, etcd, CoreDNS,
# pause, crictl, the control-plane images with the exact tags kubeadm asks for, and a
# kind node image assembled from them. Also builds a Debian Python base image and, when
# the repository has a Dockerfile, the worker image tfk8s/worker:dev on top of it.
# Also the JobSet and Kueue controllers (manager binaries, images tfk8s/jobset-controller
# and tfk8s/kueue-controller, install manifests rendered from the modules' config/default
# into $CACHE/addons/; tests/kind/addons.py installs them). And the node's pod network:
# kube-router (image docker.io/tfk8s/kube-router, preloaded into the node image, applied
# by kind from tests/kind/cni/kube-router.yaml), so clusters have several nodes and
# NetworkPolicy is enforced. Last, tfk8s/kind-node-test: the node image with the worker and
# controller images preloaded, the one env.sh names (a warm kind tier then loads nothing).
#
# Everything is cached by version under ${TFK8S_CACHE:-$HOME/.cache/tfk8s}; a warm run
# only checks. Usage:
#     bash tests/kind/toolchain.sh
#     . "${TFK8S_CACHE:-$HOME/.cache/tfk8s}/env.sh"
#
# Knobs (env): TFK8S_K8S_VERSION, TFK8S_KIND_VERSION, TFK8S_HELM_VERSION,
# TFK8S_CRICTL_VERSION, TFK8S_DEBIAN_MIRROR, TFK8S_CACHE, TFK8S_SKIP_WORKER_IMAGE=1,
# TFK8S_JOBSET_VERSION, TFK8S_KUEUE_VERSION, TFK8S_KUEUE_FRAMEWORKS,
# TFK8S_KUBE_ROUTER_VERSION with TFK8S_KUBE_ROUTER_SUM (its module hash, h1:...),
# TFK8S_KWOK_VERSION (KWOK's simulated nodes for the scale tier, run on the host).
set -euo pipefail

K8S_VERSION=${TFK8S_K8S_VERSION:-v1.34.4}
KIND_VERSION=${TFK8S_KIND_VERSION:-v0.30.0}
HELM_VERSION=${TFK8S_HELM_VERSION:-v3.19.5}
CRICTL_VERSION=${TFK8S_CRICTL_VERSION:-v1.34.0}
# JobSet v0.11.1 and Kueue v0.16.2: newest patches the module proxy here serves with
# checksums (jobset v0.10.0/v0.10.2/v0.11.2 and kueue v0.14.1-4/v0.15.3/v0.16.3 answer 403,
# kueue v0.17.0 has no sum.golang.org entry); both are built against k8s.io/* v0.35.
JOBSET_VERSION=${TFK8S_JOBSET_VERSION:-v0.11.1}
KUEUE_VERSION=${TFK8S_KUEUE_VERSION:-v0.16.2}
# Kueue integrations left enabled (upstream enables 16, including pod/deployment/statefulset,
# whose failurePolicy=Fail webhooks would then gate every pod created in the test namespaces).
KUEUE_FRAMEWORKS=${TFK8S_KUEUE_FRAMEWORKS:-batch/job,jobset.x-k8s.io/jobset}
# kube-router, the kind node's pod network (tests/kind/cni/kube-router.yaml says why):
# v2.1.0 is the only v2 release the module proxy here serves, and sum.golang.org has no
# entry for it, so its module hash is pinned here (recorded at the first download,
# 2026-11-23) and checked on every build instead.
KUBE_ROUTER_VERSION=${TFK8S_KUBE_ROUTER_VERSION:-v2.1.0}
KUBE_ROUTER_SUM=${TFK8S_KUBE_ROUTER_SUM:-h1:xWsptKtmZ44L+NjwFKoFAFlVdxCz8fka9A/eYJe95Ok=}
SUITE=bookworm
MIRROR=${TFK8S_DEBIAN_MIRROR:-http://deb.debian.org/debian}
CACHE=${TFK8S_CACHE:-$HOME/.cache/tfk8s}
# Bump these when the recipe of an image changes (forces a rebuild).
BASE_REV=1
CNI_BASE_REV=1
NODE_REV=3
TEST_NODE_REV=1
PYBASE_REV=1
ADDON_REV=1

NODE_IMAGE=tfk8s/kind-node:$K8S_VERSION
TEST_NODE_IMAGE=tfk8s/kind-node-test:$K8S_VERSION  # NODE_IMAGE + the test images (step_test_node_image)
COMPONENT_BASE_IMAGE=tfk8s/k8s-base:$SUITE-r$BASE_REV
PYTHON_BASE_IMAGE=tfk8s/python-base:3.11-$SUITE
WORKER_IMAGE=${TFK8S_WORKER_IMAGE:-tfk8s/worker:dev}
JOBSET_IMAGE=tfk8s/jobset-controller:$JOBSET_VERSION
KUEUE_IMAGE=tfk8s/kueue-controller:$KUEUE_VERSION
CNI_BASE_IMAGE=tfk8s/cni-base:$SUITE-r$CNI_BASE_REV
# fully qualified: the node's containerd names preloaded images so, and the DaemonSet must match
KUBE_ROUTER_IMAGE=docker.io/tfk8s/kube-router:$KUBE_ROUTER_VERSION
ADDONS=$CACHE/addons

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(git -C "$HERE" rev-parse --show-toplevel 2>/dev/null || (cd "$HERE/../.." && pwd))
SHARED=$(cd "$REPO/.." && pwd)/shared

K8S_MINOR=$(echo "$K8S_VERSION" | cut -d. -f2)
STAGING_VERSION=v0.${K8S_VERSION#v1.} # v1.34.4 -> v0.34.4

LOGS=$CACHE/logs
WORK=$CACHE/work
mkdir -p "$CACHE/bin" "$LOGS" "$WORK" "$CACHE/debs"

if ! command -v go >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then
  export PATH=/usr/local/go/bin:$PATH
fi
# Cold, the compiler's own GC and DWARF are a sixth of the Go builds' CPU: GOGC=off with a
# per-process limit (a compile peaked at 1.1 GB) and no DWARF (every binary is linked -s -w)
# took a client-go build from 67-69 s to 56-59 s of wall (131-134 to 109-115 CPU-s) on 2
# cores, fresh GOCACHE each (docs/benchmarks.md). dockerd is started without them (step_docker).
export GOFLAGS=${TFK8S_GOFLAGS:--p=2 -gcflags=all=-dwarf=false}
export GOGC=${TFK8S_GOGC:-off} GOMEMLIMIT=${TFK8S_GOMEMLIMIT:-4GiB}
export PATH=$CACHE/bin:$PATH

# ---------------------------------------------------------------------------- helpers
STATUS=""
CURRENT_STEP=""
LANE=""         # set in a background lane: its lines say which
GO_LANE_PID=""  # the background lane, stopped if the script fails before the join
say() { echo "[toolchain]${LANE:+ $LANE} $*"; }
die() { echo "[toolchain] ERROR${CURRENT_STEP:+ in $CURRENT_STEP}: $*" >&2; exit 1; }
# shellcheck disable=SC2154
trap 'rc=$?; [ -z "$GO_LANE_PID" ] || { pkill -P "$GO_LANE_PID"; kill "$GO_LANE_PID"; } 2>/dev/null; [ $rc -eq 0 ] || echo "[toolchain] FAILED${CURRENT_STEP:+ in step: $CURRENT_STEP} (exit $rc); logs in $LOGS" >&2' EXIT

step() { # step NAME FUNCTION: run it, print its STATUS and how long it took
  local name=$1 fn=$2 t0=$EPOCHREALTIME dt
  CURRENT_STEP=$name
  STATUS=""
  "$fn"
  dt=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
  say "$name: ${STATUS:-done} (${dt}s)"
  echo "$(date -u +%FT%TZ) $name: ${STATUS:-done} ${dt}s" >>"$LOGS/timings.log"
  CURRENT_STEP=""
}

logged() { # logged LOGNAME CMD...: run CMD with output to $LOGS/LOGNAME.log, show its tail on failure
  local log=$LOGS/$1.log
  shift
  say "  ... $* (log: $log)"
  if ! "$@" >>"$log" 2>&1; then
    echo "----- last lines of $log -----" >&2
    tail -n 40 "$log" >&2
    die "command failed: $*"
  fi
}

need_root() { [ "$(id -u)" = 0 ] || die "$1 needs root (run as root or do it by hand)"; }

image_label() { # image_label IMAGE LABEL -> value, empty if the image or label is missing
  docker image inspect --format "{{ index .Config.Labels \"$2\" }}" "$1" 2>/dev/null | sed 's/^<no value>$//' || true
}

sha() { sha256sum "$@" | awk '{print $1}'; }

prints() { # prints TEXT CMD...: whether CMD's output contains TEXT
  # Not `CMD | grep -q`: grep exits at the first match, CMD then dies of SIGPIPE while writing
  # its next line, and pipefail turns a cached tool into a rebuild (seen with coredns).
  local text=$1 out
  shift
  out=$("$@" 2>&1) || return 1
  [[ $out == *"$text"* ]]
}

mod_dir() { # mod_dir MODULE@VERSION -> directory in the module cache (downloads it)
  go mod download -json "$1" | jq -r .Dir
}

yaml_python() { # a python3 that can import yaml (PyYAML), or fail
  local py
  for py in python3 /usr/bin/python3; do
    if command -v "$py" >/dev/null 2>&1 && "$py" -c 'import yaml' >/dev/null 2>&1; then
      command -v "$py"
      return 0
    fi
  done
  return 1
}

debootstrap_rootfs() { # debootstrap_rootfs DIR LOGNAME PKG,PKG,...
  local dir=$1 log=$2 include=$3
  need_root "debootstrap"
  rm -rf "$dir"
  logged "$log" debootstrap --variant=minbase --components=main --cache-dir="$CACHE/debs" \
    --include="$include" "$SUITE" "$dir" "$MIRROR"
  rm -rf "$dir"/var/cache/apt/archives/*.deb "$dir"/var/lib/apt/lists/* "$dir"/var/log/*.log
}

# ------------------------------------------------------------------------------ steps
step_packages() {
  local missing=()
  if ! docker info >/dev/null 2>&1; then
    command -v dockerd >/dev/null 2>&1 || missing+=(docker.io)
  fi
  command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
  command -v jq >/dev/null 2>&1 || missing+=(jq)
  yaml_python >/dev/null || missing+=(python3-yaml) # renders the addon manifests
  command -v git >/dev/null 2>&1 || missing+=(git)
  command -v gcc >/dev/null 2>&1 || missing+=(gcc)
  [ -e "$(gcc -print-file-name=libc.a 2>/dev/null || echo none)" ] || missing+=(libc6-dev)
  if [ ${#missing[@]} -eq 0 ]; then STATUS="present"; return; fi
  need_root "apt-get install ${missing[*]}"
  logged apt env DEBIAN_FRONTEND=noninteractive apt-get update -q
  logged apt env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
  STATUS="installed ${missing[*]}"
}

step_go() {
  command -v go >/dev/null 2>&1 || die "Go >= 1.24 is needed (none on PATH or in /usr/local/go/bin)"
  STATUS="$(go env GOVERSION)"
}

step_docker() {
  if docker info >/dev/null 2>&1; then STATUS="running"; return; fi
  need_root "starting dockerd"
  command -v dockerd >/dev/null 2>&1 || die "dockerd is not installed"
  # This VM's capability bounding set lacks CAP_SYS_RESOURCE, and Docker 20.10 asks for
  # every capability for --privileged containers: register the wrapper that drops what
  # the bounding set lacks (test-machine plumbing only, a normal Docker needs none).
  local bnd last full
  bnd=$(awk '/^CapBnd:/ { print $2 }' /proc/self/status)
  last=$(cat /proc/sys/kernel/cap_last_cap)
  full=$(printf '%016x' $(((1 << (last + 1)) - 1)))
  if [ "$bnd" != "$full" ]; then
    local wrapper=$SHARED/tools/runc-bounded
    [ -x "$wrapper" ] || die "capability bounding set is $bnd (not $full) and $wrapper is missing"
    mkdir -p /etc/docker
    local cfg=/etc/docker/daemon.json cur='{}'
    [ -s $cfg ] && cur=$(cat $cfg)
    echo "$cur" | jq --arg w "$wrapper" '.runtimes["runc-bounded"] = {path: $w} | .["default-runtime"] = "runc-bounded"' >$cfg.new
    mv $cfg.new $cfg
    say "  ... registered $wrapper as docker's default runtime in $cfg"
  fi
  # a daemon: the Go build tuning above is for compilers that exit
  nohup setsid env -u GOGC -u GOMEMLIMIT dockerd >>"$LOGS/dockerd.log" 2>&1 </dev/null &
  local _
  for _ in $(seq 1 60); do
    docker info >/dev/null 2>&1 && { STATUS="started (pid $!)"; return; }
    sleep 1
  done
  tail -n 30 "$LOGS/dockerd.log" >&2
  die "dockerd did not come up in 60s"
}

step_kind() {
  local dir=$CACHE/tools/kind-$KIND_VERSION
  if [ -x "$dir/kind" ] && prints "$KIND_VERSION" "$dir/kind" version; then
    STATUS="cached"
  else
    mkdir -p "$dir"
    logged kind env GOBIN="$dir" CGO_ENABLED=0 go install "sigs.k8s.io/kind@$KIND_VERSION"
    STATUS="built"
  fi
  ln -sfn "$dir/kind" "$CACHE/bin/kind"
}

K8S_DIR=$CACHE/k8s-$K8S_VERSION
K8S_BINS="kubeadm kubelet kubectl kube-apiserver kube-controller-manager kube-scheduler kube-proxy"

k8s_build() { # k8s_build CMD...: build k8s.io/kubernetes/cmd/<CMD> into $K8S_DIR/bin.tmp
  local ld="-s -w" v now
  now=$(date -u +%FT%TZ)
  for v in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld="$ld -X $v.gitVersion=$K8S_VERSION -X $v.gitMajor=1 -X $v.gitMinor=$K8S_MINOR"
    ld="$ld -X $v.gitTreeState=clean -X $v.buildDate=$now"
  done
  local pkgs=() c
  for c in "$@"; do pkgs+=("k8s.io/kubernetes/cmd/$c"); done
  (cd "$K8S_DIR/mod" && logged kubernetes env CGO_ENABLED=0 go build -mod=mod -trimpath -ldflags "$ld" \
    -o "$K8S_DIR/bin.tmp/" "${pkgs[@]}")
}

step_kubernetes() {
  if [ -f "$K8S_DIR/bin/.complete" ] && [ "$("$K8S_DIR/bin/kubeadm" version -o short)" = "$K8S_VERSION" ]; then
    STATUS="cached"
  else
    mkdir -p "$K8S_DIR/mod" "$K8S_DIR/bin.tmp"
    # Kubernetes' go.mod pins its staging modules as v0.0.0 => ./staging/...; a wrapper
    # module replaces each of them with the published k8s.io/<name>@v0.MINOR.PATCH.
    (
      cd "$K8S_DIR/mod"
      rm -f go.mod go.sum
      logged kubernetes go mod init local/tfk8s-k8s-wrapper
      go mod edit -go=1.24.0 -godebug=default=go1.24 -require="k8s.io/kubernetes@$K8S_VERSION"
      local gomod m
      gomod=$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | jq -r .GoMod)
      for m in $(go mod edit -json "$gomod" | jq -r '.Replace[] | select(.New.Path | startswith("./staging/")) | .Old.Path'); do
        go mod edit -replace="$m=$m@$STAGING_VERSION"
      done
      local c gets=()
      for c in $K8S_BINS; do gets+=("k8s.io/kubernetes/cmd/$c@$K8S_VERSION"); done
      logged kubernetes go get "${gets[@]}"
    )
    # kubeadm first, alone: it proves the wrapper works and tells the image tags.
    k8s_build kubeadm
    local got
    got=$("$K8S_DIR/bin.tmp/kubeadm" version -o short)
    [ "$got" = "$K8S_VERSION" ] || die "kubeadm version says $got, want $K8S_VERSION"
    say "  ... kubeadm $got ok; building the rest"
    k8s_build kubelet kubectl kube-apiserver kube-controller-manager kube-scheduler kube-proxy
    rm -rf "${K8S_DIR:?}/bin"
    mv "$K8S_DIR/bin.tmp" "$K8S_DIR/bin"
    touch "$K8S_DIR/bin/.complete"
    STATUS="built"
  fi
  "$K8S_DIR/bin/kubeadm" config images list --kubernetes-version "$K8S_VERSION" >"$K8S_DIR/images.txt"
  ln -sfn "$K8S_DIR/bin/kubectl" "$CACHE/bin/kubectl"
}

image_ref() { # image_ref NAME -> the exact reference kubeadm lists (e.g. etcd)
  local ref
  ref=$(grep -E "/$1:" "$K8S_DIR/images.txt" | head -n1)
  [ -n "$ref" ] || die "no $1 in $K8S_DIR/images.txt"
  echo "$ref"
}
image_tag() { image_ref "$1" | sed 's/.*://'; }

step_etcd() {
  local tag ver dir
  tag=$(image_tag etcd)     # 3.6.5-0
  ver=v${tag%-*}            # v3.6.5
  dir=$CACHE/tools/etcd-$ver
  if [ -x "$dir/bin/etcd" ] && prints "etcd Version: ${ver#v}" "$dir/bin/etcd" --version; then
    STATUS="cached ($ver)"
    return
  fi
  # etcd's server/go.mod has replace directives (../api, ...), so go install refuses it:
  # build it through a wrapper module instead.
  mkdir -p "$dir/mod" "$dir/bin"
  (
    cd "$dir/mod"
    rm -f go.mod go.sum
    logged etcd go mod init local/tfk8s-etcd-wrapper
    logged etcd go get "go.etcd.io/etcd/server/v3@$ver"
    logged etcd env CGO_ENABLED=0 go build -mod=mod -trimpath -ldflags "-s -w" -o "$dir/bin/etcd" go.etcd.io/etcd/server/v3
  )
  STATUS="built ($ver)"
}

step_coredns() {
  local ver dir module
  ver=$(image_tag coredns) # v1.12.1
  dir=$CACHE/tools/coredns-$ver
  # tests/kind/coredns/main.go links only the plugins kubeadm's Corefile uses; the module's
  # name carries the file's hash, so a cached binary built from another main is rebuilt
  module=local/tfk8s-coredns-$(sha "$HERE/coredns/main.go" | cut -c1-12)
  if [ -x "$dir/coredns" ] && prints "CoreDNS-${ver#v}" "$dir/coredns" -version &&
    prints $'mod\t'"$module"$'\t' go version -m "$dir/coredns"; then
    STATUS="cached ($ver)"
    return
  fi
  rm -rf "$dir/mod"
  mkdir -p "$dir/mod"
  cp "$HERE/coredns/main.go" "$dir/mod/"
  (
    cd "$dir/mod"
    logged coredns go mod init "$module"
    logged coredns go get "github.com/coredns/coredns@$ver"
    logged coredns env CGO_ENABLED=0 go build -mod=mod -trimpath -ldflags "-s -w" -o "$dir/coredns" .
  )
  rm -rf "$dir/mod"
  STATUS="built ($ver, the plugins of kubeadm's Corefile)"
}

step_pause() {
  local tag dir src
  tag=$(image_tag pause) # 3.10.1
  dir=$CACHE/tools/pause-$tag
  if [ -x "$dir/pause" ] && prints "v$tag" "$dir/pause" -v; then
    STATUS="cached ($tag)"
    return
  fi
  src=$(mod_dir "k8s.io/kubernetes@$K8S_VERSION")/build/pause/linux/pause.c
  mkdir -p "$dir"
  # same flags as kubernetes' build/pause/Makefile
  logged pause gcc -Os -Wall -Werror -static -DVERSION="v$tag-tfk8s" -o "$dir/pause" "$src"
  STATUS="built ($tag)"
}

step_crictl() {
  local dir=$CACHE/tools/crictl-$CRICTL_VERSION
  if [ -x "$dir/crictl" ] && prints "$CRICTL_VERSION" "$dir/crictl" --version; then
    STATUS="cached"
    return
  fi
  if [ -f "$dir/.unavailable" ]; then
    STATUS="unavailable (cached result; rm $dir/.unavailable to retry)"
    return
  fi
  mkdir -p "$dir"
  # Optional: kind works without crictl in the node (`kind load` then always re-imports,
  # `kind export logs` lists less). The module proxy here serves no checksum for
  # cri-tools, so this fails offline; the node image is built without it then.
  if ! env GOBIN="$dir" CGO_ENABLED=0 go install -trimpath \
    -ldflags "-s -w -X sigs.k8s.io/cri-tools/pkg/version.Version=$CRICTL_VERSION" \
    "sigs.k8s.io/cri-tools/cmd/crictl@$CRICTL_VERSION" >>"$LOGS/crictl.log" 2>&1; then
    cp "$LOGS/crictl.log" "$dir/.unavailable"
    STATUS="unavailable, node image goes without it ($(grep -m1 -oE '(404|403|410)[^:]*' "$LOGS/crictl.log" || echo see $LOGS/crictl.log))"
    return
  fi
  STATUS="built"
}

CRICTL_BIN() { local b=$CACHE/tools/crictl-$CRICTL_VERSION/crictl; [ -x "$b" ] && echo "$b"; return 0; }

step_component_base() {
  if [ "$(image_label "$COMPONENT_BASE_IMAGE" tfk8s.rev)" = "$BASE_REV" ]; then STATUS="cached"; return; fi
  local root=$WORK/k8s-base-rootfs
  debootstrap_rootfs "$root" k8s-base iptables,nftables,conntrack,ca-certificates
  tar -C "$root" --numeric-owner -c . | docker import -c "LABEL tfk8s.rev=$BASE_REV" - "$COMPONENT_BASE_IMAGE" >/dev/null
  rm -rf "$root"
  STATUS="built $COMPONENT_BASE_IMAGE"
}

component_image() { # component_image REF BINARY DOCKERFILE: classic builder, local images only
  local ref=$1 bin=$2 dockerfile=$3 key ctx
  # cache key: the binary's identity (size, mtime, inode) and the recipe, no hashing of MBs
  key=$( (stat -c '%n %s %Y %i' "$bin"; echo "$dockerfile") | sha256sum | awk '{print $1}')
  if [ "$(image_label "$ref" tfk8s.src)" = "$key" ]; then return 1; fi
  ctx=$WORK/img-$(basename "$bin")
  rm -rf "$ctx" && mkdir -p "$ctx"
  cp "$bin" "$ctx/"
  printf '%s\nLABEL tfk8s.src=%s\n' "$dockerfile" "$key" >"$ctx/Dockerfile"
  logged images env DOCKER_BUILDKIT=0 docker build -q -t "$ref" "$ctx"
  rm -rf "$ctx"
}

step_component_images() {
  local built=() c bin base_id
  base_id=$(docker image inspect --format '{{.Id}}' "$COMPONENT_BASE_IMAGE")
  for c in kube-apiserver kube-controller-manager kube-scheduler kube-proxy etcd; do
    if [ "$c" = etcd ]; then bin=$CACHE/tools/etcd-v$(image_tag etcd | sed 's/-.*//')/bin/etcd; else bin=$K8S_DIR/bin/$c; fi
    if component_image "$(image_ref "$c")" "$bin" \
      "$(printf 'FROM %s\n# base %s\nCOPY %s /usr/local/bin/%s' "$COMPONENT_BASE_IMAGE" "$base_id" "$c" "$c")"; then
      built+=("$(image_ref "$c")")
    fi
  done
  # CoreDNS: kubeadm passes only args, so the entrypoint must be the binary.
  if component_image "$(image_ref coredns)" "$CACHE/tools/coredns-$(image_tag coredns)/coredns" \
    "$(printf 'FROM scratch\nCOPY coredns /coredns\nEXPOSE 53 53/udp\nENTRYPOINT ["/coredns"]')"; then
    built+=("$(image_ref coredns)")
  fi
  if component_image "$(image_ref pause)" "$CACHE/tools/pause-$(image_tag pause)/pause" \
    "$(printf 'FROM scratch\nCOPY pause /pause\nUSER 65535:65535\nENTRYPOINT ["/pause"]')"; then
    built+=("$(image_ref pause)")
  fi
  if [ ${#built[@]} -eq 0 ]; then STATUS="cached"; else STATUS="built ${#built[@]}: ${built[*]}"; fi
}

node_images() { # the images preloaded into the node: kubeadm's, then the pod network's
  cat "$K8S_DIR/images.txt"
  echo "$KUBE_ROUTER_IMAGE"
}

node_recipe_hash() {
  {
    echo "rev=$NODE_REV k8s=$K8S_VERSION kind=$KIND_VERSION crictl=$CRICTL_VERSION"
    cat "$HERE/cni/kube-router.yaml"
    # shellcheck disable=SC2046
    stat -c "%n %s %Y %i" "$K8S_DIR/bin/kubeadm" "$K8S_DIR/bin/kubelet" "$K8S_DIR/bin/kubectl" $(CRICTL_BIN)
    local ref
    while read -r ref; do docker image inspect --format '{{.Id}}' "$ref"; done < <(node_images)
  } | sha256sum | awk '{print $1}'
}

write_node_files() { # write_node_files ROOTFS: our additions on top of kind's base files
  local root=$1
  mkdir -p "$root/etc/cni/net.d" "$root/kind/manifests"
  # kind applies /kind/manifests/default-cni.yaml when it creates a cluster (unless the
  # config sets disableDefaultCNI): kube-router, routing between nodes and enforcing
  # NetworkPolicy. Its image is preloaded below, like kubeadm's.
  sed "s#@KUBE_ROUTER_IMAGE@#$KUBE_ROUTER_IMAGE#g" "$HERE/cni/kube-router.yaml" \
    >"$root/kind/manifests/default-cni.yaml"
  # Without CAP_SYS_RESOURCE in the node (this VM's capability bounding set lacks it) no
  # runtime may lower a process's oom_score_adj: runc then fails every pod sandbox with
  # "failed to update /proc/self/oom_score_adj: Permission denied". Let containerd clamp
  # the value instead, as kind's entrypoint does for rootless nodes. No-op elsewhere.
  mkdir -p "$root/etc/systemd/system/containerd.service.d"
  printf '[Service]\nExecStartPre=/kind/bin/tfk8s-restrict-oom-score-adj.sh\n' \
    >"$root/etc/systemd/system/containerd.service.d/10-tfk8s-oom.conf"
  cat >"$root/kind/bin/tfk8s-restrict-oom-score-adj.sh" <<'SH'
#!/bin/sh
eff=$(awk '/^CapEff:/ { print $2 }' /proc/self/status)
if [ $(( 0x$eff >> 24 & 1 )) -eq 0 ]; then
  echo "no CAP_SYS_RESOURCE: setting containerd's restrict_oom_score_adj = true"
  sed -i 's/restrict_oom_score_adj = false/restrict_oom_score_adj = true/' /etc/containerd/config.toml
fi
SH
  chmod 0755 "$root/kind/bin/tfk8s-restrict-oom-score-adj.sh"
  cat >"$root/kind/manifests/default-storage.yaml" <<'EOF'
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: standard
  annotations:
    storageclass.kubernetes.io/is-default-class: "true"
provisioner: kubernetes.io/no-provisioner
volumeBindingMode: WaitForFirstConsumer
EOF
}

NODE_PACKAGES=systemd,systemd-sysv,dbus,conntrack,iptables,nftables,iproute2,ethtool,util-linux,mount,kmod,libseccomp2,pigz,bash,ca-certificates,jq,procps,e2fsprogs,containerd,runc,containernetworking-plugins
NODE_BASE_TAR=$CACHE/node-base-$SUITE-$(echo "$NODE_PACKAGES" | sha256sum | cut -c1-12).tar

step_node_base() {
  # The node's Debian rootfs, as debootstrap made it (a tarball keeps its device nodes), built
  # in the image lane: the node image step, after the join, then only unpacks it.
  if [ -s "$NODE_BASE_TAR" ]; then STATUS="cached"; return; fi
  local root=$WORK/node-base-rootfs
  debootstrap_rootfs "$root" node-base "$NODE_PACKAGES"
  tar -C "$root" --numeric-owner -cf "$NODE_BASE_TAR.tmp" .
  mv "$NODE_BASE_TAR.tmp" "$NODE_BASE_TAR"
  rm -rf "$root"
  STATUS="built $NODE_BASE_TAR ($(du -h "$NODE_BASE_TAR" | cut -f1))"
}

step_node_image() {
  local hash
  hash=$(node_recipe_hash)
  if [ "$(image_label "$NODE_IMAGE" tfk8s.recipe)" = "$hash" ]; then STATUS="cached $NODE_IMAGE"; return; fi
  local root=$WORK/node-rootfs kindfiles pause_ref
  step_node_base # a no-op after main's own step; builds the base when this step runs alone
  rm -rf "$root"
  mkdir -p "$root"
  tar -C "$root" --numeric-owner -xf "$NODE_BASE_TAR"
  # kind's own node files, read from the Go module cache (not vendored in this repo).
  kindfiles=$(mod_dir "sigs.k8s.io/kind@$KIND_VERSION")/images/base/files
  cp -r --no-preserve=mode "$kindfiles/." "$root/"
  find "$root/kind" "$root/etc/containerd" "$root/etc/crictl.yaml" "$root/etc/default/kubelet" \
    "$root/etc/sysctl.d" "$root/etc/systemd/system" -type f -exec chmod 0644 {} +
  chmod 0755 "$root/kind/bin" "$root"/kind/bin/* "$root"/usr/local/bin/*
  # Debian's containerd lives in /usr/bin; the sandbox image is kubeadm's pause tag.
  pause_ref=$(image_ref pause)
  sed -i 's#^ExecStart=/usr/local/bin/containerd#ExecStart=/usr/bin/containerd#' "$root/etc/systemd/system/containerd.service"
  sed -i "s#^\(\s*sandbox_image = \).*#\1\"$pause_ref\"#" "$root/etc/containerd/config.toml"
  grep -q "sandbox_image = \"$pause_ref\"" "$root/etc/containerd/config.toml" || die "sandbox_image not set"
  install -m 0755 "$K8S_DIR/bin/kubeadm" "$K8S_DIR/bin/kubelet" "$K8S_DIR/bin/kubectl" "$root/usr/bin/"
  [ -z "$(CRICTL_BIN)" ] || install -m 0755 "$(CRICTL_BIN)" "$root/usr/local/bin/"
  echo "$K8S_VERSION" >"$root/kind/version"
  write_node_files "$root"
  # The RUN steps of kind's images/base/Dockerfile, in a chroot.
  chroot "$root" /bin/bash -euc '
    ctr oci spec \
      | jq ".hooks.createContainer[.hooks.createContainer | length] |= . + {\"path\": \"/kind/bin/mount-product-files.sh\"}" \
      | jq "del(.process.rlimits)" > /etc/containerd/cri-base.json
    find /lib/systemd/system/sysinit.target.wants/ -name systemd-tmpfiles-setup.service -delete
    rm -f /lib/systemd/system/multi-user.target.wants/* /etc/systemd/system/*.wants/* \
      /lib/systemd/system/local-fs.target.wants/* /lib/systemd/system/sockets.target.wants/*udev* \
      /lib/systemd/system/sockets.target.wants/*initctl* /lib/systemd/system/basic.target.wants/*
    echo "ReadKMsg=no" >> /etc/systemd/journald.conf
    ln -sfn /lib/systemd/systemd /sbin/init
    systemctl enable kubelet.service containerd.service undo-mount-hacks.service
    systemctl mask systemd-binfmt.service
    mkdir -p /etc/kubernetes/manifests /opt/cni/bin
    for p in /usr/lib/cni/*; do ln -sfn "$p" /opt/cni/bin/; done
  ' >>"$LOGS/node-image.log" 2>&1 || { tail -n 30 "$LOGS/node-image.log" >&2; die "chroot setup failed"; }
  [ -s "$root/etc/containerd/cri-base.json" ] || die "cri-base.json is empty"
  local stage=tfk8s/kind-node-stage:$K8S_VERSION
  tar -C "$root" --numeric-owner -c . | docker import - "$stage" >/dev/null
  rm -rf "$root"
  # Preload the component images into containerd's k8s.io namespace, as kind's
  # `build node-image` does.
  # shellcheck disable=SC2046
  preload_and_commit "$stage" "$NODE_IMAGE" "$hash" node-image $(node_images)
  docker rmi "$stage" >/dev/null 2>&1 || true
  STATUS="built $NODE_IMAGE"
}

preload_and_commit() { # preload_and_commit FROM OUT RECIPE LOGNAME IMAGE...: OUT = FROM + IMAGEs in its containerd
  # --no-unpack: CRI unpacks an image on its first use. Every image must then be in the node
  # under the name Docker gives it (kubeadm's tags, `kind load`'s check by image ID).
  local from=$1 out=$2 recipe=$3 log=$4 ref have
  shift 4
  local tarball=$WORK/$log-images.tar cname=tfk8s-$log-build-$$
  logged "$log" docker save -o "$tarball" "$@"
  docker rm -f "$cname" >/dev/null 2>&1 || true
  logged "$log" docker run -d --name "$cname" --entrypoint=sleep --security-opt seccomp=unconfined \
    -v "$tarball:/images.tar:ro" "$from" infinity
  say "  ... importing $# images into the node's containerd"
  have=$(docker exec "$cname" bash -euc '
    containerd >/var/log/containerd-preload.log 2>&1 & pid=$!
    for i in $(seq 1 30); do ctr version >/dev/null 2>&1 && break; sleep 1; done
    ctr -n k8s.io images import --all-platforms --no-unpack --digests /images.tar >&2
    ctr -n k8s.io images ls -q
    kill $pid; wait $pid || true
    rm -f /var/log/containerd-preload.log' 2>>"$LOGS/$log.log") || die "image preload failed, see $LOGS/$log.log"
  echo "$have" >>"$LOGS/$log.log"
  for ref in "$@"; do
    [[ $ref == */* ]] || ref=docker.io/library/$ref
    [[ ${ref%%/*} == *.* ]] || ref=docker.io/$ref
    grep -qx "$ref" <<<"$have" || { docker rm -f "$cname" >/dev/null; die "image $ref missing in the node"; }
  done
  docker commit \
    -c 'ENV container=docker' \
    -c 'ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]' \
    -c 'CMD []' \
    -c "LABEL tfk8s.recipe=$recipe" \
    "$cname" "$out" >/dev/null
  docker rm -f "$cname" >/dev/null
  rm -f "$tarball"
}

# The images the kind tier would `kind load` into every node at the start of each run (the
# worker, 1.2 GB, and the JobSet and Kueue controllers): preloaded into a node image of their
# own, so each node gets them when its container is created and `kind load` finds them there
# (same image ID) and skips them. Rebuilt when the node image or one of them changes.
test_node_images() {
  local ref
  for ref in "$WORKER_IMAGE" "$JOBSET_IMAGE" "$KUEUE_IMAGE" "$PROMETHEUS_IMAGE"; do
    docker image inspect "$ref" >/dev/null 2>&1 && echo "$ref"
  done
  return 0
}

step_test_node_image() {
  local recipe images old
  images=$(test_node_images)
  if [ -z "$images" ]; then STATUS="skipped: none of $WORKER_IMAGE $JOBSET_IMAGE $KUEUE_IMAGE built"; return; fi
  # shellcheck disable=SC2086
  recipe=$( { echo "rev=$TEST_NODE_REV"; docker image inspect --format '{{.Id}}' "$NODE_IMAGE" $images; } | sha256sum | awk '{print $1}')
  if [ "$(image_label "$TEST_NODE_IMAGE" tfk8s.recipe)" = "$recipe" ]; then STATUS="cached $TEST_NODE_IMAGE"; return; fi
  old=$(docker image inspect --format '{{.Id}}' "$TEST_NODE_IMAGE" 2>/dev/null || true)
  # shellcheck disable=SC2086
  preload_and_commit "$NODE_IMAGE" "$TEST_NODE_IMAGE" "$recipe" test-node-image $images
  [ -z "$old" ] || docker rmi "$old" >/dev/null 2>&1 || true # the one it replaces (1.6 GB)
  STATUS="built $TEST_NODE_IMAGE with $(echo $images)"
}

step_python_base() {
  if [ "$(image_label "$PYTHON_BASE_IMAGE" tfk8s.rev)" = "$PYBASE_REV" ]; then STATUS="cached $PYTHON_BASE_IMAGE"; return; fi
  local root=$WORK/python-base-rootfs
  debootstrap_rootfs "$root" python-base python3,python3-venv,ca-certificates
  tar -C "$root" --numeric-owner -c . | docker import \
    -c 'ENV LANG=C.UTF-8' -c 'CMD ["python3"]' -c "LABEL tfk8s.rev=$PYBASE_REV" \
    - "$PYTHON_BASE_IMAGE" >/dev/null
  rm -rf "$root"
  STATUS="built $PYTHON_BASE_IMAGE ($(docker run --rm "$PYTHON_BASE_IMAGE" python3 --version 2>&1))"
}

worker_src_hash() {
  (
    cd "$REPO"
    {
      docker image inspect --format '{{.Id}}' "$PYTHON_BASE_IMAGE"
      # exactly what the image is built from (.dockerignore lets in pyproject.toml and worker/)
      for f in Dockerfile .dockerignore pyproject.toml; do [ -f "$f" ] && sha "$f"; done
      find worker -type f ! -path '*/__pycache__/*' ! -name '*.pyc' -print0 | sort -z | xargs -0 -r sha256sum
    } | sha256sum | awk '{print $1}'
  )
}

step_worker_image() {
  if [ ! -f "$REPO/Dockerfile" ]; then STATUS="skipped: no $REPO/Dockerfile"; return; fi
  if [ "${TFK8S_SKIP_WORKER_IMAGE:-}" = 1 ]; then STATUS="skipped: TFK8S_SKIP_WORKER_IMAGE=1"; return; fi
  local hash
  hash=$(worker_src_hash)
  if [ "$(image_label "$WORKER_IMAGE" tfk8s.src)" = "$hash" ]; then STATUS="cached $WORKER_IMAGE"; return; fi
  # pip inside the build needs the host's CA bundle; it goes in as a BuildKit secret
  # (RUN --mount=type=secret,id=pipcert ...), never into a layer.
  local ca=${TFK8S_PIP_CERT:-/etc/ssl/certs/ca-certificates.crt}
  worker_build "$ca" "$hash"
  STATUS="built $WORKER_IMAGE"
}

worker_build() { # worker_build CA_BUNDLE HASH
  local ca=$1 hash=$2 docker_bin
  docker_bin=$(buildkit_docker) || die "no docker client with BuildKit found (need docker buildx or a 20.10 client)"
  logged worker-image env DOCKER_BUILDKIT=1 "$docker_bin" build \
    --build-arg "BASE=$PYTHON_BASE_IMAGE" \
    --secret "id=pipcert,src=$ca" \
    --label "tfk8s.src=$hash" \
    -t "$WORKER_IMAGE" "$REPO"
}

buildkit_docker() { # a docker client whose `docker build` speaks BuildKit
  if docker buildx version >/dev/null 2>&1; then command -v docker; return; fi
  # Docker 20.10's client has BuildKit built in (newer clients need the buildx plugin).
  local c
  for c in /usr/bin/docker $(type -ap docker); do
    [ -x "$c" ] || continue
    case "$("$c" version --format '{{.Client.Version}}' 2>/dev/null)" in
      20.* | 19.* | 2[1-2].*) echo "$c"; return ;;
    esac
  done
  return 1
}

# ---------------------------------------------------------- JobSet and Kueue controllers
manager_current() { # manager_current MODULE VERSION BINARY: whether BINARY was built from MODULE@VERSION
  [ -x "$3" ] && prints "$1"$'\t'"$2" go version -m "$3"
}

sigs_ldflags() { # sigs_ldflags MODULE VERSION: how JobSet and Kueue stamp their version (Makefile LD_FLAGS)
  local module=$1 ver=$2 info ld
  info=$(go list -m -json "$module@$ver") || die "go list -m $module@$ver failed (is $ver served?)"
  ld="-X $module/pkg/version.GitVersion=$ver"
  ld="$ld -X $module/pkg/version.GitCommit=$(jq -r '.Origin.Hash // "unknown"' <<<"$info")"
  echo "$ld -X $module/pkg/version.BuildDate=$(jq -r '.Time // "unknown"' <<<"$info")" # kueue only
}

go_manager() { # go_manager LOGNAME VERSION PKG OUT LDFLAGS [TAGS]: build a tool in a build list of its own
  local log=$1 ver=$2 pkg=$3 out=$4 ld=$5 tags=${6:-}
  local dir
  dir=$(dirname "$out")
  # Not `go install PKG@VERSION`: it asks the proxy for the module's version list (to look
  # for deprecations), which this mirror answers 403. A wrapper module that requires it
  # builds the same build list (none of these modules has replace directives).
  rm -rf "$dir/mod" "$dir/gobin"
  mkdir -p "$dir/mod" "$dir/gobin"
  (
    cd "$dir/mod"
    logged "$log" go mod init "local/tfk8s-$log-wrapper"
    logged "$log" go get "$pkg@$ver"
    logged "$log" env CGO_ENABLED=0 go build -mod=mod -trimpath -tags "$tags" -ldflags "-s -w $ld" -o "$dir/gobin/" "$pkg"
  )
  mv "$dir/gobin/$(basename "$pkg")" "$out"
  rm -rf "$dir/gobin" "$dir/mod"
}

HELM_BIN=$CACHE/tools/helm-$HELM_VERSION/helm
JOBSET_BIN=$CACHE/tools/jobset-$JOBSET_VERSION/jobset
KUEUE_BIN=$CACHE/tools/kueue-$KUEUE_VERSION/kueue
KUBE_ROUTER_MODULE=github.com/cloudnativelabs/kube-router/v2
KUBE_ROUTER_BIN=$CACHE/tools/kube-router-$KUBE_ROUTER_VERSION/kube-router

# helm, JobSet, Kueue, kube-router and the kind tier's Prometheus are built from ONE wrapper
# module, so Go's minimal version selection gives them one build list (k8s.io/* v0.35, one
# controller-runtime, one gRPC) and every shared package is compiled once for all. Built
# separately, each compiled its own k8s.io libraries at its own versions. Cold, on this 2-core
# VM (2026-11-26): 214 s for the first four together against 434 s one after another; Prometheus
# alone in a build list of its own took 335 s (its client-go compiled again). Each tool then runs
# on the newest library version any of them asks for, as a `go get` of all of them would give.
# Kubernetes itself (its staging modules at its own release), CoreDNS v1.12.1 and KWOK v0.7.0
# (both fail to compile against k8s.io v0.35), crictl (the same, through k8s.io/kubectl) and etcd
# keep their own builds. Bump the -rN suffix when this recipe changes: each binary's
# BINARY.recipe file names the module it was built in (`go version -m` names the tool's own
# module, not the wrapper).
SHARED_GO_MODULE=local/tfk8s-shared-tools-r2
# Prometheus 3.14 asks for docker/go-connections v0.7.0, whose `sockets` package dropped what
# kube-router's docker/docker v25 client calls (`undefined: sockets.DialPipe`). Prometheus uses
# the package only in its Docker service discovery, which PROMETHEUS_K8S_TAGS leave out, so the
# wrapper pins the version kube-router was released with.
SHARED_GO_REPLACE=github.com/docker/go-connections=github.com/docker/go-connections@v0.5.0

shared_tool_current() { # shared_tool_current MODULE VERSION BINARY: built from MODULE@VERSION by this recipe
  manager_current "$1" "$2" "$3" && [ "$(cat "$3.recipe" 2>/dev/null)" = "$SHARED_GO_MODULE" ]
}

step_shared_tools() {
  if shared_tool_current helm.sh/helm/v3 "$HELM_VERSION" "$HELM_BIN" &&
    shared_tool_current sigs.k8s.io/jobset "$JOBSET_VERSION" "$JOBSET_BIN" &&
    shared_tool_current sigs.k8s.io/kueue "$KUEUE_VERSION" "$KUEUE_BIN" &&
    shared_tool_current "$KUBE_ROUTER_MODULE" "$KUBE_ROUTER_VERSION" "$KUBE_ROUTER_BIN" &&
    shared_tool_current github.com/prometheus/prometheus "$PROMETHEUS_K8S_VERSION" "$PROMETHEUS_K8S_BIN"; then
    STATUS="cached"
  else
    local dir=$WORK/shared-tools got ld
    ld="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
    ld="$ld -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$K8S_MINOR"
    # the linker skips an -X whose package is not in the binary, so one set serves all four
    ld="$ld $(sigs_ldflags sigs.k8s.io/jobset "$JOBSET_VERSION") $(sigs_ldflags sigs.k8s.io/kueue "$KUEUE_VERSION")"
    ld="$ld -X $KUBE_ROUTER_MODULE/pkg/version.Version=$KUBE_ROUTER_VERSION"
    local pkgs=(helm.sh/helm/v3/cmd/helm sigs.k8s.io/jobset sigs.k8s.io/kueue/cmd/kueue "$KUBE_ROUTER_MODULE/cmd/kube-router"
      github.com/prometheus/prometheus/cmd/prometheus)
    rm -rf "$dir"
    mkdir -p "$dir/mod" "$dir/gobin"
    (
      cd "$dir/mod"
      # sum.golang.org does not know kube-router v2.1.0: it is checked against the pinned hash instead
      export GONOSUMDB=$KUBE_ROUTER_MODULE
      logged shared-tools go mod init "$SHARED_GO_MODULE"
      # Not `go install PKG@VERSION` (one build list each, and it asks the proxy for version
      # lists, which this mirror answers 403); none of these modules has replace directives.
      logged shared-tools go get "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" "sigs.k8s.io/jobset@$JOBSET_VERSION" \
        "sigs.k8s.io/kueue/cmd/kueue@$KUEUE_VERSION" "$KUBE_ROUTER_MODULE/cmd/kube-router@$KUBE_ROUTER_VERSION" \
        "github.com/prometheus/prometheus/cmd/prometheus@$PROMETHEUS_K8S_VERSION"
      logged shared-tools go mod edit -replace="$SHARED_GO_REPLACE"
      got=$(awk -v m="$KUBE_ROUTER_MODULE" -v v="$KUBE_ROUTER_VERSION" '$1 == m && $2 == v { print $3 }' go.sum)
      [ "$got" = "$KUBE_ROUTER_SUM" ] || die "$KUBE_ROUTER_MODULE@$KUBE_ROUTER_VERSION has hash '$got', pinned $KUBE_ROUTER_SUM: the download is not the one recorded"
      # The tags select Prometheus' service discoveries (no other of these modules has such tags).
      logged shared-tools env CGO_ENABLED=0 go build -mod=mod -trimpath -tags "$PROMETHEUS_K8S_TAGS" -ldflags "$ld" \
        -o "$dir/gobin/" "${pkgs[@]}"
    )
    local bin out
    for out in "$HELM_BIN" "$JOBSET_BIN" "$KUEUE_BIN" "$KUBE_ROUTER_BIN" "$PROMETHEUS_K8S_BIN"; do
      bin=$(basename "$out")
      mkdir -p "$(dirname "$out")"
      mv "$dir/gobin/$bin" "$out"
      echo "$SHARED_GO_MODULE" >"$out.recipe"
    done
    rm -rf "$dir"
    prints "$HELM_VERSION" "$HELM_BIN" version --short || die "$HELM_BIN does not say it is helm $HELM_VERSION"
    # (its --version is empty without the release's ldflags; `go version -m` names the module)
    "$PROMETHEUS_K8S_BIN" --version >/dev/null || die "$PROMETHEUS_K8S_BIN does not run"
    STATUS="built helm, jobset, kueue, kube-router, prometheus ($(du -ch "$HELM_BIN" "$JOBSET_BIN" "$KUEUE_BIN" "$KUBE_ROUTER_BIN" "$PROMETHEUS_K8S_BIN" | tail -n1 | cut -f1))"
  fi
  ln -sfn "$HELM_BIN" "$CACHE/bin/helm"
}

# KWOK: simulated nodes for the scale tier (tests/scale). Its controller runs on the host against
# the kind cluster's kubeconfig, so it needs no image and leaves the node image alone.
KWOK_VERSION=${TFK8S_KWOK_VERSION:-v0.7.0}
KWOK_BIN=$CACHE/tools/kwok-$KWOK_VERSION/kwok

step_kwok() {
  if manager_current sigs.k8s.io/kwok "$KWOK_VERSION" "$KWOK_BIN"; then STATUS="cached"; return; fi
  go_manager kwok "$KWOK_VERSION" sigs.k8s.io/kwok/cmd/kwok "$KWOK_BIN" \
    "-X sigs.k8s.io/kwok/pkg/consts.Version=${KWOK_VERSION#v}"
  STATUS="built $KWOK_BIN ($(du -h "$KWOK_BIN" | cut -f1))"
}

# Prometheus: the real server the metrics tests query (tests/worker/test_prometheus.py): the
# dashboard's and the alerts' PromQL run against it. Debian's package, its binary extracted into
# the cache and keyed by the package's version: a 19 MB download (4 s) where building Prometheus 3
# from the Go proxy took 779 s cold. The HTTP API, PromQL and rules are all the tests use.
PROMETHEUS_DEB=${TFK8S_PROMETHEUS_DEB:-prometheus}
PROMETHEUS_BIN=""    # step_prometheus sets it: the path holds the package's version
# The kind tier's in-cluster Prometheus finds pods through kubernetes_sd_configs, which Debian's
# build leaves out ("field kubernetes_sd_configs not found in type config.ScrapeConfig"): that
# image's binary is built from source, with no service discovery but Kubernetes' (Prometheus'
# own build tags), in the shared tools' build list (step_shared_tools). Prometheus 3.14: the
# newest that asks for k8s.io v0.35 like the others (3.15 asks for v0.37, which would move
# helm, JobSet, Kueue and kube-router onto a Kubernetes library their releases never used).
PROMETHEUS_K8S_VERSION=${TFK8S_PROMETHEUS_VERSION:-v0.314.0}  # Prometheus 3.14.0
PROMETHEUS_K8S_TAGS=remove_all_sd,enable_kubernetes_sd
PROMETHEUS_K8S_BIN=$CACHE/tools/prometheus-k8s-$PROMETHEUS_K8S_VERSION/prometheus
PROMETHEUS_IMAGE=tfk8s/prometheus:$PROMETHEUS_K8S_VERSION

prometheus_candidate() { # the version apt would install, empty when apt knows no such package
  apt-cache policy "$PROMETHEUS_DEB" 2>/dev/null | awk '/Candidate:/ && $2 != "(none)" {print $2}'
}

step_prometheus() {
  local version tmp
  version=$(prometheus_candidate)
  if [ -z "$version" ]; then
    need_root "apt-get update (no $PROMETHEUS_DEB package known to apt)"
    logged apt env DEBIAN_FRONTEND=noninteractive apt-get update -q
    version=$(prometheus_candidate)
    [ -n "$version" ] || die "apt has no package $PROMETHEUS_DEB (Debian >= 12 has prometheus)"
  fi
  PROMETHEUS_BIN=$CACHE/tools/prometheus-deb-$version/prometheus
  if [ -x "$PROMETHEUS_BIN" ] && "$PROMETHEUS_BIN" --version >/dev/null 2>&1; then
    STATUS="cached $PROMETHEUS_BIN"
    return
  fi
  tmp=$(mktemp -d)
  # _apt cannot write into a root-only temp dir; the download then runs as root, which is fine.
  (cd "$tmp" && logged prometheus apt-get download -q "$PROMETHEUS_DEB=$version")
  logged prometheus dpkg-deb -x "$tmp/${PROMETHEUS_DEB}_"*.deb "$tmp/root"
  install -D -m 0755 "$tmp/root/usr/bin/prometheus" "$PROMETHEUS_BIN"
  rm -rf "$tmp"
  "$PROMETHEUS_BIN" --version >/dev/null 2>&1 || die "$PROMETHEUS_BIN does not run"
  STATUS="$PROMETHEUS_DEB $version: $PROMETHEUS_BIN ($(du -h "$PROMETHEUS_BIN" | cut -f1))"
}

step_cni_base() {
  # kube-router runs iptables, ipset, ip and modprobe from its image
  if [ "$(image_label "$CNI_BASE_IMAGE" tfk8s.rev)" = "$CNI_BASE_REV" ]; then STATUS="cached $CNI_BASE_IMAGE"; return; fi
  local root=$WORK/cni-base-rootfs
  debootstrap_rootfs "$root" cni-base iptables,nftables,ipset,iproute2,kmod,conntrack,ca-certificates
  tar -C "$root" --numeric-owner -c . | docker import -c "LABEL tfk8s.rev=$CNI_BASE_REV" - "$CNI_BASE_IMAGE" >/dev/null
  rm -rf "$root"
  STATUS="built $CNI_BASE_IMAGE"
}

step_cni_images() {
  local base_id
  step_cni_base # a no-op after main's own step; builds the base when this step runs alone
  base_id=$(docker image inspect --format '{{.Id}}' "$CNI_BASE_IMAGE")
  if component_image "$KUBE_ROUTER_IMAGE" "$KUBE_ROUTER_BIN" "$(printf 'FROM %s\n# base %s\nCOPY kube-router /usr/local/bin/kube-router\nENTRYPOINT ["/usr/local/bin/kube-router"]' \
    "$CNI_BASE_IMAGE" "$base_id")"; then
    STATUS="built $KUBE_ROUTER_IMAGE"
  else
    STATUS="cached"
  fi
}

step_addon_images() {
  local built=() base_id ref bin
  base_id=$(docker image inspect --format '{{.Id}}' "$COMPONENT_BASE_IMAGE")
  # The Deployments run `/manager` (upstream images are distroless); 65532 = distroless nonroot.
  for ref in "$JOBSET_IMAGE=$JOBSET_BIN" "$KUEUE_IMAGE=$KUEUE_BIN"; do
    bin=${ref#*=}
    ref=${ref%%=*}
    if component_image "$ref" "$bin" "$(printf 'FROM %s\n# base %s\nCOPY %s /manager\nUSER 65532:65532\nENTRYPOINT ["/manager"]' \
      "$COMPONENT_BASE_IMAGE" "$base_id" "$(basename "$bin")")"; then
      built+=("$ref")
    fi
  done
  # Prometheus for tests/kind/prometheus_check.py (static, Kubernetes service discovery), as nobody.
  if component_image "$PROMETHEUS_IMAGE" "$PROMETHEUS_K8S_BIN" "$(printf 'FROM %s\n# base %s\nCOPY prometheus /bin/prometheus\nUSER 65534:65534\nENTRYPOINT ["/bin/prometheus"]' \
    "$COMPONENT_BASE_IMAGE" "$base_id")"; then
    built+=("$PROMETHEUS_IMAGE")
  fi
  if [ ${#built[@]} -eq 0 ]; then STATUS="cached"; else STATUS="built ${#built[@]}: ${built[*]}"; fi
}

addon_postprocess() { # addon_postprocess NAME IMAGE IN OUT HEADER: make the release manifest fit kind
  "$(yaml_python)" - "$@" "$KUEUE_FRAMEWORKS" <<'PY'
import sys
import yaml

name, image, src, dst, header, frameworks = sys.argv[1:7]
docs = [d for d in yaml.safe_load_all(open(src)) if d]
for d in docs:
    group = d["apiVersion"].rpartition("/")[0]
    if group in ("cert-manager.io", "monitoring.coreos.com"):
        sys.exit(f"{name}: {d['kind']} {d['metadata']['name']} needs {group}, which kind has not")
    ann = d["metadata"].get("annotations") or {}
    for k in [k for k in ann if k.startswith("cert-manager.io/")]:  # the CRD's inject-ca-from
        del ann[k]
    if not ann:
        d["metadata"].pop("annotations", None)

deps = [d for d in docs if d["kind"] == "Deployment"]
if len(deps) != 1:
    sys.exit(f"{name}: expected one Deployment, got {[d['metadata']['name'] for d in deps]}")
dep = deps[0]
(c,) = [c for c in dep["spec"]["template"]["spec"]["containers"] if c["name"] == "manager"]
c["image"] = image
c["imagePullPolicy"] = "IfNotPresent"
res = c.setdefault("resources", {})
# the kind node has 2 CPUs and the training pods need them
res["requests"] = {"cpu": "10m", "memory": "64Mi"}
res.get("limits", {}).pop("cpu", None)
if not res.get("limits"):
    res.pop("limits", None)

if name == "kueue":
    keep = [f for f in frameworks.split(",") if f]
    (cm,) = [d for d in docs if d["kind"] == "ConfigMap" and "controller_manager_config.yaml" in d.get("data", {})]
    cfg = yaml.safe_load(cm["data"]["controller_manager_config.yaml"])
    upstream = cfg["integrations"]["frameworks"]
    missing = [f for f in keep if f not in upstream]
    if missing:
        sys.exit(f"kueue: integrations {missing} are not in upstream's list {upstream}")
    if cfg.get("manageJobsWithoutQueueName"):
        sys.exit("kueue: upstream config sets manageJobsWithoutQueueName")
    cfg["integrations"]["frameworks"] = keep
    cfg["manageJobsWithoutQueueName"] = False  # only objects labelled kueue.x-k8s.io/queue-name
    # No visibility API server (pending-workloads listing, an aggregated API): while its
    # APIServices are unavailable (each controller restart) API discovery fails, which stalls
    # namespace deletion; here a restart also left kube-apiserver's kept-alive connection to
    # the ClusterIP un-NATed (answered 404 by this VM's egress proxy), so it stayed failed.
    cfg.setdefault("featureGates", {})["VisibilityOnDemand"] = False
    docs = [d for d in docs if not (
        d["kind"] == "APIService"
        or (d["kind"] == "Service" and d["metadata"]["name"].endswith("-visibility-server"))
        or (d["kind"] == "RoleBinding" and d["metadata"]["name"].endswith("-visibility-server-auth-reader")))]
    c["ports"] = [p for p in c.get("ports", []) if p.get("name") != "visibility"]
    cm["data"]["controller_manager_config.yaml"] = yaml.safe_dump(cfg, sort_keys=False)
    # webhooks of the integrations left out that would see every pod/deployment/statefulset
    core = {"pods": "pod", "deployments": "deployment", "statefulsets": "statefulset"}
    for d in docs:
        if d["kind"] in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
            d["webhooks"] = [w for w in d["webhooks"]
                             if not any(core.get(r) and core[r] not in keep
                                        for rule in w.get("rules", []) for r in rule["resources"])]

with open(dst, "w") as f:
    f.write(f"{header}\n")
    yaml.safe_dump_all(docs, f, sort_keys=False)
ns = dep["metadata"]["namespace"]
print(f"{len(docs)} objects, deployment {ns}/{dep['metadata']['name']}")
PY
}

addon_key() { # addon_key IMAGE: the recipe of a rendered manifest (first line of the file)
  echo "# tfk8s.recipe=$( (echo "rev=$ADDON_REV $1 $KUEUE_FRAMEWORKS"; declare -f addon_postprocess) | sha256sum | awk '{print $1}')"
}

addon_current() { # addon_current NAME VERSION IMAGE: whether $ADDONS/NAME-VERSION.yaml is up to date
  local out=$ADDONS/$1-$2.yaml
  [ -s "$out" ] && [ "$(head -n1 "$out")" = "$(addon_key "$3")" ]
}

addon_manifest() { # addon_manifest NAME VERSION IMAGE -> $ADDONS/NAME-VERSION.yaml
  local name=$1 ver=$2 image=$3 out=$ADDONS/$1-$2.yaml src summary
  yaml_python >/dev/null || die "no python3 with PyYAML (apt-get install python3-yaml)"
  src=$(mod_dir "sigs.k8s.io/$name@$ver")/config/default # what the release's manifests.yaml is built from
  mkdir -p "$ADDONS"
  logged "$name-manifest" "$CACHE/bin/kubectl" kustomize "$src" -o "$WORK/$name-$ver.raw.yaml"
  summary=$(addon_postprocess "$name" "$image" "$WORK/$name-$ver.raw.yaml" "$out.tmp" "$(addon_key "$image")" 2>>"$LOGS/$name-manifest.log") ||
    { tail -n 20 "$LOGS/$name-manifest.log" >&2; die "post-processing the $name manifest failed"; }
  mv "$out.tmp" "$out"
  rm -f "$WORK/$name-$ver.raw.yaml"
  say "  ... $out: $summary"
}

step_addon_manifests() {
  local built=()
  [ -x "$CACHE/bin/kubectl" ] || die "no $CACHE/bin/kubectl (the kubernetes step builds it)"
  if ! addon_current jobset "$JOBSET_VERSION" "$JOBSET_IMAGE"; then
    addon_manifest jobset "$JOBSET_VERSION" "$JOBSET_IMAGE"
    built+=(jobset)
  fi
  if ! addon_current kueue "$KUEUE_VERSION" "$KUEUE_IMAGE"; then
    addon_manifest kueue "$KUEUE_VERSION" "$KUEUE_IMAGE"
    built+=(kueue)
  fi
  if [ ${#built[@]} -eq 0 ]; then STATUS="cached"; else STATUS="rendered ${built[*]} into $ADDONS"; fi
}

kind_node_image() { # the node image the kind tests use: with the test images when built
  if docker image inspect "$TEST_NODE_IMAGE" >/dev/null 2>&1; then echo "$TEST_NODE_IMAGE"; else echo "$NODE_IMAGE"; fi
}

step_env() {
  [ -n "$PROMETHEUS_BIN" ] || step_prometheus  # run alone (`toolchain.sh env`)
  cat >"$CACHE/env.sh" <<EOF
# generated by tests/kind/toolchain.sh: puts kind/helm/kubectl on PATH
export TFK8S_CACHE="$CACHE"
export PATH="$CACHE/bin:\$PATH"
export TFK8S_KIND_NODE_IMAGE="$(kind_node_image)"
export TFK8S_K8S_VERSION="$K8S_VERSION"
export TFK8S_JOBSET_IMAGE="$JOBSET_IMAGE"
export TFK8S_JOBSET_MANIFEST="$ADDONS/jobset-$JOBSET_VERSION.yaml"
export TFK8S_KUEUE_IMAGE="$KUEUE_IMAGE"
export TFK8S_KUEUE_MANIFEST="$ADDONS/kueue-$KUEUE_VERSION.yaml"
export TFK8S_KWOK="$KWOK_BIN"
export TFK8S_PROMETHEUS="$PROMETHEUS_BIN"
export TFK8S_PROMETHEUS_IMAGE="$PROMETHEUS_IMAGE"
EOF
  STATUS="wrote $CACHE/env.sh"
}

main() {
  local t0=$EPOCHREALTIME
  say "cache: $CACHE  kubernetes $K8S_VERSION  kind $KIND_VERSION  helm $HELM_VERSION  jobset $JOBSET_VERSION  kueue $KUEUE_VERSION  kube-router $KUBE_ROUTER_VERSION"
  step "packages" step_packages
  step "go" step_go
  step "docker" step_docker
  step "prometheus" step_prometheus  # before the lanes: it sets PROMETHEUS_BIN for env.sh
  # Two lanes: the Go builds use both cores, while the image steps mostly wait on the Debian
  # mirror and PyPI; on a cold machine running them side by side saves the image steps' time.
  # The steps after the join need both.
  (
    LANE="go builds:"
    step "kind $KIND_VERSION" step_kind
    step "kubernetes binaries $K8S_VERSION" step_kubernetes
    step "etcd" step_etcd
    step "coredns" step_coredns
    step "pause" step_pause
    step "crictl $CRICTL_VERSION" step_crictl
    step "helm $HELM_VERSION, jobset $JOBSET_VERSION, kueue $KUEUE_VERSION, kube-router $KUBE_ROUTER_VERSION, prometheus $PROMETHEUS_K8S_VERSION" step_shared_tools
    step "kwok $KWOK_VERSION" step_kwok
  ) &
  GO_LANE_PID=$!
  step "component base image" step_component_base
  step "cni base image" step_cni_base
  step "python base image" step_python_base
  step "worker image" step_worker_image
  step "node base rootfs" step_node_base
  wait "$GO_LANE_PID" || die "the Go builds failed (their error is above)"
  GO_LANE_PID=""
  step "component images" step_component_images
  step "cni images" step_cni_images
  step "kind node image" step_node_image
  step "addon images" step_addon_images
  step "kind test node image" step_test_node_image
  step "addon manifests" step_addon_manifests
  step "env" step_env
  say "total: $(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')s"
  echo "export PATH=\"$CACHE/bin:\$PATH\" TFK8S_KIND_NODE_IMAGE=\"$(kind_node_image)\"   # or: . $CACHE/env.sh"
}

if [ $# -gt 0 ]; then # run only the named steps, e.g. `toolchain.sh python_base env`
  for s in "$@"; do step "$s" "step_$s"; done
else
  main
fi
