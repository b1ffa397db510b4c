#!/usr/bin/env python3
# treemask — the stable-ABI check. Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""The stable ABI of libtreemask, checked with libabigail (abidw, abidiff).

The tiers come from the public headers: a TREEMASK_API function or a struct
declared inside a header's `#ifdef TREEMASK_EXPERIMENTAL` section is
experimental, everything else is stable (treemask.h "Stability tiers").

  abi.py tiers HEADER...                      the functions and structs of each tier
  abi.py check BASELINE_DIR LIBRARY HEADER...
      abidiff of LIBRARY against the baseline (BASELINE_DIR/treemask.abi and
      the stable functions it recorded, BASELINE_DIR/stable-functions.txt).
      Fails (exit 1) on an incompatible change to the stable tier: a stable
      function removed, demoted to the experimental tier or changed, a
      stable struct changed other than by appending fields to a struct
      versioned by its leading `size_t struct_size`. Experimental-tier
      changes and additions are reported and do not fail.
  abi.py baseline BASELINE_DIR LIBRARY HEADER...
      writes the baseline from LIBRARY (built with debug info): what
      `./dev abi-baseline` runs, deliberately, at a release.
  abi.py layout --write FILE | --check FILE  HEADER...
      the sizeof/offsetof table of every public struct that
      tests/abi/test_layout.c asserts (--check: the table covers exactly the
      structs and fields the headers declare; the C test checks the values).
  abi.py selfcheck WORKDIR CC HEADER...
      proves the check fails: builds a stand-in library of stubs from the
      headers, then from scratch copies with deliberate stable-tier breaks
      (each must fail), compatible changes and experimental-tier changes
      (each must pass, the latter reported).
"""
from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

EXPERIMENTAL_MACRO = "TREEMASK_EXPERIMENTAL"
ABI_FILE = "treemask.abi"
STABLE_FILE = "stable-functions.txt"
CONSTANTS_FILE = "stable-constants.txt"
# Macros that look like constants but are not part of the ABI: the .tmtrie
# format version says which file format the library writes (a new format is a
# CHANGELOG entry, and old files get TREEMASK_ERR_VERSION_MISMATCH).
NOT_ABI_CONSTANTS = {"TREEMASK_TMTRIE_FORMAT_VERSION"}


@dataclasses.dataclass
class Function:
    name: str
    header: str
    experimental: bool
    declaration: str  # "ret name(params)" without TREEMASK_API / TREEMASK_NODISCARD


@dataclasses.dataclass
class Struct:
    name: str
    header: str
    experimental: bool
    fields: list[str]
    versioned: bool  # first member is size_t struct_size


@dataclasses.dataclass
class Surface:
    functions: dict[str, Function]
    structs: dict[str, Struct]
    # Object-like TREEMASK_* macros of the stable tier with their values
    # (status codes, failure policies, dtypes, state sentinels): part of the
    # ABI although no debug info describes them.
    constants: dict[str, str] = dataclasses.field(default_factory=dict)

    def tier(self, experimental: bool) -> list[str]:
        return sorted(n for n, f in self.functions.items() if f.experimental == experimental)


def strip_comments(text: str) -> str:
    # Block comments become spaces with their newlines kept, so line-based
    # preprocessor tracking still sees one directive a line.
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n") or " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def parse_header(path: Path) -> Surface:
    """Functions and structs of one header, each with its tier.

    Tracks the preprocessor's nesting so that exactly the lines inside
    `#ifdef TREEMASK_EXPERIMENTAL` (at any depth below it) are experimental.
    Other conditionals (include guards, __cplusplus) do not change the tier."""
    text = strip_comments(path.read_text(encoding="utf-8"))
    stack: list[bool] = []  # per open #if: does it open the experimental section?
    constants: dict[str, str] = {}
    kept_lines: list[tuple[bool, str]] = []
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("#"):
            directive = s[1:].strip()
            if re.match(r"if(n?def)?\b", directive):
                stack.append(bool(re.fullmatch(r"ifdef\s+%s|if\s+defined\s*\(?\s*%s\s*\)?" % (
                    EXPERIMENTAL_MACRO, EXPERIMENTAL_MACRO), directive)))
            elif directive.startswith("endif"):
                if not stack:
                    raise SystemExit("%s: unbalanced #endif" % path)
                stack.pop()
            elif directive.startswith(("else", "elif")) and stack and stack[-1]:
                raise SystemExit("%s: #else/#elif of the %s section: the tiers would be ambiguous" % (
                    path, EXPERIMENTAL_MACRO))
            else:
                dm = re.fullmatch(r"define\s+(TREEMASK_[A-Z0-9_]+)\s+(.+)", directive)
                if dm and not any(stack) and dm.group(1) not in NOT_ABI_CONSTANTS and \
                        re.fullmatch(r"[()\w\s+\-*<>|&~]+", dm.group(2)) and re.search(r"\d", dm.group(2)):
                    constants[dm.group(1)] = " ".join(dm.group(2).split())
            continue
        kept_lines.append((any(stack), line))
    if stack:
        raise SystemExit("%s: unterminated #if" % path)

    # Statements (up to ';' or a struct body's closing '} name;'), each with
    # the tier of the line it starts on.
    functions: dict[str, Function] = {}
    structs: dict[str, Struct] = {}
    joined = "".join("\x00%d\x01%s\n" % (int(exp), line) for exp, line in kept_lines)
    for m in re.finditer(r"typedef\s+struct\s+(\w+)\s*\{(.*?)\}\s*(\w+)\s*;", joined, re.S):
        name = m.group(3)
        body = re.sub(r"\x00\d\x01", "", m.group(2))
        fields = []
        for member in body.split(";"):
            member = " ".join(member.split())
            if not member:
                continue
            fm = re.search(r"(\w+)\s*(\[[^\]]*\])?$", member)
            if not fm:
                raise SystemExit("%s: struct %s: cannot read member %r" % (path, name, member))
            fields.append(fm.group(1))
        exp = tier_at(joined, m.start())
        structs[name] = Struct(name, path.name, exp, fields,
                               versioned=bool(fields) and fields[0] == "struct_size" and
                               re.search(r"size_t\s+struct_size", body) is not None)
    for m in re.finditer(r"TREEMASK_API\s+([^;{}]*?)\b(treemask_\w+)\s*\(([^;{}]*?)\)\s*;", joined, re.S):
        ret = re.sub(r"\x00\d\x01", "", m.group(1))
        params = re.sub(r"\x00\d\x01", "", m.group(3))
        decl = " ".join(("%s %s(%s)" % (ret.strip(), m.group(2), params)).split())
        functions[m.group(2)] = Function(m.group(2), path.name, tier_at(joined, m.start()), decl)
    return Surface(functions, structs, constants)


def tier_at(joined: str, pos: int) -> bool:
    marker = joined.rfind("\x00", 0, pos + 1)
    return joined[marker + 1] == "1"


def parse_headers(headers: list[str]) -> Surface:
    surface = Surface({}, {})
    for h in headers:
        one = parse_header(Path(h))
        for table, new in ((surface.functions, one.functions), (surface.structs, one.structs),
                           (surface.constants, one.constants)):
            for name, item in new.items():
                if name in table:
                    raise SystemExit("%s declared twice (%s and %s)" % (name, table[name].header, item.header))
                table[name] = item
    if not surface.functions:
        raise SystemExit("no TREEMASK_API function found in %s" % " ".join(headers))
    return surface


# ---------------------------------------------------------------- abidiff

def run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


# What abidw leaves out of the representation: everything that is not the C
# API. The opaque handles (struct treemask_trie, ...) stay declaration-only,
# so their internals, the C++ runtime and simdjson never enter the baseline.
ABIDW_DROP = """\
[suppress_type]
  label = the library's internals and the C++ runtime
  name_regexp = ^(std|__gnu_cxx|__cxxabiv1|treemask|simdjson)::
  drop = yes

[suppress_function]
  label = everything but the C API
  name_not_regexp = ^treemask_
  drop = yes

[suppress_variable]
  label = no variable is part of the C API
  name_regexp = .*
  drop = yes
"""


def abidw(library: str, out: Path) -> None:
    """The C API of `library` (built with debug info) as abixml."""
    supp = out.with_name(out.name + ".drop.ini")
    supp.write_text(ABIDW_DROP, encoding="utf-8")
    cmd = ["abidw", "--no-corpus-path", "--no-comp-dir-path", "--short-locs", "--drop-undefined-syms",
           "--type-id-style", "hash", "--suppressions", str(supp), "--out-file", str(out), library]
    r = run(cmd)
    supp.unlink()
    if r.returncode != 0:
        raise SystemExit("abidw %s failed (%d):\n%s%s" % (library, r.returncode, r.stdout, r.stderr))
    text = out.read_text(encoding="utf-8")
    if "<function-decl name='treemask_version'" not in text:
        raise SystemExit("abidw found no debug info for treemask_version in %s: build it with debug info (-g)"
                         % library)


def suppressions(surface: Surface, stable_baseline: set[str], stable_run: bool, appended: set[str]) -> str:
    """libabigail suppression specifications for abidiff.

    The stable run accepts fields appended to a struct versioned by
    struct_size (the header's convention: the library reads min(struct_size,
    sizeof) bytes) and leaves out every function that was not stable at the
    baseline. The other run reports everything. `appended` names the structs
    whose change is exactly an append (struct_layouts): libabigail's
    has_data_member_inserted_at = end also hides other changes to a struct
    when nothing was inserted, so it is applied to those structs alone."""
    spec = []
    for s in sorted(surface.structs.values(), key=lambda s: s.name):
        if s.versioned and stable_run and s.name in appended:
            spec.append("[suppress_type]\n  label = %s: fields appended (versioned by struct_size)\n"
                        "  type_kind = struct\n  name = %s\n  has_data_member_inserted_at = end\n" % (s.name, s.name))
    if stable_run:
        # Every function that was not stable at the baseline: experimental
        # ones, removed or not (a stable function removed or demoted since is
        # caught before abidiff runs), and additions.
        stable = "|".join(sorted(stable_baseline))
        spec.append("[suppress_function]\n  label = not in the stable tier of the baseline\n"
                    "  name_not_regexp = ^(%s)$\n" % stable)
        spec.append("[suppress_function]\n  label = not in the stable tier of the baseline (symbol)\n"
                    "  symbol_name_not_regexp = ^(%s)$\n" % stable)
    return "\n".join(spec)


def struct_layouts(abi: Path) -> dict[str, tuple[int, list[tuple[str, str, int]]]]:
    """name -> (size in bits, [(member, spelled type, offset in bits)]) of every
    struct defined in an abixml file (the first definition of each name)."""
    import xml.etree.ElementTree as ET

    root = ET.parse(abi).getroot()
    by_id = {e.get("id"): e for e in root.iter() if e.get("id")}

    def spell(type_id: str | None, depth: int = 0) -> str:
        e = by_id.get(type_id or "")
        if e is None or depth > 20:
            return "?" if e is None else "..."
        tag, name = e.tag, e.get("name")
        if tag in ("type-decl", "typedef-decl", "enum-decl") and name:
            size = e.get("size-in-bits") or ""
            return name + (":" + size if tag == "type-decl" else "") + (
                "=" + spell(e.get("type-id"), depth + 1) if tag == "typedef-decl" else "")
        if tag == "class-decl":
            return "struct " + (name or "?")
        if tag == "pointer-type-def":
            return spell(e.get("type-id"), depth + 1) + "*"
        if tag == "qualified-type-def":
            quals = [q for q in ("const", "volatile") if e.get(q) == "yes"]
            return " ".join(quals) + " " + spell(e.get("type-id"), depth + 1)
        if tag == "array-type-def":
            return spell(e.get("type-id"), depth + 1) + "[%s]" % e.get("size-in-bits")
        return tag

    layouts: dict[str, tuple[int, list[tuple[str, str, int]]]] = {}
    for c in root.iter("class-decl"):
        name = c.get("name")
        if not name or name in layouts or c.get("is-declaration-only") == "yes":
            continue
        members = []
        for dm in c.findall("data-member"):
            var = dm.find("var-decl")
            if var is not None:
                members.append((var.get("name"), spell(var.get("type-id")), int(dm.get("layout-offset-in-bits", "0"))))
        layouts[name] = (int(c.get("size-in-bits", "0")), members)
    return layouts


def appended_only(old: tuple[int, list], new: tuple[int, list]) -> bool:
    """The new layout keeps every old member (name, type, offset) in front and
    only adds members after them."""
    old_members, new_members = old[1], new[1]
    return new[0] >= old[0] and new_members[:len(old_members)] == old_members


ABIDIFF_ERROR, ABIDIFF_USAGE_ERROR, ABIDIFF_ABI_CHANGE, ABIDIFF_ABI_INCOMPATIBLE_CHANGE = 1, 2, 4, 8


def abidiff(baseline_abi: Path, current_abi: Path, spec: str, extra: list[str], workdir: Path) -> tuple[int, str]:
    supp = workdir / "suppressions.ini"
    supp.write_text(spec, encoding="utf-8")
    r = run(["abidiff", "--suppressions", str(supp), "--no-show-locs", *extra, str(baseline_abi), str(current_abi)])
    if r.returncode & (ABIDIFF_ERROR | ABIDIFF_USAGE_ERROR):
        raise SystemExit("abidiff failed (%d):\n%s%s" % (r.returncode, r.stdout, r.stderr))
    return r.returncode, r.stdout


def read_soname(abi: Path) -> str:
    m = re.search(r"<abi-corpus [^>]*soname='([^']*)'", abi.read_text(encoding="utf-8"))
    return m.group(1) if m else ""


def check(baseline_dir: Path, library: str, headers: list[str], quiet_ok: bool = False) -> int:
    """0 = the stable tier is compatible with the baseline, 1 = it is not."""
    surface = parse_headers(headers)
    baseline_abi = baseline_dir / ABI_FILE
    stable_file = baseline_dir / STABLE_FILE
    constants_file = baseline_dir / CONSTANTS_FILE
    for f in (baseline_abi, stable_file, constants_file):
        if not f.is_file():
            raise SystemExit("no ABI baseline %s: write one with ./dev abi-baseline" % f)
    stable_baseline = {line.strip() for line in stable_file.read_text(encoding="utf-8").splitlines()
                       if line.strip() and not line.startswith("#")}
    failures = []
    for name in sorted(stable_baseline):
        f = surface.functions.get(name)
        if f is None:
            failures.append("stable function %s was removed from the headers" % name)
        elif f.experimental:
            failures.append("stable function %s was moved into the experimental section of %s" % (name, f.header))
    for line in constants_file.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            name, value = line.split(" ", 1)
            if name not in surface.constants:
                failures.append("stable constant %s (%s) was removed" % (name, value))
            elif surface.constants[name] != value:
                failures.append("stable constant %s changed: %s -> %s" % (name, value, surface.constants[name]))
    with tempfile.TemporaryDirectory(prefix="treemask-abi-") as tmp:
        work = Path(tmp)
        current = work / "current.abi"
        abidw(library, current)
        soname_note = ""
        old_soname, new_soname = read_soname(baseline_abi), read_soname(current)
        if old_soname != new_soname:
            # Before 1.0 the soname carries the minor version (meson.build):
            # a new minor changes it by policy, not by accident.
            soname_note = "soname %s -> %s (a new minor version)" % (old_soname, new_soname)
        old_layouts, new_layouts = struct_layouts(baseline_abi), struct_layouts(current)
        appended = {name for name, old in old_layouts.items()
                    if name in new_layouts and new_layouts[name] != old and appended_only(old, new_layouts[name])}
        stable_rc, stable_report = abidiff(baseline_abi, current,
                                           suppressions(surface, stable_baseline, True, appended),
                                           ["--no-added-syms"], work)
        all_rc, all_report = abidiff(baseline_abi, current, suppressions(surface, stable_baseline, False, appended),
                                     [], work)
    stable_changed = stable_rc & (ABIDIFF_ABI_CHANGE | ABIDIFF_ABI_INCOMPATIBLE_CHANGE)
    # A soname change alone is the minor-version policy; anything else in the
    # stable run is a stable-tier change.
    stable_lines = [line for line in stable_report.splitlines() if line.strip()]
    if stable_changed and soname_note and only_soname_change(stable_report):
        stable_changed = 0
    print("ABI baseline: %s (%d stable functions); library: %s" % (old_soname, len(stable_baseline), library))
    if soname_note:
        print(soname_note)
    new_stable = sorted(set(surface.tier(False)) - stable_baseline)
    if new_stable:
        print("new stable functions (added since the baseline): %s" % ", ".join(new_stable))
    if failures or stable_changed:
        print("\nFAIL: incompatible change to the stable tier")
        for f in failures:
            print("  " + f)
        if stable_changed:
            print("\n".join("  " + line for line in stable_lines))
        print("\nA stable function or struct may not change: add a new function or append a field to a\n"
              "struct_size-versioned struct instead. A deliberate break moves the baseline\n"
              "(./dev abi-baseline) and is listed under Breaking in CHANGELOG.md.")
        return 1
    if all_rc & (ABIDIFF_ABI_CHANGE | ABIDIFF_ABI_INCOMPATIBLE_CHANGE):
        print("\nstable tier compatible; changes since the baseline (experimental tier, additions,\n"
              "appended fields; reported, not a failure):")
        print("\n".join("  " + line for line in all_report.splitlines()))
    elif not quiet_ok:
        print("no ABI change since the baseline")
    return 0


def only_soname_change(report: str) -> bool:
    body = [line for line in report.splitlines() if line.strip()]
    other = [line for line in body if not re.search(r"SONAME|soname|^ELF SONAME|^\s*'.*' => '.*'$", line)
             and not line.startswith("Functions changes summary") and not line.startswith("Variables changes summary")
             and not line.startswith("Function symbols changes summary")
             and not line.startswith("Variable symbols changes summary")]
    return not other


def baseline(baseline_dir: Path, library: str, headers: list[str]) -> None:
    surface = parse_headers(headers)
    baseline_dir.mkdir(parents=True, exist_ok=True)
    abidw(library, baseline_dir / ABI_FILE)
    stable = surface.tier(False)
    (baseline_dir / STABLE_FILE).write_text(
        "# The stable functions of the ABI baseline (treemask.abi beside this file), written by\n"
        "# ./dev abi-baseline from the headers: a function listed here may not be removed, changed\n"
        "# or moved into an experimental section until the baseline moves deliberately.\n"
        + "".join(n + "\n" for n in stable), encoding="utf-8")
    (baseline_dir / CONSTANTS_FILE).write_text(
        "# The stable tier's TREEMASK_* constants and their values at the ABI baseline, written by\n"
        "# ./dev abi-baseline: a value may never change and a constant may not be removed.\n"
        + "".join("%s %s\n" % kv for kv in sorted(surface.constants.items())), encoding="utf-8")
    print("wrote %s (soname %s) and %s (%d stable, %d experimental functions)" % (
        baseline_dir / ABI_FILE, read_soname(baseline_dir / ABI_FILE), baseline_dir / STABLE_FILE,
        len(stable), len(surface.tier(True))))


# ---------------------------------------------------------------- layout table

LAYOUT_HEADER = ("/* Generated by tests/abi/abi.py layout --write from the public headers: the layout of every\n"
                 " * public struct, asserted by test_layout.c. Regenerate only for a deliberate change (a field\n"
                 " * appended to a struct_size-versioned struct, or a baseline move). */\n")


def layout_table(headers: list[str], cc: str) -> str:
    surface = parse_headers(headers)
    structs = sorted(surface.structs.values(), key=lambda s: (s.experimental, s.header, s.name))
    probe = ["#define TREEMASK_EXPERIMENTAL", "#include <stddef.h>", "#include <stdio.h>"]
    probe += ['#include "%s"' % Path(h).resolve() for h in headers]
    probe.append("int main(void) {")
    for s in structs:
        probe.append('  printf("TREEMASK_LAYOUT_SIZE(%s, %%zu);\\n", sizeof(%s));' % (s.name, s.name))
        for f in s.fields:
            probe.append('  printf("TREEMASK_LAYOUT_FIELD(%s, %s, %%zu);\\n", offsetof(%s, %s));' % (
                s.name, f, s.name, f))
    probe.append("  return 0;\n}")
    with tempfile.TemporaryDirectory(prefix="treemask-layout-") as tmp:
        src, exe = Path(tmp) / "probe.c", Path(tmp) / "probe"
        src.write_text("\n".join(probe) + "\n", encoding="utf-8")
        subprocess.run([cc, "-std=c99", str(src), "-o", str(exe)], check=True)
        out = run([str(exe)], check=True).stdout
    lines = out.splitlines()
    body, i = [], 0
    for s in structs:
        body.append("/* %s (%s, %s) */" % (s.name, s.header, "experimental" if s.experimental else "stable"))
        body.extend(lines[i:i + 1 + len(s.fields)])
        i += 1 + len(s.fields)
    return LAYOUT_HEADER + "\n".join(body) + "\n"


def layout_check(table_file: Path, headers: list[str]) -> int:
    surface = parse_headers(headers)
    text = table_file.read_text(encoding="utf-8")
    have_sizes = set(re.findall(r"TREEMASK_LAYOUT_SIZE\((\w+),", text))
    have_fields = set(re.findall(r"TREEMASK_LAYOUT_FIELD\((\w+), (\w+),", text))
    want_sizes = set(surface.structs)
    want_fields = {(s.name, f) for s in surface.structs.values() for f in s.fields}
    problems = ["struct %s: no size in the table" % n for n in sorted(want_sizes - have_sizes)]
    problems += ["struct %s: in the table, not in the headers" % n for n in sorted(have_sizes - want_sizes)]
    problems += ["%s.%s: no offset in the table" % f for f in sorted(want_fields - have_fields)]
    problems += ["%s.%s: in the table, not in the headers" % f for f in sorted(have_fields - want_fields)]
    for p in problems:
        print(p)
    if problems:
        print("regenerate %s with `python3 tests/abi/abi.py layout --write %s include/treemask/*.h`"
              " if the change is deliberate" % (table_file, table_file))
        return 1
    print("layout table covers %d structs, %d fields" % (len(want_sizes), len(want_fields)))
    return 0


# ---------------------------------------------------------------- self-check

def stub_library(headers_dir: Path, headers: list[str], cc: str, out: Path) -> None:
    """A shared library defining every TREEMASK_API function of `headers` as a
    stub, compiled with debug info: the same ABI surface as libtreemask."""
    surface = parse_headers([str(headers_dir / Path(h).name) for h in headers])
    src = ["#define TREEMASK_EXPERIMENTAL", "#include <string.h>"]
    src += ['#include "%s"' % (headers_dir / Path(h).name) for h in headers]
    for f in surface.functions.values():
        ret = f.declaration.split(f.name + "(")[0].strip()
        body = "" if ret == "void" else "%s r; memset(&r, 0, sizeof r); return r;" % ret
        src.append("%s { %s }" % (f.declaration, body))
    c = out.with_suffix(".c")
    c.write_text("\n".join(src) + "\n", encoding="utf-8")
    subprocess.run([cc, "-std=c99", "-g", "-O0", "-fPIC", "-shared", "-w", "-Wl,-soname,libtreemask.so.0.3",
                    str(c), "-o", str(out)], check=True)


# (label, header, old text, new text (None: move it into the experimental section), must fail)
MUTATIONS = [
    ("stable struct: a field changes type", "treemask.h",
     "  int32_t vocab_size;", "  int64_t vocab_size;", True),
    ("stable struct: a field inserted before the end", "treemask.h",
     "  int32_t vocab_size;", "  int32_t new_field;\n  int32_t vocab_size;", True),
    ("stable function removed", "treemask.h",
     "TREEMASK_API treemask_trie *treemask_trie_retain(treemask_trie *trie);", "", True),
    ("stable function: a parameter changes type", "treemask.h",
     "TREEMASK_API void treemask_trie_free(treemask_trie *trie);",
     "TREEMASK_API void treemask_trie_free(treemask_matcher *trie);", True),
    ("stable constant renumbered", "treemask.h",
     "#define TREEMASK_ERR_OUT_OF_MEMORY 5", "#define TREEMASK_ERR_OUT_OF_MEMORY 50", True),
    ("stable function: the return type changes", "treemask.h",
     "TREEMASK_API uint32_t treemask_version(void);", "TREEMASK_API uint64_t treemask_version(void);", True),
    ("stable function moved into the experimental section", "treemask.h",
     "TREEMASK_API treemask_trie *treemask_trie_retain(treemask_trie *trie);", None, True),
    ("stable CUDA function removed", "treemask_cuda.h",
     "TREEMASK_API bool treemask_cuda_available(void);", "", True),
    ("stable struct_size struct: a field appended (compatible)", "treemask.h",
     "  int32_t no_labels;\n", "  int32_t no_labels;\n  int64_t appended_field;\n", False),
    ("stable function added (compatible)", "treemask.h",
     "TREEMASK_API void treemask_trie_free(treemask_trie *trie);",
     "TREEMASK_API void treemask_trie_free(treemask_trie *trie);\n"
     "TREEMASK_API int32_t treemask_new_stable_function(int32_t x);", False),
    ("experimental struct: a field changes type (reported only)", "treemask.h",
     "  size_t beam_width;", "  uint32_t beam_width;", False),
    ("experimental function removed (reported only)", "treemask_cuda.h",
     "TREEMASK_API void treemask_cuda_trie_free(treemask_cuda_trie *dev_trie);", "", False),
]


def selfcheck(workdir: Path, cc: str, headers: list[str]) -> int:
    if workdir.exists():
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True)
    names = [Path(h).name for h in headers]
    src_dir = Path(headers[0]).resolve().parent
    ok_dir = workdir / "original" / "treemask"
    shutil.copytree(src_dir, ok_dir)
    base_lib = workdir / "original" / "libtreemask.so"
    stub_library(ok_dir, names, cc, base_lib)
    base_dir = workdir / "baseline"
    with open(os.devnull, "w") as devnull:
        stdout, sys.stdout = sys.stdout, devnull
        try:
            baseline(base_dir, str(base_lib), [str(ok_dir / n) for n in names])
        finally:
            sys.stdout = stdout
    failed = []
    # The unchanged headers must pass with nothing to report.
    cases = [("unchanged headers", None, None, None, False), *MUTATIONS]
    for label, header, old, new, must_fail in cases:
        case_dir = workdir / re.sub(r"\W+", "-", label).strip("-") / "treemask"
        shutil.copytree(src_dir, case_dir)
        if header:
            path = case_dir / header
            text = path.read_text(encoding="utf-8")
            if text.count(old) != 1:
                failed.append("%s: the text to change is not in %s exactly once: %r" % (label, header, old))
                continue
            if new is None:  # move the declaration to the end of the experimental section
                text = text.replace(old, "")
                end = text.rindex("#endif /* TREEMASK_EXPERIMENTAL */")
                text = text[:end] + old + "\n" + text[end:]
            else:
                text = text.replace(old, new)
            path.write_text(text, encoding="utf-8")
        lib = case_dir.parent / "libtreemask.so"
        stub_library(case_dir, names, cc, lib)
        with open(case_dir.parent / "report.txt", "w") as report:
            stdout, sys.stdout = sys.stdout, report
            try:
                rc = check(base_dir, str(lib), [str(case_dir / n) for n in names])
            finally:
                sys.stdout = stdout
        text = (case_dir.parent / "report.txt").read_text(encoding="utf-8")
        reported = "changes since the baseline" in text or "new stable functions" in text
        verdict = "fails" if rc else ("passes, reported" if reported else "passes")
        expected_ok = (rc != 0) == must_fail and (must_fail or (header is None) != reported)
        print("%-4s %-62s %s" % ("ok" if expected_ok else "BAD", label, verdict))
        if not expected_ok:
            failed.append("%s: %s, expected it to %s\n%s" % (
                label, verdict, "fail" if must_fail else ("pass" if header is None else "pass, reported"), text))
    for f in failed:
        print("\n" + f)
    print("self-check: %d cases, %d as expected" % (len(cases), len(cases) - len(failed)))
    return 1 if failed else 0


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__)
        return 2
    cmd, args = argv[1], argv[2:]
    if cmd == "tiers":
        surface = parse_headers(args)
        for exp in (False, True):
            names = surface.tier(exp)
            print("%s functions (%d): %s" % ("experimental" if exp else "stable", len(names), " ".join(names)))
        for exp in (False, True):
            names = sorted(n for n, s in surface.structs.items() if s.experimental == exp)
            print("%s structs (%d): %s" % ("experimental" if exp else "stable", len(names), " ".join(names)))
        return 0
    if cmd == "check":
        return check(Path(args[0]), args[1], args[2:])
    if cmd == "baseline":
        baseline(Path(args[0]), args[1], args[2:])
        return 0
    if cmd == "layout":
        mode, table = args[0], Path(args[1])
        if mode == "--write":
            table.write_text(layout_table(args[3:], args[2]), encoding="utf-8")
            print("wrote", table)
            return 0
        if mode == "--check":
            return layout_check(table, args[2:])
    if cmd == "selfcheck":
        return selfcheck(Path(args[0]), args[1], args[2:])
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
