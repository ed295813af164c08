"""The spec's sync machines no put through a server reaches, each driven alone, sans-IO, in plain JSON: the
target side of the machine walk corpus (:mod:`conformance.sync.machine_walks`).

A walk names one fresh machine and the calls made on it, in order; each call's answer is what it returned (or the
error it raised, by class and condition) and everything of the machine a caller can observe after it:

- ``client``: one origin's client (``spec.sync.client.SyncClientMachine``) and the tries of its requests
  (``RequestTries``, its ``Backoff``), with the client's rules (``after_failure``, ``keeps_connection``,
  ``durable_wait``, ``outage_warning_due``);
- ``admission``: the server's memory budget (``spec.sync.admission.MemoryBudget``), its put slots, several puts read
  at once (``PutReading``) and their streams' deadlines (``PutStream``), with the rules around them;
- ``commit``: commit stamps over a sequence of clock readings (``spec.sync.commit_time``);
- ``responses``: a server's responses and what each tells a client (``spec.sync.responses``);
- ``settings``: the sync settings with none given or each at its edge (``spec.sync.writer.SyncSettings``);
- ``errors``: the refusal texts (``spec.sync.errors``): each error the spec defines built from its arguments and put
  on the wire (``wire_text``), the condition a status text carries (``condition_in``), a text made one line
  (``one_line``);
- ``flight``: a put's rows split into the messages a client sends (``spec.sync.flight.message_batches``), answered
  as the rows of each message in order (their ``id`` column).

The reference target answers the control line ``MACHINES <walk as JSON>`` with ``MACHINES <answers as JSON>``
(capability ``machines``) by :func:`run`; the selection imports this module afresh with each mutant planted.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from spec.sync import client as sync_client
from spec.sync.admission import (PutLimits, PutReading, PutSlots, PutStream, admit_put, fits_watermark,
                                 flush_working_set)
from spec.sync.admission import MemoryBudget
from spec.sync.client import Fault, RequestTries, SyncClientMachine
from spec.sync.commit_time import commit_timestamp_ms
from spec.sync.errors import SyncError, condition_in, one_line, refusals, wire_text
from spec.sync.flight import message_batches
from spec.sync.messages import SyncResponse
from spec.sync.responses import ResponseFactory, shows_restart
from spec.sync.writer import SyncSettings

Answer = dict[str, Any]


def _raised(error: Exception) -> Answer:
    condition = error.condition if isinstance(error, SyncError) else None
    return {"raised": type(error).__name__, "condition": condition, "message": str(error)}


def _response(fields: dict[str, Any]) -> SyncResponse:
    return SyncResponse(accepted=fields["accepted"], memory_sequence_number=fields.get("memory"),
                        durable_sequence_number=fields.get("durable"), first=fields.get("first", False),
                        server_life=fields.get("life"))


def _plain_response(response: SyncResponse) -> Answer:
    return {"accepted": response.accepted, "memory": response.memory_sequence_number,
            "durable": response.durable_sequence_number, "first": response.first, "life": response.server_life}


def _value(result: Any) -> Any:
    """A call's result as plain JSON (enums by value, a pending transaction as [its number, its put])."""
    if hasattr(result, "value") and not isinstance(result, (int, float, str, bool)):
        return result.value
    if isinstance(result, tuple):
        return list(result)
    return result


class ClientDriver:
    """One origin's client machine and the tries of the request in hand."""

    def __init__(self, settings: dict[str, Any]) -> None:
        del settings  # the client machine has none
        self.machine: SyncClientMachine[str] = SyncClientMachine()
        self.tries: RequestTries[str] | None = None

    def call(self, step: dict[str, Any]) -> Any:
        m, call = self.machine, step["call"]
        if call == "add":
            return m.add(step["sequence"], f"put {step['sequence']}")
        if call == "read":
            return _value(m.read(_response(step["response"]), check_restart=step.get("checkRestart", True)))
        if call == "replay":
            return m.replay()
        if call == "next":
            return _value(m.next_to_send(step["after"]))
        if call == "holding":
            return _value(m.holding(step["sequence"]))
        if call == "start":
            self.tries = RequestTries.start(m, step.get("sequence"), step["now"], initial_s=step["initialS"],
                                            max_s=step["maxS"], deadline_s=step["deadlineS"])
            return None
        if call == "afterFailure":
            return _value(sync_client.after_failure(Fault(step["fault"]), step["text"]))
        if call == "keepsConnection":
            return sync_client.keeps_connection(Fault(step["fault"]))
        if call == "durableWait":
            holding = sync_client.holding(step["sequence"], step.get("memory"), step.get("durable"))
            return _value(sync_client.durable_wait(holding, step["now"], step["deadline"]))
        if call == "warningDue":
            return sync_client.outage_warning_due(step["failingForS"], step["warned"])
        tries = self.tries
        if tries is None:
            return "no request"
        if call == "connected":
            return _value(tries.connected(_response(step["response"])))
        if call == "sending":
            tries.sending()
            return None
        if call == "answered":
            return _value(tries.answered(_response(step["response"]), fresh=step["fresh"]))
        if call == "failed":
            return _value(tries.failed(Fault(step["fault"]), step["text"]))
        if call == "warning":
            return tries.warning_due(step["now"])
        if call == "wait":
            return tries.wait(step["now"], step["jitter"])
        raise ValueError(f"unknown client call {call!r}")

    def state(self) -> Answer:
        m = self.machine
        out: Answer = {"memory": m.memory, "durable": m.durable, "pending": [s for s, _ in m.pending],
                       "restartsSeen": m.restarts_seen, "replayed": m.replayed_transactions, "heard": m.heard,
                       "life": m.life}
        if self.tries is not None:
            t = self.tries
            out["tries"] = {"attempted": t.attempted, "warned": t.warned, "lastFailure": t.last_failure,
                            "backoffTries": t.backoff.tries, "deadline": t.backoff.deadline}
        return out


class AdmissionDriver:
    """A server's memory budget and put slots, and the puts (each its reading and its stream) in flight."""

    def __init__(self, settings: dict[str, Any]) -> None:
        s = settings
        self.limits = PutLimits(max_message_bytes=s["maxMessageBytes"], high_watermark=s["highWatermark"],
                                max_concurrent_puts=s["maxPuts"], put_timeout_s=s["putTimeoutS"],
                                first_message_timeout_s=s["firstMessageTimeoutS"], max_connections=8,
                                handshake_timeout_s=2.0, idle_timeout_s=2.0, max_streams_per_connection=8)
        self.budget = MemoryBudget(s["budget"])
        self.slots = PutSlots(s["maxPuts"])
        self.readings: dict[int, PutReading] = {}
        self.streams: dict[int, PutStream] = {}

    def call(self, step: dict[str, Any]) -> Any:
        b, call, put = self.budget, step["call"], step.get("put", 0)
        simple: dict[str, Callable[[], Any]] = {
            "reserve": lambda: b.reserve(step["n"]), "release": lambda: b.release(step["n"]),
            "setPending": lambda: b.set_pending(step["n"]), "setFlushing": lambda: b.set_flushing(step["n"]),
            "yields": lambda: b.yields_to_flush(step["n"]),
            "take": self.slots.take, "giveBack": self.slots.give_back,
            "fits": lambda: fits_watermark(step["pending"], step["n"], step["highWatermark"]),
            "workingSet": lambda: flush_working_set(step["n"]),
            "admit": lambda: admit_put(step["draining"], step["probe"]),
            "receiveLimit": lambda: self.limits.receive_limit,
        }
        if call in simple:
            return simple[call]()
        if call == "open":
            self.streams[put] = PutStream.open(self.limits, step["now"], authorized=step["authorized"])
            return self.streams[put].deadline
        if call == "first":
            self.streams[put].first_message(step["now"], self.slots)
            return self.streams[put].deadline
        if call == "ending":
            ending = self.streams[put].ending(step["now"], step["stopDeadline"])
            return None if ending is None else _raised(ending)
        reading = self.readings.setdefault(put, PutReading(self.limits))
        if call == "mayKeep":
            return reading.may_keep(step["n"])
        if call == "keep":
            return reading.keep(step["n"], step["reserved"])
        if call == "drop":
            return reading.drop()
        if call == "finish":
            reading.finish()
            return None
        raise ValueError(f"unknown admission call {call!r}")

    def state(self) -> Answer:
        b = self.budget
        return {"budget": {"pending": b.pending, "reading": b.reading, "flushing": b.flushing, "held": b.held,
                           "peak": b.peak},
                "slotsInUse": self.slots.in_use,
                "puts": {str(k): {"total": r.total, "held": r.held, "overWatermark": r.over_watermark,
                                  "refused": r.refusal is not None} for k, r in sorted(self.readings.items())},
                "streams": {str(k): {"deadline": s.deadline, "started": s.started}
                            for k, s in sorted(self.streams.items())}}


class CommitDriver:
    """Commit stamps over a sequence of clock readings, each after the previous stamp (or after none)."""

    def __init__(self, settings: dict[str, Any]) -> None:
        self.previous: int | None = settings.get("previousMs")

    def call(self, step: dict[str, Any]) -> Any:
        if step["call"] == "forget":  # the log cleaned up: no previous stamp known
            self.previous = None
            return None
        self.previous = commit_timestamp_ms(step["nowMs"], self.previous)
        return self.previous

    def state(self) -> Answer:
        return {}


class ResponsesDriver:
    """A server's response factory, and what a response tells a client that was told before."""

    def __init__(self, settings: dict[str, Any]) -> None:
        self.factory = ResponseFactory(settings.get("life"))

    def call(self, step: dict[str, Any]) -> Any:
        call = step["call"]
        if call == "accepted":
            return _plain_response(self.factory.accepted(step.get("memory"), step.get("durable")))
        if call == "overloaded":
            return _plain_response(self.factory.overloaded())
        if call == "showsRestart":
            return shows_restart(_response(step["response"]), step.get("memoryTold"), step.get("lifeTold"))
        raise ValueError(f"unknown responses call {call!r}")

    def state(self) -> Answer:
        return {}


class SettingsDriver:
    """The sync settings as given (none: every default), and what each derived value comes to."""

    def __init__(self, settings: dict[str, Any]) -> None:
        self.settings = SyncSettings(**settings)

    def call(self, step: dict[str, Any]) -> Any:
        if step["call"] == "highWatermark":
            return self.settings.high_watermark
        raise ValueError(f"unknown settings call {step['call']!r}")

    def state(self) -> Answer:
        return dataclasses.asdict(self.settings)


class ErrorsDriver:
    """The refusal texts: an error of the spec's built and put on the wire, a status text read, a text made one line."""

    def __init__(self, settings: dict[str, Any]) -> None:
        del settings  # the texts have none

    def call(self, step: dict[str, Any]) -> Any:
        call = step["call"]
        if call == "wireText":
            error = {cls.__name__: cls for cls in refusals()}[step["error"]](**step["arguments"])
            return {"condition": error.condition, "status": error.status, "text": wire_text(error)}
        if call == "conditionIn":
            return condition_in(step["text"])
        if call == "oneLine":
            return one_line(step["text"])
        raise ValueError(f"unknown errors call {call!r}")

    def state(self) -> Answer:
        return {}


PUT_SCHEMA = pa.schema([("id", pa.int64()), ("text", pa.string())])


def put_rows(chunks: list[list[list[Any]]]) -> pa.Table:
    """A put's rows as a client holds them: each chunk a list of ``[id, text]`` rows, one piece of the table each."""
    pieces = [pa.table({"id": [r[0] for r in chunk], "text": [r[1] for r in chunk]}, schema=PUT_SCHEMA)
              for chunk in chunks]
    return pa.concat_tables(pieces) if pieces else PUT_SCHEMA.empty_table()


class FlightDriver:
    """A put's rows (an ``id`` and a ``text`` column, in ``chunks`` as a client may hold them) split into messages."""

    def __init__(self, settings: dict[str, Any]) -> None:
        del settings  # the split has none

    def call(self, step: dict[str, Any]) -> Any:
        if step["call"] != "messageBatches":
            raise ValueError(f"unknown flight call {step['call']!r}")
        return [batch.column(0).to_pylist() for batch in message_batches(put_rows(step["chunks"]), step["maxBytes"])]

    def state(self) -> Answer:
        return {}


MACHINES: dict[str, Callable[[dict[str, Any]], Any]] = {
    "client": ClientDriver, "admission": AdmissionDriver, "commit": CommitDriver, "responses": ResponsesDriver,
    "settings": SettingsDriver, "errors": ErrorsDriver, "flight": FlightDriver,
}


def run(walk: dict[str, Any]) -> list[Answer]:
    """Every call of ``walk`` made on one fresh machine of its kind; what each returned or raised, and the state after."""
    driver = MACHINES[walk["machine"]](walk.get("settings", {}))
    answers = []
    for step in walk["steps"]:
        try:
            out: Answer = {"result": driver.call(step)}
        except (SyncError, ValueError, KeyError) as error:  # what a machine raises: an answer the runner compares
            out = {"result": _raised(error)}
        answers.append(out | driver.state())
    return answers
