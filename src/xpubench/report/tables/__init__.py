"""The report's tables, each defined once for the terminal, Markdown and HTML (report/base/table.py): the summary
`xpubench run` prints first and its headline figures, the tables per mode, cost and efficiency, language
models, time to target, backends side by side, the spread of each figure, the environments."""
