"""Spark's AuthEngine handshake and transport ciphers as data and pure code (no sockets, no clocks).

Used on every streaming-shuffle connection when the job sets ``spark.authenticate``; the names below
are what a runtime needs, the modules hold the layouts, key schedule and errors.
"""

from spec.auth.ciphers import CipherName, CtrCipher, GcmCipher, TransportCipher
from spec.auth.errors import AuthError
from spec.auth.handshake import AuthConfig, ClientHandshake, Established, Rejected, ReplayGuard, ServerHandshake

__all__ = ["AuthConfig", "AuthError", "CipherName", "ClientHandshake", "CtrCipher", "Established", "GcmCipher",
           "Rejected", "ReplayGuard", "ServerHandshake", "TransportCipher"]
