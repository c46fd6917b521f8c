"""An in-memory key ring for tests of sealing (the real one is `memstream.keystore.mongo`)."""

from __future__ import annotations

from handlers.sealing import DataKey, KeyScope, data_key_id


class Ring:
    """An in-memory key ring: keys made on demand, any of them destroyable."""

    def __init__(self) -> None:
        self.keys: dict[str, DataKey | None] = {}
        self.made: list[tuple[KeyScope, str, str | None]] = []

    def sealing_key(self, scope: KeyScope, owner: str, subject: str | None) -> DataKey:
        key_id = data_key_id(scope, owner, subject, 1)
        if key_id not in self.keys:
            self.made.append((scope, owner, subject))
            self.keys[key_id] = DataKey(key_id, bytes([len(self.keys) + 1]) * 32)
        key = self.keys[key_id]
        assert key is not None, "sealing with a destroyed key"
        return key

    def opening_key(self, key_id: str) -> DataKey | None:
        return self.keys[key_id]

    def destroy(self, scope: KeyScope, owner: str, subject: str | None) -> None:
        self.keys[data_key_id(scope, owner, subject, 1)] = None
