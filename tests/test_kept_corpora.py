"""The words of the corpora REM cycles compare, kept between cycles (`kept_corpora`), are a cache:
a repeat cycle after changes reads only the texts that changed, and finds exactly what the same
cycle finds with nothing kept."""

import importlib
import json
import sqlite3

import pytest

import planted
from mgcp import engine, text
from mgcp.config import parse_config
from mgcp.engine import cycle
from mgcp.operations import framed

CONFIG = parse_config({"rem": {op: {"max_findings": 500} for op in (
    "duplicate_detection", "community_detection", "contradiction_scan", "knowledge_extraction")}}, "test")
OPS = ["duplicate_detection", "community_detection", "knowledge_extraction", "contradiction_scan"]
P = planted.PROJECT
shared = importlib.import_module("mgcp.operations.shared")  # the package exports a function of that name


def _spy(monkeypatch) -> list[str]:
    """The ("words", text) pairs REM cycles read anew (not found among the kept corpora) from now on."""
    reads = []
    corpus = shared.Reader.corpus

    def read_corpus(reader, docs, read):
        def words(i):
            reads.append(("words", docs[i]))
            return read(i)
        return corpus(reader, docs, words)

    monkeypatch.setattr(shared.Reader, "corpus", read_corpus)
    return reads


def _corpora(path) -> dict:
    conn = sqlite3.connect(path)
    try:
        return dict(conn.execute("SELECT name, state FROM kept_corpora"))
    finally:
        conn.close()


def _result(report, communities) -> dict:
    return {"findings": sorted((f.fingerprint, f.kind, json.dumps(f.data, sort_keys=True)) for f in report.findings),
            "communities": sorted(json.loads(m) for (m,) in communities),
            "operations": {o.operation: (o.error, o.findings) for o in report.operations}}


async def _cycle(store):
    report = await engine.run_cycle(store, CONFIG, P, OPS)
    communities = await store.db.fetchall("SELECT member_ids FROM community_summaries")
    return _result(report, communities)


async def _analysed_and_cycle(store):
    """Every finding each operation makes (before those already pending are left out), with its
    scores, and its summary; then the cycle itself."""
    project = await store.queue.project(P)
    plan = cycle._plan(CONFIG, project, await store.rem.state(project.project_id), OPS)
    analysed = {}
    async for analysis in cycle._analyse(store, CONFIG, project, plan, None):
        summary = {k: v for k, v in analysis.summary.items() if k != "input_digest"}
        analysed[analysis.plan.operation] = (
            analysis.error, summary,
            sorted((f.fingerprint, f.kind, json.dumps(f.data, sort_keys=True)) for f in analysis.findings))
    return analysed, await _cycle(store)


async def _change(store):
    """A few of everything: refined, archived, added (one a copy of a kept rule), and new history."""
    await planted.change_a_few(store)
    for i in range(3):
        await store.context.register_session(P, f"kept-words-{i}")
        await store.context.save(P, notes=f"Session {i}: tuned the connection pool size again",
                                 decisions=["Keep the connection pool at twenty connections"])


def test_a_repeat_cycle_after_changes_reads_only_what_changed_and_finds_what_a_cycle_without_kept_corpora_finds(
        tmp_path, run, monkeypatch):
    path = tmp_path / "a.db"
    planted.build(path)
    run(path, _cycle)
    corpora_first = _corpora(path)
    assert len(corpora_first) == 3  # triggers, actions, and each lesson's whole text
    run(path, _change)
    other = planted.copy_without(path, tmp_path / "b.db", "kept_corpora")

    reads = _spy(monkeypatch)
    repeat = run(path, _analysed_and_cycle)
    read_again = list(reads)
    reads.clear()
    full = run(other, _analysed_and_cycle)

    assert repeat == full
    analysed, cycled = repeat
    assert all(analysed[op][2] for op in OPS) and cycled["communities"]
    assert not any(error for error, *_ in analysed.values())
    # the repeat read only the changed and new texts; the cycle with nothing kept read them all
    assert 0 < len(read_again) <= 20 < len(reads)
    assert {doc for _, doc in read_again} <= {doc for _, doc in reads}
    assert any("Check the result twice" in doc for _, doc in read_again)
    # both keep the same corpora, the changed texts in them
    assert _corpora(path) == _corpora(other) and _corpora(path) != corpora_first


def test_new_reading_rules_read_every_text_again(tmp_path, run, monkeypatch):
    path = tmp_path / "a.db"
    planted.build(path)
    first = run(path, _cycle)
    monkeypatch.setattr(shared, "WORDS", b"another version of the rules")
    reads = _spy(monkeypatch)
    conn = sqlite3.connect(path)
    conn.execute("UPDATE rem_state SET last_run_result = NULL")  # run the operations again in full
    conn.commit()
    conn.close()
    corpora = _corpora(path)
    again = run(path, _cycle)
    texts = sum(framed.unframe(state, 4)[0]["texts"] for state in corpora.values())  # each corpus's count
    assert len([name for name, _ in reads if name == "words"]) == texts
    after = _corpora(path)
    assert set(after) == set(corpora) and not set(after.values()) & set(corpora.values())  # replaced
    assert again["communities"] == first["communities"]


def test_a_dry_run_keeps_nothing(tmp_path, run):
    path = tmp_path / "a.db"
    planted.build(path)

    async def dry(store):
        return await engine.run(store, CONFIG, P, OPS, auto=True, dry_run=True)

    run(path, dry)
    assert _corpora(path) == {}


@pytest.mark.parametrize("doc", ["", "Don't use camelCase names", "Make sure the TailwindCSS build runs"])
def test_a_reader_gives_the_words_text_terms_gives_in_a_corpus_or_not(doc):
    reader = shared.Reader()
    assert reader.terms(doc) == tuple(text.terms(doc))
    reader.corpus([doc, "other words"], lambda i: text.terms([doc, "other words"][i]))
    assert reader.terms(doc) == tuple(text.terms(doc))
