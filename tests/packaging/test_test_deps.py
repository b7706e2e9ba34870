"""What ``make test`` fetches changes nothing outside the project's folder.

The Makefile is read, not run: every recipe ``make test`` depends on is checked for a system install
(``sudo``, ``apt-get install``, ``dpkg -i``, ``pip --user``, ``npm -g``) and for a service enabled or started
(``systemctl``, ``service``, ``update-rc.d``).  The Debian packages the tests run (espeak-ng, ngircd,
redis-server) are unpacked by ``make test-deps`` into ``.venv/debs`` (``apt-get download`` + ``dpkg -x``);
the tests here run them and read ``/proc`` to show that the program and every library unpacked beside it
come from there, and that the tests (and the commands they start) find them before the system's.
"""

from __future__ import annotations

import os
import re
import select
import shutil
import socket
import string
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from conftest import DEBS, DEBS_BIN, REPO, find_program
from redis_server import RedisServer

MAKEFILE = REPO / "Makefile"
README = REPO / "README.md"
DEADLINE = 20.0  # seconds to wait for a program to start (a hang guard, not a measure)

# The programs make test-deps unpacks: where each is in its package, and what its --version prints.
# Debian's usr/bin/redis-server is a symlink to redis-check-rdb (of redis-tools), which runs as the server
# when it is run by that name.
PROGRAMS = {
    "espeak-ng": ("usr/bin/espeak-ng", "eSpeak NG text-to-speech"),
    "ngircd": ("usr/sbin/ngircd", "ngIRCd 2"),
    "redis-server": ("usr/bin/redis-server", "Redis server v=7."),
}


# --------------------------------------------------------------------------
# Reading the Makefile
# --------------------------------------------------------------------------


@dataclass
class Rule:
    target: str
    prerequisites: list[str]
    recipe: list[str] = field(default_factory=list)  # each command with its continuation lines joined


@dataclass
class Makefile:
    variables: dict[str, str]
    rules: dict[str, Rule]

    def expand(self, text: str, depth: int = 0) -> str:
        """``text`` with every ``$(NAME)`` of a variable defined here replaced (functions are left)."""
        if depth > 20:
            return text

        def one(match: re.Match[str]) -> str:
            name = match.group(1)
            return self.expand(self.variables[name], depth + 1) if name in self.variables else match[0]

        return re.sub(r"\$\((\w+)\)", one, text)

    def closure(self, goal: str) -> list[Rule]:
        """The rules ``make goal`` may run: ``goal``'s and its prerequisites', recursively."""
        seen: list[Rule] = []
        todo = [goal]
        while todo:
            name = todo.pop(0)
            rule = self.rules.get(name)
            if rule is None or rule in seen:
                continue
            seen.append(rule)
            todo += rule.prerequisites
        return seen

    def commands(self, rule: Rule) -> list[str]:
        """The recipe as the shell gets it: variables expanded, ``$$`` made ``$``, no ``@-+`` prefixes."""
        return [self.expand(line).replace("$$", "$").lstrip("@-+ ") for line in rule.recipe]


def read_makefile(text: str) -> Makefile:
    text = re.sub(r"\\\n\t?", " ", text)  # continuation lines (a recipe's lose their leading tab)
    variables: dict[str, str] = {}
    raw_rules: list[tuple[str, str, list[str]]] = []
    in_define = False
    for line in text.splitlines():
        if in_define:
            in_define = not line.startswith("endef")
            continue
        if line.startswith("\t"):
            if raw_rules and line.strip() and not line.strip().startswith("#"):
                raw_rules[-1][2].append(line.strip())
            continue
        stripped = line.split("#", 1)[0].strip() if not line.startswith("\t") else line
        if not stripped or re.match(r"(ifn?eq|ifn?def|else|endif)\b", stripped):
            continue
        if stripped.startswith("define "):
            in_define = True
            continue
        assignment = re.match(r"^(?:export\s+)?(\w+)\s*(:=|::=|\?=|\+=|=)\s*(.*)$", stripped)
        if assignment:
            name, op, value = assignment.groups()
            if op == "+=":
                variables[name] = f"{variables.get(name, '')} {value}".strip()
            elif op != "?=" or name not in variables:
                variables[name] = value
            continue
        rule = re.match(r"^([^:=]+?)\s*::?(?!=)\s*(.*)$", stripped)
        if rule:
            raw_rules.append((rule.group(1), rule.group(2), []))
    makefile = Makefile(variables, {})
    for targets, prerequisites, recipe in raw_rules:
        prereqs = [p for p in makefile.expand(prerequisites).split() if p != "|"]
        for target in makefile.expand(targets).split():
            if re.fullmatch(r"\.[A-Z_]+", target):  # .PHONY and the like
                continue
            known = makefile.rules.get(target)
            if known is None:
                makefile.rules[target] = Rule(target, prereqs, list(recipe))
            else:
                known.prerequisites += prereqs
                known.recipe += recipe
    return makefile


# What would install or change the system, in a command of a recipe.
ELEVATION = re.compile(r"(?<![\w-])(sudo|doas|pkexec|su)(?![\w-])")
SERVICES = re.compile(r"(?<![\w-])(systemctl|service|update-rc\.d|invoke-rc\.d|rc-service|chkconfig)\b")
APT_CHANGES = {"install", "reinstall", "remove", "purge", "upgrade", "dist-upgrade", "full-upgrade"}
APT_CHANGES |= {"autoremove", "build-dep", "satisfy", "markauto", "hold"}
APT_DRY_RUN = {"-s", "--simulate", "--dry-run", "--just-print", "--no-act", "--recon"}
DPKG_READ_ONLY = {"-x", "--extract", "-X", "--vextract", "-c", "--contents", "-I", "--info", "-f", "--field"}
DPKG_READ_ONLY |= {"-L", "--listfiles", "-s", "--status", "-l", "--list", "--print-architecture"}


def segments(command: str) -> Iterator[list[str]]:
    """The simple commands of a shell command line, as words (good enough to find a program's arguments)."""
    for part in re.split(r";|&&|\|\||\||\$\(|`|\(|\)|\{ |\}|\bthen\b|\belse\b|\bdo\b", command):
        words = part.replace('"', " ").replace("'", " ").split()
        if words:
            yield words


def problems(makefile: Makefile, goal: str) -> list[str]:
    """What, in the recipes ``make goal`` may run, would install or change something outside the project."""
    found = []
    for rule in makefile.closure(goal):
        target = rule.target
        if target.startswith("/") or ".." in Path(target).parts:
            found.append(f"{target}: a target outside the project's folder")
        commands = makefile.commands(rule)
        private_lists = any("Dir::State::Lists=" in c and "Dir::Cache=" in c for c in commands)
        for command in commands:
            where = f"{target}: {command[:120]}"
            if ELEVATION.search(command):
                found.append(f"{where}: runs as another user ({ELEVATION.search(command)[0]})")
            if SERVICES.search(command):
                found.append(f"{where}: touches a service ({SERVICES.search(command)[0]})")
            for words in segments(command):
                names = [Path(w).name for w in words]
                if {"apt-get", "apt", "aptitude"} & set(names):
                    if APT_CHANGES & set(words) and not APT_DRY_RUN & set(words):
                        found.append(f"{where}: installs or removes Debian packages")
                    if "update" in words and not private_lists:
                        found.append(f"{where}: updates the system's package lists")
                if "dpkg" in names:
                    actions = [w for w in words[names.index("dpkg") + 1 :] if w.startswith("-")]
                    if not actions or actions[0] not in DPKG_READ_ONLY:
                        found.append(f"{where}: dpkg changes the system")
                if "pip" in names and "install" in words:
                    target_dir = words[words.index("--target") + 1] if "--target" in words[:-1] else None
                    in_venv = words[0].startswith(".venv/") or (target_dir or "").startswith(".venv/")
                    if not in_venv or {"--user", "--break-system-packages"} & set(words):
                        found.append(f"{where}: pip installs outside .venv")
                if "npm" in names and "install" in words:
                    prefix = words[words.index("--prefix") + 1] if "--prefix" in words[:-1] else ""
                    if {"-g", "--global"} & set(words) or not prefix.startswith(".venv/"):
                        found.append(f"{where}: npm installs outside .venv")
    return found


def test_make_test_installs_nothing_outside_the_projects_folder() -> None:
    makefile = read_makefile(MAKEFILE.read_text(encoding="utf-8"))
    targets = [rule.target for rule in makefile.closure("test")]
    debs_stamp = makefile.expand("$(DEBS_STAMP)")
    # The reading found what make test runs: the test-deps and the Debian packages' recipe among them.
    assert {"test", "test-deps", debs_stamp} <= set(targets), targets
    assert debs_stamp.startswith(".venv/debs/"), debs_stamp
    assert problems(makefile, "test") == []
    fetch = " ; ".join(makefile.commands(makefile.rules[debs_stamp]))
    assert re.search(r"apt-get [^;|]*\bdownload\b", fetch), fetch
    assert re.search(r"dpkg -x ", fetch), fetch


# The test-deps recipe this project had before issue 17 (sudo apt-get install of espeak-ng, ngircd, openssl).
OLD_RECIPE = """\
APT_GET  := $(shell [ "$$(id -u)" = 0 ] || echo sudo) apt-get
test: test-deps
\t$(PY) -m pytest -q
test-deps:
\t@missing=""; \\
\tcommand -v espeak-ng >/dev/null 2>&1 || missing="$$missing espeak-ng"; \\
\tif [ -n "$$missing" ]; then \\
\t\t$(APT_GET) install -y --no-install-recommends $$missing \\
\t\t|| { $(APT_GET) update && $(APT_GET) install -y --no-install-recommends $$missing; }; \\
\tfi
"""


def test_the_check_finds_a_system_install() -> None:
    """The check above is no formality: the recipe issue 17 replaced fails it on every count."""
    found = problems(read_makefile(OLD_RECIPE), "test")
    assert any("runs as another user (sudo)" in p for p in found), found
    assert any("installs or removes Debian packages" in p for p in found), found
    assert any("updates the system's package lists" in p for p in found), found
    commands = ["systemctl enable ngircd", "dpkg -i ngircd.deb", "pip install --user x", "npm install -g y"]
    found = problems(read_makefile("test: x\nx:\n" + "".join(f"\t{c}\n" for c in commands)), "test")
    assert [p.rsplit(": ", 1)[1] for p in found] == [
        "touches a service (systemctl)",
        "dpkg changes the system",
        "pip installs outside .venv",
        "npm installs outside .venv",
    ], found


# --------------------------------------------------------------------------
# The unpacked programs
# --------------------------------------------------------------------------


def unpacked(name: str) -> Path:
    wrapper = DEBS_BIN / name
    assert os.access(wrapper, os.X_OK), f"{wrapper} is missing: run `make test-deps`"
    return wrapper


def assert_runs_from_the_projects_folder(pid: int, name: str) -> None:
    """The process runs the program unpacked in .venv/debs, and every library that .venv/debs holds is
    loaded from there, not from the system."""
    debs = DEBS.resolve()
    exe = Path(os.readlink(f"/proc/{pid}/exe"))
    assert exe == (debs / PROGRAMS[name][0]).resolve(), exe  # the file a symlink (redis-server's) names
    maps = Path(f"/proc/{pid}/maps").read_text(encoding="utf-8").splitlines()
    mapped = {Path(cols[5]) for cols in (line.split(None, 5) for line in maps) if len(cols) == 6}
    ours = {p.name for p in debs.rglob("*.so*")}
    loaded = sorted(str(p) for p in mapped if p.name in ours)
    assert loaded, f"no library of {debs} is loaded: {sorted(map(str, mapped))}"
    assert all(p.startswith(f"{debs}/") for p in loaded), loaded


@pytest.mark.parametrize("name", PROGRAMS)
def test_the_unpacked_program_runs_from_the_projects_folder(name: str) -> None:
    wrapper = unpacked(name)
    proc = subprocess.run(
        [str(wrapper), "--version"],
        env={"PATH": "/usr/bin:/bin", "LANG": "C"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert PROGRAMS[name][1] in proc.stdout, proc.stdout
    assert proc.stderr == ""
    if name == "espeak-ng":  # its voices and dictionaries are the unpacked ones too
        assert f"Data at: {DEBS}/" in proc.stdout, proc.stdout


@pytest.mark.parametrize("name", PROGRAMS)
def test_the_tests_find_the_unpacked_program_first(name: str) -> None:
    """The tests' helper and PATH (which the kernel's commands and the docs' examples get) both name the
    program in .venv/debs, although the system may have its own."""
    wrapper = str(unpacked(name))
    assert find_program(name) == wrapper
    assert shutil.which(name) == wrapper
    assert os.environ["PATH"].split(os.pathsep)[0] == str(DEBS_BIN)


def test_a_running_espeak_ng_is_the_unpacked_one() -> None:
    unpacked("espeak-ng")
    proc = subprocess.Popen(
        [find_program("espeak-ng") or "espeak-ng", "--stdout"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write(b"Hello.\n")
        proc.stdin.flush()
        assert select.select([proc.stdout], [], [], DEADLINE)[0], "espeak-ng wrote nothing"
        assert proc.stdout.read(4) == b"RIFF"  # speaking: loaded, with its data, and waiting for more text
        assert_runs_from_the_projects_folder(proc.pid, "espeak-ng")
    finally:
        proc.stdin.close()
        proc.stdout.read()
        proc.wait(timeout=DEADLINE)
    assert proc.returncode == 0, proc.stderr.read() if proc.stderr else ""


def test_a_running_ngircd_is_the_unpacked_one(tmp_path: Path) -> None:
    unpacked("ngircd")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    (tmp_path / "conf.d").mkdir()
    template = string.Template((REPO / "tests/fixtures/irc/ngircd.conf").read_text(encoding="utf-8"))
    config = tmp_path / "ngircd.conf"
    config.write_text(
        template.substitute(
            port=port, password="x", pidfile=tmp_path / "ngircd.pid", includedir=tmp_path / "conf.d", ssl=""
        ),
        encoding="utf-8",
    )
    proc = subprocess.Popen(
        [find_program("ngircd") or "ngircd", "--nodaemon", "--config", str(config)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        end = time.monotonic() + DEADLINE
        while True:  # listening: loaded and running
            assert proc.poll() is None, f"ngircd exited with {proc.returncode}"
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < end, f"ngircd did not listen on port {port}"
                time.sleep(0.05)
        assert_runs_from_the_projects_folder(proc.pid, "ngircd")
    finally:
        proc.terminate()
        proc.wait(timeout=DEADLINE)


def test_a_running_redis_server_is_the_unpacked_one(tmp_path: Path) -> None:
    unpacked("redis-server")
    with RedisServer(tmp_path) as server:  # answering PING: loaded and running as the server
        assert server.pid is not None
        assert_runs_from_the_projects_folder(server.pid, "redis-server")
        # Run by the symlink's name (redis decides from argv[0] what it is), as the wrapper does: the server
        # rewrites its command line into its title, argv[0] then the address it listens on.
        title = Path(f"/proc/{server.pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().split()
        assert title[:2] == [str(DEBS / PROGRAMS["redis-server"][0]), f"127.0.0.1:{server.port}"], title
        assert server.client().info("server")["redis_mode"] == "standalone"


def test_the_stamp_records_the_packages_it_was_made_from() -> None:
    """make test-deps fetches again when the Makefile's list of packages changes."""
    stamp = DEBS / ".installed"
    assert stamp.is_file(), f"{stamp} is missing: run `make test-deps`"
    makefile = read_makefile(MAKEFILE.read_text(encoding="utf-8"))
    assert stamp.read_text(encoding="utf-8").split() == makefile.expand("$(DEBS)").split()


# --------------------------------------------------------------------------
# The README says what the two commands install
# --------------------------------------------------------------------------


def readme_lines_after_the_commands() -> list[str]:
    lines = README.read_text(encoding="utf-8").splitlines()
    # The fence that closes the two commands (tests/docs/test_docs.py checks them).
    end = lines.index("```", 3)
    return [line for line in lines[end + 1 : end + 4] if line.strip()]


def test_the_readme_says_what_make_run_and_make_test_install() -> None:
    run_line, test_line = readme_lines_after_the_commands()[:2]
    assert run_line.startswith("- `make run` installs") and "`.venv`" in run_line, run_line
    assert test_line.startswith("- `make test` installs the same"), test_line
    # Every folder test-deps fills is named, and what is in it.
    makefile = read_makefile(MAKEFILE.read_text(encoding="utf-8"))
    folders = {"/".join(Path(p).parts[:2]) for p in makefile.rules["test-deps"].prerequisites}
    assert folders == {".venv/node", ".venv/compat-site", ".venv/lint-site", ".venv/debs"}, folders
    words = [*sorted(folders), "dev extras", "MCP filesystem server", "import-linter", *PROGRAMS]
    words.append("without root")
    for word in words:
        assert word in test_line, f"the README's line on make test does not mention {word!r}: {test_line}"
