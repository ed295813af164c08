"""The checks of an authenticated run (``--secret-file``): the handshake guards every connection.

A writer under test must serve no stranger: one that never runs the handshake, sends a CREDIT in
clear, presents another secret or replays a recorded challenge gets no DATA, and the real reader is
served afterwards. A reader under test must not take a DATA in place of the handshake's answer, nor
an answer sealed under another secret. Spark 4.3.0 answers a replayed challenge with a fresh key pair
(the replayer cannot use the session); refusing it outright is a SHOULD, and a writer that does must not let a
forged copy of a challenge lock the genuine one out.
"""

from __future__ import annotations

from conformance.framework import CaseContext, Verdict
from conformance.shuffle.peer import Link, PeerReader, PeerWriter, connect
from conformance.shuffle.suite.helpers import (
    PEER_WRITER_ID,
    READER_ID_UNDER_TEST,
    SETTLE_S,
    STREAM_S,
    observe,
    reject_window,
)
from conformance.shuffle.suite.reader_cases import READER_WORKLOAD
from conformance.shuffle.suite.writer_cases import stream_verdict
from conformance.shuffle.targets import DEFAULT_RECORDS, DEFAULT_WRITER_WORKLOAD, ShuffleTarget
from spec.auth import AuthConfig, ClientHandshake, ServerHandshake
from spec.auth.layouts import TransportType
from spec.shuffle import codec
from spec.shuffle.checksum import payload_checksum
from spec.shuffle.messages import CreditMessage, DataMessage
from spec.shuffle.records import encode_records

WRONG_SECRET: bytes = b"not the application's secret"


def _run_auth(ctx: CaseContext) -> AuthConfig:
    auth = ctx.options.auth
    assert auth is not None, "the case requires 'auth': run with --secret-file"
    return auth


def _drained(link: Link) -> bytes:
    """Everything the implementation sent on ``link`` within :data:`SETTLE_S` (or until it closed)."""
    link.receive(SETTLE_S)
    return bytes(link.raw)


def w_silent_stranger(t: ShuffleTarget, ctx: CaseContext) -> Verdict:
    with t.writer(DEFAULT_WRITER_WORKLOAD, ctx) as impl:
        stranger = connect(ctx, impl.address, "stranger", authenticate=False)
        real = PeerReader.open(ctx, impl.address, 0, 0)
        real.until_terminated(STREAM_S)
        got = _drained(stranger)
        verdict = stream_verdict(real, DEFAULT_RECORDS, 0)
        return Verdict(verdict.passed and not got, "a connection that never runs the handshake gets nothing; the "
                       "real reader is served: " + verdict.expected,
                       verdict.actual + (f"; the silent stranger received {len(got)} bytes" if got else ""))


def w_credit_in_clear(t: ShuffleTarget, ctx: CaseContext) -> Verdict:
    with t.writer(DEFAULT_WRITER_WORKLOAD, ctx) as impl:
        stranger = connect(ctx, impl.address, "stranger", authenticate=False)
        stranger.write_unsealed(codec.encode_frame(CreditMessage(writer_id=0, reader_id=0, num_messages=1)))
        seen = observe(impl, [stranger], reject_window(ctx), lambda o: bool(o.closed))
        got = bytes(stranger.raw)
        real = PeerReader.open(ctx, impl.address, 0, 0)
        real.until_terminated(STREAM_S)
        verdict = stream_verdict(real, DEFAULT_RECORDS, 0)
        data = any(record in got for record in DEFAULT_RECORDS)
        return Verdict(verdict.passed and not data and not seen.errors,
                       "a CREDIT in clear before the handshake binds nothing and gets no DATA; the real reader is "
                       "served and the writer does not fail: " + verdict.expected,
                       f"stranger: {seen.text()}, {len(got)} bytes back; real reader: {verdict.actual}")


def w_wrong_secret(t: ShuffleTarget, ctx: CaseContext) -> Verdict:
    auth = _run_auth(ctx)
    with t.writer(DEFAULT_WRITER_WORKLOAD, ctx) as impl:
        stranger = connect(ctx, impl.address, "stranger", authenticate=False)
        wrong = AuthConfig(WRONG_SECRET, auth.app_id, auth.cipher, auth.engine_version)
        accepted = stranger.authenticate(ClientHandshake(wrong))
        real = PeerReader.open(ctx, impl.address, 0, 0)
        real.until_terminated(STREAM_S)
        verdict = stream_verdict(real, DEFAULT_RECORDS, 0)
        return Verdict(verdict.passed and not accepted,
                       "a handshake under another secret is refused; the real reader is served: " + verdict.expected,
                       f"stranger's handshake: {'accepted' if accepted else stranger.auth_error}; real reader: "
                       f"{verdict.actual}")


def _replay(t: ShuffleTarget, ctx: CaseContext, refused_required: bool) -> Verdict:
    auth = _run_auth(ctx)
    with t.writer(DEFAULT_WRITER_WORKLOAD, ctx) as impl:
        recorded = connect(ctx, impl.address, "recorded", authenticate=False)
        handshake = ClientHandshake(auth)
        challenge = handshake.challenge()
        answered = recorded.authenticate(handshake, challenge)
        recorded.close()
        replayer = connect(ctx, impl.address, "replayer", authenticate=False)
        replayer.write_unsealed(challenge)
        got = _drained(replayer)
        answer_type = got[8] if len(got) > 8 else None
        refused = answer_type == TransportType.RPC_FAILURE or (replayer.closed and answer_type is None)
        real = PeerReader.open(ctx, impl.address, 0, 0)
        real.until_terminated(STREAM_S)
        verdict = stream_verdict(real, DEFAULT_RECORDS, 0)
        leaked = any(record in got for record in DEFAULT_RECORDS)
        passed = answered and verdict.passed and not leaked and (refused or not refused_required)
        return Verdict(passed, ("a replayed challenge is refused (RpcFailure or close)" if refused_required else
                                "a replayed challenge gets no DATA") + "; the real reader is served: " + verdict.expected,
                       f"first handshake {'completed' if answered else 'failed'}; replay answered with "
                       f"{len(got)} bytes (transport type {answer_type}), connection "
                       f"{'closed' if replayer.closed else 'open'}; real reader: {verdict.actual}")


def w_forged_copy_first(t: ShuffleTarget, ctx: CaseContext) -> Verdict:
    """A stranger sends a copy of a genuine challenge with its last ciphertext byte flipped (the same salt) before the
    genuine client does: the copy is refused and the genuine challenge is still answered. A server that remembers
    salts to refuse replays may remember one only once its challenge opened under the secret; else anyone who sees
    a challenge go by can lock its client out."""
    auth = _run_auth(ctx)
    with t.writer(DEFAULT_WRITER_WORKLOAD, ctx) as impl:
        handshake = ClientHandshake(auth)
        challenge = handshake.challenge()
        forger = connect(ctx, impl.address, "forger", authenticate=False)
        forger.write_unsealed(challenge[:-1] + bytes([challenge[-1] ^ 1]))
        got = _drained(forger)
        genuine = connect(ctx, impl.address, "genuine", authenticate=False)
        answered = genuine.authenticate(handshake, challenge)
        genuine.close()
        real = PeerReader.open(ctx, impl.address, 0, 0)
        real.until_terminated(STREAM_S)
        verdict = stream_verdict(real, DEFAULT_RECORDS, 0)
        established = len(got) > 8 and got[8] == TransportType.RPC_RESPONSE
        passed = answered and not established and verdict.passed
        return Verdict(passed, "a forged copy of a challenge is refused and the genuine challenge is then answered; "
                       "the real reader is served: " + verdict.expected,
                       f"forged copy answered with {len(got)} bytes (transport type {got[8] if len(got) > 8 else None})"
                       f"; genuine challenge {'answered' if answered else 'refused: ' + str(genuine.auth_error)}; "
                       f"real reader: {verdict.actual}")


def w_replay_gets_nothing(t: ShuffleTarget, ctx: CaseContext) -> Verdict:
    return _replay(t, ctx, refused_required=False)


def w_replay_refused(t: ShuffleTarget, ctx: CaseContext) -> Verdict:
    return _replay(t, ctx, refused_required=True)


def _reader_answered_with(t: ShuffleTarget, ctx: CaseContext, answer: str) -> Verdict:
    """The reader under test connects; instead of a proper answer to its challenge the peer sends
    ``answer`` ("data": a DATA frame in clear; "wrong-secret": an answer sealed under another secret)."""
    auth = _run_auth(ctx)
    peer = PeerWriter(ctx, PEER_WRITER_ID, READER_ID_UNDER_TEST, READER_ID_UNDER_TEST + 1, authenticate=False)
    with t.reader(READER_WORKLOAD, peer.address, ctx) as impl:
        link = peer.accept()
        if answer == "data":
            payload = encode_records([b"must not be delivered"])
            link.write_unsealed(codec.encode_frame(DataMessage(seq=0, writer_id=PEER_WRITER_ID, reader_id=READER_ID_UNDER_TEST,
                                                       checksum=payload_checksum(payload), payload=payload)))
            what = "a DATA in clear instead of the handshake's answer"
        else:
            wrong = AuthConfig(WRONG_SECRET, auth.app_id, auth.cipher, auth.engine_version)
            link.authenticate(ServerHandshake(wrong))
            what = "an answer sealed under another secret"
        seen = observe(impl, [link], reject_window(ctx), lambda o: bool(o.closed or o.errors))
        passed = bool(seen.closed or seen.errors) and not seen.completed
        peer.close()
        return Verdict(passed, f"rejects {what}: closes the connection or reports an error, never completes",
                       seen.text())


def r_data_before_handshake(t: ShuffleTarget, ctx: CaseContext) -> Verdict:
    return _reader_answered_with(t, ctx, "data")


def r_wrong_secret(t: ShuffleTarget, ctx: CaseContext) -> Verdict:
    return _reader_answered_with(t, ctx, "wrong-secret")
