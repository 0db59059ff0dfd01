"""The worker clusters a MultiKueue setup already names, read from the manager: a
MultiKueueConfig's `spec.clusters`, each MultiKueueCluster's kubeconfig (a Secret in
Kueue's namespace, key `kubeconfig`, or a local Path), as Kueue's MultiKueue controller
finds them. Only reads; the kubeconfig's content goes to the client, never to disk or
a message. ClusterProfile references (the v1beta2 alternative) are not supported.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from planner.cluster.kube import ApiStatus, Kube, connect, connect_text, path_of
from planner.base.errors import InputError

API = "kueue.x-k8s.io/v1beta2"
SECRET_KEY = "kubeconfig"


def workers_from_config(manager: Kube, config_name: str, kueue_namespace: str = "kueue-system",
                        dry_run: bool = False) -> dict[str, Kube]:
    """Worker name (the MultiKueueCluster's) -> a Kube on it, for every cluster of MultiKueueConfig `config_name`."""
    where = f"{manager.host}: MultiKueueConfig {config_name}"
    config = _get(manager, path_of(API, "multikueueconfigs", "", config_name), where)
    clusters = (config.get("spec") or {}).get("clusters")
    if not isinstance(clusters, list) or not clusters:
        raise InputError("lists no clusters", file=where, field="spec.clusters")
    out: dict[str, Kube] = {}
    for name in clusters:
        out[str(name)] = Kube(_connect_cluster(manager, str(name), kueue_namespace), dry_run=dry_run)
    return out


def _connect_cluster(manager: Kube, name: str, kueue_namespace: str) -> Any:
    where = f"{manager.host}: MultiKueueCluster {name}"
    cluster = _get(manager, path_of(API, "multikueueclusters", "", name), where)
    source = ((cluster.get("spec") or {}).get("clusterSource") or {})
    kubeconfig = source.get("kubeConfig")
    if not isinstance(kubeconfig, dict) or not kubeconfig.get("location"):
        raise InputError("has no kubeConfig (a clusterProfileRef is not supported)", file=where,
                         field="spec.clusterSource.kubeConfig")
    location, kind = str(kubeconfig["location"]), str(kubeconfig.get("locationType") or "Secret")
    if kind == "Path":
        return connect(location)
    secret_where = f"{manager.host}: Secret {kueue_namespace}/{location} (MultiKueueCluster {name})"
    secret = _get(manager, path_of("v1", "secrets", kueue_namespace, location), secret_where)
    encoded = (secret.get("data") or {}).get(SECRET_KEY)
    if not isinstance(encoded, str):
        raise InputError(f"has no key {SECRET_KEY}", file=secret_where, field=f"data.{SECRET_KEY}")
    try:
        text = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        raise InputError("is not base64", file=secret_where, field=f"data.{SECRET_KEY}") from None
    return connect_text(text, secret_where)


def _get(manager: Kube, path: str, where: str) -> dict[str, Any]:
    try:
        found = manager.get(path)
    except ApiStatus as err:
        if err.status == 404:
            raise InputError("not found on the manager", file=where) from None
        raise
    if not isinstance(found, dict):
        raise InputError("the API server's answer is not an object", file=where)
    return found
