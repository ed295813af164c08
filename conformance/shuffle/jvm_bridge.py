"""Run the Java programs of ``conformance/shuffle/jvm/`` against the installed pyspark's jars.

Spark 4.3.0's own classes are the ground truth for the streaming shuffle, so the project checks itself
against them: the Java sources are compiled at first use with ``javac`` against ``pyspark/jars/*`` into a
cache directory keyed by the sources and the jar list (class files are never committed), then run as one
long-lived process speaking JSON lines (one request per stdin line, one answer per stdout line; Spark's
logging and the JVM's own warnings go to stderr, kept in a log file for error messages). Every read has a
deadline.

Start-up is mostly class loading, so the first clean exit of each program leaves a class-data-sharing
archive (``-XX:ArchiveClassesAtExit``) next to the compiled classes, and later runs map it
(``-XX:SharedArchiveFile``); a stale or unusable archive is ignored by the JVM (``-Xshare:auto``).

Messages cross the pipe in :mod:`spec.shuffle.jsonform`'s JSON form (the codec CLI's and the vectors'),
64-bit fields as decimal strings so Java longs survive.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import queue
import shutil
import subprocess
import tempfile
import threading
import uuid
import zipfile
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Final, Sequence

from spec.shuffle.jsonform import from_json, to_json
from spec.shuffle.messages import Message

JVM_SOURCES: Final = Path(__file__).parent / "jvm"
JVM_OPTIONS: Final = ("-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto",
                       "-Xlog:disable", "-Xlog:all=warning:stderr")
"""``-Xlog``: the JVM logs warnings to stdout by default, which would break the JSON-lines protocol."""
STARTUP_TIMEOUT_S: Final = 120.0
REQUEST_TIMEOUT_S: Final = 60.0
EXIT_TIMEOUT_S: Final = 10.0
ARCHIVING_EXIT_TIMEOUT_S: Final = 60.0
"""Writing the class-data archive at exit takes a few seconds more."""
CLASSES_JAR: Final = "classes.jar"
"""The compiled classes, as a jar: class-data sharing refuses directories on the class path."""

Json = dict[str, Any]


class JdkNotFound(RuntimeError):
    """No ``java`` and ``javac`` pair was found (JAVA_HOME, then PATH)."""


class BridgeError(RuntimeError):
    """The Java process failed, answered out of protocol, or missed a deadline."""


@dataclass(frozen=True)
class Jdk:
    java: Path
    javac: Path


def find_jdk() -> Jdk:
    """The JDK to use: ``$JAVA_HOME/bin`` when it holds both tools, else ``java``/``javac`` on PATH."""
    home = os.environ.get("JAVA_HOME")
    if home:
        java, javac = Path(home, "bin", "java"), Path(home, "bin", "javac")
        if java.is_file() and javac.is_file():
            return Jdk(java, javac)
    found_java, found_javac = shutil.which("java"), shutil.which("javac")
    if found_java and found_javac:
        return Jdk(Path(found_java), Path(found_javac))
    raise JdkNotFound("no JDK found: set JAVA_HOME or put java and javac on PATH")


def spark_jars() -> Path:
    """The ``jars/`` directory of the installed pyspark (found without importing pyspark)."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        raise BridgeError("pyspark is not installed")
    jars = Path(next(iter(spec.submodule_search_locations)), "jars")
    if not any(jars.glob("spark-core_*.jar")):
        raise BridgeError(f"no Spark jars in {jars}")
    return jars


def _cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base, "streamwire", "jvm")


def compile_sources(jdk: Jdk, jars: Path, cache_root: Path | None = None) -> Path:
    """Compile ``conformance/shuffle/jvm/*.java`` once per (sources, jar list, javac); return the cache dir holding
    :data:`CLASSES_JAR`."""
    sources = sorted(JVM_SOURCES.glob("*.java"))
    digest = hashlib.sha256(CLASSES_JAR.encode() + b"\0" + str(jdk.javac.resolve()).encode())
    for source in sources:
        digest.update(source.name.encode() + b"\0" + source.read_bytes())
    for jar in sorted(jars.glob("*.jar")):
        digest.update(jar.name.encode() + b"\0" + str(jar.stat().st_size).encode())
    root = cache_root or _cache_root()
    target = root / digest.hexdigest()[:24]
    if (target / "COMPILED").is_file():
        return target
    root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix="compile-", dir=root))
    try:
        result = subprocess.run(
            [str(jdk.javac), "-nowarn", "-encoding", "UTF-8", "-cp", str(jars / "*"),
             "-d", str(staging), *map(str, sources)],
            capture_output=True, text=True, timeout=300, check=False,
        )
        if result.returncode != 0:
            raise BridgeError(f"javac failed:\n{result.stderr[-4000:]}")
        classes = sorted(staging.glob("*.class"))
        with zipfile.ZipFile(staging / CLASSES_JAR, "w") as bundle:
            for path in classes:
                bundle.write(path, path.name)
        for path in classes:
            path.unlink()
        (staging / "COMPILED").write_text("ok\n")
        try:
            staging.rename(target)
        except OSError:
            if not (target / "COMPILED").is_file():  # lost a race to a complete copy: fine; else fail
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


class JsonLinesProcess:
    """One Java main class from ``conformance/jvm`` run as a JSON-lines peer; use as a context manager.

    ``jvm_options`` follow the bridge's own (a later option wins).
    ``ready`` holds the process's first line, ``{"ready": true, ...}``. Requests may be sent from any
    thread; answers are read in order with :meth:`next_line`.
    """

    def __init__(self, main_class: str, args: Sequence[str] = (), *, jdk: Jdk | None = None,
                 startup_timeout: float = STARTUP_TIMEOUT_S, jvm_options: Sequence[str] = ()) -> None:
        self.jdk = jdk or find_jdk()
        jars = spark_jars()
        cache = compile_sources(self.jdk, jars)
        self._archive = cache / f"{main_class}.jsa"
        self._archiving: Path | None = None
        if self._archive.is_file():
            sharing = f"-XX:SharedArchiveFile={self._archive}"
        else:
            self._archiving = cache / f"{main_class}.{uuid.uuid4().hex}.jsa.part"
            sharing = f"-XX:ArchiveClassesAtExit={self._archiving}"
        self._log: IO[str] = tempfile.TemporaryFile("w+", prefix=f"{main_class}-", suffix=".log")
        self._log_lock = threading.Lock()
        self._final_tail: str | None = None
        self._send_lock = threading.Lock()
        self._process = subprocess.Popen(
            [str(self.jdk.java), *JVM_OPTIONS, *jvm_options, sharing,
             "-cp", f"{cache / CLASSES_JAR}{os.pathsep}{jars / '*'}", main_class, *args],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log, text=True, bufsize=1,
        )
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._reader = threading.Thread(target=self._pump, name=f"{main_class}-stdout", daemon=True)
        self._reader.start()
        try:
            self.ready = self.next_line(startup_timeout)
            if self.ready.get("ready") is not True:
                raise BridgeError(f"{main_class} did not start: {self.ready}")
        except BaseException:
            self.close()
            raise

    def _pump(self) -> None:
        assert self._process.stdout is not None
        try:
            for line in self._process.stdout:
                self._lines.put(line)
        except (OSError, ValueError):  # stdout closed under us: the process is gone either way
            pass
        self._lines.put(None)

    @property
    def ended(self) -> bool:
        """True once the process has exited."""
        return self._process.poll() is not None

    @property
    def pid(self) -> int:
        return self._process.pid

    def stderr_tail(self, limit: int = 4000) -> str:
        """The end of the process's stderr (Spark's log), for error messages; still available after close."""
        with self._log_lock:
            if self._final_tail is not None:
                return self._final_tail[-limit:]
            self._log.flush()
            self._log.seek(0)
            return self._log.read()[-limit:]

    def send(self, request: Json) -> None:
        """Write one request line (answers, if any, are read with :meth:`next_line`)."""
        stdin = self._process.stdin
        if stdin is None or self._process.poll() is not None:
            raise BridgeError(f"Java process has exited\n{self.stderr_tail()}")
        try:
            with self._send_lock:
                stdin.write(json.dumps(request) + "\n")
                stdin.flush()
        except (OSError, ValueError) as exc:
            raise BridgeError(f"Java process closed its input: {exc}\n{self.stderr_tail()}") from exc

    def next_line(self, timeout: float = REQUEST_TIMEOUT_S) -> Json:
        """The next stdout line as JSON, waiting at most ``timeout`` seconds."""
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            raise BridgeError(f"no answer within {timeout}s\n{self.stderr_tail()}") from None
        if line is None:
            self._lines.put(None)
            raise BridgeError(f"Java process ended\n{self.stderr_tail()}")
        try:
            answer: Json = json.loads(line)
        except json.JSONDecodeError as exc:
            raise BridgeError(f"not a JSON line: {line!r}") from exc
        return answer

    def request(self, request: Json, timeout: float = REQUEST_TIMEOUT_S) -> Json:
        self.send(request)
        return self.next_line(timeout)

    def close(self) -> None:
        """Close stdin (the Java side exits at end of input; kill it if it does not in time), let the stdout
        reader finish, keep the class-data archive of a clean exit, then close the log."""
        with self._send_lock:
            if self._process.stdin is not None and not self._process.stdin.closed:
                try:
                    self._process.stdin.close()
                except OSError:
                    pass
        try:
            self._process.wait(timeout=ARCHIVING_EXIT_TIMEOUT_S if self._archiving else EXIT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait(timeout=EXIT_TIMEOUT_S)
        self._reader.join(timeout=EXIT_TIMEOUT_S)
        if self._process.stdout is not None and not self._reader.is_alive():
            self._process.stdout.close()
        if self._archiving is not None:
            self._keep_archive(self._archiving)
            self._archiving = None
        with self._log_lock:
            if self._final_tail is None:
                self._log.flush()
                self._log.seek(0)
                self._final_tail = self._log.read()[-16000:]
                self._log.close()

    def _keep_archive(self, written: Path) -> None:
        try:
            if self._process.returncode == 0 and written.is_file():
                os.replace(written, self._archive)  # atomic: a concurrent run maps either copy whole
        except OSError:
            pass  # a read-only cache only costs start-up time
        finally:
            written.unlink(missing_ok=True)

    def __enter__(self) -> JsonLinesProcess:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


@dataclass(frozen=True)
class SparkDecode:
    """What Spark's decoder made of some bytes.

    ``stage`` names the Spark component that rejected them: ``frame`` (TransportFrameDecoder),
    ``transport`` (MessageDecoder, or a frame that is not a OneWayMessage), ``body``
    (StreamingShuffleMessage.decode). ``unread`` counts body bytes Spark left unread (it checks none
    for non-DATA types); ``pending`` counts bytes the frame decoder still holds after the frames it
    emitted and ``extra_messages`` the messages it decoded after the first.
    """

    accepted: bool
    message: Message | None
    stage: str | None
    exception: str | None
    detail: str | None
    unread: int
    pending: int
    extra_messages: int

    @property
    def exact(self) -> bool:
        """Accepted with every byte consumed: the strict reading this project's codec applies."""
        return self.accepted and self.unread == 0 and self.pending == 0 and self.extra_messages == 0


class SparkCodec:
    """Spark's encoder and decoders (``SparkCodecBridge.java``) behind a typed API."""

    def __init__(self, process: JsonLinesProcess) -> None:
        self._process = process

    @classmethod
    def start(cls, jdk: Jdk | None = None) -> SparkCodec:
        return cls(JsonLinesProcess("SparkCodecBridge", jdk=jdk))

    def close(self) -> None:
        self._process.close()

    def encode(self, message: Message) -> tuple[bytes, bytes]:
        """Spark's body and OneWayMessage frame for ``message``."""
        answer = self._process.request({"op": "encode", "message": to_json(message)})
        if not answer.get("ok"):
            raise BridgeError(f"Spark could not encode {message!r}: {answer}")
        return bytes.fromhex(answer["body"]), bytes.fromhex(answer["frame"])

    def decode_body(self, body: bytes) -> SparkDecode:
        return self._decoded(self._process.request({"op": "decode_body", "hex": body.hex()}))

    def decode_frame(self, frame: bytes) -> SparkDecode:
        return self._decoded(self._process.request({"op": "decode_frame", "hex": frame.hex()}))

    @staticmethod
    def _decoded(answer: Json) -> SparkDecode:
        if answer.get("stage") == "request":
            raise BridgeError(f"bridge rejected the request: {answer}")
        message = from_json(answer["message"]) if answer.get("ok") else None
        return SparkDecode(
            accepted=bool(answer.get("ok")), message=message, stage=answer.get("stage"),
            exception=answer.get("exception") or None, detail=answer.get("detail"),
            unread=int(answer.get("unread", 0)), pending=int(answer.get("pending", 0)),
            extra_messages=int(answer.get("extra_messages", 0)),
        )
