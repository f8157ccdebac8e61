"""A caller cancels one of its notifications before any provider was handed it.

Race-safe against the delivery worker without a lock: the worker's claim is a conditional
UPDATE ``queued → sending`` (``delivery.claim``), and so is the cancel (``queued | scheduled →
cancelled`` where no attempt was counted). Whichever UPDATE commits first wins; the other moves
no row. A cancel that lost reads the state again and answers with it, so a notification is never
both cancelled and sent. A task still waiting in Redis for a cancelled row finds it no longer
queued and does nothing (``dispatch.deliver``).
"""

from backend.notifications.actions.delivery import _secrets_at_rest
from backend.notifications.actions.transitions import transition
from backend.notifications.models import Notification, State

# States a notification is in while no provider has seen it yet (a retry is queued again, but its
# attempt_count says a provider was called: that one is not cancellable).
CANCELLABLE = (State.SCHEDULED, State.QUEUED)
CANCEL_REASON = "cancelled-by-caller"


class NotCancellable(Exception):
    """The notification was already handed to a provider or has ended; ``state`` says where it is."""

    def __init__(self, state: str, attempts: int):
        self.state, self.attempts = state, attempts
        if state in CANCELLABLE:
            why = f"it was already handed to a provider ({attempts} attempt(s)) and is waiting for a retry"
        else:
            why = f"it is {state}"
        super().__init__(f"The notification cannot be cancelled: {why}.")


def _current(notification: Notification) -> tuple[str, int]:
    return Notification.objects.filter(pk=notification.pk).values_list("state", "attempt_count").get()


def cancel(notification: Notification) -> Notification:
    """Move ``notification`` to ``cancelled`` if it is scheduled or queued and no provider was called.

    Returns the notification with its new state (secret params masked: nothing renders it again);
    raises ``NotCancellable`` with the current state otherwise. Each try is one conditional UPDATE
    from the state just read; states move only forward (scheduled → queued → sending …), so at most
    one try per cancellable state can lose.
    """
    for _ in range(len(CANCELLABLE) + 1):
        state, attempts = _current(notification)
        if state not in CANCELLABLE or attempts:
            raise NotCancellable(state, attempts)
        moved = transition(
            notification, State.CANCELLED, CANCEL_REASON, from_state=state, where={"attempt_count": 0},
            **_secrets_at_rest(notification),
        )  # fmt: skip
        if moved:
            return notification
    raise NotCancellable(*_current(notification))
