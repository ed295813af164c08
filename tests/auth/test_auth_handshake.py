"""Spark's AuthEngine handshake and transport ciphers, checked against the fixed vectors of Spark's
``AuthEngineSuite`` and against each other; every failure is a typed error."""

from __future__ import annotations

import itertools
import struct
from collections.abc import Callable

import pytest

from spec.auth import AuthConfig, CipherName, ClientHandshake, Established, GcmCipher, Rejected, ReplayGuard, \
    ServerHandshake
from spec.auth import errors
from spec.auth.ciphers import GCM_KEYS_KEPT, CtrCipher, GcmHeader
from spec.auth.layouts import AUTH_MESSAGE, GCM_MESSAGE_SEGMENTS, GCM_PLAINTEXT_SEGMENT, TransportType, \
    gcm_message_header

# AuthEngineSuite (apache/spark common/network-common/src/test/.../crypto/AuthEngineSuite.java)
CLIENT_PRIVATE = bytes.fromhex("efe6b68b3fce92158e3637f6ef9d937e75558928dd4b401de04b43d300a73186")
CLIENT_CHALLENGE = bytes.fromhex(
    "fb00000005617070496400000010890b6e960f48e998777267a7e4e623220000003c48ad7dc7ec9466da9"
    "3bda9f11488dc9404050e02c661d87d67c782444944c6e369b27e0a416c30845a2d9e64271511ca98b41d"
    "65f8c426e18ff380f6")
SERVER_RESPONSE = bytes.fromhex(
    "fb00000005617070496400000010708451c9dd2792c97c1ca66e6df449ef0000003c64fe899ecdaf458d4"
    "e25e9d5c5a380b8e6d1a184692fac065ed84f8592c18e9629f9c636809dca2ffc041f20346eb53db78738"
    "08ecad08b46b5ee3ff")
DERIVED_KEY_ID_V2 = "de04fd52d71040ed9d260579dacfdf4f5695f991ce8ddb1dde05a7335880906e"
UNSAFE_DERIVED_KEY_V1 = "31963f15a320d5c90333f7ecf5cf3a31c7eaf151de07fef8494663a9f47cfd31"
REQUEST_ID = 42

CONFIGS = [AuthConfig(b"secret", "appId", cipher, version) for cipher in CipherName for version in (1, 2)]


def scripted(*chunks: bytes) -> Callable[[int], bytes]:
    """A random source that hands out ``chunks`` in order (each exactly as long as asked)."""
    queue = list(chunks)

    def take(n: int) -> bytes:
        chunk = queue.pop(0)
        assert len(chunk) == n
        return chunk
    return take


def fixed_client(version: int) -> ClientHandshake:
    """The suite's client: its private key, and the salt and IV its challenge carries in clear."""
    message = AUTH_MESSAGE.parse(CLIENT_CHALLENGE)
    return ClientHandshake(AuthConfig(b"secret", "appId", CipherName.CTR, version),
                           scripted(CLIENT_PRIVATE, REQUEST_ID.to_bytes(8, "big"), message.salt, message.ciphertext[:12]))


def response_frame(body: bytes, request_id: int = REQUEST_ID, kind: int = TransportType.RPC_RESPONSE) -> bytes:
    return struct.pack(">qBqi", 21 + len(body), kind, request_id, len(body)) + body


def handshake(client_config: AuthConfig, server_config: AuthConfig,
              replays: ReplayGuard | None = None) -> tuple[object, object]:
    client = ClientHandshake(client_config)
    server = ServerHandshake(server_config, replays)
    served = server.receive(client.challenge())
    assert served is not None
    return client.receive(served.reply) if served.reply else None, served


@pytest.mark.parametrize("version", [1, 2])
def test_the_fixed_challenge_of_spark_suite_is_reproduced_byte_for_byte(version: int) -> None:
    client = fixed_client(version)
    assert client.challenge() == response_frame(CLIENT_CHALLENGE, kind=TransportType.RPC_REQUEST)


def test_spark_suite_fixed_response_derives_its_session_key_in_both_versions() -> None:
    v2 = fixed_client(2)
    v2.challenge()
    established = v2.receive(response_frame(SERVER_RESPONSE))
    assert isinstance(established, Established)
    assert established.keys.key_id() == DERIVED_KEY_ID_V2
    v1 = fixed_client(1)
    v1.challenge()
    established = v1.receive(response_frame(SERVER_RESPONSE))
    assert isinstance(established, Established)
    assert established.keys.key.hex() == UNSAFE_DERIVED_KEY_V1


def test_a_server_answers_spark_fixed_challenge_once_and_refuses_its_replay() -> None:
    replays = ReplayGuard()
    config = AuthConfig(b"secret", "appId")
    first = ServerHandshake(config, replays).receive(response_frame(CLIENT_CHALLENGE, kind=TransportType.RPC_REQUEST))
    assert isinstance(first, Established)
    again = ServerHandshake(config, replays).receive(response_frame(CLIENT_CHALLENGE, kind=TransportType.RPC_REQUEST))
    assert isinstance(again, Rejected) and isinstance(again.error, errors.ReplayedChallenge)
    assert b"Authentication failed." in again.reply and again.reply[8] == TransportType.RPC_FAILURE


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: f"{c.cipher.name}-v{c.engine_version}")
def test_both_ends_derive_one_session_and_carry_bytes_both_ways_in_any_chunking(config: AuthConfig) -> None:
    client = ClientHandshake(config)
    server = ServerHandshake(config, ReplayGuard())
    challenge = client.challenge()
    outcomes = [server.receive(challenge[i:i + 7]) for i in range(0, len(challenge), 7)]
    served = outcomes[-1]
    assert all(o is None for o in outcomes[:-1]) and isinstance(served, Established)
    established = client.receive(served.reply)
    assert isinstance(established, Established) and established.keys == served.keys
    payload = bytes(range(256)) * (2 * GCM_PLAINTEXT_SEGMENT // 256 + 3)
    for sender, receiver in ((established.cipher, served.cipher), (served.cipher, established.cipher)):
        sealed = bytes(sender.seal([payload[:100], payload[100:]]))
        assert payload[:4096] not in sealed
        opened = b"".join(bytes(receiver.open(sealed[i:i + 1000])) for i in range(0, len(sealed), 1000))
        assert opened == payload
        receiver.close()


def test_bytes_after_the_challenge_are_handed_back_as_the_first_ciphertext() -> None:
    config = CONFIGS[0]
    client = ClientHandshake(config)
    served = ServerHandshake(config).receive(client.challenge() + b"next")
    assert isinstance(served, Established) and served.rest == b"next"


@pytest.mark.parametrize("size", [1, GCM_PLAINTEXT_SEGMENT - 1, GCM_PLAINTEXT_SEGMENT, GCM_PLAINTEXT_SEGMENT + 1,
                                  3 * GCM_PLAINTEXT_SEGMENT])
def test_gcm_messages_have_spark_segment_layout_at_every_boundary(size: int) -> None:
    key = bytes(16)
    sealed = bytes(GcmCipher(key).seal([b"x" * size]))
    full, partial = divmod(size, GCM_PLAINTEXT_SEGMENT)
    assert struct.unpack(">q", sealed[:8])[0] == len(sealed) == 8 + 24 + full * 32768 + (partial + 16 if partial else 0)
    assert sealed[8] == 24
    assert GcmCipher(key).open(sealed) == b"x" * size


@pytest.mark.parametrize("key_length", [16, 32])
def test_every_gcm_header_is_the_layout_s_bytes_both_ways(key_length: int) -> None:
    """The cipher packs and reads a message's header by a struct derived from gcm_message_header: the layout builds
    the same bytes and parses them to the same fields, for the messages it seals and at the length's extremes."""
    layout, header = gcm_message_header(key_length), GcmHeader(key_length)
    sealed = bytes(GcmCipher(bytes(key_length)).seal([b"x" * (2 * GCM_PLAINTEXT_SEGMENT + 1)]))
    parsed = layout.parse(sealed[:header.size])
    assert header.size == layout.sizeof() and parsed.total_length == len(sealed)
    assert header.unpack(sealed[:header.size]) == (parsed.total_length, parsed.header_length, parsed.salt,
                                                    parsed.nonce_prefix)
    for total in (0, header.size, -1, 2**63 - 1, -(2**63)):
        salt, prefix = bytes(range(key_length)), bytes(range(7, 0, -1))
        built = layout.build({"total_length": total, "salt": salt, "nonce_prefix": prefix})
        assert header.pack(total, salt, prefix) == built
        assert header.unpack(built) == (total, header.header_length, salt, prefix)
        assert header.length_bytes(built) == built[:8]


def test_a_gcm_batch_longer_than_the_bound_is_sealed_as_messages_back_to_back_cut_inside_a_frame() -> None:
    bound = GCM_MESSAGE_SEGMENTS * GCM_PLAINTEXT_SEGMENT
    frames = [bytes([n]) * (bound // 3 + 5) for n in range(4)]  # the cut falls inside the fourth
    sealed = bytes(GcmCipher(bytes(32)).seal(frames))
    first = struct.unpack(">q", sealed[:8])[0]
    second = struct.unpack(">q", sealed[first:first + 8])[0]
    assert first == 8 + 40 + GCM_MESSAGE_SEGMENTS * 32768 and first + second == len(sealed)
    assert sealed[9:9 + 32] == sealed[first + 9:first + 9 + 32]  # one salt
    assert sealed[41:48] != sealed[first + 41:first + 48]  # a nonce prefix each
    receiver = GcmCipher(bytes(32))
    assert b"".join(bytes(receiver.open(sealed[i:i + 50_000])) for i in range(0, len(sealed), 50_000)) == b"".join(frames)
    receiver.close()


def test_a_gcm_batch_of_parts_cut_anywhere_seals_as_their_join_does() -> None:
    """Parts are laid out across segment and message bounds without joining them first: the same messages."""
    bound = GCM_MESSAGE_SEGMENTS * GCM_PLAINTEXT_SEGMENT
    sizes = [36, 4, GCM_PLAINTEXT_SEGMENT - 40, 0, GCM_PLAINTEXT_SEGMENT, 1, bound - 3 * GCM_PLAINTEXT_SEGMENT, 70_000, 5]
    parts = [memoryview(bytes([n % 251]) * size) if n % 2 else bytes([n % 251]) * size for n, size in enumerate(sizes)]
    salts = itertools.count()
    def random(n: int) -> bytes:
        return bytes([next(salts) % 2]) * n  # the same salt and first nonce prefix for both ends
    gathered, joined = GcmCipher(bytes(32), random), GcmCipher(bytes(32), random)
    for _ in range(2):
        assert bytes(gathered.seal(parts)) == bytes(joined.seal([b"".join(parts)]))


def test_ctr_seals_batches_of_small_and_large_parts_into_one_stream() -> None:
    key, iv = bytes(32), bytes(range(16))
    small, large = [b"r" * 10] * 50, [b"h" * 33, memoryview(b"p" * 16384), bytearray(b"q" * 5000)]
    sender, whole = CtrCipher(key, iv, iv), CtrCipher(key, iv, iv)
    sealed = bytes(sender.seal(small)) + bytes(sender.seal(large)) + bytes(sender.seal(small))
    assert sealed == bytes(whole.seal([b"".join(small + large + small)]))


def test_gcm_messages_of_one_direction_share_its_salt_and_never_a_nonce_prefix() -> None:
    sender, receiver = GcmCipher(bytes(16)), GcmCipher(bytes(16))
    bodies = [b"credit" * 3] * 3 + [b"x" * (GCM_PLAINTEXT_SEGMENT + 1)] + [b"credit" * 3]
    sealed = [bytes(sender.seal([body])) for body in bodies]
    headers = [message[9:9 + 16 + 7] for message in sealed]
    assert len({header[:16] for header in headers}) == 1
    assert len({header[16:] for header in headers}) == len(sealed)
    assert [bytes(receiver.open(message)) for message in sealed] == bodies
    other = GcmCipher(bytes(16))
    assert bytes(other.seal([bodies[0]]))[9:25] != headers[0][:16]


def test_a_gcm_receiver_opens_messages_from_more_salts_than_it_keeps_keys_for() -> None:
    receiver = GcmCipher(bytes(32))
    for n in range(GCM_KEYS_KEPT * 2 + 1):
        assert receiver.open(bytes(GcmCipher(bytes(32)).seal([b"%d" % n]))) == b"%d" % n
    receiver.close()


def test_an_empty_gcm_message_is_accepted_as_spark_sends_it() -> None:
    receiver = GcmCipher(bytes(16))
    assert receiver.open(struct.pack(">qB", 32, 24) + bytes(23)) == b""
    receiver.close()


def test_a_flipped_bit_in_any_gcm_byte_fails_the_tag_or_the_framing() -> None:
    key = bytes(32)
    sealed = bytes(GcmCipher(key).seal([b"record" * 10]))
    for index in itertools.chain(range(8, len(sealed), 7), [len(sealed) - 1]):
        forged = bytearray(sealed)
        forged[index] ^= 0x01
        with pytest.raises(errors.TagMismatch):
            GcmCipher(key).open(bytes(forged))


@pytest.mark.parametrize("segment", [0, 1, 2])
def test_a_flipped_bit_in_any_segment_of_a_long_gcm_message_fails_its_tag(segment: int) -> None:
    sealed = bytearray(GcmCipher(bytes(32)).seal([b"r" * (3 * GCM_PLAINTEXT_SEGMENT)]))
    sealed[8 + 40 + segment * 32768 + 5] ^= 0x01
    with pytest.raises(errors.TagMismatch, match=f"segment {segment} failed its tag"):
        GcmCipher(bytes(32)).open(bytes(sealed))


def test_a_connection_that_ends_inside_a_gcm_message_is_a_typed_error() -> None:
    key = bytes(16)
    sealed = bytes(GcmCipher(key).seal([b"abc"]))
    receiver = GcmCipher(key)
    assert receiver.open(sealed[:-1]) == b""
    with pytest.raises(errors.TagMismatch):
        receiver.close()


def test_wrong_secret_is_refused_by_the_server_and_reported_by_the_client() -> None:
    config = AuthConfig(b"secret", "app")
    answer, served = handshake(config, AuthConfig(b"other", "app"))
    assert isinstance(served, Rejected) and isinstance(served.error, errors.WrongSecret)
    assert isinstance(answer, Rejected) and isinstance(answer.error, errors.HandshakeRejected)


def test_a_server_with_another_secret_cannot_answer_a_client() -> None:
    client = ClientHandshake(AuthConfig(b"secret", "app"))
    impostor = ServerHandshake(AuthConfig(b"guess", "app"))
    forged = ClientHandshake(AuthConfig(b"guess", "app"))
    # The impostor answers its own accomplice's challenge and replays the answer to the real client.
    served = impostor.receive(forged.challenge())
    assert isinstance(served, Established)
    client.challenge()
    reply = served.reply[:9] + client.request_id.to_bytes(8, "big") + served.reply[17:]
    outcome = client.receive(reply)
    assert isinstance(outcome, Rejected) and isinstance(outcome.error, errors.WrongSecret)


def test_another_application_id_is_refused_on_both_sides() -> None:
    _, served = handshake(AuthConfig(b"secret", "app"), AuthConfig(b"secret", "other"))
    assert isinstance(served, Rejected) and isinstance(served.error, errors.AppIdMismatch)
    client = fixed_client(2)
    client.challenge()
    other = AUTH_MESSAGE.build(dict(app_id="junk", salt=bytes(16), ciphertext=bytes(60)))
    outcome = client.receive(response_frame(other))
    assert isinstance(outcome, Rejected) and isinstance(outcome.error, errors.AppIdMismatch)


def test_a_shuffle_frame_before_authentication_is_refused_at_its_type_byte() -> None:
    credit = bytes.fromhex("0000000000000025" "09" "00000018") + bytes(24)
    outcome = ServerHandshake(CONFIGS[0]).receive(credit[:9])
    assert isinstance(outcome, Rejected) and isinstance(outcome.error, errors.UnauthenticatedFrame)
    assert outcome.reply == b""


@pytest.mark.parametrize("frame", [
    response_frame(b"\x00" + CLIENT_CHALLENGE[1:], kind=TransportType.RPC_REQUEST),
    response_frame(CLIENT_CHALLENGE + b"\x00", kind=TransportType.RPC_REQUEST),
    struct.pack(">qB", 1 << 40, TransportType.RPC_REQUEST),
    struct.pack(">qB", 5, TransportType.RPC_REQUEST),
], ids=["tag byte", "trailing byte", "huge length", "short length"])
def test_a_malformed_challenge_is_refused_without_buffering_it(frame: bytes) -> None:
    outcome = ServerHandshake(CONFIGS[0]).receive(frame)
    assert isinstance(outcome, Rejected) and isinstance(outcome.error, errors.MalformedHandshake)


def test_a_client_accepts_only_the_response_to_its_own_request() -> None:
    client = fixed_client(2)
    client.challenge()
    outcome = client.receive(response_frame(SERVER_RESPONSE, request_id=REQUEST_ID + 1))
    assert isinstance(outcome, Rejected) and isinstance(outcome.error, errors.MalformedHandshake)


def test_a_connection_closed_inside_the_handshake_is_incomplete() -> None:
    client = ClientHandshake(CONFIGS[0])
    client.challenge()
    assert isinstance(client.close(), errors.HandshakeIncomplete)
    assert isinstance(ServerHandshake(CONFIGS[0]).close(), errors.HandshakeIncomplete)


@pytest.mark.parametrize("length", [16, 32, 33, 100])
def test_hkdf_equals_the_rfc_5869_implementation_of_cryptography(length: int) -> None:
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF

    from spec.auth.keys import hkdf
    for salt in (b"", b"salt" * 5):
        assert hkdf(b"ikm", salt, b"info", length) == HKDF(hashes.SHA256(), length, salt or None, b"info").derive(b"ikm")
