"""The stages' Faust apps."""

from __future__ import annotations

import tempfile
from pathlib import Path

from memstream.config import load_settings
from memstream.runtime.worker import stream_settings
from streams.app import faust_app


def test_a_stage_keeps_fausts_data_folder_in_the_temporary_directory_not_the_working_one() -> None:
    settings = load_settings(
        environ={
            "MEMSTREAM_CONFIG": "/dev/null",
            "KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:9",
            "MEMSTREAM_GROUP_PREFIX": "gtest-",
        }
    )
    app = faust_app("window", stream_settings(settings))
    assert app.conf.datadir == Path(tempfile.gettempdir()) / "memstream-faust-gtest-window"
