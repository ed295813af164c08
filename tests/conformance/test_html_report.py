"""The HTML report renders in a real browser (headless Chromium, Debian's ``chromium``): root causes,
outcomes by topic and level, every case with its wire log as a two-column timeline, and its script runs."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest
from PIL import Image

from conformance.runner import EXIT_FAILED

ROOT = Path(__file__).resolve().parents[2]
PEERS = Path(__file__).with_name("broken_shuffle_peers.py")
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run")
WINDOW = (1200, 1600)
FAIL_RED, PASS_GREEN = (0xC6, 0x28, 0x28), (0x2E, 0x7D, 0x32)
"""The report's FAIL and PASS badge colours (``conformance/report/html.py``)."""


class Elements(HTMLParser):
    """Every element of a page with its attributes and the text directly inside it, in document order."""

    def __init__(self) -> None:
        super().__init__()
        self.elements: list[tuple[str, dict[str, str], list[str]]] = []
        self._open: list[int] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, {k: v or "" for k, v in attrs}, []))
        if tag not in ("meta", "input", "br", "link"):
            self._open.append(len(self.elements) - 1)

    def handle_endtag(self, tag: str) -> None:
        while self._open:
            if self.elements[self._open.pop()][0] == tag:
                break

    def handle_data(self, data: str) -> None:
        for index in self._open:
            self.elements[index][2].append(data)

    def find(self, tag: str, **attrs: str) -> list[tuple[dict[str, str], str]]:
        return [(a, "".join(text)) for t, a, text in self.elements
                if t == tag and all(v in a.get(k, "").split() or a.get(k) == v for k, v in attrs.items())]


def chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    browser = shutil.which("chromium")
    if browser is None:
        pytest.skip("chromium is not installed (Debian package `chromium`, installed by .ci/run)")
    profile = tmp_path / f"profile-{len(list(tmp_path.glob('profile-*')))}"
    return subprocess.run([browser, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args],
                          capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run of a writer computing CRC32: one root cause with a dependent, and a passing case."""
    path = tmp_path_factory.mktemp("html") / "report.html"
    target = f"exec:{shlex.quote(sys.executable)} {shlex.quote(str(PEERS))} crc32"
    done = subprocess.run(
        [sys.executable, "-m", "conformance", "run", "--suite", "shuffle", "--target", target,
         "--case", "shuffle/checksum/writer-crc32c", "--case", "shuffle/data/writer-delivers-in-order",
         "--case", "shuffle/sequence/writer-from-zero", "--html", str(path)],
        cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == EXIT_FAILED, done.stdout + done.stderr
    return path


def test_the_report_is_one_self_contained_file(report: Path) -> None:
    page = report.read_text()
    assert "<script src" not in page and "<link" not in page and "http://" not in page and "https://" not in page


def test_the_report_renders_in_chromium(report: Path, tmp_path: Path) -> None:
    done = chromium(tmp_path, "--dump-dom", report.as_uri())
    assert done.returncode == 0, done.stderr[-2000:]
    page = Elements()
    page.feed(done.stdout)

    (body, _), = page.find("body")
    assert (body.get("data-cases"), body.get("data-failed")) == ("3", "2")  # the page's script ran

    roots = page.find("ul", **{"class": "root-causes"})
    assert len(roots) == 1 and "1 dependent case: shuffle/data/writer-delivers-in-order" in roots[0][1]
    assert any(a.get("href") == "#case-shuffle-checksum-writer-crc32c" for a, _ in page.find("a"))

    summary_rows = [text for _, text in page.find("tr") if text.startswith("shuffle/")]
    assert sorted(row.split("MUST")[0] for row in summary_rows) == [
        "shuffle/checksum", "shuffle/data", "shuffle/sequence"]

    cases = {a["id"]: (a, text) for a, text in page.find("article", **{"class": "case"})}
    assert set(cases) == {"case-shuffle-checksum-writer-crc32c", "case-shuffle-data-writer-delivers-in-order",
                          "case-shuffle-sequence-writer-from-zero"}
    crc_attrs, crc_text = cases["case-shuffle-checksum-writer-crc32c"]
    assert crc_attrs["data-outcome"] == "FAIL" and "dependents" in crc_text
    assert "root cause" in cases["case-shuffle-data-writer-delivers-in-order"][1]
    assert cases["case-shuffle-sequence-writer-from-zero"][0]["class"] == "case passed"

    timelines = page.find("table", **{"class": "timeline"})
    assert len(timelines) == 3
    heads = [text for _, text in page.find("th")]
    assert heads.count("peer → implementation") == 3 and heads.count("implementation → peer") == 3
    frames = [text for _, text in page.find("td", **{"class": "frame"})]
    assert any(t.startswith("r0: CREDIT_CONTROL seq=0 w=0 r=0 num=1") for t in frames)
    assert any("(CRC32, not CRC32C)" in t and "is the payload's CRC32; its CRC32C is" in t for t in frames)


def test_the_report_paints(report: Path, tmp_path: Path) -> None:
    shot = tmp_path / "report.png"
    done = chromium(tmp_path, f"--screenshot={shot}", f"--window-size={WINDOW[0]},{WINDOW[1]}", report.as_uri())
    assert done.returncode == 0 and shot.exists(), done.stderr[-2000:]
    with Image.open(shot) as image:
        assert image.size == WINDOW
        colours = {colour for _, colour in image.convert("RGB").getcolors(maxcolors=WINDOW[0] * WINDOW[1]) or []}
    assert {FAIL_RED, PASS_GREEN} <= colours  # the badges are painted in their outcome's colour
