"""The service's settings at each edge of their domain, both sides (capability ``configure``: a harness
starts a service with the settings a case gives, ``SERVE`` in conformance/cluster/controls.py): the
failure policy's (spec/cluster/detector.py ``FailurePolicy``: a heartbeat of at least 1 ms, fail_after
at least twice it, fail_bound within the wire's u32 milliseconds), the session bound, and the shared
secret's shapes (spec/shared_secret.py: none, blank, set; spec/cluster/wire.py ``check_hello_secret``).
A setting allowed must be served and told as given; one refused must be refused before anything
listens."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from conformance.cluster.harness import ClusterTarget, verdict
from conformance.cluster.service_wire import RawConnection, ServiceAddress
from conformance.framework import CaseContext, CaseTimeout, Verdict
from spec.cluster import wire
from spec.cluster.detector import MAX_TIMING_MS
from spec.cluster.errors import (
    ClusterError,
    FrameTooLarge,
    InvalidIdentifier,
    ProviderUnavailable,
    Unauthenticated,
)
from spec.cluster.wire import ServiceKind, ServiceMessage

SECRET = "s3cret-\u00e9"


@dataclass(frozen=True, slots=True)
class Setting:
    what: str
    heartbeat_ms: int
    fail_after_ms: int
    max_sessions: int = 4
    secret: str | None = None

    @property
    def allowed(self) -> bool:
        """The spec's rule, stated here again as the judge's own expectation."""
        blank = self.secret is not None and not self.secret.strip()
        return (self.heartbeat_ms >= 1 and self.fail_after_ms >= 2 * self.heartbeat_ms
                and self.fail_after_ms + self.heartbeat_ms <= MAX_TIMING_MS and not blank)


SETTINGS = (
    Setting("the smallest timing (a 1 ms heartbeat, fail_after exactly twice it)", 1, 2),
    Setting("fail_after exactly twice the heartbeat, one session", 1000, 2000, max_sessions=1),
    Setting("fail_after 1 ms short of twice the heartbeat", 1000, 1999),
    Setting("a heartbeat of 0 ms", 0, 2000),
    Setting("fail_bound exactly the wire's largest u32 ms", 1, MAX_TIMING_MS - 1),
    Setting("fail_bound 1 ms past the wire's largest u32 ms", 1, MAX_TIMING_MS),
    Setting("no secret", 1000, 2000),
    Setting("an empty secret", 1000, 2000, secret=""),
    Setting("a whitespace-only secret", 1000, 2000, secret=" \t"),
    Setting("a secret", 1000, 2000, secret=SECRET),
)


def _hello(address: ServiceAddress, node: str, secret: str) -> ServiceMessage | None:
    """HELLO presenting ``secret`` on a fresh connection: the answer to it (None: closed)."""
    with RawConnection(address) as raw:
        raw.send(wire.encode(ServiceKind.HELLO, 1, node_id=node, secret=secret, takeover="", resume=False,
                             resume_after=0))
        reply, _ = raw.until(ServiceKind.WELCOME, ServiceKind.ERROR)
        return reply


def _refused(reply: ServiceMessage | None, error: type[ClusterError]) -> bool:
    return reply is not None and reply.kind is ServiceKind.ERROR and reply.payload["code"] == error.code


def _served(address: ServiceAddress, setting: Setting, node: str) -> list[str]:
    """What a service started with ``setting`` does that it should not."""
    problems: list[str] = []
    presented = "" if setting.secret is None else setting.secret
    with RawConnection(address) as first:
        first.send(wire.encode(ServiceKind.HELLO, 1, node_id=f"{node}-1", secret=presented, takeover="",
                               resume=False, resume_after=0))
        welcome, _ = first.until(ServiceKind.WELCOME, ServiceKind.ERROR)
        if welcome is None or welcome.kind is not ServiceKind.WELCOME:
            return [f"a HELLO with the configured secret was answered {welcome and welcome.payload}"]
        told = (welcome.payload["heartbeat_ms"], welcome.payload["ttl_ms"], welcome.payload["fail_bound_ms"])
        want = (setting.heartbeat_ms, setting.fail_after_ms, setting.fail_after_ms + setting.heartbeat_ms)
        if told != want:
            problems.append(f"WELCOME told (heartbeat, ttl, fail_bound) {told} ms, configured {want}")
        if setting.max_sessions == 1 and not _refused(_hello(address, f"{node}-2", presented), ProviderUnavailable):
            problems.append("a second node was not refused PROVIDER_UNAVAILABLE with the one session served")
    if setting.secret is None:
        if _hello(address, f"{node}-any", "any") is None:
            problems.append("a HELLO carrying a secret the service does not require was refused")
        return problems
    for what, presented in (("no secret", ""), ("the secret less its last character", setting.secret[:-1]),
                            ("the secret and one more character", setting.secret + "x"),
                            ("the secret in upper case", setting.secret.upper()), ("a space", " ")):
        if not _refused(_hello(address, f"{node}-{len(presented)}", presented), Unauthenticated):
            problems.append(f"a HELLO with {what} was not refused UNAUTHENTICATED")
    return problems


def every_setting_at_its_bound(target: ClusterTarget, ctx: CaseContext) -> Verdict:
    """Each setting of SETTINGS: a service is started with it; an allowed one must be served, tell its
    timing in WELCOME as configured, serve no more sessions than configured and admit exactly the HELLOs
    its secret admits (any, without a secret); a refused one must not be served."""
    assert target.configure is not None and target.unconfigure is not None and target.url is not None
    host = ServiceAddress.parse(target.url).host
    problems: list[str] = []
    try:
        for i, setting in enumerate(SETTINGS):
            served = target.configure(setting.heartbeat_ms, setting.fail_after_ms, setting.max_sessions, setting.secret)
            if isinstance(served, str):
                if setting.allowed:
                    problems.append(f"{setting.what}: refused ({served[:120]})")
                continue
            if not setting.allowed:
                problems.append(f"{setting.what}: served")
                continue
            try:
                problems += [f"{setting.what}: {p}" for p in
                             _served(ServiceAddress(host, served, ""), setting, f"settings-{i}")]
            except (CaseTimeout, OSError) as failed:
                problems.append(f"{setting.what}: {failed}")
    finally:
        target.unconfigure()
    return verdict(f"{sum(s.allowed for s in SETTINGS)} settings at the edge of their domain served as configured "
                   f"(timing told, session bound, secret admitting exactly its HELLOs), "
                   f"{sum(not s.allowed for s in SETTINGS)} just past it refused", problems[:4])


BAD_ID: Final = "no spaces!"
"""A node id outside the id grammar (spec/cluster/types.py ``check_id``)."""


@dataclass(frozen=True, slots=True)
class Admission:
    """A stranger's first frame breaking several admission rules, and the refusal of the one checked first."""

    what: str
    node: str
    secret: str
    refused: type[ClusterError]
    oversized: bool = False


ADMISSION_FREE: Final = (
    Admission("a wrong secret and an invalid node id", BAD_ID, "wrong", Unauthenticated),
    Admission("the secret and an invalid node id", BAD_ID, SECRET, InvalidIdentifier),
    Admission("a frame past MAX_HELLO_BYTES from a stranger without the secret", BAD_ID, "wrong", FrameTooLarge,
              oversized=True),
)
"""With a slot free: the frame bound, then the secret, then the node id."""
ADMISSION_FULL: Final = (
    Admission("a wrong secret at capacity", "newcomer", "wrong", Unauthenticated),
    Admission("a wrong secret and an invalid node id at capacity", BAD_ID, "wrong", Unauthenticated),
    Admission("a wrong secret and the id of the node served, at capacity", "holder", "wrong", Unauthenticated),
    Admission("the secret and an invalid node id at capacity", BAD_ID, SECRET, ProviderUnavailable),
    Admission("the secret and the id of the node served, at capacity", "holder", SECRET, ProviderUnavailable),
    Admission("a frame past MAX_HELLO_BYTES at capacity", "newcomer", "wrong", FrameTooLarge, oversized=True),
)
"""With the one slot taken (by ``holder``): the frame bound, the secret, then the capacity, then the node id."""


def _admission_problem(address: ServiceAddress, case: Admission) -> str | None:
    with RawConnection(address) as raw:
        if case.oversized:
            raw.send(wire.FRAME_HEADER.build(wire.MAX_HELLO_BYTES + 1))  # the header alone decides
        else:
            raw.send(wire.encode(ServiceKind.HELLO, 1, node_id=case.node, secret=case.secret, takeover="",
                                 resume=False, resume_after=0))
        reply, _ = raw.until(ServiceKind.WELCOME, ServiceKind.ERROR)
    if _refused(reply, case.refused):
        return None
    return f"{case.what}: answered {reply and (reply.kind.name, reply.payload)}, not {case.refused.__name__} " \
           f"(code {case.refused.code})"


def admission_checks_in_order(target: ClusterTarget, ctx: CaseContext) -> Verdict:
    """A service with a secret serving one session: HELLOs breaking two or three of the admission rules (the
    frame bound, the secret, the session bound, the node id's grammar and its use) are refused as the rule the
    spec checks first (spec/cluster/session.py ``ServiceSession._read``), with a slot free and at capacity."""
    assert target.configure is not None and target.unconfigure is not None and target.url is not None
    host = ServiceAddress.parse(target.url).host
    problems: list[str] = []
    try:
        served = target.configure(1000, 2000, 1, SECRET)
        if isinstance(served, str):
            return verdict("", [f"a service with a secret and one session was refused ({served[:120]})"])
        address = ServiceAddress(host, served, "")
        problems += filter(None, (_admission_problem(address, case) for case in ADMISSION_FREE))
        with RawConnection(address) as holder:
            holder.send(wire.encode(ServiceKind.HELLO, 1, node_id="holder", secret=SECRET, takeover="",
                                    resume=False, resume_after=0))
            welcome, _ = holder.until(ServiceKind.WELCOME, ServiceKind.ERROR)
            if welcome is None or welcome.kind is not ServiceKind.WELCOME:
                return verdict("", problems + [f"the one node's HELLO was answered {welcome and welcome.payload}"])
            problems += filter(None, (_admission_problem(address, case) for case in ADMISSION_FULL))
    except (CaseTimeout, OSError) as failed:
        problems.append(str(failed))
    finally:
        target.unconfigure()
    return verdict(f"{len(ADMISSION_FREE) + len(ADMISSION_FULL)} HELLOs each breaking two or more admission rules "
                   "are refused as the first rule in order: frame bound, secret, session bound, node id", problems[:4])
