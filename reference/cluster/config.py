"""Choose a cluster backend from one setting (``spark.streamwire.cluster.provider``).

``memory`` (the default): an in-process cluster in this process;
``etcd://[USER[:PASSWORD]@]HOST:PORT[/NAMESPACE][?ca=PATH&cert=PATH&key=PATH&password_file=PATH]``:
the etcd backend (TLS when a CA or client certificate is given; see ``EtcdEndpoint``); ``tcp://[:SECRET@]HOST:PORT``: a driver-hosted cluster service (what executors
use). :data:`PROVIDER_SYNTAX` is the one table of these settings: the cluster conformance runner
takes the same ones as targets (conformance/cluster/harness.py).
"""

from __future__ import annotations

from enum import Enum
from typing import Final, Mapping
from urllib.parse import urlsplit

from reference.cluster.etcd import EtcdCluster
from reference.cluster.etcd_gateway import EtcdEndpoint
from reference.cluster.memory import InProcessCluster
from reference.cluster.remote import RemoteCluster
from reference.cluster.service import ClusterService
from spec.auth.settings import AUTHENTICATE_KEY, SECRET_KEY, enabled
from spec.cluster.detector import FailurePolicy
from spec.cluster.interface import ClusterBackend
from spec.shared_secret import configured_secret

SPARK_CONF_KEY = "spark.streamwire.cluster.provider"


class ProviderKind(Enum):
    """What a provider setting names: the in-process cluster, an etcd, a cluster service."""

    MEMORY = "memory"
    ETCD = "etcd"
    SERVICE = "tcp"


PROVIDER_SYNTAX: Final[dict[ProviderKind, str]] = {
    ProviderKind.MEMORY: "memory",
    ProviderKind.ETCD: "etcd://[USER[:PASSWORD]@]HOST:PORT[/NAMESPACE][?ca=&cert=&key=&password_file=]",
    ProviderKind.SERVICE: "tcp://[:SECRET@]HOST:PORT",
}


def provider_kind(setting: str) -> ProviderKind | None:
    """What ``setting`` names, or None when it is no provider setting."""
    if setting == ProviderKind.MEMORY.value:
        return ProviderKind.MEMORY
    parts = urlsplit(setting)
    if not parts.netloc:
        return None
    return {ProviderKind.ETCD.value: ProviderKind.ETCD, ProviderKind.SERVICE.value: ProviderKind.SERVICE}.get(parts.scheme)

SECRET_CONF_KEY = "spark.streamwire.cluster.secret"
HEARTBEAT_CONF_KEY = "spark.streamwire.cluster.heartbeatIntervalMs"
FAIL_AFTER_CONF_KEY = "spark.streamwire.cluster.failAfterMs"
DEFAULT = "memory"
JOB_FAILURE_POLICY = FailurePolicy(heartbeat_interval=0.5, fail_after=5.0)
"""The driver-hosted cluster's failure timing in a Spark job: executors on a busy host can miss a
second of heartbeats (the in-process default's FAIL bound is 1.2 s), and a task declared FAIL ends
its whole shuffle, so a job waits 5 s of silence; peers that close their sockets are noticed at once
anyway, this bound only covers links that go silent."""


def failure_policy(conf: Mapping[str, str]) -> FailurePolicy:
    """The driver-hosted cluster's failure timing from ``spark.streamwire.cluster.heartbeatIntervalMs``
    and ``...failAfterMs``, :data:`JOB_FAILURE_POLICY` where unset."""
    def seconds(key: str, default: float) -> float:
        text = conf.get(key)
        if text is None:
            return default
        try:
            value = int(text)
        except ValueError:
            raise ValueError(f"{key} must be a whole number of milliseconds, got {text!r}") from None
        if value <= 0:
            raise ValueError(f"{key} must be positive, got {value}")
        return value / 1000

    heartbeat = seconds(HEARTBEAT_CONF_KEY, JOB_FAILURE_POLICY.heartbeat_interval)
    fail_after = seconds(FAIL_AFTER_CONF_KEY, JOB_FAILURE_POLICY.fail_after)
    try:
        return FailurePolicy(heartbeat_interval=heartbeat, fail_after=fail_after)
    except ValueError as refused:
        raise ValueError(f"{FAIL_AFTER_CONF_KEY}, {HEARTBEAT_CONF_KEY}: {refused}") from None


def service_secret(conf: Mapping[str, str]) -> str | None:
    """The shared secret the driver's cluster service requires: ``spark.streamwire.cluster.secret``,
    else Spark's own ``spark.authenticate.secret`` when ``spark.authenticate`` is on, else none
    (local runs). A setting that is present but blank raises EmptySecret naming it (never "none")."""
    if SECRET_CONF_KEY in conf:
        return configured_secret(conf[SECRET_CONF_KEY], SECRET_CONF_KEY)
    if enabled(conf, AUTHENTICATE_KEY) and SECRET_KEY in conf:
        return configured_secret(conf[SECRET_KEY], SECRET_KEY)
    return None


def open_backend(setting: str = DEFAULT) -> ClusterBackend:
    kind = provider_kind(setting)
    if kind is ProviderKind.MEMORY:
        return InProcessCluster()
    if kind is ProviderKind.ETCD:
        return EtcdCluster(EtcdEndpoint.parse(setting), urlsplit(setting).path.strip("/") or "streamwire")
    if kind is ProviderKind.SERVICE:
        return RemoteCluster(setting)
    raise ValueError(f"{SPARK_CONF_KEY}: expected {' or '.join(PROVIDER_SYNTAX.values())}, "
                     f"got scheme {urlsplit(setting).scheme!r}")


class DriverCluster:
    """The driver's cluster: in-process with a TCP service for executors, or an external etcd.

    ``secret`` (see :func:`service_secret`) makes the service require it; ``executor_url`` then
    carries it to the executors."""

    def __init__(self, provider: str, host: str = "127.0.0.1", secret: str | None = None,
                 policy: FailurePolicy = JOB_FAILURE_POLICY) -> None:
        self._service: ClusterService | None = None
        if provider == "memory":
            cluster = InProcessCluster(policy)
            self._service = ClusterService(cluster, host=host, secret=secret)
            self.backend: ClusterBackend = cluster
            self.executor_url = self._service.url
        else:
            self.backend = open_backend(provider)
            self.executor_url = provider

    def close(self) -> None:
        if self._service is not None:
            self._service.close()
        self.backend.close()
