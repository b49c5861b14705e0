"""The GPU kit's link check (thinkj/gpu_kit/links.py): the libraries an extension names (ELF DT_NEEDED) read from real
shared objects built here with gcc, a name found nowhere reported with its wheel and member, found again once the
image or another wheel provides it (by file name or soname), and a damaged ELF named instead of a traceback."""

from __future__ import annotations

import shutil
import subprocess
import zipfile

import pytest

from thinkj.gpu_kit import cli, device, links

DEP_SONAME = "libthinkjdep.so.7"

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc to build the shared objects it reads")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """A library with soname libthinkjdep.so.7 (file libdep.so) and an extension linked against it."""
    folder = tmp_path_factory.mktemp("elf")
    (folder / "dep.c").write_text("int thinkj_dep(void) { return 7; }\n")
    (folder / "ext.c").write_text("int thinkj_dep(void);\nint thinkj_ext(void) { return thinkj_dep() + 1; }\n")
    subprocess.run(["gcc", "-shared", "-fPIC", f"-Wl,-soname,{DEP_SONAME}", "-o", "libdep.so", "dep.c"],
                   cwd=folder, check=True)
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", "ext.so", "ext.c", "-L.", "-ldep"], cwd=folder, check=True)
    return folder


def wheel(path, members):
    with zipfile.ZipFile(path, "w") as archive:
        for name, source in members.items():
            archive.write(source, name)
    return path


def test_needed_and_soname_are_read_as_readelf_reads_them(built):
    with (built / "ext.so").open("rb") as handle:
        needed, soname = links.dynamic_names(handle, "ext.so")
    assert DEP_SONAME in needed and soname is None
    with (built / "libdep.so").open("rb") as handle:
        assert links.dynamic_names(handle, "libdep.so")[1] == DEP_SONAME
    with (built / "dep.c").open("rb") as handle:
        assert links.dynamic_names(handle, "dep.c") is None  # not ELF: not a library, not an error
    if shutil.which("readelf"):
        shown = subprocess.run(["readelf", "-d", str(built / "ext.so")], capture_output=True, text=True).stdout
        assert needed == [line.split("[")[1].split("]")[0] for line in shown.splitlines() if "(NEEDED)" in line]


def test_a_library_found_nowhere_is_named_and_found_once_the_image_or_a_wheel_provides_it(built, tmp_path):
    ext = wheel(tmp_path / "ext-1.0-cp312-abi3-linux_x86_64.whl", {"pkg/_ext.abi3.so": built / "ext.so"})
    site = tmp_path / "site"
    site.mkdir()
    count, missing = links.check_links([ext], site)
    assert count == 1
    assert missing == {f"{ext.name}:pkg/_ext.abi3.so": [DEP_SONAME]}  # libc & co. are the system's
    # the image provides it under another file name: its soname counts
    shutil.copy(built / "libdep.so", site / "libdep-1a2b3c.so")
    assert links.check_links([ext], site) == (1, {})
    # or another kit wheel does
    shutil.rmtree(site)
    site.mkdir()
    dep = wheel(tmp_path / "dep-1.0-py3-none-any.whl", {"dep.libs/libdep.so": built / "libdep.so"})
    assert links.check_links([ext, dep], site) == (2, {})


def test_extensions_for_another_python_are_not_checked():
    assert links.is_library("vllm/third_party/deep_gemm/_C.cpython-312-x86_64-linux-gnu.so")
    assert not links.is_library("vllm/third_party/deep_gemm/_C.cpython-313-x86_64-linux-gnu.so")
    assert links.is_library("nvidia/cu13/lib/libcudart.so.13") and links.is_library("vllm/_C.abi3.so")
    assert not links.is_library("pkg/notes.so.txt") and not links.is_library("pkg/resort.py")


def test_a_truncated_library_is_an_error_naming_its_wheel_and_member(built, tmp_path):
    short = tmp_path / "short.so"
    short.write_bytes((built / "ext.so").read_bytes()[:1000])  # the section table sits at the end
    bad = wheel(tmp_path / "bad-1.0-cp312-abi3-linux_x86_64.whl", {"pkg/_bad.abi3.so": short})
    with pytest.raises(device.KitError, match=r"bad-1.0-cp312-abi3-linux_x86_64.whl:pkg/_bad.abi3.so: .*truncated"):
        links.wheel_libraries(bad)
    blob = bytearray((built / "ext.so").read_bytes())
    blob[0x28:0x30] = bytes(8)  # e_shoff = 0: no section table, as sstrip leaves an object
    (tmp_path / "bare.so").write_bytes(bytes(blob))
    with (tmp_path / "bare.so").open("rb") as handle, pytest.raises(device.KitError, match="bare.so: no ELF section"):
        links.dynamic_names(handle, "bare.so")


def test_the_links_command_fails_naming_the_member_and_passes_once_provided(built, tmp_path, capsys):
    kit = tmp_path / "kit"
    (kit / "stored").mkdir(parents=True)  # where the kit keeps the wheels its parts hold
    ext = wheel(kit / "stored" / "ext-1.0-cp312-abi3-linux_x86_64.whl", {"pkg/_ext.abi3.so": built / "ext.so"})
    device.pack([ext], kit / "parts")
    site = tmp_path / "standin" / "lib" / "python3.12" / "site-packages"
    site.mkdir(parents=True)
    assert cli.main(["links", "--kit", str(kit), "--standin", str(tmp_path / "standin")]) == 2
    out = capsys.readouterr().out
    assert f"FAIL links: {ext.name}:pkg/_ext.abi3.so needs {DEP_SONAME}" in out
    assert "1 shared objects in 1 wheels; 1 need a library found nowhere" in out
    shutil.copy(built / "libdep.so", site / DEP_SONAME)
    assert cli.main(["links", "--kit", str(kit), "--standin", str(tmp_path / "standin")]) == 0
    assert cli.main(["links", "--kit", str(kit), "--standin", str(tmp_path / "nowhere")]) == 2
    assert "no image stand-in (python -m thinkj.gpu_kit standin builds it)" in capsys.readouterr().err
