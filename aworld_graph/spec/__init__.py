"""YAML workflows (``workflows/*.yaml``) and node cards (``nodes/*.yaml``).

* :func:`load_workflow` – a workflow file -> :class:`~aworld_graph.swarm.Swarm`, validating
  everything at once (:class:`SpecError` lists every problem with file, line, field and fix);
* :func:`load_card` / :func:`validate_file` – one card, or any spec file's problems;
* :func:`swarm_to_yaml` / :func:`dump_workflow` – a swarm back to YAML (round trip, no secrets);
* :func:`json_schema` / :func:`write_schemas` – the JSON Schemas editors validate with.

Python callables (tools, scorers, predicates, function nodes) are named ``package.module:function``;
loading a workflow imports them, so it runs that code, like any plugin.
"""

from __future__ import annotations

from ._problems import Problem, SpecError
from .loader import load_card, load_workflow, validate_file
from .schema import json_schema, write_schemas
from .writer import card_to_dict, dump_workflow, swarm_to_dict, swarm_to_yaml

__all__ = [
    "Problem",
    "SpecError",
    "card_to_dict",
    "dump_workflow",
    "json_schema",
    "load_card",
    "load_workflow",
    "swarm_to_dict",
    "swarm_to_yaml",
    "validate_file",
    "write_schemas",
]
