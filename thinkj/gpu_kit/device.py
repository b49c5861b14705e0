"""The GPU kit's parts and their install on the device machine (``python -m thinkj.gpu_kit stash|install``): the
parts cut and joined again with their sha256 sums, a part stashed under /tmp in each call, the offline install and one
import check per package. Only the standard library: the device's ``python3`` runs this with nothing installed yet.
Building the kit and its call plan (here, with the package index) is :mod:`thinkj.gpu_kit.build`.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the checkout: thinkj/gpu_kit/device.py
DEVICE_DIR = Path("/tmp/gpu_kit")  # /tmp survives between calls while the device machine stays warm
PART_BYTES = 50_000_000  # at most 50 MB a part: one part and the checkout fit one device call
MANIFEST = "kit.json"
IMPORT_LIMIT_S = 240  # one import check (vllm alone took 48 s on this 2-core machine: LOG, session 19)
# the environment every kit command runs under (the device run script sources SITE/../gpu_kit.env)
KIT_ENV = {"VLLM_USE_FLASHINFER_SAMPLER": "0", "WANDB_MODE": "disabled"}
# one import check per line: (package, stack, the code a fresh interpreter runs)
IMPORT_CHECKS: list[tuple[str, str, str]] = [
    ("ray", "verl-vllm-ray", "import ray"),
    ("vllm", "verl-vllm-ray", "import vllm; from vllm import LLM, SamplingParams"),
    ("vllm-engine", "verl-vllm-ray",
     "import vllm.v1.engine.core, vllm.v1.engine.llm_engine, vllm.v1.worker.gpu_worker, "
     "vllm.v1.worker.gpu_model_runner, vllm.model_executor.models.qwen2, vllm.model_executor.models.llama, "
     "vllm.v1.attention.backends.flash_attn, vllm.v1.sample.sampler, vllm.entrypoints.llm"),
    ("verl", "verl-vllm-ray",
     "import verl, verl.trainer.main_ppo, verl.workers.engine_workers, "
     "verl.workers.rollout.vllm_rollout.vllm_async_server"),
    ("llamafactory", "llamafactory-deepspeed", "from llamafactory.train.tuner import run_exp"),
    ("deepspeed", "llamafactory-deepspeed",
     "import deepspeed; from deepspeed.runtime.zero.stage3 import DeepSpeedZeroOptimizer_Stage3"),
    ("trl", "llamafactory-deepspeed", "from thinkj.online.trl_compat import fix_trl_availability_flags; "
     "fix_trl_availability_flags(); from trl import GRPOConfig, GRPOTrainer, DPOTrainer"),
    ("thinkj", "both", "import thinkj.cli, thinkj.online.trl_grpo, thinkj.inference.hf"),
]


class KitError(RuntimeError):
    """A kit that cannot be used as it is: the message names the file, part or package."""


def _name(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def wheel_package(filename: str) -> str:
    """The normalised package name of a wheel file (``vllm-0.24.0-cp38-abi3-....whl`` -> ``vllm``)."""
    return _name(filename.split("-")[0])


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


# ---------------------------------------------------------------- parts (both sides)

COMPRESSIONS = ("xz", "none")  # a kit's tar: one xz stream, or plain (kits before "none" wrote "" for it)


def check_compression(compression: str) -> None:
    if compression not in COMPRESSIONS:
        raise KitError(f"compression must be one of {', '.join(COMPRESSIONS)}, got {compression!r}")


def pack(wheels: list[Path], out: Path, part_bytes: int = PART_BYTES, meta: dict | None = None,
         compression: str = "none") -> dict:
    """Write the wheels as one tar cut into ``part-NN`` files of at most ``part_bytes``, and the manifest
    (``kit.json``: each part's size and sha256, each wheel's, the tar's). ``compression`` "xz" compresses the tar
    (for wheels stored uncompressed, :func:`thinkj.gpu_kit.build.store_wheels`: one solid xz stream is about a third
    smaller than the wheels' own per-file deflate); "none" only frames them. The device side reads either
    (``tarfile`` detects it)."""
    if part_bytes <= 0:
        raise KitError(f"part size must be positive, got {part_bytes}")
    check_compression(compression)
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("part-*"):
        old.unlink()
    blob = out / "kit.tar"
    xz = compression == "xz"
    with tarfile.open(blob, "w:xz" if xz else "w", format=tarfile.PAX_FORMAT, **({"preset": 6} if xz else {})) as tar:
        for wheel in sorted(wheels, key=lambda p: p.name):
            info = tar.gettarinfo(str(wheel), arcname=wheel.name)
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mtime = 0  # the same wheels give the same bytes
            with wheel.open("rb") as handle:
                tar.addfile(info, handle)
    total = blob.stat().st_size
    count = -(-total // part_bytes)
    width = max(2, len(str(count)))
    parts = []
    with blob.open("rb") as source:
        for index in range(1, count + 1):
            part = out / f"part-{index:0{width}d}"
            part.write_bytes(source.read(part_bytes))
            parts.append({"file": part.name, "bytes": part.stat().st_size, "sha256": sha256(part)})
    manifest = {"format": 1, "tar_bytes": total, "tar_sha256": sha256(blob), "part_bytes": part_bytes,
                "compression": compression,
                "parts": parts,
                "wheels": [{"file": w.name, "bytes": w.stat().st_size, "sha256": sha256(w)} for w in wheels],
                **(meta or {})}
    blob.unlink()
    (out / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


def read_manifest(folder: Path) -> dict:
    path = folder / MANIFEST
    if not path.is_file():
        raise KitError(f"{path}: no kit manifest (build the kit with scripts/gpu_kit.sh, carry {MANIFEST} along)")
    try:
        manifest = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise KitError(f"{path}: not JSON ({err})") from None
    for field in ("parts", "wheels", "tar_sha256", "tar_bytes"):
        if field not in manifest:
            raise KitError(f"{path}: field {field!r} missing")
    return manifest


def check_parts(folder: Path, manifest: dict) -> list[str]:
    """Problems with the parts in ``folder``, one line each naming the part; empty when all are there and sound."""
    problems = []
    count = len(manifest["parts"])
    for index, part in enumerate(manifest["parts"], 1):
        path = folder / part["file"]
        where = f"{part['file']} ({index} of {count})"
        if not path.is_file():
            problems.append(f"{where}: missing from {folder}")
        elif path.stat().st_size != part["bytes"]:
            problems.append(f"{where}: {path.stat().st_size} bytes, the manifest says {part['bytes']}")
        elif sha256(path) != part["sha256"]:
            problems.append(f"{where}: sha256 {sha256(path)[:16]}..., the manifest says {part['sha256'][:16]}...")
    return problems


def reassemble(folder: Path, wheel_dir: Path) -> list[Path]:
    """Check every part, join them, check the whole, and unpack the wheels (each checked against its own sum)."""
    manifest = read_manifest(folder)
    problems = check_parts(folder, manifest)
    if problems:
        raise KitError("the kit's parts are not usable:\n  " + "\n  ".join(problems))
    wheel_dir.mkdir(parents=True, exist_ok=True)
    blob = wheel_dir / "kit.tar"
    digest = hashlib.sha256()
    with blob.open("wb") as out:
        for part in manifest["parts"]:
            data = (folder / part["file"]).read_bytes()
            digest.update(data)
            out.write(data)
    if digest.hexdigest() != manifest["tar_sha256"]:
        raise KitError(f"{folder}: the joined parts' sha256 differs from the manifest's (parts out of order?)")
    expected = {w["file"]: w for w in manifest["wheels"]}
    with tarfile.open(blob) as tar:
        members = tar.getmembers()
        for member in members:
            if not member.isfile() or member.name not in expected or "/" in member.name:
                raise KitError(f"{folder}: unexpected entry {member.name!r} in the kit")
        tar.extractall(wheel_dir, members=members, filter="data")
    blob.unlink()
    wheels = []
    for name, wheel in expected.items():
        path = wheel_dir / name
        if not path.is_file() or sha256(path) != wheel["sha256"]:
            raise KitError(f"{path}: missing or its sha256 differs from the manifest's")
        wheels.append(path)
    return wheels


# ---------------------------------------------------------------- the device side

def stash(source: Path, dest: Path = DEVICE_DIR, extra: Path | None = None) -> list[str]:
    """Copy the carried manifest and part(s) to ``dest`` and say which parts ``dest`` holds now; wheels carried in
    ``extra`` go to ``dest/extra``."""
    manifest = read_manifest(source)
    first = not any((dest / p["file"]).is_file() for p in manifest["parts"])
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source / MANIFEST, dest / MANIFEST)
    for part in manifest["parts"]:
        if (source / part["file"]).is_file():
            shutil.copyfile(source / part["file"], dest / part["file"])
    for wheel in sorted(extra.glob("*.whl")) if extra is not None and extra.is_dir() else []:
        (dest / "extra").mkdir(exist_ok=True)
        shutil.copyfile(wheel, dest / "extra" / wheel.name)
    have = [p["file"] for p in manifest["parts"] if (dest / p["file"]).is_file()]
    print(f"stash: {dest} holds {len(have)} of {len(manifest['parts'])} parts: {' '.join(have)}", flush=True)
    if first:  # the first call: what the kit takes from the image, checked while later calls can still carry a wheel
        print(image_line(manifest, dict(os.environ)), flush=True)
        readable = compression_line(manifest)
        if readable.startswith("FAIL"):  # the parts are stashed, but no install could open them: say so by the exit
            raise KitError(readable.removeprefix("FAIL "))
        print(readable, flush=True)
    return have


def compression_line(manifest: dict, lzma_present: bool | None = None) -> str:
    """Whether this Python can open the kit's tar, said in the first call: an xz kit needs the lzma module (in every
    CPython built with liblzma), and where it is missing, only the parts stashed so far are lost."""
    if manifest.get("compression", "") != "xz":
        return "INFO kit compression: none (a plain tar)"
    if lzma_present is None:
        try:
            import lzma  # noqa: F401  (only whether it imports)

            lzma_present = True
        except ImportError:
            lzma_present = False
    if lzma_present:
        return "INFO kit compression: xz, which this Python reads (lzma)"
    return ("FAIL kit compression: xz, but this Python has no lzma module: rebuild the kit here with "
            "`bash scripts/gpu_kit.sh build --compression none` (more parts) and stash those instead")


def site_env(site: Path, base: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ if base is None else base)
    env["PYTHONPATH"] = os.pathsep.join([str(site), str(ROOT)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env["PATH"] = os.pathsep.join([str(site / "bin"), env.get("PATH", "")])
    return {**env, **KIT_ENV}


def install(wheels: list[Path], site: Path, python: str = sys.executable) -> float:
    start = time.monotonic()
    run = subprocess.run([python, "-m", "pip", "install", "--quiet", "--no-index", "--no-deps", "--no-compile",
                          "--target", str(site), *map(str, wheels)], capture_output=True, text=True)
    if run.returncode != 0:
        raise KitError(f"pip install --target {site} failed:\n{run.stderr[-3000:]}")
    return time.monotonic() - start


_PROBE = r"""
import importlib.metadata, json, sys, time
start = time.monotonic()
error = None
try:
    exec(sys.argv[1])
except BaseException as err:
    error = f"{type(err).__name__}: {' '.join(str(err).split())[:300]}"
tops = {name.split('.')[0] for name in list(sys.modules)}
owners = importlib.metadata.packages_distributions()
dists = sorted({d for top in tops for d in owners.get(top, [])})
print(json.dumps({"error": error, "seconds": round(time.monotonic() - start, 1), "dists": dists}))
"""


def probe(code: str, env: dict[str, str], python: str = sys.executable, timeout: int = 600) -> dict:
    """Run ``code`` in a fresh interpreter: its error (or None), seconds, and the distributions it loaded."""
    try:
        run = subprocess.run([python, "-c", _PROBE, code], capture_output=True, text=True, env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout} s", "seconds": timeout, "dists": []}
    lines = run.stdout.strip().splitlines()
    try:
        return json.loads(lines[-1])
    except (IndexError, json.JSONDecodeError):
        return {"error": f"the interpreter died (exit {run.returncode}): {run.stderr.strip()[-300:]}", "seconds": 0,
                "dists": []}


def image_versions(names: dict[str, str], env: dict[str, str], python: str = sys.executable) -> dict[str, str | None]:
    """The version of each package the kit takes from the image, as the kit's interpreter sees it (None: absent)."""
    code = ("import importlib.metadata as m, json, sys\nout = {}\nfor n in sys.argv[1:]:\n    try: out[n] = m.version(n)"
            "\n    except m.PackageNotFoundError: out[n] = None\nprint(json.dumps(out))")
    run = subprocess.run([python, "-c", code, *names], capture_output=True, text=True, env=env, check=True)
    return json.loads(run.stdout)


def image_line(manifest: dict, env: dict[str, str], python: str = sys.executable) -> str:
    """One INFO line: how many of the packages the kit takes from the image are there, which are absent, which have
    another version than the pin."""
    found = image_versions(manifest.get("from_image", {}), env, python)
    absent = sorted(n for n, v in found.items() if v is None)
    differ = sorted(f"{n} {v} (pin {manifest['from_image'][n]})" for n, v in found.items()
                    if v is not None and v != manifest["from_image"][n])
    return (f"INFO from the image: {len(found) - len(absent)} of {len(found)} present; absent: {absent or 'none'}; "
            f"other versions than the pins: {', '.join(differ) or 'none'}")


def with_extra(kit: list[Path], extra: list[Path]) -> list[Path]:
    """The kit's wheels and the extra ones; two versions of one package would stop pip, so that is refused here."""
    names = {wheel_package(w.name): w.name for w in kit}
    clash = [f"{w.name} (the kit has {names[wheel_package(w.name)]})" for w in extra
             if wheel_package(w.name) in names]
    if clash:
        raise KitError(f"extra wheels the kit already carries: {', '.join(clash)}")
    return kit + extra


def install_and_check(parts: Path, site: Path, python: str = sys.executable) -> int:
    """The device's last call: reassemble, install, report the image's side, import each package. Exit status:
    the number of failed import checks."""
    start = time.monotonic()
    manifest = read_manifest(parts)
    wheels = reassemble(parts, parts / "wheels")
    print(f"PASS reassemble: {len(manifest['parts'])} parts, {manifest['tar_bytes'] / 1e6:.1f} MB, "
          f"{len(wheels)} wheels, every sha256 as in the manifest ({time.monotonic() - start:.1f} s)", flush=True)
    extra = sorted((parts / "extra").glob("*.whl"))
    if extra:
        print(f"INFO extra: {', '.join(w.name for w in extra)} (carried besides the kit)", flush=True)
    wheels = with_extra(wheels, extra)
    seconds = install(wheels, site, python)
    print(f"PASS install: {len(wheels)} wheels into {site} ({seconds:.1f} s)", flush=True)
    env = site_env(site)
    (site.parent / "gpu_kit.env").write_text("".join(f"export {k}={v}\n" for k, v in {
        "PYTHONPATH": f"{site}:{ROOT}${{PYTHONPATH:+:$PYTHONPATH}}", "PATH": f"{site}/bin:$PATH", **KIT_ENV}.items()))
    print(image_line(manifest, env, python), flush=True)
    failures = 0
    left_out = set(manifest.get("left_out", {}))
    # each check is its own interpreter: run side by side on the device's cores, reported in the table's order
    with ThreadPoolExecutor(max_workers=min(len(IMPORT_CHECKS), os.cpu_count() or 1)) as pool:
        results = pool.map(lambda check: probe(check[2], env, python, IMPORT_LIMIT_S), IMPORT_CHECKS)
        for (package, stack, _), result in zip(IMPORT_CHECKS, results):
            strays = sorted(left_out & {_name(d) for d in result["dists"]})
            ok = result["error"] is None
            failures += not ok
            note = f"; loaded left-out {strays}" if strays else ""
            print(f"{'PASS' if ok else 'FAIL'} import {package} [{stack}] {result['seconds']} s"
                  f"{': ' + result['error'] if result['error'] else ''}{note}", flush=True)
    print(f"{'PASS' if not failures else 'FAIL'} total: {failures} of {len(IMPORT_CHECKS)} import checks failed, "
          f"{time.monotonic() - start:.1f} s", flush=True)
    return failures
