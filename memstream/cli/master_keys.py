"""`memstream master-key create|status|rewrap|retire`: the master keys that wrap the data keys
(`memstream.keystore.wrapping`; docs/forgetting.md, "Master keys").

Rotation, without re-sealing the log: `create` puts a new key first in the file (the old ones
stay, to unwrap); restart the workers so they wrap with it; `rewrap` moves every data key to it
(and wraps those stored unwrapped); `retire` drops from the file the keys no data key needs.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from memstream.config import Settings, load_settings


def register(commands: Any) -> None:
    """Add `memstream master-key` to the `memstream` parser's subcommands."""
    master = commands.add_parser("master-key", help="the master keys that wrap the data keys")
    actions = master.add_subparsers(required=True, metavar="action")
    create = actions.add_parser(
        "create", help="make a master key file, or put a new key first in it (rotation)"
    )
    create.set_defaults(run=_create)
    status = actions.add_parser("status", help="data keys by the master key that wraps them")
    status.set_defaults(run=_status)
    rewrap = actions.add_parser(
        "rewrap", help="wrap every data key with the file's first key (and the unwrapped ones)"
    )
    rewrap.set_defaults(run=_rewrap)
    retire = actions.add_parser("retire", help="drop the file's keys no data key needs any more")
    retire.set_defaults(run=_retire)


def _path(settings: Settings) -> Path:
    from memstream.keystore.sealing import MASTER_KEY_FILE

    return settings.memory.master_key_file or settings.data_dir / MASTER_KEY_FILE


def _create(args: argparse.Namespace) -> int:
    from memstream.keystore.wrapping import kek_id, new_master_key, read_master_keys
    from memstream.keystore.wrapping import write_master_keys as write

    path = _path(load_settings())
    old = read_master_keys(path).keys if path.exists() else ()
    key = new_master_key()
    write(path, [key, *old])
    print(f"{path}: new master key {kek_id(key)} wraps from now on", end="")
    if old:
        print(f"; {len(old)} older kept to unwrap. Restart the workers, then run "
              "`memstream master-key rewrap`.")  # fmt: skip
    else:
        print(". Set MEMSTREAM_MASTER_KEY_FILE to it for every process; back it up apart from "
              "the database.")  # fmt: skip
    return 0


def _store(settings: Settings) -> Any:
    from pymongo import MongoClient

    from memstream.keystore.sealing import data_key_store
    from streams.settings import utc_now

    if not settings.mongodb.uri:
        raise SystemExit("memstream: MONGODB_URI is not set (is `memstream up` running?)")
    client: MongoClient[dict[str, Any]] = MongoClient(settings.mongodb.uri, tz_aware=True)
    return data_key_store(client[settings.mongodb.keys_database_name], settings, utc_now)


def _status(args: argparse.Namespace) -> int:
    from memstream.keystore.sealing import key_wrapper

    settings = load_settings()
    wrapper = key_wrapper(settings)
    held = wrapper.held if wrapper is not None else ()
    counts = _store(settings).counts_by_master_key()
    print(f"master key file: {_path(settings) if wrapper is not None else 'none'}")
    for name in held:
        role = "wraps new keys" if name == held[0] else "unwraps only"
        print(f"  {name} ({role}): {counts.pop(name, 0)} data keys")
    for name, count in sorted(counts.items()):
        what = "stored unwrapped" if name == "plain" else "wrapped by a key this file lacks"
        print(f"  {name}: {count} data keys {what}")
    return 0


def _rewrap(args: argparse.Namespace) -> int:
    settings = load_settings()
    done = _store(settings).rewrap()
    moved = ", ".join(f"{count} from {name}" for name, count in sorted(done.moved.items()))
    skipped = f"; {done.skipped} destroyed meanwhile, left as they are" if done.skipped else ""
    print(f"rewrapped {sum(done.moved.values())} data keys ({moved or 'none needed it'}){skipped}")
    return 0


def _retire(args: argparse.Namespace) -> int:
    from memstream.keystore.sealing import key_wrapper
    from memstream.keystore.wrapping import write_master_keys

    settings = load_settings()
    wrapper = key_wrapper(settings)
    if wrapper is None:
        print("memstream: no master key file", file=sys.stderr)
        return 2
    used = set(_store(settings).counts_by_master_key())
    kept = [key for name, key in zip(wrapper.held, wrapper.keys, strict=True)
            if name == wrapper.current or name in used]  # fmt: skip
    write_master_keys(_path(settings), kept)
    print(f"kept {len(kept)} master keys, retired {len(wrapper.keys) - len(kept)}")
    return 0
