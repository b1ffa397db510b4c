#!/usr/bin/env python3
"""The meson project version and soname must agree with include/treemask/version.h."""
import re
import sys

header, meson_version = sys.argv[1], sys.argv[2]
text = open(header, encoding="utf-8").read()
parts = {}
for name in ("MAJOR", "MINOR", "PATCH"):
    m = re.search(r"#define TREEMASK_VERSION_%s (\d+)" % name, text)
    if not m:
        sys.exit("version.h: TREEMASK_VERSION_%s not found" % name)
    parts[name] = m.group(1)
header_version = "%s.%s.%s" % (parts["MAJOR"], parts["MINOR"], parts["PATCH"])
if header_version != meson_version:
    sys.exit("version mismatch: version.h says %s, meson.build says %s" % (header_version, meson_version))
print("version %s agrees" % header_version)
