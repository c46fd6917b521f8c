"""Recalling past messages: keyword ranking over speaker and text, ties by recency, cut text;
the best keyword matches reranked by meaning."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from handlers.recall import (
    BEFORE_CHARS,
    MEANING_BEFORE_CHARS,
    MESSAGE_CHARS,
    STOP_WORDS,
    Candidate,
    PastMessage,
    PromotedRun,
    conversation_runs,
    keyword_candidates,
    meaning_text,
    preceding,
    recalled,
    reranked,
    shown_text,
    speaker_of,
    stemmed,
)

MESSAGES = [
    PastMessage("Caroline", "I researched adoption agencies last week.", date(2023, 5, 8)),
    PastMessage("Melanie", "I painted a sunrise over the lake.", date(2023, 5, 25)),
    PastMessage("Caroline", "Thanks, that means a lot!", date(2023, 6, 9)),
    PastMessage("Melanie", "The kids loved the pottery class.", date(2023, 6, 9)),
]


def test_the_message_sharing_the_rarest_words_with_the_question_comes_first() -> None:
    found = recalled("What did Melanie paint at the lake?", MESSAGES, 2)
    assert found[0].text == "I painted a sunrise over the lake."


def test_a_question_naming_a_speaker_finds_what_that_speaker_said() -> None:
    found = recalled("What did Caroline research?", MESSAGES, 1)
    assert found == [MESSAGES[0]]


def test_messages_sharing_no_word_with_the_question_are_never_recalled() -> None:
    assert recalled("quantum chromodynamics", MESSAGES, 5) == []


def test_equal_scores_put_the_later_message_first() -> None:
    same = [
        PastMessage("A", "We went hiking.", date(2023, 1, 1)),
        PastMessage("A", "We went hiking.", date(2023, 3, 1)),
    ]
    assert [m.said_on for m in recalled("hiking", same, 2)] == [date(2023, 3, 1), date(2023, 1, 1)]


def test_no_limit_or_no_messages_recalls_nothing() -> None:
    assert recalled("lake", MESSAGES, 0) == []
    assert recalled("lake", [], 3) == []


def test_chinese_messages_match_on_characters_and_bigrams() -> None:
    messages = [PastMessage("User", "我很喜欢咖啡。"), PastMessage("User", "今天下雨了。")]
    assert recalled("咖啡", messages, 1) == [messages[0]]


def test_a_long_message_is_cut_at_a_word_with_an_ellipsis() -> None:
    text = "word " * 200
    shown = shown_text(text)
    assert len(shown) <= MESSAGE_CHARS and shown.endswith("word…")
    assert shown_text("a  short\nmessage") == "a short message"


def test_a_speaker_is_shown_by_name_or_else_by_role() -> None:
    assert speaker_of("assistant", "Melanie") == "Melanie"
    assert speaker_of("user", None) == "User"


def test_a_word_finds_its_other_forms_by_their_english_stem() -> None:
    assert stemmed("Painted PAINTING paints") == "paint paint paint"
    found = recalled("What did Caroline paint?", [PastMessage("Mel", "I painted a lake.")], 1)
    assert found == [PastMessage("Mel", "I painted a lake.")]


def test_stop_words_in_the_question_do_not_outrank_the_words_it_asks_about() -> None:
    messages = [
        PastMessage("A", "What did you do? What was it?", date(2023, 6, 9)),
        PastMessage("A", "We finally adopted a beagle puppy.", date(2023, 5, 8)),
    ]
    assert recalled("What did they adopt?", messages, 1) == [messages[1]]


def test_a_question_of_stop_words_only_recalls_nothing() -> None:
    assert recalled("What did you do?", [PastMessage("A", "What did you do?")], 3) == []


def test_an_answer_is_found_by_the_words_of_the_message_before_it_and_shown_without_them() -> None:
    answer = PastMessage(
        "User", "Mont Blanc, with my sister.", before="Which mountain did you climb?"
    )
    assert recalled("What mountain did I climb?", [answer], 1) == [answer]
    assert recalled("What mountain did I climb?", [PastMessage("User", answer.text)], 1) == []


def test_stemming_can_leave_out_given_words() -> None:
    assert stemmed("What did Caroline paint?", STOP_WORDS) == "  carolin paint?"


def test_each_turn_gets_the_text_of_the_turn_just_before_it_in_its_conversation() -> None:
    texts = {"t1": "Which mountain?", "t2": "Mont Blanc.", "t4": "Thanks!", "u1": "Hello"}
    found = preceding([["t1", "t2", "t3", "t4"], ["u1"]], texts)
    assert found == {"t2": "Which mountain?"}  # t3 is not among the texts, so t4 has none


def run(session: str, seq: int, minute: int, *turn_ids: str) -> PromotedRun:
    return PromotedRun(session, seq, datetime(2026, 1, 5, 9, minute, tzinfo=UTC), turn_ids)


def test_a_sessions_consecutive_snapshots_are_joined_in_the_order_said() -> None:
    snapshots = [run("s1", 1, 10, "c", "d"), run("s2", 0, 1, "x"), run("s1", 0, 0, "a", "b")]
    assert conversation_runs(snapshots) == [["a", "b", "c", "d"], ["x"]]


def test_snapshots_are_not_joined_across_a_missing_one() -> None:
    assert conversation_runs([run("s1", 0, 0, "a"), run("s1", 2, 20, "c")]) == [["a"], ["c"]]


def test_a_reopened_window_starts_a_run_of_its_own() -> None:
    """After a window is retired its session's snapshots are numbered from 0 again: the later
    seq 0 follows the earlier seq 1 in time but is not its successor."""
    snapshots = [
        run("s1", 0, 0, "a"),
        run("s1", 1, 5, "b"),
        run("s1", 0, 40, "c"),
        run("s1", 1, 45, "d"),
    ]
    assert conversation_runs(snapshots) == [["a", "b"], ["c", "d"]]


def test_the_first_turn_of_a_snapshot_is_paired_with_the_last_of_the_one_before() -> None:
    runs = conversation_runs([run("s1", 0, 0, "q"), run("s1", 1, 1, "a")])
    texts = {"q": "Which mountain did you climb?", "a": "Mont Blanc."}
    assert preceding(runs, texts) == {"a": "Which mountain did you climb?"}


def test_only_the_end_of_a_long_message_before_is_kept() -> None:
    long_reply = "x" * (BEFORE_CHARS + 500) + " Which mountain?"
    found = preceding([["a", "b"]], {"a": long_reply, "b": "Mont Blanc."})
    assert found["b"] == long_reply[-BEFORE_CHARS:] and found["b"].endswith("Which mountain?")


def test_a_caller_may_keep_every_query_word() -> None:
    said = [PastMessage("A", "What did you do?")]
    assert recalled("What did you do?", said, 3, stop_words=frozenset()) == said


def test_keyword_candidates_carry_their_scores_best_first_and_recalled_keeps_their_order() -> None:
    found = keyword_candidates("What did Melanie paint at the lake?", MESSAGES, 3)
    scores = [candidate.keyword_score for candidate in found]
    assert scores == sorted(scores, reverse=True) and all(score > 0 for score in scores)
    assert [c.message for c in found] == recalled(
        "What did Melanie paint at the lake?", MESSAGES, 3
    )
    assert keyword_candidates("quantum chromodynamics", MESSAGES, 5) == []


def test_the_meaning_text_is_the_speaker_the_shown_text_and_the_tail_of_the_message_before() -> (
    None
):
    plain = PastMessage("Kai", "Mont  Blanc,\nwith my sister.")
    assert meaning_text(plain) == "Kai: Mont Blanc, with my sister."
    answered = PastMessage("Kai", "Mont Blanc.", before="x" * 500 + " What mountain did you climb?")
    text = meaning_text(answered)
    assert text.startswith("Kai: Mont Blanc. (after: ") and text.endswith("did you climb?)")
    assert len(text) == len("Kai: Mont Blanc. (after: )") + MEANING_BEFORE_CHARS


def _candidates(*scores: float) -> list[Candidate]:
    return [Candidate(PastMessage("A", f"message {i}"), score) for i, score in enumerate(scores)]


def test_a_weaker_keyword_match_much_closer_in_meaning_is_reranked_first() -> None:
    candidates = _candidates(4.0, 3.0, 1.0)
    found = reranked(candidates, [0.70, 0.72, 0.90], 2)
    assert [m.text for m in found] == ["message 2", "message 0"]


def test_equal_similarities_keep_the_keyword_order() -> None:
    candidates = _candidates(4.0, 3.0, 1.0)
    assert reranked(candidates, [0.8, 0.8, 0.8], 3) == [c.message for c in candidates]


def test_reranking_needs_one_similarity_per_candidate() -> None:
    with pytest.raises(ValueError, match="2 similarities for 3 candidates"):
        reranked(_candidates(3.0, 2.0, 1.0), [0.5, 0.6], 2)
    assert reranked(_candidates(1.0), [0.5], 0) == []
    assert reranked([], [], 3) == []
