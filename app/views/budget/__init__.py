"""The Budget tab's parts: config editor, pages, side-by-side table, checks and table export."""
