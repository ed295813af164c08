"""Generators of the golden vectors under ``conformance/<protocol>/vectors/``, each a ``python -m`` command."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Callable, Sequence


def render(document: dict[str, Any]) -> str:
    """A vector file's exact text: 2-space JSON, one trailing newline."""
    return json.dumps(document, indent=2) + "\n"


def write_or_check(module: str, description: str | None, path: Path, text: Callable[[], str],
                   argv: Sequence[str] | None) -> int:
    """``python -m <module> [--check]``: write ``path``, or with ``--check`` exit 1 when it is stale."""
    parser = argparse.ArgumentParser(prog=f"python -m {module}", description=description)
    parser.add_argument("--check", action="store_true", help="exit 1 if the committed file is stale")
    args = parser.parse_args(argv)
    wanted = text()
    if args.check:
        if not path.exists() or path.read_text() != wanted:
            print(f"{path} is stale: run python -m {module}", file=sys.stderr)
            return 1
        return 0
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(wanted)
    print(f"wrote {path} ({json.loads(wanted)['numberOfTests']} tests)")
    return 0


def recorded_kept(path: Path, number_key: str) -> list[tuple[int, str]]:
    """A corpus selected by mutation (walks, inputs): the ``(candidate number, comment)`` pairs its committed file
    records under ``number_key``, so that it is rebuilt from the seed; empty before the first selection. A test
    without ``number_key`` (one derived from the spec's tables, not selected) is not the selection's."""
    if not path.exists():
        return []
    return [(int(t[number_key]), str(t["comment"])) for t in json.loads(path.read_text())["tests"]
            if number_key in t]


def corpus_document(algorithm: str, schema: str, version: str, seed: int, candidates: int, header: Sequence[str],
                    tests: list[dict[str, Any]]) -> dict[str, Any]:
    """The vector file of a corpus selected by mutation: the seed and candidate count it was drawn from, its tests."""
    return {"algorithm": algorithm, "schema": schema, "sparkVersion": "4.3.0", "generatorVersion": version,
            "seed": seed, "candidates": candidates, "numberOfTests": len(tests), "header": list(header),
            "tests": tests}


def recorded_tests(paths: Sequence[Path]) -> list[dict[str, Any]]:
    """The tests of the vector files that exist among ``paths`` (flat or in test groups), in order: what a
    re-selection carries (``operator_mutants.select``'s ``carried``)."""
    tests: list[dict[str, Any]] = []
    for path in paths:
        if path.exists():
            document = json.loads(path.read_text())
            tests += document.get("tests") or [t for group in document.get("testGroups", []) for t in group["tests"]]
    return tests


def unjudged_outcome(outcome: dict[str, Any], selection_file: Path, mutants: Sequence[Any],
                     numbers: Sequence[int | str], inputs: Sequence[Any], carried: int, load_runner: Callable[[], Any],
                     prefixes: Sequence[str], gap: Callable[[str], bool] = lambda _: False) -> dict[str, Any]:
    """``--unjudged`` of a corpus whose selection file records its outcome by candidate number (``kept`` as
    ``[number, comment]`` pairs, ``killedBy``, ``survivors``, ``broken``, ``timedOut``): the ``mutants`` (every one now)
    the ``outcome`` does not judge (:func:`conformance.operator_mutants.judged_by`, under the names it judged on the
    sources that last wrote ``selection_file``) selected alone (:func:`conformance.operator_mutants.select_unjudged`,
    untraced) on ``inputs`` (numbered ``numbers``), whose first ``carried`` are the recorded ones, tried first and
    kept; an input kept for a new mutant is added after the kept ones, named by the first rule it was kept for. A
    survivor no judgement covers (``gap``: its name) is selected again too: an input derived since may tell it
    apart."""
    from conformance.operator_mutants import Selection, committed_source, judged_by, rule_of, select_unjudged

    named = [*outcome["killedBy"], *(name for name in outcome["survivors"] if not gap(name)), *outcome["broken"],
             *outcome.get("timedOut", [])]
    judged = judged_by(mutants, named, committed_source(selection_file))
    earlier = Selection(list(range(carried)), dict(outcome["killedBy"]), list(outcome["survivors"]),
                        list(outcome["broken"]), list(outcome.get("timedOut", [])))
    later = select_unjudged(inputs, load_runner, prefixes, mutants, earlier, judged, traced=False,
                            progress=lambda line: print(line, file=sys.stderr, flush=True))
    fresh = {m.name for m in mutants if m not in judged}
    told = {name: (numbers[index] if name in fresh else index) for name, index in later.killed_by.items()}
    recorded = {number for number, _ in outcome["kept"]}
    added = [[numbers[i], next((rule_of(n) for n, j in later.killed_by.items() if j == i and n in fresh),
                               "kept by the unjudged selection")]
             for i in later.kept if i >= carried and numbers[i] not in recorded]
    return {**outcome, "kept": outcome["kept"] + added, "mutants": [{"module": m.module, "name": m.name} for m in mutants],
            "killedBy": told, "survivors": later.survivors, "broken": later.broken, "timedOut": later.timed_out}


def corpus_main(module: str, description: str | None, files: tuple[Path, Path, Path], candidates: int,
                select: Callable[[int, list[dict[str, Any]]], dict[str, Any]],
                build: Callable[[Sequence[tuple[int, str]]], dict[str, Any]],
                report: Callable[[dict[str, Any]], str], text: Callable[[], str], argv: Sequence[str],
                unjudged: Callable[[dict[str, Any]], dict[str, Any]] | None = None) -> int:
    """``python -m <module> [--check | --select [--count N] [--carry FILE]... | --report | --unjudged]`` for a corpus
    selected by mutation, whose ``files`` are its vector file, the selection's raw outcome and the generated report:
    ``--select`` runs the selection (minutes: under nice), carrying the tests of the vector file and of every
    ``--carry`` file (an earlier version of it), and writes all three, ``--report`` rewrites the report from the last
    selection, ``--unjudged`` (a corpus with ``unjudged``) selects for only the mutants the last selection does not
    judge (a new family, say) and writes all three; otherwise the vector file is rebuilt (or checked) from the seed and
    the candidates it records."""
    vectors, selection, report_file = files
    if unjudged is not None and "--unjudged" in argv:
        outcome = unjudged(json.loads(selection.read_text()))
        selection.write_text(json.dumps(outcome, indent=1) + "\n")
        vectors.write_text(render(build([(n, c) for n, c in outcome["kept"]])))
        report_file.write_text(report(outcome))
        print(f"wrote {selection}, {vectors} and {report_file}")
        return 0
    if "--select" not in argv and "--report" not in argv:
        return write_or_check(module, description, vectors, text, argv)
    parser = argparse.ArgumentParser(prog=f"python -m {module}")
    parser.add_argument("--select", action="store_true", help="run the selection (minutes; under nice)")
    parser.add_argument("--report", action="store_true", help="rewrite the report from the last selection")
    parser.add_argument("--count", type=int, default=candidates)
    parser.add_argument("--carry", type=Path, action="append", default=[],
                        help="also carry the tests of this vector file (an earlier version of the corpus)")
    options = parser.parse_args(argv)
    if options.select:
        outcome = select(options.count, recorded_tests([vectors, *options.carry]))
        selection.parent.mkdir(parents=True, exist_ok=True)
        selection.write_text(json.dumps(outcome, indent=1) + "\n")
        vectors.write_text(render(build([(n, c) for n, c in outcome["kept"]])))
    report_file.write_text(report(json.loads(selection.read_text())))
    print(f"wrote {report_file}" + (f" and {vectors}" if options.select else ""))
    return 0


def write_or_check_with_report(module: str, description: str | None, path: Path, document: dict[str, Any],
                               report_path: Path, report: str, argv: Sequence[str]) -> int:
    """``write_or_check`` of a vector file and the generated report that renders it (``docs/walks/*.md``):
    ``--check`` exits 1 when either is stale."""
    status = write_or_check(module, description, path, lambda: render(document), [a for a in argv if a == "--check"])
    if "--check" in argv:
        stale = not report_path.exists() or report_path.read_text() != report
        if stale:
            print(f"{report_path} is stale: run python -m {module}", file=sys.stderr)
        return status or int(stale)
    report_path.parent.mkdir(parents=True, exist_ok=True)
    report_path.write_text(report)
    return status


def write_selected(module: str, description: str | None, paths: tuple[Path, Path], selection: dict[str, Any] | None,
                   document: Callable[[dict[str, Any]], dict[str, Any]], report: Callable[[dict[str, Any]], str],
                   argv: Sequence[str]) -> int:
    """A corpus whose vector file records its ``selection``: the vector file and report ``paths`` written (or with
    ``--check`` checked) from ``selection``, or from the one the vector file records when it is None."""
    vectors, report_path = paths
    chosen = selection if selection is not None else json.loads(vectors.read_text())["selection"]
    doc = document(chosen)
    return write_or_check_with_report(module, description, vectors, doc, report_path, report(doc), argv)
