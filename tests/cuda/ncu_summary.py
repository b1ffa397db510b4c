#!/usr/bin/env python3
"""A readable summary of an Nsight Compute report's CSV exports
(tests/cuda/ncu_profile.sh): for each profiled kernel launch, one line
`kernel N: NAME grid x block, T us, R registers, occupancy P%, stalls: ...`
(the warp-state reasons in cycles per issued instruction, largest first),
then the SASS instructions holding the most stall samples from the source
page: `  +0x0ab0  12.3%  BAR.SYNC.DEFER_BLOCKING 0x0` (the offset as
`nvdisasm -g` prints it for the same cubin), each with its source line when
a listing of the cubin with line information is given, and the source lines
holding the most samples.

usage: ncu_summary.py RAW_CSV [SOURCE_CSV [LISTING]] | --self-test
  RAW_CSV     ncu --import R --page raw --csv
  SOURCE_CSV  ncu --import R --page source --csv (SASS, one block a kernel)
  LISTING     nvdisasm -gi -c of the cubin that ran (built with -lineinfo)

Exit status 0 with a summary, 1 when RAW_CSV holds no kernel row.
--self-test: the parsing on small pages in ncu's and nvdisasm's layouts
(suite lint; the stand-in ncu of tests/cuda/check_gpu_run.sh runs the rest).

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
import csv
import re
import sys

TOP_STALLS = 6
TOP_INSTRUCTIONS = 10
TOP_LINES = 8
SAMPLES = "Warp Stall Sampling (All Samples)"
STALL_RATIO = re.compile(r"^smsp__average_warps_issue_stalled_(\w+?)_per_issue_active\.ratio$")
STALL_SAMPLES = re.compile(r"^smsp__pcsamp_warps_issue_stalled_(\w+)$")
TIME_UNITS = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3,
              "second": 1e6, "s": 1e6}


def number(text):
    """A CSV cell as a float (thousands separators dropped), or None."""
    try:
        return float((text or "").replace(",", "").strip())
    except ValueError:
        return None


def read_rows(path):
    with open(path, newline="", encoding="utf-8", errors="replace") as f:
        return list(csv.reader(f))


def short_name(name):
    """treemask::cuda::device::(anonymous namespace)::beam_step_kernel(...) -> beam_step_kernel."""
    base = name.replace("(anonymous namespace)", "").split("(")[0]
    return base.split("::")[-1] or name


def kernel_rows(rows):
    """The raw page's kernel rows as dicts, and its units row (the line after
    the header, whose first cells are empty)."""
    header = next((i for i, row in enumerate(rows) if "Kernel Name" in row and "ID" in row), None)
    if header is None:
        return [], {}
    names = rows[header]
    body = rows[header + 1:]
    k = names.index("Kernel Name")
    units = {}
    if body and len(body[0]) == len(names) and not body[0][k].strip():
        units = dict(zip(names, body[0]))
        body = body[1:]
    return [dict(zip(names, row)) for row in body if len(row) == len(names)], units


def stalls(row):
    """(reason, value) largest first: cycles per issued instruction where
    the report has them, else PC-sampling counts."""
    found = [(m.group(1), number(v)) for k, v in row.items() if (m := STALL_RATIO.match(k))]
    if not found:
        found = [(m.group(1), number(v)) for k, v in row.items()
                 if (m := STALL_SAMPLES.match(k)) and not m.group(1).endswith("not_issued")]
    found = [(r, v) for r, v in found if v is not None and v > 0]
    return sorted(found, key=lambda rv: -rv[1])


def kernel_line(n, row, units):
    parts = ["kernel %d: %s" % (n, short_name(row.get("Kernel Name", "?")))]
    grid, block = row.get("Grid Size", ""), row.get("Block Size", "")
    if grid or block:
        parts[0] += " %s x %s" % (grid, block)
    time = number(row.get("gpu__time_duration.sum"))
    if time is not None:
        scale = TIME_UNITS.get(units.get("gpu__time_duration.sum", "nsecond").strip(), 1e-3)
        parts.append("%.1f us" % (time * scale))
    regs = number(row.get("launch__registers_per_thread"))
    if regs is not None:
        parts.append("%d registers" % regs)
    occupancy = number(row.get("sm__warps_active.avg.pct_of_peak_sustained_active"))
    if occupancy is not None:
        parts.append("occupancy %.1f%%" % occupancy)
    latency = number(row.get("smsp__average_warp_latency_per_inst_issued.ratio"))
    if latency is not None:
        parts.append("%.1f cycles per issue" % latency)
    top = stalls(row)[:TOP_STALLS]
    if top:
        parts.append("stalls: " + ", ".join("%s %.1f" % rv for rv in top))
    return ", ".join(parts)


def source_blocks(rows):
    """Each kernel's SASS rows from the source page: a block starts at a
    header row naming Address, Source and the stall samples."""
    blocks = []
    columns = None
    for row in rows:
        if "Address" in row and "Source" in row:
            columns = row
            blocks.append((columns, []))
        elif columns is not None and len(row) == len(columns):
            blocks[-1][1].append(dict(zip(columns, row)))
    return blocks


def opcode(text):
    """An instruction's opcode without its modifiers or predicate: BAR, LDG."""
    words = text.split()
    word = words[1] if words and words[0].startswith("@") and len(words) > 1 else (words[0] if words else "?")
    return word.split(".")[0]


def listing_lines(path):
    """{mangled function: {offset: (place, opcode)}}, place "file:line (in
    file:line)", from an `nvdisasm -gi` listing: its `.text.NAME:` labels,
    `//## File "F", line N [inlined at "G", line M]` comments and `/*0ab0*/`
    offsets."""
    where = re.compile(r'//## File "([^"]+)", line (\d+)(?: inlined at "([^"]+)", line (\d+))?')
    functions, current, place = {}, None, ""

    def short(path):
        return path.split("/src/")[-1] if "/src/" in path else path.rsplit("/", 1)[-1]

    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            if line.startswith(".text.") and line.rstrip().endswith(":"):
                current = functions.setdefault(line.strip()[len(".text."):-1], {})
                place = ""
                continue
            m = where.search(line)
            if m:
                place = "%s:%s" % (short(m.group(1)), m.group(2))
                if m.group(3):
                    place += " (in %s:%s)" % (short(m.group(3)), m.group(4))
                continue
            m = re.search(r"/\*([0-9a-f]{4,})\*/\s*(.*?)\s*;?\s*(?:/\*.*)?$", line)
            if m and current is not None:
                current[int(m.group(1), 16)] = (place, opcode(m.group(2)))
    return functions


def lines_of(functions, kernel):
    """The listing's offsets for a kernel by its short name (mangled names
    carry it with its length: 16beam_step_kernel, not 21warp_beam_step_kernel)."""
    tag = "%d%s" % (len(kernel), kernel)
    found = [lines for name, lines in functions.items() if tag in name]
    # A cubin built without -lineinfo has offsets but no places: none then.
    return found[0] if len(found) == 1 and any(place for place, _ in found[0].values()) else {}


def ranked(keys, counts):
    """(key, summed count) over equal keys, largest first."""
    totals = {}
    for key, c in zip(keys, counts):
        totals[key] = totals.get(key, 0.0) + c
    return sorted(totals.items(), key=lambda kv: -kv[1])


def sass_lines(columns, instructions, places=None):
    if SAMPLES not in columns:
        return ["  (no '%s' column: %s)" % (SAMPLES, ", ".join(columns[:8]))]
    counts = [number(i.get(SAMPLES)) or 0.0 for i in instructions]
    total = sum(counts)
    if total <= 0:
        return ["  (no stall samples)"]
    order = sorted(range(len(instructions)), key=lambda i: -counts[i])[:TOP_INSTRUCTIONS]
    # Offsets from the function's start: from the addresses where they are
    # hex numbers, else by position (every instruction is 16 bytes since Volta).
    try:
        addresses = [int(i.get("Address", ""), 16) for i in instructions]
        offsets = [a - min(addresses) for a in addresses]
    except ValueError:
        offsets = [16 * i for i in range(len(instructions))]
    ops = [opcode(i.get("Source", "")) for i in instructions]
    lines = ["  %d stall samples over %d instructions; the most:" % (total, len(instructions))]
    # The listing must be of the cubin that ran: the same opcodes where the
    # samples are.
    if places and any(places.get(offsets[i], ("", ""))[1] != ops[i] for i in order if counts[i] > 0):
        lines.append("  note: the listing's instructions differ from the profile's: not the cubin that ran,"
                     " source lines left out")
        places = {}
    # Each instruction's source line ("" where the listing has none).
    wheres = [places.get(o, ("",))[0] if places else "" for o in offsets]
    for i in order:
        if counts[i] <= 0:
            break
        lines.append("  +0x%04x %5.1f%%  %s%s" % (offsets[i], 100.0 * counts[i] / total,
                                                  " ".join(instructions[i].get("Source", "").split()),
                                                  "  @ " + wheres[i] if wheres[i] else ""))
    if places:
        lines.append("  by source line:")
        for where, c in ranked([w or "?" for w in wheres], counts)[:TOP_LINES]:
            lines.append("    %5.1f%%  %s" % (100.0 * c / total, where))
    lines.append("  by opcode: " + ", ".join("%s %.1f%%" % (op, 100.0 * c / total)
                                             for op, c in ranked(ops, counts)[:6]))
    return lines


SELF_TEST_RAW = """==PROF== Connected to process 7
"ID","Kernel Name","Block Size","Grid Size","gpu__time_duration.sum","launch__registers_per_thread",\
"smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio",\
"smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio"
"","","","","usecond","register/thread","inst","inst"
"0","ns::(anonymous namespace)::beam_step_kernel(ns::BeamStep)","(256, 1, 1)","(140, 1, 1)","1,015.5","64","3.5","7"
"1","ns::(anonymous namespace)::warp_beam_step_kernel(ns::BeamStep)","(256, 1, 1)","(8, 1, 1)","2","72","0","1"
""".replace("\\\n", "")
SELF_TEST_SOURCE = """"Kernel Name","beam_step_kernel"
"Address","Source","Warp Stall Sampling (All Samples)"
"0x7f00","LDC R1, c[0x0][0x28]","1"
"0x7f10","@!P0 BAR.SYNC.DEFER_BLOCKING 0x0","3"
"0x7f20","LDG.E.64 R2, desc[UR4][R4.64]","6"
"Kernel Name","warp_beam_step_kernel"
"Address","Source","Warp Stall Sampling (All Samples)"
"0x9f00","EXIT","4"
"""
SELF_TEST_LISTING = """.text._ZN2ns16beam_step_kernelENS_8BeamStepE:
\t//## File "/x/build/../src/kernels/cuda/beam_kernels.cuh", line 247
        /*0000*/                   LDC R1, c[0x0][0x28] ;
\t//## File "/x/src/kernels/cuda/selection.cuh", line 90 inlined at "/x/src/kernels/cuda/beam_kernels.cuh", line 250
        /*0010*/              @!P0 BAR.SYNC.DEFER_BLOCKING 0x0 ;
        /*0020*/                   LDG.E.64 R2, desc[UR4][R4.64] ;
.text._ZN2ns21warp_beam_step_kernelENS_8BeamStepE:
\t//## File "/x/src/kernels/cuda/beam_kernels.cuh", line 300
        /*0000*/                   NOP ;
"""


def self_test():
    import contextlib
    import io
    import os
    import tempfile

    def run(pages):
        with tempfile.TemporaryDirectory() as d:
            paths = []
            for i, text in enumerate(pages):
                paths.append(os.path.join(d, "page%d" % i))
                with open(paths[-1], "w", encoding="utf-8") as f:
                    f.write(text)
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                rc = main(["ncu_summary.py", *paths])
            return rc, out.getvalue().splitlines()

    failures = []

    def expect(what, ok):
        if not ok:
            failures.append(what)

    rc, lines = run([SELF_TEST_RAW, SELF_TEST_SOURCE, SELF_TEST_LISTING])
    expect("exit status 0", rc == 0)
    expect("the block kernel's line", "kernel 0: beam_step_kernel (140, 1, 1) x (256, 1, 1), 1015.5 us, 64 registers,"
           " stalls: long_scoreboard 7.0, barrier 3.5" in lines)
    expect("the most sampled instruction with its inlined source line",
           "  +0x0020  60.0%  LDG.E.64 R2, desc[UR4][R4.64]  @ kernels/cuda/selection.cuh:90"
           " (in kernels/cuda/beam_kernels.cuh:250)" in lines)
    expect("samples by source line", "     90.0%  kernels/cuda/selection.cuh:90 (in kernels/cuda/beam_kernels.cuh:250)"
           in lines)
    expect("samples by opcode", "  by opcode: LDG 60.0%, BAR 30.0%, LDC 10.0%" in lines)
    warp = next(n for n, line in enumerate(lines) if line.startswith("kernel 1:"))
    expect("the warp kernel's own listing, whose opcode differs",
           any("not the cubin that ran" in line for line in lines[warp:]))
    no_lines = "".join(line for line in SELF_TEST_LISTING.splitlines(True) if "//##" not in line)
    rc, lines = run([SELF_TEST_RAW, SELF_TEST_SOURCE, no_lines])
    expect("a listing without line information: SASS offsets alone", rc == 0 and
           "  +0x0020  60.0%  LDG.E.64 R2, desc[UR4][R4.64]" in lines and "  by source line:" not in lines)
    rc, lines = run([SELF_TEST_RAW, SELF_TEST_SOURCE.split('"Kernel Name","warp')[0]])
    expect("a source page of fewer kernels is noted, not matched", rc == 0 and any(
        line.startswith("note: 2 kernels in the raw page, 1 in the source page") for line in lines))
    rc, lines = run([SELF_TEST_SOURCE])
    expect("no kernel rows: exit 1", rc == 1)
    for what in failures:
        print("FAIL ncu_summary self-test: " + what)
    if not failures:
        print("ncu_summary self-test: passed")
    return 1 if failures else 0


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    if len(argv) not in (2, 3, 4):
        sys.exit(__doc__)
    rows, units = kernel_rows(read_rows(argv[1]))
    if not rows:
        print("ncu_summary: no kernel rows in %s" % argv[1])
        return 1
    blocks = source_blocks(read_rows(argv[2])) if len(argv) >= 3 else []
    functions = listing_lines(argv[3]) if len(argv) == 4 else {}
    if len(argv) >= 3 and len(blocks) != len(rows):
        print("note: %d kernels in the raw page, %d in the source page: SASS not matched" % (len(rows),
                                                                                          len(blocks)))
        blocks = []
    for n, row in enumerate(rows):
        print(kernel_line(n, row, units))
        if blocks:
            places = lines_of(functions, short_name(row.get("Kernel Name", "")))
            for line in sass_lines(*blocks[n], places):
                print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
