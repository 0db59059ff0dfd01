"""The CronJob's image (make image, docs/image.md): a real OCI image, built here from Debian
packages and locked wheels, non-root, with only what the planner needs; its entry point
plans a bundled fixture; the same commit builds the same digest; the release pin.

The build is cached by its inputs (~/.cache/stowplan-image), so after the first build of
a commit these tests take seconds; test_same_commit_same_digest rebuilds from nothing
in a clone (about half a minute to a minute here) and is marked slow (`-m "not slow"`
leaves it out).
"""

from __future__ import annotations

import datetime
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

import image_kit
from image_kit import ROOT
from test_golden import without_timings
from tools.image import pin as image_pin

pytestmark = pytest.mark.image
NONROOT = "65532"


@pytest.fixture(scope="module")
def built() -> tuple[Path, str]:
    return image_kit.build()


@pytest.fixture(scope="module")
def image(built) -> image_kit.Image:
    return image_kit.open_image(built[0])


@pytest.fixture(scope="module")
def rootfs(image):
    path = image_kit.unpack(image)
    yield path
    shutil.rmtree(path.parent)


def source_date_epoch() -> int:
    done = subprocess.run(["git", "log", "-1", "--format=%ct", "HEAD", "--", *image_pin.input_paths()],
                          cwd=ROOT, check=True, capture_output=True, text=True)
    return int(done.stdout)


# --- the archive ------------------------------------------------------------------------

def test_archive_is_an_oci_image_whose_digest_the_build_wrote(built, image):
    """open_image checked every blob against its digest; the digest file names the manifest."""
    _, digest = built
    assert digest == image.digest
    assert image.index["manifests"][0]["mediaType"] == "application/vnd.oci.image.manifest.v1+json"
    assert image.manifest["config"]["mediaType"] == "application/vnd.oci.image.config.v1+json"
    assert [layer["mediaType"] for layer in image.manifest["layers"]] == ["application/vnd.oci.image.layer.v1.tar+gzip"]
    assert image.config["architecture"] == "amd64" and image.config["os"] == "linux"


def test_skopeo_reads_the_archive_and_names_the_same_digest(built):
    """A second reader, the one an operator pushes with: the same manifest digest."""
    if shutil.which("skopeo") is None:
        pytest.skip("skopeo is not installed (tools/image/build.sh installs it as root)")
    archive, digest = built
    done = subprocess.run(["skopeo", "inspect", f"oci-archive:{archive}"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert yaml.safe_load(done.stdout)["Digest"] == digest


def test_config_runs_the_planner_as_nonroot_created_at_the_inputs_commit(image):
    config = image.config["config"]
    assert config["User"] == f"{NONROOT}:{NONROOT}"
    assert config["Entrypoint"] == ["/usr/local/bin/stowplan"]
    assert config["Cmd"] == ["apply"]          # the CronJob passes args: [apply] too
    epoch = datetime.datetime.fromtimestamp(source_date_epoch(), datetime.timezone.utc)
    assert image.config["created"] == epoch.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert [h["created"] for h in image.config["history"]] == [image.config["created"]]


def test_layer_is_sorted_owned_by_root_and_dated_by_the_epoch(image):
    members = image_kit.layer_members(image)
    epoch = source_date_epoch()
    assert {(m.uid, m.gid) for m in members} == {(0, 0)}
    assert {int(m.mtime) for m in members} == {epoch}
    names = [m.name for m in members]
    for parent in {n.rpartition("/")[0] for n in names}:       # GNU tar --sort=name: each folder sorted
        children = [n for n in names if n.rpartition("/")[0] == parent]
        assert children == sorted(children), parent


def test_root_holds_only_what_the_planner_needs(image):
    members = {m.name.removeprefix("./"): m for m in image_kit.layer_members(image)}
    names = set(members)
    # no shell, no package manager, no compiler, no pip: nothing the entry point does not start
    for absent in ("bin/sh", "usr/bin/sh", "bin/bash", "usr/bin/bash", "bin/dash", "usr/bin/dash",
                   "usr/bin/dpkg", "usr/bin/apt", "usr/bin/apt-get", "usr/bin/tar", "bin/tar",
                   "usr/bin/mawk", "usr/bin/gcc", "usr/bin/cc", "usr/bin/ld", "usr/bin/pip",
                   "usr/bin/perl"):
        assert absent not in names, absent
    assert not [n for n in names if n.startswith(("var/cache/apt/", "var/lib/apt/", "usr/share/man/"))]
    assert not [n for n in names if "/site-packages/pip/" in n or "/dist-packages/pip/" in n]
    assert not [n for n in names if n.endswith(".deb")]
    programs = sorted(n for n, m in members.items() if m.isfile() and m.mode & 0o111
                      and n.startswith(("usr/bin/", "usr/local/bin/", "bin/", "sbin/", "usr/sbin/")))
    assert programs == ["usr/bin/python3.11", "usr/local/bin/stowplan"]
    # what it does need: the interpreter, the planner, its solver, a writable /tmp, the user
    for present in ("usr/bin/python3.11", "usr/local/lib/python3.11/dist-packages/planner/cli/__init__.py",
                    "usr/local/lib/python3.11/dist-packages/highspy/__init__.py", "etc/passwd",
                    "var/lib/dpkg/status.d/python3.11-minimal", "usr/share/doc/libc6/copyright"):
        assert present in names, present
    assert members["tmp"].mode & 0o7777 == 0o1777
    assert not any(n.startswith("var/lib/dpkg/status.d/") and n.endswith(("/dpkg", "/tar", "/mawk")) for n in names)
    # the planner's compiled modules ship (read-only root: nothing compiles at run time)
    assert "usr/local/lib/python3.11/dist-packages/planner/cli/__pycache__/__init__.cpython-311.pyc" in names


def test_locked_debian_packages_are_the_ones_recorded_in_the_image(image, rootfs):
    lock = (ROOT / "cronjob/image.lock").read_text().splitlines()
    locked = {line.split()[1]: line.split()[2] for line in lock if line.startswith("deb ")}
    recorded = {}
    for path in (rootfs / "var/lib/dpkg/status.d").iterdir():
        fields = dict(line.split(": ", 1) for line in path.read_text().splitlines() if ": " in line and not line.startswith(" "))
        recorded[fields["Package"]] = fields["Version"]
    dropped = {"dpkg", "tar", "mawk"}      # extracted as dependencies, taken back out whole
    assert recorded == {name: version for name, version in locked.items() if name not in dropped}


def test_nonroot_user_is_in_passwd_and_owns_nothing(rootfs):
    passwd = (rootfs / "etc/passwd").read_text().splitlines()
    assert any(line.split(":")[2:4] == [NONROOT, NONROOT] for line in passwd)
    owned = [p for p in rootfs.rglob("*") if not p.is_symlink() and p.lstat().st_uid != 0]
    assert owned == []


# --- the entry point -----------------------------------------------------------------

def run_planner(image, rootfs, *args: str) -> subprocess.CompletedProcess[str]:
    return image_kit.run(image, rootfs, list(args), mounts={"/etc/stowplan": ROOT / "fixtures"})


def test_entry_point_plans_the_tiny_fixture_to_its_golden_plan(image, rootfs):
    """`stowplan what-if` inside the image (bubblewrap, uid 65532, read-only root, the
    fixtures where the CronJob mounts its ConfigMap) plans tiny.yaml to its golden plan."""
    done = run_planner(image, rootfs, "what-if", "/etc/stowplan/tiny.yaml")
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    plan = yaml.safe_load(done.stdout)
    golden = yaml.safe_load((ROOT / "fixtures/tiny.plan.yaml").read_text())
    assert without_timings(plan) == golden


def test_entry_point_runs_as_the_configs_user(image, rootfs):
    done = run_planner(image, rootfs, "what-if", "/etc/stowplan/tiny.yaml", "--out", "/plan.yaml")
    assert done.returncode != 0             # the root is read-only, and not the user's
    assert "/plan.yaml" in done.stderr and "Traceback" not in done.stderr
    done = run_planner(image, rootfs, "what-if", "/etc/stowplan/tiny.yaml", "--out", "/tmp/plan.yaml")
    assert done.returncode == 0, done.stderr


def test_entry_point_solves_with_the_bundled_cbc(image, rootfs):
    """pulp:CBC starts the CBC binary pulp ships (a subprocess, no shell) inside the image."""
    done = run_planner(image, rootfs, "what-if", "/etc/stowplan/tiny.yaml", "--solver", "pulp:CBC")
    assert done.returncode == 0, done.stderr
    plan = yaml.safe_load(done.stdout)
    golden = yaml.safe_load((ROOT / "fixtures/tiny.plan.yaml").read_text())
    assert plan["solver"]["method"] == "pulp:CBC"
    assert plan["admissions"] == golden["admissions"]


def test_entry_point_version_names_the_locked_wheels(image, rootfs):
    done = run_planner(image, rootfs, "--version")
    assert done.returncode == 0, done.stderr
    lock = {line.split()[1]: line.split()[2] for line in (ROOT / "cronjob/image.lock").read_text().splitlines()
            if line.startswith("wheel ")}
    assert done.stdout.startswith("stowplan 0.1.0 (python 3.11.")
    assert f"highspy {lock['highspy']}" in done.stdout and f"pulp {lock['pulp']}" in done.stdout


# --- reproducible --------------------------------------------------------------------

@pytest.mark.slow
def test_same_commit_same_digest(built, tmp_path):
    """The same commit cloned elsewhere and built from nothing (an empty cache: a new
    pip, the wheels and Debian packages fetched again, other folders) writes the same
    archive, byte for byte, and so the same digest."""
    archive, digest = built
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, check=True, capture_output=True,
                          text=True).stdout.strip()
    clone = tmp_path / "elsewhere"
    subprocess.run(["git", "clone", "-q", "--no-checkout", str(ROOT), str(clone)], check=True)
    subprocess.run(["git", "checkout", "-q", "--detach", head], cwd=clone, check=True)
    again, again_digest = image_kit.build(root=clone, out=tmp_path / "out", cache=tmp_path / "cache")
    assert again_digest == digest
    assert again.read_bytes() == archive.read_bytes()


# --- the pin (release step) ------------------------------------------------------------

def test_every_pinned_place_names_one_digest():
    pins = image_pin.pinned()
    assert all(pins.values()), {name: found for name, found in pins.items() if not found}
    assert len({d for found in pins.values() for d in found}) == 1, pins


def test_pin_writes_the_digest_and_inputs_everywhere(tmp_path):
    for name in image_pin.PINNED_FILES:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, tmp_path / name)
    digest = "sha256:" + "ab" * 32
    image_pin.pin(digest, "0123abcd", tmp_path)
    assert image_pin.pinned(tmp_path) == {name: [digest] * len(found) for name, found in image_pin.pinned().items()}
    assert image_pin.pinned_inputs(tmp_path) == "0123abcd"
    with pytest.raises(SystemExit, match="not a digest"):
        image_pin.pin("sha256:xyz", "0", tmp_path)
    (tmp_path / "docs/image.md").write_text("no pin here\n")
    with pytest.raises(SystemExit, match="docs/image.md"):
        image_pin.pin("sha256:" + "cd" * 32, "1", tmp_path)
    assert image_pin.pinned(tmp_path)["cronjob/cronjob.yaml"] == [digest]     # all files or none


def test_pinned_digest_is_what_this_commit_builds(built):
    """While the image's inputs are the ones the pin was made from, the pin must be what
    the build gives here (a rebuild on another machine and day, checked); once a change
    to the planner makes a new image, the release step (make image-pin) pins it anew."""
    _, digest = built
    if image_pin.pinned_inputs() != image_pin.image_inputs():
        pytest.skip(f"the pin is from other inputs ({image_pin.pinned_inputs()}, now "
                    f"{image_pin.image_inputs()}): `make image-pin` at the next release")
    assert {d for found in image_pin.pinned().values() for d in found} == {digest}
