"""The containers a ``docker`` build may leave, and how ``harness clean`` removes them.

A ``docker`` build's container is removed by its runner when the build stops,
and when ``harness run`` dies (the orphan guard stops the runner); only when
the runner was killed too is one left. ``harness clean`` then asks the Docker
Engine for every container the harness labelled (``harness.run``) and removes
those whose run is over (``CONTAINERS.remove_of_ended_runs``): a run it just
closed as crashed (``remove_of_run``), or one whose ``harness run`` (the
``harness.orchestrator`` label: pid, boot and start time) no longer lives on
this host, wherever its results folder is. Containers of runs still going, or
started from another host, are left alone. No Engine answering is not a
problem unless a crashed run it closed had docker builds.
"""

from __future__ import annotations

import json
import socket

from harness.core.errors import RunError
from harness.run.kinds.docker.engine import (
    LABEL_HOST,
    LABEL_ORCHESTRATOR,
    LABEL_RUN,
    connect,
    iter_labelled,
    remove_container,
    run_containers,
)
from harness.run.manifest import identity_alive


def remove_run_containers(run_id: str) -> list[str]:
    """Remove the containers of run ``run_id`` (its orchestrator is gone); their names.

    Raises ``RunError`` when no Docker Engine answers.
    """
    client = connect(timeout_s=10)
    try:
        found = run_containers(client, {LABEL_RUN: run_id})
        for container in found:
            remove_container(container)
        return [str(c.name) for c in found]
    finally:
        client.close()


def remove_leftover_containers() -> tuple[list[str], list[str]]:
    """Remove every harness-labelled container whose run is over, wherever its results are.

    Returns the containers removed (``container <name> (run <id>)``) and the problems.
    No Engine answering is not a problem here: there is nothing to remove then (the
    containers of a crashed run ``harness clean`` closes are looked for, and a missing
    Engine said, by ``remove_of_run``).
    """
    removed: list[str] = []
    problems: list[str] = []
    try:
        client = connect(timeout_s=10)
    except RunError:
        return removed, problems
    try:
        for container, labels in iter_labelled(client):
            run_id = labels.get(LABEL_RUN, "?")
            if container_run_alive(labels) is not None:
                continue
            try:
                remove_container(container)
            except Exception as exc:  # the Engine refused (a container being removed...)
                problems.append(f"{container.name} (run {run_id}): {exc}")
                continue
            removed.append(f"container {container.name} (run {run_id})")
    except Exception as exc:  # the Engine went away while listing
        problems.append(f"listing containers: {type(exc).__name__}: {exc}")
    finally:
        client.close()
    return removed, problems


def container_run_alive(labels: dict[str, str]) -> str | None:
    """Why a labelled container's run may still be going; ``None`` when it is over.

    Over: its ``harness run`` (``harness.orchestrator``: pid, boot and start time) is
    gone from this host. A container started from another host, or without that label,
    is left alone.
    """
    host = labels.get(LABEL_HOST)
    if host != socket.gethostname():
        return f"started from another host ({host})"
    try:
        identity = json.loads(labels[LABEL_ORCHESTRATOR])
    except (KeyError, ValueError):
        return "its labels do not name its orchestrator"
    if not isinstance(identity, dict):
        return "its labels do not name its orchestrator"
    return "its run is still going" if identity_alive(identity) else None


class Containers:
    """The ``docker`` kind's ``Leftovers``: containers on the Docker Engine."""

    noun = "containers"

    def remove_of_run(self, run_id: str) -> list[str]:
        """Through the Engine: the run's processes are gone, its containers may not be."""
        try:
            removed = remove_run_containers(run_id)
        except RunError as exc:
            raise RunError(f"the containers of its docker builds were not removed: {exc}") from None
        return [f"removed container(s) {', '.join(removed)}"] if removed else []

    def remove_of_ended_runs(self) -> tuple[list[str], list[str]]:
        return remove_leftover_containers()


CONTAINERS = Containers()
