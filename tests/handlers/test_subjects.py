from __future__ import annotations

from handlers.subjects import merged_attributes, same_subject, subject_key
from tests import factories as f


def test_a_term_and_its_alias_are_the_same_subject() -> None:
    assert same_subject("taxonomic", f.term("Kafka", "Apache Kafka"), f.term("Apache Kafka"))
    assert not same_subject("semantic", f.term("Kafka", "Apache Kafka"), f.term("Apache Kafka"))
    assert not same_subject("taxonomic", f.term("Kafka"), f.term("RabbitMQ"))


def test_subjects_are_the_same_whatever_their_case_and_spacing() -> None:
    assert subject_key("  The  User ") == subject_key("the user")
    assert same_subject("semantic", f.content(subject="Sam "), f.content(subject="sam"))


def test_merged_attributes_add_only_what_the_known_term_does_not_list() -> None:
    merged = merged_attributes(
        "taxonomic", f.term("Kafka", "AK"), f.term("Kafka", "ak", "Apache Kafka")
    )
    assert merged == {"aliases": ["AK", "Apache Kafka"]}


def test_merged_attributes_only_for_taxonomic_terms() -> None:
    assert merged_attributes("semantic", f.term("K", "a"), f.term("K", "b")) == {}
    assert merged_attributes("taxonomic", f.term("K", "A"), f.term("K", "a")) == {}
