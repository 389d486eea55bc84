"""The Attention tab (``tab``) and its pages (one module per page).

``state``     what the pages draw (the inspection, the selected head, the switched-off heads, ...),
              without Qt; the pages read it and follow its signals
``jobs``      the follow-up jobs (one head's pipeline, metrics, ablation, aggregates, the experts
              chosen per token); the numbers come from ``model.interp.inspection`` and ``measures``
``host``      ``AttentionHost``: the tab as its helpers (jobs, exports, follow, readiness) see it
``controls``  the prompt bar, the ablation banner, the no-model view
``exports``   PNG / SVG of the page in view, the head as CSV, the prompt's tensors as .npz
``base``      what every page shares (``AttentionPage``, the tabs' ``app.views.page`` protocol)
``*_page``    the pages: heads grid, one head, pipeline, lines, token focus, aggregates, metrics,
              experts (a mixture of experts only), ablation, patching, attribution, next token
"""
