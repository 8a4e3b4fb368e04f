"""`xpubench report`: a self-contained HTML page that headless Chromium renders with its charts, strings
from result files escaped, and the Markdown variant with PNG charts beside it."""

import base64
import io
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import report_runs as runs
from PIL import Image

from xpubench.cli import main
from xpubench.report.render import markdown

SCRIPT = "<script>alert(1)</script>"


@pytest.fixture(scope="module")
def two_reports(tmp_path_factory) -> tuple[Path, Path]:
    """A report from two result files of this machine, the base run and the deliberately slowed one, as
    `xpubench report -o report.html` writes it, and the Markdown page (with its PNG files beside it) rendered
    from the report that command built: its charts are drawn once (~6 CPU s), for both pages."""
    folder = tmp_path_factory.mktemp("report")
    page, text = folder / "report.html", folder / "report.md"
    report = runs.report_command_built(["report", str(runs.base_file()), str(runs.slow_file()), "-o", str(page)])
    text.write_text(markdown.render(report, text))
    return page, text


@pytest.fixture
def two_file_report(two_reports) -> Path:
    return two_reports[0]


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def coloured_pixels(image: Image.Image) -> int:
    """Pixels with a strong hue (chart bars, lines, markers): text is grey/black, the page white."""
    rgb = np.asarray(image.convert("RGB")).astype(int)
    return int(((rgb.max(axis=2) - rgb.min(axis=2)) > 80).sum())


@pytest.mark.slow
def test_html_is_self_contained_and_has_every_section(two_file_report):
    page = two_file_report.read_text()
    assert not re.search(r"(src|href)\s*=\s*[\"']?(https?:)?//", page), "external reference"
    assert "<script" not in page and "@import" not in page and "url(" not in page
    charts = {name.removeprefix("chart-"): data for name, data in re.findall(
        r'<figure id="([\w-]+)"><img src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)}
    expected = {"throughput", "batch_size", "curves", "matmul", "roofline"}
    if runs.real_data():  # the misclassified-image gallery needs real test images (../shared/datasets/mnist)
        expected.add("gallery_mnist_cnn")
    assert set(charts) == expected
    assert page.count("<img ") == len(expected)
    for data in charts.values():
        assert Image.open(io.BytesIO(base64.b64decode(data))).size[0] > 300
    for title in ("Which device for what", "Training", "Matrix multiply", "Speedup over the CPU",
                  "Backend against backend", "Spread of every figure", "Environments"):
        assert f">{title}</h2>" in page
    assert "Epoch time and step/sample time by batch size x device" in page
    assert "ran in another environment" not in page or "OMP_NUM_THREADS" in page
    if runs.real_data():
        assert "Misclassified mnist_cnn test images" in page


@pytest.mark.slow
def test_chromium_renders_the_charts(two_file_report, tmp_path):
    exe = chromium()
    if exe is None:
        pytest.skip("chromium is not installed (bash scripts/setup.sh test installs Debian's chromium)")
    shot = tmp_path / "shot.png"
    proc = subprocess.run([exe, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                           f"--screenshot={shot}", "--window-size=1280,4000", two_file_report.as_uri()],
                          capture_output=True, text=True, timeout=120, check=False)
    assert shot.exists(), proc.stderr[-2000:]
    image = Image.open(shot)
    assert image.size == (1280, 4000)
    grey = np.asarray(image.convert("L"))
    assert grey.std() > 20 and (grey < 200).mean() > 0.02, "the page looks blank"
    assert coloured_pixels(image) > 20_000, "no chart colours on the page: charts did not render"


@pytest.mark.slow
def test_strings_from_result_files_are_escaped(tmp_path, monkeypatch):
    runs.quick_charts(monkeypatch)   # the pages' text is read here; the charts' pixels in the tests above
    def inject(record):
        record["case"]["device"] = SCRIPT if record["case"]["backend"] == "numpy" else record["case"]["device"]
        record["message"] = SCRIPT
        record["fingerprint"]["hostname"] = SCRIPT
        for dev in record["fingerprint"]["backends"]["torch"]["devices"]:
            dev["name"] = SCRIPT
        record["fingerprint"]["host"]["cpu"]["model"] = SCRIPT
        return record

    bad = runs.rewritten(runs.base_file(), "script.jsonl", inject)
    html_out, md_out = tmp_path / "r.html", tmp_path / "r.md"
    assert main(["report", str(bad), str(runs.slow_file()), "-o", str(html_out)]) == 0
    page = html_out.read_text()
    assert "<script" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert main(["report", str(bad), "-o", str(md_out)]) == 0
    text = md_out.read_text()
    assert SCRIPT not in text and r"\<script\>alert(1)\</script\>" in text
    compare_out = tmp_path / "c.html"   # a case is its fields (its key made from them): the same device in both
    slow = runs.rewritten(runs.slow_file(), "script-slow.jsonl", inject)
    assert main(["compare", str(slow), str(bad), "--format", "html", "-o", str(compare_out)]) == 0
    assert "<script" not in compare_out.read_text()


@pytest.mark.slow
def test_markdown_report_has_png_charts_beside_it(two_reports):
    out = two_reports[1]   # `xpubench report --format md` itself: test_strings_from_result_files_are_escaped
    text = out.read_text()
    links = re.findall(r"!\[[^\]]*\]\((report_files/[\w.-]+\.png)\)", text)
    assert len(links) >= 5
    for link in links:
        image = Image.open(out.parent / link)
        assert image.size[0] > 300 and coloured_pixels(image) > 500, link
    assert "| workload |" in text and "## Which device for what" in text


@pytest.mark.slow
def test_report_refuses_bad_input_with_one_line(tmp_path, capsys):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    assert main(["report", str(empty), "-o", str(tmp_path / "r.html")]) == 2
    assert main(["report", str(runs.base_file()), "-o", str(tmp_path / "no" / "r.html")]) == 2
    assert main(["report", str(runs.base_file()), "-o", str(tmp_path / "r.txt"), "--format", "pdf"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 3 and "Traceback" not in err
