"""Every shipped plan, end to end, on real commands.

Each scenario runs in the Agent-Zero stand-in (both extension files, the real hook order, history as
Agent-Zero records it). The model is ``LiteralModel``: it runs the command each step's text shows, with the
scenario's values in the placeholders, in a real bash in a temporary folder (real git with a bare remote,
real Python projects and pytest, real files, curl against an HTTP API on localhost, pip with a local package
index, and a ``docker`` stand-in that prints what Docker prints). Each plan's success path reaches completion
and at least one failure path reaches its retry and then its escalation or its alternative route; the table
in the README lists them.
"""

from pathlib import Path

import pytest
from real_commands import (Api, LiteralModel, available, docker_standin, drive, environment, git_project,
                           outcome, pip_environment, reject_pushes, sh, wheel, write)

pytestmark = pytest.mark.skipif(not (available("bash") and available("git") and available("curl")),
                                reason="bash, git and curl are needed to run the plans' commands")

S, F = "success", "fail"


def run(tmp_path: Path, message: str, workdir: Path, env: dict, fills: dict, **kw) -> tuple:
    model = LiteralModel(workdir, env, fills, **kw)
    session = drive(message, model)
    return outcome(session) + (model,)


# ── bug fix: a real Python program and its tests ────────────────────────────

BUGGY = {"first.py": """
            def first(xs):
                return xs[1]


            if __name__ == "__main__":
                print(first([7]))
            """,
         "test_first.py": """
            from first import first


            def test_first_of_two():
                assert first([7, 8]) == 7


            def test_first_of_one():
                assert first([7]) == 7
            """}


def bugfix(tmp_path: Path, old_text: str) -> tuple:
    env = environment(tmp_path)
    work = tmp_path / "work"
    write(work, BUGGY)
    fills = {"reproduce": {"command that shows the bug": "python3 first.py"},
             "gather_context": {"project folder": ".", "related file": "first.py"},
             "isolate": {"name from the error": "first", "file": "first.py"},
             "fix": {"old text": old_text, "new text": "xs[0]", "file": "first.py"},
             "test": {"command that showed the bug": "python3 first.py"}}
    return run(tmp_path, "fix the bug in first.py: first([7]) crashes with IndexError", work, env, fills)


def test_bugfix_success(tmp_path):
    end, node, verdicts, model = bugfix(tmp_path, r"xs\[1\]")
    assert (end, node) == ("plan_completed", "done")
    assert verdicts == [("reproduce", S), ("isolate", S), ("fix", S), ("test", S), ("verify_no_regression", S)]
    assert model.ran[0] == ("reproduce", 'python3 first.py; echo "[exit:$?]"', 0)
    assert (tmp_path / "work" / "first.py").read_text().count("xs[0]") == 1


def test_bugfix_a_fix_that_does_not_fix_loops_back_then_escalates(tmp_path):
    end, node, verdicts, _ = bugfix(tmp_path, r"xs\[2\]")  # matches nothing: sed succeeds, the bug stays
    assert (end, node) == ("plan_escalated", "escalate_stuck")
    assert verdicts == [("reproduce", S), ("isolate", S)] + [("fix", S), ("test", F)] * 3


# ── git: a clone of a bare remote ───────────────────────────────────────────


def feature_branch(tmp_path: Path, dirty: bool, protected: bool) -> tuple:
    env = environment(tmp_path)
    work = git_project(tmp_path, env, {"README.md": "# shop\n", "app.py": "print('shop')\n"})
    if dirty:
        (work / "README.md").write_text("# shop, work in progress\n")
    if protected:
        reject_pushes(tmp_path / "origin.git")
    fills = {"*": {"branch": "feature/login"},
             "make_changes": {"command that edits the files": "printf 'def login():\\n    return True\\n' > login.py"},
             "commit": {"message": "Add a login stub"}}
    return run(tmp_path, "create a new branch called feature/login, add a login stub, commit and push it",
               work, env, fills) + (work,)


def test_git_feature_branch_success(tmp_path):
    end, node, verdicts, _, work = feature_branch(tmp_path, dirty=False, protected=False)
    assert (end, node) == ("plan_completed", "done")
    assert [n for n, _ in verdicts] == ["check_status", "create_branch", "make_changes", "commit", "push"]
    assert all(v == S for _, v in verdicts)
    assert "feature/login" in sh(tmp_path / "origin.git", "git", "branch")


def test_git_feature_branch_dirty_tree_is_stashed_and_a_rejected_push_escalates(tmp_path):
    end, node, verdicts, _, work = feature_branch(tmp_path, dirty=True, protected=True)
    assert (end, node) == ("plan_escalated", "escalate_push")
    assert verdicts == [("check_status", F), ("stash_or_commit", S), ("check_status", S), ("create_branch", S),
                        ("make_changes", S), ("commit", S), ("push", F), ("push", F)]
    assert "before feature branch" in sh(work, "git", "stash", "list")


def merge(tmp_path: Path, conflict: bool) -> tuple:
    env = environment(tmp_path)
    work = git_project(tmp_path, env, {"README.md": "title\n", "app.py": "print('app')\n"})
    sh(work, "git", "checkout", "-q", "-b", "feature/search", env=env)
    write(work, {"search.py": "def search(q):\n    return [q]\n"})
    if conflict:
        write(work, {"README.md": "title, with search\n"})
    sh(work, "git", "add", "-A", env=env)
    sh(work, "git", "commit", "-q", "-m", "search", env=env)
    sh(work, "git", "push", "-q", "-u", "origin", "feature/search", env=env)
    sh(work, "git", "checkout", "-q", "main", env=env)
    write(work, {"README.md": "title, main edition\n"})  # main moved on: a real merge (and a conflict, if asked)
    sh(work, "git", "commit", "-q", "-am", "main edition", env=env)
    sh(work, "git", "push", "-q", "origin", "main", env=env)
    fills = {"*": {"target": "main", "source": "feature/search"},
             "resolve_conflicts": {"command that resolves the conflicts": "true", "resolved files": "README.md"}}
    return run(tmp_path, "merge the branch feature/search into main", work, env, fills) + (work,)


def test_git_merge_success(tmp_path):
    end, node, verdicts, _, work = merge(tmp_path, conflict=False)
    assert (end, node) == ("plan_completed", "done")
    assert verdicts == [("fetch", S), ("checkout_target", S), ("merge", S), ("push", S)]
    assert "search.py" in sh(tmp_path / "origin.git", "git", "ls-tree", "--name-only", "main")


def test_git_merge_unresolved_conflicts_are_aborted_then_escalated(tmp_path):
    end, node, verdicts, _, work = merge(tmp_path, conflict=True)  # the model never removes the markers
    assert (end, node) == ("plan_escalated", "escalate_conflicts")
    assert verdicts == [("fetch", S), ("checkout_target", S), ("merge", F)] + [("resolve_conflicts", F)] * 3 + [
        ("abort_merge", S)]
    assert "<<<<<<<" not in (work / "README.md").read_text()  # the abort left the branch as it was


# ── docker: the CLI stand-in ────────────────────────────────────────────────


def docker(tmp_path: Path, dockerfile: str) -> tuple:
    env = docker_standin(tmp_path, environment(tmp_path))
    work = tmp_path / "work"
    write(work, {"Dockerfile": dockerfile, "app.py": "print('ok')\n"})
    fills = {"*": {"name": "app", "tag": "1.0", "smoke command": "python3 app.py", "host port": "8080",
                   "container port": "8000"},
             "fix_dockerfile": {"command that writes the Dockerfile": "sed -i '/requirements.txt/d' Dockerfile"}}
    return run(tmp_path, "build a docker image for the api and run the container", work, env, fills)


GOOD_DOCKERFILE = 'FROM python:3.12-slim\nWORKDIR /app\nCOPY . /app\nRUN true\nCMD ["python3", "app.py"]\n'


def test_docker_success(tmp_path):
    end, node, verdicts, model = docker(tmp_path, GOOD_DOCKERFILE)
    assert (end, node) == ("plan_completed", "done")
    assert verdicts == [("check_dockerfile", S), ("build", S), ("test_image", S), ("deploy", S), ("verify_running", S)]
    assert model.ran[1][1] == "docker build -t app:1.0 . 2>&1 | tail -40"


def test_docker_a_failing_build_goes_to_a_dockerfile_fix_and_builds_again(tmp_path):
    broken = GOOD_DOCKERFILE.replace("RUN true", "RUN test -f requirements.txt")
    end, node, verdicts, _ = docker(tmp_path, broken)
    assert (end, node) == ("plan_completed", "done")
    assert verdicts == [("check_dockerfile", S), ("build", F), ("fix_dockerfile", S), ("build", S),
                        ("test_image", S), ("deploy", S), ("verify_running", S)]


def test_docker_a_container_that_does_not_stay_up_escalates(tmp_path):
    end, node, verdicts, _ = docker(tmp_path, GOOD_DOCKERFILE.replace('"app.py"]', '"app.py", "exits"]'))
    assert (end, node) == ("plan_escalated", "escalate_deploy")
    assert verdicts[-3:] == [("verify_running", F)] * 3


# ── files: backup, copy, restore ────────────────────────────────────────────


def backup(tmp_path: Path, destination_is_a_file: bool) -> tuple:
    env = environment(tmp_path)
    work = tmp_path / "work"
    write(work, {"data/a.txt": "alpha\n", "data/sub/b.txt": "beta\n"})
    if destination_is_a_file:
        write(work, {"archive": "not a folder\n"})
    fills = {"*": {"source": "data", "backup": "data.bak", "destination": "archive",
                   "temporary files": "tmp-staging"}}
    return run(tmp_path, "back up the data folder and copy the files to archive", work, env, fills) + (work,)


def test_file_backup_success(tmp_path):
    end, node, verdicts, _, work = backup(tmp_path, destination_is_a_file=False)
    assert (end, node) == ("plan_completed", "done")
    assert verdicts == [("inventory", S), ("create_backup", S), ("execute", S), ("verify_destination", S),
                        ("cleanup", S)]
    assert (work / "archive" / "sub" / "b.txt").read_text() == "beta\n" and (work / "data.bak" / "a.txt").exists()


def test_file_backup_a_copy_that_cannot_be_made_restores_from_the_backup(tmp_path):
    end, node, verdicts, _, work = backup(tmp_path, destination_is_a_file=True)
    assert (end, node) == ("plan_escalated", "escalate_restored")
    assert verdicts == [("inventory", S), ("create_backup", S), ("execute", F), ("execute", F),
                        ("restore_from_backup", S)]
    assert (work / "data" / "sub" / "b.txt").read_text() == "beta\n"


# ── an HTTP API on localhost ────────────────────────────────────────────────

CLIENT = ("import json, os, urllib.request\\n"
          "req = urllib.request.Request(URL + \"/v1/items\", headers={\"Authorization\": \"Bearer \" + os.environ[\"API_KEY\"]})\\n"
          "with urllib.request.urlopen(req, timeout=5) as r:\\n"
          "    print(\"status=\" + str(r.status), json.load(r))\\n")


def api(tmp_path: Path, first_url_path: str) -> tuple:
    server = Api(key="s3cret")
    try:
        env = environment(tmp_path, API_KEY="s3cret")
        work = tmp_path / "work"
        work.mkdir()
        client = f"printf 'URL = \"{server.url}\"\\n{CLIENT}' > client.py"
        fills = {"research": {"documentation URL": f"{server.url}/docs"},
                 "implement": {"command that writes the client code": client},
                 "test_call": {"endpoint URL": [server.url + first_url_path, f"{server.url}/v1/items"]},
                 "fix_call": {"command that edits the client code": "grep -n v1/items client.py"},
                 "error_handling": {"command that runs the client or its tests": "python3 client.py"}}
        return run(tmp_path, f"write an api client for the items endpoint at {server.url}", work, env, fills)
    finally:
        server.close()


def test_api_integration_success(tmp_path):
    end, node, verdicts, model = api(tmp_path, "/v1/items")
    assert (end, node) == ("plan_completed", "done")
    assert verdicts == [("research", S), ("setup_auth", S), ("implement", S), ("test_call", S), ("error_handling", S)]


def test_api_integration_an_error_status_goes_to_a_fix_and_is_called_again(tmp_path):
    end, node, verdicts, _ = api(tmp_path, "/v1/itemz")  # a typo in the URL: 404
    assert (end, node) == ("plan_completed", "done")
    assert verdicts == [("research", S), ("setup_auth", S), ("implement", S), ("test_call", F), ("fix_call", S),
                        ("test_call", S), ("error_handling", S)]


# ── a new Python module, a refactor ─────────────────────────────────────────

TEXTSTATS_TESTS = {"README.md": "textstats: tokenize(text) splits on white space; word_count(text) counts words.\n",
                   "tests/test_textstats.py": """
                       from textstats import tokenize, word_count


                       def test_tokenize():
                           assert tokenize("a b  c") == ["a", "b", "c"]


                       def test_word_count():
                           assert word_count("one two three") == 3
                       """}
GOOD = "def tokenize(text):\\n    return text.split()\\n\\n\\ndef word_count(text):\\n    return len(tokenize(text))\\n"
BAD = "def tokenize(text):\\n    return text.split()\\n\\n\\ndef word_count(text):\\n    return len(text)\\n"


def codegen(tmp_path: Path, first_code: str) -> tuple:
    env = environment(tmp_path)
    work = tmp_path / "work"
    write(work, TEXTSTATS_TESTS)
    fills = {"spec_review": {"project folder": ".", "related file": "README.md"},
             "scaffold": {"command that writes the files with their stubs":
                          "mkdir -p textstats && printf 'def tokenize(text):\\n    raise NotImplementedError\\n'"
                          " > textstats/__init__.py"},
             "implement": {"command that writes the code": f"printf '{first_code}' > textstats/__init__.py"},
             "test": {"tests folder": "tests"},
             "fix_implementation": {"command that edits the code": f"printf '{GOOD}' > textstats/__init__.py"},
             "document": {"command that adds the docstrings and the usage note":
                          "sed -i '1i \"\"\"Text statistics: tokenize(text), word_count(text).\"\"\"' "
                          "textstats/__init__.py"}}
    return run(tmp_path, "create a package called textstats with a tokenizer", work, env, fills) + (work,)


def test_codegen_success_starting_one_call_late(tmp_path):
    end, node, verdicts, model, work = codegen(tmp_path, GOOD)  # one phrase + the codegen domain: the selector
    assert (end, node) == ("plan_completed", "done")
    assert verdicts == [("spec_review", S), ("scaffold", S), ("implement", S), ("test", S), ("document", S)]
    assert (work / "textstats" / "__init__.py").read_text().startswith('"""Text statistics')


def test_codegen_failing_tests_go_to_a_fix_and_back(tmp_path):
    end, node, verdicts, _, _ = codegen(tmp_path, BAD)
    assert (end, node) == ("plan_completed", "done")
    assert verdicts == [("spec_review", S), ("scaffold", S), ("implement", S), ("test", F),
                        ("fix_implementation", S), ("test", S), ("document", S)]


SHOP = {"shop/__init__.py": "",
        "shop/prices.py": """
            def calc(price, quantity):
                return price * quantity


            def total(lines):
                return sum(calc(p, q) for p, q in lines)
            """,
        "tests/test_prices.py": """
            from shop.prices import calc, total


            def test_calc():
                assert calc(2, 3) == 6


            def test_total():
                assert total([(2, 3), (1, 1)]) == 7
            """}


def refactor(tmp_path: Path, files: str) -> tuple:
    env = environment(tmp_path)
    work = git_project(tmp_path, env, SHOP)
    fills = {"extract_changes": {"name to change": "calc", "folder": "."},
             "modify": {"command that edits the files": f"sed -i 's/\\bcalc\\b/line_total/g' {files}"},
             "commit": {"what changed": "rename calc to line_total"}}
    return run(tmp_path, "refactor the prices module: rename calc to line_total", work, env, fills) + (work,)


def test_refactor_success(tmp_path):
    end, node, verdicts, _, work = refactor(tmp_path, "shop/prices.py tests/test_prices.py")
    assert (end, node) == ("plan_completed", "done")
    assert verdicts == [("run_baseline_tests", S), ("extract_changes", S), ("modify", S), ("run_tests_again", S),
                        ("commit", S)]
    assert "refactor: rename calc" in sh(work, "git", "log", "-1", "--format=%s")


def test_refactor_that_breaks_the_tests_is_reverted_then_escalated(tmp_path):
    end, node, verdicts, _, work = refactor(tmp_path, "shop/prices.py")  # the tests still import calc
    assert (end, node) == ("plan_escalated", "escalate_reverted")
    assert verdicts == [("run_baseline_tests", S), ("extract_changes", S), ("modify", S), ("run_tests_again", F),
                        ("modify", S), ("run_tests_again", F), ("revert", S)]
    assert "def calc" in (work / "shop" / "prices.py").read_text()


# ── pip: a local package index ──────────────────────────────────────────────


def dependencies(tmp_path: Path, breaking: bool) -> tuple:
    wheels = tmp_path / "wheels"
    wheel(wheels, "tinylib", "1.0", "def greet(name):\n    return 'hi ' + name\n")
    wheel(wheels, "tinylib", "2.0", "def greet(name):\n    return 'hello ' + name + '!'\n" if breaking else
          "def greet(name, punct=''):\n    return 'hi ' + name + punct\n")
    for version in ("1.0", "1.1"):  # a second package, whose update is compatible
        wheel(wheels, "otherlib", version, f"VERSION = '{version}'\n")
    env = pip_environment(tmp_path, environment(tmp_path), wheels)
    work = git_project(tmp_path, env, {"requirements.txt": "otherlib==1.0\ntinylib==1.0\n",
                                       "test_app.py": "from tinylib import greet\n\n\ndef test_greet():\n"
                                                      "    assert greet('bob') == 'hi bob'\n"})
    sh(work, "pip", "install", "-q", "-r", "requirements.txt", env=env)
    fills = {"update": {"packages": "tinylib otherlib"},
             "pin_back": {"package": "tinylib", "previous version": "1.0"}}
    return run(tmp_path, "update the dependencies of this project", work, env, fills) + (work,)


def test_dependency_update_success(tmp_path):
    end, node, verdicts, _, work = dependencies(tmp_path, breaking=False)
    assert (end, node) == ("plan_completed", "done")
    assert verdicts == [("audit", S), ("backup_lockfile", S), ("update", S), ("run_tests", S), ("commit", S)]
    assert "tinylib==2.0" in (work / "requirements.txt").read_text()


def test_dependency_update_a_breaking_package_is_pinned_back(tmp_path):
    end, node, verdicts, _, work = dependencies(tmp_path, breaking=True)
    assert (end, node) == ("plan_completed", "done")
    assert verdicts == [("audit", S), ("backup_lockfile", S), ("update", S), ("run_tests", F), ("pin_back", S),
                        ("run_tests", S), ("commit", S)]
    assert (work / "requirements.txt").read_text() == "otherlib==1.1\ntinylib==1.0\n"


# ── logs ────────────────────────────────────────────────────────────────────

LOG = """
    2026-11-20 23:58:01 INFO worker started
    2026-11-21 00:10:12 ERROR db: connection refused (host=db:5432)
    2026-11-21 00:10:42 ERROR db: connection refused (host=db:5432)
    2026-11-21 00:11:12 WARN retrying in 30s
    2026-11-21 00:11:42 ERROR db: connection refused (host=db:5432)
    """


def logs(tmp_path: Path, files: dict) -> tuple:
    env = environment(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    write(work, files)
    fills = {"*": {"log folder": "logs", "log file": "logs/app.log", "first error message": "connection refused"}}
    return run(tmp_path, "check the logs and tell me what went wrong last night", work, env, fills,
               report="The worker could not reach the database (connection refused at 00:10:12).")


def test_log_investigation_success(tmp_path):
    end, node, verdicts, _ = logs(tmp_path, {"logs/app.log": LOG})
    assert (end, node) == ("plan_completed", "done")
    assert verdicts == [("locate_logs", S), ("filter_entries", S), ("identify_pattern", S), ("trace_root_cause", S),
                        ("report", S)]


def test_log_investigation_a_search_that_finds_nothing_goes_to_the_report(tmp_path):
    quiet = "\n".join(line for line in LOG.splitlines() if "INFO" in line)
    end, node, verdicts, _ = logs(tmp_path, {"logs/app.log": quiet})
    assert (end, node) == ("plan_completed", "done")
    assert verdicts == [("locate_logs", S), ("filter_entries", F), ("filter_entries", F), ("report", S)]


def test_log_investigation_missing_logs_escalate(tmp_path):
    end, node, verdicts, _ = logs(tmp_path, {"README.md": "no logs here\n"})
    assert (end, node) == ("plan_escalated", "escalate_no_logs")
    assert verdicts == [("locate_logs", F), ("locate_logs", F)]
