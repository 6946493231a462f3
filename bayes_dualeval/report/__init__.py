"""The HTML/Markdown report and its figures."""
