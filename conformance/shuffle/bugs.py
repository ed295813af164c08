"""Bugs planted by ``python -m conformance sensitivity --suite shuffle``, one at a time.

Each is a realistic mistake in this project's implementation (the runtime of ``reference/shuffle``
and the spec machines it drives, in a private copy), judged through ``exec:`` exactly as an
outside implementation would be. Grouped by the rule family it breaks. Entries with ``equivalent``
set cannot be told from the correct code by any case; the reason is argued there and in
docs/conformance.md.
"""

from __future__ import annotations

from pathlib import Path

from conformance.mutation import Mutant, exec_target_in
from conformance.runner import CONFORMANCE_APP_ID
from spec.auth import AuthConfig, CipherName


def target_for(copy: Path) -> str:
    """The copy's runtime as an ``exec:`` implementation."""
    return exec_target_in(copy, "-m conformance.shuffle.reference_target")


AUTH_RUNS: tuple[AuthConfig, ...] = tuple(
    AuthConfig(b"the sensitivity run's secret", CONFORMANCE_APP_ID, cipher, version)
    for cipher, version in ((CipherName.CTR, 1), (CipherName.GCM, 2)))
"""After the plain run, the ``auth/`` cases run again authenticated: with Spark's default cipher and engine
version, then with the other ones, so a bug in ``spec/auth`` (the handshake, the keys, either cipher) is planted
where a case can see it."""


def _b(name: str, file: str, search: str, replace: str, description: str, equivalent: str = "") -> Mutant:
    return Mutant(name, f"spec/shuffle/{file}", search, replace, description, equivalent)


BUGS: tuple[Mutant, ...] = (
    # -- framing --------------------------------------------------------------------------------
    _b("framing-topped-up-header-loses-byte", "framing.py",
       "            self._pending += view[:taken]\n",
       "            self._pending += view[:taken][:-1]\n",
       "a frame header split across reads loses a byte when it is topped up"),
    _b("framing-take-overcounts", "framing.py",
       "take = min(missing, len(view) - taken)",
       "take = min(missing, len(view))",
       "completing a split frame skips the start of the next coalesced frame"),
    _b("framing-close-ignores-header", "framing.py",
       "        if self._pending:\n            needed",
       "        if self._body_length is not None and self._pending:\n            needed",
       "a connection ending inside a frame header is taken as a clean end",
       equivalent="before TERMINATION_CONTROL the close fails the reader either way (a close before the end); "
                  "after it Spark's TransportFrameDecoder.channelInactive drops a partial header silently, so no "
                  "MUST can require a report"),
    _b("codec-data-size-short-accepted", "codec.py",
       "if data_size != available - needed:",
       "if data_size > available - needed:",
       "a DATA whose dataSize is smaller than the bytes that follow is accepted"),
    _b("codec-data-size-long-accepted", "codec.py",
       "if data_size != available - needed:",
       "if data_size < available - needed:",
       "a DATA whose dataSize is larger than the bytes that follow is accepted"),
    _b("codec-trailing-bytes", "codec.py",
       "    if available > needed:\n",
       "    if available > needed and c.kind is MessageType.CREDIT_CONTROL_MESSAGE:\n",
       "trailing bytes after a TERMINATION_CONTROL or TERMINATION_ACK body are accepted",
       equivalent="Spark 4.3.0 ignores them too, and the golden vectors rate both answers acceptable "
                  "(SparkIgnoresTrailingBytes): no case may judge them (framing/reader-trailing-bytes is INFO)"),
    _b("registry-ack-row-as-termination", "registry.py",
       "Sender.READER,\n        WriterChannelEvent.ACK, ReaderChannelEvent.UNEXPECTED),",
       "Sender.READER,\n        WriterChannelEvent.UNEXPECTED, ReaderChannelEvent.TERMINATION),",
       "the TERMINATION_ACK row classifies an ack as TERMINATION_CONTROL's row does (a copy of the row above it), "
       "so the writer takes its acks for a terminator it never receives"),
    _b("codec-transport-type-unchecked", "codec.py",
       "        raise errors.UnsupportedTransportMessage(message_type, ONE_WAY_MESSAGE)\n",
       "        pass\n",
       "frames of another transport message type than OneWayMessage are accepted"),
    # -- sequence -------------------------------------------------------------------------------
    _b("reader-seq-gap-accepted", "reader.py",
       "        if seq != expected:",
       "        if seq < expected:",
       "the reader accepts a DATA that skips a sequence number"),
    _b("reader-seq-repeat-accepted", "reader.py",
       "        if seq != expected:",
       "        if seq > expected:",
       "the reader accepts a repeated sequence number"),
    _b("writer-termination-reuses-seq", "writer.py",
       "            ch.last_seq += 1\n            self._emit(ch, TerminationControlMessage",
       "            self._emit(ch, TerminationControlMessage",
       "TERMINATION_CONTROL reuses the last DATA seq instead of taking the next one"),
    _b("writer-accepts-newer-ack", "writer.py",
       "if ack.seq != channel.last_seq:",
       "if ack.seq < channel.last_seq:",
       "a TERMINATION_ACK with a seq above the terminator's is accepted"),
    _b("reader-ack-echoes-data-seq", "reader.py",
       "                ch.last_seq = message.seq\n",
       "",
       "TERMINATION_ACK echoes the last DATA seq, not the terminator's"),
    # -- checksum -------------------------------------------------------------------------------
    _b("reader-credit-before-checksum", "reader.py",
       "            if calculated != checksum:\n",
       "            if calculated != checksum:\n                self._send(ch.credit)\n",
       "the reader sends the CREDIT for a DATA before it finds the checksum wrong"),
    _b("reader-zero-checksum-trusted", "reader.py",
       "if calculated != checksum:",
       "if calculated != checksum and checksum != 0:",
       "a DATA with checksum 0 is taken as unchecked although checksums are enabled"),
    _b("writer-checksum-inverted", "writer.py",
       "payload_checksum(payload) if self.settings.checksum_enabled else 0",
       "0 if self.settings.checksum_enabled else payload_checksum(payload)",
       "the checksum setting is read the wrong way round"),
    # -- credits and permits --------------------------------------------------------------------
    _b("writer-data-holds-payload-permits", "writer.py",
       "self._in_flight[(channel.reader_id, channel.last_seq)] = self.settings.network_buffer_size",
       "self._in_flight[(channel.reader_id, channel.last_seq)] = len(payload)",
       "a DATA holds len(payload) permits instead of one networkBufferSize buffer"),
    _b("writer-no-flush-when-blocked", "writer.py",
       "            for ch in self.channels:\n                self._flush(ch)\n            self._held = (reader_id, record)",
       "            self._held = (reader_id, record)",
       "a blocked producer does not flush its other open buffers first"),
    _b("writer-permit-boundary", "writer.py",
       "if self.permits_available < n:",
       "if self.permits_available <= n:",
       "the last buffer that exactly fits the permits is refused"),
    _b("writer-permits-not-returned", "writer.py",
       "self.permits_available += permits",
       "self.permits_available += permits // 2",
       "a completed socket write returns only part of its permits"),
    _b("writer-leave-keeps-open-buffer-permits", "writer.py",
       "            channel.drop_buffer()\n            self.permits_available += self.settings.network_buffer_size\n",
       "            channel.drop_buffer()\n",
       "a reader that leaves with an open buffer: the buffer is dropped but its networkBufferSize permits never "
       "return (the ninth blind round's survivor; the walks of the trace input readerLeft judge it)"),
    _b("writer-capacity-floor", "writer.py",
       "capacity = max(num_readers * n * 2,",
       "capacity = max(num_readers * n,",
       "the permit floor is one buffer per reader instead of two"),
    _b("reader-no-credit-after-data", "reader.py",
       "        self._send(ch.credit)\n        self._surface(Deliver(",
       "        self._surface(Deliver(",
       "no CREDIT follows a DATA"),
    _b("reader-ignores-named-reader", "reader.py",
       "if names_the_pair and (named_reader_id != self.reader_id\n                               or (",
       "if names_the_pair and ((",
       "DATA addressed to another reader is accepted"),
    # -- flush ----------------------------------------------------------------------------------
    _b("writer-flush-above-threshold", "writer.py",
       "if size >= self._flush_at or",
       "if size > self._flush_at or",
       "a buffer of exactly 90% of networkBufferSize is not flushed"),
    _b("writer-flush-at-full-buffer", "writer.py",
       "return settings.network_buffer_size * 9 // 10",
       "return settings.network_buffer_size",
       "the writer flushes at networkBufferSize instead of 90% of it"),
    _b("writer-threshold-rounding", "writer.py",
       "return settings.network_buffer_size * 9 // 10",
       "return settings.network_buffer_size // 10 * 9",
       "the 90% flush threshold rounds before multiplying"),
    # -- quota and pause ------------------------------------------------------------------------
    _b("reader-pause-below-zero", "reader.py",
       "if ch.remaining <= 0 and not ch.paused:",
       "if ch.remaining < 0 and not ch.paused:",
       "the reader pauses only below zero quota, not at exactly zero"),
    _b("reader-quota-payload-only", "reader.py",
       "size = DATA_HEADER_LENGTH + len(payload)",
       "size = len(payload)",
       "the quota is charged the payload only, not the whole body"),
    _b("reader-resume-at-zero", "reader.py",
       "if ch.paused and ch.remaining > 0:",
       "if ch.paused and ch.remaining >= 0:",
       "a paused reader resumes with zero quota left"),
    _b("reader-quota-rounds-up", "reader.py",
       "return max(settings.reader_max_memory // num_writers, 1)",
       "return max(-(-settings.reader_max_memory // num_writers), 1)",
       "the per-writer quota rounds up, so the writers together may exceed readerMaxMemory"),
    # -- termination ----------------------------------------------------------------------------
    _b("writer-completes-on-first-ack", "writer.py",
       "if self.state is WriterState.FINISHING and all(ch.state in _ENDED",
       "if self.state is WriterState.FINISHING and any(ch.state in _ENDED",
       "the writer completes when one reader acknowledged, not all"),
    _b("transitions-terminated-close-fails", "transitions.py",
       "(WriterChannelState.TERMINATED, WriterChannelEvent.CLOSE): WriterChannelState.TERMINATED,",
       "(WriterChannelState.TERMINATED, WriterChannelEvent.CLOSE): WriterChannelState.FAILED,",
       "a reader closing after its ack fails the writer"),
    _b("transitions-repeated-ack-fails", "transitions.py",
       "    (WriterChannelState.TERMINATED, WriterChannelEvent.ACK): WriterChannelState.TERMINATED,\n",
       "",
       "a repeated matching TERMINATION_ACK fails the writer"),
    _b("transitions-late-credit-fails", "transitions.py",
       "    (WriterChannelState.TERMINATING, WriterChannelEvent.CREDIT): WriterChannelState.TERMINATING,\n",
       "",
       "a CREDIT arriving after finish is rejected"),
    _b("transitions-bad-checksum-error", "transitions.py",
       "(ReaderChannelState.OPEN, ReaderChannelEvent.BAD_CHECKSUM): errors.ChecksumVerificationFailed,",
       "(ReaderChannelState.OPEN, ReaderChannelEvent.BAD_CHECKSUM): errors.IncorrectSequenceNumber,",
       "a bad checksum is reported as a sequence error"),
    # -- timeouts -------------------------------------------------------------------------------
    _b("writer-ack-deadline-ignored", "writer.py",
       "if self._ack_deadline is not None and now >= self._ack_deadline:",
       "if self._ack_deadline is not None and now >= self._ack_deadline * 1000:",
       "the termination-ack timeout is read in the wrong unit (never fires)"),
    _b("writer-bind-deadline-ignored", "writer.py",
       "if self._bind_deadline is not None and now >= self._bind_deadline:",
       "if self._bind_deadline is not None and now >= self._bind_deadline * 1000:",
       "writerConnectionTimeout is read in the wrong unit (never fires)"),
    # -- settings -------------------------------------------------------------------------------
    _b("settings-int-accepts-2-31", "settings.py",
       "SettingKind.INT: (-(2**31), 2**31 - 1)",
       "SettingKind.INT: (-(2**31), 2**31)",
       "an int setting of 2^31 is accepted"),
    _b("settings-zero-positive", "settings.py",
       "    return value > 0\n",
       "    return value >= 0\n",
       "networkBufferSize and writerMaxMemory of 0 are accepted"),
    _b("settings-timeout-any-negative", "settings.py",
       "lambda v: v == -1 or v > 0,",
       "lambda v: v >= -1,",
       "a writerConnectionTimeout of 0 is accepted"),
    _b("settings-negative-time-floored", "settings.py",
       "    millis = abs(number) * multiplier // divisor\n    return min(millis, 2**63 - 1) * (-1 if number < 0 else 1)",
       "    millis = number * multiplier // divisor\n    return max(min(millis, 2**63 - 1), -(2**63))",
       "a negative time in a finer unit than milliseconds rounds down, not toward zero as TimeUnit does "
       "(-1500us is -2 ms, not -1)"),
    # -- the JSON form of messages ----------------------------------------------------------------
    _b("jsonform-upper-hex-prefix-kept", "jsonform.py",
       'if compact[:2].lower() == "0x":',
       'if compact[:2] == "0x":',
       "a hex text's upper-case 0X prefix is not stripped, so the payload is refused as not hex"),
    # -- typed errors -------------------------------------------------------------------------------
    _b("errors-closed-before-termination-sides-swapped", "errors.py",
       '            if role == "writer"\n            else f"Connection from streaming shuffle reader',
       '            if role == "reader"\n            else f"Connection from streaming shuffle reader',
       "a connection closed before termination reads as the other side's: the writer's text for a reader and "
       "the reader's for a writer"),
    # -- a failed attempt's root cause ------------------------------------------------------------------
    _b("root-cause-writer-unreachable-own", "root_cause.py",
       "errors.SendFailed, errors.WriterUnreachable,\n",
       "errors.SendFailed,\n",
       "a reader task that failed with WriterUnreachable is not taken for a peer's symptom: it ends with its own "
       "error even when another task's reported failure is seen (the ninth blind round's survivor)"),
    # -- authentication (spec/auth; judged by the auth/ cases of the authenticated runs) --------------
    Mutant("auth-ivs-swapped", "spec/auth/keys.py",
           "    return SessionKeys(key, hkdf(shared, transcript, OUTPUT_IV_INFO, IV_LENGTH),\n"
           "                       hkdf(shared, transcript, INPUT_IV_INFO, IV_LENGTH))",
           "    return SessionKeys(key, hkdf(shared, transcript, INPUT_IV_INFO, IV_LENGTH),\n"
           "                       hkdf(shared, transcript, OUTPUT_IV_INFO, IV_LENGTH))",
           "the session's client and server IVs are swapped (HKDF infos outputIv and inputIv): AES-CTR streams "
           "do not decrypt at the peer"),
    Mutant("auth-gcm-last-segment-unmarked", "spec/auth/ciphers.py",
           "    return _NONCE.pack(prefix, segment, last)",
           "    return _NONCE.pack(prefix, segment, False)",
           "an AES-GCM segment's nonce never marks the message's last segment: Spark's receiver (and the peer) "
           "cannot open it"),
    Mutant("auth-replay-memory-forgets-newest", "spec/auth/handshake.py",
           "self._seen.popitem(last=False)", "self._seen.popitem(last=True)",
           "a server's full memory of answered challenges forgets the salt it just recorded instead of its oldest: "
           "that challenge can be replayed at once"),
    # -- a server's bounds on connections (spec/admission.py, spec/departure.py) -----------------------
    Mutant("admission-newcomer-evicts-itself", "spec/admission.py",
           "p not in self._proven and p != peer", "p not in self._proven",
           "a stranger arriving at a full table where every other stranger proved the secret evicts itself"),
    Mutant("departure-linger-restarted", "spec/departure.py",
           "self._due.setdefault(peer, after(now, self.linger_s))", "self._due[peer] = after(now, self.linger_s)",
           "a departing connection that asks to leave again restarts its linger: a peer that never reads holds "
           "the server past linger_s"),
)

SMOKE: tuple[str, ...] = ("writer-termination-reuses-seq", "writer-checksum-inverted")
"""Caught by early cases: the smoke test runs these through the command in seconds."""
