"""A report written out: what `xpubench run` shows in the terminal (terminal.py), `xpubench report`'s
document (build.py) as one self-contained HTML page (html.py) or Markdown with PNG charts (markdown.py)."""
