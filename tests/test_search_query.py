"""Query parsing, expansion and ranking rules of om_mcp.engine.search (pure functions, no database)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from om_mcp.engine.search import parse_query
from om_mcp.engine.search.expand import related
from om_mcp.engine.search.hybrid import blend
from om_mcp.engine.search.query import RELATED_WEIGHT, forms_of, lemmas
from om_mcp.engine.search.rank import author_of, rank
from om_mcp.store.search import TermStats as Stats
from om_mcp.store.search import TextHit as Hit


def test_stop_words_and_symbols_are_not_terms():
    query = parse_query("What is the * AND (NEAR) of it?")
    assert query.words == ["near"]
    assert parse_query("the and of * - ()").terms == []
    assert parse_query("").terms == []


def test_words_are_folded_like_the_index():
    assert parse_query("Café NAÏVE").words == ["cafe", "naive"]
    # "_" separates words, as unicode61 does
    assert parse_query("snake_case").words == ["snake", "case"]


def test_exact_word_weighs_more_than_its_inflections():
    term = parse_query("painted", expand=False).terms[0]
    assert term.forms["painted"] == 1.0
    for form in ("paint", "paints", "painting"):
        assert 0 < term.forms[form] < 1.0, form


def test_short_stems_do_not_expand_to_unrelated_words():
    # "use" shares the stem "us" with the pronoun; neither it nor other 2-letter stems come in
    use = parse_query("what database do I use").terms[1]
    assert use.word == "use"
    assert set(use.forms) >= {"use", "uses", "used", "using"}
    assert "us" not in use.forms
    assert "us" not in lemmas("using") and "use" in lemmas("using")
    assert forms_of("news") >= {"news"} and "ne" not in forms_of("news")


def test_irregular_forms_count_as_inflections():
    went = parse_query("when did she go camping", expand=False).terms
    assert "went" in went[0].forms and "gone" in went[0].forms
    assert "children" in parse_query("kid", expand=False).terms[0].forms or "child" in forms_of("children")


def test_related_terms_join_below_the_literal_words():
    hosting = parse_query("hosting provider").terms[0]
    assert hosting.forms["hosting"] == 1.0
    assert 0 < hosting.forms["deploy"] <= RELATED_WEIGHT
    assert "fly" in hosting.forms
    # a kind finds its members, a member finds its kind, members do not find each other
    assert "dog" in related("pet")
    assert "pet" in related("dog")
    assert "cat" not in related("dog")
    assert parse_query("hosting provider", expand=False).terms[0].forms.get("deploy") is None


def test_hostile_text_stays_quoted():
    query = parse_query('puppy" OR "* body:secret NEAR(a b) \x00')
    match = query.match
    assert match.count('"') % 2 == 0
    for word in ("puppy", "body", "secret", "near"):
        assert f'"{word}"' in match
    assert "*" not in match and "(" not in match


def test_weighted_match_drops_absent_forms_and_keeps_rare_ones_within_budget():
    query = parse_query("postgres deployment", expand=False)
    df = {"postgres": 3, "deployment": 9000, "deployments": 5}
    parts = query.weighted_match(df, rows=100_000, budget=1000)
    assert parts[0][0] == '"postgres"'
    assert parts[1][0] == '"deployments"'  # "deployment" alone would pass the budget
    assert parts[0][1] > parts[1][1] * 0.5
    assert query.weighted_match({}, rows=10) == []


def test_date_phrases_become_spans_not_words():
    now = datetime(2024, 3, 1, tzinfo=UTC)
    query = parse_query("hiking at the lake in May 2023", now)
    assert query.words == ["hiking", "lake"]
    assert len(query.dates) == 1 and query.dates[0].contains(datetime(2023, 5, 20))
    assert not query.dates[0].contains(datetime(2023, 7, 1))
    last = parse_query("hiking last June", now).dates[0]
    assert last.contains(datetime(2023, 6, 10)) and not last.contains(datetime(2022, 6, 10))
    assert parse_query("May 2023").terms == []


def _hit(seq, body, thread="t", score=1.0, created="2024-01-01T00:00:00+00:00", metadata=None):
    return Hit(seq, score, thread, "user", created, body, metadata)


def _stats(*hits, extra=None):
    from om_mcp.engine.search.query import words

    df: dict[str, int] = {}
    for h in hits:
        for w in set(words(h.body)):
            df[w] = df.get(w, 0) + 1
    df.update(extra or {})
    return Stats(rows=max(len(hits), 1) * 10, avg_words=8.0, df=df)


def test_exact_word_outranks_an_inflection():
    hits = [_hit(1, "we were using the old one"), _hit(2, "we use the old one", thread="u")]
    ranked = rank(hits, parse_query("use"), _stats(*hits))
    assert [r.hit.seq for r in ranked] == [2, 1]


def test_a_reply_is_found_by_the_question_before_it():
    hits = [
        _hit(1, "what did you name the new puppy?"),
        _hit(2, "we went with Biscuit", score=0.0),
        _hit(3, "Biscuit loves the garden", score=0.0),
        _hit(4, "an unrelated note", score=0.0),
    ]
    ranked = rank(hits, parse_query("puppy name"), _stats(*hits))
    order = [r.hit.seq for r in ranked]
    assert order[0] == 1 and order.index(2) < order.index(3)
    assert 4 not in order  # three after a match is too far


def test_date_and_author_boosts():
    same = "painted a sunset over the harbour"
    hits = [
        _hit(1, same, thread="a", created="2023-07-14T12:00:00+00:00"),
        _hit(2, same, thread="b", created="2023-05-08T12:00:00+00:00"),
    ]
    may = rank(hits, parse_query("sunset harbour in May 2023"), _stats(*hits))
    assert may[0].hit.seq == 2
    authored = [
        _hit(1, "Caroline: " + same, thread="a"),
        _hit(2, same, thread="b", metadata=json.dumps({"speaker": "Melanie"})),
    ]
    assert author_of(authored[0]) == "Caroline" and author_of(authored[1]) == "Melanie"
    for name, expected in (("Caroline", 1), ("Melanie", 2)):
        ranked = rank(authored, parse_query(f"what did {name} paint"), _stats(*authored))
        assert ranked[0].hit.seq == expected, name


def test_a_thread_that_covers_the_query_lifts_its_messages():
    hits = [
        _hit(1, "the onboarding checklist for new hires", thread="x"),
        _hit(2, "we store the checklist in notion", thread="y"),
        _hit(3, "onboarding starts monday", thread="y"),
    ]
    ranked = rank(hits, parse_query("onboarding checklist"), _stats(*hits))
    # thread y covers both words across two messages: its single-word message beats nothing less
    assert ranked[0].hit.seq == 1
    assert {r.hit.seq for r in ranked} == {1, 2, 3}


@pytest.mark.parametrize("weight", [0.5, 1.0])
def test_blend_lets_a_clear_vector_match_in(weight):
    lexical = [(1, 9.0), (2, 5.0), (3, 1.0)]
    cosines = {1: 0.80, 2: 0.78, 3: 0.79, 4: 0.97, 5: 0.70}
    order = [k for k, _ in blend(lexical, cosines, weight)]
    assert order[0] == 1
    assert 4 in order[:3]
    assert [k for k, _ in blend(lexical, {})] == [1, 2, 3]


def test_the_question_word_names_the_answer_shape():
    assert parse_query("When did she move to Berlin?").asks == "time"
    assert parse_query("how many cats does he have").asks == "count"
    assert parse_query("what database do I use").asks is None
    hits = [
        _hit(1, "she moved to Berlin last March", thread="a"),
        _hit(2, "she loves Berlin and the lakes", thread="b"),
    ]
    stats = _stats(*hits)
    # equal words (ties go to the newer message); "when" wants a time
    assert rank(hits, parse_query("What about her and Berlin?"), stats)[0].hit.seq == 2
    assert rank(hits, parse_query("When did she get to Berlin?"), stats)[0].hit.seq == 1
