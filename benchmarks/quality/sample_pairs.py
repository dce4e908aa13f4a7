"""Candidate lesson pairs for hand labelling, found without mgcp.

    python benchmarks/quality/sample_pairs.py [--out FILE] [--seed N]

Reads lessons.jsonl.gz and writes candidate pairs (default /tmp/quality-candidates.jsonl), each
{"a", "b", "kind" (the suggested kind), "method", "measure"}. Nothing here calls mgcp: the methods
are plain text measures, so the candidates do not lean towards what mgcp's similarity finds.

* normalised action: lowercase, every run of characters other than letters and digits -> one
  space. *squashed*: lowercase with everything but letters and digits removed ("Next.js" and
  "NextJS" become one word). *content words*: normalised words minus a short stop list.
* verbatim copy: two lessons from different files with equal normalised actions whose files share
  a technology tag (or either has none), one pair per group of equal actions.
* same action different trigger: equal normalised actions from files with no technology tag in
  common.
* near-verbatim copy: different normalised actions with character-trigram Jaccard >= 0.75.
* adds a qualifier: the content words of one action are all in the other, which has 1 to 8 more.
* synonym verbs: actions that become equal when a fixed table of verbs is mapped to one verb each
  (use/utilize/leverage/employ, implement/add/create/build, ensure/verify/make sure, ...) but were
  not equal before; topped up with cross-file pairs whose first word (the verb) differs and whose
  other words are the same, or whose word sets match once the verbs are mapped.
* compound / identifier spelling: equal once squashed, different once normalised; topped up with
  pairs where one action writes as one token what the other writes as two or three ("setup" /
  "set up", "NextJS" / "Next.js") and the other words are the same; and, appended last, a looser
  round (one token of 6+ letters versus two, at least half of the other content words shared; one
  pair per pair of texts).
* paraphrase: content-word Jaccard from 0.35 to 0.75, character-trigram Jaccard below 0.75, same
  technology tag, different files.
* same trigger different action: two lessons with the same trigger (one file's section).
* same topic different rule: the same innermost section name in two files of one technology,
  different actions with at least one content word in common.
* random: two lessons drawn at random.

Pairs across files come from an inverted index over action word bigrams (bigrams in more than 300
lessons are not indexed); each pair is then measured exactly.
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import re
from collections import Counter, defaultdict
from itertools import combinations
from pathlib import Path

HERE = Path(__file__).resolve().parent
STOP = set("""a an the and or of to in on for with by at as is are be be it its this that these those
from into your you we our their them they when if then than so do does not no can should must will
all any each use using""".split())
SYNONYMS = {
    "utilize": "use", "utilise": "use", "leverage": "use", "employ": "use", "apply": "use",
    "implement": "add", "create": "add", "build": "add", "introduce": "add", "include": "add",
    "ensure": "verify", "check": "verify", "confirm": "verify", "validate": "verify",
    "favor": "prefer", "favour": "prefer", "choose": "prefer", "opt": "prefer",
    "maintain": "keep", "preserve": "keep", "retain": "keep",
    "adhere": "follow", "obey": "follow", "respect": "follow",
    "manage": "handle", "treat": "handle", "process": "handle",
    "minimize": "reduce", "minimise": "reduce", "limit": "reduce",
    "organize": "structure", "organise": "structure", "arrange": "structure",
    "write": "add", "define": "add", "make": "add", "establish": "add", "set": "add", "setup": "add",
    "optimize": "improve", "optimise": "improve", "enhance": "improve",
    "avoid": "never", "prevent": "never",
}


def norm(text: str) -> str:
    return " ".join(re.findall(r"[a-z0-9]+", text.lower()))


def squash(text: str) -> str:
    return "".join(re.findall(r"[a-z0-9]+", text.lower()))


def content(text: str) -> set[str]:
    return {w for w in norm(text).split() if w not in STOP}


def trigrams(text: str) -> set[str]:
    t = f"  {norm(text)} "
    return {t[i:i + 3] for i in range(len(t) - 2)}


def jaccard(a: set, b: set) -> float:
    return len(a & b) / len(a | b) if a or b else 0.0


def synonym_form(text: str) -> str:
    words = norm(text).split()
    if len(words) >= 2 and words[0] == "make" and words[1] == "sure":
        words = ["verify"] + words[2:]
    if len(words) >= 2 and words[0] in ("do", "don") and words[1] in ("not", "t"):
        words = ["never"] + words[2:]
    return " ".join(SYNONYMS.get(w, w) for w in words if w not in ("a", "an", "the"))


def compound_variant(wa: list[str], wb: list[str]) -> bool:
    """wa spells as one token what wb spells as two or three ("setup" / "set up", "nextjs" /
    "next js", "usestate" / "use state"), and otherwise they have the same words."""
    da, db = set(wa) - set(wb), set(wb) - set(wa)
    if not da or not db:
        return False
    joins = {}
    for k in (2, 3):
        for i in range(len(wb) - k + 1):
            joins["".join(wb[i:i + k])] = set(wb[i:i + k])
    if not da <= set(joins):
        return False
    parts = set().union(*(joins[t] for t in da))
    return db <= parts | STOP


def loose_compound(wa: list[str], wb: list[str]) -> bool:
    """wa writes as one token (6+ letters) what wb writes as two consecutive tokens, and the two
    actions otherwise share at least half of their content words."""
    joins = {wb[i] + wb[i + 1]: {wb[i], wb[i + 1]} for i in range(len(wb) - 1)}
    hits = [t for t in set(wa) - set(wb) if len(t) >= 6 and t in joins and not joins[t] <= set(wa)]
    if not hits:
        return False
    ca = {w for w in wa if w not in STOP} - set(hits)
    cb = {w for w in wb if w not in STOP} - set().union(*(joins[t] for t in hits))
    return jaccard(ca, cb) >= 0.5 if ca or cb else True


def verb_swap(na: str, nb: str) -> bool:
    """Different first words (the verbs), the same rest; or the same words once synonym verbs are
    mapped to one verb each."""
    wa, wb = na.split(), nb.split()
    if len(wa) >= 3 and wa[0] != wb[0] and wa[1:] == wb[1:]:
        return True
    return set(synonym_form(na).split()) == set(synonym_form(nb).split())


def tech(lesson: dict) -> set[str]:
    """The technology tags (the converter puts them first; the last tag is the section)."""
    tags = lesson["tags"]
    section = re.sub(r"[^a-z0-9]+", "-", (lesson["trigger"].rsplit("section ", 1)[-1]).lower())
    return {t for t in tags if not section.startswith(t) and "-" not in t}


def section_of(lesson: dict) -> str:
    m = re.search(r", section (.*)\)$", lesson["trigger"])
    if not m:
        return ""
    return m.group(1).split(" > ")[-1].split(":")[0].strip().lower()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lessons", default=str(HERE / "lessons.jsonl.gz"))
    parser.add_argument("--out", default="/tmp/quality-candidates.jsonl")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--per-kind", type=int, default=45)
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    with gzip.open(args.lessons, "rt", encoding="utf-8") as f:
        lessons = [json.loads(line) for line in f]
    by_id = {lesson["id"]: lesson for lesson in lessons}
    file_of = {lesson["id"]: lesson["source"]["repo"] + ":" + lesson["source"]["path"] for lesson in lessons}
    techs = {lesson["id"]: tech(lesson) for lesson in lessons}
    out: list[dict] = []
    used: set[frozenset] = set()

    def emit(a: str, b: str, kind: str, method: str, measure: float | None = None) -> bool:
        key = frozenset((a, b))
        if a == b or key in used:
            return False
        used.add(key)
        out.append({"a": a, "b": b, "kind": kind, "method": method,
                    "measure": None if measure is None else round(measure, 3)})
        return True

    # -- equal normalised actions ------------------------------------------------------------------
    groups = defaultdict(list)
    for lesson in lessons:
        groups[norm(lesson["action"])].append(lesson["id"])
    same_tech, other_tech = [], []
    for ids in groups.values():
        if len(ids) < 2:
            continue
        cross = [(a, b) for a, b in combinations(ids, 2) if file_of[a] != file_of[b]]
        st = [(a, b) for a, b in cross if not techs[a] or not techs[b] or techs[a] & techs[b]]
        ot = [(a, b) for a, b in cross if techs[a] and techs[b] and not techs[a] & techs[b]]
        if st:
            same_tech.append(rng.choice(st))
        if ot:
            other_tech.append(rng.choice(ot))
    for a, b in rng.sample(same_tech, min(args.per_kind + 10, len(same_tech))):
        emit(a, b, "verbatim copy", "equal normalised actions, shared technology")
    for a, b in rng.sample(other_tech, min(args.per_kind, len(other_tech))):
        emit(a, b, "same action different trigger", "equal normalised actions, no technology in common")

    # -- cross-file candidates from an inverted index over action bigrams ------------------------------
    bigrams = {}
    for lesson in lessons:
        w = norm(lesson["action"]).split()
        bigrams[lesson["id"]] = {f"{x} {y}" for x, y in zip(w, w[1:])}
    df = Counter(g for s in bigrams.values() for g in s)
    postings = defaultdict(list)
    for lesson in lessons:
        for g in bigrams[lesson["id"]]:
            if df[g] <= 300:
                postings[g].append(lesson["id"])
    shared = Counter()
    for ids in postings.values():
        for a, b in combinations(ids, 2):
            shared[(a, b) if a < b else (b, a)] += 1
    near, qualifier, paraphrase, verb_swaps, compounds, loose_compounds = [], [], [], [], [], []
    for (a, b), n in sorted(shared.items()):   # sorted: set and dict order must not decide
        la, lb = by_id[a], by_id[b]
        na, nb = norm(la["action"]), norm(lb["action"])
        if na == nb:
            continue
        if compound_variant(na.split(), nb.split()) or compound_variant(nb.split(), na.split()):
            compounds.append((a, b))
            continue
        if loose_compound(na.split(), nb.split()) or loose_compound(nb.split(), na.split()):
            loose_compounds.append((a, b))
        if file_of[a] == file_of[b]:
            continue
        if verb_swap(na, nb):
            verb_swaps.append((a, b))
            continue
        tj = jaccard(trigrams(na), trigrams(nb))
        ca, cb = content(na), content(nb)
        if tj >= 0.75:
            near.append((a, b, tj))
            continue
        if ca and cb and (ca < cb or cb < ca) and 1 <= abs(len(ca) - len(cb)) <= 8:
            qualifier.append((a, b, len(ca ^ cb)))
            continue
        wj = jaccard(ca, cb)
        if 0.35 <= wj < 0.75 and techs[a] & techs[b]:
            paraphrase.append((a, b, wj))
    for a, b, m in rng.sample(near, min(args.per_kind, len(near))):
        emit(a, b, "near-verbatim copy", "character-trigram Jaccard >= 0.75", m)
    for a, b, m in rng.sample(qualifier, min(args.per_kind, len(qualifier))):
        emit(a, b, "adds a qualifier", "content words of one contained in the other", m)
    for a, b, m in rng.sample(paraphrase, min(args.per_kind + 15, len(paraphrase))):
        emit(a, b, "paraphrase", "content-word Jaccard 0.35-0.75, same technology", m)

    # -- synonym verbs and compound spellings --------------------------------------------------------
    syn, comp = defaultdict(list), defaultdict(list)
    for lesson in lessons:
        syn[synonym_form(lesson["action"])].append(lesson["id"])
        comp[squash(lesson["action"])].append(lesson["id"])
    syn_pairs, comp_pairs = [], []
    for ids in syn.values():
        cands = [(a, b) for a, b in combinations(ids, 2)
                 if norm(by_id[a]["action"]) != norm(by_id[b]["action"]) and file_of[a] != file_of[b]]
        if cands:
            syn_pairs.append(rng.choice(cands))
    for ids in comp.values():
        cands = [(a, b) for a, b in combinations(ids, 2)
                 if norm(by_id[a]["action"]) != norm(by_id[b]["action"])]
        if cands:
            comp_pairs.append(rng.choice(cands))
    for a, b in rng.sample(syn_pairs, min(args.per_kind, len(syn_pairs))):
        emit(a, b, "synonym verbs", "equal after mapping synonym verbs")
    for a, b in rng.sample(verb_swaps, min(max(0, args.per_kind - len(syn_pairs)), len(verb_swaps))):
        emit(a, b, "synonym verbs", "different first word (verb), same rest; or same words after mapping verbs")
    for a, b in rng.sample(comp_pairs, min(args.per_kind, len(comp_pairs))):
        emit(a, b, "compound / identifier spelling", "equal once squashed")
    for a, b in rng.sample(compounds, min(max(0, args.per_kind - len(comp_pairs)), len(compounds))):
        emit(a, b, "compound / identifier spelling", "one spells as one token what the other spells as two or three")

    # -- same trigger, same section name, random -------------------------------------------------------
    by_trigger = defaultdict(list)
    for lesson in lessons:
        by_trigger[lesson["trigger"]].append(lesson["id"])
    triggers = [ids for ids in by_trigger.values() if len(ids) >= 2]
    for ids in rng.sample(triggers, min(args.per_kind, len(triggers))):
        a, b = rng.sample(ids, 2)
        if norm(by_id[a]["action"]) != norm(by_id[b]["action"]):
            emit(a, b, "same trigger different action", "identical trigger")
    by_section = defaultdict(list)
    for lesson in lessons:
        s = section_of(lesson)
        if s:
            by_section[s].append(lesson["id"])
    sections = [s for s, ids in by_section.items() if len({file_of[i] for i in ids}) >= 2]
    made = 0
    for s in rng.sample(sections, len(sections)):
        if made >= args.per_kind + 10:
            break
        ids = by_section[s]
        for _ in range(20):
            a, b = rng.sample(ids, 2)
            if (file_of[a] != file_of[b] and (techs[a] & techs[b])
                    and content(by_id[a]["action"]) & content(by_id[b]["action"])
                    and norm(by_id[a]["action"]) != norm(by_id[b]["action"])):
                made += emit(a, b, "same topic different rule", f"same section name '{s}'")
                break
    for _ in range(args.per_kind):
        a, b = rng.sample(lessons, 2)
        emit(a["id"], b["id"], "random", "uniform random pair")

    # a second round of compound spellings, looser, one pair per pair of texts (appended last so
    # that the pairs above do not move)
    seen_texts = {frozenset((norm(by_id[p["a"]]["action"]), norm(by_id[p["b"]]["action"]))) for p in out}
    loose = []
    for a, b in sorted(loose_compounds):
        key = frozenset((norm(by_id[a]["action"]), norm(by_id[b]["action"])))
        if key not in seen_texts:
            seen_texts.add(key)
            loose.append((a, b))
    for a, b in rng.sample(loose, min(args.per_kind, len(loose))):
        emit(a, b, "compound / identifier spelling", "loose: one token versus two, half the other words shared")

    with open(args.out, "w", encoding="utf-8") as f:
        for pair in out:
            f.write(json.dumps(pair) + "\n")
    print(Counter(p["kind"] for p in out))
    print("available:", {"verbatim": len(same_tech), "other-tech": len(other_tech), "near": len(near),
                         "qualifier": len(qualifier), "paraphrase": len(paraphrase), "synonym": len(syn_pairs),
                         "verb swaps": len(verb_swaps), "compound": len(comp_pairs),
                         "compound variants": len(compounds), "loose compounds": len(loose)})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
