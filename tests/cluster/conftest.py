"""Fixtures for tests that need the real control plane (tests/controlplane).

Every test under tests/cluster is marked ``cluster``. The session fixture
``control_plane`` runs tests/controlplane/build.sh (a no-op once the cache is
warm) and starts etcd, kube-apiserver, kube-controller-manager,
kube-scheduler and KWOK with Kueue's and JobSet's CRDs installed.

STOWPLAN_SKIP_CLUSTER=1 skips these tests (quick local unit runs only).
"""

from __future__ import annotations

import os
import sys
import uuid
from pathlib import Path

import pytest

_CP_DIR = Path(__file__).resolve().parent.parent / "controlplane"
if str(_CP_DIR) not in sys.path:
    sys.path.insert(0, str(_CP_DIR))

import rig  # noqa: E402  (tests/controlplane/rig.py)

_HERE = Path(__file__).resolve().parent


def _skip_cluster() -> bool:
    return os.environ.get("STOWPLAN_SKIP_CLUSTER", "") not in ("", "0", "false", "no")


def pytest_collection_modifyitems(config, items):
    skip = pytest.mark.skip(reason="STOWPLAN_SKIP_CLUSTER is set") if _skip_cluster() else None
    for item in items:
        try:
            item.path.relative_to(_HERE)
        except ValueError:
            continue
        item.add_marker(pytest.mark.cluster)
        if skip is not None:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def control_plane():
    """The running ControlPlane (see tests/controlplane/rig.py)."""
    if _skip_cluster():
        pytest.skip("STOWPLAN_SKIP_CLUSTER is set")
    global _RUNNING
    manifest = rig.build()
    keep = os.environ.get("STOWPLAN_CP_KEEP", "") not in ("", "0")
    cp = rig.ControlPlane(manifest=manifest, keep_workdir=keep)
    cp.start()
    _RUNNING = cp
    try:
        yield cp
    finally:
        _RUNNING = None
        cp.stop()
        if keep:
            sys.stderr.write(f"control plane work dir kept: {cp.workdir}\n")


_RUNNING = None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A failing cluster test shows the tail of every component's log."""
    outcome = yield
    report = outcome.get_result()
    if report.failed and _RUNNING is not None and "control_plane" in getattr(item, "fixturenames", ()):
        report.sections.append(("control plane logs", _RUNNING.diagnostics(lines=15)))


@pytest.fixture
def api_client(control_plane):
    with control_plane.api_client() as ac:
        yield ac


@pytest.fixture
def namespace(control_plane, api_client, request):
    """A fresh namespace per test (namespaces are deleted, not awaited)."""
    from kubernetes import client

    core = client.CoreV1Api(api_client)
    base = "".join(c if c.isalnum() else "-" for c in request.node.name.lower())[:40].strip("-")
    name = f"{base}-{uuid.uuid4().hex[:6]}"
    core.create_namespace({"metadata": {"name": name, "labels": {"stowplan-test": "true"}}})
    yield name
    try:
        core.delete_namespace(name)
    except client.ApiException:
        pass


@pytest.fixture
def kube(control_plane):
    """Stowplan's own client of the control plane (a module needing more defines its own)."""
    from planner.cluster import Kube, connect

    return Kube(connect(str(control_plane.kubeconfig)))


@pytest.fixture
def env_factory(control_plane, api_client, namespace):
    """make(**kw): a test world (live_kit.Env) in this test's namespace; all cleaned up after."""
    from live_kit import Env

    made = []

    def make(**kw):
        env = Env(control_plane, api_client, namespace, **kw)
        made.append(env)
        return env

    yield make
    for env in made:
        env.cleanup()


@pytest.fixture(autouse=True)
def _control_plane_alive(request):
    """After each cluster test, fail loudly if a component has died."""
    yield
    if "control_plane" in request.fixturenames:
        cp = request.getfixturevalue("control_plane")
        cp.check()
