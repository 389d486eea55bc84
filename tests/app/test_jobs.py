"""The job model (app.core.jobs): what a job's line says while its worker's news is on its way."""

from __future__ import annotations

from app.core.jobs import JobBoard


def test_a_job_whose_work_reported_is_not_called_waiting_before_its_start_reaches_the_board():
    """The worker's "started" is queued into the GUI thread; its first report can come first (CI met
    a generation at 3 tokens still read as "waiting for the computation before it")."""
    board = JobBoard()
    job = board.add("train.generate", "Generating after", "“abc”")
    assert job.how_far() == "waiting for the computation before it"
    job.progress.update(3, 100, "tokens")  # in the worker, before board.started(job) ran
    assert job.state == "queued"
    assert job.how_far().startswith("3 of 100 tokens")
    board.started(job)
    assert job.state == "running" and job.how_far().startswith("3 of 100 tokens")
