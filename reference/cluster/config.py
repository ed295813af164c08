"""Choose a cluster backend from one setting (``spark.streamwire.cluster.provider``).

``memory`` (the default): an in-process cluster in this process; ``etcd://HOST:PORT[/NAMESPACE]``:
the etcd backend; ``tcp://HOST:PORT``: a driver-hosted cluster service (what executors use).
"""

from __future__ import annotations

from urllib.parse import urlsplit

from reference.cluster.etcd import EtcdCluster
from reference.cluster.memory import InProcessCluster
from reference.cluster.remote import RemoteCluster
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
