"""Files the GPU kit drops from its wheels (thinkj/gpu_kit/prune.py): a real wheel written here, pruned, and installed
by pip (``--no-index --no-deps --target``, as on the device); a stale table is an error, never a silent no-op."""

from __future__ import annotations

import base64
import hashlib
import os
import subprocess
import sys
import zipfile

import pytest

from thinkj.gpu_kit import build, prune
from thinkj.gpu_kit.device import KitError


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def make_wheel(folder, name="demo", version="1.0"):
    """A spec-shaped wheel: a module, a 'big' data file, an executable helper, and its dist-info with RECORD."""
    folder.mkdir(parents=True, exist_ok=True)
    dist = f"{name}-{version}.dist-info"
    files = {f"{name}/__init__.py": b"VALUE = 42\n", f"{name}/big.bin": os.urandom(200_000),
             f"{name}/helper": b"#!/bin/sh\necho hi\n",
             f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode(),
             f"{dist}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    record = "\n".join([_record_line(n, d) for n, d in files.items()] + [f"{dist}/RECORD,,"]) + "\n"
    path = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as wheel:
        for member, data in files.items():
            info = zipfile.ZipInfo(member, date_time=(2020, 1, 1, 0, 0, 0))
            info.external_attr = (0o100755 if member.endswith("helper") else 0o100644) << 16  # S_IFREG, as real wheels
            wheel.writestr(info, data)
        wheel.writestr(f"{dist}/RECORD", record)
    return path


def test_a_pruned_wheel_installs_with_pip_without_the_file_and_its_record_line(tmp_path):
    wheel = make_wheel(tmp_path / "src")
    pruned = prune.prune_wheel(wheel, tmp_path / "pruned", {"demo/big.bin": "never loaded"})
    assert pruned.name == wheel.name and pruned.stat().st_size < wheel.stat().st_size
    site = tmp_path / "site"
    run = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-index", "--no-deps",
                          "--disable-pip-version-check", "--target", str(site), str(pruned)],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert (site / "demo" / "__init__.py").read_text() == "VALUE = 42\n"
    assert not (site / "demo" / "big.bin").exists()
    assert os.access(site / "demo" / "helper", os.X_OK)  # the executable bit came through the copy
    record = (site / "demo-1.0.dist-info" / "RECORD").read_text()
    assert "big.bin" not in record and "demo/__init__.py" in record
    # every file the pruned wheel's RECORD names is in it, with the hash RECORD gives (the copy changed no byte)
    with zipfile.ZipFile(pruned) as z:
        lines = z.read("demo-1.0.dist-info/RECORD").decode().splitlines()
        for line in lines:
            member, digest, _ = line.split(",")
            if digest:
                assert _record_line(member, z.read(member)) == line


def test_a_stale_table_is_an_error_naming_the_wheel_and_the_file(tmp_path):
    wheel = make_wheel(tmp_path / "src")
    with pytest.raises(KitError, match=r"demo-1.0-py3-none-any.whl: no demo/gone.so to drop"):
        prune.prune_wheel(wheel, tmp_path / "pruned", {"demo/gone.so": "moved in this version"})
    with pytest.raises(KitError, match="PRUNED names other, which the kit does not carry"):
        prune.prune_all([wheel], tmp_path / "pruned", {"other": {"x": "y"}})


def test_prune_all_leaves_other_wheels_untouched_and_says_what_it_dropped(tmp_path):
    demo, other = make_wheel(tmp_path / "src"), make_wheel(tmp_path / "src", name="other")
    out, dropped = prune.prune_all([demo, other], tmp_path / "pruned", {"demo": {"demo/big.bin": "why"}})
    assert out[1] == other and out[0].parent == tmp_path / "pruned"
    assert dropped == {demo.name: {"demo/big.bin": "why"}}


def test_the_table_names_only_kit_packages_with_a_reason_each():
    for package, files in prune.PRUNED.items():
        assert package not in build.LEFT_OUT  # a left-out package is never carried, so nothing to drop from it
        assert files and all(reason.strip() for reason in files.values())
        assert all(f.startswith(package.replace("-", "_") + "/") for f in files)
