"""The AuthEngine key schedule: sealing the ephemeral X25519 keys, then the session key and IVs.

Read off ``org.apache.spark.network.crypto.AuthEngine`` (Spark 4.3.0 bytecode):

- each side seals its ephemeral public key with AES-128-GCM (Tink ``AesGcmJce``: 12-byte IV ||
  ciphertext || tag) under ``kek = HKDF-SHA256(ikm=secret, salt, info=aad, 16)`` where
  ``aad = appId || salt || transcript`` is also the associated data; the transcript is empty for the
  client's challenge and the encoded challenge for the server's response;
- both sides compute the X25519 shared secret; with ``transcript = challenge || response``:
  version 1 uses the shared secret itself as a 32-byte AES key (``unsafeSkipFinalHkdf``), version 2
  ``HKDF(shared, transcript, "derivedKey", 16)``; the IVs are ``HKDF(shared, transcript,
  "inputIv"/"outputIv", 16)`` and the client sends under "outputIv", the server under "inputIv".
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Final

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from spec.auth.errors import WrongSecret
from spec.auth.layouts import GCM_IV_LENGTH, SEALED_KEY_LENGTH

KEK_LENGTH: Final = 16
SESSION_KEY_LENGTH_V2: Final = 16
IV_LENGTH: Final = 16
DERIVED_KEY_INFO: Final = b"derivedKey"
INPUT_IV_INFO: Final = b"inputIv"
OUTPUT_IV_INFO: Final = b"outputIv"
KEY_ID_INFO: Final = b"keyID"
ENGINE_VERSIONS: Final = (1, 2)
HASH_LENGTH: Final = 32


def hkdf(ikm: bytes, salt: bytes, info: bytes, length: int) -> bytes:
    """HKDF-SHA256 (RFC 5869) as Tink's ``Hkdf.computeHkdf("HMACSHA256", ...)``; an empty salt is
    HashLen zeros. GCM derives a key per sealed message on both ends, so this is written on
    :func:`_hmac_sha256` rather than on ``cryptography``'s HKDF object (ten times dearer per call)."""
    assert 0 < length <= 255 * HASH_LENGTH
    prk = _hmac_sha256(salt or bytes(HASH_LENGTH), ikm)
    out, block = b"", b""
    for counter in range(1, -(-length // HASH_LENGTH) + 1):
        block = _hmac_sha256(prk, block + info + bytes([counter]))
        out += block
    return out[:length]


_INNER_PAD: Final = bytes(byte ^ 0x36 for byte in range(256))
_OUTER_PAD: Final = bytes(byte ^ 0x5C for byte in range(256))
SHA256_BLOCK: Final = 64


def _hmac_sha256(key: bytes, message: bytes) -> bytes:
    """HMAC-SHA256 (RFC 2104) on ``hashlib``: about 1 us where ``hmac.digest`` costs 1.5 (it sets up an
    OpenSSL HMAC context each call)."""
    if len(key) > SHA256_BLOCK:
        key = hashlib.sha256(key).digest()
    padded = key.ljust(SHA256_BLOCK, b"\0")
    inner = hashlib.sha256(padded.translate(_INNER_PAD) + message).digest()
    return hashlib.sha256(padded.translate(_OUTER_PAD) + inner).digest()


def seal_public_key(secret: bytes, app_id: str, salt: bytes, transcript: bytes, public_key: bytes,
                    iv: bytes) -> bytes:
    """The ``ciphertext`` of an AuthMessage: ``public_key`` sealed under the key-encrypting key."""
    aad = app_id.encode() + salt + transcript
    kek = hkdf(secret, salt, aad, KEK_LENGTH)
    assert len(iv) == GCM_IV_LENGTH
    return iv + AESGCM(kek).encrypt(iv, public_key, aad)


def open_public_key(secret: bytes, app_id: str, salt: bytes, transcript: bytes, sealed: bytes, sealed_by: str) -> bytes:
    """The peer's public key out of its AuthMessage; raises WrongSecret when the tag does not verify."""
    aad = app_id.encode() + salt + transcript
    kek = hkdf(secret, salt, aad, KEK_LENGTH)
    if len(sealed) != SEALED_KEY_LENGTH:
        raise WrongSecret(sealed_by)
    try:
        return AESGCM(kek).decrypt(sealed[:GCM_IV_LENGTH], sealed[GCM_IV_LENGTH:], aad)
    except InvalidTag:
        raise WrongSecret(sealed_by) from None


def public_key_of(private_key: bytes) -> bytes:
    return X25519PrivateKey.from_private_bytes(private_key).public_key().public_bytes_raw()


def shared_secret(private_key: bytes, peer_public_key: bytes) -> bytes:
    return X25519PrivateKey.from_private_bytes(private_key).exchange(X25519PublicKey.from_public_bytes(peer_public_key))


@dataclass(frozen=True)
class SessionKeys:
    """What both ends derive: the AES key (one for both directions) and one IV per direction."""

    key: bytes
    client_iv: bytes
    """IV of the client-to-server stream (HKDF info "outputIv")."""
    server_iv: bytes
    """IV of the server-to-client stream (HKDF info "inputIv")."""

    def key_id(self) -> str:
        """Spark's ``TransportCipherUtil.getKeyId``: ``hex(HKDF(key, no salt, "keyID", 32))``, safe to log."""
        return hkdf(self.key, b"", KEY_ID_INFO, 32).hex()


def session_keys(shared: bytes, challenge: bytes, response: bytes, engine_version: int) -> SessionKeys:
    """The session's key and IVs from the shared secret and the two encoded AuthMessages."""
    transcript = challenge + response
    key = shared if engine_version == 1 else hkdf(shared, transcript, DERIVED_KEY_INFO, SESSION_KEY_LENGTH_V2)
    return SessionKeys(key, hkdf(shared, transcript, OUTPUT_IV_INFO, IV_LENGTH),
                       hkdf(shared, transcript, INPUT_IV_INFO, IV_LENGTH))
