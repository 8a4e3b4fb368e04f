"""Plain sentences written from the measurements: the answer at the end of `xpubench run` (answer.py)
and the report's "which device for what" (advice.py)."""
