"""The KV-cache lab: a token's bytes in the cache under MHA, GQA, MQA and latent attention, by the
formula and as the model allocates it, for the model shown."""

from model.budget.arithmetic import human_bytes


def test_the_kv_cache_lab_puts_the_four_kinds_side_by_side(labs, qtbot, wait_results):
    tab, session = labs
    page = tab.show_page("kv-cache")
    rows = wait_results(qtbot, page, "rows")
    cfg = session.model.config
    L, H, d_k = cfg.core.n_layers, cfg.attention.n_heads, cfg.d_head
    assert [r.kind for r in rows] == ["MHA", "GQA", "MQA", "MLA"]
    by_kind = {r.kind: r for r in rows}
    assert by_kind["MHA"].formula_bytes == L * 2 * H * d_k * 4  # float32
    assert by_kind["MQA"].formula_bytes == L * 2 * d_k * 4
    assert by_kind["MLA"].formula_bytes == L * (4 * d_k + cfg.qk_rope_dim) * 4  # r = 4·d_k by default
    for r in rows:  # what the model really allocates is what the formula says
        assert r.measured_bytes == r.formula_bytes, r.kind
    assert page.table.rowCount() == 4 and page.table.item(2, 0).text() == "MQA"
    assert page.table.item(2, 4).text() == f"{float(H):.1f}×"  # under "smaller than MHA"
    page.context.setValue(1024)  # the last column follows the context, without recomputing
    assert page.table.item(0, 5).text() == human_bytes(by_kind["MHA"].formula_bytes * 1024)
