"""Long lists of values as one SQL parameter, for ``__in`` lookups over a batch of 1,000.

Django writes ``col IN (%s, %s, …)`` with a parameter per value and resolves each one as a
possible expression (``Lookup.resolve_expression_parameter``); psycopg then splits the statement at
every placeholder. For 1,000 values that was about a tenth of a batch send's CPU (README
"Throughput: the send API"). ``in_array`` gives PostgreSQL one array instead:
``col IN (SELECT unnest(%s::type[]))``, which the planner reads as a join on the same index.
``key_array`` writes an array of keys as one string, for statements that take ``%s::uuid[]`` themselves.
"""

import re
import uuid
from collections.abc import Iterable

from django.db import connection
from django.db.models.expressions import RawSQL


def in_array(values: Iterable, sql_type: str) -> RawSQL | list:
    """The right-hand side of ``field__in=`` for ``values`` of the column type ``sql_type`` (``bigint``, ``text``).

    On PostgreSQL one array parameter; elsewhere (SQLite, the embedded default) the plain list.
    """
    values = list(values)
    if connection.vendor != "postgresql":
        return values
    return RawSQL(f"SELECT unnest(%s::{sql_type}[])", [values])


def key_array(ids: list) -> str:
    """PostgreSQL's text form of an array of uuid or integer keys, ``{…,…}``, for a ``%s::uuid[]`` parameter.

    psycopg quotes a list element by element (a tenth of a batch's CPU went to arrays of ids);
    a key's text needs no quoting, so the array is one string. Raises ``ValueError`` for a
    key that is neither a UUID (or its text) nor an integer: nothing else may reach the SQL.
    """
    text = []
    for key in ids:
        if key is None:
            text.append("NULL")
        elif isinstance(key, uuid.UUID | int) and not isinstance(key, bool):
            text.append(str(key))
        elif isinstance(key, str) and _UUID_TEXT.fullmatch(key):
            text.append(key)
        else:
            raise ValueError(f"not a key: {key!r}")
    return "{" + ",".join(text) + "}"


# The text of a UUID (PostgreSQL checks the rest): nothing in it needs quoting.
_UUID_TEXT = re.compile(r"[0-9a-fA-F-]{32,36}")
