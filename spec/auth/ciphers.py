"""Spark's two transport ciphers as sans-IO objects: bytes to send in, ciphertext out, and back.

- ``AES/CTR/NoPadding`` (``CtrTransportCipher``, Spark's default): one continuous AES-CTR stream per
  direction (128-bit big-endian counter from the direction's IV); lengths are unchanged and nothing
  is authenticated.
- ``AES/GCM/NoPadding`` (``GcmTransportCipher``): every sealed batch is one message
  ``[i64 total length][Tink header: length byte, salt, 7-byte nonce prefix][segments]``; its segment
  key is ``HKDF-SHA256(session key, salt, info=the 8 length bytes, key length)``; segment ``i`` holds up
  to 32752 plaintext bytes sealed with AES-GCM under nonce ``prefix || i32 i || last?1:0``. Spark's
  receiver decrypts message after message from the byte stream and hands the plaintext to its frame
  decoder as a stream, so a message may carry several frames and pieces of frames (proven against
  Spark's classes both ways). This runtime seals each send batch as messages of at most
  ``GCM_MESSAGE_SEGMENTS`` segments back to back, in one buffer (Spark's receiver mishandles a message with
  2 GiB or more left: it casts the rest to an int). A message's length and header are packed and read as
  ``spec.auth.layouts.gcm_message_header`` lays them out (:class:`GcmHeader`).

Spark's sender draws a fresh salt and nonce prefix per message, so it derives a key per message. The
receiver only reads them from each header, so this sender draws its salt once per connection direction
and counts its nonce prefixes from a random start instead: messages of one length share a derived key
(the length is the HKDF info) and never a nonce (a prefix is used once per direction, and the other
direction's salt, hence key, is its own). Both ends keep the few derived keys they last used.
"""

from __future__ import annotations

import itertools
import os
import struct
from enum import Enum
from operator import itemgetter
from typing import Any, Callable, Final, Protocol, Sequence

from construct import Bytes, Const, FormatField
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from spec.auth.errors import TagMismatch
from spec.auth.keys import SessionKeys, hkdf
from spec.auth.layouts import (
    GCM_CIPHERTEXT_SEGMENT,
    GCM_LENGTH_BYTES,
    GCM_MESSAGE_SEGMENTS,
    GCM_NONCE_PREFIX_LENGTH,
    GCM_PLAINTEXT_SEGMENT,
    GCM_TAG_LENGTH,
    gcm_message_header,
)

Payload = bytes | bytearray | memoryview
Random = Callable[[int], bytes]

CTR_SLACK: Final = 15
"""``update_into`` wants room for a block beyond the input, even in CTR mode."""

_CTR_ROOM: Final = bytes(CTR_SLACK)

_TAG_ROOM: Final = bytes(GCM_TAG_LENGTH)
"""Where a segment's tag goes, laid out behind its plaintext before the segment is sealed in place."""

PREFIXES: Final = 1 << (8 * GCM_NONCE_PREFIX_LENGTH)
"""Distinct GCM nonce prefixes: the messages one direction seals before a prefix could repeat."""

GCM_KEYS_KEPT: Final = 64
"""Derived message keys each end keeps per direction (a DATA length, a CREDIT length, ...); forgotten all at
once when full, so a peer with a fresh salt per message (Spark) costs one dictionary entry per message. A
reader's batch of CREDITs has a length per count of credits (one per DATA of a read, up to about 32): with 16
kept, each end of a 512 MB run derived 57-220 keys, each about 40 us of CPU in the run (up to 0.6 us per DATA);
with 64, 35-39, the first of each length."""


class CipherName(Enum):
    """``spark.network.crypto.cipher`` values (compared ignoring case, as Spark does)."""

    CTR = "AES/CTR/NoPadding"
    GCM = "AES/GCM/NoPadding"

    @classmethod
    def parse(cls, text: str) -> CipherName:
        for name in cls:
            if name.value.lower() == text.strip().lower() or name.name.lower() == text.strip().lower():
                return name
        raise ValueError(f"Unsupported cipher mode: {text}. {cls.GCM.value} and {cls.CTR.value} are supported.")


class TransportCipher(Protocol):
    """One direction pair of an authenticated connection; used by one thread at a time."""

    def seal(self, parts: Sequence[Payload]) -> Payload:
        """The ciphertext of ``parts`` sent back to back (empty when they are)."""

    def open(self, data: Payload) -> Payload:
        """The plaintext that ``data`` completes, lent until the next call (as a reactor lends its read
        buffer); raises TagMismatch on forged or impossible bytes."""

    def close(self) -> None:
        """The peer closed: raises TagMismatch if it closed inside a message."""


def _room(buffer: bytearray, size: int) -> bytearray:
    """``buffer`` if it holds ``size`` bytes, else a new one that does (the old may still be lent out)."""
    return buffer if len(buffer) >= size else bytearray(size)


class CtrCipher:
    """AES-CTR streams: ``send_iv`` for what this side writes, ``receive_iv`` for what it reads."""

    def __init__(self, key: bytes, send_iv: bytes, receive_iv: bytes) -> None:
        self._encryptor = Cipher(algorithms.AES(key), modes.CTR(send_iv)).encryptor()
        self._decryptor = Cipher(algorithms.AES(key), modes.CTR(receive_iv)).decryptor()
        self._plain = bytearray()
        """Reused by every :meth:`open`: a fresh buffer per read costs more than decrypting it."""

    def seal(self, parts: Sequence[Payload]) -> Payload:
        """Joins the batch into the one buffer sent and encrypts it there, in one call: cryptography lets the GIL
        go at every call, which costs more per part than copying it."""
        sealed = bytearray().join([*parts, _CTR_ROOM])
        view = memoryview(sealed)
        return view[:self._encryptor.update_into(view[:len(sealed) - CTR_SLACK], view)]

    def open(self, data: Payload) -> Payload:
        self._plain = _room(self._plain, len(data) + CTR_SLACK)
        return memoryview(self._plain)[:self._decryptor.update_into(data, self._plain)]

    def close(self) -> None:
        return None


_NONCE: Final = struct.Struct(f">{GCM_NONCE_PREFIX_LENGTH}sIB")
"""A segment's nonce: the message's prefix, the segment's number, 1 for the message's last segment else 0."""


def _nonce(prefix: bytes, segment: int, last: bool) -> bytes:
    return _NONCE.pack(prefix, segment, last)


HEADER_FIELDS: Final = ("total_length", "header_length", "salt", "nonce_prefix")
"""The fields of :func:`spec.auth.layouts.gcm_message_header`, in the order :class:`GcmHeader` hands them over."""


def _innermost(field: Any, kind: type | tuple[type, ...]) -> Any:
    """The construct ``kind`` a layout field wraps (its name and documentation are wrappers)."""
    while not isinstance(field, kind):
        field = field.subcon
    return field


class GcmHeader:
    """A message's length and Tink header as :func:`spec.auth.layouts.gcm_message_header` lays them out (the one source
    of their bytes), packed and read by a ``struct`` derived from the layout's fields in their order: construct's own
    build and parse cost more per message than sealing a small one."""

    __slots__ = ("size", "header_length", "_struct", "_in_layout", "_by_name", "_length_bytes")

    def __init__(self, key_length: int) -> None:
        fields = gcm_message_header(key_length).subcons
        names = [field.name for field in fields]
        codes = [_innermost(field, (FormatField, Bytes)) for field in fields]
        self._struct = struct.Struct(">" + "".join(
            code.fmtstr.lstrip("<>=!") if isinstance(code, FormatField) else f"{code.sizeof()}s" for code in codes))
        self.size = self._struct.size
        self.header_length: int = _innermost(fields[names.index("header_length")], Const).value
        """The header's own length, the layout's constant."""
        self._in_layout = itemgetter(*(HEADER_FIELDS.index(name) for name in names))
        self._by_name = itemgetter(*(names.index(name) for name in HEADER_FIELDS))
        at = names.index("total_length")
        offset = sum(code.sizeof() for code in codes[:at])
        self._length_bytes = slice(offset, offset + codes[at].sizeof())

    def pack(self, total: int, salt: bytes, prefix: bytes) -> bytes:
        return self._struct.pack(*self._in_layout((total, self.header_length, salt, prefix)))

    def unpack(self, head: Payload) -> tuple[int, int, bytes, bytes]:
        """``(total_length, header_length, salt, nonce_prefix)`` of a header's :attr:`size` bytes."""
        found: tuple[int, int, bytes, bytes] = self._by_name(self._struct.unpack(head))
        return found

    def length_bytes(self, head: Payload) -> bytes:
        """The total length as the header holds it: the HKDF info of the message's key."""
        return bytes(head[self._length_bytes])


def _kept(keys: dict[bytes, AESGCM], key: bytes, head: bytes) -> AESGCM:
    """The AES-GCM key of the message whose header starts with ``head`` (its length bytes, then its salt)."""
    aead = keys.get(head)
    if aead is None:
        if len(keys) >= GCM_KEYS_KEPT:
            keys.clear()
        aead = keys[head] = AESGCM(hkdf(key, head[GCM_LENGTH_BYTES:], head[:GCM_LENGTH_BYTES], len(key)))
    return aead


def _segmented(parts: Sequence[Payload], heads: list[bytes]) -> list[Payload]:
    """``parts`` cut at the segment bounds, each segment followed by room for its tag and each message (every
    ``GCM_MESSAGE_SEGMENTS`` segments) preceded by its head: the sealed layout, to be joined once."""
    pieces: list[Payload] = [heads[0]]
    room, segment = GCM_PLAINTEXT_SEGMENT, 0
    for part in parts:
        length = len(part)
        if length < room:
            pieces.append(part)
            room -= length
            continue
        view, start = memoryview(part), 0
        while length - start >= room:
            pieces += (view[start:start + room], _TAG_ROOM)
            start, room, segment = start + room, GCM_PLAINTEXT_SEGMENT, segment + 1
            message, first = divmod(segment, GCM_MESSAGE_SEGMENTS)
            if not first and message < len(heads):
                pieces.append(heads[message])
        if start < length:
            pieces.append(view[start:])
            room -= length - start
    if room < GCM_PLAINTEXT_SEGMENT:
        pieces.append(_TAG_ROOM)
    return pieces


class GcmCipher:
    """AES-GCM messages in Spark's segment layout; one session key serves both directions."""

    def __init__(self, key: bytes, random: Random = os.urandom) -> None:
        self._key = key
        self._header = GcmHeader(len(key))
        self._salt = random(len(key))
        """This direction's salt, in every message it seals."""
        self._prefixes = itertools.count(int.from_bytes(random(GCM_NONCE_PREFIX_LENGTH), "big"))
        """This direction's nonce prefixes, one per message (modulo 2**56: unique for that many messages)."""
        self._sealing: dict[bytes, AESGCM] = {}
        self._opening: dict[bytes, AESGCM] = {}
        self._pending = bytearray()
        """Received bytes not yet making a whole length, header or segment."""
        self._total = -1
        """Length of the message being received, -1 between messages."""
        self._read = 0
        """Bytes of that message consumed so far."""
        self._segment = 0
        self._aead: AESGCM | None = None
        self._prefix = b""
        self._plain = bytearray()
        """Reused by every :meth:`open`: a fresh buffer per read costs more than decrypting it."""

    def seal(self, parts: Sequence[Payload]) -> Payload:
        """One join lays the batch out as its messages (each one's length and header, each segment's plaintext
        followed by room for its tag), then every segment is sealed in place: the plaintext is copied once and
        no buffer is zeroed. One message per ``GCM_MESSAGE_SEGMENTS`` segments of plaintext, back to back."""
        size = sum(map(len, parts))
        if not size:
            return b""
        if size <= GCM_PLAINTEXT_SEGMENT:  # one segment (a batch of CREDITs): sealed from their join
            head, aead, prefix = self._start_sealing(size)
            sealed = bytearray(len(head) + size + GCM_TAG_LENGTH)
            sealed[:len(head)] = head
            aead.encrypt_into(_nonce(prefix, 0, True), b"".join(parts), None, memoryview(sealed)[len(head):])
            return sealed
        bound = GCM_MESSAGE_SEGMENTS * GCM_PLAINTEXT_SEGMENT
        messages = [self._start_sealing(min(bound, size - start)) for start in range(0, size, bound)]
        sealed = bytearray().join(_segmented(parts, [head for head, _, _ in messages]))
        target = memoryview(sealed)
        position = 0
        for (head, aead, prefix), start in zip(messages, range(0, size, bound)):
            position += len(head)
            left = min(bound, size - start)
            encrypt, last = aead.encrypt_into, (left - 1) // GCM_PLAINTEXT_SEGMENT
            for segment in range(last + 1):
                end = position + (GCM_PLAINTEXT_SEGMENT if segment < last else left - last * GCM_PLAINTEXT_SEGMENT)
                encrypt(_NONCE.pack(prefix, segment, segment == last), target[position:end], None,
                        target[position:end + GCM_TAG_LENGTH])
                position = end + GCM_TAG_LENGTH
        return sealed

    def _start_sealing(self, plaintext: int) -> tuple[bytes, AESGCM, bytes]:
        """A new message holding ``plaintext`` bytes: its length and header, its key, its nonce prefix."""
        full, partial = divmod(plaintext, GCM_PLAINTEXT_SEGMENT)
        total = self._header.size + full * GCM_CIPHERTEXT_SEGMENT + (partial + GCM_TAG_LENGTH if partial else 0)
        prefix = (next(self._prefixes) % PREFIXES).to_bytes(GCM_NONCE_PREFIX_LENGTH, "big")
        head = self._header.pack(total, self._salt, prefix)
        aead = _kept(self._sealing, self._key, self._header.length_bytes(head) + self._salt)
        return head, aead, prefix

    def open(self, data: Payload) -> Payload:
        """Decrypts straight from ``data`` into the reused buffer; only an unfinished length, header or segment
        is kept (and completed from the next bytes without copying them all)."""
        view = memoryview(data)
        out = self._plain = _room(self._plain, len(self._pending) + len(view))
        written = position = 0
        if self._pending:
            position = min(len(view), self._unit_length() - len(self._pending))
            self._pending += view[:position]
            if len(self._pending) < self._unit_length():
                return b""
            written = self._open_unit(memoryview(self._pending), out, 0)
            self._pending = bytearray()
        while len(view) - position >= (unit := self._unit_length()):
            inner = min(len(view) - position, self._total - self._read - 1) // GCM_CIPHERTEXT_SEGMENT
            if inner > 1:  # several whole segments before the message's last (none between messages): the hot path
                end = position + inner * GCM_CIPHERTEXT_SEGMENT
                written = self._open_inner(view[position:end], out, written)
                position = end
                continue
            written += self._open_unit(view[position:position + unit], out, written)
            position += unit
        self._pending = bytearray(view[position:])
        return memoryview(out)[:written]

    def _open_inner(self, units: memoryview, out: bytearray, written: int) -> int:
        """Decrypt whole segments of the current message, none its last, into ``out`` from ``written``;
        returns where the plaintext ends."""
        aead, prefix, first, target = self._aead, self._prefix, self._segment, memoryview(out)
        assert aead is not None
        segment = first
        try:
            for start in range(0, len(units), GCM_CIPHERTEXT_SEGMENT):
                aead.decrypt_into(_NONCE.pack(prefix, segment, 0), units[start:start + GCM_CIPHERTEXT_SEGMENT], None,
                                  target[written:written + GCM_PLAINTEXT_SEGMENT])
                written += GCM_PLAINTEXT_SEGMENT
                segment += 1
        except InvalidTag:
            raise TagMismatch(f"segment {segment} failed its tag") from None
        self._segment = segment
        self._read += len(units)
        return written

    def _unit_length(self) -> int:
        """Bytes of the next length-and-header or segment."""
        if self._total < 0:
            return self._header.size
        return min(self._total - self._read, GCM_CIPHERTEXT_SEGMENT)

    def _open_unit(self, unit: memoryview, out: bytearray, written: int) -> int:
        """Start a message or decrypt one segment into ``out`` at ``written``; returns the bytes decrypted."""
        if self._total < 0:
            self._start_message(unit)
            return 0
        last = len(unit) == self._total - self._read
        plain = len(unit) - GCM_TAG_LENGTH
        if plain < 0:
            raise TagMismatch(f"segment {self._segment} is shorter than its tag")
        assert self._aead is not None
        try:
            self._aead.decrypt_into(_nonce(self._prefix, self._segment, last), unit, None,
                                    memoryview(out)[written:written + plain])
        except InvalidTag:
            raise TagMismatch(f"segment {self._segment} failed its tag") from None
        self._segment += 1
        self._read += len(unit)
        if last:
            self._total = -1
        return plain

    def _start_message(self, head: memoryview) -> None:
        total, header_length, salt, prefix = self._header.unpack(head)
        if total < self._header.size:
            raise TagMismatch(f"impossible message length {total}")
        if header_length != self._header.header_length:
            raise TagMismatch(f"header length byte {header_length}, expected {self._header.header_length}")
        self._aead = _kept(self._opening, self._key, self._header.length_bytes(head) + salt)
        self._prefix = prefix
        self._total = total
        self._read = self._header.size
        self._segment = 0
        if self._read == total:
            self._total = -1  # an empty message: Spark's receiver accepts it

    def close(self) -> None:
        if self._total >= 0 or self._pending:
            raise TagMismatch("the connection ended inside an encrypted message")


def transport_cipher(name: CipherName, keys: SessionKeys, client: bool, random: Random = os.urandom) -> TransportCipher:
    """The session cipher of one end, as Spark's ``AuthEngine.generateTransportCipher`` picks it."""
    if name is CipherName.GCM:
        return GcmCipher(keys.key, random)
    return CtrCipher(keys.key, keys.client_iv if client else keys.server_iv,
                     keys.server_iv if client else keys.client_iv)
