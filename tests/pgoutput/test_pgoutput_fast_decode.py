"""The struct fast path of decode_pgoutput agrees with the layouts on every message and every
truncation or corruption of it: the same message, or the same typed error."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from spec.pgoutput.errors import PgOutputError
from spec.pgoutput.messages import decode_by_layouts, decode_pgoutput

_values = st.lists(st.one_of(st.just(b"n"), st.just(b"u"),
                             st.binary(max_size=12).map(lambda v: b"t" + len(v).to_bytes(4, "big") + v)), max_size=5)


def _tuple(values: list[bytes]) -> bytes:
    return len(values).to_bytes(2, "big") + b"".join(values)


_messages = st.one_of(
    st.builds(lambda r, t: b"I" + r + b"N" + _tuple(t), st.binary(min_size=4, max_size=4), _values),
    st.builds(lambda r, k, o, t: b"U" + r + (k + _tuple(o) if k else b"") + b"N" + _tuple(t),
              st.binary(min_size=4, max_size=4), st.sampled_from([b"", b"K", b"O"]), _values, _values),
    st.builds(lambda r, k, t: b"D" + r + k + _tuple(t), st.binary(min_size=4, max_size=4),
              st.sampled_from([b"K", b"O", b"X"]), _values),
    st.builds(lambda b: b"B" + b, st.binary(min_size=20, max_size=20)),
    st.builds(lambda b: b"C" + b, st.binary(min_size=25, max_size=25)),
)


def _outcome(decode: object, data: bytes) -> object:
    assert callable(decode)
    try:
        return decode(data)
    except PgOutputError as exc:
        return type(exc), str(exc)


@given(_messages, st.integers(min_value=0, max_value=80), st.binary(max_size=3))
def test_fast_path_agrees_with_the_layouts(message: bytes, cut: int, junk: bytes) -> None:
    for data in (message, message[:cut], message + junk):
        assert _outcome(decode_pgoutput, data) == _outcome(decode_by_layouts, data)
