#!/usr/bin/env python3
"""libtreemask must load where there is no CUDA driver or runtime: no NEEDED
entry may name a CUDA library (the runtime is linked statically). With CUDA
built, the embedded kernels must be exactly the requested architectures:
SASS for each of gpu_archs and PTX for the last one, never a toolchain's
automatic list.

usage: check_cuda_linkage.py LIBRARY cuda|no-cuda [ARCH ...]
"""
import re
import struct
import subprocess
import sys

FATBIN_MAGIC = 0xBA55ED50
KIND_PTX, KIND_ELF = 1, 2


def fatbin_entries(data):
    """(kind, arch) of every image in every fatbin blob of the file.

    Layout (stable since CUDA 4): a 16-byte header {u32 magic, u16 version,
    u16 header size, u64 payload size}, then entries {u16 kind, u16 version,
    u32 header size, u64 payload size, ..., u32 arch at offset 28}."""
    entries = []
    at = data.find(struct.pack("<I", FATBIN_MAGIC))
    while at >= 0:
        _, _, header, size = struct.unpack_from("<IHHQ", data, at)
        pos, end = at + header, at + header + size
        while pos < end:
            kind, _, entry_header, payload = struct.unpack_from("<HHIQ", data, pos)
            (arch,) = struct.unpack_from("<I", data, pos + 28)
            entries.append((kind, arch))
            pos += entry_header + payload
        at = data.find(struct.pack("<I", FATBIN_MAGIC), end)
    return entries


def main():
    library, mode, archs = sys.argv[1], sys.argv[2], [int(a) for a in sys.argv[3:]]
    problems = []
    dynamic = subprocess.run(["readelf", "-d", library], check=True, capture_output=True,
                             text=True).stdout
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", dynamic)
    for lib in needed:
        if re.match(r"lib(cuda|cudart|nvrtc|nvJitLink|cublas)", lib):
            problems.append("libtreemask needs %s: it would not load without CUDA installed" % lib)
    sections = subprocess.run(["readelf", "-S", "-W", library], check=True, capture_output=True,
                              text=True).stdout
    has_fatbin = ".nv_fatbin" in sections
    if mode == "no-cuda":
        if has_fatbin:
            problems.append("built without CUDA, yet the library embeds CUDA kernels")
    elif not has_fatbin:
        problems.append("built with CUDA, yet the library embeds no CUDA kernels (.nv_fatbin)")
    else:
        entries = fatbin_entries(open(library, "rb").read())
        sass = sorted({arch for kind, arch in entries if kind == KIND_ELF})
        ptx = sorted({arch for kind, arch in entries if kind == KIND_PTX})
        if sass != sorted(set(archs)):
            problems.append("SASS architectures %s, expected gpu_archs %s" % (sass, archs))
        if ptx != [archs[-1]]:
            problems.append("PTX architectures %s, expected only %s" % (ptx, archs[-1]))
        print("kernels: SASS %s, PTX %s" % (sass, ptx))
    print("NEEDED: %s" % ", ".join(needed))
    for p in problems:
        print("error:", p)
    sys.exit(1 if problems else 0)


main()
