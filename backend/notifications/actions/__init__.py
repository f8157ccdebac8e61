"""Every state change of a notification, each atomic and recorded as a StateChange.

Views and workers call these; nothing else writes ``Notification.state``.
One module per topic: ``accept`` (the send path), ``accept_batch`` (the same
for many at once, set-based), ``delivery`` (worker transitions), ``templates``
(drafts, approval and review), ``send_to_self`` (a template test to its staff
member, imported as a module), ``preferences`` (contact data, preferences,
devices); ``transitions`` holds the conditional UPDATE they all use.
"""

from backend.notifications.actions.accept import (
    Accepted,
    AcceptError,
    IdempotencyConflict,
    SendRequest,
    accept,
    scope_of,
)
from backend.notifications.actions.accept_batch import MAX_BATCH, accept_batch
from backend.notifications.actions.delivery import (
    NOT_BILLED,
    claim,
    claimable_sql,
    dead_letter,
    disable_address,
    expire,
    finish_attempt,
    mark_failed,
    mark_sent,
    release,
    replay,
    requeue_for_retry,
    start_attempt,
)
from backend.notifications.actions.preferences import (
    BY_ONE_CLICK,
    BY_PREFERENCE_CENTER,
    BY_STOP_ALL_MARKETING,
    BY_UNSUBSCRIBE_PAGE,
    PreferenceRefused,
    by_api_client,
    channels_by_kind,
    check_preference,
    register_device,
    set_locale,
    set_marketing,
    set_preference,
    set_quiet_hours,
    unregister_device,
    update_preferences,
    upsert_recipient,
)
from backend.notifications.actions.templates import (
    ApprovalRefused,
    ContentChanged,
    approval_problem,
    approve_template,
    review_template,
    save_template_draft,
)

__all__ = [
    "BY_ONE_CLICK",
    "BY_PREFERENCE_CENTER",
    "BY_STOP_ALL_MARKETING",
    "BY_UNSUBSCRIBE_PAGE",
    "MAX_BATCH",
    "NOT_BILLED",
    "AcceptError",
    "Accepted",
    "ApprovalRefused",
    "ContentChanged",
    "IdempotencyConflict",
    "PreferenceRefused",
    "SendRequest",
    "accept",
    "accept_batch",
    "approval_problem",
    "approve_template",
    "by_api_client",
    "channels_by_kind",
    "check_preference",
    "claim",
    "claimable_sql",
    "dead_letter",
    "disable_address",
    "expire",
    "finish_attempt",
    "mark_failed",
    "mark_sent",
    "register_device",
    "release",
    "replay",
    "requeue_for_retry",
    "review_template",
    "save_template_draft",
    "scope_of",
    "set_locale",
    "set_marketing",
    "set_preference",
    "set_quiet_hours",
    "start_attempt",
    "unregister_device",
    "update_preferences",
    "upsert_recipient",
]
