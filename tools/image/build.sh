#!/usr/bin/env bash
# Build the CronJob's image from Debian packages and Python wheels, reproducibly.
#
#   bash tools/image/build.sh            # build/stowplan-image.oci.tar, build/stowplan.digest
#   bash tools/image/build.sh --fresh    # the same, ignoring the cache (a real rebuild)
#   bash tools/image/build.sh --relock   # resolve the newest packages again and rewrite
#                                        # cronjob/image.lock (commit it, then build)
#
# No base image: none can be pulled here, and a base image is an input nobody pinned.
#   1. mmdebstrap --variant=extract unpacks exactly the Debian packages the lock names
#      (python3.11 and the C libraries it links) into a directory: no maintainer
#      scripts, no dpkg database, no shell. The set it resolved is compared with the lock.
#   2. dpkg, tar, docs (but the copyright files), man pages and apt's state are pruned.
#   3. pip installs the locked wheels (hash-checked) and Stowplan's own wheel, built from
#      the commit (git archive, not the work tree) with the locked setuptools, into
#      /usr/local/lib/python3.11/dist-packages; the image's own python3.11 compiles the
#      .pyc files (unchecked-hash: no source mtimes in them).
#   4. GNU tar writes the root file system as one layer: sorted names, every mtime
#      SOURCE_DATE_EPOCH, owner 0:0, no atime/ctime; umoci turns it into an OCI image
#      (config: user 65532, entry point /usr/local/bin/stowplan, created at the epoch),
#      and the OCI layout is archived the same sorted way.
#
# SOURCE_DATE_EPOCH is the commit time of the last commit that changed an input
# (INPUTS below), not of HEAD: committing the digest into cronjob.yaml or the docs
# changes no input, so it does not change the digest it records.
#
# Cached in ${STOWPLAN_IMAGE_CACHE:-~/.cache/stowplan-image}/images/<key>/, the key being
# the git trees of the inputs and this script's tool versions: a warm run copies two files.
set -euo pipefail
umask 022   # the modes of every file and folder the build creates

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
OUT=${STOWPLAN_IMAGE_OUT:-$ROOT/build}
CACHE=${STOWPLAN_IMAGE_CACHE:-$HOME/.cache/stowplan-image}
REV=${STOWPLAN_IMAGE_REV:-HEAD}
LOCK=cronjob/image.lock
# What the image is made of; a change to any of these is a new image.
INPUTS="planner models pyproject.toml cronjob/image.lock tools/image/build.sh tools/image/record-debs.sh"
# Debian packages asked for when relocking (their dependencies come along): the
# interpreter, its standard library, and the C++ runtime numpy, highspy and CBC link.
DEBIAN_ROOTS=${STOWPLAN_IMAGE_DEBIAN_ROOTS:-"base-files python3.11-minimal libpython3.11-stdlib libstdc++6"}
SUITE=bookworm
PY_SITE=usr/local/lib/python3.11/dist-packages
# Wheels for the image's interpreter (CPython 3.11, glibc 2.36), whatever the building
# machine runs; pip takes every manylinux tag a glibc 2.36 loads, newest first.
WHEEL_TARGET=(--only-binary=:all: --python-version 3.11 --implementation cp --abi cp311)
for minor in $(seq 36 -1 17); do WHEEL_TARGET+=(--platform "manylinux_2_${minor}_x86_64"); done
WHEEL_TARGET+=(--platform manylinux2014_x86_64 --platform linux_x86_64)
# The planner's runtime needs all of pyproject's dependencies but matplotlib, which
# only `what-if --picture` and `simulate --picture` import (the CronJob never draws).
LEFT_OUT=${STOWPLAN_IMAGE_LEFT_OUT:-matplotlib}
NONROOT=65532
DROP_PACKAGES="dpkg tar mawk"

FRESH=0 RELOCK=0
for arg in "$@"; do
    case $arg in
        --fresh) FRESH=1 ;;
        --relock) RELOCK=1 FRESH=1 ;;
        *) echo "usage: $0 [--fresh] [--relock]" >&2; exit 2 ;;
    esac
done

START=$(date +%s)
log() { printf '[image +%4ss] %s\n' "$(( $(date +%s) - START ))" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# --- tools ---------------------------------------------------------------------------
need_tools() {
    local missing=()
    command -v mmdebstrap >/dev/null || missing+=(mmdebstrap)
    command -v umoci >/dev/null || missing+=(umoci)
    command -v dpkg-deb >/dev/null || missing+=(dpkg)
    # Not for the build: tests/test_image.py checks the archive with skopeo and runs the
    # entry point in bubblewrap (a read-only root, as the CronJob's pod has).
    command -v skopeo >/dev/null || missing+=(skopeo)
    command -v bwrap >/dev/null || missing+=(bubblewrap)
    [ ${#missing[@]} -eq 0 ] && return
    [ "$(id -u)" = 0 ] || die "missing ${missing[*]}: apt-get install ${missing[*]} (as root)"
    log "installing ${missing[*]} (Debian packages)"
    apt-get install -y -qq "${missing[@]}" >/dev/null 2>&1 \
        || { apt-get update -qq >/dev/null && apt-get install -y -qq "${missing[@]}" >/dev/null; } \
        || die "apt-get install ${missing[*]} failed"
}
# The versions of the tools that write bytes into the image: part of the cache key, and
# recorded in the lock, since another umoci or tar may lay the same files out otherwise.
tool_versions() {
    printf 'host umoci %s\n' "$(dpkg-query -W -f='${Version}' umoci 2>/dev/null || umoci --version)"
    printf 'host tar %s\n' "$(dpkg-query -W -f='${Version}' tar 2>/dev/null || tar --version | head -1)"
    printf 'host mmdebstrap %s\n' "$(dpkg-query -W -f='${Version}' mmdebstrap 2>/dev/null || mmdebstrap --version)"
}

# --- inputs, epoch, key --------------------------------------------------------------
git rev-parse --verify -q "$REV^{commit}" >/dev/null || die "$REV is not a commit"
if ! git diff --quiet "$REV" -- $INPUTS 2>/dev/null; then
    log "warning: the work tree's inputs differ from $REV; the image is built from $REV (commit first)"
fi
SOURCE_DATE_EPOCH=$(git log -1 --format=%ct "$REV" -- $INPUTS)
export SOURCE_DATE_EPOCH
CREATED=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)
need_tools
TOOLS=$(tool_versions)
KEY=$( { for p in $INPUTS; do git rev-parse "$REV:$p"; done; echo "$TOOLS"; } | sha256sum | cut -c1-32)
mkdir -p "$OUT" "$CACHE"
# One build at a time per cache (two test sessions may start together).
exec 9>"$CACHE/.build.lock"
flock 9
rm -f "$OUT/stowplan-image.oci.tar" "$OUT/stowplan.digest"

if [ "$FRESH" = 0 ] && [ -s "$CACHE/images/$KEY/stowplan.digest" ]; then
    cp "$CACHE/images/$KEY/stowplan-image.oci.tar" "$CACHE/images/$KEY/stowplan.digest" "$OUT/"
    log "cached ($KEY): $(cat "$OUT/stowplan.digest")"
    exit 0
fi

# --- the lock ------------------------------------------------------------------------
lock_lines() { [ -f "$LOCK" ] && grep -E "^$1 " "$LOCK" | cut -d' ' -f2- || true; }
WORK=$(mktemp -d "${TMPDIR:-/tmp}/stowplan-image.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
ROOTFS=$WORK/rootfs

# A venv for the build's own pip (pinned: pip writes RECORD and INSTALLER into the image).
PIP_VERSION=$(lock_lines tool | awk '$1=="pip"{print $2}')
TOOLVENV=$CACHE/tools-venv-${PIP_VERSION:-unlocked}
if [ ! -x "$TOOLVENV/bin/pip" ]; then
    log "a venv for pip ${PIP_VERSION:-(newest)}"
    python3 -m venv "$TOOLVENV"
    if [ -n "$PIP_VERSION" ]; then
        printf 'pip==%s --hash=sha256:%s\n' $(lock_lines tool | awk '$1=="pip"{print $2, $3}') > "$WORK/pip.txt"
        "$TOOLVENV/bin/pip" install -q --require-hashes -r "$WORK/pip.txt"
    else
        "$TOOLVENV/bin/pip" install -q --upgrade pip
    fi
fi
PIP="$TOOLVENV/bin/pip"
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1

if [ "$RELOCK" = 1 ]; then
    log "relocking: the newest Debian packages and wheels that satisfy pyproject.toml"
    mkdir -p "$WORK/resolve"
    reqs=$(python3 - "$LEFT_OUT" <<'PY'
import re, sys, tomllib
left_out = set(sys.argv[1].split())
deps = tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]
print("\n".join(d for d in deps if re.split(r"[<>=!~ \[;]", d, 1)[0].lower() not in left_out))
PY
)
    mapfile -t REQS <<< "$reqs"
    "$PIP" download -q -d "$WORK/resolve/wheels" "${WHEEL_TARGET[@]}" "${REQS[@]}"
    "$PIP" download -q --no-deps -d "$WORK/resolve/tools" pip setuptools
    {
        echo "# The image's pinned inputs (tools/image/build.sh; \`make image-lock\` rewrites it)."
        echo "# deb NAME VERSION SHA256: Debian packages, extracted as they are (mmdebstrap)."
        echo "# wheel NAME VERSION SHA256: the planner's runtime wheels (pip, --require-hashes)."
        echo "# tool/build: pip that installs them, setuptools that builds Stowplan's wheel."
        echo "# host: the tools that write the image's bytes here (another version may give"
        echo "# another digest from the same inputs: the build says so)."
        echo "@DEBS@"
        wheel_line() { # kind file
            local base name version
            base=$(basename "$2")
            name=$(echo "${base%%-*}" | tr 'A-Z_.' 'a-z--')
            version=$(echo "$base" | cut -d- -f2)
            printf '%s %s %s %s\n' "$1" "$name" "$version" "$(sha256sum "$2" | cut -d' ' -f1)"
        }
        for f in "$WORK"/resolve/wheels/*.whl; do wheel_line wheel "$f"; done | LC_ALL=C sort
        for f in "$WORK"/resolve/tools/pip-*.whl; do wheel_line tool "$f"; done
        for f in "$WORK"/resolve/tools/setuptools-*.whl; do wheel_line build "$f"; done
        echo "$TOOLS"
    } > "$WORK/lock.new"
    INCLUDE=$(echo $DEBIAN_ROOTS | tr ' ' ',')
else
    [ -f "$LOCK" ] || die "$LOCK is missing: make image-lock writes it"
    [ -n "$(lock_lines deb)" ] || die "$LOCK names no Debian package"
    INCLUDE=$(lock_lines deb | awk '{printf "%s%s=%s", (NR>1?",":""), $1, $2}')
    if [ "$(lock_lines host | LC_ALL=C sort)" != "$(echo "$TOOLS" | cut -d' ' -f2- | LC_ALL=C sort)" ]; then
        log "warning: this machine's image tools differ from the lock's 'host' lines; the digest may differ:"
        echo "$TOOLS" >&2
    fi
fi

# --- 1. Debian packages --------------------------------------------------------------
# The machine's own apt sources (whatever mirror it reaches), not a host name written here.
SOURCES=${STOWPLAN_IMAGE_APT_SOURCES:-}
if [ -z "$SOURCES" ]; then
    for f in /etc/apt/sources.list.d/debian.sources /etc/apt/sources.list; do
        [ -s "$f" ] && grep -qv '^\s*#' "$f" && { SOURCES=$f; break; }
    done
fi
[ -n "$SOURCES" ] || die "no apt sources found (set STOWPLAN_IMAGE_APT_SOURCES)"
log "Debian packages (mmdebstrap --variant=extract, $SUITE)"
if ! mmdebstrap --quiet --variant=extract --skip=output/dev --include="$INCLUDE" \
        --extract-hook="$ROOT/tools/image/record-debs.sh" --format=directory \
        "$SUITE" "$ROOTFS" "$SOURCES" > "$WORK/mmdebstrap.log" 2>&1; then
    cat "$WORK/mmdebstrap.log" >&2
    die "mmdebstrap failed (a locked version the mirror no longer serves? make image-lock resolves anew)"
fi
GOT=$ROOTFS/.stowplan-debs
if [ "$RELOCK" = 1 ]; then
    sed 's/^/deb /' "$GOT/list" > "$WORK/debs.lock"
    sed -e "/^@DEBS@\$/r $WORK/debs.lock" -e '/^@DEBS@$/d' "$WORK/lock.new" > "$LOCK"
    log "wrote $LOCK ($(wc -l < "$WORK/debs.lock") Debian packages, $(grep -c '^wheel ' "$LOCK") wheels)"
    exit 0
elif ! diff <(lock_lines deb) "$GOT/list" > "$WORK/debs.diff"; then
    cat "$WORK/debs.diff" >&2
    die "the Debian packages differ from $LOCK (< lock, > resolved)"
fi

# --- 2. prune ------------------------------------------------------------------------
log "pruning what the planner does not run"
(
    cd "$ROOTFS"
    mkdir -p var/lib/dpkg/status.d
    cp "$GOT"/status.d/* var/lib/dpkg/status.d/
    # The control files say installed, as a dpkg database would.
    for f in var/lib/dpkg/status.d/*; do sed -i '1a Status: install ok installed' "$f"; done
    # Packages extracted only because another one depends on them, taken back out
    # whole: package management (readline-common depends on dpkg, dpkg on tar) and
    # awk (base-files), programs a Python entry point never starts.
    for pkg in $DROP_PACKAGES; do
        [ -f "$GOT/files/$pkg" ] || continue
        sed 's|^\./||' "$GOT/files/$pkg" | while IFS= read -r path; do
            [ -d "$path" ] && [ ! -L "$path" ] || rm -f "$path"
        done
        rm -f "var/lib/dpkg/status.d/$pkg"
    done
    rm -rf .stowplan-debs usr/share/dpkg etc/dpkg etc/apt etc/alternatives var/lib/apt var/cache \
           var/log var/lib/dpkg/info var/lib/dpkg/alternatives var/lib/dpkg/parts \
           var/lib/dpkg/triggers var/lib/dpkg/updates var/lib/dpkg/status var/lib/dpkg/arch \
           var/backups
    # Documentation, but each package's copyright (the licences travel with the binaries).
    find usr/share/doc -mindepth 2 ! -name copyright ! -type d -delete 2>/dev/null || true
    find usr/share/doc -mindepth 1 -type d -empty -delete 2>/dev/null || true
    rm -rf usr/share/man usr/share/info usr/share/locale usr/share/lintian usr/share/bug \
           usr/share/polkit-1 etc/update-motd.d etc/motd
    # mmdebstrap's own traces and anything a runtime mounts over.
    rm -rf dev proc sys tmp run etc/resolv.conf etc/hostname etc/machine-id
    mkdir -p dev proc sys run tmp home
    chmod 1777 tmp
    # Folders the dropped packages leave empty (/bin, /sbin, /usr/libexec, ...).
    find . -depth -mindepth 1 -type d -empty ! -path ./dev ! -path ./proc ! -path ./sys \
        ! -path ./run ! -path ./tmp ! -path ./home -delete
)

# --- 3. Python -----------------------------------------------------------------------
wheel_reqs() { grep -E "^($1) " "$LOCK" | awk '{printf "%s==%s --hash=sha256:%s\n", $2, $3, $4}'; }
wheel_reqs wheel > "$WORK/wheels.txt"
wheel_reqs build > "$WORK/build.txt"
log "wheels ($(wc -l < "$WORK/wheels.txt"), hash-checked) and Stowplan's own"
"$PIP" download -q --no-deps --require-hashes -d "$CACHE/wheels" "${WHEEL_TARGET[@]}" -r "$WORK/wheels.txt"
"$PIP" download -q --no-deps --require-hashes -d "$CACHE/build-wheels" -r "$WORK/build.txt"
mkdir -p "$WORK/src" "$WORK/dist"
git archive "$REV" planner models pyproject.toml | tar -x -C "$WORK/src"
# The long description (README) stays out of the image's metadata, so the README can
# carry the image's digest without the digest depending on it.
sed -i '/^readme = /d' "$WORK/src/pyproject.toml"
PIP_NO_INDEX=1 PIP_FIND_LINKS="$CACHE/build-wheels" \
    "$PIP" wheel -q --no-deps -w "$WORK/dist" "$WORK/src" > "$WORK/wheel.log" 2>&1 \
    || { cat "$WORK/wheel.log" >&2; die "building Stowplan's wheel failed"; }
VERSION=$(python3 -c 'import tomllib; print(tomllib.load(open("pyproject.toml","rb"))["project"]["version"])')
"$PIP" install -q --no-index --no-deps --no-compile --find-links "$CACHE/wheels" --find-links "$WORK/dist" \
    "${WHEEL_TARGET[@]}" --target "$ROOTFS/$PY_SITE" \
    $(awk '{print $1}' "$WORK/wheels.txt") "stowplan==$VERSION"
# pip's console scripts name the build's interpreter (its path differs from machine to
# machine, and so would their hashes in RECORD): they go, with their RECORD lines, and
# the image's entry point is written below.
rm -rf "$ROOTFS/$PY_SITE/bin"
find "$ROOTFS/$PY_SITE" -path '*.dist-info/RECORD' -exec sed -i -E '\#^(\.\./)*bin/#d' {} +
(
    cd "$ROOTFS/$PY_SITE"
    # What the planner never loads: the packages' own test suites; the Kubernetes
    # client's asyncio twin (68 MB; planner/cluster/kube.py uses the synchronous one);
    # CBC binaries for other systems than this image's (pulp:CBC still runs here).
    find . -depth -type d \( -name tests -o -name test \) -exec rm -rf {} +
    rm -rf kubernetes/aio pulp/solverdir/cbc/osx pulp/solverdir/cbc/win \
           pulp/solverdir/cbc/linux/i32 pulp/solverdir/cbc/linux/arm64
)
mkdir -p "$ROOTFS/usr/local/bin"
cat > "$ROOTFS/usr/local/bin/stowplan" <<'EOF'
#!/usr/bin/python3.11
import sys
from planner.cli import main
sys.exit(main())
EOF
chmod 0755 "$ROOTFS/usr/local/bin/stowplan"
printf 'root:x:0:0:root:/root:/usr/sbin/nologin\nnonroot:x:%s:%s:nonroot:/tmp:/usr/sbin/nologin\n' \
    $NONROOT $NONROOT > "$ROOTFS/etc/passwd"
printf 'root:x:0:\nnonroot:x:%s:\n' $NONROOT > "$ROOTFS/etc/group"

log "compiling .pyc with the image's python3.11"
# unchecked-hash: no source mtime in the .pyc, and a read-only image never recompiles;
# PYTHONHASHSEED=0: sets and frozensets marshal in one order; -j 1: one order of writes.
chroot_cmd=(chroot); [ "$(id -u)" = 0 ] || chroot_cmd=(unshare --map-root-user chroot)
env -i PATH="$PATH" PYTHONHASHSEED=0 SOURCE_DATE_EPOCH="$SOURCE_DATE_EPOCH" \
    "${chroot_cmd[@]}" "$ROOTFS" /usr/bin/python3.11 -m compileall -q -q -j 1 \
    --invalidation-mode unchecked-hash /usr/lib/python3.11 "/$PY_SITE" \
    || die "compileall failed"

# --- 4. the layer and the OCI image ----------------------------------------------------
log "layer (GNU tar, sorted, mtime $CREATED, 0:0)"
TAR_REPRO=(--sort=name --format=pax --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime
           --mtime="@$SOURCE_DATE_EPOCH" --owner=0 --group=0 --numeric-owner --no-xattrs --no-acls --no-selinux)
(cd "$ROOTFS" && LC_ALL=C tar "${TAR_REPRO[@]}" -cf "$WORK/layer.tar" $(LC_ALL=C ls -A))

log "OCI image (umoci)"
LAYOUT=$WORK/oci
umoci init --layout "$LAYOUT"
umoci new --image "$LAYOUT:$VERSION"
umoci raw add-layer --image "$LAYOUT:$VERSION" --history.created="$CREATED" \
    --history.created_by="tools/image/build.sh" --history.comment="Debian $SUITE packages and the planner's wheels (cronjob/image.lock)" \
    "$WORK/layer.tar"
umoci config --image "$LAYOUT:$VERSION" --no-history --created="$CREATED" \
    --architecture=amd64 --os=linux --config.user="$NONROOT:$NONROOT" --config.workingdir=/tmp \
    --config.entrypoint=/usr/local/bin/stowplan --config.cmd=apply \
    --config.env=PATH=/usr/local/bin:/usr/bin --config.env=HOME=/tmp --config.env=LANG=C.UTF-8 \
    --config.env=PYTHONDONTWRITEBYTECODE=1 --config.env=PYTHONUNBUFFERED=1 \
    --config.label=org.opencontainers.image.title=stowplan \
    --config.label=org.opencontainers.image.version="$VERSION"
umoci gc --layout "$LAYOUT"
chmod -R a+rX "$LAYOUT"     # umoci writes blobs 0600; anyone may read the archive's
(cd "$LAYOUT" && LC_ALL=C tar "${TAR_REPRO[@]}" -cf "$WORK/stowplan-image.oci.tar" $(LC_ALL=C ls -A))
DIGEST=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["manifests"][0]["digest"])' "$LAYOUT/index.json")
echo "$DIGEST" > "$WORK/stowplan.digest"

mkdir -p "$CACHE/images/$KEY.tmp"
cp "$WORK/stowplan-image.oci.tar" "$WORK/stowplan.digest" "$CACHE/images/$KEY.tmp/"
rm -rf "$CACHE/images/$KEY" && mv "$CACHE/images/$KEY.tmp" "$CACHE/images/$KEY"
cp "$WORK/stowplan-image.oci.tar" "$WORK/stowplan.digest" "$OUT/"
log "built ($KEY): $DIGEST, $(du -h "$OUT/stowplan-image.oci.tar" | cut -f1) archive, rootfs $(du -sh "$ROOTFS" | cut -f1)"
