"""`attention-lab screenshot` on an opened model: every Attention page captured with its numbers in,
the workers stopped before the process ends (it once aborted with "terminate called without an
active exception" after writing its images), and a page still computing is reported, not hidden."""

import os
import subprocess
import sys

import pytest

from app.views.page import screenshot_steps


@pytest.mark.slow
@pytest.mark.usefixtures("shipped_starter")
def test_screenshots_of_an_opened_model_exit_cleanly_with_every_page(tmp_path, shipped_starter):
    out = tmp_path / "shots"
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    cmd = [sys.executable, "-c", "import sys; from app.main import main; sys.exit(main(sys.argv[1:]))"]
    args = ["screenshot", "--checkpoint", str(shipped_starter), "--only", "attention", "--out", str(out)]
    r = subprocess.run([*cmd, *args], env=env, capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "terminate called" not in r.stderr and "Traceback" not in r.stderr
    assert "still computing" not in r.stderr
    pages = sorted(p.name for p in out.glob("03-attention-*.png"))
    for key in ("heads", "head", "metrics", "patching", "circuits", "attribution"):
        assert f"03-attention-{key}.png" in pages, pages
    assert all((out / name).stat().st_size > 10_000 for name in pages)  # drawn, not blank


def test_a_page_whose_wait_runs_out_is_reported():
    class Page:
        def ensure_built(self):
            pass

        def prepare_screenshot(self):
            pass

    pages = {"done": Page(), "slow": Page()}
    steps = screenshot_steps(
        ["done", "slow"], pages.__getitem__, lambda key: None, settle=lambda page: page is pages["done"]
    )
    assert [go() for _, go in steps] == [True, False]


def test_an_sae_that_is_no_folder_of_one_is_refused_before_the_window(tmp_path, capsys):
    from app.cli import main

    out = tmp_path / "shots"
    assert main(["screenshot", "--sae", str(tmp_path), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert "--sae" in err and "cfg.json" in err and len(err.splitlines()) == 1
    assert not out.exists()
