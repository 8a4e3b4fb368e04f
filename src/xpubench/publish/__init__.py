"""Results shared: machine-readable output on stdout (formats.py, over one flat row per case: rows.py) and a
static site from a folder of results files (site.py: pages, charts, the filters' script)."""
