"""Reading scenario files: YAML validated once into typed models, every problem reported at once
(in the file's order, by line and column).

Validation is the models' own checks plus the gates: each gate is parsed and
the builds, phases and figures it names are checked, so a typo fails at
``harness validate`` rather than at the end of a long run. The file itself is
refused before it is parsed when it is not a regular file of at most 1 MiB of
UTF-8 text (``harness.core.yamlread.read_text_file``).
"""

from __future__ import annotations

from pathlib import Path

from harness.core.errors import InputError, Problem, ScenarioError
from harness.core.yamlmodel import (
    Validated,
    YamlPath,
    display_name,
    in_file_order,
    problem_at,
    read_text_file,
    validate_yaml,
)
from harness.scenario.abort import abort_problems
from harness.scenario.builds import build_problems, folder_problems
from harness.scenario.gates import GateSyntaxError, check_gate, figure_names, parse_gate
from harness.scenario.names import name_problems
from harness.scenario.requests import data_problems, environment_problems
from harness.scenario.schema import LoadedScenario, Scenario
from harness.stubs.wiremock import load_mappings


def load_scenario_text(
    text: str, file: str = "<scenario>", *, base_dir: Path | None = None
) -> LoadedScenario:
    """Validate scenario YAML text; raise ``ScenarioError`` listing every problem found.

    With ``base_dir`` (the file's folder: a scenario about to run, or ``harness validate``),
    the folders builds name and the endpoints' data files are checked to exist there, and
    the environment variables headers read (``{env: NAME}``) to be set in this process.
    """
    done = validate_yaml(Scenario, text, file, expected="a mapping of scenario keys")
    problems = done.problems + _gate_problems(done, file) + _build_problems(done, file, base_dir)
    if base_dir is not None:
        problems += _request_problems(done, file, base_dir)
        problems += _mapping_problems(done, file, base_dir)
    problems += [  # fields against each other (the time line, the load), at the field's line
        problem_at(file, done.node(*paths), ".".join(str(p) for p in paths[0]), message)
        for path, message in done.model.cross_field_problems()
        for paths in [_in_file(done, path)]
    ]
    problems += [  # names a gate could not tell from its own words, at the name's key
        problem_at(file, done.key_node(where), ".".join(str(p) for p in where), message)
        for path, message in name_problems(done.model)
        for where in [_in_file(done, path)[0]]
    ]
    if problems:
        raise ScenarioError(in_file_order(problems))
    return LoadedScenario(path=file, text=text, scenario=done.model)


def _in_file(done: Validated[Scenario], path: YamlPath) -> tuple[YamlPath, ...]:
    """A model's path as the file's: a dependency's phases (``pg.phases``,
    ``dependencies.<name>.phases``) are sorted by start, the file's are not, so a phase's
    index is found by its name; then the path itself, then its parent."""
    at = _phases_at(path)
    if at is not None:
        model = done.model.pg if at == ("pg",) else done.model.dependencies[str(at[1])]
        name = model.phases[int(path[len(at) + 1])].name
        i = 0
        while (*at, "phases", i) in done.index:
            node = done.index.get((*at, "phases", i, "name"))
            if node is not None and getattr(node, "value", None) == name:
                path = (*at, "phases", i, *path[len(at) + 2 :])
                break
            i += 1
    return (path, path[:-1])


def _phases_at(path: YamlPath) -> YamlPath | None:
    """The dependency whose phase ``path`` is in (``("pg",)``, ``("dependencies", name)``)."""
    if path[:2] == ("pg", "phases") and len(path) > 2:
        return path[:1]
    if path[:1] == ("dependencies",) and path[2:3] == ("phases",) and len(path) > 3:
        return path[:2]
    return None


def _gate_problems(done: Validated[Scenario], file: str) -> list[Problem]:
    """Parse every gate and check the builds, phases and figures it names."""
    problems = []
    known = set(figure_names(done.model))
    for i, spec in enumerate(done.model.gate_specs()):
        try:
            gate = parse_gate(spec.expr, spec.name)
            messages = check_gate(gate, done.model, known)
        except GateSyntaxError as exc:
            messages = [str(exc)]
        node = done.node(("gates", i, "expr"), ("gates", i))
        problems += [problem_at(file, node, f"gates.{i}", m) for m in messages]
        if spec.abort and not messages:  # a gate that may stop a build early (scenario/abort.py)
            node = done.node(("gates", i, "abort"), ("gates", i))
            problems += [
                problem_at(file, node, f"gates.{i}.abort", m) for m in abort_problems(gate)
            ]
    return problems


def _build_problems(done: Validated[Scenario], file: str, base_dir: Path | None) -> list[Problem]:
    """Builds checked against the rest of the scenario (and the folders, given ``base_dir``)."""
    s = done.model
    # A url build needs pg's port fixed only where pg is played (the named dependencies'
    # ports: Scenario._dependency_url_problems); 0 stands for "not played: nothing to fix".
    pg_port = s.pg.port if s.has_pg else 0
    found = build_problems(s.builds, pg_port=pg_port, allow_remote=s.allow_remote)
    if base_dir is not None:
        found += folder_problems(s.builds, base_dir)
    return [
        problem_at(file, done.node(path), ".".join(str(p) for p in path), message)
        for path, message in found
    ]


def _request_problems(done: Validated[Scenario], file: str, base_dir: Path) -> list[Problem]:
    """What the requests read outside the file: their data files (from ``base_dir``) and the
    environment variables of their secrets (this process's, which the load generator
    inherits), each at its own line."""
    found = []
    for name, ep in done.model.traffic.items():
        for at, message in [
            *environment_problems(ep),
            *data_problems(ep, params=ep.params, body=ep.body, base_dir=base_dir),
        ]:
            path = ("traffic", name, *at)
            found.append(problem_at(file, done.node(path), ".".join(map(str, path)), message))
    return found


def _mapping_problems(done: Validated[Scenario], file: str, base_dir: Path) -> list[Problem]:
    """Each dependency's WireMock mappings folder read as the gateway will read it (from
    ``base_dir``): what it refuses, with the mapping file and JSON pointer, at the key."""
    found = []
    for name, dep in done.model.dependencies.items():
        if dep.mappings is None:
            continue
        try:
            load_mappings(base_dir / dep.mappings)
        except InputError as exc:
            path = ("dependencies", name, "mappings")
            found.append(problem_at(file, done.node(path), ".".join(path), str(exc)))
    return found


def load_scenario(path: str | Path, *, check_folders: bool = False) -> LoadedScenario:
    """Read and validate a scenario file (refused unread if it is not a small UTF-8 file).

    ``check_folders``: also check that the folders its builds name exist, relative
    to the file's folder (before a run; not when a run's own copy is read back).
    """
    text = read_text_file(path, what="scenario")
    base_dir = Path(path).resolve().parent if check_folders else None
    return load_scenario_text(text, display_name(path), base_dir=base_dir)
