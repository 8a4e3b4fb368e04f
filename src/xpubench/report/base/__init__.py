"""What every table, chart and sentence of a report reads: the results frame (frame.py) and the cases a
row is read against (related.py), a mode's figures as text (figures.py), a cell's text (cells.py), the one
table model (table.py), a report's content independent of its format (content.py) and where reports may
write (outputs.py)."""
