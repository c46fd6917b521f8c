"""The live stages follow the served lineage: which stages do, the settings they take, and
`memstream up`'s local LLM following a promoted extractor's model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import memstream.runtime.llm_choice as llm_choice
import memstream.runtime.served as served_module
from handlers.serving import LIVE, Served
from memstream.config import Settings, load_settings
from memstream.promotion.lineage import ShadowRefused, served_environment, served_settings
from memstream.runtime.local.llm import LocalLLMServer
from memstream.runtime.served import LocalModelFollower, follows_the_served

CONFIG = """\
extractors:
  small:
    local_model: small
"""


def deployment(tmp_path: Path, **environment: str) -> Settings:
    config = tmp_path / "config.yaml"
    config.write_text(CONFIG, encoding="utf-8")
    return load_settings(
        environ={
            "MEMSTREAM_CONFIG": str(config),
            "MONGODB_URI": "mongodb://db:27017",
            "MONGODB_DATABASE": "memstream",
            "MEMSTREAM_GROUP_PREFIX": "memstream-",
            **environment,
        }
    )


PROMOTED = Served(version=1, shadow="trial_small", extractor="small")


def test_the_memory_types_stages_and_the_projector_follow_the_served_lineage_not_the_window() -> (
    None
):
    assert follows_the_served("extract:semantic") and follows_the_served("extract:my_type")
    assert follows_the_served("projector")
    assert not follows_the_served("window")


def test_the_live_lineage_changes_no_setting_and_a_promoted_shadow_gives_its_own(
    tmp_path: Path,
) -> None:
    settings = deployment(tmp_path)
    assert served_environment(settings, LIVE) == {}
    assert served_settings(settings, LIVE) is settings
    environment = served_environment(settings, PROMOTED)
    assert environment["MONGODB_DATABASE"] == "trial_small"
    assert environment["MEMSTREAM_EXTRACTOR"] == "small"
    assert environment["MEMSTREAM_KEYS_DATABASE"] == "memstream"  # the live data keys
    readers = served_settings(settings, PROMOTED)
    assert readers.mongodb.database == "trial_small"
    assert readers.kafka.topics.memories == "memstream.shadow.trial_small.memories"
    assert readers.kafka.topics.snapshots == "memstream.snapshots"  # the inputs are shared


def test_a_promoted_shadow_whose_extractor_is_no_longer_declared_is_refused(
    tmp_path: Path,
) -> None:
    gone = Served(version=1, shadow="trial_v9", extractor="v9")
    with pytest.raises(ShadowRefused, match="'v9' is not declared"):
        served_environment(deployment(tmp_path), gone)


def test_an_extractor_names_its_local_model(tmp_path: Path) -> None:
    settings = deployment(tmp_path, MEMSTREAM_EXTRACTOR="small")
    assert settings.llm.local == "small"
    assert llm_choice.local_spec(settings).alias.startswith("qwen2.5-coder-0.5b")
    assert llm_choice.local_spec(deployment(tmp_path)).alias.startswith("qwen2.5-coder-1.5b")


class FakeServer(LocalLLMServer):
    """A local server that is never started: its model, its address, whether it was stopped."""

    def __init__(self, model: str, base_url: str) -> None:
        self.alias = model
        self.fake_url = base_url
        self.stopped = False

    @property
    def base_url(self) -> str:  # type: ignore[override]
        return self.fake_url

    def stop(self, *args: Any, **kwargs: Any) -> None:
        self.stopped = True


class FakeProcess:
    def __init__(self) -> None:
        self.environment = {"OPENAI_BASE_URL": "http://127.0.0.1:1/v1"}


class FakePipeline:
    def __init__(self) -> None:
        self.processes = {"extract:semantic": FakeProcess(), "window": FakeProcess()}


def test_ups_local_llm_follows_a_promoted_extractors_model_before_the_workers_start_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = deployment(tmp_path)
    lineage = {"now": settings}
    monkeypatch.setattr(served_module, "served_lineage_settings", lambda _: lineage["now"])
    monkeypatch.delenv("MEMSTREAM_LOCAL_MODEL", raising=False)
    started: list[FakeServer] = []

    def start(spec: Any, log_dir: Path, *, extra_args: Any = ()) -> FakeServer:
        started.append(FakeServer(spec.alias, f"http://127.0.0.1:{len(started) + 2}/v1"))
        return started[-1]

    monkeypatch.setattr(llm_choice, "start_local_model", start)
    large = FakeServer(llm_choice.local_spec(settings).alias, "http://127.0.0.1:1/v1")
    pipeline = FakePipeline()
    replaced: list[tuple[str, Any]] = []
    follower = LocalModelFollower(
        settings,
        pipeline,
        large,
        tmp_path,
        lambda *args: replaced.append(args),  # type: ignore[arg-type]
    )

    follower()  # the same model served: nothing changes
    assert (started, replaced, large.stopped) == ([], [], False)

    lineage["now"] = deployment(tmp_path, MEMSTREAM_EXTRACTOR="small")
    follower()
    (small,) = started
    assert small.model.startswith("qwen2.5-coder-0.5b")
    assert replaced == [("local-llm", small)] and large.stopped
    for process in pipeline.processes.values():
        assert process.environment["OPENAI_BASE_URL"] == small.base_url
        assert process.environment["MEMSTREAM_LLM_MODEL"] == small.model
    follower()  # looked at again: already following
    assert len(started) == 1

    lineage["now"] = settings  # back to the live lineage: its model again
    follower()
    assert [server.model for server in started] == [small.model, large.model]
    assert small.stopped and replaced[-1] == ("local-llm", started[-1])

    follower.stop_own()
    assert started[-1].stopped


def test_a_live_worker_waits_out_an_outage_before_it_knows_the_served_lineage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pymongo.errors import AutoReconnect

    import memstream.promotion.switches as switches

    answers: list[Any] = [AutoReconnect("the database is restarting"), OSError("refused"), LIVE]

    async def synced(_: Settings) -> Served:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer  # type: ignore[no-any-return]

    monkeypatch.setattr(switches, "synced", synced)
    served, environment = served_module.lineage_of_the_served(deployment(tmp_path))
    assert (served, environment, answers) == (LIVE, {}, [])
