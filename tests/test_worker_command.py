"""``manage.py run_worker``'s set-up, before its threads start (the pools themselves: test_workers.py)."""

import gc

from django.core.management import call_command

from backend.notifications.management.commands import run_worker


def test_a_worker_freezes_what_it_loaded_before_its_threads_start(monkeypatch):
    """The collector's passes stop walking Django's long-lived objects: about 50 us of CPU per notification."""
    frozen_at_start = []
    monkeypatch.setattr(
        run_worker.Command, "_run_batches", lambda self, *args: frozen_at_start.append(gc.get_freeze_count())
    )
    gc.unfreeze()
    try:
        call_command("run_worker", "standard", "--batch", "200")
    finally:
        gc.unfreeze()

    assert len(frozen_at_start) == 1
    assert frozen_at_start[0] > 50_000  # Django, the apps and the tasks: ~190,000 objects in a worker
