#!/usr/bin/env python3
"""Every #include "..." under src/ points down the layers of src/README.md.

The table of src/README.md ("Layers": rank | folder | owns) is the one place
the order is written. A file in folder F may include a header of F itself or
of a folder of a lower rank; a folder of the same rank (a sibling) or a higher
one is an error, and so is a folder the table does not list. The folder of a
source is its first directory under src/; the folder of an include is its
first path component (`treemask/` is the public headers of include/).

  check_layers.py SOURCE_ROOT     check SOURCE_ROOT/src against its README
  check_layers.py --self-test     check that a bad include in a scratch tree
                                  fails (and that a good one passes)
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROW = re.compile(r"^\|\s*(\d+)\s*\|\s*`([a-z_]+)/`\s*\|")
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')
SOURCES = (".h", ".cc", ".cu", ".cuh")


def read_layers(readme):
    ranks = {}
    for line in open(readme, encoding="utf-8"):
        m = ROW.match(line)
        if m:
            ranks[m.group(2)] = int(m.group(1))
    return ranks


def check(root):
    src = os.path.join(root, "src")
    readme = os.path.join(src, "README.md")
    ranks = read_layers(readme)
    if not ranks:
        return ["%s: no layer table (rows `| rank | `folder/` | ... |`)" % readme]
    bad = []
    for dirpath, _, files in os.walk(src):
        for name in sorted(files):
            if not name.endswith(SOURCES):
                continue
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, src)
            folder = rel.split(os.sep)[0]
            if folder not in ranks:
                bad.append("src/%s: its folder %s/ is not in the layer table" % (rel, folder))
                continue
            for n, line in enumerate(open(path, encoding="utf-8"), 1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                target = m.group(1).split("/")[0]
                if "/" not in m.group(1) or target == folder:
                    continue  # a header beside it, or of its own folder
                if target not in ranks:
                    bad.append("src/%s:%d: includes %s, of a folder the layer table does not list"
                               % (rel, n, m.group(1)))
                elif ranks[target] >= ranks[folder]:
                    how = "a sibling of" if ranks[target] == ranks[folder] else "above"
                    bad.append("src/%s:%d: includes %s: %s/ (rank %d) is %s %s/ (rank %d)"
                               % (rel, n, m.group(1), target, ranks[target], how, folder,
                                  ranks[folder]))
    return bad


def self_test():
    """A scratch tree with this checkout's table: a file that includes a lower
    layer passes, one that includes a higher layer and one that includes a
    sibling fail, each naming the file and line."""
    here = os.path.dirname(os.path.abspath(__file__))
    readme = os.path.join(here, "..", "..", "src", "README.md")
    with tempfile.TemporaryDirectory() as tmp:
        os.makedirs(os.path.join(tmp, "src", "trie"))
        os.makedirs(os.path.join(tmp, "src", "strings"))
        shutil.copy(readme, os.path.join(tmp, "src", "README.md"))
        good = os.path.join(tmp, "src", "strings", "good.h")
        with open(good, "w") as f:
            f.write('#include "core/status.h"\n#include "trie/trie.h"\n#include "strings/vocab.h"\n')
        cases = [
            ("trie/up.cc", '#include "strings/string_set.h"\n', "is above trie/"),
            ("strings/side.cc", '#include "sources/rtp.h"\n', "is a sibling of strings/"),
            ("trie/public.cc", '#include "treemask/treemask.h"\n', "is above trie/"),
        ]
        if check(tmp):
            print("self-test: a tree with only good includes fails:", check(tmp))
            return 1
        for rel, text, why in cases:
            path = os.path.join(tmp, "src", rel)
            with open(path, "w") as f:
                f.write("// scratch\n" + text)
            out = subprocess.run([sys.executable, __file__, tmp], capture_output=True, text=True)
            if out.returncode == 0 or ("src/%s:2:" % rel) not in out.stdout or why not in out.stdout:
                print("self-test: the bad include of src/%s was not reported as %s:\n%s"
                      % (rel, why, out.stdout))
                return 1
            os.remove(path)
        print("self-test: %d bad includes in a scratch tree fail, naming file, line and layers"
              % len(cases))
        return 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    bad = check(sys.argv[1])
    print("\n".join(bad) or "every include under src/ points down the layers of src/README.md")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
