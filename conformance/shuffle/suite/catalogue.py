"""The shuffle suite's cases: ids, levels, roles, requirements and the check each runs."""

from __future__ import annotations

import functools
import struct
from typing import Final

from conformance.framework import Case, Level, Suite
from conformance.shuffle.suite.auth_cases import (
    r_data_before_handshake,
    r_wrong_secret,
    w_credit_in_clear,
    w_forged_copy_first,
    w_replay_gets_nothing,
    w_replay_refused,
    w_silent_stranger,
    w_wrong_secret,
)
from conformance.shuffle.targets import (
    ACK_TIMEOUT_KEY,
    AUTH,
    READER,
    REPORTS,
    SETTINGS,
    SLOW_CONSUMER,
    TARGET_HELP,
    WORKLOAD,
    WRITER,
    open_target,
    starts_a_program_per_case,
)
from conformance.shuffle.suite.helpers import (
    CHANNEL_IDS,
    CHECKSUM,
    CheckFn,
    EXCLUSIVE_BINDING,
    HTTP_GARBAGE,
    MISMATCHED_IDS,
    OVERSIZED_HEADER,
    PEER_WRITER_ID,
    READER_ID_UNDER_TEST,
    SEQUENCE,
    SHORT_FRAME,
    UNKNOWN_TYPE_BODY,
    one_way_frame,
)
from conformance.shuffle.suite.reader_cases import (
    BATCHES,
    ack_echo,
    corrupt,
    data_for_another_reader,
    data_for_another_writer,
    duplicate,
    duplicate_then_terminate,
    first_not_zero,
    gap,
    is_ack,
    is_credit,
    is_credit_or_ack,
    missing_at_end,
    other_transport_type,
    OTHER_TRANSPORT_TYPE,
    FRAME_BOUND_WORKLOAD,
    one_past_the_bound,
    r_accepts_largest_frame,
    r_credit_first,
    r_credits_each_data,
    r_later_job_ids,
    r_fast_writer,
    r_frames,
    r_split_and_coalesced,
    r_quota_boundaries,
    r_quota_per_writer,
    r_ends_after_every_writer,
    r_trailing_bytes,
    r_writer_closes_early,
    raw_bytes,
    reader_fault,
    r_first_rule_of_two,
    size_mismatch,
    size_short,
    zero_checksum,
    UNCHECKED_READER_WORKLOAD,
)
from conformance.shuffle.suite.writer_cases import (
    w_ack_deadline,
    w_bind_by_reader_id,
    w_blocked_flushes,
    w_checksum_disabled,
    w_close_after_ack,
    w_connection_timeout,
    w_crc32c,
    w_delivery,
    w_later_job_ids,
    w_duplicate_ack,
    w_empty_stream,
    w_frames,
    w_permits_to_zero,
    w_reader_closes_early,
    w_second_binding,
    w_seq_from_zero,
    w_slow_reader,
    w_terminates_once,
    w_unknown_reader,
    w_waits_for_credit,
    w_waits_for_every_ack,
    w_whole_records,
    refuses,
    refuses_each,
    w_flush_threshold,
    writer_fault,
    wrong_ack,
)
from conformance.shuffle.suite.deadline_cases import CONNECT_TIMEOUT, at_its_instant
from conformance.shuffle.suite.derived_axes import DERIVED_AXES
from conformance.shuffle.suite.derived_cases import DERIVED, derived
from conformance.shuffle.suite.input_cases import ADMISSION_FUNCTIONS, AUTH_FUNCTIONS, CODEC_FUNCTIONS, \
    SETTINGS_FUNCTIONS, TASK_FUNCTIONS, input_corpus
from conformance.shuffle.suite.walk_cases import walk_corpus
from conformance.shuffle.vector_exec import INPUTS, INPUTS_ADMISSION, INPUTS_AUTH, INPUTS_TASKS, TRACES
from spec.shuffle import codec
from spec.shuffle.messages import CreditMessage, DataMessage
from spec.shuffle.settings import RequirementFailed, TypeMismatch

REQUIREMENT, TYPE_MISMATCH = RequirementFailed.condition, TypeMismatch.condition
SMALLEST_VIOLATIONS: Final = (
    ("network_buffer_size", "32k", TYPE_MISMATCH), ("writer_max_memory", "-1", REQUIREMENT),
    ("writer_connection_timeout_ms", "-1s", REQUIREMENT), ("writer_connection_timeout_ms", "1sec", TYPE_MISMATCH),
    ("checksum_enabled", "yes", TYPE_MISMATCH), ("network_buffer_max_wait_time_ms", "50ms", TYPE_MISMATCH),
)
"""Per setting, the smallest values of the wrong type or against the requirement (docs/spec/shuffle.md#settings)."""
ONE_PAST_EACH_EDGE: Final = (
    ("reader_max_memory", str(-(2**31) - 1), TYPE_MISMATCH),
    ("network_buffer_max_wait_time_ms", str(2**63), TYPE_MISMATCH),
    ("network_buffer_max_wait_time_ms", str(-(2**63) - 1), TYPE_MISMATCH),
    ("writer_connection_timeout_ms", "-2", REQUIREMENT), ("writer_connection_timeout_ms", str(2**63), TYPE_MISMATCH),
)
"""Per edge of a setting's domain not yet refused by another case, the value one past it (the int's and the
long's low and high ends, the time's -1 and largest long)."""


def _c(case_id: str, level: Level, role: str, requirement: str, check: CheckFn, *requires: str,
       spec_ref: str = "") -> Case:
    return Case(f"shuffle/{case_id}", level, role, requirement, check, frozenset({role, *requires}), spec_ref)


MUST, SHOULD, INFO = Level.MUST, Level.SHOULD, Level.INFO
W, R = WRITER, READER
_data_after_fault = functools.partial(reader_fault, forbidden=is_credit, forbidden_text="CREDIT for it")

CASES: Final = (
    # handshake
    _c("handshake/writer-waits-for-credit", MUST, W, "A writer sends nothing on a connection before its first "
       "CREDIT; data produced before the bind is then sent in order from seq 0", w_waits_for_credit),
    _c("handshake/writer-binds-by-reader-id", MUST, W, "A writer binds a connection to the reader id its first "
       "CREDIT names, whatever the order readers connect in", w_bind_by_reader_id, WORKLOAD),
    _c("handshake/writer-rejects-unknown-reader", MUST, W, "A writer rejects a CREDIT naming a reader id outside "
       "0..R-1", w_unknown_reader),
    _c("handshake/writer-rejects-second-binding", SHOULD, W, "A writer rejects a CREDIT for a reader bound to "
       "another live connection (READER_ALREADY_BOUND; Spark 4.3.0 ignores it)", w_second_binding,
       spec_ref=EXCLUSIVE_BINDING),
    _c("handshake/reader-credit-first", MUST, R, "A reader's first message on a new connection is CREDIT(writer, "
       "reader, 1) with seq 0", r_credit_first),
    _c("handshake/writer-later-job-ids", MUST, W, "In a later job a writer accepts a handshake CREDIT naming "
       "its directory id (Spark: its map task id), names its partition id in DATA and TERMINATION_CONTROL, "
       "and completes on the ack echoing it", w_later_job_ids, spec_ref=CHANNEL_IDS),
    _c("handshake/reader-later-job-ids", MUST, R, "In a later job a reader names its writer by the directory "
       "id (Spark: the map task id) in the handshake CREDIT and echoes the partition id the writer's DATA and "
       "TERMINATION_CONTROL name in every later CREDIT and the ack", r_later_job_ids, spec_ref=CHANNEL_IDS),
    # data
    _c("data/writer-delivers-in-order", MUST, W, "A writer delivers every record for a reader exactly once, in "
       "order, in DATA naming its writer id and the reader id", w_delivery),
    _c("data/writer-whole-records", MUST, W, "A writer never splits a record across DATA messages, also for "
       "empty records and records larger than networkBufferSize", w_whole_records, WORKLOAD),
    _c("data/writer-flush-threshold", MUST, W, "A writer flushes a buffer when it reaches 90% of "
       "networkBufferSize (rounded down), not a byte later or earlier", w_flush_threshold, WORKLOAD),
    _c("data/writer-empty-stream", MUST, W, "A writer with no records for a reader sends only "
       "TERMINATION_CONTROL with seq 0", w_empty_stream, WORKLOAD),
    _c("data/reader-rejects-data-for-another-pair", SHOULD, R, "A reader rejects a DATA naming another writer than "
       "its connection's, and does not credit it (MISMATCHED_CHANNEL_IDS; Spark 4.3.0 delivers it)",
       _data_after_fault("a DATA naming writer 4 after one naming writer 3 on the same connection", MISMATCHED_IDS,
                         data_for_another_writer),
       spec_ref=EXCLUSIVE_BINDING),
    _c("data/reader-rejects-data-for-another-reader", SHOULD, R, "A reader rejects a DATA naming another reader "
       "than itself, and does not credit it (MISMATCHED_CHANNEL_IDS; Spark 4.3.0 delivers it)",
       _data_after_fault("a DATA naming reader 2 sent to reader 1", MISMATCHED_IDS, data_for_another_reader),
       spec_ref=EXCLUSIVE_BINDING),
    _c("data/reader-credits-each-data", MUST, R, "A reader sends one CREDIT(writer, reader, 1) after every DATA "
       "it accepts", r_credits_each_data),
    # sequence
    _c("sequence/writer-from-zero", MUST, W, "A writer numbers DATA 0, 1, 2, ... per reader, and "
       "TERMINATION_CONTROL takes the next number", w_seq_from_zero),
    _c("sequence/reader-rejects-duplicate", MUST, R, "A reader rejects a DATA whose seq repeats the last one "
       "(INCORRECT_SEQUENCE_NUMBER)", _data_after_fault("a duplicate DATA seq=0", SEQUENCE, duplicate)),
    _c("sequence/reader-rejects-gap", MUST, R, "A reader rejects a DATA whose seq skips one "
       "(INCORRECT_SEQUENCE_NUMBER)", _data_after_fault("DATA seq=2 after seq=0", SEQUENCE, gap)),
    _c("sequence/reader-rejects-missing-at-end", MUST, R, "A reader rejects a TERMINATION_CONTROL whose seq shows "
       "that the last DATA is missing, and does not acknowledge it", reader_fault(
           "TERMINATION_CONTROL seq=2 after DATA seq=0", SEQUENCE, missing_at_end, is_ack, "TERMINATION_ACK")),
    _c("sequence/reader-rejects-first-not-zero", MUST, R, "A reader rejects a first DATA whose seq is not 0",
       _data_after_fault("a first DATA with seq=1", SEQUENCE, first_not_zero)),
    _c("sequence/writer-rejects-ack-ahead", MUST, W, "A writer rejects a TERMINATION_ACK whose seq is past the "
       "TERMINATION_CONTROL's (INCORRECT_SEQUENCE_NUMBER)", wrong_ack(+1), WORKLOAD),
    _c("sequence/writer-rejects-ack-missing-end", MUST, W, "A writer rejects a TERMINATION_ACK echoing an "
       "earlier seq than its TERMINATION_CONTROL (INCORRECT_SEQUENCE_NUMBER)", wrong_ack(-1), WORKLOAD),
    _c("sequence/writer-ignores-duplicate-ack", MUST, W, "A writer ignores a repeated correct TERMINATION_ACK",
       w_duplicate_ack, WORKLOAD),
    # checksum
    _c("checksum/writer-crc32c", MUST, W, "With checksums on, every DATA carries the CRC32C of its payload",
       w_crc32c),
    _c("checksum/writer-zero-when-disabled", MUST, W, "With spark.shuffle.streaming.checksum.enabled=false, "
       "every DATA carries checksum 0", w_checksum_disabled, WORKLOAD),
    _c("checksum/reader-rejects-mismatch", MUST, R, "A reader rejects a DATA whose payload does not match its "
       "CRC32C (CHECKSUM_VERIFICATION_FAILED)", reader_fault("a DATA with a wrong checksum", CHECKSUM, corrupt)),
    _c("checksum/reader-rejects-zero-checksum", MUST, R, "With checksums on, a reader rejects a DATA carrying "
       "checksum 0 whose payload's CRC32C is not 0 (0 is no 'unchecked' marker)",
       reader_fault("a DATA with checksum 0", CHECKSUM, zero_checksum)),
    _c("checksum/reader-no-credit-for-corrupt", SHOULD, R, "A reader verifies the checksum before crediting: a "
       "corrupt DATA gets no CREDIT", _data_after_fault("a DATA with a wrong checksum", CHECKSUM, corrupt)),
    # termination
    _c("termination/writer-terminates-once", MUST, W, "A writer ends each reader's stream with one "
       "TERMINATION_CONTROL(writer, reader) and keeps the connection open for the ack", w_terminates_once),
    _c("termination/writer-waits-for-every-ack", MUST, W, "A writer completes only after every reader's "
       "TERMINATION_ACK", w_waits_for_every_ack, WORKLOAD),
    _c("termination/writer-completes-after-acked-close", MUST, W, "A writer takes a reader's connection closing "
       "after its TERMINATION_ACK as no failure, and completes on the other readers' acks", w_close_after_ack,
       WORKLOAD),
    _c("termination/writer-ack-deadline", SHOULD, W, f"A writer bounds its wait for termination acks when "
       f"{ACK_TIMEOUT_KEY} is set (Spark 4.3.0 waits forever)", w_ack_deadline, WORKLOAD),
    _c("termination/reader-acks-echo", MUST, R, "A reader answers TERMINATION_CONTROL with "
       "TERMINATION_ACK(writer, reader) echoing its seq", ack_echo(BATCHES[:2])),
    _c("termination/reader-ends-after-every-writer", MUST, R, "A reader of two writers whose first writer "
       "terminated first still credits and acknowledges the other's stream (it ends after every writer, not at "
       "the first ack)", r_ends_after_every_writer),
    _c("termination/reader-acks-empty-stream", MUST, R, "A reader answers a TERMINATION_CONTROL with seq 0 (no "
       "data) with TERMINATION_ACK seq 0", ack_echo(())),
    # framing
    _c("framing/writer-frames", MUST, W, "A writer sends whole OneWayMessage frames: frame_length = 13 + body "
       "length, type 9, body_length = body length", w_frames),
    _c("framing/reader-frames", MUST, R, "A reader sends whole OneWayMessage frames: frame_length = 13 + body "
       "length, type 9, body_length = body length", r_frames),
    _c("framing/reader-split-and-coalesced", MUST, R, "A reader decodes frames however TCP splits or joins "
       "them", r_split_and_coalesced),
    _c("framing/writer-rejects-unknown-type", MUST, W, "A writer rejects a message type id other than 1..4",
       writer_fault("a body with type id 9", lambda p: one_way_frame(struct.pack(">iqii", 9, 0, 0, 0)))),
    _c("framing/reader-rejects-unknown-type", MUST, R, "A reader rejects a message type id other than 1..4",
       reader_fault("a body with type id 9", None, raw_bytes(one_way_frame(UNKNOWN_TYPE_BODY)), is_credit_or_ack,
                     "CREDIT or ack")),
    _c("framing/reader-rejects-other-transport-type", MUST, R, "A reader rejects a frame whose transport message "
       f"type is not OneWayMessage (9), here {OTHER_TRANSPORT_TYPE}, even around a well-formed DATA body",
       reader_fault(f"a DATA in a frame of transport type {OTHER_TRANSPORT_TYPE}", None, other_transport_type,
                    is_credit, "CREDIT for it")),
    _c("framing/writer-rejects-oversized-frame", MUST, W, "A writer rejects a frame longer than its maximum "
       "(here beyond Spark's 2^31+6) without waiting for its body", writer_fault(
           "a header announcing 2^31+100 bytes", lambda p: OVERSIZED_HEADER)),
    _c("framing/reader-rejects-oversized-frame", MUST, R, "A reader rejects a frame longer than its maximum "
       "(here beyond Spark's 2^31+6) without waiting for its body", reader_fault(
           "a header announcing 2^31+100 bytes", None, raw_bytes(OVERSIZED_HEADER))),
    _c("framing/writer-rejects-short-frame", MUST, W, "A writer rejects a frame_length smaller than the frame "
       "header", writer_fault("frame_length 5", lambda p: SHORT_FRAME)),
    _c("framing/reader-rejects-garbage", MUST, R, "A reader rejects bytes that are not frames (an HTTP request)",
       reader_fault("an HTTP request", None, raw_bytes(HTTP_GARBAGE), is_credit_or_ack, "CREDIT or ack")),
    _c("framing/reader-rejects-data-size-mismatch", MUST, R, "A reader rejects a DATA whose data_size differs "
       "from the payload bytes present", reader_fault("DATA with data_size 1 more than its payload", None,
                                                      size_mismatch, is_credit, "CREDIT for it")),
    _c("framing/reader-rejects-data-size-short", MUST, R, "A reader rejects a DATA whose data_size is smaller "
       "than the payload bytes present, even when those bytes end on a record", reader_fault(
           "DATA whose data_size covers one of its two records", None, size_short, is_credit, "CREDIT for it",
           UNCHECKED_READER_WORKLOAD)),
    _c("framing/reader-derived-first-rule-of-two", MUST, R, "A reader rejects an input that breaks two rules as "
       "the one checked first (a negative data_size before its mismatch, the size before the sequence and checksum, "
       "the frame length before the transport type), and credits none of them", r_first_rule_of_two),
    _c("framing/reader-accepts-largest-frame", MUST, R, "A reader accepts the longest DATA a writer can send: a "
       "buffer one byte below the flush threshold plus one record of the largest size, with its length prefix",
       r_accepts_largest_frame),
    _c("framing/reader-rejects-frame-past-its-bound", SHOULD, R, "A reader rejects a DATA frame one byte longer "
       "than the longest a writer can send, without crediting it (Spark 4.3.0 bounds no frame below 2 GiB)",
       reader_fault("a DATA one byte past the frame bound", None, one_past_the_bound, is_credit, "CREDIT for it",
                    FRAME_BOUND_WORKLOAD)),
    _c("framing/reader-trailing-bytes", INFO, R, "How a reader treats a TERMINATION_CONTROL body with trailing "
       "bytes (Spark ignores them)", r_trailing_bytes),
    # backpressure
    _c("backpressure/writer-slow-reader-no-loss", MUST, W, "A writer whose reader stops reading waits and loses "
       "nothing: every record arrives in order once reading resumes", w_slow_reader, WORKLOAD),
    _c("backpressure/writer-permits-to-zero", MUST, W, "A writer opens a buffer while its free permits are at "
       "least networkBufferSize, down to exactly 0 (the floor is 2 buffers per reader; DATA queued for an unbound "
       "reader keep theirs)", w_permits_to_zero, WORKLOAD),
    _c("backpressure/writer-blocked-flushes", MUST, W, "A writer out of permits sends every open buffer, then waits; "
       "each DATA's networkBufferSize permits return when its write completes", w_blocked_flushes, WORKLOAD),
    _c("backpressure/reader-quota-boundaries", MUST, R, "A reader stops reading a writer's connection when the "
       "DATA its consumer holds reach readerMaxMemory / M (header + data_size each), at exactly 0 left, and reads "
       "on only once its quota is above 0 again", r_quota_boundaries, SLOW_CONSUMER),
    _c("backpressure/reader-quota-per-writer", MUST, R, "A reader's quota per writer is readerMaxMemory / M rounded "
       "down: with 2 writers and an odd readerMaxMemory it stops reading a writer at exactly 0 left",
       r_quota_per_writer, SLOW_CONSUMER),
    _c("backpressure/reader-fast-writer-no-loss", MUST, R, "A reader given many DATA at once (credits are "
       "advisory) credits and keeps every one, then acks", r_fast_writer),
    # failure
    _c("failure/writer-rejects-data", MUST, W, "A writer rejects a DATA sent to it", writer_fault(
        "a DATA from the reader", lambda p: codec.encode_frame(DataMessage(seq=0, writer_id=0, reader_id=0,
                                                                           checksum=0, payload=b"")))),
    _c("failure/reader-rejects-credit", MUST, R, "A reader rejects a CREDIT sent to it", reader_fault(
        "a CREDIT from the writer", None,
        lambda s: s.send(CreditMessage(writer_id=PEER_WRITER_ID, reader_id=READER_ID_UNDER_TEST, num_messages=1)),
        is_credit_or_ack, "CREDIT or ack")),
    _c("failure/reader-no-ack-after-rejection", SHOULD, R, "A reader that rejected a DATA does not acknowledge "
       "termination afterwards", reader_fault("a duplicate DATA followed by TERMINATION_CONTROL", SEQUENCE,
                                               duplicate_then_terminate, is_ack, "TERMINATION_ACK")),
    _c("failure/reader-writer-closes-early", MUST, R, "A reader fails (does not end its stream normally) when a "
       "writer's connection closes before TERMINATION_CONTROL", r_writer_closes_early, REPORTS),
    _c("failure/writer-reader-closes-early", SHOULD, W, "A writer gives up promptly when a reader's connection "
       "closes before its ack", w_reader_closes_early, WORKLOAD),
    _c("failure/writer-connection-timeout", MUST, W, "A writer fails with WRITER_CONNECTION_TIMEOUT when a reader "
       "does not bind within writerConnectionTimeout", w_connection_timeout, WORKLOAD),
    # every timer at its exact instant (trace contract)
    _c("failure/writer-connection-timeout-at-its-instant", MUST, W, "writerConnectionTimeout fires at exactly its "
       "instant, not a millisecond before or after", at_its_instant("writer-connection-timeout"), TRACES),
    _c("termination/writer-ack-timeout-at-its-instant", SHOULD, W, "The termination-ack timeout fires at exactly "
       "its instant after finish", at_its_instant("writer-ack-timeout"), TRACES),
    _c("data/writer-max-wait-at-its-instant", MUST, W, "A record appended to a buffer exactly "
       "networkBufferMaxWaitTimeMs old flushes it; one a millisecond younger does not",
       at_its_instant("writer-max-wait-on-write"), TRACES),
    _c("data/writer-periodic-flush-at-its-instant", MUST, W, "The periodic flush runs at exactly "
       "networkBufferMaxWaitTimeMs, not a millisecond before or after", at_its_instant("writer-periodic-flush"), TRACES),
    _c("failure/reader-connect-timeout-at-its-instant", SHOULD, R, "The reader's connect timeout fires at exactly "
       "its instant after the first failed attempt", at_its_instant("reader-connect-timeout"), TRACES, CONNECT_TIMEOUT),
    # derived from the machines' comparisons, constants and bounds (docs/conformance.md, the shuffle checklist)
    *(_c(d.case_id, d.level, d.role, d.requirement, derived(d.rows), TRACES, *d.requires) for d in DERIVED + DERIVED_AXES),
    # the walk corpus (vectors/walks.json): seeded walks kept by the operator mutants they tell apart
    _c("handshake/writer-walk-corpus", MUST, W, "A writer answers every recorded walk (seeded, kept by mutation; "
       "docs/walks/shuffle.md) with the spec machines' sends, events and deadlines", walk_corpus(W, "MUST"), TRACES),
    _c("handshake/reader-walk-corpus", MUST, R, "A reader answers every recorded walk (seeded, kept by mutation; "
       "docs/walks/shuffle.md) with the spec machines' sends, events and deadlines", walk_corpus(R, "MUST"), TRACES),
    _c("handshake/writer-walk-corpus-stricter", SHOULD, W, "A writer answers every recorded walk that ends where "
       "the reference is stricter than Spark 4.3.0 (ids, bindings, early close, early ack) or uses the opt-in ack "
       "timeout as the spec machines do", walk_corpus(W, "SHOULD"), TRACES),
    _c("handshake/reader-walk-corpus-stricter", SHOULD, R, "A reader answers every recorded walk that ends where "
       "the reference is stricter than Spark 4.3.0 (ids, DATA after the terminator) or uses the connect timeout as "
       "the spec machines do", walk_corpus(R, "SHOULD"), TRACES),
    # the input corpus (vectors/inputs.json): seeded requests to the pure functions, kept by mutation
    _c("framing/reader-input-corpus", MUST, R, "The codec answers every recorded request (frames, bodies and "
       "streams decoded, messages encoded from their JSON form or from gathered buffers; seeded, kept by mutation; "
       "docs/walks/shuffle-inputs.md) and every spelling of a payload's hex text as the spec does: the message, or the error and its parameters",
       input_corpus(CODEC_FUNCTIONS, "MUST"), INPUTS),
    _c("settings/writer-input-corpus", MUST, W, "Settings parsing and the memory budgets the settings set (a "
       "writer's permits, its flush threshold, a reader's quota per writer) answer every recorded request (seeded, "
       "kept by mutation; docs/walks/shuffle-inputs.md) and every time unit at its rounding bounds, either sign, as "
       "the spec does: each value, or the refusal and its parameters", input_corpus(SETTINGS_FUNCTIONS, "MUST"), INPUTS),
    _c("auth/reader-input-corpus", MUST, R, "The AuthEngine handshake, its session cipher and the settings that ask "
       "for it answer every recorded request (one end, its randomness given; seeded, kept by mutation; "
       "docs/walks/shuffle-inputs.md) as the spec does: the bytes sent, the outcome or the error, the plaintext",
       input_corpus(AUTH_FUNCTIONS, "MUST"), INPUTS, INPUTS_AUTH),
    _c("failure/writer-input-corpus", MUST, W, "An attempt's failure report (cut to 16 KiB of UTF-8), the root "
       "cause a task hit by a peer's failure ends with, and a typed error's text and JSON answer every recorded "
       "request (seeded, kept by mutation; docs/walks/shuffle-inputs.md) and every typed error at each value of "
       "each parameter as the spec does",
       input_corpus(TASK_FUNCTIONS, "MUST"), INPUTS, INPUTS_TASKS),
    _c("backpressure/writer-input-corpus", MUST, W, "A server's bounds on connections (strangers held until they "
       "identify themselves, connections departing after their last bytes, client connections by use) and a "
       "connection's use read from its HTTP/2 frame headers answer every recorded walk of steps (seeded, kept by mutation; docs/walks/shuffle-inputs.md) as the spec does",
       input_corpus(ADMISSION_FUNCTIONS, "MUST"), INPUTS, INPUTS_ADMISSION,
       spec_ref="docs/spec/shuffle.md#deadlines-on-a-connection"),
    _c("framing/reader-input-corpus-stricter", SHOULD, R, "The longest frame each side takes is the reference's "
       "(Spark 4.3.0 sets no bound below 2 GiB) for every recorded request", input_corpus(CODEC_FUNCTIONS, "SHOULD"),
       INPUTS),
    _c("auth/writer-input-corpus-stricter", SHOULD, W, "A server refuses a replayed challenge (Spark 4.3.0 answers "
       "it) for every recorded request", input_corpus(AUTH_FUNCTIONS, "SHOULD"), INPUTS, INPUTS_AUTH),
    # settings
    _c("settings/writer-refuses-int-overflow", MUST, W, "A writer refuses an int setting of 2^31 "
       "(INVALID_CONF_VALUE.TYPE_MISMATCH) and runs with 2^31-1", refuses(
           "writer_max_memory", str(2**31), TYPE_MISMATCH, str(2**31 - 1)), SETTINGS),
    _c("settings/writer-refuses-zero-size", MUST, W, "A writer refuses networkBufferSize 0 "
       "(INVALID_CONF_VALUE.REQUIREMENT: must be positive) and runs with 1", refuses(
           "network_buffer_size", "0", REQUIREMENT, "1"), SETTINGS),
    _c("settings/writer-refuses-zero-timeout", MUST, W, "A writer refuses writerConnectionTimeout 0 "
       "(INVALID_CONF_VALUE.REQUIREMENT: positive or -1) and runs with -1", refuses(
           "writer_connection_timeout_ms", "0", REQUIREMENT, "-1"), SETTINGS),
    _c("settings/writer-refuses-each-smallest-violation", MUST, W, "A writer refuses, as Spark does, the "
       "smallest violation of each setting's type and requirement: a size suffix on an int, -1 where positive is "
       "required, a time of -1s, an unknown time suffix, a boolean spelled otherwise, a suffix on "
       "networkBufferMaxWaitTimeMs (a long)", refuses_each(SMALLEST_VIOLATIONS),
       SETTINGS),
    _c("settings/writer-derived-refuses-one-past-each-edge", MUST, W, "A writer refuses, as Spark does, the value "
       "one past each edge of a setting's domain: an int below -2^31, a long past either end, a time of -2 and one "
       "past the largest long", refuses_each(ONE_PAST_EACH_EDGE), SETTINGS),
    # authentication (runs with --secret-file)
    _c("auth/writer-ignores-silent-stranger", MUST, W, "A writer sends nothing on a connection that never runs "
       "the handshake, and serves the real reader", w_silent_stranger, AUTH),
    _c("auth/writer-rejects-credit-before-handshake", MUST, W, "A CREDIT in clear before the handshake binds "
       "nothing, gets no DATA and does not fail the writer", w_credit_in_clear, AUTH),
    _c("auth/writer-rejects-wrong-secret", MUST, W, "A writer refuses a handshake under another secret and serves "
       "the real reader", w_wrong_secret, AUTH),
    _c("auth/writer-replay-gets-no-data", MUST, W, "A challenge replayed from a recorded connection gets no DATA",
       w_replay_gets_nothing, AUTH),
    _c("auth/writer-answers-a-challenge-after-a-forged-copy", MUST, W, "A writer refuses a copy of a challenge "
       "whose ciphertext does not open, then answers the genuine challenge with the same salt, and serves the real "
       "reader", w_forged_copy_first, AUTH),
    _c("auth/writer-refuses-replayed-challenge", SHOULD, W, "A writer refuses a replayed challenge outright "
       "(Spark 4.3.0 answers it with a fresh key pair)", w_replay_refused, AUTH),
    _c("auth/reader-rejects-data-before-handshake", MUST, R, "A reader rejects a DATA sent in place of the "
       "handshake's answer", r_data_before_handshake, AUTH),
    _c("auth/reader-rejects-wrong-secret", MUST, R, "A reader rejects an answer sealed under another secret",
       r_wrong_secret, AUTH),
)


SUITE = Suite(
    name="shuffle",
    cases=CASES,
    open_target=open_target,
    roles=(WRITER, READER),
    target_help=TARGET_HELP,
    independent_cases=starts_a_program_per_case,
)
