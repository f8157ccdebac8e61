"""CSV exports as a spreadsheet opens them: UTF-8 it recognizes, and no cell it runs as a formula.

Every CSV staff download (the support search, a campaign's ledger, an upload's unknown ids) starts
with ``BOM``, writes each cell others chose through ``spreadsheet_text``, and quotes every cell
(``QUOTING``).
"""

import csv

# Excel reads a CSV without a byte-order mark in the machine's ANSI code page: Arabic and Persian
# previews and names came out as mojibake. With it, Excel, LibreOffice and Numbers read UTF-8.
BOM = "\ufeff"

# Every cell quoted: Excel in German, French, Dutch or Russian settings splits a .csv on ";", and an unquoted
# "5;=2*21;" became a cell "=2*21" that the first-character guard never saw.
QUOTING = csv.QUOTE_ALL

# What makes a spreadsheet read a cell as a formula (OWASP "CSV Injection"): =, +, -, @, and a tab
# or carriage return in front of them.
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_text(value: str) -> str:
    """``value`` for a CSV cell a spreadsheet shows as text: one starting as a formula would gets a leading ``'``.

    For every cell others wrote or chose (a user id, a provider's reference or reason, a preview), and for
    values that start with ``+`` by nature (an E.164 phone, masked or not: ``+9665••••567`` is a formula to Excel).
    """
    return f"'{value}" if value[:1] in _FORMULA_STARTS else value
