"""A real, local Kubernetes control plane for Stowplan's cluster tests.

    from rig import ControlPlane            # tests/controlplane on sys.path
    with ControlPlane() as cp:
        core = kubernetes.client.CoreV1Api(cp.api_client())
        cp.make_node("n1", labels={...}, allocatable={"nvidia.com/gpu": "8"})

Processes (all on 127.0.0.1, free ports, one temporary work dir):
  etcd                      data on tmpfs (/dev/shm) when there is one, and
                            --unsafe-no-fsync when the binary has it (3.5+)
  kube-apiserver            token auth (admin token in system:masters), RBAC,
                            serving cert from a throwaway CA (openssl)
  kube-controller-manager   all controllers but node-lifecycle (no kubelets)
  kube-scheduler
  kwok                      --manage-all-nodes: keeps Nodes Ready and moves
                            bound pods to Running
and, once the API is up, Kueue's CRDs (v1beta2 served), JobSet's CRD and the CRDs of
the other workload kinds Stowplan plans (Kubeflow Trainer, training-operator's
PyTorchJob, MPIJob v2beta1, Ray, LeaderWorkerSet), all from their Go modules.

Job pods stay Running (KWOK's pod-complete stage is off unless
job_pods_complete=True). stop_apiserver()/start_apiserver() crash or drain the
API server and bring it back on the same port with the same etcd data.
Components log to <workdir>/logs/<name>.log; a failed start prints their tails.

Binaries and CRD locations come from the manifest that build.sh writes
(``$STOWPLAN_CP_CACHE/manifest.env``, default ``~/.cache/stowplan-cp``).
Only the standard library, the ``kubernetes`` client and PyYAML are used.
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import copy
import ctypes
import glob
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Iterable, Mapping

import yaml

HERE = Path(__file__).resolve().parent
BUILD_SCRIPT = HERE / "build.sh"
ADMIN_USER = "stowplan-admin"

__all__ = [
    "ControlPlane",
    "ControlPlaneError",
    "build",
    "cache_dir",
    "load_manifest",
    "node_body",
]


class ControlPlaneError(RuntimeError):
    """A component did not start, or did not become ready in time."""


# ---------------------------------------------------------------------------
# Build and manifest
# ---------------------------------------------------------------------------


def cache_dir() -> Path:
    return Path(
        os.environ.get("STOWPLAN_CP_CACHE")
        or Path.home() / ".cache" / "stowplan-cp"
    )


def build(quiet: bool = False) -> dict[str, str]:
    """Run build.sh (a no-op when everything is cached) and load the manifest."""
    out = subprocess.DEVNULL if quiet else None
    r = subprocess.run(["bash", str(BUILD_SCRIPT)], stdout=out, stderr=out)
    if r.returncode != 0:
        raise ControlPlaneError(
            f"`bash {BUILD_SCRIPT}` failed with exit code {r.returncode}; see its output above"
        )
    return load_manifest()


def load_manifest(path: str | os.PathLike[str] | None = None) -> dict[str, str]:
    p = Path(path) if path else cache_dir() / "manifest.env"
    if not p.exists():
        raise ControlPlaneError(
            f"{p} does not exist: run `bash {BUILD_SCRIPT}` first"
        )
    out: dict[str, str] = {}
    for line in p.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        k, v = line.split("=", 1)
        out[k] = v
    # Single components may be overridden from the environment,
    # e.g. STOWPLAN_CP_ETCD=/usr/local/bin/etcd.
    for k in list(out):
        env = os.environ.get(f"STOWPLAN_CP_{k}")
        if env:
            out[k] = env
    return out


# ---------------------------------------------------------------------------
# Small helpers
# ---------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def free_ports(n: int) -> list[int]:
    ports: set[int] = set()
    while len(ports) < n:
        ports.add(_free_port())
    return list(ports)


def _port_in_use(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return True
        return False


def log_tail(path: Path, lines: int = 40) -> str:
    try:
        data = path.read_bytes()[-64 * 1024 :].decode("utf-8", "replace")
    except OSError as e:
        return f"<cannot read {path}: {e}>"
    return "\n".join(data.splitlines()[-lines:])


# Loaded here, not in the child: between fork and exec only the prctl call runs.
try:
    _libc = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None
    _prctl = _libc.prctl if _libc is not None else None
except (OSError, AttributeError):  # pragma: no cover
    _prctl = None
_PR_SET_PDEATHSIG = 1
_SIGKILL = int(signal.SIGKILL)


def _child_setup() -> None:
    """In the child: ask the kernel to SIGKILL us when our parent dies.

    start_new_session already puts the child in its own process group so that
    stop() can kill it and whatever it started; PR_SET_PDEATHSIG covers the
    parent being SIGKILLed (no atexit) so nothing is left behind. (The signal
    fires when the *thread* that started the child exits: start the control
    plane from a thread that outlives it, e.g. the main thread.)
    """
    if _prctl is not None:
        _prctl(_PR_SET_PDEATHSIG, _SIGKILL, 0, 0, 0)


class Proc:
    """One child process, in its own process group, logging to a file."""

    def __init__(self, name: str, argv: list[str], log: Path, env: Mapping[str, str] | None = None):
        self.name = name
        self.argv = argv
        self.log = log
        self.env = dict(env) if env is not None else None
        self.popen: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log, "ab") as f:
            f.write(f"\n==== {time.strftime('%H:%M:%S')} start: {' '.join(self.argv)}\n".encode())
            f.flush()
            preexec = _child_setup if _prctl is not None else None
            self.popen = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=f,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=preexec,
                env=self.env,
                close_fds=True,
            )

    @property
    def pid(self) -> int | None:
        return self.popen.pid if self.popen else None

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def check_alive(self) -> None:
        if self.popen is not None and self.popen.poll() is not None:
            raise ControlPlaneError(
                f"{self.name} exited with code {self.popen.returncode}; "
                f"last lines of {self.log}:\n{log_tail(self.log)}"
            )

    def stop(self, timeout: float = 10.0, graceful: bool = True) -> None:
        """SIGTERM the group, SIGKILL what is left after timeout (at once if
        not graceful)."""
        p = self.popen
        if p is None:
            return
        if graceful and p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                p.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                pass
        # Kill whatever is left in the group (the leader may be gone already).
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(p.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            p.wait(timeout=5)
        self.popen = None


def _run(argv: list[str], cwd: Path) -> None:
    r = subprocess.run(argv, cwd=cwd, capture_output=True, text=True)
    if r.returncode != 0:
        raise ControlPlaneError(f"{' '.join(argv)} failed ({r.returncode}):\n{r.stderr}")


def _sweep_stale(parent: Path, prefix: str) -> None:
    """Remove <prefix><pid>-* dirs left by a process that was SIGKILLed."""
    for d in parent.glob(prefix + "*"):
        pid = d.name[len(prefix):].split("-", 1)[0]
        if not pid.isdigit() or (d / ".keep").exists():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(d, ignore_errors=True)
        except PermissionError:
            pass


_ETCD_FLAGS: dict[str, str] = {}


def _etcd_flags(binary: str) -> str:
    """`etcd --help` text (flags differ between Debian's 3.4 and 3.6)."""
    if binary not in _ETCD_FLAGS:
        r = subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=30)
        _ETCD_FLAGS[binary] = r.stdout + r.stderr
    return _ETCD_FLAGS[binary]


def _make_pki(d: Path) -> None:
    """CA, apiserver serving cert (127.0.0.1/localhost), service-account keys."""
    d.mkdir(parents=True, exist_ok=True)
    if shutil.which("openssl"):
        _run(["openssl", "genrsa", "-out", "ca.key", "2048"], d)
        _run(["openssl", "req", "-x509", "-new", "-key", "ca.key", "-days", "3650",
              "-subj", "/CN=stowplan-test-ca", "-out", "ca.crt"], d)
        _run(["openssl", "genrsa", "-out", "apiserver.key", "2048"], d)
        _run(["openssl", "req", "-new", "-key", "apiserver.key",
              "-subj", "/CN=kube-apiserver", "-out", "apiserver.csr"], d)
        (d / "apiserver.ext").write_text(
            "subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes,"
            "DNS:kubernetes.default,DNS:kubernetes.default.svc\n"
            "extendedKeyUsage=serverAuth\nkeyUsage=digitalSignature,keyEncipherment\n"
        )
        _run(["openssl", "x509", "-req", "-in", "apiserver.csr", "-CA", "ca.crt",
              "-CAkey", "ca.key", "-CAcreateserial", "-days", "3650",
              "-extfile", "apiserver.ext", "-out", "apiserver.crt"], d)
        _run(["openssl", "genrsa", "-out", "sa.key", "2048"], d)
        _run(["openssl", "rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub"], d)
        return
    try:  # only if it happens to be installed: it is no dependency of ours
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import rsa
        from cryptography.x509.oid import NameOID
    except ImportError as e:  # pragma: no cover
        raise ControlPlaneError(
            "need the `openssl` command (apt-get install openssl) to make test certificates"
        ) from e
    import datetime
    import ipaddress

    def key() -> Any:
        return rsa.generate_private_key(public_exponent=65537, key_size=2048)

    def write_key(k: Any, name: str) -> None:
        (d / name).write_bytes(k.private_bytes(serialization.Encoding.PEM,
                                               serialization.PrivateFormat.TraditionalOpenSSL,
                                               serialization.NoEncryption()))

    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = key()
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "stowplan-test-ca")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now).not_valid_after(now + datetime.timedelta(days=3650))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .sign(ca_key, hashes.SHA256()))
    srv_key = key()
    srv = (x509.CertificateBuilder()
           .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")]))
           .issuer_name(ca_name).public_key(srv_key.public_key())
           .serial_number(x509.random_serial_number())
           .not_valid_before(now).not_valid_after(now + datetime.timedelta(days=3650))
           .add_extension(x509.SubjectAlternativeName([
               x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]),
               critical=False)
           .sign(ca_key, hashes.SHA256()))
    write_key(ca_key, "ca.key")
    (d / "ca.crt").write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    write_key(srv_key, "apiserver.key")
    (d / "apiserver.crt").write_bytes(srv.public_bytes(serialization.Encoding.PEM))
    sa = key()
    write_key(sa, "sa.key")
    (d / "sa.pub").write_bytes(sa.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))


def node_body(
    name: str,
    labels: Mapping[str, str] | None = None,
    allocatable: Mapping[str, str] | None = None,
    taints: Iterable[Mapping[str, str]] | None = None,
) -> dict[str, Any]:
    """A Node manifest in the shape KWOK manages.

    ``allocatable`` is merged over cpu/memory/pods defaults and also used as
    capacity. ``kubernetes.io/hostname`` defaults to the node name. The status
    part only takes effect through the status subresource (see
    ControlPlane.make_node).
    """
    alloc = {"cpu": "64", "memory": "512Gi", "pods": "110"}
    alloc.update({k: str(v) for k, v in (allocatable or {}).items()})
    lab = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
           "kubernetes.io/arch": "amd64", "type": "kwok"}
    lab.update(labels or {})
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": lab,
            # KWOK's convention; with --manage-all-nodes it is informational.
            "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
        },
        "spec": {"taints": [dict(t) for t in taints]} if taints else {},
        "status": {
            "allocatable": dict(alloc),
            "capacity": dict(alloc),
            "phase": "Running",
            "conditions": [
                {"type": "Ready", "status": "True", "reason": "KubeletReady",
                 "message": "kwok", "lastHeartbeatTime": now, "lastTransitionTime": now},
            ],
            "addresses": [{"type": "Hostname", "address": name}],
        },
    }


# ---------------------------------------------------------------------------
# The control plane
# ---------------------------------------------------------------------------

_LIVE: "set[ControlPlane]" = set()  # strong refs: stopped at exit even if dropped
_LIVE_LOCK = threading.Lock()


def _stop_all_at_exit() -> None:
    for cp in list(_LIVE):
        with contextlib.suppress(Exception):
            cp.stop()


atexit.register(_stop_all_at_exit)


# Kubernetes v1.36's Workload API and gang scheduling (ControlPlane(workload_api=True)).
# v1.36 serves Workload and PodGroup as scheduling.k8s.io/v1alpha2 (v1.35's v1alpha1 is
# gone), behind the alpha gate GenericWorkload, which kube-apiserver needs together with
# the group version in --runtime-config (alpha versions are not served by default).
# kube-scheduler needs GenericWorkload (its PodGroup informer) and GangScheduling (the
# plugin joins the default profile with its gate); TopologyAwareWorkloadScheduling lets a
# PodGroup carry schedulingConstraints.topology (dropped by the apiserver without it). The
# controller manager gets GenericWorkload too (garbage collection of the new kinds).
WORKLOAD_GATES = "GenericWorkload=true,GangScheduling=true,TopologyAwareWorkloadScheduling=true"
WORKLOAD_RUNTIME_CONFIG = "scheduling.k8s.io/v1alpha2=true"


class ControlPlane:
    """etcd + kube-apiserver + controller-manager + scheduler + KWOK, all local.

    Parameters
      workdir            where certs, kubeconfig, etcd data and logs go; a fresh
                         temporary dir by default (removed by stop() unless
                         keep_workdir or the start failed)
      manifest           a dict as load_manifest() returns; loaded if None
      kueue_versions     Kueue API versions left served (v1beta2 only: without
                         Kueue's conversion webhook v1beta1 would be wrong)
      job_pods_complete  let KWOK move Running Job pods to Succeeded (its
                         pod-complete stage); off by default, so Job pods stay
                         Running like long training runs
      workload_api       Kubernetes' gang scheduling (KEP-4671), alpha and off by
                         default in v1.36: see WORKLOAD_GATES
    """

    def __init__(
        self,
        workdir: str | os.PathLike[str] | None = None,
        manifest: Mapping[str, str] | None = None,
        *,
        keep_workdir: bool = False,
        controller_manager: bool = True,
        scheduler: bool = True,
        kwok: bool = True,
        install_crds: bool = True,
        kueue_versions: Iterable[str] = ("v1beta2",),
        job_pods_complete: bool = False,
        workload_api: bool = False,
        verbosity: int = 1,
        start_timeout: float = 120.0,
    ):
        self.manifest = dict(manifest) if manifest is not None else load_manifest()
        self._own_workdir = workdir is None
        if workdir is None:
            _sweep_stale(Path(tempfile.gettempdir()), "stowplan-cp-")
        self.workdir = (Path(workdir) if workdir else
                        Path(tempfile.mkdtemp(prefix=f"stowplan-cp-{os.getpid()}-")))
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.keep_workdir = keep_workdir
        self.want_kcm = controller_manager
        self.want_scheduler = scheduler
        self.want_kwok = kwok
        self.want_crds = install_crds
        self.kueue_versions = tuple(kueue_versions)
        self.job_pods_complete = job_pods_complete
        self.workload_api = workload_api
        self.verbosity = verbosity
        self.start_timeout = start_timeout

        self.version = self.manifest.get("K8S_VERSION", "")
        self.token = base64.urlsafe_b64encode(os.urandom(24)).decode().rstrip("=")
        (self.etcd_port, self.etcd_peer_port, self.port, self.kcm_port,
         self.sched_port, self.kwok_port) = free_ports(6)
        self.server = f"https://127.0.0.1:{self.port}"
        self.pki = self.workdir / "pki"
        self.logs = self.workdir / "logs"
        self.kubeconfig = self.workdir / "kubeconfig"
        self.procs: dict[str, Proc] = {}
        self._cleanup: list[Path] = []
        self._started = False
        self._failed = False

    # -- lifecycle ---------------------------------------------------------

    def __enter__(self) -> "ControlPlane":
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        if exc[0] is not None:
            self._failed = True
        self.stop()

    def start(self) -> "ControlPlane":
        with _LIVE_LOCK:
            _LIVE.add(self)
        try:
            _make_pki(self.pki)
            self._write_token_file()
            self._write_kubeconfig()
            self._start_etcd()
            self.start_apiserver()
            if self.want_crds:
                self.install_crds()
            if self.want_kcm:
                self._start_kcm()
            if self.want_scheduler:
                self._start_scheduler()
            if self.want_kwok:
                self._start_kwok()
            self._wait_controllers()
        except BaseException:
            self._failed = True
            sys.stderr.write(self.diagnostics())
            self.stop()
            raise
        self._started = True
        return self

    def stop(self) -> None:
        """Stop everything (reverse order) and clean up. Safe to call twice."""
        for name in ("kwok", "kube-scheduler", "kube-controller-manager", "kube-apiserver", "etcd"):
            p = self.procs.get(name)
            if p is not None:
                p.stop()
        with _LIVE_LOCK:
            _LIVE.discard(self)
        for d in self._cleanup:
            shutil.rmtree(d, ignore_errors=True)
        self._cleanup.clear()
        if self._own_workdir and not self.keep_workdir and not self._failed:
            shutil.rmtree(self.workdir, ignore_errors=True)
        elif self._own_workdir:
            with contextlib.suppress(OSError):
                (self.workdir / ".keep").touch()
        if self._failed:
            sys.stderr.write(f"control plane work dir kept for inspection: {self.workdir}\n")

    def check(self) -> None:
        """Raise if any started component has died."""
        for p in self.procs.values():
            if p.popen is not None:
                p.check_alive()

    def diagnostics(self, lines: int = 30) -> str:
        out = [f"\n==== control plane in {self.workdir} ===="]
        for name, p in self.procs.items():
            state = "running" if p.alive() else (
                f"exited {p.popen.returncode}" if p.popen else "stopped")
            out.append(f"---- {name} ({state}), last {lines} lines of {p.log}:")
            out.append(log_tail(p.log, lines))
        return "\n".join(out) + "\n"

    # -- files -------------------------------------------------------------

    def _write_token_file(self) -> None:
        # token,user,uid,"group1,group2"
        (self.workdir / "tokens.csv").write_text(
            f'{self.token},{ADMIN_USER},{ADMIN_USER},"system:masters"\n'
        )

    def _write_kubeconfig(self) -> None:
        ca = base64.b64encode((self.pki / "ca.crt").read_bytes()).decode()
        cfg = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "stowplan-test",
                          "cluster": {"server": self.server,
                                      "certificate-authority-data": ca}}],
            "users": [{"name": ADMIN_USER, "user": {"token": self.token}}],
            "contexts": [{"name": "stowplan-test",
                          "context": {"cluster": "stowplan-test", "user": ADMIN_USER,
                                      "namespace": "default"}}],
            "current-context": "stowplan-test",
        }
        self.kubeconfig.write_text(yaml.safe_dump(cfg, sort_keys=False))
        os.chmod(self.kubeconfig, 0o600)

    def _binary(self, key: str) -> str:
        path = self.manifest.get(key)
        if not path or not os.access(path, os.X_OK):
            raise ControlPlaneError(
                f"{key}={path!r} from the manifest is not executable: run `bash {BUILD_SCRIPT}`"
            )
        return path

    def _spawn(self, name: str, argv: list[str]) -> Proc:
        old = self.procs.get(name)
        if old is not None:
            old.stop()
        p = Proc(name, argv, self.logs / f"{name}.log")
        p.start()
        self.procs[name] = p
        return p

    # -- waiting -----------------------------------------------------------

    def _ssl_context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.pki / "ca.crt"))
        return ctx

    def http_get(self, path: str, timeout: float = 5.0) -> tuple[int, str]:
        """GET path on the API server as the admin user: (status, body)."""
        req = urllib.request.Request(self.server + path,
                                     headers={"Authorization": f"Bearer {self.token}"})
        try:
            with urllib.request.urlopen(req, timeout=timeout, context=self._ssl_context()) as r:
                return r.status, r.read().decode("utf-8", "replace")
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode("utf-8", "replace")

    def _wait(self, what: str, cond, procs: Iterable[str], timeout: float | None = None) -> None:
        deadline = time.monotonic() + (timeout or self.start_timeout)
        last: Any = None
        while True:
            for n in procs:
                self.procs[n].check_alive()
            try:
                if cond():
                    return
            except Exception as e:  # not up yet
                last = e
            if time.monotonic() > deadline:
                raise ControlPlaneError(
                    f"timed out waiting for {what} (last error: {last!r})" + self.diagnostics()
                )
            time.sleep(0.2)

    # -- etcd --------------------------------------------------------------

    def _etcd_data_dir(self) -> Path:
        # etcd fsyncs every write; Debian's 3.4 has no --unsafe-no-fsync, so
        # keep its data on tmpfs when there is one (it is small).
        shm = Path("/dev/shm")
        if shm.is_dir() and os.access(shm, os.W_OK):
            _sweep_stale(shm, "stowplan-etcd-")
            d = Path(tempfile.mkdtemp(prefix=f"stowplan-etcd-{os.getpid()}-", dir=shm))
            self._cleanup.append(d)
            return d
        return self.workdir / "etcd-data"

    def _start_etcd(self) -> None:
        data = self._etcd_data_dir()
        client = f"http://127.0.0.1:{self.etcd_port}"
        peer = f"http://127.0.0.1:{self.etcd_peer_port}"
        argv = [
            self._binary("ETCD"),
            "--name=stowplan",
            f"--data-dir={data}",
            f"--listen-client-urls={client}",
            f"--advertise-client-urls={client}",
            f"--listen-peer-urls={peer}",
            f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster=stowplan={peer}",
            "--initial-cluster-state=new",
            "--quota-backend-bytes=8589934592",
        ]
        flags = _etcd_flags(argv[0])
        if "--unsafe-no-fsync" in flags:
            argv.append("--unsafe-no-fsync=true")
        if "--logger" in flags:
            argv.append("--logger=zap")
        if "--log-level" in flags:
            argv.append("--log-level=warn")
        self._spawn("etcd", argv)

        def healthy() -> bool:
            with urllib.request.urlopen(f"{client}/health", timeout=2) as r:
                return json.loads(r.read()).get("health") in ("true", True)

        self._wait("etcd /health", healthy, ["etcd"])

    # -- kube-apiserver ----------------------------------------------------

    def _apiserver_argv(self) -> list[str]:
        pki = self.pki
        return [
            self._binary("KUBE_APISERVER"),
            f"--etcd-servers=http://127.0.0.1:{self.etcd_port}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--secure-port={self.port}",
            f"--cert-dir={pki}",
            f"--tls-cert-file={pki / 'apiserver.crt'}",
            f"--tls-private-key-file={pki / 'apiserver.key'}",
            f"--token-auth-file={self.workdir / 'tokens.csv'}",
            "--authorization-mode=RBAC",
            "--anonymous-auth=false",
            "--service-cluster-ip-range=10.0.0.0/24",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={pki / 'sa.pub'}",
            f"--service-account-signing-key-file={pki / 'sa.key'}",
            "--disable-admission-plugins=ServiceAccount,TaintNodesByCondition",
            # The "kubernetes" Service would point at 127.0.0.1, which Endpoints
            # validation rejects: no reconciler, no log spam.
            "--endpoint-reconciler-type=none",
            # A graceful stop otherwise waits 60 s for open watches.
            "--shutdown-watch-termination-grace-period=2s",
            "--allow-privileged=true",
            "--profiling=false",
            f"--v={self.verbosity}",
        ] + ([f"--feature-gates={WORKLOAD_GATES}", f"--runtime-config={WORKLOAD_RUNTIME_CONFIG}"]
             if self.workload_api else [])

    def start_apiserver(self, timeout: float | None = None) -> None:
        """(Re)start kube-apiserver on the same port and wait for /readyz."""
        p = self.procs.get("kube-apiserver")
        if p is not None and p.alive():
            return
        deadline = time.monotonic() + 30
        while _port_in_use(self.port) and time.monotonic() < deadline:
            time.sleep(0.2)  # the old process's socket may linger briefly
        self._spawn("kube-apiserver", self._apiserver_argv())
        self.wait_ready(timeout)

    def stop_apiserver(self, graceful: bool = False, timeout: float = 60.0) -> None:
        """Stop kube-apiserver only (etcd and the controllers keep running).

        By default it is SIGKILLed: a crash, in-flight requests cut off. With
        graceful=True it gets SIGTERM and drains first (that takes ~10 s
        while the controllers hold watches open).
        """
        p = self.procs.get("kube-apiserver")
        if p is not None:
            p.stop(timeout=timeout, graceful=graceful)

    def restart_controllers(self) -> None:
        """Restart kube-controller-manager, kube-scheduler and KWOK.

        Their client-go reflectors back off exponentially (0.8 s doubling to
        30 s, reset after 2 min quiet) on every failed watch: after several
        API server restarts in quick succession they can take tens of seconds
        to notice new objects. Restarting them resets that.
        """
        if "kube-controller-manager" in self.procs:
            self._start_kcm()
        if "kube-scheduler" in self.procs:
            self._start_scheduler()
        if "kwok" in self.procs:
            self._start_kwok()
        self._wait_controllers()

    def apiserver_running(self) -> bool:
        p = self.procs.get("kube-apiserver")
        return p is not None and p.alive()

    def wait_ready(self, timeout: float | None = None) -> None:
        def ready() -> bool:
            return self.http_get("/readyz", timeout=3)[0] == 200

        self._wait("kube-apiserver /readyz", ready, ["etcd", "kube-apiserver"], timeout)

    # -- controller manager, scheduler, kwok -------------------------------

    def _start_kcm(self) -> None:
        argv = [
            self._binary("KUBE_CONTROLLER_MANAGER"),
            f"--kubeconfig={self.kubeconfig}",
            "--bind-address=127.0.0.1",
            f"--secure-port={self.kcm_port}",
            "--leader-elect=false",
            # No kubelets: node-lifecycle would mark KWOK nodes NotReady/evict.
            "--controllers=*,-node-lifecycle-controller",
            "--use-service-account-credentials=false",
            "--kube-api-qps=200",
            "--kube-api-burst=400",
            f"--service-account-private-key-file={self.pki / 'sa.key'}",
            f"--root-ca-file={self.pki / 'ca.crt'}",
            # Completed/terminating pods of deleted things go away promptly.
            "--terminated-pod-gc-threshold=1000",
            f"--v={self.verbosity}",
        ]
        if self.workload_api:
            argv.append("--feature-gates=GenericWorkload=true")
        self._spawn("kube-controller-manager", argv)

    def _start_scheduler(self) -> None:
        argv = [
            self._binary("KUBE_SCHEDULER"),
            f"--kubeconfig={self.kubeconfig}",
            "--kube-api-qps=200",
            "--kube-api-burst=400",
            "--bind-address=127.0.0.1",
            f"--secure-port={self.sched_port}",
            "--leader-elect=false",
            f"--v={self.verbosity}",
        ]
        if self.workload_api:
            argv.append(f"--feature-gates={WORKLOAD_GATES}")
        self._spawn("kube-scheduler", argv)

    def _kwok_config(self) -> Path:
        stage_dir = Path(self.manifest.get("KWOK_STAGE_DIR", ""))
        files = [
            "node/fast/node-initialize.yaml",
            "node/heartbeat/node-heartbeat.yaml",
            "pod/fast/pod-ready.yaml",
            "pod/fast/pod-delete.yaml",
        ]
        if self.job_pods_complete:
            files.append("pod/fast/pod-complete.yaml")
        docs = []
        for f in files:
            path = stage_dir / f
            if not path.is_file():
                raise ControlPlaneError(f"KWOK stage {path} is missing: run `bash {BUILD_SCRIPT}`")
            docs.append(path.read_text().strip())
        cfg = self.workdir / "kwok.yaml"
        cfg.write_text("\n---\n".join(docs) + "\n")
        return cfg

    def _start_kwok(self) -> None:
        argv = [
            self._binary("KWOK"),
            f"--config={self._kwok_config()}",
            f"--kubeconfig={self.kubeconfig}",
            "--manage-all-nodes=true",
            f"--server-address=127.0.0.1:{self.kwok_port}",
            "--node-ip=10.0.0.1",
            "--cidr=10.0.128.0/17",
        ]
        self._spawn("kwok", argv)

    def _wait_controllers(self) -> None:
        names = [n for n in ("kube-controller-manager", "kube-scheduler", "kwok") if n in self.procs]
        # The controller manager and the scheduler serve /healthz once their
        # informers run; KWOK has no cheap probe: it only has to stay alive.
        def healthy(port: int) -> bool:
            ctx = ssl.create_default_context()
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
            with urllib.request.urlopen(f"https://127.0.0.1:{port}/healthz", timeout=2,
                                        context=ctx) as r:
                return r.status == 200

        if "kube-controller-manager" in self.procs:
            self._wait("kube-controller-manager /healthz", lambda: healthy(self.kcm_port), names)
        if "kube-scheduler" in self.procs:
            self._wait("kube-scheduler /healthz", lambda: healthy(self.sched_port), names)
        if "kube-controller-manager" in self.procs:
            # Namespaces get their "default" ServiceAccount from the controller
            # manager; waiting for the default one means its informers are live.
            def default_sa() -> bool:
                return self.http_get("/api/v1/namespaces/default/serviceaccounts/default")[0] == 200

            self._wait("the default ServiceAccount", default_sa, names)
        time.sleep(0.5)
        for n in names:
            self.procs[n].check_alive()

    # -- clients -----------------------------------------------------------

    def api_client(self):
        """A new kubernetes.client.ApiClient for the admin user."""
        from kubernetes import config as kconfig

        return kconfig.new_client_from_config(config_file=str(self.kubeconfig))

    # -- CRDs --------------------------------------------------------------

    def crd_files(self) -> list[Path]:
        kueue_dir = Path(self.manifest.get("KUEUE_CRD_DIR", ""))
        files = sorted(Path(p) for p in glob.glob(str(kueue_dir / "kueue.x-k8s.io_*.yaml")))
        if not files:
            raise ControlPlaneError(f"no Kueue CRDs in {kueue_dir!s}: run `bash {BUILD_SCRIPT}`")
        jobset = Path(self.manifest.get("JOBSET_CRD", ""))
        if not jobset.is_file():
            raise ControlPlaneError(f"no JobSet CRD at {jobset!s}: run `bash {BUILD_SCRIPT}`")
        # the other workload kinds (TrainJob, PyTorchJob, MPIJob, Ray, LeaderWorkerSet), from their modules
        others = [Path(p) for p in self.manifest.get("WORKLOAD_CRDS", "").split(":") if p]
        missing = [p for p in others if not p.is_file()]
        if not others or missing:
            raise ControlPlaneError(f"workload CRDs missing ({', '.join(map(str, missing)) or 'none listed'}): "
                                    f"run `bash {BUILD_SCRIPT}`")
        # the cluster autoscaler's ProvisioningRequest (ProvisioningRequest admission checks)
        provisioning = Path(self.manifest.get("PROVISIONING_CRD", ""))
        if not provisioning.is_file():
            raise ControlPlaneError(f"no ProvisioningRequest CRD at {provisioning!s}: run `bash {BUILD_SCRIPT}`")
        return files + [jobset] + others + [provisioning]

    def _prepare_crd(self, crd: dict[str, Any]) -> dict[str, Any]:
        crd = copy.deepcopy(crd)
        spec = crd["spec"]
        # No conversion webhook runs here.
        spec["conversion"] = {"strategy": "None"}
        if spec.get("group") == "kueue.x-k8s.io":
            for v in spec["versions"]:
                if v.get("storage"):
                    v["served"] = True
                elif v["name"] not in self.kueue_versions:
                    v["served"] = False
        elif len(spec["versions"]) > 1 and spec.get("group") not in ("jobset.x-k8s.io",):
            # Only the storage version (Ray's CRDs carry an old v1alpha1 beside v1: a
            # megabyte more per object, near etcd's request limit, for a version no
            # planner reads).
            spec["versions"] = [v for v in spec["versions"] if v.get("storage")]
        ann = crd.setdefault("metadata", {}).setdefault("annotations", {}) or {}
        ann.pop("cert-manager.io/inject-ca-from", None)
        crd["metadata"]["annotations"] = ann
        crd["metadata"].pop("creationTimestamp", None)
        return crd

    def install_crds(self, timeout: float = 60.0) -> list[str]:
        """Create (or replace) Kueue's, JobSet's and the other workload kinds' CRDs; wait until Established."""
        from kubernetes import client
        from kubernetes.client.rest import ApiException

        names: list[str] = []
        installed: list[dict[str, Any]] = []
        with self.api_client() as ac:
            ext = client.ApiextensionsV1Api(ac)
            for path in self.crd_files():
                for doc in yaml.safe_load_all(path.read_text()):
                    if not doc or doc.get("kind") != "CustomResourceDefinition":
                        continue
                    crd = self._prepare_crd(doc)
                    installed.append(crd)
                    name = crd["metadata"]["name"]
                    try:
                        ext.create_custom_resource_definition(crd)
                    except ApiException as e:
                        if e.status != 409:
                            raise
                        cur = ext.read_custom_resource_definition(name)
                        crd["metadata"]["resourceVersion"] = cur.metadata.resource_version
                        ext.replace_custom_resource_definition(name, crd)
                    names.append(name)
            deadline = time.monotonic() + timeout
            for name in names:
                while True:
                    obj = ext.read_custom_resource_definition(name)
                    conds = {c.type: c.status for c in (obj.status.conditions or [])} if obj.status else {}
                    if conds.get("Established") == "True":
                        break
                    if time.monotonic() > deadline:
                        raise ControlPlaneError(f"CRD {name} not Established: {conds}")
                    time.sleep(0.1)
        # Discovery must list the new resources before clients can use them.
        groups = sorted({(str(crd["spec"]["group"]), str(v["name"])) for crd in installed
                         for v in crd["spec"]["versions"] if v.get("served")})

        def discovered() -> bool:
            return all(self.http_get(f"/apis/{group}/{version}")[0] == 200 for group, version in groups)

        self._wait("CRD discovery", discovered, ["kube-apiserver"], timeout)
        return names

    # -- nodes -------------------------------------------------------------

    def make_node(
        self,
        name: str,
        labels: Mapping[str, str] | None = None,
        allocatable: Mapping[str, str] | None = None,
        taints: Iterable[Mapping[str, str]] | None = None,
        wait_ready: bool = True,
        timeout: float = 30.0,
    ):
        """Create a Node (labels, allocatable incl. pods, Ready=True) for KWOK.

        The status only sticks through the status subresource, so the node is
        created first and its status replaced after. Returns the V1Node.
        """
        from kubernetes import client

        body = node_body(name, labels, allocatable, taints)
        status = body.pop("status")
        with self.api_client() as ac:
            core = client.CoreV1Api(ac)
            node = core.create_node(body)
            # Let KWOK's node-initialize stage run first: it writes its defaults
            # (pods: 1M, ...) from the status-less copy it saw, and would overwrite
            # ours if it came second. Once it has made the node Ready it never runs
            # again, so our allocatable then stays.
            settle = time.monotonic() + 5.0
            while time.monotonic() < settle:
                info = core.read_node(name).status.node_info
                if info is not None and (info.kubelet_version or "").startswith("kwok"):
                    break
                time.sleep(0.05)
            core.patch_node_status(name, {"status": status})
            if not wait_ready:
                return core.read_node(name)
            deadline = time.monotonic() + timeout
            while True:
                node = core.read_node(name)
                ready = any(c.type == "Ready" and c.status == "True"
                            for c in (node.status.conditions or []))
                taints_now = [t.key for t in (node.spec.taints or [])]
                if ready and "node.kubernetes.io/not-ready" not in taints_now:
                    return node
                if time.monotonic() > deadline:
                    raise ControlPlaneError(
                        f"node {name} not Ready: conditions={node.status.conditions} taints={taints_now}")
                time.sleep(0.2)
