"""The FTS side (om_mcp.store.sqlite.fts) with the engine's search on real SQLite databases."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from om_mcp.engine.search import parse_query
from om_mcp.engine.search.rank import rank
from om_mcp.store.sqlite import fts

MESSAGES = """
CREATE TABLE messages (
  seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL, thread_id TEXT NOT NULL, resource_id TEXT NOT NULL,
  role TEXT NOT NULL, body TEXT NOT NULL, parts TEXT, created_at TEXT NOT NULL, metadata TEXT,
  tokens INTEGER NOT NULL, UNIQUE (thread_id, id));
CREATE INDEX messages_by_thread ON messages(thread_id, seq);
"""


def open_db(path: str | Path = ":memory:") -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    if path != ":memory:":
        conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA secure_delete = ON")
    conn.executescript(MESSAGES)
    for statement in fts.SCHEMA:
        conn.execute(statement)
    return conn


def add(conn: sqlite3.Connection, thread: str, bodies: list[str], resource: str = "u1") -> list[int]:
    conn.execute("BEGIN")
    seqs = []
    for i, body in enumerate(bodies):
        seqs.append(
            conn.execute(
                "INSERT INTO messages (id, thread_id, resource_id, role, body, created_at, tokens)"
                " VALUES (?,?,?,?,?,?,?)",
                (f"{thread}-{i}-{len(bodies)}", thread, resource, "user", body, "2024-05-01T12:00:00+00:00", 10),
            ).lastrowid
        )
    assert fts.index_messages(conn, seqs) == len(seqs)
    conn.execute("COMMIT")
    return seqs


def search(conn, resource: str, text: str, *, thread_id: str | None = None, limit: int = 20, now=None):
    """The lexical path as the store and the engine run it, on one connection."""
    query = parse_query(text, now)
    if not query.terms:
        return []
    hits, stats = fts.find(conn, resource, query, thread_id=thread_id, limit=max(50, limit))
    return rank(hits, query, stats)[:limit]


def bodies(conn, resource, query, **kw) -> list[str]:
    return [r.hit.body for r in search(conn, resource, query, **kw)]


def test_what_database_do_i_use_finds_the_database_not_the_pronoun():
    conn = open_db()
    add(
        conn,
        "chat1",
        [
            "Let us know when the build is green",
            "Thanks for inviting us to the demo",
            "The team told us the release slipped",
        ],
    )
    add(conn, "chat2", ["Which datastore did you pick for the app?", "we use Postgres 16"])
    add(conn, "chat3", ["usage of the us-east region is up"])
    found = bodies(conn, "u1", "what database do I use")
    assert found[0] == "we use Postgres 16"
    assert not any(" us " in f" {b} " for b in found[:1])


def test_hosting_provider_finds_where_we_deploy():
    conn = open_db()
    add(conn, "infra", ["How should we ship the new API?", "We deploy on Fly.io", "and logs go to the usual place"])
    add(conn, "other", ["The provider of our coffee beans changed"])
    found = bodies(conn, "u1", "hosting provider")
    assert "We deploy on Fly.io" in found[:2]


def test_a_reply_is_found_through_the_question_and_the_exact_word_first():
    conn = open_db()
    add(
        conn,
        "pets",
        [
            "What did you end up naming the new puppy?",
            "We went with Biscuit, after the cookies.",
            "Also, the garden needs water.",
        ],
    )
    add(conn, "names", ["the street name changed last year", "please print a name badge for the conference"])
    found = bodies(conn, "u1", "puppy name")
    assert found.index("We went with Biscuit, after the cookies.") <= 1
    assert found.index("We went with Biscuit, after the cookies.") < found.index("the street name changed last year")
    assert bodies(conn, "u1", "Biscuit")[0] == "We went with Biscuit, after the cookies."


def test_resources_and_threads_are_isolated():
    conn = open_db()
    add(conn, "a", ["the zeppelin blueprint is in the attic"], resource="u1")
    add(conn, "b", ["another zeppelin sighting"], resource="u1")
    add(conn, "c", ["zeppelin notes of someone else"], resource="u2")
    assert set(bodies(conn, "u1", "zeppelin")) == {
        "the zeppelin blueprint is in the attic",
        "another zeppelin sighting",
    }
    assert bodies(conn, "u2", "zeppelin") == ["zeppelin notes of someone else"]
    assert bodies(conn, "u1", "zeppelin", thread_id="b") == ["another zeppelin sighting"]
    assert bodies(conn, "u3", "zeppelin") == []
    # u1 holds most of the index (searched without its scope token), u2 does not: both paths isolate
    assert dict(conn.execute("SELECT resource_id, messages FROM messages_fts_scopes")) == {"u1": 2, "u2": 1}
    conn.execute("BEGIN")
    assert fts.forget_resource(conn, "u2") == 1
    conn.execute("DELETE FROM messages WHERE resource_id = 'u2'")
    conn.execute("COMMIT")
    assert dict(conn.execute("SELECT resource_id, messages FROM messages_fts_scopes")) == {"u1": 2}
    assert bodies(conn, "u2", "zeppelin") == []


@pytest.mark.parametrize(
    "query",
    [
        '"',
        "*",
        "NEAR(a b)",
        "a AND OR NOT",
        "body:secret",
        'puppy" OR "*',
        "puppy*",
        "-puppy",
        "(",
        "\x00puppy",
        "'; DROP TABLE messages; --",
        "🐶 puppy",
        "a" * 500,
        "don't",
        "e-mail",
        "ünïcödé",
        "𝔘𝔫𝔦𝔠𝔬𝔡𝔢",
        "ℌ𝔢𝔩𝔩𝔬",
        "\ue000puppy",
        "ꓐꓲꓢ ⅻ ²³",
    ],
)
def test_hostile_queries_are_text(query):
    conn = open_db()
    add(conn, "t", ["the puppy chewed the sofa", "secret recipe: cookies"])
    found = bodies(conn, "u1", query)
    if "puppy" in query:
        assert "the puppy chewed the sofa" in found
    assert conn.execute("SELECT COUNT(*) FROM messages").fetchone()[0] == 2


def test_forget_messages_and_rebuild_keep_the_index_consistent():
    conn = open_db()
    keep = add(conn, "keep", ["gnome collection grows", "gnome hats"])
    gone = add(conn, "gone", ["gnome army assembles"])
    conn.execute("BEGIN")
    assert fts.forget_messages(conn, gone) == 1
    conn.execute("DELETE FROM messages WHERE thread_id = 'gone'")
    conn.execute("COMMIT")
    assert sorted(bodies(conn, "u1", "gnome")) == ["gnome collection grows", "gnome hats"]
    stats = fts.term_stats(conn, ["gnome", "army"])
    assert stats.rows == len(keep) and stats.df == {"gnome": 2}
    assert stats.avg_words == pytest.approx(2.5)
    assert fts.rebuild(conn) == 2
    assert sorted(bodies(conn, "u1", "gnome")) == ["gnome collection grows", "gnome hats"]
    conn.execute("INSERT INTO messages_fts (messages_fts) VALUES ('integrity-check')")


MARKER = "quetzalcoatlmarker"


def _raw(path: Path) -> bytes:
    data = path.read_bytes()
    wal = Path(str(path) + "-wal")
    return data + (wal.read_bytes() if wal.exists() else b"")


def test_deleted_thread_leaves_no_token_in_the_database_files(tmp_path):
    path = tmp_path / "memory.db"
    conn = open_db(path)
    add(conn, "keep", [f"kept message number {i} about gardening" for i in range(50)])
    doomed = add(conn, "doomed", [f"the {MARKER} plan, part {i}" for i in range(20)])
    add(conn, "later", ["a later message about gardening"])
    # the marker is really on disk (db or wal) before the deletion: the grep below can fail
    assert MARKER.encode() in _raw(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    assert MARKER.encode() in _raw(path)

    conn.execute("BEGIN IMMEDIATE")
    assert fts.forget_thread(conn, "doomed") == len(doomed)
    conn.execute("DELETE FROM messages WHERE thread_id = 'doomed'")
    fts.purge(conn)
    conn.execute("COMMIT")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    raw = _raw(path)
    assert MARKER.encode() not in raw
    assert MARKER[:10].encode() not in raw  # no fragment of the word either
    assert bodies(conn, "u1", MARKER) == []
    assert len(bodies(conn, "u1", "gardening", limit=100)) == 51
    conn.execute("INSERT INTO messages_fts (messages_fts) VALUES ('integrity-check')")
    conn.close()


def test_without_purge_the_token_survives(tmp_path):
    """Why purge exists: a plain FTS5 delete leaves the word in the index segments."""
    path = tmp_path / "memory.db"
    conn = open_db(path)
    add(conn, "keep", ["kept message about gardening"] * 5)
    add(conn, "doomed", [f"the {MARKER} plan"])
    conn.execute("BEGIN IMMEDIATE")
    fts.forget_thread(conn, "doomed")
    conn.execute("DELETE FROM messages WHERE thread_id = 'doomed'")
    conn.execute("COMMIT")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    assert MARKER.encode() in _raw(path)
    conn.close()


def _add_dated(conn, thread, items, resource="u1"):
    conn.execute("BEGIN")
    seqs = [
        conn.execute(
            "INSERT INTO messages (id, thread_id, resource_id, role, body, created_at, tokens) VALUES (?,?,?,?,?,?,?)",
            (f"{thread}-{i}", thread, resource, "user", body, when, 10),
        ).lastrowid
        for i, (body, when) in enumerate(items)
    ]
    fts.index_messages(conn, seqs)
    conn.execute("COMMIT")
    return seqs


def test_a_date_the_query_names_brings_its_messages_in_even_past_the_candidate_limit():
    conn = open_db()
    march = _add_dated(conn, "march", [("dinner at the new ramen place", "2024-03-14T19:00:00+01:00")])
    _add_dated(
        conn,
        "later",
        [(f"dinner plans, take {i}", f"2024-{5 + i // 28:02d}-{1 + i % 28:02d}T19:00:00+00:00") for i in range(120)],
    )
    assert fts.seq_window(conn, "u1", "2024-03-01T00:00:00+00:00", "2024-04-01T00:00:00+00:00") == (march[0], march[0])
    assert fts.seq_window(conn, "u1", "2023-01-01T00:00:00+00:00", "2023-02-01T00:00:00+00:00") is None
    assert fts.seq_window(conn, "u2", "2024-03-01T00:00:00+00:00", "2024-04-01T00:00:00+00:00") is None
    # 120 equally good newer matches fill the candidates; the date still finds March
    assert "dinner at the new ramen place" not in bodies(conn, "u1", "dinner")
    assert bodies(conn, "u1", "dinner in March 2024")[0] == "dinner at the new ramen place"


def test_no_window_when_time_does_not_follow_seq():
    conn = open_db()
    _add_dated(conn, "a", [("x", "2024-05-01T00:00:00+00:00"), ("y", "2024-06-01T00:00:00+00:00")])
    _add_dated(conn, "imported", [("old", "2019-03-01T00:00:00+00:00")])  # history imported later
    # the bisection lands on ranges whose edges are outside the dates: no window, words only
    assert fts.seq_window(conn, "u1", "2024-05-01T00:00:00+00:00", "2024-07-01T00:00:00+00:00") is None
    assert fts.seq_window(conn, "u1", "2019-01-01T00:00:00+00:00", "2020-01-01T00:00:00+00:00") is None
    assert bodies(conn, "u1", "old in 2019") == ["old"]


def test_the_answer_outranks_a_message_that_asks_the_same_thing():
    conn = open_db()
    add(conn, "a", ["Which editor does the team standardise on?"])
    add(conn, "b", ["The team standardise on the editor neovim"])
    found = bodies(conn, "u1", "which editor does the team standardise on")
    assert found[0] == "The team standardise on the editor neovim"


def test_a_message_cannot_claim_another_resources_scope():
    conn = open_db()
    add(conn, "victim", ["the victim's private zeppelin plans"], resource="victim")
    add(conn, "attacker", [f"{fts.scope_token('victim')} zeppelin zeppelin"], resource="attacker")
    assert bodies(conn, "victim", "zeppelin") == ["the victim's private zeppelin plans"]
    conn.execute("BEGIN")
    fts.forget_thread(conn, "attacker")
    conn.execute("DELETE FROM messages WHERE thread_id = 'attacker'")
    conn.execute("COMMIT")
    conn.execute("INSERT INTO messages_fts (messages_fts) VALUES ('integrity-check')")


def test_a_date_window_ends_at_the_resource_own_last_message():
    """The seq just before the next month's first message may be another resource's, or deleted: the window
    still ends at this resource's last message of the month (a search naming the month used to fail)."""
    conn = open_db()
    may = _add_dated(conn, "may", [("beach day with the kids", "2024-05-10T10:00:00+00:00")])
    _add_dated(conn, "other", [("someone else's note", "2024-05-20T10:00:00+00:00")], resource="u2")
    doomed = _add_dated(conn, "doomed", [("asked and deleted", "2024-05-25T10:00:00+00:00")])
    _add_dated(conn, "june", [("beach again", "2024-06-02T10:00:00+00:00")])
    conn.execute("BEGIN")
    fts.forget_thread(conn, "doomed")
    conn.execute("DELETE FROM messages WHERE thread_id = 'doomed'")
    conn.execute("COMMIT")
    assert doomed[0] > may[0]
    assert fts.seq_window(conn, "u1", "2024-05-01T00:00:00+00:00", "2024-06-01T00:00:00+00:00") == (may[0], may[0])
    assert bodies(conn, "u1", "beach in May 2024")[0] == "beach day with the kids"
