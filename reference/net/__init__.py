"""Socket plumbing shared by the protocol runtimes: selector-driven streams with bounded resources."""

from reference.net.reactor import CloseReason, ConnectionLimits, Handler, Reactor, Stream

__all__ = ["CloseReason", "ConnectionLimits", "Handler", "Reactor", "Stream"]
