"""Logging filters named in settings.LOGGING."""

import logging

# Refusals the site answers on purpose: the traceback of the exception that made them says nothing.
ONE_LINE_STATUSES = frozenset({403})


class OneLineRefusals(logging.Filter):
    """Drops the traceback from ``django.request``'s record of a 403 ("Forbidden (Permission denied): /path").

    Django logs a PermissionDenied with its ``exc_info`` (``django.core.handlers.exception``), which
    prints the whole stack for a support agent who clicked a link their role does not open.
    The record stays, as one line with the path and the user. A record is shortened once, however
    many instances are attached (``logging.config.dictConfig`` run again adds its filters again).
    """

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "status_code", None) in ONE_LINE_STATUSES and not getattr(record, "one_line", False):
            record.one_line = True
            record.exc_info = record.exc_text = None
            request = getattr(record, "request", None)
            user = getattr(request, "user", None)
            if user is not None and user.is_authenticated and isinstance(record.args, tuple):
                record.msg = f"{record.msg} (user %s)"
                record.args = (*record.args, user.get_username())
        return True
