"""The CronJob's image, opened and run as a container runtime would (tests/test_image.py).

`build()` runs tools/image/build.sh (cached by its inputs in ~/.cache/stowplan-image).
`open_image()` reads the OCI archive: index.json -> manifest -> config and layer, each
blob checked against its digest. `unpack()` lays the layer out as a root file system,
and `run()` starts the config's entry point in it: in bubblewrap as the config's user
(a read-only root, /proc, /dev, an empty /tmp, no network, like the CronJob's pod), or,
where bubblewrap is missing and the tests run as root, in a chroot through
`unshare --root` as that user, with the host's /dev bound in.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "build"
ARCHIVE_NAME = "stowplan-image.oci.tar"
DIGEST_NAME = "stowplan.digest"


def build(*, root: Path = ROOT, out: Path = BUILD, cache: Path | None = None) -> tuple[Path, str]:
    """`make image` in the checkout `root` (with cache: that cache folder, not the
    usual one): the archive and its digest."""
    env = {**os.environ, "STOWPLAN_IMAGE_OUT": str(out)}
    if cache is not None:
        env["STOWPLAN_IMAGE_CACHE"] = str(cache)
    command = ["bash", str(root / "tools/image/build.sh")]
    done = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True)
    assert done.returncode == 0, f"{' '.join(command)} failed:\n{done.stderr[-4000:]}"
    return out / ARCHIVE_NAME, (out / DIGEST_NAME).read_text().strip()


@dataclass(frozen=True)
class Image:
    digest: str                  # the manifest's: what a pod spec pins
    index: dict
    manifest: dict
    config: dict
    layers: tuple[bytes, ...]    # as stored (gzip)
    names: tuple[str, ...]       # the archive's members, in order


def sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def open_image(archive: Path) -> Image:
    with tarfile.open(archive) as tar:
        names = tuple(tar.getnames())
        files = {m.name.removeprefix("./"): tar.extractfile(m).read() for m in tar if m.isfile()}

    def blob(descriptor: dict) -> bytes:
        data = files["blobs/" + descriptor["digest"].replace(":", "/")]
        assert sha256(data) == descriptor["digest"], f"blob {descriptor['digest']} does not hash to its name"
        assert len(data) == descriptor["size"], f"blob {descriptor['digest']} is not {descriptor['size']} bytes"
        return data

    assert json.loads(files["oci-layout"]) == {"imageLayoutVersion": "1.0.0"}
    index = json.loads(files["index.json"])
    [descriptor] = index["manifests"]
    manifest = json.loads(blob(descriptor))
    config = json.loads(blob(manifest["config"]))
    layers = tuple(blob(layer) for layer in manifest["layers"])
    return Image(descriptor["digest"], index, manifest, config, layers, names)


def layer_members(image: Image) -> list[tarfile.TarInfo]:
    members = []
    for layer in image.layers:
        with tarfile.open(fileobj=io.BytesIO(layer), mode="r:gz") as tar:
            members.extend(tar.getmembers())
    return members


def unpack(image: Image) -> Path:
    """The layers, in order, as a root file system in a new folder (remove it after):
    under TMPDIR, not pytest's tmp_path, whose 0700 parents the image's user cannot pass."""
    dest = Path(tempfile.mkdtemp(prefix="stowplan-image-"))
    dest.chmod(0o755)
    rootfs = dest / "rootfs"
    rootfs.mkdir()
    for layer in image.layers:      # GNU tar, as root, keeps the layer's owners and modes
        subprocess.run(["tar", "-xz", "--numeric-owner", "-C", str(rootfs)], input=layer, check=True)
    return rootfs


def runner() -> str:
    return "bwrap" if shutil.which("bwrap") else "unshare"


def run(image: Image, rootfs: Path, args: list[str], *, mounts: dict[str, Path]) -> subprocess.CompletedProcess[str]:
    """The config's entry point with args, as the config's user, env and working dir;
    mounts: a folder in the image -> a host folder, read-only (the CronJob's ConfigMap)."""
    config = image.config["config"]
    command = [*config["Entrypoint"], *args]
    env = dict(item.split("=", 1) for item in config.get("Env", []))
    uid, gid = config["User"].split(":")
    workdir = config.get("WorkingDir") or "/"
    for inside in mounts:        # mount points, as a runtime makes them
        (rootfs / inside.lstrip("/")).mkdir(parents=True, exist_ok=True)
    if runner() == "bwrap":
        wrap = ["bwrap", "--ro-bind", str(rootfs), "/", "--proc", "/proc", "--dev", "/dev",
                "--tmpfs", "/tmp", "--unshare-all", "--die-with-parent", "--chdir", workdir, "--clearenv"]
        for inside, host in mounts.items():
            wrap += ["--ro-bind", str(host), inside]
        for key, value in env.items():
            wrap += ["--setenv", key, value]
        if os.geteuid() == 0:
            # bubblewrap started as that user (not as root inside a user namespace, where
            # the image's root-owned files would look like its own).
            wrap = ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", *wrap]
        else:
            wrap += ["--uid", uid, "--gid", gid]
        return subprocess.run([*wrap, "--", *command], env=env, capture_output=True, text=True, timeout=600)
    # No bubblewrap: a chroot through unshare, as root, with the host's /dev bound in
    # (a runtime provides one) for the time of the run.
    if os.geteuid() != 0:
        raise RuntimeError("running the image needs bubblewrap (bwrap) or root")
    for inside, host in mounts.items():
        shutil.copytree(host, rootfs / inside.lstrip("/"), dirs_exist_ok=True)
    subprocess.run(["mount", "--rbind", "/dev", str(rootfs / "dev")], check=True)
    try:
        return subprocess.run(["unshare", "--mount", "--root", str(rootfs), "--wd", workdir, "--setuid", uid,
                               "--setgid", gid, "--", *command], env=env, capture_output=True, text=True, timeout=600)
    finally:
        subprocess.run(["umount", "--recursive", "--lazy", str(rootfs / "dev")], check=True)
