"""Convert public agent guidance (rule files, instruction files, style guides) into mgcp lessons.

Writes `benchmarks/quality/lessons.jsonl.gz`: one JSON object per line,
{"id", "trigger", "action", "rationale", "tags", "source": {"repo", "path", "commit", "license"}}.

Where the text comes from
-------------------------
Each source is a public GitHub repository read from a local bare git snapshot at a fixed commit
(`git --git-dir=<mirror> show <commit>:<path>`); nothing else is read. The mirrors are looked up as
`$QUALITY_MIRRORS/<owner>+<name>/repo` (default `/work/.mirror`). The commits and the files read:

| repo | commit | license | files |
|---|---|---|---|
| PatrickJS/awesome-cursorrules | b044f956f021b6e8877f16781bcfc466a6a120e9 | CC0-1.0 | rules/*.mdc |
| sanjeed5/awesome-cursor-rules-mdc | 8fbf26908531c127a6076be0e55fbe17b57fb2d8 | CC0-1.0 | rules-mdc/*.mdc, rules-v0-deprecated/**/*.mdc |
| continuedev/awesome-rules | e910e2574bd9d8506d69573404ce78b97442dade | CC0-1.0 | rules/**/*.md |
| instructa/ai-prompts | 71a75d379f55e60a1a8ea177ef144e7a3b165a9c | MIT | prompts/**/*.md |
| steipete/agent-rules | d0070fac6c4b67dec418564d381adbe7c9f4ba73 | MIT | project-rules/*.mdc, global-rules/*.md[c], the guidance docs (not the API dumps) |
| airbnb/javascript | 8ed19247bef145e3cc41b24a02dd1fe6d9b5e681 | MIT | README.md, react/README.md, css-in-javascript/README.md |
| ryanmcdermott/clean-code-javascript | 5311f64b03fc0c2450ab17a45ee9818669c8b9b5 | MIT | README.md |
| uber-go/guide | 1d60a91aa5e87d443002e23c21903c49489dbde5 | Apache-2.0 | style.md |
| google/styleguide | 8487c083e1faecb1259be8a8873618cfdb69d33d | CC-BY-3.0 (the guides) | the Markdown guides |

How a file becomes lessons (mechanical; no text is rewritten beyond removing Markdown markup)
------------------------------------------------------------------------------------------------
* YAML front matter is read for a `description` (used as the file's topic when short) and dropped.
* Fenced code blocks, HTML blocks and tags, tables, images and horizontal rules are dropped; links
  keep their text; `**`, `__` and backticks are removed; leading check/cross emoji are removed.
* Headings (`#`..`######`), whole-line bold text ("**State management:**") and a short plain line
  without final punctuation directly followed by a list ("Key Principles") open a *section*.
  Sections named like a table of contents, references, resources, links, license, changelog,
  examples or (Google's pattern) Definition / Pros / Cons are skipped with everything under them.
* Every list item (`-`, `*`, `+`, `1.`; continuation lines joined) is one lesson, except an item
  that is only a link (tables of contents, reference lists). A list item or a
  paragraph that ends with ':' and is followed by nested/following items is context: its text goes
  into the trigger of those items (the items keep their own words as the action).
* A paragraph (consecutive plain lines, joined) is a lesson only when it reads as a rule: it starts
  with an imperative verb from a fixed list or contains a directive word (should, must, always,
  never, avoid, prefer, do not, don't, ensure, make sure, ...). Paragraphs over 600 characters are
  split into sentences and regrouped into chunks of at most ~400 characters.
* A blockquote starting "Why?" (airbnb) becomes the rationale of the lesson before it.
* clean-code-javascript states each rule as a `###` heading with an explanation below: there the
  heading is the action and the first explanatory paragraph the rationale.
* Items with fewer than 4 words, code-like lines (YAML keys with quoted values, regular
  expressions, statements ending in '{' or ';', less than 80% letters, digits and spaces), persona lines ("You are an expert in ..."), text that mgcp would
  refuse (a secret-looking string, an action over 20,000 characters) are dropped.
* trigger = "<topic> (<file label>, section <enclosing headings> [: <context item>])", under 1000
  characters. The topic is the front-matter description when it is at most 160 characters, else
  the file's first heading, else the file name made readable.
* tags = up to three technology words from the file name (generic words such as "rules",
  "cursorrules", "prompt", "file", "guidelines" removed) plus a slug of the innermost section.
* id = "<source prefix>:<file slug>:<n>" (n counts the lessons of that file from 1; the slug is the
  file label made safe, shortened so that the id is at most 128 characters); unique and stable for
  the pinned commits.

Identical or nearly identical rules in several files (and across the collections) are kept, each
as its own lesson with its own source: finding them is what the evaluation measures.

Run: `python benchmarks/quality/convert.py [--mirrors DIR] [--out FILE]`.
"""

from __future__ import annotations

import argparse
import hashlib
import gzip
import json
import os
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

SOURCES = [
    # prefix, repo, commit, license, path filter (regex on the path), label style
    ("acr", "PatrickJS/awesome-cursorrules", "b044f956f021b6e8877f16781bcfc466a6a120e9", "CC0-1.0",
     r"^rules/[^/]+\.mdc$", {}),
    ("mdc", "sanjeed5/awesome-cursor-rules-mdc", "8fbf26908531c127a6076be0e55fbe17b57fb2d8", "CC0-1.0",
     r"^rules-mdc/[^/]+\.mdc$", {}),
    ("mdc0", "sanjeed5/awesome-cursor-rules-mdc", "8fbf26908531c127a6076be0e55fbe17b57fb2d8", "CC0-1.0",
     r"^rules-v0-deprecated/.+\.mdc$", {}),
    ("cnt", "continuedev/awesome-rules", "e910e2574bd9d8506d69573404ce78b97442dade", "CC0-1.0",
     r"^rules/.+\.md$", {}),
    ("aip", "instructa/ai-prompts", "71a75d379f55e60a1a8ea177ef144e7a3b165a9c", "MIT",
     r"^prompts/.+\.md$", {}),
    ("stp", "steipete/agent-rules", "d0070fac6c4b67dec418564d381adbe7c9f4ba73", "MIT",
     r"^(project-rules|global-rules)/[^/]+\.mdc?$|^docs/(mcp-best-practices|mcp-releasing|swift-testing-playbook|"
     r"modern-swift|swift-observable|swift-observation)\.mdc?$", {}),
    ("abnb", "airbnb/javascript", "8ed19247bef145e3cc41b24a02dd1fe6d9b5e681", "MIT",
     r"^(README\.md|react/README\.md|css-in-javascript/README\.md)$", {}),
    ("ccjs", "ryanmcdermott/clean-code-javascript", "5311f64b03fc0c2450ab17a45ee9818669c8b9b5", "MIT",
     r"^README\.md$", {"heading_rules": 3}),
    ("uber", "uber-go/guide", "1d60a91aa5e87d443002e23c21903c49489dbde5", "Apache-2.0",
     r"^style\.md$", {}),
    ("goog", "google/styleguide", "8487c083e1faecb1259be8a8873618cfdb69d33d", "CC-BY-3.0",
     r"^(pyguide|shellguide|csharp-style|objcguide|Rguide)\.md$|^go/(guide|decisions|best-practices)\.md$"
     r"|^docguide/(best_practices|style|READMEs|philosophy)\.md$", {}),
]

# What a file's label is made of: the source-specific boilerplate in names is dropped.
NAME_NOISE = re.compile(r"(-cursorrules-prompt-file|-cursorrules-prompt-fil|-cursorrules-prompt-fi|"
                        r"-cursorrules-prompt-f|-cursorrules-promp|-cursorrules-pro|-cursorrules-pr|"
                        r"-cursorrules-p|-cursorrules|\.instructions|\.mdc|\.md)$")
GENERIC_TAG_WORDS = set("""
cursorrules cursorrule prompt prompts file files rules rule instructions instruction guide guides guidelines
guideline best practices practice md mdc the and for with of in a an to cursor general readme standards
standard style conventions convention development dev setup project projects v0 deprecated code coding
using use based own pro ext min v1 v2 v3 expert
""".split())

SKIP_SECTION = re.compile(
    r"^(\d+(\.\d+)*\.?\s*)?(table of contents|contents|toc|references?|resources?|further reading|"
    r"useful links|links|see also|license|licen[cs]e|credits?|acknowledge?ments?|changelog|change log|"
    r"examples?|example usage|definition|pros|cons|translations|authors?|sources?)\s*:?$", re.I)
PERSONA = re.compile(r"^(you are|you're|act as|as an?)\s+(an?\s+)?((senior|expert|world|highly|seasoned|"
                     r"experienced|professional|principal|staff|elite|lead|ai|full|top)\b|.{0,40}\bexpert\b)",
                     re.I)
DIRECTIVE = re.compile(r"\b(should|must|always|never|avoid|prefer|don't|do not|doesn't need|ensure|make sure|"
                       r"recommended|required|only|instead of|rather than|shall|need to|needs to|have to)\b",
                       re.I)
IMPERATIVES = set("""
use avoid prefer keep write ensure implement follow add create define make include document validate
handle leverage utilize always never do don't consider organize place name separate limit minimize
optimize test check verify set run return apply store put wrap call declare export import favor favour
design build configure enable disable provide maintain structure split group isolate extract reuse
remove delete replace refactor update upgrade pin lock log monitor measure profile cache batch
memoize sanitize escape encode hash encrypt sign authenticate authorize restrict protect secure
review read understand ask explain describe summarize list think plan start begin finish commit push
merge rebase tag release deploy install declare initialize instantiate close open dispose release
clean format lint type annotate comment prefix suffix order sort indent align break wrap limit
choose select pick adopt stick rely treat think take give let allow require enforce prevent guard
catch throw raise propagate retry fallback default expose hide encapsulate inject mock stub
fake assert compare match filter map reduce iterate loop parse serialize render fetch load save
persist migrate seed index query paginate stream debounce throttle schedule emit listen subscribe
publish notify respond reply output print display show present report track trace capture
note remember focus strive aim minimise prioritize prioritise favour verify confirm double reference
when if for before after instead only never once do not unless
""".split())
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z`*\"'(\[])")
FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
BULLET = re.compile(r"^(\s*)([-*+]|\d+[.)])\s+(.*)$")
HTML_LINE = re.compile(r"^\s*</?[A-Za-z][^>]*>\s*$|^\s*<!--.*-->\s*$")
WORD = re.compile(r"[A-Za-z0-9]+")
CODE_LIKE = re.compile(r"^[\w.-]+:\s*[\"'\[{|>]|\\[sdwb(.\[]|[{;]\s*$|^[}\])]|^(const|let|var|def|class|function|import|from)\s+\S+\s*[=({]"
                       r"|^(//|#!|\$ |>>> )|=>\s*\{|\)\s*\{")
ID_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


# ------------------------------------------------------------------------------------------------
# text clean-up

def clean(text: str) -> str:
    t = text
    t = re.sub(r"<!--.*?-->", " ", t)
    t = re.sub(r"!\[[^\]]*\]\([^)]*\)", " ", t)                 # images
    t = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", t)              # links keep their text
    t = re.sub(r"\[([^\]]*)\]\[[^\]]*\]", r"\1", t)             # reference links
    t = re.sub(r"\[([A-Z][\w' -]*)\](?![(\[])", r"\1", t)       # shortcut reference links: [Clarity]
    t = re.sub(r"</?(a|span|sup|sub|b|i|em|strong|code|br|kbd|img|p|div|details|summary|font)\b[^>]*>",
               " ", t, flags=re.I)
    t = t.replace("**", "").replace("__", "").replace("`", "")
    t = re.sub(r"(?<![\w*])\*(?=\S)([^*]+?)(?<=\S)\*(?![\w*])", r"\1", t)  # *emphasis*
    t = re.sub(r"^\s*(\[[ xX]\]\s*)", "", t)                     # task-list boxes
    t = re.sub(r"^[\s\u2705\u274c\u2714\u2716\u26a0\ufe0f\u2b50\U0001F300-\U0001FAFF]+", "", t)
    t = re.sub(r"^\d+(\.\d+)+\.?\s+", "", t)                     # "3.1 " numbering (airbnb, google)
    t = re.sub(r"^\d+\.\s+", "", t)
    t = re.sub(r"\s+", " ", t).strip()
    return t


def heading_text(text: str) -> str:
    t = clean(text)
    return t.rstrip(":").strip()


def word_count(text: str) -> int:
    return len(WORD.findall(text))


def shorten(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit].rsplit(" ", 1)[0] + "..."


def link_only(raw: str) -> bool:
    """A list item that is only a link (a table of contents entry, a reference)."""
    rest = re.sub(r"!?\[[^\]]*\]\([^)]*\)|\[[^\]]*\]\[[^\]]*\]|https?://\S+", " ", raw)
    return rest != raw and word_count(rest) < 3


def reads_as_rule(paragraph: str) -> bool:
    first = paragraph.split(" ", 1)[0].lower().strip(",.:;!\"'")
    return first in IMPERATIVES or bool(DIRECTIVE.search(paragraph))


def split_long(paragraph: str, limit: int = 600, chunk: int = 400) -> list[str]:
    if len(paragraph) <= limit:
        return [paragraph]
    out, cur = [], ""
    for sentence in SENTENCE_END.split(paragraph):
        if cur and len(cur) + 1 + len(sentence) > chunk:
            out.append(cur)
            cur = sentence
        else:
            cur = f"{cur} {sentence}".strip()
    if cur:
        out.append(cur)
    return out


# ------------------------------------------------------------------------------------------------
# Markdown walk

def front_matter(text: str) -> tuple[dict, str]:
    meta: dict = {}
    if text.startswith("---"):
        end = re.search(r"^---\s*$", text[3:], re.M)
        if end:
            head = text[3:3 + end.start()]
            for line in head.splitlines():
                m = re.match(r"^(\w+)\s*:\s*(.*)$", line)
                if m:
                    meta[m.group(1).lower()] = m.group(2).strip().strip("\"'")
            text = text[3 + end.end():]
    return meta, text


class Item:
    """A rule found in a file: its text, section path, context and an optional rationale."""

    def __init__(self, text: str, sections: list[str], context: str | None, kind: str):
        self.text, self.sections, self.context, self.kind = text, sections, context, kind
        self.rationale: str | None = None


def walk(text: str, heading_rules: int | None = None) -> tuple[str | None, list[Item]]:
    """The file's first heading and its rule items, in order."""
    text = re.sub(r"<!--.*?-->", "", text, flags=re.S)   # comments, also over several lines
    lines = text.splitlines()
    items: list[Item] = []
    title: str | None = None
    headings: dict[int, str] = {}     # level -> text
    skip_level: int | None = None     # inside a skipped section of this level
    pseudo: str | None = None         # a bold / short-line sub-heading under the current heading
    in_fence = False
    para: list[str] = []
    bullets: list[tuple[int, str]] = []    # (indent, text) of the current list
    context_par: str | None = None    # a paragraph ending with ':' introducing the next list
    heading_item: Item | None = None  # clean-code style: the heading rule awaiting its rationale

    def sections() -> list[str]:
        out = [headings[k] for k in sorted(headings)]
        if pseudo:
            out.append(pseudo)
        return out

    def skipping() -> bool:
        return skip_level is not None

    def flush_para():
        nonlocal para, context_par, heading_item
        if not para:
            return
        raw = " ".join(s.strip() for s in para)
        para = []
        if skipping():
            return
        quote = raw.startswith(">")
        body = clean(re.sub(r"(^|\s)>\s?", " ", raw) if quote else raw)
        body = re.sub(r"^\[!(NOTE|TIP|IMPORTANT|WARNING|CAUTION)\]\s*", "", body, flags=re.I)
        if not body:
            return
        if quote and body.lower().startswith("why?") and items:
            items[-1].rationale = body
            return
        if heading_item is not None:
            if heading_item.rationale is None:
                heading_item.rationale = body[:2000]
            return
        if body.endswith(":"):
            context_par = body.rstrip(":").strip()
            if reads_as_rule(body) and word_count(body) >= 4:
                items.append(Item(body, sections(), None, "paragraph"))
            return
        context_par = None
        if reads_as_rule(body):
            for part in split_long(body):
                items.append(Item(part, sections(), None, "paragraph"))

    def flush_bullets():
        nonlocal bullets, context_par
        if not bullets:
            return
        parsed = [(indent, "" if link_only(t) else clean(t)) for indent, t in bullets]
        bullets = []
        intro = context_par
        context_par = None
        if skipping():
            return
        stack: list[tuple[int, str]] = []   # (indent, text) of ancestor items ending with ':'
        for n, (indent, body) in enumerate(parsed):
            while stack and stack[-1][0] >= indent:
                stack.pop()
            has_children = n + 1 < len(parsed) and parsed[n + 1][0] > indent
            ctx_parts = ([intro] if intro else []) + [s for _, s in stack]
            ctx = shorten(" / ".join(ctx_parts), 150) if ctx_parts else None
            if body.endswith(":") and has_children:
                stack.append((indent, body.rstrip(":").strip()))
                continue
            if has_children:
                stack.append((indent, body))
            items.append(Item(body, sections(), ctx, "bullet"))

    i = 0
    while i < len(lines):
        line = lines[i]
        if FENCE.match(line):
            flush_para()
            in_fence = not in_fence
            i += 1
            continue
        if in_fence:
            i += 1
            continue
        m = HEADING.match(line)
        if m:
            flush_para()
            flush_bullets()
            level, htext = len(m.group(1)), heading_text(m.group(2))
            context_par = None
            heading_item = None
            pseudo = None
            if title is None and level == 1:
                title = htext
            for k in [k for k in headings if k >= level]:
                del headings[k]
            if skip_level is not None and level <= skip_level:
                skip_level = None
            if skip_level is None and SKIP_SECTION.match(htext):
                skip_level = level
            headings[level] = htext
            if (heading_rules and level == heading_rules and not skipping()
                    and word_count(htext) >= 3):
                heading_item = Item(htext, sections()[:-1], None, "heading")
                items.append(heading_item)
            i += 1
            continue
        stripped = line.strip()
        if not stripped:
            flush_para()
            # a blank line inside a list does not end it when the list continues
            j = i + 1
            while j < len(lines) and not lines[j].strip():
                j += 1
            keeps_list = j < len(lines) and (BULLET.match(lines[j]) is not None or (
                lines[j][:1] in (" ", "\t") and not FENCE.match(lines[j])))
            if not keeps_list:
                flush_bullets()
            i += 1
            continue
        if HTML_LINE.match(line) or stripped.startswith("|") or re.match(r"^\s*([-*_]\s*){3,}$", line) \
                or stripped.startswith("<"):
            flush_para()
            i += 1
            continue
        b = BULLET.match(line)
        if b:
            flush_para()
            bullets.append((len(b.group(1).expandtabs(4)), b.group(3)))
            i += 1
            continue
        if bullets and (line.startswith(" ") or line.startswith("\t")) and not stripped.startswith(">"):
            # continuation of the last list item
            indent, t = bullets[-1]
            bullets[-1] = (indent, f"{t} {stripped}")
            i += 1
            continue
        if bullets and stripped.startswith(">"):
            # a quote under a list item (airbnb's "> Why?"): its rationale
            flush_bullets()
        # whole-line bold or a short label followed by a list: a sub-heading
        bold = re.match(r"^\*\*([^*]+?)\*\*:?\s*$|^__([^_]+?)__:?\s*$", stripped)
        nxt = next((lines[j] for j in range(i + 1, len(lines)) if lines[j].strip()), "")
        label = (not para and word_count(stripped) <= 6 and not re.search(r"[.!?;,]$|[=({<]|^//", stripped)
                 and BULLET.match(nxt) is not None and not stripped.startswith(">"))
        if bold or label:
            flush_para()
            flush_bullets()
            context_par = None
            pseudo = heading_text(bold.group(1) or bold.group(2)) if bold else heading_text(stripped)
            i += 1
            continue
        if bullets:
            flush_bullets()
        para.append(line)
        i += 1
    flush_para()
    flush_bullets()
    return title, items


# ------------------------------------------------------------------------------------------------
# lessons

def denoise(name: str) -> str:
    while True:
        shorter = NAME_NOISE.sub("", name)
        if shorter == name:
            return name
        name = shorter


def file_label(path: str) -> str:
    path = re.sub(r"-cursor-?rules(-prompt(-[a-z]*)?)?(?=[-/.]|$)", "", path)
    parts = path.split("/")
    name = denoise(parts[-1])
    if name.lower() in ("readme", "index") and len(parts) > 1:
        name = denoise(parts[-2])
    elif parts[0] in ("rules-v0-deprecated",) and len(parts) > 2:
        name = f"{denoise(parts[-2])}/{name}"
    elif parts[0] == "prompts" and len(parts) > 2:
        name = f"{parts[-2]}/{name}"
    elif parts[0] == "rules" and len(parts) > 2:
        name = f"{parts[-2]}/{name}"
    elif parts[0] in ("go", "docguide"):
        name = f"{parts[0]}/{name}"
    return name


def tech_tags(label: str) -> list[str]:
    words = [w for w in re.split(r"[^a-z0-9+#]+", label.lower()) if w]
    out = []
    for w in words:
        if w in GENERIC_TAG_WORDS or w.isdigit() or (len(w) < 2 and w not in ("c", "r")) or w in out:
            continue
        out.append(w)
    return out[:3]


def slug(text: str, limit: int = 40) -> str:
    s = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return s[:limit].strip("-")


def humanise(label: str) -> str:
    return re.sub(r"[-_/]+", " ", label).strip()


def make_trigger(topic: str, label: str, item: Item) -> str:
    secs = [s for s in item.sections if s and s != topic]
    where = " > ".join(secs[-2:])
    if item.context:
        where = f"{where}: {item.context}" if where else item.context
    trigger = f"{topic} ({label}" + (f", section {where})" if where else ")")
    if len(trigger) > 990:
        trigger = trigger[:987] + "..."
    return trigger


def secret_free(text: str) -> bool:
    """mgcp refuses text that looks like a credential; such rules are left out."""
    if str(HERE.parents[1]) not in sys.path:
        sys.path.insert(0, str(HERE.parents[1]))   # this checkout's mgcp, venv or not
    from mgcp.validation import find_secret
    return find_secret(text) is None


def git(mirror: Path, *args: str) -> bytes:
    return subprocess.run(["git", f"--git-dir={mirror}", *args], check=True, capture_output=True).stdout


def convert_source(mirrors: Path, prefix: str, repo: str, commit: str, license_: str, pattern: str,
                   options: dict, stats: dict) -> list[dict]:
    mirror = mirrors / repo.replace("/", "+") / "repo"
    paths = [p for p in git(mirror, "ls-tree", "-r", "--name-only", commit).decode().splitlines()
             if re.search(pattern, p)]
    out = []
    slugs: dict[str, str] = {}
    for path in sorted(paths):
        raw = git(mirror, "show", f"{commit}:{path}").decode("utf-8", errors="replace")
        meta, body = front_matter(raw.replace("\r\n", "\n"))
        title, items = walk(body, options.get("heading_rules"))
        label = file_label(path)
        desc = meta.get("description", "").strip()
        topic = desc if desc and len(desc) <= 160 else (title or humanise(label))
        topic = clean(topic).rstrip(".") or humanise(label)
        tags_base = tech_tags(label)
        file_slug = ID_SAFE.sub("-", label).strip("-.")
        if slugs.setdefault(file_slug, path) != path:   # two files with one label: tell them apart
            file_slug = f"{file_slug}-{hashlib.sha1(path.encode()).hexdigest()[:6]}"
        n = 0
        for item in items:
            action = item.text.strip()
            if word_count(action) < 4:
                stats["short"] += 1
                continue
            letters = sum(ch.isalnum() or ch.isspace() for ch in action)
            if CODE_LIKE.search(action) or letters < 0.8 * len(action):
                stats["code"] += 1
                continue
            if PERSONA.match(action):
                stats["persona"] += 1
                continue
            if len(action) > 20000:
                stats["long"] += 1
                continue
            trigger = make_trigger(topic, label, item)
            rationale = item.rationale
            if not secret_free(f"{trigger}\n{action}\n{rationale or ''}"):
                stats["secret"] += 1
                continue
            n += 1
            head = f"{prefix}:"
            tail = f":{n}"
            fs = file_slug[: 128 - len(head) - len(tail)]
            if len(file_slug) > len(fs):   # keep long slugs unique
                digest = hashlib.sha1(file_slug.encode()).hexdigest()[:6]
                fs = file_slug[: 128 - len(head) - len(tail) - 7] + "-" + digest
            lesson_id = f"{head}{fs}{tail}"
            sec = item.sections[-1] if item.sections else ""
            tags = list(tags_base)
            if sec and slug(sec) and slug(sec) not in tags:
                tags.append(slug(sec))
            out.append({
                "id": lesson_id, "trigger": trigger, "action": action, "rationale": rationale,
                "tags": tags,
                "source": {"repo": repo, "path": path, "commit": commit, "license": license_},
            })
        stats["files"] += 1
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mirrors", default=os.environ.get("QUALITY_MIRRORS", "/work/.mirror"))
    parser.add_argument("--out", default=str(HERE / "lessons.jsonl.gz"))
    args = parser.parse_args(argv)
    mirrors = Path(args.mirrors)
    all_lessons: list[dict] = []
    for prefix, repo, commit, license_, pattern, options in SOURCES:
        stats = {"files": 0, "short": 0, "code": 0, "persona": 0, "long": 0, "secret": 0}
        lessons = convert_source(mirrors, prefix, repo, commit, license_, pattern, options, stats)
        print(f"{prefix:5} {repo:40} files {stats['files']:4}  lessons {len(lessons):6}  "
              f"dropped: short {stats['short']}, code {stats['code']}, persona {stats['persona']}, secret {stats['secret']}",
              file=sys.stderr)
        all_lessons.extend(lessons)
    ids = [lesson["id"] for lesson in all_lessons]
    assert len(ids) == len(set(ids)), "lesson ids must be unique"
    with gzip.open(args.out, "wt", encoding="utf-8", mtime=0) as f:  # compressed: the corpus is 12 MB as text
        for lesson in all_lessons:
            f.write(json.dumps(lesson, ensure_ascii=False) + "\n")
    print(f"{len(all_lessons)} lessons -> {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
