"""Spark's AuthEngine handshake (versions 1 and 2) as two sans-IO machines.

The client sends one RpcRequest whose body is its ``AuthMessage`` (its ephemeral X25519 public key
sealed under the shared secret); the server checks the application id, opens the key, answers with
an RpcResponse carrying its own sealed key (bound to the challenge through the transcript), and
both derive the session (:mod:`spec.auth.keys`). Every later byte in both directions goes through the
session's :mod:`spec.auth.ciphers` cipher. A server refuses anything else first, answering an
RpcFailure when it knows the request id; a client accepts only the RpcResponse to its own request.

Feed received bytes to ``receive``; it returns None until the handshake ends, then an
:class:`Established` (bytes after the handshake frame are the peer's first ciphertext) or a
:class:`Rejected` naming the typed error. Neither machine buffers more than one bounded frame.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from dataclasses import dataclass
from typing import Callable, Final

import construct

from spec.auth.ciphers import CipherName, Payload, Random, TransportCipher, transport_cipher
from spec.auth.errors import (
    AppIdMismatch,
    AuthError,
    HandshakeIncomplete,
    HandshakeRejected,
    MalformedHandshake,
    ReplayedChallenge,
    UnauthenticatedFrame,
)
from spec.auth.keys import ENGINE_VERSIONS, SessionKeys, open_public_key, public_key_of, seal_public_key, \
    session_keys, shared_secret
from spec.auth.layouts import (
    AUTH_MESSAGE,
    GCM_IV_LENGTH,
    PUBLIC_KEY_LENGTH,
    RPC_FAILURE,
    RPC_HEADER_SIZE,
    RPC_REQUEST,
    RPC_RESPONSE,
    SALT_LENGTH,
    TransportType,
)
from spec.shared_secret import required_secret

MAX_CHALLENGE_FRAME: Final = 2048
"""Longest first frame a server buffers from a stranger (an AuthMessage is 97 bytes plus the app id)."""
MAX_ANSWER_FRAME: Final = 64 * 1024
"""Longest answer a client buffers from the server it chose: Spark's RpcFailure carries a stack trace."""
REJECTION: Final = "Authentication failed."
"""What the server's RpcFailure says, as Spark's ``AuthRpcHandler`` does (the cause stays local)."""
REPLAY_MEMORY: Final = 4096
"""Salts of answered challenges a server remembers to refuse replays."""
TYPE_OFFSET: Final = 8


@dataclass(frozen=True)
class AuthConfig:
    """What both ends of a connection must agree on."""

    secret: bytes
    app_id: str
    cipher: CipherName = CipherName.CTR
    engine_version: int = 1
    """1: the raw X25519 secret is the key (Spark's default); 2: one more HKDF round."""

    def __post_init__(self) -> None:
        required_secret(self.secret.decode("utf-8", "replace"), "the authentication secret")
        if self.engine_version not in ENGINE_VERSIONS:
            raise ValueError(f"authEngineVersion must be 1 or 2, not {self.engine_version}")


@dataclass(frozen=True)
class Established:
    """The handshake succeeded: send ``reply`` (the server's RpcResponse, in clear), then seal with
    ``cipher``; ``rest`` are received bytes after the handshake frame, already ciphertext."""

    cipher: TransportCipher
    keys: SessionKeys
    reply: bytes
    rest: bytes


@dataclass(frozen=True)
class Rejected:
    """The handshake failed: send ``reply`` (possibly empty), then close."""

    error: AuthError
    reply: bytes = b""


Outcome = Established | Rejected


class ReplayGuard:
    """Salts of the challenges a server answered, the oldest forgotten past ``capacity``."""

    def __init__(self, capacity: int = REPLAY_MEMORY) -> None:
        self._capacity = capacity
        self._seen: OrderedDict[bytes, None] = OrderedDict()

    def first_time(self, salt: bytes) -> bool:
        """Record ``salt``; False if it was already recorded."""
        if salt in self._seen:
            return False
        self._seen[salt] = None
        if len(self._seen) > self._capacity:
            self._seen.popitem(last=False)
        return True


def _rpc_frame(message_type: TransportType, request_id: int, body: bytes) -> bytes:
    return bytes(RPC_REQUEST.build(dict(header=dict(frame_length=RPC_HEADER_SIZE + 4 + len(body),
                                                    message_type=message_type, request_id=request_id),
                                        body_length=len(body), body=body)))


def rpc_failure_frame(request_id: int, error: str) -> bytes:
    encoded = error.encode()
    return bytes(RPC_FAILURE.build(dict(header=dict(frame_length=RPC_HEADER_SIZE + 4 + len(encoded),
                                                    message_type=TransportType.RPC_FAILURE, request_id=request_id),
                                        error=error)))


def _auth_message(config: AuthConfig, transcript: bytes, public_key: bytes, random: Random) -> bytes:
    salt = random(SALT_LENGTH)
    sealed = seal_public_key(config.secret, config.app_id, salt, transcript, public_key, random(GCM_IV_LENGTH))
    return bytes(AUTH_MESSAGE.build(dict(app_id=config.app_id, salt=salt, ciphertext=sealed)))


def _parse_auth_message(body: bytes) -> construct.Container:
    try:
        return AUTH_MESSAGE.parse(body)
    except construct.ConstructError as error:
        raise MalformedHandshake(f"not an AuthMessage ({type(error).__name__})") from None


class _FrameReader:
    """Buffers one handshake frame, bounded; its type is checked as soon as its byte arrives."""

    def __init__(self, allowed: tuple[TransportType, ...], unexpected: Callable[[int], AuthError],
                 max_length: int) -> None:
        self._allowed = allowed
        self._max_length = max_length
        self._unexpected = unexpected
        self._buffer = bytearray()

    def feed(self, data: Payload) -> tuple[bytes, bytes] | None:
        """``(frame, rest)`` once a whole frame arrived; raises on a wrong type or an impossible length."""
        self._buffer += data
        if len(self._buffer) <= TYPE_OFFSET:
            return None
        if self._buffer[TYPE_OFFSET] not in self._allowed:
            raise self._unexpected(self._buffer[TYPE_OFFSET])
        length = int.from_bytes(self._buffer[:TYPE_OFFSET], "big", signed=True)
        if not RPC_HEADER_SIZE < length <= self._max_length:
            raise MalformedHandshake(f"frame length {length} outside ({RPC_HEADER_SIZE}, {self._max_length}]")
        if len(self._buffer) < length:
            return None
        frame, rest = bytes(self._buffer[:length]), bytes(self._buffer[length:])
        self._buffer.clear()
        return frame, rest


def _not_a_response(kind: int) -> AuthError:
    return MalformedHandshake(f"transport type {kind} where the RpcResponse was due")


class _Handshake:
    """Reads the peer's one handshake frame and turns it into an outcome (the roles' common part)."""

    role = ""

    def __init__(self, config: AuthConfig, reader: _FrameReader, random: Random) -> None:
        self.config = config
        self._reader = reader
        self._random = random
        self.outcome: Outcome | None = None

    def receive(self, data: Payload) -> Outcome | None:
        """None until the peer's handshake frame is complete, then the outcome (the same ever after)."""
        if self.outcome is not None:
            return self.outcome
        try:
            got = self._reader.feed(data)
            if got is None:
                return None
            self.outcome = self._complete(*got)
        except AuthError as error:
            self.outcome = Rejected(error)
        return self.outcome

    def _complete(self, frame: bytes, rest: bytes) -> Outcome:
        raise NotImplementedError

    def close(self) -> AuthError:
        """The connection ended: the error to report if no outcome was reached."""
        return self.outcome.error if isinstance(self.outcome, Rejected) else HandshakeIncomplete(self.role)


class ClientHandshake(_Handshake):
    """The connecting side: ``challenge()`` once, then ``receive`` until it returns an outcome."""

    role = "client"

    def __init__(self, config: AuthConfig, random: Random = os.urandom) -> None:
        super().__init__(config, _FrameReader((TransportType.RPC_RESPONSE, TransportType.RPC_FAILURE),
                                              _not_a_response, MAX_ANSWER_FRAME), random)
        self._private = random(PUBLIC_KEY_LENGTH)
        self.request_id = int.from_bytes(random(8), "big") & ((1 << 63) - 1)
        self._challenge = b""

    def challenge(self) -> bytes:
        """The RpcRequest frame to send first."""
        self._challenge = _auth_message(self.config, b"", public_key_of(self._private), self._random)
        return _rpc_frame(TransportType.RPC_REQUEST, self.request_id, self._challenge)

    def receive(self, data: Payload) -> Outcome | None:
        assert self._challenge, "challenge() first"
        return super().receive(data)

    def _complete(self, frame: bytes, rest: bytes) -> Outcome:
        if frame[TYPE_OFFSET] == TransportType.RPC_FAILURE:
            try:
                return Rejected(HandshakeRejected(RPC_FAILURE.parse(frame).error))
            except (construct.ConstructError, UnicodeDecodeError):
                raise MalformedHandshake("undecodable RpcFailure") from None
        try:
            parsed = RPC_RESPONSE.parse(frame)
        except construct.ConstructError:
            raise MalformedHandshake("undecodable RpcResponse") from None
        if frame[TYPE_OFFSET] != TransportType.RPC_RESPONSE or parsed.header.request_id != self.request_id:
            raise MalformedHandshake(f"response to request {parsed.header.request_id}, not {self.request_id}")
        response = parsed.body
        message = _parse_auth_message(response)
        if message.app_id != self.config.app_id:
            raise AppIdMismatch(self.config.app_id, message.app_id)
        server_public = open_public_key(self.config.secret, self.config.app_id, message.salt, self._challenge,
                                        message.ciphertext, "server")
        keys = session_keys(shared_secret(self._private, server_public), self._challenge, response,
                            self.config.engine_version)
        return Established(transport_cipher(self.config.cipher, keys, client=True, random=self._random), keys, b"", rest)


class ServerHandshake(_Handshake):
    """The accepting side: ``receive`` until it returns an outcome; sends nothing before that."""

    role = "server"

    def __init__(self, config: AuthConfig, replays: ReplayGuard | None = None, random: Random = os.urandom) -> None:
        super().__init__(config, _FrameReader((TransportType.RPC_REQUEST,), UnauthenticatedFrame, MAX_CHALLENGE_FRAME),
                         random)
        self._replays = replays

    def _complete(self, frame: bytes, rest: bytes) -> Outcome:
        try:
            parsed = RPC_REQUEST.parse(frame)
        except construct.ConstructError:
            raise MalformedHandshake("undecodable RpcRequest") from None
        request_id = parsed.header.request_id
        try:
            message = _parse_auth_message(parsed.body)
            if message.app_id != self.config.app_id:
                raise AppIdMismatch(self.config.app_id, message.app_id)
            client_public = open_public_key(self.config.secret, self.config.app_id, message.salt, b"",
                                            message.ciphertext, "client")
            if self._replays is not None and not self._replays.first_time(message.salt):
                raise ReplayedChallenge(message.salt)
        except AuthError as error:
            return Rejected(error, rpc_failure_frame(request_id, REJECTION))
        challenge = parsed.body
        private = self._random(PUBLIC_KEY_LENGTH)
        response = _auth_message(self.config, challenge, public_key_of(private), self._random)
        keys = session_keys(shared_secret(private, client_public), challenge, response, self.config.engine_version)
        return Established(transport_cipher(self.config.cipher, keys, client=False, random=self._random), keys,
                           _rpc_frame(TransportType.RPC_RESPONSE, request_id, response), rest)
