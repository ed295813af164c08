"""Requests of the inputs contract derived from the spec's own tables rather than drawn and kept by mutation: every
rule of a function at its smallest violating input and its nearest valid one, so a mistake the operator mutants do
not model (a sign rounded the wrong way, a prefix in one case only, two texts swapped) is still seen. The input
corpus (:func:`conformance.shuffle.inputs.build`) records them in ``vectors/inputs.json`` after the selected
requests, as tests of source ``derived`` with the spec's answers."""

from __future__ import annotations

import inspect
from typing import Any, Final

from conformance.shuffle.auth_inputs import config_of, seeded
from conformance.shuffle.task_inputs import REPORTED, TASK_ERRORS
from spec.admission import ConnectionUse
from spec.auth.handshake import ClientHandshake
from spec.auth.layouts import GCM_MESSAGE_SEGMENTS, GCM_PLAINTEXT_SEGMENT
from spec.shuffle.layouts import MessageType
from spec.shuffle.root_cause import PEER_SYMPTOMS, ROOT_CAUSE_WAIT_S
from spec.shuffle.settings import NETWORK_TIMEOUT_KEY, SETTINGS, TIME_UNITS, SettingKind

Request = dict[str, Any]


def _time_numbers(divisor: int) -> list[int]:
    """Each side of zero and of the first two rounding boundaries of a unit (a whole millisecond of it)."""
    magnitudes = sorted({m for k in (0, 1, 2) for m in (k * divisor - 1, k * divisor, k * divisor + 1,
                                                        k * divisor + divisor // 2) if m >= 0})
    return sorted({sign * m for m in magnitudes for sign in (1, -1)})


def time_requests() -> list[Request]:
    """Every time unit (:data:`spec.shuffle.settings.TIME_UNITS`), both cases, positive and negative, at and around
    each rounding boundary, read by every time setting and by ``spark.network.timeout``."""
    keys = [s.key for s in SETTINGS if s.kind is SettingKind.TIME_MS]
    out: list[Request] = []
    for unit, (_, divisor) in TIME_UNITS.items():
        for number in _time_numbers(divisor):
            for spelling in dict.fromkeys((f"{number}{unit}", f"{number}{unit.upper()}")):
                out += [{"function": "settings", "settings": {key: spelling}} for key in keys]
                out.append({"function": "networkTimeout", "conf": {NETWORK_TIMEOUT_KEY: spelling}})
    return out


_HEX_SPELLINGS: Final = ("", "ab", "AB", "aB", "0xab", "0Xab", "0XAB", "0x", "0X", "0x0xab", "x", "a", "abc",
                         "0xabc", "0Xabc", "0xa", "ab cd", " 0Xab ", "0X ab", "0 xab", "a b", "ag", "0xg0", "xab")


def hex_requests() -> list[Request]:
    """Every spelling of the JSON form's hex text (prefix in either case or none, empty, odd lengths, spaces, a
    non-hex digit) as a DATA's payload, in both layers."""
    return [{"function": "encode", "layer": layer,
             "message": {"type": MessageType.DATA_MESSAGE_UNSAFE_ROW.name, "seq": 1, "writer_id": 0, "reader_id": 0,
                         "payload": spelling}}
            for spelling in _HEX_SPELLINGS for layer in ("body", "frame")]


_VALUES: Final = {int: (0, 1, -1), str: ("reader", "writer", "")}
"""A typed error's parameters: an int at 0 and either side, a string as either role and empty."""


def error_requests() -> list[Request]:
    """Every typed error :mod:`spec.shuffle.errors` defines, each parameter in turn at each of its values (the
    others at their first): its text and JSON for every role, side and parameter it takes."""
    out: list[Request] = []
    for cls in REPORTED:
        parameters = list(inspect.signature(cls.__init__).parameters.values())[1:]
        kinds = [int if p.annotation in (int, "int") else str for p in parameters]
        base = [_VALUES[kind][0] for kind in kinds]
        variants = {tuple(base[:i] + [value] + base[i + 1:]) for i, kind in enumerate(kinds) for value in _VALUES[kind]}
        out += [{"function": "errorReport", "error": cls.__name__, "args": list(args)}
                for args in sorted(variants, key=repr) or [()]]
    return out


_LOOKS: Final = (({"state": {"failed": "writer 0 failed: boom"}, "writers": 1}, ROOT_CAUSE_WAIT_S),
                 ({"state": "running", "writers": 1}, ROOT_CAUSE_WAIT_S),
                 ({"state": "running", "writers": 1}, ROOT_CAUSE_WAIT_S - 0.001))
"""One look at the attempt: a peer's failure seen at the wait's bound, none seen at it, none seen just before it."""


def root_cause_requests() -> list[Request]:
    """Every error class the shuffle defines (the typed errors, the symptoms the root-cause rule's table names and
    the task errors the requests name) as a task's error, after each look of :data:`_LOOKS`: a class dropped from
    or added to the table of symptoms changes an answer."""
    names = dict.fromkeys([*(cls.__name__ for cls in PEER_SYMPTOMS), *TASK_ERRORS, *(cls.__name__ for cls in REPORTED)])
    return [{"function": "rootCause", "error": name, "seen": seen, "waitedS": waited}
            for name in names for seen, waited in _LOOKS]


def eviction_requests() -> list[Request]:
    """Every use of a connection alone at the cap (one connection, doing it): a newcomer evicts it, or is refused while
    a request is in flight; a use left out of the eviction ranks, or added to them, changes an answer."""
    return [{"function": "connections", "maxConnections": 1,
             "steps": [["accepted", 0], ["using", 0, use.name], ["accepted", 1]]} for use in ConnectionUse]


def ending_requests() -> list[Request]:
    """A connection the server closed (ENDING), then reported in each other use, beside a younger handshake at the
    cap: ENDING is final, so the newcomer still evicts it first."""
    return [{"function": "connections", "maxConnections": 2,
             "steps": [["accepted", 0], ["accepted", 1], ["using", 0, "ENDING"], ["using", 0, use.name],
                       ["accepted", 2]]} for use in ConnectionUse if use is not ConnectionUse.ENDING]


GCM_CONFIG: Final = {"secret": "s3cret", "appId": "app-1", "cipher": "AES/GCM/NoPadding", "engineVersion": 2}
CLIENT_SEED, SERVER_SEED = "c1" * 8, "5e" * 8


def sealed_batch_requests() -> list[Request]:
    """A GCM server sealing back one batch one byte past two messages' plaintext (``GCM_MESSAGE_SEGMENTS`` segments
    of ``GCM_PLAINTEXT_SEGMENT`` bytes each): three messages, the third one's head after the 64th segment; a head
    placed at another segment bound changes the sealed bytes' digest (a batch of at most two messages cannot tell
    which message a head opens at a bound: the first head leads the batch). One request of 2 MiB sealed, answered
    by its length and SHA-256."""
    challenge = ClientHandshake(config_of(GCM_CONFIG), seeded(CLIENT_SEED)).challenge()
    return [{"function": "authServer", "config": GCM_CONFIG, "random": SERVER_SEED, "received": [challenge.hex()],
             "plaintexts": [2 * GCM_MESSAGE_SEGMENTS * GCM_PLAINTEXT_SEGMENT + 1]}]


_AUTHENTICATED: Final = {"spark.authenticate": "true", "spark.authenticate.secret": "s"}
_PADDED: Final = (("spark.authenticate", " TRUE "), ("spark.authenticate", "True"),
                  ("spark.network.crypto.authEngineVersion", " 1 "), ("spark.network.crypto.authEngineVersion", " 2 "),
                  ("spark.network.crypto.cipher", " aes/gcm/nopadding "),
                  ("spark.network.crypto.cipher", "AES/CTR/NoPadding "))
"""Each authentication setting the spec trims or case-folds (spec/auth/settings.py, CipherName.parse), padded with
blanks or in another case."""


def auth_setting_requests() -> list[Request]:
    """Each setting of :data:`_PADDED` alone in an otherwise valid authenticated conf: a trim or fold dropped refuses
    it or reads it otherwise."""
    return [{"function": "authSettings", "conf": _AUTHENTICATED | {key: value}, "appId": "app-1", "secret": None}
            for key, value in _PADDED]


DERIVED: Final = (
    ("every time unit at its rounding bounds, both cases and signs (derived)", time_requests),
    ("every hex spelling of a DATA's payload (derived)", hex_requests),
    ("every typed error at each value of each parameter (derived)", error_requests),
    ("every error class as a task's error, with and without a peer's failure seen (derived)", root_cause_requests),
    ("every use of a connection alone at the cap: evicted by a newcomer, or not (derived)", eviction_requests),
    ("a GCM batch sealed as three messages: each message's head at its bound (derived)", sealed_batch_requests),
    ("every authentication setting the spec trims or folds, padded or in another case (derived)", auth_setting_requests),
    ("a connection ending, then reported in every other use: still evicted first (derived)", ending_requests),
)
"""Each family of derived requests with the comment its tests carry."""


def derived_requests() -> list[tuple[str, Request]]:
    """Every derived request with its family's comment, in a fixed order (a test's tcId follows it)."""
    return [(comment, request) for comment, requests in DERIVED for request in requests()]
