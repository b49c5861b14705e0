"""The GPU kit's commands (``python -m thinkj.gpu_kit COMMAND``, listed in :mod:`thinkj.gpu_kit`). Standard library
only, as :mod:`thinkj.gpu_kit.build` and :mod:`thinkj.gpu_kit.device` are: the device's ``python3`` runs stash and
install with nothing installed yet.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from thinkj.errors import ThinkJError  # standard library only, as the device side needs
from thinkj.gpu_kit.build import (
    BENCH_DIR,
    BENCH_FILES,
    KIT_DIR,
    SHARED_DATA,
    STANDIN_DIR,
    TOKENIZER_DIR,
    build,
    build_standin,
    checkout_bytes,
    fetch_extra,
    kit_wheels,
    print_plan,
    smollm2_folder,
    write_bench,
    write_tokenizer,
)
from thinkj.gpu_kit.device import COMPRESSIONS, DEVICE_DIR, PART_BYTES, KitError, install_and_check, read_manifest, stash
from thinkj.gpu_kit.links import check_links


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="The GPU kit: build it here, install it on the device machine.")
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="resolve, download and cut the kit (needs the package index)")
    b.add_argument("--kit", type=Path, default=KIT_DIR)
    b.add_argument("--part-mb", type=float, default=PART_BYTES / 1e6)
    b.add_argument("--compression", choices=COMPRESSIONS, default="xz",
                   help="xz: the wheels stored uncompressed in one xz stream (fewer parts; the device's Python needs "
                        "lzma); none: a plain tar of the wheels as downloaded")
    p = sub.add_parser("plan", help="print the device calls for a built kit")
    p.add_argument("--parts", type=Path, default=KIT_DIR / "parts")
    s = sub.add_parser("stash", help="device: copy the carried part to the device folder")
    s.add_argument("--parts", type=Path, default=KIT_DIR / "parts")
    s.add_argument("--dest", type=Path, default=DEVICE_DIR)
    i = sub.add_parser("install", help="device: reassemble, check, install and import")
    i.add_argument("--parts", type=Path, default=DEVICE_DIR)
    i.add_argument("--site", type=Path, default=DEVICE_DIR / "site")
    t = sub.add_parser("tokenizer", help="copy SmolLM2's config and tokenizer (no weights) for the trl step")
    t.add_argument("--source", help="a model folder (default: the catalog's smollm2, fetched if missing)")
    t.add_argument("--dest", type=Path, default=TOKENIZER_DIR)
    e = sub.add_parser("extra", help="here, mid-session: wheels for what the first device call found the image lacks")
    e.add_argument("specs", nargs="+", help="NAME==VERSION, each")
    s.add_argument("--extra", type=Path, default=None, help="a folder of extra wheels carried with the part")
    d = sub.add_parser("bench", help="copy the Auto-J test file (unchanged) for the run's Auto-J evaluation")
    d.add_argument("--shared", type=Path, default=SHARED_DATA, help="the shared data folder (default: %(default)s)")
    d.add_argument("--dest", type=Path, default=BENCH_DIR)
    m = sub.add_parser("standin", help="here: a venv modelling the device image, to rehearse stash and install on")
    m.add_argument("--dest", type=Path, default=STANDIN_DIR)
    k = sub.add_parser("links", help="here: every library the kit's extensions link against, found in the kit, the "
                                     "image stand-in or the system")
    k.add_argument("--kit", type=Path, default=KIT_DIR)
    k.add_argument("--standin", type=Path, default=STANDIN_DIR)
    args = parser.parse_args(argv)
    try:
        if args.command == "build":
            model = smollm2_folder()  # first: a registry that cannot be reached fails here, before the kit's downloads
            manifest = build(args.kit, part_bytes=int(args.part_mb * 1e6), compression=args.compression)
            write_tokenizer(model)
            if all((SHARED_DATA / name).is_file() for name in BENCH_FILES):
                write_bench()
            else:
                print(f"no {SHARED_DATA}: the device run's Auto-J step will be skipped", flush=True)
            print_plan(manifest, checkout_bytes())
        elif args.command == "plan":
            print_plan(read_manifest(args.parts), checkout_bytes())
        elif args.command == "tokenizer":
            write_tokenizer(Path(args.source) if args.source else smollm2_folder(), args.dest)
        elif args.command == "bench":
            write_bench(args.shared, args.dest)
        elif args.command == "standin":
            build_standin(args.dest)
            if (KIT_DIR / "parts" / "kit.json").is_file():  # a built kit: check its links against the new stand-in
                return links(KIT_DIR, args.dest)
        elif args.command == "links":
            return links(args.kit, args.standin)
        elif args.command == "extra":
            fetch_extra(args.specs)
        elif args.command == "stash":
            stash(args.parts, args.dest, args.extra)
        else:
            return install_and_check(args.parts, args.site)
    except (KitError, ThinkJError) as err:  # ThinkJError: SmolLM2's fetch (no registry, a bad wheel)
        print(f"FAIL {args.command}: {err}", file=sys.stderr)
        return 2
    return 0


def links(kit: Path, standin: Path) -> int:
    """Print the link check of the built kit against the stand-in: exit 0 when every name is found, 2 otherwise."""
    wheels = kit_wheels(kit)
    sites = sorted(standin.glob("lib/python3*/site-packages"))
    count, missing = check_links(wheels, sites[0] if sites else standin / "lib" / "site-packages")
    for where, names in missing.items():
        print(f"FAIL links: {where} needs {', '.join(names)}: in no kit wheel, not in the image stand-in, not a "
              "system library", flush=True)
    print(f"links: {count} shared objects in {len(wheels)} wheels; {len(missing)} need a library found nowhere",
          flush=True)
    return 2 if missing else 0
