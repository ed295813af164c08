"""What a conformance run produced, and the files it is written to.

:mod:`~conformance.report.cases` holds the run's results (outcome, expected vs actual, what was
awaited, the decoded wire log) and groups failures under their root cause
(:mod:`~conformance.report.causes`); :mod:`~conformance.report.writers` writes the console summary,
the JSON report and JUnit XML, :mod:`~conformance.report.html` the self-contained HTML report.
"""
