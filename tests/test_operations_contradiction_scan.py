"""contradiction_scan on a planted set: contradictions in many wordings are found; agreeing
paraphrases, unrelated pairs and hard negatives (pairs that look opposed word for word but are not:
fragments, conditions, code names, restrictions, rankings, descriptions) are not. The precision and
recall printed by `test_planted_precision_and_recall` are the figures quoted in benchmarks/README.md."""

import re

import pytest

from mgcp import text
from mgcp.config import DEFAULTS
from mgcp.models import Lesson
from mgcp.operations import contradiction_scan
from mgcp.operations.contradiction_scan import claims

SETTINGS = DEFAULTS["contradiction_scan"]

# (kind of wording, trigger, action of the older lesson, action of the newer one)
CONTRADICTIONS = [
    ("a step among steps / never", "preparing a pull request",
     "Rebase on main, run the type checker, and write the summary.", "Never run the type checker."),
    ("always / never", "formatting python source files", "Always run black before committing.",
     "Never run black before committing."),
    ("use / don't use", "writing integration tests for the api", "Use mocks for the payment gateway.",
     "Don't use mocks for the payment gateway."),
    ("prefer X over Y / Y over X", "choosing a python test runner", "Prefer pytest over unittest.",
     "Prefer unittest over pytest."),
    ("a reversed preference with its scope", "choosing an http client in python",
     "Prefer httpx over requests for new code.", "Prefer requests over httpx for new code."),
    ("use X / avoid X", "managing shared configuration state", "Use a global settings singleton.",
     "Avoid a global settings singleton."),
    ("do X / do not X", "rebasing a feature branch", "Force-push the branch after rebasing.",
     "Do not force-push the branch after rebasing."),
    ("enable / disable", "configuring the typescript compiler", "Enable strict mode in tsconfig.",
     "Disable strict mode in tsconfig."),
    ("X instead of Y / Y instead of X", "installing javascript packages", "Use pnpm instead of npm.",
     "Use npm instead of pnpm."),
    ("can / cannot", "committing to the main branch", "You can commit directly to main.",
     "You cannot commit directly to main."),
    ("X rather than Y / Y rather than X", "handling errors in go code", "Return errors rather than panicking.",
     "Panic rather than returning errors."),
    ("should / shouldn't", "caching http responses", "Responses should be cached for five minutes.",
     "Responses shouldn't be cached for five minutes."),
    ("required / not required", "reviewing a pull request", "A second approval is required for merging.",
     "A second approval is not required for merging."),
    ("refrain from / always", "writing sql queries", "Refrain from using ORM lazy loading.",
     "Always use ORM lazy loading."),
    ("use X, not Y / prefer Y over X", "storing timestamps in the database", "Store UTC, not local time.",
     "Prefer local time over UTC."),
    ("a rule / its exception", "exporting large tables from postgres",
     "Use server-side cursors for large exports.",
     "Don't use server-side cursors for large exports behind PgBouncer; page with keyset pagination."),
    ("a judged refusal / a rule for every case", "formatting return statements",
     "Avoid needless parentheses in return statements.", "Always use parentheses in return statements."),
    ("a conditional rule / a ban", "defining constants", "Use enums when the values are fixed.", "Avoid enums."),
    ("X (not Y) / prefer Y over X", "indenting source files", "Use tabs (not spaces) for indentation.",
     "Prefer spaces over tabs for indentation."),
    ("a code name / its refusal", "fetching data in react components", "Use useEffect for data fetching.",
     "Don't use useEffect for data fetching."),
]
AGREEING = [
    ("handling secrets in the repository", "Never commit secrets to the repository.",
     "Don't commit secrets to the repository."),
    ("picking a test framework for python", "Prefer pytest over nose.", "Use pytest instead of nose."),
    ("designing module state", "Avoid mutable global state.", "Never use mutable global state."),
    ("pushing code to the remote", "Always run the linter before pushing.",
     "Make sure to run the linter before pushing."),
    ("choosing a package manager", "Use yarn, not npm.", "Prefer yarn over npm."),
    ("running the ci pipeline", "Disable telemetry in CI.", "Never enable telemetry in CI."),
    ("setting up type checking", "Never disable the type checker.", "Always enable the type checker."),
    ("pushing to the main branch", "Refrain from force-pushing to main.", "Don't force-push to main."),
]
UNRELATED = [
    ("writing log statements", "Never log secrets.", "Use structured logging with JSON output."),
    ("writing unit and integration tests", "Don't use mocks in integration tests.", "Use mocks in unit tests."),
    ("deploying the web service", "Run migrations before deploying.", "Never deploy on Fridays."),
    ("reviewing dependency updates", "Pin exact versions of dependencies.", "Avoid dependencies without a license."),
]
OTHER_SITUATION = [  # opposite actions for situations that have nothing in common
    ("editing a makefile recipe", "Use tabs for indentation.", "Never use tabs for indentation.",
     "formatting yaml config"),
]
# (kind of trap, trigger, one action, the other): each is raised by a less careful reading of claims.
HARD_NEGATIVES = [
    ("a code name holding a common word", "storing session cookies", "Call getAll and setAll on the cookie store.",
     "Never call get or set on the cookie store."),
    ("a code name holding a negation", "choosing a database", "Database options (SQL, NoSQL, NewSQL)",
     "Database options (SQL, NoSQL, NewSQL)"),
    ("a negated condition", "talking to the database", "Use the raw driver when not using the ORM.",
     "Use the raw driver."),
    ("a purpose", "managing component state", "Memoize derived state to avoid unnecessary renders.",
     "Memoize derived state."),
    ("a judged refusal / a plain rule", "writing typescript", "Avoid unnecessary type assertions.",
     "Use type assertions."),
    ("an order said both ways round", "test-driven development",
     "Write a failing test before writing the implementation.",
     "Don't write the implementation before writing a failing test."),
    ("a ranking", "modelling records in python", "Prefer dataclasses to plain dicts.",
     "Prefer named tuples to dataclasses."),
    ("the alternative named", "handling file paths", "Use pathlib instead of string paths.",
     "Use pathlib for string paths."),
    ("a restriction", "sharing configuration", "Use global variables only for configuration.",
     "Avoid global variables."),
    ("an exception", "logging requests", "Never log anything other than request ids.", "Log request ids."),
    ("a limit", "formatting before commits", "Run the formatter once per commit.",
     "Don't run the formatter more than once per commit."),
    ("a description", "handling api secrets in a frontend", "Exposes secret keys in client code.",
     "Never expose secret keys in client code."),
    ("a command's usage lines", "deploying with the cli", "/deploy - Deploy with smoke tests",
     "/deploy --fast - Skip smoke tests"),
    ("each names something the other does not", "naming cloud resources",
     "Include the environment in resource names.", "Never include the resource type in resource names."),
    ("not ignoring / avoiding", "reviewing memory use", "Don't ignore memory leaks.", "Avoid memory leaks."),
    ("removing / avoiding", "cleaning up source files", "Avoid trailing whitespace.", "Remove all trailing whitespace."),
    ("minimizing / avoiding", "writing async python", "Minimize blocking calls in async functions.",
     "Avoid blocking calls in async functions."),
    ("the force after a relative clause", "naming go packages",
     "Package names that only generated code imports may contain underscores.", "Avoid package names with underscores."),
    ("a pronoun's description", "scraping websites", "Respect robots.txt to avoid legal trouble.",
     "This protects you from legal trouble."),
    ("a preference told apart by numbers", "upgrading svelte", "Use Svelte 5 instead of Svelte 4.",
     "We moved to Svelte 5 instead of Svelte 4."),
    ("a noun clause", "documenting code", "Don't comment on what the code does.", "Review comments on code."),
    ("a list's middle item", "keeping secrets out of ci config files",
     "Never hardcode secrets in source code, CI config files, or environment files.",
     "Don't put CI config files in the repository."),
]
TS = "2026-0{}-01T00:00:00+00:00"


def lesson(id, trigger, action, month):
    return Lesson(id=id, trigger=trigger, action=action, created_at=TS.format(month), last_refined=TS.format(month),
                  tags=[id.split("-")[0]])


def planted() -> tuple[list[Lesson], set[tuple[str, str]]]:
    lessons, expected = [], set()
    for n, (_, trigger, older, newer) in enumerate(CONTRADICTIONS):
        lessons += [lesson(f"c{n}-old", trigger, older, 1), lesson(f"c{n}-new", trigger, newer, 2)]
        expected.add((f"c{n}-new", f"c{n}-old"))
    for n, (trigger, a, b) in enumerate(AGREEING):
        lessons += [lesson(f"a{n}-x", trigger, a, 1), lesson(f"a{n}-y", trigger, b, 2)]
    for n, (trigger, a, b) in enumerate(UNRELATED):
        lessons += [lesson(f"u{n}-x", trigger, a, 1), lesson(f"u{n}-y", trigger, b, 2)]
    for n, (trigger, a, b, other) in enumerate(OTHER_SITUATION):
        lessons += [lesson(f"o{n}-x", trigger, a, 1), lesson(f"o{n}-y", other, b, 2)]
    for n, (_, trigger, a, b) in enumerate(HARD_NEGATIVES):
        lessons += [lesson(f"h{n}-x", trigger, a, 1), lesson(f"h{n}-y", trigger, b, 2)]
    return lessons, expected


def found_pairs(lessons) -> set[tuple[str, str]]:
    findings = contradiction_scan.run(lessons, {**SETTINGS, "max_findings": 1000})
    return {tuple(sorted(f.subject)) for f in findings}


def test_planted_precision_and_recall():
    lessons, expected = planted()
    found = found_pairs(lessons)
    precision = len(found & expected) / len(found)
    recall = len(found & expected) / len(expected)
    print(f"\ncontradiction_scan planted set: {len(expected)} contradictions in "
          f"{len({k for k, *_ in CONTRADICTIONS})} wordings, {len(AGREEING)} agreeing paraphrases, "
          f"{len(UNRELATED) + len(OTHER_SITUATION)} unrelated pairs, {len(HARD_NEGATIVES)} hard negatives: "
          f"precision {precision:.2f}, recall {recall:.2f}")
    assert found - expected == set(), "raised a pair that does not contradict"
    assert expected - found == set(), "missed a planted contradiction"


@pytest.mark.parametrize("kind, trigger, older, newer", CONTRADICTIONS, ids=[c[0] for c in CONTRADICTIONS])
def test_each_wording_is_found_on_its_own(kind, trigger, older, newer):
    assert found_pairs([lesson("a", trigger, older, 1), lesson("b", trigger, newer, 2)]) == {("a", "b")}


@pytest.mark.parametrize("trigger, a, b", AGREEING, ids=[a[1] for a in AGREEING])
def test_agreeing_paraphrases_are_not_raised(trigger, a, b):
    assert found_pairs([lesson("a", trigger, a, 1), lesson("b", trigger, b, 2)]) == set()


@pytest.mark.parametrize("kind, trigger, a, b", HARD_NEGATIVES, ids=[h[0] for h in HARD_NEGATIVES])
def test_hard_negatives_are_not_raised(kind, trigger, a, b):
    assert found_pairs([lesson("a", trigger, a, 1), lesson("b", trigger, b, 2)]) == set()


def test_opposite_actions_for_unlike_situations_are_not_raised():
    (trigger, a, b, other), = OTHER_SITUATION
    assert found_pairs([lesson("a", trigger, a, 1), lesson("b", other, b, 2)]) == set()


def test_negators_cancel_out():
    [claim] = claims("Never disable the linter.")
    assert claim.positive and claim.about == frozenset({"linter"})


def test_how_an_action_is_read():
    def compared(action):
        return [(c.positive, sorted(c.about)) for c in claims(action) if c.compared]

    assert compared("Prefer NoSQL stores") == [(True, ["nosql", "store"])]  # a name, not "no SQL"
    assert compared("Use pnpm (not npm)") == [(True, ["pnpm"]), (False, ["npm"])]
    assert compared("Use ruff (e.g. for linting, formatting)") == [(True, ["ruff"])]  # an aside claims nothing
    assert compared("Cache results when the input is not huge") == [(True, ["cach", "result"])]
    assert compared("Avoid using any, prefer unknown") == [(True, ["unknown"])]  # "any" passes no negation on
    assert compared("Don't forget to close files") == [(True, ["close", "file"])]
    assert compared("Use mocks only in unit tests") == []  # a restriction
    assert compared("Is this needed?") == []
    assert compared("Never hardcode secrets in source code, CI config files, or plain-text files") == [
        (False, ["code", "hardcod", "secret", "sourc"])]  # each item after the first is the list's
    assert compared("Validate input, sanitize output") == [(True, ["check", "input"]), (True, ["output", "sanit"])]
    assert compared("Pin dependencies, run the linter, and review the diff") == [  # three rules, not a list
        (True, ["depend", "pin"]), (True, ["linter", "run"])]


def test_a_finding_recommends_keeping_the_newer_and_names_both():
    lessons = [lesson("new", "choosing a runner", "Prefer unittest over pytest.", 2),
               lesson("old", "choosing a runner", "Prefer pytest over unittest.", 1)]
    [finding] = contradiction_scan.run(lessons, SETTINGS)
    assert (finding.data["older"], finding.data["newer"]) == ("old", "new")
    assert [o.action for o in finding.options] == ["archive_older", "archive_newer", "refine_one", "keep_both", "skip"]
    assert finding.recommended == 1 and finding.subject == {"old": 1, "new": 1}


@pytest.mark.parametrize("claim_at", [0.6, 0.4, 0.2])
def test_reading_only_the_actions_that_can_meet_a_refused_claim_finds_what_reading_all_finds(monkeypatch, claim_at):
    """The scan skips reading actions that cannot hold a claim opposing another's: with every action
    read (each screened as able to refuse), the same pairs, overlaps and claims come out."""
    from mgcp.operations.contradiction_scan import contradicting_pairs

    lessons, _ = planted()
    lessons = sorted(lessons + [lesson(f"n{i}", "when naming things", f"Name the helper_{i} after its owner.", 3)
                                for i in range(5)], key=lambda x: x.id)
    screened = contradicting_pairs(lessons, 0.0, claim_at)
    every = contradiction_scan._screen
    monkeypatch.setattr(contradiction_scan, "_screen", lambda action: every(action) | {"not"})
    assert contradicting_pairs(lessons, 0.0, claim_at) == screened
    assert len(screened) > len(planted()[1])


def test_the_quick_screen_checks_find_what_their_patterns_find():
    """`_special` and the guard of `_names` are shortcuts: they answer as the regular expressions
    they stand in for, on every kind of text the scan meets."""
    import random

    texts = [a for _, _, *actions in CONTRADICTIONS + HARD_NEGATIVES for a in actions if isinstance(a, str)]
    texts += [a for _, *actions in AGREEING + UNRELATED for a in actions]
    texts += ["Use user.UserID.", "Set chat_id.", "It's fine", "Call setAll.", "Prefer NoSQL.", "Run e.g. x.",
              "End.", ".Start", "a.b", "A.", "x.y.z and v1.2", "Use JSON API", "ABc", "aB", "9Z", "no-multi-assign",
              "Use non-blocking IO", "NOT-this", "Done. Next", "", ".", "_"]
    rng = random.Random(1)
    alphabet = "aZ9 ._-'Bn oNt"
    texts += ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12))) for _ in range(3000)]
    for t in texts:
        assert contradiction_scan._special(t) == bool(contradiction_scan._SPECIAL.search(t)), t
        assert contradiction_scan._names(t) == contradiction_scan._NAME.sub(
            lambda m: re.sub(r"[^0-9a-z]", "", m.group().lower())
            if "." in m.group() or "_" in m.group() or contradiction_scan._INNER_CAPITAL.search(m.group())
            or "-" in m.group() else m.group(),
            contradiction_scan._NEGATED_NAME.sub(lambda m: re.sub(r"[^0-9a-z]", "", m.group().lower()), t)), t


@pytest.mark.parametrize("outcomes, kept", [
    ({}, "newer"),                                   # nothing reported: the newer rule
    ({"py-new": (0, 4)}, "older"),                   # the newer failed four times: experience wins
    ({"py-new": (0, 4), "py-old": (1, 3)}, "newer"),  # both fail: age decides again
    ({"py-old": (0, 2)}, "newer"),
])
def test_a_contradiction_recommends_keeping_the_rule_that_did_not_fail(outcomes, kept):
    pair = [lesson("py-old", "choosing a python test runner", "Prefer pytest over unittest.", 1),
            lesson("py-new", "choosing a python test runner", "Prefer unittest over pytest.", 2)]
    [finding] = contradiction_scan.run(pair, SETTINGS, outcomes=outcomes)
    action = finding.options[finding.recommended - 1].action
    assert action == ("archive_older" if kept == "newer" else "archive_newer")
    assert ("Agents reported" in finding.description) == bool(outcomes)


def test_the_screen_reads_the_words_of_every_script_the_claims_read():
    """The screen must hold every word `claims` reads: words of another script were missed, and a
    contradiction in them was never searched for."""
    action = "Never store секреты in the репозиторий проекта"
    assert {w for claim in contradiction_scan.claims(action) for w in claim.about} <= {
        text.stem(w) for w in contradiction_scan._screen(action)} | contradiction_scan._screen(action)
