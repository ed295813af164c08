"""The cluster target harness's control channel: how the runner gets a clock, a restart and the
durability and liveness counts from a target, never through the cluster service's own wire.

A harness is a process that embeds a cluster service and prints, on stdout, an optional line
``CAPABILITIES <cap> ...`` (of ``clock restart durable held sessions configure cas client inputs pause``), then the service's
port. Then it
answers one line on stdout for each line the runner writes on its stdin, and exits when stdin
closes:

=====================  ========================================  ==========================================
runner writes          harness does                              harness answers
=====================  ========================================  ==========================================
``CLOCK STOP <ms>``    stops its failure detector's clock (if     ``CLOCKED <pfail_after_ms> <fail_after_ms>``
                       running), moves it on by ``ms``, runs one  (``pfail_after_ms`` 0: it never reports
                       detector tick and commits and notifies     PFAIL)
                       its verdicts; the service judges its
                       sessions' silence on the same clock, and
                       has closed the silent ones before it
                       answers
``CLOCK RUN``          lets the clock follow real time again      ``CLOCKED <pfail_after_ms> <fail_after_ms>``
``RESTART``            drops everything not durable and reloads,  ``OK``
                       as a process restart would; sessions stay
``DURABLE``            counts the committed changes made durable  ``WRITTEN <count>``
                       since it started (a change that commits
                       nothing makes nothing durable)
``HELD``               counts the nodes it holds liveness state   ``HOLDING <count>``
                       for (once a tick ran after a node left,
                       none for it)
``SESSIONS``           says how many nodes its service serves at  ``SERVES <max_sessions>``
                       once (a HELLO beyond is refused
                       PROVIDER_UNAVAILABLE)
``SERVE <hb_ms>         starts one more cluster service, on a      ``SERVING <port>``, or
<fail_after_ms>        cluster of its own on real time, with       ``REFUSED <one line>`` when
<max_sessions>         that heartbeat, fail_after, session bound   the service refuses that
<secret>``             and secret (``-``: none; ``hex:`` and the   configuration; an earlier
                       secret's UTF-8 bytes in hex, so ``hex:``    one is closed first
                       is the empty secret, ``hex:20`` a space)
``UNSERVE``            closes the service ``SERVE`` started        ``OK``
``CAS <conflicts>``     writes a fresh shard-log key with the       ``CAS_WRITTEN <sends>
                       runtime's compare-and-swap writer (value:   <value_hex>``, or
                       the entry it expects, or none, and ``+w``),  ``CAS_KEPT_CHANGING
                       another node writing the key (``r1``,       <sends>`` when the writer
                       ``r2``...) just before each of the          gave up
                       writer's first ``conflicts`` sends
``CAS <conflicts>       the same, the writer starting from an       the same
STALE``                entry the key does not hold (``gone`` at
                       MAX_REVISION, as one deleted since it was
                       read), the other node writing just before
                       each of its ``conflicts`` sends after the
                       first
``CLIENT <json>``       runs its own client session machine on     ``CLIENT_RAN <json>``: what
                       the walk of inputs (sans-IO, the clock     each step produced
                       the steps give;
                       conformance/cluster/client_target.py)
``INPUTS <json>``       calls one of its cluster pure functions    ``INPUTS_RAN <json>``: the
                       on the input (conformance/cluster/         call's answer
                       inputs_target.py)
``PAUSE <node_id>``     its service stops reading the connection   ``PAUSED``
                       serving that node (what the node sends
                       waits unread, as behind a busy service);
                       from then on that is unread time, never
                       the node's silence, for its session and
                       its failure detector
``RESUME <node_id>``    its service reads that connection again;   ``RESUMED``
                       answered once what waited was read and
                       carried out (a RENEW waiting: renewed at
                       the clock's instant then)
anything else          nothing                                    ``ERROR <one line>``
=====================  ========================================  ==========================================

A control that fails (a restart that cannot reload its journal, say) is answered ``ERROR <one line>`` too.

:class:`Controls` is this project's side of it (``python -m conformance.cluster.reference_target``
and the in-process ``memory`` target), :class:`ControlChannel` the runner's.
"""

from __future__ import annotations

import itertools
import json
import select
import threading
from dataclasses import dataclass
from typing import IO, Any

from conformance.cluster import client_target, inputs_target
from conformance.cluster.clock import DetectorClock
from reference.cluster.cas import write_with_cas
from reference.cluster.memory import InProcessCluster
from reference.cluster.service import ClusterService, ServiceLimits
from spec.cluster.cas import CasWrite, KeptChanging
from spec.cluster.detector import FailurePolicy
from spec.cluster.types import MAX_REVISION, Entry, MetadataOp, NodeId, Revision
from streamwire.cli import one_line

CAPABILITIES = ("clock", "restart", "durable", "held", "sessions", "configure", "cas", "client", "inputs", "pause")
"""What this project's harness offers (``sessions``, ``configure`` and ``pause``: only with a service)."""
NO_SECRET = "-"
"""``SERVE``'s secret word for "no authentication"."""


def believed_entry(key: str, stale: bool) -> Entry | None:
    """Where ``CAS``'s writer starts: nothing (a fresh key), or ``STALE`` an entry the key does not hold (one read
    before it was deleted; MAX_REVISION, a revision no write of the key reaches here)."""
    return Entry(key=key, value=b"gone", revision=Revision(MAX_REVISION)) if stale else None


def cas_change(found: Entry | None) -> bytes:
    """``CAS``'s change: the value found (nothing for an absent key) with ``+w`` appended, decided again from the entry
    each conflict shows (the harness's writer and the CAS walks' model both write this one)."""
    return (b"" if found is None else found.value) + b"+w"


def rival_writes_before(send: int, conflicts: int, stale: bool) -> bool:
    """Whether ``CAS``'s other node writes the key just before the writer's ``send`` (counted from 1): before each
    of its first ``conflicts`` sends, or ``STALE`` each after the first (the first meets the key absent)."""
    first = 2 if stale else 1
    return first <= send < first + conflicts


@dataclass(frozen=True, slots=True)
class Thresholds:
    """What a target with a stopped clock declares of its failure detector."""

    pfail_after_ms: int
    """0: the target never reports PFAIL."""
    fail_after_ms: int


class Controls:
    """The controls carried out on an in-process cluster that was handed ``clock``, and on the
    cluster service embedding it, if any."""

    def __init__(self, cluster: InProcessCluster, clock: DetectorClock, service: ClusterService | None = None) -> None:
        self.cluster = cluster
        self.clock = clock
        self.service = service
        self.configured: ClusterService | None = None
        self._cas_runs = itertools.count(1)

    def set_clock(self, stopped: bool, advance_ms: int = 0) -> Thresholds:
        """``CLOCK STOP <ms>`` (``stopped``) or ``CLOCK RUN``."""
        if stopped:
            self.clock.stop()
            self.clock.advance(advance_ms)
            self.cluster.judge()
            if self.service is not None:
                self.service.judge_silence()
        else:
            self.clock.run()
        policy = self.cluster.policy
        return Thresholds(round(policy.pfail_after * 1000), round(policy.fail_after * 1000))

    def restart(self) -> None:
        self.cluster.restart()

    def durable(self) -> int:
        return self.cluster.durable_writes

    def held(self) -> int:
        return self.cluster.judged_nodes

    def sessions(self) -> int:
        if self.service is None:
            raise ValueError("no cluster service here")
        return self.service.limits.max_sessions

    def hold_reads(self, node_id: str, held: bool) -> None:
        """``PAUSE`` (``held``) or ``RESUME``."""
        if self.service is None:
            raise ValueError("no cluster service here")
        try:
            self.service.hold_reads(NodeId(node_id), held)
        except KeyError:
            raise ValueError(f"no session serves node {node_id!r}") from None

    def serve(self, heartbeat_ms: int, fail_after_ms: int, max_sessions: int, secret: str | None) -> int:
        """``SERVE``: the port of a new service configured so (ValueError: it refuses the configuration)."""
        self.unserve()
        policy = FailurePolicy(heartbeat_interval=heartbeat_ms / 1000, fail_after=fail_after_ms / 1000)
        if max_sessions < 1:
            raise ValueError(f"the session bound must be at least 1, got {max_sessions}")
        cluster = InProcessCluster(policy)
        try:
            self.configured = ClusterService(cluster, secret=secret, limits=ServiceLimits(max_sessions=max_sessions))
        except BaseException:
            cluster.close()
            raise
        return self.configured.port

    def unserve(self) -> None:
        if self.configured is not None:
            self.configured.close()
            self.configured.cluster.close()
            self.configured = None

    def cas_write(self, conflicts: int, stale: bool = False) -> tuple[int, bytes | None]:
        """``CAS``: how many ops the runtime's writer sent, and the value it wrote (None: it gave up)."""
        from conformance.cluster.harness import Recorder  # the runner's Core (harness.py imports this module)

        run = next(self._cas_runs)
        key = f"cas-{run}"
        ids = (NodeId(f"cas-{run}-writer"), NodeId(f"cas-{run}-rival"))
        writer, rival = (self.cluster.open_node(node_id, Recorder()) for node_id in ids)
        sends = 0
        try:
            shard = writer.join_cluster("127.0.0.1:1")
            rival.join_cluster("127.0.0.1:2")
            rival.join_shard(shard)
            rival_revision: list[Revision | None] = [None]

            def send(op: MetadataOp) -> Revision:
                nonlocal sends
                sends += 1
                if rival_writes_before(sends, conflicts, stale):
                    rival_revision[0] = rival.update_shard_log([MetadataOp(
                        key=key, value=f"r{sends}".encode(), expected=rival_revision[0])])
                return writer.update_shard_log([op])

            try:
                written = write_with_cas(CasWrite(key, believed_entry(key, stale), cas_change), send)
            except KeptChanging:
                return sends, None
            return sends, None if written is None else written.value
        finally:
            for node, node_id in zip((writer, rival), ids):
                node.remove_from_cluster(node_id)
                node.close()

    def answer(self, line: str) -> str:
        """The one-line answer to one control line (``ERROR`` and the failure's one line when it fails)."""
        try:
            return self._carry_out(line)
        except Exception as failure:  # the runner judges it; the harness stays up and says what failed
            return f"ERROR {one_line(failure)}"

    def _carry_out(self, line: str) -> str:
        words = line.split()
        if words[:2] == ["CLOCK", "STOP"] and len(words) == 3 and words[2].isdigit():
            return _clocked(self.set_clock(True, int(words[2])))
        if words == ["CLOCK", "RUN"]:
            return _clocked(self.set_clock(False))
        if words == ["RESTART"]:
            self.restart()
            return "OK"
        if words == ["DURABLE"]:
            return f"WRITTEN {self.durable()}"
        if words == ["HELD"]:
            return f"HOLDING {self.held()}"
        if words == ["SESSIONS"]:
            return f"SERVES {self.sessions()}"
        if words[:1] == ["SERVE"] and len(words) == 5 and all(w.isdigit() for w in words[1:4]) and (
                words[4] == NO_SECRET or words[4].startswith("hex:")):
            secret = None if words[4] == NO_SECRET else bytes.fromhex(words[4][4:]).decode()
            try:
                return f"SERVING {self.serve(int(words[1]), int(words[2]), int(words[3]), secret)}"
            except ValueError as refused:
                return f"REFUSED {one_line(refused)}"
        if words[:1] == ["CAS"] and len(words) in (2, 3) and words[1].isdigit() and words[2:] in ([], ["STALE"]):
            sends, value = self.cas_write(int(words[1]), words[2:] == ["STALE"])
            return f"CAS_KEPT_CHANGING {sends}" if value is None else f"CAS_WRITTEN {sends} {value.hex()}"
        if words[:1] == ["CLIENT"]:
            return "CLIENT_RAN " + json.dumps(client_target.run(json.loads(line.split(None, 1)[1])))
        if words[:1] == ["INPUTS"]:
            return "INPUTS_RAN " + json.dumps(inputs_target.run(json.loads(line.split(None, 1)[1])))
        if words == ["UNSERVE"]:
            self.unserve()
            return "OK"
        if words[:1] in (["PAUSE"], ["RESUME"]) and len(words) == 2:
            self.hold_reads(words[1], words[0] == "PAUSE")
            return "PAUSED" if words[0] == "PAUSE" else "RESUMED"
        return f"ERROR unknown control line {line.strip()[:80]!r}"


def _clocked(limits: Thresholds) -> str:
    return f"CLOCKED {limits.pfail_after_ms} {limits.fail_after_ms}"


class ControlChannel:
    """The runner's end: control lines to a harness's stdin, its answers from its stdout."""

    def __init__(self, stdin: IO[str], stdout: IO[str], timeout: float = 30.0) -> None:
        self._stdin = stdin
        self._stdout = stdout
        self._timeout = timeout
        self._lock = threading.Lock()

    def ask(self, line: str, answer: str) -> list[str]:
        """Send ``line``; the words of an answer that starts with ``answer`` (RuntimeError otherwise)."""
        words = self._exchange(line).split()
        if words[:1] != [answer]:
            raise RuntimeError(f"the harness answered {line!r} with {' '.join(words)[:200]!r}, not {answer}")
        return words[1:]

    def _exchange(self, line: str) -> str:
        """Send ``line``; the answer line ('' when none came within the timeout)."""
        with self._lock:
            self._stdin.write(line + "\n")
            self._stdin.flush()
            ready, _, _ = select.select([self._stdout], [], [], self._timeout)
            return self._stdout.readline() if ready else ""

    def set_clock(self, stopped: bool, advance_ms: int = 0) -> Thresholds:
        words = self.ask(f"CLOCK STOP {advance_ms}" if stopped else "CLOCK RUN", "CLOCKED")
        return Thresholds(int(words[0]), int(words[1]))

    def restart(self) -> None:
        self.ask("RESTART", "OK")

    def durable(self) -> int:
        return int(self.ask("DURABLE", "WRITTEN")[0])

    def held(self) -> int:
        return int(self.ask("HELD", "HOLDING")[0])

    def sessions(self) -> int:
        return int(self.ask("SESSIONS", "SERVES")[0])

    def serve(self, heartbeat_ms: int, fail_after_ms: int, max_sessions: int, secret: str | None) -> int | str:
        """The port of a service configured so, or the one line refusing the configuration."""
        word = NO_SECRET if secret is None else "hex:" + secret.encode().hex()
        answer = self._exchange(f"SERVE {heartbeat_ms} {fail_after_ms} {max_sessions} {word}")
        words = answer.split()
        if words[:1] == ["SERVING"] and len(words) == 2 and words[1].isdigit():
            return int(words[1])
        if words[:1] == ["REFUSED"]:
            return answer.strip()
        raise RuntimeError(f"the harness answered SERVE with {answer.strip()[:200]!r}, not SERVING or REFUSED")

    def unserve(self) -> None:
        self.ask("UNSERVE", "OK")

    def hold_reads(self, node_id: str, held: bool) -> None:
        if held:
            self.ask(f"PAUSE {node_id}", "PAUSED")
        else:
            self.ask(f"RESUME {node_id}", "RESUMED")

    def client(self, walk: dict[str, Any]) -> list[dict[str, Any]]:
        """What the harness's client session machine produced at each step of ``walk``."""
        answer = self._exchange("CLIENT " + json.dumps(walk))
        if not answer.startswith("CLIENT_RAN "):
            raise RuntimeError(f"the harness answered CLIENT with {answer.strip()[:200]!r}, not CLIENT_RAN")
        answers: list[dict[str, Any]] = json.loads(answer[len("CLIENT_RAN "):])
        return answers

    def inputs(self, call: dict[str, Any]) -> dict[str, Any]:
        """The harness's answer to one call of its cluster pure functions."""
        answer = self._exchange("INPUTS " + json.dumps(call))
        if not answer.startswith("INPUTS_RAN "):
            raise RuntimeError(f"the harness answered INPUTS with {answer.strip()[:200]!r}, not INPUTS_RAN")
        ran: dict[str, Any] = json.loads(answer[len("INPUTS_RAN "):])
        return ran

    def cas_write(self, conflicts: int, stale: bool = False) -> tuple[int, bytes | None]:
        words = self._exchange(f"CAS {conflicts}{' STALE' if stale else ''}").split()
        if words[:1] == ["CAS_KEPT_CHANGING"] and len(words) == 2:
            return int(words[1]), None
        if words[:1] != ["CAS_WRITTEN"] or len(words) != 3:
            raise RuntimeError(f"the harness answered CAS with {' '.join(words)[:200]!r}, not CAS_WRITTEN or "
                               "CAS_KEPT_CHANGING")
        return int(words[1]), bytes.fromhex(words[2])
