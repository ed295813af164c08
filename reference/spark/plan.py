"""What every task of a streaming shuffle needs, shipped in its closure, and the runtime's own
settings (``spark.streamwire.shuffle.*``) it is made from."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, replace
from typing import Any, Final, Mapping

from reference.net import ConnectionLimits
from reference.shuffle.cluster_directory import DirectoryAddress
from reference.shuffle.task import TaskOptions
from spec.auth import AuthConfig
from spec.auth.settings import AUTHENTICATE_KEY, SECRET_KEY, enabled
from spec.shuffle.framing import DEFAULT_MAX_RECORD_SIZE
from spec.shuffle.settings import NETWORK_TIMEOUT_KEY, PREFIX, ShuffleSettings, network_timeout_s

RUNTIME_PREFIX: Final = "spark.streamwire.shuffle."
"""Options of this runtime that Spark does not have (kept out of ``spark.shuffle.streaming.*``)."""

BIND_HOST_KEY: Final = RUNTIME_PREFIX + "bindHost"
"""Address writer servers bind and advertise; default: the executor's host."""

TRANSCRIPT_DIR_KEY: Final = RUNTIME_PREFIX + "transcriptDir"
"""When set, every task appends every frame of its connections to a JSON-lines file there."""

MAX_PENDING_KEY: Final = RUNTIME_PREFIX + "maxPendingConnections"
"""Connections a writer keeps before they bind (one more evicts the oldest); default 64."""

BIND_TIMEOUT_KEY: Final = RUNTIME_PREFIX + "bindTimeoutMs"
"""How long a connection to a writer may stay unbound (before its first CREDIT, even once authenticated);
default: Spark's spark.network.timeout (120 s unless set)."""

MAX_RECORD_SIZE_KEY: Final = RUNTIME_PREFIX + "maxRecordSize"
"""Largest serialized record a reader accepts (with networkBufferSize it bounds a DATA frame); default 64 MiB."""

FLUSH_WHEN_IDLE_KEY: Final = RUNTIME_PREFIX + "flushWhenIdle"
"""The writers' idle flush (``TaskOptions.flush_when_idle``): a buffer becomes a DATA as soon as the writer's
input has nothing more to give (low latency); default false: Spark's flush, at 90% full or networkBufferMaxWaitTimeMs."""

START_TIMEOUT_KEY: Final = RUNTIME_PREFIX + "startTimeoutMs"
"""How long a run waits for the tasks of its stage to start before it fails with the numbers; default 120000."""

DEFAULT_START_TIMEOUT_MS: Final = 120_000


@dataclass(frozen=True)
class Plan:
    """Everything a task needs, shipped in the closure."""

    shuffle_id: int
    num_partitions: int
    settings: ShuffleSettings
    shard: DirectoryAddress
    """Where the tasks reach the shuffle's directory."""
    bind_host: str | None
    transcript_dir: str | None
    driver_host: str = "127.0.0.1"
    limits: ConnectionLimits = ConnectionLimits()
    max_record_size: int = DEFAULT_MAX_RECORD_SIZE
    flush_when_idle: bool = TaskOptions.flush_when_idle
    start_bound_s: float = DEFAULT_START_TIMEOUT_MS / 1000.0
    auth: AuthConfig | None = None
    """The application's handshake (``spark.authenticate``); it travels in the task closure, which
    Spark's own authenticated, encrypted connections carry when the same settings are on."""

    def host(self) -> str:
        """This task's host: where a writer's server binds, what its cluster node advertises."""
        return self.bind_host or _executor_host(self.driver_host)

    def options(self, role: str, task_id: int) -> TaskOptions:
        host = self.host()
        transcript = None
        if self.transcript_dir:
            os.makedirs(self.transcript_dir, exist_ok=True)
            transcript = os.path.join(self.transcript_dir, f"shuffle{self.shuffle_id}-{role}{task_id}.jsonl")
        return TaskOptions(bind_host=host, executor_id=f"{socket.gethostname()}:{os.getpid()}",
                           transcript_path=transcript, limits=self.limits,
                           max_record_size=self.max_record_size, readers_may_leave=True,
                           flush_when_idle=self.flush_when_idle, auth=self.auth)


def _executor_host(driver_host: str) -> str:
    """Loopback when the driver is on loopback (local and test clusters), else this host's address."""
    if driver_host.startswith("127.") or driver_host == "localhost":
        return "127.0.0.1"
    return os.environ.get("SPARK_LOCAL_IP") or socket.gethostbyname(socket.gethostname())


SECRET_COOKIE: Final = "sparkCookie"
"""Where Spark's SecurityManager keeps the secret it generated (local and YARN): the user's Hadoop credentials."""
SECRET_ENVIRONMENT: Final = "_SPARK_AUTH_SECRET"
"""Where a cluster manager hands the generated secret to processes it starts (Kubernetes, standalone workers)."""


def application_conf(sc: Any) -> dict[str, str]:
    """The SparkConf as a dict, with the secret Spark generated for the application filled in as
    ``spark.authenticate.secret`` when ``spark.authenticate`` is on without one: the shuffle's
    connections and the cluster service then require the same secret."""
    conf: dict[str, str] = dict(sc.getConf().getAll())
    if enabled(conf, AUTHENTICATE_KEY) and SECRET_KEY not in conf:  # a blank one is refused, not replaced
        jvm = sc._jvm
        credentials = jvm.org.apache.hadoop.security.UserGroupInformation.getCurrentUser().getCredentials()
        generated = credentials.getSecretKey(jvm.org.apache.hadoop.io.Text(SECRET_COOKIE))
        secret = bytes(generated).decode() if generated else os.environ.get(SECRET_ENVIRONMENT, "")
        if secret:
            conf[SECRET_KEY] = secret
    return conf


def settings_from(sc: Any, conf: Mapping[str, object] | Any | None) -> tuple[ShuffleSettings, dict[str, str]]:
    """Spark's ``spark.shuffle.streaming.*`` settings and this runtime's options, ``conf`` over the SparkConf."""
    values: dict[str, object] = dict(sc.getConf().getAll())
    if conf is not None:
        values.update(dict(conf.getAll()) if hasattr(conf, "getAll") else dict(conf))
    runtime = {k: str(v) for k, v in values.items() if k.startswith(RUNTIME_PREFIX) or k == NETWORK_TIMEOUT_KEY}
    return ShuffleSettings.from_dict({k: v for k, v in values.items() if k.startswith(PREFIX)}), runtime


def _positive(runtime: Mapping[str, str], key: str, default: int) -> int:
    raw = runtime.get(key)
    if raw is None:
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        value = 0
    if value < 1:
        raise ValueError(f"{key} must be a positive integer, got {raw!r}")
    return value


def runtime_limits(runtime: Mapping[str, str]) -> tuple[ConnectionLimits, int]:
    """The writers' connection limits and the readers' record-size bound from ``spark.streamwire.shuffle.*``
    (the bind timeout by default ``spark.network.timeout``).

    Raises ValueError naming the key of a value that is not a positive integer (or not a Spark time).
    """
    defaults = ConnectionLimits()
    network_timeout_ms = round(network_timeout_s(runtime) * 1000)
    limits = replace(defaults, max_pending=_positive(runtime, MAX_PENDING_KEY, defaults.max_pending),
                     bind_timeout_s=_positive(runtime, BIND_TIMEOUT_KEY, network_timeout_ms) / 1000.0)
    return limits, _positive(runtime, MAX_RECORD_SIZE_KEY, DEFAULT_MAX_RECORD_SIZE)


def runtime_flush_when_idle(runtime: Mapping[str, str]) -> bool:
    """Whether the writers use the idle flush (``spark.streamwire.shuffle.flushWhenIdle``, a boolean read as
    Spark reads one, by default ``TaskOptions``'); raises ValueError naming the key of any other value."""
    return enabled(runtime, FLUSH_WHEN_IDLE_KEY, default=TaskOptions.flush_when_idle)


def start_bound_s(runtime: Mapping[str, str]) -> float:
    """How long a run waits for its stage's tasks to start (``startTimeoutMs``), in seconds."""
    return _positive(runtime, START_TIMEOUT_KEY, DEFAULT_START_TIMEOUT_MS) / 1000.0
