"""Hypothesis strategies for streaming-shuffle messages over the full signed Java ranges."""

from __future__ import annotations

from hypothesis import strategies as st

from spec.shuffle.messages import (
    CreditMessage,
    DataMessage,
    Message,
    TerminationAckMessage,
    TerminationControlMessage,
)

INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)
PAYLOADS = st.one_of(st.binary(max_size=64), st.binary(min_size=32 * 1024 - 8, max_size=32 * 1024 + 8))



def messages(payloads: st.SearchStrategy[bytes] = PAYLOADS) -> st.SearchStrategy[Message]:
    """Any of the four message types, every integer field over its whole range."""
    return st.one_of(
        st.builds(DataMessage, seq=INT64, writer_id=INT32, reader_id=INT32, checksum=INT64, payload=payloads),
        st.builds(CreditMessage, writer_id=INT32, reader_id=INT32, num_messages=INT32, seq=INT64),
        st.builds(TerminationControlMessage, seq=INT64, writer_id=INT32, reader_id=INT32),
        st.builds(TerminationAckMessage, seq=INT64, writer_id=INT32, reader_id=INT32),
    )


MESSAGES = messages()
SMALL_MESSAGES = messages(st.binary(max_size=40))
"""Messages small enough to stream many of them through the frame decoder per example."""
