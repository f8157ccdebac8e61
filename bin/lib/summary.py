"""Print one closing line for all pytest runs of bin/test: 'N passed, N failed, N skipped'."""

import sys
import xml.etree.ElementTree as ET

passed = failed = skipped = 0
for path in sys.argv[1:]:
    for suite in ET.parse(path).getroot().iter("testsuite"):
        total, errors, failures, skips = (int(suite.get(k, 0)) for k in ("tests", "errors", "failures", "skipped"))
        failed += errors + failures
        skipped += skips
        passed += total - errors - failures - skips
print(f"total: {passed} passed, {failed} failed, {skipped} skipped")
