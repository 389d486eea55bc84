"""The Compare tab: ``tab`` (CompareTab), its Qt-free ``state``, the left panel (``setup``), the pages
(``loss_page``, ``grids_page``, ``difference_page``, ``tables_page``), the runs and their training."""
