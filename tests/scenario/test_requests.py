"""The requests a real client sends (issue 29, part 6): ``headers`` (secrets from the
environment), ``query``, templates, a weighted mix of ``requests`` and a CSV ``data`` file.

Each bad input is refused by ``harness validate`` at its own line (exit 2, no traceback);
the requests an endpoint makes are the same for the same seed (``harness.load.requests``).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.load.plan import LoadPlan, Paths, endpoint_plans, idempotency_key
from harness.load.requests import MissingSecret, Requests
from harness.scenario.loader import load_scenario, load_scenario_text
from harness.scenario.templating import BUILTINS

HEAD = """\
name: rq
seed: 4
duration: 3s
traffic:
  api:
"""
TAIL = """\
builds:
  b: {profile: retry-only}
"""
# Line 6 on: the endpoint's keys.
FULL = """\
    rate: 5
    params: {id: [1, 9]}
    headers:
      Authorization: {env: RQ_TOKEN, prefix: "Bearer "}
      X-User: "{{ user }}"
    query: {page: "{{ random_int(1, 3) }}", lang: en, all: true}
    data: {file: users.csv}
    requests:
      - {weight: 3, path: "/items/{id}"}
      - weight: 1
        method: POST
        path: /orders
        body: {user: "{{ user }}", n: "{{ seq }}", key: "{{ uuid }}", tier: "t-{{ tier }}",
               items: ["{{ choice(['a', 'b']) }}", 2]}
"""
USERS = "user,tier\nalice,gold\nbob,silver\ncarol,bronze\n"


def _write(tmp_path: Path, endpoint: str, csv: str | None = USERS) -> Path:
    path = tmp_path / "s.yaml"
    path.write_text(HEAD + endpoint + TAIL)
    if csv is not None:
        (tmp_path / "users.csv").write_text(csv)
    return path


def _validate(path: Path) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["validate", str(path)])
    assert "Traceback" not in result.output
    return result.exit_code, result.output


@pytest.fixture
def token(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("RQ_TOKEN", "tok-123")
    return "tok-123"


def test_every_key_is_accepted_and_an_old_endpoint_is_unchanged(tmp_path: Path, token: str) -> None:
    code, output = _validate(_write(tmp_path, FULL))
    assert code == 0, output
    old = load_scenario_text(HEAD + "    path: /x\n    rate: 5\n" + TAIL).scenario.traffic["api"]
    assert not old.shaped and old.request_label() == "GET /x"
    plan = endpoint_plans(load_scenario_text(HEAD + "    path: /x\n    rate: 5\n" + TAIL).scenario)
    assert plan["api"].shape is None  # plan.json as before for an endpoint without the keys


@pytest.mark.parametrize(
    ("endpoint", "line", "field", "words"),
    [
        (FULL, 9, "traffic.api.headers.Authorization.env", "RQ_TOKEN is not set"),
        (
            FULL.replace('{{ user }}"\n', '{{ usr }}"\n', 1),
            10,
            "traffic.api.headers.X-User",
            "uses usr, which nothing gives",
        ),
        (
            FULL.replace("t-{{ tier }}", "t-{{ tire }}"),
            18,
            "traffic.api.requests.1.body.tier",
            "uses tire",
        ),
        (FULL.replace("users.csv", "nope.csv"), 12, "traffic.api.data.file", "no such file"),
        (
            "    path: /x/{{seq}}\n    rate: 5\n",  # a path is not a template
            6,
            "traffic.api",
            "not a placeholder",
        ),
        (
            '    path: /x\n    rate: 5\n    body: {a: "{{ nope }}"}\n',
            8,
            "traffic.api.body.a",
            "uses nope, which nothing gives",
        ),
        (
            '    path: /x\n    rate: 5\n    query: {q: "{{ seq "}\n',
            8,
            "traffic.api.query.q",
            "does not parse",
        ),
        (
            "    path: /x\n    rate: 5\n    headers: {Host: example.com}\n",
            8,
            "traffic.api.headers",
            "writes it itself",
        ),
        (
            "    path: /x\n    rate: 5\n    idempotency-key: true\n"
            "    headers: {Idempotency-Key: k}\n",
            9,
            "traffic.api.headers.Idempotency-Key",
            "idempotency-key: true sends this header",
        ),
        (
            "    path: /x\n    rate: 5\n    requests: [{path: /y}]\n",
            6,
            "traffic.api.path",
            "path and requests both given",
        ),
        (
            "    rate: 5\n    requests: [{path: '/y/{id}'}]\n",
            7,
            "traffic.api.requests.0.path",
            "uses ['id'] but params gives no range",
        ),
        ("    rate: 5\n", 6, "traffic.api", "give path"),
        (
            "    path: /x\n    rate: 5\n    headers: {A: {env: 'not a name'}}\n",
            8,
            "traffic.api.headers.A",
            "not an environment variable's name",
        ),
    ],
)
def test_a_bad_request_is_refused_at_its_line(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    endpoint: str,
    line: int,
    field: str,
    words: str,
) -> None:
    monkeypatch.delenv("RQ_TOKEN", raising=False)
    if "RQ_TOKEN is not set" not in words:
        monkeypatch.setenv("RQ_TOKEN", "t")
    path = _write(tmp_path, endpoint)
    code, output = _validate(path)
    assert code == 2, output
    assert f"{path}:{line}:" in output and field in output and words in output, output


@pytest.mark.parametrize(
    ("csv", "words"),
    [
        ("user\nalice\n", "uses tier"),  # a column a template uses is missing
        ("", "empty"),
        ("user,tier\n", "no rows"),
        ("user,tier\nalice\n", "row 2 has 1 fields"),
        ("user,seq\nalice,1\n", "columns ['seq'] have the names"),
    ],
)
def test_a_bad_data_file_is_refused(tmp_path: Path, token: str, csv: str, words: str) -> None:
    path = _write(tmp_path, FULL, csv)
    code, output = _validate(path)
    assert code == 2 and words in output and f"{path}:" in output, output


def test_an_empty_secret_is_refused_without_its_value(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RQ_TOKEN", "")
    code, output = _validate(_write(tmp_path, FULL))
    assert code == 2 and "RQ_TOKEN is empty" in output


def _requests(tmp_path: Path, seed: int = 4, environ: dict[str, str] | None = None) -> Requests:
    _write(tmp_path, FULL)
    text = (tmp_path / "s.yaml").read_text().replace("seed: 4", f"seed: {seed}")
    scenario = load_scenario_text(text).scenario
    ep = endpoint_plans(scenario, tmp_path)["api"]
    return Requests(scenario.seed, "api", ep, {"RQ_TOKEN": "tok"} if environ is None else environ)


def test_the_same_seed_makes_the_same_requests(tmp_path: Path) -> None:
    one, two, three = _requests(tmp_path), _requests(tmp_path), _requests(tmp_path, seed=5)
    first, again = [one.build(i) for i in range(200)], [two.build(i) for i in range(200)]
    other = [three.build(i) for i in range(200)]
    assert first == again and first != other
    # Split over two workers (every other index), each index is the same request.
    worker = _requests(tmp_path)
    assert [worker.build(i) for i in range(1, 200, 2)] == first[1::2]


def test_requests_carry_the_mix_rows_query_and_templated_body(tmp_path: Path) -> None:
    requests = _requests(tmp_path)
    built = [requests.build(i) for i in range(400)]
    kinds = Counter(b.variant for b in built)
    assert 0.65 < kinds[0] / 400 < 0.85  # weights 3:1
    users = ["alice", "bob", "carol"]
    for i, b in enumerate(built):
        assert f"X-User: {users[i % 3]}\r\n" == b.headers  # rows in order, cycling
        path, _, query = b.path.partition("?")
        page, lang, flag = query.split("&")
        assert page in ("page=1", "page=2", "page=3") and lang == "lang=en" and flag == "all=true"
        if b.variant == 0:
            assert path.startswith("/items/") and b.body is None
            continue
        assert path == "/orders"
        body = json.loads(b.body or b"")
        assert body["user"] == users[i % 3] and body["n"] == i  # a number stays a number
        assert body["tier"].startswith("t-") and body["items"][0] in ("a", "b")
        assert body["items"][1] == 2 and len(body["key"]) == 36
    assert len({json.loads(b.body or b"")["key"] for b in built if b.body}) == kinds[1]
    secrets = _requests(tmp_path).kinds
    assert all(k.fixed_headers == {"Authorization": "Bearer tok"} for k in secrets)


def test_random_rows_are_seeded(tmp_path: Path) -> None:
    endpoint = FULL.replace("data: {file: users.csv}", "data: {file: users.csv, order: random}")
    path = _write(tmp_path, endpoint)
    scenario = load_scenario(path).scenario
    ep = endpoint_plans(scenario, tmp_path)["api"]
    a, b = Requests(4, "api", ep, {"RQ_TOKEN": "t"}), Requests(4, "api", ep, {"RQ_TOKEN": "t"})
    one, two = [a.build(i).headers for i in range(60)], [b.build(i).headers for i in range(60)]
    assert one == two and len(set(one)) == 3
    assert one != [f"X-User: {u}\r\n" for u in ["alice", "bob", "carol"] * 20]


def test_a_load_generator_without_the_secret_says_its_name(tmp_path: Path) -> None:
    with pytest.raises(MissingSecret, match=r"traffic\.api\.headers\.Authorization: .*RQ_TOKEN"):
        _requests(tmp_path, environ={})


def test_an_endpoint_without_the_new_keys_sends_as_before(tmp_path: Path) -> None:
    text = HEAD + "    path: /p/{id}\n    rate: 5\n    params: {id: [1, 50]}\n"
    text += "    idempotency-key: true\n" + TAIL
    scenario = load_scenario_text(text).scenario
    ep = endpoint_plans(scenario)["api"]
    paths, requests = Paths(4, "api", ep), Requests(4, "api", ep, {})
    for i in range(50):
        key = f"Idempotency-Key: {idempotency_key(4, 'api', i)}\r\n"
        assert requests.build(i) == (0, paths.path(i), key, None)


def test_the_plan_carries_the_shape_and_rows_through_json(tmp_path: Path, token: str) -> None:
    path = _write(tmp_path, FULL)
    scenario = load_scenario(path).scenario
    endpoints = endpoint_plans(scenario, tmp_path)
    plan = LoadPlan("http://127.0.0.1:1", 4, 0.0, 3.0, 1.0, endpoints, "", "", "")
    text = plan.handoff()
    assert "RQ_TOKEN" in text and token not in text  # the name, never the value
    back = LoadPlan.read(_saved(tmp_path, text))
    assert back.endpoints["api"] == endpoints["api"]
    assert back.endpoints["api"].rows[0] == ("alice", "gold")


def _saved(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "plan.json"
    path.write_text(text)
    return path


def test_template_names_are_documented() -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "scenario.md").read_text()
    assert all(f"`{name}" in doc for name in BUILTINS)
