#!/usr/bin/env python3
"""Keeps only one architecture's cubins in a shared library's .nv_fatbin section.

Usage: prune_fatbin.py IN.so OUT.so [ARCH=90]

A fat binary container is a 16-byte header (magic 0xBA55ED50, u16 version, u16 header size, u64 size of the
entries) followed by entries, each an entry header (u16 kind: 1 PTX, 2 ELF; u16 version; u32 header size;
u64 payload size; the architecture as the 8th u32 word) and its payload. The payloads of every entry of
another architecture are overwritten with zero bytes, keeping every offset and size, so the library's layout
and the code the chosen architecture runs stay byte-identical, and the zeros compress to almost nothing.
The file's section table is read with readelf (binutils)."""
import struct
import subprocess
import sys

MAGIC = 0xBA55ED50


def fatbin_section(path):
    out = subprocess.run(["readelf", "-S", "-W", path], check=True, capture_output=True, text=True).stdout
    for line in out.splitlines():
        if ".nv_fatbin" in line:
            f = line.split("]", 1)[1].split()
            return int(f[3], 16), int(f[4], 16)  # file offset, size
    sys.exit(f"{path}: no .nv_fatbin section")


def main():
    src, dst = sys.argv[1], sys.argv[2]
    arch = int(sys.argv[3]) if len(sys.argv) > 3 else 90
    data = bytearray(open(src, "rb").read())
    off, size = fatbin_section(src)
    pos, end_sec = off, off + size
    kept = zeroed = kept_bytes = zeroed_bytes = containers = 0
    while pos + 16 <= end_sec:
        magic, _ver, hsz, fsz = struct.unpack_from("<IHHQ", data, pos)
        if magic != MAGIC:
            pos += 8  # containers are 8-byte aligned
            continue
        containers += 1
        e, end = pos + hsz, pos + hsz + fsz
        if end > end_sec:
            sys.exit(f"container at {pos:#x} runs past the section end")
        while e < end:
            kind, _ever, ehsz, psz = struct.unpack_from("<HHIQ", data, e)
            entry_arch = struct.unpack_from("<I", data, e + 28)[0]
            if ehsz < 32 or e + ehsz + psz > end:
                sys.exit(f"malformed entry at {e:#x}")
            if kind == 2 and entry_arch == arch:
                kept += 1
                kept_bytes += psz
            else:
                data[e + ehsz:e + ehsz + psz] = bytes(psz)
                zeroed += 1
                zeroed_bytes += psz
            e += ehsz + psz
        pos = end
    if kept == 0:
        sys.exit(f"no sm_{arch} cubin found")
    open(dst, "wb").write(data)
    print(f"{containers} containers: kept {kept} sm_{arch} cubins ({kept_bytes >> 20} MiB), "
          f"zeroed {zeroed} others ({zeroed_bytes >> 20} MiB)")


if __name__ == "__main__":
    main()
