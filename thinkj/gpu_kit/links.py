"""Whether every shared library the kit's native extensions link against is there on the device
(``python -m thinkj.gpu_kit links``, after ``build`` and ``standin``).

An extension's ELF ``DT_NEEDED`` entries name the libraries the dynamic loader must find when Python imports it. The
device image's torch is the CUDA 13 build (``libcudart.so.13``, ``libnvrtc.so.13`` from its ``nvidia-*`` packages), so
a wheel built for another CUDA major, or one needing a library of a package the kit left out, imports on this CPU
machine's rehearsal only as far as the extension is never loaded, and fails on the device the first time it is: in
vLLM's case at engine start, minutes into a device call. This check finds such a wheel here, from the files alone: a
name counts as provided when a file of that name (or with that ``DT_SONAME``) is in a kit wheel or in the image's
stand-in (:func:`thinkj.gpu_kit.build.build_standin`), or when it is a system library (:data:`SYSTEM`).

What it does not model: the loader's search order (RUNPATH, what ``import torch`` loads first), so a name found in the
wrong folder passes; symbol versions. Standard library only, as the rest of the kit.
"""

from __future__ import annotations

import io
import re
import struct
import zipfile
from pathlib import Path
from typing import BinaryIO

from thinkj.gpu_kit.device import KitError

# Libraries the device's system provides rather than a wheel: glibc's, the C++ runtime, zlib (the manylinux policies'
# system libraries that the kit's wheels name) and the NVIDIA driver's, which the device's /usr/local/nvidia mounts.
# The env step of scripts/gpu_device_run.sh loads each there by name (ctypes), so the assumption is read on the device.
SYSTEM: frozenset[str] = frozenset({
    "libc.so.6", "libm.so.6", "libpthread.so.0", "libdl.so.2", "librt.so.1", "libutil.so.1", "libresolv.so.2",
    "ld-linux-x86-64.so.2", "libstdc++.so.6", "libgcc_s.so.1", "libz.so.1",
    "libcuda.so.1", "libnvidia-ml.so.1",
})
_SO = re.compile(r"\.so(\.\d+)*$")
# an extension for another CPython than the device's 3.12 (vLLM ships DeepGEMM's for 3.10-3.14): never loaded there
_OTHER_PYTHON = re.compile(r"\.cpython-3(?!12-)\d+-")
_DT_NEEDED, _DT_SONAME, _SHT_DYNAMIC = 1, 14, 6


def is_library(name: str) -> bool:
    """A shared object by its file name (``x.so``, ``libcudart.so.13``), not one built for another CPython."""
    base = name.rsplit("/", 1)[-1]
    return bool(_SO.search(base)) and not _OTHER_PYTHON.search(base)


def dynamic_names(handle: BinaryIO, where: str) -> tuple[list[str], str | None] | None:
    """An ELF64 little-endian shared object's ``DT_NEEDED`` names and its ``DT_SONAME``; None for a file that is not
    ELF. A truncated or inconsistent ELF is an error naming ``where``."""
    head = handle.read(64)
    if head[:4] != b"\x7fELF":
        return None
    if len(head) < 64 or head[4] != 2 or head[5] != 1:
        raise KitError(f"{where}: not a 64-bit little-endian ELF file (the device is x86-64)")
    shoff, = struct.unpack_from("<Q", head, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", head, 0x3A)
    if shoff == 0 or shnum == 0:  # stripped of its section table (sstrip): what it needs cannot be read this way
        raise KitError(f"{where}: no ELF section table, so the libraries it needs cannot be read")
    handle.seek(shoff)
    table = handle.read(shentsize * shnum)
    if len(table) < shentsize * shnum or shentsize < 64:
        raise KitError(f"{where}: its section table runs past the end of the file (truncated?)")
    sections = [struct.unpack_from("<IIQQQQIIQQ", table, i * shentsize) for i in range(shnum)]
    needed: list[str] = []
    soname = None
    for _, kind, _, _, offset, size, link, _, _, entsize in sections:
        if kind != _SHT_DYNAMIC:
            continue
        if link >= shnum:
            raise KitError(f"{where}: its dynamic section names string table {link}, of {shnum} sections")
        handle.seek(offset)
        dynamic = handle.read(size)
        _, _, _, _, str_off, str_size, _, _, _, _ = sections[link]
        handle.seek(str_off)
        strings = handle.read(str_size)
        if len(dynamic) < size or len(strings) < str_size:
            raise KitError(f"{where}: its dynamic section runs past the end of the file (truncated?)")
        for index in range(0, size - 15, entsize or 16):
            tag, value = struct.unpack_from("<qQ", dynamic, index)
            if tag == 0:
                break
            if tag in (_DT_NEEDED, _DT_SONAME):
                end = strings.find(b"\0", value)
                if value >= len(strings) or end < 0:
                    raise KitError(f"{where}: a dynamic entry points outside its string table")
                name = strings[value:end].decode("utf-8", "replace")
                if tag == _DT_NEEDED:
                    needed.append(name)
                else:
                    soname = name
    return needed, soname


def wheel_libraries(wheel: Path) -> dict[str, tuple[list[str], str | None]]:
    """Each shared object in a wheel (by its path there): what it needs and its soname."""
    out = {}
    try:
        with zipfile.ZipFile(wheel) as archive:
            for name in archive.namelist():
                if is_library(name):
                    read = dynamic_names(io.BytesIO(archive.read(name)), f"{wheel.name}:{name}")
                    if read is not None:
                        out[name] = read
    except zipfile.BadZipFile as err:
        raise KitError(f"{wheel}: not a wheel ({err})") from None
    return out


def folder_provides(folder: Path) -> set[str]:
    """The library names a folder provides (an installed site-packages): each shared object's file name and soname."""
    names: set[str] = set()
    for path in folder.rglob("*.so*"):
        if not path.is_file() or not _SO.search(path.name):
            continue
        names.add(path.name)
        with path.open("rb") as handle:
            read = dynamic_names(handle, str(path))
        if read is not None and read[1]:
            names.add(read[1])
    return names


def unresolved(kit: dict[str, dict[str, tuple[list[str], str | None]]], image: set[str],
               system: frozenset[str] = SYSTEM) -> dict[str, list[str]]:
    """``wheel:member`` -> the names it needs that neither the kit (any wheel), the image nor the system provides."""
    provided = set(system) | image
    for libraries in kit.values():
        for member, (_, soname) in libraries.items():
            provided.add(member.rsplit("/", 1)[-1])
            if soname:
                provided.add(soname)
    missing = {}
    for wheel, libraries in sorted(kit.items()):
        for member, (needed, _) in sorted(libraries.items()):
            absent = sorted({n for n in needed if n not in provided})
            if absent:
                missing[f"{wheel}:{member}"] = absent
    return missing


def check_links(wheels: list[Path], image_site: Path) -> tuple[int, dict[str, list[str]]]:
    """Scan the kit's wheels against the image's site-packages: how many shared objects, and which lack a library."""
    if not image_site.is_dir():
        raise KitError(f"{image_site}: no image stand-in (python -m thinkj.gpu_kit standin builds it)")
    kit = {wheel.name: wheel_libraries(wheel) for wheel in wheels}
    return sum(map(len, kit.values())), unresolved(kit, folder_provides(image_site))
