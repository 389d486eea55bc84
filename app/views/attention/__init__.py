"""The Attention tab's sub-views (one module per page) and the jobs they run off the GUI thread.

``compute``   what the worker computes: the prompt's inspection, one head's pipeline, head metrics,
              ablation effects, the .npz arrays (model/ does the numbers; this only calls it)
``base``      the page protocol every sub-view follows
``*_page``    the pages: heads grid, one head, pipeline, lines, token focus, aggregates, metrics,
              ablation, next token
``export``    PNG / SVG / CSV / .npz writers
"""
