"""Choose a cluster backend from one setting (``spark.streamwire.cluster.provider``).

``memory`` (the default): an in-process cluster in this process;
``etcd://[USER[:PASSWORD]@]HOST:PORT[/NAMESPACE][?ca=PATH&cert=PATH&key=PATH&password_file=PATH]``:
the etcd backend (TLS when a CA or client certificate is given; see ``EtcdEndpoint``); ``tcp://[:SECRET@]HOST:PORT``: a driver-hosted cluster service (what executors
use).
"""

from __future__ import annotations

from typing import Mapping
from urllib.parse import urlsplit

from reference.cluster.etcd import EtcdCluster
from reference.cluster.etcd_gateway import EtcdEndpoint
from reference.cluster.memory import DetectorSettings, InProcessCluster
from reference.cluster.remote import RemoteCluster
from reference.cluster.service import ClusterService
from spec.cluster.interface import ClusterBackend

SPARK_CONF_KEY = "spark.streamwire.cluster.provider"
SECRET_CONF_KEY = "spark.streamwire.cluster.secret"
HEARTBEAT_CONF_KEY = "spark.streamwire.cluster.heartbeatIntervalMs"
FAIL_AFTER_CONF_KEY = "spark.streamwire.cluster.failAfterMs"
DEFAULT = "memory"
JOB_DETECTOR = DetectorSettings(heartbeat_interval=0.5, pfail_after=2.5, fail_after=5.0)
"""The driver-hosted cluster's detector in a Spark job: executors on a busy host can miss a
second of heartbeats (the in-process default's FAIL bound is 1.2 s), and a task declared FAIL ends
its whole shuffle, so a job waits 5 s of silence; peers that close their sockets are noticed at once
anyway, this bound only covers links that go silent."""


def detector_settings(conf: Mapping[str, str]) -> DetectorSettings:
    """The driver-hosted cluster's detector from ``spark.streamwire.cluster.heartbeatIntervalMs`` and
    ``...failAfterMs`` (PFAIL at half of it), :data:`JOB_DETECTOR` where unset."""
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

    heartbeat = seconds(HEARTBEAT_CONF_KEY, JOB_DETECTOR.heartbeat_interval)
    fail_after = seconds(FAIL_AFTER_CONF_KEY, JOB_DETECTOR.fail_after)
    if fail_after < 2 * heartbeat:
        raise ValueError(f"{FAIL_AFTER_CONF_KEY} ({fail_after * 1000:.0f}) must be at least twice "
                         f"{HEARTBEAT_CONF_KEY} ({heartbeat * 1000:.0f})")
    return DetectorSettings(heartbeat_interval=heartbeat, pfail_after=fail_after / 2, fail_after=fail_after)


def service_secret(conf: Mapping[str, str]) -> str | None:
    """The shared secret the driver's cluster service requires: ``spark.streamwire.cluster.secret``,
    else Spark's own ``spark.authenticate.secret`` when ``spark.authenticate`` is on, else none
    (local runs)."""
    if conf.get(SECRET_CONF_KEY):
        return conf[SECRET_CONF_KEY]
    if conf.get("spark.authenticate", "false").lower() == "true" and conf.get("spark.authenticate.secret"):
        return conf["spark.authenticate.secret"]
    return None


def open_backend(setting: str = DEFAULT) -> ClusterBackend:
    parts = urlsplit(setting)
    if setting == "memory":
        return InProcessCluster()
    if parts.scheme == "etcd" and parts.netloc:
        namespace = parts.path.strip("/") or "streamwire"
        return EtcdCluster(EtcdEndpoint.parse(setting), namespace)
    if parts.scheme == "tcp" and parts.netloc:
        return RemoteCluster(setting)
    raise ValueError(f"{SPARK_CONF_KEY}: expected memory, etcd://[USER@]HOST:PORT[/NS][?ca=&cert=&key=] "
                     f"or tcp://[:SECRET@]HOST:PORT, got scheme {parts.scheme!r}")


class ClusterHost:
    """The driver's cluster: in-process with a TCP service for executors, or an external etcd.

    ``secret`` (see :func:`service_secret`) makes the service require it; ``executor_url`` then
    carries it to the executors."""

    def __init__(self, provider: str, host: str = "127.0.0.1", secret: str | None = None,
                 detector: DetectorSettings = JOB_DETECTOR) -> None:
        self._service: ClusterService | None = None
        if provider == "memory":
            cluster = InProcessCluster(detector)
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
