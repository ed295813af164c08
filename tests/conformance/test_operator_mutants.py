"""The operator mutants that choose a walk corpus: each one changes behaviour where it says, and the
selection keeps exactly the walks that tell the spec apart from them."""

from __future__ import annotations

import ast
import importlib
import threading
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from conformance import operator_mutants
from conformance.operator_mutants import (FAMILIES, ROOT, OperatorMutant, Runner, Selection, check_removal_mutants,
                                          every_mutant, fresh_modules, judged_by, judgement, module_path, mutants_of,
                                          record_problems, release_mutants, rounding_mutants, rule_of, score, select,
                                          normalising_mutants, select_all, select_unjudged, spelling_mutants,
                                          stale_mutants, swap_mutants, table_entry_mutants)

MODULE = "spec.sync.commit_time"


def _runner() -> Runner:
    rule = importlib.import_module(MODULE).commit_timestamp_ms

    def run(walk: Any) -> Any:
        return [rule(now, previous) for now, previous in walk]

    return run


def test_each_mutant_compiles_and_changes_its_span_only() -> None:
    mutants = mutants_of(MODULE)
    operators = {m.operator for m in mutants}
    assert {"max(now_ms, previous_ms + COMMIT_STEP_MS): max -> min", "previous_ms + COMMIT_STEP_MS: + -> -",
            "previous_ms is None: is -> is not"} <= operators
    original = (importlib.import_module(MODULE).__file__ or "")
    text = open(original).read()
    for mutant in mutants:
        changed = mutant.source(text)
        assert changed != text
        compile(changed, original, "exec")


def test_a_planted_mutant_is_seen_only_inside_its_context() -> None:
    (swap,) = [m for m in mutants_of(MODULE) if m.operator.endswith("max -> min")]
    with fresh_modules(["spec."], swap):
        assert _runner()([(5, 10)]) == [5]
    assert _runner()([(5, 10)]) == [11]


def test_select_keeps_the_walks_that_tell_mutants_apart_and_names_the_survivors() -> None:
    walks = [[(7, None)], [(5, 10)], [(20, 10)]]
    selection = select(walks, _runner, ["spec."], mutants_of(MODULE))
    swap = f"{MODULE}:commit_timestamp_ms:21: max(now_ms, previous_ms + COMMIT_STEP_MS): max -> min"
    assert selection.killed_by[swap] == 1
    assert set(selection.kept) <= {0, 1, 2} and 1 in selection.kept
    assert not selection.broken
    # Every mutant is either told apart or named as a survivor; none is lost.
    assert len(selection.killed_by) + len(selection.survivors) == len(mutants_of(MODULE))


def test_untraced_selection_tries_every_walk_within_max_tries() -> None:
    """``traced=False`` (a runner whose spec code runs in threads the tracer misses) makes every walk a candidate;
    ``max_tries`` bounds how many are tried before a mutant is called a survivor."""
    (swap,) = [m for m in mutants_of(MODULE) if m.operator.endswith("max -> min")]
    walks = [[(7, None)], [(5, 10)]]  # the first never reaches max(...), the second tells min apart
    assert select(walks, _runner, ["spec."], [swap], traced=False).killed_by == {swap.name: 1}
    assert select(walks, _runner, ["spec."], [swap], traced=False, max_tries=1).survivors == [swap.name]


def test_a_reselection_keeps_what_an_earlier_corpus_kept() -> None:
    """A walk an earlier corpus kept stays kept, and tells its mutant apart before any newer candidate that tells the
    same one apart (a re-selection only adds); one no longer among the candidates, or answered otherwise by the spec
    now, is not carried."""
    (swap,) = [m for m in mutants_of(MODULE) if m.operator.endswith("max -> min")]
    new, old = [(5, 10)], [(6, 10)]  # both tell min apart (5 and 6, not 11)
    assert select([new, old], _runner, ["spec."], [swap], traced=False).kept == [0]
    for selected in (select, select_all):
        again = selected([new, old], _runner, ["spec."], [swap], carried=[(old, [11])])
        assert again.kept == [1] and again.killed_by == {swap.name: 1}
    stale = [(old, [10]), ([(9, 1)], None)]  # answered otherwise now; not a candidate
    assert select([new, old], _runner, ["spec."], [swap], carried=stale).kept == [0]
    unrecorded = select([new, [(7, None)], old], _runner, ["spec."], mutants_of(MODULE), carried=[(old, None)])
    assert unrecorded.kept[0] == 2 and unrecorded.killed_by[swap.name] == 2


def test_one_selection_is_a_fixed_point() -> None:
    """Selecting again, carrying what the first selection kept in the order a corpus records it (by candidate), gives the
    same answer: the carried walk first credited with ``is -> is not`` (a crash on no previous stamp) is not credited
    the second time with a walk a later mutant added, which tells it apart too and comes first."""
    walks = [[(5, 10)], [(20, 10)], [(7, None)]]
    for selected in (select, select_all):
        first = selected(walks, _runner, ["spec."], mutants_of(MODULE), carried=[(walks[2], [7])])
        again = selected(walks, _runner, ["spec."], mutants_of(MODULE),
                         carried=[(walks[index], None) for index in sorted(first.kept)])
        assert sorted(first.kept) == [0, 2] and (first.kept, first.killed_by) == (again.kept, again.killed_by)


def test_a_selection_of_what_a_record_did_not_judge_keeps_its_verdicts_under_the_names_now() -> None:
    """A mutant the record judged is not tried again: under its own name, under the name it had before the module's
    lines moved (planting the same text there), or by its rule (a name without its line); the others are selected with
    the record's walks first, and every mutant has one verdict under its name now."""
    mutants = mutants_of(MODULE)
    (swap,) = [m for m in mutants if m.operator.endswith("max -> min")]
    (minus,) = [m for m in mutants if m.operator.endswith("+ -> -")]
    before = "\n\n" + module_path(MODULE).read_text()  # the source the record judged: every line two further down
    moved = replace(swap, line=swap.line + 2, end_line=swap.end_line + 2).name
    judged = judged_by(mutants, [moved, rule_of(minus.name)], lambda module: before)
    assert judged == {swap: moved, minus: rule_of(minus.name)}
    walks = [[(7, None)], [(5, 10)], [(20, 10)]]
    record = Selection([0], {moved: 0}, [rule_of(minus.name)], [])
    chosen = select_unjudged(walks, _runner, ["spec."], mutants, record, judged)
    assert chosen.killed_by[swap.name] == 0  # the record's verdict: tried again, walk 1 would have told it apart first
    assert minus.name in chosen.survivors and chosen.kept[0] == 0 and len(chosen.killed_by) > 1  # the others tried
    assert sorted([*chosen.killed_by, *chosen.survivors, *chosen.broken, *chosen.timed_out]) == sorted(
        m.name for m in mutants)
    changed = before.replace("max(now_ms, previous_ms + COMMIT_STEP_MS)", "max(now_ms, previous_ms + 1)")
    assert judged_by(mutants, [moved], lambda module: changed) == {}  # another text there: not the same mutant
    assert judged_by(mutants, [moved]) == {}  # the source the record judged unknown


def test_a_name_told_apart_and_surviving_keeps_both_verdicts_when_merged() -> None:
    """Two mutants of one name (two constants of one line), one told apart and one not: the record lists the name
    under both, and carried over it still judges one mutant a survivor (it was lost, so the report counted it told
    apart)."""
    twin = next(m for m in mutants_of(MODULE) if m.operator.endswith("+ -> -"))
    other = replace(twin, col=twin.col + 1)
    record = Selection([0], {twin.name: 0}, [twin.name], [])
    merged = operator_mutants.merged(record, {twin: twin.name, other: twin.name}, Selection([], {}, [], []))
    assert (merged.killed_by, merged.survivors) == ({twin.name: 0}, [twin.name])


def test_a_record_is_stale_when_the_mutants_change_not_when_they_move() -> None:
    """By rule: a record naming the mutants told apart (one name for both of one line) and listing the others' rules
    is current when lines move, stale when a mutant is added beyond those it counts unnamed, or a rule is gone."""
    def at(line: int, operator: str = "0 -> 1") -> OperatorMutant:
        return OperatorMutant(MODULE, "f", operator, line, line, 0, 1, "x")

    told, listed = [at(3).name], [rule_of(at(5, "< -> <=").name)]
    assert record_problems([at(3), at(3), at(5, "< -> <=")], told, listed) == []
    assert record_problems([at(30), at(30), at(50, "< -> <=")], told, listed) == []  # moved
    assert "1 of the spec's mutants now unjudged" in record_problems([at(3), at(5, "< -> <="), at(7, "- -> +")],
                                                                      told, listed)[0]
    assert record_problems([at(3), at(5, "< -> <="), at(7, "- -> +")], told, listed, unnamed=1) == []  # broken, say
    assert "no mutant has now" in record_problems([at(3)], told, listed)[0]


def _hanging_runner(calls: list[int], hangs: int) -> Runner:
    """Runs the mutant (min) to a hang for its first ``hangs`` calls, then answers; the spec (max) answers at once."""
    rule = importlib.import_module(MODULE).commit_timestamp_ms

    def run(walk: Any) -> Any:
        answers = [rule(now, previous) for now, previous in walk]
        if answers == [5]:  # only the max -> min mutant answers 5 to (5, 10)
            calls.append(1)
            while len(calls) <= hangs:
                pass  # ended by the selection's time limit
        return answers

    return run


def test_a_time_limit_is_never_a_kill() -> None:
    """A walk past its limit is run once more with the limit doubled: answering then, it is judged by its answers; past
    it again, the mutant is ``timed_out`` (neither told apart nor a survivor), even when a later walk would tell it
    apart, unless an earlier one did."""
    (swap,) = [m for m in mutants_of(MODULE) if m.operator.endswith("max -> min")]
    hung_once: list[int] = []
    once = select([[(5, 10)]], lambda: _hanging_runner(hung_once, 1), ["spec."], [swap], per_walk_s=0.05, traced=False)
    assert once.killed_by == {swap.name: 0} and not once.timed_out and len(hung_once) == 2
    for walks, killed_by in (([[(5, 10)], [(6, 10)]], {}), ([[(7, None)], [(6, 10)], [(5, 10)]], {swap.name: 1})):
        hanging = select(walks, lambda: _hanging_runner([], 10**9), ["spec."], [swap], per_walk_s=0.05, traced=False)
        assert hanging.killed_by == killed_by and not hanging.survivors
        assert hanging.timed_out == ([] if killed_by else [swap.name])


def _mutated(rule: Callable[[int, int | None], int]) -> bool:
    """Whether ``rule`` is the max -> min mutant: a stamp behind the previous one, and the clock's when there is none
    (the ``is -> is not`` mutant stamps the clock's too, but fails on no previous stamp)."""
    try:
        return rule(0, 10) == 0 and rule(7, None) == 7
    except TypeError:
        return False


def test_a_mutant_timed_out_on_its_first_walk_is_tried_on_no_other_walk() -> None:
    """The max -> min mutant hangs every walk: timed out on the first (run twice, the second time with the limit
    doubled), it is tried on no other, not even in the second pass the ``is -> is not`` mutant's walk 2 starts (kept
    first there): each further try would cost the limit again, and tell nothing."""
    rule = importlib.import_module(MODULE).commit_timestamp_ms
    walks = [[(20, 10)], [(30, 10)], [(7, None)]]  # only the last tells is -> is not apart (it fails on None)
    hung_on: list[int] = []

    def load() -> Runner:
        planted = importlib.import_module(MODULE).commit_timestamp_ms

        def run(walk: Any) -> Any:
            if _mutated(planted):
                hung_on.append(walks.index(walk))
                while True:
                    pass  # ended by the selection's time limit
            return [planted(now, previous) for now, previous in walk]

        return run

    (swap,) = [m for m in mutants_of(MODULE) if m.operator.endswith("max -> min")]
    (is_not,) = [m for m in mutants_of(MODULE) if m.operator.endswith("is -> is not")]
    chosen = select(walks, load, ["spec."], [swap, is_not], per_walk_s=0.05, traced=False)
    assert chosen.timed_out == [swap.name] and chosen.killed_by == {is_not.name: 2} and chosen.kept == [2]
    assert hung_on == [0, 0] and _mutated(rule) is False


def test_a_thread_a_mutant_left_spinning_is_stopped_after_its_walks(monkeypatch: pytest.MonkeyPatch) -> None:
    """A mutant's walk leaves a thread spinning (as a service's poller in a mutated frame reader does): after the
    mutant's walks it is stopped, so it takes no share of the interpreter from later walks; a thread that ran before
    the mutant was planted is left alone."""
    monkeypatch.setattr(operator_mutants, "THREAD_GRACE_S", 0.05)
    spinning: list[threading.Thread] = []
    older = threading.Event()
    waiting = threading.Thread(target=older.wait, name="started before the mutant")
    waiting.start()

    stopped = threading.Event()

    def spin() -> None:
        try:
            while True:
                pass
        except operator_mutants.LeftoverThreadStopped:
            stopped.set()  # raised in it; uncaught, as in a mutant's thread, it ends the thread silently

    def load() -> Runner:
        planted = importlib.import_module(MODULE).commit_timestamp_ms

        def run(walk: Any) -> Any:
            if _mutated(planted):
                spinning.append(threading.Thread(target=spin, name="left spinning", daemon=True))
                spinning[-1].start()
            return [planted(now, previous) for now, previous in walk]

        return run

    (swap,) = [m for m in mutants_of(MODULE) if m.operator.endswith("max -> min")]
    try:
        chosen = select([[(5, 10)]], load, ["spec."], [swap], traced=False)
        assert chosen.killed_by == {swap.name: 0} and len(spinning) == 1
        spinning[0].join(5.0)  # ended already: the join returns at once
        assert not spinning[0].is_alive() and stopped.is_set() and waiting.is_alive()
    finally:
        older.set()
        waiting.join()


def _runner_of(module: str) -> Callable[[], Runner]:
    """A loader importing ``module`` (planted or not) before the commit-time rule's runner."""
    def load() -> Runner:
        importlib.import_module(module)
        return _runner()

    return load


def test_a_mutant_that_loops_at_import_is_timed_out_not_waited_for(monkeypatch: pytest.MonkeyPatch) -> None:
    """The codec builds its struct formats at import in a ``while`` that a stale ``field`` never ends: planting it
    runs past the import limit, so the mutant is ``timed_out`` (never a kill) and the selection goes on."""
    stale = _planted(stale_mutants, "spec.shuffle.codec", "stale field: drop field = field.subcon")
    monkeypatch.setattr(operator_mutants, "IMPORT_LIMIT_S", 0.5)
    chosen = select([[(5, 10)]], _runner_of("spec.shuffle.codec"), ["spec."], [stale], traced=False)
    assert chosen.timed_out == [stale.name] and not chosen.killed_by and not chosen.survivors and not chosen.broken


def test_the_lines_a_walk_runs_include_those_of_the_threads_it_starts() -> None:
    """A runner that serves a walk from a thread of its own (the cluster service's reactor) is traced there too."""
    import threading

    from conformance.operator_mutants import lines_run, module_path
    from spec.cluster import wire

    def runner(walk: object) -> None:
        worker = threading.Thread(target=wire.checked_length, args=(20,))
        worker.start()
        worker.join()

    path = str(module_path("spec.cluster.wire"))
    _, seen = lines_run(runner, None, {path})
    first = wire.checked_length.__code__.co_firstlineno
    assert {line for _, line in seen} & set(range(first, first + 12))


def test_a_report_judges_survivors_by_the_longest_match_and_scores_the_rest() -> None:
    judged = {"m.f": ("unreachable", "no input"), "m.f.g: drop x": ("equivalent", "x is never read")}
    assert judgement("m.f: 1 -> 2", judged) == ("unreachable", "no input")
    assert judgement("m.f.g: drop x = 1", judged) == ("equivalent", "x is never read")
    assert judgement("m.fg: 1 -> 2", judged) == ("gap", "")
    assert (score(10, 6, 1, 1), score(2, 0, 1, 1)) == ("75%", "-")


def test_order_mutants_take_the_other_element_and_drop_each_operand() -> None:
    """A bounded memory that forgets its newest instead of its oldest, and a newcomer that evicts itself (a condition
    of the rule dropped), are each one order mutant: planted, they answer otherwise than the spec."""
    from conformance.operator_mutants import order_mutants

    (newest,) = [m for m in order_mutants("spec.auth.handshake") if m.operator.endswith("oldest -> newest")]

    def replays() -> list[bool]:
        guard = importlib.import_module("spec.auth.handshake").ReplayGuard(2)
        return [guard.first_time(salt) for salt in (b"a", b"b", b"c", b"c", b"a")]

    assert replays() == [True, True, True, False, True]
    with fresh_modules(["spec."], newest):
        assert replays() == [True, True, True, True, False]
    (itself,) = [m for m in order_mutants("spec.admission") if m.operator.endswith("drop operand p != peer")]

    def evicted() -> list[int]:
        strangers = importlib.import_module("spec.admission").StrangerAdmission[int](1, 1.0)
        strangers.accepted(0, 0.0)
        strangers.proven(0)  # the newcomer is the only stranger that has not proven the secret
        return strangers.accepted(1, 0.0)

    assert evicted() == [0]
    with fresh_modules(["spec."], itself):
        assert evicted() == [1]


def _planted(family: Callable[[str], list[OperatorMutant]], module: str, operator: str) -> OperatorMutant:
    (mutant,) = [m for m in family(module) if m.operator == operator]
    return mutant


def test_the_rounding_family_rounds_a_negative_sub_millisecond_time_the_other_way() -> None:
    """The blind round's ``settings._time_ms`` bug: -1us is 0 ms in Spark (truncation); rounded down it is -1."""
    def time_ms(text: str) -> int | None:
        return importlib.import_module("spec.shuffle.settings")._time_ms(text)  # type: ignore[no-any-return]

    line = "abs(number) * multiplier // divisor"
    assert {f"{line}: floor -> truncation", f"{line}: floor -> ceiling"} <= \
        {m.operator for m in rounding_mutants("spec.shuffle.settings")}
    assert time_ms("-1us") == 0
    with fresh_modules(["spec."], _planted(rounding_mutants, "spec.shuffle.settings", f"{line}: floor -> ceiling")):
        assert time_ms("-1us") == -1
    with fresh_modules(["spec."], _planted(rounding_mutants, "spec.shuffle.settings", f"{line}: floor -> truncation")):
        assert time_ms(f"{2**53 + 1}ms") != 2**53 + 1  # truncating through a float
    (ttl,) = [m for m in rounding_mutants("spec.cluster.wire") if m.operator == "round(timing.ttl * 1000) -> int"]
    assert ttl.replacement == "int"  # the cluster wire walks' family, its names kept


def _parse_hex(text: str) -> object:
    """``jsonform.parse_hex``'s bytes, or the name of the error it raised."""
    try:
        return importlib.import_module("spec.shuffle.jsonform").parse_hex(text)
    except Exception as error:  # noqa: BLE001 - the answer is which error
        return type(error).__name__


def test_the_spelling_family_refuses_an_upper_case_hex_prefix() -> None:
    """The blind round's ``jsonform.parse_hex`` bug: a ``0X`` prefix refused; and a unit of a table spelled otherwise."""
    assert _parse_hex("0X00") == b"\x00"
    with fresh_modules(["spec."], _planted(spelling_mutants, "spec.shuffle.jsonform", "'0x' -> '0X'")):
        assert _parse_hex("0X00") == "InvalidHex"
    units = [m for m in spelling_mutants("spec.shuffle.settings") if m.function == "TIME_UNITS"]
    assert "'us' -> 'US'" in {m.operator for m in units}  # a module-level table is in scope


def test_the_check_removal_family_accepts_a_shard_with_no_members() -> None:
    """The blind round's ``Membership.check_well_formed`` bug: only the violating input sees it."""
    def well_formed(shards: dict[str, tuple[object, ...]]) -> str:
        types = importlib.import_module("spec.cluster.types")
        try:
            types.Membership(epoch=1, shards=shards).check_well_formed()
        except Exception as error:  # noqa: BLE001 - the answer is which error
            return type(error).__name__
        return "ok"

    removed = _planted(check_removal_mutants, "spec.cluster.types", "remove check if not members")
    types = importlib.import_module("spec.cluster.types")
    node = types.NodeInfo(node_id="n1", address="127.0.0.1:1", state=types.NodeState.OK)
    assert (well_formed({"s1": ()}), well_formed({"s1": (node,)})) == ("MalformedMembership", "ok")
    with fresh_modules(["spec."], removed):
        assert (well_formed({"s1": ()}), well_formed({"s1": (node,)})) == ("ok", "ok")


def test_the_swap_family_swaps_the_writer_s_and_reader_s_texts_of_one_error() -> None:
    """The blind round's ``ConnectionClosedBeforeTermination`` bug; and a call's two adjacent arguments."""
    def text() -> str:
        return str(importlib.import_module("spec.shuffle.errors").ConnectionClosedBeforeTermination("writer", 3))

    assert "streaming shuffle writer 3" in text()
    with fresh_modules(["spec."], _planted(swap_mutants, "spec.shuffle.errors", "swap branches of role == 'writer'")):
        assert "streaming shuffle reader 3" in text()
    assert "swap arguments fault.expected / fault.actual" in {m.operator for m in swap_mutants("spec.shuffle.errors")}


def test_the_stale_family_keeps_a_variable_s_old_value() -> None:
    """A re-assignment dropped: the prefix ``parse_hex`` strips is read on; the name's first binding is no update."""
    stale = _planted(stale_mutants, "spec.shuffle.jsonform", "stale compact: drop compact = compact[2:]")
    with fresh_modules(["spec."], stale):
        assert (_parse_hex("0x00"), _parse_hex("00")) == ("InvalidHex", b"\x00")
    assert [m.operator for m in stale_mutants("spec.shuffle.jsonform") if m.function == "parse_hex"] == [stale.operator]


def test_the_table_family_leaves_an_error_class_out_of_the_peer_symptoms() -> None:
    """The ninth blind round's ``root_cause.PEER_SYMPTOMS`` bug: a reader that failed with WriterUnreachable no longer
    looks for a peer's failure; and a pair left with one entry is still a tuple."""
    def symptoms() -> tuple[bool, object]:
        errors = importlib.import_module("spec.shuffle.errors")
        unreachable = errors.WriterUnreachable(1, 2, 3, 1000, "refused")
        return importlib.import_module("spec.shuffle.root_cause").is_symptom(unreachable), \
            importlib.import_module("spec.shuffle.jsonform").INT32

    dropped = _planted(table_entry_mutants, "spec.shuffle.root_cause", "drop entry errors.WriterUnreachable of PEER_SYMPTOMS")
    assert len(table_entry_mutants("spec.shuffle.root_cause")) == 4  # one per entry
    assert symptoms() == (True, (-(2**31), 2**31 - 1))
    with fresh_modules(["spec."], dropped):
        assert symptoms()[0] is False
    with fresh_modules(["spec."], _planted(table_entry_mutants, "spec.shuffle.jsonform", "drop entry -2 ** 31 of INT32")):
        assert symptoms()[1] == (2**31 - 1,)


def test_the_release_family_keeps_the_permits_of_a_leaving_reader_s_open_buffer() -> None:
    """The ninth blind round's ``WriterMachine._leave`` bug: the open buffer is dropped, its permits never return (the
    first-order family drops the same statement: one planted text, which :func:`every_mutant` credits to it); and a
    pop kept: one DATA's write reported twice returns its permits twice, where the spec refuses the second report."""
    def permits() -> tuple[int, object]:
        writer = importlib.import_module("spec.shuffle.writer")
        credit = importlib.import_module("spec.shuffle.messages").CreditMessage(writer_id=0, reader_id=0, num_messages=1)
        settings = importlib.import_module("spec.shuffle.settings").ShuffleSettings(
            network_buffer_size=16, network_buffer_max_wait_time_ms=50, writer_max_memory=1)
        left = writer.WriterMachine(3, 0, 1, settings, 0.0, readers_may_leave=True)
        left.received("c0", credit, 0.0)
        left.write(0, b"x", 0.0)  # shorter than the flush threshold: the buffer stays open
        left.reader_left(0, 0.0)
        written = writer.WriterMachine(3, 0, 1, settings, 0.0)
        written.received("c0", credit, 0.0)
        (send,) = written.write(0, bytes(15), 0.0).sends  # a full buffer: one DATA
        written.send_completed(0, send.message.seq, 0.0)
        try:
            written.send_completed(0, send.message.seq, 0.0)
        except Exception as error:  # noqa: BLE001 - the answer is which error
            return left.permit_capacity - left.permits_available, type(error).__name__
        return left.permit_capacity - left.permits_available, written.permits_available - written.permit_capacity

    writer_text = module_path("spec.shuffle.writer").read_text()
    forgotten = _planted(release_mutants, "spec.shuffle.writer",
                         "forget release self.permits_available += self.settings.network_buffer_size")
    assert forgotten.source(writer_text) in {m.source(writer_text) for m in mutants_of("spec.shuffle.writer")}
    assert permits() == (0, "UsageError")
    with fresh_modules(["spec."], forgotten):
        assert permits()[0] == 16  # one networkBufferSize never returned
    with fresh_modules(["spec."], _planted(release_mutants, "spec.shuffle.writer",
                                           "forget release, keep self._in_flight.pop((reader_id, seq), None)")):
        assert permits()[1] == 16  # returned twice


def test_the_normalising_family_lists_shards_unsorted_and_matches_a_blank_secret() -> None:
    """The tenth blind round's two misses: ``sorted(shards.items())`` in ``model._snapshot`` written as
    ``shards.items()`` (the shards listed in the order their lowest node ids were seen), and
    ``bool(configured.strip())`` in ``shared_secret.secret_matches`` written as ``bool(configured)`` (a blank secret
    configured matches a peer presenting it)."""
    def snapshot_and_match() -> tuple[list[str], bool]:
        model = importlib.import_module("spec.cluster.model")
        state = importlib.import_module("spec.cluster.types").NodeState.OK
        records = {"n1": model.MemberRecord(shard="s2", address="127.0.0.1:1", state=state),
                   "n2": model.MemberRecord(shard="s1", address="127.0.0.1:2", state=state)}
        return list(model._snapshot(1, records).shards), \
            importlib.import_module("spec.shared_secret").secret_matches(" ", " ")

    assert snapshot_and_match() == (["s1", "s2"], False)
    with fresh_modules(["spec."], _planted(normalising_mutants, "spec.cluster.model",
                                           "drop sorted(...) in sorted(shards.items())")):
        assert snapshot_and_match()[0] == ["s2", "s1"]
    with fresh_modules(["spec."], _planted(normalising_mutants, "spec.shared_secret",
                                           "drop .strip() in configured.strip()")):
        assert snapshot_and_match()[1] is True
    planted = {(m.function, m.replacement) for m in normalising_mutants("spec.cluster.model")}
    assert ("_batches", "(groups[r])") in planted  # the key= goes with the call
    assert [m.replacement for m in normalising_mutants("spec.auth.settings") if m.function == "enabled"] == [
        '(conf.get(key, str(default)).strip())', '(conf.get(key, str(default)))']  # each call of a chain alone


def _protocol_modules() -> list[str]:
    """Every spec module but the renderers of the generated docs (spec/docs: no corpus judges them) and packages."""
    spec = ROOT / "spec"
    return sorted(".".join(p.relative_to(ROOT).with_suffix("").parts) for p in spec.rglob("*.py")
                  if p.name not in ("__init__.py", "__main__.py") and "docs" not in p.relative_to(spec).parts)


def _top_level_spans(original: str) -> list[tuple[int, int]]:
    """``(first, last)`` line of each top-level statement, decorators included."""
    return [(min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", ()))]), node.end_lineno or node.lineno)
            for node in ast.parse(original).body]


def _planted_statements(original: str, spans: list[tuple[int, int]], mutant: OperatorMutant) -> str:
    """The top-level statements the mutant's span touches, as planted: a splice's syntax is decided there alone."""
    touched = [span for span in spans if span[0] <= mutant.end_line and mutant.line <= span[1]]
    first, last = touched[0][0], touched[-1][1]
    changed = mutant.source(original)
    assert changed != original, mutant.name
    grown = changed.count("\n") - original.count("\n")
    return "".join(changed.splitlines(keepends=True)[first - 1:last + grown])


def test_every_family_plants_compilable_source_in_every_spec_module() -> None:
    for module in _protocol_modules():
        original = module_path(module).read_text()
        spans = _top_level_spans(original)
        for family in FAMILIES:
            for mutant in family(module):
                compile(_planted_statements(original, spans, mutant), mutant.name, "exec")


def test_a_mutant_after_a_non_ascii_character_or_in_an_f_string_compiles() -> None:
    """Columns are characters, not UTF-8 bytes (the ``×`` of ``spec.docs.pgoutput``), and an operand dropped inside an
    f-string keeps its own quotes (``spec.docs.shuffle_dissector``): every mutant of both renderers compiles."""
    for module in ("spec.docs.pgoutput", "spec.docs.shuffle_dissector"):
        original = module_path(module).read_text()
        spans = _top_level_spans(original)
        for family in FAMILIES:
            for mutant in family(module):
                compile(_planted_statements(original, spans, mutant), mutant.name, "exec")


def test_every_mutant_is_every_family_in_order_each_planted_text_once(monkeypatch: pytest.MonkeyPatch) -> None:
    module = "spec.shuffle.jsonform"
    every = every_mutant(module)
    original = module_path(module).read_text()
    assert len({m.source(original) for m in every}) == len(every)
    family_of = {m: index for index, family in reversed(list(enumerate(FAMILIES))) for m in family(module)}
    assert [family_of[m] for m in every] == sorted(family_of[m] for m in every)  # the families in order
    assert every[:len(mutants_of(module))] == mutants_of(module)  # the first-order ones first, as the corpora call them
    assert set(every) == set(family_of)
    monkeypatch.setattr(operator_mutants, "FAMILIES", (mutants_of, mutants_of))
    assert every_mutant(module) == mutants_of(module)  # a text two families plant counts once
