"""Synthetic knowledge bases for the mgcp benchmark (deterministic for a given seed).

Two kinds of database:

* `build_db(path, lessons, history, seed)`: a current-schema database. The schema is created by
  mgcp's own migrations (`open_and_migrate` on an empty file); the rows are then written with bulk
  `executemany` straight into `lessons`, `lesson_versions`, the FTS index (`lesson_search_docs`,
  `lesson_search`), `project_contexts`, `context_history`, `project_sessions` and `query_log` -
  never through the async store one row at a time. Returns the *labels* (planted duplicates, planted
  themes, stale todos, the main project path, ...), which are also written next to the file as
  `<path>.labels.json`.

* `build_legacy_db(path, lessons, seed)`: a pre-versioning database made from
  the legacy schema (kept in migration 0001), with legacy-style rows: refined lessons carry "\\n\\n[vN] <reason>"
  annotations in `rationale` (or the bare reason when the rationale was empty), relationships as
  JSON, projects with todos, decisions and a catalogue.

What the data looks like:

* English-like lessons ("When <verb>ing the <topic words> ...") organised in topics. Each topic has
  its own vocabulary (a few real technical nouns plus made-up topic words, so that a topic is
  distinguishable) and lessons mix it with a shared general vocabulary. Lessons link 0-2 topic-mates
  with explicit relationships (both ways, like the legacy format).
* Planted near-duplicates (positive labels): a *light rewrite* of a base lesson - 1 to 3 edits, each
  swapping, adding or dropping one word (a swap = a word replaced by another, or two words
  exchanging places). Planted hard negatives: *topic-mates* that keep the base lesson's sentence
  skeleton with 35-60% of its content words replaced (topic words by other topic words): a
  different lesson on the same subject that shares much of its vocabulary. Everything else is
  unlabeled background.
* Context history spread over several projects. The *main* project (the one the hook and the REM
  benchmark use) holds 10% of the rows. Its notes carry planted themes (two made-up words that no
  lesson contains, in the notes of 3 to 8 distinct sessions) and one-off novel words (1-2 sessions:
  not a theme). Its todo list carries planted stale todos (pending across 6-12 sessions); ordinary
  todos are done within 1-3 sessions.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import sqlite3
from datetime import datetime, timedelta, timezone
from pathlib import Path

SYNTH_VERSION = 6  # bump when the data changes: cached databases are keyed by it

# The legacy schema as migration 0001 keeps it (the tables an existing user's database has).
LEGACY_MIGRATION = Path(__file__).resolve().parents[1] / "migrations" / "0001_legacy_tables.py"


def legacy_schema() -> str:
    namespace: dict = {}
    exec(LEGACY_MIGRATION.read_text(), namespace)
    return namespace["LEGACY_SCHEMA"]

NOW = datetime(2026, 6, 1, 12, 0, 0, tzinfo=timezone.utc)  # fixed "now" of the data (ages are relative)

# ------------------------------------------------------------------------------------------------
# vocabulary

GENERAL_NOUNS = """
account address agent alert archive argument array attempt attribute audit backup balance banner
batch baseline boundary branch browser budget buffer bundle button callback campaign canvas
capacity caption certificate channel chapter checkpoint client column command comment commit
component condition connection console constant consumer contract contributor counter coverage
credential cursor customer dashboard dataset deadline default delay dependency deployment
descriptor detail device diagram dialog dictionary digest directory document domain draft driver
editor element endpoint engine entry environment estimate event example exception exporter
expression extension factory feature feedback field filter fixture flag folder footer format
fragment frame gateway generator grammar graph guard handler header heuristic history host
identifier image importer incident indicator input instance interface interval invoice item
iterator journal kernel keyboard label latency layer layout ledger library license limit listener
locale lock logger loop manifest mapping margin marker matrix message metadata method metric
migration mirror mode model module monitor mutation namespace network node notice object offset
operator option order origin outline output owner package packet page panel parameter parser
partition password patch path payload peer permission pipeline placeholder platform plugin pointer
policy pool portal preference prefix printer priority procedure process producer profile program
prompt property protocol provider proxy publisher quota range ratio reader receipt record
reference region registry release replica report repository request resolver resource response
result retry revision role router rule runtime sample sandbox scanner schedule schema scope screen
script section selector sequence server service setting shard signal signature sketch snapshot
socket source specification spreadsheet stack statement status storage stream string structure
subscriber suffix summary supplier surface switch symbol table target template tenant terminal
thread threshold ticket timeline timestamp token topic trace tracker transaction transform tree
trigger tuple type unit upload user validator value variable vector vendor version viewer volume
warning webhook widget window worker workspace wrapper
""".split()

GENERAL_VERBS = """
adjust allocate annotate append apply archive assert assign attach audit authorize balance batch
bound buffer build bundle cache calculate call cancel capture check clamp classify clean clear
clone close collapse collect combine compare compile compress compute configure confirm connect
convert copy count create debounce decode deduplicate defer define delete deploy describe detach
detect disable dispatch document download drain drop emit enable encode enforce enqueue escape
evaluate expand expire export extract fetch filter flatten flush format freeze generate group guard
hash hydrate ignore import index inject inspect install instrument invalidate isolate join label
launch limit link list load lock log map mark measure merge migrate mirror mock monitor mount move
normalize notify observe open order pack paginate parse partition patch pause persist pin poll
prefetch prepare preserve print prioritize probe profile propagate prune publish query queue read
rebuild record recover redact reduce refresh register reject release reload remove render repair
replay report request reserve reset resolve restore retry return revert rotate route sample
sanitize save scan schedule scope seed select serialize shard share shrink sign simulate skip sort
split stage start stop store stream subscribe summarize suspend swap sync tag throttle time trace
track transform translate trim truncate tune unlock unpack update upgrade upload validate verify
version wait warm watch wrap write yield
""".split()

ADJECTIVES = """
active atomic blocking brittle cached canonical cheap cold compact concurrent consistent costly
critical current dedicated deep default dirty durable dynamic eager empty expensive explicit
external fallible flaky fresh frozen global hidden hot idle immutable implicit incremental
internal isolated large lazy legacy linear local long manual minimal missing mutable narrow nested
noisy optional orphaned partial pending persistent plain primary private public quiet raw readonly
recent redundant remote repeated required reusable robust safe scarce secondary serial shallow
shared short silent slow sparse stable stale static strict synchronous temporary transient trusted
unbounded unique unsafe unused upstream valid verbose volatile warm wide
""".split()

TECH_NOUNS = """
cache index query schema cursor socket thread mutex queue worker token session cookie header
payload webhook pipeline container image volume cluster replica shard partition migration backup
snapshot certificate secret credential policy permission role tenant quota metric trace span log
alert dashboard build artifact package dependency lockfile registry release branch commit merge
rebase tag hook linter formatter compiler bundler transpiler runtime interpreter debugger profiler
benchmark fixture mock stub spy assertion coverage snapshot regression timeout deadline retry
backoff circuit breaker limiter throttle pool connection transaction isolation deadlock lock
latch semaphore channel stream buffer encoder decoder parser serializer validator router endpoint
gateway proxy balancer resolver scheduler cron daemon service handler middleware interceptor
decorator closure generator iterator coroutine future promise callback listener emitter reducer
selector store component template layout stylesheet viewport render hydration accessibility
locale translation encoding checksum signature cipher nonce salt hashing entropy sandbox
""".split()

PREPS = ["in", "for", "across", "inside", "behind", "around", "after", "before", "during", "under"]
CONNECT = ["because", "so that", "otherwise", "since", "which keeps", "and then", "so", "unless"]

_ONSET = ["b", "br", "c", "cr", "d", "dr", "f", "fl", "g", "gr", "k", "kl", "l", "m", "n", "p", "pl",
          "qu", "r", "s", "st", "t", "tr", "v", "vr", "z", "sk", "sn", "th", "j"]
_VOWEL = ["a", "e", "i", "o", "u", "ai", "ou", "ea", "y"]
_CODA = ["", "", "n", "r", "l", "m", "x", "k", "t", "nd", "rk", "lt", "sk", "v"]
_REAL = set(GENERAL_NOUNS) | set(GENERAL_VERBS) | set(ADJECTIVES) | set(TECH_NOUNS)


class WordMint:
    """Made-up, pronounceable words, never repeated and never a real vocabulary word. Words do not
    end in s/ed/ing/ly, so the mgcp stemmer leaves them alone."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.used: set[str] = set(_REAL)

    def word(self) -> str:
        while True:
            syl = self.rng.choice([2, 2, 3])
            w = "".join(self.rng.choice(_ONSET) + self.rng.choice(_VOWEL) for _ in range(syl))
            w += self.rng.choice(_CODA)
            if (len(w) >= 5 and w not in self.used and not w.endswith(("s", "ed", "ing", "ly", "e"))):
                self.used.add(w)
                return w


def _iso(dt: datetime) -> str:
    return dt.isoformat()


def _ing(verb: str) -> str:
    if verb.endswith("e") and not verb.endswith("ee"):
        return verb[:-1] + "ing"
    return verb + "ing"


# ------------------------------------------------------------------------------------------------
# lessons

class Topic:
    def __init__(self, index: int, rng: random.Random, mint: WordMint):
        self.index = index
        self.name = mint.word()
        self.words = rng.sample(TECH_NOUNS, 6) + [mint.word() for _ in range(14)]
        self.tags = [self.name] + [mint.word() for _ in range(3)]


def _lesson_words(rng: random.Random, topic: Topic, keep: list[str] | None = None) -> list[str]:
    """A lesson as a token list: trigger tokens, '|', action tokens. Topic words fill the slots
    (from `keep` first, for topic-mates)."""
    pool = list(keep or []) + [w for w in rng.sample(topic.words, 8) if w not in (keep or [])]
    t = iter(pool)
    g = lambda: rng.choice(GENERAL_NOUNS)  # noqa: E731
    v = lambda: rng.choice(GENERAL_VERBS)  # noqa: E731
    a = lambda: rng.choice(ADJECTIVES)  # noqa: E731
    trigger = ["When", _ing(v()), "the", next(t), next(t), rng.choice(PREPS), "a", a(), g(), g()]
    action = [v().capitalize(), "the", a(), next(t), g(), "before", _ing(v()), "any", next(t), g() + ";",
              v(), "each", a(), next(t), rng.choice(PREPS), "the", g(), next(t) + ",",
              rng.choice(CONNECT), "the", a(), g(), v(), "the", next(t), g() + "."]
    return trigger + ["|"] + action


def _split(words: list[str]) -> tuple[str, str]:
    i = words.index("|")
    return " ".join(words[:i]), " ".join(words[i + 1:])


def _rewrite(rng: random.Random, words: list[str], edits: int) -> list[str]:
    """A light rewrite: `edits` times swap (replace a word, or exchange two), add or drop a word."""
    out = list(words)
    for _ in range(edits):
        slots = [i for i, w in enumerate(out) if w != "|" and w.isalpha() and len(w) > 3]
        kind = rng.choice(["replace", "exchange", "add", "drop"])
        i = rng.choice(slots)
        if kind == "replace":
            out[i] = rng.choice(GENERAL_NOUNS)
        elif kind == "exchange":
            j = rng.choice(slots)
            out[i], out[j] = out[j], out[i]
        elif kind == "add":
            out.insert(i, rng.choice(ADJECTIVES))
        else:
            del out[i]
    return out


def _sibling(rng: random.Random, topic: Topic, words: list[str]) -> list[str]:
    """A topic-mate: the base lesson's sentence skeleton with 35-60% of its content words replaced
    (topic words by other topic words, other words by general words): a different lesson on the
    same subject that shares much of the vocabulary. Similarity lands around 0.4-0.7."""
    p = rng.uniform(0.35, 0.6)
    out = []
    for w in words:
        bare = w.rstrip(";,.")
        if w != "|" and bare.isalpha() and len(bare) > 3 and rng.random() < p:
            new = rng.choice(topic.words) if bare in topic.words else rng.choice(GENERAL_NOUNS)
            w = new + w[len(bare):]
        out.append(w)
    return out


def make_lessons(n: int, seed: int) -> tuple[list[dict], dict]:
    """n lessons as dicts (legacy column names) and the labels."""
    rng = random.Random(seed)
    mint = WordMint(random.Random(seed + 1))
    n_topics = max(20, n // 250)
    topics = [Topic(i, rng, mint) for i in range(n_topics)]
    n_dup = max(10, n // 40)        # 2.5% bases get a light rewrite (5% of lessons are in a pair)
    n_mate = max(10, n // 40)       # and as many get a topic-mate (hard negative)
    n_base = n - n_dup - n_mate
    lessons: list[dict] = []
    words_of: list[list[str]] = []
    topic_of: list[int] = []
    for i in range(n_base):
        topic = topics[i % n_topics]
        words_of.append(_lesson_words(rng, topic))
        topic_of.append(topic.index)
    dup_pairs, mate_pairs = [], []
    bases = rng.sample(range(n_base), n_dup + n_mate)
    for b in bases[:n_dup]:
        words_of.append(_rewrite(rng, words_of[b], rng.randint(1, 3)))
        topic_of.append(topic_of[b])
        dup_pairs.append((b, len(words_of) - 1))
    for b in bases[n_dup:]:
        words_of.append(_sibling(rng, topics[topic_of[b]], words_of[b]))
        topic_of.append(topic_of[b])
        mate_pairs.append((b, len(words_of) - 1))
    order = list(range(n))
    rng.shuffle(order)  # ids do not reveal which lesson is the copy
    ids = [""] * n
    for new_pos, old in enumerate(order):
        ids[old] = f"les-{new_pos:06d}"
    # relationships: each lesson links 0-2 topic-mates, stored on both ends
    by_topic: dict[int, list[int]] = {}
    for i, t in enumerate(topic_of):
        by_topic.setdefault(t, []).append(i)
    rels: list[list[dict]] = [[] for _ in range(n)]
    rel_types = ["related", "prerequisite", "complements", "specializes", "sequence_next", "alternative"]
    for i in range(n):
        for _ in range(rng.choice([0, 0, 1, 1, 2])):
            j = rng.choice(by_topic[topic_of[i]])
            if j == i or any(r["target"] == ids[j] for r in rels[i]):
                continue
            typ = rng.choice(rel_types)
            rels[i].append({"target": ids[j], "type": typ, "weight": 0.5, "context": [], "bidirectional": True})
            rels[j].append({"target": ids[i], "type": typ, "weight": 0.5, "context": [], "bidirectional": True})
    for i in range(n):
        topic = topics[topic_of[i]]
        trigger, action = _split(words_of[i])
        created = NOW - timedelta(days=rng.uniform(1, 730))
        r = rng.random()
        usage = 0 if r < 0.55 else rng.randint(1, 9) if r < 0.9 else rng.randint(10, 200)
        version = 1 if rng.random() < 0.8 else rng.choice([2, 2, 3, 3, 4, 5, 6])
        refined = created + (NOW - created) * rng.random() if version > 1 else created
        last_used = (created + (NOW - created) * rng.random()) if usage else None
        tags = sorted({topic.name, rng.choice(topic.tags[1:])})
        lessons.append({
            "id": ids[i], "trigger": trigger, "action": action,
            "rationale": f"Otherwise the {rng.choice(topic.words)} {rng.choice(GENERAL_NOUNS)} "
                         f"becomes {rng.choice(ADJECTIVES)} and {rng.choice(GENERAL_VERBS)} fails.",
            "examples": "[]", "version": version, "created_at": _iso(created),
            "last_refined": _iso(refined), "last_used": _iso(last_used) if last_used else None,
            "usage_count": usage, "tags": json.dumps(tags), "parent_id": None, "related_ids": "[]",
            "relationships": json.dumps(rels[i]), "_topic": topic.index,
        })
    labels = {
        "duplicate_pairs": [sorted([ids[a], ids[b]]) for a, b in dup_pairs],
        "topic_mate_pairs": [sorted([ids[a], ids[b]]) for a, b in mate_pairs],
        "topics": len(topics),
        "topic_words": sorted({w for t in topics for w in t.words}),
    }
    return lessons, {"labels": labels, "topics": topics, "mint": mint, "rng": rng}


# ------------------------------------------------------------------------------------------------
# context history

MAIN_PROJECT = "/home/dev/projects/bench-main"
MAIN_SHARE = 0.10


def normalize(path: str) -> str:
    return os.path.normpath(os.path.abspath(os.path.expanduser(path)))


def project_id_for(path: str) -> str:
    return hashlib.sha256(path.encode("utf-8")).hexdigest()[:12]


def canonical(value) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _note_pool(rng: random.Random, topics: list[Topic], size: int) -> list[str]:
    pool = []
    for _ in range(size):
        t = rng.choice(topics)
        pool.append(
            f"{_ing(rng.choice(GENERAL_VERBS)).capitalize()} the {rng.choice(t.words)} "
            f"{rng.choice(GENERAL_NOUNS)} for the {rng.choice(ADJECTIVES)} {rng.choice(GENERAL_NOUNS)}. "
            f"The {rng.choice(t.words)} {rng.choice(GENERAL_NOUNS)} still needs to "
            f"{rng.choice(GENERAL_VERBS)} its {rng.choice(GENERAL_NOUNS)}; "
            f"{rng.choice(GENERAL_VERBS)} the {rng.choice(ADJECTIVES)} {rng.choice(t.words)} next.")
    return pool


def _project_rows(rng, mint, topics, project_index, path, rows, themes_n, stale_n, note_pool, labels,
                  end: datetime):
    """Yield context_history tuples and collect project_sessions rows for one project."""
    pid = project_id_for(path)
    is_main = themes_n > 0
    saves = [rng.choice([1, 2, 2, 3]) for _ in range(rows)]
    session_of_row = []
    s = 0
    while len(session_of_row) < rows:
        s += 1
        session_of_row.extend([s] * saves[s % len(saves)])
    session_of_row = session_of_row[:rows]
    n_sessions = session_of_row[-1]
    start = end - timedelta(days=max(30, n_sessions // 4))
    step = (end - start) / max(rows, 1)
    sid = lambda k: f"{project_index:04x}{k:08x}-5e55-4000-8000-{hashlib.md5(f'{path}{k}'.encode()).hexdigest()[:12]}"  # noqa: E731
    # planted themes and stale todos live in the most recent sessions of the main project
    theme_sessions: dict[int, list[str]] = {}
    oneoff_sessions: dict[int, list[str]] = {}
    stale_sessions: dict[int, list[str]] = {}
    recent = list(range(max(1, n_sessions - 150), n_sessions + 1))
    if is_main:
        for _ in range(themes_n):
            phrase = f"{mint.word()} {mint.word()}"
            k = rng.randint(3, 8)
            chosen = sorted(rng.sample(recent, min(k, len(recent))))
            for c in chosen:
                theme_sessions.setdefault(c, []).append(phrase)
            labels["themes"].append({"theme": phrase, "sessions": chosen})
        for _ in range(themes_n * 2):
            word = mint.word()
            chosen = sorted(rng.sample(recent, rng.randint(1, 2)))
            for c in chosen:
                oneoff_sessions.setdefault(c, []).append(word)
            labels["one_off_words"].append(word)
        for _ in range(stale_n):
            t = rng.choice(topics)
            todo = f"{rng.choice(GENERAL_VERBS).capitalize()} the {rng.choice(t.words)} {mint.word()} {rng.choice(GENERAL_NOUNS)}"
            length = rng.randint(6, 12)  # pending over its last `length` sessions, still pending now
            span = list(range(max(1, n_sessions - length + 1), n_sessions + 1))
            for c in span:
                stale_sessions.setdefault(c, []).append(todo)
            labels["stale_todos"].append({"todo": todo, "sessions": span})
    files = [f"src/{rng.choice(GENERAL_NOUNS)}/{rng.choice(GENERAL_NOUNS)}.py" for _ in range(40)]
    todos: list[dict] = []      # {"content", "status", "priority", "created_at", "notes"} + "_until"
    decisions: list[str] = []
    active = rng.sample(files, 3)
    catalogue = {"language": "python", "framework": rng.choice(["fastapi", "django", "flask"]),
                 "build": {"version": 1}}
    prev_catalogue: dict = {}
    cat_hash = ""
    todos_json = decisions_json = active_json = None
    out = []
    sess_rows = []
    last_session = 0
    for r in range(rows):
        k = session_of_row[r]
        ts = _iso(start + step * r)
        new_session = k != last_session
        if new_session:
            sess_rows.append((pid, sid(k), k, "startup", ts))
            last_session = k
            changed = False
            # ordinary todos: done within 1-3 sessions
            kept = [t for t in todos if t["_until"] >= k]
            changed = len(kept) != len(todos)
            todos = kept
            if rng.random() < 0.5:
                todos.append({"content": f"{rng.choice(GENERAL_VERBS).capitalize()} the {rng.choice(ADJECTIVES)} {rng.choice(GENERAL_NOUNS)} {rng.choice(GENERAL_NOUNS)}",
                              "status": "pending", "priority": rng.choice(["low", "medium", "high"]),
                              "created_at": ts, "notes": None, "_until": k + rng.randint(0, 2)})
                changed = True
            stale_now = stale_sessions.get(k, [])
            visible = [t for t in todos if not t.get("_stale")]
            if stale_now or any(t.get("_stale") for t in todos):
                visible += [{"content": c, "status": "pending", "priority": "medium", "created_at": ts,
                             "notes": None, "_until": k, "_stale": True} for c in stale_now]
                changed = True
            todos = visible
            if changed or todos_json is None:
                todos_json = json.dumps([{kk: vv for kk, vv in t.items() if not kk.startswith("_")} for t in todos])
            if rng.random() < 0.3 or active_json is None:
                active = rng.sample(files, rng.randint(1, 4))
                active_json = json.dumps(active)
        if rng.random() < 0.3 or decisions_json is None:
            decisions = (decisions + [f"Use {rng.choice(ADJECTIVES)} {rng.choice(GENERAL_NOUNS)} for the {rng.choice(rng.choice(topics).words)} {rng.choice(GENERAL_NOUNS)}"])[-10:]
            decisions_json = json.dumps(decisions)
        note = rng.choice(note_pool)
        if k in theme_sessions and new_session:
            note += " " + " ".join(f"Again the {p} came up." for p in theme_sessions[k])
        if k in oneoff_sessions and new_session:
            note += " " + " ".join(f"Tried {w} once." for w in oneoff_sessions[k])
        if r == 0 or rng.random() < 0.01:
            if r:
                catalogue = {**catalogue, "build": {"version": catalogue["build"]["version"] + 1}}
            delta = {"added": {kk: v for kk, v in catalogue.items() if kk not in prev_catalogue},
                     "removed": {}, "changed": {kk: v for kk, v in catalogue.items()
                                                if kk in prev_catalogue and prev_catalogue[kk] != v}}
            prev_catalogue = catalogue
            cat_hash = hashlib.sha256(canonical(catalogue).encode()).hexdigest()
            delta_json = json.dumps(delta)
        else:
            delta_json = '{"added": {}, "removed": {}, "changed": {}}'
        out.append((pid, k, sid(k), ts, note, active_json, todos_json, decisions_json, cat_hash, delta_json))
    project = (pid, os.path.basename(path), path, canonical(catalogue), todos_json, active_json,
               decisions_json, sid(n_sessions), out[-1][3], n_sessions, out[-1][4])
    return project, out, sess_rows


def build_db(path: str | os.PathLike, n_lessons: int, n_history: int, seed: int = 7) -> dict:
    from mgcp.persistence.migrate import open_and_migrate

    path = Path(path)
    for suffix in ("", "-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)
    open_and_migrate(path)
    lessons, state = make_lessons(n_lessons, seed)
    rng, mint, topics = state["rng"], state["mint"], state["topics"]
    labels = state["labels"]
    labels.update({"themes": [], "one_off_words": [], "stale_todos": [], "lessons": n_lessons,
                   "history": n_history, "seed": seed, "main_project": MAIN_PROJECT,
                   "synth_version": SYNTH_VERSION})
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = OFF")
    conn.execute("PRAGMA cache_size = -200000")
    conn.execute("BEGIN")
    cols = ["id", "trigger", "action", "rationale", "examples", "version", "created_at", "last_refined",
            "last_used", "usage_count", "tags", "parent_id", "related_ids", "relationships"]
    conn.executemany(f"INSERT INTO lessons ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                     ([l[c] for c in cols] for l in lessons))
    versions = []
    for l in lessons:
        for k in range(1, l["version"]):
            versions.append((l["id"], k, l["trigger"], l["action"] + f" (draft {k})", l["rationale"],
                             l["tags"], l["created_at"], f"draft {k} missed a case", None, 0))
        versions.append((l["id"], l["version"], l["trigger"], l["action"], l["rationale"], l["tags"],
                         l["last_refined"], None, None, 0))
    conn.executemany(
        """INSERT INTO lesson_versions (lesson_id, version, trigger, action, rationale, tags, timestamp,
           refinement_reason, session_id, reconstructed) VALUES (?,?,?,?,?,?,?,?,?,?)""", versions)
    # kinds and confidence: most lessons keep the defaults (no row, as lessons written before kinds
    # were recorded); a few are constraints, preferences and error solutions; some have outcomes
    traits, outcomes = [], []
    for l in lessons:
        roll = rng.random()
        kind = ("constraint" if roll < 0.01 else "preference" if roll < 0.03
                else "error_solution" if roll < 0.05 else None)
        if kind:
            traits.append((l["id"], l["version"], kind, round(rng.uniform(0.6, 1.0), 2), l["last_refined"]))
        if rng.random() < 0.05:
            helped, failed = rng.randint(0, 6), rng.randint(0, 3)
            outcomes.append((l["id"], helped, failed, 0, None, l["last_refined"]))
    conn.executemany("""INSERT INTO lesson_traits (lesson_id, version, kind, confidence, created_at)
                        VALUES (?,?,?,?,?)""", traits)
    conn.executemany("""INSERT INTO lesson_outcome_stats (lesson_id, helped, failed, streak, streak_started,
                        last_outcome_at) VALUES (?,?,?,?,?,?)""", outcomes)
    conn.execute("INSERT INTO lesson_search_docs (lesson_id) SELECT id FROM lessons ORDER BY rowid")
    conn.execute(
        """INSERT INTO lesson_search (rowid, trigger, action, rationale, tags)
           SELECT d.id, l.trigger, l.action, COALESCE(l.rationale, ''), l.tags
           FROM lesson_search_docs d JOIN lessons l ON l.id = d.lesson_id""")
    # the query log: recent queries made of trigger words of some lessons (so others go unmatched)
    n_queries = max(50, min(n_lessons, 20000) // 2)
    qrows = []
    for _ in range(n_queries):
        l = lessons[rng.randrange(len(lessons))]
        words = [w for w in l["trigger"].split() if len(w) > 4]
        qrows.append((" ".join(rng.sample(words, min(len(words), rng.randint(2, 3)))), None, "[]",
                      _iso(NOW - timedelta(days=rng.uniform(0, 29)))))
    conn.executemany("INSERT INTO query_log (query, project_id, result_ids, created_at) VALUES (?,?,?,?)", qrows)
    conn.execute("COMMIT")
    # context history
    note_pool = _note_pool(rng, topics, 5000)
    main_rows = max(50, int(n_history * MAIN_SHARE))
    others = max(4, n_history // 20000)
    counts = [main_rows] + [(n_history - main_rows) // others] * others
    counts[-1] += n_history - sum(counts)
    paths = [MAIN_PROJECT] + [f"/home/dev/projects/p{i:03d}-{mint.word()}" for i in range(1, others + 1)]
    for index, (ppath, rows) in enumerate(zip(paths, counts)):
        project, hist, sess = _project_rows(
            rng, mint, topics, index, ppath, rows, 10 if index == 0 else 0, 6 if index == 0 else 0,
            note_pool, labels, NOW - timedelta(hours=1))
        conn.execute("BEGIN")
        conn.execute(
            """INSERT INTO project_contexts (project_id, project_name, project_path, catalogue, todos,
               active_files, recent_decisions, last_session_id, last_accessed, session_count, notes)
               VALUES (?,?,?,?,?,?,?,?,?,?,?)""", project)
        conn.executemany(
            """INSERT INTO context_history (project_id, session_number, session_id, timestamp, notes,
               active_files, todos, recent_decisions, catalogue_hash, catalogue_delta)
               VALUES (?,?,?,?,?,?,?,?,?,?)""", hist)
        conn.executemany(
            """INSERT INTO project_sessions (project_id, session_id, session_number, source, first_seen_at)
               VALUES (?,?,?,?,?)""", sess)
        conn.execute("COMMIT")
        if index == 0:
            labels["main_sessions"] = project[9]
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.execute("ANALYZE")
    conn.close()
    Path(str(path) + ".labels.json").write_text(json.dumps(labels))
    return labels


# ------------------------------------------------------------------------------------------------
# legacy database

def build_legacy_db(path: str | os.PathLike, n_lessons: int, seed: int = 7) -> dict:
    """A pre-versioning database (legacy-schema.sql) with legacy-style rows. Returns expectations:
    the number of lesson_versions rows the backfill must create and the number of projects."""
    path = Path(path)
    for suffix in ("", "-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)
    lessons, state = make_lessons(n_lessons, seed)
    rng, mint, topics = state["rng"], state["mint"], state["topics"]
    conn = sqlite3.connect(path, isolation_level=None)
    conn.executescript(legacy_schema())
    conn.execute("PRAGMA synchronous = OFF")
    expected_versions = 0
    rows = []
    cols = ["id", "trigger", "action", "rationale", "examples", "version", "created_at", "last_refined",
            "last_used", "usage_count", "tags", "parent_id", "related_ids", "relationships"]
    for l in lessons:
        r = rng.random()
        version = 1 if r < 0.6 else rng.randint(2, 3) if r < 0.85 else rng.randint(4, 9)
        base = l["rationale"] if rng.random() > 0.05 else ""
        parts = [] if not base else [base]
        for k in range(2, version + 1):
            reason = f"v{k - 1} {rng.choice(['missed', 'ignored', 'broke'])} the {rng.choice(GENERAL_NOUNS)} case"
            parts.append(reason if (not parts and k == 2) else f"\n\n[v{k}] {reason}")
        l = {**l, "version": version, "rationale": "".join(parts) or None,
             "related_ids": json.dumps([x["target"] for x in json.loads(l["relationships"])][:3])}
        expected_versions += version
        rows.append([l[c] for c in cols])
    conn.execute("BEGIN")
    conn.executemany(f"INSERT INTO lessons ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})", rows)
    n_projects = max(20, n_lessons // 500)
    projects = []
    for i in range(n_projects):
        ppath = f"/home/dev/legacy/{mint.word()}-{i}"
        todos = [{"content": f"{rng.choice(GENERAL_VERBS).capitalize()} the {rng.choice(GENERAL_NOUNS)}",
                  "status": rng.choice(["pending", "in_progress", "completed"]), "priority": "medium",
                  "created_at": _iso(NOW - timedelta(days=rng.uniform(1, 90))), "notes": None}
                 for _ in range(rng.randint(0, 6))]
        projects.append((project_id_for(ppath), os.path.basename(ppath), ppath,
                         json.dumps({"language": "python", "modules": {"core": "src/core"}}),
                         json.dumps(todos), json.dumps(rng.sample(GENERAL_NOUNS, 3)),
                         json.dumps([f"Use {rng.choice(GENERAL_NOUNS)}" for _ in range(rng.randint(0, 10))]),
                         f"legacy-session-{i}", _iso(NOW - timedelta(days=rng.uniform(1, 90))),
                         rng.randint(1, 400), rng.choice(note_pool_cache(rng, topics))))
    conn.executemany(
        """INSERT INTO project_contexts (project_id, project_name, project_path, catalogue, todos,
           active_files, recent_decisions, last_session_id, last_accessed, session_count, notes)
           VALUES (?,?,?,?,?,?,?,?,?,?,?)""", projects)
    conn.execute("COMMIT")
    conn.close()
    return {"lessons": n_lessons, "expected_versions": expected_versions, "projects": n_projects}


_POOL: list[str] = []


def note_pool_cache(rng, topics) -> list[str]:
    if not _POOL:
        _POOL.extend(_note_pool(rng, topics, 200))
    return _POOL
