"""The bytes of Spark's AuthEngine handshake and of its AES-GCM transport messages, as construct layouts.

Integers are big-endian like Java's. The handshake rides on Spark's transport frames: the client's
``AuthMessage`` is the body of one RpcRequest, the server's the body of the RpcResponse (or an
RpcFailure carries the refusal). After the handshake every byte is encrypted: AES-CTR leaves the
lengths unchanged; AES-GCM wraps each sent batch in a message header and 32 KiB segments.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Final

from construct import Bytes, Const, Int8ub, Int32sb, Int64sb, PascalString, Prefixed, Struct, Terminated, this


class TransportType(IntEnum):
    """``org.apache.spark.network.protocol.Message.Type`` ids the handshake uses."""

    RPC_REQUEST = 3
    RPC_RESPONSE = 4
    RPC_FAILURE = 5
    ONE_WAY_MESSAGE = 9


AUTH_MESSAGE_TAG: Final = 0xFB
"""First byte of every ``AuthMessage`` (Spark's ``TAG_BYTE``, -5 as a Java byte)."""

SALT_LENGTH: Final = 16
PUBLIC_KEY_LENGTH: Final = 32
GCM_IV_LENGTH: Final = 12
GCM_TAG_LENGTH: Final = 16
SEALED_KEY_LENGTH: Final = GCM_IV_LENGTH + PUBLIC_KEY_LENGTH + GCM_TAG_LENGTH
"""Tink ``AesGcmJce`` output for a 32-byte X25519 public key: IV || ciphertext || tag."""

AUTH_MESSAGE = Struct(
    "tag" / Const(AUTH_MESSAGE_TAG, Int8ub) * "0xFB: an AuthMessage (anything else is Spark's SASL fallback)",
    "app_id" / PascalString(Int32sb, "utf8") * "application id (Encoders.Strings: i32 length + UTF-8)",
    "salt" / Prefixed(Int32sb, Bytes(SALT_LENGTH)) * "16 random bytes: HKDF salt of the key-encrypting key",
    "ciphertext" / Prefixed(Int32sb, Bytes(SEALED_KEY_LENGTH))
    * "60 bytes: the sender's ephemeral X25519 public key sealed with AES-128-GCM (IV || ciphertext || tag)",
    Terminated,
)
"""Spark's ``AuthMessage``: the client's challenge and the server's response have the same shape."""

RPC_HEADER = Struct(
    "frame_length" / Int64sb * "length of the whole frame, these 8 bytes included",
    "message_type" / Int8ub * "3 = RpcRequest (client), 4 = RpcResponse, 5 = RpcFailure (server)",
    "request_id" / Int64sb * "chosen by the client, echoed by the server",
)
"""What the three handshake frames share."""

RPC_REQUEST = Struct(
    "header" / RPC_HEADER,
    "body_length" / Int32sb * "length of the AuthMessage that follows",
    "body" / Bytes(this.body_length) * "the client's AuthMessage (the challenge)",
    Terminated,
)
"""The client's first frame: ``RpcRequest(requestId, AuthMessage)``, 21 + body bytes."""

RPC_RESPONSE = RPC_REQUEST
"""The server's answer: the same layout with message type 4 and the server's AuthMessage as body."""

RPC_FAILURE = Struct(
    "header" / RPC_HEADER,
    "error" / PascalString(Int32sb, "utf8") * "why the server refused (it then closes the connection)",
    Terminated,
)
"""The server's refusal: ``RpcFailure(requestId, errorString)``."""

RPC_HEADER_SIZE: Final = RPC_HEADER.sizeof()

GCM_LENGTH_BYTES: Final = 8
GCM_NONCE_PREFIX_LENGTH: Final = 7
GCM_CIPHERTEXT_SEGMENT: Final = 32 * 1024
"""Ciphertext bytes of every segment but the last (Spark's CIPHERTEXT_BUFFER_SIZE)."""
GCM_PLAINTEXT_SEGMENT: Final = GCM_CIPHERTEXT_SEGMENT - GCM_TAG_LENGTH
GCM_MESSAGE_SEGMENTS: Final = 32
"""Segments one sealed message holds at most (1,048,064 plaintext bytes): a longer batch is sealed as several
messages back to back, cut anywhere (a frame may span two). Spark's receiver takes any length below 2 GiB
(it casts what is left of a message to an int) and hands plaintext on every 1 MiB."""


def gcm_header_length(key_length: int) -> int:
    """Tink's streaming header: its own length byte, a salt as long as the key, the nonce prefix."""
    return 1 + key_length + GCM_NONCE_PREFIX_LENGTH


def gcm_message_header(key_length: int) -> Struct:
    """The start of one AES-GCM transport message for a session key of ``key_length`` bytes."""
    return Struct(
        "total_length" / Int64sb
        * "bytes of the whole message, these 8 included; also the HKDF info of the segment key",
        "header_length" / Const(gcm_header_length(key_length), Int8ub) * "1 + key length + 7",
        "salt" / Bytes(key_length) * "HKDF salt of this message's segment key",
        "nonce_prefix" / Bytes(GCM_NONCE_PREFIX_LENGTH)
        * "first 7 bytes of every segment's nonce (then i32 segment number, then 1 on the last segment)",
    )


GCM_MESSAGE_HEADER_128: Final = gcm_message_header(16)
"""Engine version 2 (16-byte session key): 8 + 24 header bytes before the segments."""
GCM_MESSAGE_HEADER_256: Final = gcm_message_header(32)
"""Engine version 1 (the raw 32-byte X25519 secret as key): 8 + 40 header bytes before the segments."""
