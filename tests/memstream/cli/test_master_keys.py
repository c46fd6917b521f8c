"""`memstream master-key`: create a master key file, rotate it, rewrap the data keys, retire the
old key — the sealed content opening with the same data keys throughout."""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pymongo import MongoClient

from memstream.keystore.mongo import DATA_KEYS, MongoDataKeys
from memstream.keystore.wrapping import kek_id, read_master_keys
from streams.settings import utc_now

pytestmark = pytest.mark.integration


@pytest.fixture
def database(mongo: Any) -> Iterator[tuple[str, Any]]:
    client: MongoClient[dict[str, Any]] = MongoClient(mongo.uri, tz_aware=True)
    name = f"masterkey_{uuid.uuid4().hex[:10]}"
    yield name, client[name]
    client.drop_database(name)
    client.close()


def master_key(*arguments: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    config = cwd / "empty.yaml"
    config.write_text("# settings come from the environment\n")
    return subprocess.run(
        [sys.executable, "-m", "memstream", "master-key", *arguments],
        env={"PATH": "/usr/bin:/bin", "MEMSTREAM_CONFIG": str(config), **env},
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
    )


def test_create_rotate_rewrap_and_retire(
    mongo: Any, database: tuple[str, Any], tmp_path: Path
) -> None:
    name, db = database
    path = tmp_path / "master.key"
    env = {
        "MONGODB_URI": mongo.uri,
        "MONGODB_DATABASE": name,
        "MEMSTREAM_MASTER_KEY_FILE": str(path),
    }
    MongoDataKeys(db, clock=utc_now).current("session", "ann", "s1")  # one stored unwrapped
    created = master_key("create", env=env, cwd=tmp_path)
    assert created.returncode == 0, created.stderr
    first = read_master_keys(path).current
    assert first in created.stdout and "MEMSTREAM_MASTER_KEY_FILE" in created.stdout

    status = master_key("status", env=env, cwd=tmp_path)
    assert f"{first} (wraps new keys): 0 data keys" in status.stdout
    assert "plain: 1 data keys stored unwrapped" in status.stdout
    rewrapped = master_key("rewrap", env=env, cwd=tmp_path)
    assert "rewrapped 1 data keys (1 from plain)" in rewrapped.stdout

    rotated = master_key("create", env=env, cwd=tmp_path)
    second = read_master_keys(path).current
    assert second != first and "1 older kept to unwrap" in rotated.stdout
    assert (
        "rewrapped 1 data keys (1 from " + first
        in master_key("rewrap", env=env, cwd=tmp_path).stdout
    )
    assert {d["kek"] for d in db[DATA_KEYS].find()} == {second}
    retired = master_key("retire", env=env, cwd=tmp_path)
    assert "kept 1 master keys, retired 1" in retired.stdout
    assert read_master_keys(path).held == (second,)
    assert kek_id(read_master_keys(path).keys[0]) == second
