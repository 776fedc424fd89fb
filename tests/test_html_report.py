"""report.html: what it shows, that it is self-contained, that it renders in a
real browser, the page without matplotlib, and the observability records."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import hypothesis.configuration
import pytest

from numoracle.cli.zoo import _load_zoo
from numoracle.kernels import get_target
from numoracle.reports import html_report, observing, plots, write_html
from numoracle.running.runner import run_target

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> list:
    """A passing diagnosed target and two caught mutants (with repros)."""
    store = tmp_path_factory.mktemp("store")
    good = run_target(get_target("numpy-fp32", "linear"), examples=12, diagnose=True,
                      store=None)
    mutants = {t.name: t for t in _load_zoo(None, ["linear"])}
    caught = [run_target(mutants[name], examples=30, store=store)
              for name in ("last_term_dropped", "tf32_inputs_claiming_fp32")]
    return [good, *caught]


def _images(page: str) -> list[str]:
    return re.findall(r'<img alt="([^"]*)" src="data:image/png;base64,', page)


def test_run_page_shows_ratios_ladder_and_worst_elements(results: list) -> None:
    if plots.available():
        pytest.skip("needs matplotlib (the report extra)")
    page = html_report.render_html(results)
    good, dropped, tf32 = results
    assert good.verdict == "pass" and good.samples and good.per_model
    assert dropped.verdict == "FAIL" and tf32.verdict == "FAIL"
    alts = _images(page)
    # one ratio picture per op, naming every target with samples; a ladder per diagnosed target
    [ratios] = [a for a in alts if a.startswith("linear: ")]
    assert all(f"{r.target} (fp32)" in ratios for r in results if r.samples)
    assert f"{good.target} (fp32) ({good.cases} cases" in page  # the legend, in the page
    assert f"{good.target} on linear, claiming fp32" in alts
    assert f"{tf32.target} on linear, claiming fp32" in alts  # failures are diagnosed
    # each failure's worst elements: a table with the failing element's ratio
    section = page.split("Failures: worst elements")[1]
    assert "<th>index</th><th>reference</th><th>got</th>" in section
    assert f"numoracle replay {dropped.repro}" in section
    assert ">inf</td>" in section  # the exact regime: bound 0, ratio inf
    # the ladder table names the model each output fits
    assert "most precise model that fits" in page
    # self-contained: nothing fetched, no script
    assert "<script" not in page
    assert not re.search(r'(src|href)="(https?:)?//', page)


def test_zoo_page_has_cases_to_catch(results: list) -> None:
    if plots.available():
        pytest.skip("needs matplotlib (the report extra)")
    page = html_report.render_html(results[1:], title="numoracle zoo", zoo=True,
                                   examples=30)
    assert "caught <b>2</b> of 2 mutants" in page
    assert "cases to catch each mutant" in _images(page)
    assert page.count('<span class="caught">caught</span>') == 2


def test_page_without_matplotlib_says_how_to_get_pictures(
        results: list, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(plots, "available", lambda: "matplotlib is not installed (test)")
    path = write_html(tmp_path / "r" / "report.html", results)
    page = path.read_text()
    assert "pip install &#x27;numoracle[report]&#x27;" in page
    assert _images(page) == []
    # the data is still there, as tables
    assert "<th>worst det</th>" in page and "most precise model that fits" in page
    assert "<th>index</th><th>reference</th>" in page


def test_observability_records_for_tyche(monkeypatch: pytest.MonkeyPatch,
                                         tmp_path: Path) -> None:
    monkeypatch.delenv("HYPOTHESIS_EXPERIMENTAL_OBSERVABILITY", raising=False)
    monkeypatch.setattr(hypothesis.configuration, "__hypothesis_home_directory", tmp_path)
    with observing() as folder:
        assert folder == tmp_path / "observed"
        res = run_target(get_target("numpy-fp32", "matmul"), examples=8, store=None)
    run_target(get_target("numpy-fp32", "matmul"), examples=3, store=None)  # not recorded
    files = sorted(folder.glob("*_testcases.jsonl"))
    assert len(files) == 1
    rows = [json.loads(line) for line in files[0].read_text().splitlines()]
    cases = [r for r in rows if r["type"] == "test_case" and r["status"] == "passed"]
    assert len(cases) == res.cases
    assert all(r["features"]["op"] == "matmul" for r in cases)
    assert {"family", "storage", "n", "verdict"} <= set(cases[0]["features"])
    assert "Case(op='matmul'" in cases[0]["representation"]


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(_chromium() is None, reason="needs Chromium (Debian: apt-get install "
                                                  "chromium)")
def test_page_renders_in_headless_chromium(results: list, tmp_path: Path) -> None:
    page = write_html(tmp_path / "report.html", results)
    shot = tmp_path / "shot.png"
    cmd = [str(_chromium()), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
           "--no-first-run", "--disable-background-networking", "--disable-component-update",
           "--disable-sync", f"--user-data-dir={tmp_path / 'profile'}", "--hide-scrollbars",
           "--window-size=1200,1600", f"--screenshot={shot}", page.as_uri()]
    subprocess.run(cmd, capture_output=True, timeout=120, check=True)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    dom = subprocess.run(cmd[:-2] + ["--dump-dom", page.as_uri()], capture_output=True,
                         text=True, timeout=120, check=True).stdout
    assert "Failures: worst elements" in dom and "<table>" in dom
    if plots.available() is None:
        import matplotlib.image  # the report extra is installed: look at the pixels

        pixels = matplotlib.image.imread(shot)
        assert pixels.shape[:2] == (1600, 1200)
        # not a blank page: dark text and coloured plot marks on white
        assert pixels[..., :3].min() < 0.3 and pixels[..., :3].std() > 0.05


def test_one_ratio_picture_per_op_keeps_each_rows_worst_case() -> None:
    if plots.available():
        pytest.skip("needs matplotlib (the report extra)")
    from numoracle.running.runner import TargetResult

    rows = []
    for i in range(12):
        r = TargetResult(f"t{i}", ("linear", "matmul", "conv2d")[i % 3], "fp32", cases=300)
        r.samples = [("y", 2 + k, (k % 97) / 100, (k % 89) / 100, 0.0, 0.0, k % 10 == 0)
                     for k in range(300)]
        rows.append(r)
    page = html_report.render_html(rows)
    ratio_pictures = [a for a in _images(page) if ":" in a]
    assert sorted(a.split(":")[0] for a in ratio_pictures) == ["conv2d", "linear", "matmul"]
    kept = plots.thin(rows[0].samples)
    drawn = [s for s in rows[0].samples if not s[6]]
    assert len(kept) < len(drawn)
    assert max(s[2] for s in kept) == max(s[2] for s in drawn)
    assert max(s[3] for s in kept) == max(s[3] for s in drawn)
