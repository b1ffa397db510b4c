#!/usr/bin/env python3
"""Exported symbols of libtreemask must be exactly the TREEMASK_API functions
declared in the public headers: nothing internal leaks, nothing declared is
missing (harfbuzz's check-symbols idea)."""
import re
import subprocess
import sys

library, headers = sys.argv[1], sys.argv[2:]
declared = set()
for h in headers:
    text = open(h, encoding="utf-8").read()
    # TREEMASK_API <return type> name(   -- possibly across lines
    for m in re.finditer(r"TREEMASK_API\s+[^;(]*?\b(treemask_\w+)\s*\(", text):
        declared.add(m.group(1))
out = subprocess.run(["nm", "-D", "--defined-only", library], check=True, capture_output=True,
                     text=True).stdout
exported = set()
for line in out.splitlines():
    fields = line.split()
    if len(fields) == 3 and fields[1] in "TtWwDdBbRrVv":
        name = fields[2].split("@")[0]
        if name.startswith("_init") or name.startswith("_fini") or name in ("_edata", "_end", "__bss_start"):
            continue
        exported.add(name)
leaked = sorted(exported - declared)
missing = sorted(declared - exported)
for name in leaked:
    print("exported but not declared in a public header:", name)
for name in missing:
    print("declared TREEMASK_API but not exported:", name)
if leaked or missing:
    sys.exit(1)
print("%d exported symbols match the headers" % len(exported))
