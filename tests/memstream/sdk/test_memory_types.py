"""What a client may name: built-in and declared types; a custom type's saved attributes."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from memstream.config import Settings
from memstream.sdk.memory_types import UnknownMemoryType, attributes_for, known_types

SETTINGS = Settings.model_validate(
    {
        "memory": {
            "custom_types": {
                "open_ticket": {
                    "description": "A support problem not solved yet.",
                    "instructions": "Record each problem the user reports.",
                    "fields": {
                        "product": {"type": "string", "required": True},
                        "status": {"type": "string", "choices": ["open", "waiting"]},
                    },
                }
            }
        }
    }
)


def test_built_in_and_declared_types_are_known_each_once() -> None:
    assert known_types(SETTINGS, ["open_ticket", "semantic", "open_ticket"]) == (
        "open_ticket",
        "semantic",
    )


def test_an_undeclared_type_is_refused_naming_the_known_ones() -> None:
    with pytest.raises(UnknownMemoryType, match=r"'tickets'.*taxonomic, open_ticket"):
        known_types(SETTINGS, ["tickets"])


def test_a_custom_types_attributes_are_checked_against_its_fields() -> None:
    saved = attributes_for(SETTINGS, "open_ticket", {"product": "charger", "status": None})
    assert saved == {"product": "charger"}


@pytest.mark.parametrize(
    ("attributes", "named"),
    [
        ({}, "product"),
        ({"product": "charger", "status": "closed"}, "status"),
        ({"product": "charger", "colour": "red"}, "colour"),
    ],
)
def test_a_save_that_breaks_the_declaration_is_refused_naming_the_field(
    attributes: dict[str, object], named: str
) -> None:
    with pytest.raises(ValidationError, match=named):
        attributes_for(SETTINGS, "open_ticket", attributes)


def test_a_built_in_types_attributes_are_kept_as_given() -> None:
    assert attributes_for(SETTINGS, "semantic", {"anything": 1}) == {"anything": 1}
