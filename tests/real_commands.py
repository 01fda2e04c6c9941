"""A model that does what its prompt says, and the real things it works on.

``LiteralModel`` reads the workflow text of each call as Agent-Zero delivered it, takes the step's command
exactly as written there, fills each ``<placeholder>`` from the scenario, and runs it in a real bash in the
scenario's folder; the tool result is the command's real output with the shell prompt line, as
``code_execution_tool`` returns it.  A broken hint therefore breaks its plan's scenario.

Real things: git repositories with a bare remote on disk, a Python project and its pytest tests, files and
log files, an HTTP API on localhost (answered by curl), a package index of local wheels for pip, and a
``docker`` stand-in on PATH that prints what the Docker CLI prints (BuildKit, ``docker ps``) and fails the
way it fails.
"""

from __future__ import annotations

import base64
import hashlib
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import threading
import zipfile
from pathlib import Path
from typing import Any, Callable

from scenario import IDLE

from graph_engine.tools.standin import Reply, Session, terminal

COMMAND = re.compile(r"^  Command(?: \(fill in the <\.\.\.> parts\))?: (.*)$", re.MULTILINE)
PLACEHOLDER = re.compile(r"<([^<>\n]+)>")
VENV_BIN = Path(sys.executable).parent
NOTICES = ("[WORKFLOW COMPLETE", "[WORKFLOW ESCALATED", "[WORKFLOW ENDED", "[WORKFLOW EXPIRED",
           "[WORKFLOW WITHDRAWN", "[WORKFLOW ON HOLD")


class LiteralModel:
    """Runs each step's command as its prompt shows it; ``fills[node][placeholder]`` is a value, or a list
    taken one per visit of the node (the last one repeats)."""

    def __init__(self, workdir: Path, env: dict[str, str], fills: dict[str, dict[str, Any]],
                 report: str = "Findings: see above.") -> None:
        self.workdir, self.env, self.fills, self.report = workdir, env, fills, report
        self.visits: dict[str, int] = {}
        self.ran: list[tuple[str, str, int]] = []  # (node, command, exit status)

    def __call__(self, prompt: str, state: dict | None) -> Reply:
        if "[WORKFLOW" not in prompt or "[WORKFLOW PAUSED" in prompt:
            return IDLE  # no step in this call: the model does something else
        if "Current step:" not in prompt and prompt.startswith(NOTICES):
            return Reply(final="The workflow has ended; here is what happened.")
        node = state["current_node"]
        if "  Tool: response" in prompt:
            return Reply(final=self.report)
        found = COMMAND.search(prompt)
        assert found, f"step {node} shows no command:\n{prompt}"
        visit = self.visits[node] = self.visits.get(node, 0) + 1
        command = PLACEHOLDER.sub(lambda m: self._fill(node, m.group(1), visit), found.group(1))
        done = subprocess.run(["bash", "-c", command], cwd=self.workdir, env=self.env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, timeout=120)
        self.ran.append((node, command, done.returncode))
        return Reply(code=command, output=terminal(done.stdout.decode("utf-8", "replace")))

    def _fill(self, node: str, name: str, visit: int) -> str:
        value = self.fills.get(node, {}).get(name, self.fills.get("*", {}).get(name))
        assert value is not None, f"the scenario does not fill <{name}> for step {node}"
        if isinstance(value, list):
            return value[min(visit, len(value)) - 1]
        return value


def drive(message: str, model: LiteralModel, limit: int = 60) -> Session:
    """The user's message, then passes as Agent-Zero runs them until the run ends and the model has answered;
    when a response ends a monologue mid-run, the user says to go on."""
    s = Session()
    s.user(message)
    for _ in range(limit):
        s.run_pass(model)
        ended = s.state is None or s.state.get("status") != "active"  # an escalated state stays for its pass
        if ended and not s.monologue_open:
            return s
        if not s.monologue_open:
            s.user("ok, go on")
    raise AssertionError(f"no end after {limit} passes: {s.state and s.state['current_node']}")


def outcome(s: Session) -> tuple[str, str, list[tuple[str, str]]]:
    """(how the run ended, at which node, [(node, verdict)...]) from the final state."""
    final = s.agent._htn_last_run
    verdicts = [(e["node"], e["outcome"]) for e in final["events"] if e["type"] == "node_verified"]
    last = final["events"][-1]
    errors = [t for t in s.log.texts("error")]
    assert errors == [], errors
    return last["type"], last["node"], verdicts


# ── the places the commands run ─────────────────────────────────────────────


def environment(tmp: Path, **extra: str) -> dict[str, str]:
    bin_dir = tmp / "bin"
    bin_dir.mkdir(exist_ok=True)
    env = {"PATH": f"{bin_dir}{os.pathsep}{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}",
           "HOME": str(tmp), "LANG": "C.UTF-8", "GIT_AUTHOR_NAME": "Dev", "GIT_AUTHOR_EMAIL": "dev@example.com",
           "GIT_COMMITTER_NAME": "Dev", "GIT_COMMITTER_EMAIL": "dev@example.com", "GIT_TERMINAL_PROMPT": "0",
           "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PYTHONDONTWRITEBYTECODE": "1", "NO_COLOR": "1"}
    env.update(extra)
    return env


def sh(cwd: Path, *args: str, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(list(args), cwd=cwd, env=env, capture_output=True, text=True, check=True)
    return done.stdout


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"))


def git_project(tmp: Path, env: dict[str, str], files: dict[str, str]) -> Path:
    """A clone of a bare repository on disk (the remote, 'origin'), its first commit pushed."""
    remote, work = tmp / "origin.git", tmp / "work"
    sh(tmp, "git", "init", "-q", "--bare", "-b", "main", str(remote), env=env)
    sh(tmp, "git", "clone", "-q", str(remote), str(work), env=env)
    write(work, files)
    sh(work, "git", "add", "-A", env=env)
    sh(work, "git", "commit", "-q", "-m", "first", env=env)
    sh(work, "git", "push", "-q", "-u", "origin", "main", env=env)
    return work


def reject_pushes(remote: Path) -> None:
    """The remote refuses every push, as a protected server does (git prints '! [remote rejected]')."""
    hook = remote / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho 'branch is protected' >&2\nexit 1\n")
    hook.chmod(0o755)


# ── an HTTP API on localhost ────────────────────────────────────────────────


class Api:
    """GET /docs: the documentation; GET /v1/items with 'Authorization: Bearer <key>': a JSON list (401
    without it, 404 for other paths)."""

    def __init__(self, key: str) -> None:
        api = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - the standard library's name
                if self.path == "/docs":
                    api._send(self, 200, "text/plain", "Items API v1\nGET /v1/items  (Authorization: Bearer KEY)\n")
                elif self.path == "/v1/items":
                    ok = self.headers.get("Authorization") == f"Bearer {key}"
                    api._send(self, 200 if ok else 401, "application/json",
                              json.dumps([{"id": 1, "name": "widget"}] if ok else {"error": "unauthorized"}))
                else:
                    api._send(self, 404, "application/json", json.dumps({"error": "not found"}))

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @staticmethod
    def _send(handler: Any, status: int, kind: str, body: str) -> None:
        data = body.encode()
        handler.send_response(status)
        handler.send_header("Content-Type", kind)
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


# ── pip with a local package index ──────────────────────────────────────────


def wheel(folder: Path, name: str, version: str, code: str) -> None:
    """A pure-Python wheel written by hand (no build tool needed)."""
    files = {f"{name}/__init__.py": textwrap.dedent(code),
             f"{name}-{version}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
             f"{name}-{version}.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\n"
                                                  "Tag: py3-none-any\n"}
    record = []
    folder.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(folder / f"{name}-{version}-py3-none-any.whl", "w") as z:
        for path, text in files.items():
            data = text.encode()
            z.writestr(path, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.append(f"{path},sha256={digest},{len(data)}")
        record.append(f"{name}-{version}.dist-info/RECORD,,")
        z.writestr(f"{name}-{version}.dist-info/RECORD", "\n".join(record) + "\n")


def pip_environment(tmp: Path, env: dict[str, str], wheels: Path) -> dict[str, str]:
    """A project environment for ``pip``: a fresh venv (no network: the index is the wheels folder) whose
    packages ``python3`` sees first; ``pip`` on PATH installs into it."""
    venv = tmp / "project-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next(venv.glob("lib/python*/site-packages"))
    pip = tmp / "bin" / "pip"
    pip.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m pip --python "{venv / "bin" / "python"}" "$@"\n')
    pip.chmod(0o755)
    return dict(env, PIP_NO_INDEX="1", PIP_FIND_LINKS=str(wheels), PYTHONPATH=str(site))


# ── a docker stand-in ───────────────────────────────────────────────────────

DOCKER = r'''
"""What the Docker CLI prints, for the commands the plan uses; images and containers kept in $DOCKER_STATE."""
import hashlib, json, os, subprocess, sys, time

state_file = os.path.join(os.environ["DOCKER_STATE"], "state.json")
state = json.load(open(state_file)) if os.path.exists(state_file) else {"images": {}, "containers": {}}
args = sys.argv[1:]


def save():
    json.dump(state, open(state_file, "w"))


def build(tag):
    try:
        lines = open("Dockerfile").read().splitlines()
    except OSError:
        print('#0 building with "default" instance using docker driver\n\n#1 [internal] load build definition '
              'from Dockerfile\n#1 transferring dockerfile: 2B done\n#1 DONE 0.0s\nERROR: failed to solve: failed '
              'to read dockerfile: open Dockerfile: no such file or directory')
        return 1
    print('#0 building with "default" instance using docker driver\n\n#1 [internal] load build definition from '
          'Dockerfile\n#1 transferring dockerfile: %dB done\n#1 DONE 0.0s' % sum(len(x) + 1 for x in lines))
    step = 2
    for line in lines:
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        word, _, rest = line.strip().partition(" ")
        print("#%d [%d/%d] %s" % (step, step - 1, len(lines), line.strip()))
        if word.upper() == "RUN":
            done = subprocess.run(["sh", "-c", rest], capture_output=True, text=True)
            for out in (done.stdout + done.stderr).splitlines():
                print("#%d 0.412 %s" % (step, out))
            if done.returncode:
                print('#%d ERROR: process "/bin/sh -c %s" did not complete successfully: exit code: %d'
                      % (step, rest, done.returncode))
                print('------\n > [%d/%d] %s:\n------\nERROR: failed to solve: process "/bin/sh -c %s" did not '
                      'complete successfully: exit code: %d' % (step - 1, len(lines), line.strip(), rest,
                                                                 done.returncode))
                return 1
        print("#%d DONE 0.1s" % step)
        step += 1
    digest = hashlib.sha256(("\n".join(lines) + tag).encode()).hexdigest()
    cmd = next((l.split(None, 1)[1] for l in lines if l.upper().startswith("CMD ")), "")
    state["images"][tag] = {"id": digest, "cmd": cmd, "workdir": os.getcwd()}
    save()
    name = tag if "/" in tag else "docker.io/library/" + tag
    print("#%d exporting to image\n#%d exporting layers 0.1s done\n#%d writing image sha256:%s done\n#%d naming "
          "to %s done\n#%d DONE 0.2s" % (step, step, step, digest, step, name, step))
    return 0


def run(rest):
    detach, name, rm = False, "", False
    while rest and rest[0].startswith("-"):
        flag = rest.pop(0)
        if flag == "-d":
            detach = True
        elif flag == "--rm":
            rm = True
        elif flag in ("--name", "-p", "-v", "-e", "--restart"):
            value = rest.pop(0)
            if flag == "--name":
                name = value
    image = rest.pop(0) if rest else ""
    if image not in state["images"]:
        print("Unable to find image '%s' locally\ndocker: Error response from daemon: pull access denied for %s, "
              "repository does not exist or may require 'docker login'.\nSee 'docker run --help'."
              % (image, image.split(":")[0]))
        return 125
    img = state["images"][image]
    if not detach:
        command = " ".join(rest) or json.loads(img["cmd"] or "[]") and " ".join(json.loads(img["cmd"]))
        return subprocess.run(["sh", "-c", command], cwd=img["workdir"]).returncode
    if name in state["containers"]:
        print('docker: Error response from daemon: Conflict. The container name "/%s" is already in use by '
              'container "%s". You have to remove (or rename) that container to be able to reuse that name.'
              % (name, state["containers"][name]["id"]))
        return 125
    cid = hashlib.sha256((name + image + str(time.time())).encode()).hexdigest()
    state["containers"][name] = {"id": cid, "image": image, "cmd": img["cmd"], "started": time.time(),
                                 "up": "exits" not in img["cmd"]}
    save()
    print(cid)
    return 0


def ps(rest):
    wanted = rest[rest.index("--filter") + 1].split("=", 1)[1] if "--filter" in rest else ""
    print("CONTAINER ID   IMAGE       COMMAND            CREATED         STATUS         PORTS                    NAMES")
    for name, c in state["containers"].items():
        if c["up"] and wanted in name:
            print('%s   %s   "%s"   5 seconds ago   Up 4 seconds   0.0.0.0:8080->8000/tcp   %s'
                  % (c["id"][:12], c["image"], c["cmd"][:16], name))
    return 0


if args[:1] == ["build"]:
    sys.exit(build(args[args.index("-t") + 1] if "-t" in args else "latest"))
if args[:1] == ["run"]:
    sys.exit(run(args[1:]))
if args[:1] == ["ps"]:
    sys.exit(ps(args[1:]))
print("docker: '%s' is not a docker command." % " ".join(args[:1]))
sys.exit(1)
'''


def docker_standin(tmp: Path, env: dict[str, str]) -> dict[str, str]:
    state = tmp / "docker-state"
    state.mkdir()
    docker = tmp / "bin" / "docker"
    docker.write_text(f"#!{sys.executable}\n{DOCKER}")
    docker.chmod(0o755)
    return dict(env, DOCKER_STATE=str(state))


def available(program: str) -> bool:
    return shutil.which(program) is not None


Fills = dict[str, dict[str, Any]]
Setup = Callable[[Path], tuple[Path, dict[str, str], Fills]]
