"""Kueue's manager as a process beside the test control plane (tests/controlplane/rig.py).

    manager = KueueManager(control_plane)
    manager.start()          # config, certificates, process; waits for /readyz
    ...
    manager.freeze(); ...; manager.thaw()   # hold it still while several writes land
    manager.stop()

The binary is the one build.sh built (manifest key KUEUE). Configuration
(config.kueue.x-k8s.io/v1beta2): leader election off, metrics off, internal
certificate management off, the webhook server on 127.0.0.1 with a self-signed
certificate (no webhook configuration points at it, so the API server never calls
it), health probes on a free 127.0.0.1 port, integrations batch/job and
jobset.x-k8s.io/jobset, default feature
gates (TopologyAwareScheduling is on by default in v0.17.0) except
VisibilityOnDemand, whose aggregated API server would need an APIService.
The snapshot's own Kueue Configuration sections that change decisions (the
`fairSharing`, `admissionFairSharing` and `waitForPodsReady` that greedy plans with,
Snapshot.kueue_config: the ConfigMap kueue-system/kueue-manager-config, then a
PlannerPolicy's overrides) are merged in, in v1beta2's shape (`kueue_sections`);
the sections passed are listed in `notes`. Without them Kueue and greedy would
decide under different rules.

With internal certificate management off, Kueue v0.17.0 reads a metrics
certificate from the fixed path /etc/kueue/metrics/certs/tls.{crt,key} even when
metrics are off (cmd/kueue/main.go). The harness gives it one without writing to
/etc where it can: in a private mount namespace (`unshare --mount`) an overlay
over /etc adds the two files for this process only. Where that is not allowed it
uses files already there, and as a last resort writes them (and says so).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any, Callable

import yaml  # type: ignore[import-untyped, unused-ignore]

from models import KueueConfig
from tools.peer.controlplane import rig

METRICS_CERT_DIR = Path("/etc/kueue/metrics/certs")
FRAMEWORKS = ("batch/job", "jobset.x-k8s.io/jobset")
FEATURE_GATES = {"VisibilityOnDemand": False}
_HEADS = re.compile(r'"msg":"Obtained heads"[^\n]*?"headCount":(\d+)')


class KueueError(RuntimeError):
    """Kueue could not be started or stopped working."""


def _duration(seconds: float) -> str:
    """Seconds as a Go duration string (metav1.Duration)."""
    return f"{int(seconds)}s" if float(seconds).is_integer() else f"{seconds!r}s"


def kueue_sections(config: KueueConfig) -> dict[str, Any]:
    """The Configuration sections (config.kueue.x-k8s.io/v1beta2) for what `config` turns on:
    in v1beta2 a section that is present is on, so a section that is off is left out."""
    sections: dict[str, Any] = {}
    if config.fair_sharing.enabled:
        sections["fairSharing"] = {"preemptionStrategies": list(config.fair_sharing.preemption_strategies)}
    afs = config.admission_fair_sharing
    if afs is not None:
        section: dict[str, Any] = {"usageHalfLifeTime": _duration(afs.usage_half_life_seconds),
                                   "usageSamplingInterval": _duration(afs.usage_sampling_interval_seconds)}
        if afs.resource_weights:
            section["resourceWeights"] = dict(sorted(afs.resource_weights.items()))
        sections["admissionFairSharing"] = section
    ready = config.wait_for_pods_ready
    if ready.enabled:
        strategy = ready.requeuing_strategy
        requeuing: dict[str, Any] = {"timestamp": strategy.timestamp,
                                     "backoffBaseSeconds": strategy.backoff_base_seconds,
                                     "backoffMaxSeconds": strategy.backoff_max_seconds}
        if strategy.backoff_limit_count is not None:
            requeuing["backoffLimitCount"] = strategy.backoff_limit_count
        wait: dict[str, Any] = {"timeout": _duration(ready.timeout_seconds), "blockAdmission": ready.block_admission,
                                "requeuingStrategy": requeuing}
        if ready.recovery_timeout_seconds is not None:
            wait["recoveryTimeout"] = _duration(ready.recovery_timeout_seconds)
        sections["waitForPodsReady"] = wait
    return sections


def binary(manifest: dict[str, str]) -> str | None:
    """The Kueue manager build.sh built, or None."""
    path = manifest.get("KUEUE")
    return path if path and os.access(path, os.X_OK) else None


def _self_signed(directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    if not shutil.which("openssl"):
        raise KueueError("need the `openssl` command to make Kueue's webhook and metrics certificates")
    done = subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "3650", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
         "-keyout", str(directory / "tls.key"), "-out", str(directory / "tls.crt")],
        capture_output=True, text=True)
    if done.returncode != 0:
        raise KueueError(f"openssl failed: {done.stderr.strip()}")


_OVERLAY_OK: bool | None = None


def _overlay_works(scratch: Path) -> bool:
    """Whether `unshare --mount` with an overlay over /etc works here (root with
    CAP_SYS_ADMIN; not in every container). Probed once per process."""
    global _OVERLAY_OK
    if _OVERLAY_OK is None:
        upper, work = scratch / "probe-upper", scratch / "probe-work"
        (upper / "kueue").mkdir(parents=True, exist_ok=True)
        work.mkdir(parents=True, exist_ok=True)
        (upper / "kueue" / "probe").write_text("ok")
        script = (f"mount -t overlay overlay -o lowerdir=/etc,upperdir={upper},workdir={work} /etc"
                  " && cat /etc/kueue/probe")
        try:
            done = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
                                  capture_output=True, text=True, timeout=30)
            _OVERLAY_OK = done.returncode == 0 and done.stdout.strip() == "ok"
        except (OSError, subprocess.SubprocessError):
            _OVERLAY_OK = False
        shutil.rmtree(upper, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)
    return _OVERLAY_OK


class KueueManager:
    """One Kueue manager process against a running rig.ControlPlane."""

    def __init__(self, control_plane: Any, *, log_level: int = 2, qps: int = 200, burst: int = 400,
                 say: Callable[[str], None] = lambda message: None, sections: dict[str, Any] | None = None):
        path = binary(control_plane.manifest)
        if path is None:
            raise KueueError("no Kueue manager binary in the control plane manifest (KUEUE): "
                             "run `bash tests/controlplane/build.sh`")
        self.binary = path
        self.cp = control_plane
        self.dir = Path(control_plane.workdir) / "kueue"
        self.log = Path(control_plane.logs) / "kueue.log"
        self.log_level = log_level
        self.qps, self.burst = qps, burst
        self.say = say
        self.health_port, self.webhook_port = rig.free_ports(2)
        self.proc: Any = None
        self.notes: list[str] = []
        self.sections = dict(sections or {})
        self.notes.append("Kueue Configuration sections from the snapshot: "
                          + (", ".join(self.sections) if self.sections else "none (Kueue's defaults: fair sharing, "
                             "admission fair sharing and waitForPodsReady off)"))

    # ------------------------------------------------------------ setup

    def config(self) -> dict[str, Any]:
        return {
            "apiVersion": "config.kueue.x-k8s.io/v1beta2",
            "kind": "Configuration",
            "namespace": "kueue-system",
            "health": {"healthProbeBindAddress": f"127.0.0.1:{self.health_port}"},
            "metrics": {"bindAddress": "0"},
            "webhook": {"host": "127.0.0.1", "port": self.webhook_port, "certDir": str(self.dir / "certs")},
            "leaderElection": {"leaderElect": False},
            "internalCertManagement": {"enable": False},
            "clientConnection": {"qps": self.qps, "burst": self.burst},
            "integrations": {"frameworks": list(FRAMEWORKS)},
            "featureGates": dict(FEATURE_GATES),
            **self.sections,
        }

    def _argv(self) -> list[str]:
        config = self.dir / "config.yaml"
        config.write_text(yaml.safe_dump(self.config(), sort_keys=False))
        argv = [self.binary, f"--config={config}", f"--kubeconfig={self.cp.kubeconfig}",
                f"--zap-log-level={self.log_level}", "--zap-encoder=json"]
        have = all((METRICS_CERT_DIR / f).is_file() for f in ("tls.crt", "tls.key"))
        if have:
            return argv
        if _overlay_works(self.dir):
            upper = self.dir / "etc-upper"
            certs = upper / "kueue" / "metrics" / "certs"
            certs.mkdir(parents=True, exist_ok=True)
            for name in ("tls.crt", "tls.key"):
                shutil.copyfile(self.dir / "certs" / name, certs / name)
            work = self.dir / "etc-work"
            work.mkdir(exist_ok=True)
            script = (f'mount -t overlay overlay -o lowerdir=/etc,upperdir={upper},workdir={work} /etc'
                      ' && exec "$0" "$@"')
            return ["unshare", "--mount", "--propagation", "private", "sh", "-c", script] + argv
        try:
            METRICS_CERT_DIR.mkdir(parents=True, exist_ok=True)
            for name in ("tls.crt", "tls.key"):
                shutil.copyfile(self.dir / "certs" / name, METRICS_CERT_DIR / name)
        except OSError as err:
            raise KueueError(f"Kueue needs {METRICS_CERT_DIR}/tls.{{crt,key}}; no private mount namespace "
                             f"here and cannot write them: {err}") from None
        self.notes.append(f"wrote a self-signed certificate to {METRICS_CERT_DIR} (no private mount namespace here)")
        return argv

    def _namespace(self) -> None:
        from kubernetes import client

        with self.cp.api_client() as ac:
            core: Any = client.CoreV1Api(ac)
            try:
                core.create_namespace({"metadata": {"name": "kueue-system"}})
            except client.ApiException as err:
                if err.status != 409:
                    raise

    # ------------------------------------------------------------ lifecycle

    def start(self, timeout: float = 120.0) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        if not (self.dir / "certs" / "tls.crt").is_file():
            _self_signed(self.dir / "certs")
        self._namespace()
        # Fresh ports each start: a restarted manager must not race its predecessor's sockets.
        self.health_port, self.webhook_port = rig.free_ports(2)
        self.proc = rig.Proc("kueue", self._argv(), self.log)
        self.proc.start()
        deadline = time.monotonic() + timeout
        while True:
            self.check()
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.health_port}/readyz", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise KueueError(f"Kueue not ready after {timeout:.0f} s; see {self.log}")
            time.sleep(0.2)
        self.say(f"Kueue {self.version()} ready (log {self.log})")

    def version(self) -> str:
        return str(self.cp.manifest.get("KUEUE_VERSION", "?"))

    def check(self) -> None:
        if self.proc is not None and not self.proc.alive():
            raise KueueError(f"Kueue exited; last lines of {self.log}:\n{rig.log_tail(self.log)}")

    def stop(self) -> None:
        if self.proc is not None:
            self.thaw()
            self.proc.stop(timeout=10)
            self.proc = None

    def restart(self) -> None:
        """A new manager process: Kueue rebuilds every cache from the API server."""
        self.stop()
        self.start()

    def freeze(self) -> None:
        """SIGSTOP: Kueue sees nothing until thaw(); writes meanwhile reach it together."""
        if self.proc is not None and self.proc.pid:
            os.kill(self.proc.pid, signal.SIGSTOP)

    def thaw(self) -> None:
        if self.proc is not None and self.proc.pid:
            try:
                os.kill(self.proc.pid, signal.SIGCONT)
            except ProcessLookupError:
                pass

    # ------------------------------------------------------------ log

    def log_size(self) -> int:
        try:
            return self.log.stat().st_size
        except OSError:
            return 0

    def early_preemptions(self, since: int = 0) -> list[str]:
        """Workloads (namespace/name) Kueue preempted, after byte `since` of its log, before
        its own first quota reservation of them was written: the eviction races the admission
        write and may be lost, and Kueue then preempts another victim (README, caveats)."""
        try:
            with open(self.log, "rb") as handle:
                handle.seek(since)
                text = handle.read().decode("utf-8", "replace")
        except OSError:
            return []
        preempted: dict[str, str] = {}
        reserved: dict[str, str] = {}
        for line in text.splitlines():
            if '"Preempted to accommodate' not in line and '"Quota reserved in ClusterQueue' not in line:
                continue
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            obj = entry.get("object") or {}
            if obj.get("kind") != "Workload":
                continue
            name, ts = f"{obj.get('namespace', '')}/{obj.get('name', '')}", str(entry.get("ts", ""))
            target = preempted if str(entry.get("msg", "")).startswith("Preempted to accommodate") else reserved
            target.setdefault(name, ts)
        return sorted(name for name, ts in preempted.items() if ts < reserved.get(name, ""))

    def heads_per_cycle(self, since: int = 0) -> list[int]:
        """The head counts of Kueue's scheduling cycles logged after byte `since`."""
        try:
            with open(self.log, "rb") as handle:
                handle.seek(since)
                text = handle.read().decode("utf-8", "replace")
        except OSError:
            return []
        return [int(m.group(1)) for m in _HEADS.finditer(text)]
