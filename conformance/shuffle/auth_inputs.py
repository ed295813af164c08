"""The authentication requests of the shuffle input corpus (``vectors/inputs.json``, capability ``inputs-auth``):
one end of Spark's AuthEngine handshake, its session keys and transport cipher, and the settings that ask for it.

A side's randomness is part of the request, so its answer is fixed: ``random`` is a seed, and the side's draws
(its X25519 private key, salts, IVs, request id, GCM salt and nonce prefix, in the order the spec draws them) are
the consecutive bytes of SHA-256(seed || counter) blocks. ``authServer`` feeds ``received`` (the client's bytes:
the challenge, then ciphertext) to a server under ``config`` (``replayed``: the same bytes were answered before);
``authClient`` sends its challenge and feeds ``received`` (the server's answer, then ciphertext). Either answers
the outcome (established: the reply and key id; rejected: the error and the reply; none yet: the error the end of
the connection reports), the plaintext of the ciphertext after the handshake, and ``plaintexts`` sealed back.
``authReplays`` asks a server's memory of answered challenges (``capacity`` of them, the spec's when absent) about
``salts``: ``[first, count]`` runs of salts (salt i is i as 16 bytes, big-endian), answering for each run how many it
saw for the first time: at its capacity and one past, which salt it forgot.
``authSettings`` reads ``spark.authenticate`` and its companions as Spark does. Requests are drawn by
:func:`candidate_request` from two spec ends talking, with the faults a tester would put in the bytes between them.
"""

from __future__ import annotations

import hashlib
import random
from typing import Any, Callable, Final, Mapping

from conformance.compact_bytes import compact_bytes, expand_bytes
from spec.auth.ciphers import CipherName, GcmCipher, Random, TransportCipher
from spec.auth.errors import AuthError
from spec.auth.layouts import GCM_CIPHERTEXT_SEGMENT, GCM_LENGTH_BYTES, GCM_MESSAGE_SEGMENTS, GCM_PLAINTEXT_SEGMENT, \
    GCM_TAG_LENGTH, RPC_HEADER_SIZE
from spec.auth.handshake import REPLAY_MEMORY, AuthConfig, ClientHandshake, Established, Outcome, Rejected, \
    ReplayGuard, ServerHandshake
from spec.auth.settings import auth_from_conf
from spec.errors import ProtocolError

Json = Mapping[str, Any]
FUNCTIONS: Final = ("authServer", "authClient", "authSettings", "authReplays")


def seeded(seed: str) -> Random:
    """The draws of a side whose randomness is ``seed``: consecutive bytes of SHA-256(seed || counter)."""
    pool = bytearray()
    counter = 0

    def draw(n: int) -> bytes:
        nonlocal counter
        while len(pool) < n:
            pool.extend(hashlib.sha256(bytes.fromhex(seed) + counter.to_bytes(8, "big")).digest())
            counter += 1
        out = bytes(pool[:n])
        del pool[:n]
        return out

    return draw


def refusal(error: Exception) -> dict[str, Any]:
    """A typed error as answers record it; a plain ValueError (a setting refused) by its type alone."""
    if isinstance(error, ProtocolError):
        return {"error": error.condition,
                "errorParams": {k: v for k, v in error.to_json().items() if k not in ("error", "message")}}
    return {"error": type(error).__name__, "errorParams": {}}


def config_of(obj: Json) -> AuthConfig:
    return AuthConfig(obj["secret"].encode(), obj["appId"], CipherName.parse(obj["cipher"]), int(obj["engineVersion"]))


def _settled(outcome: Outcome | None, side: ClientHandshake | ServerHandshake, request: Json) -> dict[str, Any]:
    if outcome is None:
        return {"outcome": None, **refusal(side.close())}
    if isinstance(outcome, Rejected):
        return {"outcome": "rejected", "reply": outcome.reply.hex(), **refusal(outcome.error)}
    return {"outcome": "established", "reply": outcome.reply.hex(), "keyId": outcome.keys.key_id(),
            **_session(outcome, request)}


def _session(outcome: Established, request: Json) -> dict[str, Any]:
    """The plaintext of what arrived after the handshake, then ``plaintexts`` sealed."""
    opened: list[Any] = []
    out: dict[str, Any] = {"opened": opened}
    try:
        for chunk in [outcome.rest, *map(expand_bytes, request.get("sealed", []))]:
            opened.append(shown(bytes(outcome.cipher.open(chunk))))
        outcome.cipher.close()
    except AuthError as error:
        out.update(refusal(error))
    out["sealedBack"] = [shown(bytes(outcome.cipher.seal(parts_of(p)))) for p in request.get("plaintexts", [])]
    return out


SHOWN_IN_FULL: Final = 512


def plaintext(item: str | int) -> bytes:
    """A plaintext given as hex, or as its length n: the bytes 0, 1, ..., 250, 0, 1, ... (a GCM message of several
    32 KiB segments without 64 KiB of hex in the vector)."""
    return bytes.fromhex(item) if isinstance(item, str) else (_CYCLE * (item // len(_CYCLE) + 1))[:item]


_CYCLE: Final = bytes(range(251))


def parts_of(item: str | int | list[str | int]) -> list[bytes]:
    """A batch sealed at once: one plaintext, or a list of them, the buffers a writer gathers (never joined)."""
    return [plaintext(part) for part in item] if isinstance(item, list) else [plaintext(item)]


def shown(data: bytes) -> str | dict[str, Any]:
    """Bytes as hex, or past :data:`SHOWN_IN_FULL` as their length and SHA-256."""
    return data.hex() if len(data) <= SHOWN_IN_FULL else {"length": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def replays(request: Json) -> dict[str, Any]:
    """How many salts of each run a server's replay memory saw for the first time."""
    guard = ReplayGuard(int(request["capacity"])) if "capacity" in request else ReplayGuard()
    return {"value": [sum(guard.first_time(salt.to_bytes(SALT_BYTES, "big")) for salt in range(first, first + count))
                      for first, count in request["salts"]]}


def answer_auth(request: Json) -> dict[str, Any]:
    """The spec's answer to one authentication request."""
    function = request["function"]
    if function == "authReplays":
        return replays(request)
    try:
        if function == "authSettings":
            config = auth_from_conf(request["conf"], request["appId"], request.get("secret"))
            return {"value": None if config is None else {
                "secret": config.secret.decode(), "appId": config.app_id, "cipher": config.cipher.value,
                "engineVersion": config.engine_version}}
        config = config_of(request["config"])
    except (ProtocolError, ValueError) as error:
        return refusal(error)
    draw = seeded(request["random"])
    received = [bytes.fromhex(chunk) for chunk in request["received"]]
    if function == "authClient":
        client = ClientHandshake(config, draw)
        challenge = client.challenge()
        outcome = None
        for chunk in received:
            outcome = client.receive(chunk)
        return {"challenge": challenge.hex(), **_settled(outcome, client, request)}
    guard = ReplayGuard()
    if request.get("replayed"):
        first = ServerHandshake(config, guard, seeded(request["random"] + "00"))
        for chunk in received:
            first.receive(chunk)
    server = ServerHandshake(config, guard, draw)
    outcome = None
    for chunk in received:
        outcome = server.receive(chunk)
    return _settled(outcome, server, request)


# -- the generator ----------------------------------------------------------------------------------------------

CIPHER_SPELLINGS: Final = ("AES/CTR/NoPadding", "AES/GCM/NoPadding", "aes/gcm/nopadding", " AES/CTR/NoPadding ",
                           "CTR", "gcm", "AES/CBC/NoPadding", "", "AES/GCM")


SALT_BYTES: Final = 16
"""A salt's length in an AuthMessage (what a replayed challenge repeats)."""


def _replays_request(rng: random.Random) -> dict[str, Any]:
    """A replay memory filled to its capacity, a salt short of it or one or two past, then asked about the oldest, the
    newest, the first forgotten and one never seen (a run repeated now and then): which salt a full memory forgets."""
    capacity = rng.choice((None, None, 0, 1, 2, 2, 3, 3))
    size = REPLAY_MEMORY if capacity is None else capacity
    filled = max(size + rng.choice((-1, 0, 0, 1, 1, 2)), 0)
    probes = [p for p in (0, 1, filled - 1, filled, size - 1, size) if p >= 0]
    salts = [[0, filled]] + [[rng.choice(probes), 1] for _ in range(rng.randint(1, 4))]
    if rng.random() < 0.2:
        salts.append([0, filled])
    return {"function": "authReplays", **({} if capacity is None else {"capacity": capacity}), "salts": salts}


def _config(rng: random.Random) -> dict[str, Any]:
    """Mostly a config both ends accept; now and then a blank secret, an unknown cipher or version."""
    def one(good: tuple[Any, ...], bad: tuple[Any, ...]) -> Any:
        return rng.choice(bad) if rng.random() < 0.08 else rng.choice(good)

    return {"secret": one(("s3cret", "s3cret", "other", "é"), (" ", "")),
            "appId": one(("app-1", "app-1", "app-2", "", "é"), ("app-1",)),
            "cipher": one(CIPHER_SPELLINGS[:5], CIPHER_SPELLINGS[5:]), "engineVersion": one((1, 2), (0, 3))}


def _faulted(rng: random.Random, data: bytes) -> bytes:
    """The bytes between the two ends with a fault a tester would put there: a byte flipped (in the length, the
    type, the request id, the message), one cut or added, a type or a length at its bound."""
    out = bytearray(data)
    fault = rng.choice(("flip", "flip", "cut", "extra", "type", "length", "length", "tag", "request-id", "none"))
    if not out:
        return bytes(out)
    if fault == "flip":
        at = rng.choice((0, 7, 8, 9, 16, 17, 21, 22, 25, 30, 40, 60, len(out) - 1, rng.randrange(len(out))))
        out[min(at, len(out) - 1)] ^= rng.choice((1, 0x80, 0xFF))
    elif fault == "cut":
        out = out[:rng.choice((1, 8, 9, 20, 21, len(out) - 1))]
    elif fault == "extra":
        out += bytes(rng.choice((1, 4, 16)))
    elif fault == "type" and len(out) > 8:
        out[8] = rng.choice((3, 4, 5, 9, 0, 255))
    elif fault == "length":
        out[0:8] = rng.choice((0, RPC_HEADER_SIZE - 1, RPC_HEADER_SIZE, RPC_HEADER_SIZE + 1, 20, 21, 2048, 2049,
                               65536, 65537, len(out) + 1, len(out) - 1, -1)).to_bytes(
            8, "big", signed=True)
    elif fault == "request-id" and len(out) >= 17:  # the id one above or below the one asked
        out[9:17] = ((int.from_bytes(out[9:17], "big") + rng.choice((1, -1))) % 2**64).to_bytes(8, "big")
    elif fault == "tag" and len(out) > 25:
        out[25] = rng.choice((0xFA, 0xFC, 0))
    return bytes(out)


def _chunks(rng: random.Random, data: bytes) -> list[str]:
    if rng.random() < 0.7 or len(data) < 2:
        return [data.hex()]
    cut = rng.choice((1, 8, 9, len(data) // 2, len(data) - 1))
    return [data[:cut].hex(), data[cut:].hex()]


def _plaintexts(rng: random.Random) -> list[bytes]:
    return [bytes(rng.getrandbits(8) for _ in range(rng.choice((0, 1, 15, 16, 17, 40))))
            for _ in range(rng.choice((0, 1, 2)))]


_SEGMENT: Final = GCM_PLAINTEXT_SEGMENT
LONG_PLAINTEXTS: Final = (_SEGMENT - 1, _SEGMENT, _SEGMENT + 1, 2 * _SEGMENT, 2 * _SEGMENT + 1,
                          GCM_MESSAGE_SEGMENTS * _SEGMENT, GCM_MESSAGE_SEGMENTS * _SEGMENT + 1)
"""Plaintexts at a GCM segment's and a message's bounds and one byte either side (sealed back by the side)."""


def _pieces(rng: random.Random, sealed: bytes) -> list[bytes]:
    """Ciphertext as it may arrive: whole, or in pieces cut inside its length, its header or a segment."""
    if rng.random() < 0.5 or len(sealed) < 3:
        return [sealed]
    cuts = sorted(set(rng.sample(range(1, len(sealed)), min(len(sealed) - 1, rng.choice((1, 2, 3))))))
    return [sealed[a:b] for a, b in zip([0, *cuts], [*cuts, len(sealed)])]


ZERO_BODIED: Final = (_SEGMENT + 1, 2 * _SEGMENT, 2 * _SEGMENT + 1, 3 * _SEGMENT - 1, 5 * _SEGMENT,
                       GCM_MESSAGE_SEGMENTS * _SEGMENT, GCM_MESSAGE_SEGMENTS * _SEGMENT + 1)
"""Plaintexts of several segments (and of two messages) a side is sent, their ciphertext segments zeros."""


def _keystream(sealed: bytes) -> bytes:
    """The segments of sealed messages without their tags: for sealed zeros, the keystream."""
    out = bytearray()
    position = 0
    while position < len(sealed):
        end = position + int.from_bytes(sealed[position:position + GCM_LENGTH_BYTES], "big")
        position += GCM_LENGTH_BYTES + sealed[position + GCM_LENGTH_BYTES]
        for start in range(position, end, GCM_CIPHERTEXT_SEGMENT):
            out += sealed[start:min(start + GCM_CIPHERTEXT_SEGMENT, end) - GCM_TAG_LENGTH]
        position = end
    return bytes(out)


def _sender(configs: tuple[Json, Json], seeds: list[str], sent: bytes, got: bytes, side: str) -> TransportCipher:
    """The cipher of the end that seals what ``side`` is sent, established again from the same bytes and seeds: a
    twin of the first, in the same state."""
    client = ClientHandshake(config_of(configs[0]), seeded(seeds[1]))
    client.challenge()
    answered = ServerHandshake(config_of(configs[1]), ReplayGuard(), seeded(seeds[0])).receive(sent)
    settled = client.receive(got)
    assert isinstance(answered, Established) and isinstance(settled, Established)
    return settled.cipher if side == "authServer" else answered.cipher


FOREIGN_APP_IDS: Final = ("app-0", "app-2", "app-10", "app-", "", "App-1", "app-1 ")
"""Application ids either side of the configured ones ('app-1', 'app-2', '', 'é') in every order."""


def _foreign_answer(rng: random.Random, configs: tuple[Json, Json], seeds: list[str]) -> Outcome | None:
    """The server's answer to the same client (same draws, so the same request id) under another application id:
    a response whose AuthMessage names an application the client is not."""
    app_id = rng.choice([a for a in FOREIGN_APP_IDS if a != configs[0]["appId"]])
    twin = ClientHandshake(config_of({**configs[0], "appId": app_id}), seeded(seeds[1]))
    return ServerHandshake(config_of({**configs[1], "appId": app_id}), ReplayGuard(), seeded(seeds[0])).receive(
        twin.challenge())


def _exchange(rng: random.Random) -> dict[str, Any]:
    """Two spec ends talking under (nearly) the same config, the bytes of one end's side faulted now and then."""
    client_config = _config(rng)
    server_config = dict(client_config) if rng.random() < 0.6 else {**client_config, **{
        k: v for k, v in _config(rng).items() if rng.random() < 0.5}}
    seeds = [f"{rng.getrandbits(64):016x}" for _ in range(2)]
    side = rng.choice(("authServer", "authClient"))
    request: dict[str, Any] = {"function": side, "config": server_config if side == "authServer" else client_config,
                               "random": seeds[0] if side == "authServer" else seeds[1]}
    try:
        client = ClientHandshake(config_of(client_config), seeded(seeds[1]))
        server = ServerHandshake(config_of(server_config), ReplayGuard(), seeded(seeds[0]))
    except (ProtocolError, ValueError):
        request["received"] = [bytes(rng.getrandbits(8) for _ in range(rng.choice((0, 9, 30)))).hex()]
        return request
    challenge = client.challenge()
    faulty = rng.random() < 0.5
    sent = _faulted(rng, challenge) if faulty and side == "authServer" else challenge
    answered = server.receive(sent)
    if side == "authClient" and rng.random() < 0.15:
        answered = _foreign_answer(rng, (client_config, server_config), seeds)
    reply = answered.reply if answered is not None else b""
    got = _faulted(rng, reply) if faulty and side == "authClient" else reply
    settled = client.receive(got) if got else None
    plaintexts = _plaintexts(rng)
    sealed: list[bytes] = []
    if isinstance(answered, Established) and isinstance(settled, Established):
        sender = settled.cipher if side == "authServer" else answered.cipher
        sealed = [bytes(sender.seal([p])) for p in plaintexts]
        if isinstance(sender, GcmCipher) and rng.random() < 0.7:  # several segments, ciphertext zeros
            twin = _sender((client_config, server_config), seeds, sent, got, side)
            for p in plaintexts:
                twin.seal([p])
            sealed.append(bytes(sender.seal([_keystream(bytes(twin.seal([bytes(rng.choice(ZERO_BODIED))])))])))
        if sealed and rng.random() < 0.3:
            sealed[-1] = _faulted(rng, sealed[-1])
        sealed = [piece for whole in sealed for piece in _pieces(rng, whole)]
    if side == "authServer":
        request["received"] = _chunks(rng, sent + (sealed[0] if sealed and len(sealed[0]) <= SHOWN_IN_FULL
                                                    and rng.random() < 0.3 else b""))
        request["replayed"] = rng.random() < 0.1
    else:
        request["received"] = _chunks(rng, got)
    request["sealed"] = [compact_bytes(s) for s in sealed]
    request["plaintexts"] = [p.hex() for p in _plaintexts(rng)] + (
        [rng.choice(LONG_PLAINTEXTS)] if rng.random() < 0.15 else [])
    return request


GCM_EDGES: Final = (1, _SEGMENT - 1, _SEGMENT, _SEGMENT + 1, 2 * _SEGMENT - 1, 2 * _SEGMENT, 2 * _SEGMENT + 1,
                    3 * _SEGMENT, GCM_MESSAGE_SEGMENTS * _SEGMENT, GCM_MESSAGE_SEGMENTS * _SEGMENT + 1)
"""Plaintexts ending at a GCM segment's or message's bound, one byte before and one past (one segment; two; three,
so that whole segments precede the last; a full message; two messages back to back)."""
GCM_PART_SIZES: Final = (0, 1, 2, _SEGMENT - 2, _SEGMENT - 1, _SEGMENT, _SEGMENT + 1, 2 * _SEGMENT,
                         (GCM_MESSAGE_SEGMENTS - 1) * _SEGMENT, GCM_MESSAGE_SEGMENTS * _SEGMENT - 1)
"""Buffers of a gathered batch, so that a buffer ends at a segment's or a message's bound, one byte before or past."""
GCM_FAULTS: Final = ("none", "none", "none", "tag-first", "tag-last", "truncated", "length+1", "length-1",
                     "header-byte", "short-last", "empty-first", "impossible")


def _gcm_fault(rng: random.Random, message: bytearray, fault: str) -> bytearray:
    """One fault in the first sealed message: a tag flipped in its first or its last segment, its length field one
    off, its header length byte wrong, its last segment cut to 15, 16 or 17 bytes, an empty message (a header
    alone) before it, an impossible length (shorter than the header)."""
    total, head = int.from_bytes(message[:GCM_LENGTH_BYTES], "big"), GCM_LENGTH_BYTES + message[GCM_LENGTH_BYTES]
    if fault == "tag-first":
        message[head + min(GCM_CIPHERTEXT_SEGMENT, total - head) - 1] ^= 1
    elif fault == "tag-last":
        message[total - 1] ^= 1
    elif fault in ("length+1", "length-1", "impossible"):
        length = {"length+1": total + 1, "length-1": total - 1, "impossible": head - 1}[fault]
        message[:GCM_LENGTH_BYTES] = length.to_bytes(GCM_LENGTH_BYTES, "big")
    elif fault == "header-byte":
        message[GCM_LENGTH_BYTES] ^= rng.choice((1, 0x30))
    elif fault == "short-last":
        whole = (total - head - 1) // GCM_CIPHERTEXT_SEGMENT
        cut = min(head + whole * GCM_CIPHERTEXT_SEGMENT + rng.choice((GCM_TAG_LENGTH - 1, GCM_TAG_LENGTH,
                                                                      GCM_TAG_LENGTH + 1)), total)
        message = message[:cut] + message[total:]
        message[:GCM_LENGTH_BYTES] = cut.to_bytes(GCM_LENGTH_BYTES, "big")
    elif fault == "empty-first":
        message = bytearray(head.to_bytes(GCM_LENGTH_BYTES, "big")) + message[GCM_LENGTH_BYTES:head] + message
    return message


def _gcm_cuts(rng: random.Random, stream: bytes) -> list[bytes]:
    """The sealed bytes whole, or cut once or twice at a segment's bound, one byte before or past (a header's, the
    first segments', the first message's end)."""
    if rng.random() < 0.3:
        return [stream]
    head = GCM_LENGTH_BYTES + stream[GCM_LENGTH_BYTES]
    first = int.from_bytes(stream[:GCM_LENGTH_BYTES], "big")
    bounds = (1, GCM_LENGTH_BYTES, head, head + GCM_CIPHERTEXT_SEGMENT, head + 2 * GCM_CIPHERTEXT_SEGMENT, first)
    cuts = sorted({min(max(rng.choice(bounds) + rng.choice((-1, 0, 1)), 1), len(stream) - 1)
                   for _ in range(rng.choice((1, 1, 2)))})
    return [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)]) if b > a]


def _gcm_edges(rng: random.Random) -> dict[str, Any]:
    """Both ends under GCM; the side under test is sent messages at every segment and message bound (their
    ciphertext segments zeros, so a vector stays short), with at most one fault, cut at a bound or a byte either
    side; and seals back batches of buffers ending at such bounds."""
    config = {"secret": "s3cret", "appId": "app-1", "cipher": rng.choice(("AES/GCM/NoPadding", "gcm")),
              "engineVersion": rng.choice((1, 2))}
    seeds = [f"{rng.getrandbits(64):016x}" for _ in range(2)]
    side = rng.choice(("authServer", "authClient"))
    client = ClientHandshake(config_of(config), seeded(seeds[1]))
    sent = client.challenge()
    answered = ServerHandshake(config_of(config), ReplayGuard(), seeded(seeds[0])).receive(sent)
    assert isinstance(answered, Established)
    settled = client.receive(answered.reply)
    assert isinstance(settled, Established)
    sender = settled.cipher if side == "authServer" else answered.cipher
    twin = _sender((config, config), seeds, sent, answered.reply, side)
    messages = [bytearray(sender.seal([_keystream(bytes(twin.seal([bytes(rng.choice(GCM_EDGES))])))]))
                for _ in range(rng.choice((1, 1, 2)))]
    messages[0] = _gcm_fault(rng, messages[0], rng.choice(GCM_FAULTS))
    stream = b"".join(messages)
    if rng.random() < 0.1:
        stream = stream[:len(stream) - rng.choice((1, GCM_TAG_LENGTH, GCM_TAG_LENGTH + 1))]  # the last segment cut
    batches: list[Any] = [[rng.choice(GCM_PART_SIZES) for _ in range(rng.choice((1, 2, 2, 3)))]
                          for _ in range(rng.choice((0, 1, 1, 2)))]
    return {"function": side, "config": config, "random": seeds[0] if side == "authServer" else seeds[1],
            "received": [(sent if side == "authServer" else answered.reply).hex()],
            "sealed": [compact_bytes(chunk) for chunk in _gcm_cuts(rng, stream)], "plaintexts": batches}


def _settings(rng: random.Random) -> dict[str, Any]:
    conf: dict[str, str] = {}
    if rng.random() < 0.9:
        conf["spark.authenticate"] = rng.choice(("true", "TRUE", " true ", "false", "yes", "", "True"))
    if rng.random() < 0.5:
        conf["spark.authenticate.secret"] = rng.choice(("s", " ", "", "\t", " s "))
    if rng.random() < 0.4:
        conf["spark.network.crypto.cipher"] = rng.choice(CIPHER_SPELLINGS)
    if rng.random() < 0.4:
        conf["spark.network.crypto.authEngineVersion"] = rng.choice(("1", "2", " 2 ", "0", "3", "", "02", "v2"))
    return {"function": "authSettings", "conf": conf, "appId": "app-1",
            "secret": rng.choice(("generated", None, "", " "))}


SHAPES: Final[tuple[tuple[Callable[[random.Random], dict[str, Any]], int], ...]] = (
    (_exchange, 11), (_replays_request, 1), (_settings, 4), (_gcm_edges, 8))
"""Each authentication request shape with its weight among all the inputs' shapes."""
