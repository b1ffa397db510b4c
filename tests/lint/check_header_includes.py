#!/usr/bin/env python3
"""Public headers may include only <stdint.h>, <stddef.h>, <stdbool.h> and each other."""
import os
import re
import sys

allowed = {"stdint.h", "stddef.h", "stdbool.h"}
bad = []
for path in sys.argv[1:]:
    siblings = set(os.listdir(os.path.dirname(path)))
    for n, line in enumerate(open(path, encoding="utf-8"), 1):
        m = re.match(r'\s*#\s*include\s*[<"]([^>"]+)[>"]', line)
        if m and m.group(1) not in allowed and os.path.basename(m.group(1)) not in siblings:
            bad.append("%s:%d: includes %s" % (path, n, m.group(1)))
print("\n".join(bad) or "public headers include only the C standard basics")
sys.exit(1 if bad else 0)
