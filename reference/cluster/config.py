"""Choose a cluster backend from one setting (``spark.streamwire.cluster.provider``).

``memory`` (the default): an in-process cluster in this process; ``etcd://HOST:PORT[/NAMESPACE]``:
the etcd backend; ``tcp://HOST:PORT``: a driver-hosted cluster service (what executors use).
"""

from __future__ import annotations

from urllib.parse import urlsplit

from reference.cluster.etcd import EtcdCluster
from reference.cluster.memory import InProcessCluster
from reference.cluster.remote import RemoteCluster
from reference.cluster.service import ClusterService
from spec.cluster.interface import ClusterBackend

SPARK_CONF_KEY = "spark.streamwire.cluster.provider"
DEFAULT = "memory"


def open_backend(setting: str = DEFAULT) -> ClusterBackend:
    parts = urlsplit(setting)
    if setting == "memory":
        return InProcessCluster()
    if parts.scheme == "etcd" and parts.netloc:
        namespace = parts.path.strip("/") or "streamwire"
        return EtcdCluster(f"http://{parts.netloc}", namespace)
    if parts.scheme == "tcp" and parts.netloc:
        return RemoteCluster(setting)
    raise ValueError(f"{SPARK_CONF_KEY}={setting!r}: expected memory, etcd://HOST:PORT[/NS] or tcp://HOST:PORT")


class ClusterHost:
    """The driver's cluster: in-process with a TCP service for executors, or an external etcd."""

    def __init__(self, provider: str, host: str = "127.0.0.1") -> None:
        self._service: ClusterService | None = None
        if provider == "memory":
            cluster = InProcessCluster()
            self._service = ClusterService(cluster, host=host)
            self.backend: ClusterBackend = cluster
            self.executor_url = self._service.url
        else:
            self.backend = open_backend(provider)
            self.executor_url = provider

    def close(self) -> None:
        if self._service is not None:
            self._service.close()
        self.backend.close()
