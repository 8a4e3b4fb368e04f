"""How xpubench writes for people, on the ground floor (every layer may import it): quantities in words and
units, "n/a" for a figure it cannot know (``units``), and text from files and exceptions shown as text, never
as markup or escape sequences (``plaintext``)."""
