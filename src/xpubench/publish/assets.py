"""The site's style and its one small script (vanilla JavaScript, no library), inlined in every page; and the
page around a body. A Content-Security-Policy lets the page load nothing from anywhere (no network, no
CDN) and run only this script (its sha256), so text from a results file can never become code.

The script: click a column head to sort (numbers by their ``data-sort`` value); the filter form above a
table (``form.filters``, its selects named after the rows' ``data-*`` attributes, ``from``/``to`` dates)
hides the rows that don't match and says how many are shown; a "CSV of the shown rows" button downloads
them (a cell that would start a spreadsheet formula is prefixed with a quote, as the static CSV files are).
"""

from __future__ import annotations

import base64
import hashlib

from xpubench.report.base.outputs import html_comment
from xpubench.report.render.html import CSS, esc

SITE_CSS = CSS + """
nav.top{background:#1d2330;padding:8px 24px}nav.top a{color:#fff;text-decoration:none;margin-right:1.5em}
form.filters{display:flex;flex-wrap:wrap;gap:10px 18px;align-items:end;margin:.6em 0;font-size:13px}
form.filters label{display:flex;flex-direction:column;color:#596275}
th.sortable{cursor:pointer;user-select:none}th[aria-sort=ascending]::after{content:" \\25B2"}
th[aria-sort=descending]::after{content:" \\25BC"}tr[hidden]{display:none}
.count{color:#596275;font-size:13px}button.csv{font-size:12px}a.csvfile{font-size:12px;margin-left:1em}
svg.chart{max-width:760px;width:100%;height:auto;border:1px solid #eef1f5;margin:.3em 0 1.2em}
svg .axis{stroke:#8a93a3}svg .grid{stroke:#eef1f5}svg .tick,svg .legend{font-size:11px;fill:#596275}
svg circle.slower{stroke:#c0392b;stroke-width:3}svg circle.faster{stroke:#2a9d4a;stroke-width:3}
table.sortable td.text{white-space:nowrap}
pre{background:#f6f8fa;padding:8px;overflow-x:auto;font-size:12px;max-height:420px}
td.failed{color:#c0392b;font-weight:bold}
"""

SCRIPT = r"""(function () {
  "use strict";
  function key(cell) {
    var v = cell.getAttribute("data-sort");
    if (v !== null && v !== "" && !isNaN(Number(v))) return Number(v);
    return cell.textContent.trim().toLowerCase();
  }
  function sortBy(table, index, th) {
    var asc = th.getAttribute("aria-sort") !== "ascending";
    Array.prototype.forEach.call(th.parentNode.cells, function (h) { h.removeAttribute("aria-sort"); });
    th.setAttribute("aria-sort", asc ? "ascending" : "descending");
    var body = table.tBodies[0], rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = key(a.cells[index]), y = key(b.cells[index]), sign = asc ? 1 : -1;
      if (typeof x !== typeof y) return (typeof x === "number" ? -1 : 1) * sign;
      return (x < y ? -1 : x > y ? 1 : 0) * sign;
    });
    rows.forEach(function (r) { body.appendChild(r); });
  }
  Array.prototype.forEach.call(document.querySelectorAll("table.sortable"), function (table) {
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, i) {
      th.classList.add("sortable");
      th.tabIndex = 0;
      th.addEventListener("click", function () { sortBy(table, i, th); });
      th.addEventListener("keydown", function (e) { if (e.key === "Enter") sortBy(table, i, th); });
    });
  });
  Array.prototype.forEach.call(document.querySelectorAll("form.filters"), function (form) {
    var table = document.getElementById(form.getAttribute("data-table"));
    var count = document.getElementById(form.getAttribute("data-count"));
    function apply() {
      var shown = 0, rows = table.tBodies[0].rows;
      var from = form.elements.from.value, to = form.elements.to.value;
      Array.prototype.forEach.call(rows, function (r) {
        var ok = true;
        Array.prototype.forEach.call(form.querySelectorAll("select"), function (s) {
          if (s.value && r.getAttribute("data-" + s.name) !== s.value) ok = false;
        });
        var d = r.getAttribute("data-date") || "";
        if ((from && d < from) || (to && d > to)) ok = false;
        r.hidden = !ok;
        if (ok) shown += 1;
      });
      count.textContent = shown + " of " + rows.length + " rows shown";
    }
    form.addEventListener("input", apply);
    form.addEventListener("change", apply);
    form.addEventListener("submit", function (e) { e.preventDefault(); });
    apply();
  });
  function quote(text) {
    if (/^[=+\-@\t\r]/.test(text)) text = "'" + text;
    return '"' + text.replace(/"/g, '""') + '"';
  }
  Array.prototype.forEach.call(document.querySelectorAll("button.csv"), function (button) {
    button.addEventListener("click", function () {
      var table = document.getElementById(button.getAttribute("data-table"));
      var lines = [Array.prototype.map.call(table.tHead.rows[0].cells, function (c) {
        return quote(c.textContent.trim()); }).join(",")];
      Array.prototype.forEach.call(table.tBodies[0].rows, function (r) {
        if (!r.hidden) lines.push(Array.prototype.map.call(r.cells, function (c) {
          return quote(c.textContent.trim()); }).join(","));
      });
      var a = document.createElement("a");
      a.href = URL.createObjectURL(new Blob([lines.join("\n") + "\n"], {type: "text/csv"}));
      a.download = button.getAttribute("data-name");
      document.body.appendChild(a);
      a.click();
      a.remove();
    });
  });
})();
"""

_HASH = base64.b64encode(hashlib.sha256(SCRIPT.encode("utf-8")).digest()).decode("ascii")
CSP = (f"default-src 'none'; style-src 'unsafe-inline'; img-src data:; script-src 'sha256-{_HASH}'; "
       "base-uri 'none'; form-action 'none'")


def page(title: str, body: str, *, root: str = "") -> str:
    """A whole page; ``root`` is the way back to the site's top folder ("" or "../")."""
    nav = f'<nav class="top"><a href="{root}index.html">xpubench results</a></nav>'
    return (f"<!DOCTYPE html>\n{html_comment()}\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{esc(title)}</title><style>{SITE_CSS}</style></head><body>{nav}<main>"
            f"<h1>{esc(title)}</h1>{body}</main><script>{SCRIPT}</script></body></html>\n")
