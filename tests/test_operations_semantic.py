"""SemanticBackend (static embeddings combined with the lexical score), the `similarity` setting and
its wiring into the REM cycle. The model is a tiny model2vec model built here from a dozen words and
hand-made vectors: nothing is downloaded. Tests that need model2vec skip without the extra."""

import subprocess
import sys

import numpy as np
import pytest

from conftest import ROOT
from mgcp import engine
from mgcp.config import DEFAULTS, SIMILARITY_DEFAULTS, load_config, parse_config
from mgcp.errors import ConfigError
from mgcp.models import Lesson
from mgcp.operations import duplicate_detection, semantic
from mgcp.operations.semantic import SemanticBackend, embedding_nearest, embedding_pairs
from mgcp.operations.similarity import LexicalBackend, SimilarityBackend, top_k

SETTINGS = DEFAULTS["duplicate_detection"]
TS = "2026-01-01T00:00:00+00:00"
PROJECT = "/work/alpha"

# Five dimensions: three concepts that pairs of words share (retry/resend, webhook/callback,
# deliveries/notifications), pagination, and a last one on which the words of a pair differ.
WORDS = {
    "retry": [1, 0, 0, 0, 0.1], "resend": [1, 0, 0, 0, -0.1],
    "webhook": [0, 1, 0, 0, 0.1], "callback": [0, 1, 0, 0, -0.1],
    "deliveries": [0, 0, 1, 0, 0.1], "notifications": [0, 0, 1, 0, -0.1],
    "paginate": [0, 0, 0, 1, 0.2], "queries": [0, 0, 0, 1, -0.2],
}
PARAPHRASE = ("Retry webhook deliveries", "Resend callback notifications")  # no word in common


def lesson(id, trigger, action):
    return Lesson(id=id, trigger=trigger, action=action, tags=[], usage_count=0, version=1,
                  created_at=TS, last_refined=TS)


LESSONS = [
    lesson("a-retry", "When a webhook delivery fails", PARAPHRASE[0]),
    lesson("b-resend", "When a callback notification fails", PARAPHRASE[1]),
    lesson("c-pages", "When listing rows", "Paginate database queries by cursor"),
    lesson("d-logs", "When debugging production", "Log structured context with every error"),
]


def tiny_model():
    pytest.importorskip("model2vec")
    from model2vec import StaticModel
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers

    vocab = {"[UNK]": 0, **{word: i for i, word in enumerate(WORDS, 1)}}
    tokenizer = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.Lowercase()
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    vectors = np.array([[0.0] * 5, *WORDS.values()], dtype=np.float32)
    return StaticModel(vectors=vectors, tokenizer=tokenizer)


@pytest.fixture
def model_dir(tmp_path):
    folder = tmp_path / "tiny-model"
    tiny_model().save_pretrained(folder)
    return folder


def config_file(tmp_path, body: str):
    path = tmp_path / "rem.yaml"
    path.write_text(body)
    return path


def unit_rows(n, dim, seed=3):
    matrix = np.random.default_rng(seed).normal(size=(n, dim)).astype(np.float32)
    return matrix / np.linalg.norm(matrix, axis=1, keepdims=True)


def brute_pairs(matrix, t):
    scores = matrix @ matrix.T
    found = [(i, j, float(scores[i, j])) for i in range(len(matrix)) for j in range(i + 1, len(matrix))
             if scores[i, j] >= t and scores[i, j] > 0]
    return sorted(found, key=lambda p: (-p[2], p[0], p[1]))


# -- the backend ----------------------------------------------------------------------------------

def test_semantic_backend_is_a_similarity_backend():
    assert isinstance(SemanticBackend(model=None), SimilarityBackend)


def test_embedding_pairs_equal_brute_force_across_blocks(monkeypatch):
    monkeypatch.setattr(semantic, "BLOCK_ENTRIES", 7 * 60)  # 7 rows a block
    matrix = unit_rows(60, 8)
    found = {(i, j): s for i, j, s in embedding_pairs(matrix, 0.4)}
    expected = {(i, j): s for i, j, s in brute_pairs(matrix, 0.4)}
    assert found.keys() == expected.keys()
    assert all(found[p] == pytest.approx(expected[p], abs=1e-5) for p in found)


@pytest.mark.parametrize("n, k, threshold", [(50, 3, 0.2), (300, 5, 0.0), (300, 2, 0.5), (3, 5, 0.0)])
def test_embedding_nearest_equals_top_k_of_all_pairs(monkeypatch, n, k, threshold):
    monkeypatch.setattr(semantic, "BLOCK_ENTRIES", 7 * n)  # 7 rows a block
    matrix = unit_rows(n, 6)
    found = top_k(sorted(embedding_nearest(matrix, threshold, k), key=lambda p: (-p[2], p[0], p[1])), k)
    expected = top_k(brute_pairs(matrix, threshold), k)
    assert {(i, j) for i, j, _ in found} == {(i, j) for i, j, _ in expected}


def test_words_near_in_the_model_score_high():
    backend = SemanticBackend(tiny_model())
    assert LexicalBackend().similarity(*PARAPHRASE) == 0.0
    assert backend.similarity(*PARAPHRASE) > 0.9


def test_semantic_pairs_keep_every_lexical_pair_at_least_as_high():
    docs = {lesson.id: lesson.trigger + ". " + lesson.action for lesson in LESSONS}
    combined = {(a, b): s for a, b, s in SemanticBackend(tiny_model()).pairs(docs, 0.1)}
    for a, b, s in LexicalBackend().pairs(docs, 0.1):
        assert combined[(a, b)] >= s


def test_semantic_nearest_adds_the_paraphrase_as_a_neighbour():
    docs = {lesson.id: lesson.action for lesson in LESSONS}
    assert LexicalBackend().nearest(docs, 0.35, 1) == []
    assert [(a, b) for a, b, _ in SemanticBackend(tiny_model()).nearest(docs, 0.35, 1)] == [("a-retry", "b-resend")]


def test_a_text_the_model_does_not_know_is_similar_to_nothing():
    backend = SemanticBackend(tiny_model())
    assert backend.similarity("zebra crossing", "Retry webhook deliveries") == 0.0


# -- duplicate detection with the backend ---------------------------------------------------------

def pair_scores(backend):
    return {tuple(sorted(f.data["lessons"])): f for f in duplicate_detection.run(LESSONS, SETTINGS, backend=backend)}


def test_paraphrase_sharing_no_word_becomes_a_duplicate():
    assert ("a-retry", "b-resend") not in pair_scores(None)
    finding = pair_scores(SemanticBackend(tiny_model()))[("a-retry", "b-resend")]
    assert finding.data["action_similarity"] > 0.9
    assert finding.data["similarity"] >= SETTINGS["review_threshold"]


def test_exact_copy_rule_holds_with_the_semantic_backend():
    # Words the model does not know: the embedding cosine is 0, the copy is still a merge.
    copies = [lesson("x1", "When deploying", "Pin the zebra version."),
              lesson("x2", "When writing docs for strangers", "pin the Zebra version")]
    findings = duplicate_detection.run(copies + LESSONS, SETTINGS, backend=SemanticBackend(tiny_model()))
    copy = next(f for f in findings if set(f.data["lessons"]) == {"x1", "x2"})
    assert copy.data["copy"] and copy.kind == "duplicate_merge"
    assert copy.data["similarity"] >= SETTINGS["merge_threshold"]


# -- the `similarity` setting ---------------------------------------------------------------------

def test_similarity_defaults_to_lexical_as_in_the_shipped_file():
    import yaml

    assert yaml.safe_load((ROOT / "rem-config.yaml").read_text())["similarity"] == SIMILARITY_DEFAULTS
    assert parse_config({}, "x").similarity == {"backend": "lexical", "model": None}


@pytest.mark.parametrize("body, needle", [
    ("similarity: lexical\n", "'similarity' must be a mapping with keys backend, model"),
    ("similarity:\n  backend: bert\n", "invalid value 'bert' for 'similarity.backend'; allowed: lexical, semantic"),
    ("similarity:\n  backend: semantic\n", "'similarity.model' is required when 'similarity.backend' is 'semantic'"),
    ("similarity:\n  backend: semantic\n  model: 3\n", "invalid value 3 for 'similarity.model'; allowed: a folder"),
    ("similarity:\n  size: 8M\n", "unknown key 'similarity.size'; allowed: backend, model"),
])
def test_bad_similarity_setting_names_file_key_and_allowed_values(tmp_path, body, needle):
    path = config_file(tmp_path, body)
    with pytest.raises(ConfigError) as exc:
        load_config(path)
    assert str(path) in str(exc.value) and needle in str(exc.value)


def test_relative_model_folder_is_read_from_the_config_folder(tmp_path):
    (tmp_path / "models" / "tiny").mkdir(parents=True)
    config = load_config(config_file(tmp_path, "similarity:\n  backend: semantic\n  model: models/tiny\n"))
    assert config.similarity["model"] == str(tmp_path / "models" / "tiny")


@pytest.mark.parametrize("model, is_name", [
    ("minishlab/potion-base-8M", True), ("./potion", False), ("~/models/potion", False), ("potion", False),
])
def test_a_model_name_is_kept_and_anything_else_is_a_folder(tmp_path, model, is_name):
    config = load_config(config_file(tmp_path, f"similarity:\n  backend: semantic\n  model: {model}\n"))
    assert (config.similarity["model"] == model) is is_name


# -- the cycle ------------------------------------------------------------------------------------

def run_duplicates(db, run, config, lessons=LESSONS):
    async def work(s):
        for item in lessons:
            await s.lessons.add(item.id, item.trigger, item.action)
        await s.context.register_session(PROJECT, "s1")
        return await engine.run(s, config, PROJECT, ["duplicate_detection"])
    return run(db, work)


def test_cycle_uses_the_configured_model(db, run, tmp_path, model_dir):
    config = load_config(config_file(tmp_path, f"similarity:\n  backend: semantic\n  model: {model_dir}\n"))
    result = run_duplicates(db, run, config)
    assert [sorted(f.data["lessons"]) for f in result.report.findings] == [["a-retry", "b-resend"]]


def test_lexical_setting_changes_nothing_and_loads_no_model(db, run, tmp_path):
    # The model folder does not exist: with the lexical backend it is never looked at.
    lessons = [*LESSONS, lesson("e-pages", "When listing rows", "Paginate the database queries by a cursor")]
    config = load_config(config_file(tmp_path, "similarity:\n  backend: lexical\n  model: ./missing\n"))
    lexical = run_duplicates(db, run, config, lessons).report
    default = run_duplicates(tmp_path / "other.db", run, parse_config({}, "defaults"), lessons).report
    assert [f.data for f in lexical.findings] == [f.data for f in default.findings]
    assert [sorted(f.data["lessons"]) for f in lexical.findings] == [["c-pages", "e-pages"]]


def assert_config_error_and_nothing_run(db, run, config, needle):
    async def work(s):
        await s.context.register_session(PROJECT, "s1")
        with pytest.raises(ConfigError) as exc:
            await engine.run(s, config, PROJECT, ["duplicate_detection"])
        return str(exc.value), (await engine.report(s, PROJECT)).last_run
    message, last_run = run(db, work)
    assert needle in message and "\n" not in message
    assert last_run is None


def test_missing_model_folder_is_a_one_line_config_error(db, run, tmp_path):
    pytest.importorskip("model2vec")
    path = config_file(tmp_path, "similarity:\n  backend: semantic\n  model: ./no-such-model\n")
    assert_config_error_and_nothing_run(db, run, load_config(path),
                                        f"{path}: similarity.model: no model folder at {tmp_path / 'no-such-model'}")


def test_unreadable_model_folder_is_a_one_line_config_error(db, run, tmp_path):
    pytest.importorskip("model2vec")
    (tmp_path / "empty").mkdir()
    path = config_file(tmp_path, "similarity:\n  backend: semantic\n  model: ./empty\n")
    assert_config_error_and_nothing_run(db, run, load_config(path),
                                        f"{path}: similarity.model: cannot load a model2vec model from")


def test_missing_extra_is_a_one_line_config_error(db, run, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "model2vec", None)  # as if not installed
    path = config_file(tmp_path, "similarity:\n  backend: semantic\n  model: minishlab/potion-base-8M\n")
    assert_config_error_and_nothing_run(
        db, run, load_config(path),
        f"{path}: similarity.backend is 'semantic' but model2vec is not installed (pip install 'mgcp[semantic]')")


def test_mgcp_imports_and_runs_without_model2vec():
    code = ("import sys; sys.modules['model2vec'] = None\n"
            "import mgcp.engine, mgcp.surfaces.cli.app, mgcp.operations.semantic\n"
            "from mgcp.operations import duplicate_detection\n"
            "from mgcp.config import DEFAULTS\n"
            "print(duplicate_detection.run([], DEFAULTS['duplicate_detection']))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
