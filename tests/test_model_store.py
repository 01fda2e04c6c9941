"""Trained matching models kept on disk: a restart (a new process) loads the weights an earlier one learned
instead of training again, scores every message the same, and a store it cannot use costs only the training."""

import dataclasses
import os
import subprocess
import sys

import pytest

from graph_engine import meaning
from graph_engine.library import load_library_file
from graph_engine.tools.standin import LIBRARY

# a small model (three plans, a few texts each, a short "no plan" list): what is kept does not depend on the size
PLANS = [dataclasses.replace(p, examples=p.examples[:8], not_examples=p.not_examples[:2])
         for p in list(load_library_file(str(LIBRARY)).plans.values())[:3]]
NOT_REQUESTS = ("hi there", "what is a docker volume?", "thanks, that helped", "write me a poem about rain")
MESSAGES = ["the nightly export dies with a ZeroDivisionError, make it work again", "what does git rebase do?",
            "upgrade numpy to 2.1 and check nothing broke", "hi there", "bring feature/x into main and push"]


@pytest.fixture(autouse=True)
def few_not_requests(monkeypatch):
    monkeypatch.setattr("graph_engine.not_requests.MESSAGES", NOT_REQUESTS)


@pytest.fixture
def store(monkeypatch, tmp_path):
    """An empty store of this test's own, and no model kept in this process."""
    folder = tmp_path / "models"
    monkeypatch.setenv(meaning.STORE_ENV, str(folder))
    monkeypatch.setattr(meaning, "_MODELS", {})
    return folder


def model(plans=PLANS) -> meaning.Model:
    enc = meaning.encoder()
    return meaning.model_of(enc, [meaning.vectors(enc, p) for p in plans])


def scores(m: meaning.Model) -> list:
    enc = meaning.encoder()
    out = []
    for text in MESSAGES:
        ids = enc.ids(text.lower())
        out.append(m.scores(text.lower(), ids, enc.words(ids)).tolist())
    return out


def test_a_model_is_trained_once_and_loaded_after(store, monkeypatch):
    first = model()
    assert not first.kept and len(list(store.glob("model-*.npz"))) == 1
    monkeypatch.setattr(meaning, "_MODELS", {})  # as a new process: nothing kept in memory
    monkeypatch.setattr(meaning, "_train", lambda *a: pytest.fail("trained again"))
    again = model()
    assert again.kept and again is not first
    assert scores(again) == scores(first)  # the same weights: every message scores the same


def test_other_texts_are_another_model(store):
    model()
    fewer = PLANS[:2]
    assert not model(fewer).kept and len(list(store.glob("model-*.npz"))) == 2


@pytest.mark.parametrize("blob", [b"", b"not a zip", b"PK\x03\x04broken"])
def test_a_file_that_cannot_be_read_is_trained_again_and_written_again(store, monkeypatch, blob):
    model()
    (path,) = store.glob("model-*.npz")
    path.write_bytes(blob)
    monkeypatch.setattr(meaning, "_MODELS", {})
    again = model()
    assert not again.kept and path.stat().st_size > 1000
    monkeypatch.setattr(meaning, "_MODELS", {})
    assert model().kept


def test_weights_of_other_shapes_are_not_used(store, monkeypatch):
    import numpy as np
    model()
    (path,) = store.glob("model-*.npz")
    np.savez(path, dense=np.zeros((3, 3), dtype=np.float32), sparse=np.zeros((3, 3), dtype=np.float32))
    monkeypatch.setattr(meaning, "_MODELS", {})
    assert not model().kept


def test_a_store_that_cannot_be_written_is_said_once_and_matching_goes_on(monkeypatch, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    monkeypatch.setenv(meaning.STORE_ENV, str(blocker / "models"))  # a folder inside a file: cannot be made
    monkeypatch.setattr(meaning, "_MODELS", {})
    monkeypatch.setattr(meaning, "_STORE", meaning.Store())
    m = model()
    assert not m.kept and scores(m)
    (line,) = meaning.store_problem()
    assert str(blocker) in line and meaning.STORE_ENV in line and "trains it again" in line
    monkeypatch.setattr(meaning, "_MODELS", {})
    model()
    assert meaning.store_problem() == []  # said once


def test_the_problem_reaches_the_agents_log_through_the_catalogue(monkeypatch, tmp_path):
    from graph_engine.catalogue import LibraryCache
    blocker = tmp_path / "file"
    blocker.write_text("x")
    monkeypatch.setenv(meaning.STORE_ENV, str(blocker / "models"))
    monkeypatch.setattr(meaning, "_MODELS", {})
    monkeypatch.setattr(meaning, "_INDEXES", {})
    monkeypatch.setattr(meaning, "_STORE", meaning.Store())
    import json
    small = tmp_path / "htn_plan_library.json"
    doc = json.loads(LIBRARY.read_text())
    doc["plans"] = {pid: dict(raw, examples=raw.get("examples", [])[:8]) for pid, raw in list(doc["plans"].items())[:3]}
    small.write_text(json.dumps(doc))
    cache = LibraryCache(str(small), background=False)
    cat, _ = cache.refresh()
    assert cat.meaning_index(wait=True) is not None
    assert any("cannot keep the trained matching model" in line for line in cat.take_problems())


def test_off_keeps_nothing(monkeypatch, tmp_path):
    monkeypatch.setenv(meaning.STORE_ENV, "off")
    assert meaning.Store().where() is None
    monkeypatch.delenv(meaning.STORE_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert meaning.Store().where() == str(tmp_path / "graph-engine" / "models")
    s = meaning.Store()
    s.folder = "/a0/usr/graph_engine/models"  # what the runtime names wins over the user's cache folder
    assert s.where() == "/a0/usr/graph_engine/models"


def test_a_new_process_loads_what_this_one_trained(store):
    model()
    code = ("import dataclasses\n"
            "from graph_engine import meaning, not_requests\n"
            "from graph_engine.library import load_library_file\n"
            "from graph_engine.tools.standin import LIBRARY\n"
            f"not_requests.MESSAGES = {NOT_REQUESTS!r}\n"
            "enc = meaning.encoder()\n"
            "plans = [dataclasses.replace(p, examples=p.examples[:8], not_examples=p.not_examples[:2])\n"
            "         for p in list(load_library_file(str(LIBRARY)).plans.values())[:3]]\n"
            "print(meaning.model_of(enc, [meaning.vectors(enc, p) for p in plans]).kept)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=dict(os.environ),
                         check=True).stdout
    assert out.strip() == "True"


def test_only_a_change_to_the_training_code_trains_again():
    """The store's stamp reads this module's syntax tree without what only decides (``meaning.DECIDES``): a
    comment, a threshold or the veto's code may change and the stored weights still fit; a change to the
    training does not keep them."""
    with open(meaning.__file__, encoding="utf-8") as fh:
        source = fh.read()
    stamp = meaning.training_code(source)
    kept = [source.replace("\nTHRESHOLD = ", "\n# a comment more\nTHRESHOLD = 0.5 + ", 1),
            source.replace("total < VETO)", "total < VETO - 1)", 1),
            source.replace("\n\n\nclass Store:", "\n\n\n\nclass Store:", 1)]
    retrained = [source.replace("TRAIN_STEPS = ", "TRAIN_STEPS = 1 + ", 1),
                 source.replace("m *= 0.9", "m *= 0.8", 1),
                 source.replace("ALIGN_FLOOR = ", "ALIGN_FLOOR = 0.1 + ", 1)]
    assert all(changed != source for changed in kept + retrained)
    assert [meaning.training_code(changed) == stamp for changed in kept] == [True] * len(kept)
    assert [meaning.training_code(changed) == stamp for changed in retrained] == [False] * len(retrained)
