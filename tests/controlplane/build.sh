#!/usr/bin/env bash
# Build (or find in the cache) every component of Stowplan's test control plane.
#
#   bash tests/controlplane/build.sh
#
# Idempotent: whatever already sits in the cache is skipped, so a warm run takes
# a second or two. Nothing is written into the repository: binaries, wrapper Go
# modules and the manifest live under
#   ${STOWPLAN_CP_CACHE:-$HOME/.cache/stowplan-cp}/<component>-<version>/
# and every CRD is read at test time from the Go module cache.
#
# Components:
#   kube-apiserver, kube-controller-manager, kube-scheduler
#       built from the Go module k8s.io/kubernetes (STOWPLAN_K8S_VERSIONS, first
#       one that builds wins) through a generated wrapper module that pins every
#       k8s.io staging module to the matching v0.<minor>.<patch> tag.
#   etcd
#       built from go.etcd.io/etcd/server/v3 (STOWPLAN_ETCD_GO_VERSION) in its
#       own wrapper module; if that fails, Debian's etcd-server (3.4, apt-get).
#       STOWPLAN_ETCD_FROM="apt go" flips the order; STOWPLAN_ETCD=/path/etcd
#       uses a given binary.
#   kwok
#       go install sigs.k8s.io/kwok/cmd/kwok.
#   Kueue and JobSet CRDs
#       go mod download sigs.k8s.io/kueue, sigs.k8s.io/jobset (module cache only).
#   The other workload kinds' CRDs (TrainJob and its runtimes, PyTorchJob, MPIJob
#   v2beta1, RayJob, RayCluster, LeaderWorkerSet)
#       go mod download of each kind's module at the version Kueue's go.mod
#       requires (module cache only; manifest line WORKLOAD_CRDS).
#   The cluster autoscaler's ProvisioningRequest CRD (autoscaling.x-k8s.io/v1)
#       go mod download k8s.io/autoscaler/cluster-autoscaler/apis at the version
#       Kueue's go.mod requires (module cache only; manifest line PROVISIONING_CRD).
#   kueue (the manager binary, for the Kueue peer harness in tools/peer)
#       built from sigs.k8s.io/kueue/cmd/kueue (STOWPLAN_KUEUE_VERSION) in its own
#       wrapper module, with Kueue's version ldflags. Optional: if it does not
#       build, the manifest has no KUEUE line and only the peer's tests skip.
#       STOWPLAN_KUEUE_BUILD=0 skips it.
#
# At the end it writes $CACHE/manifest.env (KEY=VALUE lines) which
# tests/controlplane/rig.py reads to find everything.
set -euo pipefail

CACHE=${STOWPLAN_CP_CACHE:-$HOME/.cache/stowplan-cp}
K8S_VERSIONS=${STOWPLAN_K8S_VERSIONS:-"v1.36.3 v1.35.4"}
KWOK_VERSIONS=${STOWPLAN_KWOK_VERSIONS:-"v0.8.0 v0.7.0"}
ETCD_GO_VERSION=${STOWPLAN_ETCD_GO_VERSION:-v3.6.16}
KUEUE_VERSION=${STOWPLAN_KUEUE_VERSION:-v0.17.0}
# JobSet: the version Kueue's go.mod requires is used unless this is set.
JOBSET_VERSION=${STOWPLAN_JOBSET_VERSION:-}
K8S_BINARIES="kube-apiserver kube-controller-manager kube-scheduler"

BUILD_GOFLAGS="${GOFLAGS:+$GOFLAGS }-mod=mod"
export GOTOOLCHAIN=${GOTOOLCHAIN:-local}
# Two cores: keep the compiler from starting more jobs than that.
export GOMAXPROCS=${GOMAXPROCS:-2}

START=$(date +%s)
log() { printf '[build.sh +%4ss] %s\n' "$(( $(date +%s) - START ))" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

command -v go >/dev/null || die "go is not on PATH"
mkdir -p "$CACHE"
# One build at a time per cache (two test sessions may start together).
if command -v flock >/dev/null; then
    exec 9>"$CACHE/.build.lock"
    if ! flock -n 9; then
        log "another build.sh holds $CACHE/.build.lock; waiting"
        flock 9
    fi
fi

# Print a field of `go mod download -json MODULE@VERSION` (Dir, GoMod, ...).
mod_field() { # module@version field
    local json
    json=$(cd "$CACHE" && GOFLAGS= go mod download -json "$1") || return 1
    printf '%s' "$json" | python3 -c '
import json, sys
d = json.load(sys.stdin)
if d.get("Error"):
    sys.stderr.write(d["Error"] + "\n"); sys.exit(1)
print(d[sys.argv[1]])' "$2"
}

###########################################################################
# Kubernetes control-plane binaries
###########################################################################
build_kubernetes() { # version -> 0 when all three binaries exist afterwards
    local v=$1 out="$CACHE/kubernetes-$v" mod minor patch major tag w x
    local missing=""
    for b in $K8S_BINARIES; do [[ -x "$out/$b" ]] || missing+=" $b"; done
    if [[ -z "$missing" ]]; then
        log "kubernetes $v: cached in $out"
        return 0
    fi
    log "kubernetes $v: building$missing"
    mod=$(mod_field "k8s.io/kubernetes@$v" GoMod) || { log "kubernetes $v: module not available"; return 1; }
    # v1.36.3 -> major 1, minor 36, patch 3, staging tag v0.36.3
    major=${v#v}; major=${major%%.*}
    minor=${v#v*.}; minor=${minor%%.*}
    patch=${v##*.}
    tag="v0.$minor.$patch"

    w="$CACHE/src/kubernetes-wrapper-$v"
    mkdir -p "$w"
    (
        cd "$w"
        if [[ ! -f go.mod ]]; then
            go mod init stowplan.test/controlplane/kubernetes >/dev/null 2>&1
        fi
        # Same language version and GODEBUG defaults as upstream's own build.
        local gover godebug
        gover=$(awk '$1=="go"{print $2; exit}' "$mod")
        [[ -n "$gover" ]] && go mod edit -go="$gover"
        godebug=$(awk '$1=="godebug"{print $2; exit}' "$mod")
        [[ -n "$godebug" ]] && go mod edit -godebug="$godebug"
        go mod edit -require="k8s.io/kubernetes@$v"
        # Every `k8s.io/X => ./staging/src/k8s.io/X` replace of upstream's go.mod
        # is ignored for a dependency: pin X to its published staging tag.
        local n=0
        for x in $(sed -nE 's#^[[:space:]]*(replace[[:space:]]+)?(k8s\.io/[^[:space:]]+)[[:space:]]+=>[[:space:]]+\./staging/.*#\2#p' "$mod"); do
            go mod edit -replace="$x=$x@$tag"
            n=$((n + 1))
        done
        (( n > 0 )) || { echo "no staging replaces found in $mod" >&2; exit 1; }
        echo "$n staging modules pinned to $tag" >&2
        local tools=""
        for b in $K8S_BINARIES; do tools+=" k8s.io/kubernetes/cmd/$b@$v"; done
        # shellcheck disable=SC2086
        go get -tool $tools
    ) || { log "kubernetes $v: wrapper module setup failed"; return 1; }

    local ld="-s -w"
    for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
        ld+=" -X $p.gitVersion=$v -X $p.gitMajor=$major -X $p.gitMinor=$minor"
        ld+=" -X $p.gitTreeState=clean -X $p.gitCommit=0000000000000000000000000000000000000000"
        ld+=" -X $p.buildDate=1970-01-01T00:00:00Z"
    done
    mkdir -p "$out"
    for b in $K8S_BINARIES; do
        [[ -x "$out/$b" ]] && { log "kubernetes $v: $b cached"; continue; }
        log "kubernetes $v: go build $b (one at a time; this is the slow part)"
        local t0=$(date +%s)
        if ! (cd "$w" && GOFLAGS="$BUILD_GOFLAGS" CGO_ENABLED=0 go build -trimpath -ldflags "$ld" -o "$out/$b.tmp" "k8s.io/kubernetes/cmd/$b"); then
            rm -f "$out/$b.tmp"
            log "kubernetes $v: go build $b failed"
            return 1
        fi
        mv "$out/$b.tmp" "$out/$b"
        log "kubernetes $v: $b built in $(( $(date +%s) - t0 ))s"
    done
    return 0
}

K8S_VERSION=""
for v in $K8S_VERSIONS; do
    if build_kubernetes "$v"; then K8S_VERSION=$v; break; fi
    log "kubernetes $v did not build; trying the next version"
done
[[ -n "$K8S_VERSION" ]] || die "no Kubernetes version in '$K8S_VERSIONS' could be built"

###########################################################################
# etcd
###########################################################################
ETCD_BIN=""
etcd_ok() { [[ -x "$1" ]] && "$1" --version >/dev/null 2>&1; }

etcd_from_go() {
    local out="$CACHE/etcd-$ETCD_GO_VERSION" w t0
    if etcd_ok "$out/etcd"; then
        log "etcd: cached in $out"
    else
        log "etcd: building go.etcd.io/etcd/server/v3@$ETCD_GO_VERSION in its own wrapper module"
        t0=$(date +%s)
        # Its own module: sharing one with Kubernetes would bump common deps.
        w="$CACHE/src/etcd-wrapper-$ETCD_GO_VERSION"
        mkdir -p "$w" "$out"
        (
            cd "$w"
            [[ -f go.mod ]] || go mod init stowplan.test/controlplane/etcd >/dev/null 2>&1
            go get -tool "go.etcd.io/etcd/server/v3@$ETCD_GO_VERSION"
            GOFLAGS="$BUILD_GOFLAGS" CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$out/etcd.tmp" go.etcd.io/etcd/server/v3
            mv "$out/etcd.tmp" "$out/etcd"
        ) || { rm -f "$out/etcd.tmp"; log "etcd: Go build failed"; return 1; }
        log "etcd: built in $(( $(date +%s) - t0 ))s"
    fi
    ETCD_BIN="$out/etcd"
}

etcd_from_apt() {
    if etcd_ok /usr/bin/etcd; then
        ETCD_BIN=/usr/bin/etcd
        log "etcd: $ETCD_BIN ($(/usr/bin/etcd --version | head -1))"
        return 0
    fi
    if ! command -v apt-get >/dev/null || [[ $(id -u) != 0 ]]; then
        log "etcd: no apt-get as root here"; return 1
    fi
    log "etcd: apt-get install etcd-server"
    # The package's maintainer scripts would start an etcd service on :2379;
    # we run our own on free ports, so forbid service starts.
    local policy_rc=/usr/sbin/policy-rc.d had_policy=0
    [[ -e $policy_rc ]] && had_policy=1
    if (( ! had_policy )); then printf '#!/bin/sh\nexit 101\n' > $policy_rc; chmod +x $policy_rc; fi
    if ! DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends etcd-server >&2; then
        apt-get update >&2 || true
        DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends etcd-server >&2 || true
    fi
    (( had_policy )) || rm -f $policy_rc
    # Should a service have started anyway, stop it: it is not ours.
    if command -v systemctl >/dev/null && systemctl is-active --quiet etcd 2>/dev/null; then
        systemctl stop etcd >&2 || true; systemctl disable etcd >&2 || true
    fi
    etcd_ok /usr/bin/etcd && ETCD_BIN=/usr/bin/etcd
}

# Go first: Debian bookworm's etcd-server is 3.4.23, too old for the API
# server's RequestWatchProgress, so every client-go informer (KWOK, the
# controllers, Kueue) first fails its watch-list request and falls back; after
# API server restarts their backoff then grows to tens of seconds.
if [[ -n "${STOWPLAN_ETCD:-}" ]] && etcd_ok "$STOWPLAN_ETCD"; then
    ETCD_BIN=$STOWPLAN_ETCD
    log "etcd: using STOWPLAN_ETCD=$ETCD_BIN"
else
    for src in ${STOWPLAN_ETCD_FROM:-go apt}; do
        case $src in
            go) etcd_from_go && break ;;
            apt) etcd_from_apt && break ;;
            *) die "STOWPLAN_ETCD_FROM: unknown source '$src' (go, apt)" ;;
        esac
    done
fi
[[ -n "$ETCD_BIN" ]] || die "etcd: neither a Go build nor Debian's etcd-server worked"

###########################################################################
# KWOK
###########################################################################
KWOK_BIN=""
KWOK_VERSION=""
for v in $KWOK_VERSIONS; do
    out="$CACHE/kwok-$v"
    if [[ -x "$out/kwok" ]]; then
        log "kwok $v: cached in $out"; KWOK_BIN="$out/kwok"; KWOK_VERSION=$v; break
    fi
    log "kwok $v: go install sigs.k8s.io/kwok/cmd/kwok@$v"
    mkdir -p "$out"
    t0=$(date +%s)
    if (cd "$CACHE" && GOFLAGS= CGO_ENABLED=0 GOBIN="$out" go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@$v"); then
        log "kwok $v: built in $(( $(date +%s) - t0 ))s"
        KWOK_BIN="$out/kwok"; KWOK_VERSION=$v; break
    fi
    log "kwok $v: install failed; trying the next version"
done
[[ -n "$KWOK_BIN" ]] || die "no KWOK version in '$KWOK_VERSIONS' could be installed"
# The kwok binary alone has no stages (kwokctl embeds the defaults): the rig
# reads the default node/pod stages from the module's kustomize/stage folder.
KWOK_STAGE_DIR="$(mod_field "sigs.k8s.io/kwok@$KWOK_VERSION" Dir)/kustomize/stage" || die "cannot download sigs.k8s.io/kwok@$KWOK_VERSION"
[[ -f "$KWOK_STAGE_DIR/pod/fast/pod-ready.yaml" ]] || die "no KWOK stages in $KWOK_STAGE_DIR"

###########################################################################
# Kueue and JobSet CRDs (read from the module cache at test time)
###########################################################################
KUEUE_DIR=$(mod_field "sigs.k8s.io/kueue@$KUEUE_VERSION" Dir) || die "cannot download sigs.k8s.io/kueue@$KUEUE_VERSION"
KUEUE_CRDS="$KUEUE_DIR/config/components/crd/bases"
ls "$KUEUE_CRDS"/kueue.x-k8s.io_*.yaml >/dev/null || die "no Kueue CRDs in $KUEUE_CRDS"
log "kueue $KUEUE_VERSION: CRDs in $KUEUE_CRDS"
if [[ -z "$JOBSET_VERSION" ]]; then
    JOBSET_VERSION=$(awk '$1=="sigs.k8s.io/jobset"{print $2; exit}' "$(mod_field "sigs.k8s.io/kueue@$KUEUE_VERSION" GoMod)")
    [[ -n "$JOBSET_VERSION" ]] || die "Kueue's go.mod does not name a JobSet version; set STOWPLAN_JOBSET_VERSION"
fi
JOBSET_DIR=$(mod_field "sigs.k8s.io/jobset@$JOBSET_VERSION" Dir) || die "cannot download sigs.k8s.io/jobset@$JOBSET_VERSION"
JOBSET_CRD="$JOBSET_DIR/config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml"
[[ -f "$JOBSET_CRD" ]] || die "no JobSet CRD at $JOBSET_CRD"
log "jobset $JOBSET_VERSION: CRD $JOBSET_CRD"

###########################################################################
# The other workload kinds' CRDs (read from the module cache at test time)
###########################################################################
# module|files under its Dir. The version is the one Kueue's go.mod requires
# (its integrations are built against it) unless STOWPLAN_<NAME>_VERSION is set.
# training-operator also ships an MPIJob v1 CRD; MPIJob v2beta1 comes from
# mpi-operator (one CRD per name), so only the PyTorchJob CRD is taken from it.
WORKLOAD_CRD_MODULES="
TRAINER|github.com/kubeflow/trainer/v2|manifests/base/crds/trainer.kubeflow.org_trainjobs.yaml manifests/base/crds/trainer.kubeflow.org_clustertrainingruntimes.yaml manifests/base/crds/trainer.kubeflow.org_trainingruntimes.yaml
TRAINING_OPERATOR|github.com/kubeflow/training-operator|manifests/base/crds/kubeflow.org_pytorchjobs.yaml
MPI_OPERATOR|github.com/kubeflow/mpi-operator|manifests/base/kubeflow.org_mpijobs.yaml
KUBERAY|github.com/ray-project/kuberay/ray-operator|config/crd/bases/ray.io_rayjobs.yaml config/crd/bases/ray.io_rayclusters.yaml
LWS|sigs.k8s.io/lws|config/crd/bases/leaderworkerset.x-k8s.io_leaderworkersets.yaml
"
KUEUE_GOMOD=$(mod_field "sigs.k8s.io/kueue@$KUEUE_VERSION" GoMod) || die "cannot download sigs.k8s.io/kueue@$KUEUE_VERSION"
WORKLOAD_CRDS=""
WORKLOAD_VERSIONS=""
while IFS='|' read -r name module files; do
    [[ -n "$name" ]] || continue
    override="STOWPLAN_${name}_VERSION"
    version=${!override:-}
    if [[ -z "$version" ]]; then
        version=$(awk -v m="$module" '$1==m{print $2; exit}' "$KUEUE_GOMOD")
        [[ -n "$version" ]] || die "Kueue's go.mod does not name $module; set $override"
    fi
    dir=$(mod_field "$module@$version" Dir) || die "go mod download -json $module@$version failed (set $override to a served version)"
    for f in $files; do
        [[ -f "$dir/$f" ]] || die "no CRD $f in $module@$version ($dir)"
        WORKLOAD_CRDS+="${WORKLOAD_CRDS:+:}$dir/$f"
    done
    WORKLOAD_VERSIONS+="${WORKLOAD_VERSIONS:+ }$module@$version"
    log "$module $version: CRDs $files"
done <<< "$WORKLOAD_CRD_MODULES"

###########################################################################
# The ProvisioningRequest CRD (read from the module cache at test time)
###########################################################################
# The version Kueue's provisioning admission check is built against, unless
# STOWPLAN_AUTOSCALER_APIS_VERSION is set.
PROVISIONING_MODULE=k8s.io/autoscaler/cluster-autoscaler/apis
PROVISIONING_VERSION=${STOWPLAN_AUTOSCALER_APIS_VERSION:-$(awk -v m="$PROVISIONING_MODULE" '$1==m{print $2; exit}' "$KUEUE_GOMOD")}
[[ -n "$PROVISIONING_VERSION" ]] || die "Kueue's go.mod does not name $PROVISIONING_MODULE; set STOWPLAN_AUTOSCALER_APIS_VERSION"
PROVISIONING_DIR=$(mod_field "$PROVISIONING_MODULE@$PROVISIONING_VERSION" Dir) || die "go mod download -json $PROVISIONING_MODULE@$PROVISIONING_VERSION failed"
PROVISIONING_CRD="$PROVISIONING_DIR/config/crd/autoscaling.x-k8s.io_provisioningrequests.yaml"
[[ -f "$PROVISIONING_CRD" ]] || die "no ProvisioningRequest CRD at $PROVISIONING_CRD"
log "$PROVISIONING_MODULE $PROVISIONING_VERSION: CRD $PROVISIONING_CRD"

###########################################################################
# Kueue's manager binary (the real peer; optional)
###########################################################################
KUEUE_BIN=""
build_kueue() { # version -> 0 when $CACHE/kueue-<version>/kueue exists afterwards
    local v=$1 out="$CACHE/kueue-$1" w gomod gover t0 ld
    if [[ -x "$out/kueue" ]]; then
        log "kueue $v: manager cached in $out"
        KUEUE_BIN="$out/kueue"; return 0
    fi
    gomod=$(mod_field "sigs.k8s.io/kueue@$v" GoMod) || { log "kueue $v: module not available"; return 1; }
    log "kueue $v: building the manager (sigs.k8s.io/kueue/cmd/kueue) in its own wrapper module"
    t0=$(date +%s)
    # Its own module: Kueue pins k8s.io/* v0.35 and controller-runtime; sharing
    # the Kubernetes wrapper would bump them. Kueue's go.mod has no replaces, so
    # its requirements are taken as they are.
    w="$CACHE/src/kueue-wrapper-$v"
    mkdir -p "$w" "$out"
    ld="-s -w"
    ld+=" -X sigs.k8s.io/kueue/pkg/version.GitVersion=$v"
    ld+=" -X sigs.k8s.io/kueue/pkg/version.GitCommit=0000000000000000000000000000000000000000"
    ld+=" -X sigs.k8s.io/kueue/pkg/version.BuildDate=1970-01-01T00:00:00Z"
    # (set -e does not reach into a tested subshell: every step is chained)
    gover=$(awk '$1=="go"{print $2; exit}' "$gomod")
    if ! (
        cd "$w" &&
        { [[ -f go.mod ]] || go mod init stowplan.test/controlplane/kueue >/dev/null 2>&1; } &&
        go get -tool "sigs.k8s.io/kueue/cmd/kueue@$v" &&
        # The language version (and so GODEBUG defaults) of Kueue's own build.
        { [[ -z "$gover" ]] || go mod edit -go="$gover"; } &&
        GOFLAGS="$BUILD_GOFLAGS" CGO_ENABLED=0 go build -trimpath -ldflags "$ld" -o "$out/kueue.tmp" sigs.k8s.io/kueue/cmd/kueue &&
        "$out/kueue.tmp" --help >/dev/null 2>&1 &&
        mv "$out/kueue.tmp" "$out/kueue"
    ); then
        rm -f "$out/kueue.tmp"
        log "kueue $v: manager build failed (see the go output above)"
        return 1
    fi
    log "kueue $v: manager built in $(( $(date +%s) - t0 ))s"
    KUEUE_BIN="$out/kueue"
}
if [[ "${STOWPLAN_KUEUE_BUILD:-1}" == 0 ]]; then
    log "kueue: manager build skipped (STOWPLAN_KUEUE_BUILD=0)"
elif ! build_kueue "$KUEUE_VERSION"; then
    log "WARNING: no Kueue manager binary; the Kueue peer harness and its tests will skip"
fi

###########################################################################
# Manifest for rig.py
###########################################################################
tmp="$CACHE/manifest.env.tmp.$$"
{
    echo "# written by tests/controlplane/build.sh on $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "K8S_VERSION=$K8S_VERSION"
    for b in $K8S_BINARIES; do
        key=$(echo "$b" | tr 'a-z-' 'A-Z_')
        echo "$key=$CACHE/kubernetes-$K8S_VERSION/$b"
    done
    echo "ETCD=$ETCD_BIN"
    echo "KWOK=$KWOK_BIN"
    echo "KWOK_VERSION=$KWOK_VERSION"
    echo "KWOK_STAGE_DIR=$KWOK_STAGE_DIR"
    echo "KUEUE_VERSION=$KUEUE_VERSION"
    echo "KUEUE_CRD_DIR=$KUEUE_CRDS"
    echo "JOBSET_VERSION=$JOBSET_VERSION"
    echo "JOBSET_CRD=$JOBSET_CRD"
    echo "WORKLOAD_CRDS=$WORKLOAD_CRDS"
    echo "WORKLOAD_CRD_VERSIONS=$WORKLOAD_VERSIONS"
    echo "PROVISIONING_CRD=$PROVISIONING_CRD"
    echo "PROVISIONING_CRD_VERSION=$PROVISIONING_MODULE@$PROVISIONING_VERSION"
    if [[ -n "$KUEUE_BIN" ]]; then echo "KUEUE=$KUEUE_BIN"; fi
} > "$tmp"
mv "$tmp" "$CACHE/manifest.env"
log "done: $CACHE/manifest.env"
cat "$CACHE/manifest.env" >&2
