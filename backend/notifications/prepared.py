"""Statements that PostgreSQL plans once per connection instead of on every run: the send path's hot statements.

Django binds parameters on the client (psycopg's ``ClientCursor``), where nothing can be prepared,
and turns psycopg's preparation off (``prepare_threshold`` None, for connection poolers in
transaction mode, which this deployment does not use). A send's two statements were planned on
every run: about 0.6 ms for its read (four times its execution) and 0.17 ms for its insert, plus
the client's quoting of every value into the text (README "Throughput: the send API").
``prepared_cursor`` gives a Django cursor (logged, wrapped, errors mapped as usual) whose
statements bind on the server and are prepared on their first run in each connection.
"""

from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connection
from django.db.backends.postgresql.base import ServerBindingCursor
from django.db.backends.utils import CursorWrapper

# psycopg's automatic preparation threshold once set here: never reached by another statement, so
# only those run through ``prepared_cursor`` are prepared (Django's own cursors never prepare).
_PREPARE_THRESHOLD = 2**31


class _PreparingCursor(ServerBindingCursor):
    """A psycopg cursor that binds on the server and prepares each statement it runs."""

    def execute(self, query, params=None, **kwargs):
        if self.connection.prepare_threshold is None:
            self.connection.prepare_threshold = _PREPARE_THRESHOLD
        return super().execute(query, params, prepare=True, **kwargs)

    def _send_query_prepared(self, name, pgq, **kwargs) -> None:
        # psycopg keeps no query text for a prepared run; Django's query log reads it (last_executed_query).
        self._query = pgq
        super()._send_query_prepared(name, pgq, **kwargs)


@contextmanager
def prepared_cursor() -> Iterator[CursorWrapper]:
    """A cursor of the default connection whose statements are prepared (PostgreSQL only).

    Parameters bind on the server: give each one a type where PostgreSQL cannot infer it
    (``%s::uuid[]``). A statement changes its plan only with the schema (psycopg forgets its
    prepared statements after a DROP or ALTER).
    """
    with connection.cursor() as cursor:
        client_side, cursor.cursor = cursor.cursor, _PreparingCursor(connection.connection)
        client_side.close()
        yield cursor
