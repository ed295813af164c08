"""What the source tells the slot: never more than durable, never backwards; when ``until`` is reached;
and the durable point of transactions cut into parts under several origins."""

from __future__ import annotations

from spec.pgoutput.feedback import PartsDurability, SlotFeedback, record_boundary
from spec.pgoutput.messages import PrimaryKeepalive, XLogData


def test_the_slot_is_confirmed_to_durable_only_and_never_backwards() -> None:
    feedback = SlotFeedback()
    feedback.on_message(XLogData(500, 900, 0, b""))
    assert feedback.status(0).flushed_lsn == 0 and feedback.status(0).written_lsn == 500
    assert feedback.on_durable(None) is False
    assert feedback.on_durable(300) is True and feedback.status(7).flushed_lsn == 300
    assert feedback.on_durable(200) is False and feedback.flushed == 300
    update = feedback.status(7, reply_requested=True)
    assert (update.written_lsn, update.flushed_lsn, update.applied_lsn, update.reply_requested) == (500, 300, 300, True)


def test_a_keepalive_asking_for_a_reply_is_answered() -> None:
    feedback = SlotFeedback()
    assert feedback.on_message(PrimaryKeepalive(100, 0, True)) is True
    assert feedback.on_message(PrimaryKeepalive(120, 0, False)) is False and feedback.received == 120


def test_until_is_done_once_received_and_everything_sent_below_it_is_durable() -> None:
    feedback = SlotFeedback(until=1000)
    feedback.on_sent(400)
    feedback.on_sent(900)
    feedback.on_message(XLogData(950, 0, 0, b""))
    assert not feedback.done  # not yet received up to 1000
    feedback.on_message(PrimaryKeepalive(1000, 0, False))
    assert not feedback.done  # 400 and 900 not durable
    feedback.on_durable(400)
    assert not feedback.done
    feedback.on_sent(1200)  # committed after until: not waited for
    feedback.on_durable(900)
    assert feedback.done


def test_a_page_start_insert_position_stops_at_the_page_boundary() -> None:
    assert record_boundary(8192 * 5 + 24) == 8192 * 5
    assert record_boundary(8192 * 5 + 40) == 8192 * 5
    assert record_boundary(8192 * 5 + 41) == 8192 * 5 + 41


def test_a_transaction_cut_into_parts_is_durable_when_all_its_parts_are() -> None:
    parts = PartsDurability()
    parts.on_sent(10, frozenset({"a", "b"}))
    parts.on_sent(20, frozenset({"b"}))
    parts.on_sent(30, frozenset({"a"}))
    assert parts.origins == {"a", "b"}
    assert parts.update({"a": 30, "b": None}) is None  # 10 waits for b
    assert parts.update({"a": 30, "b": 10}) == 10
    assert parts.update({"a": 30, "b": 20}) == 30
    assert parts.origins == frozenset() and parts.update({}) == 30
