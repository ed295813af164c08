"""The one base of every error that carries a ``condition``.

An error is a stable ``condition`` name (Spark's, Seafowl's, the cluster provider's or this
project's), a ``message`` for people, and named ``parameters`` a test or a peer in another language
can compare exactly. ``str(error)`` is ``[CONDITION] message``; a protocol whose peers expect the
bare text (Seafowl's) overrides :meth:`text`, and so does :class:`RuntimeFailure`.

Two families share the base: a peer broke (or a value breaks) a protocol's rule —
:class:`ProtocolError` and its per-protocol subclasses — and the runtime could not do its job
(a deadline passed, a process did not start, a set-up a user must fix) — :class:`RuntimeFailure`.
"""

from __future__ import annotations

from typing import ClassVar, Mapping


class ProtocolError(Exception):
    """A condition name, a message and named parameters; picklable whatever a subclass's constructor takes."""

    condition: ClassVar[str] = "PROTOCOL_ERROR"

    def __init__(self, message: str, **parameters: object) -> None:
        super().__init__(self.text(message))
        self.message = message
        self.parameters: Mapping[str, object] = parameters

    @classmethod
    def text(cls, message: str) -> str:
        """What ``str()`` of the error says."""
        return f"[{cls.condition}] {message}"

    def __reduce__(self) -> tuple[object, ...]:
        """Rebuilt without calling the subclass's constructor: its state is restored as is."""
        return (_restore_error, (type(self), self.args), self.__dict__)

    def to_json(self) -> dict[str, object]:
        """The error as reports print it: condition first, then parameters (ints as text), then the message."""
        out: dict[str, object] = {"error": self.condition}
        for name, value in self.parameters.items():
            out[name] = str(value) if isinstance(value, int) and not isinstance(value, bool) else value
        out["message"] = self.message
        return out


def _restore_error(cls: type[ProtocolError], args: tuple[object, ...]) -> ProtocolError:
    error = cls.__new__(cls)
    Exception.__init__(error, *args)
    return error


class RuntimeFailure(ProtocolError):
    """The runtime could not do its job (not a peer's fault); ``str()`` is the bare one-line message.

    Its condition names the failure in reports (:meth:`to_json`) without changing what a command line prints.
    """

    condition: ClassVar[str] = "RUNTIME_FAILURE"

    @classmethod
    def text(cls, message: str) -> str:
        return message
